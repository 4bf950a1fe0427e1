//! The spool in PostgreSQL, shared by several gateways (the same database as the
//! replay state and, if wanted, the key directory: `crate::postgres_db` migration 5).
//!
//! A claim takes due rows `FOR UPDATE SKIP LOCKED` and leases them (`leased_until`) in
//! one statement: two instances never take the same row, and a row whose instance
//! died is due again once its lease runs out. A delivered row stays, its message
//! dropped and `done_at` set, until it expires: a put of the same id is then a
//! conflict on the key, decided by the database alone (a check before the insert
//! could race with the delivery that marks it done).
//!
//! A row the queue tools hold (`held`, [`super::PostgresQueue`]) is never claimed.

use crate::postgres_db::Reconnecting;

use super::{Entry, Put, Spool, SpoolError, DONE_RETENTION_SECS};

/// A PostgreSQL spool.
pub struct PostgresSpool {
    db: Reconnecting,
    /// This gateway instance, named on the leases it takes.
    instance: String,
    /// Seconds of silence after which another instance is dead and its leases are
    /// claimed (0: never; leases then run out as they are).
    dead_secs: i64,
}

fn db(e: impl std::fmt::Display) -> SpoolError {
    SpoolError::Database(e.to_string())
}

impl PostgresSpool {
    /// Connects (see [`crate::replay::PostgresReplayStore::connect`] for the URL and its
    /// TLS) and brings the schema up to date.
    pub fn connect(url: &str) -> Result<Self, SpoolError> {
        Self::connect_as(url, "")
    }

    /// [`PostgresSpool::connect`] for the gateway instance `instance` (see
    /// [`super::instance_id`]), named on the leases it takes.
    pub fn connect_as(url: &str, instance: &str) -> Result<Self, SpoolError> {
        Ok(PostgresSpool {
            db: Reconnecting::connect_with(url, SPOOL_STATEMENT_TIMEOUT_MS).map_err(db)?,
            instance: instance.to_string(),
            dead_secs: 0,
        })
    }
}

/// A spool statement that takes longer than this (a locked table, a hung server) fails,
/// so a database that hangs is seen as down, as one that refuses is.
const SPOOL_STATEMENT_TIMEOUT_MS: u32 = 30_000;

fn recipients_text(r: &[String]) -> String {
    serde_json::to_string(r).unwrap_or_else(|_| "[]".into())
}

impl Spool for PostgresSpool {
    fn put(&self, entry: &Entry) -> Result<Put, SpoolError> {
        let n = self
            .db
            .with(|c| {
                c.execute(
                    "INSERT INTO mailseal_spool
                   (id, route, mail_from, recipients, created, attempts, next_attempt,
                    last_error, data, created_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 ON CONFLICT (id) DO NOTHING",
                    &[
                        &entry.id,
                        &entry.route,
                        &entry.mail_from,
                        &recipients_text(&entry.recipients),
                        &entry.created,
                        &(entry.attempts as i32),
                        &entry.next_attempt,
                        &entry.last_error,
                        &entry.data,
                        &entry.created_ms,
                    ],
                )
            })
            .map_err(db)?;
        Ok(if n == 1 { Put::Queued } else { Put::Known })
    }

    fn claim(&self, now: i64, max: usize, lease_secs: i64) -> Result<Vec<Entry>, SpoolError> {
        let rows = self
            .db
            .with(|c| {
                c.query(
                    // A lease runs out, or its instance stopped beating: silent for
                    // `dead_secs` by the database's own clock (the instances' clocks
                    // may differ), and never this instance.
                    "UPDATE mailseal_spool SET leased_until = $2, leased_by = $4
                 WHERE id IN (
                   SELECT id FROM mailseal_spool
                   WHERE done_at IS NULL AND next_attempt <= $1 AND NOT held
                     AND (leased_until <= $1
                          OR ($5::BIGINT > 0 AND leased_by <> $4 AND leased_by IN (
                                SELECT id FROM mailseal_spool_instance
                                WHERE seen_at < extract(epoch from now())::bigint - $5::BIGINT)))
                   ORDER BY next_attempt
                   LIMIT $3
                   FOR UPDATE SKIP LOCKED)
                 RETURNING id, route, mail_from, recipients, created, attempts,
                           next_attempt, last_error, data, created_ms",
                    &[
                        &now,
                        &(now + lease_secs),
                        &(max as i64),
                        &self.instance,
                        &self.dead_secs,
                    ],
                )
            })
            .map_err(db)?;
        rows.into_iter()
            .map(|r| {
                let recipients: String = r.get(3);
                Ok(Entry {
                    id: r.get(0),
                    route: r.get(1),
                    mail_from: r.get(2),
                    recipients: serde_json::from_str(&recipients)
                        .map_err(|_| SpoolError::Damaged(r.get(0)))?,
                    created: r.get(4),
                    created_ms: r.get(9),
                    attempts: r.get::<_, i32>(5).max(0) as u32,
                    next_attempt: r.get(6),
                    last_error: r.get(7),
                    data: r.get(8),
                })
            })
            .collect()
    }

    fn done(&self, id: &str, now: i64) -> Result<(), SpoolError> {
        self.db
            .with(|c| {
                c.execute(
                    "UPDATE mailseal_spool SET done_at = $2, data = ''::bytea, leased_until = 0
                 WHERE id = $1",
                    &[&id, &now],
                )
            })
            .map(|_| ())
            .map_err(db)
    }

    fn retry(&self, entry: &Entry) -> Result<(), SpoolError> {
        self.db
            .with(|c| {
                c.execute(
                    "UPDATE mailseal_spool
                 SET recipients = $2, attempts = $3, next_attempt = $4, last_error = $5,
                     leased_until = 0
                 WHERE id = $1 AND done_at IS NULL",
                    &[
                        &entry.id,
                        &recipients_text(&entry.recipients),
                        &(entry.attempts as i32),
                        &entry.next_attempt,
                        &entry.last_error,
                    ],
                )
            })
            .map(|_| ())
            .map_err(db)
    }

    fn depth(&self) -> Result<u64, SpoolError> {
        let row = self
            .db
            .with(|c| {
                c.query_one(
                    "SELECT count(*) FROM mailseal_spool WHERE done_at IS NULL",
                    &[],
                )
            })
            .map_err(db)?;
        Ok(row.get::<_, i64>(0).max(0) as u64)
    }

    fn oldest(&self) -> Result<Option<i64>, SpoolError> {
        let row = self
            .db
            .with(|c| {
                c.query_one(
                    "SELECT min(created) FROM mailseal_spool WHERE done_at IS NULL",
                    &[],
                )
            })
            .map_err(db)?;
        Ok(row.get::<_, Option<i64>>(0))
    }

    fn expire(&self, now: i64) -> Result<(), SpoolError> {
        self.db
            .with(|c| {
                c.execute(
                    "DELETE FROM mailseal_spool WHERE done_at < $1",
                    &[&(now - DONE_RETENTION_SECS)],
                )
            })
            .map(|_| ())
            .map_err(db)
    }

    fn down_for(&self) -> Option<std::time::Duration> {
        self.db.down_for()
    }

    /// The leases of this instance's last run (it was killed) are taken back at once,
    /// rather than when they run out (`lease_secs`, ten minutes by default, during
    /// which that mail waited).
    fn heartbeat(&self) {
        if self.instance.is_empty() {
            return;
        }
        if let Err(e) = self.db.with(|c| {
            c.execute(
                "INSERT INTO mailseal_spool_instance (id, seen_at)
                 VALUES ($1, extract(epoch from now())::bigint)
                 ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at",
                &[&self.instance],
            )
        }) {
            tracing::debug!(error = %e, "spool: heartbeat not recorded");
        }
    }

    fn claim_from_dead(&mut self, dead_secs: i64) {
        self.dead_secs = dead_secs.max(0);
    }

    fn reclaim_own(&self) {
        if self.instance.is_empty() {
            return;
        }
        match self.db.with(|c| {
            c.execute(
                "UPDATE mailseal_spool SET leased_until = 0
                 WHERE leased_by = $1 AND done_at IS NULL AND leased_until > 0",
                &[&self.instance],
            )
        }) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                entries = n,
                "spool: the leases of this instance's last run are taken back"
            ),
            Err(e) => tracing::warn!(error = %e, "spool: cannot take back this instance's leases"),
        }
    }
}
