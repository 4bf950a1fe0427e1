//! Where an agent's MLS state lives: one owner-only SQLite file (`mls.db` in the store
//! directory) holding openmls' own storage (`openmls_sqlite_storage`: group state,
//! secret trees, HPKE and signature keys) and our tables beside it: identities, the
//! commits applied per epoch (fork detection), messages seen (duplicates), messages
//! held for a future epoch, and our own send generation per epoch.
//!
//! Every operation runs in one `BEGIN IMMEDIATE` transaction across both, committed
//! only when the operation (and whatever the caller does with its result) succeeded:
//! a process killed at any point leaves the file at the old state or the new one.
//!
//! The same tables can live in PostgreSQL instead, shared by several processes
//! ([`super::shared`]): the SQLite database is then an in-memory replica, and each
//! transaction also locks, catches up with and appends to the PostgreSQL log.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use super::crypto::Crypto;
use openmls_sqlite_storage::{Codec, SqliteStorageProvider};
use rusqlite::Connection;

use super::shared::{self, Shared};
use super::storage::Storage;
use super::MlsError;

/// The file's name in a store directory.
pub(crate) const FILE_NAME: &str = "mls.db";

/// Our tables; migration `i` takes `user_version` from `i` to `i + 1` (openmls' tables
/// have their own migration table). Never edit one that has shipped; append.
const MIGRATIONS: &[&str] = &[
    // 1: identities, groups, applied commits, seen and held messages, send counters.
    "CREATE TABLE mailseal_mls_identity (
        email TEXT PRIMARY KEY,
        public_key BLOB NOT NULL,
        scheme INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE TABLE mailseal_mls_group (
        group_id BLOB PRIMARY KEY,
        email TEXT NOT NULL,
        joined_epoch INTEGER NOT NULL,
        removed_epoch INTEGER
     ) WITHOUT ROWID;
     CREATE TABLE mailseal_mls_commit (
        group_id BLOB NOT NULL,
        epoch INTEGER NOT NULL,
        digest BLOB NOT NULL,
        PRIMARY KEY (group_id, epoch)
     ) WITHOUT ROWID;
     CREATE TABLE mailseal_mls_seen (
        group_id BLOB NOT NULL,
        digest BLOB NOT NULL,
        epoch INTEGER NOT NULL,
        seen_at INTEGER NOT NULL,
        PRIMARY KEY (group_id, digest)
     ) WITHOUT ROWID;
     CREATE INDEX mailseal_mls_seen_epoch ON mailseal_mls_seen (group_id, epoch);
     CREATE TABLE mailseal_mls_held (
        group_id BLOB NOT NULL,
        digest BLOB NOT NULL,
        epoch INTEGER NOT NULL,
        is_commit INTEGER NOT NULL,
        name TEXT NOT NULL,
        raw BLOB NOT NULL,
        held_at INTEGER NOT NULL,
        PRIMARY KEY (group_id, digest)
     ) WITHOUT ROWID;
     CREATE TABLE mailseal_mls_sent (
        group_id BLOB NOT NULL,
        epoch INTEGER NOT NULL,
        next_generation INTEGER NOT NULL,
        PRIMARY KEY (group_id, epoch)
     ) WITHOUT ROWID;",
    // 2: a group's version, bumped by every transaction that takes the group, so a
    // process whose cached group another process has changed since loads it again.
    "ALTER TABLE mailseal_mls_group ADD COLUMN version INTEGER NOT NULL DEFAULT 0;",
    // 3: whether this member applies external commits (joins by GroupInfo) in a group:
    // off unless set for the group (issue #17).
    "ALTER TABLE mailseal_mls_group ADD COLUMN external_joins INTEGER NOT NULL DEFAULT 0;",
    // 4: an identity's signature key encrypted under the store passphrase (DER
    // EncryptedPrivateKeyInfo around the raw key); NULL: in openmls' storage, clear.
    "ALTER TABLE mailseal_mls_identity ADD COLUMN sealed_key BLOB;",
    // 5: issue #17, the authentication service: our credential's certification by
    // our mail key, who may add us to groups, and MLS keys pinned by hand (members on
    // another MLS stack, which carry no certification).
    "ALTER TABLE mailseal_mls_identity ADD COLUMN binding BLOB;
     CREATE TABLE mailseal_mls_inviter (pattern TEXT PRIMARY KEY NOT NULL);
     CREATE TABLE mailseal_mls_pinned (
        email TEXT NOT NULL,
        public_key BLOB NOT NULL,
        PRIMARY KEY (email, public_key)
     ) WITHOUT ROWID;",
    // 6: messages seen, keyed by group, epoch and digest, without the index on epoch:
    // every message received or sent adds a record, which was two B-tree inserts (the
    // table and the index) and is one. The key is as unique as before (a message's
    // digest covers its framing, so it fixes the epoch recorded with it); pruning the
    // epochs a Commit leaves behind reads a prefix of the key. The columns keep their
    // order.
    "CREATE TABLE mailseal_mls_seen_by_epoch (
        group_id BLOB NOT NULL,
        digest BLOB NOT NULL,
        epoch INTEGER NOT NULL,
        seen_at INTEGER NOT NULL,
        PRIMARY KEY (group_id, epoch, digest)
     ) WITHOUT ROWID;
     INSERT INTO mailseal_mls_seen_by_epoch (group_id, digest, epoch, seen_at)
        SELECT group_id, digest, epoch, seen_at FROM mailseal_mls_seen;
     DROP TABLE mailseal_mls_seen;
     ALTER TABLE mailseal_mls_seen_by_epoch RENAME TO mailseal_mls_seen;",
    // 7: issue #56, stale members: the leaves a Commit emptied (removed members), by
    // the epoch the Commit was framed in, so that a message framed before then is not
    // taken for whoever holds the leaf now (a member removed and added again lands on
    // the leaf it had), kept for the past epochs whose secrets are kept; and the share
    // of the hold a held message counts against (the member its mail names, or ''
    // for any name that is not a member), in the key: a copy of a genuine message
    // held first under another name (which fails at release) does not stand for it.
    "CREATE TABLE mailseal_mls_vacated (
        group_id BLOB NOT NULL,
        leaf_index INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        PRIMARY KEY (group_id, leaf_index, epoch)
     ) WITHOUT ROWID;
     CREATE TABLE mailseal_mls_held_by_claim (
        group_id BLOB NOT NULL,
        digest BLOB NOT NULL,
        epoch INTEGER NOT NULL,
        is_commit INTEGER NOT NULL,
        name TEXT NOT NULL,
        raw BLOB NOT NULL,
        held_at INTEGER NOT NULL,
        claimed TEXT NOT NULL,
        PRIMARY KEY (group_id, digest, claimed)
     ) WITHOUT ROWID;
     INSERT INTO mailseal_mls_held_by_claim
        SELECT group_id, digest, epoch, is_commit, name, raw, held_at, '' FROM mailseal_mls_held;
     DROP TABLE mailseal_mls_held;
     ALTER TABLE mailseal_mls_held_by_claim RENAME TO mailseal_mls_held;",
];

/// serde_json for openmls' stored values: `serde_json::to_vec`'s bytes exactly, written
/// faster ([`Compact`]).
#[derive(Default)]
pub(crate) struct JsonCodec;

impl Codec for JsonCodec {
    type Error = serde_json::Error;
    fn to_vec<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, Self::Error> {
        // Room for most of what openmls stores without growing the buffer (each growth
        // copies it, and leaves the copy, secrets included, in freed memory). A busy
        // group's message secrets, several KB, still grow it once or twice.
        let mut out = Vec::with_capacity(2048);
        value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out, Compact,
        ))?;
        Ok(out)
    }
    fn from_slice<T: serde::de::DeserializeOwned>(slice: &[u8]) -> Result<T, Self::Error> {
        serde_json::from_slice(slice)
    }
}

impl JsonCodec {
    /// [`Codec::to_vec`]'s text padded with spaces to a multiple of `bucket` bytes
    /// (JSON allows white space after the value; [`Codec::from_slice`] reads it so),
    /// into a buffer that is wiped when dropped.
    ///
    /// For the value openmls rewrites on every message, its message secrets: their
    /// length moves by a few bytes each time (fresh secrets written as numbers), and a
    /// row whose length changes is deleted and inserted again by SQLite, which moves
    /// rows between pages (pages taken and freed: about 2% of the time of opening a
    /// 2 KiB application message). Of the same length, it is overwritten in place.
    ///
    /// `room` is the buffer's first capacity: the caller's guess from the last value,
    /// so that the buffer seldom grows (each growth leaves a copy of the secrets in
    /// freed memory) and is not much larger than needed (all of it is wiped).
    pub(crate) fn to_padded_vec<T: serde::Serialize>(
        value: &T,
        bucket: usize,
        room: usize,
    ) -> Result<zeroize::Zeroizing<Vec<u8>>, serde_json::Error> {
        let bucket = bucket.max(1);
        let mut out = zeroize::Zeroizing::new(Vec::with_capacity(room));
        value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut *out, Compact,
        ))?;
        let padded = out.len().div_ceil(bucket) * bucket;
        out.resize(padded, b' ');
        Ok(out)
    }
}

/// serde_json's compact format, with bytes (openmls' keys, secrets and serialized
/// structures are byte vectors, written by serde as arrays of numbers: most of what
/// it stores) written from a table instead of formatted one by one: the same text.
struct Compact;

/// The decimal digits of every byte value, and how many there are.
const DECIMAL: [([u8; 3], u8); 256] = {
    let mut table = [([0u8; 3], 0u8); 256];
    let mut v = 0;
    while v < 256 {
        let (h, t, o) = ((v / 100) as u8, (v / 10 % 10) as u8, (v % 10) as u8);
        table[v] = if v >= 100 {
            ([b'0' + h, b'0' + t, b'0' + o], 3)
        } else if v >= 10 {
            ([b'0' + t, b'0' + o, 0], 2)
        } else {
            ([b'0' + o, 0, 0], 1)
        };
        v += 1;
    }
    table
};

impl serde_json::ser::Formatter for Compact {
    fn write_u8<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: u8,
    ) -> std::io::Result<()> {
        let (digits, len) = &DECIMAL[usize::from(value)];
        writer.write_all(&digits[..usize::from(*len)])
    }
}

/// openmls' provider: RustCrypto for the cryptography, its randomness ours
/// ([`super::crypto`]), the shared connection for storage ([`super::storage`]).
pub(crate) struct Provider {
    crypto: Crypto,
    storage: Storage,
}

impl openmls_traits::OpenMlsProvider for Provider {
    type CryptoProvider = Crypto;
    type RandProvider = Crypto;
    type StorageProvider = Storage;
    fn storage(&self) -> &Self::StorageProvider {
        &self.storage
    }
    fn crypto(&self) -> &Self::CryptoProvider {
        &self.crypto
    }
    fn rand(&self) -> &Self::RandProvider {
        &self.crypto
    }
}

/// The open state file (or the replica of the shared state).
pub(crate) struct State {
    pub conn: Rc<Connection>,
    pub provider: Provider,
    /// The PostgreSQL state this one replicates, if any.
    shared: Option<RefCell<Shared>>,
    /// No other connection can see this state (in memory, not shared): nothing
    /// changes it behind this process's back.
    private: bool,
}

impl State {
    /// Opens (creating it owner-only) the state file at `path`.
    pub(crate) fn open(path: &Path) -> Result<State, MlsError> {
        crate::sqlite::create_private(path).map_err(|e| MlsError::State(e.to_string()))?;
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(60))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        Self::setup(conn)
    }

    /// A state in memory (tests, benches).
    pub(crate) fn in_memory() -> Result<State, MlsError> {
        let mut state = Self::setup(Connection::open_in_memory()?)?;
        state.private = true;
        Ok(state)
    }

    /// The state shared in the PostgreSQL database at `url`, replicated in memory.
    pub(crate) fn postgres(url: &str) -> Result<State, MlsError> {
        let mut state = Self::setup(Connection::open_in_memory()?)?;
        shared::watch(&state.conn)?;
        state.shared = Some(RefCell::new(Shared::connect(url, &state.conn)?));
        state.refresh()?;
        Ok(state)
    }

    /// Brings a shared state's replica up to date for a read outside a transaction
    /// (a local file needs nothing).
    pub(crate) fn refresh(&self) -> Result<(), MlsError> {
        if let Some(shared) = &self.shared {
            let mut shared = shared.borrow_mut();
            // Inside a transaction the replica is current already.
            if !shared.in_transaction() {
                shared.begin(&self.conn)?;
                shared.rollback();
            }
        }
        Ok(())
    }

    fn setup(mut conn: Connection) -> Result<State, MlsError> {
        {
            let mut storage = SqliteStorageProvider::<JsonCodec, &mut Connection>::new(&mut conn);
            storage
                .run_migrations()
                .map_err(|e| MlsError::State(format!("openmls storage migration: {e}")))?;
        }
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if found > MIGRATIONS.len() as i64 {
            return Err(MlsError::State(format!(
                "schema version {found} is newer than this mailseal ({})",
                MIGRATIONS.len()
            )));
        }
        for (i, step) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", i as i64 + 1)?;
        }
        tx.commit()?;
        let conn = Rc::new(conn);
        Ok(State {
            provider: Provider {
                crypto: Crypto::new(),
                storage: Storage::new(conn.clone()),
            },
            conn,
            shared: None,
            private: false,
        })
    }

    /// `execute` with the statement prepared once per connection.
    pub(crate) fn exec<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> rusqlite::Result<usize> {
        self.conn.prepare_cached(sql)?.execute(params)
    }

    /// Whether no other connection can see this state: an in-memory one, not shared.
    /// Another process can then never have changed a group this one cached.
    pub(crate) fn private(&self) -> bool {
        self.private
    }

    /// `query_row` with the statement prepared once per connection.
    pub(crate) fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.conn.prepare_cached(sql)?.query_row(params, f)
    }

    /// Starts the transaction every operation runs in (for a shared state: after
    /// locking it in PostgreSQL and catching up, and recording what changes).
    pub(crate) fn begin(&self) -> Result<Tx<'_>, MlsError> {
        if let Some(shared) = &self.shared {
            shared.borrow_mut().begin(&self.conn)?;
        }
        let tx = Tx {
            conn: &self.conn,
            shared: self.shared.as_ref(),
            done: false,
        };
        self.exec("BEGIN IMMEDIATE", [])?;
        Ok(tx)
    }
}

/// An open transaction: rolled back when dropped uncommitted.
pub(crate) struct Tx<'a> {
    conn: &'a Connection,
    shared: Option<&'a RefCell<Shared>>,
    done: bool,
}

impl Tx<'_> {
    pub(crate) fn commit(mut self) -> Result<(), MlsError> {
        // What the transaction changed, for the shared log (read inside it).
        let changes = match self.shared {
            Some(_) => Some(shared::changes(self.conn)?),
            None => None,
        };
        self.done = true;
        if let Err(e) = self
            .conn
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]))
        {
            let _ = self.conn.execute_batch("ROLLBACK");
            if let Some(shared) = self.shared {
                shared.borrow_mut().rollback();
            }
            return Err(e.into());
        }
        if let (Some(shared), Some(changes)) = (self.shared, changes) {
            // The local commit is done; PostgreSQL's decides. If it fails, the
            // replica is ahead of the shared state and is rebuilt before next use.
            shared.borrow_mut().commit(self.conn, changes)?;
        }
        Ok(())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.execute_batch("ROLLBACK");
            if let Some(shared) = self.shared {
                shared.borrow_mut().rollback();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state file of schema 5 with messages seen: migration 6 re-keys the table by
    /// epoch and keeps every record, so what was seen before stays a duplicate.
    #[test]
    fn seen_records_survive_the_migration_that_keys_them_by_epoch() {
        let conn = Connection::open_in_memory().unwrap();
        for step in &MIGRATIONS[..5] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", 5).unwrap();
        conn.execute_batch(
            "INSERT INTO mailseal_mls_seen (group_id, digest, epoch, seen_at) VALUES
                (x'01', x'aa', 3, 100), (x'01', x'ab', 4, 101), (x'', x'bb', 1, 200);",
        )
        .unwrap();
        let state = State::setup(conn).unwrap();
        let version: i64 = state
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        let rows: Vec<(Vec<u8>, Vec<u8>, i64, i64)> = state
            .conn
            .prepare(
                "SELECT group_id, digest, epoch, seen_at FROM mailseal_mls_seen ORDER BY seen_at",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            [
                (vec![1], vec![0xaa], 3, 100),
                (vec![1], vec![0xab], 4, 101),
                (vec![], vec![0xbb], 1, 200)
            ]
        );
        let indexes: i64 = state
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'mailseal_mls_seen' AND sql IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 0, "the epoch index went with the old table");
        // A record made before is still found by its key, and a second one ignored.
        let again = state
            .exec(
                "INSERT OR IGNORE INTO mailseal_mls_seen (group_id, digest, epoch, seen_at) VALUES (x'01', x'aa', 3, 999)",
                [],
            )
            .unwrap();
        assert_eq!(again, 0);
    }
}
