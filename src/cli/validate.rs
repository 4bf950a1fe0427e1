//! `mailseal validate`: one line per message, the MailA2A rules only.

use std::io::Write;
use std::path::PathBuf;

use super::exit::ExitCode;
use super::{read_input, CliResult, Failure};
use crate::error::Classify;
use crate::message::{validate_message, Limits};

/// One line for one file: `OK path`, `FAIL path: code at where: reason (A2A error)`,
/// or `SEALED path: ...` for a message under a protection profile, whose envelope only
/// `open` can reach (not a failure: validate needs no keys).
pub(crate) fn validate_line(name: &str, raw: &[u8]) -> (bool, String) {
    if let Some(profile) = crate::dispatch::detect_profile(raw) {
        return (
            true,
            format!(
                "SEALED {name}: protected under {profile}; `mailseal open` verifies it and checks its envelope"
            ),
        );
    }
    match validate_message(raw, &Limits::default()) {
        Err(e) => (
            false,
            format!("FAIL {name}: {}: {e} ({})", e.code(), e.a2a_error()),
        ),
        Ok((_, v)) if v.is_empty() => (true, format!("OK {name}")),
        Ok((_, v)) => {
            let more = if v.len() > 1 {
                format!(" (+{} more)", v.len() - 1)
            } else {
                String::new()
            };
            (false, format!("FAIL {name}: {}{more}", v[0]))
        }
    }
}

pub(super) fn validate(paths: &[PathBuf]) -> CliResult {
    // No file: standard input, as every command reads.
    let stdin = [PathBuf::from("-")];
    let files = expand(if paths.is_empty() { &stdin } else { paths })?;
    let bar = if files.len() > 8 {
        let bar = indicatif::ProgressBar::new(files.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        None
    };
    let mut failed = 0usize;
    let mut unread = 0usize;
    let mut out = std::io::stdout().lock();
    for f in &files {
        let name = if super::input::is_stdin(f) {
            "stdin".to_string()
        } else {
            f.display().to_string()
        };
        let (ok, line) = match read_input(Some(f)) {
            Ok(raw) => validate_line(&name, &raw),
            Err(e) => {
                unread += 1;
                (false, format!("FAIL {name}: {}", e.line))
            }
        };
        failed += usize::from(!ok);
        match &bar {
            Some(b) => {
                b.suspend(|| writeln!(out, "{line}").ok());
                b.inc(1);
            }
            None => {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // A file that could not be read says nothing of MailA2A: an I/O failure (exit 1),
    // not "malformed".
    if unread > 0 {
        return Err(Failure::new(
            ExitCode::Other,
            format!("{unread} of {} files could not be read", files.len()),
        ));
    }
    if failed > 0 {
        return Err(Failure::new(
            ExitCode::Malformed,
            format!("{failed} of {} messages are not valid MailA2A", files.len()),
        ));
    }
    Ok(())
}

/// Every file to validate: files as given, directories' `.eml` files sorted.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| {
                Failure::new(ExitCode::Other, format!("cannot read {}: {e}", p.display()))
            })?;
            let mut files: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| {
                    f.is_file() && f.extension().is_some_and(|x| x.eq_ignore_ascii_case("eml"))
                })
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}
