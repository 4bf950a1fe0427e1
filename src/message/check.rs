//! The binding's rules on the message around the envelope (spec 4.1 and 4.3): required
//! headers, outer hints equal to their protected values, replies threaded, `cid:`
//! references resolved.

use std::fmt::Write as _;

use crate::envelope::borrowed::{Value, View};

use super::{Attachment, Headers};
use crate::envelope::{Code, Envelope, Violation};

fn header(name: &str) -> String {
    format!("header:{name}")
}

/// Checks headers and hints against the envelope.
pub(crate) fn check_headers(h: &Headers, env: &Envelope) -> Vec<Violation> {
    let mut out = Vec::new();
    match (&h.from, h.from_count) {
        (Some(m), 1) if !m.is_valid_addr_spec() => out.push(Violation::new(
            header("From"),
            Code::InvalidHeader,
            "From is not a valid address",
        )),
        (Some(_), 1) => {}
        (None, _) => out.push(Violation::new(
            header("From"),
            Code::InvalidHeader,
            "From is required",
        )),
        _ => out.push(Violation::new(
            header("From"),
            Code::InvalidHeader,
            "From must name exactly one mailbox",
        )),
    }
    if h.to.is_empty() {
        out.push(Violation::new(
            header("To"),
            Code::InvalidHeader,
            "To is required",
        ));
    }
    for (name, list) in [("To", &h.to), ("Cc", &h.cc)] {
        if list.iter().any(|m| !m.is_valid_addr_spec()) {
            out.push(Violation::new(
                header(name),
                Code::InvalidHeader,
                format!("{name} has an address that is not valid"),
            ));
        }
    }
    if h.date.is_none() {
        out.push(Violation::new(
            header("Date"),
            Code::InvalidHeader,
            "a valid Date is required",
        ));
    }
    if h.message_id.as_deref().is_none_or(str::is_empty) {
        out.push(Violation::new(
            header("Message-ID"),
            Code::InvalidHeader,
            "Message-ID is required",
        ));
    }
    if h.mime_version.as_deref().map(str::trim) != Some("1.0") {
        out.push(Violation::new(
            header("MIME-Version"),
            Code::InvalidHeader,
            "MIME-Version: 1.0 is required",
        ));
    }
    if env.kind().is_some_and(|k| k.is_reply()) && h.in_reply_to.is_none() {
        out.push(Violation::new(
            header("In-Reply-To"),
            Code::ReplyWithoutInReplyTo,
            "a reply references its request's Message-ID",
        ));
    }

    // Hints: Mail-A2A-Binding is required; every hint present must equal its protected
    // counterpart.
    match h.hints.binding.as_deref() {
        None => out.push(Violation::new(
            header("Mail-A2A-Binding"),
            Code::Required,
            "Mail-A2A-Binding: 1.0 is required",
        )),
        Some("1.0") => {}
        Some(_) => out.push(Violation::new(
            header("Mail-A2A-Binding"),
            Code::UnsupportedBindingVersion,
            "this binding is 1.0",
        )),
    }
    let mismatch = |name: &str, out: &mut Vec<Violation>| {
        out.push(Violation::new(
            header(name),
            Code::HintMismatch,
            "outer hint differs from the protected envelope",
        ))
    };
    let text_eq = |hint: &Option<String>, key: &str| match hint {
        None => true,
        Some(v) => env.str_field(key).as_deref() == Some(v.as_str()),
    };
    if !text_eq(&h.hints.operation, "operation") {
        mismatch("Mail-A2A-Operation", &mut out);
    }
    if !text_eq(&h.hints.kind, "kind") {
        mismatch("Mail-A2A-Kind", &mut out);
    }
    if !text_eq(&h.hints.correlation_id, "correlationId") {
        mismatch("Mail-A2A-Correlation-ID", &mut out);
    }
    if let Some(seq) = &h.hints.sequence {
        let digits = !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit());
        if !digits || seq.parse::<u64>().ok() != env.sequence() {
            mismatch("Mail-A2A-Sequence", &mut out);
        }
    }
    if let Some(f) = &h.hints.final_ {
        let hinted = match f.to_ascii_lowercase().as_str() {
            "yes" => Some(true),
            "no" => Some(false),
            _ => None,
        };
        if hinted.is_none() || hinted != env.is_final() {
            mismatch("Mail-A2A-Final", &mut out);
        }
    }
    out
}

/// Calls `found` with every A2A Part of this message in the payload whose `url` is a
/// `cid:` URI (outside `history`, `data` and `metadata`) and the JSON pointer to it (a member named only when its name is public:
/// `envelope::member_token`). The pointer is lent, never copied here: a reference
/// nested deep under long names would otherwise cost its whole pointer each (issue
/// #58: 16 bytes of reference, 3.5 KB of pointer).
fn cid_parts<'v>(v: Value<'v>, pointer: &mut String, found: &mut dyn FnMut(&str, Value<'v>)) {
    match v.view() {
        View::Object(map) => {
            if v.get("url")
                .and_then(Value::as_str)
                .is_some_and(|u| u.len() > 4 && u.as_bytes()[..4].eq_ignore_ascii_case(b"cid:"))
            {
                found(pointer, v);
            }
            for (position, (k, child)) in map.iter().enumerate() {
                // Not this message's parts: a task's `history` repeats earlier
                // messages (whose parts went with them), and a DataPart's `data` and
                // any `metadata` are opaque JSON that may hold a `url` of their own.
                if matches!(k, "history" | "data" | "metadata") {
                    continue;
                }
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&crate::envelope::member_token(k, position + 1));
                cid_parts(child, pointer, found);
                pointer.truncate(len);
            }
        }
        View::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = pointer.len();
                // Writing to a String cannot fail.
                let _ = write!(pointer, "/{i}");
                cid_parts(child, pointer, found);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// How many faulty `cid:` references one message reports (every one is checked; the
/// first ones say what is wrong).
const MAX_CID_FAULTS: usize = 16;

/// RFC 2392: a `cid:` URL is the Content-ID's addr-spec, percent-encoded.
fn decode_cid(url: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = &url.as_bytes()[4..];
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Content-IDs are unique, every `cid:` reference resolves, and a declared `mediaType`
/// matches the part's Content-Type before the part is exposed (spec 4.3).
pub(crate) fn check_attachments(
    payload: Option<Value<'_>>,
    attachments: &[Attachment],
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for a in attachments.iter().filter(|a| !a.content_id.is_empty()) {
        if !seen.insert(a.content_id.to_ascii_lowercase()) {
            out.push(Violation::new(
                header("Content-ID"),
                Code::InvalidContentId,
                "two parts share a Content-ID",
            ));
        }
    }
    let Some(payload) = payload else {
        return out;
    };
    let mut faults = 0;
    let mut check = |pointer: &str, part: Value<'_>| {
        let url = part.get("url").and_then(Value::as_str).unwrap_or_default();
        let cid = decode_cid(url);
        let fault = match attachments
            .iter()
            .find(|a| a.content_id.eq_ignore_ascii_case(&cid))
        {
            None => Some((
                "url",
                Code::InvalidContentId,
                "cid: reference names no part of this message",
            )),
            Some(a) => part
                .get("mediaType")
                .and_then(Value::as_str)
                .map(|declared| declared.split(';').next().unwrap_or("").trim())
                .filter(|declared| !declared.eq_ignore_ascii_case(&a.content_type))
                .map(|_| {
                    (
                        "mediaType",
                        Code::MediaTypeMismatch,
                        "mediaType differs from the part's Content-Type",
                    )
                }),
        };
        if let Some((member, code, reason)) = fault {
            faults += 1;
            if faults <= MAX_CID_FAULTS {
                out.push(Violation::new(format!("{pointer}/{member}"), code, reason));
            }
        }
    };
    cid_parts(payload, &mut String::from("/payload"), &mut check);
    out
}
