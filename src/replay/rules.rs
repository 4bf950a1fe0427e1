//! The receiver rules, once, over [`Txn`]: what every adapter runs inside one
//! transaction. All checks read first; writes come only after the decision, so a
//! refused message leaves the state as it was.

use super::{
    rfc3339, Admission, Candidate, ReceiverError, ReceiverPolicy, SentRequest, StreamEvent,
    StreamStatus, Unsolicited,
};
use crate::envelope::Kind;

/// A persisted replay tuple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tuple {
    pub signer: String,
    pub message_id: String,
    pub idempotency_key: Option<String>,
    pub operation: String,
    pub digest: [u8; 32],
    pub accepted_at: i64,
    /// The end of the message's lifetime plus the skew (`None`: none; older rows).
    /// The tuple is forgotten after it, or after `retain_until` when later.
    pub keep_until: Option<i64>,
    /// The sender's address, lower case: a request's idempotency key is its.
    pub peer: String,
    /// A request with an idempotency key is remembered until then at least.
    pub retain_until: Option<i64>,
    /// SHA-256 of a request's `payload` (requests with an idempotency key): a payment
    /// retry must repeat the priced request's.
    pub payload_digest: Option<[u8; 32]>,
    /// Its `correlationId`.
    pub correlation_id: Option<String>,
    /// Its RFC 5322 Message-ID: what our `PaymentRequired` names as the priced request.
    pub mail_id: Option<String>,
}

/// A stream: the replies of one correlation and attempt from one sender.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct StreamId {
    pub signer: String,
    pub correlation_id: String,
    pub attempt: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StreamRow {
    pub id: StreamId,
    pub operation: String,
    /// The next sequence number to accept in order.
    pub next_seq: u64,
    pub final_seq: Option<u64>,
    pub gap_since: Option<i64>,
    pub updated_at: i64,
    /// The `messageId`s of the requests of ours it answers (one, unless an agent asked
    /// twice in one exchange and attempt answers both in one stream); empty: an
    /// exchange we have no record of (or a stream written before streams said), which
    /// counts as answering every request.
    pub requests: Vec<String>,
}

/// How [`StreamRow::requests`] is stored: one column, a JSON array of the ids (`NULL`
/// when empty).
pub(crate) fn join_requests(requests: &[String]) -> Option<String> {
    (!requests.is_empty()).then(|| serde_json::to_string(requests).unwrap_or_default())
}

/// Reads what [`join_requests`] wrote; a column that does not read (written by hand)
/// is a stream that counts as answering every request.
pub(crate) fn split_requests(column: Option<String>) -> Vec<String> {
    column
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PendingState {
    /// Behind a gap.
    Held,
    /// In order, waiting for the agent to take it.
    Deliverable,
}

impl PendingState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Deliverable => "deliverable",
        }
    }
    pub(crate) fn parse(s: &str) -> Self {
        if s == "deliverable" {
            Self::Deliverable
        } else {
            Self::Held
        }
    }
}

/// An event kept in a stream until the agent takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub seq: u64,
    pub message_id: String,
    pub state: PendingState,
    pub envelope: Vec<u8>,
    pub received_at: i64,
}

/// Storage inside one transaction. Implementations give serialisable isolation for
/// one signer at least (every key the rules touch starts with the signer).
pub(crate) trait Txn {
    type Error: std::fmt::Display;
    fn tuple(&mut self, signer: &str, message_id: &str) -> Result<Option<Tuple>, Self::Error>;
    /// The first tuple of `peer` (an address) with idempotency key `key`.
    fn tuple_by_idempotency(&mut self, peer: &str, key: &str)
        -> Result<Option<Tuple>, Self::Error>;
    fn insert_tuple(&mut self, t: &Tuple) -> Result<(), Self::Error>;
    fn stream(&mut self, id: &StreamId) -> Result<Option<StreamRow>, Self::Error>;
    /// Every stream of `correlation_id`, or every stream.
    fn streams(&mut self, correlation_id: Option<&str>) -> Result<Vec<StreamRow>, Self::Error>;
    /// Inserts or replaces.
    fn put_stream(&mut self, s: &StreamRow) -> Result<(), Self::Error>;
    /// The stream's pending events, by sequence.
    fn pending(&mut self, id: &StreamId) -> Result<Vec<Pending>, Self::Error>;
    fn insert_pending(&mut self, id: &StreamId, p: &Pending) -> Result<(), Self::Error>;
    fn set_deliverable(&mut self, id: &StreamId, seq: u64) -> Result<(), Self::Error>;
    fn delete_pending(&mut self, id: &StreamId, seq: u64) -> Result<(), Self::Error>;
    /// Pending events of `signer` over all its streams.
    fn pending_count(&mut self, signer: &str) -> Result<u64, Self::Error>;
    /// Forgets tuples whose `keep_until` and `retain_until` are before `now`, streams
    /// that ended (or went quiet) `retention` seconds ago with nothing pending, and
    /// request records that expired `retention` seconds ago.
    fn prune(&mut self, now: i64, retention: i64) -> Result<(), Self::Error>;
    /// The state of the payment flow with `peer` in exchange `correlation_id`.
    fn payment_state(
        &mut self,
        peer: &str,
        correlation_id: &str,
    ) -> Result<Option<String>, Self::Error>;
    /// Inserts or replaces it.
    fn put_payment_state(
        &mut self,
        peer: &str,
        correlation_id: &str,
        state: &str,
        now: i64,
    ) -> Result<(), Self::Error>;
    /// The requests we sent in exchange `correlation_id`.
    fn sent_requests(&mut self, correlation_id: &str) -> Result<Vec<SentRequest>, Self::Error>;
    /// Inserts or replaces (by correlation and `messageId`).
    fn put_request(&mut self, r: &SentRequest) -> Result<(), Self::Error>;
    /// Whether to prune now. Pruning only forgets what the rules would refuse anyway
    /// (expired messages), so a store may do it once in a while instead of every time.
    fn prune_due(&mut self, _now: i64) -> bool {
        true
    }
}

/// A store that runs the rules inside its own transactions; every such store is a
/// [`super::ReplayStore`] (the impl in `mod.rs`), so each adapter writes only its
/// storage and its isolation.
pub(crate) trait Transact: 'static {
    type Tx<'a>: Txn;
    /// Runs `f` atomically, committing when it succeeds (and from the start again when
    /// the backend asks for it, so `f` may run more than once).
    fn transact<R>(
        &self,
        f: &dyn Fn(&mut Self::Tx<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError>;
    /// Runs `f` as [`Transact::transact`] does, then rolls back whatever it wrote: what
    /// the rules *would* decide, for the two-phase [`crate::Receiver`]. A dry run never
    /// prunes.
    fn transact_dry<R>(
        &self,
        f: &dyn Fn(&mut Self::Tx<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError>;
}

/// Payment flow states.
pub(crate) const REQUIRED_SENT: &str = "required-sent";
pub(crate) const PAYLOAD_RECEIVED: &str = "payload-received";
/// The client side: a `PaymentRequired` from this peer was delivered in the exchange.
pub(crate) const REQUIRED_RECEIVED: &str = "required-received";

/// The payment flow key of the `PaymentRequired`s we received from `peer` (the
/// table's other rows are keyed by the peers we asked).
fn received_from(peer: &str) -> String {
    format!("from:{peer}")
}

/// Records that a `PaymentRequired` went to `peer` for `correlation_id`, pricing the
/// request whose Message-ID is `priced` (the PaymentRequired's In-Reply-To). A flow
/// that already received a payload stays so.
pub(crate) fn payment_required<T: Txn>(
    tx: &mut T,
    peer: &str,
    correlation_id: &str,
    priced: Option<&str>,
    now: i64,
) -> Result<(), ReceiverError> {
    if tx
        .payment_state(peer, correlation_id)
        .map_err(backend)?
        .is_none()
    {
        let state = match priced {
            Some(m) => format!("{REQUIRED_SENT} {m}"),
            None => REQUIRED_SENT.to_string(),
        };
        tx.put_payment_state(peer, correlation_id, &state, now)
            .map_err(backend)?;
    }
    Ok(())
}

/// Records a request we send; the same request again replaces its record.
pub(crate) fn record_request<T: Txn>(tx: &mut T, r: &SentRequest) -> Result<(), ReceiverError> {
    tx.put_request(r).map_err(backend)
}

/// The recipients of a [`SentRequest`] as a store keeps them: one per line (an
/// address holds no line break).
pub(crate) fn split_recipients(s: &str) -> Vec<String> {
    s.split('\n')
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// How often a shared store prunes, seconds.
pub(crate) const PRUNE_INTERVAL: i64 = 60;

/// Whether `last` (the time of the last prune) is `PRUNE_INTERVAL` old, and if so
/// moves it to `now`.
pub(crate) fn due(last: &std::sync::atomic::AtomicI64, now: i64) -> bool {
    use std::sync::atomic::Ordering;
    let prev = last.load(Ordering::Relaxed);
    (now.saturating_sub(prev) >= PRUNE_INTERVAL || now < prev)
        && last
            .compare_exchange(prev, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

fn backend<E: std::fmt::Display>(e: E) -> ReceiverError {
    super::store_error("storage", e)
}

/// The rules of sections 6 and 7 for one candidate.
pub(crate) fn admit<T: Txn>(
    tx: &mut T,
    c: &Candidate,
    now: i64,
    p: &ReceiverPolicy,
) -> Result<Admission, ReceiverError> {
    // Replay first: a redelivery is benign whatever its age.
    if let Some(prev) = tuple_of(tx, c)? {
        if prev.digest == c.digest {
            return Ok(Admission::Duplicate {
                first_accepted: prev.accepted_at,
            });
        }
        return Err(ReceiverError::Conflict {
            message_id: c.message_id.clone(),
        });
    }
    let keep_until = lifetime(c, now, p)?;
    let mut retry_of = None;
    let mut first = None;
    let mut retain_until = None;
    if let (Kind::Request, Some(key)) = (c.kind, &c.idempotency_key) {
        // The key is the sender's address's (section 7: "authenticated sender
        // identity"), so a retry signed under another profile or key is a retry.
        let prev = match tx
            .tuple_by_idempotency(&scoped(c, party(c)), key)
            .map_err(backend)?
        {
            None if c.agent.is_some() => tx.tuple_by_idempotency(party(c), key).map_err(backend)?,
            own => own,
        };
        if let Some(prev) = prev {
            if prev.operation != c.operation {
                return Err(ReceiverError::IdempotencyConflict {
                    key: key.clone(),
                    previous: prev.operation,
                    operation: c.operation.clone(),
                });
            }
            if let Some(end) = prev.keep_until.filter(|&end| now > end) {
                return Err(ReceiverError::RetryTooLate {
                    key: key.clone(),
                    first: prev.message_id,
                    previous: prev.operation,
                    expired_at: rfc3339(end),
                });
            }
            retry_of = Some(prev.message_id.clone());
            first = Some(prev);
        }
        retain_until = Some(
            now.saturating_add(p.idempotency_retention)
                .max(keep_until.unwrap_or(i64::MIN)),
        );
    }
    let tuple = Tuple {
        signer: scoped(c, &c.signer),
        message_id: c.message_id.clone(),
        idempotency_key: c.idempotency_key.clone(),
        operation: c.operation.clone(),
        digest: c.digest,
        accepted_at: now,
        keep_until,
        peer: scoped(c, party(c)),
        retain_until,
        payload_digest: c.idempotency_key.as_ref().map(|_| c.payload_digest),
        correlation_id: c.correlation_id.clone(),
        mail_id: c.mail_id.clone(),
    };
    // x402 (section 8): a PaymentPayload answers a PaymentRequired we sent, once, as
    // the retry of the priced request: same sender, correlation, idempotency key,
    // operation and payload, a later attempt.
    if c.kind == Kind::Request && c.payment == Some(crate::envelope::PaymentKind::Payload) {
        let corr = c.correlation_id.clone().unwrap_or_default();
        // The agent that asked for the payment is the one it pays (the sender records
        // what it asked under its From: [`crate::Sender`]); else a flow recorded for
        // no agent in particular (before agents were told apart, or by a caller of
        // `record_payment_required` that named none).
        let mut flow = scoped(c, &c.peer);
        let mut state = None;
        if !corr.is_empty() {
            state = tx.payment_state(&flow, &corr).map_err(backend)?;
            if state.is_none() && c.agent.is_some() {
                flow = c.peer.clone();
                state = tx.payment_state(&flow, &corr).map_err(backend)?;
            }
        }
        let Some(state) = state else {
            return Err(ReceiverError::UnsolicitedPayment {
                peer: c.peer.clone(),
                correlation_id: corr,
            });
        };
        let unbound = |why: &str| ReceiverError::PaymentNotBound {
            peer: c.peer.clone(),
            correlation_id: corr.clone(),
            why: why.to_string(),
        };
        let Some(priced) = state
            .strip_prefix(REQUIRED_SENT)
            .map(|rest| Some(rest.trim()).filter(|m| !m.is_empty()))
        else {
            return Err(unbound("this exchange was paid already"));
        };
        // The first request with this key, from this address: the priced one, in
        // this exchange, with this payload.
        let Some(first) = first.filter(|f| f.correlation_id.as_deref() == Some(&corr)) else {
            return Err(unbound(
                "it is not the retry of a request of this exchange (no earlier request with its idempotency key)",
            ));
        };
        if priced.is_some_and(|m| first.mail_id.as_deref() != Some(m)) {
            return Err(unbound("its idempotency key is not the priced request's"));
        }
        if first.payload_digest.is_some_and(|d| d != c.payload_digest) {
            return Err(unbound("its payload is not the priced request's"));
        }
        if c.attempt == 0 {
            return Err(unbound(
                "a payment comes with a retry (serviceParameters.retry 1 or more)",
            ));
        }
        tx.put_payment_state(&flow, &corr, PAYLOAD_RECEIVED, now)
            .map_err(backend)?;
    }
    let admission = match (&c.kind, &c.correlation_id) {
        (Kind::Request, _) | (_, None) => Admission::Deliver {
            retry_of,
            released: 0,
        },
        (_, Some(corr)) => {
            let admission = match answered(tx, c, corr, now, p)? {
                Answered::Request { attempt, request } => {
                    let signer = scoped(c, &c.signer);
                    stream_event(tx, c, &signer, corr, attempt, Some(request), now, p)?
                }
                Answered::Unrecorded(attempt) => {
                    let signer = scoped(c, &format!("{UNRECORDED}{}", c.signer));
                    stream_event(tx, c, &signer, corr, attempt, None, now, p)?
                }
            };
            if c.payment == Some(crate::envelope::PaymentKind::Required) {
                tx.put_payment_state(
                    &received_from(&scoped(c, party(c))),
                    corr,
                    REQUIRED_RECEIVED,
                    now,
                )
                .map_err(backend)?;
            }
            admission
        }
    };
    tx.insert_tuple(&tuple).map_err(backend)?;
    if tx.prune_due(now) {
        // A clock ahead of the machine's (misset, or an archive replayed with a
        // future `--now`) never prunes past the machine's time: the store may be
        // shared, and what it forgot another receiver would accept again (issue #17).
        let horizon = now.min(time::OffsetDateTime::now_utc().unix_timestamp());
        tx.prune(horizon, p.default_lifetime).map_err(backend)?;
    }
    Ok(admission)
}

/// Until when the tuple is kept; refuses what is expired or dated in the future.
fn lifetime(c: &Candidate, now: i64, p: &ReceiverPolicy) -> Result<Option<i64>, ReceiverError> {
    if let Some(created) = c.created_at {
        if created > now.saturating_add(p.skew) {
            return Err(ReceiverError::FromTheFuture {
                message_id: c.message_id.clone(),
                created_at: rfc3339(created),
            });
        }
    }
    let end = c.expires_at.or_else(|| {
        c.created_at
            .or(c.date)
            .map(|t| t.saturating_add(p.default_lifetime))
    });
    match end {
        Some(end) if now > end.saturating_add(p.skew) => Err(ReceiverError::Expired {
            message_id: c.message_id.clone(),
            expired_at: rfc3339(end),
        }),
        Some(end) => Ok(Some(end.saturating_add(p.skew))),
        None if c.kind == crate::envelope::Kind::Request
            && c.operation
                .parse::<crate::envelope::Operation>()
                .map_or(true, |o| o.is_effectful()) =>
        {
            Err(ReceiverError::NoLifetime {
                message_id: c.message_id.clone(),
            })
        }
        // Nothing is remembered forever: undated, it is kept the default lifetime
        // from now.
        None => Ok(Some(now.saturating_add(p.default_lifetime))),
    }
}

/// Who a rule keys a sender by: its address, or (a candidate built without one) its
/// signer.
fn party(c: &Candidate) -> &str {
    if c.peer.is_empty() {
        &c.signer
    } else {
        &c.peer
    }
}

/// Between an agent and the key it keeps apart: a line break, which no address of ours
/// and no signer id holds.
const AGENT_SEP: char = '\n';

/// `key` (a signer, a peer) as the agent `c` is received for keeps it: prefixed with
/// the agent, so that each agent's state is its own ([`Candidate::agent`]).
fn scoped(c: &Candidate, key: &str) -> String {
    agent_key(c.agent.as_deref(), key)
}

/// `key` as `agent` keeps it (the store's one state: `None`).
pub(crate) fn agent_key(agent: Option<&str>, key: &str) -> String {
    match agent {
        // An address, however it was spelled: `Bob@Example.org` is bob@example.org.
        Some(agent) => format!(
            "{}{AGENT_SEP}{key}",
            crate::message::Mailbox::new(agent).normalized()
        ),
        None => key.to_string(),
    }
}

/// The agent a stored key was kept for, and the key itself.
pub(crate) fn split_agent(key: &str) -> (Option<&str>, &str) {
    match key.split_once(AGENT_SEP) {
        Some((agent, rest)) => (Some(agent), rest),
        None => (None, key),
    }
}

/// The replay tuple of `c`'s signer and `messageId`: its agent's, else (state written
/// before agents were told apart, or by a receiver for none in particular) the
/// store's one: what was accepted then stays accepted for every agent.
fn tuple_of<T: Txn>(tx: &mut T, c: &Candidate) -> Result<Option<Tuple>, ReceiverError> {
    let own = tx
        .tuple(&scoped(c, &c.signer), &c.message_id)
        .map_err(backend)?;
    match (own, &c.agent) {
        (None, Some(_)) => tx.tuple(&c.signer, &c.message_id).map_err(backend),
        (own, _) => Ok(own),
    }
}

/// Which of our requests the reply `c` answers, judged against our record: the
/// attempt its stream belongs to. Refuses a reply to no request of ours, from an
/// agent the request did not go to, after the request expired, or carrying a
/// settlement for a request that paid nothing.
fn answered<T: Txn>(
    tx: &mut T,
    c: &Candidate,
    corr: &str,
    now: i64,
    p: &ReceiverPolicy,
) -> Result<Answered, ReceiverError> {
    // The requests the agent it is received for sent (a record without an author
    // predates authors and stands for every agent): Bob never takes an answer to
    // Alice's request as answered.
    let mut records = tx.sent_requests(corr).map_err(backend)?;
    if let Some(agent) = &c.agent {
        records.retain(|r| r.author.is_empty() || r.author.eq_ignore_ascii_case(agent));
    }
    let named = c
        .in_reply_to
        .as_deref()
        .and_then(|m| records.iter().find(|r| r.mail_id.as_deref() == Some(m)));
    let to_it = |r: &&SentRequest| {
        r.recipients.iter().any(|a| a == &c.peer) || (r.group.is_some() && c.group == r.group)
    };
    // Without an In-Reply-To naming one of them, our latest attempt of those that
    // went to it (else our latest, which did not): a sender never chooses an attempt
    // we did not make.
    let latest = |to_it_only: bool| {
        records
            .iter()
            .filter(|r| !to_it_only || to_it(r))
            .max_by_key(|r| (r.attempt, r.sent_at))
    };
    let Some(request) = named.or_else(|| latest(true)).or_else(|| latest(false)) else {
        return match p.unsolicited {
            Unsolicited::Accept => Ok(Answered::Unrecorded(c.attempt)),
            Unsolicited::Refuse => Err(ReceiverError::Unsolicited {
                peer: party(c).to_string(),
                what: format!("exchange {corr}, in which we sent no request"),
            }),
        };
    };
    if !to_it(&request) {
        return Err(ReceiverError::Unsolicited {
            peer: party(c).to_string(),
            what: format!(
                "request {} of exchange {corr}, which did not go to it",
                request.message_id
            ),
        });
    }
    if !request.operation.is_empty() && request.operation != c.operation {
        return Err(ReceiverError::StreamMismatch {
            correlation_id: corr.to_string(),
            expected: request.operation.clone(),
            operation: c.operation.clone(),
        });
    }
    if now > request.expires_at.saturating_add(p.skew) {
        return Err(ReceiverError::AnswerTooLate {
            peer: c.peer.clone(),
            correlation_id: corr.to_string(),
            message_id: request.message_id.clone(),
            expired_at: rfc3339(request.expires_at),
        });
    }
    // One PaymentRequired per exchange, unless it answers our paid retry (the payment
    // failed): a second one asks again for what we were asked once.
    if c.payment == Some(crate::envelope::PaymentKind::Required)
        && !request.paid
        && tx
            .payment_state(&received_from(&scoped(c, party(c))), corr)
            .map_err(backend)?
            .is_some()
    {
        return Err(ReceiverError::PaymentRequiredAgain {
            peer: c.peer.clone(),
            correlation_id: corr.to_string(),
        });
    }
    if c.payment == Some(crate::envelope::PaymentKind::Response) && !request.paid {
        return Err(ReceiverError::UnsolicitedSettlement {
            peer: c.peer.clone(),
            correlation_id: corr.to_string(),
        });
    }
    Ok(Answered::Request {
        attempt: request.attempt,
        request: request.message_id.clone(),
    })
}

/// What a reply answers.
enum Answered {
    /// The request of ours (its `messageId`), at its attempt.
    Request { attempt: u64, request: String },
    /// No request on record (a receive-only receiver): the attempt the reply states.
    Unrecorded(u64),
}

/// The signer under which an unrecorded reply's stream is kept: apart from the
/// streams of recorded exchanges, so that one accepted before our request was
/// recorded never claims its answer.
const UNRECORDED: &str = "unrecorded:";

/// The stream rules for the reply `c`, in the stream of `signer` (the candidate's, or
/// it marked as unrecorded) for `corr` and `attempt`, answering our request `request`
/// (its `messageId`; `None`: unrecorded).
#[allow(clippy::too_many_arguments)]
fn stream_event<T: Txn>(
    tx: &mut T,
    c: &Candidate,
    signer: &str,
    corr: &str,
    attempt: u64,
    request: Option<String>,
    now: i64,
    p: &ReceiverPolicy,
) -> Result<Admission, ReceiverError> {
    let id = StreamId {
        signer: signer.to_string(),
        correlation_id: corr.to_string(),
        attempt,
    };
    // One signer answers each request of ours (at its attempt): a second one's
    // events (and its final) are refused, whoever it is, while two requests of one
    // exchange that went to two agents are answered each by its own. A stream that
    // does not say which request it answers (written before streams said) counts
    // for all of them. Unrecorded streams count only among themselves.
    // Each agent's streams are its own: Alice's and Bob's copies of one answer are two
    // streams of one signer, not two signers.
    let (agent, bare) = split_agent(signer);
    let unrecorded = bare.starts_with(UNRECORDED);
    if tx.streams(Some(corr)).map_err(backend)?.iter().any(|s| {
        let (theirs, their_signer) = split_agent(&s.id.signer);
        s.id.attempt == attempt
            && theirs == agent
            && their_signer != bare
            && their_signer.starts_with(UNRECORDED) == unrecorded
            && match &request {
                Some(r) => s.requests.is_empty() || s.requests.contains(r),
                None => true,
            }
    }) {
        return Err(ReceiverError::AnsweredByAnother {
            correlation_id: corr.to_string(),
            attempt,
        });
    }
    let mut s = tx.stream(&id).map_err(backend)?.unwrap_or(StreamRow {
        id: id.clone(),
        operation: c.operation.clone(),
        next_seq: 1,
        final_seq: None,
        gap_since: None,
        updated_at: now,
        requests: Vec::new(),
    });
    // The stream answers this request too from now on: another signer's answer to it
    // is a second signer for one request.
    if let Some(r) = request {
        if !s.requests.contains(&r) {
            s.requests.push(r);
        }
    }
    if s.operation != c.operation {
        return Err(ReceiverError::StreamMismatch {
            correlation_id: corr.to_string(),
            expected: s.operation,
            operation: c.operation.clone(),
        });
    }
    let pending = tx.pending(&id).map_err(backend)?;
    let n = c.sequence;
    if n < s.next_seq || pending.iter().any(|e| e.seq == n) {
        return Err(ReceiverError::SequenceReused {
            correlation_id: corr.to_string(),
            sequence: n,
        });
    }
    let after_final = |final_sequence: u64| ReceiverError::AfterFinal {
        correlation_id: corr.to_string(),
        sequence: n,
        final_sequence,
    };
    if let Some(f) = s.final_seq {
        if n > f || c.is_final {
            return Err(after_final(f));
        }
    }
    if c.is_final {
        if let Some(later) = pending.iter().map(|e| e.seq).filter(|&q| q > n).max() {
            // A later event arrived first: this "final" cannot be the last one.
            return Err(ReceiverError::AfterFinal {
                correlation_id: corr.to_string(),
                sequence: later,
                final_sequence: n,
            });
        }
    }
    if n - s.next_seq > p.max_gap {
        return Err(ReceiverError::TooFarAhead {
            correlation_id: corr.to_string(),
            sequence: n,
            next: s.next_seq,
        });
    }
    if c.is_final {
        s.final_seq = Some(n);
    }
    s.updated_at = now;
    if n > s.next_seq {
        if tx.pending_count(signer).map_err(backend)? >= p.max_pending_per_sender {
            return Err(ReceiverError::BufferFull {
                limit: p.max_pending_per_sender,
            });
        }
        let held = Pending {
            seq: n,
            message_id: c.message_id.clone(),
            state: PendingState::Held,
            envelope: c.envelope.to_vec(),
            received_at: now,
        };
        tx.insert_pending(&id, &held).map_err(backend)?;
        s.gap_since.get_or_insert(now);
        let missing = missing(s.next_seq, n, &pending);
        tx.put_stream(&s).map_err(backend)?;
        return Ok(Admission::Held { missing });
    }
    // In order: this one goes to the agent now, and the held run behind it follows.
    s.next_seq = n + 1;
    let mut released = 0;
    let mut expired = None;
    for e in pending.iter().filter(|e| e.state == PendingState::Held) {
        if e.seq != s.next_seq {
            break;
        }
        // A held event's lifetime may have ended while it waited: it is not handed
        // over late (a fresh copy would be refused as expired too). It is dropped and
        // the stream stops there, incomplete, as for any gap: never joined around it.
        if held_expired(tx, &scoped(c, &c.signer), e, now)? {
            tx.delete_pending(&id, e.seq).map_err(backend)?;
            expired = Some(e.seq);
            break;
        }
        tx.set_deliverable(&id, e.seq).map_err(backend)?;
        s.next_seq += 1;
        released += 1;
    }
    if !pending
        .iter()
        .any(|e| e.state == PendingState::Held && e.seq >= s.next_seq && Some(e.seq) != expired)
    {
        s.gap_since = None;
    } else if expired.is_some() {
        s.gap_since = Some(now);
    }
    tx.put_stream(&s).map_err(backend)?;
    Ok(Admission::Deliver {
        retry_of: None,
        released,
    })
}

/// Whether the lifetime of the held event `e` of `signer` ended before `now`: its
/// replay tuple is kept until the end of its lifetime plus the skew (see
/// [`lifetime`]), so that is where its expiry is read. A tuple already pruned was
/// past that end.
fn held_expired<T: Txn>(
    tx: &mut T,
    signer: &str,
    e: &Pending,
    now: i64,
) -> Result<bool, ReceiverError> {
    Ok(match tx.tuple(signer, &e.message_id).map_err(backend)? {
        None => true,
        Some(t) => t.keep_until.is_some_and(|until| now > until),
    })
}

/// The sequence numbers in `next..upto` that no pending event holds (at most 64).
fn missing(next: u64, upto: u64, pending: &[Pending]) -> Vec<u64> {
    (next..upto)
        .filter(|q| !pending.iter().any(|e| e.seq == *q))
        .take(64)
        .collect()
}

/// The status of every stream of `correlation_id` (or all).
pub(crate) fn streams<T: Txn>(
    tx: &mut T,
    correlation_id: Option<&str>,
) -> Result<Vec<StreamStatus>, ReceiverError> {
    let rows = tx.streams(correlation_id).map_err(backend)?;
    let mut out = Vec::with_capacity(rows.len());
    for s in rows {
        let pending = tx.pending(&s.id).map_err(backend)?;
        let seqs = |state| {
            pending
                .iter()
                .filter(|e| e.state == state)
                .map(|e| e.seq)
                .collect::<Vec<_>>()
        };
        let held = seqs(PendingState::Held);
        let top = held.iter().copied().max().unwrap_or(s.next_seq);
        let (agent, signer) = split_agent(&s.id.signer);
        out.push(StreamStatus {
            agent: agent.map(str::to_string),
            signer: signer.to_string(),
            complete: s.final_seq.is_some_and(|f| s.next_seq > f),
            missing: missing(s.next_seq, top, &pending),
            gap_since: s.gap_since.map(rfc3339),
            deliverable: seqs(PendingState::Deliverable),
            held,
            correlation_id: s.id.correlation_id,
            attempt: s.id.attempt,
            operation: s.operation,
            next_sequence: s.next_seq,
            final_sequence: s.final_seq,
            updated_at: rfc3339(s.updated_at),
        });
    }
    Ok(out)
}

/// Takes the deliverable events of every stream of `correlation_id`.
pub(crate) fn take_deliverable<T: Txn>(
    tx: &mut T,
    correlation_id: &str,
) -> Result<Vec<StreamEvent>, ReceiverError> {
    let mut out = Vec::new();
    for s in tx.streams(Some(correlation_id)).map_err(backend)? {
        for e in tx.pending(&s.id).map_err(backend)? {
            if e.state != PendingState::Deliverable {
                continue;
            }
            tx.delete_pending(&s.id, e.seq).map_err(backend)?;
            let (agent, signer) = split_agent(&s.id.signer);
            out.push(StreamEvent {
                agent: agent.map(str::to_string),
                signer: signer.to_string(),
                correlation_id: s.id.correlation_id.clone(),
                sequence: e.seq,
                message_id: e.message_id,
                envelope: e.envelope,
            });
        }
    }
    Ok(out)
}
