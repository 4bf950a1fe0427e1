//! The signing log of the offline host: one JSON line per signature made, each
//! naming the request, the response, the signer, what was signed in brief, the digest
//! of the summary the operator was shown, and the hash of the line before it; its own
//! hash is SHA-256 of its canonical JSON without that hash. An edited line breaks its
//! own hash, a removed or reordered one breaks the chain; a removed tail shows only
//! against a head the operator kept (`sign` prints each new head;
//! [`SigningLog::verify`] returns the last).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::request::{SigningRequest, SigningResponse};

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One signature made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct LogEntry {
    /// 1, 2, ...
    pub seq: u64,
    /// When (the offline host's clock, RFC 3339).
    pub time: String,
    /// The request's fingerprint.
    pub request: String,
    /// The response's fingerprint.
    pub response: String,
    /// The profile.
    pub profile: String,
    /// The signer (store fingerprint).
    pub signer: String,
    /// The signed message's From, To, Message-ID and operation.
    pub from: String,
    /// To.
    pub to: Vec<String>,
    /// Message-ID.
    pub message_id: String,
    /// Operation.
    pub operation: String,
    /// SHA-256 of the summary text the operator was shown (`sign`), or that a batch
    /// signed without showing ([`super::Summary::digest`]). Absent from entries
    /// written before it was recorded: an absent member is not written, so their
    /// hashes, and the chain through them, verify as they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The previous entry's hash (zeros for the first).
    pub prev: String,
    /// SHA-256 of this entry's canonical JSON with `hash` empty.
    pub hash: String,
}

impl LogEntry {
    fn computed_hash(&self) -> String {
        let mut body = self.clone();
        body.hash = String::new();
        crate::hex::hex(&Sha256::digest(
            serde_json::to_vec(&body).unwrap_or_default(),
        ))
    }
}

/// Why the log could not be read, extended or trusted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// Reading or writing the file failed.
    #[error("signing log {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An entry does not parse, or breaks the chain.
    #[error("signing log {path}, line {line}: {why}")]
    Broken {
        /// The file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The response given to log does not answer the request given with it.
    #[error("signing log {path}: the response does not answer that request")]
    NotItsRequest {
        /// The file.
        path: PathBuf,
    },
    /// The last entry is not the head the operator expected (entries removed from
    /// the end, or another log).
    #[error("signing log {path}: the head is {found}, expected {expected}")]
    WrongHead {
        /// The file.
        path: PathBuf,
        /// The expected head (hash).
        expected: String,
        /// The log's.
        found: String,
    },
}

impl crate::error::Classify for LogError {
    fn a2a_error(&self) -> crate::error::A2aErrorType {
        crate::error::A2aErrorType::InternalError
    }
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            Self::Io { .. } => crate::error::ErrorKind::Other,
            _ => crate::error::ErrorKind::Authentication,
        }
    }
}

/// A hash-chained log in one file. The chain is checked in full at the first
/// append; later appends of the same `SigningLog` check that the file is still the
/// length it left it (a batch does not re-read the whole log per signature).
#[derive(Debug)]
pub struct SigningLog {
    path: PathBuf,
    /// (file length, last seq, last hash) as this value last wrote or verified it.
    known: std::sync::Mutex<Option<(u64, u64, String)>>,
}

impl SigningLog {
    /// The log at `path` (created by the first [`SigningLog::append`], owner-only).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SigningLog {
            path: path.into(),
            known: std::sync::Mutex::new(None),
        }
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> LogError {
        LogError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Every entry, checked: each parses, counts up from 1, names the hash before it
    /// and has its own hash. An absent log is empty.
    pub fn verify(&self) -> Result<Vec<LogEntry>, LogError> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        let mut entries: Vec<LogEntry> = Vec::new();
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| self.io(e))?;
            let broken = |why: String| LogError::Broken {
                path: self.path.clone(),
                line: i + 1,
                why,
            };
            let entry: LogEntry =
                serde_json::from_str(&line).map_err(|e| broken(format!("not an entry: {e}")))?;
            let prev = entries.last().map_or(GENESIS, |e| e.hash.as_str());
            if entry.seq != i as u64 + 1 {
                return Err(broken(format!(
                    "entry {} where {} belongs",
                    entry.seq,
                    i + 1
                )));
            }
            if entry.prev != prev {
                return Err(broken(
                    "the entry does not follow the one before it (an entry removed or moved)"
                        .into(),
                ));
            }
            if entry.hash != entry.computed_hash() {
                return Err(broken("the entry was changed after it was written".into()));
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    /// As [`SigningLog::verify`], and the last entry's hash is `head` (the log has
    /// lost nothing from its end since the operator noted it).
    pub fn verify_head(&self, head: &str) -> Result<Vec<LogEntry>, LogError> {
        let entries = self.verify()?;
        let found = entries.last().map_or(GENESIS, |e| e.hash.as_str());
        // A head noted earlier may be followed by later entries: it must be in the
        // chain, and nothing before it may be missing (the chain shows that).
        if !entries.iter().any(|e| e.hash.eq_ignore_ascii_case(head)) && found != head {
            return Err(LogError::WrongHead {
                path: self.path.clone(),
                expected: head.to_string(),
                found: found.to_string(),
            });
        }
        Ok(entries)
    }

    /// Appends the entry for `response` to `request`, after checking the log as it
    /// stands (a broken log is not extended), and syncs it to disk.
    pub fn append(
        &self,
        request: &SigningRequest,
        response: &SigningResponse,
    ) -> Result<LogEntry, LogError> {
        self.record(request, response, None)
    }

    /// [`SigningLog::append`], recording the digest of the summary the operator was
    /// shown.
    pub fn append_shown(
        &self,
        request: &SigningRequest,
        response: &SigningResponse,
        shown: &super::Summary,
    ) -> Result<LogEntry, LogError> {
        self.record(request, response, Some(shown.digest()))
    }

    fn record(
        &self,
        request: &SigningRequest,
        response: &SigningResponse,
        summary: Option<String>,
    ) -> Result<LogEntry, LogError> {
        if response.request != request.fingerprint() || response.signer != request.signer {
            return Err(LogError::NotItsRequest {
                path: self.path.clone(),
            });
        }
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true).read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&self.path).map_err(|e| self.io(e))?;
        file.lock().map_err(|e| self.io(e))?;
        let len = file.metadata().map_err(|e| self.io(e))?.len();
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let (seq, prev) = match known.as_ref() {
            Some((l, seq, head)) if *l == len => (*seq, head.clone()),
            _ => {
                let entries = self.verify()?;
                (
                    entries.len() as u64,
                    entries
                        .last()
                        .map_or(GENESIS.to_string(), |e| e.hash.clone()),
                )
            }
        };
        let c = &request.covers;
        let mut entry = LogEntry {
            seq: seq + 1,
            time: response
                .signed_at
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            request: response.request.clone(),
            response: response.fingerprint(),
            profile: request.profile.to_string(),
            signer: request.signer.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
            message_id: c.message_id.clone(),
            operation: c.operation.clone(),
            summary,
            prev,
            hash: String::new(),
        };
        entry.hash = entry.computed_hash();
        let mut line = serde_json::to_vec(&entry).map_err(|e| self.io(e.into()))?;
        line.push(b'\n');
        file.write_all(&line).map_err(|e| self.io(e))?;
        file.sync_all().map_err(|e| self.io(e))?;
        *known = Some((len + line.len() as u64, entry.seq, entry.hash.clone()));
        Ok(entry)
    }
}
