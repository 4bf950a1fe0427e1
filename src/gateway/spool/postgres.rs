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
//!
//! Each statement is one round trip: its parameters' types are given
//! (`execute_typed`), so it is parsed, bound and run in one exchange rather than
//! prepared first and run after (two). The gateway's workers and its deliveries use
//! several connections (a pool): a worker's put does not wait behind a delivery's
//! claim or done on one connection, and commits made side by side share the server's
//! WAL flushes. Every put is still its own transaction, committed before it returns.

use postgres::types::{ToSql, Type};

use super::postgres_pool::Pool;
use super::{Entry, Put, Spool, SpoolError, DONE_RETENTION_SECS};

/// A PostgreSQL spool.
pub struct PostgresSpool {
    db: Pool,
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
    /// TLS) and brings the schema up to date. One connection: a spool for one caller
    /// at a time (a check, a tool); a gateway's is [`PostgresSpool::connect_as`]'s.
    pub fn connect(url: &str) -> Result<Self, SpoolError> {
        Self::open(url, "", 1)
    }

    /// [`PostgresSpool::connect`] for the gateway instance `instance` (see
    /// [`super::instance_id`]), named on the leases it takes, with eight connections
    /// for its workers and deliveries.
    pub fn connect_as(url: &str, instance: &str) -> Result<Self, SpoolError> {
        Self::open(url, instance, SPOOL_CONNECTIONS)
    }

    fn open(url: &str, instance: &str, connections: usize) -> Result<Self, SpoolError> {
        Ok(PostgresSpool {
            db: Pool::connect(url, connections, SPOOL_STATEMENT_TIMEOUT_MS).map_err(db)?,
            instance: instance.to_string(),
            dead_secs: 0,
        })
    }
}

/// A spool statement that takes longer than this (a locked table, a hung server) fails,
/// so a database that hangs is seen as down, as one that refuses is.
const SPOOL_STATEMENT_TIMEOUT_MS: u32 = 30_000;

/// Connections a gateway's spool holds, for the workers' puts (twice the cores by
/// default), the deliverer's claims and the deliveries' dones side by side. Each is a
/// server process. On two cores one gateway with eight accepted and delivered about
/// a quarter more than with four (BENCHMARKS.md, the gateway under load, "PostgreSQL
/// spool").
const SPOOL_CONNECTIONS: usize = 8;

/// A TEXT parameter.
fn text(s: &(impl ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (s, Type::TEXT)
}

/// A BIGINT parameter.
fn int8(n: &i64) -> (&(dyn ToSql + Sync), Type) {
    (n, Type::INT8)
}

fn recipients_text(r: &[String]) -> String {
    serde_json::to_string(r).unwrap_or_else(|_| "[]".into())
}

impl Spool for PostgresSpool {
    fn put(&self, entry: &Entry) -> Result<Put, SpoolError> {
        let n = self
            .db
            .with(|c| {
                c.execute_typed(
                    "INSERT INTO mailseal_spool
                   (id, route, mail_from, recipients, created, attempts, next_attempt,
                    last_error, data, created_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 ON CONFLICT (id) DO NOTHING",
                    &[
                        text(&entry.id),
                        text(&entry.route),
                        text(&entry.mail_from),
                        (&recipients_text(&entry.recipients), Type::TEXT),
                        int8(&entry.created),
                        (&(entry.attempts as i32), Type::INT4),
                        int8(&entry.next_attempt),
                        text(&entry.last_error),
                        (&entry.data, Type::BYTEA),
                        int8(&entry.created_ms),
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
                c.query_typed(
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
                        int8(&now),
                        int8(&(now + lease_secs)),
                        int8(&(max as i64)),
                        text(&self.instance),
                        int8(&self.dead_secs),
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
                c.execute_typed(
                    "UPDATE mailseal_spool SET done_at = $2, data = ''::bytea, leased_until = 0
                 WHERE id = $1",
                    &[text(&id), int8(&now)],
                )
            })
            .map(|_| ())
            .map_err(db)
    }

    fn retry(&self, entry: &Entry) -> Result<(), SpoolError> {
        self.db
            .with(|c| {
                c.execute_typed(
                    "UPDATE mailseal_spool
                 SET recipients = $2, attempts = $3, next_attempt = $4, last_error = $5,
                     leased_until = 0
                 WHERE id = $1 AND done_at IS NULL",
                    &[
                        text(&entry.id),
                        (&recipients_text(&entry.recipients), Type::TEXT),
                        (&(entry.attempts as i32), Type::INT4),
                        int8(&entry.next_attempt),
                        text(&entry.last_error),
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
                c.query_typed_one(
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
                c.execute_typed(
                    "DELETE FROM mailseal_spool WHERE done_at < $1",
                    &[int8(&(now - DONE_RETENTION_SECS))],
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
            c.execute_typed(
                "INSERT INTO mailseal_spool_instance (id, seen_at)
                 VALUES ($1, extract(epoch from now())::bigint)
                 ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at",
                &[text(&self.instance)],
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
            c.execute_typed(
                "UPDATE mailseal_spool SET leased_until = 0
                 WHERE leased_by = $1 AND done_at IS NULL AND leased_until > 0",
                &[text(&self.instance)],
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

#[cfg(test)]
mod tests {
    use super::super::{Entry, Put, Spool};
    use super::PostgresSpool;

    fn database() -> Option<String> {
        super::super::test_database("mailseal_spool")
    }

    fn entry(n: usize) -> Entry {
        Entry::new(
            "out",
            "a@x",
            &["b@y".to_string()],
            format!("Subject: {n}\r\n\r\nbody {n}\r\n").into_bytes(),
            100,
        )
    }

    /// Workers putting at once over the spool's connections: each message queued
    /// once (the same one put by all of them too), and deliveries claiming at once
    /// take each exactly once.
    #[test]
    fn puts_and_claims_side_by_side_take_each_message_once() {
        let Some(url) = database() else { return };
        let s = PostgresSpool::connect_as(&url, "side-by-side").unwrap();
        let queued: Vec<Vec<Put>> = std::thread::scope(|t| {
            let puts: Vec<_> = (0..12)
                .map(|w| {
                    let s = &s;
                    t.spawn(move || {
                        let mut got = vec![s.put(&entry(10_000)).unwrap()];
                        got.extend((0..20).map(|i| s.put(&entry(w * 100 + i)).unwrap()));
                        got
                    })
                })
                .collect();
            puts.into_iter().map(|p| p.join().unwrap()).collect()
        });
        let shared: Vec<Put> = queued.iter().map(|q| q[0]).collect();
        assert_eq!(
            shared.iter().filter(|p| **p == Put::Queued).count(),
            1,
            "{shared:?}"
        );
        assert!(queued
            .iter()
            .all(|q| q[1..].iter().all(|p| *p == Put::Queued)));
        assert_eq!(s.depth().unwrap(), 12 * 20 + 1);

        let claimed: Vec<String> = std::thread::scope(|t| {
            let claims: Vec<_> = (0..6)
                .map(|_| {
                    let s = &s;
                    t.spawn(move || {
                        let mut ids = Vec::new();
                        loop {
                            let got = s.claim(200, 7, 60).unwrap();
                            if got.is_empty() {
                                return ids;
                            }
                            for e in got {
                                s.done(&e.id, 200).unwrap();
                                ids.push(e.id);
                            }
                        }
                    })
                })
                .collect();
            claims.into_iter().flat_map(|c| c.join().unwrap()).collect()
        });
        let mut unique = claimed.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(claimed.len(), 12 * 20 + 1, "each claimed once");
        assert_eq!(unique.len(), claimed.len());
        assert_eq!(s.depth().unwrap(), 0);
        assert_eq!(s.put(&entry(10_000)).unwrap(), Put::Known);
    }

    /// The server drops every connection (a restart, a fail-over): the statement that
    /// meets a dropped one fails and says the database is down; the next, whichever
    /// connection carries it, connects again and the spool is up.
    #[test]
    fn fail_dropped_connections_fail_one_statement_then_connect_again() {
        let Some(url) = database() else { return };
        let s = PostgresSpool::connect_as(&url, "dropped").unwrap();
        assert_eq!(s.put(&entry(1)).unwrap(), Put::Queued);
        assert_eq!(s.down_for(), None);
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let killed: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(killed, 8, "the spool's connections");
        assert!(s.put(&entry(2)).is_err());
        assert!(s.down_for().is_some());
        // Eight puts held at once behind a lock on the table, so that each has a
        // connection of its own: none fails on a connection the server dropped.
        let mut lock = admin.transaction().unwrap();
        lock.batch_execute("LOCK TABLE mailseal_spool IN EXCLUSIVE MODE")
            .unwrap();
        let puts: Vec<Put> = std::thread::scope(|t| {
            let puts: Vec<_> = (2..10)
                .map(|n| {
                    let s = &s;
                    t.spawn(move || s.put(&entry(n)))
                })
                .collect();
            let mut watch = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let mut waiting = || -> i64 {
                watch
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity
                         WHERE datname = current_database() AND wait_event_type = 'Lock'",
                        &[],
                    )
                    .unwrap()
                    .get(0)
            };
            // Until all eight wait, or one has returned (failed: it met a dropped
            // connection), or a minute has gone.
            let mut n = waiting();
            for _ in 0..1200 {
                if n == 8 || puts.iter().any(|p| p.is_finished()) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
                n = waiting();
            }
            assert_eq!(
                n, 8,
                "every put waits on the lock with a connection of its own"
            );
            lock.commit().unwrap();
            puts.into_iter()
                .map(|p| p.join().unwrap().unwrap())
                .collect()
        });
        assert!(puts.iter().all(|p| *p == Put::Queued), "{puts:?}");
        assert_eq!(s.down_for(), None);
        assert_eq!(s.depth().unwrap(), 9);
    }
}
