//! Keys: where certificates, trust anchors and private keys come from.
//!
//! Profiles never read files: they ask a [`KeyStore`] for the certificates of an email
//! address and for the private key that matches a certificate. Keys and certificates are
//! matched by [`fingerprint`]: the SHA-256 of the public key bytes (the SPKI BIT STRING
//! contents), which a certificate and its private key share.

mod directory;
mod existing;
mod lookup;
mod material;
pub(crate) use material::unsupported_crl_form;
mod memory;
pub mod openpgp;
pub(crate) mod openpgp_placement;
mod pkcs11;
mod pkcs12;
mod postgres;
mod sql;
mod sqlite;
mod state;
pub(crate) mod user_ids;

pub use crate::hex::hex;
pub use directory::DirectoryStore;
pub use existing::{existing_layout, StoreLayout};
pub use lookup::{resolve_fingerprint, MIN_PREFIX_DIGITS};
pub(crate) use material::key_public;
pub(crate) use material::CertificateList;
pub use material::{emails_of, fingerprint, KeyAlgorithm};
pub use memory::MemoryStore;
#[cfg(feature = "cli")]
pub(crate) use pkcs11::store_certificate;
pub(crate) use pkcs11::token_certificate;
pub use pkcs11::{Pkcs11Uri, TokenKey, TokenKeyKind, TokenStore};

/// The listing entry of a certificate (`has_private_key` as given).
#[cfg(feature = "cli")]
pub(crate) fn cert_entry_of(cert: &x509_cert::Certificate, has_private_key: bool) -> KeyEntry {
    material::cert_entry(cert, EntryKind::Certificate, has_private_key)
}
pub use postgres::{PostgresStore, PostgresTables};
pub use sql::SqlKeyStore;
pub use sqlite::{SqliteStore, SqliteTables};
pub use state::StateLocation;

use std::fmt;

use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::error::{A2aErrorType, Classify, ErrorKind};

/// Why a key-store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyStoreError {
    /// Reading or writing the store failed.
    #[error("key store I/O on {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An input is neither an X.509 certificate nor a PKCS#8 private key (PEM or DER).
    #[error("{what}: not an X.509 certificate or PKCS#8 private key")]
    Unrecognised {
        /// Which input.
        what: String,
    },
    /// A certificate or key did not decode.
    #[error("{what}: {reason}")]
    Malformed {
        /// Which input.
        what: String,
        /// The decoder's reason (never key material).
        reason: String,
    },
    /// A private key of an algorithm the store cannot pair with a certificate.
    #[error("{what}: unsupported key algorithm {oid}")]
    UnsupportedAlgorithm {
        /// Which input.
        what: String,
        /// The algorithm OID.
        oid: String,
    },
    /// An encrypted key or a PKCS#12 file was given without a passphrase.
    #[error("{what}: {kind} needs a passphrase (--passphrase-file)")]
    PassphraseRequired {
        /// Which input.
        what: String,
        /// What kind of file.
        kind: String,
    },
    /// A PKCS#11 token refused or failed an operation (no PIN or key material in it).
    #[error("PKCS#11 token: {0}")]
    Token(String),
    /// The store's passphrase does not open its private keys.
    #[error("wrong passphrase for the key store")]
    WrongPassphrase,
    /// The store's private keys are encrypted and no passphrase was given.
    #[error("the key store's private keys are encrypted: give its passphrase (--passphrase-file or MAILSEAL_PASSPHRASE_FILE)")]
    Locked,
    /// A SQL key store failed.
    #[error("key store database: {0}")]
    Database(String),
    /// The token cannot perform a mechanism the message needs.
    #[error("the PKCS#11 token does not support {0}")]
    TokenUnsupported(String),
    /// This kind of store cannot hold what was asked of it.
    #[error("this key store cannot hold {0}")]
    Unsupported(&'static str),
    /// A certificate the identity rules refuse to hold (an OpenPGP User ID bound in
    /// the future, which would later speak for an address not shown at import).
    #[error("{what}: not imported: {reason}")]
    Refused {
        /// Which input.
        what: String,
        /// The rule it breaks (never key material).
        reason: String,
    },
    /// A CRL of a form the revocation check does not implement (scoped, indirect or
    /// delta): refused rather than stored and skipped.
    #[error(
        "{what}: CRL not imported: {reason}; import the issuer's complete, direct CRL instead"
    )]
    UnsupportedCrl {
        /// Which input.
        what: String,
        /// Which extension, and why.
        reason: String,
    },
    /// The store directory is readable by others than its owner.
    #[error("key store {path} is accessible by group or others (mode {mode:o}); run chmod 700")]
    Permissions {
        /// The directory.
        path: String,
        /// Its mode bits.
        mode: u32,
    },
    /// A path given as an existing key store holds none (missing, a regular file, a
    /// directory of neither layout): nothing was created there.
    #[error("no key store at {path}: {reason}")]
    NotAStore {
        /// The path as given.
        path: String,
        /// What is there instead.
        reason: String,
    },
    /// No entry's fingerprint starts with what was typed (or it is too short, or not
    /// hex).
    #[error("no key {fingerprint} in the store (give a fingerprint `key list` shows, or at least 4 of its first hex digits)")]
    NoSuchKey {
        /// What was typed, quoted.
        fingerprint: String,
    },
    /// A fingerprint prefix names more than one entry.
    #[error("{prefix} names {} keys: {}; give more of the fingerprint", .candidates.len(), .candidates.join(", "))]
    AmbiguousFingerprint {
        /// The prefix.
        prefix: String,
        /// Every fingerprint it begins.
        candidates: Vec<String>,
    },
}

impl Classify for KeyStoreError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InternalError
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Unrecognised { .. } | Self::Malformed { .. } => ErrorKind::Malformed,
            Self::PassphraseRequired { .. }
            | Self::WrongPassphrase
            | Self::Locked
            | Self::NotAStore { .. }
            | Self::AmbiguousFingerprint { .. } => ErrorKind::InvalidArgument,
            Self::UnsupportedCrl { .. } | Self::Refused { .. } => ErrorKind::Policy,
            Self::UnsupportedAlgorithm { .. }
            | Self::Token(_)
            | Self::TokenUnsupported(_)
            | Self::Unsupported(_)
            | Self::NoSuchKey { .. } => ErrorKind::NoUsableKey,
            _ => ErrorKind::Other,
        }
    }
}

/// What an entry of the store is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// A certificate (ours or a peer's).
    Certificate,
    /// A certificate trusted as a root of chain building.
    TrustAnchor,
    /// A private key with no certificate in the store yet.
    PrivateKey,
    /// An OpenPGP certificate (with its secret keys when `has_private_key`).
    OpenPgpCertificate,
    /// A certificate revocation list, imported from a file (nothing is fetched).
    Crl,
    /// A JSON Web Key bound to addresses (the `jws` profile), with its private key
    /// when `has_private_key`.
    Jwk,
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Certificate => "certificate",
            Self::TrustAnchor => "trust-anchor",
            Self::PrivateKey => "private-key",
            Self::OpenPgpCertificate => "openpgp",
            Self::Crl => "crl",
            Self::Jwk => "jwk",
        })
    }
}

/// One listed entry (no secret material).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KeyEntry {
    /// [`fingerprint`] of the public key, lower-case hex.
    pub fingerprint: String,
    /// What it is.
    #[serde(serialize_with = "display")]
    pub kind: EntryKind,
    /// The public key algorithm.
    #[serde(serialize_with = "display")]
    pub algorithm: KeyAlgorithm,
    /// rfc822Name SANs and subject emailAddress values, lower case.
    pub emails: Vec<String>,
    /// The subject DN (certificates).
    pub subject: Option<String>,
    /// End of validity, RFC 3339 (certificates).
    pub not_after: Option<String>,
    /// Whether the store holds the matching private key.
    pub has_private_key: bool,
}

fn display<T: fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// The store directory `mailseal` uses when given no `--store`: `$MAILSEAL_HOME`, else
/// `$XDG_DATA_HOME/mailseal`, else `~/.local/share/mailseal` (empty variables are
/// ignored); `None` when none of the three is set. The command line keeps the keys
/// and the replay state of a new store in its `mailseal.db`
/// ([`SqliteStore::open`]`(&dir.join("mailseal.db"), None)`), and those of a store an
/// earlier version made in the file layout of a [`DirectoryStore`].
pub fn default_location() -> Option<std::path::PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    env("MAILSEAL_HOME")
        .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("mailseal")))
        .or_else(|| env("HOME").map(|h| h.join(".local/share/mailseal")))
}

/// Our identities in `store`: the addresses of every certificate or OpenPGP key whose
/// private key it holds, lower case, each once. What a signed message must name for us
/// to accept it (the recipient binding's default). A store that cannot be listed
/// yields none, so the check refuses rather than passes.
pub fn own_addresses(store: &dyn KeyStore) -> Vec<String> {
    let mut out: Vec<String> = store
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.has_private_key)
        .flat_map(|e| e.emails)
        .map(|e| e.to_ascii_lowercase())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A certificate from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCertificate {
    /// [`fingerprint`] of its public key.
    pub fingerprint: String,
    /// The DER encoding.
    pub der: Vec<u8>,
    /// Its email addresses, lower case.
    pub emails: Vec<String>,
}

/// A JSON Web Key and the addresses it is bound to (the `jws` profile): a neutral
/// record, the JWK kept as JSON text with its public members only. The private key of
/// one of ours is an ordinary PKCS#8 key of the store under the same `fingerprint`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredJwk {
    /// [`fingerprint`] of the raw public key (what a PKCS#8 key of it is stored under).
    pub fingerprint: String,
    /// The addresses it speaks for, lower case: declared by `key import --jwk FILE
    /// --email ADDR`, by `key import --did`, or by the address's Agent Card.
    pub emails: Vec<String>,
    /// The public JWK (RFC 7517), JSON.
    pub jwk: String,
    /// Where the binding came from: `jwk`, `generated`, `agent-card`, or the DID.
    pub source: String,
}

/// The listing entries with each JWK identity: a private key stored alone under a
/// JWK's fingerprint is listed as that JWK (with its private key).
pub(crate) fn with_jwk_entries(mut entries: Vec<KeyEntry>, jwks: &[StoredJwk]) -> Vec<KeyEntry> {
    for j in jwks {
        let before = entries.len();
        entries.retain(|e| !(e.kind == EntryKind::PrivateKey && e.fingerprint == j.fingerprint));
        let algorithm = match serde_json::from_str::<serde_json::Value>(&j.jwk)
            .ok()
            .as_ref()
            .and_then(|v| v.get("kty"))
            .and_then(serde_json::Value::as_str)
        {
            Some("OKP") => KeyAlgorithm::Ed25519,
            Some("EC") => KeyAlgorithm::Ec,
            Some("RSA") => KeyAlgorithm::Rsa,
            _ => KeyAlgorithm::Other,
        };
        entries.push(KeyEntry {
            fingerprint: j.fingerprint.clone(),
            kind: EntryKind::Jwk,
            algorithm,
            emails: j.emails.clone(),
            subject: Some(j.source.clone()),
            not_after: None,
            has_private_key: entries.len() != before,
        });
    }
    entries
}

/// A private key held in software: PKCS#8 DER, wiped from memory when dropped.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct SecretKey {
    #[zeroize(skip)]
    fingerprint: String,
    #[zeroize(skip)]
    algorithm: KeyAlgorithm,
    pkcs8: Zeroizing<Vec<u8>>,
    /// Set for a key on a PKCS#11 token (then `pkcs8` is empty).
    #[zeroize(skip)]
    token: Option<std::sync::Arc<TokenKey>>,
}

impl SecretKey {
    pub(crate) fn new(
        fingerprint: String,
        algorithm: KeyAlgorithm,
        pkcs8: Zeroizing<Vec<u8>>,
    ) -> Self {
        SecretKey {
            fingerprint,
            algorithm,
            pkcs8,
            token: None,
        }
    }
    /// A key held by a PKCS#11 token: every private-key operation happens there.
    pub fn on_token(fingerprint: String, token: std::sync::Arc<TokenKey>) -> Self {
        SecretKey {
            fingerprint,
            algorithm: token.algorithm(),
            pkcs8: Zeroizing::new(Vec::new()),
            token: Some(token),
        }
    }
    /// The token holding the key, for a PKCS#11 key.
    pub fn token(&self) -> Option<&TokenKey> {
        self.token.as_deref()
    }
    /// The public-key fingerprint this key matches.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
    /// The algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }
    /// The PKCS#8 DER bytes, for the profile that uses the key (empty for a token key).
    pub fn pkcs8_der(&self) -> &[u8] {
        &self.pkcs8
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey")
            .field("fingerprint", &self.fingerprint)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// The entries of an import: each imported key (fingerprint, algorithm) is listed
/// under its certificate, this import's or one already in `store`, else alone.
pub(crate) fn list_keys_with_certificates(
    store: &dyn KeyStore,
    mut entries: Vec<KeyEntry>,
    keys: Vec<(String, KeyAlgorithm)>,
) -> Result<Vec<KeyEntry>, KeyStoreError> {
    for (fpr, alg) in keys {
        if let Some(e) = entries.iter_mut().find(|e| e.fingerprint == fpr) {
            e.has_private_key = true;
        } else if let Some(e) = store.list()?.into_iter().find(|e| e.fingerprint == fpr) {
            entries.push(e);
        } else {
            entries.push(key_only_entry(fpr, alg));
        }
    }
    Ok(entries)
}

/// The entry of a private key whose certificate is not in the store.
pub(crate) fn key_only_entry(fingerprint: String, algorithm: KeyAlgorithm) -> KeyEntry {
    KeyEntry {
        fingerprint,
        kind: EntryKind::PrivateKey,
        algorithm,
        emails: Vec::new(),
        subject: None,
        not_after: None,
        has_private_key: true,
    }
}

/// What `input` holds (certificates and PKCS#8 keys), read as an import would read it
/// but stored nowhere: for inspection and for fuzzing the import parser.
pub fn describe(input: &[u8], what: &str) -> Result<Vec<KeyEntry>, KeyStoreError> {
    describe_with_passphrase(input, what, None)
}

/// As [`describe`], opening encrypted keys and PKCS#12 with `passphrase`.
pub fn describe_with_passphrase(
    input: &[u8],
    what: &str,
    passphrase: Option<&[u8]>,
) -> Result<Vec<KeyEntry>, KeyStoreError> {
    if crate::keystore::openpgp::looks_like_openpgp(input) {
        return Ok(
            crate::keystore::openpgp::read_certs(input, what, passphrase)?
                .into_iter()
                .map(|c| c.entry)
                .collect(),
        );
    }
    let mut out = Vec::new();
    for m in material::read_all(input, what, passphrase)? {
        out.push(match m {
            material::Material::Certificate(cert) => {
                material::cert_entry(&cert, EntryKind::Certificate, false)
            }
            material::Material::PrivateKey { der } => {
                let (algorithm, public) = material::key_public(&der, what)?;
                key_only_entry(fingerprint(&public), algorithm)
            }
            material::Material::Crl(der) => material::crl_entry(&der),
        });
    }
    Ok(out)
}

/// The X.509 certificates in `input`, read as an import reads them (none in an
/// OpenPGP input): what [`crate::identity::pins::check_import_files`] checks against
/// the store's anchors before anything is stored.
pub(crate) fn certificates_in(
    input: &[u8],
    what: &str,
    passphrase: Option<&[u8]>,
) -> Result<Vec<x509_cert::Certificate>, KeyStoreError> {
    if crate::keystore::openpgp::looks_like_openpgp(input) {
        return Ok(Vec::new());
    }
    Ok(material::read_all(input, what, passphrase)?
        .into_iter()
        .filter_map(|m| match m {
            material::Material::Certificate(c) => Some(*c),
            _ => None,
        })
        .collect())
}

/// A store behind a pointer is a store: a caller that keeps its store lends it (`&T`),
/// or one worker shares it between its [`crate::Receiver`] and [`crate::Sender`]
/// (`Rc<T>`, as the gateway does).
macro_rules! delegate_key_store {
    ($($ptr:ty),*) => {$(
        impl<T: KeyStore + ?Sized> KeyStore for $ptr {
            fn import_with_passphrase(
                &self,
                input: &[u8],
                what: &str,
                trusted: bool,
                passphrase: Option<&[u8]>,
            ) -> Result<Vec<KeyEntry>, KeyStoreError> {
                (**self).import_with_passphrase(input, what, trusted, passphrase)
            }
            fn list(&self) -> Result<Vec<KeyEntry>, KeyStoreError> {
                (**self).list()
            }
            fn certificates_for(&self, email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError> {
                (**self).certificates_for(email)
            }
            fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
                (**self).trust_anchors()
            }
            fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
                (**self).own_certificates()
            }
            fn private_key(&self, fingerprint: &str) -> Result<Option<SecretKey>, KeyStoreError> {
                (**self).private_key(fingerprint)
            }
            fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
                (**self).openpgp_certificates()
            }
            fn openpgp_secret_key(
                &self,
                fingerprint: &str,
            ) -> Result<Option<Zeroizing<Vec<u8>>>, KeyStoreError> {
                (**self).openpgp_secret_key(fingerprint)
            }
            fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
                (**self).crls()
            }
            fn intermediates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
                (**self).intermediates()
            }
            fn jwk_identities(&self) -> Result<Vec<StoredJwk>, KeyStoreError> {
                (**self).jwk_identities()
            }
            fn put_jwk_identity(&self, record: &StoredJwk) -> Result<(), KeyStoreError> {
                (**self).put_jwk_identity(record)
            }
            fn token_key_uri(&self, fingerprint: &str) -> Result<Option<String>, KeyStoreError> {
                (**self).token_key_uri(fingerprint)
            }
            fn state_location(&self) -> Option<crate::keystore::StateLocation> {
                (**self).state_location()
            }
        }
    )*};
}
delegate_key_store!(&T, std::rc::Rc<T>, Box<T>);

/// Where keys come from. Implementations: [`DirectoryStore`]; SQLite, PKCS#11 and
/// PostgreSQL adapters plug in behind the same trait.
pub trait KeyStore {
    /// Imports every certificate and private key in `input` (PEM with any number of
    /// blocks, or one DER object). `trusted` makes certificates trust anchors.
    fn import(
        &self,
        input: &[u8],
        what: &str,
        trusted: bool,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        self.import_with_passphrase(input, what, trusted, None)
    }
    /// As [`KeyStore::import`], opening encrypted PKCS#8 keys and PKCS#12 files with
    /// `passphrase`.
    fn import_with_passphrase(
        &self,
        input: &[u8],
        what: &str,
        trusted: bool,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError>;
    /// Every entry.
    fn list(&self) -> Result<Vec<KeyEntry>, KeyStoreError>;
    /// Certificates (not anchors) naming `email`, case-insensitively.
    fn certificates_for(&self, email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError>;
    /// The trust anchors.
    fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError>;
    /// Our own certificates: those whose private key the store holds.
    fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError>;
    /// The private key matching a certificate's fingerprint, if held.
    fn private_key(&self, fingerprint: &str) -> Result<Option<SecretKey>, KeyStoreError>;
    /// Every OpenPGP certificate in the store, binary, without secret key material.
    fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError>;
    /// The transferable secret key (binary, unlocked) of the OpenPGP certificate with
    /// this fingerprint (lower-case hex), if the store holds it.
    fn openpgp_secret_key(
        &self,
        fingerprint: &str,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, KeyStoreError>;
    /// The certificate revocation lists imported (DER). A store that keeps none has
    /// none.
    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        Ok(Vec::new())
    }
    /// The CA certificates imported without --trusted: intermediates a certification
    /// path may go through (never anchors). They let the store, rather than the
    /// message, supply an issuer whose CRL it holds. A store that keeps none has none.
    fn intermediates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        Ok(Vec::new())
    }
    /// Every JSON Web Key identity (the `jws` profile). A store that keeps none has
    /// none.
    fn jwk_identities(&self) -> Result<Vec<StoredJwk>, KeyStoreError> {
        Ok(Vec::new())
    }
    /// Stores a JWK identity, replacing the one of the same fingerprint (its addresses
    /// are the record's: a new binding replaces the old, it does not widen it).
    fn put_jwk_identity(&self, _record: &StoredJwk) -> Result<(), KeyStoreError> {
        Err(KeyStoreError::Unsupported("JSON Web Keys"))
    }
    /// Where the private key of `fingerprint` is when it is on a PKCS#11 token: the
    /// token's URI, without its PIN; `None` for a key held in the store (or none).
    /// Answering opens no token and loads no module, so a listing, or the choice
    /// between an address's keys, works where the token's module may not be loaded.
    fn token_key_uri(&self, _fingerprint: &str) -> Result<Option<String>, KeyStoreError> {
        Ok(None)
    }

    /// Where the replay and stream state kept with these keys lives: a
    /// [`DirectoryStore`] keeps it in its directory's `mailseal.db` (where `mailseal
    /// open --store DIR` keeps it), a
    /// [`SqliteStore`] in its own database, a [`PostgresStore`] in its own database.
    /// A [`crate::Receiver`] or [`crate::Sender`] built over the store uses it unless
    /// told otherwise, so that a message accepted once (by the CLI, by another
    /// receiver, by an earlier run) is refused as a replay. `None`: the store keeps
    /// nothing durable ([`MemoryStore`], a [`TokenStore`]: its state lives with the
    /// store the token's certificates are listed in), and a receiver over it keeps
    /// its state in memory.
    fn state_location(&self) -> Option<crate::keystore::StateLocation> {
        None
    }
}

/// A certificate and its PKCS#8 key as one PEM text (certificate first), the form
/// [`KeyStore::import`] reads; the text is wiped on drop.
pub fn identity_pem(
    cert: &x509_cert::Certificate,
    pkcs8_der: &[u8],
) -> Result<Zeroizing<String>, KeyStoreError> {
    use der::EncodePem;
    fn malformed(e: impl fmt::Display) -> KeyStoreError {
        KeyStoreError::Malformed {
            what: "new identity".into(),
            reason: e.to_string(),
        }
    }
    let mut pem = Zeroizing::new(cert.to_pem(der::pem::LineEnding::LF).map_err(malformed)?);
    pem.push_str(&Zeroizing::new(
        der::pem::encode_string("PRIVATE KEY", der::pem::LineEnding::LF, pkcs8_der)
            .map_err(malformed)?,
    ));
    Ok(pem)
}

/// The CA that issues a new certificate: the store's trust anchor whose fingerprint is
/// `in_store`
/// and its key, or a certificate file and a key file (opened with `passphrase`).
/// `None` when neither is given (self-signed).
pub fn issuer(
    store: &dyn KeyStore,
    in_store: Option<&str>,
    files: Option<(&std::path::Path, &std::path::Path)>,
    passphrase: Option<&[u8]>,
) -> Result<Option<(x509_cert::Certificate, SecretKey)>, KeyStoreError> {
    use der::Decode;
    let unusable = |what: &str, reason: &str| KeyStoreError::Malformed {
        what: what.to_string(),
        reason: reason.to_string(),
    };
    if let Some(fpr) = in_store {
        let cert = store
            .trust_anchors()?
            .into_iter()
            .find(|c| c.fingerprint == fpr)
            .ok_or_else(|| unusable(fpr, "no trust anchor with this fingerprint in the store"))?;
        let key = store
            .private_key(fpr)?
            .ok_or_else(|| unusable(fpr, "the store holds no private key for this CA"))?;
        let cert = x509_cert::Certificate::from_der(&cert.der)
            .map_err(|e| unusable(fpr, &e.to_string()))?;
        return Ok(Some((cert, key)));
    }
    let Some((cert_path, key_path)) = files else {
        return Ok(None);
    };
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|source| KeyStoreError::Io {
            path: p.display().to_string(),
            source,
        })
    };
    let cert_name = cert_path.display().to_string();
    let key_name = key_path.display().to_string();
    let cert = material::read_all(&read(cert_path)?, &cert_name, passphrase)?
        .into_iter()
        .find_map(|m| match m {
            material::Material::Certificate(c) => Some(*c),
            _ => None,
        })
        .ok_or_else(|| unusable(&cert_name, "no certificate in it"))?;
    let key_der = material::read_all(&read(key_path)?, &key_name, passphrase)?
        .into_iter()
        .find_map(|m| match m {
            material::Material::PrivateKey { der } => Some(der),
            _ => None,
        })
        .ok_or_else(|| unusable(&key_name, "no private key in it"))?;
    let (algorithm, public) = material::key_public(&key_der, &key_name)?;
    if public
        != cert
            .tbs_certificate()
            .subject_public_key_info()
            .subject_public_key
            .raw_bytes()
    {
        return Err(unusable(
            &key_name,
            "this key does not belong to the issuer certificate",
        ));
    }
    Ok(Some((
        cert,
        SecretKey::new(fingerprint(&public), algorithm, key_der),
    )))
}

crate::error::verdict_codes!(KeyStoreError, "keystore", {
    Self::Io { .. } => "io",
    Self::Unrecognised { .. } => "unrecognised",
    Self::Malformed { .. } => "malformed",
    Self::UnsupportedAlgorithm { .. } => "unsupported-algorithm",
    Self::PassphraseRequired { .. } => "passphrase-required",
    Self::Token(_) => "token",
    Self::WrongPassphrase => "wrong-passphrase",
    Self::Locked => "locked",
    Self::Database(_) => "database",
    Self::TokenUnsupported(_) => "token-unsupported",
    Self::Unsupported(_) => "unsupported",
    Self::Permissions { .. } => "permissions",
    Self::NotAStore { .. } => "not-a-store",
    Self::NoSuchKey { .. } => "no-such-key",
    Self::AmbiguousFingerprint { .. } => "ambiguous-fingerprint",
    Self::UnsupportedCrl { .. } => "unsupported-crl",
    Self::Refused { .. } => "refused",
});
