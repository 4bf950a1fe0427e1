//! The queue tools on a directory spool ([`super::DirSpool`]'s files), beside the
//! gateway that holds it.
//!
//! The tools never take the spool's lock (the running gateway holds it). Each change
//! is made under the entry's own lock (the one the gateway takes to lease, reschedule
//! and end an entry), then noted in `DIR/changed/ID` for the gateway, which keeps each
//! entry's schedule and hold in memory and reads a noted entry again before its next
//! claim. A hold is a file beside the entry (`ID.hold`) that claim checks under the
//! same lock, so a held entry is never taken once the hold returned; it survives
//! restarts. A deletion marks the id done first (`DIR/done/ID`, saying it was
//! deleted), then removes the entry's files: a retry of the gateway that was
//! delivering it finds it gone and does not write it back, and a put of the same
//! message finds it done.
//!
//! Files the tools write are given to the spool directory's owner, so the tools may
//! run as root beside a gateway that runs as its own user.

use std::fs;
use std::path::Path;

use super::admin::{Applied, QueueAdmin, Queued};
use super::dir::{
    envelope_if_any, give, io, lock_entry, mark, read_regular, remove, remove_entry, sync_dir,
    valid_id, write_envelope, EntryLock, Layout,
};
use super::{Entry, SpoolError};

/// The queue tools on a spool directory.
pub struct DirQueue {
    layout: Layout,
    /// The spool directory's owner (uid, gid), who gets what the tools write.
    owner: Option<(u32, u32)>,
}

impl DirQueue {
    /// The spool in `root`, which must be one a gateway made (`queue/` and `done/` in
    /// it): nothing is created elsewhere. The gateway that holds it may be running.
    pub fn open(root: &Path) -> Result<Self, SpoolError> {
        let not = |why: &str| SpoolError::NotASpool {
            location: crate::error::quoted(root.display().to_string()),
            why: why.to_string(),
        };
        let meta = match fs::metadata(root) {
            Ok(m) if m.is_dir() => m,
            Ok(_) => return Err(not("not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(not("no such directory"))
            }
            Err(e) => return Err(io(root)(e)),
        };
        let layout = Layout {
            root: root.to_path_buf(),
        };
        if !layout.queue().is_dir() || !layout.done().is_dir() {
            return Err(not(
                "it has no queue/ and done/ (a gateway makes them when it first runs on it)",
            ));
        }
        use std::os::unix::fs::MetadataExt;
        // Only the spool's owner works in it. Another user (root, say) would follow
        // links its owner planted there (a directory of the spool swapped for a link
        // makes root write elsewhere, a file it then gives the owner), open FIFOs and
        // the like; as the owner, the tools can do nothing the owner could not.
        // (/proc/self belongs to the process's effective user.)
        if let Ok(me) = fs::metadata("/proc/self").map(|m| m.uid()) {
            if me != meta.uid() {
                return Err(not(&format!(
                    "it belongs to user {} and this is user {me}: run the queue tools as the spool's owner (sudo -u mailseal mailseal queue ...)",
                    meta.uid()
                )));
            }
        }
        let owner = Some((meta.uid(), meta.gid()));
        // A spool a gateway of an earlier version made has no notes directory yet.
        let changed = layout.changed();
        if !changed.is_dir() {
            use std::os::unix::fs::DirBuilderExt;
            match fs::DirBuilder::new().mode(0o700).create(&changed) {
                Ok(()) => {
                    let dir = fs::File::open(&changed).map_err(io(&changed))?;
                    give(&dir, &changed, owner)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&changed)(e)),
            }
        }
        Ok(DirQueue { layout, owner })
    }

    /// The entry as listed, or `None` when it is gone.
    fn describe(&self, id: &str, now: i64) -> Result<Option<Queued>, SpoolError> {
        let Some(mut entry) = envelope_if_any(&self.layout, id)? else {
            return Ok(None);
        };
        // The entry is its file's name (hex), whatever id its envelope states: a
        // planted envelope cannot put its own text where the tools print the id.
        entry.id = id.to_string();
        let held = self.layout.file(id, "hold").exists();
        let leased_until = self.layout.lease(id, now);
        let size = fs::symlink_metadata(self.layout.file(id, "eml")).map_or(0, |m| m.len());
        Ok(Some(Queued {
            state: Queued::state_of(held, leased_until, now),
            entry,
            held,
            leased_until,
            size,
        }))
    }

    /// Tells the running gateway to read the entry again.
    fn note(&self, id: &str) -> Result<(), SpoolError> {
        mark(&self.layout.changed().join(id), b"", false, self.owner)
    }

    /// Runs `change` on entry `id` under its lock (the entry as it is then); notes the
    /// entry when it changed it.
    fn change(
        &self,
        id: &str,
        now: i64,
        change: impl FnOnce(&Queued) -> Result<Applied, SpoolError>,
    ) -> Result<Applied, SpoolError> {
        if !valid_id(id) {
            return Err(SpoolError::UnknownId(id.to_string()));
        }
        let lock = lock_entry(&self.layout, id, true)?;
        if matches!(lock, EntryLock::Gone) {
            return Ok(Applied::Gone);
        }
        let Some(q) = self.describe(id, now)? else {
            return Ok(Applied::Gone);
        };
        let applied = change(&q)?;
        drop(lock);
        if applied.changed() {
            self.note(id)?;
        }
        Ok(applied)
    }

    /// Writes `entry`'s new schedule unless a delivery holds it.
    fn reschedule(&self, q: &Queued, entry: Entry) -> Result<Applied, SpoolError> {
        if q.leased_until.is_some() {
            return Ok(Applied::Busy);
        }
        write_envelope(&self.layout, &entry, self.owner)?;
        Ok(if q.held {
            Applied::ChangedButHeld
        } else {
            Applied::Changed
        })
    }
}

impl QueueAdmin for DirQueue {
    fn list(&self, now: i64) -> Result<Vec<Queued>, SpoolError> {
        let queue = self.layout.queue();
        let mut out = Vec::new();
        for item in fs::read_dir(&queue).map_err(io(&queue))? {
            let name = item.map_err(io(&queue))?.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .filter(|id| valid_id(id))
            else {
                continue;
            };
            // Listed while a delivery or a tool ended it: not queued.
            if let Some(q) = self.describe(id, now)? {
                out.push(q);
            }
        }
        out.sort_by(|a, b| (a.entry.created, &a.entry.id).cmp(&(b.entry.created, &b.entry.id)));
        Ok(out)
    }

    fn show(&self, id: &str, now: i64) -> Result<(Queued, Vec<u8>), SpoolError> {
        let gone = || SpoolError::UnknownId(id.to_string());
        if !valid_id(id) {
            return Err(gone());
        }
        let q = self.describe(id, now)?.ok_or_else(gone)?;
        let eml = self.layout.file(id, "eml");
        let data = match read_regular(&eml) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(gone()),
            Err(e) => return Err(io(&eml)(e)),
        };
        Ok((q, data))
    }

    fn flush(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            if q.entry.next_attempt <= now && q.leased_until.is_none() {
                return Ok(Applied::Already);
            }
            let mut entry = q.entry.clone();
            entry.next_attempt = now;
            self.reschedule(q, entry)
        })
    }

    fn hold(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            if q.held {
                return Ok(Applied::Already);
            }
            mark(&self.layout.file(id, "hold"), b"", true, self.owner)?;
            sync_dir(&self.layout.queue())?;
            Ok(if q.leased_until.is_some() {
                Applied::ChangedWhileDelivering
            } else {
                Applied::Changed
            })
        })
    }

    fn release(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            if !q.held {
                return Ok(Applied::Already);
            }
            remove(&self.layout.file(id, "hold"))?;
            sync_dir(&self.layout.queue())?;
            Ok(Applied::Changed)
        })
    }

    fn delete(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            // Done first: from here a put of it is a no-op and a retry does not
            // write it back.
            let marker = self.layout.done_marker(id);
            mark(
                &marker,
                format!("deleted with the queue tool at {now}\n").as_bytes(),
                true,
                self.owner,
            )?;
            sync_dir(&self.layout.done())?;
            // A live delivery's lease is its to remove (at its retry or done).
            remove_entry(&self.layout, id, q.leased_until.is_none())?;
            Ok(if q.leased_until.is_some() {
                Applied::ChangedWhileDelivering
            } else {
                Applied::Changed
            })
        })
    }

    fn requeue(&self, id: &str, now: i64) -> Result<Applied, SpoolError> {
        self.change(id, now, |q| {
            let mut entry = q.entry.clone();
            entry.attempts = 0;
            entry.last_error.clear();
            entry.next_attempt = now;
            entry.created = now;
            entry.created_ms = now.saturating_mul(1000);
            self.reschedule(q, entry)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DirSpool, Entry, Put, Spool};
    use super::*;

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
    fn fail_a_directory_that_is_no_spool_is_refused_and_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope");
        let e = DirQueue::open(&missing).err().unwrap();
        assert!(matches!(e, SpoolError::NotASpool { .. }), "{e}");
        assert!(!missing.exists());
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let e = DirQueue::open(&empty).err().unwrap().to_string();
        assert!(e.contains("not a gateway spool"), "{e}");
        assert_eq!(fs::read_dir(&empty).unwrap().count(), 0, "nothing created");
    }

    /// The tools beside an open spool (a running gateway holds its lock): each change
    /// takes effect at the gateway's next claim.
    #[test]
    fn tools_change_what_a_running_spool_claims() {
        let tmp = tempfile::tempdir().unwrap();
        let s = DirSpool::open(tmp.path()).unwrap();
        let tools = DirQueue::open(tmp.path()).unwrap();
        let (a, b) = (entry(1), entry(2));
        s.put(&a).unwrap();
        s.put(&b).unwrap();
        let listed = tools.list(100).unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed
            .iter()
            .all(|q| q.state == super::super::EntryState::Queued && q.size > 0));

        // Held: never claimed, across a restart, until released.
        assert_eq!(tools.hold(&a.id, 100).unwrap(), Applied::Changed);
        assert_eq!(tools.hold(&a.id, 100).unwrap(), Applied::Already);
        let got = s.claim(100, 10, 60).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id, b.id);
        assert_eq!(
            tools.show(&b.id, 100).unwrap().0.state,
            super::super::EntryState::Delivering
        );
        drop(s);
        let s = DirSpool::open(tmp.path()).unwrap();
        let got = s.claim(200, 10, 60).unwrap();
        assert_eq!(
            got.len(),
            1,
            "b again (its lease died with the process), not a"
        );
        assert_eq!(got[0].id, b.id);
        s.done(&b.id, 200).unwrap();
        assert_eq!(tools.release(&a.id, 200).unwrap(), Applied::Changed);
        assert_eq!(tools.release(&a.id, 200).unwrap(), Applied::Already);
        let got = s.claim(200, 10, 60).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id, a.id);

        // Deferred far ahead, then flushed: due at once. Requeued: attempts gone.
        let mut later = got[0].clone();
        later.attempts = 4;
        later.next_attempt = 10_000;
        later.last_error = "451 later".into();
        assert_eq!(
            tools.flush(&a.id, 200).unwrap(),
            Applied::Busy,
            "being delivered"
        );
        s.retry(&later).unwrap();
        assert!(s.claim(300, 10, 60).unwrap().is_empty());
        assert_eq!(tools.flush(&a.id, 300).unwrap(), Applied::Changed);
        let got = s.claim(300, 10, 60).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].attempts, 4);
        s.retry(&later).unwrap();
        assert_eq!(tools.requeue(&a.id, 400).unwrap(), Applied::Changed);
        let q = tools.show(&a.id, 400).unwrap().0;
        assert_eq!((q.entry.attempts, q.entry.last_error.as_str()), (0, ""));
        assert_eq!((q.entry.created, q.entry.next_attempt), (400, 400));
        let got = s.claim(400, 10, 60).unwrap();
        assert_eq!(got[0].attempts, 0);
        s.retry(&later).unwrap();

        // Deleted: gone, and the same message put again is not queued.
        assert_eq!(tools.delete(&a.id, 500).unwrap(), Applied::Changed);
        assert_eq!(tools.delete(&a.id, 500).unwrap(), Applied::Gone);
        assert!(s
            .claim(20_000, 10, 60)
            .unwrap()
            .iter()
            .all(|e| e.id != a.id));
        assert_eq!(s.put(&a).unwrap(), Put::Known);
        assert!(tools.list(500).unwrap().iter().all(|q| q.entry.id != a.id));
        let mark = fs::read_to_string(tmp.path().join("done").join(&a.id)).unwrap();
        assert!(mark.contains("deleted"), "{mark}");
    }

    /// Deleting an entry a delivery holds: the delivery's retry does not bring it
    /// back, and its done is harmless.
    #[test]
    fn deleted_while_delivering_is_not_queued_again() {
        let tmp = tempfile::tempdir().unwrap();
        let s = DirSpool::open(tmp.path()).unwrap();
        let tools = DirQueue::open(tmp.path()).unwrap();
        let (a, b) = (entry(1), entry(2));
        s.put(&a).unwrap();
        s.put(&b).unwrap();
        let got = s.claim(100, 10, 60).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            tools.delete(&a.id, 100).unwrap(),
            Applied::ChangedWhileDelivering
        );
        assert_eq!(
            tools.hold(&b.id, 100).unwrap(),
            Applied::ChangedWhileDelivering
        );
        let mut deferred = got.iter().find(|e| e.id == a.id).unwrap().clone();
        deferred.next_attempt = 100;
        s.retry(&deferred).unwrap();
        assert!(!tmp
            .path()
            .join("queue")
            .join(format!("{}.json", a.id))
            .exists());
        assert!(!tmp
            .path()
            .join("queue")
            .join(format!("{}.lease", a.id))
            .exists());
        // b's attempt deferred too: it now waits held.
        let mut b_deferred = got.iter().find(|e| e.id == b.id).unwrap().clone();
        b_deferred.next_attempt = 100;
        s.retry(&b_deferred).unwrap();
        assert!(s.claim(1_000, 10, 60).unwrap().is_empty());
        assert_eq!(s.depth().unwrap(), 1);
        assert_eq!(s.put(&a).unwrap(), Put::Known);
        s.done(&a.id, 100).unwrap();
        let listed = tools.list(1_000).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].state, super::super::EntryState::Held);
    }

    /// The tools may run as root in a directory the gateway's user owns: a link planted
    /// there is neither written through nor read.
    #[test]
    fn fail_links_planted_in_the_spool_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let s = DirSpool::open(tmp.path()).unwrap();
        let tools = DirQueue::open(tmp.path()).unwrap();
        let a = entry(1);
        s.put(&a).unwrap();
        let secret = tmp.path().join("secret");
        fs::write(&secret, "secret\n").unwrap();
        let queue = tmp.path().join("queue");
        let note = tmp.path().join("changed").join(&a.id);
        std::os::unix::fs::symlink(&secret, &note).unwrap();
        assert!(tools.hold(&a.id, 100).is_err());
        assert_eq!(fs::read_to_string(&secret).unwrap(), "secret\n");
        fs::remove_file(&note).unwrap();
        let eml = queue.join(format!("{}.eml", a.id));
        fs::remove_file(&eml).unwrap();
        std::os::unix::fs::symlink(&secret, &eml).unwrap();
        let e = tools.show(&a.id, 100).err().unwrap();
        assert!(!e.to_string().contains("secret\n"), "{e}");
    }

    #[test]
    fn a_lease_left_by_a_dead_process_is_not_a_delivery() {
        let tmp = tempfile::tempdir().unwrap();
        let s = DirSpool::open(tmp.path()).unwrap();
        let tools = DirQueue::open(tmp.path()).unwrap();
        let a = entry(1);
        s.put(&a).unwrap();
        let lease = tmp.path().join("queue").join(format!("{}.lease", a.id));
        // No process has this id (above the kernel's pid_max).
        fs::write(&lease, "4194305 999999\n").unwrap();
        assert_eq!(tools.show(&a.id, 100).unwrap().0.leased_until, None);
        fs::write(&lease, format!("{} 999999\n", std::process::id())).unwrap();
        assert_eq!(
            tools.show(&a.id, 100).unwrap().0.leased_until,
            Some(999_999)
        );
        assert_eq!(tools.show(&a.id, 1_000_000).unwrap().0.leased_until, None);
    }
}
