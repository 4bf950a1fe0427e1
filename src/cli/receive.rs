//! `mailseal open`: verify, then apply the receiver rules, then hand over only what an
//! agent may act on. One message (stdin or `--in`), or a batch directory.

use std::path::{Path, PathBuf};

use clap::Args;

use super::exit::ExitCode;
use super::home::Home;
use super::store::Keys;
use super::{read_input, write_output, CliResult, Failure};
use crate::receiver::deliver::{self, Delivered, DeliveryDir, Format};
use crate::receiver::{Clock, Delivery, Handshake, HeldReason, Incoming, Outcome, Receiver};
use crate::seal::{OpenPolicy, Opened};

#[derive(Args)]
pub(super) struct OpenArgs {
    /// The message (default: stdin); `--in FILE` says the same.
    #[arg(value_name = "FILE", conflicts_with_all = ["input", "batch"])]
    file: Option<PathBuf>,
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
    /// Also accept signed messages addressed to ADDR (a list or an alias we are
    /// reached through). By default a signed message must name one of the store's own
    /// identities in its protected To or Cc: one signed for someone else and forwarded
    /// is refused (exit 6).
    #[arg(long = "also-addressed-to", value_name = "ADDR")]
    also_addressed_to: Vec<String>,
    /// Accept unsigned messages from ADDR. By default every message, of every kind,
    /// must at least be signed (exit 6 otherwise); a peer's Agent Card can demand more
    /// and then wins over this.
    #[arg(long = "allow-unsigned-from", value_name = "ADDR")]
    allow_unsigned_from: Vec<String>,
    /// Open signed mail without header protection from ADDR, or from every address of
    /// a domain (`@DOMAIN`): a legacy signer (`openssl cms -sign` or `gpg --sign` of
    /// the A2A part alone), whose To, Cc and Date are outer, unsigned fields. Its
    /// outer From must still be the signer, and its lifetime is taken from the
    /// envelope's createdAt/expiresAt or the signature's time, never the outer Date.
    /// By default such mail is refused (exit 6).
    #[arg(long = "allow-legacy-from", value_name = "ADDR|@DOMAIN")]
    allow_legacy_from: Vec<String>,
    /// Open our own copy of a message we sent: one signed by one of the store's own
    /// identities that does not name us in its protected To or Cc. By default it is
    /// refused (exit 6) as a reflection: a recipient mailing our message back to us.
    #[arg(long)]
    own_copy: bool,
    /// Accept a response, error or stream event that answers no request recorded in
    /// this state (a receiver whose requests another system sends). By default only
    /// answers to requests `seal` recorded here are delivered, from an agent the
    /// request went to and before it expired (exit 6 otherwise).
    #[arg(long)]
    allow_unsolicited: bool,
    /// Refuse signed mail without header protection even from --allow-legacy-from
    /// peers.
    #[arg(long)]
    require_header_protection: bool,
    /// As --require-header-protection, for mail from ADDR only.
    #[arg(long = "require-header-protection-from", value_name = "ADDR")]
    require_header_protection_from: Vec<String>,
    /// Refuse an S/MIME signer unless every certificate on its path has a current CRL
    /// of its issuer in the store (`key import CRL-FILE`). Held CRLs are always
    /// checked; nothing is fetched.
    #[arg(long)]
    require_crl: bool,
}

/// The receiver of a command: the store's keys, the peers' cards, the MLS state
/// (opened at the first MLS mail), and the replay state unless `stateless`.
fn receiver<'a>(
    home: &Home,
    keys: &'a Keys,
    state: Option<&str>,
    policy: OpenPolicy,
    clock: Clock,
    unsolicited: crate::replay::Unsolicited,
) -> Result<Receiver<'a>, Failure> {
    let rules = crate::replay::ReceiverPolicy {
        unsolicited,
        ..Default::default()
    };
    let mut builder = Receiver::builder(keys.store())
        .policy(policy)
        .rules(rules)
        .peers(&home.load_policies()?)
        .clock(clock)
        .mls_lazy(home.lazy_mls());
    builder = match state {
        Some(state) => builder
            .replay_boxed(crate::replay::open_store(state).map_err(|e| Failure::from("open", e))?),
        // `--stateless`: nothing recorded anywhere.
        None => builder.replay_in_memory(),
    };
    Ok(builder.build())
}

fn format(eml: bool) -> Format {
    if eml {
        Format::Eml
    } else {
        Format::EnvelopeJson
    }
}

fn clock(flag: Option<&str>) -> Result<Clock, Failure> {
    Ok(match flag {
        None => Clock::System,
        Some(t) => Clock::Fixed(
            crate::envelope::validate::parse_utc_timestamp(t)
                .ok_or_else(|| {
                    Failure::new(
                        ExitCode::Usage,
                        format!("--now {t}: not an RFC 3339 UTC time"),
                    )
                })?
                .unix_timestamp(),
        ),
    })
}

pub(super) fn open(dir: PathBuf, state: &str, a: OpenArgs) -> CliResult {
    let keys = super::store::Keys::open(&dir)?;
    let home = Home::new(&dir, Some(state));
    let dkim_keys = match &a.dkim_keys {
        None => None,
        Some(path) => Some(
            crate::dkim::KeyMap::from_json(&read_input(Some(path))?)
                .map_err(|e| Failure::from("--dkim-keys", e))?,
        ),
    };
    let mut policy = OpenPolicy {
        allow_legacy_cbc: a.allow_legacy_cbc,
        dkim_keys,
        our_addresses: a.also_addressed_to.clone(),
        require_header_protection: a.require_header_protection,
        require_header_protection_from: a.require_header_protection_from.clone(),
        require_crl: a.require_crl,
        own_copy: a.own_copy,
        ..OpenPolicy::default()
    };
    policy.allow_unsigned_from(&a.allow_unsigned_from);
    for mark in &a.allow_legacy_from {
        policy
            .legacy_peers
            .add(mark)
            .map_err(|e| Failure::new(ExitCode::Usage, format!("--allow-legacy-from: {e}")))?;
    }
    let clock = clock(a.now.as_deref())?;
    let unsolicited = if a.allow_unsolicited {
        crate::replay::Unsolicited::Accept
    } else {
        crate::replay::Unsolicited::Refuse
    };
    let report = a.report.as_deref();
    if a.stateless {
        let receiver = receiver(&home, &keys, None, policy, clock, unsolicited)?;
        let raw = read_input(a.input.as_deref().or(a.file.as_deref()))?;
        let profile = crate::dispatch::detect_profile(&raw);
        let outcome = receiver
            .verify_owned(raw)
            .map_err(|e| refused(report, Some(e.code()), profile, None, e))?;
        let Outcome::Deliver { delivery, .. } = &outcome else {
            eprintln!(
                "mailseal: {} (--stateless: not applied)",
                status_line(&outcome, &dir).unwrap_or_default()
            );
            return Ok(());
        };
        verdict_lines(&delivery.opened);
        if let Some(report) = report {
            write_report(report, &delivery.opened, "not-checked", None)?;
        }
        eprintln!("mailseal: receiver rules not applied (--stateless): do not act on this");
        return write_delivery(a.out.as_deref(), delivery, a.eml);
    }
    let mut receiver = receiver(&home, &keys, Some(state), policy, clock, unsolicited)?;
    if let (Some(batch), Some(out_dir)) = (&a.batch, &a.out_dir) {
        return open_batch(&mut receiver, batch, out_dir, a.eml);
    }
    let raw = read_input(a.input.as_deref().or(a.file.as_deref()))?;
    let profile = crate::dispatch::detect_profile(&raw);
    let incoming = receiver
        .receive_owned(raw, "stdin")
        .map_err(|e| refused(report, Some(e.code()), profile, None, e))?;
    hand_over(incoming, a.out.as_deref(), a.eml, report, &dir)
}

/// Writes the output of `delivery` to `out` (atomically) or stdout, from the opened
/// message's own buffer.
fn write_delivery(out: Option<&Path>, delivery: &Delivery, eml: bool) -> CliResult {
    let written = match out {
        Some(path) => {
            deliver::write_file_atomically_with(path, |w| format(eml).write_to(delivery, w))
        }
        None => {
            let mut w = std::io::stdout().lock();
            format(eml).write_to(delivery, &mut w).and_then(|()| {
                std::io::Write::flush(&mut w).map_err(|source| deliver::DeliverError::Io {
                    path: "-".into(),
                    source,
                })
            })
        }
    };
    written.map_err(|e| Failure::from("open", e))
}

/// Reports an incoming message, writes its output (durably, when to a file) and then
/// commits it: only a message to act on reaches the output, the others are a status
/// line.
fn hand_over(
    incoming: Incoming<'_>,
    out: Option<&Path>,
    eml: bool,
    report: Option<&Path>,
    dir: &Path,
) -> CliResult {
    // What a refusal on commit can still report of the verdict.
    let mut known = None;
    if let Some(d) = incoming.outcome().delivery() {
        verdict_lines(&d.opened);
        if let Some(report) = report {
            let first_accepted = match incoming.outcome() {
                Outcome::Duplicate { first_accepted, .. } => Some(*first_accepted),
                _ => None,
            };
            write_report(report, &d.opened, incoming.outcome().word(), first_accepted)?;
            known = Some((d.opened.verdict.profile, verdict_fields(&d.opened)));
        }
    }
    let (profile, known) = known.unzip();
    let profile = profile.flatten();
    let outcome = match out {
        // Staged, committed, published: exactly once across crashes.
        Some(path) => {
            deliver::deliver_to(incoming, path, format(eml))
                .map_err(|e| {
                    let code = match &e {
                        deliver::DeliverError::Receive(r) => Some(r.code()),
                        _ => None,
                    };
                    refused(report, code, profile, known.clone(), e)
                })?
                .outcome
        }
        // Staged in memory, committed, then written: a concurrent `open` of the same
        // message (another process on the same state) commits second, is told it is a
        // duplicate, and prints nothing. A crash between the commit and the write
        // loses this output; `--out` is the durable path.
        None => {
            let staged = match incoming.outcome() {
                Outcome::Deliver { delivery, .. } => Some(
                    format(eml)
                        .render(delivery)
                        .map_err(|e| Failure::from("open", e))?,
                ),
                _ => None,
            };
            let outcome = incoming
                .commit()
                .map_err(|e| refused(report, Some(e.code()), profile, known, e))?;
            if let (Some(bytes), Outcome::Deliver { .. }) = (staged, &outcome) {
                super::write_output(None, &bytes)?;
            }
            outcome
        }
    };
    if let Outcome::Deliver { delivery, .. } = &outcome {
        // Who it is from, beside what was printed: the protected From (bound to the
        // signer) and the signer itself.
        eprintln!(
            "mailseal: from {} ({})",
            delivery
                .opened
                .message
                .sender()
                .unwrap_or_default()
                .escape_debug(),
            delivery.candidate.signer.escape_debug()
        );
    }
    if let Some(line) = status_line(&outcome, dir) {
        // It names who sent, committed or added: text of the message's, shown safely.
        eprintln!(
            "mailseal: {}",
            crate::error::shown(&line, super::ERROR_LINE_CHARS)
        );
    }
    Ok(())
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
    let keys = super::store::Keys::open(&dir)?;
    let mut receiver = receiver(
        &Home::new(&dir, Some(state)),
        &keys,
        Some(state),
        OpenPolicy::default(),
        Clock::System,
        crate::replay::Unsolicited::Refuse,
    )?;
    receiver.mls().map_err(|e| Failure::from("mls next", e))?;
    let Some(released) = receiver
        .next_released(group.as_deref())
        .map_err(|e| Failure::from("mls next", e))?
    else {
        eprintln!("mailseal: no held MLS message is ready");
        return Ok(());
    };
    let incoming = released.result.map_err(|e| Failure::from("open", e))?;
    hand_over(incoming, out.as_deref(), eml, None, &dir)
}

/// The status line of a handshake message.
fn handshake_line(h: &Handshake, store: &str) -> String {
    match h {
        Handshake::Joined { group, epoch, by } => {
            format!("joined MLS group {group} at epoch {epoch} (added by {by})")
        }
        Handshake::Committed {
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
                    "; {ready} held message(s) can now be opened: `mailseal mls next{store} --group {group}`"
                ));
            }
            line
        }
        Handshake::Proposal { group, by } => {
            format!("queued the proposal of {by} for group {group}'s next commit")
        }
        Handshake::KeyPackage { identity } => format!(
            "a KeyPackage of {identity}: add it with `mailseal mls add{store} --group ID FILE`"
        ),
        Handshake::Stale { group, epoch } => format!(
            "stale: a handshake message for epoch {epoch} of group {group}, from before we joined; ignored"
        ),
    }
}

/// Stderr lines on what opened with a warning ([`crate::seal::Verdict::warnings`]),
/// and on the outer DKIM signatures, when they were checked.
fn verdict_lines(opened: &Opened) {
    for w in &opened.verdict.warnings {
        eprintln!("mailseal: warning: {w}");
    }
    if opened.verdict.signer.is_some() && !opened.verdict.header_protection {
        eprintln!(
            "mailseal: no header protection (legacy sender): From bound to the signer; To, Date and Message-ID are unauthenticated"
        );
    }
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

/// ` --store DIR` for a command a hint names, when the store is not the default one:
/// a hint pasted as shown acts on the store the message was opened with.
fn store_flag(dir: &std::path::Path) -> String {
    if crate::keystore::default_location().as_deref() == Some(dir) {
        return String::new();
    }
    let text = dir.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-:@+=".contains(c))
    {
        format!(" --store {text}")
    } else {
        format!(" --store '{}'", text.replace('\'', r"'\''"))
    }
}

/// What stderr says of an outcome besides plain delivery.
fn status_line(outcome: &Outcome, dir: &std::path::Path) -> Option<String> {
    let corr = |d: &Delivery| d.candidate.correlation_id.clone().unwrap_or_default();
    match outcome {
        Outcome::Duplicate {
            delivery: Some(d),
            first_accepted,
        } => Some(format!(
            "duplicate: message {} was accepted at {}; not delivered again",
            d.candidate.message_id,
            crate::replay::rfc3339(*first_accepted)
        )),
        Outcome::Duplicate {
            delivery: None,
            first_accepted,
        } => Some(format!(
            "duplicate: this MLS message was first seen at {}; not processed again",
            crate::replay::rfc3339(*first_accepted)
        )),
        Outcome::Held(HeldReason::Stream { delivery, missing }) => {
            let corr = corr(delivery);
            Some(format!(
                "held: stream {corr} waits for sequence {}; `mailseal stream next --correlation {corr}` delivers it once they arrive",
                super::words::list(missing)
            ))
        }
        Outcome::Held(HeldReason::Epoch {
            group,
            epoch,
            current,
        }) => Some(format!(
            "held: group {group} is at epoch {current} and this message is for epoch {epoch}: it waits for {}",
            if *epoch <= current + 1 {
                format!("the Commit of epoch {current}")
            } else {
                format!("the Commits of epochs {current} to {}", epoch - 1)
            }
        )),
        Outcome::Deliver {
            retry_of: Some(first),
            ..
        } => Some(format!(
            "retry of message {first} (same idempotency key): do not perform the operation twice"
        )),
        Outcome::Deliver {
            delivery, released, ..
        } if *released > 0 => {
            let corr = corr(delivery);
            Some(format!(
                "{released} held event(s) of stream {corr} follow this one: `mailseal stream next{} --correlation {corr}`",
                store_flag(dir)
            ))
        }
        Outcome::Handshake(h) => Some(handshake_line(h, &store_flag(dir))),
        _ => None,
    }
}

/// What a report says of a verdict: how the message was protected and verified, and
/// by whom; nothing of what it says.
fn verdict_fields(opened: &Opened) -> serde_json::Map<String, serde_json::Value> {
    let v = &opened.verdict;
    let json = serde_json::json!({
        "profile": v.profile.map(|p| p.token()),
        "protection": v.protection.token(),
        "signer": v.signer.as_ref().map(|s| s.replay_id()),
        "algorithm": v.algorithm,
        "protectedHeaders": v.protected_headers,
        "outerHeadersMatched": v.outer_headers_matched,
        "headerProtection": v.header_protection,
        "dkim": v.dkim,
        "warnings": v.warnings,
    });
    match json {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// The report of a message that came to `delivery` (`deliver`, `duplicate`, `held`,
/// `not-checked`...): its verdict, who it is from and its envelope's digest, and for a
/// duplicate when it was first accepted (RFC 3339).
fn write_report(
    path: &Path,
    opened: &Opened,
    delivery: &str,
    first_accepted: Option<i64>,
) -> CliResult {
    let mut json = verdict_fields(opened);
    // The protected From, which the signer binding tied to the signer: who this is
    // from, named with what is printed.
    json.insert("from".into(), opened.message.sender().into());
    json.insert(
        "envelopeSha256".into(),
        crate::keystore::hex(&opened.message.content_digest()).into(),
    );
    json.insert("delivery".into(), delivery.into());
    if let Some(t) = first_accepted {
        json.insert("firstAccepted".into(), crate::replay::rfc3339(t).into());
    }
    write_output(
        Some(path),
        &serde_json::to_vec_pretty(&json).unwrap_or_default(),
    )
}

/// A refused message's failure, with its report written first when one was asked
/// for: `delivery: refused`, the refusal (its verdict code, kind, exit status, A2A
/// error and the line stderr shows), the profile the message announced, and as much
/// of the verdict as was reached (`known`: a refusal when committing comes after the
/// verification). Nothing of the message's content is in it: not the From, not the
/// envelope's digest. A report that cannot be written is said on stderr; the refusal
/// stays the failure.
fn refused<E: crate::error::Classify + std::fmt::Display>(
    report: Option<&Path>,
    code: Option<String>,
    profile: Option<crate::Profile>,
    known: Option<serde_json::Map<String, serde_json::Value>>,
    e: E,
) -> Failure {
    let (kind, a2a) = (e.kind(), e.a2a_error());
    let failure = Failure::from("open", e);
    let Some(path) = report else {
        return failure;
    };
    let mut json = known.unwrap_or_default();
    json.entry("profile")
        .or_insert_with(|| profile.map(|p| p.token()).into());
    json.insert("delivery".into(), "refused".into());
    json.insert(
        "refusal".into(),
        serde_json::json!({
            "code": code,
            "kind": kind.as_str(),
            "exit": failure.code.as_u8(),
            "a2aError": a2a.name(),
            "message": crate::error::shown(&failure.line, super::ERROR_LINE_CHARS),
        }),
    );
    if let Err(f) = write_output(
        Some(path),
        &serde_json::to_vec_pretty(&json).unwrap_or_default(),
    ) {
        eprintln!("mailseal: report: {}", f.line);
    }
    failure
}

/// Opens every `.eml` of `dir` into `out_dir` through a [`DeliveryDir`]: each
/// accepted message appears there exactly once, whatever point a kill interrupts
/// (see [`crate::receiver::deliver`]). An `out_dir` serves one process at a time.
fn open_batch(r: &mut Receiver<'_>, dir: &Path, out_dir: &Path, eml: bool) -> CliResult {
    let io = |what: &Path, e: std::io::Error| {
        Failure::new(ExitCode::Other, format!("{}: {e}", what.display()))
    };
    let target = DeliveryDir::open(out_dir, format(eml)).map_err(|e| Failure::from("open", e))?;
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
        let result = read_input(Some(path)).and_then(|raw| {
            target
                .deliver(r, &raw, &name)
                .map_err(|e| Failure::from("open", e))
        });
        emit(result_line(&file, result, false, &mut first_failure))?;
        // A Commit may have released held MLS messages: open them now, under the
        // names they arrived with.
        let released = target
            .deliver_released(r)
            .map_err(|e| Failure::from("open", e))?;
        for (name, result) in released {
            let result = result.map_err(|e| Failure::from("open", e));
            emit(result_line(&name, result, true, &mut first_failure))?;
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
    outcome: Result<Delivered, Failure>,
    released: bool,
    first_failure: &mut Option<ExitCode>,
) -> serde_json::Value {
    match outcome {
        Ok(d) => {
            let result = match (&d.outcome, d.resumed) {
                (_, true) => "deliver-resumed",
                (Outcome::Deliver { .. }, false) if released => "deliver-released",
                (Outcome::Handshake(Handshake::KeyPackage { .. }), _) => "handshake",
                (o, false) => o.word(),
            };
            let mut line = match d.outcome.delivery() {
                Some(del) => {
                    let c = &del.candidate;
                    serde_json::json!({
                        "file": file,
                        "result": result,
                        "signer": c.signer,
                        "messageId": c.message_id,
                        "correlationId": c.correlation_id,
                        "sequence": c.sequence,
                    })
                }
                None => serde_json::json!({"file": file, "result": result}),
            };
            if let Outcome::Duplicate { first_accepted, .. } = &d.outcome {
                line["firstAccepted"] = crate::replay::rfc3339(*first_accepted).into();
            }
            line
        }
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
