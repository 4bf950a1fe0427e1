//! The MailA2A conformance corpus: labelled cases an implementation runs through, and
//! the runner that judges it.
//!
//! [`generate`] writes one directory per case: the message, the receiving party's keys
//! (`keys/`, described by `keys/keys.json`), the messages it must have received before
//! (`prior-N.eml`), for an MLS case its MLS state ([`MLS_STATE`]) and the same
//! receiver in a form any MLS implementation rebuilds it from ([`MLS_JOIN`],
//! [`MlsJoin`]), and
//! `expected.json`: accept or refuse, the verdict code
//! ([`crate::ReceiveError::code`]), the command line's exit status, and what the
//! cryptographic layer alone decides (so a tool that checks only signatures and
//! decryption can be judged on what it can judge). The label schema is
//! `schemas/corpus-case.schema.json`.
//!
//! Every case is sealed with valid cryptography for Bob, the receiving party: the
//! hostile bytes (a broken MIME structure, an envelope that breaks a binding rule, a
//! signer who is not the sender) sit below the signature and the encryption, where a
//! reader that trusts its crypto layer meets them.
//!
//! `run` feeds each case to an [`Adapter`] (this crate in-process, or any command
//! that speaks the adapter protocol of docs/corpus.md) and reports per rule, with JUnit
//! XML for CI.
//!
//! The same seed gives the same bytes, every file of every case: [`generate`] runs
//! inside a seeded scope (the crate-private `entropy` module), in which content keys,
//! nonces, ephemeral keys, MIME boundaries, OpenPGP signature salts and session keys,
//! ECDSA nonces (RFC 6979), the attacker's S/MIME keys, and openmls' randomness and
//! HPKE seals (`mls::crypto`) come from one stream keyed by the seed; the parties' keys
//! are the public RFC 9216 and OpenPGP sample sets, the attacker's OpenPGP key is kept
//! in the repository, and every time is fixed ([`NOW`]): the dates of the mails, of
//! the MLS bindings, of every KeyPackage and leaf (those a group adds last a century,
//! as openmls judges them by the system clock wherever a Commit is processed), and the
//! times openmls stamps in its stored state, which the copy a case carries reads as
//! [`NOW`] (`mls::state_as_of`).

mod case;
mod cases;
mod mutate;
mod parties;
mod rng;
mod run;

use std::path::{Path, PathBuf};

pub use case::{
    CasePolicy, Crypto, Expected, KeyFile, KeyRole, MlsJoin, Verdict, MLS_JOIN, MLS_STATE,
};
pub use mutate::{mutate, Layer, MutateOptions};
pub use run::{
    run, run_with_progress, Adapter, CaseResult, CommandAdapter, Judgement, MailsealAdapter, Report,
};

use crate::error::ErrorKind;

/// The time every case is judged at (the receiver's clock), Unix seconds:
/// 2026-06-01T00:00:00Z.
pub const NOW: i64 = 1_780_272_000;

/// Why the corpus could not be written or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CorpusError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A case could not be sealed.
    #[error("case {case}: {source}")]
    Seal {
        /// The case.
        case: String,
        /// The error.
        #[source]
        source: crate::seal::SealError,
    },
    /// A party's keys could not be made or stored.
    #[error("party {party}: {reason}")]
    Party {
        /// The party.
        party: &'static str,
        /// Why.
        reason: String,
    },
    /// A case is not what its label says before it is written (a valid case that
    /// does not validate): a bug of the generator, never written out.
    #[error("case {case}: {reason}")]
    Inconsistent {
        /// The case.
        case: String,
        /// Why.
        reason: String,
    },
    /// A case directory cannot be read back.
    #[error("case {case}: {reason}")]
    BadCase {
        /// The case.
        case: String,
        /// Why.
        reason: String,
    },
}

pub(crate) fn io(path: &Path) -> impl Fn(std::io::Error) -> CorpusError + '_ {
    move |source| CorpusError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What [`generate`] wrote.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Summary {
    /// How many cases.
    pub cases: usize,
    /// How many of them are to be accepted.
    pub accept: usize,
    /// The distinct verdict codes the refusals are labelled with.
    pub codes: Vec<String>,
}

/// Where a long corpus operation is, for whoever shows it (the command line's progress
/// bar): `done` of `total` steps of `phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// `building` (one step per family of cases), `writing` (one per case) or
    /// `judging` (one per case, [`run_with_progress`]).
    pub phase: &'static str,
    /// Steps done.
    pub done: u64,
    /// Steps in all.
    pub total: u64,
}

/// Writes the corpus for `seed` into `out` (created; existing case directories are
/// replaced), one directory per case under `out/cases/`, and `out/index.json`.
pub fn generate(out: &Path, seed: u64) -> Result<Summary, CorpusError> {
    generate_with_progress(out, seed, &mut |_| {})
}

/// [`generate`], telling `progress` after each family of cases is built and each case
/// written. The corpus is the same bytes with or without it.
pub fn generate_with_progress(
    out: &Path,
    seed: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, CorpusError> {
    // Every random value of every case (the attacker's keys, content keys, nonces,
    // salts, boundaries) from one stream keyed by the seed, on this thread only and
    // for this call only: see `crate::entropy` for why that never reaches a sealer
    // outside the corpus.
    let _seeded = crate::entropy::Seeded::new(seed, "corpus generate");
    let parties = parties::Parties::new()?;
    let cases = cases::all(&parties, seed, progress)?;
    let root = out.join("cases");
    if root.exists() {
        std::fs::remove_dir_all(&root).map_err(io(&root))?;
    }
    std::fs::create_dir_all(&root).map_err(io(&root))?;
    let mut index = Vec::with_capacity(cases.len());
    let mut codes: Vec<String> = Vec::new();
    for (done, c) in cases.iter().enumerate() {
        c.write(&root.join(&c.expected.id))?;
        progress(Progress {
            phase: "writing",
            done: done as u64 + 1,
            total: cases.len() as u64,
        });
        index.push(serde_json::json!({
            "id": c.expected.id,
            "rule": c.expected.rule,
            "verdict": c.expected.verdict,
        }));
        if let Some(code) = &c.expected.code {
            codes.push(code.clone());
        }
    }
    codes.sort();
    codes.dedup();
    let index_json = serde_json::json!({
        "corpus": "mailseal MailA2A conformance corpus",
        "version": 1,
        "seed": seed,
        "now": crate::replay::rfc3339(NOW),
        "cases": index,
    });
    let path = out.join("index.json");
    std::fs::write(&path, pretty(&index_json)).map_err(io(&path))?;
    Ok(Summary {
        cases: cases.len(),
        accept: cases
            .iter()
            .filter(|c| c.expected.verdict == Verdict::Accept)
            .count(),
        codes,
    })
}

/// The exit status of `mailseal open` for a refusal of this kind: the command line's
/// contract (DESIGN "Command line"), written into the labels so that a tool is judged
/// on it; a test checks it against the command line's own mapping.
pub fn exit_status(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::InvalidArgument => 2,
        ErrorKind::Malformed => 3,
        ErrorKind::Authentication => 4,
        ErrorKind::NoUsableKey => 5,
        ErrorKind::Policy => 6,
        _ => 1,
    }
}

/// JSON as the corpus writes it: two-space indented, a final line end.
pub(crate) fn pretty(v: &serde_json::Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).unwrap_or_default();
    out.push(b'\n');
    out
}
