//! Connections to the spool's database shared by a gateway's workers and deliveries:
//! each carries one statement at a time, and each reconnects on its own when the
//! server went away ([`Reconnecting`]).

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::postgres_db::{PgDbError, Reconnecting};

/// Connections that each carry one statement at a time, handed out to whoever comes;
/// each reconnects on its own when the server went away ([`Reconnecting`]).
pub(super) struct Pool {
    idle: Mutex<Vec<Reconnecting>>,
    returned: Condvar,
    /// Since when the connections used have failed for want of the server, the first
    /// failure since the last success on any of them (an idle connection that failed
    /// once says nothing about the server now).
    down_since: Mutex<Option<Instant>>,
}

/// A connection taken from the pool, put back when dropped.
struct Taken<'p> {
    pool: &'p Pool,
    conn: Option<Reconnecting>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            lock(&self.pool.idle).push(conn);
            self.pool.returned.notify_one();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// `size` connections, all made now (a server that refuses one is an error at
    /// startup, not a surprise under load), each statement limited to
    /// `statement_timeout_ms`.
    pub(super) fn connect(
        url: &str,
        size: usize,
        statement_timeout_ms: u32,
    ) -> Result<Pool, PgDbError> {
        let idle = (0..size.max(1))
            .map(|_| Reconnecting::connect_with(url, statement_timeout_ms))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pool {
            idle: Mutex::new(idle),
            returned: Condvar::new(),
            down_since: Mutex::new(None),
        })
    }

    /// Runs `f` on the first connection free.
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error>,
    ) -> Result<T, PgDbError> {
        let conn = {
            let mut idle = lock(&self.idle);
            loop {
                if let Some(c) = idle.pop() {
                    break c;
                }
                idle = self.returned.wait(idle).unwrap_or_else(|p| p.into_inner());
            }
        };
        let taken = Taken {
            pool: self,
            conn: Some(conn),
        };
        let Some(conn) = taken.conn.as_ref() else {
            return Err(PgDbError::Down);
        };
        let r = conn.with(f);
        match conn.down_for() {
            None => *lock(&self.down_since) = None,
            Some(d) => {
                let now = Instant::now();
                let first = {
                    let mut since = lock(&self.down_since);
                    let first = since.is_none();
                    since.get_or_insert(now.checked_sub(d).unwrap_or(now));
                    first
                };
                // The server went away (a restart): the idle connections are to it
                // too. Dropped now, each connects again on its next use instead of
                // failing that statement first (a done that failed would deliver its
                // message twice).
                if r.is_err() && first {
                    self.forget_idle();
                }
            }
        }
        r
    }

    fn forget_idle(&self) {
        let idle = std::mem::take(&mut *lock(&self.idle));
        for conn in &idle {
            conn.forget();
        }
        lock(&self.idle).extend(idle);
        self.returned.notify_all();
    }

    /// How long the database has been unreachable, if it is: since the first
    /// failure for want of the server after the last success.
    pub(super) fn down_for(&self) -> Option<Duration> {
        lock(&self.down_since).map(|t| t.elapsed())
    }
}
