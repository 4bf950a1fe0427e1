//! An in-process store: tests and single-process tools. Gone when the process ends.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Mutex;

use super::rules::{Pending, PendingState, StreamId, StreamRow, Transact, Tuple, Txn};
use super::{ReceiverError, SentRequest};

/// Replay and stream state in memory, behind one lock.
#[derive(Debug, Default)]
pub struct MemoryReplayStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    tuples: HashMap<(String, String), Tuple>,
    streams: BTreeMap<StreamId, StreamRow>,
    pending: BTreeMap<StreamId, BTreeMap<u64, Pending>>,
    payments: HashMap<(String, String), String>,
    /// Our requests, by correlation and `messageId`.
    requests: BTreeMap<(String, String), SentRequest>,
}

impl Transact for MemoryReplayStore {
    type Tx<'a> = MemTxn<'a>;
    /// Runs `f` on the state under the lock; the rules write only after deciding, so a
    /// refusal changes nothing and no rollback is needed.
    fn transact<R>(
        &self,
        f: &dyn Fn(&mut MemTxn<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut MemTxn {
            state: &mut guard,
            undo: None,
        })
    }
    /// On the state itself, each write logged with what it replaced and undone in
    /// reverse order afterwards: the cost is that of the writes, not of the state's
    /// size (a copy of the state was linear in it: 4.4x the open at a few thousand
    /// messages in the pipeline bench).
    fn transact_dry<R>(
        &self,
        f: &dyn Fn(&mut MemTxn<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut t = MemTxn {
            state: &mut guard,
            undo: Some(Vec::new()),
        };
        let out = f(&mut t);
        t.roll_back();
        out
    }
}

/// What a dry run's write replaced.
enum Undo {
    Tuple((String, String), Option<Tuple>),
    Stream(StreamId, Option<StreamRow>),
    Pending(StreamId, u64, Option<Pending>),
    Payment((String, String), Option<String>),
    Request((String, String), Option<SentRequest>),
}

/// One transaction on the in-memory state; a dry run logs what it overwrites.
pub(crate) struct MemTxn<'s> {
    state: &'s mut State,
    undo: Option<Vec<Undo>>,
}

impl MemTxn<'_> {
    fn log(&mut self, u: impl FnOnce(&State) -> Undo) {
        if let Some(log) = self.undo.as_mut() {
            log.push(u(self.state));
        }
    }

    fn roll_back(&mut self) {
        let Some(log) = self.undo.take() else {
            return;
        };
        let s = &mut *self.state;
        for u in log.into_iter().rev() {
            match u {
                Undo::Tuple(k, Some(v)) => drop(s.tuples.insert(k, v)),
                Undo::Tuple(k, None) => drop(s.tuples.remove(&k)),
                Undo::Stream(k, Some(v)) => drop(s.streams.insert(k, v)),
                Undo::Stream(k, None) => drop(s.streams.remove(&k)),
                Undo::Pending(id, seq, prev) => {
                    let m = s.pending.entry(id.clone()).or_default();
                    match prev {
                        Some(p) => drop(m.insert(seq, p)),
                        None => drop(m.remove(&seq)),
                    }
                    if m.is_empty() {
                        s.pending.remove(&id);
                    }
                }
                Undo::Payment(k, Some(v)) => drop(s.payments.insert(k, v)),
                Undo::Payment(k, None) => drop(s.payments.remove(&k)),
                Undo::Request(k, Some(v)) => drop(s.requests.insert(k, v)),
                Undo::Request(k, None) => drop(s.requests.remove(&k)),
            }
        }
    }
}

impl Txn for MemTxn<'_> {
    type Error = Infallible;
    fn tuple(&mut self, signer: &str, message_id: &str) -> Result<Option<Tuple>, Infallible> {
        self.state.tuple(signer, message_id)
    }
    fn tuple_by_idempotency(&mut self, peer: &str, key: &str) -> Result<Option<Tuple>, Infallible> {
        self.state.tuple_by_idempotency(peer, key)
    }
    fn sent_requests(&mut self, corr: &str) -> Result<Vec<SentRequest>, Infallible> {
        self.state.sent_requests(corr)
    }
    fn put_request(&mut self, r: &SentRequest) -> Result<(), Infallible> {
        let k = (r.correlation_id.clone(), r.message_id.clone());
        self.log(|s| Undo::Request(k.clone(), s.requests.get(&k).cloned()));
        self.state.put_request(r)
    }
    fn insert_tuple(&mut self, t: &Tuple) -> Result<(), Infallible> {
        let k = (t.signer.clone(), t.message_id.clone());
        self.log(|s| Undo::Tuple(k.clone(), s.tuples.get(&k).cloned()));
        self.state.insert_tuple(t)
    }
    fn stream(&mut self, id: &StreamId) -> Result<Option<StreamRow>, Infallible> {
        self.state.stream(id)
    }
    fn streams(&mut self, correlation_id: Option<&str>) -> Result<Vec<StreamRow>, Infallible> {
        self.state.streams(correlation_id)
    }
    fn put_stream(&mut self, r: &StreamRow) -> Result<(), Infallible> {
        self.log(|s| Undo::Stream(r.id.clone(), s.streams.get(&r.id).cloned()));
        self.state.put_stream(r)
    }
    fn pending(&mut self, id: &StreamId) -> Result<Vec<Pending>, Infallible> {
        self.state.pending(id)
    }
    fn insert_pending(&mut self, id: &StreamId, p: &Pending) -> Result<(), Infallible> {
        self.log(|s| Undo::Pending(id.clone(), p.seq, s.pending_at(id, p.seq)));
        self.state.insert_pending(id, p)
    }
    fn set_deliverable(&mut self, id: &StreamId, seq: u64) -> Result<(), Infallible> {
        self.log(|s| Undo::Pending(id.clone(), seq, s.pending_at(id, seq)));
        self.state.set_deliverable(id, seq)
    }
    fn delete_pending(&mut self, id: &StreamId, seq: u64) -> Result<(), Infallible> {
        self.log(|s| Undo::Pending(id.clone(), seq, s.pending_at(id, seq)));
        self.state.delete_pending(id, seq)
    }
    fn pending_count(&mut self, signer: &str) -> Result<u64, Infallible> {
        self.state.pending_count(signer)
    }
    fn payment_state(&mut self, peer: &str, corr: &str) -> Result<Option<String>, Infallible> {
        self.state.payment_state(peer, corr)
    }
    fn put_payment_state(
        &mut self,
        peer: &str,
        corr: &str,
        state: &str,
        now: i64,
    ) -> Result<(), Infallible> {
        let k = (peer.to_string(), corr.to_string());
        self.log(|s| Undo::Payment(k.clone(), s.payments.get(&k).cloned()));
        self.state.put_payment_state(peer, corr, state, now)
    }
    fn prune(&mut self, now: i64, retention: i64) -> Result<(), Infallible> {
        self.state.prune(now, retention)
    }
    /// A dry run never prunes (pruning is not logged).
    fn prune_due(&mut self, _now: i64) -> bool {
        self.undo.is_none()
    }
}

impl State {
    fn pending_at(&self, id: &StreamId, seq: u64) -> Option<Pending> {
        self.pending.get(id).and_then(|m| m.get(&seq)).cloned()
    }
}

impl Txn for State {
    type Error = Infallible;
    fn tuple(&mut self, signer: &str, message_id: &str) -> Result<Option<Tuple>, Infallible> {
        Ok(self
            .tuples
            .get(&(signer.to_string(), message_id.to_string()))
            .cloned())
    }
    fn tuple_by_idempotency(&mut self, peer: &str, key: &str) -> Result<Option<Tuple>, Infallible> {
        Ok(self
            .tuples
            .values()
            .filter(|t| t.peer == peer && t.idempotency_key.as_deref() == Some(key))
            .min_by_key(|t| t.accepted_at)
            .cloned())
    }
    fn insert_tuple(&mut self, t: &Tuple) -> Result<(), Infallible> {
        self.tuples
            .insert((t.signer.clone(), t.message_id.clone()), t.clone());
        Ok(())
    }
    fn stream(&mut self, id: &StreamId) -> Result<Option<StreamRow>, Infallible> {
        Ok(self.streams.get(id).cloned())
    }
    fn streams(&mut self, correlation_id: Option<&str>) -> Result<Vec<StreamRow>, Infallible> {
        Ok(self
            .streams
            .values()
            .filter(|s| correlation_id.is_none_or(|c| s.id.correlation_id == c))
            .cloned()
            .collect())
    }
    fn put_stream(&mut self, s: &StreamRow) -> Result<(), Infallible> {
        self.streams.insert(s.id.clone(), s.clone());
        Ok(())
    }
    fn pending(&mut self, id: &StreamId) -> Result<Vec<Pending>, Infallible> {
        Ok(self
            .pending
            .get(id)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default())
    }
    fn insert_pending(&mut self, id: &StreamId, p: &Pending) -> Result<(), Infallible> {
        self.pending
            .entry(id.clone())
            .or_default()
            .insert(p.seq, p.clone());
        Ok(())
    }
    fn set_deliverable(&mut self, id: &StreamId, seq: u64) -> Result<(), Infallible> {
        if let Some(p) = self.pending.get_mut(id).and_then(|m| m.get_mut(&seq)) {
            p.state = PendingState::Deliverable;
        }
        Ok(())
    }
    fn delete_pending(&mut self, id: &StreamId, seq: u64) -> Result<(), Infallible> {
        if let Some(m) = self.pending.get_mut(id) {
            m.remove(&seq);
        }
        Ok(())
    }
    fn pending_count(&mut self, signer: &str) -> Result<u64, Infallible> {
        Ok(self
            .pending
            .iter()
            .filter(|(id, _)| id.signer == signer)
            .map(|(_, m)| m.len() as u64)
            .sum())
    }
    fn payment_state(&mut self, peer: &str, corr: &str) -> Result<Option<String>, Infallible> {
        Ok(self
            .payments
            .get(&(peer.to_string(), corr.to_string()))
            .cloned())
    }
    fn put_payment_state(
        &mut self,
        peer: &str,
        corr: &str,
        state: &str,
        _now: i64,
    ) -> Result<(), Infallible> {
        self.payments
            .insert((peer.to_string(), corr.to_string()), state.to_string());
        Ok(())
    }
    fn sent_requests(&mut self, corr: &str) -> Result<Vec<SentRequest>, Infallible> {
        Ok(self
            .requests
            .range((corr.to_string(), String::new())..)
            .take_while(|((c, _), _)| c == corr)
            .map(|(_, r)| r.clone())
            .collect())
    }
    fn put_request(&mut self, r: &SentRequest) -> Result<(), Infallible> {
        self.requests
            .insert((r.correlation_id.clone(), r.message_id.clone()), r.clone());
        Ok(())
    }
    fn prune(&mut self, now: i64, retention: i64) -> Result<(), Infallible> {
        self.tuples.retain(|_, t| {
            t.keep_until.is_none_or(|k| k >= now) || t.retain_until.is_some_and(|k| k >= now)
        });
        self.requests
            .retain(|_, r| r.expires_at.saturating_add(retention) >= now);
        let pending = &self.pending;
        let requests = &self.requests;
        // A stream is kept while a request of its exchange is on record: its final
        // must not be forgotten while answers are still accepted.
        self.streams.retain(|id, s| {
            s.updated_at.saturating_add(retention) >= now
                || pending.get(id).is_some_and(|m| !m.is_empty())
                || requests
                    .range((id.correlation_id.clone(), String::new())..)
                    .next()
                    .is_some_and(|((c, _), _)| c == &id.correlation_id)
        });
        Ok(())
    }
}
