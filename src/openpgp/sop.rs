//! The Stateless OpenPGP operations (draft-dkg-openpgp-stateless-cli) on bytes, for
//! `mailseal sop`. Keys and certificates come in with each call; decryption and
//! verification go through the same [`OpenPgp`] policy layer as mail (Sequoia's
//! standard policy, the RFC 9580 conformance check, integrity always required), over
//! an in-memory store, so interoperability suites that drive SOP measure that layer.

use std::io::Write;
use std::time::SystemTime;

use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::crypto::{KeyPair, Password};
use openpgp::packet::UserID;
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::stream::{Encryptor, LiteralWriter, Message, Recipient, Signer};
use openpgp::serialize::{Serialize, SerializeInto};
use openpgp::types::{DataFormat, Features, HashAlgorithm, SignatureType};
use zeroize::Zeroizing;

use super::open::{Signatures, SignerInfo};
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
        }
    }
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
            match keys::read_certs(input, "key", c) {
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
    let certs = CertParser::from_bytes(keys).map_err(bad)?;
    let mut out = Vec::new();
    let mut n = 0;
    for c in certs {
        let c = c.map_err(bad)?;
        keys::conforms(&c).map_err(bad)?;
        c.serialize(&mut out).map_err(bad)?;
        n += 1;
    }
    if n == 0 {
        return Err(bad("no key in the input"));
    }
    Ok(out)
}

fn signing_pairs(certs: &[Cert]) -> Result<Vec<KeyPair>, SopError> {
    let policy = StandardPolicy::new();
    let mut pairs = Vec::new();
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
        pairs.push(ka.key().clone().into_keypair().map_err(bad)?);
    }
    Ok(pairs)
}

/// A signer over `message` with every key pair (SHA-256, signatures of type `typ`).
fn signing_stack(
    message: Message<'_>,
    pairs: Vec<KeyPair>,
    typ: SignatureType,
) -> Result<Signer<'_>, SopError> {
    let mut pairs = pairs.into_iter();
    let first = pairs
        .next()
        .ok_or_else(|| SopError::MissingArg("KEYS".into()))?;
    let mut signer = Signer::with_template(
        message,
        first,
        openpgp::packet::signature::SignatureBuilder::new(typ),
    )
    .map_err(bad)?
    .hash_algo(HashAlgorithm::SHA256)
    .map_err(bad)?;
    for p in pairs {
        signer = signer.add_signer(p).map_err(bad)?;
    }
    Ok(signer)
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
    let pairs = signing_pairs(&load(keys, passwords)?)?;
    let typ = if text {
        SignatureType::Text
    } else {
        SignatureType::Binary
    };
    let mut out = Vec::new();
    let signer = signing_stack(Message::new(&mut out), pairs, typ)?.detached();
    let mut w = signer.build().map_err(bad)?;
    w.write_all(data).map_err(bad)?;
    w.finalize().map_err(bad)?;
    Ok(("pgp-sha256".into(), out))
}

fn checked_certs(inputs: &[Vec<u8>]) -> Result<Vec<Cert>, SopError> {
    let certs = load(inputs, &[])?;
    Ok(certs)
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
    let outcome = pgp
        .verify_detached_with(
            signatures,
            data,
            &certs,
            Signatures::Collect,
            std::time::SystemTime::now(),
        )
        .map_err(|e| match e {
            OpenPgpError::Malformed(m) => bad(m),
            other => bad(other),
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

/// `sop encrypt`: `data` to `certs` and `passwords`, signed by `sign_with` (binary).
pub fn encrypt(
    certs: &[Vec<u8>],
    passwords: &[Zeroizing<Vec<u8>>],
    sign_with: &[Vec<u8>],
    key_passwords: &[Zeroizing<Vec<u8>>],
    data: &[u8],
    mode: DataMode,
    profile: Option<&str>,
) -> Result<Vec<u8>, SopError> {
    if let Some(p) = profile.filter(|p| *p != "default") {
        return Err(SopError::UnsupportedProfile(p.to_string()));
    }
    if mode == DataMode::Clearsigned {
        return Err(SopError::UnsupportedOption("--as=clearsigned".into()));
    }
    if certs.is_empty() && passwords.is_empty() {
        return Err(SopError::MissingArg("CERTS or --with-password".into()));
    }
    let recipients = checked_certs(certs)?;
    let signers = signing_pairs(&load(sign_with, key_passwords)?)?;
    let policy = StandardPolicy::new();
    let mut keys = Vec::new();
    for c in &recipients {
        let valid = c
            .with_policy(&policy, None)
            .map_err(|e| SopError::CertCannotEncrypt(e.to_string()))?;
        let found: Vec<_> = valid
            .keys()
            .supported()
            .alive()
            .revoked(false)
            .for_transport_encryption()
            .for_storage_encryption()
            .collect();
        if found.is_empty() {
            return Err(SopError::CertCannotEncrypt(c.fingerprint().to_string()));
        }
        for ka in found {
            keys.push(Recipient::new(
                ka.valid_cert().features(),
                ka.key().key_handle(),
                ka.key(),
            ));
        }
    }
    let mut out = Vec::new();
    let message = Message::new(&mut out);
    let pws: Vec<Password> = passwords.iter().map(|p| Password::from(&p[..])).collect();
    let message = Encryptor::for_recipients(message, keys)
        .add_passwords(pws)
        .build()
        .map_err(bad)?;
    let message = if signers.is_empty() {
        message
    } else {
        let typ = if mode == DataMode::Text {
            SignatureType::Text
        } else {
            SignatureType::Binary
        };
        let mut s = signing_stack(message, signers, typ)?;
        for c in &recipients {
            s = s.add_intended_recipient(c);
        }
        s.build().map_err(bad)?
    };
    write_literal(message, data, mode)?;
    Ok(out)
}

/// `sop decrypt`: the plaintext and the good signatures by `verify_with`.
pub fn decrypt(
    keys: &[Vec<u8>],
    key_passwords: &[Zeroizing<Vec<u8>>],
    ciphertext: &[u8],
    verify_with: &[Vec<u8>],
    window: Window,
) -> Result<(Zeroizing<Vec<u8>>, Vec<Verification>), SopError> {
    if keys.is_empty() {
        return Err(SopError::MissingArg("KEYS".into()));
    }
    let secrets = load(keys, key_passwords)?;
    let verify_certs = checked_certs(verify_with)?;
    let store = store_of(&secrets)?;
    let pgp = OpenPgp::new(&store);
    let (plain, outcome) = pgp
        .decrypt_verify(
            ciphertext,
            &verify_certs,
            None,
            &OpenPolicy::default(),
            Signatures::Collect,
        )
        .map_err(|e| match e {
            OpenPgpError::Malformed(m) => bad(m),
            other => SopError::CannotDecrypt(other.to_string()),
        })?;
    Ok((plain, verifications(outcome.signers, window)))
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
    let pairs = signing_pairs(&load(keys, passwords)?)?;
    let typ = if mode == DataMode::Binary {
        SignatureType::Binary
    } else {
        SignatureType::Text
    };
    let mut out = Vec::new();
    let mut signer = signing_stack(Message::new(&mut out), pairs, typ)?;
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
