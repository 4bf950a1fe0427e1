//! The bridge's durable state (one owner-only SQLite file, WAL, `synchronous=FULL`):
//! the calls its local agents made and the answers mail brought them, the remote
//! tasks they may poll, and the calls mail brought for the local agents with how far
//! each got. Every change is committed before the bridge acts on it, so a bridge
//! killed at any point starts again where it was: a call mailed is never mailed as a
//! second call, an answer taken is never lost, a call taken for a local agent is made
//! at most once (see `inbound`).
//!
//! The same tables live in PostgreSQL (`bridge.state = "postgres://…"`, the schema's
//! migration 14), where several bridge instances share them: any instance takes an
//! answer and resolves a call another made (a waiting caller looks at the state every
//! second), and a call for a local agent is leased to the instance that makes it
//! (`lease_inbound`), taken over when that instance stops renewing its lease. The
//! statements are written once, for both: `Db` runs them on either.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::Connection;

/// A failure of the state database.
#[derive(Debug, thiserror::Error)]
#[error("bridge state: {0}")]
pub struct StateError(String);

impl From<rusqlite::Error> for StateError {
    fn from(e: rusqlite::Error) -> Self {
        StateError(e.to_string())
    }
}

impl From<postgres::Error> for StateError {
    fn from(e: postgres::Error) -> Self {
        StateError(crate::postgres_db::describe(&e))
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS mailseal_bridge_call (
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
CREATE TABLE IF NOT EXISTS mailseal_bridge_answer (
    correlation TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    kind TEXT NOT NULL,
    final INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (correlation, sequence)
);
CREATE TABLE IF NOT EXISTS mailseal_bridge_task (
    agent TEXT NOT NULL,
    task_id TEXT NOT NULL,
    peer TEXT NOT NULL,
    correlation TEXT NOT NULL,
    task TEXT NOT NULL,
    PRIMARY KEY (agent, peer, task_id)
);
CREATE TABLE IF NOT EXISTS mailseal_bridge_inbound (
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
    owner TEXT,
    lease_until INTEGER NOT NULL DEFAULT 0,
    UNIQUE (agent, sender, operation, idem)
);
CREATE INDEX IF NOT EXISTS mailseal_bridge_inbound_state ON mailseal_bridge_inbound (state);
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

/// A value in or out of a statement.
#[derive(Clone, Debug)]
enum V {
    I(i64),
    T(String),
    B(Vec<u8>),
    N,
}

impl V {
    fn i(&self) -> i64 {
        match self {
            V::I(i) => *i,
            _ => 0,
        }
    }
    fn t(&self) -> String {
        match self {
            V::T(t) => t.clone(),
            _ => String::new(),
        }
    }
    fn ot(&self) -> Option<String> {
        match self {
            V::T(t) => Some(t.clone()),
            _ => None,
        }
    }
    fn b(&self) -> Vec<u8> {
        match self {
            V::B(b) => b.clone(),
            _ => Vec::new(),
        }
    }
}

impl From<&str> for V {
    fn from(s: &str) -> V {
        V::T(s.to_string())
    }
}
impl From<i64> for V {
    fn from(i: i64) -> V {
        V::I(i)
    }
}
impl From<&[u8]> for V {
    fn from(b: &[u8]) -> V {
        V::B(b.to_vec())
    }
}

/// One transaction's statements, on either database. Statements number their
/// parameters `?1`, `?2`, … (PostgreSQL's `$1` is written from them).
trait Tx {
    fn exec(&mut self, sql: &str, p: &[V]) -> Result<u64, StateError>;
    fn rows(&mut self, sql: &str, p: &[V]) -> Result<Vec<Vec<V>>, StateError>;
    fn row(&mut self, sql: &str, p: &[V]) -> Result<Option<Vec<V>>, StateError> {
        Ok(self.rows(sql, p)?.into_iter().next())
    }
}

struct SqliteTx<'a>(&'a rusqlite::Transaction<'a>);

fn sqlite_value(v: &V) -> rusqlite::types::Value {
    match v {
        V::I(i) => rusqlite::types::Value::Integer(*i),
        V::T(t) => rusqlite::types::Value::Text(t.clone()),
        V::B(b) => rusqlite::types::Value::Blob(b.clone()),
        V::N => rusqlite::types::Value::Null,
    }
}

impl Tx for SqliteTx<'_> {
    fn exec(&mut self, sql: &str, p: &[V]) -> Result<u64, StateError> {
        let n = self
            .0
            .execute(sql, rusqlite::params_from_iter(p.iter().map(sqlite_value)))?;
        Ok(n as u64)
    }
    fn rows(&mut self, sql: &str, p: &[V]) -> Result<Vec<Vec<V>>, StateError> {
        let mut st = self.0.prepare(sql)?;
        let n = st.column_count();
        let rows = st
            .query_map(
                rusqlite::params_from_iter(p.iter().map(sqlite_value)),
                |r| {
                    (0..n)
                        .map(|i| {
                            Ok(match r.get_ref(i)? {
                                rusqlite::types::ValueRef::Integer(x) => V::I(x),
                                rusqlite::types::ValueRef::Text(t) => {
                                    V::T(String::from_utf8_lossy(t).into_owned())
                                }
                                rusqlite::types::ValueRef::Blob(b) => V::B(b.to_vec()),
                                rusqlite::types::ValueRef::Real(x) => V::I(x as i64),
                                rusqlite::types::ValueRef::Null => V::N,
                            })
                        })
                        .collect::<Result<Vec<V>, rusqlite::Error>>()
                },
            )?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

struct PgTx<'a, 'b>(&'a mut postgres::Transaction<'b>);

/// `?N` placeholders as PostgreSQL's `$N`.
fn pg_sql(sql: &str) -> String {
    sql.replace('?', "$")
}

fn pg_params(p: &[V]) -> Vec<Box<dyn postgres::types::ToSql + Sync>> {
    p.iter()
        .map(|v| -> Box<dyn postgres::types::ToSql + Sync> {
            match v {
                V::I(i) => Box::new(*i),
                V::T(t) => Box::new(t.clone()),
                V::B(b) => Box::new(b.clone()),
                V::N => Box::new(Option::<String>::None),
            }
        })
        .collect()
}

impl Tx for PgTx<'_, '_> {
    fn exec(&mut self, sql: &str, p: &[V]) -> Result<u64, StateError> {
        let params = pg_params(p);
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            params.iter().map(|b| b.as_ref()).collect();
        Ok(self.0.execute(pg_sql(sql).as_str(), &refs)?)
    }
    fn rows(&mut self, sql: &str, p: &[V]) -> Result<Vec<Vec<V>>, StateError> {
        use postgres::types::Type;
        let params = pg_params(p);
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            params.iter().map(|b| b.as_ref()).collect();
        let rows = self.0.query(pg_sql(sql).as_str(), &refs)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let mut row = Vec::with_capacity(r.len());
            for (i, c) in r.columns().iter().enumerate() {
                let t = c.type_();
                let v = if *t == Type::INT8 {
                    r.try_get::<_, Option<i64>>(i)?.map_or(V::N, V::I)
                } else if *t == Type::INT4 {
                    r.try_get::<_, Option<i32>>(i)?
                        .map_or(V::N, |x| V::I(x.into()))
                } else if *t == Type::BYTEA {
                    r.try_get::<_, Option<Vec<u8>>>(i)?.map_or(V::N, V::B)
                } else {
                    r.try_get::<_, Option<String>>(i)?.map_or(V::N, V::T)
                };
                row.push(v);
            }
            out.push(row);
        }
        Ok(out)
    }
}

/// The database: a SQLite file, or PostgreSQL shared by instances.
enum Db {
    Sqlite(Mutex<Connection>),
    Postgres(Box<crate::postgres_db::Reconnecting>),
}

/// The state.
pub struct State {
    db: Db,
}

/// Attempts at a call for a local agent before it is given up, whatever its expiry.
const MAX_ATTEMPTS: i64 = 12;

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn call_of_row(r: &[V]) -> Call {
    Call {
        correlation: r[0].t(),
        agent: r[1].t(),
        peer: r[2].t(),
        method: r[3].t(),
        done: r[4].i() != 0,
        task_id: r[5].ot(),
    }
}

impl State {
    /// Opens the state at `location`: a SQLite file (created owner-only), or
    /// `postgres://…` (its schema brought up to date).
    pub fn open(location: &str) -> Result<State, StateError> {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            let db = crate::postgres_db::Reconnecting::connect_with(location, 30_000)
                .map_err(|e| StateError(format!("bridge.state: {e}")))?;
            return Ok(State {
                db: Db::Postgres(Box::new(db)),
            });
        }
        let path = Path::new(location);
        if !path.exists() {
            crate::sqlite::create_private(path)
                .map_err(|e| StateError(format!("{}: {e}", path.display())))?;
        }
        let db = Connection::open(path)?;
        db.busy_timeout(std::time::Duration::from_secs(10))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.execute_batch(SCHEMA)?;
        Ok(State {
            db: Db::Sqlite(Mutex::new(db)),
        })
    }

    /// Runs `f` in one transaction, committed when it returns `Ok`.
    fn run<T>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        match &self.db {
            Db::Sqlite(m) => {
                let mut c = m.lock().unwrap_or_else(|p| p.into_inner());
                let tx = c.transaction()?;
                let r = f(&mut SqliteTx(&tx))?;
                tx.commit()?;
                Ok(r)
            }
            // The client blocks on a runtime of its own: on one of the bridge's
            // runtime threads, that thread leaves the runtime for the statement.
            Db::Postgres(_)
                if tokio::runtime::Handle::try_current().is_ok_and(|h| {
                    h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                }) =>
            {
                tokio::task::block_in_place(|| self.run_postgres(f))
            }
            Db::Postgres(_) => self.run_postgres(f),
        }
    }

    fn run_postgres<T>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        match &self.db {
            Db::Sqlite(_) => Err(StateError("not PostgreSQL".into())),
            Db::Postgres(pg) => {
                let mut out = None;
                pg.with(|client| {
                    let mut tx = client.transaction()?;
                    let r = f(&mut PgTx(&mut tx));
                    if r.is_ok() {
                        tx.commit()?;
                    }
                    out = Some(r);
                    Ok(())
                })
                .map_err(|e| StateError(e.to_string()))?;
                out.unwrap_or_else(|| Err(StateError("no transaction ran".into())))
            }
        }
    }

    /// Records a new call with its sealed request, unless the agent made this call
    /// before (same peer, method and idempotency key): then the earlier call's
    /// correlation.
    pub fn new_call(
        &self,
        correlation: &str,
        agent: &str,
        peer: &str,
        method: &str,
        idem: &str,
        sealed: &[u8],
    ) -> Result<Result<(), String>, StateError> {
        self.run(|t| {
            let n = t.exec(
                "INSERT INTO mailseal_bridge_call (correlation, agent, peer, method, idem, created, sealed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
                &[correlation.into(), agent.into(), peer.into(), method.into(), idem.into(), now().into(), sealed.into()],
            )?;
            if n == 1 {
                return Ok(Ok(()));
            }
            let earlier = t.row(
                "SELECT correlation FROM mailseal_bridge_call WHERE agent = ?1 AND peer = ?2 AND method = ?3 AND idem = ?4",
                &[agent.into(), peer.into(), method.into(), idem.into()],
            )?;
            Ok(Err(earlier.map(|r| r[0].t()).unwrap_or_default()))
        })
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
        self.run(|t| {
            Ok(t.row(
                "SELECT correlation FROM mailseal_bridge_call WHERE agent = ?1 AND peer = ?2 AND method = ?3 AND idem = ?4",
                &[agent.into(), peer.into(), method.into(), idem.into()],
            )?
            .map(|r| r[0].t()))
        })
    }

    /// The sealed requests recorded but not yet queued (a crash between), with their
    /// correlation, agent and peer.
    #[allow(clippy::type_complexity)]
    pub fn unqueued(&self) -> Result<Vec<(String, String, String, Vec<u8>)>, StateError> {
        self.run(|t| {
            Ok(t.rows(
                "SELECT correlation, agent, peer, sealed FROM mailseal_bridge_call WHERE queued = 0 AND sealed IS NOT NULL",
                &[],
            )?
            .into_iter()
            .map(|r| (r[0].t(), r[1].t(), r[2].t(), r[3].b()))
            .collect())
        })
    }

    /// The call's request is in the spool: its sealed copy is no longer kept.
    pub fn queued(&self, correlation: &str) -> Result<(), StateError> {
        self.run(|t| {
            t.exec(
                "UPDATE mailseal_bridge_call SET queued = 1, sealed = NULL WHERE correlation = ?1",
                &[correlation.into()],
            )
            .map(drop)
        })
    }

    /// The call named `correlation`.
    pub fn call(&self, correlation: &str) -> Result<Option<Call>, StateError> {
        self.run(|t| {
            Ok(t.row(
                "SELECT correlation, agent, peer, method, done, task_id FROM mailseal_bridge_call WHERE correlation = ?1",
                &[correlation.into()],
            )?
            .map(|r| call_of_row(&r)))
        })
    }

    /// Records an answer to a call (a second copy of one is a no-op) and rebuilds,
    /// in the same transaction (the call's row locked, so two instances never write
    /// an older task over a newer), the remote task its answers leave (`rebuild`,
    /// given them all in order). `false`: no such call.
    pub fn answer(
        &self,
        correlation: &str,
        answer: &Answer,
        rebuild: impl FnOnce(Vec<Answer>) -> Option<(String, String)>,
    ) -> Result<bool, StateError> {
        let lock = match self.db {
            Db::Postgres(_) => " FOR UPDATE",
            Db::Sqlite(_) => "",
        };
        self.run(|t| {
            let call = t.row(
                &format!("SELECT agent, peer FROM mailseal_bridge_call WHERE correlation = ?1{lock}"),
                &[correlation.into()],
            )?;
            let Some(call) = call else {
                return Ok(false);
            };
            t.exec(
                "INSERT INTO mailseal_bridge_answer (correlation, sequence, kind, final, body)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                &[
                    correlation.into(),
                    (answer.sequence as i64).into(),
                    answer.kind.as_str().into(),
                    (answer.is_final as i64).into(),
                    answer.body.as_str().into(),
                ],
            )?;
            if answer.is_final {
                t.exec(
                    "UPDATE mailseal_bridge_call SET done = 1 WHERE correlation = ?1",
                    &[correlation.into()],
                )?;
            }
            let answers = answers_in(t, correlation, 0)?;
            if let Some((task_id, task)) = rebuild(answers) {
                t.exec(
                    "UPDATE mailseal_bridge_call SET task_id = ?2 WHERE correlation = ?1",
                    &[correlation.into(), task_id.as_str().into()],
                )?;
                t.exec(
                    "INSERT INTO mailseal_bridge_task (agent, task_id, peer, correlation, task) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (agent, peer, task_id) DO UPDATE SET task = excluded.task, correlation = excluded.correlation",
                    &[call[0].clone(), task_id.as_str().into(), call[1].clone(), correlation.into(), task.as_str().into()],
                )?;
            }
            Ok(true)
        })
    }

    /// The answers to a call after `after`, in sequence order.
    pub fn answers(&self, correlation: &str, after: u64) -> Result<Vec<Answer>, StateError> {
        self.run(|t| answers_in(t, correlation, after))
    }

    /// A remote task an agent's call made: its latest state, the peer and the call.
    pub fn task(
        &self,
        agent: &str,
        peer: &str,
        task_id: &str,
    ) -> Result<Option<(String, String, String)>, StateError> {
        self.run(|t| {
            Ok(t.row(
                "SELECT task, peer, correlation FROM mailseal_bridge_task WHERE agent = ?1 AND peer = ?2 AND task_id = ?3",
                &[agent.into(), peer.into(), task_id.into()],
            )?
            .map(|r| (r[0].t(), r[1].t(), r[2].t())))
        })
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
        expires: i64,
    ) -> Result<bool, StateError> {
        self.run(|t| {
            let n = t.exec(
                "INSERT INTO mailseal_bridge_inbound
                 (agent, sender, correlation, idem, operation, message, verdict, state, created, expires)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'received', ?8, ?9) ON CONFLICT DO NOTHING",
                &[
                    agent.into(),
                    sender.into(),
                    correlation.into(),
                    idem.into(),
                    operation.into(),
                    message.into(),
                    verdict.into(),
                    now().into(),
                    expires.into(),
                ],
            )?;
            Ok(n == 1)
        })
    }

    /// The calls for local agents not yet answered and due, oldest first.
    pub fn open_inbound(&self) -> Result<Vec<Inbound>, StateError> {
        self.run(|t| {
            Ok(t.rows(
                "SELECT id, agent, sender, operation, message, verdict, state, next_sequence, task_id, context_id, correlation
                 FROM mailseal_bridge_inbound WHERE state IN ('received', 'dispatched') AND next_try <= ?1
                 ORDER BY id",
                &[now().into()],
            )?
            .into_iter()
            .map(|r| Inbound {
                id: r[0].i(),
                agent: r[1].t(),
                sender: r[2].t(),
                operation: r[3].t(),
                message: r[4].b(),
                verdict: r[5].t(),
                state: r[6].t(),
                next_sequence: r[7].i() as u64,
                task_id: r[8].ot(),
                context_id: r[9].ot(),
                correlation: r[10].t(),
            })
            .collect())
        })
    }

    /// Leases the call `id` to `owner` for `secs` (or renews its lease): `false` when
    /// another instance holds it. A lease of this instance's last run is its own.
    pub fn lease_inbound(&self, id: i64, owner: &str, secs: i64) -> Result<bool, StateError> {
        self.run(|t| {
            let now = now();
            let n = t.exec(
                "UPDATE mailseal_bridge_inbound SET owner = ?2, lease_until = ?3
                 WHERE id = ?1 AND (owner IS NULL OR owner = ?2 OR lease_until < ?4)",
                &[id.into(), owner.into(), (now + secs).into(), now.into()],
            )?;
            Ok(n == 1)
        })
    }

    /// Moves a call for a local agent on: `dispatched` (about to be made: a bridge
    /// killed after this never makes it again blindly), or `answered`.
    pub fn set_inbound_state(&self, id: i64, state: &str) -> Result<(), StateError> {
        self.run(|t| {
            t.exec(
                "UPDATE mailseal_bridge_inbound SET state = ?2 WHERE id = ?1",
                &[id.into(), state.into()],
            )
            .map(drop)
        })
    }

    /// A call for a local agent failed on this side (its answer not sealed or queued,
    /// the agent away): tried again later, doubling from 2 s to 5 min, until its
    /// request expires; then given up (`expired`). `true`: given up.
    pub fn retry_inbound(&self, id: i64) -> Result<bool, StateError> {
        self.run(|t| {
            let Some(r) = t.row(
                "SELECT attempts, expires FROM mailseal_bridge_inbound WHERE id = ?1",
                &[id.into()],
            )?
            else {
                return Ok(true);
            };
            let (attempts, expires) = (r[0].i(), r[1].i());
            let now = now();
            if (expires > 0 && expires <= now) || attempts >= MAX_ATTEMPTS {
                t.exec(
                    "UPDATE mailseal_bridge_inbound SET state = 'expired' WHERE id = ?1",
                    &[id.into()],
                )?;
                return Ok(true);
            }
            let wait = (2i64 << attempts.clamp(0, 8)).min(300);
            t.exec(
                "UPDATE mailseal_bridge_inbound SET attempts = attempts + 1, next_try = ?2 WHERE id = ?1",
                &[id.into(), (now + wait).into()],
            )?;
            Ok(false)
        })
    }

    /// Who sent the call that made `agent`'s task `task_id`, if a call did.
    pub fn task_sender(&self, agent: &str, task_id: &str) -> Result<Option<String>, StateError> {
        self.run(|t| {
            Ok(t.row(
                "SELECT sender FROM mailseal_bridge_inbound WHERE agent = ?1 AND task_id = ?2 ORDER BY id LIMIT 1",
                &[agent.into(), task_id.into()],
            )?
            .map(|r| r[0].t()))
        })
    }

    /// Who sent the calls made in `agent`'s context `context`, if any was.
    pub fn context_sender(&self, agent: &str, context: &str) -> Result<Option<String>, StateError> {
        self.run(|t| {
            Ok(t.row(
                "SELECT sender FROM mailseal_bridge_inbound WHERE agent = ?1 AND context_id = ?2 ORDER BY id LIMIT 1",
                &[agent.into(), context.into()],
            )?
            .map(|r| r[0].t()))
        })
    }

    /// Forgets what ended before `before` (Unix seconds): calls and their answers and
    /// tasks, calls for local agents answered or given up.
    pub fn prune(&self, before: i64) -> Result<(), StateError> {
        self.run(|t| {
            let b = [V::I(before)];
            t.exec(
                "DELETE FROM mailseal_bridge_answer WHERE correlation IN (SELECT correlation FROM mailseal_bridge_call WHERE created < ?1)",
                &b,
            )?;
            t.exec(
                "DELETE FROM mailseal_bridge_task WHERE correlation IN (SELECT correlation FROM mailseal_bridge_call WHERE created < ?1)",
                &b,
            )?;
            t.exec("DELETE FROM mailseal_bridge_call WHERE created < ?1", &b)?;
            t.exec(
                "DELETE FROM mailseal_bridge_inbound WHERE created < ?1 AND state IN ('answered', 'expired')",
                &b,
            )?;
            Ok(())
        })
    }

    /// Records the context a call is made in, before it is made.
    pub fn set_inbound_context(&self, id: i64, context: &str) -> Result<(), StateError> {
        self.run(|t| {
            t.exec(
                "UPDATE mailseal_bridge_inbound SET context_id = ?2 WHERE id = ?1",
                &[id.into(), context.into()],
            )
            .map(drop)
        })
    }

    /// The local agent's task of a call, as recorded.
    pub fn inbound_task(&self, id: i64) -> Result<Option<String>, StateError> {
        self.run(|t| {
            Ok(t.row(
                "SELECT task_id FROM mailseal_bridge_inbound WHERE id = ?1",
                &[id.into()],
            )?
            .and_then(|r| r[0].ot()))
        })
    }

    /// Records the local agent's task of a call.
    pub fn set_inbound_task(&self, id: i64, task: &str) -> Result<(), StateError> {
        self.run(|t| {
            t.exec(
                "UPDATE mailseal_bridge_inbound SET task_id = ?2 WHERE id = ?1",
                &[id.into(), task.into()],
            )
            .map(drop)
        })
    }

    /// Records that the answer numbered `sequence` is queued.
    pub fn sent_inbound(&self, id: i64, sequence: u64) -> Result<(), StateError> {
        self.run(|t| {
            t.exec(
                "UPDATE mailseal_bridge_inbound SET next_sequence = ?2 WHERE id = ?1 AND next_sequence <= ?2",
                &[id.into(), ((sequence + 1) as i64).into()],
            )
            .map(drop)
        })
    }
}

fn answers_in(t: &mut dyn Tx, correlation: &str, after: u64) -> Result<Vec<Answer>, StateError> {
    Ok(t.rows(
        "SELECT sequence, kind, final, body FROM mailseal_bridge_answer
         WHERE correlation = ?1 AND sequence > ?2 ORDER BY sequence",
        &[correlation.into(), (after as i64).into()],
    )?
    .into_iter()
    .map(|r| Answer {
        sequence: r[0].i() as u64,
        kind: r[1].t(),
        is_final: r[2].i() != 0,
        body: r[3].t(),
    })
    .collect())
}
