//! An in-process store: tests and single-process tools. Gone when the process ends.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Mutex;

use super::rules::{Pending, PendingState, StreamId, StreamRow, Transact, Tuple, Txn};
use super::ReceiverError;

/// Replay and stream state in memory, behind one lock.
#[derive(Debug, Default)]
pub struct MemoryReplayStore {
    state: Mutex<State>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    tuples: HashMap<(String, String), Tuple>,
    streams: BTreeMap<StreamId, StreamRow>,
    pending: BTreeMap<StreamId, BTreeMap<u64, Pending>>,
    payments: HashMap<(String, String), String>,
}

impl Transact for MemoryReplayStore {
    type Tx<'a> = State;
    /// Runs `f` on the state under the lock; the rules write only after deciding, so a
    /// refusal changes nothing and no rollback is needed.
    fn transact<R>(
        &self,
        f: &dyn Fn(&mut State) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }
    /// On a copy of the state, thrown away: linear in the state's size, which an
    /// in-process store keeps small.
    fn transact_dry<R>(
        &self,
        f: &dyn Fn(&mut State) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        let mut copy = self.state.lock().unwrap_or_else(|p| p.into_inner()).clone();
        f(&mut copy)
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
    fn tuple_by_idempotency(
        &mut self,
        signer: &str,
        key: &str,
    ) -> Result<Option<Tuple>, Infallible> {
        Ok(self
            .tuples
            .values()
            .filter(|t| t.signer == signer && t.idempotency_key.as_deref() == Some(key))
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
    fn prune(&mut self, now: i64, retention: i64) -> Result<(), Infallible> {
        self.tuples
            .retain(|_, t| t.keep_until.is_none_or(|k| k >= now));
        let pending = &self.pending;
        self.streams.retain(|id, s| {
            s.updated_at.saturating_add(retention) >= now
                || pending.get(id).is_some_and(|m| !m.is_empty())
        });
        Ok(())
    }
}
