//! The spool in a local directory: no setup, one gateway process per directory (held
//! by a lock on `DIR/lock`).
//!
//! Each entry is two files in `DIR/queue`: `ID.eml` (the message, written once) and
//! `ID.json` (its envelope and schedule, replaced atomically on each retry). The
//! message is written and synced first, then the envelope by rename, then the
//! directory is synced: an entry exists once its `.json` does, and a `.eml` without
//! one is the debris of a crash before the put returned (removed on open). Delivered
//! ids are files in `DIR/done`, kept for [`super::DONE_RETENTION_SECS`] (a deleted
//! entry's says so).
//!
//! Beside them, for the queue tools ([`super::DirQueue`]), which work on the directory
//! while the gateway runs without taking its lock:
//!
//! - `ID.hold`: the entry is held (durable; claim skips it).
//! - `ID.lease`: a delivery attempt of the running gateway holds it (`PID UNTIL`; not
//!   durable: removed on open, when no attempt can be under way).
//! - `DIR/changed/ID`: a tool changed the entry; the gateway reads it again before
//!   its next claim (its schedule and hold live in memory too).
//!
//! Every change to an existing entry, the gateway's (lease at claim, retry, done) and
//! the tools', is made under a lock on the entry's `ID.eml` ([`lock_entry`]), so each
//! is atomic against the others: a tool never sees half a retry, a retry never brings
//! back an entry a tool deleted, and a claim never takes an entry a tool is holding.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Entry, Put, Spool, SpoolError, DONE_RETENTION_SECS};

/// A directory spool.
pub struct DirSpool {
    layout: Layout,
    /// Held for the spool's life: one process per directory.
    _lock: File,
    /// Entries known to be queued, and the lease of those claimed (until, Unix s).
    index: Mutex<Index>,
    /// Signalled when a put ends.
    put_ended: std::sync::Condvar,
}

/// What the gateway keeps in memory of a queued entry.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// Not before this time.
    next: i64,
    /// Leased to a delivery until this time.
    lease: i64,
    /// Held with the queue tools.
    held: bool,
    /// When it was accepted (Unix s): [`Spool::oldest`] reads no file.
    created: i64,
}

#[derive(Default)]
struct Index {
    queued: HashMap<String, Slot>,
    done: HashSet<String>,
    /// Ids being put now: a second put of one waits for the first, then finds it
    /// queued (or done). Without this, a put that started before the first one's
    /// entry was delivered and marked done would queue it again (the crash test
    /// found it: two workers given the same redelivered message).
    putting: HashSet<String>,
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.display().to_string(),
        source,
    }
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), SpoolError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// Ids are hex; anything else in the directory is not ours.
pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where a spool directory keeps what (shared by the gateway and the queue tools).
#[derive(Clone, Debug)]
pub(super) struct Layout {
    pub(super) root: PathBuf,
}

impl Layout {
    pub(super) fn queue(&self) -> PathBuf {
        self.root.join("queue")
    }
    pub(super) fn done(&self) -> PathBuf {
        self.root.join("done")
    }
    pub(super) fn changed(&self) -> PathBuf {
        self.root.join("changed")
    }
    /// `queue/ID.EXT`: `eml`, `json`, `hold` or `lease`.
    pub(super) fn file(&self, id: &str, ext: &str) -> PathBuf {
        self.queue().join(format!("{id}.{ext}"))
    }
    pub(super) fn done_marker(&self, id: &str) -> PathBuf {
        self.done().join(id)
    }
    /// Until when a live delivery attempt holds the entry: its lease file names a
    /// time after `now` and a process that exists (a lease left by a killed gateway
    /// is not one).
    pub(super) fn lease(&self, id: &str, now: i64) -> Option<i64> {
        let bytes = read_regular(&self.file(id, "lease")).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (pid, until) = text.trim().split_once(' ')?;
        let until: i64 = until.parse().ok()?;
        let proc = Path::new("/proc");
        let alive = !proc.join("self").exists() || proc.join(pid.trim()).exists();
        (until > now && alive).then_some(until)
    }
}

/// An entry's lock, taken or not.
pub(super) enum EntryLock {
    /// Taken: released when dropped. The message file, open for reading.
    Taken(File),
    /// The entry has no message file: it is gone (done, deleted) or never was.
    Gone,
    /// Someone else holds it (only when not waiting).
    Busy,
}

/// Takes the lock of entry `id` (on its message file), waiting for it or not.
/// Whoever takes it must then check that the entry still exists (its `.json`): the
/// holder before may have removed it.
pub(super) fn lock_entry(layout: &Layout, id: &str, wait: bool) -> Result<EntryLock, SpoolError> {
    let path = layout.file(id, "eml");
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(EntryLock::Gone),
        Err(e) => return Err(io(&path)(e)),
    };
    if wait {
        file.lock().map_err(io(&path))?;
        return Ok(EntryLock::Taken(file));
    }
    match file.try_lock() {
        Ok(()) => Ok(EntryLock::Taken(file)),
        Err(fs::TryLockError::WouldBlock) => Ok(EntryLock::Busy),
        Err(fs::TryLockError::Error(e)) => Err(io(&path)(e)),
    }
}

/// Removes `path`; one already gone is no error.
pub(super) fn remove(path: &Path) -> Result<(), SpoolError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path)(e)),
    }
}

/// Writes a new file (owner-only), synced when `sync`; given to `owner` (uid, gid)
/// when it is not theirs already (a tool run as root writes for the gateway's user).
/// The file must not exist: created exclusively, a link planted in its place is never
/// followed (the tools may run as root in a directory the gateway's user owns).
pub(super) fn write_file(
    path: &Path,
    bytes: &[u8],
    sync: bool,
    owner: Option<(u32, u32)>,
) -> Result<(), SpoolError> {
    let mut options = File::options();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path).map_err(io(path))?;
    give(&f, path, owner)?;
    f.write_all(bytes).map_err(io(path))?;
    if sync {
        f.sync_all().map_err(io(path))?;
    }
    Ok(())
}

/// [`write_file`], where a file already there is the mark wanted (a hold, a note, a
/// done id): left as it is.
pub(super) fn mark(
    path: &Path,
    bytes: &[u8],
    sync: bool,
    owner: Option<(u32, u32)>,
) -> Result<(), SpoolError> {
    match write_file(path, bytes, sync, owner) {
        Err(SpoolError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists
                && fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file()) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// The bytes of the regular file at `path`, never through a link or from a file linked
/// twice (the tools may run as root in a directory the gateway's user owns: `show`
/// must not print what a planted link points to).
pub(super) fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let mut f = File::open(path)?;
    let opened = f.metadata()?;
    let here = fs::symlink_metadata(path)?;
    if !here.file_type().is_file()
        || here.ino() != opened.ino()
        || here.dev() != opened.dev()
        || opened.nlink() != 1
    {
        return Err(std::io::Error::other("not a regular file of the spool"));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Gives `f` to `owner` unless it is theirs.
pub(super) fn give(f: &File, path: &Path, owner: Option<(u32, u32)>) -> Result<(), SpoolError> {
    use std::os::unix::fs::MetadataExt;
    if let Some((uid, gid)) = owner {
        if f.metadata().map_err(io(path))?.uid() != uid {
            std::os::unix::fs::fchown(f, Some(uid), Some(gid)).map_err(io(path))?;
        }
    }
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), SpoolError> {
    write_file(path, bytes, true, None)
}

/// Replaces an entry's envelope atomically (a new file renamed over it, then the
/// directory synced).
pub(super) fn write_envelope(
    layout: &Layout,
    entry: &Entry,
    owner: Option<(u32, u32)>,
) -> Result<(), SpoolError> {
    let queue = layout.queue();
    let tmp = queue.join(format!(
        "{}.{}.json.tmp",
        entry.id,
        uuid::Uuid::new_v4().simple()
    ));
    let target = layout.file(&entry.id, "json");
    let json = serde_json::to_vec(entry).map_err(|e| SpoolError::Damaged(e.to_string()))?;
    write_file(&tmp, &json, true, owner)?;
    if let Err(e) = fs::rename(&tmp, &target) {
        let _ = fs::remove_file(&tmp);
        return Err(io(&target)(e));
    }
    sync_dir(&queue)
}

pub(super) fn read_envelope(path: &Path) -> Result<Entry, SpoolError> {
    let bytes = read_regular(path).map_err(io(path))?;
    serde_json::from_slice(&bytes).map_err(|_| SpoolError::Damaged(path.display().to_string()))
}

/// An entry's envelope, or `None` when it has none (it is gone).
pub(super) fn envelope_if_any(layout: &Layout, id: &str) -> Result<Option<Entry>, SpoolError> {
    let path = layout.file(id, "json");
    match read_regular(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|_| SpoolError::Damaged(path.display().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(&path)(e)),
    }
}

/// Removes what is left of an entry that is done or deleted (its envelope first: an
/// entry without it is never delivered again), then syncs the directory.
pub(super) fn remove_entry(layout: &Layout, id: &str, lease_too: bool) -> Result<(), SpoolError> {
    for ext in ["json", "eml", "hold"] {
        remove(&layout.file(id, ext))?;
    }
    if lease_too {
        remove(&layout.file(id, "lease"))?;
    }
    sync_dir(&layout.queue())
}

impl DirSpool {
    /// Opens (creating, owner-only) the spool in `root`, takes its lock, and reads what
    /// is queued.
    pub fn open(root: &Path) -> Result<Self, SpoolError> {
        for sub in ["", "queue", "done", "changed"] {
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
            layout: Layout {
                root: root.to_path_buf(),
            },
            _lock: lock,
            index: Mutex::new(Index::default()),
            put_ended: std::sync::Condvar::new(),
        };
        spool.load()?;
        Ok(spool)
    }

    fn queue(&self) -> PathBuf {
        self.layout.queue()
    }

    fn load(&self) -> Result<(), SpoolError> {
        let queue = self.queue();
        let mut index = self.lock();
        let done = self.layout.done();
        for item in fs::read_dir(&done).map_err(io(&done))? {
            let name = item.map_err(io(&done))?.file_name();
            if let Some(id) = name.to_str().filter(|n| valid_id(n)) {
                index.done.insert(id.to_string());
            }
        }
        let mut envelopes = Vec::new();
        let mut messages = HashSet::new();
        let mut holds = HashSet::new();
        for item in fs::read_dir(&queue).map_err(io(&queue))? {
            let path = item.map_err(io(&queue))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            match name.rsplit_once('.') {
                Some((id, "json")) if valid_id(id) => envelopes.push((id.to_string(), path)),
                Some((id, "eml")) if valid_id(id) => {
                    messages.insert(id.to_string());
                }
                Some((id, "hold")) if valid_id(id) => {
                    holds.insert(id.to_string());
                }
                // No delivery is under way in a spool nobody held.
                Some((id, "lease")) if valid_id(id) => {
                    let _ = fs::remove_file(&path);
                }
                // A put interrupted before its rename.
                _ if name.ends_with(".tmp") => {
                    let _ = fs::remove_file(&path);
                }
                _ => {}
            }
        }
        let mut queued = HashSet::new();
        for (id, path) in envelopes {
            // A done or deletion interrupted after its mark: finished now. (An envelope
            // without its message cannot be delivered either.)
            if index.done.contains(&id) || !messages.contains(&id) {
                remove_entry(&self.layout, &id, true)?;
                continue;
            }
            let entry = read_envelope(&path)?;
            index.queued.insert(
                id.clone(),
                Slot {
                    next: entry.next_attempt,
                    lease: 0,
                    held: holds.contains(&id),
                    created: entry.created,
                },
            );
            queued.insert(id);
        }
        for id in messages.iter().chain(holds.iter()) {
            if !queued.contains(id) {
                let _ = fs::remove_file(self.layout.file(id, "eml"));
                let _ = fs::remove_file(self.layout.file(id, "hold"));
            }
        }
        // Everything is read afresh: the tools' notes of changes are moot.
        let changed = self.layout.changed();
        for item in fs::read_dir(&changed).map_err(io(&changed))? {
            let _ = fs::remove_file(item.map_err(io(&changed))?.path());
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
        let eml = self.layout.file(&entry.id, "eml");
        let tmp = queue.join(format!(
            "{}.{}.eml.tmp",
            entry.id,
            uuid::Uuid::new_v4().simple()
        ));
        write_synced(&tmp, &entry.data)?;
        fs::rename(&tmp, &eml).map_err(io(&eml))?;
        write_envelope(&self.layout, entry, None)
    }

    /// An entry that is no longer on disk (a tool deleted it) leaves the index; its id
    /// is remembered as done when a tool deleted it.
    fn forget(&self, id: &str) {
        let deleted = self.layout.done_marker(id).exists();
        let mut index = self.lock();
        if index.queued.remove(id).is_some() && deleted {
            tracing::info!(id = %id, "spool: entry deleted with the queue tool");
        }
        if deleted {
            index.done.insert(id.to_string());
        }
    }

    /// Gives a claimed entry's lease back (it was not taken after all).
    fn unlease(&self, id: &str, held: bool) {
        if let Some(slot) = self.lock().queued.get_mut(id) {
            slot.lease = 0;
            slot.held |= held;
        }
    }

    /// Takes entry `id`, leased in the index until `until`, under its lock: `None`
    /// when it is gone, held, or a tool holds its lock now (tried at the next claim).
    fn take(&self, id: &str, until: i64) -> Result<Option<Entry>, SpoolError> {
        let mut file = match lock_entry(&self.layout, id, false)? {
            EntryLock::Taken(f) => f,
            EntryLock::Gone => {
                self.forget(id);
                return Ok(None);
            }
            EntryLock::Busy => {
                self.unlease(id, false);
                return Ok(None);
            }
        };
        let json = self.layout.file(id, "json");
        if !json.exists() {
            self.forget(id);
            return Ok(None);
        }
        if self.layout.file(id, "hold").exists() {
            self.unlease(id, true);
            return Ok(None);
        }
        let lease = self.layout.file(id, "lease");
        // One left by an attempt whose lease ran out.
        remove(&lease)?;
        write_file(
            &lease,
            format!("{} {until}\n", std::process::id()).as_bytes(),
            false,
            None,
        )?;
        let read = read_envelope(&json).and_then(|mut entry| {
            let eml = self.layout.file(id, "eml");
            file.rewind().map_err(io(&eml))?;
            file.read_to_end(&mut entry.data).map_err(io(&eml))?;
            Ok(entry)
        });
        if read.is_err() {
            let _ = fs::remove_file(&lease);
        }
        read.map(Some)
    }

    /// Reads again the entries the queue tools changed (`DIR/changed`): their
    /// schedule, their hold, or that they are gone. An entry whose lock a tool holds
    /// now is read at the next claim.
    fn read_changes(&self) -> Result<(), SpoolError> {
        let changed = self.layout.changed();
        let names: Vec<String> = match fs::read_dir(&changed) {
            Ok(items) => items
                .flatten()
                .filter_map(|i| i.file_name().to_str().map(str::to_string))
                .collect(),
            Err(e) => return Err(io(&changed)(e)),
        };
        for id in names {
            let note = changed.join(&id);
            if !valid_id(&id) {
                let _ = fs::remove_file(&note);
                continue;
            }
            let lock = lock_entry(&self.layout, &id, false)?;
            if matches!(lock, EntryLock::Busy) {
                continue;
            }
            // Removed before reading, so a change made after the read leaves a note.
            remove(&note)?;
            let Some(entry) = envelope_if_any(&self.layout, &id)? else {
                self.forget(&id);
                continue;
            };
            let held = self.layout.file(&id, "hold").exists();
            let mut index = self.lock();
            let slot = index.queued.entry(id.clone()).or_default();
            // A leased entry's schedule is its delivery's to set.
            if slot.lease == 0 {
                slot.next = entry.next_attempt;
            }
            slot.held = held;
            slot.created = entry.created;
            tracing::info!(id = %id, held, next_attempt = entry.next_attempt, attempts = entry.attempts, "spool: entry changed with the queue tool");
            drop(index);
            drop(lock);
        }
        Ok(())
    }
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
            // Deleted with the queue tool since the index last looked.
            if self.layout.done_marker(&entry.id).exists() {
                index.done.insert(entry.id.clone());
                return Ok(Put::Known);
            }
            index.putting.insert(entry.id.clone());
        }
        let written = self.write_entry(entry);
        let mut index = self.lock();
        index.putting.remove(&entry.id);
        if written.is_ok() {
            index.queued.insert(
                entry.id.clone(),
                Slot {
                    next: entry.next_attempt,
                    created: entry.created,
                    ..Slot::default()
                },
            );
        }
        self.put_ended.notify_all();
        written.map(|()| Put::Queued)
    }

    fn claim(&self, now: i64, max: usize, lease_secs: i64) -> Result<Vec<Entry>, SpoolError> {
        if let Err(e) = self.read_changes() {
            tracing::error!(error = %e, "spool: cannot read the queue tools' changes");
        }
        let until = now + lease_secs;
        let ids: Vec<String> = {
            let mut index = self.lock();
            let mut due: Vec<(i64, String)> = index
                .queued
                .iter()
                .filter(|(_, s)| s.next <= now && s.lease <= now && !s.held)
                .map(|(id, s)| (s.next, id.clone()))
                .collect();
            due.sort();
            due.truncate(max);
            for (_, id) in &due {
                if let Some(slot) = index.queued.get_mut(id) {
                    slot.lease = until;
                }
            }
            due.into_iter().map(|(_, id)| id).collect()
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.take(&id, until) {
                Ok(Some(entry)) => out.push(entry),
                Ok(None) => {}
                // Its lease stays: tried again once it runs out.
                Err(e) => tracing::error!(id = %id, error = %e, "spool: cannot claim"),
            }
        }
        Ok(out)
    }

    fn done(&self, id: &str, _now: i64) -> Result<(), SpoolError> {
        if !valid_id(id) {
            return Err(SpoolError::Damaged(id.to_string()));
        }
        let done = self.layout.done();
        let marker = self.layout.done_marker(id);
        // Created new (a deletion's mark, if a tool deleted it meanwhile, stays).
        let mut options = File::options();
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        options
            .open(&marker)
            .and_then(|f| f.sync_all())
            .map_err(io(&marker))?;
        sync_dir(&done)?;
        let lock = lock_entry(&self.layout, id, true)?;
        remove_entry(&self.layout, id, true)?;
        drop(lock);
        let mut index = self.lock();
        index.queued.remove(id);
        index.done.insert(id.to_string());
        Ok(())
    }

    fn retry(&self, entry: &Entry) -> Result<(), SpoolError> {
        let id = &entry.id;
        let lock = lock_entry(&self.layout, id, true)?;
        let gone = matches!(lock, EntryLock::Gone)
            || !self.layout.file(id, "json").exists()
            || self.layout.done_marker(id).exists();
        if gone {
            // Deleted with the queue tool while it was being delivered: not queued
            // again.
            remove_entry(&self.layout, id, true)?;
            drop(lock);
            self.forget(id);
            return Ok(());
        }
        write_envelope(&self.layout, entry, None)?;
        remove(&self.layout.file(id, "lease"))?;
        let held = self.layout.file(id, "hold").exists();
        drop(lock);
        self.lock().queued.insert(
            id.clone(),
            Slot {
                next: entry.next_attempt,
                lease: 0,
                held,
                created: entry.created,
            },
        );
        Ok(())
    }

    fn depth(&self) -> Result<u64, SpoolError> {
        Ok(self.lock().queued.len() as u64)
    }

    fn oldest(&self) -> Result<Option<i64>, SpoolError> {
        Ok(self.lock().queued.values().map(|s| s.created).min())
    }

    fn expire(&self, now: i64) -> Result<(), SpoolError> {
        let done = self.layout.done();
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
