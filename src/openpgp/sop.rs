//! The Stateless OpenPGP operations (draft-dkg-openpgp-stateless-cli) on bytes, for
//! `mailseal sop`. Keys and certificates come in with each call; decryption and
//! verification go through the same [`OpenPgp`] policy layer as mail (Sequoia's
//! standard policy, the RFC 9580 conformance check, integrity always required), over
//! an in-memory store, so interoperability suites that drive SOP measure that layer.

use std::io::Write;
use std::time::SystemTime;

use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::crypto::{KeyPair, Password, SessionKey};
use openpgp::packet::UserID;
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::stream::{Encryptor, LiteralWriter, Message, Recipient, Signer};
use openpgp::serialize::{Serialize, SerializeInto};
use openpgp::types::{
    DataFormat, Features, HashAlgorithm, PublicKeyAlgorithm, SignatureType, SymmetricAlgorithm,
};
use zeroize::Zeroizing;

use super::open::{Signatures, SignerInfo, Symmetric};
use super::{keys, OpenPgp, OpenPgpError};
use crate::keystore::{KeyStore, KeyStoreError, MemoryStore};
use crate::seal::OpenPolicy;

/// Why a SOP operation failed; each has the exit code the SOP specification gives it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SopError {
    /// No acceptable signature was found (verify, inline-verify).
    #[error("no acceptable signature found")]
    NoSignature,
    /// A certificate has no key that can encrypt.
    #[error("certificate cannot encrypt: {0}")]
    CertCannotEncrypt(String),
    /// A required argument is missing.
    #[error("missing required argument: {0}")]
    MissingArg(String),
    /// No key given can decrypt the message, or the message does not decrypt.
    #[error("cannot decrypt: {0}")]
    CannotDecrypt(String),
    /// The input is not the OpenPGP data the operation needs.
    #[error("bad data: {0}")]
    BadData(String),
    /// An output file named by the caller already exists.
    #[error("output exists: {0}")]
    OutputExists(String),
    /// An input file named by the caller does not exist or cannot be read.
    #[error("missing input: {0}")]
    MissingInput(String),
    /// A secret key is locked and no given password unlocks it.
    #[error("key is protected: {0}")]
    KeyIsProtected(String),
    /// The subcommand is not implemented.
    #[error("unsupported subcommand: {0}")]
    UnsupportedSubcommand(String),
    /// An option is not implemented.
    #[error("unsupported option: {0}")]
    UnsupportedOption(String),
    /// An indirect-input prefix other than `@ENV:` and `@FD:`.
    #[error("unsupported special prefix: {0}")]
    UnsupportedSpecialPrefix(String),
    /// A key has no usable signing key.
    #[error("key cannot sign: {0}")]
    KeyCannotSign(String),
    /// Options that cannot be used together.
    #[error("incompatible options: {0}")]
    IncompatibleOptions(String),
    /// A profile this implementation does not have.
    #[error("unsupported profile: {0}")]
    UnsupportedProfile(String),
    /// A key's algorithm is one this implementation does not use for the operation.
    #[error("unsupported asymmetric algorithm: {0}")]
    UnsupportedAsymmetricAlgo(String),
    /// Verification was asked for by halves (certificates without a place to report
    /// to, or the other way round).
    #[error("incomplete verification instructions: {0}")]
    IncompleteVerification(String),
    /// A password to encrypt with is not UTF-8, or has leading or trailing whitespace.
    #[error("password not human-readable: {0}")]
    PasswordNotHumanReadable(String),
    /// Text was expected (`--as=text`) and the input is not UTF-8.
    #[error("expected text: {0}")]
    ExpectedText(String),
    /// An input named with a special prefix (`@ENV:`, `@FD:`) is also a file's name.
    #[error("ambiguous input: {0}")]
    AmbiguousInput(String),
}

impl SopError {
    /// The error code the SOP specification assigns to this failure
    /// (draft-dkg-openpgp-stateless-cli, "Failure Modes"): part of that protocol, which
    /// a `sop` command line exits with.
    pub fn sop_code(&self) -> u8 {
        match self {
            Self::NoSignature => 3,
            Self::CertCannotEncrypt(_) => 17,
            Self::MissingArg(_) => 19,
            Self::CannotDecrypt(_) => 29,
            Self::UnsupportedOption(_) => 37,
            Self::BadData(_) => 41,
            Self::OutputExists(_) => 59,
            Self::MissingInput(_) => 61,
            Self::KeyIsProtected(_) => 67,
            Self::UnsupportedSubcommand(_) => 69,
            Self::UnsupportedSpecialPrefix(_) => 71,
            Self::KeyCannotSign(_) => 79,
            Self::IncompatibleOptions(_) => 83,
            Self::UnsupportedProfile(_) => 89,
            Self::UnsupportedAsymmetricAlgo(_) => 13,
            Self::IncompleteVerification(_) => 23,
            Self::PasswordNotHumanReadable(_) => 31,
            Self::ExpectedText(_) => 53,
            Self::AmbiguousInput(_) => 73,
        }
    }
}

/// The SOP draft implemented (`sop version --sop-spec`), with the remark SOP asks for
/// when an implementation leaves subcommands out.
pub const SOP_SPEC: &str = "draft-dkg-openpgp-stateless-cli-10\n\
~ partial: the key-management subcommands (change-key-password, revoke-key, update-key, \
merge-certs, certify-userid, validate-userid) are not implemented and not listed\n";

/// The policy SOP's operations run under (`sop version --extended`).
pub const POLICY: &str = "policy: Sequoia StandardPolicy, plus mailseal's: \
integrity protection required (SED refused), RFC 9580 5.5.2 (no v4-only algorithms \
in v6 keys), a signature counts only if its key could sign when it was made (a primary \
key needs an unrevoked User ID or a direct-key signature then), ElGamal for \
decryption only, ciphers with 128-bit blocks and hashes from SHA-256 up when \
encrypting and signing\n";

/// The OpenPGP library and cryptographic backend underneath.
pub fn backend() -> String {
    format!(
        "sequoia-openpgp {} ({})",
        openpgp::VERSION,
        openpgp::crypto::backend()
    )
}

fn bad(e: impl std::fmt::Display) -> SopError {
    SopError::BadData(e.to_string())
}

/// One good signature, as SOP prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verification {
    /// When the signature was made.
    pub created: SystemTime,
    /// The fingerprint of the key that made it, upper-case hex.
    pub signing_key: String,
    /// The fingerprint of its certificate, upper-case hex.
    pub certificate: String,
    /// A text-mode signature.
    pub text: bool,
}

impl std::fmt::Display for Verification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = time::OffsetDateTime::from(self.created);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z {} {} mode:{}",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute(),
            at.second(),
            self.signing_key,
            self.certificate,
            if self.text { "text" } else { "binary" }
        )
    }
}

/// The window a signature's creation time must fall in (either end open).
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    /// Not before this time.
    pub not_before: Option<SystemTime>,
    /// Not after this time.
    pub not_after: Option<SystemTime>,
}

fn verifications(signers: Vec<SignerInfo>, window: Window) -> Vec<Verification> {
    signers
        .into_iter()
        .filter_map(|s| {
            let created = s.created?;
            if window.not_before.is_some_and(|t| created < t)
                || window.not_after.is_some_and(|t| created > t)
            {
                return None;
            }
            Some(Verification {
                created,
                signing_key: s.key_fingerprint.to_hex(),
                certificate: s.fingerprint.to_hex(),
                text: s.text,
            })
        })
        .collect()
}

/// Parses every certificate or key in `inputs`, unlocking locked secret keys with the
/// first of `passwords` that works (each also tried without trailing whitespace).
fn load(inputs: &[Vec<u8>], passwords: &[Zeroizing<Vec<u8>>]) -> Result<Vec<Cert>, SopError> {
    let mut out = Vec::new();
    for input in inputs {
        let mut candidates: Vec<Option<&[u8]>> = vec![None];
        for p in passwords {
            candidates.push(Some(&p[..]));
            let trimmed = p.trim_ascii_end();
            if trimmed.len() != p.len() {
                candidates.push(Some(trimmed));
            }
        }
        let mut last = None;
        let mut loaded = None;
        for c in candidates {
            match keys::read_certs_at(input, "key", c, None) {
                Ok(certs) => {
                    loaded = Some(certs);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let certs = match (loaded, last) {
            (Some(c), _) => c,
            (None, Some(KeyStoreError::PassphraseRequired { .. })) => {
                return Err(SopError::KeyIsProtected(
                    "no password given unlocks it".into(),
                ))
            }
            (None, Some(e @ KeyStoreError::Malformed { .. })) if !passwords.is_empty() => {
                let text = e.to_string();
                return Err(if text.contains("passphrase") {
                    SopError::KeyIsProtected(text)
                } else {
                    bad(text)
                });
            }
            (None, e) => return Err(bad(e.map(|e| e.to_string()).unwrap_or_default())),
        };
        for c in certs {
            let bytes = c.secret.as_ref().map_or(&c.public[..], |s| &s[..]);
            out.push(Cert::from_bytes(bytes).map_err(bad)?);
        }
    }
    Ok(out)
}

/// An in-memory store holding `certs` (and their secrets).
fn store_of(certs: &[Cert]) -> Result<MemoryStore, SopError> {
    let store = MemoryStore::new();
    for c in certs {
        let bytes = if c.is_tsk() {
            c.as_tsk().to_vec()
        } else {
            c.to_vec()
        }
        .map_err(bad)?;
        store.import(&bytes, "sop", false).map_err(bad)?;
    }
    Ok(store)
}

fn armored(binary: &[u8], kind: openpgp::armor::Kind) -> Result<Vec<u8>, SopError> {
    let mut w = openpgp::armor::Writer::new(Vec::new(), kind).map_err(bad)?;
    w.write_all(binary).map_err(bad)?;
    w.finalize().map_err(bad)
}

/// `binary`, armored as `kind` when `armor`.
pub fn output(
    binary: Vec<u8>,
    kind: openpgp::armor::Kind,
    armor: bool,
) -> Result<Vec<u8>, SopError> {
    if armor {
        armored(&binary, kind)
    } else {
        Ok(binary)
    }
}

/// `sop generate-key`: a new key for `userids` (binary transferable secret key).
pub fn generate_key(
    userids: &[String],
    profile: Option<&str>,
    signing_only: bool,
    password: Option<&[u8]>,
) -> Result<Vec<u8>, SopError> {
    if let Some(p) = password {
        std::str::from_utf8(p)
            .map_err(|_| SopError::PasswordNotHumanReadable("not UTF-8".into()))?;
    }
    let uids = userids.iter().map(|u| UserID::from(u.as_str()));
    let builder = if signing_only {
        let mut b = CertBuilder::new().add_signing_subkey();
        for u in uids {
            b = b.add_userid(u);
        }
        b
    } else {
        CertBuilder::general_purpose(uids)
    }
    .set_cipher_suite(CipherSuite::Cv25519);
    let builder = match profile.unwrap_or("rfc4880") {
        "default" | "rfc4880" => builder.set_features(Features::empty().set_seipdv1()),
        "rfc9580" => builder.set_profile(openpgp::Profile::RFC9580),
        other => return Err(SopError::UnsupportedProfile(other.to_string())),
    }
    .map_err(bad)?;
    let builder = builder.set_password(password.map(Password::from));
    let (cert, _) = builder.generate().map_err(bad)?;
    let tsk = cert.as_tsk().to_vec().map_err(bad)?;
    Ok(tsk)
}

/// The profiles of `generate-key` and `encrypt`, as `list-profiles` prints them.
pub fn profiles(subcommand: &str) -> Result<Vec<&'static str>, SopError> {
    match subcommand {
        "generate-key" => Ok(vec![
            "rfc4880: v4 Ed25519/Cv25519, SEIPDv1 (default; GnuPG 2.2 reads it)",
            "rfc9580: v6 Ed25519/X25519, SEIPDv2",
        ]),
        "encrypt" => Ok(vec![
            "default: SEIPDv2 when every recipient advertises it, else SEIPDv1",
        ]),
        other => Err(SopError::UnsupportedProfile(format!(
            "no profiles for {other}"
        ))),
    }
}

/// `sop extract-cert`: the certificates of `keys` (binary).
pub fn extract_cert(keys: &[u8]) -> Result<Vec<u8>, SopError> {
    let certs = keys::placement::certificates(keys).map_err(bad)?;
    let mut out = Vec::new();
    let mut n = 0;
    for c in certs {
        let c = keys::placement::without_unplaced_signatures(c.map_err(bad)?);
        keys::conforms(&c).map_err(bad)?;
        c.serialize(&mut out).map_err(bad)?;
        n += 1;
    }
    if n == 0 {
        return Err(bad("no key in the input"));
    }
    Ok(out)
}

/// The signing keys of some secret keys, and each one's preferred hash algorithms.
struct Signers {
    pairs: Vec<KeyPair>,
    hash_preferences: Vec<Option<Vec<HashAlgorithm>>>,
}

fn signing_pairs(certs: &[Cert]) -> Result<Signers, SopError> {
    let policy = StandardPolicy::new();
    let mut signers = Signers {
        pairs: Vec::new(),
        hash_preferences: Vec::new(),
    };
    for c in certs {
        if !c.is_tsk() {
            return Err(SopError::KeyCannotSign(format!(
                "{} has no secret key",
                c.fingerprint()
            )));
        }
        let valid = c
            .with_policy(&policy, None)
            .map_err(|e| SopError::KeyCannotSign(e.to_string()))?;
        let ka = valid
            .keys()
            .secret()
            .for_signing()
            .alive()
            .revoked(false)
            .supported()
            .next()
            .ok_or_else(|| {
                SopError::KeyCannotSign(format!("{} has no signing key", c.fingerprint()))
            })?;
        if !ka.key().has_unencrypted_secret() {
            return Err(SopError::KeyIsProtected(c.fingerprint().to_string()));
        }
        signers
            .pairs
            .push(ka.key().clone().into_keypair().map_err(bad)?);
        signers
            .hash_preferences
            .push(valid.preferred_hash_algorithms().map(<[_]>::to_vec));
    }
    Ok(signers)
}

/// The hash algorithms we sign with, best first: what the policy accepts for new
/// signatures, never below SHA-256.
const SIGNING_HASHES: [HashAlgorithm; 5] = [
    HashAlgorithm::SHA512,
    HashAlgorithm::SHA384,
    HashAlgorithm::SHA256,
    HashAlgorithm::SHA3_512,
    HashAlgorithm::SHA3_256,
];

/// The symmetric algorithms we encrypt with: 128-bit blocks, keys of 128 bits or more.
const CIPHERS: [SymmetricAlgorithm; 7] = [
    SymmetricAlgorithm::AES256,
    SymmetricAlgorithm::AES192,
    SymmetricAlgorithm::AES128,
    SymmetricAlgorithm::Camellia256,
    SymmetricAlgorithm::Camellia192,
    SymmetricAlgorithm::Camellia128,
    SymmetricAlgorithm::Twofish,
];

/// The first algorithm of the first stated preference list that every stated list
/// has and `acceptable` takes; `None` when nobody states one or nothing is common.
/// (A certificate without the preference subpacket constrains nothing.)
fn negotiate<T: Copy + PartialEq>(
    lists: &[Option<Vec<T>>],
    acceptable: impl Fn(T) -> bool,
) -> Option<T> {
    let stated: Vec<&Vec<T>> = lists.iter().flatten().collect();
    let first = stated.first()?;
    first
        .iter()
        .copied()
        .find(|a| acceptable(*a) && stated.iter().all(|l| l.contains(a)))
}

fn hash_acceptable(h: HashAlgorithm) -> bool {
    use openpgp::policy::HashAlgoSecurity;
    let now = std::time::SystemTime::now();
    SIGNING_HASHES.contains(&h)
        && h.is_supported()
        && StandardPolicy::new()
            .hash_cutoff(h, HashAlgoSecurity::CollisionResistance)
            .is_none_or(|cutoff| cutoff > now)
}

fn cipher_acceptable(a: SymmetricAlgorithm) -> bool {
    use openpgp::policy::Policy;
    CIPHERS.contains(&a) && a.is_supported() && StandardPolicy::new().symmetric_algorithm(a).is_ok()
}

/// A signer over `message` with every key pair (signatures of type `typ`), hashing
/// with the first of `preferences`' common algorithms that every key can use, else
/// SHA-256.
fn signing_stack<'a>(
    message: Message<'a>,
    signers: Signers,
    typ: SignatureType,
    preferences: &[Option<Vec<HashAlgorithm>>],
) -> Result<(Signer<'a>, HashAlgorithm), SopError> {
    use openpgp::crypto::Signer as _;
    let usable = |h: HashAlgorithm| {
        signers
            .pairs
            .iter()
            .all(|p| p.acceptable_hashes().contains(&h))
    };
    let hash = negotiate(preferences, |h| hash_acceptable(h) && usable(h))
        .or_else(|| {
            [HashAlgorithm::SHA256, HashAlgorithm::SHA512]
                .into_iter()
                .find(|h| usable(*h))
        })
        .ok_or_else(|| bad("no hash algorithm every key can sign with"))?;
    let mut pairs = signers.pairs.into_iter();
    let first = pairs
        .next()
        .ok_or_else(|| SopError::MissingArg("KEYS".into()))?;
    let mut signer = Signer::with_template(
        message,
        first,
        openpgp::packet::signature::SignatureBuilder::new(typ),
    )
    .map_err(bad)?;
    for p in pairs {
        signer = signer.add_signer(p).map_err(bad)?;
    }
    Ok((signer.hash_algo(hash).map_err(bad)?, hash))
}

/// Refuses `data` that is not UTF-8 where text was asked for.
fn expect_text(data: &[u8]) -> Result<(), SopError> {
    std::str::from_utf8(data)
        .map(|_| ())
        .map_err(|e| SopError::ExpectedText(e.to_string()))
}

/// `sop sign`: detached signatures of `data` by every key (binary), and the micalg.
pub fn sign(
    keys: &[Vec<u8>],
    passwords: &[Zeroizing<Vec<u8>>],
    data: &[u8],
    text: bool,
) -> Result<(String, Vec<u8>), SopError> {
    if keys.is_empty() {
        return Err(SopError::MissingArg("KEYS".into()));
    }
    if text {
        expect_text(data)?;
    }
    let signers = signing_pairs(&load(keys, passwords)?)?;
    let preferences = signers.hash_preferences.clone();
    let typ = if text {
        SignatureType::Text
    } else {
        SignatureType::Binary
    };
    let mut out = Vec::new();
    let (signer, hash) = signing_stack(Message::new(&mut out), signers, typ, &preferences)?;
    let mut w = signer.detached().build().map_err(bad)?;
    w.write_all(data).map_err(bad)?;
    w.finalize().map_err(bad)?;
    Ok((micalg(hash), out))
}

/// The RFC 3156 `micalg` of a hash algorithm (`pgp-sha256`).
fn micalg(hash: HashAlgorithm) -> String {
    let name = match hash {
        HashAlgorithm::SHA224 => "sha224",
        HashAlgorithm::SHA256 => "sha256",
        HashAlgorithm::SHA384 => "sha384",
        HashAlgorithm::SHA512 => "sha512",
        HashAlgorithm::SHA3_256 => "sha3-256",
        HashAlgorithm::SHA3_512 => "sha3-512",
        other => return format!("pgp-{}", other.to_string().to_ascii_lowercase()),
    };
    format!("pgp-{name}")
}

fn checked_certs(inputs: &[Vec<u8>]) -> Result<Vec<Cert>, SopError> {
    let inputs: Vec<Vec<u8>> = inputs.iter().map(|i| lenient(i)).collect();
    let certs = load(&inputs, &[])?;
    // Bindings Sequoia's parser dropped for a malformed hint inside their back
    // signature, read the way `super::unhashed` explains.
    let kept: Vec<super::unhashed::KeptBinding> = inputs
        .iter()
        .flat_map(|b| super::unhashed::signatures_with_embedded_fingerprints_kept(b))
        .collect();
    merged(certs, kept)
}

/// `certs` with the copies of one certificate (one primary key) merged into one, and
/// each of the `kept` bindings after its subkey, each such certificate canonicalised
/// once ([`keys::merge_copies`]), within the bound on components across the inputs.
fn merged(
    certs: Vec<Cert>,
    kept: Vec<super::unhashed::KeptBinding>,
) -> Result<Vec<Cert>, SopError> {
    use openpgp::packet::Packet;
    use openpgp::Fingerprint;
    use std::collections::{HashMap, HashSet};
    // Merged across inputs, a certificate may have no more components than one input
    // may give it (each was read under that bound).
    let mut components: HashMap<Fingerprint, (HashSet<Vec<u8>>, HashSet<Fingerprint>)> =
        HashMap::new();
    for c in &certs {
        let (user_ids, subkeys) = components.entry(c.fingerprint()).or_default();
        user_ids.extend(c.userids().map(|u| u.userid().value().to_vec()));
        user_ids.extend(
            c.user_attributes()
                .map(|u| u.user_attribute().value().to_vec()),
        );
        subkeys.extend(c.keys().subkeys().map(|k| k.key().fingerprint()));
    }
    if let Some((fingerprint, (user_ids, subkeys))) = components.iter().find(|(_, (u, s))| {
        u.len() > keys::placement::MAX_USER_IDS || s.len() > keys::placement::MAX_SUBKEYS
    }) {
        return Err(bad(format!(
            "certificate {fingerprint}: {} User IDs and {} subkeys across the inputs, more than the {} and {} a certificate may have",
            user_ids.len(),
            subkeys.len(),
            keys::placement::MAX_USER_IDS,
            keys::placement::MAX_SUBKEYS
        )));
    }
    // Primary key, then subkey: the bindings that follow it.
    type Bindings = HashMap<Fingerprint, Vec<openpgp::packet::Signature>>;
    let mut bindings: HashMap<Fingerprint, Bindings> = HashMap::new();
    for k in kept {
        let of_primary = bindings.entry(k.primary).or_default();
        of_primary.entry(k.subkey).or_default().push(k.signature);
    }
    keys::merge_copies(certs, |primary, component| {
        let fingerprint = |p: &Packet| match p {
            Packet::PublicKey(k) => Some(k.fingerprint()),
            Packet::SecretKey(k) => Some(k.fingerprint()),
            Packet::PublicSubkey(k) => Some(k.fingerprint()),
            Packet::SecretSubkey(k) => Some(k.fingerprint()),
            _ => None,
        };
        let theirs = match (fingerprint(primary), component.tag()) {
            (Some(p), openpgp::packet::Tag::PublicSubkey | openpgp::packet::Tag::SecretSubkey) => {
                fingerprint(component)
                    .and_then(|k| bindings.get_mut(&p).and_then(|b| b.remove(&k)))
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        };
        // Only those that fit where they go: one that does not would be searched for
        // against every subkey.
        theirs
            .into_iter()
            .filter(|sig| keys::placement::fits_after(sig, primary, component))
            .map(Packet::from)
            .collect()
    })
    .map_err(bad)
}

/// `data` (armored or binary) with the malformed Issuer Fingerprints that nothing
/// signed dropped from its top-level signatures (see `super::unhashed`), binary; as it
/// is when it does not dearmor.
fn lenient(data: &[u8]) -> Vec<u8> {
    match dearmor(data) {
        Ok(binary) => {
            super::unhashed::drop_malformed_issuer_fingerprints(&binary).unwrap_or(binary)
        }
        Err(_) => data.to_vec(),
    }
}

/// `sop verify`: the good signatures in `signatures` over `data` by `certs`.
pub fn verify(
    signatures: &[u8],
    certs: &[Vec<u8>],
    data: &[u8],
    window: Window,
) -> Result<Vec<Verification>, SopError> {
    if certs.is_empty() {
        return Err(SopError::MissingArg("CERTS".into()));
    }
    let certs = checked_certs(certs)?;
    let store = store_of(&certs)?;
    let pgp = OpenPgp::new(&store);
    let signatures = &lenient(signatures);
    let outcome = pgp
        .verify_detached_with(
            signatures,
            data,
            &certs,
            Signatures::Collect,
            std::time::SystemTime::now(),
        )
        .map_err(|e| {
            // Signature packets that parse but that Sequoia cannot check (a hashed
            // subpacket it cannot write back to hash it): no acceptable signature.
            // Packets that do not parse: bad data.
            let parses = dearmor(signatures)
                .ok()
                .is_some_and(|b| openpgp::PacketPile::from_bytes(&b).is_ok());
            if parses {
                SopError::NoSignature
            } else {
                bad(e)
            }
        })?;
    let found = verifications(outcome.signers, window);
    if found.is_empty() {
        return Err(SopError::NoSignature);
    }
    Ok(found)
}

/// How `encrypt` and `inline-sign` treat the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataMode {
    /// Bytes.
    Binary,
    /// UTF-8 text (text-mode signatures, literal format `u`).
    Text,
    /// The Cleartext Signature Framework (inline-sign only).
    Clearsigned,
}

/// Writes `data` as the literal data packet of `message` (format `u` for text, `b`
/// otherwise) and finishes the message.
fn write_literal(message: Message<'_>, data: &[u8], mode: DataMode) -> Result<(), SopError> {
    let format = if mode == DataMode::Text {
        DataFormat::Unicode
    } else {
        DataFormat::Binary
    };
    let mut w = LiteralWriter::new(message)
        .format(format)
        .build()
        .map_err(bad)?;
    w.write_all(data).map_err(bad)?;
    w.finalize().map_err(bad)
}

/// What `sop encrypt` is given beside the data.
#[derive(Default)]
pub struct EncryptRequest<'a> {
    /// Certificates to encrypt to.
    pub certs: &'a [Vec<u8>],
    /// Passwords to encrypt with (SKESK packets).
    pub passwords: &'a [Zeroizing<Vec<u8>>],
    /// Secret keys to sign with.
    pub sign_with: &'a [Vec<u8>],
    /// Passwords that unlock `sign_with`.
    pub key_passwords: &'a [Zeroizing<Vec<u8>>],
    /// Binary or text.
    pub mode: Option<DataMode>,
    /// The encryption profile (`default`).
    pub profile: Option<&'a str>,
    /// Return the session key.
    pub session_key_out: bool,
}

/// What `sop encrypt` gives back.
pub struct Encrypted {
    /// The OpenPGP message (binary).
    pub message: Vec<u8>,
    /// The session key in SOP's `ALGO:HEX` form, when asked for.
    pub session_key: Option<Zeroizing<String>>,
}

/// A password to encrypt with, as SOP wants it: UTF-8, trailing whitespace dropped (a
/// password file's line end), no leading whitespace.
fn human_password(p: &[u8]) -> Result<Password, SopError> {
    let text = std::str::from_utf8(p)
        .map_err(|_| SopError::PasswordNotHumanReadable("not UTF-8".into()))?;
    let text = text.trim_end();
    if text.is_empty() || text.starts_with(char::is_whitespace) {
        return Err(SopError::PasswordNotHumanReadable(
            "empty, or leading whitespace".into(),
        ));
    }
    Ok(Password::from(text))
}

/// `sop encrypt`: `data` to the certificates and passwords, signed by `sign_with`.
///
/// The cipher is the first of the recipients' common preferences that the policy
/// accepts (AES-256 when none states any, AES-128, which every OpenPGP implementation
/// has, when they have nothing in common); signatures hash with the recipients'
/// common preference, else SHA-256. ElGamal encryption keys are refused: RFC 9580
/// (section 9.1) keeps ElGamal for decrypting old messages only, and this backend has
/// no ElGamal encryption (a message to such a key would need our own, variable-time,
/// modular arithmetic on the sending side too).
pub fn encrypt(request: &EncryptRequest<'_>, data: &[u8]) -> Result<Encrypted, SopError> {
    let mode = request.mode.unwrap_or(DataMode::Binary);
    if let Some(p) = request.profile.filter(|p| *p != "default") {
        return Err(SopError::UnsupportedProfile(p.to_string()));
    }
    if mode == DataMode::Clearsigned {
        return Err(SopError::UnsupportedOption("--as=clearsigned".into()));
    }
    if request.certs.is_empty() && request.passwords.is_empty() {
        return Err(SopError::MissingArg("CERTS or --with-password".into()));
    }
    if mode == DataMode::Text {
        expect_text(data)?;
    }
    let pws = request
        .passwords
        .iter()
        .map(|p| human_password(p))
        .collect::<Result<Vec<_>, _>>()?;
    let recipients = checked_certs(request.certs)?;
    let signers = signing_pairs(&load(request.sign_with, request.key_passwords)?)?;
    let policy = StandardPolicy::new();
    let mut keys = Vec::new();
    let mut cipher_preferences = Vec::new();
    let mut hash_preferences = Vec::new();
    for c in &recipients {
        let valid = c
            .with_policy(&policy, None)
            .map_err(|e| SopError::CertCannotEncrypt(e.to_string()))?;
        let capable = || {
            valid
                .keys()
                .alive()
                .revoked(false)
                .for_transport_encryption()
                .for_storage_encryption()
        };
        let found: Vec<_> = capable()
            .supported()
            .filter(|ka| !is_elgamal(ka.key().pk_algo()))
            .collect();
        if found.is_empty() {
            // The policy may hide an ElGamal subkey (too short); say why either way.
            let legacy = c.keys().find(|ka| is_elgamal(ka.key().pk_algo()));
            return Err(match legacy {
                Some(ka) => SopError::UnsupportedAsymmetricAlgo(format!(
                    "{}: {} keys are not encrypted to (RFC 9580 keeps them for decryption)",
                    c.fingerprint(),
                    ka.key().pk_algo()
                )),
                None => SopError::CertCannotEncrypt(c.fingerprint().to_string()),
            });
        }
        cipher_preferences.push(valid.preferred_symmetric_algorithms().map(<[_]>::to_vec));
        hash_preferences.push(valid.preferred_hash_algorithms().map(<[_]>::to_vec));
        for ka in found {
            keys.push(Recipient::new(
                ka.valid_cert().features(),
                ka.key().key_handle(),
                ka.key(),
            ));
        }
    }
    let cipher = if cipher_preferences.iter().all(Option::is_none) {
        SymmetricAlgorithm::AES256
    } else {
        negotiate(&cipher_preferences, cipher_acceptable).unwrap_or(SymmetricAlgorithm::AES128)
    };
    let session_key = SessionKey::new(cipher.key_size().map_err(bad)?).map_err(bad)?;
    let mut out = Vec::new();
    let message = Message::new(&mut out);
    let message = Encryptor::with_session_key(message, cipher, session_key.clone())
        .map_err(bad)?
        .add_recipients(keys)
        .add_passwords(pws)
        .build()
        .map_err(bad)?;
    let message = if signers.pairs.is_empty() {
        message
    } else {
        let typ = if mode == DataMode::Text {
            SignatureType::Text
        } else {
            SignatureType::Binary
        };
        let (mut s, _) = signing_stack(message, signers, typ, &hash_preferences)?;
        for c in &recipients {
            s = s.add_intended_recipient(c);
        }
        s.build().map_err(bad)?
    };
    write_literal(message, data, mode)?;
    Ok(Encrypted {
        message: out,
        session_key: request
            .session_key_out
            .then(|| session_key_text(Some(cipher), &session_key)),
    })
}

/// ElGamal (OpenPGP algorithms 16 and 20).
fn is_elgamal(algo: PublicKeyAlgorithm) -> bool {
    #[allow(deprecated)] // named to be refused
    let elgamal = [
        PublicKeyAlgorithm::ElGamalEncrypt,
        PublicKeyAlgorithm::ElGamalEncryptSign,
    ];
    elgamal.contains(&algo)
}

/// What `sop decrypt` is given beside the ciphertext.
#[derive(Default)]
pub struct DecryptRequest<'a> {
    /// Secret keys (each may hold several).
    pub keys: &'a [Vec<u8>],
    /// Passwords that unlock `keys`.
    pub key_passwords: &'a [Zeroizing<Vec<u8>>],
    /// Passwords for the message itself (its SKESK packets).
    pub passwords: &'a [Zeroizing<Vec<u8>>],
    /// Session keys in SOP's `ALGO:HEX` form, tried first.
    pub session_keys: &'a [Zeroizing<Vec<u8>>],
    /// Certificates whose signatures are reported.
    pub verify_with: &'a [Vec<u8>],
    /// When a reported signature may have been made.
    pub window: Window,
    /// Return the session key that decrypted.
    pub session_key_out: bool,
}

/// What `sop decrypt` gives back.
pub struct Decrypted {
    /// The literal data.
    pub plaintext: Zeroizing<Vec<u8>>,
    /// The good signatures by the `verify_with` certificates.
    pub verifications: Vec<Verification>,
    /// The session key in SOP's `ALGO:HEX` form, when asked for.
    pub session_key: Option<Zeroizing<String>>,
}

/// A session key in SOP's form: the decimal algorithm number, a colon, the key in hex.
pub fn parse_session_key(
    text: &[u8],
) -> Result<(Option<SymmetricAlgorithm>, SessionKey), SopError> {
    let text = std::str::from_utf8(text.trim_ascii()).map_err(|_| bad("session key: not text"))?;
    let (algo, hex_key) = text
        .split_once(':')
        .ok_or_else(|| bad("session key: expected ALGO:HEX"))?;
    let algo = if algo.is_empty() {
        None
    } else {
        let n: u8 = algo
            .parse()
            .map_err(|_| bad("session key: the algorithm is not a number"))?;
        Some(SymmetricAlgorithm::from(n))
    };
    let key = Zeroizing::new(
        crate::hex::decode(hex_key).ok_or_else(|| bad("session key: the key is not hex"))?,
    );
    if let Some(a) = algo {
        if a.key_size().ok() != Some(key.len()) {
            return Err(bad(format!("session key: not a {a} key")));
        }
    }
    Ok((algo, SessionKey::from(&key[..])))
}

/// `algo` and `key` in SOP's session-key form (`9:` and upper-case hex).
fn session_key_text(algo: Option<SymmetricAlgorithm>, key: &SessionKey) -> Zeroizing<String> {
    use std::fmt::Write as _;
    let mut text = Zeroizing::new(String::with_capacity(4 + 2 * key.len()));
    if let Some(a) = algo {
        let _ = write!(text, "{}", u8::from(a));
    }
    text.push(':');
    for b in key.iter() {
        let _ = write!(text, "{b:02X}");
    }
    text
}

/// Each password as given and, when it differs, without trailing whitespace (SOP: a
/// password file's line end is not part of the password).
fn password_candidates(passwords: &[Zeroizing<Vec<u8>>]) -> Vec<Password> {
    let mut out = Vec::new();
    for p in passwords {
        out.push(Password::from(&p[..]));
        let trimmed = p.trim_ascii_end();
        if trimmed.len() != p.len() {
            out.push(Password::from(trimmed));
        }
    }
    out
}

/// `sop decrypt`: the plaintext and the good signatures by `verify_with`. When
/// certificates to verify with are given and none made a good signature, nothing is
/// released ([`SopError::NoSignature`]).
pub fn decrypt(request: &DecryptRequest<'_>, ciphertext: &[u8]) -> Result<Decrypted, SopError> {
    if request.keys.is_empty() && request.passwords.is_empty() && request.session_keys.is_empty() {
        return Err(SopError::MissingArg(
            "KEYS, --with-password or --with-session-key".into(),
        ));
    }
    let secrets = load(request.keys, request.key_passwords)?;
    let verify_certs = checked_certs(request.verify_with)?;
    let session_keys = request
        .session_keys
        .iter()
        .map(|t| parse_session_key(t))
        .collect::<Result<Vec<_>, _>>()?;
    let passwords = password_candidates(request.passwords);
    let symmetric = Symmetric {
        passwords: &passwords,
        session_keys: &session_keys,
        keep_session_key: request.session_key_out,
    };
    let store = store_of(&secrets)?;
    let pgp = OpenPgp::new(&store);
    let (plaintext, outcome) = pgp
        .decrypt_verify_with(
            ciphertext,
            &verify_certs,
            None,
            &OpenPolicy::default(),
            Signatures::Collect,
            &symmetric,
        )
        .map_err(|e| match e {
            OpenPgpError::Malformed(m) => bad(m),
            other => SopError::CannotDecrypt(other.to_string()),
        })?;
    let verifications = verifications(outcome.signers, request.window);
    if !verify_certs.is_empty() && verifications.is_empty() {
        return Err(SopError::NoSignature);
    }
    let session_key = outcome
        .session_key
        .as_ref()
        .map(|(algo, key)| session_key_text(*algo, key));
    Ok(Decrypted {
        plaintext,
        verifications,
        session_key,
    })
}

/// `sop inline-sign`: `data` signed by every key, inline or cleartext (binary, or
/// always armored text for the cleartext framework).
pub fn inline_sign(
    keys: &[Vec<u8>],
    passwords: &[Zeroizing<Vec<u8>>],
    data: &[u8],
    mode: DataMode,
) -> Result<Vec<u8>, SopError> {
    if keys.is_empty() {
        return Err(SopError::MissingArg("KEYS".into()));
    }
    if mode != DataMode::Binary {
        expect_text(data)?;
    }
    let signers = signing_pairs(&load(keys, passwords)?)?;
    let preferences = signers.hash_preferences.clone();
    let typ = if mode == DataMode::Binary {
        SignatureType::Binary
    } else {
        SignatureType::Text
    };
    let mut out = Vec::new();
    let (mut signer, _) = signing_stack(Message::new(&mut out), signers, typ, &preferences)?;
    if mode == DataMode::Clearsigned {
        signer = signer.cleartext();
    }
    let mut message = signer.build().map_err(bad)?;
    if mode == DataMode::Clearsigned {
        // The cleartext framework signs the text itself: no literal data packet.
        message.write_all(data).map_err(bad)?;
        message.finalize().map_err(bad)?;
    } else {
        write_literal(message, data, mode)?;
    }
    Ok(out)
}

/// `sop inline-verify`: the content and its good signatures by `certs`.
pub fn inline_verify(
    certs: &[Vec<u8>],
    message: &[u8],
    window: Window,
) -> Result<(Zeroizing<Vec<u8>>, Vec<Verification>), SopError> {
    if certs.is_empty() {
        return Err(SopError::MissingArg("CERTS".into()));
    }
    let certs = checked_certs(certs)?;
    let store = store_of(&certs)?;
    let pgp = OpenPgp::new(&store);
    let (content, outcome) = pgp
        .verify_inline_with(message, &certs, &OpenPolicy::default(), Signatures::Collect)
        .map_err(bad)?;
    let found = verifications(outcome.signers, window);
    if found.is_empty() {
        return Err(SopError::NoSignature);
    }
    Ok((content, found))
}

/// The armor kind of binary OpenPGP data, from its first packet.
fn kind_of(binary: &[u8]) -> openpgp::armor::Kind {
    use openpgp::armor::Kind;
    use openpgp::packet::Tag;
    match openpgp::PacketPile::from_bytes(binary)
        .ok()
        .and_then(|p| p.children().next().map(|p| p.tag()))
    {
        Some(Tag::SecretKey) => Kind::SecretKey,
        Some(Tag::PublicKey) => Kind::PublicKey,
        Some(Tag::Signature) => Kind::Signature,
        _ => Kind::Message,
    }
}

/// `sop dearmor`: binary OpenPGP data (binary input passes through).
pub fn dearmor(data: &[u8]) -> Result<Vec<u8>, SopError> {
    if !data.trim_ascii_start().starts_with(b"-----BEGIN PGP ") {
        return Ok(data.to_vec());
    }
    let mut r =
        openpgp::armor::Reader::from_bytes(data, openpgp::armor::ReaderMode::Tolerant(None));
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).map_err(bad)?;
    Ok(out)
}

/// `sop armor`: armored OpenPGP data (armored input is normalised, not armored twice).
pub fn armor(data: &[u8]) -> Result<Vec<u8>, SopError> {
    let binary = dearmor(data)?;
    armored(&binary, kind_of(&binary))
}
