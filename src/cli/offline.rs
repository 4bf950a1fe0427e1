//! `mailseal sign-request`, `sign`, `assemble` and `sign-log`: offline signing
//! (`crate::offline`) as commands. The offline host runs `sign` only, which reads files
//! and its key store and writes files: no network code is on its path.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::exit::ExitCode;
use super::home::Home;
use super::store::Keys;
use super::{read_input, write_output, CliResult, Failure};
use crate::message::{Limits, MailA2aMessage};
use crate::offline::{short_fingerprint, SigningLog, SigningRequest, SigningResponse};

#[derive(Args)]
pub(super) struct SignRequestArgs {
    /// Profile: smime, openpgp or jws.
    #[arg(long)]
    profile: String,
    /// The signing time (RFC 3339; default now): the certificate or key must be
    /// valid then.
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// S/MIME with an RSA key: sign with RSASSA-PSS.
    #[arg(long)]
    rsa_pss: bool,
    /// Repeat every Mail-A2A-* hint on the outer message.
    #[arg(long)]
    outer_hints: bool,
    /// The From address's key to sign with (its fingerprint as `key list` shows it,
    /// or a unique prefix; S/MIME, OpenPGP, detached-jws). Default: the newest usable
    /// one.
    #[arg(long, value_name = "FINGERPRINT")]
    signer: Option<String>,
    /// Sign as ADDR, one of the store's identities: the message's From must be ADDR,
    /// or nothing is signed.
    #[arg(long = "as", value_name = "ADDR")]
    sign_as: Option<String>,
    /// Also write the request as QR codes in this PNG.
    #[arg(long, value_name = "PNG")]
    qr: Option<PathBuf>,
    /// Where to write the request (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The composed plain message.
    #[command(flatten)]
    input: super::input::Input,
}

#[derive(Args)]
pub(super) struct SignArgs {
    /// The request file (or --qr-in PNG); `-` or none: standard input, with --yes
    /// (standard input is otherwise where the confirmation is read).
    #[arg(value_name = "FILE")]
    request: Option<PathBuf>,
    /// The same as FILE.
    #[arg(long = "in", value_name = "FILE", conflicts_with_all = ["request", "qr_in"])]
    input: Option<PathBuf>,
    /// Read the request from the QR codes of this PNG.
    #[arg(long = "qr-in", value_name = "PNG", conflicts_with = "request")]
    qr_in: Option<PathBuf>,
    /// Sign without asking (for batches).
    #[arg(long)]
    yes: bool,
    /// Show the whole summary even when it is longer than the default view (a
    /// summary that does not fit is otherwise refused, never cut).
    #[arg(long)]
    full: bool,
    /// Where to write the response (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write the response as QR codes in this PNG.
    #[arg(long, value_name = "PNG")]
    qr: Option<PathBuf>,
    /// Sign every *.req file of this directory (responses as NAME.resp beside them,
    /// or in --out-dir); refused requests are skipped and listed.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["request", "input", "qr_in", "out", "qr"])]
    batch: Option<PathBuf>,
    /// Batch: where to write the responses.
    #[arg(long, value_name = "DIR", requires = "batch")]
    out_dir: Option<PathBuf>,
    /// The signing log (default: signing.log in the key store directory).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
}

#[derive(Args)]
pub(super) struct AssembleArgs {
    /// The request sign-request wrote (`-`: standard input, when the response is a
    /// file).
    request: PathBuf,
    /// The response sign wrote (or --qr PNG); `-` or none: standard input.
    response: Option<PathBuf>,
    /// Read the response from the QR codes of this PNG.
    #[arg(long, value_name = "PNG", conflicts_with = "response")]
    qr: Option<PathBuf>,
    /// Then encrypt the signed message to its recipients (S/MIME, OpenPGP).
    #[arg(long)]
    encrypt: bool,
    /// Where to write the message (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Subcommand)]
pub(super) enum SignLogCommand {
    /// Check the chain of the signing log; print its entries and head.
    Verify {
        /// The log (default: signing.log in the key store directory).
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        /// The head noted earlier (a hash `sign` printed): it must still be in the
        /// chain, so entries removed from the end are found too.
        #[arg(long, value_name = "HASH")]
        head: Option<String>,
    },
}

pub(super) fn parse_at(at: Option<&str>) -> Result<Option<OffsetDateTime>, Failure> {
    at.map(|s| {
        OffsetDateTime::parse(s, &Rfc3339)
            .map_err(|e| Failure::new(ExitCode::Usage, format!("--at {s}: {e}")))
    })
    .transpose()
}

fn read_text(file: Option<&Path>, qr: Option<&Path>) -> Result<Vec<u8>, Failure> {
    match qr {
        Some(png) => {
            let bytes = read_bounded(Some(png))?;
            crate::offline::qr::decode_png(&bytes)
                .map_err(|e| Failure::from(&png.display().to_string(), e))
        }
        None => read_bounded(file),
    }
}

/// [`read_input`], refusing (rather than cutting) a file over its limit.
fn read_bounded(file: Option<&Path>) -> Result<Vec<u8>, Failure> {
    let limit = Limits::default().max_message_bytes;
    let bytes = read_input(file)?;
    if bytes.len() > limit {
        let name = file.map_or("stdin".to_string(), |p| p.display().to_string());
        return Err(Failure::new(
            ExitCode::Malformed,
            format!("{name} is larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

fn write_qr(path: &Path, text: &str) -> CliResult {
    let png =
        crate::offline::qr::encode_png(text.as_bytes()).map_err(|e| Failure::from("--qr", e))?;
    write_output(Some(path), &png)
}

fn log_path(dir: &Path, flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    match flag {
        Some(p) => Ok(p),
        None if ["pkcs11:", "sqlite:", "postgres://", "postgresql://"]
            .iter()
            .any(|p| dir.to_string_lossy().starts_with(p)) =>
        {
            Err(Failure::new(
                ExitCode::Usage,
                "this store is no directory to keep the signing log in: give --log FILE",
            ))
        }
        None => {
            super::store::require_existing(dir)?;
            Ok(dir.join("signing.log"))
        }
    }
}

pub(super) fn sign_request(dir: PathBuf, state: &str, a: SignRequestArgs) -> CliResult {
    let profile: crate::profile::Profile = a
        .profile
        .parse()
        .map_err(|e: String| Failure::new(ExitCode::Usage, e))?;
    let keys = Keys::open(&dir)?;
    let raw = read_input(a.input.path())?;
    let plain = MailA2aMessage::parse_vec(raw, &Limits::default())
        .map_err(|e| Failure::from("sign-request", e))?;
    let home = Home::new(&dir, Some(state));
    let sender = crate::Sender::builder(keys.store())
        .peers(home.load_policies()?)
        .build();
    let mut opts = crate::seal::SealOptions::new(profile);
    opts.sign_only = true;
    opts.rsa_pss = a.rsa_pss;
    opts.outer_hints = a.outer_hints;
    opts.signing_time = parse_at(a.at.as_deref())?;
    opts.signer = super::seal::signer(&keys, profile, a.signer.as_deref())?;
    opts.sign_as = a.sign_as.clone();
    let request = sender
        .signing_request(&plain, &opts)
        .map_err(|e| Failure::from("sign-request", e))?;
    let text = request.to_text();
    if let Some(png) = &a.qr {
        write_qr(png, &text)?;
    }
    write_output(a.out.as_deref(), text.as_bytes())?;
    eprintln!(
        "request fingerprint: {}",
        short_fingerprint(&request.fingerprint())
    );
    Ok(())
}

/// Asks on the terminal (stderr, then a line of stdin) for the first characters of
/// the request's digest; only those sign (`Review::confirms`).
fn confirm(review: &crate::offline::Review<'_>) -> Result<bool, Failure> {
    eprint!(
        "To sign, type the first {} characters of the request digest shown above: ",
        crate::offline::CONFIRM_CHARS
    );
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Failure::new(ExitCode::Other, format!("stdin: {e}")))?;
    Ok(review.confirms(&line))
}

/// How `sign` asks: shown (the summary on stderr) or not (a batch), confirmed by the
/// digest or by `--yes`, the whole summary or the default view.
#[derive(Clone, Copy)]
struct Asking {
    yes: bool,
    show: bool,
    full: bool,
}

/// Reviews, confirms, signs and logs one request; the response.
fn sign_one(
    host: &crate::offline::Offline<'_>,
    log: &SigningLog,
    text: &[u8],
    ask: Asking,
) -> Result<SigningResponse, Failure> {
    let request = SigningRequest::parse(text).map_err(|e| Failure::from("sign", e))?;
    let review = host.review(request).map_err(|e| Failure::from("sign", e))?;
    let summary = review.summary();
    if ask.show {
        match summary.shown(ask.full) {
            Ok(text) => eprint!("{text}"),
            Err(e) => {
                eprint!("{}", summary.head());
                let f = Failure::from("sign", e);
                return Err(Failure::new(f.code, format!("{} (--full)", f.line)));
            }
        }
        // A request seen before (sent again, by mistake or not) is said before asking.
        let earlier = log.verify().map_err(|e| Failure::from("sign", e))?;
        for e in earlier.iter().filter(|e| e.request == review.fingerprint()) {
            eprintln!(
                "note: this request was signed before: signing log entry {} at {}",
                e.seq, e.time
            );
        }
    }
    if !ask.yes && !confirm(&review)? {
        return Err(Failure::new(
            ExitCode::RefusedByPolicy,
            "sign: not confirmed (not the request digest's first characters); nothing signed",
        ));
    }
    let response = review
        .sign(OffsetDateTime::now_utc())
        .map_err(|e| Failure::from("sign", e))?;
    let entry = log
        .append_shown(review.request(), &response, summary)
        .map_err(|e| Failure::from("sign", e))?;
    if ask.show {
        eprintln!(
            "signed; signing log entry {} of {}, head {}",
            entry.seq,
            log.path().display(),
            entry.hash
        );
    }
    Ok(response)
}

pub(super) fn sign(dir: PathBuf, a: SignArgs) -> CliResult {
    // The one store that connects anywhere is a database server: not on this path.
    if dir.to_string_lossy().contains("://") {
        return Err(Failure::new(
            ExitCode::Usage,
            "sign runs on the offline host: give it a store on this machine (a directory, \
             sqlite:PATH or a pkcs11: token), not a database server",
        ));
    }
    let keys = Keys::open(&dir)?;
    let host = crate::offline::Offline::new(keys.store());
    let log = SigningLog::new(log_path(&dir, a.log.clone())?);
    if let Some(batch) = &a.batch {
        return sign_batch(
            &host,
            &log,
            batch,
            a.out_dir.as_deref().unwrap_or(batch),
            a.yes,
        );
    }
    let request = a
        .input
        .as_deref()
        .or(a.request.as_deref())
        .filter(|p| !super::input::is_stdin(p));
    if request.is_none() && a.qr_in.is_none() && !a.yes {
        return Err(Failure::new(
            ExitCode::Usage,
            "sign reads the confirmation from stdin: give the request as a file (or --qr-in PNG), or --yes",
        ));
    }
    let text = read_text(request, a.qr_in.as_deref())?;
    let ask = Asking {
        yes: a.yes,
        show: true,
        full: a.full,
    };
    let response = sign_one(&host, &log, &text, ask)?;
    let text = response.to_text();
    if let Some(png) = &a.qr {
        write_qr(png, &text)?;
    }
    write_output(a.out.as_deref(), text.as_bytes())
}

fn sign_batch(
    host: &crate::offline::Offline<'_>,
    log: &SigningLog,
    dir: &Path,
    out_dir: &Path,
    yes: bool,
) -> CliResult {
    if !yes {
        return Err(Failure::new(
            ExitCode::Usage,
            "sign --batch signs without asking for each request: add --yes",
        ));
    }
    let io = |p: &Path, e: std::io::Error| {
        Failure::new(ExitCode::Other, format!("{}: {e}", p.display()))
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "req"))
        .collect();
    files.sort();
    let bar = indicatif::ProgressBar::new(files.len() as u64);
    let mut refused = Vec::new();
    let mut signed = 0usize;
    for path in &files {
        bar.inc(1);
        let result = read_bounded(Some(path))
            .and_then(|text| {
                let ask = Asking {
                    yes: true,
                    show: false,
                    full: true,
                };
                sign_one(host, log, &text, ask)
            })
            .and_then(|response| {
                let out = out_dir.join(path.with_extension("resp").file_name().unwrap_or_default());
                write_output(Some(&out), response.to_text().as_bytes())
            });
        match result {
            Ok(()) => signed += 1,
            Err(f) => refused.push((path.display().to_string(), f)),
        }
    }
    bar.finish_and_clear();
    println!("signed {signed} of {} request(s)", files.len());
    for (file, f) in &refused {
        println!("refused {file}: {}", f.line);
    }
    match refused.first() {
        None => Ok(()),
        Some((_, f)) => Err(Failure::new(
            f.code,
            format!("{} request(s) refused, listed above", refused.len()),
        )),
    }
}

pub(super) fn assemble(dir: PathBuf, state: &str, a: AssembleArgs) -> CliResult {
    let response_from_stdin =
        a.qr.is_none() && a.response.as_deref().is_none_or(super::input::is_stdin);
    if super::input::is_stdin(&a.request) && response_from_stdin {
        return Err(Failure::new(
            ExitCode::Usage,
            "assemble: the request and the response cannot both be standard input",
        ));
    }
    let keys = Keys::open(&dir)?;
    let request = SigningRequest::parse(&read_bounded(Some(&a.request))?)
        .map_err(|e| Failure::from("assemble", e))?;
    let text = read_text(a.response.as_deref(), a.qr.as_deref())?;
    let response = SigningResponse::parse(&text).map_err(|e| Failure::from("assemble", e))?;
    let home = Home::new(&dir, Some(state));
    let mut builder = crate::Sender::builder(keys.store()).peers(home.load_policies()?);
    // The replay state is opened only when assembling records something in it.
    let plain = MailA2aMessage::parse(&request.entity, &Limits::default())
        .map_err(|e| Failure::from("assemble", e))?;
    if crate::Sender::needs_replay(&plain) {
        builder = builder.replay_boxed(super::state_to_record("assemble", state)?);
    }
    let message = builder
        .build()
        .assemble(&request, &response, a.encrypt)
        .map_err(|e| Failure::from("assemble", e))?;
    write_output(a.out.as_deref(), &message)
}

pub(super) fn sign_log(dir: PathBuf, cmd: SignLogCommand) -> CliResult {
    let SignLogCommand::Verify { log, head } = cmd;
    let log = SigningLog::new(log_path(&dir, log)?);
    let entries = match &head {
        Some(h) => log.verify_head(h),
        None => log.verify(),
    }
    .map_err(|e| Failure::from("sign-log verify", e))?;
    let mut out = std::io::stdout().lock();
    for e in &entries {
        let summary = e.summary.as_deref().map_or(String::new(), |d| {
            format!(" summary {}", short_fingerprint(d))
        });
        let _ = writeln!(
            out,
            "{} {} {} {} {} -> {} {} request {}{summary}",
            e.seq,
            e.time,
            e.profile,
            e.signer,
            crate::error::quoted(&e.from),
            crate::error::quoted(e.to.join(",")),
            crate::error::quoted(&e.operation),
            short_fingerprint(&e.request)
        );
    }
    let head = entries.last().map_or("(empty)", |e| e.hash.as_str());
    let _ = writeln!(out, "ok: {} entries, head {head}", entries.len());
    Ok(())
}
