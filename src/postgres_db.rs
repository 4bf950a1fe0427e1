//! The PostgreSQL schema several gateways share: replay and stream state and the key
//! directory, with versioned migrations (the `mailseal_schema` table) that one process
//! at a time applies.

use postgres::{Client, NoTls};

/// Schema migrations, in order; migration `i` takes the version from `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: replay tuples, streams, pending stream events.
    "CREATE TABLE mailseal_replay_tuple (
        signer TEXT NOT NULL,
        message_id TEXT NOT NULL,
        idempotency_key TEXT,
        operation TEXT NOT NULL,
        digest BYTEA NOT NULL,
        accepted_at BIGINT NOT NULL,
        keep_until BIGINT,
        PRIMARY KEY (signer, message_id)
     );
     CREATE INDEX mailseal_replay_tuple_idempotency
        ON mailseal_replay_tuple (signer, idempotency_key, accepted_at);
     CREATE INDEX mailseal_replay_tuple_keep ON mailseal_replay_tuple (keep_until);
     CREATE TABLE mailseal_stream (
        signer TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        attempt BIGINT NOT NULL,
        operation TEXT NOT NULL,
        next_seq BIGINT NOT NULL,
        final_seq BIGINT,
        gap_since BIGINT,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (signer, correlation_id, attempt)
     );
     CREATE INDEX mailseal_stream_correlation ON mailseal_stream (correlation_id);
     CREATE INDEX mailseal_stream_updated ON mailseal_stream (updated_at);
     CREATE TABLE mailseal_stream_event (
        signer TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        attempt BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        message_id TEXT NOT NULL,
        state TEXT NOT NULL,
        envelope BYTEA NOT NULL,
        received_at BIGINT NOT NULL,
        PRIMARY KEY (signer, correlation_id, attempt, seq)
     );",
    // 2: the key directory (as the SQLite store's migration 2).
    "CREATE TABLE mailseal_x509_certificate (
        fingerprint TEXT NOT NULL,
        anchor BOOLEAN NOT NULL,
        der BYTEA NOT NULL,
        PRIMARY KEY (fingerprint, anchor)
     );
     CREATE TABLE mailseal_x509_email (
        email TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        PRIMARY KEY (email, fingerprint)
     );
     CREATE TABLE mailseal_private_key (
        fingerprint TEXT PRIMARY KEY,
        algorithm TEXT NOT NULL,
        pkcs8 BYTEA,
        encrypted BOOLEAN NOT NULL,
        token_uri TEXT
     );
     CREATE TABLE mailseal_openpgp_certificate (
        fingerprint TEXT PRIMARY KEY,
        cert BYTEA NOT NULL,
        secret BYTEA,
        secret_locked BOOLEAN NOT NULL DEFAULT FALSE
     );",
    // 3: x402 payment flows (as the SQLite store's migration 3).
    "CREATE TABLE mailseal_payment_flow (
        peer TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        state TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (peer, correlation_id)
     );",
    // 4: certificate revocation lists (as the SQLite store's migration 4).
    "CREATE TABLE mailseal_x509_crl (
        fingerprint TEXT PRIMARY KEY,
        der BYTEA NOT NULL
     );",
    // 5: the gateway's shared spool (see `gateway::spool::PostgresSpool`). A delivered
    // row stays, emptied, with its `done_at`, so that putting it again is a conflict on
    // its key: no check-then-insert to race with.
    "CREATE TABLE mailseal_spool (
        id TEXT PRIMARY KEY,
        route TEXT NOT NULL,
        mail_from TEXT NOT NULL,
        recipients TEXT NOT NULL,
        created BIGINT NOT NULL,
        attempts INTEGER NOT NULL,
        next_attempt BIGINT NOT NULL,
        leased_until BIGINT NOT NULL DEFAULT 0,
        last_error TEXT NOT NULL,
        data BYTEA NOT NULL,
        done_at BIGINT
     );
     CREATE INDEX mailseal_spool_due ON mailseal_spool (next_attempt) WHERE done_at IS NULL;
     CREATE INDEX mailseal_spool_done_at ON mailseal_spool (done_at) WHERE done_at IS NOT NULL;",
    // 6: the MLS state several instances share (see `mls::shared`): one head row that
    // every MLS transaction locks, the log of SQLite changesets after the compacted
    // snapshot; and the peer policies (`ext::peers`), one row per peer address.
    "CREATE TABLE mailseal_mls_head (
        id BOOLEAN PRIMARY KEY CHECK (id),
        version BIGINT NOT NULL,
        base_version BIGINT NOT NULL,
        schema TEXT NOT NULL,
        snapshot BYTEA
     );
     CREATE TABLE mailseal_mls_log (
        version BIGINT PRIMARY KEY,
        changeset BYTEA NOT NULL
     );
     CREATE TABLE mailseal_peer_policy (
        address TEXT PRIMARY KEY,
        record TEXT NOT NULL
     );",
    // 7: JSON Web Key identities of the `jws` profile (as the SQLite store's migration 5).
    "CREATE TABLE mailseal_jwk_identity (
        fingerprint TEXT PRIMARY KEY,
        record TEXT NOT NULL
     );",
    // 8: the request record and idempotency by address (as the SQLite store's
    // migration 6).
    "ALTER TABLE mailseal_replay_tuple ADD COLUMN peer TEXT;
     ALTER TABLE mailseal_replay_tuple ADD COLUMN retain_until BIGINT;
     ALTER TABLE mailseal_replay_tuple ADD COLUMN payload_digest BYTEA;
     ALTER TABLE mailseal_replay_tuple ADD COLUMN correlation_id TEXT;
     ALTER TABLE mailseal_replay_tuple ADD COLUMN mail_id TEXT;
     CREATE INDEX mailseal_replay_tuple_peer_idempotency
        ON mailseal_replay_tuple (peer, idempotency_key, accepted_at);
     CREATE TABLE mailseal_sent_request (
        correlation_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        attempt BIGINT NOT NULL,
        mail_id TEXT,
        author TEXT NOT NULL,
        recipients TEXT NOT NULL,
        grp TEXT,
        operation TEXT NOT NULL,
        idempotency_key TEXT,
        expires_at BIGINT NOT NULL,
        paid BOOLEAN NOT NULL,
        sent_at BIGINT NOT NULL,
        PRIMARY KEY (correlation_id, message_id)
     );
     CREATE INDEX mailseal_sent_request_expires ON mailseal_sent_request (expires_at);",
    // 9: the requests of ours a stream answers (as the SQLite store's migration 7).
    "ALTER TABLE mailseal_stream ADD COLUMN request TEXT;",
    // 10: which gateway instance holds a spool row's lease, so that instance, restarted,
    // takes its own leases back at once rather than after they run out.
    "ALTER TABLE mailseal_spool ADD COLUMN leased_by TEXT;",
    // 11: a spool row held with the queue tools (`mailseal queue hold`) is never
    // claimed until released.
    "ALTER TABLE mailseal_spool ADD COLUMN held BOOLEAN NOT NULL DEFAULT FALSE;",
    // 12: each gateway instance's last sign of life (the database's clock), so the
    // leases of an instance that stopped beating are taken by the others at once
    // rather than when they run out.
    "CREATE TABLE mailseal_spool_instance (id TEXT PRIMARY KEY, seen_at BIGINT NOT NULL);",
    // 13: when a spool row was accepted to the millisecond (`Entry::created_ms`), for
    // the delivery latency; 0 in rows queued before, which count from `created`.
    "ALTER TABLE mailseal_spool ADD COLUMN created_ms BIGINT NOT NULL DEFAULT 0;",
    // 14: the A2A bridge's state (`bridge::state`, the same tables as its SQLite file):
    // the calls its local agents made and their answers and tasks, the calls mail
    // brought for them, each leased to the instance that makes it.
    "CREATE TABLE mailseal_bridge_call (
        correlation TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        peer TEXT NOT NULL,
        method TEXT NOT NULL,
        idem TEXT NOT NULL,
        created BIGINT NOT NULL,
        sealed BYTEA,
        queued BIGINT NOT NULL DEFAULT 0,
        done BIGINT NOT NULL DEFAULT 0,
        task_id TEXT,
        UNIQUE (agent, peer, method, idem)
     );
     CREATE TABLE mailseal_bridge_answer (
        correlation TEXT NOT NULL,
        sequence BIGINT NOT NULL,
        kind TEXT NOT NULL,
        final BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (correlation, sequence)
     );
     CREATE TABLE mailseal_bridge_task (
        agent TEXT NOT NULL,
        task_id TEXT NOT NULL,
        peer TEXT NOT NULL,
        correlation TEXT NOT NULL,
        task TEXT NOT NULL,
        PRIMARY KEY (agent, peer, task_id)
     );
     CREATE TABLE mailseal_bridge_inbound (
        id BIGSERIAL PRIMARY KEY,
        agent TEXT NOT NULL,
        sender TEXT NOT NULL,
        correlation TEXT NOT NULL,
        idem TEXT NOT NULL,
        operation TEXT NOT NULL,
        message BYTEA NOT NULL,
        verdict TEXT NOT NULL,
        state TEXT NOT NULL,
        next_sequence BIGINT NOT NULL DEFAULT 1,
        task_id TEXT,
        context_id TEXT,
        created BIGINT NOT NULL,
        attempts BIGINT NOT NULL DEFAULT 0,
        next_try BIGINT NOT NULL DEFAULT 0,
        expires BIGINT NOT NULL DEFAULT 0,
        owner TEXT,
        lease_until BIGINT NOT NULL DEFAULT 0,
        UNIQUE (agent, sender, operation, idem)
     );
     CREATE INDEX mailseal_bridge_inbound_state ON mailseal_bridge_inbound (state);",
];

/// Why the database did not open.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PgDbError {
    /// Written by a newer mailseal: refused rather than misread.
    #[error("schema version {found} is newer than this mailseal ({supported})")]
    NewerSchema { found: i64, supported: i64 },
    /// Connecting or migrating failed (the server's own message, when it gave one:
    /// `postgres::Error` alone says only "db error").
    #[error("{}", describe(.0))]
    Sql(#[from] postgres::Error),
    /// The URL's TLS parameters cannot be used.
    #[error("{0}")]
    Tls(String),
    /// The connection is lost and was tried again less than a second ago.
    #[error("the database is unreachable (trying again)")]
    Down,
    /// [`connect_existing`]: the database holds no mailseal schema of that version.
    #[error("the database holds no mailseal schema (version {0} or later)")]
    NoSchema(i64),
}

/// A connection that comes back: when the server went away (a restart, a network
/// cut), the next use connects again, at most once a second, rather than failing until
/// the process restarts (issue #57: gateways answered 451 until restarted by hand).
/// It remembers since when it has been down, for a caller that gives up after a while.
pub(crate) struct Reconnecting {
    url: String,
    /// Each statement's time limit (0: none).
    statement_timeout_ms: u32,
    state: std::sync::Mutex<Link>,
}

struct Link {
    client: Option<Client>,
    last_try: Option<std::time::Instant>,
    down_since: Option<std::time::Instant>,
}

/// Whether the server ended the session with this error (FATAL or PANIC: terminated,
/// shutting down), which may come before the connection's close is read.
fn session_ended(e: &postgres::Error) -> bool {
    use postgres::error::Severity;
    e.as_db_error()
        .and_then(|d| d.parsed_severity())
        .is_some_and(|s| matches!(s, Severity::Fatal | Severity::Panic))
}

/// How often a connection that is down is tried again.
const RECONNECT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Reconnecting {
    /// Connects now (a server that is not there at startup is an error), each
    /// statement limited to `statement_timeout_ms`.
    pub(crate) fn connect_with(url: &str, statement_timeout_ms: u32) -> Result<Self, PgDbError> {
        let client = Self::open(url, statement_timeout_ms)?;
        Ok(Reconnecting {
            url: url.to_string(),
            statement_timeout_ms,
            state: std::sync::Mutex::new(Link {
                client: Some(client),
                last_try: None,
                down_since: None,
            }),
        })
    }

    /// Runs `f` on the connection, connecting again first when it was lost.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, PgDbError> {
        let mut link = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        if link.client.as_ref().is_none_or(Client::is_closed) {
            link.client = None;
            if link
                .last_try
                .is_some_and(|t| now.duration_since(t) < RECONNECT_EVERY)
            {
                link.down_since.get_or_insert(now);
                return Err(PgDbError::Down);
            }
            link.last_try = Some(now);
            match Self::open(&self.url, self.statement_timeout_ms) {
                Ok(c) => {
                    tracing::info!("database: connected again");
                    link.client = Some(c);
                }
                Err(e) => {
                    link.down_since.get_or_insert(now);
                    return Err(e);
                }
            }
        }
        let Some(client) = link.client.as_mut() else {
            return Err(PgDbError::Down);
        };
        let r = f(client);
        match &r {
            Ok(_) => link.down_since = None,
            Err(e) if client.is_closed() || session_ended(e) => {
                if link.down_since.is_none() {
                    tracing::warn!("database: connection lost; connecting again");
                }
                link.down_since.get_or_insert(now);
                // Ended by the server, whether or not the client has read the close
                // yet: the next use connects again.
                link.client = None;
            }
            Err(_) => {}
        }
        r.map_err(PgDbError::from)
    }

    fn open(url: &str, statement_timeout_ms: u32) -> Result<Client, PgDbError> {
        let mut client = connect(url)?;
        if statement_timeout_ms > 0 {
            client.batch_execute(&format!("SET statement_timeout = {statement_timeout_ms}"))?;
        }
        Ok(client)
    }

    /// Drops the connection (another to the same server found it gone): the next use
    /// connects again at once rather than first failing a statement on a connection
    /// the server has closed. Closed on a thread of its own: closing waits for the
    /// server's end, which a server cut off without a word never sends.
    pub(crate) fn forget(&self) {
        let client = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .client
            .take();
        if let Some(client) = client {
            if let Err(e) = std::thread::Builder::new()
                .name("mailseal-pg-close".into())
                .spawn(move || drop(client))
            {
                // The closure, and the connection with it, was dropped here.
                tracing::debug!(error = %e, "database: a connection closed in place");
            }
        }
    }

    /// How long the database has been unreachable, if it is.
    pub(crate) fn down_for(&self) -> Option<std::time::Duration> {
        let link = self.state.lock().unwrap_or_else(|p| p.into_inner());
        link.down_since.map(|t| t.elapsed())
    }
}

/// How long connecting may take, unless the URL says (`connect_timeout=`): a server
/// that does not answer is then an error, not a wait without end.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `config` with its password from a pgpass file when its URL has none: the file
/// `PGPASSFILE` names, else `~/.pgpass`, as libpq reads them (lines
/// `host:port:database:user:password`, `*` matching anything, `\:` and `\\` escaped;
/// the first line that matches), and only when no one but its owner may read it. So a
/// password need not sit in the gateway's TOML.
fn with_passfile(mut config: postgres::Config) -> postgres::Config {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    // A connection whose server vanished without a word (a cut, a host gone) is
    // found out by TCP keepalives rather than never.
    config.keepalives(true);
    config.keepalives_idle(std::time::Duration::from_secs(30));
    if config.get_password().is_some() {
        return config;
    }
    let path = match std::env::var_os("PGPASSFILE") {
        Some(p) => std::path::PathBuf::from(p),
        None => match std::env::var_os("HOME") {
            Some(home) => std::path::Path::new(&home).join(".pgpass"),
            None => return config,
        },
    };
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(&path) else {
        return config;
    };
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(file = %path.display(), "the pgpass file may be read by others: not used (chmod 600)");
        return config;
    }
    let Ok(text) = std::fs::read_to_string(&path) else {
        return config;
    };
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let database = config.get_dbname().unwrap_or(&user).to_string();
    if let Some(password) = pgpass_lookup(&text, &[&host, &port, &database, &user]) {
        config.password(password);
    }
    config
}

/// The password of the first pgpass line whose four fields match `want` (host, port,
/// database, user).
fn pgpass_lookup(text: &str, want: &[&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        // Each field with whether it was a bare `*` (an escaped `\*` is a star).
        let mut fields: Vec<(String, bool)> = Vec::new();
        let mut field = String::new();
        let mut escaped = false;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    escaped = true;
                    field.extend(chars.next());
                }
                ':' if fields.len() < 4 => {
                    let star = field == "*" && !escaped;
                    fields.push((std::mem::take(&mut field), star));
                    escaped = false;
                }
                c => field.push(c),
            }
        }
        fields.push((field, false));
        if fields.len() == 5
            && fields[..4]
                .iter()
                .zip(want)
                .all(|((f, star), w)| *star || f == w)
        {
            return fields.pop().map(|(p, _)| p);
        }
    }
    None
}

/// A PostgreSQL error with the server's message and code (a wrong password: "password
/// authentication failed for user ...", 28P01), or the client's own.
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// Connects (`postgres://user:password@host/db`, over TLS verified by rustls with
/// `?sslmode=verify-full&sslrootcert=CA.pem`; see [`crate::postgres_tls`]) and brings
/// the schema up to date.
pub(crate) fn connect(url: &str) -> Result<Client, PgDbError> {
    connect_schema(url, None)
}

/// [`connect`] to a database that holds mailseal's schema at version `at_least` or
/// later already (brought up to date then): [`PgDbError::NoSchema`] otherwise, and
/// nothing is created. For a tool pointed at a database by hand (`mailseal queue`),
/// where a wrong one must not get mailseal's tables.
#[cfg_attr(not(feature = "gateway"), allow(dead_code))]
pub(crate) fn connect_existing(url: &str, at_least: i64) -> Result<Client, PgDbError> {
    connect_schema(url, Some(at_least))
}

fn connect_schema(url: &str, must_have: Option<i64>) -> Result<Client, PgDbError> {
    #[cfg(feature = "tls")]
    let mut client = match crate::postgres_tls::mode(url).map_err(PgDbError::Tls)? {
        crate::postgres_tls::Mode::Plain(url) => with_passfile(url.parse()?).connect(NoTls)?,
        crate::postgres_tls::Mode::VerifyFull(url, tls) => {
            let mut config = with_passfile(url.parse()?);
            config.ssl_mode(postgres::config::SslMode::Require);
            config.connect(tls)?
        }
    };
    #[cfg(not(feature = "tls"))]
    let mut client = {
        if url.contains("sslmode=") {
            return Err(PgDbError::Tls(
                "this build has no TLS (the `tls` feature): sslmode is not supported".into(),
            ));
        }
        with_passfile(url.parse()?).connect(NoTls)?
    };
    let mut tx = client.transaction()?;
    // One migrating process at a time, whichever table exists yet.
    tx.execute("SELECT pg_advisory_xact_lock(7391770301)", &[])?;
    if let Some(at_least) = must_have {
        let exists: bool = tx
            .query_one("SELECT to_regclass('mailseal_schema') IS NOT NULL", &[])?
            .get(0);
        let version: Option<i64> = if exists {
            tx.query_opt("SELECT version FROM mailseal_schema", &[])?
                .map(|r| r.get(0))
        } else {
            None
        };
        if version.is_none_or(|v| v < at_least) {
            return Err(PgDbError::NoSchema(at_least));
        }
    }
    tx.batch_execute("CREATE TABLE IF NOT EXISTS mailseal_schema (version BIGINT NOT NULL)")?;
    let found: i64 = match tx.query_opt("SELECT version FROM mailseal_schema", &[])? {
        Some(r) => r.get(0),
        None => {
            tx.execute("INSERT INTO mailseal_schema VALUES (0)", &[])?;
            0
        }
    };
    let supported = MIGRATIONS.len() as i64;
    if found > supported {
        return Err(PgDbError::NewerSchema { found, supported });
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        tx.batch_execute(step)?;
        tx.execute(
            "UPDATE mailseal_schema SET version = $1",
            &[&(i as i64 + 1)],
        )?;
    }
    tx.commit()?;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::pgpass_lookup;

    #[test]
    fn pgpass_lines_match_as_libpq_reads_them() {
        let text = "# comment\n\
                    otherhost:5432:db:alice:wrong\n\
                    127.0.0.1:5432:*:alice:pa\\:ss\\\\word\n\
                    *:*:*:*:fallback\n";
        let want = |h, p, d, u| pgpass_lookup(text, &[h, p, d, u]);
        assert_eq!(
            want("127.0.0.1", "5432", "mailseal", "alice").as_deref(),
            Some("pa:ss\\word")
        );
        assert_eq!(
            want("otherhost", "5432", "db", "alice").as_deref(),
            Some("wrong")
        );
        assert_eq!(
            want("db.example", "6432", "x", "bob").as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("h:1:d:u\n", &["h", "1", "d", "u"]), None);
        // An escaped star is a star, not a wildcard.
        assert_eq!(pgpass_lookup("\\*:1:d:u:pw\n", &["h", "1", "d", "u"]), None);
        assert_eq!(
            pgpass_lookup("\\*:1:d:u:pw\n", &["*", "1", "d", "u"]).as_deref(),
            Some("pw")
        );
    }
}
