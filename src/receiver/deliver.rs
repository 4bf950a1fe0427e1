//! Exactly-once delivery into files: the output of each accepted message appears at
//! its target path once, whatever point a crash interrupts.
//!
//! For each message the output is first written beside the target as `TARGET.partial`
//! (owner-only, synced, never through a symlink), then the message is committed, then
//! the partial file is renamed onto the target and the directory synced. A crash
//! before the commit leaves the message unrecorded: the next run stages it again. A
//! crash after the commit leaves a staged file for a message the state now calls a
//! duplicate: the next run, finding it, publishes it. A consumer that takes files out of
//! the directory therefore sees each accepted message once. One process per directory.
//!
//! A target that is not a regular file is never replaced (`Target`): a symlink is
//! followed to the file it names, which is then replaced as above (the link stays); a
//! device or FIFO (`/dev/null`, a pipe) is written in place, after the commit, since
//! it can be neither staged nor renamed onto. A symlink is followed only where no one
//! else could have put it: in a directory that only its owner can write. In a
//! directory others can write (`/tmp`, a shared spool) a link may be another user's,
//! planted to redirect the output onto a file of ours, so the output is refused there.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Incoming, Outcome, ReceiveError, Receiver};
use crate::message::MessageError;

/// What is written for a delivered message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// The protected envelope JSON, as received (`NAME.json`).
    #[default]
    EnvelopeJson,
    /// The inner message, RFC 5322 (`NAME.eml`).
    Eml,
}

impl Format {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::EnvelopeJson => "json",
            Format::Eml => "eml",
        }
    }

    /// The bytes written for `delivery`.
    pub fn render(self, delivery: &super::Delivery) -> Result<Vec<u8>, MessageError> {
        match self {
            Format::EnvelopeJson => Ok(delivery.envelope_json()),
            Format::Eml => delivery.opened.message.to_rfc5322(),
        }
    }

    /// Writes the output for `delivery` to `w`. The envelope JSON goes out from the
    /// opened message's own buffer, not from a copy: a large message is not held twice.
    pub fn write_to(
        self,
        delivery: &super::Delivery,
        w: &mut dyn Write,
    ) -> Result<(), DeliverError> {
        let written = match self {
            Format::EnvelopeJson => w
                .write_all(delivery.opened.message.envelope_bytes())
                .and_then(|()| w.write_all(b"\n")),
            Format::Eml => w.write_all(&self.render(delivery)?),
        };
        written.map_err(|source| DeliverError::Io {
            path: "-".into(),
            source,
        })
    }
}

/// Why a delivery failed. Nothing was recorded unless the message was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliverError {
    /// The message was refused, or the state failed.
    #[error(transparent)]
    Receive(#[from] ReceiveError),
    /// The output could not be rendered.
    #[error(transparent)]
    Render(#[from] MessageError),
    /// The output could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl crate::error::Classify for DeliverError {
    fn a2a_error(&self) -> crate::A2aErrorType {
        match self {
            Self::Receive(e) => e.a2a_error(),
            Self::Render(e) => e.a2a_error(),
            Self::Io { .. } => crate::A2aErrorType::InternalError,
        }
    }
    fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Receive(e) => e.kind(),
            Self::Render(e) => e.kind(),
            Self::Io { .. } => crate::ErrorKind::Other,
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DeliverError + '_ {
    move |source| DeliverError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// What became of a message delivered to a file.
#[derive(Debug)]
#[non_exhaustive]
pub struct Delivered {
    /// The outcome the state recorded.
    pub outcome: Outcome,
    /// The output was published now, from a run that committed the message and was
    /// killed before publishing it (the outcome then says duplicate).
    pub resumed: bool,
    /// Where the output is, when there is one.
    pub path: Option<PathBuf>,
}

/// A released MLS message's name and what its delivery came to.
pub type ReleasedDelivery = (String, Result<Delivered, DeliverError>);

/// A directory that receives each accepted message as `NAME.json` (or `NAME.eml`).
#[derive(Clone, Debug)]
pub struct DeliveryDir {
    dir: PathBuf,
    format: Format,
}

impl DeliveryDir {
    /// Creates `dir` if needed.
    pub fn open(dir: impl Into<PathBuf>, format: Format) -> Result<Self, DeliverError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        Ok(DeliveryDir { dir, format })
    }

    /// Where `name`'s output goes.
    pub fn target(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.{}", self.format.extension()))
    }

    /// Receives `raw` (named `name`) through `receiver` and delivers it exactly once.
    pub fn deliver(
        &self,
        receiver: &mut Receiver<'_>,
        raw: &[u8],
        name: &str,
    ) -> Result<Delivered, DeliverError> {
        let incoming = receiver.receive_named(raw, name)?;
        deliver_to(incoming, &self.target(name), self.format)
    }

    /// Delivers the held MLS messages a Commit released, each under the name it first
    /// arrived with; one result per message, in order. Stops at the first state error.
    pub fn deliver_released(
        &self,
        receiver: &mut Receiver<'_>,
    ) -> Result<Vec<ReleasedDelivery>, DeliverError> {
        let mut out = Vec::new();
        while let Some(released) = receiver.next_released(None)? {
            let name = released.name;
            let target = self.target(&name);
            let result = released
                .result
                .map_err(DeliverError::from)
                .and_then(|incoming| deliver_to(incoming, &target, self.format));
            out.push((name, result));
        }
        Ok(out)
    }
}

/// Where output named by a path goes: a regular file (new or replaced whole), or a
/// device or FIFO written in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A path to stage beside and rename onto (a symlink's final target).
    File(PathBuf),
    /// A character or block device, FIFO or socket: written into, never replaced.
    InPlace(PathBuf),
}

/// How many symlinks are followed before the path is refused (as the kernel's
/// `ELOOP` limit).
const MAX_LINKS: usize = 40;

impl Target {
    /// What `path` names: followed through symlinks to a file (existing or not), or a
    /// device or FIFO.
    pub(crate) fn of(path: &Path) -> Result<Target, DeliverError> {
        let mut path = path.to_path_buf();
        for _ in 0..MAX_LINKS {
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Target::File(path))
                }
                Err(e) => return Err(io(&path)(e)),
            };
            let kind = meta.file_type();
            if kind.is_symlink() {
                refuse_shared_link(&path)?;
                let link = std::fs::read_link(&path).map_err(io(&path))?;
                path = match path.parent() {
                    Some(parent) if link.is_relative() => parent.join(link),
                    _ => link,
                };
                continue;
            }
            if kind.is_file() || kind.is_dir() {
                // A directory fails at the rename, with the system's word for it.
                return Ok(Target::File(path));
            }
            return Ok(Target::InPlace(path));
        }
        Err(io(&path)(std::io::Error::other(format!(
            "more than {MAX_LINKS} symbolic links"
        ))))
    }
}

/// Refuses to follow the symlink `link` when its directory can be written by others
/// than its owner: someone else may have planted it there.
fn refuse_shared_link(link: &Path) -> Result<(), DeliverError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = match link.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mode = std::fs::metadata(&dir)
            .map_err(io(&dir))?
            .permissions()
            .mode();
        if mode & 0o022 != 0 {
            return Err(io(link)(std::io::Error::other(format!(
                "a symbolic link in {}, a directory others can write: not followed (it may be planted); name the file it points to",
                dir.display()
            ))));
        }
    }
    Ok(())
}

/// Writes into a device or FIFO at `path`, opened for writing only (never created,
/// never truncated as a file would be).
fn write_in_place(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), DeliverError>,
) -> Result<(), DeliverError> {
    let mut device = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io(path))?;
    write(&mut device)?;
    device.flush().map_err(io(path))
}

/// Delivers `incoming` to `target` exactly once (see the module documentation).
pub fn deliver_to(
    incoming: Incoming<'_>,
    target: &Path,
    format: Format,
) -> Result<Delivered, DeliverError> {
    let target = match Target::of(target)? {
        Target::File(path) => path,
        Target::InPlace(device) => return deliver_in_place(incoming, &device, format),
    };
    let target = target.as_path();
    let partial = partial_path(target);
    match incoming.outcome() {
        Outcome::Deliver { delivery, .. } => {
            write_new_with(&partial, |f| format.write_to(delivery, f))?;
            let outcome = match incoming.commit() {
                Ok(o) => o,
                Err(e) => {
                    let _ = std::fs::remove_file(&partial);
                    return Err(e.into());
                }
            };
            if matches!(outcome, Outcome::Deliver { .. }) {
                publish(&partial, target)?;
                return Ok(Delivered {
                    outcome,
                    resumed: false,
                    path: Some(target.to_path_buf()),
                });
            }
            // Another process sharing the state took it first.
            let _ = std::fs::remove_file(&partial);
            Ok(Delivered {
                outcome,
                resumed: false,
                path: None,
            })
        }
        Outcome::Duplicate { delivery, .. } => {
            // Committed by a run killed before it published: the staged output is
            // this message's (compared byte for byte when the message was opened; an
            // MLS message seen before is known to have been committed with it).
            let staged = !target.exists()
                && match delivery {
                    Some(d) => {
                        let out = format.render(d)?;
                        std::fs::read(&partial).is_ok_and(|b| b == out)
                    }
                    None => partial.is_file(),
                };
            let outcome = incoming.commit()?;
            if staged {
                publish(&partial, target)?;
                return Ok(Delivered {
                    outcome,
                    resumed: true,
                    path: Some(target.to_path_buf()),
                });
            }
            Ok(Delivered {
                outcome,
                resumed: false,
                path: None,
            })
        }
        _ => {
            let outcome = incoming.commit()?;
            Ok(Delivered {
                outcome,
                resumed: false,
                path: None,
            })
        }
    }
}

/// Delivers `incoming` into a device or FIFO: the output is rendered (staged in
/// memory), the message committed, and the output written only if the commit
/// delivered it, so a concurrent duplicate writes nothing. A crash between the commit
/// and the write loses that output: a device keeps nothing to resume from.
fn deliver_in_place(
    incoming: Incoming<'_>,
    device: &Path,
    format: Format,
) -> Result<Delivered, DeliverError> {
    let staged = match incoming.outcome() {
        Outcome::Deliver { delivery, .. } => Some(format.render(delivery)?),
        _ => None,
    };
    let outcome = incoming.commit()?;
    match (staged, &outcome) {
        (Some(bytes), Outcome::Deliver { .. }) => {
            write_in_place(device, |w| w.write_all(&bytes).map_err(io(device)))?;
            Ok(Delivered {
                outcome,
                resumed: false,
                path: Some(device.to_path_buf()),
            })
        }
        _ => Ok(Delivered {
            outcome,
            resumed: false,
            path: None,
        }),
    }
}

/// Writes `bytes` to `target` the way a delivery is written: a new owner-only file
/// beside it (never through a symlink planted there), synced, then renamed over the
/// target, so a reader sees the old file or the whole new one. A symlink at `target`
/// is followed (the file it names is replaced, the link stays), and a device or FIFO
/// is written in place, never replaced. For every `--out` of the command line (a
/// sealed message, a report, a card).
pub fn write_file_atomically(target: &Path, bytes: &[u8]) -> Result<(), DeliverError> {
    write_file_atomically_with(target, |f| f.write_all(bytes).map_err(io(target)))
}

/// [`write_file_atomically`] of what `write` writes: a large output goes to the file
/// from where it lies, without being gathered into one buffer first.
pub fn write_file_atomically_with(
    target: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), DeliverError>,
) -> Result<(), DeliverError> {
    // A device or pipe (`/dev/null`, a FIFO) is written as it is: it cannot be
    // replaced, and holds nothing to protect.
    let target = match Target::of(target)? {
        Target::InPlace(device) => return write_in_place(&device, write),
        Target::File(path) => path,
    };
    let partial = partial_path(&target);
    write_new_with(&partial, write)?;
    publish(&partial, &target)
}

fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    target.with_file_name(name)
}

/// A new owner-only file at `path`. An existing file (a stale partial) is removed
/// first; `create_new` never follows a symlink planted at the path.
fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path)
}

/// A new owner-only file at `path` with the content `write` writes (buffered, then
/// synced).
fn write_new_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), DeliverError>,
) -> Result<(), DeliverError> {
    let file = create_new(path).map_err(io(path))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    write(&mut out).map_err(|e| match e {
        DeliverError::Io { source, .. } => io(path)(source),
        other => other,
    })?;
    let file = out.into_inner().map_err(|e| io(path)(e.into_error()))?;
    file.sync_all().map_err(io(path))
}

/// Renames the staged file onto the target and syncs the directory, so the rename
/// survives a power cut.
fn publish(partial: &Path, target: &Path) -> Result<(), DeliverError> {
    std::fs::rename(partial, target).map_err(io(target))?;
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}
