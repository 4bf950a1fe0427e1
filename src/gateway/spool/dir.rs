//! The spool in a local directory: no setup, one gateway process per directory (held
//! by a lock on `DIR/lock`).
//!
//! Each entry is two files in `DIR/queue`: `ID.eml` (the message, written once) and
//! `ID.json` (its envelope and schedule, replaced atomically on each retry). The
//! message is written and synced first, then the envelope by rename, then the
//! directory is synced: an entry exists once its `.json` does, and a `.eml` without
//! one is the debris of a crash before the put returned (removed on open). Delivered
//! ids are empty files in `DIR/done`, kept for [`super::DONE_RETENTION_SECS`].

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Entry, Put, Spool, SpoolError, DONE_RETENTION_SECS};

/// A directory spool.
pub struct DirSpool {
    root: PathBuf,
    /// Held for the spool's life: one process per directory.
    _lock: File,
    /// Entries known to be queued, and the lease of those claimed (until, Unix s).
    index: Mutex<Index>,
    /// Signalled when a put ends.
    put_ended: std::sync::Condvar,
}

#[derive(Default)]
struct Index {
    /// id -> (next attempt, leased until, accepted): the last for
    /// [`Spool::oldest`], which reads no file.
    queued: HashMap<String, (i64, i64, i64)>,
    done: HashSet<String>,
    /// Ids being put now: a second put of one waits for the first, then finds it
    /// queued (or done). Without this, a put that started before the first one's
    /// entry was delivered and marked done would queue it again (the crash test
    /// found it: two workers given the same redelivered message).
    putting: HashSet<String>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn sync_dir(dir: &Path) -> Result<(), SpoolError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// Ids are hex; anything else in the directory is not ours.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl DirSpool {
    /// Opens (creating, owner-only) the spool in `root`, takes its lock, and reads what
    /// is queued.
    pub fn open(root: &Path) -> Result<Self, SpoolError> {
        for sub in ["", "queue", "done"] {
            let d = root.join(sub);
            fs::create_dir_all(&d).map_err(io(&d))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).map_err(io(&d))?;
            }
        }
        let lock_path = root.join("lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(SpoolError::Locked(root.display().to_string()))
            }
            Err(fs::TryLockError::Error(e)) => return Err(io(&lock_path)(e)),
        }
        let spool = DirSpool {
            root: root.to_path_buf(),
            _lock: lock,
            index: Mutex::new(Index::default()),
            put_ended: std::sync::Condvar::new(),
        };
        spool.load()?;
        Ok(spool)
    }

    fn queue(&self) -> PathBuf {
        self.root.join("queue")
    }

    fn load(&self) -> Result<(), SpoolError> {
        let queue = self.queue();
        let mut index = self.lock();
        let mut envelopes = HashSet::new();
        let mut messages = Vec::new();
        for item in fs::read_dir(&queue).map_err(io(&queue))? {
            let path = item.map_err(io(&queue))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            match name.rsplit_once('.') {
                Some((id, "json")) if valid_id(id) => {
                    let entry = read_envelope(&path)?;
                    index
                        .queued
                        .insert(id.to_string(), (entry.next_attempt, 0, entry.created));
                    envelopes.insert(id.to_string());
                }
                Some((id, "eml")) if valid_id(id) => messages.push(id.to_string()),
                // A put interrupted before its rename.
                _ if name.ends_with(".tmp") => {
                    let _ = fs::remove_file(&path);
                }
                _ => {}
            }
        }
        for id in messages {
            if !envelopes.contains(&id) {
                let _ = fs::remove_file(queue.join(format!("{id}.eml")));
            }
        }
        let done = self.root.join("done");
        for item in fs::read_dir(&done).map_err(io(&done))? {
            let name = item.map_err(io(&done))?.file_name();
            if let Some(id) = name.to_str().filter(|n| valid_id(n)) {
                index.done.insert(id.to_string());
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        // A panic elsewhere while holding the index leaves it consistent (every
        // change is one insert or remove).
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The message, then its envelope: the entry exists once the envelope does.
    fn write_entry(&self, entry: &Entry) -> Result<(), SpoolError> {
        let queue = self.queue();
        let eml = queue.join(format!("{}.eml", entry.id));
        let tmp = queue.join(format!(
            "{}.{}.eml.tmp",
            entry.id,
            uuid::Uuid::new_v4().simple()
        ));
        write_synced(&tmp, &entry.data)?;
        fs::rename(&tmp, &eml).map_err(io(&eml))?;
        self.write_envelope(entry)
    }

    fn write_envelope(&self, entry: &Entry) -> Result<(), SpoolError> {
        let queue = self.queue();
        let tmp = queue.join(format!(
            "{}.{}.json.tmp",
            entry.id,
            uuid::Uuid::new_v4().simple()
        ));
        let target = queue.join(format!("{}.json", entry.id));
        let json = serde_json::to_vec(entry).map_err(|e| SpoolError::Damaged(e.to_string()))?;
        write_synced(&tmp, &json)?;
        fs::rename(&tmp, &target).map_err(io(&target))?;
        sync_dir(&queue)
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), SpoolError> {
    let mut options = File::options();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

fn read_envelope(path: &Path) -> Result<Entry, SpoolError> {
    let bytes = fs::read(path).map_err(io(path))?;
    serde_json::from_slice(&bytes).map_err(|_| SpoolError::Damaged(path.display().to_string()))
}

impl Spool for DirSpool {
    fn put(&self, entry: &Entry) -> Result<Put, SpoolError> {
        if !valid_id(&entry.id) {
            return Err(SpoolError::Damaged(entry.id.clone()));
        }
        {
            let mut index = self.lock();
            while index.putting.contains(&entry.id) {
                index = self
                    .put_ended
                    .wait(index)
                    .unwrap_or_else(|p| p.into_inner());
            }
            if index.queued.contains_key(&entry.id) || index.done.contains(&entry.id) {
                return Ok(Put::Known);
            }
            index.putting.insert(entry.id.clone());
        }
        let written = self.write_entry(entry);
        let mut index = self.lock();
        index.putting.remove(&entry.id);
        if written.is_ok() {
            index
                .queued
                .insert(entry.id.clone(), (entry.next_attempt, 0, entry.created));
        }
        self.put_ended.notify_all();
        written.map(|()| Put::Queued)
    }

    fn claim(&self, now: i64, max: usize, lease_secs: i64) -> Result<Vec<Entry>, SpoolError> {
        let ids: Vec<String> = {
            let mut index = self.lock();
            let mut due: Vec<(i64, String)> = index
                .queued
                .iter()
                .filter(|(_, (next, lease, _))| *next <= now && *lease <= now)
                .map(|(id, (next, _, _))| (*next, id.clone()))
                .collect();
            due.sort();
            due.truncate(max);
            for (_, id) in &due {
                if let Some(slot) = index.queued.get_mut(id) {
                    slot.1 = now + lease_secs;
                }
            }
            due.into_iter().map(|(_, id)| id).collect()
        };
        let queue = self.queue();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let mut entry = read_envelope(&queue.join(format!("{id}.json")))?;
            let eml = queue.join(format!("{id}.eml"));
            entry.data = fs::read(&eml).map_err(io(&eml))?;
            out.push(entry);
        }
        Ok(out)
    }

    fn done(&self, id: &str, _now: i64) -> Result<(), SpoolError> {
        if !valid_id(id) {
            return Err(SpoolError::Damaged(id.to_string()));
        }
        let done = self.root.join("done");
        let marker = done.join(id);
        write_synced(&marker, b"")?;
        sync_dir(&done)?;
        let queue = self.queue();
        // The envelope first: an entry without it is debris, never delivered again.
        for ext in ["json", "eml"] {
            let p = queue.join(format!("{id}.{ext}"));
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&p)(e)),
            }
        }
        sync_dir(&queue)?;
        let mut index = self.lock();
        index.queued.remove(id);
        index.done.insert(id.to_string());
        Ok(())
    }

    fn retry(&self, entry: &Entry) -> Result<(), SpoolError> {
        self.write_envelope(entry)?;
        let mut index = self.lock();
        index
            .queued
            .insert(entry.id.clone(), (entry.next_attempt, 0, entry.created));
        Ok(())
    }

    fn depth(&self) -> Result<u64, SpoolError> {
        Ok(self.lock().queued.len() as u64)
    }

    fn oldest(&self) -> Result<Option<i64>, SpoolError> {
        Ok(self.lock().queued.values().map(|(_, _, c)| *c).min())
    }

    fn expire(&self, now: i64) -> Result<(), SpoolError> {
        let done = self.root.join("done");
        let horizon = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs((now - DONE_RETENTION_SECS).max(0) as u64);
        for item in fs::read_dir(&done).map_err(io(&done))? {
            let item = item.map_err(io(&done))?;
            let old = item
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < horizon);
            if old {
                let name = item.file_name();
                let _ = fs::remove_file(item.path());
                if let Some(id) = name.to_str() {
                    self.lock().done.remove(id);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_claim_retry_done_survive_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let rcpts = vec!["b@y".to_string()];
        let e = Entry::new(
            "out",
            "a@x",
            &rcpts,
            b"Subject: 1\r\n\r\nhi\r\n".to_vec(),
            100,
        );
        {
            let s = DirSpool::open(tmp.path()).unwrap();
            assert_eq!(s.put(&e).unwrap(), Put::Queued);
            assert_eq!(s.put(&e).unwrap(), Put::Known);
            assert!(matches!(
                DirSpool::open(tmp.path()),
                Err(SpoolError::Locked(_))
            ));
            let got = s.claim(100, 10, 60).unwrap();
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].data, e.data);
            // Leased: not claimed twice.
            assert!(s.claim(100, 10, 60).unwrap().is_empty());
            let mut again = got[0].clone();
            again.attempts = 1;
            again.next_attempt = 200;
            s.retry(&again).unwrap();
            assert!(s.claim(150, 10, 60).unwrap().is_empty());
        }
        // A restart resumes it (the lease is gone with the process).
        let s = DirSpool::open(tmp.path()).unwrap();
        assert_eq!(s.depth().unwrap(), 1);
        assert_eq!(
            s.oldest().unwrap(),
            Some(100),
            "read back from its envelope"
        );
        let got = s.claim(200, 10, 60).unwrap();
        assert_eq!(got[0].attempts, 1);
        s.done(&got[0].id, 200).unwrap();
        drop(s);
        let s = DirSpool::open(tmp.path()).unwrap();
        assert_eq!(s.depth().unwrap(), 0);
        assert_eq!(s.oldest().unwrap(), None);
        assert_eq!(
            s.put(&e).unwrap(),
            Put::Known,
            "a delivered id is remembered"
        );
    }

    /// The oldest queued entry is known without reading a file, also after a restart;
    /// the acceptance's milliseconds are kept, and an envelope written before they were
    /// (no `created_ms`) still reads, to its second.
    #[test]
    fn oldest_and_milliseconds_survive_reopen_and_old_envelopes_read() {
        let tmp = tempfile::tempdir().unwrap();
        let rcpts = vec!["b@y".to_string()];
        let newer = Entry::new("out", "a@x", &rcpts, b"1\r\n".to_vec(), 0).accepted_at(100_250);
        let older = Entry::new("out", "a@x", &rcpts, b"2\r\n".to_vec(), 0).accepted_at(90_999);
        {
            let s = DirSpool::open(tmp.path()).unwrap();
            assert_eq!(s.oldest().unwrap(), None);
            s.put(&newer).unwrap();
            s.put(&older).unwrap();
            assert_eq!(s.oldest().unwrap(), Some(90));
        }
        // An envelope as a version without milliseconds wrote it.
        let mut old_format =
            serde_json::to_value(Entry::new("out", "a@x", &rcpts, Vec::new(), 80)).unwrap();
        old_format.as_object_mut().unwrap().remove("created_ms");
        let id = old_format["id"].as_str().unwrap().to_string();
        let q = tmp.path().join("queue");
        std::fs::write(q.join(format!("{id}.eml")), b"3\r\n").unwrap();
        std::fs::write(q.join(format!("{id}.json")), old_format.to_string()).unwrap();
        let s = DirSpool::open(tmp.path()).unwrap();
        assert_eq!(s.oldest().unwrap(), Some(80));
        let got = s.claim(200, 10, 60).unwrap();
        let accepted = |id: &str| got.iter().find(|e| e.id == id).unwrap().accepted_ms();
        assert_eq!(accepted(&newer.id), 100_250);
        assert_eq!(accepted(&older.id), 90_999);
        assert_eq!(accepted(&id), 80_000);
        s.done(&id, 200).unwrap();
        s.done(&older.id, 200).unwrap();
        assert_eq!(s.oldest().unwrap(), Some(100));
    }

    #[test]
    fn debris_of_an_interrupted_put_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        drop(DirSpool::open(tmp.path()).unwrap());
        let q = tmp.path().join("queue");
        std::fs::write(q.join("abcd.eml"), b"x").unwrap();
        std::fs::write(q.join("abcd.json.tmp"), b"{").unwrap();
        let s = DirSpool::open(tmp.path()).unwrap();
        assert_eq!(s.depth().unwrap(), 0);
        assert!(!q.join("abcd.eml").exists());
        assert!(!q.join("abcd.json.tmp").exists());
    }
}
