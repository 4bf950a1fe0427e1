//! The queue tools on a PostgreSQL spool ([`super::PostgresSpool`]'s table), beside
//! the gateways that share it.
//!
//! Each change is one transaction that first locks the entry's row (`SELECT ... FOR
//! UPDATE`): a gateway's claim (`FOR UPDATE SKIP LOCKED`) passes over a row a tool is
//! changing, and a tool waits for a claim that is taking the row, then sees its lease.
//! A held row (`held`, migration 11) is never claimed. A deleted row is marked done
//! (its message dropped), as a delivered one is: a gateway's retry of it (`WHERE
//! done_at IS NULL`) changes nothing, and a put of the same message conflicts with it
//! until it expires.

use std::sync::Mutex;

use super::admin::{Applied, QueueAdmin, Queued};
use super::{Entry, SpoolError};

/// The queue tools on a PostgreSQL spool.
pub struct PostgresQueue {
    client: Mutex<postgres::Client>,
}

fn db(e: impl std::fmt::Display) -> SpoolError {
    SpoolError::Database(e.to_string())
}

/// The columns [`queued`] reads, in its order.
const COLUMNS: &str = "id, route, mail_from, recipients, created, attempts, next_attempt,
     last_error, leased_until, held, octet_length(data)::BIGINT, created_ms";

fn queued(r: &postgres::Row, now: i64) -> Result<Queued, SpoolError> {
    let id: String = r.get(0);
    let recipients: String = r.get(3);
    let leased: i64 = r.get(8);
    let held: bool = r.get(9);
    let leased_until = (leased > now).then_some(leased);
    Ok(Queued {
        entry: Entry {
            route: r.get(1),
            mail_from: r.get(2),
            recipients: serde_json::from_str(&recipients)
                .map_err(|_| SpoolError::Damaged(id.clone()))?,
            created: r.get(4),
            attempts: r.get::<_, i32>(5).max(0) as u32,
            next_attempt: r.get(6),
            last_error: r.get(7),
            data: Vec::new(),
            created_ms: r.get(11),
            id,
        },
        state: Queued::state_of(held, leased_until, now),
        held,
        leased_until,
        size: r.get::<_, Option<i64>>(10).unwrap_or(0).max(0) as u64,
    })
}

impl PostgresQueue {
    /// Connects to a database that holds a gateway's spool (see
    /// [`super::PostgresSpool::connect`] for the URL): one without mailseal's spool
    /// table gets nothing created ([`SpoolError::NotASpool`]; its URL, which may hold
    /// a password, is not repeated).
    pub fn connect(url: &str) -> Result<Self, SpoolError> {
        // Migration 5 made the spool's table.
        let mut client = crate::postgres_db::connect_existing(url, 5).map_err(|e| match e {
            crate::postgres_db::PgDbError::NoSchema(_) => SpoolError::NotASpool {
                location: "the database".into(),
                why: "it holds no mailseal spool (a gateway makes its table when it first runs on it)"
                    .into(),
            },
            e => db(e),
        })?;
        // A row a gateway keeps locked longer than this is reported, not waited on.
        client
            .batch_execute("SET statement_timeout = 30000; SET lock_timeout = 10000")
            .map_err(db)?;
        Ok(PostgresQueue {
            client: Mutex::new(client),
        })
    }

    fn client(&self) -> std::sync::MutexGuard<'_, postgres::Client> {
        self.client.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks entry `id`'s row, asks `decide` what to do with the entry as it is then
    /// (what was done, and the statement that does it: `$1` the id, `$2` now if it uses
    /// it), and
    /// commits.
    fn change(
        &self,
        id: &str,
        now: i64,
        decide: impl FnOnce(&Queued) -> (Applied, Option<&'static str>),
    ) -> Result<Applied, SpoolError> {
        let mut client = self.client();
        let mut tx = client.transaction().map_err(db)?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM mailseal_spool
                     WHERE id = $1 AND done_at IS NULL FOR UPDATE"
                ),
                &[&id],
            )
            .map_err(db)?;
        let Some(row) = row else {
            return Ok(Applied::Gone);
        };
        let (applied, statement) = decide(&queued(&row, now)?);
        if let Some(sql) = statement {
            if sql.contains("$2") {
                tx.execute(sql, &[&id, &now]).map_err(db)?;
            } else {
                tx.execute(sql, &[&id]).map_err(db)?;
            }
        }
        tx.commit().map_err(db)?;
        Ok(applied)
    }
}

/// Made due (`flush`, `requeue`): not while a delivery holds it.
fn due(q: &Queued, sql: &'static str) -> (Applied, Option<&'static str>) {
    if q.leased_until.is_some() {
        (Applied::Busy, None)
    } else if q.held {
        (Applied::ChangedButHeld, Some(sql))
    } else {
        (Applied::Changed, Some(sql))
    }
}

impl QueueAdmin for PostgresQueue {
    fn list(&self, now: i64) -> Result<Vec<Queued>, SpoolError> {
        let rows = self
            .client()
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM mailseal_spool WHERE done_at IS NULL
                     ORDER BY created, id"
                ),
                &[],
            )
            .map_err(db)?;
        rows.iter().map(|r| queued(r, now)).collect()
    }

    fn show(&self, id: &str, now: i64) -> Result<(Queued, Vec<u8>), SpoolError> {
        let row = self
            .client()
            .query_opt(
                &format!(
                    "SELECT {COLUMNS}, data FROM mailseal_spool WHERE id = $1 AND done_at IS NULL"
                ),
                &[&id],
            )
            .map_err(db)?
            .ok_or_else(|| SpoolError::UnknownId(id.to_string()))?;
        Ok((queued(&row, now)?, row.get(12)))
    }

    fn flush(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            if q.entry.next_attempt <= now && q.leased_until.is_none() {
                return (Applied::Already, None);
            }
            due(
                q,
                "UPDATE mailseal_spool SET next_attempt = $2 WHERE id = $1",
            )
        })
    }

    fn hold(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            if q.held {
                return (Applied::Already, None);
            }
            let applied = if q.leased_until.is_some() {
                Applied::ChangedWhileDelivering
            } else {
                Applied::Changed
            };
            (
                applied,
                Some("UPDATE mailseal_spool SET held = TRUE WHERE id = $1"),
            )
        })
    }

    fn release(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            if !q.held {
                return (Applied::Already, None);
            }
            (
                Applied::Changed,
                Some("UPDATE mailseal_spool SET held = FALSE WHERE id = $1"),
            )
        })
    }

    fn delete(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            let applied = if q.leased_until.is_some() {
                Applied::ChangedWhileDelivering
            } else {
                Applied::Changed
            };
            (
                applied,
                Some(
                    "UPDATE mailseal_spool
                     SET done_at = $2, data = ''::bytea, held = FALSE,
                         last_error = 'deleted with the queue tool'
                     WHERE id = $1",
                ),
            )
        })
    }

    fn requeue(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            due(
                q,
                "UPDATE mailseal_spool
                 SET attempts = 0, last_error = '', next_attempt = $2, created = $2,
                     created_ms = $2::BIGINT * 1000
                 WHERE id = $1",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{EntryState, PostgresSpool, Put, Spool};
    use super::*;

    fn database() -> Option<String> {
        super::super::test_database("mailseal_queue")
    }

    fn entry(n: u8) -> Entry {
        Entry::new(
            "out",
            "a@x",
            &["b@y".to_string()],
            format!("Subject: {n}\r\n\r\nbody {n}\r\n").into_bytes(),
            100,
        )
    }

    #[test]
    fn fail_a_database_without_a_spool_is_refused_and_left_empty() {
        let Some(url) = database() else { return };
        let e = PostgresQueue::connect(&url).err().unwrap();
        assert!(matches!(e, SpoolError::NotASpool { .. }), "{e}");
        assert!(
            !e.to_string().contains(&url),
            "the URL is not repeated: {e}"
        );
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let tables: i64 = c
            .query_one(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(tables, 0, "nothing created");
    }

    #[test]
    fn tools_change_what_gateways_claim() {
        let Some(url) = database() else { return };
        let s = PostgresSpool::connect(&url).unwrap();
        let tools = PostgresQueue::connect(&url).unwrap();
        let (a, b) = (entry(1), entry(2));
        s.put(&a).unwrap();
        s.put(&b).unwrap();
        assert_eq!(tools.list(100).unwrap().len(), 2);

        assert_eq!(tools.hold(&a.id, 100).unwrap(), Applied::Changed);
        assert_eq!(tools.hold(&a.id, 100).unwrap(), Applied::Already);
        let got = s.claim(100, 10, 60).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id, b.id);
        let (q, data) = tools.show(&b.id, 100).unwrap();
        assert_eq!(q.state, EntryState::Delivering);
        assert_eq!(data, b.data);
        assert_eq!(tools.show(&a.id, 100).unwrap().0.state, EntryState::Held);
        // Deleted while delivering: the delivery's retry does not bring it back.
        assert_eq!(
            tools.delete(&b.id, 100).unwrap(),
            Applied::ChangedWhileDelivering
        );
        let mut deferred = got[0].clone();
        deferred.next_attempt = 100;
        s.retry(&deferred).unwrap();
        assert!(s.claim(100, 10, 60).unwrap().is_empty());
        assert_eq!(s.put(&b).unwrap(), Put::Known);
        assert_eq!(tools.delete(&b.id, 100).unwrap(), Applied::Gone);

        assert_eq!(tools.release(&a.id, 200).unwrap(), Applied::Changed);
        let got = s.claim(200, 10, 60).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(tools.flush(&a.id, 200).unwrap(), Applied::Busy);
        let mut later = got[0].clone();
        later.attempts = 3;
        later.next_attempt = 10_000;
        later.last_error = "451 later".into();
        s.retry(&later).unwrap();
        assert!(s.claim(300, 10, 60).unwrap().is_empty());
        assert_eq!(tools.flush(&a.id, 300).unwrap(), Applied::Changed);
        let got = s.claim(300, 10, 60).unwrap();
        assert_eq!(got[0].attempts, 3);
        s.retry(&later).unwrap();
        assert_eq!(tools.requeue(&a.id, 400).unwrap(), Applied::Changed);
        let q = tools.show(&a.id, 400).unwrap().0;
        assert_eq!((q.entry.attempts, q.entry.last_error.as_str()), (0, ""));
        assert_eq!((q.entry.created, q.entry.next_attempt), (400, 400));
        assert_eq!(tools.delete(&a.id, 400).unwrap(), Applied::Changed);
        assert!(tools.list(400).unwrap().is_empty());
        assert_eq!(s.depth().unwrap(), 0);
        assert_eq!(s.put(&a).unwrap(), Put::Known);
    }
}
