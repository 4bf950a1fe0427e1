//! Replay and stream state: the receiver rules of MailA2A sections 6 and 7.
//!
//! The replay tuple (DESIGN decision 5) is the authenticated signer, `messageId`,
//! `idempotencyKey`, operation and the SHA-256 of the protected bytes. A store records
//! each accepted tuple; the same `messageId` again with the same bytes is a duplicate
//! (SMTP redelivery, not a second operation), with other bytes a security error.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::envelope::Envelope;

/// The replay tuple.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplayKey {
    /// The verified signer ([`crate::seal::SignerIdentity::replay_id`]).
    pub signer: String,
    /// `messageId`.
    pub message_id: String,
    /// `idempotencyKey`, if any.
    pub idempotency_key: Option<String>,
    /// The operation token.
    pub operation: String,
    /// SHA-256 of the transfer-decoded `application/a2a+json` bytes.
    pub digest: [u8; 32],
}

impl ReplayKey {
    /// The tuple of `envelope` signed by `signer` with protected-content `digest`.
    pub fn new(signer: &str, envelope: &Envelope, digest: [u8; 32]) -> Self {
        ReplayKey {
            signer: signer.to_string(),
            message_id: envelope.message_id().unwrap_or_default(),
            idempotency_key: envelope.idempotency_key(),
            operation: envelope.get::<String>("operation").unwrap_or_default(),
            digest,
        }
    }
}

/// What a store says of a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayOutcome {
    /// First sight: recorded, deliver it.
    New,
    /// Same signer, messageId and bytes as an accepted message: do not deliver again.
    Duplicate,
    /// Same signer and messageId with other content: a security error.
    Conflict,
}

/// Persists replay tuples. Implementations must make `check_and_record` atomic across
/// every process sharing the store.
pub trait ReplayStore {
    /// Records `key` unless the signer's `messageId` is already known, and says which.
    fn check_and_record(&self, key: &ReplayKey) -> ReplayOutcome;
}

/// An in-process replay store (tests and single-process tools).
#[derive(Debug, Default)]
pub struct MemoryReplayStore {
    seen: Mutex<HashMap<(String, String), ReplayKey>>,
}

impl ReplayStore for MemoryReplayStore {
    fn check_and_record(&self, key: &ReplayKey) -> ReplayOutcome {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match seen.get(&(key.signer.clone(), key.message_id.clone())) {
            Some(prev) if prev == key => ReplayOutcome::Duplicate,
            Some(_) => ReplayOutcome::Conflict,
            None => {
                seen.insert((key.signer.clone(), key.message_id.clone()), key.clone());
                ReplayOutcome::New
            }
        }
    }
}
