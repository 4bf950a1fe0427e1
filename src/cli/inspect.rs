//! `mailseal inspect`: layers, headers, MIME parts, envelope and rule violations.

use std::fmt::Write as _;

use super::exit::ExitCode;
use super::{write_output, CliResult, Failure};
use crate::dispatch::detect_profile;
use crate::envelope::ValidationContext;
use crate::keystore::hex;
use crate::message::{structure, Limits, MailA2aMessage};

pub(super) fn inspect(name: &str, raw: &[u8], json: bool) -> CliResult {
    let limits = Limits::default();
    let profile = detect_profile(raw);
    let parts = structure(raw, &limits)
        .map_err(|e| Failure::new(ExitCode::of(&e), format!("inspect {name}: {e}")))?;
    // A protected message's envelope is only readable once opened.
    let plain = match profile {
        None => Some(MailA2aMessage::parse(raw, &limits)),
        Some(_) => None,
    };
    if json {
        let (envelope, violations, error) = match &plain {
            Some(Ok(m)) => (
                serde_json::from_slice::<serde_json::Value>(m.envelope_bytes()).ok(),
                m.check(&ValidationContext::default())
                    .iter()
                    .map(|v| serde_json::json!({"path": v.path, "code": v.code.as_str(), "a2aError": v.a2a_error().name(), "detail": v.detail}))
                    .collect::<Vec<_>>(),
                None,
            ),
            Some(Err(e)) => (None, Vec::new(), Some(e.to_string())),
            None => (None, Vec::new(), None),
        };
        let doc = serde_json::json!({
            "file": name,
            "layers": [match profile { None => "plain".to_string(), Some(p) => p.token().to_string() }],
            "parts": parts,
            "envelope": envelope,
            "envelopeSha256": plain.as_ref().and_then(|p| p.as_ref().ok()).map(|m| hex(&m.content_digest())),
            "violations": violations,
            "error": error,
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        write_output(None, text.as_bytes())?;
        return unreadable(name, plain.as_ref());
    }

    let mut out = String::new();
    let _ = writeln!(out, "file: {name} ({} bytes)", raw.len());
    match profile {
        None if matches!(plain, Some(Err(_))) => {
            let _ = writeln!(
                out,
                "layer 1: no end-to-end protection, and not a MailA2A message"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "layer 1: plain MailA2A message (no end-to-end protection)"
            );
        }
        Some(crate::profile::Profile::Smime) => match crate::smime::describe(raw, &limits) {
            Ok(lines) => {
                for l in lines {
                    let _ = writeln!(out, "{l}");
                }
            }
            Err(e) => {
                let _ = writeln!(out, "layer 1: S/MIME, unreadable: {e}");
            }
        },
        Some(crate::profile::Profile::OpenPgp) => match crate::openpgp::describe(raw, &limits) {
            Ok(lines) => {
                for l in lines {
                    let _ = writeln!(out, "{l}");
                }
            }
            Err(e) => {
                let _ = writeln!(out, "layer 1: OpenPGP/MIME, unreadable: {e}");
            }
        },
        Some(crate::profile::Profile::Mls) => match crate::mls::wire::describe(raw, &limits) {
            Ok(line) => {
                let _ = writeln!(out, "layer 1: {line}");
            }
            Err(e) => {
                let _ = writeln!(out, "layer 1: MLS, unreadable: {e}");
            }
        },
        Some(crate::profile::Profile::Jws) => match crate::jws::describe(raw, &limits) {
            Ok(line) => {
                let _ = writeln!(out, "layer 1: {line}");
            }
            Err(e) => {
                let _ = writeln!(out, "layer 1: detached-jws, unreadable: {e}");
            }
        },
    }
    let _ = writeln!(out, "MIME parts:");
    for p in &parts {
        let _ = writeln!(
            out,
            "  {}{} [{}]{} {} bytes",
            "  ".repeat(p.depth - 1),
            p.content_type,
            p.transfer_encoding.as_deref().unwrap_or("7bit"),
            p.content_id
                .as_ref()
                .map(|c| format!(" <{c}>"))
                .unwrap_or_default(),
            p.raw_size
        );
    }
    match &plain {
        Some(Ok(m)) => {
            let h = &m.headers;
            let _ = writeln!(out, "headers:");
            let _ = writeln!(
                out,
                "  From: {}",
                h.from.as_ref().map_or("-", |f| f.address.as_str())
            );
            let _ = writeln!(
                out,
                "  To: {}",
                h.to.iter()
                    .map(|t| t.address.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let _ = writeln!(
                out,
                "  Message-ID: {}",
                h.message_id.as_deref().unwrap_or("-")
            );
            if let Some(irt) = &h.in_reply_to {
                let _ = writeln!(out, "  In-Reply-To: {irt}");
            }
            for (n, v) in h.hints.iter() {
                let _ = writeln!(out, "  {n}: {v}");
            }
            let e = m.envelope();
            let _ = writeln!(
                out,
                "envelope ({} bytes, sha256 {}):",
                m.envelope_bytes().len(),
                hex(&m.content_digest())
            );
            let _ = writeln!(
                out,
                "  {} {} ({}), messageId {}, correlationId {}, sequence {}, final {}",
                e.kind().map_or("?", |k| k.as_str()),
                e.operation().map_or("?", |o| o.as_str()),
                e.operation().map_or("?", |o| o.a2a_method()),
                e.message_id().unwrap_or_else(|| "-".into()),
                e.correlation_id().unwrap_or_else(|| "-".into()),
                e.sequence().map_or("?".into(), |s| s.to_string()),
                e.is_final().map_or("?".into(), |f| f.to_string()),
            );
            if let Some(t) = &m.text {
                let _ = writeln!(out, "text fallback: {} bytes (informative only)", t.len());
            }
            for a in &m.attachments {
                let _ = writeln!(
                    out,
                    "attachment: <{}> {} {} bytes",
                    a.content_id,
                    a.content_type,
                    a.data.len()
                );
            }
            let v = m.check(&ValidationContext::default());
            if v.is_empty() {
                let _ = writeln!(out, "rules: all MailA2A rules hold");
            } else {
                for v in v {
                    let _ = writeln!(out, "violation: {v}");
                }
            }
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "not readable as MailA2A: {}: {e}", e.code());
        }
        None => {}
    }
    write_output(None, out.as_bytes())?;
    unreadable(name, plain.as_ref())
}

/// What was described is not a MailA2A message: a failure (exit 3), after the
/// description, so a script does not take the file for a message.
fn unreadable<E: crate::error::Classify + std::fmt::Display>(
    name: &str,
    plain: Option<&Result<MailA2aMessage, E>>,
) -> CliResult {
    match plain {
        Some(Err(e)) => Err(Failure::new(
            ExitCode::of(e),
            format!("inspect {name}: not a MailA2A message: {e}"),
        )),
        _ => Ok(()),
    }
}
