//! The bridge's durable state (one owner-only SQLite file, WAL, `synchronous=FULL`):
//! the calls its local agents made and the answers mail brought them, the remote
//! tasks they may poll, and the calls mail brought for the local agents with how far
//! each got. Every change is committed before the bridge acts on it, so a bridge
//! killed at any point starts again where it was: a call mailed is never mailed as a
//! second call, an answer taken is never lost, a call taken for a local agent is made
//! at most once (see `inbound`).

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};

/// A failure of the state database.
#[derive(Debug, thiserror::Error)]
#[error("bridge state: {0}")]
pub struct StateError(String);

impl From<rusqlite::Error> for StateError {
    fn from(e: rusqlite::Error) -> Self {
        StateError(e.to_string())
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS bridge_call (
    correlation TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    peer TEXT NOT NULL,
    method TEXT NOT NULL,
    idem TEXT NOT NULL,
    created INTEGER NOT NULL,
    sealed BLOB,
    queued INTEGER NOT NULL DEFAULT 0,
    done INTEGER NOT NULL DEFAULT 0,
    task_id TEXT,
    UNIQUE (agent, peer, method, idem)
);
CREATE TABLE IF NOT EXISTS bridge_answer (
    correlation TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    kind TEXT NOT NULL,
    final INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (correlation, sequence)
);
CREATE TABLE IF NOT EXISTS bridge_task (
    agent TEXT NOT NULL,
    task_id TEXT NOT NULL,
    peer TEXT NOT NULL,
    correlation TEXT NOT NULL,
    task TEXT NOT NULL,
    PRIMARY KEY (agent, task_id)
);
CREATE TABLE IF NOT EXISTS bridge_inbound (
    id INTEGER PRIMARY KEY,
    agent TEXT NOT NULL,
    sender TEXT NOT NULL,
    correlation TEXT NOT NULL,
    idem TEXT NOT NULL,
    operation TEXT NOT NULL,
    message BLOB NOT NULL,
    verdict TEXT NOT NULL,
    state TEXT NOT NULL,
    next_sequence INTEGER NOT NULL DEFAULT 1,
    task_id TEXT,
    context_id TEXT,
    created INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_try INTEGER NOT NULL DEFAULT 0,
    expires INTEGER NOT NULL DEFAULT 0,
    UNIQUE (agent, sender, idem)
);
CREATE INDEX IF NOT EXISTS bridge_inbound_state ON bridge_inbound (state);
";

/// A call a local agent made, as the state holds it.
#[derive(Clone, Debug)]
pub struct Call {
    /// The request's correlation ID (also the call's name).
    pub correlation: String,
    /// The local agent that made it.
    pub agent: String,
    /// The remote peer it went to.
    pub peer: String,
    /// The A2A method's JSON-RPC name.
    pub method: String,
    /// Whether its final answer came.
    pub done: bool,
    /// The remote task's id, once an answer named it.
    pub task_id: Option<String>,
}

/// An answer mail brought to a call: a response, an event or an error.
#[derive(Clone, Debug)]
pub struct Answer {
    /// Its sequence (1 for a response; events from 1).
    pub sequence: u64,
    /// `response`, `event` or `error`.
    pub kind: String,
    /// Its `final`.
    pub is_final: bool,
    /// The payload (response, event) or the error object (error), JSON.
    pub body: String,
}

/// A call mail brought for a local agent.
#[derive(Clone, Debug)]
pub struct Inbound {
    /// Its row.
    pub id: i64,
    /// The local agent it is for.
    pub agent: String,
    /// Who sent it (the verified author).
    pub sender: String,
    /// Its correlation ID.
    pub correlation: String,
    /// The operation token.
    pub operation: String,
    /// The opened request (RFC 5322, the gateway's verdict on top).
    pub message: Vec<u8>,
    /// The gateway's verdict.
    pub verdict: String,
    /// `received`, `dispatched` or `answered`.
    pub state: String,
    /// The sequence of the next answer mailed.
    pub next_sequence: u64,
    /// The local agent's task, once known.
    pub task_id: Option<String>,
    /// The context the call was made in.
    pub context_id: Option<String>,
}

/// The state.
pub struct State {
    db: Mutex<Connection>,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

impl State {
    /// Opens (creating, owner-only) the state at `path`.
    pub fn open(path: &Path) -> Result<State, StateError> {
        if !path.exists() {
            crate::sqlite::create_private(path)
                .map_err(|e| StateError(format!("{}: {e}", path.display())))?;
        }
        let db = Connection::open(path)?;
        db.busy_timeout(std::time::Duration::from_secs(10))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.execute_batch(SCHEMA)?;
        Ok(State { db: Mutex::new(db) })
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a new call with its sealed request, unless the agent made this call
    /// before (same peer and idempotency key): then the earlier call's correlation.
    pub fn new_call(
        &self,
        correlation: &str,
        agent: &str,
        peer: &str,
        method: &str,
        idem: &str,
        sealed: &[u8],
    ) -> Result<Result<(), String>, StateError> {
        let db = self.db();
        let earlier: Option<String> = db
            .query_row(
                "SELECT correlation FROM bridge_call WHERE agent = ?1 AND peer = ?2 AND idem = ?3 AND method = ?4",
                params![agent, peer, idem, method],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(c) = earlier {
            return Ok(Err(c));
        }
        db.execute(
            "INSERT INTO bridge_call (correlation, agent, peer, method, idem, created, sealed)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![correlation, agent, peer, method, idem, now(), sealed],
        )?;
        Ok(Ok(()))
    }

    /// The correlation of the call `agent` made of `peer` with `method` and this
    /// idempotency key, if it made one.
    pub fn earlier_call(
        &self,
        agent: &str,
        peer: &str,
        method: &str,
        idem: &str,
    ) -> Result<Option<String>, StateError> {
        Ok(self
            .db()
            .query_row(
                "SELECT correlation FROM bridge_call WHERE agent = ?1 AND peer = ?2 AND idem = ?3 AND method = ?4",
                params![agent, peer, idem, method],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The sealed requests recorded but not yet queued (a crash between), with their
    /// correlation, agent and peer.
    #[allow(clippy::type_complexity)]
    pub fn unqueued(&self) -> Result<Vec<(String, String, String, Vec<u8>)>, StateError> {
        let db = self.db();
        let mut st = db.prepare(
            "SELECT correlation, agent, peer, sealed FROM bridge_call WHERE queued = 0 AND sealed IS NOT NULL",
        )?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// The call's request is in the spool: its sealed copy is no longer kept.
    pub fn queued(&self, correlation: &str) -> Result<(), StateError> {
        self.db().execute(
            "UPDATE bridge_call SET queued = 1, sealed = NULL WHERE correlation = ?1",
            params![correlation],
        )?;
        Ok(())
    }

    /// The call named `correlation`.
    pub fn call(&self, correlation: &str) -> Result<Option<Call>, StateError> {
        let db = self.db();
        Ok(db
            .query_row(
                "SELECT correlation, agent, peer, method, done, task_id FROM bridge_call WHERE correlation = ?1",
                params![correlation],
                |r| {
                    Ok(Call {
                        correlation: r.get(0)?,
                        agent: r.get(1)?,
                        peer: r.get(2)?,
                        method: r.get(3)?,
                        done: r.get::<_, i64>(4)? != 0,
                        task_id: r.get(5)?,
                    })
                },
            )
            .optional()?)
    }

    /// Records an answer to a call (a second copy of one is a no-op). `false`: no
    /// such call.
    pub fn answer(&self, correlation: &str, answer: &Answer) -> Result<bool, StateError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let known: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM bridge_call WHERE correlation = ?1",
                params![correlation],
                |r| r.get(0),
            )
            .optional()?;
        if known.is_none() {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO bridge_answer (correlation, sequence, kind, final, body)
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
            params![
                correlation,
                answer.sequence as i64,
                answer.kind,
                answer.is_final as i64,
                answer.body
            ],
        )?;
        if answer.is_final {
            tx.execute(
                "UPDATE bridge_call SET done = 1 WHERE correlation = ?1",
                params![correlation],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    /// Records the remote task a call's answers leave, as they leave it.
    pub fn set_task(&self, correlation: &str, task_id: &str, task: &str) -> Result<(), StateError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let call: Option<(String, String)> = tx
            .query_row(
                "SELECT agent, peer FROM bridge_call WHERE correlation = ?1",
                params![correlation],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((agent, peer)) = call else {
            return Ok(());
        };
        tx.execute(
            "UPDATE bridge_call SET task_id = ?2 WHERE correlation = ?1",
            params![correlation, task_id],
        )?;
        tx.execute(
            "INSERT INTO bridge_task (agent, task_id, peer, correlation, task) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (agent, task_id) DO UPDATE SET task = excluded.task, correlation = excluded.correlation",
            params![agent, task_id, peer, correlation, task],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The answers to a call after `after`, in sequence order.
    pub fn answers(&self, correlation: &str, after: u64) -> Result<Vec<Answer>, StateError> {
        let db = self.db();
        let mut st = db.prepare(
            "SELECT sequence, kind, final, body FROM bridge_answer
             WHERE correlation = ?1 AND sequence > ?2 ORDER BY sequence",
        )?;
        let rows = st
            .query_map(params![correlation, after as i64], |r| {
                Ok(Answer {
                    sequence: r.get::<_, i64>(0)? as u64,
                    kind: r.get(1)?,
                    is_final: r.get::<_, i64>(2)? != 0,
                    body: r.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// A remote task an agent's call made: its latest state, the peer and the call.
    pub fn task(
        &self,
        agent: &str,
        task_id: &str,
    ) -> Result<Option<(String, String, String)>, StateError> {
        let db = self.db();
        Ok(db
            .query_row(
                "SELECT task, peer, correlation FROM bridge_task WHERE agent = ?1 AND task_id = ?2",
                params![agent, task_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?)
    }

    /// The call an agent made whose correlation is `id` (a task id the bridge gave
    /// before the remote one was known).
    pub fn call_of(&self, agent: &str, id: &str) -> Result<Option<Call>, StateError> {
        Ok(self.call(id)?.filter(|c| c.agent == agent))
    }

    /// Records a call mail brought for a local agent; `false` when it was recorded
    /// before (the same sender and idempotency key: a retried mail is one call).
    #[allow(clippy::too_many_arguments)]
    pub fn take_inbound(
        &self,
        agent: &str,
        sender: &str,
        correlation: &str,
        idem: &str,
        operation: &str,
        message: &[u8],
        verdict: &str,
    ) -> Result<bool, StateError> {
        let n = self.db().execute(
            "INSERT OR IGNORE INTO bridge_inbound
             (agent, sender, correlation, idem, operation, message, verdict, state, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'received', ?8)",
            params![
                agent,
                sender,
                correlation,
                idem,
                operation,
                message,
                verdict,
                now()
            ],
        )?;
        Ok(n == 1)
    }

    /// The calls for local agents not yet answered, oldest first.
    pub fn open_inbound(&self) -> Result<Vec<Inbound>, StateError> {
        let db = self.db();
        let mut st = db.prepare(
            "SELECT id, agent, sender, operation, message, verdict, state, next_sequence, task_id, context_id, correlation
             FROM bridge_inbound WHERE state IN ('received', 'dispatched') AND next_try <= ?1
             ORDER BY id",
        )?;
        let rows = st
            .query_map(params![now()], |r| {
                Ok(Inbound {
                    id: r.get(0)?,
                    agent: r.get(1)?,
                    sender: r.get(2)?,
                    operation: r.get(3)?,
                    message: r.get(4)?,
                    verdict: r.get(5)?,
                    state: r.get(6)?,
                    next_sequence: r.get::<_, i64>(7)? as u64,
                    task_id: r.get(8)?,
                    context_id: r.get(9)?,
                    correlation: r.get(10)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Moves a call for a local agent on: `dispatched` (about to be made: a bridge
    /// killed after this never makes it again blindly), or `answered`.
    pub fn set_inbound_state(&self, id: i64, state: &str) -> Result<(), StateError> {
        self.db().execute(
            "UPDATE bridge_inbound SET state = ?2 WHERE id = ?1",
            params![id, state],
        )?;
        Ok(())
    }

    /// A call for a local agent failed on this side (its answer not sealed or queued,
    /// the agent away): tried again later, doubling from 2 s to 5 min, until its
    /// request expires; then given up (`expired`). `true`: given up.
    pub fn retry_inbound(&self, id: i64) -> Result<bool, StateError> {
        let db = self.db();
        let (attempts, expires): (i64, i64) = db.query_row(
            "SELECT attempts, expires FROM bridge_inbound WHERE id = ?1",
            params![id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let now = now();
        if expires > 0 && expires <= now {
            db.execute("UPDATE bridge_inbound SET state = 'expired' WHERE id = ?1", params![id])?;
            return Ok(true);
        }
        let wait = (2i64 << attempts.min(8)).min(300);
        db.execute(
            "UPDATE bridge_inbound SET attempts = attempts + 1, next_try = ?2 WHERE id = ?1",
            params![id, now + wait],
        )?;
        Ok(false)
    }

    /// Who sent the call that made `agent`'s task `task_id`, if a call did.
    pub fn task_sender(&self, agent: &str, task_id: &str) -> Result<Option<String>, StateError> {
        Ok(self
            .db()
            .query_row(
                "SELECT sender FROM bridge_inbound WHERE agent = ?1 AND task_id = ?2 ORDER BY id LIMIT 1",
                params![agent, task_id],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Who sent the calls made in `agent`'s context `context`, if any was.
    pub fn context_sender(&self, agent: &str, context: &str) -> Result<Option<String>, StateError> {
        Ok(self
            .db()
            .query_row(
                "SELECT sender FROM bridge_inbound WHERE agent = ?1 AND context_id = ?2 ORDER BY id LIMIT 1",
                params![agent, context],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Forgets what ended before `before` (Unix seconds): calls and their answers and
    /// tasks, calls for local agents answered or given up.
    pub fn prune(&self, before: i64) -> Result<(), StateError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        tx.execute(
            "DELETE FROM bridge_answer WHERE correlation IN (SELECT correlation FROM bridge_call WHERE created < ?1)",
            params![before],
        )?;
        tx.execute(
            "DELETE FROM bridge_task WHERE correlation IN (SELECT correlation FROM bridge_call WHERE created < ?1)",
            params![before],
        )?;
        tx.execute("DELETE FROM bridge_call WHERE created < ?1", params![before])?;
        tx.execute(
            "DELETE FROM bridge_inbound WHERE created < ?1 AND state IN ('answered', 'expired')",
            params![before],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Records the context a call is made in, before it is made.
    pub fn set_inbound_context(&self, id: i64, context: &str) -> Result<(), StateError> {
        self.db().execute(
            "UPDATE bridge_inbound SET context_id = ?2 WHERE id = ?1",
            params![id, context],
        )?;
        Ok(())
    }

    /// The local agent's task of a call, as recorded.
    pub fn inbound_task(&self, id: i64) -> Result<Option<String>, StateError> {
        Ok(self
            .db()
            .query_row(
                "SELECT task_id FROM bridge_inbound WHERE id = ?1",
                params![id],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }

    /// Records the local agent's task of a call.
    pub fn set_inbound_task(&self, id: i64, task: &str) -> Result<(), StateError> {
        self.db().execute(
            "UPDATE bridge_inbound SET task_id = ?2 WHERE id = ?1",
            params![id, task],
        )?;
        Ok(())
    }

    /// Records that the answer numbered `sequence` is queued.
    pub fn sent_inbound(&self, id: i64, sequence: u64) -> Result<(), StateError> {
        self.db().execute(
            "UPDATE bridge_inbound SET next_sequence = ?2 WHERE id = ?1 AND next_sequence <= ?2",
            params![id, (sequence + 1) as i64],
        )?;
        Ok(())
    }
}
