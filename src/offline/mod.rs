//! Offline signing: the message is prepared on the connected host, signed on an
//! air-gapped one, and assembled on the connected host again.
//!
//! 1. [`prepare`] (connected host, which holds the signer's certificate or public
//!    key only) writes a [`SigningRequest`]: the signed entity, the exact bytes the key
//!    signs (CMS signed attributes, the OpenPGP signature trailer, the JWS protected
//!    header), the values the entity covers, the signer and the time.
//! 2. [`review`] (offline host) recomputes every one of those from the entity itself
//!    (the parsed message, its binding rules, the digest inside the signed attributes,
//!    the OpenPGP subpackets, the JWS header its key makes, the boundary) and refuses
//!    a request whose parts disagree; [`Review::summary`] is what the operator reads
//!    (everything the signature covers: [`Summary`]), and [`Review::confirms`] what
//!    the operator types back (the first [`CONFIRM_CHARS`] characters of the request's
//!    digest) before [`Review::sign`] makes the [`SigningResponse`]. Nothing on this
//!    path touches the network.
//! 3. [`assemble`] (connected host) checks the response answers this request, by this
//!    signer, and that the signature verifies, then writes the message exactly as a
//!    signed-only seal writes it ([`crate::Sender::assemble`] adds the sender rules and
//!    the optional encryption).
//!
//! Every signed-only seal writes its boundary from the entity and the time, and the
//! profiles' own writers lay the message out here and there: the same message, key and
//! time give the same bytes, whichever way it was signed (for signature schemes that
//! are deterministic: RSA PKCS#1 v1.5, Ed25519; OpenPGP's salt notation is chosen by
//! the connected host, a seal chooses its own).

mod flow;
mod log;
#[cfg(feature = "qr")]
pub mod qr;
mod request;
mod summary;

pub use flow::CONFIRM_CHARS;
pub use flow::{assemble, prepare, review, Assembled, Offline, Review};
pub use log::{LogEntry, LogError, SigningLog};
pub use request::{short_fingerprint, Covers, SigningRequest, SigningResponse, MAX_TEXT};
pub use summary::Summary;

use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::KeyStoreError;
use crate::message::MessageError;
use crate::profile::Profile;
use crate::seal::SealError;

/// Why a request was not made, signed or assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OfflineError {
    /// The text is not a well-formed request or response.
    #[error("the {what} is malformed: {why}")]
    Malformed {
        /// Which object.
        what: String,
        /// Why.
        why: String,
    },
    /// The request's parts disagree with each other or with the entity (a value
    /// changed between the hosts).
    #[error("refused: {0}")]
    Inconsistent(String),
    /// The response answers another request.
    #[error("the response answers request {found}, not {expected}")]
    WrongRequest {
        /// This request's fingerprint.
        expected: String,
        /// The one the response names.
        found: String,
    },
    /// The response names another signer than the request.
    #[error("the response is by {found}, the request asks {expected}")]
    WrongSigner {
        /// The request's signer.
        expected: String,
        /// The response's.
        found: String,
    },
    /// The profile has no offline signing (MLS: group secrets are not signatures).
    #[error("profile {0} is not signed offline")]
    Unsupported(Profile),
    /// Encryption after offline signing was asked of detached-jws, which is signed
    /// only.
    #[error("detached-jws messages are signed only: encrypt under S/MIME or OpenPGP")]
    NotEncryptable,
    /// The signed entity is not a valid MailA2A message.
    #[error("the signed entity: {0}")]
    Message(#[from] MessageError),
    /// The signed entity breaks a binding rule.
    #[error("the signed entity breaks the binding: {0}")]
    Invalid(String),
    /// The profile refused or failed (no certificate, a bad signature, a key that
    /// cannot sign).
    #[error(transparent)]
    Seal(#[from] SealError),
    /// The key store failed.
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
    /// The summary is longer than the default view and the full view was not asked
    /// for: nothing is signed that the operator could not have read.
    #[error(
        "the summary has {lines} lines and the default view shows {view}: nothing signed \
         unless the full view is asked for"
    )]
    SummaryTooLong {
        /// The summary's lines.
        lines: usize,
        /// The default view's.
        view: usize,
    },
}

impl Classify for OfflineError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Seal(e) => e.a2a_error(),
            _ => A2aErrorType::InvalidRequestError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Malformed { .. } | Self::Message(_) | Self::Invalid(_) => ErrorKind::Malformed,
            Self::Inconsistent(_) | Self::WrongRequest { .. } | Self::WrongSigner { .. } => {
                ErrorKind::Authentication
            }
            Self::Unsupported(_) | Self::NotEncryptable => ErrorKind::InvalidArgument,
            Self::SummaryTooLong { .. } => ErrorKind::Policy,
            Self::Seal(e) => e.kind(),
            Self::KeyStore(e) => e.kind(),
        }
    }
}
