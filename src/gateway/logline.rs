//! What the gateway's log lines say of a message: besides its queue id, listener and
//! verdict, its From and Message-ID, its recipients and the next hop's reply, so that
//! one grep for an address or a Message-ID finds what became of it, refused or
//! delivered.
//!
//! From, Message-ID, recipients and replies are other people's text: each is bounded
//! and its control, line-separating and invisible characters escaped
//! ([`crate::error::shown`]) before it reaches a line, in text and JSON alike, so a
//! header can neither forge a second line nor drive a terminal, and no line grows to
//! the attacker's length.

use super::process::{Decision, Logged};
use super::session::Transaction;
use crate::message::Limits;

/// The characters of a header value or a reply that a line keeps.
const FIELD_CHARS: usize = 200;
/// The characters of a recipient list that a line keeps.
const RECIPIENTS_CHARS: usize = 1000;

/// What a line shows for a value a message does not have.
pub(crate) const NONE: &str = "-";

/// A message's From address and Message-ID, as a log line shows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The (first) From address, or the field as written when it does not parse.
    pub(crate) from: String,
    /// The Message-ID without its angle brackets, or the field as written.
    pub(crate) message_id: String,
}

impl Seen {
    /// Reads the header section of `message` as [`crate::message::read_outer`] reads
    /// a message's (within `max_bytes`), its Content-Type left out: the fields are
    /// read alone, at the cost of the header, whatever the body (a message whose MIME
    /// structure is refused is still shown by its From). A field that does not parse
    /// is shown as written: a malformed message is refused, and its line should still
    /// say who it claimed to be from.
    pub(crate) fn of(message: &[u8], max_bytes: usize) -> Seen {
        let end = header_end(message);
        let (mut head, _) = super::process::take_header(&message[..end], "Content-Type");
        head.extend_from_slice(b"\r\n");
        let limits = Limits {
            max_message_bytes: max_bytes,
            ..Limits::default()
        };
        let parsed = crate::message::read_outer(&head, &limits)
            .ok()
            .map(|o| o.headers);
        let from = parsed
            .as_ref()
            .and_then(|h| h.from.as_ref())
            .map(|f| f.address.clone())
            .or_else(|| written(&head, "From"));
        let message_id = parsed.and_then(|h| h.message_id).or_else(|| {
            written(&head, "Message-ID")
                .map(|v| v.trim_start_matches('<').trim_end_matches('>').to_string())
        });
        Seen {
            from: shown(from.as_deref()),
            message_id: shown(message_id.as_deref()),
        }
    }
}

/// Where `message`'s header section ends: after the line break before its first
/// empty line (or at its end).
fn header_end(message: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', message)
        .find(|&i| matches!(message.get(i + 1..), Some([b'\n', ..] | [b'\r', b'\n', ..])))
        .map_or(message.len(), |i| i + 1)
}

/// The first `name` field of the header section `head`, unfolded, as written.
fn written(head: &[u8], name: &str) -> Option<String> {
    super::process::take_header(head, name).1.into_iter().next()
}

/// `value` bounded and escaped for a line, or [`NONE`].
pub(crate) fn shown(value: Option<&str>) -> String {
    match value.map(str::trim) {
        Some(v) if !v.is_empty() => crate::error::shown(v, FIELD_CHARS),
        _ => NONE.to_string(),
    }
}

/// A next hop's reply (or why there was none), bounded and escaped for a line.
pub(crate) fn reply(text: &str) -> String {
    shown(Some(text))
}

/// Envelope recipients, comma-separated, bounded and escaped for a line.
pub(crate) fn recipients(list: &[String]) -> String {
    crate::error::shown(&list.join(","), RECIPIENTS_CHARS)
}

/// Fills in what the log line of `decision` says of the message `t` that `listener`
/// took: its From and Message-ID, and, when nothing was queued, the name it was
/// received under ([`super::spool::entry_id`] of the client's bytes: the name its
/// entry has when it is queued as sent, and a held message's lines carry).
pub(crate) fn describe(decision: &mut Decision, listener: &str, t: &Transaction, max_bytes: usize) {
    let seen = Seen::of(&t.data, max_bytes);
    let name = decision
        .id
        .is_none()
        .then(|| super::spool::entry_id(listener, &t.mail_from, &t.recipients, &t.data));
    decision.logged = Some(Box::new(Logged {
        name,
        from: seen.from,
        message_id: seen.message_id,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_and_message_id_parsed() {
        let s = Seen::of(
            b"From: Alice <alice@a.example>\r\nMessage-ID: <m1@a.example>\r\nSubject: x\r\n\r\nbody\r\n",
            1 << 20,
        );
        assert_eq!(s.from, "alice@a.example");
        assert_eq!(s.message_id, "m1@a.example");
        let none = Seen::of(b"Subject: x\r\n\r\nbody\r\n", 1 << 20);
        assert_eq!((none.from.as_str(), none.message_id.as_str()), (NONE, NONE));
    }

    /// A header that does not parse (two From fields, a From that is no address) is
    /// still shown as written, escaped: ESC, a Unicode line separator and NEL cannot
    /// start a forged line, and the length is bounded.
    #[test]
    fn fail_header_text_is_escaped_and_bounded() {
        let forged = "evil\u{1b}[2J\u{2028}id=forged verdict=opened\u{85}x@y";
        let m = format!(
            "From: {forged}\r\nFrom: second@x\r\nMessage-ID: <{}>\r\n\r\nbody\r\n",
            "m".repeat(5000)
        );
        let s = Seen::of(m.as_bytes(), 1 << 20);
        assert!(
            s.from
                .starts_with("evil\\u{001b}[2J\\u{2028}id=forged verdict=opened\\u{0085}x@y"),
            "{}",
            s.from
        );
        assert!(!s.from.chars().any(|c| c.is_control()), "{:?}", s.from);
        assert!(s.message_id.len() < 300, "{}", s.message_id.len());
        assert!(
            s.message_id.ends_with("more characters)"),
            "{}",
            s.message_id
        );
        // A message larger than the limit is read as written too.
        let big = Seen::of(b"From: a@x\r\nMessage-ID: <b@x>\r\n\r\nbody\r\n", 10);
        assert_eq!((big.from.as_str(), big.message_id.as_str()), ("a@x", "b@x"));
        // The header ends at the first empty line: a From in the body is not it.
        let body = Seen::of(b"Subject: x\r\n\r\nFrom: body@x\r\n", 10);
        assert_eq!(body.from, NONE);
    }

    #[test]
    fn recipients_are_joined_escaped_and_bounded() {
        let list = vec!["a@x".to_string(), "b\u{7}@y".to_string()];
        assert_eq!(recipients(&list), "a@x,b\\u{0007}@y");
        let many: Vec<String> = (0..500).map(|i| format!("agent{i}@example.org")).collect();
        assert!(recipients(&many).chars().count() < RECIPIENTS_CHARS + 40);
    }
}
