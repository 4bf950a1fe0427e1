//! The MLS state several processes share through PostgreSQL (issue #18): gateway
//! instances on one database act as one group member.
//!
//! Why a replicated log and not openmls' storage on PostgreSQL: every MLS operation
//! here reads and writes openmls' storage and our own tables in one transaction (see
//! [`super::state`]), and openmls has no PostgreSQL provider. Rather than write one
//! (about sixty storage methods, each a new chance to lose a secret or an epoch), each
//! process keeps the state in an in-memory SQLite database, the same schema and code
//! as the local file, and PostgreSQL keeps the authority: a log of changesets
//! (`mailseal_mls_log`), one per committed transaction, under one head row
//! (`mailseal_mls_head`) that every transaction locks (`FOR UPDATE`) first.
//!
//! A changeset is the rows the transaction left behind: temporary triggers on every
//! replicated table note the primary key of each row a transaction touches, and at
//! commit each noted row is written out whole, or as deleted (see [`changeset`] for
//! the encoding). SQLite's session extension does the same, but it needs bindgen and
//! libclang at build time, which the default build must not.
//!
//! - **begin**: lock the head; apply the changesets written since this replica's
//!   version (other processes' transactions), or, when this replica is too far behind
//!   or diverged, rebuild it from the compacted snapshot plus the log.
//! - **commit**: the transaction's changeset is appended as the next version, and the PostgreSQL
//!   transaction commits; that commit is the durability point. A failure there marks
//!   the replica stale, so the next transaction rebuilds it from PostgreSQL.
//! - **compaction**: every [`COMPACT_EVERY`] versions the committer, whose replica
//!   is then exactly the new head, writes all its rows as the new snapshot and drops
//!   the log entries older than the previous snapshot, so a replica one compaction
//!   behind still catches up by the log.
//!
//! All MLS operations of all processes on the database run one at a time (the head
//! lock): an MLS group is a sequence of epochs and generations that two members
//! cannot advance at once anyway. The replica holds the same secrets as the local
//! state file; PostgreSQL holds them as the local file does (see docs/security.md). The
//! changesets and snapshots this module builds are zeroized when dropped; the
//! `postgres` crate's row buffers and SQLite's pages are not ours to wipe.

use postgres::Client;
use rusqlite::Connection;
use zeroize::Zeroizing;

use super::{changeset, MlsError};

/// Versions between compactions.
pub(crate) const COMPACT_EVERY: i64 = 256;

/// The tables a changeset carries: openmls' and ours, not the migration bookkeeping
/// (each replica runs the migrations itself; their history, with its timestamps, is
/// its own).
fn replicated(table: &str) -> bool {
    (table.starts_with("openmls_") && table != "openmls_sqlite_storage_migrations")
        || table.starts_with("mailseal_mls_")
        || table.starts_with("vc_emulation_")
}

fn pg(e: postgres::Error) -> MlsError {
    MlsError::State(format!("shared MLS state (PostgreSQL): {e}"))
}

/// This process's link to the shared state.
pub(crate) struct Shared {
    client: Client,
    /// Where to connect again when the connection was lost.
    url: zeroize::Zeroizing<String>,
    /// The version this replica holds.
    version: i64,
    /// The replica may differ from every version (a commit failed after the local
    /// one succeeded, or a changeset did not apply): rebuild it at the next begin.
    stale: bool,
    /// The head version locked by the open transaction.
    locked: Option<i64>,
    /// Our schema (see [`schema_id`]).
    schema: String,
}

/// Names the replica's schema, so processes of different mailseal versions never
/// exchange changesets whose columns they would read differently.
pub(crate) fn schema_id(conn: &Connection) -> Result<String, MlsError> {
    let ours: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let mut st =
        conn.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")?;
    let mut h = <sha2::Sha256 as sha2::Digest>::new();
    let rows = st.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
    })?;
    for row in rows {
        let (name, sql) = row?;
        if replicated(&name) {
            sha2::Digest::update(&mut h, name.as_bytes());
            sha2::Digest::update(&mut h, [0]);
            sha2::Digest::update(&mut h, sql.unwrap_or_default().as_bytes());
            sha2::Digest::update(&mut h, [0]);
        }
    }
    let digest = sha2::Digest::finalize(h);
    Ok(format!("{ours}:{}", crate::keystore::hex(&digest[..8])))
}

impl Shared {
    /// Connects (migrating the schema, see [`crate::postgres_db`]) and makes sure the
    /// head row exists and names our schema.
    pub(crate) fn connect(url: &str, conn: &Connection) -> Result<Shared, MlsError> {
        let mut client = crate::postgres_db::connect(url)
            .map_err(|e| MlsError::State(format!("shared MLS state (PostgreSQL): {e}")))?;
        let schema = schema_id(conn)?;
        client
            .execute(
                "INSERT INTO mailseal_mls_head (id, version, base_version, schema) VALUES (TRUE, 0, 0, $1) ON CONFLICT (id) DO NOTHING",
                &[&schema],
            )
            .map_err(pg)?;
        let found: String = client
            .query_one("SELECT schema FROM mailseal_mls_head", &[])
            .map_err(pg)?
            .get(0);
        if found != schema {
            return Err(MlsError::State(format!(
                "the shared MLS state in PostgreSQL has schema {found}, this mailseal {schema}: run one mailseal version on one database"
            )));
        }
        Ok(Shared {
            client,
            url: zeroize::Zeroizing::new(url.to_string()),
            version: 0,
            stale: true,
            locked: None,
            schema,
        })
    }

    /// Locks the head and brings the replica `conn` up to it.
    pub(crate) fn begin(&mut self, conn: &Connection) -> Result<(), MlsError> {
        if self.client.is_closed() {
            self.reconnect()?;
        }
        if self.client.batch_execute("BEGIN").is_err() {
            // The connection died under us and the client has not marked it closed
            // yet (a terminated backend is seen a moment later): nothing has been done
            // in this transaction, so connect again and begin once more.
            self.reconnect()?;
            self.client.batch_execute("BEGIN").map_err(pg)?;
        }
        let r = self.lock_and_catch_up(conn);
        if r.is_err() {
            self.rollback();
        }
        r
    }

    /// The server went away (restart, fail-over, a terminated backend): connect
    /// again; the replica is rebuilt, since what this process last committed may not
    /// have landed.
    fn reconnect(&mut self) -> Result<(), MlsError> {
        self.client = crate::postgres_db::connect(&self.url)
            .map_err(|e| MlsError::State(format!("shared MLS state (PostgreSQL): {e}")))?;
        self.stale = true;
        Ok(())
    }

    fn lock_and_catch_up(&mut self, conn: &Connection) -> Result<(), MlsError> {
        let row = self
            .client
            .query_one(
                "SELECT version, base_version, schema FROM mailseal_mls_head WHERE id FOR UPDATE",
                &[],
            )
            .map_err(pg)?;
        let (head, base, schema): (i64, i64, String) = (row.get(0), row.get(1), row.get(2));
        if schema != self.schema {
            return Err(MlsError::State(format!(
                "the shared MLS state in PostgreSQL moved to schema {schema}; this mailseal has {}",
                self.schema
            )));
        }
        self.locked = Some(head);
        if !self.stale && self.version == head {
            return Ok(());
        }
        if !self.stale && self.version < head && self.catch_up(conn, head)? {
            return Ok(());
        }
        self.rebuild(conn, head, base)
    }

    /// Applies the log after our version; false if some entry is gone (compacted)
    /// or does not apply to this replica.
    fn catch_up(&mut self, conn: &Connection, head: i64) -> Result<bool, MlsError> {
        let rows = self
            .client
            .query(
                "SELECT version, changeset FROM mailseal_mls_log WHERE version > $1 AND version <= $2 ORDER BY version",
                &[&self.version, &head],
            )
            .map_err(pg)?;
        if rows.len() as i64 != head - self.version
            || rows.first().map(|r| r.get::<_, i64>(0)) != Some(self.version + 1)
        {
            return Ok(false);
        }
        conn.execute_batch("BEGIN IMMEDIATE")?;
        for row in &rows {
            let changeset: &[u8] = row.get(1);
            if apply(conn, changeset).is_err() {
                let _ = conn.execute_batch("ROLLBACK");
                return Ok(false);
            }
        }
        // Applying noted the rows as touched; they are not this process's changes.
        forget(conn)?;
        conn.execute_batch("COMMIT")?;
        self.version = head;
        Ok(true)
    }

    /// Empties the replicated tables and applies the snapshot, then the log after it.
    fn rebuild(&mut self, conn: &Connection, head: i64, base: i64) -> Result<(), MlsError> {
        let snapshot: Option<Zeroizing<Vec<u8>>> = self
            .client
            .query_one("SELECT snapshot FROM mailseal_mls_head WHERE id", &[])
            .map_err(pg)?
            .get::<_, Option<Vec<u8>>>(0)
            .map(Zeroizing::new);
        let rows = self
            .client
            .query(
                "SELECT changeset FROM mailseal_mls_log WHERE version > $1 AND version <= $2 ORDER BY version",
                &[&base, &head],
            )
            .map_err(pg)?;
        if rows.len() as i64 != head - base {
            return Err(MlsError::State(format!(
                "shared MLS state: the log from version {base} to {head} is incomplete"
            )));
        }
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let r = (|| {
            for table in replicated_tables(conn)? {
                conn.execute(&format!("DELETE FROM \"{table}\""), [])?;
            }
            if let Some(s) = &snapshot {
                apply(conn, s)?;
            }
            for row in &rows {
                apply(conn, row.get::<_, &[u8]>(0))?;
            }
            changeset::forget(conn, &replicated_tables(conn)?)
        })();
        match r {
            Ok(()) => conn.execute_batch("COMMIT")?,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(MlsError::State(format!(
                    "shared MLS state: version {head} does not apply: {e}"
                )));
            }
        }
        self.version = head;
        self.stale = false;
        Ok(())
    }

    /// Appends the transaction's changes (none: nothing to write) and commits.
    pub(crate) fn commit(
        &mut self,
        conn: &Connection,
        changeset: Zeroizing<Vec<u8>>,
    ) -> Result<(), MlsError> {
        let r = self.write(conn, changeset);
        match r {
            Ok(v) => {
                self.version = v;
                self.locked = None;
                Ok(())
            }
            Err(e) => {
                self.rollback();
                self.stale = true;
                Err(e)
            }
        }
    }

    fn write(&mut self, conn: &Connection, changeset: Zeroizing<Vec<u8>>) -> Result<i64, MlsError> {
        let head = self
            .locked
            .ok_or_else(|| MlsError::State("shared MLS state: commit without begin".into()))?;
        if changeset.is_empty() {
            self.client.batch_execute("COMMIT").map_err(pg)?;
            return Ok(head);
        }
        let next = head + 1;
        self.client
            .execute(
                "INSERT INTO mailseal_mls_log (version, changeset) VALUES ($1, $2)",
                &[&next, &changeset.as_slice()],
            )
            .map_err(pg)?;
        self.client
            .execute(
                "UPDATE mailseal_mls_head SET version = $1 WHERE id",
                &[&next],
            )
            .map_err(pg)?;
        if next % COMPACT_EVERY == 0 {
            self.compact(conn, next)?;
        }
        self.client.batch_execute("COMMIT").map_err(pg)?;
        Ok(next)
    }

    /// Writes this replica (which is at `head`) as the new snapshot; drops the log
    /// entries the previous snapshot already covered.
    fn compact(&mut self, conn: &Connection, head: i64) -> Result<(), MlsError> {
        let base: i64 = self
            .client
            .query_one("SELECT base_version FROM mailseal_mls_head WHERE id", &[])
            .map_err(pg)?
            .get(0);
        let snapshot = changeset::dump(conn)?;
        self.client
            .execute(
                "UPDATE mailseal_mls_head SET base_version = $1, snapshot = $2 WHERE id",
                &[&head, &snapshot.as_slice()],
            )
            .map_err(pg)?;
        self.client
            .execute("DELETE FROM mailseal_mls_log WHERE version <= $1", &[&base])
            .map_err(pg)?;
        Ok(())
    }

    /// Whether a transaction holds the lock now.
    pub(crate) fn in_transaction(&self) -> bool {
        self.locked.is_some()
    }

    /// Ends the open transaction without writing.
    pub(crate) fn rollback(&mut self) {
        self.locked = None;
        if self.client.batch_execute("ROLLBACK").is_err() {
            self.stale = true;
        }
    }
}

/// Applies one changeset; one that does not decode leaves the replica as it was
/// (the caller's savepoint) and is an error.
fn apply(conn: &Connection, changeset: &[u8]) -> rusqlite::Result<()> {
    changeset::apply(conn, changeset)
}

/// Creates the temporary tables and triggers that note what a transaction touches
/// (on this connection only: nothing of it is in the schema others see).
pub(crate) fn watch(conn: &Connection) -> Result<(), MlsError> {
    changeset::watch(conn, &replicated_tables(conn)?)
}

/// The rows the open transaction touched, as a changeset (empty: none), and the
/// notes cleared.
pub(crate) fn changes(conn: &Connection) -> Result<Zeroizing<Vec<u8>>, MlsError> {
    Ok(changeset::collect(conn, &replicated_tables(conn)?)?)
}

/// Forgets what was noted (by applying other processes' changesets, say).
pub(crate) fn forget(conn: &Connection) -> Result<(), MlsError> {
    changeset::forget(conn, &replicated_tables(conn)?)?;
    Ok(())
}

pub(crate) fn replicated_tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = conn
        .prepare_cached("SELECT name FROM main.sqlite_master WHERE type = 'table' ORDER BY name")?;
    let names = st.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for n in names {
        let n = n?;
        if replicated(&n) {
            out.push(n);
        }
    }
    Ok(out)
}
