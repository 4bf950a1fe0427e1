//! Writing a MailA2A message: RFC 5322 headers, then the inner entity of DESIGN.md
//! (`multipart/mixed`: the machine part, the optional text fallback, `cid:` parts).

use mail_builder::headers::address::Address;
use mail_builder::headers::content_type::ContentType;
use mail_builder::headers::date::Date;
use mail_builder::headers::raw::Raw;
use mail_builder::mime::MimePart;
use mail_builder::MessageBuilder;

use super::{MailA2aMessage, Mailbox, MessageError, A2A_MEDIA_TYPE};

/// How to write the message.
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    /// RFC 9788 `hp` parameter of the top-level Content-Type (`cipher` or `clear`).
    pub header_protection: Option<&'static str>,
}

/// Longest line RFC 5322 allows, without its CRLF.
const MAX_LINE: usize = 998;

fn address(m: &Mailbox) -> Address<'_> {
    Address::new_address(m.name.as_deref(), m.address.as_str())
}

fn address_list(list: &[Mailbox]) -> Address<'_> {
    Address::new_list(list.iter().map(address).collect())
}

/// The machine part: 7bit when the JSON is one short ASCII line (readable in any mail
/// client), base64 otherwise (7-bit safe, and what non-ASCII or long JSON needs; a
/// non-text body is base64-encoded by mail-builder's own fast encoder).
fn machine_part(json: &[u8]) -> MimePart<'_> {
    let seven_bit = json.len() <= MAX_LINE
        && json
            .iter()
            .all(|&b| b.is_ascii() && b != b'\r' && b != b'\n' && b != 0);
    let ct = ContentType::new(A2A_MEDIA_TYPE).attribute("charset", "utf-8");
    if seven_bit {
        MimePart::new(ct, json).transfer_encoding("7bit")
    } else {
        MimePart::new(ct, json)
    }
}

/// A builder with the message's header fields and the given hints.
fn builder<'m>(
    h: &'m super::Headers,
    hints: &'m super::Hints,
) -> Result<MessageBuilder<'m>, MessageError> {
    let from = h
        .from
        .as_ref()
        .ok_or(MessageError::MissingForCompose("From"))?;
    if h.to.is_empty() {
        return Err(MessageError::MissingForCompose("To"));
    }
    let message_id = h
        .message_id
        .as_deref()
        .ok_or(MessageError::MissingForCompose("Message-ID"))?;
    let date = h.date.ok_or(MessageError::MissingForCompose("Date"))?;

    let mut b = MessageBuilder::new()
        .from(address(from))
        .to(address_list(&h.to))
        .date(Date::new(date.unix_timestamp()))
        .message_id(message_id);
    if !h.cc.is_empty() {
        b = b.cc(address_list(&h.cc));
    }
    if let Some(irt) = &h.in_reply_to {
        b = b.in_reply_to(irt.as_str());
    }
    if !h.references.is_empty() {
        b = b.references(h.references.iter().map(String::as_str).collect::<Vec<_>>());
    }
    if let Some(s) = &h.subject {
        b = b.subject(s.as_str());
    }
    b = b.header("MIME-Version", Raw::new("1.0"));
    if let Some(a) = &h.auto_submitted {
        b = b.header("Auto-Submitted", Raw::new(a.as_str()));
    }
    for (name, value) in hints.iter() {
        b = b.header(name, Raw::new(value));
    }
    Ok(b)
}

/// A message with `headers`, `hints` and `body` (a profile's outer message).
pub(crate) fn with_body(
    headers: &super::Headers,
    hints: &super::Hints,
    body: MimePart<'_>,
) -> Result<Vec<u8>, MessageError> {
    builder(headers, hints)?
        .body(body)
        .write_to_vec()
        .map_err(|e| MessageError::Write(e.to_string()))
}

pub(crate) fn compose(msg: &MailA2aMessage, opts: &Options) -> Result<Vec<u8>, MessageError> {
    let mut parts = Vec::with_capacity(2 + msg.attachments.len());
    parts.push(machine_part(msg.envelope_bytes()));
    if let Some(text) = &msg.text {
        parts.push(MimePart::new(
            ContentType::new("text/plain").attribute("charset", "utf-8"),
            text.as_str(),
        ));
    }
    for a in &msg.attachments {
        let mut part =
            MimePart::new(a.content_type.as_str(), a.data.as_slice()).cid(a.content_id.as_str());
        if let Some(name) = &a.filename {
            part = part.attachment(name.as_str());
        }
        parts.push(part);
    }
    let mut top = ContentType::new("multipart/mixed");
    if let Some(hp) = opts.header_protection {
        top = top.attribute("hp", hp);
    }
    with_body(&msg.headers, &msg.headers.hints, MimePart::new(top, parts))
}
