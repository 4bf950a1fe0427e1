//! Running an implementation over the corpus: the adapter protocol, the built-in
//! adapter for this crate, and the report (a table by rule, JUnit XML).
//!
//! The protocol (docs/corpus.md, "Adapter protocol"): the adapter command is run with the
//! case directory as its last argument and prints one JSON object on stdout:
//! `{"verdict": "accept" | "refuse" | "duplicate" | "held" | "skip", "layer": "full" |
//! "crypto", "code": "...", "exit": N, "reason": "..."}`. A `full` adapter is judged
//! on the verdict (and on the code and exit status when it gives them); a `crypto`
//! adapter checks only signatures and decryption and is judged on the case's `crypto`
//! label (accept for `pass`, refuse for `fail`); `skip` says the adapter cannot judge
//! this case (an OpenSSL adapter given an OpenPGP message).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde::Deserialize;

use super::case::{self, CaseFiles, Crypto, Expected, Verdict};
use super::CorpusError;
use crate::error::Classify;
use crate::receiver::{Clock, Outcome, Receiver};

/// What an implementation decided about one case.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Judgement {
    /// `accept`, `refuse`, `duplicate`, `held` or `skip`.
    pub verdict: String,
    /// `full` (every rule) or `crypto` (signatures and decryption only).
    #[serde(default)]
    pub layer: Option<String>,
    /// The refusal's verdict code, if the implementation has ours.
    #[serde(default)]
    pub code: Option<String>,
    /// Its exit status, if it is a command line with ours.
    #[serde(default)]
    pub exit: Option<u8>,
    /// Why, in words.
    #[serde(default)]
    pub reason: Option<String>,
}

/// This crate's judgement in the form the generator labels with.
pub(crate) struct Own {
    pub(crate) verdict: Verdict,
    pub(crate) code: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) exit: u8,
    pub(crate) detail: Option<String>,
}

/// Judges a case with this crate: a [`Receiver`] over the receiving party's keys (and
/// a copy of its MLS state) at the case's time, the prior messages received and
/// committed first.
pub(crate) fn judge(case: &CaseFiles) -> Own {
    let CaseFiles {
        expected,
        message,
        prior,
        keys,
        mls_state,
    } = case;
    let fail = |detail: String| Own {
        verdict: Verdict::Refuse,
        code: Some("corpus.setup".into()),
        kind: None,
        exit: 1,
        detail: Some(detail),
    };
    let store = match super::parties::store_of(keys) {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    let now = time::OffsetDateTime::parse(
        &expected.now,
        &time::format_description::well_known::Rfc3339,
    )
    .map(|t| t.unix_timestamp())
    .unwrap_or(super::NOW);
    // The case's state is its own (its prior messages and request records), never the
    // scratch store's.
    let mut builder = Receiver::builder(&store.store)
        .replay_in_memory()
        .policy(expected.policy.open_policy(message))
        .clock(Clock::Fixed(now));
    // A copy: judging a case changes the state (a message seen, a Commit applied).
    // Opened when the first MLS message needs it, as `mailseal open` opens it: a
    // state that does not load refuses that message (`mls.state`, exit 1).
    let state_dir = match mls_state {
        Some(state) => {
            let copied = tempfile::tempdir().and_then(|dir| {
                std::fs::write(dir.path().join(crate::mls::STATE_FILE), state)?;
                Ok(dir)
            });
            match copied {
                Ok(dir) => Some(dir),
                Err(e) => return fail(format!("the MLS state cannot be copied: {e}")),
            }
        }
        None => None,
    };
    if let Some(dir) = &state_dir {
        let path = dir.path().to_path_buf();
        builder = builder.mls_lazy(move || crate::mls::Mls::open(&path));
    }
    let mut receiver = builder.build();
    for sent in &expected.sent {
        if let Err(e) = receiver.replay().record_request(&sent.record()) {
            return fail(format!("the request record cannot be written: {e}"));
        }
    }
    for (i, p) in prior.iter().enumerate() {
        let committed = receiver.receive(p).and_then(|incoming| incoming.commit());
        if let Err(e) = committed {
            return fail(format!("prior message {} is refused: {e}", i + 1));
        }
    }
    // Bound first: the outcome borrows the receiver, which borrows the store.
    #[allow(clippy::let_and_return)]
    let own = match receiver.receive(message) {
        Ok(incoming) => {
            let verdict = match incoming.outcome() {
                Outcome::Deliver { .. } => Verdict::Accept,
                Outcome::Duplicate { .. } => Verdict::Duplicate,
                Outcome::Held(_) => Verdict::Held,
                // An MLS handshake (a KeyPackage, a Welcome, a Commit) taken in.
                _ => Verdict::Accept,
            };
            Own {
                verdict,
                code: None,
                kind: None,
                exit: 0,
                detail: None,
            }
        }
        Err(e) => Own {
            verdict: Verdict::Refuse,
            code: Some(e.code()),
            kind: Some(e.kind().as_str().into()),
            exit: super::exit_status(e.kind()),
            detail: Some(e.to_string()),
        },
    };
    own
}

/// An implementation under test.
pub trait Adapter {
    /// Its name in the report.
    fn name(&self) -> String;
    /// Its judgement of the case in `dir`.
    fn judge(&self, dir: &Path) -> Result<Judgement, CorpusError>;
}

/// This crate, in-process: a [`Receiver`] per case.
#[derive(Clone, Copy, Debug, Default)]
pub struct MailsealAdapter;

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Accept => "accept",
        Verdict::Refuse => "refuse",
        Verdict::Duplicate => "duplicate",
        Verdict::Held => "held",
    }
}

impl Adapter for MailsealAdapter {
    fn name(&self) -> String {
        "mailseal".into()
    }
    fn judge(&self, dir: &Path) -> Result<Judgement, CorpusError> {
        let own = judge(&case::read(dir)?);
        Ok(Judgement {
            verdict: verdict_word(own.verdict).into(),
            layer: Some("full".into()),
            code: own.code,
            exit: Some(own.exit),
            reason: own.detail,
        })
    }
}

/// Any program that speaks the adapter protocol: `program args... CASE_DIR`.
#[derive(Clone, Debug)]
pub struct CommandAdapter {
    /// The program and its first arguments.
    pub command: Vec<String>,
}

impl Adapter for CommandAdapter {
    fn name(&self) -> String {
        self.command.join(" ")
    }
    fn judge(&self, dir: &Path) -> Result<Judgement, CorpusError> {
        let case_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bad = |reason: String| CorpusError::BadCase {
            case: case_name.clone(),
            reason,
        };
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| bad("no adapter command".into()))?;
        let out = Command::new(program)
            .args(args)
            .arg(dir)
            .output()
            .map_err(|e| bad(format!("{program}: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .unwrap_or("");
        serde_json::from_str(line).map_err(|e| {
            bad(format!(
                "the adapter printed no verdict JSON ({e}); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ))
        })
    }
}

/// How one case went.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaseResult {
    /// The implementation decided as labelled.
    Pass,
    /// It did not: what it said.
    Fail(String),
    /// It cannot judge the case (or the case's rule lies above its layer).
    Skip(String),
}

/// The run over a corpus.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Report {
    /// The adapter's name.
    pub adapter: String,
    /// Each case: its label and how it went, in case order.
    pub cases: Vec<(Expected, CaseResult)>,
    /// The rules a `crypto` adapter passed only at its layer: their cases refuse
    /// above it (binding, MIME, envelope, receiver state), which it cannot judge.
    pub above_its_layer: std::collections::BTreeSet<String>,
}

/// Runs `adapter` over every case of the corpus in `dir`.
pub fn run(dir: &Path, adapter: &dyn Adapter) -> Result<Report, CorpusError> {
    run_with_progress(dir, adapter, &mut |_| {})
}

/// [`run`], telling `progress` after each case is judged.
pub fn run_with_progress(
    dir: &Path,
    adapter: &dyn Adapter,
    progress: &mut dyn FnMut(super::Progress),
) -> Result<Report, CorpusError> {
    let root = dir.join("cases");
    let mut names: Vec<_> = std::fs::read_dir(&root)
        .map_err(super::io(&root))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.path())
        .collect();
    names.sort();
    let mut report = Report {
        adapter: adapter.name(),
        cases: Vec::with_capacity(names.len()),
        above_its_layer: Default::default(),
    };
    let total = names.len() as u64;
    for (done, path) in names.into_iter().enumerate() {
        progress(super::Progress {
            phase: "judging",
            done: done as u64,
            total,
        });
        let expected = case::read(&path)?.expected;
        let result = match adapter.judge(&path) {
            Ok(j) => {
                if j.layer.as_deref() == Some("crypto")
                    && expected.crypto == Crypto::Pass
                    && expected.verdict != Verdict::Accept
                {
                    report.above_its_layer.insert(expected.rule.clone());
                }
                compare(&expected, &j)
            }
            Err(e) => CaseResult::Fail(e.to_string()),
        };
        report.cases.push((expected, result));
    }
    progress(super::Progress {
        phase: "judging",
        done: total,
        total,
    });
    Ok(report)
}

fn compare(expected: &Expected, got: &Judgement) -> CaseResult {
    if got.verdict == "skip" {
        return CaseResult::Skip(
            got.reason
                .clone()
                .unwrap_or_else(|| "the adapter cannot judge it".into()),
        );
    }
    if got.layer.as_deref() == Some("crypto") {
        let want = match expected.crypto {
            Crypto::Pass => "accept",
            Crypto::Fail => "refuse",
        };
        return if got.verdict == want {
            CaseResult::Pass
        } else {
            CaseResult::Fail(format!(
                "crypto layer: labelled {want}, said {}{}",
                got.verdict,
                got.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ))
        };
    }
    let want = verdict_word(expected.verdict);
    if got.verdict != want {
        return CaseResult::Fail(format!(
            "labelled {want}{}, said {}{}{}",
            expected
                .code
                .as_deref()
                .map(|c| format!(" {c}"))
                .unwrap_or_default(),
            got.verdict,
            got.code
                .as_deref()
                .map(|c| format!(" {c}"))
                .unwrap_or_default(),
            got.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ));
    }
    if let (Some(code), Some(want)) = (&got.code, &expected.code) {
        if code != want {
            return CaseResult::Fail(format!(
                "refused as labelled, but with code {code}, not {want}"
            ));
        }
    }
    if let Some(exit) = got.exit {
        if exit != expected.exit {
            return CaseResult::Fail(format!("exit status {exit}, not {}", expected.exit));
        }
    }
    CaseResult::Pass
}

impl Report {
    /// (passed, failed, skipped).
    pub fn totals(&self) -> (usize, usize, usize) {
        let mut t = (0, 0, 0);
        for (_, r) in &self.cases {
            match r {
                CaseResult::Pass => t.0 += 1,
                CaseResult::Fail(_) => t.1 += 1,
                CaseResult::Skip(_) => t.2 += 1,
            }
        }
        t
    }

    /// The table by rule: rule, cases, passed, failed, skipped; then every failure.
    pub fn table(&self) -> String {
        let mut by_rule: BTreeMap<&str, (usize, usize, usize, usize)> = BTreeMap::new();
        for (e, r) in &self.cases {
            let row = by_rule.entry(e.rule.as_str()).or_default();
            row.0 += 1;
            match r {
                CaseResult::Pass => row.1 += 1,
                CaseResult::Fail(_) => row.2 += 1,
                CaseResult::Skip(_) => row.3 += 1,
            }
        }
        let width = by_rule.keys().map(|k| k.len()).max().unwrap_or(4).max(4);
        let mut out = format!("{:<width$}  cases  pass  fail  skip\n", "rule");
        for (rule, (n, p, f, s)) in &by_rule {
            out.push_str(&format!("{rule:<width$}  {n:>5}  {p:>4}  {f:>4}  {s:>4}\n"));
        }
        let (p, f, s) = self.totals();
        out.push_str(&format!(
            "{:<width$}  {:>5}  {p:>4}  {f:>4}  {s:>4}\n",
            "total",
            self.cases.len()
        ));
        if !self.above_its_layer.is_empty() {
            out.push_str("judged at the cryptographic layer only; rules above it this adapter cannot judge:\n");
            for rule in &self.above_its_layer {
                out.push_str(&format!("  {rule}\n"));
            }
        }
        for (e, r) in &self.cases {
            if let CaseResult::Fail(why) = r {
                out.push_str(&format!("FAIL {}: {why}\n", e.id));
            }
        }
        out
    }

    /// JUnit XML: one test suite, one test case per corpus case (class name: its
    /// rule).
    pub fn junit(&self) -> String {
        let (_, f, s) = self.totals();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        out.push_str(&format!(
            "<testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" skipped=\"{s}\">\n",
            xml(&format!("MailA2A corpus: {}", self.adapter)),
            self.cases.len()
        ));
        for (e, r) in &self.cases {
            out.push_str(&format!(
                "  <testcase classname=\"{}\" name=\"{}\"",
                xml(&e.rule),
                xml(&e.id)
            ));
            match r {
                CaseResult::Pass => out.push_str("/>\n"),
                CaseResult::Fail(why) => out.push_str(&format!(
                    "><failure message=\"{}\"/></testcase>\n",
                    xml(why)
                )),
                CaseResult::Skip(why) => out.push_str(&format!(
                    "><skipped message=\"{}\"/></testcase>\n",
                    xml(why)
                )),
            }
        }
        out.push_str("</testsuite>\n");
        out
    }
}

/// Text as an XML attribute value.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}
