//! An identity in one call, and what a peer needs of it in one more: the library's
//! form of `mailseal key generate --kind K --email ADDR --cert-out FILE` and `key
//! import`, so that a program needs neither the profiles' key types nor PEM surgery.
//!
//! The calls are methods of every store ([`Identities`], implemented for each
//! [`KeyStore`]):
//!
//! ```
//! use mailseal::keystore::{KeyStore, MemoryStore};
//! use mailseal::{Identities, IdentityKind, ImportAs};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (alice, bob) = (MemoryStore::new(), MemoryStore::new());
//! alice.generate_identity(IdentityKind::Smime, "alice@example.org")?;
//! bob.generate_identity(IdentityKind::Smime, "bob@example.org")?;
//! // Each gives the other its certificate (never its key), pinned on import.
//! bob.import_as(&alice.export_public(IdentityKind::Smime, "alice@example.org")?, ImportAs::Peer)?;
//! alice.import_as(&bob.export_public(IdentityKind::Smime, "bob@example.org")?, ImportAs::Peer)?;
//! assert_eq!(bob.certificates_for("alice@example.org")?.len(), 1);
//! # Ok(()) }
//! ```

use der::Decode;

use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::{EntryKind, KeyEntry, KeyStore, KeyStoreError, StoredCertificate};

/// The kinds of identity a store can make: one per signing profile (MLS credentials
/// live in the MLS state, [`crate::mls::Mls::generate_identity`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityKind {
    /// An S/MIME identity: a P-256 key and a self-signed email certificate, valid a
    /// year (`key generate --kind smime`). A peer pins the certificate when it
    /// imports it; a CA's certificate instead takes [`crate::smime::generate`].
    Smime,
    /// An OpenPGP key: v4 Ed25519/Cv25519, which GnuPG 2.2 reads (`key generate
    /// --kind openpgp`).
    OpenPgp,
    /// An Ed25519 JSON Web Key for the detached-jws profile (`key generate --kind
    /// jws`).
    Jws,
}

impl std::fmt::Display for IdentityKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Smime => "S/MIME",
            Self::OpenPgp => "OpenPGP",
            Self::Jws => "JWS",
        })
    }
}

/// What an import is: the typed form of [`KeyStore::import`]'s label and flag.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportAs {
    /// A peer's certificates (X.509 PEM or DER, an OpenPGP certificate), as
    /// [`Identities::export_public`] writes them: they speak for the addresses they
    /// name. A private key in it is refused: a peer never hands one over. Compared,
    /// as `mailseal key import` compares them, with what the store holds for each
    /// address they name (a pinned certificate or key, one of our own identities, a
    /// card's or a JWK's pin): a key that would change it is refused
    /// ([`IdentityError::Pin`]), so a bundle from anyone cannot take over an address
    /// the store already knows. A certificate that chains to one of the store's
    /// trust anchors is vouched for by that anchor and not compared.
    Peer,
    /// As [`ImportAs::Peer`], accepting keys that change what the store holds for
    /// an address: after the change was checked with the peer out of band (`key
    /// import --accept-changed`).
    PeerChanged,
    /// Our own identity: certificates with their private keys (PEM, DER, PKCS#8, an
    /// OpenPGP secret key).
    Own,
    /// CA certificates, trusted as roots of chain building.
    TrustAnchor,
    /// A peer's public JSON Web Key (detached-jws), bound to this address: nothing in
    /// a JWK names one, so the binding is the importer's to declare. Refused when the
    /// address is pinned to another key, or the key is bound to another address
    /// (`key import --jwk` without `--accept-changed` or `--rebind`).
    PeerJwk(String),
}

/// Why an identity was not made, exported or imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] KeyStoreError),
    /// Making the S/MIME certificate failed.
    #[error(transparent)]
    Smime(#[from] crate::smime::SmimeError),
    /// Making, reading or binding the JWK failed.
    #[error(transparent)]
    Jws(#[from] crate::jws::JwsError),
    /// The store holds no identity of this kind (with its private key) for the address.
    #[error("no {kind} identity of ours for {} in the store", crate::error::quoted(.address))]
    NoIdentity {
        /// The kind asked for.
        kind: IdentityKind,
        /// The address.
        address: String,
    },
    /// What the import offers changes what the store holds for an address.
    #[error(transparent)]
    Pin(#[from] crate::identity::pins::PinError),
    /// The store's peer policies (cards' pins) could not be read.
    #[error("the peer policies of the store: {0}")]
    Policies(#[source] crate::ext::peers::PeerPolicyError),
    /// A peer's bundle holds a private key.
    #[error("a peer's certificates hold a private key: import our own identity with ImportAs::Own, and never give a private key to a peer")]
    PrivateKeyFromPeer,
}

impl Classify for IdentityError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InternalError
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            Self::Smime(e) => e.kind(),
            Self::Jws(e) => e.kind(),
            Self::NoIdentity { .. } => ErrorKind::NoUsableKey,
            Self::Pin(_) => ErrorKind::Policy,
            Self::Policies(_) => ErrorKind::Other,
            Self::PrivateKeyFromPeer => ErrorKind::InvalidArgument,
        }
    }
}

/// Identities in one call, for every key store: `store.generate_identity(kind,
/// addr)`, `store.export_public(kind, addr)`, `store.import_as(bytes, what)`.
pub trait Identities {
    /// Makes a new identity of `kind` for `email` in this store (see [`IdentityKind`]
    /// for what each kind makes), and returns what was stored.
    fn generate_identity(
        &self,
        kind: IdentityKind,
        email: &str,
    ) -> Result<Vec<KeyEntry>, IdentityError>;
    /// What a peer needs of our identity of `kind` for `email` (certificates, never a
    /// private key), as [`Identities::import_as`] with [`ImportAs::Peer`] (a JWK:
    /// [`ImportAs::PeerJwk`]) reads it on the other side.
    fn export_public(&self, kind: IdentityKind, email: &str) -> Result<Vec<u8>, IdentityError>;
    /// Imports `input` as `what` says ([`ImportAs`]): the typed form of
    /// [`KeyStore::import`].
    fn import_as(&self, input: &[u8], what: ImportAs) -> Result<Vec<KeyEntry>, IdentityError>;
}

impl<S: KeyStore> Identities for S {
    fn generate_identity(
        &self,
        kind: IdentityKind,
        email: &str,
    ) -> Result<Vec<KeyEntry>, IdentityError> {
        generate_identity(self, kind, email)
    }
    fn export_public(&self, kind: IdentityKind, email: &str) -> Result<Vec<u8>, IdentityError> {
        export_public(self, kind, email)
    }
    fn import_as(&self, input: &[u8], what: ImportAs) -> Result<Vec<KeyEntry>, IdentityError> {
        import_as(self, input, what)
    }
}

impl Identities for dyn KeyStore + '_ {
    fn generate_identity(
        &self,
        kind: IdentityKind,
        email: &str,
    ) -> Result<Vec<KeyEntry>, IdentityError> {
        generate_identity(self, kind, email)
    }
    fn export_public(&self, kind: IdentityKind, email: &str) -> Result<Vec<u8>, IdentityError> {
        export_public(self, kind, email)
    }
    fn import_as(&self, input: &[u8], what: ImportAs) -> Result<Vec<KeyEntry>, IdentityError> {
        import_as(self, input, what)
    }
}

/// Makes a new identity of `kind` for `email` in `store` (see [`IdentityKind`]) and
/// returns what was stored.
pub fn generate_identity(
    store: &dyn KeyStore,
    kind: IdentityKind,
    email: &str,
) -> Result<Vec<KeyEntry>, IdentityError> {
    match kind {
        IdentityKind::Smime => {
            let request = crate::smime::IdentityRequest::new(email);
            let mut entries = Vec::new();
            for id in crate::smime::generate(&request, None)? {
                let pem = crate::keystore::identity_pem(&id.certificate, &id.private_key)?;
                entries.extend(store.import(pem.as_bytes(), "new identity", false)?);
            }
            Ok(entries)
        }
        IdentityKind::OpenPgp => {
            let tsk = crate::keystore::openpgp::generate(
                email,
                None,
                crate::openpgp::KeyProfile::Rfc4880,
            )?;
            Ok(store.import(&tsk, "new identity", false)?)
        }
        IdentityKind::Jws => {
            let entry = crate::jws::jwk::generate(store, email, crate::jws::JwsAlgorithm::EdDsa)?;
            Ok(vec![entry])
        }
    }
}

/// What a peer needs of our identity of `kind` for `email`, in the form
/// [`Identities::import_as`] reads on the other side: S/MIME, the PEM certificates of
/// ours naming the address, each followed by the store's certificates of its issuers;
/// OpenPGP, the armored certificate; JWS, the public JWK (JSON). Never a private key.
pub fn export_public(
    store: &dyn KeyStore,
    kind: IdentityKind,
    email: &str,
) -> Result<Vec<u8>, IdentityError> {
    let address = email.trim().to_ascii_lowercase();
    let none = || IdentityError::NoIdentity {
        kind,
        address: address.clone(),
    };
    let ours: Vec<KeyEntry> = store
        .list()?
        .into_iter()
        .filter(|e| e.has_private_key && e.emails.contains(&address))
        .collect();
    let of_kind = |k: EntryKind| ours.iter().filter(move |e| e.kind == k);
    match kind {
        IdentityKind::Smime => {
            let own: Vec<String> = of_kind(EntryKind::Certificate)
                .map(|e| e.fingerprint.clone())
                .collect();
            let certs: Vec<_> = store
                .own_certificates()?
                .into_iter()
                .filter(|c| own.contains(&c.fingerprint))
                .collect();
            if certs.is_empty() {
                return Err(none());
            }
            let mut issuers = store.intermediates()?;
            issuers.extend(store.trust_anchors()?);
            let mut pem = String::new();
            let mut written: Vec<Vec<u8>> = Vec::new();
            for c in &certs {
                for der in with_issuers(&c.der, &issuers) {
                    if !written.contains(&der) {
                        pem.push_str(&certificate_pem(&der)?);
                        written.push(der);
                    }
                }
            }
            Ok(pem.into_bytes())
        }
        IdentityKind::OpenPgp => {
            let fpr = of_kind(EntryKind::OpenPgpCertificate)
                .map(|e| e.fingerprint.clone())
                .next()
                .ok_or_else(none)?;
            let cert = store
                .openpgp_certificates()?
                .into_iter()
                .find(|c| {
                    crate::keystore::openpgp::parse_stored(c)
                        .is_some_and(|p| p.fingerprint().to_hex().eq_ignore_ascii_case(&fpr))
                })
                .ok_or_else(none)?;
            Ok(crate::keystore::openpgp::armored_certificate(&cert)?)
        }
        IdentityKind::Jws => {
            let fpr = of_kind(EntryKind::Jwk)
                .map(|e| e.fingerprint.clone())
                .next()
                .ok_or_else(none)?;
            let record = store
                .jwk_identities()?
                .into_iter()
                .find(|r| r.fingerprint == fpr)
                .ok_or_else(none)?;
            let jwk = crate::jws::Jwk::parse(record.jwk.as_bytes())?;
            let mut text = serde_json::to_string_pretty(&jwk.public_value()).unwrap_or_default();
            text.push('\n');
            Ok(text.into_bytes())
        }
    }
}

/// Imports `input` as `what` says (see [`ImportAs`]).
pub fn import_as(
    store: &dyn KeyStore,
    input: &[u8],
    what: ImportAs,
) -> Result<Vec<KeyEntry>, IdentityError> {
    match what {
        ImportAs::Peer | ImportAs::PeerChanged => {
            let name = "peer certificate";
            if crate::keystore::describe(input, name)?
                .iter()
                .any(|e| e.has_private_key)
            {
                return Err(IdentityError::PrivateKeyFromPeer);
            }
            let policies = policies_of(store)?;
            let pin_of = |a: &str| {
                policies
                    .pin(store, a)
                    .map_err(|e| crate::identity::pins::PinError::Store {
                        address: a.to_string(),
                        reason: e.to_string(),
                    })
            };
            crate::identity::pins::check_import_files(
                store,
                &[(input.to_vec(), name.to_string())],
                None,
                false,
                &pin_of,
                what == ImportAs::PeerChanged,
                time::OffsetDateTime::now_utc(),
            )?;
            Ok(store.import(input, name, false)?)
        }
        ImportAs::Own => Ok(store.import(input, "own identity", false)?),
        ImportAs::TrustAnchor => Ok(store.import(input, "trust anchor", true)?),
        ImportAs::PeerJwk(address) => {
            let jwk = crate::jws::Jwk::parse(input)?;
            if jwk.is_private() {
                return Err(IdentityError::PrivateKeyFromPeer);
            }
            let held = policies_of(store)?
                .pin(store, &address)
                .map_err(IdentityError::Store)?;
            Ok(vec![crate::jws::jwk::import(
                store,
                &jwk,
                &[address],
                "jwk",
                &[held],
                false,
                &[],
            )?])
        }
    }
}

/// The peer policies kept with `store` (its cards' pins): beside a local store's
/// state, or in its PostgreSQL database; none for a store without durable state.
fn policies_of(store: &dyn KeyStore) -> Result<crate::ext::peers::PeerPolicies, IdentityError> {
    use crate::ext::peer_home::PeerPolicyHome;
    let home = match store.state_location() {
        Some(crate::keystore::StateLocation::Sqlite(path)) => path
            .parent()
            .map(|dir| PeerPolicyHome::Dir(dir.to_path_buf())),
        Some(crate::keystore::StateLocation::Postgres(url)) => Some(PeerPolicyHome::Postgres(url)),
        _ => None,
    };
    match home {
        Some(home) => home.load().map_err(IdentityError::Policies),
        None => Ok(crate::ext::peers::PeerPolicies::default()),
    }
}

/// `der` followed by the certificates of its issuers among `issuers`, up to a
/// self-issued one (a bounded walk: a loop in the store ends it).
fn with_issuers(der: &[u8], issuers: &[StoredCertificate]) -> Vec<Vec<u8>> {
    let mut chain = vec![der.to_vec()];
    let mut current = x509_cert::Certificate::from_der(der).ok();
    while let Some(cert) = current.take() {
        let tbs = cert.tbs_certificate();
        if tbs.issuer() == tbs.subject() || chain.len() > 8 {
            break;
        }
        let next = issuers.iter().find_map(|i| {
            let c = x509_cert::Certificate::from_der(&i.der).ok()?;
            (c.tbs_certificate().subject() == tbs.issuer() && !chain.contains(&i.der))
                .then(|| (i.der.clone(), c))
        });
        if let Some((der, c)) = next {
            chain.push(der);
            current = Some(c);
        }
    }
    chain
}

fn certificate_pem(der: &[u8]) -> Result<String, KeyStoreError> {
    der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, der).map_err(|e| {
        KeyStoreError::Malformed {
            what: "stored certificate".into(),
            reason: e.to_string(),
        }
    })
}
