//! The store's SQLite database: one owner-only file (`mailseal.db` in the store
//! directory) holding the replay and stream state and the keys, with versioned
//! migrations so a file written by an older mailseal opens in a newer one.
//!
//! The journal is a WAL with `synchronous=FULL`: what a transaction commits is on disk
//! before it returns, whatever happens to the process (or the machine) next. The file
//! is created mode 0600 before SQLite opens it; SQLite gives its WAL and shared-memory
//! files the same mode.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

/// The database's name in a store directory.
pub(crate) const FILE_NAME: &str = "mailseal.db";

/// Schema migrations, in order: migration `i` takes `user_version` from `i` to `i + 1`.
/// Never edit one that has shipped; append.
const MIGRATIONS: &[&str] = &[
    // 1: replay tuples, streams, pending stream events.
    "CREATE TABLE replay_tuple (
        signer TEXT NOT NULL,
        message_id TEXT NOT NULL,
        idempotency_key TEXT,
        operation TEXT NOT NULL,
        digest BLOB NOT NULL,
        accepted_at INTEGER NOT NULL,
        keep_until INTEGER,
        PRIMARY KEY (signer, message_id)
     ) WITHOUT ROWID;
     CREATE INDEX replay_tuple_idempotency
        ON replay_tuple (signer, idempotency_key, accepted_at);
     CREATE INDEX replay_tuple_keep ON replay_tuple (keep_until);
     CREATE TABLE stream (
        signer TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        operation TEXT NOT NULL,
        next_seq INTEGER NOT NULL,
        final_seq INTEGER,
        gap_since INTEGER,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (signer, correlation_id, attempt)
     ) WITHOUT ROWID;
     CREATE INDEX stream_correlation ON stream (correlation_id);
     CREATE INDEX stream_updated ON stream (updated_at);
     CREATE TABLE stream_event (
        signer TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        state TEXT NOT NULL,
        envelope BLOB NOT NULL,
        received_at INTEGER NOT NULL,
        PRIMARY KEY (signer, correlation_id, attempt, seq)
     );",
    // 2: keys. X.509 certificates (and trust anchors) with their addresses; private
    // keys as PKCS#8 DER, as EncryptedPrivateKeyInfo DER when a passphrase protects
    // them, or as a PKCS#11 URI (no PIN) for a key on a token; OpenPGP certificates
    // with their secret keys (locked with the passphrase's S2K when one is set).
    "CREATE TABLE x509_certificate (
        fingerprint TEXT NOT NULL,
        anchor INTEGER NOT NULL,
        der BLOB NOT NULL,
        PRIMARY KEY (fingerprint, anchor)
     ) WITHOUT ROWID;
     CREATE TABLE x509_email (
        email TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        PRIMARY KEY (email, fingerprint)
     ) WITHOUT ROWID;
     CREATE TABLE private_key (
        fingerprint TEXT PRIMARY KEY,
        algorithm TEXT NOT NULL,
        pkcs8 BLOB,
        encrypted INTEGER NOT NULL,
        token_uri TEXT
     ) WITHOUT ROWID;
     CREATE TABLE openpgp_certificate (
        fingerprint TEXT PRIMARY KEY,
        cert BLOB NOT NULL,
        secret BLOB,
        secret_locked INTEGER NOT NULL DEFAULT 0
     ) WITHOUT ROWID;",
    // 3: x402 payment flows (MailA2A section 8): a PaymentPayload is accepted only
    // from a peer we sent a PaymentRequired to, in that exchange.
    "CREATE TABLE payment_flow (
        peer TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        state TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (peer, correlation_id)
     ) WITHOUT ROWID;",
    // 4: certificate revocation lists imported from files (issue #17), by SHA-256.
    "CREATE TABLE x509_crl (
        fingerprint TEXT PRIMARY KEY,
        der BLOB NOT NULL
     ) WITHOUT ROWID;",
    // 5: JSON Web Key identities of the `jws` profile (issue #19): the record's JSON
    // (addresses, public JWK, source) under the key's fingerprint.
    "CREATE TABLE jwk_identity (
        fingerprint TEXT PRIMARY KEY,
        record TEXT NOT NULL
     ) WITHOUT ROWID;",
    // 6: the record of the requests we sent (issue #56), whose answers alone are
    // delivered; idempotency keys by the sender's address, remembered for a
    // retention of their own.
    "ALTER TABLE replay_tuple ADD COLUMN peer TEXT;
     ALTER TABLE replay_tuple ADD COLUMN retain_until INTEGER;
     ALTER TABLE replay_tuple ADD COLUMN payload_digest BLOB;
     ALTER TABLE replay_tuple ADD COLUMN correlation_id TEXT;
     ALTER TABLE replay_tuple ADD COLUMN mail_id TEXT;
     CREATE INDEX replay_tuple_peer_idempotency
        ON replay_tuple (peer, idempotency_key, accepted_at);
     CREATE TABLE sent_request (
        correlation_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        mail_id TEXT,
        author TEXT NOT NULL,
        recipients TEXT NOT NULL,
        grp TEXT,
        operation TEXT NOT NULL,
        idempotency_key TEXT,
        expires_at INTEGER NOT NULL,
        paid INTEGER NOT NULL,
        sent_at INTEGER NOT NULL,
        PRIMARY KEY (correlation_id, message_id)
     ) WITHOUT ROWID;
     CREATE INDEX sent_request_expires ON sent_request (expires_at);",
    // 7: the requests of ours a stream answers (a JSON array of messageIds; NULL: a
    // stream of an exchange we have no record of, or written before): one signer
    // answers each of our requests, and two requests of one exchange to two agents
    // are answered each by its own (issue #56).
    "ALTER TABLE stream ADD COLUMN request TEXT;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Why the database did not open.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DbError {
    /// Written by a newer mailseal: refused rather than misread.
    #[error("schema version {found} is newer than this mailseal ({supported})")]
    NewerSchema { found: i64, supported: i64 },
    /// Creating the file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// SQLite failed.
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
}

/// Opens (creating it owner-only if absent) the database at `path` and brings its
/// schema up to date.
pub(crate) fn open(path: &Path) -> Result<Connection, DbError> {
    create_private(path)?;
    // Several processes opening a new file at once race to switch it to WAL and to
    // migrate it; SQLite reports the loser busy at once (its busy handler does not run
    // for a journal-mode change), so the whole setup is tried again for a while.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut pause = Duration::from_millis(5);
    loop {
        match setup(path) {
            Err(DbError::Sql(e)) if busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// A database in memory with the current schema: a [`crate::keystore::MemoryStore`]'s
/// X.509 tables. Gone when the connection is dropped.
pub(crate) fn open_in_memory() -> Result<Connection, DbError> {
    let mut conn = Connection::open_in_memory()?;
    migrate(&mut conn)?;
    Ok(conn)
}

fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn setup(path: &Path) -> Result<Connection, DbError> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(60))?;
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    migrate(&mut conn)?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), DbError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(DbError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}

/// Creates `path` empty with mode 0600 when it does not exist, so no other user can
/// ever read it (SQLite would create it with the umask's mode).
pub(crate) fn create_private(path: &Path) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    match o.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}
