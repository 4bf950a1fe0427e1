//! What the operator reads before the offline key signs: everything the signature
//! covers, taken from the signed entity itself, never from what the request says
//! about it (issue #59: a summary of chosen fields let a push URL, a task id or
//! metadata through unseen, and the connected host is assumed compromised).
//!
//! Its parts, in order:
//!
//! 1. the request's digest (which the operator types back to confirm), the profile,
//!    the signer and the signing time;
//! 2. the **effect** ([`effect`]): whether the operation is one of the design's
//!    effectful ones or carries a payment, and the members that decide what happens
//!    (task id, push URL and credentials, metadata, amount, payee, asset, network),
//!    each with its place in the envelope;
//! 3. the **warnings**: hidden or invisible characters, words that mix scripts,
//!    addresses and URLs that are not ASCII (with their ASCII form) and look like
//!    others ([`lookalike`]), found anywhere below;
//! 4. every header field of the signed entity as signed, in order, then the
//!    addresses and subject as read;
//! 5. the **whole envelope** as its canonical JSON pretty-printed ([`render`]):
//!    members in name order, every string escaped. Rendering the JSON generically is
//!    what makes "every member is shown" provable: there is no per-operation list to
//!    fall behind the schema (the test `schema_walk` sets every property of every
//!    A2A v1.0 message type to a marker and finds each marker here); the per-operation
//!    part is only the effect section on top;
//! 6. each attachment (content id, file name, media type, size, SHA-256: a swapped
//!    attachment of the same size shows), the MIME parts, the mail text;
//! 7. what the key signs besides the entity (the JWS protected header in full, the
//!    CMS signed attributes or OpenPGP trailer by digest, rebuilt by the review).
//!
//! Every value goes through one escaping ([`crate::error::push_shown`]): a character
//! that does not print, or could reorder or hide text, is shown `\u{XXXX}` and flagged.
//! A value longer than a line wraps onto marked continuation lines: nothing is cut.
//! A summary longer than [`Summary::VIEW_LINES`] is not signed unless the operator
//! asks for the full view ([`Summary::shown`]); the signing log records the SHA-256
//! of the text shown ([`Summary::digest`]).

mod effect;
mod lookalike;
mod render;
#[cfg(test)]
mod schema_walk;

use base64::Engine;
use sha2::{Digest, Sha256};

use super::request::{short_fingerprint, SigningRequest};
use super::OfflineError;
use crate::envelope::borrowed::Tree;
use crate::message::{Limits, MailA2aMessage};
use crate::profile::Profile;
use render::{Key, Lines};

/// The summary of one signing request, as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    text: String,
    lines: usize,
    /// The end of the first [`Summary::VIEW_LINES`] lines in `text`.
    head_end: usize,
    effectful: bool,
    warnings: usize,
}

/// The mail text's lines and other free text, each under a label.
fn text_block(out: &mut Lines, indent: &str, at: &str, text: &str) {
    out.check(at, text);
    for line in text.trim_end().split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.wrapped(&format!("{indent}| "), indent, line, false, "");
    }
}

/// The header section of `entity`, each field unfolded: (name, value).
fn header_fields(entity: &[u8]) -> Vec<(String, String)> {
    let end = memchr::memmem::find(entity, b"\r\n\r\n")
        .or_else(|| memchr::memmem::find(entity, b"\n\n"))
        .unwrap_or(entity.len());
    let section = String::from_utf8_lossy(&entity[..end]);
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in section.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        match (line.starts_with([' ', '\t']), fields.last_mut()) {
            (true, Some((_, value))) => value.push_str(line),
            _ => match line.split_once(':') {
                Some((name, value)) => {
                    fields.push((name.to_string(), value.trim_start().to_string()))
                }
                None => fields.push((String::new(), line.to_string())),
            },
        }
    }
    fields
}

fn hex_sha256(bytes: &[u8]) -> String {
    crate::hex::hex(&Sha256::digest(bytes))
}

/// What the key signs besides the entity, per profile.
fn signature_input(out: &mut Lines, request: &SigningRequest) {
    let tbs = &request.to_be_signed;
    match request.profile {
        Profile::Jws => {
            out.line("  the JWS protected header (signed with the entity):");
            let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(tbs)
                .ok()
                .and_then(|b| String::from_utf8(b).ok());
            match json.as_deref().and_then(Tree::parse) {
                Some(tree) => out.json(2, Key::Item, "JWS header", tree.root()),
                None => out.wrapped(
                    "    (not JSON) ",
                    "    ",
                    &String::from_utf8_lossy(tbs),
                    false,
                    "",
                ),
            }
        }
        Profile::Smime => {
            out.line(format!(
                "  CMS signed attributes: {} bytes, SHA-256 {}",
                tbs.len(),
                hex_sha256(tbs)
            ));
            out.line("    (content type, signing time and the entity's digest: rebuilt from the");
            out.line(
                "    entity, the signer's certificate and the signing time above, found equal)",
            );
            if request.rsa_pss {
                out.line("    signed with RSASSA-PSS");
            }
        }
        Profile::OpenPgp => {
            out.line(format!(
                "  OpenPGP v4 signature trailer: {} bytes, SHA-256 {}",
                tbs.len(),
                hex_sha256(tbs)
            ));
            out.line("    (its hashed subpackets: rebuilt from the signing key and the signing");
            out.line("    time above, found equal)");
            out.field(
                "    ",
                "signing key",
                "signing key",
                request.signing_key.as_deref().unwrap_or("(none)"),
            );
        }
        Profile::Mls => out.line("  (MLS is not signed offline)"),
    }
    out.line(format!(
        "  outer hints: {}",
        if request.outer_hints {
            "the Mail-A2A-* hints are repeated on the outer message"
        } else {
            "the binding hints only"
        }
    ));
}

/// The opening: the request, the signer, the time.
fn opening(out: &mut Lines, request: &SigningRequest, fingerprint: &str) {
    out.line(format!(
        "request digest: {}",
        short_fingerprint(fingerprint)
    ));
    out.line(format!("  profile: {}", request.profile));
    out.field("  ", "signer", "signer", &request.signer_address);
    out.field("    ", "key", "signer key", &request.signer);
    out.line(format!(
        "  signing time: {}",
        request
            .signing_time
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    ));
}

/// The header fields as signed, then the addresses and subject as read.
fn headers(out: &mut Lines, request: &SigningRequest, msg: &MailA2aMessage) {
    out.line("header fields (as signed, in order):");
    for (name, value) in header_fields(&request.entity) {
        let at = format!("header {}", crate::error::quoted(&name));
        let label = if name.is_empty() {
            "(no name)"
        } else {
            name.as_str()
        };
        // The name is escaped too: it is the attacker's text as much as the value.
        let mut shown = String::new();
        label
            .chars()
            .for_each(|c| crate::error::push_shown(&mut shown, c));
        out.field("  ", &shown, &at, &value);
    }
    out.line("addresses (as read):");
    let h = &msg.headers;
    let mailboxes = h
        .from
        .iter()
        .map(|m| ("from", m))
        .chain(h.to.iter().map(|m| ("to", m)))
        .chain(h.cc.iter().map(|m| ("cc", m)));
    for (label, m) in mailboxes {
        out.field("  ", label, label, &m.address);
        if let Some(name) = &m.name {
            out.field(
                "    ",
                "display name",
                &format!("{label} display name"),
                name,
            );
        }
    }
    if let Some(s) = &h.subject {
        out.field("  ", "subject", "subject", s);
    }
}

/// The attachments and the MIME parts.
fn parts(out: &mut Lines, request: &SigningRequest, msg: &MailA2aMessage) {
    out.line(format!("attachments: {}", msg.attachments.len()));
    for (i, a) in msg.attachments.iter().enumerate() {
        let at = format!("attachment {}", i + 1);
        out.field("  ", "content id", &at, &a.content_id);
        if let Some(name) = &a.filename {
            out.field("    ", "file name", &at, name);
        }
        out.field("    ", "media type", &at, &a.content_type);
        out.line(format!("    size: {} bytes", a.data.len()));
        out.line(format!("    SHA-256: {}", hex_sha256(&a.data)));
    }
    out.line("MIME parts (depth, type, transfer encoding, content id, encoded size):");
    match crate::message::structure(&request.entity, &Limits::default()) {
        Ok(parts) => {
            for p in parts {
                let indent = "  ".repeat(p.depth.min(16));
                let head = format!(
                    "{indent}{} {} {}",
                    p.depth,
                    p.content_type,
                    p.transfer_encoding.as_deref().unwrap_or("-"),
                );
                let line = match &p.content_id {
                    Some(cid) => {
                        let mut shown = String::new();
                        cid.chars()
                            .for_each(|c| crate::error::push_shown(&mut shown, c));
                        format!("{head} <{shown}> {} bytes", p.raw_size)
                    }
                    None => format!("{head} - {} bytes", p.raw_size),
                };
                out.wrapped("", "  ", &line, false, "");
            }
        }
        Err(e) => out.line(format!("  (not read: {e})")),
    }
    match &msg.text {
        Some(text) => {
            out.line("mail text (informative, not the agent's instructions):");
            text_block(out, "  ", "mail text", text);
        }
        None => out.line("mail text: none"),
    }
}

impl Summary {
    /// The lines the default view shows; a longer summary is signed only when the
    /// operator asked for the full view.
    pub const VIEW_LINES: usize = 200;

    pub(super) fn of(request: &SigningRequest, fingerprint: &str, msg: &MailA2aMessage) -> Summary {
        let mut top = Lines::default();
        opening(&mut top, request, fingerprint);
        let text = std::str::from_utf8(msg.envelope_bytes()).unwrap_or("");
        let tree = Tree::parse(text);
        let mut effect_lines = Lines::default();
        let mut body = Lines::default();
        let mut effectful = false;
        match tree.as_ref().map(|t| t.root()) {
            Some(root) => {
                let effect = effect::of(root);
                effectful = effect.effectful;
                effect_lines.line(format!("effect: {}", effect.headline));
                for (label, path, v) in &effect.members {
                    effect_lines.json(1, Key::Label(&format!("{label} ({path})")), path, *v);
                }
                headers(&mut body, request, msg);
                body.line("envelope (canonical JSON: members by name, every string escaped):");
                body.json(1, Key::Item, "", root);
            }
            None => {
                effect_lines.line("effect: unknown (the envelope is not JSON)");
                headers(&mut body, request, msg);
                body.line("envelope: not JSON, shown as text:");
                text_block(
                    &mut body,
                    "  ",
                    "envelope",
                    &String::from_utf8_lossy(msg.envelope_bytes()),
                );
            }
        }
        parts(&mut body, request, msg);
        body.line("signed with the entity:");
        signature_input(&mut body, request);
        // Each finding once (the effect section meets the members the envelope shows).
        let mut seen = std::collections::HashSet::new();
        let warnings: Vec<render::Warning> = top
            .warnings
            .drain(..)
            .chain(effect_lines.warnings.drain(..))
            .chain(body.warnings.drain(..))
            .filter(|w| seen.insert(w.clone()))
            .collect();
        let mut all = top.lines;
        all.extend(effect_lines.lines);
        if warnings.is_empty() {
            all.push("warnings: none".into());
        } else {
            all.push(format!("warnings: {}", warnings.len()));
            let mut w = Lines::default();
            for warning in &warnings {
                // Both parts are escaped already: written again, they stay as they are.
                let text = format!("{}: {}", warning.at, warning.what);
                w.wrapped("  ! ", "    ", &text, false, "");
            }
            all.extend(w.lines);
        }
        all.extend(body.lines);
        let mut all = render::fit_columns(all);
        all.push(format!("end of summary ({} lines)", all.len() + 1));
        let mut text = String::with_capacity(all.iter().map(|l| l.len() + 1).sum());
        let mut head_end = 0;
        for (i, line) in all.iter().enumerate() {
            text.push_str(line);
            text.push('\n');
            if i + 1 == Self::VIEW_LINES {
                head_end = text.len();
            }
        }
        if all.len() <= Self::VIEW_LINES {
            head_end = text.len();
        }
        Summary {
            lines: all.len(),
            text,
            head_end,
            effectful,
            warnings: warnings.len(),
        }
    }

    /// The whole summary.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many lines it has.
    pub fn line_count(&self) -> usize {
        self.lines
    }

    /// Whether signing makes the partner's agent act or pay.
    pub fn is_effectful(&self) -> bool {
        self.effectful
    }

    /// How many warnings it gives.
    pub fn warning_count(&self) -> usize {
        self.warnings
    }

    /// Whether the default view shows all of it.
    pub fn fits_view(&self) -> bool {
        self.lines <= Self::VIEW_LINES
    }

    /// Its first [`Summary::VIEW_LINES`] lines (all of it when it fits).
    pub fn head(&self) -> &str {
        &self.text[..self.head_end]
    }

    /// The text the operator is shown before signing: all of it, when it fits the
    /// default view or `full` is asked; a summary that does not fit is refused
    /// rather than cut, so nothing is signed unseen.
    pub fn shown(&self, full: bool) -> Result<&str, OfflineError> {
        if full || self.fits_view() {
            Ok(&self.text)
        } else {
            Err(OfflineError::SummaryTooLong {
                lines: self.lines,
                view: Self::VIEW_LINES,
            })
        }
    }

    /// SHA-256 of the text (hex): what the signing log records of what was shown.
    pub fn digest(&self) -> String {
        hex_sha256(self.text.as_bytes())
    }

    /// The summary of `msg` as if `request` asked to sign it, without the review's
    /// checks (the `offline` fuzz target's way in).
    #[cfg(feature = "fuzz-api")]
    #[doc(hidden)]
    pub fn fuzz_of(request: &SigningRequest, msg: &MailA2aMessage) -> Summary {
        Summary::of(request, &request.fingerprint(), msg)
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}
