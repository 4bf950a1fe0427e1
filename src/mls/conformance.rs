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

    /// A KeyPackage mail of `email` valid for `seconds`.
    pub(crate) fn key_package_lasting(
        &self,
        email: &str,
        seconds: u64,
    ) -> Result<Vec<u8>, MlsError> {
        let bytes = self.new_key_package(email, false, Some(seconds), super::CIPHERSUITE)?;
        self.key_package_mail(email, &bytes)
    }

    /// A KeyPackage mail of `email` for cipher `suite` (one with an Ed25519 signature,
    /// so that the identity's key signs it), which our groups do not use.
    pub(crate) fn key_package_of_suite(
        &self,
        email: &str,
        suite: Ciphersuite,
    ) -> Result<Vec<u8>, MlsError> {
        let bytes = self.new_key_package(email, false, None, suite)?;
        self.key_package_mail(email, &bytes)
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
        // openmls_basic_credential and openmls show these private keys only under
        // their test-utils features; the serde forms (the ones openmls stores)
        // carry them.
        let stored = serde_json::to_value(&identity.keys).map_err(super::op)?;
        let secret = stored_key(&stored["private"])?;
        Ok(PortableMember {
            signature: (
                zeroize::Zeroizing::new(secret),
                identity.keys.public().to_vec(),
            ),
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
