//! The durable replay and stream state a key store keeps, opened when first used: what a [`crate::Receiver`] or [`crate::Sender`] built over a store
//! uses unless the caller names another ([`crate::keystore::KeyStore::state_location`]).
//!
//! Opened lazily so that building stays infallible and a sender that only signs
//! creates nothing; a state that does not open refuses every message (the error is
//! the state's own, each time, so a state that comes back is used again).

use std::cell::OnceCell;

use super::{
    Admission, Candidate, ReceiverError, ReceiverPolicy, ReplayStore, SentRequest, StateLocation,
    StreamEvent, StreamStatus,
};

/// The replay state at a [`StateLocation`], opened at first use.
pub(crate) struct Durable {
    location: StateLocation,
    open: OnceCell<Box<dyn ReplayStore>>,
}

impl Durable {
    pub(crate) fn new(location: StateLocation) -> Durable {
        Durable {
            location,
            open: OnceCell::new(),
        }
    }

    fn state(&self) -> Result<&dyn ReplayStore, ReceiverError> {
        if let Some(s) = self.open.get() {
            return Ok(s.as_ref());
        }
        let opened = super::open_location(&self.location)?;
        Ok(self.open.get_or_init(|| opened).as_ref())
    }
}

impl ReplayStore for Durable {
    fn admit(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError> {
        self.state()?.admit(candidate, now, policy)
    }
    fn preview(
        &self,
        candidate: &Candidate,
        now: i64,
        policy: &ReceiverPolicy,
    ) -> Result<Admission, ReceiverError> {
        self.state()?.preview(candidate, now, policy)
    }
    fn streams(&self, correlation_id: Option<&str>) -> Result<Vec<StreamStatus>, ReceiverError> {
        self.state()?.streams(correlation_id)
    }
    fn take_deliverable(&self, correlation_id: &str) -> Result<Vec<StreamEvent>, ReceiverError> {
        self.state()?.take_deliverable(correlation_id)
    }
    fn record_payment_required(
        &self,
        peer: &str,
        correlation_id: &str,
        priced: Option<&str>,
        now: i64,
    ) -> Result<(), ReceiverError> {
        self.state()?
            .record_payment_required(peer, correlation_id, priced, now)
    }
    fn record_request(&self, request: &SentRequest) -> Result<(), ReceiverError> {
        self.state()?.record_request(request)
    }
}
