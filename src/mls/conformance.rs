//! What a misconfigured or lenient peer writes, for the conformance corpus's cases
//! (`crate::corpus`): handshake messages in clear, Welcomes without the ratchet tree,
//! KeyPackages valid for a year or of another cipher suite; and a member's keys in the
//! portable form the corpus gives other implementations ([`PortableMember`]).
//! Crate-internal: nothing a caller can send with.
//! Every refusal these reach is tested against real peers too (mls-rs, in
//! `tests/mls/mls_rs_peer.rs`); here they give the corpus its cases without mls-rs.

use openmls::prelude::*;
use openmls_traits::storage::StorageProvider as _;

use super::{parse_group_id, Mls, MlsError};

impl Mls {
    /// From now on, this member's handshake messages in `group` go out as
    /// PublicMessages when `plaintext_handshake`, and its Welcomes without the
    /// ratchet tree when `!ratchet_tree`.
    pub(crate) fn misconfigure(
        &self,
        group: &str,
        plaintext_handshake: bool,
        ratchet_tree: bool,
    ) -> Result<(), MlsError> {
        let id = parse_group_id(group)?;
        let mut config = MlsGroupJoinConfig::builder()
            .max_past_epochs(self.config.past_epochs)
            .use_ratchet_tree_extension(ratchet_tree);
        if plaintext_handshake {
            config = config.wire_format_policy(PURE_PLAINTEXT_WIRE_FORMAT_POLICY);
        }
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        g.set_configuration(self.state.provider.storage(), &config.build())
            .map_err(|e| MlsError::State(format!("{e:?}")))?;
        tx.commit()?;
        self.cache_put(g);
        Ok(())
    }

    /// A KeyPackage mail of `email` for cipher `suite` (ours, or another with an
    /// Ed25519 signature, so that the identity's key signs it), valid from
    /// `not_before` to `not_after` (Unix seconds) whatever the clock says: the
    /// corpus writes the same bytes whenever it runs.
    pub(crate) fn key_package_valid(
        &self,
        email: &str,
        (not_before, not_after): (u64, u64),
        suite: Ciphersuite,
    ) -> Result<Vec<u8>, MlsError> {
        let lifetime = Lifetime::init(not_before, not_after);
        let bytes = self.new_key_package(email, false, Some(lifetime), suite)?;
        self.key_package_mail(email, &bytes)
    }

    /// [`Mls::create_group`], its creator's leaf valid from `not_before` to
    /// `not_after` whatever the clock says (see [`Mls::key_package_valid`]).
    pub(crate) fn create_group_valid(
        &self,
        email: &str,
        (not_before, not_after): (u64, u64),
    ) -> Result<String, MlsError> {
        self.create_group_with(email, Some(Lifetime::init(not_before, not_after)))
    }

    /// [`Mls::add`] without the cap on how long an added KeyPackage's lifetime spans.
    /// The corpus's members are added with KeyPackages of a fixed date (the same bytes
    /// from the same seed) that last a century, because openmls judges an added
    /// KeyPackage by the system clock, where the Commit is made and wherever it is
    /// processed, so a corpus whose KeyPackages lasted 84 days would stop working
    /// 84 days after the date they carry.
    pub(crate) fn add_lasting(
        &self,
        group: &str,
        key_package_mails: &[Vec<u8>],
        auth: &dyn super::Authenticator,
    ) -> Result<super::Added, MlsError> {
        self.add_mails(
            group,
            key_package_mails,
            auth,
            super::membership::LifetimeCap::None,
        )
    }
}

/// What another MLS implementation needs to stand in for one of our members, as the
/// corpus writes it (`crate::corpus::MlsJoin`): the signature key and a KeyPackage's
/// private keys. Crate-internal: the corpus's parties only.
pub(crate) struct PortableMember {
    /// The Ed25519 secret key (32 bytes) and public key.
    pub(crate) signature: (zeroize::Zeroizing<Vec<u8>>, Vec<u8>),
    /// The KeyPackage, an MLSMessage.
    pub(crate) key_package: Vec<u8>,
    /// The private keys of its `init_key` and of its leaf's `encryption_key`.
    pub(crate) init_private_key: zeroize::Zeroizing<Vec<u8>>,
    pub(crate) encryption_private_key: zeroize::Zeroizing<Vec<u8>>,
}

impl Mls {
    /// The keys behind `key_package_mail`, a KeyPackage mail of `email` this member
    /// made and has not yet been invited with (after the join, openmls deletes its
    /// private part).
    pub(crate) fn portable_member(
        &self,
        email: &str,
        key_package_mail: &[u8],
    ) -> Result<PortableMember, MlsError> {
        let mail = super::wire::read_mail(key_package_mail, &crate::Limits::default())?;
        let key_package = mail.message.to_vec();
        let MlsMessageBodyIn::KeyPackage(kp) = super::wire::decode(&key_package)?.extract() else {
            return Err(MlsError::Usage("not a KeyPackage mail".into()));
        };
        let crypto = self.state.provider.crypto();
        // Our own, just made: verified by its signature as any other, and the
        // lifetime is current.
        let kp = kp
            .validate(crypto, ProtocolVersion::Mls10)
            .map_err(super::op)?;
        let hash = kp.hash_ref(crypto).map_err(super::op)?;
        let bundle: KeyPackageBundle = self
            .state
            .provider
            .storage()
            .key_package(&hash)
            .map_err(|e| MlsError::State(format!("{e:?}")))?
            .ok_or_else(|| MlsError::Usage("a KeyPackage this member no longer holds".into()))?;
        let identity = self.signer(email)?;
        // The signature key as the signer derived it; otherwise (and for the
        // encryption key) the serde forms openmls stores carry them:
        // openmls_basic_credential and openmls show them only under their test-utils
        // features.
        let secret = match identity.keys.ed25519_seed() {
            Some(seed) => seed,
            None => zeroize::Zeroizing::new(stored_key(
                &serde_json::to_value(identity.keys.pair()).map_err(super::op)?["private"],
            )?),
        };
        Ok(PortableMember {
            signature: (secret, identity.keys.pair().public().to_vec()),
            key_package,
            init_private_key: zeroize::Zeroizing::new(bundle.init_private_key().to_vec()),
            encryption_private_key: zeroize::Zeroizing::new(stored_key(
                &serde_json::to_value(&bundle).map_err(super::op)?["private_encryption_key"],
            )?),
        })
    }
}

/// A 32-byte private key in the serde form openmls stores it in: a byte array,
/// possibly wrapped in single-field objects (`{"vec": [...]}`).
fn stored_key(v: &serde_json::Value) -> Result<Vec<u8>, MlsError> {
    match v {
        serde_json::Value::Array(_) => serde_json::from_value::<Vec<u8>>(v.clone())
            .ok()
            .filter(|k| k.len() == 32),
        serde_json::Value::Object(m) if m.len() == 1 => {
            return m.values().next().map_or_else(
                || Err(MlsError::State("an empty stored key".into())),
                stored_key,
            )
        }
        _ => None,
    }
    .ok_or_else(|| MlsError::State("a stored private key not in the form expected".into()))
}

/// The MLS state file at `path` as the conformance corpus carries it: a compacted
/// copy (`VACUUM INTO`) in which the times openmls stamped by the system clock read
/// `at` (Unix seconds) instead: when each epoch's message secrets were kept (a
/// `MessageSecrets`' `added_at`, read only by a deletion policy by age, which ours is
/// not: `MlsConfig::past_epochs` keeps epochs by count) and when each of its storage
/// migrations ran. Everything else is the state as it was, so the same group state is
/// the same bytes in every run (issue #21). The file itself is not touched.
pub(crate) fn state_as_of(path: &std::path::Path, at: i64) -> Result<Vec<u8>, MlsError> {
    let dir = tempfile::tempdir().map_err(|e| MlsError::State(e.to_string()))?;
    let (copy, out) = (dir.path().join("copy.db"), dir.path().join("out.db"));
    let text = |p: &std::path::Path| p.to_string_lossy().into_owned();
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?
        .execute("VACUUM INTO ?1", [text(&copy)])?;
    let when = time::OffsetDateTime::from_unix_timestamp(at)
        .map_err(|e| MlsError::Usage(format!("time {at}: {e}")))?;
    let rfc3339 = when
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| MlsError::Usage(format!("time {at}: {e}")))?;
    let mut conn = rusqlite::Connection::open(&copy)?;
    let tx = conn.transaction()?;
    tx.execute(
        "UPDATE openmls_sqlite_storage_migrations SET applied_on = ?1",
        [&rfc3339],
    )?;
    let rows: Vec<(Vec<u8>, Vec<u8>)> = tx
        .prepare("SELECT group_id, group_data FROM openmls_group_data WHERE data_type = 'message_secrets'")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (group, data) in rows {
        let mut value: serde_json::Value = serde_json::from_slice(&data)
            .map_err(|e| MlsError::State(format!("openmls' message secrets: {e}")))?;
        set_added_at(&mut value, at);
        let data = serde_json::to_vec(&value)
            .map_err(|e| MlsError::State(format!("openmls' message secrets: {e}")))?;
        tx.execute(
            "UPDATE openmls_group_data SET group_data = ?2 WHERE group_id = ?1 AND data_type = 'message_secrets'",
            rusqlite::params![group, data],
        )?;
    }
    tx.commit()?;
    conn.execute("VACUUM INTO ?1", [text(&out)])?;
    drop(conn);
    std::fs::read(&out).map_err(|e| MlsError::State(e.to_string()))
}

/// Sets every `added_at` below `value` that holds a time (serde's `SystemTime`) to `at`.
fn set_added_at(value: &mut serde_json::Value, at: i64) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "added_at" && v.get("secs_since_epoch").is_some() {
                    *v = serde_json::json!({ "secs_since_epoch": at, "nanos_since_epoch": 0 });
                } else {
                    set_added_at(v, at);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| set_added_at(v, at)),
        _ => {}
    }
}
