//! Replay and stream state in PostgreSQL, shared by several gateway processes on
//! several machines.
//!
//! Each decision runs in a SERIALIZABLE transaction: PostgreSQL aborts one of two
//! transactions whose reads and writes cross (two processes opening the same message),
//! and the loser runs again from the start, this time seeing the winner's commit. So
//! exactly one process accepts a message and the other reports a duplicate.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::Mutex;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, IsolationLevel, Row, Statement};

use super::rules::{self, Pending, PendingState, StreamId, StreamRow, Transact, Tuple, Txn};
use super::{store_error, ReceiverError, SentRequest};

/// How often a transaction that lost a serialisation race is run again.
const MAX_ATTEMPTS: u32 = 64;

/// Replay and stream state in a PostgreSQL database.
pub struct PostgresReplayStore {
    client: Mutex<Connection>,
    last_prune: AtomicI64,
}

/// The connection and the statements prepared on it (one round trip less for every
/// statement after the first).
struct Connection {
    client: Client,
    prepared: HashMap<String, Statement>,
}

impl std::fmt::Debug for PostgresReplayStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The connection string may hold a password: never printed.
        f.debug_struct("PostgresReplayStore")
            .finish_non_exhaustive()
    }
}

fn pg(what: &str) -> impl FnOnce(postgres::Error) -> ReceiverError + '_ {
    move |e| store_error(what, e)
}

/// Whether PostgreSQL asks for the transaction to be run again.
fn retryable(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE
            || *c == SqlState::T_R_DEADLOCK_DETECTED
            || *c == SqlState::UNIQUE_VIOLATION
    )
}

impl PostgresReplayStore {
    /// Connects (`postgres://user:password@host/db`; TLS is not offered, so use a local
    /// socket or a trusted network) and brings the schema up to date.
    pub fn connect(url: &str) -> Result<Self, ReceiverError> {
        let client = crate::postgres_db::connect(url).map_err(|e| match e {
            crate::postgres_db::PgDbError::NewerSchema { found, supported } => {
                ReceiverError::NewerSchema { found, supported }
            }
            e => store_error("connect", e),
        })?;
        let store = PostgresReplayStore {
            client: Mutex::new(Connection {
                client,
                prepared: HashMap::new(),
            }),
            last_prune: AtomicI64::new(i64::MIN),
        };
        Ok(store)
    }

    /// The schema version of the database.
    pub fn schema_version(&self) -> Result<i64, ReceiverError> {
        let mut c = self.client.lock().unwrap_or_else(|p| p.into_inner());
        let row = c
            .client
            .query_one("SELECT version FROM mailseal_schema", &[])
            .map_err(pg("schema version"))?;
        Ok(row.get(0))
    }
}

impl PostgresReplayStore {
    /// Runs `f` in a SERIALIZABLE transaction, again from the start while PostgreSQL
    /// reports a serialisation failure; committed when `f` accepts, or always rolled
    /// back when `dry`.
    fn run<R>(
        &self,
        f: &dyn Fn(&mut PgTxn<'_>) -> Result<R, ReceiverError>,
        dry: bool,
    ) -> Result<R, ReceiverError> {
        let mut guard = self.client.lock().unwrap_or_else(|p| p.into_inner());
        let c = &mut *guard;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let tx = c
                .client
                .build_transaction()
                .isolation_level(IsolationLevel::Serializable)
                .start()
                .map_err(pg("begin"))?;
            let mut t = PgTxn {
                tx,
                retry: false,
                prepared: &mut c.prepared,
                last_prune: &self.last_prune,
                dry,
            };
            let lost = match f(&mut t) {
                Ok(out) if dry => match t.tx.rollback() {
                    Ok(()) => return Ok(out),
                    Err(e) => return Err(store_error("rollback", e)),
                },
                Ok(out) => match t.tx.commit() {
                    Ok(()) => return Ok(out),
                    Err(e) if retryable(&e) => store_error("commit", e),
                    Err(e) => return Err(store_error("commit", e)),
                },
                // Dropping the transaction rolls it back.
                Err(e) if t.retry => e,
                Err(e) => return Err(e),
            };
            if attempt >= MAX_ATTEMPTS {
                return Err(lost);
            }
            std::thread::sleep(Duration::from_millis(u64::from(attempt.min(20))));
        }
    }
}

impl Transact for PostgresReplayStore {
    type Tx<'a> = PgTxn<'a>;
    /// Runs `f` in a SERIALIZABLE transaction, again from the start while PostgreSQL
    /// reports a serialisation failure.
    fn transact<R>(
        &self,
        f: &dyn Fn(&mut PgTxn<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        self.run(f, false)
    }
    fn transact_dry<R>(
        &self,
        f: &dyn Fn(&mut PgTxn<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        self.run(f, true)
    }
}

pub(crate) struct PgTxn<'c> {
    tx: postgres::Transaction<'c>,
    /// Set when a statement failed in a way that running the transaction again fixes.
    retry: bool,
    prepared: &'c mut HashMap<String, Statement>,
    last_prune: &'c AtomicI64,
    /// A dry run (rolled back): never prunes.
    dry: bool,
}

impl PgTxn<'_> {
    fn note<T>(&mut self, r: Result<T, postgres::Error>) -> Result<T, postgres::Error> {
        if let Err(e) = &r {
            self.retry |= retryable(e);
        }
        r
    }
    fn statement(&mut self, q: &str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.prepared.get(q) {
            return Ok(s.clone());
        }
        let r = self.tx.prepare(q);
        let s = self.note(r)?;
        self.prepared.insert(q.to_string(), s.clone());
        Ok(s)
    }
    fn query(
        &mut self,
        q: &str,
        args: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        let s = self.statement(q)?;
        let r = self.tx.query(&s, args);
        self.note(r)
    }
    fn execute(
        &mut self,
        q: &str,
        args: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<(), postgres::Error> {
        let s = self.statement(q)?;
        let r = self.tx.execute(&s, args).map(drop);
        self.note(r)
    }
}

/// Sequence numbers and attempts are stored as BIGINT.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
fn nat(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

const TUPLE_COLUMNS: &str = "signer, message_id, idempotency_key, operation, digest, accepted_at, \
     keep_until, peer, retain_until, payload_digest, correlation_id, mail_id";
const REQUEST_COLUMNS: &str = "correlation_id, message_id, attempt, mail_id, author, recipients, \
     grp, operation, idempotency_key, expires_at, paid, sent_at";
const STREAM_COLUMNS: &str = "signer, correlation_id, attempt, operation, next_seq, final_seq, \
     gap_since, updated_at, request";

fn tuple_row(r: &Row) -> Tuple {
    let digest: Vec<u8> = r.get(4);
    Tuple {
        signer: r.get(0),
        message_id: r.get(1),
        idempotency_key: r.get(2),
        operation: r.get(3),
        digest: digest.try_into().unwrap_or([0; 32]),
        accepted_at: r.get(5),
        keep_until: r.get(6),
        peer: r.get::<_, Option<String>>(7).unwrap_or_default(),
        retain_until: r.get(8),
        payload_digest: r
            .get::<_, Option<Vec<u8>>>(9)
            .and_then(|d| d.try_into().ok()),
        correlation_id: r.get(10),
        mail_id: r.get(11),
    }
}

fn request_row(r: &Row) -> SentRequest {
    SentRequest {
        correlation_id: r.get(0),
        message_id: r.get(1),
        attempt: nat(r.get(2)),
        mail_id: r.get(3),
        author: r.get(4),
        recipients: rules::split_recipients(r.get(5)),
        group: r.get(6),
        operation: r.get(7),
        idempotency_key: r.get(8),
        expires_at: r.get(9),
        paid: r.get(10),
        sent_at: r.get(11),
    }
}

fn stream_row(r: &Row) -> StreamRow {
    StreamRow {
        id: StreamId {
            signer: r.get(0),
            correlation_id: r.get(1),
            attempt: nat(r.get(2)),
        },
        operation: r.get(3),
        next_seq: nat(r.get(4)),
        final_seq: r.get::<_, Option<i64>>(5).map(nat),
        gap_since: r.get(6),
        updated_at: r.get(7),
        requests: crate::replay::rules::split_requests(r.get(8)),
    }
}

impl Txn for PgTxn<'_> {
    type Error = postgres::Error;
    fn tuple(&mut self, signer: &str, message_id: &str) -> Result<Option<Tuple>, Self::Error> {
        let rows = self.query(
            &format!(
                "SELECT {TUPLE_COLUMNS} FROM mailseal_replay_tuple
                 WHERE signer = $1 AND message_id = $2"
            ),
            &[&signer, &message_id],
        )?;
        Ok(rows.first().map(tuple_row))
    }
    fn tuple_by_idempotency(
        &mut self,
        peer: &str,
        key: &str,
    ) -> Result<Option<Tuple>, Self::Error> {
        let rows = self.query(
            &format!(
                "SELECT {TUPLE_COLUMNS} FROM mailseal_replay_tuple
                 WHERE peer = $1 AND idempotency_key = $2 ORDER BY accepted_at LIMIT 1"
            ),
            &[&peer, &key],
        )?;
        Ok(rows.first().map(tuple_row))
    }
    fn sent_requests(&mut self, corr: &str) -> Result<Vec<SentRequest>, Self::Error> {
        let rows = self.query(
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM mailseal_sent_request
                 WHERE correlation_id = $1 ORDER BY message_id"
            ),
            &[&corr],
        )?;
        Ok(rows.iter().map(request_row).collect())
    }
    fn put_request(&mut self, r: &SentRequest) -> Result<(), Self::Error> {
        self.execute(
            &format!(
                "INSERT INTO mailseal_sent_request ({REQUEST_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                 ON CONFLICT (correlation_id, message_id) DO UPDATE SET
                 attempt = EXCLUDED.attempt, mail_id = EXCLUDED.mail_id,
                 author = EXCLUDED.author, recipients = EXCLUDED.recipients,
                 grp = EXCLUDED.grp, operation = EXCLUDED.operation,
                 idempotency_key = EXCLUDED.idempotency_key,
                 expires_at = EXCLUDED.expires_at, paid = EXCLUDED.paid,
                 sent_at = EXCLUDED.sent_at"
            ),
            &[
                &r.correlation_id,
                &r.message_id,
                &int(r.attempt),
                &r.mail_id,
                &r.author,
                &r.recipients.join("\n"),
                &r.group,
                &r.operation,
                &r.idempotency_key,
                &r.expires_at,
                &r.paid,
                &r.sent_at,
            ],
        )
    }
    fn insert_tuple(&mut self, t: &Tuple) -> Result<(), Self::Error> {
        self.execute(
            &format!(
                "INSERT INTO mailseal_replay_tuple ({TUPLE_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
            ),
            &[
                &t.signer,
                &t.message_id,
                &t.idempotency_key,
                &t.operation,
                &&t.digest[..],
                &t.accepted_at,
                &t.keep_until,
                &t.peer,
                &t.retain_until,
                &t.payload_digest.as_ref().map(|d| d.to_vec()),
                &t.correlation_id,
                &t.mail_id,
            ],
        )
    }
    fn stream(&mut self, id: &StreamId) -> Result<Option<StreamRow>, Self::Error> {
        let rows = self.query(
            &format!(
                "SELECT {STREAM_COLUMNS} FROM mailseal_stream
                 WHERE signer = $1 AND correlation_id = $2 AND attempt = $3"
            ),
            &[&id.signer, &id.correlation_id, &int(id.attempt)],
        )?;
        Ok(rows.first().map(stream_row))
    }
    fn streams(&mut self, correlation_id: Option<&str>) -> Result<Vec<StreamRow>, Self::Error> {
        let rows = self.query(
            &format!(
                "SELECT {STREAM_COLUMNS} FROM mailseal_stream
                 WHERE $1::TEXT IS NULL OR correlation_id = $1
                 ORDER BY correlation_id, signer, attempt"
            ),
            &[&correlation_id],
        )?;
        Ok(rows.iter().map(stream_row).collect())
    }
    fn put_stream(&mut self, s: &StreamRow) -> Result<(), Self::Error> {
        self.execute(
            &format!(
                "INSERT INTO mailseal_stream ({STREAM_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (signer, correlation_id, attempt) DO UPDATE SET
                   operation = EXCLUDED.operation, next_seq = EXCLUDED.next_seq,
                   final_seq = EXCLUDED.final_seq, gap_since = EXCLUDED.gap_since,
                   updated_at = EXCLUDED.updated_at, request = EXCLUDED.request"
            ),
            &[
                &s.id.signer,
                &s.id.correlation_id,
                &int(s.id.attempt),
                &s.operation,
                &int(s.next_seq),
                &s.final_seq.map(int),
                &s.gap_since,
                &s.updated_at,
                &crate::replay::rules::join_requests(&s.requests),
            ],
        )
    }
    fn pending(&mut self, id: &StreamId) -> Result<Vec<Pending>, Self::Error> {
        let rows = self.query(
            "SELECT seq, message_id, state, envelope, received_at FROM mailseal_stream_event
             WHERE signer = $1 AND correlation_id = $2 AND attempt = $3 ORDER BY seq",
            &[&id.signer, &id.correlation_id, &int(id.attempt)],
        )?;
        Ok(rows
            .iter()
            .map(|r| Pending {
                seq: nat(r.get(0)),
                message_id: r.get(1),
                state: PendingState::parse(r.get(2)),
                envelope: r.get(3),
                received_at: r.get(4),
            })
            .collect())
    }
    fn insert_pending(&mut self, id: &StreamId, p: &Pending) -> Result<(), Self::Error> {
        self.execute(
            "INSERT INTO mailseal_stream_event
             (signer, correlation_id, attempt, seq, message_id, state, envelope, received_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &id.signer,
                &id.correlation_id,
                &int(id.attempt),
                &int(p.seq),
                &p.message_id,
                &p.state.as_str(),
                &p.envelope,
                &p.received_at,
            ],
        )
    }
    fn set_deliverable(&mut self, id: &StreamId, seq: u64) -> Result<(), Self::Error> {
        self.execute(
            "UPDATE mailseal_stream_event SET state = 'deliverable'
             WHERE signer = $1 AND correlation_id = $2 AND attempt = $3 AND seq = $4",
            &[&id.signer, &id.correlation_id, &int(id.attempt), &int(seq)],
        )
    }
    fn delete_pending(&mut self, id: &StreamId, seq: u64) -> Result<(), Self::Error> {
        self.execute(
            "DELETE FROM mailseal_stream_event
             WHERE signer = $1 AND correlation_id = $2 AND attempt = $3 AND seq = $4",
            &[&id.signer, &id.correlation_id, &int(id.attempt), &int(seq)],
        )
    }
    fn pending_count(&mut self, signer: &str) -> Result<u64, Self::Error> {
        let rows = self.query(
            "SELECT count(*) FROM mailseal_stream_event WHERE signer = $1",
            &[&signer],
        )?;
        Ok(rows.first().map_or(0, |r| nat(r.get(0))))
    }
    fn payment_state(&mut self, peer: &str, corr: &str) -> Result<Option<String>, Self::Error> {
        let rows = self.query(
            "SELECT state FROM mailseal_payment_flow WHERE peer = $1 AND correlation_id = $2",
            &[&peer, &corr],
        )?;
        Ok(rows.first().map(|r| r.get(0)))
    }
    fn put_payment_state(
        &mut self,
        peer: &str,
        corr: &str,
        state: &str,
        now: i64,
    ) -> Result<(), Self::Error> {
        self.execute(
            "INSERT INTO mailseal_payment_flow (peer, correlation_id, state, updated_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (peer, correlation_id) DO UPDATE SET state = EXCLUDED.state,
             updated_at = EXCLUDED.updated_at",
            &[&peer, &corr, &state, &now],
        )
    }
    fn prune_due(&mut self, now: i64) -> bool {
        !self.dry && rules::due(self.last_prune, now)
    }
    fn prune(&mut self, now: i64, retention: i64) -> Result<(), Self::Error> {
        self.execute(
            "DELETE FROM mailseal_replay_tuple WHERE keep_until < $1
             AND (retain_until IS NULL OR retain_until < $1)",
            &[&now],
        )?;
        self.execute(
            "DELETE FROM mailseal_sent_request WHERE expires_at < $1",
            &[&now.saturating_sub(retention)],
        )?;
        self.execute(
            "DELETE FROM mailseal_stream s WHERE updated_at < $1 AND NOT EXISTS (
               SELECT 1 FROM mailseal_stream_event e WHERE e.signer = s.signer
               AND e.correlation_id = s.correlation_id AND e.attempt = s.attempt)
             AND NOT EXISTS (SELECT 1 FROM mailseal_sent_request r
               WHERE r.correlation_id = s.correlation_id)",
            &[&now.saturating_sub(retention)],
        )
    }
}
