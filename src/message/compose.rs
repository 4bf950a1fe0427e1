//! Writing a MailA2A message: RFC 5322 headers, then the inner entity of DESIGN.md
//! (`multipart/mixed`: the machine part, the optional text fallback, `cid:` parts).

use mail_builder::headers::address::Address;
use mail_builder::headers::content_type::ContentType;
use mail_builder::headers::date::Date;
use mail_builder::headers::message_id::MessageId;
use mail_builder::headers::raw::Raw;
use mail_builder::headers::text::Text;
use mail_builder::headers::Header;
use mail_builder::mime::MimePart;

use super::{MailA2aMessage, Mailbox, MessageError, A2A_MEDIA_TYPE};

/// How to write the message.
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    /// RFC 9788 `hp` parameter of the top-level Content-Type (`cipher` or `clear`).
    pub header_protection: Option<&'static str>,
    /// The entity travels inside binary encryption (CMS, OpenPGP, MLS), never over a
    /// 7-bit transport: the machine part may be 8bit or binary (RFC 8551 3.1.2).
    pub binary_inside: bool,
    /// The multipart boundary follows from the content (a signed-only entity: the same
    /// message signed twice, or offline, is the same bytes); else mail-builder's.
    pub content_boundary: bool,
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
/// client). Otherwise base64 on a 7-bit path (non-ASCII or long JSON needs it; written
/// by mail-builder's own fast encoder), but inside encryption ([`Options::binary_inside`])
/// 8bit for a line of at most 998 octets and binary for a longer one: the JSON is
/// carried as it is, so a large message grows once (the outer base64), not twice.
/// Compact JSON has no CR or LF (control characters in strings are escaped), so the
/// part is already in canonical form and a text-mode verifier (OpenSSL's `cms -verify`
/// without `-binary`) sees the bytes that were signed. JSON with a CR, LF or NUL byte
/// stays base64.
fn machine_part(json: &[u8], binary_inside: bool) -> MimePart<'_> {
    // memchr, not a byte loop: a 12 MiB payload is scanned in about a millisecond.
    let one_line = memchr::memchr3(b'\r', b'\n', 0, json).is_none();
    let ct = ContentType::new(A2A_MEDIA_TYPE).attribute("charset", "utf-8");
    if one_line && json.len() <= MAX_LINE && json.is_ascii() {
        MimePart::new(ct, json).transfer_encoding("7bit")
    } else if one_line && binary_inside {
        let cte = if json.len() <= MAX_LINE {
            "8bit"
        } else {
            "binary"
        };
        MimePart::new(ct, json).transfer_encoding(cte)
    } else {
        MimePart::new(ct, json)
    }
}

/// Writes `name: value` with mail-builder's encoder for that kind of value (address
/// lists, encoded words, dates, message ids, folding).
fn field(out: &mut Vec<u8>, name: &str, value: &impl Header) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    value.write_header(out, name.len() + 2);
}

/// The encoded size of `n` bytes of content in base64 lines, plus room for headers:
/// what to reserve so the output is written without reallocating.
pub(crate) fn size_hint(n: usize) -> usize {
    n.div_ceil(57) * 78 + 2048
}

/// The header section of a message with `headers` and `hints`, up to (not including)
/// the body part's own Content-Type, appended to `out`.
pub(crate) fn write_header_section(
    out: &mut Vec<u8>,
    h: &super::Headers,
    hints: &super::Hints,
) -> Result<(), MessageError> {
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
    field(out, "From", &address(from));
    field(out, "To", &address_list(&h.to));
    if !h.cc.is_empty() {
        field(out, "Cc", &address_list(&h.cc));
    }
    field(out, "Date", &Date::new(date.unix_timestamp()));
    field(out, "Message-ID", &MessageId::new(message_id));
    if let Some(irt) = &h.in_reply_to {
        field(out, "In-Reply-To", &MessageId::new(irt.as_str()));
    }
    if !h.references.is_empty() {
        field(
            out,
            "References",
            &MessageId::new_list(h.references.iter().map(String::as_str)),
        );
    }
    if let Some(s) = &h.subject {
        field(out, "Subject", &Text::new(s.as_str()));
    }
    out.extend_from_slice(b"MIME-Version: 1.0\r\n");
    if let Some(a) = &h.auto_submitted {
        field(out, "Auto-Submitted", &Raw::new(a.as_str()));
    }
    for (name, value) in hints.iter() {
        field(out, name, &Raw::new(value));
    }
    Ok(())
}

pub(crate) fn compose(msg: &MailA2aMessage, opts: &Options) -> Result<Vec<u8>, MessageError> {
    let mut out = Vec::with_capacity(size_hint(content_len(msg)));
    compose_into(msg, opts, &mut out)?;
    Ok(out)
}

/// A boundary from a digest of everything the parts carry: it cannot occur in them
/// (a digest of the content is not in the content), and is the same for the same
/// message.
fn content_boundary(msg: &MailA2aMessage) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut field = |b: &[u8]| {
        h.update((b.len() as u64).to_be_bytes());
        h.update(b);
    };
    field(b"mailseal inner boundary");
    field(
        msg.headers
            .message_id
            .as_deref()
            .unwrap_or_default()
            .as_bytes(),
    );
    field(msg.envelope_bytes());
    field(msg.text.as_deref().unwrap_or_default().as_bytes());
    for a in &msg.attachments {
        field(a.content_id.as_bytes());
        field(a.content_type.as_bytes());
        field(a.filename.as_deref().unwrap_or_default().as_bytes());
        field(&a.data);
    }
    let hex = crate::hex::hex(&h.finalize()[..20]);
    format!("=_{}_{}", &hex[..20], &hex[20..])
}

/// The payload bytes of `msg` (envelope, text, attachments) for sizing buffers.
pub(crate) fn content_len(msg: &MailA2aMessage) -> usize {
    msg.envelope_bytes().len()
        + msg.text.as_ref().map_or(0, String::len)
        + msg.attachments.iter().map(|a| a.data.len()).sum::<usize>()
}

/// [`compose`], appending to `out`.
pub(crate) fn compose_into(
    msg: &MailA2aMessage,
    opts: &Options,
    out: &mut Vec<u8>,
) -> Result<(), MessageError> {
    let mut parts = Vec::with_capacity(2 + msg.attachments.len());
    parts.push(machine_part(msg.envelope_bytes(), opts.binary_inside));
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
    // mail-builder's boundary is made from the clock: the conformance corpus, whose
    // bytes must follow from its seed (`crate::entropy`), takes the content's.
    if opts.content_boundary || crate::entropy::is_seeded() {
        top = top.attribute("boundary", content_boundary(msg));
    }
    write_header_section(out, &msg.headers, &msg.headers.hints)?;
    MimePart::new(top, parts).write_part(out);
    Ok(())
}
