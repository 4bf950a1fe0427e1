//! The durable queue between accepting a message and delivering it. A message is put
//! before the client hears 250, and taken out only once the next hop has accepted it
//! or it has bounced; whatever dies in between, it is still there for the next run.
//!
//! Two backends: [`DirSpool`] (a local directory, the embedded default) and
//! [`PostgresSpool`] (one queue several gateways share; rows are claimed with
//! `FOR UPDATE SKIP LOCKED` under a lease, so the work of an instance that dies is
//! finished by another once the lease runs out).
//!
//! Entries are named by what makes them one message ([`Entry::keyed`]: the bytes the
//! client sent, or the message the receiver verified) on one route to one envelope:
//! putting the same message twice is a no-op, and so is putting one already delivered
//! (the spool keeps what it delivered for [`DONE_RETENTION_SECS`]). This is what makes
//! the gateway's at-least-once SMTP exchanges deliver once: a client that retries a
//! message whose 250 it never saw is put on the same entry.
//!
//! The queue tools (`mailseal queue`, [`QueueAdmin`] in [`admin`]) list, show, hold,
//! release, flush, requeue and delete entries of either backend while the gateway
//! runs: each change is atomic against the gateway's own claim, retry and done.

pub mod admin;
mod dir;
mod dir_admin;
mod postgres;
mod postgres_admin;
mod postgres_pool;
mod waking;

pub use admin::{Action, Applied, EntryState, QueueAdmin, Queued};
pub use dir::DirSpool;
pub use dir_admin::DirQueue;
pub use postgres::PostgresSpool;
pub use postgres_admin::PostgresQueue;
pub use waking::Waking;

use sha2::{Digest, Sha256};

/// How long a delivered entry's id is remembered (7 days: longer than any client's
/// retry period), so a late retry is not delivered again.
pub const DONE_RETENTION_SECS: i64 = 7 * 24 * 3600;

/// One queued message.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Its name ([`entry_id`]).
    pub id: String,
    /// The listener whose next hop delivers it.
    pub route: String,
    /// The reverse path (empty: a bounce, never bounced itself).
    pub mail_from: String,
    /// The forward paths still to deliver to.
    pub recipients: Vec<String>,
    /// When it was accepted, Unix seconds.
    pub created: i64,
    /// When it was accepted, Unix milliseconds: the delivery latency it gives is most
    /// often under a second, which whole seconds round to 0. 0 for an entry an older
    /// version queued (both spools' formats gained it): [`Entry::accepted_ms`] then
    /// takes [`Entry::created`]'s second.
    #[serde(default)]
    pub created_ms: i64,
    /// Delivery attempts so far.
    pub attempts: u32,
    /// Not before this time, Unix seconds.
    pub next_attempt: i64,
    /// The last temporary failure.
    pub last_error: String,
    /// The message.
    #[serde(skip)]
    pub data: Vec<u8>,
}

impl Entry {
    /// A new entry, due now, named by `key`: what makes two submissions the same
    /// message (the bytes a client sent, or the message a receiver verified), so that
    /// putting it again is a no-op even when `data` comes out different (a new
    /// signature, a new MIME boundary).
    pub fn keyed(
        route: &str,
        mail_from: &str,
        recipients: &[String],
        key: &[u8],
        data: Vec<u8>,
        now: i64,
    ) -> Self {
        let mut e = Entry::new(route, mail_from, recipients, Vec::new(), now);
        e.id = entry_id(route, mail_from, recipients, key);
        e.data = data;
        e
    }

    /// A new entry, due now, named by `data` itself.
    pub fn new(
        route: &str,
        mail_from: &str,
        recipients: &[String],
        data: Vec<u8>,
        now: i64,
    ) -> Self {
        Entry {
            id: entry_id(route, mail_from, recipients, &data),
            route: route.to_string(),
            mail_from: mail_from.to_string(),
            recipients: recipients.to_vec(),
            created: now,
            created_ms: now.saturating_mul(1000),
            attempts: 0,
            next_attempt: now,
            last_error: String::new(),
            data,
        }
    }

    /// The same entry, accepted at `ms` (Unix milliseconds): [`Entry::created`] is its
    /// second.
    pub fn accepted_at(mut self, ms: i64) -> Self {
        self.created = ms.div_euclid(1000);
        self.created_ms = ms;
        self
    }

    /// When it was accepted, Unix milliseconds (to the second for an entry queued
    /// before milliseconds were kept).
    pub fn accepted_ms(&self) -> i64 {
        if self.created_ms > 0 {
            self.created_ms
        } else {
            self.created.saturating_mul(1000)
        }
    }
}

/// The current time, Unix milliseconds.
pub fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// The name of a message on a route: a digest of everything that makes it that
/// delivery (route, envelope, bytes), hex.
pub fn entry_id(route: &str, mail_from: &str, recipients: &[String], data: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [route.as_bytes(), mail_from.as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.update((recipients.len() as u64).to_be_bytes());
    for r in recipients {
        h.update((r.len() as u64).to_be_bytes());
        h.update(r.as_bytes());
    }
    h.update(data);
    crate::hex::hex(&h.finalize()[..16])
}

/// Why the spool failed. The message stays as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpoolError {
    /// The directory.
    #[error("spool {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The database.
    #[error("spool database: {0}")]
    Database(String),
    /// Another process holds the spool directory.
    #[error("spool {0} is in use by another gateway (one process per directory; share a PostgreSQL spool instead)")]
    Locked(String),
    /// A spooled entry is unreadable.
    #[error("spool entry {0} is damaged")]
    Damaged(String),
    /// No queued entry has this id, or begins with it (the queue tools).
    #[error("no queued entry {}", crate::error::quoted(.0))]
    UnknownId(String),
    /// More than one queued entry begins with this id prefix (the queue tools).
    #[error("{} names {count} queued entries: give more of the id", crate::error::quoted(.prefix))]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// How many entries begin with it.
        count: usize,
    },
    /// The location holds no spool (the queue tools create none).
    #[error("{location} is not a gateway spool: {why}")]
    NotASpool {
        /// The directory (a database's URL is never repeated: it may hold a password).
        location: String,
        /// What is missing.
        why: String,
    },
}

impl crate::error::Classify for SpoolError {
    fn a2a_error(&self) -> crate::error::A2aErrorType {
        crate::error::A2aErrorType::InternalError
    }
    /// What the operator named wrong is an invalid argument; the rest is "other".
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            Self::UnknownId(_) | Self::Ambiguous { .. } | Self::NotASpool { .. } => {
                crate::error::ErrorKind::InvalidArgument
            }
            _ => crate::error::ErrorKind::Other,
        }
    }
}

/// What [`Spool::put`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// Queued, durably.
    Queued,
    /// Already queued, or delivered lately: nothing done.
    Known,
}

/// A durable queue. Every method returns only once its change is durable.
pub trait Spool: Send + Sync {
    /// Queues `entry` (durably: on disk and synced, or committed), unless an entry of
    /// its id is queued or was delivered lately.
    fn put(&self, entry: &Entry) -> Result<Put, SpoolError>;
    /// Takes up to `max` entries due at `now` for delivery, each leased to this
    /// process for `lease_secs` (another process takes it after that).
    fn claim(&self, now: i64, max: usize, lease_secs: i64) -> Result<Vec<Entry>, SpoolError>;
    /// Ends an entry: delivered, or bounced. Its id is remembered as done.
    fn done(&self, id: &str, now: i64) -> Result<(), SpoolError>;
    /// Puts a claimed entry back for a later attempt, with the recipients still to do.
    fn retry(&self, entry: &Entry) -> Result<(), SpoolError>;
    /// Entries queued (not done).
    fn depth(&self) -> Result<u64, SpoolError>;
    /// When the oldest entry still queued was accepted ([`Entry::created`], Unix
    /// seconds); `None` when none is. For the metrics, read as often as the depth:
    /// from memory (a directory) or one aggregate over the queued rows (PostgreSQL).
    fn oldest(&self) -> Result<Option<i64>, SpoolError>;
    /// Forgets done ids older than [`DONE_RETENTION_SECS`].
    fn expire(&self, now: i64) -> Result<(), SpoolError>;
    /// How long the spool has been unreachable, if it is (a database spool).
    fn down_for(&self) -> Option<std::time::Duration> {
        None
    }
    /// Takes back the leases this instance's last run left (a database spool): call
    /// once the listeners are bound, which proves no other instance of this name runs.
    fn reclaim_own(&self) {}
    /// Says this instance is alive (a database spool shared by several): the others
    /// take the leases of an instance silent for `dead_secs` (see
    /// [`Spool::claim_from_dead`]). Call every sixth of `dead_secs`, whatever else the
    /// instance is doing.
    fn heartbeat(&self) {}
    /// Sets after how many seconds of silence an instance is dead: its leased
    /// entries are claimed as if their leases had run out (a database spool).
    fn claim_from_dead(&mut self, _dead_secs: i64) {}
}

/// This gateway instance's name on the leases it takes: the same for the same machine
/// (`/etc/machine-id` and the host name: cloned machines and containers may share the
/// first) and the same listener addresses, so a restarted instance knows its own, and
/// different for any two instances that run at once (two cannot listen on one address
/// of one machine).
pub fn instance_id(listeners: &[std::net::SocketAddr]) -> String {
    use sha2::Digest;
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut h = sha2::Sha256::new();
    h.update(read("/etc/machine-id").trim().as_bytes());
    h.update(b"\n");
    h.update(read("/proc/sys/kernel/hostname").trim().as_bytes());
    for l in listeners {
        h.update(b"\n");
        h.update(l.to_string().as_bytes());
    }
    crate::hex::hex(&h.finalize()[..12])
}

/// Whether `location` names a database spool rather than a directory.
pub fn is_database(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// The queue tools on the spool `location` names, beside a gateway that may be running
/// on it: a directory is not locked (see [`DirQueue`]), and neither a directory nor a
/// database is created when there is no spool there ([`SpoolError::NotASpool`]).
pub fn open_admin(location: &str) -> Result<Box<dyn QueueAdmin>, SpoolError> {
    if is_database(location) {
        Ok(Box::new(PostgresQueue::connect(location)?))
    } else {
        Ok(Box::new(DirQueue::open(std::path::Path::new(location))?))
    }
}

/// Opens the spool `location` names: `postgres://...` or a directory.
pub fn open(location: &str) -> Result<Box<dyn Spool>, SpoolError> {
    open_as(location, "")
}

/// [`open`] for the gateway instance `instance` ([`instance_id`]), whose leases a
/// database spool names (see [`Spool::reclaim_own`]).
pub fn open_as(location: &str, instance: &str) -> Result<Box<dyn Spool>, SpoolError> {
    if is_database(location) {
        Ok(Box::new(PostgresSpool::connect_as(location, instance)?))
    } else {
        Ok(Box::new(DirSpool::open(std::path::Path::new(location))?))
    }
}

/// A new empty database named `prefix_...` on the server `MAILSEAL_TEST_POSTGRES`
/// names, for the PostgreSQL spool's unit tests, or `None` (said why; a failure under
/// `MAILSEAL_REQUIRE_PEERS=1`).
#[cfg(test)]
pub(crate) fn test_database(prefix: &str) -> Option<String> {
    let Some(admin) = std::env::var("MAILSEAL_TEST_POSTGRES")
        .ok()
        .filter(|s| !s.is_empty())
    else {
        assert!(
            std::env::var("MAILSEAL_REQUIRE_PEERS").as_deref() != Ok("1"),
            "PostgreSQL is required (MAILSEAL_REQUIRE_PEERS=1): set MAILSEAL_TEST_POSTGRES"
        );
        eprintln!("skipping: MAILSEAL_TEST_POSTGRES is not set (.ci/postgres-up starts a server)");
        return None;
    };
    let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let mut c = ::postgres::Client::connect(&admin, ::postgres::NoTls).unwrap();
    c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let cut = admin.rfind('/').unwrap();
    Some(format!("{}/{name}", &admin[..cut]))
}
