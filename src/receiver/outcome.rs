//! What a received message came to, and why one was refused.

use crate::error::{A2aErrorType, Classify, ErrorKind};
pub use crate::mls::Handshake;
use crate::mls::{MlsError, Received as MlsReceived};
use crate::replay::{Admission, Candidate, ReceiverError};
use crate::seal::{OpenError, Opened};

/// A verified application message: the inner message with its verdict, and what the
/// receiver rules read of it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Delivery {
    /// The inner message and the verdict.
    pub opened: Opened,
    /// What the rules need of it (signer, `messageId`, stream position).
    pub candidate: Candidate,
}

impl Delivery {
    pub(super) fn new(opened: Opened) -> Result<Self, ReceiverError> {
        let candidate = Candidate::from_opened(&opened)?;
        Ok(Delivery { opened, candidate })
    }

    /// The addresses the sealed message itself names as its recipients: its protected
    /// To and Cc, normalized. Its sender is not one: a message mailed back to the
    /// address that sent it is a reflection, not a copy (see
    /// [`crate::identity::recipients`]).
    pub fn named_recipients(&self) -> Vec<String> {
        let h = &self.opened.message.headers;
        h.to.iter()
            .chain(&h.cc)
            .map(crate::message::Mailbox::normalized)
            .collect()
    }

    /// Whether a transport recipient (an SMTP `RCPT TO`) is one the sealed message was
    /// meant for: named in its protected To or Cc, or reached through one of `aliases` the message names (a list expanded before
    /// us). The receiver rules check that the message names one of our addresses; a
    /// gateway that holds the keys of many agents must also check that it goes to
    /// those it names, or a message for one agent, forwarded to another, would reach
    /// that one with a passing verdict.
    pub fn meant_for(&self, address: &str, aliases: &[String]) -> bool {
        let address = crate::message::Mailbox::new(address).normalized();
        let named = self.named_recipients();
        named.contains(&address)
            || aliases
                .iter()
                .any(|a| named.contains(&crate::message::Mailbox::new(a).normalized()))
    }

    /// The verified message (headers, envelope, attachments).
    pub fn message(&self) -> &crate::message::MailA2aMessage {
        &self.opened.message
    }

    /// The protected envelope.
    pub fn envelope(&self) -> &crate::envelope::Envelope {
        self.opened.message.envelope()
    }

    /// The envelope's `payload`, read as `T` (a `serde_json::Value`, or a type of the
    /// caller's); `None` when absent or not a `T`.
    pub fn payload<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        self.envelope().get("payload")
    }

    /// The output an agent acts on: the protected envelope JSON, as received, and a
    /// line end.
    pub fn envelope_json(&self) -> Vec<u8> {
        let json = self.opened.message.envelope_bytes();
        let mut b = Vec::with_capacity(json.len() + 1);
        b.extend_from_slice(json);
        b.push(b'\n');
        b
    }
}

/// Why a message waits.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum HeldReason {
    /// A stream event whose stream misses earlier events: recorded on commit, and
    /// delivered by [`super::Receiver::take_stream_events`] once the gap is filled.
    Stream {
        /// The event.
        delivery: Box<Delivery>,
        /// The sequence numbers still missing before it.
        missing: Vec<u64>,
    },
    /// An MLS message for an epoch not reached yet: kept (on commit) until the Commits
    /// leading there arrive; [`super::Receiver::next_released`] gives it back then.
    Epoch {
        /// The group id (base64url).
        group: String,
        /// The message's epoch.
        epoch: u64,
        /// Ours.
        current: u64,
    },
}

/// What a message came to.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Outcome {
    /// Give it to the agent.
    Deliver {
        /// The message.
        delivery: Box<Delivery>,
        /// A request repeating an accepted idempotency key with the same operation:
        /// the `messageId` that first used it. Do not perform the operation twice.
        retry_of: Option<String>,
        /// Held stream events this one released ([`super::Receiver::take_stream_events`]).
        released: u64,
    },
    /// Accepted before with the same bytes (an SMTP redelivery): not delivered again.
    Duplicate {
        /// The message, when it was opened (an MLS message seen before is not).
        delivery: Option<Box<Delivery>>,
        /// When it was first accepted (or, MLS, first seen), Unix seconds.
        first_accepted: i64,
    },
    /// Waits for something else first.
    Held(HeldReason),
    /// An MLS handshake message.
    Handshake(Handshake),
}

impl Outcome {
    pub(super) fn from_admission(delivery: Box<Delivery>, admission: Admission) -> Outcome {
        match admission {
            Admission::Deliver { retry_of, released } => Outcome::Deliver {
                delivery,
                retry_of,
                released,
            },
            Admission::Duplicate { first_accepted } => Outcome::Duplicate {
                delivery: Some(delivery),
                first_accepted,
            },
            Admission::Held { missing } => Outcome::Held(HeldReason::Stream { delivery, missing }),
        }
    }

    /// The application message of this outcome (the rules decide again on commit).
    pub(super) fn into_delivery(self) -> Result<Box<Delivery>, Outcome> {
        match self {
            Outcome::Deliver { delivery, .. }
            | Outcome::Duplicate {
                delivery: Some(delivery),
                ..
            }
            | Outcome::Held(HeldReason::Stream { delivery, .. }) => Ok(delivery),
            other => Err(other),
        }
    }

    /// The outcome of an MLS mail that is not an application message.
    pub(super) fn from_mls(r: &MlsReceived) -> Outcome {
        match r {
            MlsReceived::Handshake(h) => Outcome::Handshake(h.clone()),
            MlsReceived::Duplicate { first_seen, .. } => Outcome::Duplicate {
                delivery: None,
                first_accepted: *first_seen,
            },
            MlsReceived::Held {
                group,
                epoch,
                current,
            } => Outcome::Held(HeldReason::Epoch {
                group: group.clone(),
                epoch: *epoch,
                current: *current,
            }),
            // Application messages are taken before this is called.
            MlsReceived::Application(_) => unreachable!("an application message is delivered"),
        }
    }

    /// The message, when this outcome carries one.
    pub fn delivery(&self) -> Option<&Delivery> {
        match self {
            Outcome::Deliver { delivery, .. }
            | Outcome::Duplicate {
                delivery: Some(delivery),
                ..
            }
            | Outcome::Held(HeldReason::Stream { delivery, .. }) => Some(delivery),
            _ => None,
        }
    }

    /// The message to give the agent: `Some` only for [`Outcome::Deliver`] (a
    /// duplicate or a held event is not to be acted on now).
    pub fn delivered(&self) -> Option<&Delivery> {
        match self {
            Outcome::Deliver { delivery, .. } => Some(delivery),
            _ => None,
        }
    }

    /// One word for what happened: `deliver`, `duplicate`, `held`, or the handshake
    /// (`joined`, `applied`, `queued`, `group-info`, `key-package`, `stale`).
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Deliver { .. } => "deliver",
            Outcome::Duplicate { .. } => "duplicate",
            Outcome::Held(_) => "held",
            Outcome::Handshake(h) => match h {
                Handshake::Joined { .. } => "joined",
                Handshake::Committed { .. } => "applied",
                Handshake::Proposal { .. } => "queued",
                Handshake::KeyPackage { .. } => "key-package",
                Handshake::Stale { .. } => "stale",
            },
        }
    }
}

/// Why a message was refused. Each variant keeps the error of the layer that refused
/// it, with its kind: a malformed CMS stays a format error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// Verification, decryption, binding or the protection minimum.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The MLS layer (framing, membership, epochs, the group state).
    #[error(transparent)]
    Mls(#[from] MlsError),
    /// The receiver rules (replay, expiry, streams, payments) or their state.
    #[error(transparent)]
    Rules(#[from] ReceiverError),
}

impl ReceiveError {
    /// The stable verdict code of this refusal, `layer.reason`: what the conformance
    /// corpus labels a case with, a gateway logs, and `mailseal open --report` prints.
    /// An MLS refusal that is the inner message's gives the inner message's code.
    pub fn code(&self) -> String {
        match self {
            Self::Open(e) | Self::Mls(MlsError::Open(e)) => e.code(),
            Self::Mls(MlsError::Message(e)) => format!("message.{}", e.code()),
            Self::Mls(e) => e.code().into(),
            Self::Rules(e) => e.code().into(),
        }
    }

    /// Whether only a bound on what waits refused the message (events held behind a
    /// gap, MLS mail held for a later epoch: [`MlsError::retry_later`]): nothing of it
    /// was recorded, and the same mail delivered again later is taken. A gateway
    /// answers it with a temporary failure, so that the sending MTA tries again.
    pub fn retry_later(&self) -> bool {
        match self {
            Self::Mls(e) => e.retry_later(),
            Self::Rules(ReceiverError::BufferFull { .. }) => true,
            _ => false,
        }
    }

    /// Every code [`Self::code`] can give.
    pub fn codes() -> Vec<String> {
        use crate::envelope::Code;
        let mut out: Vec<String> = crate::message::MessageError::CODES
            .iter()
            .filter(|c| !matches!(**c, "missing-header" | "write-failed"))
            .map(|c| format!("message.{c}"))
            .collect();
        out.extend(
            Code::ALL
                .iter()
                .map(|c| format!("validation.{}", c.as_str())),
        );
        for list in [
            crate::smime::SmimeError::CODES,
            crate::openpgp::OpenPgpError::CODES,
            crate::jws::JwsError::CODES,
            crate::seal::BindingError::CODES,
            OpenError::CODES,
            ReceiverError::CODES,
        ] {
            out.extend(list.iter().map(|c| c.to_string()));
        }
        out.extend(
            MlsError::CODES
                .iter()
                .filter(|c| !matches!(**c, "mls.open" | "mls.message"))
                .map(|c| c.to_string()),
        );
        out
    }
}

impl Classify for ReceiveError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Open(e) => e.a2a_error(),
            Self::Mls(e) => e.a2a_error(),
            Self::Rules(e) => e.a2a_error(),
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Open(e) => e.kind(),
            Self::Mls(e) => e.kind(),
            Self::Rules(e) => e.kind(),
        }
    }
}
