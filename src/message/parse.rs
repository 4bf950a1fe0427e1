//! Reading a MailA2A message from untrusted bytes.
//!
//! mail-parser does the RFC 5322/MIME tokenising; this module bounds what it may cost
//! (size first, then part count and depth), refuses ambiguity (repeated singleton
//! headers, two machine parts) and decodes every body strictly (`transfer`).

use mail_parser::{HeaderName, HeaderValue, MessageParser, MimeHeaders, PartType};
use time::OffsetDateTime;

use super::transfer::{check_base64, decode, Cte, DecodeFault};
use super::{
    Attachment, Headers, Hints, Limits, MailA2aMessage, Mailbox, MessageError, A2A_MEDIA_TYPE,
};
use crate::envelope::Envelope;

/// Headers that may appear at most once (RFC 5322 3.6, plus the binding's hints and the
/// MIME headers that decide how the body is read).
const SINGLETONS: [&str; 12] = [
    "from",
    "sender",
    "to",
    "cc",
    "date",
    "message-id",
    "in-reply-to",
    "references",
    "subject",
    "mime-version",
    "content-type",
    "content-transfer-encoding",
];

pub(crate) fn parse(raw: &[u8], limits: &Limits) -> Result<MailA2aMessage, MessageError> {
    let mut msg = parse_bounded(raw, limits)?;

    // Sort the leaves of the multipart tree (attached messages are leaves).
    let mut machine = Vec::new();
    let mut text_part = None;
    let mut leaves = Vec::new();
    for (id, _) in walk(&msg, limits)? {
        let Some(part) = msg.part(id) else { continue };
        match &part.body {
            PartType::Multipart(_) => {}
            _ => {
                let media = media_type(part.content_type());
                if media == A2A_MEDIA_TYPE {
                    machine.push(id);
                } else if media == "text/plain"
                    && text_part.is_none()
                    && part
                        .content_disposition()
                        .is_none_or(|d| !d.is_attachment())
                {
                    text_part = Some(id);
                } else {
                    leaves.push(id);
                }
            }
        }
    }
    let machine_id = match machine.as_slice() {
        [] => return Err(MessageError::NoMachinePart),
        [one] => *one,
        many => {
            return Err(MessageError::MultipleMachineParts { count: many.len() });
        }
    };

    let mut budget = limits.max_decoded_bytes;
    let mut take = |bytes: Vec<u8>| -> Result<Vec<u8>, MessageError> {
        budget = budget
            .checked_sub(bytes.len())
            .ok_or(MessageError::DecodedTooLarge {
                limit: limits.max_decoded_bytes,
            })?;
        Ok(bytes)
    };

    // The machine part: UTF-8, strictly decoded.
    let part = msg.part(machine_id).ok_or(MessageError::NoMachinePart)?;
    if let Some(cs) = part.content_type().and_then(|c| c.attribute("charset")) {
        if !cs.eq_ignore_ascii_case("utf-8") && !cs.eq_ignore_ascii_case("us-ascii") {
            return Err(MessageError::UnsupportedCharset {
                charset: cs.chars().take(40).collect(),
            });
        }
    }
    let mut envelope_bytes = take(decode_part(
        raw,
        part,
        "application/a2a+json",
        predecoded(part),
    )?)?;
    // The digest covers the JSON, not how the part ended: in a multipart the last CRLF
    // belongs to the delimiter; a single-part 7bit/8bit body keeps its final line break,
    // which is dropped here so both shapes of the same JSON have the same digest.
    if Cte::from_header(part.content_transfer_encoding()) == Some(Cte::Identity) {
        if envelope_bytes.ends_with(b"\r\n") {
            envelope_bytes.truncate(envelope_bytes.len() - 2);
        } else if envelope_bytes.ends_with(b"\n") {
            envelope_bytes.truncate(envelope_bytes.len() - 1);
        }
    }
    let envelope = Envelope::from_json_with_depth(&envelope_bytes, limits.max_json_depth)?;

    let text = match text_part.and_then(|id| msg.part(id)) {
        Some(p) => {
            let bytes = take(decode_part(raw, p, "text/plain", None)?)?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        None => None,
    };

    let mut attachments = Vec::with_capacity(leaves.len());
    for id in leaves {
        let idx = id as usize;
        let Some(p) = msg.parts.get(idx) else {
            continue;
        };
        let content_id = p
            .content_id()
            .map(|c| {
                c.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
            .unwrap_or_default();
        let content_type = media_type(p.content_type());
        let filename = p.attachment_name().map(str::to_string);
        let data = if matches!(p.body, PartType::Message(_)) {
            body_bytes(raw, p).to_vec()
        } else {
            // Move mail-parser's decoded buffer out instead of copying it.
            let taken = std::mem::take(&mut msg.parts[idx].body);
            let owned = match taken {
                PartType::Binary(d) | PartType::InlineBinary(d) => Some(d),
                _ => None,
            };
            let label = if content_id.is_empty() {
                "attachment"
            } else {
                content_id.as_str()
            };
            decode_part(raw, &msg.parts[idx], label, owned)?
        };
        attachments.push(Attachment {
            content_type,
            filename,
            data: take(data)?,
            content_id,
        });
    }

    let headers = read_headers(&msg, raw)?;
    Ok(MailA2aMessage {
        headers,
        envelope,
        envelope_bytes,
        text,
        attachments,
    })
}

/// mail-parser's parse of `raw`, after the size, header and structure bounds.
fn parse_bounded<'r>(
    raw: &'r [u8],
    limits: &Limits,
) -> Result<mail_parser::Message<'r>, MessageError> {
    if raw.len() > limits.max_message_bytes {
        return Err(MessageError::TooLarge {
            size: raw.len(),
            limit: limits.max_message_bytes,
        });
    }
    if !starts_with_header_field(raw) {
        return Err(MessageError::NotMime);
    }
    precheck_structure(raw, limits)?;
    // mail-parser 0.11.9 has a `debug_assert!(false)` that hostile input reaches (a
    // multipart whose state it loses); release builds recover from it, debug builds
    // panic. Contain it here, at the one call into the parser, as "not a message".
    let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        MessageParser::default().parse(raw)
    }))
    .ok()
    .flatten()
    .ok_or(MessageError::NotMime)?;
    if msg.headers().is_empty() {
        return Err(MessageError::NotMime);
    }
    if msg.parts.len() > limits.max_parts {
        return Err(MessageError::TooManyParts {
            limit: limits.max_parts,
        });
    }
    Ok(msg)
}

/// Every part of the multipart tree, depth first, as (part id, depth); attached
/// messages are leaves. Deeper than the limit is an error.
fn walk(
    msg: &mail_parser::Message<'_>,
    limits: &Limits,
) -> Result<Vec<(u32, usize)>, MessageError> {
    let mut out = Vec::with_capacity(msg.parts.len());
    let mut stack = vec![(0u32, 1usize)];
    while let Some((id, depth)) = stack.pop() {
        if depth > limits.max_mime_depth {
            return Err(MessageError::TooDeep {
                limit: limits.max_mime_depth,
            });
        }
        out.push((id, depth));
        if let Some(PartType::Multipart(children)) = msg.part(id).map(|p| &p.body) {
            stack.extend(children.iter().rev().map(|c| (*c, depth + 1)));
        }
    }
    Ok(out)
}

/// RFC 5322 2.2: a message starts with a header field, `name:` with a name of
/// printable ASCII other than the colon.
fn starts_with_header_field(raw: &[u8]) -> bool {
    let name_len = raw
        .iter()
        .take_while(|&&b| (33..=126).contains(&b) && b != b':')
        .count();
    name_len > 0 && raw.get(name_len) == Some(&b':')
}

/// Cheap bounds before handing the bytes to the MIME parser: a nesting bomb (1000
/// levels of multipart) or a part bomb (10^6 parts) is refused from a count of declared
/// boundaries and of the lines that are delimiters of one, without building a part tree.
/// Both scans are SIMD substring searches, so this costs a small fraction of a parse.
fn precheck_structure(raw: &[u8], limits: &Limits) -> Result<(), MessageError> {
    let too_many = MessageError::TooManyParts {
        limit: limits.max_parts,
    };
    let mut boundaries: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for at in memchr::memmem::find_iter(raw, b"oundary=") {
        if at == 0 || !raw[at - 1].eq_ignore_ascii_case(&b'b') {
            continue;
        }
        if let Some(b) = boundary_value(&raw[at + 8..]) {
            boundaries.insert(b);
            // Every multipart declares one boundary: more than parts allowed is a bomb.
            if boundaries.len() > limits.max_parts {
                return Err(too_many);
            }
        }
    }
    if boundaries.is_empty() {
        return Ok(());
    }
    let line_starts =
        std::iter::once(0).chain(memchr::memmem::find_iter(raw, b"\n--").map(|i| i + 1));
    let mut delimiters = 0usize;
    for start in line_starts {
        let Some(rest) = raw[start..].strip_prefix(b"--") else {
            continue;
        };
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let rest = trim_end(&rest[..end]);
        let rest = if boundaries.contains(rest) {
            rest
        } else {
            rest.strip_suffix(b"--").unwrap_or(rest)
        };
        if boundaries.contains(rest) {
            delimiters += 1;
            // Each part opens with one delimiter line; each multipart adds a close.
            if delimiters > 2 * limits.max_parts {
                return Err(too_many);
            }
        }
    }
    Ok(())
}

fn trim_end(s: &[u8]) -> &[u8] {
    let end = s
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r'))
        .map_or(0, |i| i + 1);
    &s[..end]
}

/// The value of a `boundary=` parameter starting at `rest`.
fn boundary_value(rest: &[u8]) -> Option<&[u8]> {
    let value = if let Some(q) = rest.strip_prefix(b"\"") {
        &q[..memchr::memchr(b'"', q)?]
    } else {
        let end = rest
            .iter()
            .position(|b| matches!(b, b';' | b' ' | b'\t' | b'\r' | b'\n'))
            .unwrap_or(rest.len());
        &rest[..end]
    };
    (!value.is_empty() && value.len() <= 200).then_some(value)
}

fn media_type(ct: Option<&mail_parser::ContentType<'_>>) -> String {
    match ct {
        Some(ct) => match ct.subtype() {
            Some(sub) => format!("{}/{}", ct.ctype(), sub).to_ascii_lowercase(),
            None => ct.ctype().to_ascii_lowercase(),
        },
        None => "text/plain".into(),
    }
}

/// The raw body of a part, without the CRLF that belongs to the next delimiter.
fn body_bytes<'r>(raw: &'r [u8], part: &mail_parser::MessagePart<'_>) -> &'r [u8] {
    let start = (part.offset_body as usize).min(raw.len());
    let end = (part.offset_end as usize).clamp(start, raw.len());
    &raw[start..end]
}

/// The strictly decoded body of `part`. `predecoded` is mail-parser's own decoding of a
/// non-text body, when the caller has it: once the body is known to be exact base64,
/// that is the strict decoding, so it is not done twice (and, when owned, not copied).
fn decode_part(
    raw: &[u8],
    part: &mail_parser::MessagePart<'_>,
    label: &str,
    predecoded: Option<std::borrow::Cow<'_, [u8]>>,
) -> Result<Vec<u8>, MessageError> {
    let declared = part.content_transfer_encoding();
    let cte = Cte::from_header(declared).ok_or_else(|| MessageError::UnknownTransferEncoding {
        encoding: declared.unwrap_or_default().chars().take(40).collect(),
    })?;
    let body = body_bytes(raw, part);
    let bad = |f: DecodeFault| MessageError::BadTransferEncoding {
        encoding: match f {
            DecodeFault::Base64 => "base64",
            DecodeFault::QuotedPrintable => "quoted-printable",
        },
        part: label.chars().take(80).collect(),
    };
    match (cte, predecoded) {
        (Cte::Base64, Some(decoded)) => {
            let expected = check_base64(body).map_err(bad)?;
            if decoded.len() == expected {
                Ok(decoded.into_owned())
            } else {
                decode(body, cte).map_err(bad)
            }
        }
        _ => decode(body, cte).map_err(bad),
    }
}

/// mail-parser's decoded bytes of a non-text leaf, borrowed.
fn predecoded<'a>(part: &'a mail_parser::MessagePart<'_>) -> Option<std::borrow::Cow<'a, [u8]>> {
    match &part.body {
        PartType::Binary(d) | PartType::InlineBinary(d) => {
            Some(std::borrow::Cow::Borrowed(d.as_ref()))
        }
        _ => None,
    }
}

fn header_text(raw: &[u8], h: &mail_parser::Header<'_>) -> String {
    let start = (h.offset_start as usize).min(raw.len());
    let end = (h.offset_end as usize).clamp(start, raw.len());
    let text = String::from_utf8_lossy(&raw[start..end]);
    // Unfold (RFC 5322 2.2.3) and trim.
    text.split(['\r', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn mailboxes(v: Option<&mail_parser::Address<'_>>) -> Vec<Mailbox> {
    v.map(|a| {
        a.iter()
            .filter_map(|addr| {
                Some(Mailbox {
                    name: addr.name().map(str::to_string),
                    address: addr.address()?.to_string(),
                })
            })
            .collect()
    })
    .unwrap_or_default()
}

fn ids(v: &HeaderValue<'_>) -> Vec<String> {
    match v {
        HeaderValue::Text(t) => vec![t.to_string()],
        HeaderValue::TextList(l) => l.iter().map(|t| t.to_string()).collect(),
        _ => Vec::new(),
    }
}

fn read_headers(msg: &mail_parser::Message<'_>, raw: &[u8]) -> Result<Headers, MessageError> {
    // Counts of the headers that may appear once: the RFC 5322/MIME singletons, then the
    // six hints; any other Mail-A2A-* field is counted by name (rare).
    let mut counts = [0u8; SINGLETONS.len() + Hints::NAMES.len()];
    let mut other_hints: Vec<String> = Vec::new();
    let mut hints = Hints::default();
    let mut mime_version = None;
    let mut auto_submitted = None;
    for h in msg.headers() {
        let name = h.name.as_str();
        let slot = SINGLETONS
            .iter()
            .chain(Hints::NAMES.iter())
            .position(|s| s.eq_ignore_ascii_case(name));
        let is_hint = name.len() > 9 && name.as_bytes()[..9].eq_ignore_ascii_case(b"mail-a2a-");
        let duplicate = match slot {
            Some(i) => {
                counts[i] = counts[i].saturating_add(1);
                counts[i] > 1
            }
            None if is_hint => {
                let lower = name.to_ascii_lowercase();
                let seen = other_hints.contains(&lower);
                other_hints.push(lower);
                seen
            }
            None => false,
        };
        if duplicate {
            return Err(MessageError::DuplicateHeader {
                name: name.chars().take(60).collect(),
            });
        }
        if is_hint {
            hints.set(name, header_text(raw, h));
        } else if matches!(h.name, HeaderName::MimeVersion) {
            mime_version = Some(header_text(raw, h));
        } else if name.eq_ignore_ascii_case("auto-submitted") {
            auto_submitted = Some(header_text(raw, h));
        }
    }
    let from = mailboxes(msg.from());
    Ok(Headers {
        from_count: from.len(),
        from: from.into_iter().next(),
        to: mailboxes(msg.to()),
        cc: mailboxes(msg.cc()),
        date: msg
            .date()
            .filter(|d| d.is_valid())
            .and_then(|d| OffsetDateTime::from_unix_timestamp(d.to_timestamp()).ok()),
        message_id: msg.message_id().map(str::to_string),
        in_reply_to: ids(msg.in_reply_to()).into_iter().next(),
        references: ids(msg.references()),
        subject: msg.subject().map(str::to_string),
        mime_version,
        auto_submitted,
        hints,
    })
}

/// One MIME part as `mailseal inspect` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PartInfo {
    /// Nesting depth (the top-level entity is 1).
    pub depth: usize,
    /// `type/subtype`, lower case.
    pub content_type: String,
    /// Declared Content-Transfer-Encoding, if any.
    pub transfer_encoding: Option<String>,
    /// Content-ID without brackets, if any.
    pub content_id: Option<String>,
    /// Raw body size in bytes.
    pub raw_size: usize,
}

/// The MIME tree of a message, depth first, within `limits` (the same bounds as
/// [`MailA2aMessage::parse`]).
pub fn structure(raw: &[u8], limits: &Limits) -> Result<Vec<PartInfo>, MessageError> {
    let msg = parse_bounded(raw, limits)?;
    let mut out = Vec::new();
    for (id, depth) in walk(&msg, limits)? {
        let Some(part) = msg.part(id) else { continue };
        out.push(PartInfo {
            depth,
            content_type: media_type(part.content_type()),
            transfer_encoding: part
                .content_transfer_encoding()
                .map(|s| s.trim().to_ascii_lowercase()),
            content_id: part
                .content_id()
                .map(|c| c.trim_matches(['<', '>', ' ']).to_string()),
            raw_size: body_bytes(raw, part).len(),
        });
    }
    Ok(out)
}

/// One direct child of a protected message's top-level multipart.
#[derive(Clone, Debug)]
pub(crate) struct OuterPart {
    /// `type/subtype`, lower case.
    pub media_type: String,
    /// The part as it stands in the message, headers included, without the CRLF that
    /// belongs to the next delimiter: what multipart/signed signs.
    pub entity: Vec<u8>,
    /// The raw body, still transfer-encoded.
    body: Vec<u8>,
    /// Its declared Content-Transfer-Encoding.
    cte: Option<String>,
}

impl OuterPart {
    /// The strictly decoded body. Decoded only on request: a signed part must not be
    /// interpreted before its signature is checked.
    pub(crate) fn decoded(&self) -> Result<Vec<u8>, MessageError> {
        let cte = Cte::from_header(self.cte.as_deref()).ok_or_else(|| {
            MessageError::UnknownTransferEncoding {
                encoding: self
                    .cte
                    .clone()
                    .unwrap_or_default()
                    .chars()
                    .take(40)
                    .collect(),
            }
        })?;
        decode(&self.body, cte).map_err(|f| MessageError::BadTransferEncoding {
            encoding: match f {
                DecodeFault::Base64 => "base64",
                DecodeFault::QuotedPrintable => "quoted-printable",
            },
            part: self.media_type.chars().take(80).collect(),
        })
    }
}

/// The outer layer of a protected message: its headers, top-level media type with
/// parameters, and (for a multipart) its direct children.
#[derive(Clone, Debug)]
pub(crate) struct Outer {
    pub headers: Headers,
    pub media_type: String,
    pub params: Vec<(String, String)>,
    pub parts: Vec<OuterPart>,
    /// The whole entity when it is not a multipart (`application/pkcs7-mime`).
    pub single: Option<OuterPart>,
}

impl Outer {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the outer layer of a protected message within `limits`.
pub(crate) fn read_outer(raw: &[u8], limits: &Limits) -> Result<Outer, MessageError> {
    let msg = parse_bounded(raw, limits)?;
    walk(&msg, limits)?;
    let root = msg.part(0).ok_or(MessageError::NotMime)?;
    let params = root
        .content_type()
        .and_then(|c| c.attributes())
        .map(|a| {
            a.iter()
                .map(|at| (at.name.to_string(), at.value.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let mut parts = Vec::new();
    let mut single = None;
    if !matches!(root.body, PartType::Multipart(_)) {
        single = Some(OuterPart {
            media_type: media_type(root.content_type()),
            entity: raw.to_vec(),
            body: body_bytes(raw, root).to_vec(),
            cte: root.content_transfer_encoding().map(str::to_string),
        });
    }
    if let PartType::Multipart(children) = &root.body {
        for id in children {
            let Some(p) = msg.part(*id) else { continue };
            let start = (p.offset_header as usize).min(raw.len());
            let end = (p.offset_end as usize).clamp(start, raw.len());
            parts.push(OuterPart {
                media_type: media_type(p.content_type()),
                entity: raw[start..end].to_vec(),
                body: body_bytes(raw, p).to_vec(),
                cte: p.content_transfer_encoding().map(str::to_string),
            });
        }
    }
    Ok(Outer {
        headers: read_headers(&msg, raw)?,
        media_type: media_type(root.content_type()),
        params,
        parts,
        single,
    })
}
