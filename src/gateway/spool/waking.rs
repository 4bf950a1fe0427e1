//! A spool that wakes this process's deliverer whenever it queues an entry, so that
//! what a listener accepts, a bounce, or what the A2A bridge queues goes out at once
//! rather than at the deliverer's next poll (`delivery.poll_ms`, 500 ms by default).
//!
//! The poll stays: it takes the entries due later (retries) and those another
//! instance sharing a database spool queued. A bridged call passes through the spool
//! four times (call out, call in, answer out, answer in), so without the wake-up each
//! bridged call waited on about three polls.

use std::sync::Arc;

use super::{Entry, Put, Spool, SpoolError};

/// `inner`, waking [`Waking::wake`]'s waiters on every new entry.
pub struct Waking {
    inner: Box<dyn Spool>,
    wake: Arc<tokio::sync::Notify>,
}

impl Waking {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Spool>) -> Waking {
        Waking {
            inner,
            wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// Notified once at least one entry was queued since the last notification (a
    /// permit is kept when nobody waits, so a put during a claim is not missed).
    pub fn wake(&self) -> Arc<tokio::sync::Notify> {
        self.wake.clone()
    }
}

impl Spool for Waking {
    fn put(&self, entry: &Entry) -> Result<Put, SpoolError> {
        let put = self.inner.put(entry)?;
        if put == Put::Queued {
            self.wake.notify_one();
        }
        Ok(put)
    }
    fn claim(&self, now: i64, max: usize, lease_secs: i64) -> Result<Vec<Entry>, SpoolError> {
        self.inner.claim(now, max, lease_secs)
    }
    fn done(&self, id: &str, now: i64) -> Result<(), SpoolError> {
        self.inner.done(id, now)
    }
    fn retry(&self, entry: &Entry) -> Result<(), SpoolError> {
        // Put back for a later attempt: nothing is due now.
        self.inner.retry(entry)
    }
    fn depth(&self) -> Result<u64, SpoolError> {
        self.inner.depth()
    }
    fn oldest(&self) -> Result<Option<i64>, SpoolError> {
        self.inner.oldest()
    }
    fn expire(&self, now: i64) -> Result<(), SpoolError> {
        self.inner.expire(now)
    }
    fn down_for(&self) -> Option<std::time::Duration> {
        self.inner.down_for()
    }
    fn reclaim_own(&self) {
        self.inner.reclaim_own()
    }
    fn heartbeat(&self) {
        self.inner.heartbeat()
    }
    fn claim_from_dead(&mut self, dead_secs: i64) {
        self.inner.claim_from_dead(dead_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        let rcpts = vec!["b@y.example".to_string()];
        Entry::new(
            "out",
            "a@x.example",
            &rcpts,
            b"Subject: x\r\n\r\nx\r\n".to_vec(),
            100,
        )
    }

    #[tokio::test]
    async fn a_new_entry_wakes_the_deliverer_and_one_it_knows_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Waking::new(Box::new(super::super::DirSpool::open(dir.path()).unwrap()));
        let wake = spool.wake();
        // A permit waiting is taken at once; none, and the wait times out.
        async fn woken(wake: &tokio::sync::Notify) -> bool {
            tokio::time::timeout(std::time::Duration::from_millis(20), wake.notified())
                .await
                .is_ok()
        }
        assert!(!woken(&wake).await, "nothing queued yet");
        assert_eq!(spool.put(&entry()).unwrap(), Put::Queued);
        // Queued while nobody waited: the permit is kept for the next wait.
        assert!(woken(&wake).await);
        assert!(!woken(&wake).await, "one permit, taken");
        assert_eq!(spool.put(&entry()).unwrap(), Put::Known);
        assert!(
            !woken(&wake).await,
            "an entry it already holds wakes nobody"
        );
        let claimed = spool.claim(200, 10, 60).unwrap();
        assert_eq!(claimed.len(), 1);
        spool.retry(&claimed[0]).unwrap();
        assert!(!woken(&wake).await, "a retry is due later");
    }
}
