//! The embedded default: replay and stream state in one SQLite database of the store
//! directory, shared safely by every process on the machine.
//!
//! Each decision runs in a `BEGIN IMMEDIATE` transaction, which takes SQLite's write
//! lock first, so two processes opening the same message serialise and exactly one
//! records it. The file itself (owner-only, WAL, `synchronous=FULL`, migrations) is
//! [`crate::sqlite`]'s.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

pub(crate) use crate::sqlite::FILE_NAME;

use super::rules::{self, Pending, PendingState, StreamId, StreamRow, Transact, Tuple, Txn};
use super::{store_error, ReceiverError, SentRequest};

/// Replay and stream state in a SQLite file.
#[derive(Debug)]
pub struct SqliteReplayStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    last_prune: AtomicI64,
}

fn sql(what: &str) -> impl FnOnce(rusqlite::Error) -> ReceiverError + '_ {
    move |e| store_error(what, e)
}

impl SqliteReplayStore {
    /// Opens (creating it owner-only if absent) the database at `path` and brings its
    /// schema up to date. A database written by a newer mailseal is refused.
    pub fn open(path: &Path) -> Result<Self, ReceiverError> {
        let conn = crate::sqlite::open(path).map_err(|e| match e {
            crate::sqlite::DbError::NewerSchema { found, supported } => {
                ReceiverError::NewerSchema { found, supported }
            }
            e => store_error(&path.display().to_string(), e),
        })?;
        Ok(SqliteReplayStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            last_prune: AtomicI64::new(i64::MIN),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the file.
    pub fn schema_version(&self) -> Result<i64, ReceiverError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql("schema version"))
    }
}

impl SqliteReplayStore {
    /// Runs `f` in one immediate (write-locked) transaction, committed when `f`
    /// accepts, or always rolled back when `dry`. A dry run takes the write lock too:
    /// the rules write before they decide, and a deferred transaction that upgrades
    /// to a write lock while another process writes fails at once
    /// (SQLITE_BUSY_SNAPSHOT) instead of waiting.
    fn run<R>(
        &self,
        f: &dyn Fn(&mut SqliteTxn<'_>) -> Result<R, ReceiverError>,
        dry: bool,
    ) -> Result<R, ReceiverError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("begin"))?;
        let mut t = SqliteTxn {
            tx,
            last_prune: &self.last_prune,
            dry,
        };
        let out = f(&mut t)?;
        if !dry {
            t.tx.commit().map_err(sql("commit"))?;
        }
        // Otherwise dropping the transaction rolls it back.
        Ok(out)
    }
}

impl Transact for SqliteReplayStore {
    type Tx<'a> = SqliteTxn<'a>;
    fn transact<R>(
        &self,
        f: &dyn Fn(&mut SqliteTxn<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        self.run(f, false)
    }
    fn transact_dry<R>(
        &self,
        f: &dyn Fn(&mut SqliteTxn<'_>) -> Result<R, ReceiverError>,
    ) -> Result<R, ReceiverError> {
        self.run(f, true)
    }
}

pub(crate) struct SqliteTxn<'c> {
    tx: rusqlite::Transaction<'c>,
    last_prune: &'c AtomicI64,
    /// A dry run (rolled back): never prunes.
    dry: bool,
}

/// Sequence numbers and attempts are stored as SQLite's signed 64-bit integers.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
fn nat(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn tuple_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Tuple> {
    let digest: Vec<u8> = r.get(4)?;
    Ok(Tuple {
        signer: r.get(0)?,
        message_id: r.get(1)?,
        idempotency_key: r.get(2)?,
        operation: r.get(3)?,
        digest: digest.try_into().unwrap_or([0; 32]),
        accepted_at: r.get(5)?,
        keep_until: r.get(6)?,
        peer: r.get::<_, Option<String>>(7)?.unwrap_or_default(),
        retain_until: r.get(8)?,
        payload_digest: r
            .get::<_, Option<Vec<u8>>>(9)?
            .and_then(|d| d.try_into().ok()),
        correlation_id: r.get(10)?,
        mail_id: r.get(11)?,
    })
}

fn request_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SentRequest> {
    Ok(SentRequest {
        correlation_id: r.get(0)?,
        message_id: r.get(1)?,
        attempt: nat(r.get(2)?),
        mail_id: r.get(3)?,
        author: r.get(4)?,
        recipients: crate::replay::rules::split_recipients(&r.get::<_, String>(5)?),
        group: r.get(6)?,
        operation: r.get(7)?,
        idempotency_key: r.get(8)?,
        expires_at: r.get(9)?,
        paid: r.get(10)?,
        sent_at: r.get(11)?,
    })
}

const REQUEST_COLUMNS: &str = "correlation_id, message_id, attempt, mail_id, author, recipients, \
     grp, operation, idempotency_key, expires_at, paid, sent_at";

fn stream_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StreamRow> {
    Ok(StreamRow {
        id: StreamId {
            signer: r.get(0)?,
            correlation_id: r.get(1)?,
            attempt: nat(r.get(2)?),
        },
        operation: r.get(3)?,
        next_seq: nat(r.get(4)?),
        final_seq: r.get::<_, Option<i64>>(5)?.map(nat),
        gap_since: r.get(6)?,
        updated_at: r.get(7)?,
        requests: crate::replay::rules::split_requests(r.get(8)?),
    })
}

const TUPLE_COLUMNS: &str = "signer, message_id, idempotency_key, operation, digest, accepted_at, \
     keep_until, peer, retain_until, payload_digest, correlation_id, mail_id";
const STREAM_COLUMNS: &str = "signer, correlation_id, attempt, operation, next_seq, final_seq, \
     gap_since, updated_at, request";

impl Txn for SqliteTxn<'_> {
    type Error = rusqlite::Error;
    fn tuple(&mut self, signer: &str, message_id: &str) -> rusqlite::Result<Option<Tuple>> {
        self.tx
            .prepare_cached(&format!(
                "SELECT {TUPLE_COLUMNS} FROM replay_tuple WHERE signer = ?1 AND message_id = ?2"
            ))?
            .query_row(params![signer, message_id], tuple_row)
            .optional()
    }
    fn tuple_by_idempotency(&mut self, peer: &str, key: &str) -> rusqlite::Result<Option<Tuple>> {
        self.tx
            .prepare_cached(&format!(
                "SELECT {TUPLE_COLUMNS} FROM replay_tuple WHERE peer = ?1 AND idempotency_key = ?2
                 ORDER BY accepted_at LIMIT 1"
            ))?
            .query_row(params![peer, key], tuple_row)
            .optional()
    }
    fn sent_requests(&mut self, corr: &str) -> rusqlite::Result<Vec<SentRequest>> {
        self.tx
            .prepare_cached(&format!(
                "SELECT {REQUEST_COLUMNS} FROM sent_request WHERE correlation_id = ?1
                 ORDER BY message_id"
            ))?
            .query_map(params![corr], request_row)?
            .collect()
    }
    fn put_request(&mut self, r: &SentRequest) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(&format!(
                "INSERT OR REPLACE INTO sent_request ({REQUEST_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ))?
            .execute(params![
                r.correlation_id,
                r.message_id,
                int(r.attempt),
                r.mail_id,
                r.author,
                r.recipients.join("\n"),
                r.group,
                r.operation,
                r.idempotency_key,
                r.expires_at,
                r.paid,
                r.sent_at
            ])
            .map(drop)
    }
    fn insert_tuple(&mut self, t: &Tuple) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(&format!(
                "INSERT INTO replay_tuple ({TUPLE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ))?
            .execute(params![
                t.signer,
                t.message_id,
                t.idempotency_key,
                t.operation,
                &t.digest[..],
                t.accepted_at,
                t.keep_until,
                t.peer,
                t.retain_until,
                t.payload_digest.as_ref().map(|d| &d[..]),
                t.correlation_id,
                t.mail_id
            ])
            .map(drop)
    }
    fn stream(&mut self, id: &StreamId) -> rusqlite::Result<Option<StreamRow>> {
        self.tx
            .prepare_cached(&format!(
                "SELECT {STREAM_COLUMNS} FROM stream
                 WHERE signer = ?1 AND correlation_id = ?2 AND attempt = ?3"
            ))?
            .query_row(
                params![id.signer, id.correlation_id, int(id.attempt)],
                stream_row,
            )
            .optional()
    }
    fn streams(&mut self, correlation_id: Option<&str>) -> rusqlite::Result<Vec<StreamRow>> {
        self.tx
            .prepare_cached(&format!(
                "SELECT {STREAM_COLUMNS} FROM stream
                 WHERE ?1 IS NULL OR correlation_id = ?1
                 ORDER BY correlation_id, signer, attempt"
            ))?
            .query_map(params![correlation_id], stream_row)?
            .collect()
    }
    fn put_stream(&mut self, s: &StreamRow) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(&format!(
                "INSERT OR REPLACE INTO stream ({STREAM_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))?
            .execute(params![
                s.id.signer,
                s.id.correlation_id,
                int(s.id.attempt),
                s.operation,
                int(s.next_seq),
                s.final_seq.map(int),
                s.gap_since,
                s.updated_at,
                crate::replay::rules::join_requests(&s.requests)
            ])
            .map(drop)
    }
    fn pending(&mut self, id: &StreamId) -> rusqlite::Result<Vec<Pending>> {
        self.tx
            .prepare_cached(
                "SELECT seq, message_id, state, envelope, received_at FROM stream_event
                 WHERE signer = ?1 AND correlation_id = ?2 AND attempt = ?3 ORDER BY seq",
            )?
            .query_map(
                params![id.signer, id.correlation_id, int(id.attempt)],
                |r| {
                    Ok(Pending {
                        seq: nat(r.get(0)?),
                        message_id: r.get(1)?,
                        state: PendingState::parse(&r.get::<_, String>(2)?),
                        envelope: r.get(3)?,
                        received_at: r.get(4)?,
                    })
                },
            )?
            .collect()
    }
    fn insert_pending(&mut self, id: &StreamId, p: &Pending) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO stream_event
                 (signer, correlation_id, attempt, seq, message_id, state, envelope, received_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                id.signer,
                id.correlation_id,
                int(id.attempt),
                int(p.seq),
                p.message_id,
                p.state.as_str(),
                p.envelope,
                p.received_at
            ])
            .map(drop)
    }
    fn set_deliverable(&mut self, id: &StreamId, seq: u64) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(
                "UPDATE stream_event SET state = 'deliverable'
                 WHERE signer = ?1 AND correlation_id = ?2 AND attempt = ?3 AND seq = ?4",
            )?
            .execute(params![
                id.signer,
                id.correlation_id,
                int(id.attempt),
                int(seq)
            ])
            .map(drop)
    }
    fn delete_pending(&mut self, id: &StreamId, seq: u64) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(
                "DELETE FROM stream_event
                 WHERE signer = ?1 AND correlation_id = ?2 AND attempt = ?3 AND seq = ?4",
            )?
            .execute(params![
                id.signer,
                id.correlation_id,
                int(id.attempt),
                int(seq)
            ])
            .map(drop)
    }
    fn pending_count(&mut self, signer: &str) -> rusqlite::Result<u64> {
        self.tx
            .prepare_cached("SELECT count(*) FROM stream_event WHERE signer = ?1")?
            .query_row(params![signer], |r| r.get::<_, i64>(0))
            .map(nat)
    }
    fn payment_state(&mut self, peer: &str, corr: &str) -> rusqlite::Result<Option<String>> {
        self.tx
            .prepare_cached(
                "SELECT state FROM payment_flow WHERE peer = ?1 AND correlation_id = ?2",
            )?
            .query_row(params![peer, corr], |r| r.get(0))
            .optional()
    }
    fn put_payment_state(
        &mut self,
        peer: &str,
        corr: &str,
        state: &str,
        now: i64,
    ) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(
                "INSERT OR REPLACE INTO payment_flow (peer, correlation_id, state, updated_at)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![peer, corr, state, now])
            .map(drop)
    }
    fn prune_due(&mut self, now: i64) -> bool {
        !self.dry && rules::due(self.last_prune, now)
    }
    fn prune(&mut self, now: i64, retention: i64) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(
                "DELETE FROM replay_tuple WHERE keep_until < ?1
                 AND (retain_until IS NULL OR retain_until < ?1)",
            )?
            .execute(params![now])?;
        self.tx
            .prepare_cached("DELETE FROM sent_request WHERE expires_at < ?1")?
            .execute(params![now.saturating_sub(retention)])?;
        self.tx
            .prepare_cached(
                "DELETE FROM stream WHERE updated_at < ?1 AND NOT EXISTS (
                   SELECT 1 FROM stream_event e WHERE e.signer = stream.signer
                   AND e.correlation_id = stream.correlation_id AND e.attempt = stream.attempt)
                 AND NOT EXISTS (SELECT 1 FROM sent_request r
                   WHERE r.correlation_id = stream.correlation_id)",
            )?
            .execute(params![now.saturating_sub(retention)])
            .map(drop)
    }
}
