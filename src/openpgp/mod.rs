//! The OpenPGP/MIME profile (RFC 3156 with RFC 9580 packets), on `sequoia-openpgp`:
//! the inner MailA2A entity (RFC 9788 header protection) signed and then encrypted as
//! one OpenPGP message in `multipart/encrypted; protocol="application/pgp-encrypted"`,
//! or signed only in `multipart/signed; protocol="application/pgp-signature"`.
//!
//! Sealing writes SEIPDv2 (AEAD) when every recipient's certificate advertises it, else
//! SEIPDv1 (MDC), with Intended Recipient Fingerprint subpackets. Opening never
//! releases plaintext before the integrity check and every signature check passed:
//! Sequoia buffers the message until then, within a budget tied to the message's size
//! (`open`: compressed content inflates to at most four times the message, or 8 MiB).

mod armor;
mod certify;
mod describe;
mod elgamal;
pub(crate) mod framing;
pub(crate) use crate::keystore::openpgp as keys;
pub(crate) mod offline;
mod open;
mod parsed;
mod seal;
mod seeded;
pub(crate) use seal::{Packets, Recipients};
pub mod sop;
mod unhashed;

use sequoia_openpgp as openpgp;

use openpgp::cert::Cert;
use openpgp::policy::StandardPolicy;

use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::{KeyStore, KeyStoreError};
use crate::profile::Profile;
use crate::seal::{OpenError, SealError};

/// The one-pass armor reader, for the fuzz target that checks it against Sequoia's.
#[doc(hidden)]
pub use armor::dearmor;
pub use describe::describe;
/// The ElGamal session-key block decoder, for the fuzz target that checks it against a
/// plain reference.
#[doc(hidden)]
pub use elgamal::unpad as eme_pkcs1_v15_decode;
pub use keys::{generate, KeyProfile};
pub use open::DecryptedMessage;
/// The readings of malformed Issuer Fingerprints, for the fuzz target that checks them
/// against Sequoia's parser.
#[doc(hidden)]
pub use unhashed::{
    drop_malformed_issuer_fingerprints, signatures_with_embedded_fingerprints_kept,
};

/// Why an OpenPGP layer failed to verify or to be made. Never carries content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenPgpError {
    /// The PGP/MIME structure or the OpenPGP packets do not parse.
    #[error("OpenPGP structure: {0}")]
    Malformed(String),
    /// Encrypted without integrity protection (a SED packet, EFAIL): never read.
    #[error("symmetrically encrypted data without integrity protection (SED) is refused")]
    NoIntegrity,
    /// The content is not signed (plain or only encrypted): the sender is not
    /// authenticated.
    #[error("the content is not signed: the sender is not authenticated")]
    Unsigned,
    /// A signature does not verify, or its key was not valid for signing when it was
    /// made (expired, revoked, not a signing key).
    #[error("bad signature: {0}")]
    BadSignature(String),
    /// The signature was made by a certificate the store does not hold.
    #[error("the signer's certificate is unknown: import it")]
    UnknownSigner,
    /// No key of ours is a recipient of the message.
    #[error("no key of ours is a recipient of this message")]
    NotForUs,
    /// A session key was found but the encrypted data does not decrypt and
    /// authenticate (changed ciphertext, failed MDC or AEAD tag).
    #[error("the encrypted content does not decrypt and authenticate: {0}")]
    Undecryptable(String),
    /// The signature names its intended recipients and we are not one of them: the
    /// message was re-encrypted to us by someone else (surreptitious forwarding).
    #[error("we are not an intended recipient of the signature (forwarded message)")]
    NotIntendedRecipient,
    /// A key of ours cannot be used.
    #[error("{0}")]
    Key(String),
    /// The content (after decompression) is larger than the decoded-bytes limit: an
    /// error, never a truncation.
    #[error("the OpenPGP content exceeds {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// Compressed content inflates past its budget, a multiple of the message's size
    /// ([`crate::Limits::inflation_budget`]): an error, never a truncation.
    #[error(
        "the compressed OpenPGP content inflates past {limit} bytes: at most {ratio} times the message's size (at least {floor} bytes) is read"
    )]
    Inflated {
        /// The budget.
        limit: usize,
        /// [`crate::Limits::inflation_ratio`].
        ratio: usize,
        /// [`crate::Limits::inflation_floor`].
        floor: usize,
    },
    /// Sequoia failed while building the message (a key that cannot be used, an I/O
    /// error while writing packets).
    #[error("OpenPGP: {0}")]
    Sequoia(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The signed entity contains the random boundary (about 2^-192 a message).
    #[error("the multipart boundary occurs in the signed entity")]
    BoundaryCollision,
    /// Offline signing: a signature template or response that does not hold together
    /// (another key, a subpacket the offline host does not sign, another time).
    #[error("offline signing: {0}")]
    OfflineRequest(String),
}

impl Classify for OpenPgpError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InvalidRequestError
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotForUs | Self::Key(_) => ErrorKind::NoUsableKey,
            Self::NotIntendedRecipient => ErrorKind::Policy,
            Self::TooLarge { .. }
            | Self::Inflated { .. }
            | Self::Malformed(_)
            | Self::OfflineRequest(_) => ErrorKind::Malformed,
            Self::Sequoia(_) | Self::BoundaryCollision => ErrorKind::Other,
            // A signer whose certificate we do not hold has not authenticated the sender.
            Self::UnknownSigner
            | Self::NoIntegrity
            | Self::Unsigned
            | Self::BadSignature(_)
            | Self::Undecryptable(_) => ErrorKind::Authentication,
        }
    }
}

impl From<OpenPgpError> for OpenError {
    fn from(e: OpenPgpError) -> Self {
        use crate::message::MessageError;
        match e {
            OpenPgpError::TooLarge { limit } => {
                return OpenError::Malformed(MessageError::DecodedTooLarge { limit });
            }
            OpenPgpError::Inflated {
                limit,
                ratio,
                floor,
            } => {
                return OpenError::Malformed(MessageError::InflatedTooLarge {
                    limit,
                    ratio,
                    floor,
                });
            }
            _ => {}
        }
        OpenError::profile(Profile::OpenPgp, e)
    }
}

impl From<OpenPgpError> for SealError {
    fn from(e: OpenPgpError) -> Self {
        SealError::profile(Profile::OpenPgp, e)
    }
}

/// The OpenPGP profile over a key store.
pub struct OpenPgp<'s> {
    store: &'s dyn KeyStore,
    policy: StandardPolicy<'static>,
    parsed: std::sync::Arc<parsed::Parsed>,
}

/// The certificates and secret keys an [`OpenPgp`] has parsed, kept by a long-lived
/// owner ([`crate::Receiver`], [`crate::Sender`]) across the `OpenPgp` it builds per
/// message. Reused only for the same store bytes.
#[derive(Clone, Default)]
#[doc(hidden)]
pub struct CertCache(std::sync::Arc<parsed::Parsed>);

impl<'s> OpenPgp<'s> {
    /// The profile using `store` for our secret keys and peers' certificates, under
    /// Sequoia's standard policy.
    pub fn new(store: &'s dyn KeyStore) -> Self {
        OpenPgp {
            store,
            policy: StandardPolicy::new(),
            parsed: Default::default(),
        }
    }

    /// As [`OpenPgp::new`], reusing what `cache` holds and adding to it.
    #[doc(hidden)]
    pub fn with_cache(store: &'s dyn KeyStore, cache: &CertCache) -> Self {
        OpenPgp {
            store,
            policy: StandardPolicy::new(),
            parsed: cache.0.clone(),
        }
    }

    /// Every certificate in the store that parses and conforms, with its addresses.
    pub(super) fn certificates(&self) -> Result<std::sync::Arc<parsed::View>, KeyStoreError> {
        Ok(self.parsed.view(self.store.openpgp_certificates()?))
    }

    /// The certificates of `view` with a User ID for `address` valid now (sealing is
    /// judged at the sender's clock), newest first: see [`parsed::View::certificates_for`].
    pub(super) fn certificates_for<'v>(view: &'v parsed::View, address: &str) -> Vec<&'v Cert> {
        view.certificates_for(
            address,
            &StandardPolicy::new(),
            std::time::SystemTime::now(),
        )
    }

    /// Our transferable secret key for `cert`, if the store holds it.
    fn secret_for(
        &self,
        cert: &Cert,
    ) -> Result<Option<std::sync::Arc<parsed::Secret>>, KeyStoreError> {
        Ok(self
            .store
            .openpgp_secret_key(&keys::fingerprint(cert))?
            .and_then(|b| self.parsed.secret(&b, &self.policy)))
    }
}

crate::error::verdict_codes!(OpenPgpError, "openpgp", {
    Self::Malformed(_) => "malformed",
    Self::NoIntegrity => "no-integrity",
    Self::Unsigned => "unsigned",
    Self::BadSignature(_) => "bad-signature",
    Self::UnknownSigner => "unknown-signer",
    Self::NotForUs => "not-for-us",
    Self::Undecryptable(_) => "undecryptable",
    Self::NotIntendedRecipient => "not-intended-recipient",
    Self::Key(_) => "key",
    Self::TooLarge { .. } => "too-large",
    Self::Inflated { .. } => "inflated",
    Self::Sequoia(_) => "internal",
    Self::BoundaryCollision => "boundary-collision",
    Self::OfflineRequest(_) => "offline-request",
});
