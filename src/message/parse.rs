//! Reading a MailA2A message from untrusted bytes.
//!
//! `mime` cuts the message into entities within the limits; `fields` reads the plain
//! forms of the top-level header values and mail-parser the others (addresses, dates,
//! message ids, encoded words), from those fields alone. This module sorts the entities (exactly one
//! machine part), refuses ambiguity (repeated singleton headers) and decodes every body
//! strictly (`transfer`).

use std::ops::Range;

use mail_parser::{HeaderValue, MessageParser};

use super::fields;
use super::mime::{Entity, Tree};
use super::transfer::{decode, Cte, DecodeFault};
use super::{
    Attachment, Headers, Hints, Limits, MailA2aMessage, Mailbox, MessageError, A2A_MEDIA_TYPE,
};
use crate::envelope::Envelope;

/// Headers that may appear at most once (RFC 5322 3.6, plus the binding's hints and the
/// MIME headers that decide how the body is read). The first [`VALUE_FIELDS`] are the
/// fields whose values are read (addresses, date, message ids, the encoded-word
/// subject), so one lookup of a name tells both.
const SINGLETONS: [&str; 12] = [
    "from",
    "to",
    "cc",
    "date",
    "message-id",
    "in-reply-to",
    "references",
    "subject",
    "sender",
    "mime-version",
    "content-type",
    "content-transfer-encoding",
];

/// How many of [`SINGLETONS`], from the first, have their values read.
const VALUE_FIELDS: usize = 8;

pub(crate) fn parse(raw: &[u8], limits: &Limits) -> Result<MailA2aMessage, MessageError> {
    let (parts, json) = read_parts(raw, limits, false)?;
    let json = match json {
        Json::Read(envelope) => envelope,
        // Not asked for (`defer` was false).
        Json::At(_) | Json::Encoded(_) => return Err(MessageError::NoMachinePart),
    };
    Ok(parts.with_envelope(json))
}

/// [`parse`] of `buffer[range]`, which it may keep: an identity-encoded machine part
/// (8bit or binary, as our encrypted senders write it) is moved to the front of the
/// buffer and becomes the envelope's text, so a large payload is held once rather than
/// copied out of the decrypted entity.
pub(crate) fn parse_owned(
    mut buffer: Vec<u8>,
    range: Range<usize>,
    limits: &Limits,
) -> Result<MailA2aMessage, MessageError> {
    let entity = buffer.get(range.clone()).ok_or(MessageError::NotMime)?;
    let (parts, json) = read_parts(entity, limits, true)?;
    let envelope = match json {
        Json::Read(envelope) => envelope,
        Json::At(at) => {
            let at = range.start + at.start..range.start + at.end;
            let len = at.len();
            buffer.copy_within(at, 0);
            buffer.truncate(len);
            release_tail(&mut buffer);
            Envelope::from_json_vec(buffer, limits.max_json_depth)?
        }
        Json::Encoded(part) => {
            let InPlace {
                at,
                cte,
                media_type,
            } = part;
            let at = range.start + at.start..range.start + at.end;
            super::transfer::decode_in_place(&mut buffer, at, cte?)
                .map_err(|f| bad_transfer_encoding(f, &media_type))?;
            if buffer.len() > parts.budget {
                return Err(MessageError::DecodedTooLarge {
                    limit: limits.max_decoded_bytes,
                });
            }
            release_tail(&mut buffer);
            Envelope::from_json_vec(buffer, limits.max_json_depth)?
        }
    };
    Ok(parts.with_envelope(envelope))
}

/// Gives back the part of a large buffer its content no longer fills (base64 is a
/// quarter larger than what it decodes to): the allocator shrinks a large block where
/// it lies, without copying it.
fn release_tail(buffer: &mut Vec<u8>) {
    if buffer.capacity() - buffer.len() > buffer.len() / 16 {
        buffer.shrink_to_fit();
    }
}

/// The machine part: read, or (asked for with `defer`) where its JSON text lies in
/// the entity, as is or transfer-encoded, for the caller to read from its own buffer.
enum Json {
    Read(Envelope),
    At(Range<usize>),
    Encoded(InPlace),
}

/// Everything of a message but its envelope.
struct Parts {
    headers: Headers,
    text: Option<String>,
    attachments: Vec<Attachment>,
    /// What is left of the decoded-size budget for a deferred machine part.
    budget: usize,
}

impl Parts {
    fn with_envelope(self, envelope: Envelope) -> MailA2aMessage {
        let envelope_bytes = envelope
            .source_bytes()
            .unwrap_or_else(|| bytes::Bytes::from(envelope.to_json()));
        MailA2aMessage {
            headers: self.headers,
            envelope,
            envelope_bytes,
            text: self.text,
            attachments: self.attachments,
        }
    }
}

fn read_parts(raw: &[u8], limits: &Limits, defer: bool) -> Result<(Parts, Json), MessageError> {
    let tree = read_tree(raw, limits, Tree::parse)?;

    // Sort the leaves of the multipart tree (attached messages are leaves).
    let mut machine = Vec::new();
    let mut text_part = None;
    let mut leaves = Vec::new();
    for entity in tree.entities.iter().filter(|e| !e.is_multipart()) {
        if entity.media_type == A2A_MEDIA_TYPE {
            machine.push(entity);
        } else if entity.media_type == "text/plain"
            && text_part.is_none()
            && !entity.is_attachment()
        {
            text_part = Some(entity);
        } else {
            leaves.push(entity);
        }
    }
    let part = match machine.as_slice() {
        [] => return Err(MessageError::NoMachinePart),
        [one] => *one,
        many => {
            return Err(MessageError::MultipleMachineParts { count: many.len() });
        }
    };

    let mut budget = limits.max_decoded_bytes;
    let mut charge = |len: usize| -> Result<(), MessageError> {
        budget = budget
            .checked_sub(len)
            .ok_or(MessageError::DecodedTooLarge {
                limit: limits.max_decoded_bytes,
            })?;
        Ok(())
    };

    // The machine part: UTF-8, strictly decoded.
    if let Some(cs) = part.param("charset") {
        if !cs.eq_ignore_ascii_case("utf-8") && !cs.eq_ignore_ascii_case("us-ascii") {
            return Err(MessageError::UnsupportedCharset {
                charset: cs.chars().take(40).collect(),
            });
        }
    }
    let json = if Cte::from_header(part.transfer_encoding.as_deref()) == Some(Cte::Identity) {
        // The digest covers the JSON, not how the part ended: in a multipart the last
        // CRLF belongs to the delimiter; a single-part 7bit/8bit body keeps its final
        // line break, which is dropped here so both shapes of the same JSON have the
        // same digest.
        let body = part.body_range();
        let text = &raw[body.clone()];
        let trim = if text.ends_with(b"\r\n") {
            2
        } else {
            usize::from(text.ends_with(b"\n"))
        };
        let at = body.start..body.end - trim;
        charge(at.len())?;
        if defer {
            Json::At(at)
        } else {
            Json::Read(Envelope::from_json_vec(
                raw[at].to_vec(),
                limits.max_json_depth,
            )?)
        }
    } else if defer {
        Json::Encoded(InPlace {
            at: part.body_range(),
            cte: Cte::from_header(part.transfer_encoding.as_deref()).ok_or_else(|| {
                MessageError::UnknownTransferEncoding {
                    encoding: part
                        .transfer_encoding
                        .as_deref()
                        .unwrap_or_default()
                        .chars()
                        .take(40)
                        .collect(),
                }
            }),
            media_type: A2A_MEDIA_TYPE.to_string(),
        })
    } else {
        let bytes = decode_entity(raw, part, A2A_MEDIA_TYPE)?;
        charge(bytes.len())?;
        Json::Read(Envelope::from_json_vec(bytes, limits.max_json_depth)?)
    };

    let text = match text_part {
        Some(p) => {
            let bytes = decode_entity(raw, p, "text/plain")?;
            charge(bytes.len())?;
            Some(match String::from_utf8(bytes) {
                Ok(s) => s,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            })
        }
        None => None,
    };

    let mut attachments = Vec::with_capacity(leaves.len());
    for p in leaves {
        let content_id = p.content_id.clone().unwrap_or_default();
        let label = if content_id.is_empty() {
            "attachment"
        } else {
            content_id.as_str()
        };
        let data = decode_entity(raw, p, label)?;
        charge(data.len())?;
        attachments.push(Attachment {
            content_type: p.media_type.clone(),
            filename: p.file_name().map(str::to_string),
            data,
            content_id,
        });
    }

    let headers = read_headers(&tree, raw)?;
    Ok((
        Parts {
            headers,
            text,
            attachments,
            budget,
        },
        json,
    ))
}

/// The entity tree of `raw`, after the size bound, with the structure bounds.
fn read_tree(
    raw: &[u8],
    limits: &Limits,
    cut: fn(&[u8], &Limits) -> Result<Tree, MessageError>,
) -> Result<Tree, MessageError> {
    if raw.len() > limits.max_message_bytes {
        return Err(MessageError::TooLarge {
            size: raw.len(),
            limit: limits.max_message_bytes,
        });
    }
    if !starts_with_header_field(raw) {
        return Err(MessageError::NotMime);
    }
    cut(raw, limits)
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

/// The strictly decoded body of `entity`.
fn decode_entity(raw: &[u8], entity: &Entity, label: &str) -> Result<Vec<u8>, MessageError> {
    let declared = entity.transfer_encoding.as_deref();
    let cte = Cte::from_header(declared).ok_or_else(|| MessageError::UnknownTransferEncoding {
        encoding: declared.unwrap_or_default().chars().take(40).collect(),
    })?;
    decode(entity.body(raw), cte).map_err(|f| MessageError::BadTransferEncoding {
        encoding: match f {
            DecodeFault::Base64 => "base64",
            DecodeFault::QuotedPrintable => "quoted-printable",
        },
        part: label.chars().take(80).collect(),
    })
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

/// The top-level headers: repeated singletons refused, hints and MIME-Version read
/// here, addresses, dates, message ids and the subject read by mail-parser from the
/// header section alone.
fn read_headers(tree: &Tree, raw: &[u8]) -> Result<Headers, MessageError> {
    let root = tree.root();
    // Counts of the headers that may appear once: the RFC 5322/MIME singletons, then the
    // six hints; any other Mail-A2A-* field is counted by name (rare).
    let mut counts = [0u8; SINGLETONS.len() + Hints::NAMES.len()];
    let mut other_hints: Vec<Vec<u8>> = Vec::new();
    let mut headers = Headers::default();
    // Plain values are read here (`fields`); the others go to mail-parser, which sees
    // only those fields, one line each, not the whole section.
    let mut section = Vec::new();
    for f in &root.fields {
        let name = f.name(raw);
        let slot = SINGLETONS
            .iter()
            .position(|s| s.len() == name.len() && s.as_bytes().eq_ignore_ascii_case(name))
            .or_else(|| {
                Hints::NAMES
                    .iter()
                    .position(|s| s.len() == name.len() && s.as_bytes().eq_ignore_ascii_case(name))
                    .map(|i| i + SINGLETONS.len())
            });
        let is_hint = name.len() > 9 && name[..9].eq_ignore_ascii_case(b"mail-a2a-");
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
                name: String::from_utf8_lossy(name).chars().take(60).collect(),
            });
        }
        let which = match slot {
            Some(i) if i < VALUE_FIELDS => i,
            Some(i) if i >= SINGLETONS.len() => {
                headers.hints.set_nth(i - SINGLETONS.len(), f.text(raw));
                continue;
            }
            Some(i) if SINGLETONS[i] == "mime-version" => {
                headers.mime_version = Some(f.text(raw));
                continue;
            }
            None if f.is(raw, "auto-submitted") => {
                headers.auto_submitted = Some(f.text(raw));
                continue;
            }
            _ => continue,
        };
        let text = f.str(raw);
        let plain = match which {
            0 => fields::mailbox(&text).map(|m| {
                headers.from_count = 1;
                headers.from = Some(m);
            }),
            1 => fields::mailbox(&text).map(|m| headers.to = vec![m]),
            2 => fields::mailbox(&text).map(|m| headers.cc = vec![m]),
            // Every Date is read here, in full (`fields::date_time`): one that does not
            // parse leaves the message without a valid Date.
            3 => {
                headers.date = fields::date_time(&text);
                Some(())
            }
            4 => fields::msg_ids(&text)
                .filter(|ids| ids.len() == 1)
                .map(|mut ids| headers.message_id = ids.pop()),
            5 => fields::msg_ids(&text)
                .filter(|ids| ids.len() == 1)
                .map(|mut ids| headers.in_reply_to = ids.pop()),
            6 => fields::msg_ids(&text).map(|ids| headers.references = ids),
            _ => fields::subject(f.value(raw)).map(|s| headers.subject = Some(s)),
        };
        if plain.is_none() {
            section.extend_from_slice(f.line(raw));
            section.extend_from_slice(b"\r\n");
        }
    }
    if section.is_empty() {
        return Ok(headers);
    }
    section.extend_from_slice(b"\r\n");
    // mail-parser 0.11.9 has a `debug_assert!(false)` that hostile input reaches; release
    // builds recover from it, debug builds panic. Contain it here, at the one call into
    // the parser, as "not a message".
    let msg = std::panic::catch_unwind(|| MessageParser::new().parse_headers(&section[..]))
        .ok()
        .flatten()
        .filter(|m| !m.parts.is_empty())
        .ok_or(MessageError::NotMime)?;
    if msg.from().is_some() {
        let from = mailboxes(msg.from());
        headers.from_count = from.len();
        headers.from = from.into_iter().next();
    }
    if msg.to().is_some() {
        headers.to = mailboxes(msg.to());
    }
    if msg.cc().is_some() {
        headers.cc = mailboxes(msg.cc());
    }
    if let Some(id) = msg.message_id() {
        headers.message_id = Some(id.to_string());
    }
    if let Some(id) = ids(msg.in_reply_to()).into_iter().next() {
        headers.in_reply_to = Some(id);
    }
    let references = ids(msg.references());
    if !references.is_empty() {
        headers.references = references;
    }
    if let Some(s) = msg.subject() {
        headers.subject = Some(s.to_string());
    }
    Ok(headers)
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
    /// Where the raw body (still transfer-encoded) lies in the message: after the
    /// blank line, without the line break that belongs to the next delimiter.
    pub body: std::ops::Range<usize>,
}

/// The MIME tree of a message, depth first, within `limits` (the same bounds as
/// [`MailA2aMessage::parse`]).
pub fn structure(raw: &[u8], limits: &Limits) -> Result<Vec<PartInfo>, MessageError> {
    let tree = read_tree(raw, limits, Tree::parse)?;
    Ok(tree
        .entities
        .iter()
        .map(|e| PartInfo {
            depth: e.depth,
            content_type: e.media_type.clone(),
            transfer_encoding: e.transfer_encoding.as_deref().map(str::to_ascii_lowercase),
            content_id: e.content_id.clone(),
            raw_size: e.end - e.body_start,
            body: e.body_range(),
        })
        .collect())
}

/// One direct child of a protected message's top-level multipart.
#[derive(Clone, Debug)]
pub(crate) struct OuterPart<'r> {
    /// `type/subtype`, lower case.
    pub media_type: String,
    /// The part as it stands in the message, headers included, without the CRLF that
    /// belongs to the next delimiter: what multipart/signed signs.
    pub entity: &'r [u8],
    /// The raw body, still transfer-encoded.
    body: &'r [u8],
    /// Where the body lies in the message.
    body_at: Range<usize>,
    /// Its declared Content-Transfer-Encoding.
    cte: Option<String>,
}

/// A body to decode in its own message's buffer ([`OuterPart::in_place`]).
pub(crate) struct InPlace {
    at: Range<usize>,
    cte: Result<Cte, MessageError>,
    media_type: String,
}

impl InPlace {
    /// Decodes the body into the front of `raw`, the buffer it was read from, and cuts
    /// `raw` to it: the message's header section and encoded body are gone, and the
    /// large body is never held twice.
    pub(crate) fn decode(self, raw: &mut Vec<u8>) -> Result<(), MessageError> {
        let cte = self.cte?;
        super::transfer::decode_in_place(raw, self.at, cte)
            .map_err(|f| bad_transfer_encoding(f, &self.media_type))
    }
}

fn bad_transfer_encoding(f: DecodeFault, media_type: &str) -> MessageError {
    MessageError::BadTransferEncoding {
        encoding: match f {
            DecodeFault::Base64 => "base64",
            DecodeFault::QuotedPrintable => "quoted-printable",
        },
        part: media_type.chars().take(80).collect(),
    }
}

impl OuterPart<'_> {
    /// What [`InPlace::decode`] needs to decode this body in the message's own
    /// buffer, once this borrow of it has ended.
    pub(crate) fn in_place(&self) -> InPlace {
        InPlace {
            at: self.body_at.clone(),
            cte: self.cte(),
            media_type: self.media_type.clone(),
        }
    }

    fn cte(&self) -> Result<Cte, MessageError> {
        Cte::from_header(self.cte.as_deref()).ok_or_else(|| MessageError::UnknownTransferEncoding {
            encoding: self
                .cte
                .clone()
                .unwrap_or_default()
                .chars()
                .take(40)
                .collect(),
        })
    }

    /// The strictly decoded body. Decoded only on request: a signed part must not be
    /// interpreted before its signature is checked.
    pub(crate) fn decoded(&self) -> Result<Vec<u8>, MessageError> {
        decode(self.body, self.cte()?).map_err(|f| bad_transfer_encoding(f, &self.media_type))
    }
}

/// The outer layer of a protected message: its headers, top-level media type with
/// parameters, and (for a multipart) its direct children.
#[derive(Clone, Debug)]
pub(crate) struct Outer<'r> {
    pub headers: Headers,
    pub media_type: String,
    pub params: Vec<(String, String)>,
    pub parts: Vec<OuterPart<'r>>,
    /// The whole entity when it is not a multipart (`application/pkcs7-mime`).
    pub single: Option<OuterPart<'r>>,
}

impl Outer<'_> {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the outer layer of a protected message within `limits`.
pub(crate) fn read_outer<'r>(raw: &'r [u8], limits: &Limits) -> Result<Outer<'r>, MessageError> {
    let tree = read_tree(raw, limits, Tree::parse_top)?;
    let root = tree.root();
    let outer_part = |e: &Entity| OuterPart {
        media_type: e.media_type.clone(),
        entity: e.bytes(raw),
        body: e.body(raw),
        body_at: e.body_range(),
        cte: e.transfer_encoding.clone(),
    };
    let (single, parts) = if root.is_multipart() {
        (None, tree.children(0).map(outer_part).collect())
    } else {
        (Some(outer_part(root)), Vec::new())
    };
    Ok(Outer {
        headers: read_headers(&tree, raw)?,
        media_type: root.media_type.clone(),
        params: root.params.clone(),
        parts,
        single,
    })
}
