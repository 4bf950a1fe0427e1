//! The authentication service (RFC 9420 section 5.3.1): what binds a leaf's
//! credential to an address.
//!
//! A basic credential only *names* an address; anyone can write any name into one.
//! Here a leaf counts as `alice@example` only when its MLS signature key is certified
//! by a key this store already trusts for `alice@example` as a mail signer: her S/MIME
//! certificate (pinned, or chaining to a trust anchor on a valid path, not revoked) or
//! her OpenPGP certificate (held in the store). So an MLS identity is exactly as
//! strong as the same address's mail identity, with no second PKI to run.
//!
//! The certification travels with the leaf, as a leaf-node extension of a private-use
//! type ([`BINDING_EXTENSION`]) that the leaf's capabilities list, so every member
//! can check every leaf from its own store: in KeyPackages, in a Welcome's tree, in
//! Add and Update proposals, in a Commit's update path and in an external joiner's
//! leaf. Its content is one format byte (1: CMS SignedData, 2: OpenPGP signature),
//! then a detached signature over [`statement`].

use openmls::prelude::{Capabilities, Extension, ExtensionType, Extensions, LeafNode};
use openmls::prelude::{CredentialType, UnknownExtension};

use super::MlsError;
use crate::keystore::KeyStore;
use crate::seal::OpenPolicy;

/// The leaf-node extension type of the credential binding (private use, RFC 9420
/// section 17.3).
pub const BINDING_EXTENSION: u16 = 0xF2A2;

/// The largest binding accepted (a signature with a short certificate chain).
const MAX_BINDING: usize = 32 * 1024;

/// A certification of an MLS signature key by a mail key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Binding {
    /// A detached CMS SignedData (DER) by the address's S/MIME key.
    Smime(Vec<u8>),
    /// A detached binary OpenPGP signature by the address's OpenPGP key.
    OpenPgp(Vec<u8>),
}

impl Binding {
    /// The extension data: the format byte, then the signature.
    pub fn to_bytes(&self) -> Vec<u8> {
        let (tag, body) = match self {
            Binding::Smime(b) => (1u8, b),
            Binding::OpenPgp(b) => (2u8, b),
        };
        let mut out = Vec::with_capacity(1 + body.len());
        out.push(tag);
        out.extend_from_slice(body);
        out
    }

    /// Reads [`Binding::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Binding, MlsError> {
        if bytes.len() > MAX_BINDING {
            return Err(MlsError::Unbound(
                "the credential binding is too large".into(),
            ));
        }
        match bytes.split_first() {
            Some((1, body)) if !body.is_empty() => Ok(Binding::Smime(body.to_vec())),
            Some((2, body)) if !body.is_empty() => Ok(Binding::OpenPgp(body.to_vec())),
            _ => Err(MlsError::Unbound(
                "the credential binding is of an unknown format".into(),
            )),
        }
    }
}

/// What a mail key signs to certify `signature_key` (Ed25519, the suite's scheme) as
/// the MLS key of `address`. Text, so that a human reading a dump sees what it says;
/// the label keeps it from meaning anything in another protocol.
pub fn statement(address: &str, signature_key: &[u8]) -> Vec<u8> {
    format!(
        "mailseal MLS credential binding v1\naddress: {}\nsignature-scheme: ed25519\nsignature-key: {}\n",
        address.to_ascii_lowercase(),
        crate::keystore::hex(signature_key)
    )
    .into_bytes()
}

/// The authentication service: certifies our own MLS keys and checks everyone's.
pub trait Authenticator {
    /// A certification of `statement` (see [`statement`]) by our mail key for
    /// `address`.
    fn certify(&self, address: &str, statement: &[u8]) -> Result<Binding, MlsError>;

    /// Whether the leaf signature key `signature_key` is `address`'s: `binding` (the
    /// leaf's certification, if it carries one) certifies [`statement`] by a key this
    /// party trusts for `address`, or the key is pinned; the reason when not.
    fn verify(
        &self,
        address: &str,
        signature_key: &[u8],
        binding: Option<&Binding>,
    ) -> Result<(), String>;

    /// Whether `binding` was verified lately as certifying `signature_key` for
    /// `address` (a cache of [`Authenticator::verify`]'s successes, such as
    /// [`VerifiedBindings`]): the leaf is then accepted without looking further. None
    /// by default.
    fn vouched(&self, _address: &str, _signature_key: &[u8], _binding: &Binding) -> bool {
        false
    }
}

/// MLS signature keys pinned per address, configured locally: for members whose
/// implementation cannot carry a binding (another MLS stack), or a fixed test group.
/// It certifies nothing of ours.
#[derive(Clone, Debug, Default)]
pub struct PinnedKeys(Vec<(String, Vec<u8>)>);

impl PinnedKeys {
    /// Reads lines `ADDRESS HEX-KEY` (blank lines and `#` comments skipped), as
    /// `mailseal mls members --json` lists members and keys.
    pub fn parse(text: &str) -> Result<PinnedKeys, MlsError> {
        let mut out = PinnedKeys::default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (address, key) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| MlsError::Usage(format!("{line}: not `ADDRESS KEY`")))?;
            let key = crate::hex::decode(key.trim())
                .ok_or_else(|| MlsError::Usage(format!("{line}: the key is not hex")))?;
            out = out.pin(address, &key);
        }
        Ok(out)
    }

    /// Pins `signature_key` as `address`'s.
    pub fn pin(mut self, address: &str, signature_key: &[u8]) -> Self {
        self.0
            .push((address.trim().to_ascii_lowercase(), signature_key.to_vec()));
        self
    }
}

impl Authenticator for PinnedKeys {
    fn certify(&self, address: &str, _: &[u8]) -> Result<Binding, MlsError> {
        Err(MlsError::Usage(format!(
            "pinned MLS keys certify nothing: {address}'s key needs a mail key to certify it"
        )))
    }

    fn verify(
        &self,
        address: &str,
        signature_key: &[u8],
        _: Option<&Binding>,
    ) -> Result<(), String> {
        if self
            .0
            .iter()
            .any(|(a, k)| a == address && k.as_slice() == signature_key)
        {
            Ok(())
        } else {
            Err("its signature key is not pinned for it".into())
        }
    }
}

/// The authentication service over a key store: our S/MIME key (else OpenPGP key)
/// certifies; a peer's is checked as its mail signatures are, under `policy` (its
/// validation time, its CRL requirement).
pub struct StoreAuthenticator<'s> {
    store: &'s dyn KeyStore,
    policy: std::borrow::Cow<'s, OpenPolicy>,
    cache: Option<&'s VerifiedBindings>,
    pinned: Option<&'s PinnedKeys>,
}

/// Bindings verified recently, kept by a long-lived owner (a [`crate::Receiver`])
/// so that a group's every application message does not re-verify its sender's
/// certification: an entry counts for [`VerifiedBindings::TTL`] of process time, so
/// a key removed takes effect within it. The entry keeps the signature work only:
/// an S/MIME certification's revocation is decided again at every hit, on the path
/// validated when it was verified, against the CRLs the store holds then, so a CRL
/// imported after caching (of the signer's issuer or of any CA above it) bites on the
/// next message.
///
/// An entry is found by the address and MLS key it certifies, and holds the very
/// binding that was verified: a leaf with the same key but another binding (one an
/// impostor's certificate signed, for a stolen MLS key) does not match it and is
/// verified afresh, and refused. The binding is compared byte for byte rather than
/// hashed, because a hit is every application message's path and hashing a
/// certification of a kilobyte or so cost more than the rest of the lookup. The
/// binding statement is not part of the entry, since the address and key determine
/// it.
#[derive(Default)]
pub struct VerifiedBindings(std::cell::RefCell<Verified>);

#[derive(Default)]
struct Verified {
    /// (address, key) as [`VerifiedBindings::slot`] writes them: the binding, when,
    /// and the certification's revocation evidence.
    entries: std::collections::HashMap<Vec<u8>, (Binding, std::time::Instant, Evidence)>,
    /// The bytes the entries' bindings hold, bounded by [`VerifiedBindings::MAX_BYTES`].
    bytes: usize,
}

impl VerifiedBindings {
    /// How long a verified binding is trusted without verifying it again.
    pub const TTL: std::time::Duration = std::time::Duration::from_secs(300);
    /// Entries kept at most (the oldest go first).
    const MAX: usize = 4096;
    /// Binding bytes kept at most: a binding may be up to 32 KiB, and a peer with a
    /// trusted certificate could have many verified.
    const MAX_BYTES: usize = 4 << 20;

    /// Where the entry of `address` and `signature_key` sits: both, length-prefixed.
    fn slot(address: &str, signature_key: &[u8]) -> Vec<u8> {
        let mut slot = Vec::with_capacity(16 + address.len() + signature_key.len());
        for part in [address.as_bytes(), signature_key] {
            slot.extend_from_slice(&(part.len() as u64).to_be_bytes());
            slot.extend_from_slice(part);
        }
        slot
    }

    #[cfg(test)]
    fn fresh(&self, address: &str, signature_key: &[u8], binding: &Binding) -> bool {
        self.evidence(address, signature_key, binding).is_some()
    }

    /// The revocation evidence of a fresh entry for this very binding.
    fn evidence(&self, address: &str, signature_key: &[u8], binding: &Binding) -> Option<Evidence> {
        self.0
            .borrow()
            .entries
            .get(&Self::slot(address, signature_key))
            .filter(|(b, t, _)| b == binding && t.elapsed() < Self::TTL)
            .map(|(_, _, e)| e.clone())
    }

    /// Forgets the entry of `address` and `signature_key` (its certifier was revoked).
    fn forget(&self, address: &str, signature_key: &[u8]) {
        let mut v = self.0.borrow_mut();
        if let Some((old, _, _)) = v.entries.remove(&Self::slot(address, signature_key)) {
            v.bytes -= binding_len(&old);
        }
    }

    #[cfg(test)]
    fn insert(&self, address: &str, signature_key: &[u8], binding: &Binding) {
        self.insert_with(address, signature_key, binding, Evidence::default());
    }

    fn insert_with(
        &self,
        address: &str,
        signature_key: &[u8],
        binding: &Binding,
        evidence: Evidence,
    ) {
        let size = binding_len(binding);
        let mut v = self.0.borrow_mut();
        if v.entries.len() >= Self::MAX || v.bytes + size > Self::MAX_BYTES {
            v.entries.retain(|_, (_, t, _)| t.elapsed() < Self::TTL);
            v.bytes = v.entries.values().map(|(b, _, _)| binding_len(b)).sum();
            if v.entries.len() >= Self::MAX || v.bytes + size > Self::MAX_BYTES {
                v.entries.clear();
                v.bytes = 0;
            }
        }
        let entry = (binding.clone(), std::time::Instant::now(), evidence);
        if let Some((old, _, _)) = v.entries.insert(Self::slot(address, signature_key), entry) {
            v.bytes -= binding_len(&old);
        }
        v.bytes += size;
    }
}

/// What an S/MIME certification's revocation was decided on (empty for OpenPGP
/// certifications and self-issued pins), shared by the cache entry.
type Evidence = std::rc::Rc<Vec<crate::identity::x509::Edge>>;

fn binding_len(b: &Binding) -> usize {
    match b {
        Binding::Smime(d) | Binding::OpenPgp(d) => d.len(),
    }
}

impl<'s> StoreAuthenticator<'s> {
    /// Checks at the time of receipt under the default policy, and certifies now.
    pub fn new(store: &'s dyn KeyStore) -> Self {
        StoreAuthenticator {
            store,
            policy: std::borrow::Cow::Owned(OpenPolicy::default()),
            cache: None,
            pinned: None,
        }
    }

    /// Checks under `policy` (validation time, required CRLs), as the receiver's mail;
    /// certifies at its validation time (now, unless it fixes one).
    pub fn with_policy(store: &'s dyn KeyStore, policy: &'s OpenPolicy) -> Self {
        StoreAuthenticator {
            store,
            policy: std::borrow::Cow::Borrowed(policy),
            cache: None,
            pinned: None,
        }
    }

    /// Also accepts the MLS keys `pinned` pins (members that carry no binding).
    pub fn with_pinned(mut self, pinned: &'s PinnedKeys) -> Self {
        self.pinned = Some(pinned);
        self
    }

    /// Remembers what verified in `cache` (only a [`crate::Receiver`] with a fixed
    /// policy should share one across messages).
    pub fn cached(mut self, cache: &'s VerifiedBindings) -> Self {
        self.cache = Some(cache);
        self
    }
}

impl StoreAuthenticator<'_> {
    /// The certification cached with `evidence` is not revoked by a CRL the store
    /// holds now (see [`VerifiedBindings`]); a store that cannot be read counts as
    /// revoked, and the binding is verified afresh.
    fn still_unrevoked(&self, evidence: &[crate::identity::x509::Edge]) -> bool {
        if evidence.is_empty() {
            return true;
        }
        let Ok(ders) = self.store.crls() else {
            return false;
        };
        let crls = crate::smime::decode_crls(ders);
        let revocation = crate::smime::Revocation {
            crls: &crls,
            require: self.policy.require_crl,
        };
        crate::identity::x509::recheck(evidence, self.policy.validation_time(), &revocation).is_ok()
    }
}

impl Authenticator for StoreAuthenticator<'_> {
    fn certify(&self, address: &str, statement: &[u8]) -> Result<Binding, MlsError> {
        // Signed at the policy's validation time: now, unless the caller fixed one.
        let at = self.policy.validation_time();
        let smime = crate::smime::Smime::new(self.store).certify(address, statement, at);
        let smime_err = match smime {
            Ok(der) => return Ok(Binding::Smime(der)),
            Err(e) => e,
        };
        match crate::openpgp::OpenPgp::new(self.store).certify(address, statement, at) {
            Ok(sig) => Ok(Binding::OpenPgp(sig)),
            Err(_) => Err(MlsError::Usage(format!(
                "no S/MIME or OpenPGP signing key of {address} in the store to certify its MLS key ({smime_err}): generate or import one first"
            ))),
        }
    }

    fn verify(
        &self,
        address: &str,
        signature_key: &[u8],
        binding: Option<&Binding>,
    ) -> Result<(), String> {
        if let Some(p) = self.pinned {
            if p.verify(address, signature_key, binding).is_ok() {
                return Ok(());
            }
        }
        let binding = binding.ok_or("the leaf carries no credential binding")?;
        if self.vouched(address, signature_key, binding) {
            return Ok(());
        }
        let statement = &statement(address, signature_key)[..];
        let evidence = match binding {
            Binding::Smime(der) => crate::smime::Smime::new(self.store)
                .verify_certification(address, der, statement, &self.policy)
                .map_err(|e| e.to_string())?,
            Binding::OpenPgp(sig) => {
                crate::openpgp::OpenPgp::new(self.store)
                    .verify_certification(address, sig, statement, &self.policy)
                    .map_err(|e| e.to_string())?;
                Vec::new()
            }
        };
        if let Some(c) = self.cache {
            c.insert_with(address, signature_key, binding, std::rc::Rc::new(evidence));
        }
        Ok(())
    }

    fn vouched(&self, address: &str, signature_key: &[u8], binding: &Binding) -> bool {
        let Some(cache) = self.cache else {
            return false;
        };
        let Some(evidence) = cache.evidence(address, signature_key, binding) else {
            return false;
        };
        // The signature work is cached; the revocation verdict is not.
        if self.still_unrevoked(&evidence) {
            true
        } else {
            cache.forget(address, signature_key);
            false
        }
    }
}

/// The capabilities every leaf of ours lists: the binding extension (RFC 9420
/// section 13.4: a leaf lists what it carries), and last resort when asked.
pub(super) fn capabilities(last_resort: bool) -> Capabilities {
    let mut extensions = vec![ExtensionType::Unknown(BINDING_EXTENSION)];
    if last_resort {
        extensions.push(ExtensionType::LastResort);
    }
    Capabilities::new(
        None,
        None,
        Some(&extensions),
        None,
        Some(&[CredentialType::Basic]),
    )
}

/// The leaf-node extensions carrying `binding`.
pub(super) fn leaf_extensions(binding: &[u8]) -> Result<Extensions<LeafNode>, MlsError> {
    Extensions::single(Extension::Unknown(
        BINDING_EXTENSION,
        UnknownExtension(binding.to_vec()),
    ))
    .map_err(super::op)
}

/// The binding a leaf carries, if any (one that does not read is refused).
pub(super) fn binding_of(leaf: &LeafNode) -> Result<Option<Binding>, MlsError> {
    leaf.extensions()
        .unknown(BINDING_EXTENSION)
        .map(|ext| Binding::from_bytes(&ext.0))
        .transpose()
}

impl super::Mls {
    /// The address `leaf` authenticates as: its credential's, once its binding
    /// verifies under `auth`. Refused ([`MlsError::Unbound`]) otherwise.
    pub(super) fn check_leaf(
        &self,
        leaf: &LeafNode,
        auth: &dyn Authenticator,
    ) -> Result<String, MlsError> {
        let identity = super::identity::identity_of(leaf.credential())?;
        let key = leaf.signature_key().as_slice();
        let binding = binding_of(leaf);
        // This very binding verified lately: what the checks below would conclude
        // (a pinned key, or the same cache entry), without the pinned-key lookup in
        // the state.
        if let Ok(Some(b)) = &binding {
            if auth.vouched(&identity, key, b) {
                return Ok(identity);
            }
        }
        if self.is_pinned(&identity, key)? {
            return Ok(identity);
        }
        let binding = binding.map_err(|e| {
            MlsError::Unbound(format!(
                "{}: {}",
                crate::error::quoted(&identity),
                unbound_reason(e)
            ))
        })?;
        auth.verify(&identity, key, binding.as_ref())
            .map_err(|reason| {
                MlsError::Unbound(format!("{}: {reason}", crate::error::quoted(&identity)))
            })?;
        Ok(identity)
    }

    /// Every leaf of `group` but ours authenticates.
    pub(super) fn check_tree(
        &self,
        group: &openmls::prelude::MlsGroup,
        auth: &dyn Authenticator,
    ) -> Result<(), MlsError> {
        let own = group.own_leaf_index();
        for m in group.members() {
            if m.index == own {
                continue;
            }
            let leaf = group
                .public_group()
                .leaf(m.index)
                .ok_or_else(|| MlsError::Invalid("a member without a leaf".into()))?;
            self.check_leaf(leaf, auth)?;
        }
        Ok(())
    }

    /// Every leaf a Commit brings in authenticates: added KeyPackages, Update
    /// proposals and the committer's new leaf (an external joiner's too).
    pub(super) fn check_commit(
        &self,
        staged: &openmls::prelude::StagedCommit,
        auth: &dyn Authenticator,
    ) -> Result<(), MlsError> {
        for add in staged.add_proposals() {
            self.check_leaf(add.add_proposal().key_package().leaf_node(), auth)?;
        }
        for update in staged.update_proposals() {
            self.check_leaf(update.update_proposal().leaf_node(), auth)?;
        }
        if let Some(leaf) = staged.update_path_leaf_node() {
            self.check_leaf(leaf, auth)?;
        }
        Ok(())
    }
}

fn unbound_reason(e: MlsError) -> String {
    match e {
        MlsError::Unbound(r) => r,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_bytes_round_trip_and_fail_closed() {
        for b in [
            Binding::Smime(vec![0x30, 1, 2]),
            Binding::OpenPgp(vec![0xc2, 9]),
        ] {
            assert_eq!(Binding::from_bytes(&b.to_bytes()).unwrap(), b);
        }
        for bad in [&[][..], &[1], &[2], &[3, 1, 2], &[0, 1]] {
            assert!(
                matches!(Binding::from_bytes(bad), Err(MlsError::Unbound(_))),
                "{bad:?}"
            );
        }
        let mut huge = vec![1u8];
        huge.resize(MAX_BINDING + 1, 0);
        assert!(matches!(
            Binding::from_bytes(&huge),
            Err(MlsError::Unbound(_))
        ));
    }

    #[test]
    fn the_statement_names_the_address_and_the_key() {
        let s = statement("Alice@Example.org", &[0xab, 0x01]);
        assert_eq!(
            s,
            b"mailseal MLS credential binding v1\naddress: alice@example.org\nsignature-scheme: ed25519\nsignature-key: ab01\n"
        );
    }

    #[test]
    fn a_verified_binding_vouches_for_its_address_key_and_binding_only() {
        let cache = VerifiedBindings::default();
        let genuine = Binding::Smime(vec![0x30, 1]);
        assert!(!cache.fresh("alice@a.example", &[1, 2, 3], &genuine));
        cache.insert("alice@a.example", &[1, 2, 3], &genuine);
        assert!(cache.fresh("alice@a.example", &[1, 2, 3], &genuine));
        let impostor = Binding::Smime(vec![0x30, 2]);
        for (address, signature_key, binding) in [
            ("alice@a.example", &[1u8, 2, 4][..], &genuine),
            ("alice@a.example", &[1, 2], &genuine),
            ("mallory@a.example", &[1, 2, 3], &genuine),
            // The same key under another binding (a stolen MLS key, certified by an
            // impostor's certificate) is verified afresh.
            ("alice@a.example", &[1, 2, 3], &impostor),
            (
                "alice@a.example",
                &[1, 2, 3],
                &Binding::OpenPgp(vec![0x30, 1]),
            ),
            // The parts are length-prefixed: no shift of bytes between them matches.
            ("alice@a.exampl", &[b'e', 1, 2, 3], &genuine),
        ] {
            assert!(
                !cache.fresh(address, signature_key, binding),
                "{address} {signature_key:?} {binding:?}"
            );
        }
    }

    #[test]
    fn a_renewed_binding_replaces_the_one_before_and_the_bytes_are_bounded() {
        let cache = VerifiedBindings::default();
        let old = Binding::Smime(vec![0x30, 1]);
        let new = Binding::Smime(vec![0x30, 2, 3]);
        cache.insert("alice@a.example", &[1], &old);
        cache.insert("alice@a.example", &[1], &new);
        assert!(cache.fresh("alice@a.example", &[1], &new));
        assert!(!cache.fresh("alice@a.example", &[1], &old));
        assert_eq!(cache.0.borrow().bytes, 3);
        // Bindings of the largest size, more than the budget holds: the bytes kept
        // stay within it, and the latest entry is always there.
        let big = |i: u8| Binding::Smime(vec![i; MAX_BINDING]);
        let n = VerifiedBindings::MAX_BYTES / MAX_BINDING + 3;
        for i in 0..n {
            cache.insert(&format!("a{i}@a.example"), &[1], &big(i as u8));
            let v = cache.0.borrow();
            assert!(v.bytes <= VerifiedBindings::MAX_BYTES, "{}", v.bytes);
            assert_eq!(
                v.bytes,
                v.entries
                    .values()
                    .map(|(b, _, _)| binding_len(b))
                    .sum::<usize>()
            );
            drop(v);
            assert!(cache.fresh(&format!("a{i}@a.example"), &[1], &big(i as u8)));
        }
        assert!(cache.0.borrow().entries.len() < n);
    }

    #[test]
    fn only_a_cache_of_verifications_vouches() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::keystore::SqliteStore::open(&dir.path().join("keys.db"), None).unwrap();
        let cache = VerifiedBindings::default();
        let b = Binding::Smime(vec![0x30, 1]);
        assert!(!StoreAuthenticator::new(&store).vouched("alice@a.example", &[1], &b));
        let cached = StoreAuthenticator::new(&store).cached(&cache);
        assert!(!cached.vouched("alice@a.example", &[1], &b));
        cache.insert("alice@a.example", &[1], &b);
        assert!(cached.vouched("alice@a.example", &[1], &b));
        assert!(!cached.vouched("alice@a.example", &[2], &b));
        assert!(!cached.vouched("bob@a.example", &[1], &b));
        assert!(!cached.vouched("alice@a.example", &[1], &Binding::Smime(vec![0x30, 2])));
        // A cache entry is no verification: a leaf without a binding is still refused.
        assert!(cached.verify("alice@a.example", &[1], None).is_err());
        assert!(!PinnedKeys::default().pin("alice@a.example", &[1]).vouched(
            "alice@a.example",
            &[1],
            &b
        ));
    }

    #[test]
    fn pinned_keys_accept_only_the_pinned_pair() {
        let pins = PinnedKeys::parse("# members\nalice@a.example 0a0B\n\n").unwrap();
        assert!(pins.verify("alice@a.example", &[0x0a, 0x0b], None).is_ok());
        assert!(pins.verify("alice@a.example", &[0x0a, 0x0c], None).is_err());
        assert!(pins.verify("bob@a.example", &[0x0a, 0x0b], None).is_err());
        assert!(pins.certify("alice@a.example", b"x").is_err());
        for bad in [
            "alice@a.example",
            "alice@a.example 0a0",
            "alice@a.example zz",
        ] {
            assert!(PinnedKeys::parse(bad).is_err(), "{bad}");
        }
    }
}
