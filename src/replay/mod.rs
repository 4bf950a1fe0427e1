//! Replay and stream state: the receiver rules of MailA2A sections 6 and 7.
//!
//! Every message that verified goes through [`ReplayStore::admit`] before an agent sees
//! it. The store decides, atomically across every process that shares it:
//!
//! - **replay** (DESIGN decision 5): the tuple of signer, `messageId`,
//!   `idempotencyKey`, operation and SHA-256 of the protected JSON is persisted for the
//!   message's lifetime. The same `messageId` with the same bytes is a
//!   [`Admission::Duplicate`] (SMTP redelivery, not a second operation); with other
//!   bytes it is [`ReceiverError::Conflict`], a security error.
//! - **expiry**: past `expiresAt` (plus the clock skew) is refused; a message without
//!   `expiresAt` lives [`ReceiverPolicy::default_lifetime`] from its `createdAt`, else
//!   from its protected Date; an effectful request with none of the three is refused,
//!   and no tuple is kept forever (DESIGN decision 5, revised by issue #17).
//! - **the request record**: every request a [`crate::Sender`] seals is recorded
//!   ([`ReplayStore::record_request`]); a response, error or event is delivered only
//!   when it answers one of them, from an agent that request went to (a group
//!   request: a member of that MLS group), before the request's expiry plus the
//!   skew ([`ReceiverError::Unsolicited`]). The attempt a reply belongs to is the
//!   attempt of the request it answers (named by its In-Reply-To, else our latest
//!   one), never the number the reply states; and one signer answers an attempt.
//!   A receiver that only receives may accept replies without a record by
//!   [`Unsolicited::Accept`], a policy it chooses by name.
//! - **idempotency** (section 7): an `idempotencyKey` is the sender's *address*'s,
//!   whatever profile or key signs the retry, and is remembered for
//!   [`ReceiverPolicy::idempotency_retention`]; a retry after the first request's
//!   lifetime ended is refused as too late, never performed anew.
//! - **streams** (section 6): the replies of one correlation are delivered in sequence
//!   order only. A gap holds later events back ([`Admission::Held`], persisted and
//!   bounded per sender) and [`ReplayStore::streams`] shows what is missing and since
//!   when; exactly one `final`.
//!
//! The rules live once, in `rules`, over a small transaction interface; the adapters
//! (memory, SQLite, PostgreSQL) only provide storage and isolation.

mod durable;
pub use crate::keystore::StateLocation;
pub(crate) use durable::Durable;
mod memory;
mod postgres;
mod rules;
pub(crate) use rules::agent_key;
mod sqlite;

/// The schema version of the store database this build writes.
pub use crate::sqlite::SCHEMA_VERSION;
pub use memory::MemoryReplayStore;
pub use postgres::PostgresReplayStore;
pub use sqlite::SqliteReplayStore;

use crate::envelope::{Envelope, Kind, PaymentKind};
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::seal::Opened;

/// Why the receiver refused a message, or why its state could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiverError {
    /// `expiresAt` (or `createdAt` plus the default lifetime) plus the clock skew is in
    /// the past.
    #[error("message {} expired at {expired_at}", crate::error::quoted(.message_id))]
    Expired {
        /// Its `messageId`.
        message_id: String,
        /// When it expired (RFC 3339).
        expired_at: String,
    },
    /// An effectful request with no `expiresAt`, no `createdAt` and no protected Date:
    /// nothing bounds how long its replay tuple would have to be kept.
    #[error("effectful request {} has no expiresAt, createdAt or protected Date", crate::error::quoted(.message_id))]
    NoLifetime {
        /// Its `messageId`.
        message_id: String,
    },
    /// `createdAt` is further in the future than the clock skew allows.
    #[error("message {} is dated {created_at}, in the future", crate::error::quoted(.message_id))]
    FromTheFuture {
        /// Its `messageId`.
        message_id: String,
        /// Its `createdAt`.
        created_at: String,
    },
    /// The signer's `messageId` was accepted before with other protected bytes.
    #[error("security: message {} was accepted before with different content", crate::error::quoted(.message_id))]
    Conflict {
        /// The `messageId`.
        message_id: String,
    },
    /// The signer's `idempotencyKey` was used before for another operation.
    #[error("security: idempotency key {} was used before for {previous}, now for {operation}", crate::error::quoted(.key))]
    IdempotencyConflict {
        /// The key.
        key: String,
        /// The operation it was first used for.
        previous: String,
        /// This message's operation.
        operation: String,
    },
    /// Another message of the stream already holds this sequence number.
    #[error(
        "security: stream {correlation_id} already has an event {sequence} with another messageId"
    )]
    SequenceReused {
        /// The correlation.
        correlation_id: String,
        /// The sequence number.
        sequence: u64,
    },
    /// A second `final`, or an event after the final one.
    #[error(
        "stream {correlation_id} ended at sequence {final_sequence}; event {sequence} is refused"
    )]
    AfterFinal {
        /// The correlation.
        correlation_id: String,
        /// This event's sequence.
        sequence: u64,
        /// The final event's sequence.
        final_sequence: u64,
    },
    /// A reply whose operation differs from the stream's.
    #[error("stream {} is {expected}, this reply says {operation}", crate::error::quoted(.correlation_id))]
    StreamMismatch {
        /// The correlation.
        correlation_id: String,
        /// The stream's operation.
        expected: String,
        /// This message's operation.
        operation: String,
    },
    /// A sequence number further ahead of the next expected one than the buffer holds.
    #[error("stream {} expects sequence {next}; {sequence} is too far ahead", crate::error::quoted(.correlation_id))]
    TooFarAhead {
        /// The correlation.
        correlation_id: String,
        /// This event's sequence.
        sequence: u64,
        /// The next sequence the stream can deliver.
        next: u64,
    },
    /// The sender already has [`ReceiverPolicy::max_pending_per_sender`] events waiting
    /// for earlier ones; this one is not recorded, so a redelivery later can succeed.
    #[error("{limit} events of this sender already wait for missing ones; try again later")]
    BufferFull {
        /// The bound.
        limit: u64,
    },
    /// A request carries an x402 `PaymentPayload`, but we never asked this peer for a
    /// payment in this exchange (no `PaymentRequiredError` with `required` went to it
    /// for the correlation).
    #[error("security: payment from {} for exchange {}, which asked for none", crate::error::quoted(.peer), crate::error::quoted(.correlation_id))]
    UnsolicitedPayment {
        /// The paying peer.
        peer: String,
        /// The exchange.
        correlation_id: String,
    },
    /// A response, error or event that answers no request of ours: none was recorded
    /// for its correlation, or the one it answers did not go to its sender.
    #[error("unsolicited: {} answers {what}", crate::error::quoted(.peer))]
    Unsolicited {
        /// The sender's address.
        peer: String,
        /// Which request it claims to answer, and why that is not ours to accept.
        what: String,
    },
    /// A reply to a request whose lifetime (plus the skew) has ended.
    #[error("{} answers request {} of exchange {}, which expired at {expired_at}", crate::error::quoted(.peer), crate::error::quoted(.message_id), crate::error::quoted(.correlation_id))]
    AnswerTooLate {
        /// The sender's address.
        peer: String,
        /// The exchange.
        correlation_id: String,
        /// Our request's `messageId`.
        message_id: String,
        /// When it expired (RFC 3339).
        expired_at: String,
    },
    /// Another signer already answers this attempt of the exchange: one final per
    /// correlation and attempt, whoever sends it.
    #[error(
        "security: exchange {correlation_id} (attempt {attempt}) is answered by another signer"
    )]
    AnsweredByAnother {
        /// The exchange.
        correlation_id: String,
        /// The attempt.
        attempt: u64,
    },
    /// A retry (same sender address and `idempotencyKey`) after the first request's
    /// lifetime ended: refused rather than performed again.
    #[error("idempotency key {} was first used by {} ({previous}), which expired at {expired_at}: too late to retry", crate::error::quoted(.key), crate::error::quoted(.first))]
    RetryTooLate {
        /// The key.
        key: String,
        /// The first request's `messageId`.
        first: String,
        /// Its operation.
        previous: String,
        /// When it expired (RFC 3339).
        expired_at: String,
    },
    /// A `PaymentPayload` that is not the one retry of the request we priced.
    #[error("security: payment from {} in exchange {}: {why}", crate::error::quoted(.peer), crate::error::quoted(.correlation_id))]
    PaymentNotBound {
        /// The paying peer.
        peer: String,
        /// The exchange.
        correlation_id: String,
        /// What does not match.
        why: String,
    },
    /// A second x402 `PaymentRequired` in an exchange, not answering our paid retry.
    #[error("security: {} asks for payment again in exchange {}", crate::error::quoted(.peer), crate::error::quoted(.correlation_id))]
    PaymentRequiredAgain {
        /// The peer asking.
        peer: String,
        /// The exchange.
        correlation_id: String,
    },
    /// An x402 `SettlementResponse` answering a request of ours that carried no
    /// `PaymentPayload`.
    #[error(
        "security: settlement from {peer} for exchange {correlation_id}, where we paid nothing"
    )]
    UnsolicitedSettlement {
        /// The sender's address.
        peer: String,
        /// The exchange.
        correlation_id: String,
    },
    /// The envelope lacks what the rules need (`messageId`, `operation`, `kind`,
    /// `sequence`, a reply's `correlationId`): validation lets none of these through.
    #[error("envelope lacks {field}")]
    Incomplete {
        /// The field.
        field: &'static str,
    },
    /// The state database was written by a newer mailseal.
    #[error("replay state schema version {found} is newer than this mailseal ({supported})")]
    NewerSchema {
        /// The version found.
        found: i64,
        /// The newest this build knows.
        supported: i64,
    },
    /// The state store failed (I/O, connection, SQL).
    #[error("replay state: {0}")]
    Store(String),
}

impl Classify for ReceiverError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Store(_) | Self::NewerSchema { .. } => A2aErrorType::InternalError,
            _ => A2aErrorType::InvalidRequestError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(_) | Self::NewerSchema { .. } => ErrorKind::Other,
            Self::Incomplete { .. } => ErrorKind::Malformed,
            _ => ErrorKind::Policy,
        }
    }
}

/// What the receiver does with a response, error or event that answers no request
/// recorded in its state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unsolicited {
    /// Refused ([`ReceiverError::Unsolicited`]): the default.
    #[default]
    Refuse,
    /// Accepted under the stream rules alone, its attempt as the reply states it: for
    /// a receiver whose requests are sent by something that keeps no record here (a
    /// gateway's inbound side alone). A reply that answers a recorded request is still
    /// judged against that record.
    Accept,
}

/// The receiver's tolerances.
#[derive(Clone, Debug)]
pub struct ReceiverPolicy {
    /// Clock skew allowed on `expiresAt` and `createdAt`, seconds (default 300).
    pub skew: i64,
    /// Lifetime of a message without `expiresAt`, from its `createdAt`, else its
    /// protected Date, seconds (default 7 days). Its replay tuple is kept as long.
    pub default_lifetime: i64,
    /// Events a sender may have waiting (held or not yet taken), over all its streams.
    pub max_pending_per_sender: u64,
    /// How far ahead of the next expected sequence an event may be.
    pub max_gap: u64,
    /// How long a request's `idempotencyKey` is remembered after it was accepted,
    /// seconds (default 30 days; never shorter than the request's lifetime): a retry
    /// within it is a retry, never a new operation.
    pub idempotency_retention: i64,
    /// Replies that answer no recorded request.
    pub unsolicited: Unsolicited,
}

impl Default for ReceiverPolicy {
    fn default() -> Self {
        ReceiverPolicy {
            skew: 300,
            default_lifetime: 7 * 24 * 3600,
            max_pending_per_sender: 256,
            max_gap: 1024,
            idempotency_retention: 30 * 24 * 3600,
            unsolicited: Unsolicited::Refuse,
        }
    }
}

/// What the rules need of a verified message.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Candidate {
    /// The authenticated sender ([`crate::seal::SignerIdentity::replay_id`]), or
    /// `unsigned:` and the From address.
    pub signer: String,
    /// `messageId`.
    pub message_id: String,
    /// `idempotencyKey`.
    pub idempotency_key: Option<String>,
    /// The operation token.
    pub operation: String,
    /// `kind`.
    pub kind: Kind,
    /// `correlationId`.
    pub correlation_id: Option<String>,
    /// `serviceParameters.retry` as the message states it (0 for the first attempt).
    /// A reply's stream is the attempt of the request it answers, from our record;
    /// this number is read only for a reply accepted without one
    /// ([`Unsolicited::Accept`]).
    pub attempt: u64,
    /// The RFC 5322 `In-Reply-To` (without angle brackets): which of our requests a
    /// reply answers.
    pub in_reply_to: Option<String>,
    /// The MLS group id (base64url) the message was authenticated in, when it came
    /// through the `mls` profile: any member may answer a group request.
    pub group: Option<String>,
    /// `sequence`.
    pub sequence: u64,
    /// `final`.
    pub is_final: bool,
    /// `createdAt`, Unix seconds.
    pub created_at: Option<i64>,
    /// `expiresAt`, Unix seconds.
    pub expires_at: Option<i64>,
    /// The protected Date header field (inside the signature), Unix seconds: the
    /// lifetime's start when `createdAt` is absent.
    pub date: Option<i64>,
    /// SHA-256 of the transfer-decoded `application/a2a+json` bytes.
    pub digest: [u8; 32],
    /// Those bytes, kept while the event waits in a stream (shared with the opened
    /// message, not copied).
    pub envelope: bytes::Bytes,
    /// The sender's address (the protected From, bound to the signer), lower case:
    /// the peer of a payment flow.
    pub peer: String,
    /// `payment.kind`, when the message carries x402 data.
    pub payment: Option<PaymentKind>,
    /// The RFC 5322 Message-ID (without angle brackets): what our `PaymentRequired`
    /// names as the request it prices.
    pub mail_id: Option<String>,
    /// SHA-256 of the `payload` member as JSON (requests with an idempotency key; zero
    /// otherwise): a payment retry repeats the priced request's.
    pub payload_digest: [u8; 32],
    /// The agent of ours (an address, lower case) the message is received for. Each
    /// agent keeps its own replay tuples, idempotency keys, streams and payment flows,
    /// and accepts only answers to requests it sent itself: a message for two agents
    /// that one of them already received is still delivered to the other, and a reply
    /// to Alice's request is not delivered to Bob as answered (issue #57). The
    /// [`crate::Receiver`] sets it: to the agent the caller names (a gateway's SMTP
    /// recipient), else to the one of our agents the message names. `None` (a message
    /// naming several of ours, received for none in particular): the store's one,
    /// unscoped state, as before agents were told apart.
    pub agent: Option<String>,
}

impl Candidate {
    /// The candidate of an opened (verified) message.
    pub fn from_opened(opened: &Opened) -> Result<Candidate, ReceiverError> {
        let signer = match &opened.verdict.signer {
            Some(s) => s.replay_id(),
            None => format!("unsigned:{}", opened.message.sender().unwrap_or_default()),
        };
        // The message's own buffer, shared: a large message is not copied for the rules.
        let mut c =
            Candidate::with_envelope(signer, opened.envelope(), opened.message.envelope_shared())?;
        c.peer = opened.message.sender().unwrap_or_default();
        c.in_reply_to = opened.message.headers.in_reply_to.clone();
        c.mail_id = opened.message.headers.message_id.clone();
        // The envelope's group is checked against the MLS framing by the mls opener,
        // and means nothing under another profile.
        if opened.verdict.profile == Some(crate::profile::Profile::Mls) {
            c.group = opened.envelope().group().map(|g| g.id);
        }
        // The Date of the entity that was opened, when it is the signed one. A legacy
        // signer's Date is the outer, unsigned one: its lifetime starts at the time
        // its signature states instead, so a re-dated copy is not fresh again.
        c.date = if opened.verdict.signer.is_some() && !opened.verdict.header_protection {
            opened.verdict.signed_at.map(|t| t.unix_timestamp())
        } else {
            opened.message.headers.date.map(|t| t.unix_timestamp())
        };
        Ok(c)
    }

    /// The candidate of `envelope` (whose exact bytes are `envelope_bytes`) from an
    /// authenticated `signer`.
    pub fn new(
        signer: String,
        env: &Envelope,
        envelope_bytes: &[u8],
    ) -> Result<Candidate, ReceiverError> {
        Self::with_envelope(signer, env, bytes::Bytes::copy_from_slice(envelope_bytes))
    }

    /// [`Candidate::new`] sharing `envelope_bytes` instead of copying them.
    pub fn with_envelope(
        signer: String,
        env: &Envelope,
        envelope_bytes: bytes::Bytes,
    ) -> Result<Candidate, ReceiverError> {
        let kind = env
            .kind()
            .ok_or(ReceiverError::Incomplete { field: "kind" })?;
        let correlation_id = env.correlation_id();
        if kind != Kind::Request && correlation_id.is_none() {
            return Err(ReceiverError::Incomplete {
                field: "correlationId",
            });
        }
        let attempt = env.retry_attempt();
        Ok(Candidate {
            signer,
            message_id: env
                .message_id()
                .ok_or(ReceiverError::Incomplete { field: "messageId" })?,
            idempotency_key: env.idempotency_key(),
            operation: env
                .str_field("operation")
                .ok_or(ReceiverError::Incomplete { field: "operation" })?
                .into_owned(),
            kind,
            correlation_id,
            attempt,
            in_reply_to: None,
            mail_id: None,
            group: None,
            sequence: env
                .sequence()
                .ok_or(ReceiverError::Incomplete { field: "sequence" })?,
            is_final: env.is_final().unwrap_or(false),
            created_at: env.created_at().map(|t| t.unix_timestamp()),
            expires_at: env.expires_at().map(|t| t.unix_timestamp()),
            date: None,
            digest: crate::envelope::content_digest(&envelope_bytes),
            envelope: envelope_bytes,
            peer: String::new(),
            payment: env.payment_kind(),
            payload_digest: match (kind, env.idempotency_key()) {
                (Kind::Request, Some(_)) => env
                    .payload_tree()
                    .and_then(|t| serde_json::to_vec(&t.root()).ok())
                    .map_or([0; 32], |b| crate::envelope::content_digest(&b)),
                _ => [0; 32],
            },
            agent: None,
        })
    }
}

/// What the receiver does with a message that passed the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admission {
    /// Recorded: give it to the agent now.
    Deliver {
        /// For a request that repeats an accepted idempotency key with the same
        /// operation (a retry), the `messageId` that first used it: the agent must not
        /// perform the operation twice.
        retry_of: Option<String>,
        /// Events of this stream that were held for this one and are now deliverable
        /// ([`ReplayStore::take_deliverable`]).
        released: u64,
    },
    /// Accepted before with the same bytes: not delivered again.
    Duplicate {
        /// When it was first accepted, Unix seconds.
        first_accepted: i64,
    },
    /// Recorded, but held back: its stream misses earlier events.
    Held {
        /// The sequence numbers still missing before this one.
        missing: Vec<u64>,
    },
}

/// One stream's state, for `mailseal stream status`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamStatus {
    /// The agent of ours the stream was received for (see [`Candidate::agent`]);
    /// `None`: the store's one state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The sender.
    pub signer: String,
    /// The correlation.
    pub correlation_id: String,
    /// The attempt (`serviceParameters.retry`).
    pub attempt: u64,
    /// The stream's operation.
    pub operation: String,
    /// The next sequence number the stream waits for.
    pub next_sequence: u64,
    /// The final event's sequence, once seen.
    pub final_sequence: Option<u64>,
    /// Every event up to the final one has been accepted in order.
    pub complete: bool,
    /// Missing sequence numbers below the highest one held (at most 64 listed).
    pub missing: Vec<u64>,
    /// Since when a gap holds events back (RFC 3339).
    pub gap_since: Option<String>,
    /// Events held behind the gap.
    pub held: Vec<u64>,
    /// Events in order, not yet taken by the agent.
    pub deliverable: Vec<u64>,
    /// Last change (RFC 3339).
    pub updated_at: String,
}

/// An event handed to the agent by [`ReplayStore::take_deliverable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEvent {
    /// The agent of ours it was received for (see [`Candidate::agent`]): only this
    /// agent is given it.
    pub agent: Option<String>,
    /// The sender.
    pub signer: String,
    /// The correlation.
    pub correlation_id: String,
    /// Its sequence number.
    pub sequence: u64,
    /// Its `messageId`.
    pub message_id: String,
    /// The protected envelope JSON, as received.
    pub envelope: Vec<u8>,
}

/// A request we sent, as the receiver rules need it to accept its answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentRequest {
    /// `correlationId`: the exchange its answers name.
    pub correlation_id: String,
    /// Its `messageId`.
    pub message_id: String,
    /// `serviceParameters.retry` as we set it (0 for the first attempt).
    pub attempt: u64,
    /// Its RFC 5322 `Message-ID`, without angle brackets: a reply's In-Reply-To.
    pub mail_id: Option<String>,
    /// Our address (its From), lower case.
    pub author: String,
    /// The addresses it went to (To and Cc), lower case: who may answer it.
    pub recipients: Vec<String>,
    /// The MLS group (base64url id) it went to, when sealed under `mls`: any member
    /// may answer.
    pub group: Option<String>,
    /// The operation.
    pub operation: String,
    /// `idempotencyKey`.
    pub idempotency_key: Option<String>,
    /// When it expires, Unix seconds: `expiresAt`, else `createdAt` (else its Date,
    /// else the time it was sealed) plus the default lifetime.
    pub expires_at: i64,
    /// It carried an x402 `PaymentPayload`: only its answer may carry a settlement.
    pub paid: bool,
    /// When it was recorded, Unix seconds.
    pub sent_at: i64,
}

impl SentRequest {
    /// The record of `plain` sealed at `now` (under the MLS group `group`, base64url,
    /// when sealed under `mls`), or `None` when it is not a request or names no
    /// correlation (nothing can answer it).
    pub fn of(
        plain: &crate::message::MailA2aMessage,
        group: Option<String>,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Option<SentRequest> {
        let env = plain.envelope();
        if env.kind() != Some(Kind::Request) {
            return None;
        }
        let start = env
            .created_at()
            .or(plain.headers.date)
            .map_or(now, |t| t.unix_timestamp());
        let expires_at = env
            .expires_at()
            .map(|t| t.unix_timestamp())
            .unwrap_or_else(|| start.saturating_add(policy.default_lifetime));
        Some(SentRequest {
            correlation_id: env.correlation_id()?,
            message_id: env.message_id()?,
            attempt: env.retry_attempt(),
            mail_id: plain.headers.message_id.clone(),
            author: plain.sender().unwrap_or_default(),
            recipients: plain
                .headers
                .to
                .iter()
                .chain(&plain.headers.cc)
                .map(|m| m.normalized())
                .collect(),
            group,
            operation: env.str_field("operation")?.into_owned(),
            idempotency_key: env.idempotency_key(),
            expires_at,
            paid: env.payment_kind() == Some(PaymentKind::Payload),
            sent_at: now,
        })
    }
}

/// Persists replay tuples and stream state. Every method is atomic across all the
/// processes that share the store.
pub trait ReplayStore {
    /// Applies the receiver rules to `candidate` at `now` (Unix seconds) and records it
    /// when accepted.
    fn admit(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError>;
    /// What [`ReplayStore::admit`] would decide for `candidate` at `now`, recording
    /// nothing: the first phase of [`crate::Receiver`]. Another process sharing the
    /// store may decide first, so only `admit`'s answer is final.
    fn preview(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError>;
    /// The streams of `correlation_id` (every stream when `None`).
    fn streams(&self, correlation_id: Option<&str>) -> Result<Vec<StreamStatus>, ReceiverError>;
    /// Takes the deliverable events of `correlation_id`, in order, and forgets them.
    fn take_deliverable(&self, correlation_id: &str) -> Result<Vec<StreamEvent>, ReceiverError>;
    /// Records that we asked `peer` (an address) for a payment in exchange
    /// `correlation_id` (we sent it a `PaymentRequiredError` with x402
    /// `PaymentRequired`) for the request whose RFC 5322 Message-ID is `priced` (the
    /// error's In-Reply-To): only then is a `PaymentPayload` from it accepted, once,
    /// as that request's retry.
    fn record_payment_required(
        &self,
        peer: &str,
        correlation_id: &str,
        priced: Option<&str>,
        now: i64,
    ) -> Result<(), ReceiverError>;
    /// Records a request we are about to send (see [`SentRequest`]): only answers to
    /// recorded requests are delivered. Recording the same request again replaces it.
    fn record_request(&self, request: &SentRequest) -> Result<(), ReceiverError>;
}

/// A state store lent by a caller that keeps it (a blanket impl for references would
/// collide with the one for every `rules::Transact` adapter).
pub struct Borrowed<'a>(pub &'a dyn ReplayStore);

impl ReplayStore for Borrowed<'_> {
    fn admit(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError> {
        self.0.admit(candidate, now, policy)
    }
    fn preview(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError> {
        self.0.preview(candidate, now, policy)
    }
    fn streams(&self, correlation_id: Option<&str>) -> Result<Vec<StreamStatus>, ReceiverError> {
        self.0.streams(correlation_id)
    }
    fn take_deliverable(&self, correlation_id: &str) -> Result<Vec<StreamEvent>, ReceiverError> {
        self.0.take_deliverable(correlation_id)
    }
    fn record_payment_required(
        &self,
        peer: &str,
        correlation_id: &str,
        priced: Option<&str>,
        now: i64,
    ) -> Result<(), ReceiverError> {
        self.0
            .record_payment_required(peer, correlation_id, priced, now)
    }
    fn record_request(&self, request: &SentRequest) -> Result<(), ReceiverError> {
        self.0.record_request(request)
    }
}

// Every adapter is the same rules over its own transactions.
#[allow(private_bounds)]
impl<S: rules::Transact> ReplayStore for S {
    fn admit(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError> {
        self.transact(&|t| rules::admit(t, candidate, now, policy))
    }
    fn preview(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError> {
        self.transact_dry(&|t| rules::admit(t, candidate, now, policy))
    }
    fn streams(&self, correlation_id: Option<&str>) -> Result<Vec<StreamStatus>, ReceiverError> {
        self.transact(&|t| rules::streams(t, correlation_id))
    }
    fn take_deliverable(&self, correlation_id: &str) -> Result<Vec<StreamEvent>, ReceiverError> {
        self.transact(&|t| rules::take_deliverable(t, correlation_id))
    }
    fn record_payment_required(
        &self,
        peer: &str,
        correlation_id: &str,
        priced: Option<&str>,
        now: i64,
    ) -> Result<(), ReceiverError> {
        self.transact(&|t| rules::payment_required(t, peer, correlation_id, priced, now))
    }
    fn record_request(&self, request: &SentRequest) -> Result<(), ReceiverError> {
        self.transact(&|t| rules::record_request(t, request))
    }
}

/// Opens the state store a location names: `postgres://...` or `postgresql://...`,
/// `sqlite:PATH`, or a directory (its `mailseal.db`).
pub fn open_store(location: &str) -> Result<Box<dyn ReplayStore>, ReceiverError> {
    if location.starts_with("postgres://") || location.starts_with("postgresql://") {
        return Ok(Box::new(PostgresReplayStore::connect(location)?));
    }
    let path = match location.strip_prefix("sqlite:") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::path::Path::new(location).join(sqlite::FILE_NAME),
    };
    Ok(Box::new(SqliteReplayStore::open(&path)?))
}

/// Opens (creating it when absent) the state a key store keeps at `location`.
pub fn open_location(location: &StateLocation) -> Result<Box<dyn ReplayStore>, ReceiverError> {
    Ok(match location {
        StateLocation::Sqlite(path) => Box::new(SqliteReplayStore::open(path)?),
        StateLocation::Postgres(url) => Box::new(PostgresReplayStore::connect(url)?),
    })
}

/// RFC 3339 of Unix seconds (for messages and status; never fails on our own values).
pub(crate) fn rfc3339(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}

/// A backend error, with the operation it happened in.
pub(crate) fn store_error(what: &str, e: impl std::fmt::Display) -> ReceiverError {
    ReceiverError::Store(format!("{what}: {e}"))
}

crate::error::verdict_codes!(ReceiverError, "rules", {
    Self::Expired { .. } => "expired",
    Self::NoLifetime { .. } => "no-lifetime",
    Self::FromTheFuture { .. } => "from-the-future",
    Self::Conflict { .. } => "conflict",
    Self::IdempotencyConflict { .. } => "idempotency-conflict",
    Self::SequenceReused { .. } => "sequence-reused",
    Self::AfterFinal { .. } => "after-final",
    Self::StreamMismatch { .. } => "stream-mismatch",
    Self::TooFarAhead { .. } => "too-far-ahead",
    Self::BufferFull { .. } => "buffer-full",
    Self::UnsolicitedPayment { .. } => "unsolicited-payment",
    Self::Unsolicited { .. } => "unsolicited",
    Self::AnswerTooLate { .. } => "answer-too-late",
    Self::AnsweredByAnother { .. } => "answered-by-another",
    Self::RetryTooLate { .. } => "retry-too-late",
    Self::UnsolicitedSettlement { .. } => "unsolicited-settlement",
    Self::PaymentNotBound { .. } => "payment-not-bound",
    Self::PaymentRequiredAgain { .. } => "payment-required-again",
    Self::Incomplete { .. } => "incomplete",
    Self::NewerSchema { .. } => "newer-schema",
    Self::Store(_) => "store",
});
