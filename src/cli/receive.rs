//! `mailseal open`: verify, then apply the receiver rules, then hand over only what an
//! agent may act on. One message (stdin or `--in`), or a batch directory.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{read_input, write_output, CliResult, Failure};
use crate::error::ExitCode;
use crate::keystore::KeyStore;
use crate::mls::{Mls, MlsError, Received as MlsReceived};
use crate::replay::{Admission, Candidate, ReceiverPolicy, ReplayStore};
use crate::seal::{OpenPolicy, Opened, Opener};

#[derive(Args)]
pub(super) struct OpenArgs {
    /// The message (default: stdin).
    #[arg(long = "in", conflicts_with = "batch")]
    input: Option<PathBuf>,
    /// Output file (default: stdout).
    #[arg(long, conflicts_with = "batch")]
    out: Option<PathBuf>,
    /// Open every .eml file of this directory (in name order); one JSON result line per
    /// file on stdout, and each delivered envelope in `--out-dir`.
    #[arg(long, value_name = "DIR", requires = "out_dir")]
    batch: Option<PathBuf>,
    /// Where `--batch` writes `NAME.json` for each delivered message (`NAME.eml` with
    /// `--eml`). A file appears only once its message is recorded as accepted; a batch
    /// killed midway completes on the next run.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Write the inner message (.eml) instead of the envelope JSON.
    #[arg(long)]
    eml: bool,
    /// Write the verdict as JSON to this file.
    #[arg(long, value_name = "F", conflicts_with = "batch")]
    report: Option<PathBuf>,
    /// Read legacy CBC EnvelopedData (no integrity): the message then counts as
    /// signed only, never as authenticated encryption.
    #[arg(long)]
    allow_legacy_cbc: bool,
    /// Verify only: skip the receiver rules (replay, expiry, stream order) and record
    /// nothing. For inspecting archives; an agent must never act on such output.
    #[arg(long, conflicts_with = "batch")]
    stateless: bool,
    /// Judge expiry as of this time (RFC 3339) instead of now: for replaying archives.
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Check the outer message's DKIM signatures with these keys (a JSON object
    /// `{"SELECTOR._domainkey.DOMAIN": "v=DKIM1; k=...; p=..."}`): reported in the
    /// `--report` and on stderr, never a reason to accept or refuse.
    #[arg(long, value_name = "FILE")]
    dkim_keys: Option<PathBuf>,
}

/// What one open came to.
struct Received {
    opened: Opened,
    candidate: Candidate,
    admission: Admission,
}

/// Everything an open needs besides the message.
pub(super) struct Receiver<'a> {
    keys: &'a dyn KeyStore,
    replay: &'a dyn ReplayStore,
    policy: OpenPolicy,
    rules: ReceiverPolicy,
    now: i64,
    /// The store's MLS state, opened at the first `message/mls` mail.
    store_path: PathBuf,
    mls: std::cell::OnceCell<Mls>,
}

/// What an MLS mail came to, for the caller to report.
enum MlsOutcome {
    /// An application message, with what became of it.
    Application(Box<Candidate>, &'static str),
    /// A handshake message or a non-delivery: one status line.
    Status(String),
}

impl Receiver<'_> {
    pub(super) fn mls(&self) -> Result<&Mls, Failure> {
        if let Some(m) = self.mls.get() {
            return Ok(m);
        }
        let m = super::mls::open_state(&self.store_path)?;
        Ok(self.mls.get_or_init(|| m))
    }

    /// Receives an MLS mail. For an application message `deliver` applies the
    /// receiver rules and hands the result over, before the MLS state change commits:
    /// if it fails, the group state is as before and the message can be opened again.
    fn receive_mls(
        &self,
        raw: &[u8],
        name: &str,
        deliver: impl FnOnce(&Opened, &Candidate) -> Result<&'static str, Failure>,
    ) -> Result<MlsOutcome, Failure> {
        let fail = |e: MlsError| Failure::from("open", e);
        let receipt = self.mls()?.receive(raw, &self.policy, name).map_err(fail)?;
        let outcome = match &receipt.received {
            MlsReceived::Application(opened) => {
                let candidate =
                    Candidate::from_opened(opened).map_err(|e| Failure::from("open", e))?;
                let result = deliver(opened, &candidate)?;
                MlsOutcome::Application(Box::new(candidate), result)
            }
            other => MlsOutcome::Status(mls_status(other)),
        };
        receipt.commit().map_err(fail)?;
        Ok(outcome)
    }

    /// Verifies `raw` (signature, decryption, binding) without touching the state.
    fn verify(&self, raw: &[u8]) -> Result<(Opened, Candidate), Failure> {
        let opened = crate::dispatch::Dispatcher::with_store(self.keys)
            .open(raw, &self.policy)
            .map_err(|e| Failure::from("open", e))?;
        let candidate = Candidate::from_opened(&opened).map_err(|e| Failure::from("open", e))?;
        Ok((opened, candidate))
    }

    fn receive(&self, raw: &[u8]) -> Result<Received, Failure> {
        let (opened, candidate) = self.verify(raw)?;
        let admission = self
            .replay
            .admit(&candidate, self.now, &self.rules)
            .map_err(|e| Failure::from("open", e))?;
        Ok(Received {
            opened,
            candidate,
            admission,
        })
    }
}

fn body(opened: &Opened, eml: bool) -> Result<Vec<u8>, Failure> {
    if eml {
        return opened
            .message
            .to_rfc5322()
            .map_err(|e| Failure::from("open", e));
    }
    let mut b = opened.message.envelope_bytes().to_vec();
    b.push(b'\n');
    Ok(b)
}

fn now(flag: Option<&str>) -> Result<i64, Failure> {
    Ok(match flag {
        None => time::OffsetDateTime::now_utc(),
        Some(t) => crate::envelope::validate::parse_utc_timestamp(t).ok_or_else(|| {
            Failure::new(
                ExitCode::Usage,
                format!("--now {t}: not an RFC 3339 UTC time"),
            )
        })?,
    }
    .unix_timestamp())
}

pub(super) fn open(dir: PathBuf, state: &str, a: OpenArgs) -> CliResult {
    let opened_keys = super::store::Keys::open(&dir)?;
    let keys = opened_keys.store();
    let dkim_keys = match &a.dkim_keys {
        None => None,
        Some(path) => Some(
            crate::ext::dkim::KeyMap::from_json(&read_input(Some(path))?)
                .map_err(|e| Failure::from("--dkim-keys", e))?,
        ),
    };
    let mut policy = OpenPolicy {
        allow_legacy_cbc: a.allow_legacy_cbc,
        dkim_keys,
        ..OpenPolicy::default()
    };
    // The minimums the peers' imported Agent Cards declare.
    super::card::load_policies(&dir)?.apply(&mut policy);
    let now = now(a.now.as_deref())?;
    if a.stateless {
        let raw = read_input(a.input.as_deref())?;
        let opened = if crate::dispatch::detect_profile(&raw) == Some(crate::profile::Profile::Mls)
        {
            // Opened and then rolled back: the group state (ratchets, epoch, hold) is
            // exactly as before, so the message opens again later.
            let mls = super::mls::open_state(&dir)?;
            let receipt = mls
                .receive(&raw, &policy, "stateless")
                .map_err(|e| Failure::from("open", e))?;
            match receipt.received {
                MlsReceived::Application(o) => *o,
                other => {
                    eprintln!(
                        "mailseal: {} (--stateless: not applied)",
                        mls_status(&other)
                    );
                    return Ok(());
                }
            }
        } else {
            crate::dispatch::Dispatcher::with_store(keys)
                .open(&raw, &policy)
                .map_err(|e| Failure::from("open", e))?
        };
        dkim_line(&opened);
        if let Some(report) = &a.report {
            write_report(report, &opened, "not-checked")?;
        }
        eprintln!("mailseal: receiver rules not applied (--stateless): do not act on this");
        return write_output(a.out.as_deref(), &body(&opened, a.eml)?);
    }
    let replay = crate::replay::open_store(state).map_err(|e| Failure::from("open", e))?;
    let receiver = Receiver {
        keys,
        replay: replay.as_ref(),
        policy,
        rules: ReceiverPolicy::default(),
        now,
        store_path: dir.clone(),
        mls: std::cell::OnceCell::new(),
    };
    if let (Some(batch), Some(out_dir)) = (&a.batch, &a.out_dir) {
        return open_batch(&receiver, batch, out_dir, a.eml);
    }
    let raw = read_input(a.input.as_deref())?;
    if crate::dispatch::detect_profile(&raw) == Some(crate::profile::Profile::Mls) {
        return open_mls_one(&receiver, &raw, "stdin", &a.out, a.eml, a.report.as_deref());
    }
    let r = receiver.receive(&raw)?;
    if let Some(report) = &a.report {
        write_report(report, &r.opened, delivery(&r.admission))?;
    }
    dkim_line(&r.opened);
    // Only a message to act on reaches stdout; the others are a status line.
    if let Some(line) = status_line(&r) {
        eprintln!("mailseal: {line}");
    }
    if !matches!(r.admission, Admission::Deliver { .. }) {
        return Ok(());
    }
    write_output(a.out.as_deref(), &body(&r.opened, a.eml)?)
}

/// `mailseal mls next`: opens the next held MLS message whose epoch has come, through
/// the receiver rules like any other.
pub(super) fn mls_next(
    dir: PathBuf,
    state: &str,
    group: Option<String>,
    out: Option<PathBuf>,
    eml: bool,
) -> CliResult {
    let opened_keys = super::store::Keys::open(&dir)?;
    let replay = crate::replay::open_store(state).map_err(|e| Failure::from("mls next", e))?;
    let mut policy = OpenPolicy::default();
    super::card::load_policies(&dir)?.apply(&mut policy);
    let receiver = Receiver {
        keys: opened_keys.store(),
        replay: replay.as_ref(),
        policy,
        rules: ReceiverPolicy::default(),
        now: now(None)?,
        store_path: dir.clone(),
        mls: std::cell::OnceCell::new(),
    };
    let mls = receiver.mls()?;
    let Some(held) = mls
        .next_ready(group.as_deref())
        .map_err(|e| Failure::from("mls next", e))?
    else {
        eprintln!("mailseal: no held MLS message is ready");
        return Ok(());
    };
    let result = open_mls_one(&receiver, &held.raw, &held.name, &out, eml, None);
    if result.is_err() {
        mls.discard(&held)
            .map_err(|e| Failure::from("mls next", e))?;
    }
    result
}

/// Opens one MLS mail: an application message goes to `out` (once the receiver rules
/// admit it), anything else is a status line.
pub(super) fn open_mls_one(
    receiver: &Receiver<'_>,
    raw: &[u8],
    name: &str,
    out: &Option<PathBuf>,
    eml: bool,
    report: Option<&Path>,
) -> CliResult {
    let outcome = receiver.receive_mls(raw, name, |opened, candidate| {
        let admission = receiver
            .replay
            .admit(candidate, receiver.now, &receiver.rules)
            .map_err(|e| Failure::from("open", e))?;
        let r = Received {
            opened: opened.clone(),
            candidate: candidate.clone(),
            admission,
        };
        let r = &r;
        dkim_line(&r.opened);
        if let Some(report) = report {
            write_report(report, &r.opened, delivery(&r.admission))?;
        }
        if let Some(line) = status_line(r) {
            eprintln!("mailseal: {line}");
        }
        if matches!(r.admission, Admission::Deliver { .. }) {
            write_output(out.as_deref(), &body(&r.opened, eml)?)?;
        }
        Ok(delivery(&r.admission))
    })?;
    if let MlsOutcome::Status(line) = outcome {
        eprintln!("mailseal: {line}");
    }
    Ok(())
}

/// The status line of an MLS mail that is not an application message to deliver.
fn mls_status(r: &MlsReceived) -> String {
    match r {
        MlsReceived::Joined { group, epoch, by } => {
            format!("joined MLS group {group} at epoch {epoch} (added by {by})")
        }
        MlsReceived::Committed {
            group,
            epoch,
            by,
            removed_us,
            ready,
        } => {
            let mut line = format!("applied the commit of {by}: group {group} is at epoch {epoch}");
            if *removed_us {
                line.push_str("; it removed us from the group");
            }
            if *ready > 0 {
                line.push_str(&format!(
                    "; {ready} held message(s) can now be opened: `mailseal mls next --group {group}`"
                ));
            }
            line
        }
        MlsReceived::Proposal { group, by } => {
            format!("queued the proposal of {by} for group {group}'s next commit")
        }
        MlsReceived::GroupInfo { group } => format!(
            "a GroupInfo of group {group}: join it with `mailseal mls join --external --email ADDR --in FILE --out-dir DIR`"
        ),
        MlsReceived::KeyPackage { identity } => format!(
            "a KeyPackage of {identity}: add it with `mailseal mls add --group ID FILE`"
        ),
        MlsReceived::Duplicate { first_seen, .. } => format!(
            "duplicate: this MLS message was first seen at {}; not processed again",
            crate::replay::rfc3339(*first_seen)
        ),
        MlsReceived::Held {
            group,
            epoch,
            current,
        } => format!(
            "held: group {group} is at epoch {current} and this message is for epoch {epoch}: it needs the commits for epochs {current}..{}",
            epoch - 1
        ),
        MlsReceived::Stale { group, epoch } => format!(
            "stale: a handshake message for epoch {epoch} of group {group}, from before we joined; ignored"
        ),
        MlsReceived::Application(_) => "an application message".into(),
    }
}

/// One stderr line on the outer DKIM signatures, when they were checked.
fn dkim_line(opened: &Opened) {
    let signals = &opened.verdict.dkim;
    if signals.is_empty() {
        return;
    }
    let parts: Vec<String> = signals
        .iter()
        .map(|d| match (&d.domain, &d.reason) {
            (Some(dom), None) => format!("{} (d={dom})", d.result),
            (Some(dom), Some(r)) => format!("{} (d={dom}: {r})", d.result),
            (None, Some(r)) => format!("{} ({r})", d.result),
            (None, None) => d.result.to_string(),
        })
        .collect();
    eprintln!(
        "mailseal: dkim (transport signal only): {}",
        parts.join(", ")
    );
}

fn delivery(a: &Admission) -> &'static str {
    match a {
        Admission::Deliver { .. } => "deliver",
        Admission::Duplicate { .. } => "duplicate",
        Admission::Held { .. } => "held",
    }
}

/// What stderr says of an admission besides plain delivery.
fn status_line(r: &Received) -> Option<String> {
    let corr = r.candidate.correlation_id.as_deref().unwrap_or_default();
    match &r.admission {
        Admission::Duplicate { first_accepted } => Some(format!(
            "duplicate: message {} was accepted at {}; not delivered again",
            r.candidate.message_id,
            crate::replay::rfc3339(*first_accepted)
        )),
        Admission::Held { missing } => Some(format!(
            "held: stream {corr} waits for sequence {missing:?}; `mailseal stream next --correlation {corr}` delivers it once they arrive"
        )),
        Admission::Deliver {
            retry_of: Some(first),
            ..
        } => Some(format!(
            "retry of message {first} (same idempotency key): do not perform the operation twice"
        )),
        Admission::Deliver { released, .. } if *released > 0 => Some(format!(
            "{released} held event(s) of stream {corr} follow this one: `mailseal stream next --correlation {corr}`"
        )),
        Admission::Deliver { .. } => None,
    }
}

fn write_report(path: &Path, opened: &Opened, delivery: &str) -> CliResult {
    let v = &opened.verdict;
    let json = serde_json::json!({
        "profile": v.profile.map(|p| p.token()),
        "protection": format!("{:?}", v.protection),
        "signer": v.signer.as_ref().map(|s| s.replay_id()),
        "algorithm": v.algorithm,
        "protectedHeaders": v.protected_headers,
        "outerHeadersMatched": v.outer_headers_matched,
        "envelopeSha256": crate::keystore::hex(&opened.message.content_digest()),
        "dkim": v.dkim,
        "delivery": delivery,
    });
    write_output(
        Some(path),
        &serde_json::to_vec_pretty(&json).unwrap_or_default(),
    )
}

/// Opens every `.eml` of `dir`. For each message the output is first written as
/// `NAME.json.partial`, then the message is admitted (the commit that makes it
/// accepted), then the file is renamed into place: a kill between the last two leaves a
/// `.partial` that the next run, finding the message a duplicate, completes. So each
/// accepted message ends up in `out_dir` exactly once. An `out_dir` serves one process
/// at a time.
fn open_batch(r: &Receiver<'_>, dir: &Path, out_dir: &Path, eml: bool) -> CliResult {
    let io = |what: &Path, e: std::io::Error| {
        Failure::new(ExitCode::Other, format!("{}: {e}", what.display()))
    };
    std::fs::create_dir_all(out_dir).map_err(|e| io(out_dir, e))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "eml"))
        .collect();
    files.sort();
    let bar = indicatif::ProgressBar::new(files.len() as u64);
    let mut first_failure: Option<ExitCode> = None;
    let mut stdout = std::io::stdout().lock();
    let mut emit = |line: serde_json::Value| {
        use std::io::Write;
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .map_err(|e| Failure::new(ExitCode::Other, format!("stdout: {e}")))
    };
    for path in &files {
        bar.inc(1);
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = path.display().to_string();
        let line = read_input(Some(path)).and_then(|raw| batch_one(r, &raw, &name, out_dir, eml));
        emit(result_line(&file, line, &mut first_failure))?;
        // A Commit may have released held MLS messages: open them now, under the
        // names they arrived with.
        if r.mls.get().is_some() {
            while let Some(held) = r
                .mls()?
                .next_ready(None)
                .map_err(|e| Failure::from("open", e))?
            {
                let line = batch_one(r, &held.raw, &held.name, out_dir, eml);
                if line.is_err() {
                    r.mls()?
                        .discard(&held)
                        .map_err(|e| Failure::from("open", e))?;
                }
                let line = line.map(|(c, result)| {
                    (
                        c,
                        if result == "deliver" {
                            "deliver-released"
                        } else {
                            result
                        },
                    )
                });
                emit(result_line(&held.name, line, &mut first_failure))?;
            }
        }
    }
    bar.finish_and_clear();
    match first_failure {
        None => Ok(()),
        Some(code) => Err(Failure::new(
            code,
            "some messages of the batch were refused (see their result lines)",
        )),
    }
}

/// One JSON result line of a batch.
fn result_line(
    file: &str,
    outcome: Result<(Option<Candidate>, &'static str), Failure>,
    first_failure: &mut Option<ExitCode>,
) -> serde_json::Value {
    match outcome {
        Ok((Some(c), result)) => serde_json::json!({
            "file": file,
            "result": result,
            "signer": c.signer,
            "messageId": c.message_id,
            "correlationId": c.correlation_id,
            "sequence": c.sequence,
        }),
        Ok((None, result)) => serde_json::json!({"file": file, "result": result}),
        Err(f) => {
            first_failure.get_or_insert(f.code);
            serde_json::json!({
                "file": file,
                "result": "refused",
                "exit": f.code.as_u8(),
                "error": f.line,
            })
        }
    }
}

/// Opens one message of a batch into `out_dir/NAME.json` (or `.eml`).
fn batch_one(
    r: &Receiver<'_>,
    raw: &[u8],
    name: &str,
    out_dir: &Path,
    eml: bool,
) -> Result<(Option<Candidate>, &'static str), Failure> {
    let target = out_dir.join(format!("{name}.{}", if eml { "eml" } else { "json" }));
    let partial = out_dir.join(format!("{name}.partial"));
    if crate::dispatch::detect_profile(raw) == Some(crate::profile::Profile::Mls) {
        return match r.receive_mls(raw, name, |opened, candidate| {
            admit_into(r, opened, candidate, &target, &partial, eml)
        })? {
            MlsOutcome::Application(c, result) => Ok((Some(*c), result)),
            MlsOutcome::Status(line) => Ok((None, mls_result(&line))),
        };
    }
    let (opened, candidate) = r.verify(raw)?;
    let result = admit_into(r, &opened, &candidate, &target, &partial, eml)?;
    Ok((Some(candidate), result))
}

/// The result word of an MLS mail that delivered nothing.
fn mls_result(status: &str) -> &'static str {
    ["joined", "applied", "queued", "duplicate", "held", "stale"]
        .into_iter()
        .find(|w| status.starts_with(w))
        .unwrap_or("handshake")
}

/// The output is first written to `partial`, then the message is admitted (the commit
/// that makes it accepted), then `partial` is renamed to `target`.
fn admit_into(
    r: &Receiver<'_>,
    opened: &Opened,
    candidate: &Candidate,
    target: &Path,
    partial: &Path,
    eml: bool,
) -> Result<&'static str, Failure> {
    let io = |what: &Path, e: std::io::Error| {
        Failure::new(ExitCode::Other, format!("{}: {e}", what.display()))
    };
    let out = body(opened, eml)?;
    // A partial output of this very message left by a killed run: the run may have
    // been killed after the message was accepted.
    let leftover = !target.exists() && partial_matches(partial, &out);
    write_synced(partial, &out).map_err(|e| io(partial, e))?;
    let admission = r.replay.admit(candidate, r.now, &r.rules);
    Ok(match admission {
        Ok(Admission::Deliver { .. }) => {
            std::fs::rename(partial, target).map_err(|e| io(target, e))?;
            "deliver"
        }
        Ok(Admission::Duplicate { .. }) if leftover => {
            // Accepted by a run that was killed before the rename.
            std::fs::rename(partial, target).map_err(|e| io(target, e))?;
            "deliver-resumed"
        }
        Ok(a) => {
            let _ = std::fs::remove_file(partial);
            delivery(&a)
        }
        Err(e) => {
            let _ = std::fs::remove_file(partial);
            return Err(Failure::from("open", e));
        }
    })
}

/// Writes and flushes to disk, so a later rename never exposes a short file. Owner-only:
/// it is decrypted content.
fn write_synced(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(path)?;
    f.write_all(data)?;
    f.sync_all()
}

fn partial_matches(partial: &Path, out: &[u8]) -> bool {
    std::fs::read(partial).is_ok_and(|b| b == out)
}
