//! Readers for the plain forms of the top-level header values: one `addr-spec` (bare
//! or in angle brackets), `<msg-id>` lists, a one-line ASCII subject and a canonical
//! RFC 5322 date. That is what agents write, and reading it here spares a call into
//! mail-parser on every message. Anything else (display names, comments, groups,
//! encoded words, folding, obsolete date forms) is not "plain": the reader returns
//! `None` and the value goes to mail-parser, whose reading of a plain value is the same
//! (the tests below compare the two).

use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

use super::Mailbox;

/// RFC 5322 `atext` plus the dot: what a plain local part or message-id half holds.
fn is_atext_or_dot(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~.".contains(&c)
}

/// `local@domain` with a dot-atom local part and a domain of letters, digits, hyphens
/// and dots.
fn plain_addr_spec(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && local.bytes().all(is_atext_or_dot)
        && domain
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
}

/// One mailbox without a display name: `local@domain` or `<local@domain>`.
pub(crate) fn mailbox(value: &str) -> Option<Mailbox> {
    let inner = match value.strip_prefix('<') {
        Some(rest) => rest.strip_suffix('>')?,
        None => value,
    };
    plain_addr_spec(inner).then(|| Mailbox {
        name: None,
        address: inner.to_string(),
    })
}

/// `<id-left@id-right>`, without the brackets.
fn msg_id(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('<')?.strip_suffix('>')?;
    let (left, right) = inner.split_once('@')?;
    let ok = |p: &str| {
        !p.is_empty()
            && p.bytes().all(is_atext_or_dot)
            && !p.starts_with('.')
            && !p.ends_with('.')
            && !p.contains("..")
    };
    (ok(left) && ok(right)).then_some(inner)
}

/// A list of `<msg-id>` separated by single spaces (one or more).
pub(crate) fn msg_ids(value: &str) -> Option<Vec<String>> {
    if value.is_empty() || value.contains("  ") {
        return None;
    }
    value
        .split(' ')
        .map(|id| msg_id(id).map(str::to_string))
        .collect()
}

/// A subject of printable ASCII on one line, no encoded word, no run of spaces.
pub(crate) fn subject(raw_value: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(raw_value).ok()?.trim_matches(' ');
    let plain = !text.is_empty()
        && text.bytes().all(|c| (0x20..0x7f).contains(&c))
        && !text.contains("=?")
        && !text.contains("  ");
    plain.then(|| text.to_string())
}

/// `[Day, ]D Mon YYYY HH:MM[:SS] ±HHMM` (RFC 5322 3.3, no obsolete forms, no comment).
pub(crate) fn date(value: &str) -> Option<OffsetDateTime> {
    let rest = match value.split_once(", ") {
        Some((day, rest)) => {
            const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
            if !DAYS.contains(&day) {
                return None;
            }
            rest
        }
        None => value,
    };
    let mut parts = rest.split(' ');
    let (day, month, year, time, zone) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if parts.next().is_some() {
        return None;
    }
    let number = |s: &str, len: std::ops::RangeInclusive<usize>| -> Option<u32> {
        (len.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as u8 + 1;
    let date = Date::from_calendar_date(
        number(year, 4..=4)? as i32,
        Month::try_from(month).ok()?,
        number(day, 1..=2)? as u8,
    )
    .ok()?;
    let mut hms = time.split(':');
    let hour = number(hms.next()?, 2..=2)?;
    let minute = number(hms.next()?, 2..=2)?;
    let second = match hms.next() {
        Some(s) => number(s, 2..=2)?,
        None => 0,
    };
    if hms.next().is_some() {
        return None;
    }
    let time = Time::from_hms(hour as u8, minute as u8, second as u8).ok()?;
    let (sign, digits) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let hhmm = number(digits, 4..=4)?;
    let (zh, zm) = (hhmm / 100, hhmm % 100);
    if zh > 23 || zm > 59 {
        return None;
    }
    let offset = UtcOffset::from_hms(sign * zh as i8, sign * zm as i8, 0).ok()?;
    Some(PrimitiveDateTime::new(date, time).assume_offset(offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mail_parser::MessageParser;

    /// mail-parser's reading of one header field.
    fn theirs(name: &str, value: &str) -> mail_parser::Message<'static> {
        let raw = format!("{name}: {value}\r\n\r\n").into_bytes().leak();
        MessageParser::new().parse_headers(&raw[..]).unwrap()
    }

    #[test]
    fn plain_values_read_as_mail_parser_reads_them() {
        for v in [
            "alice@example.net",
            "<alice@example.net>",
            "a.b+tag@sub-1.example.co.uk",
            "<x!#$%&'*=?^_`{|}~-@a>",
        ] {
            let ours = mailbox(v).unwrap();
            let m = theirs("From", v);
            let addr = m.from().unwrap().first().unwrap();
            assert_eq!(Some(ours.address.as_str()), addr.address(), "{v}");
            assert_eq!(addr.name(), None, "{v}");
        }
        for v in ["<a@b>", "<a.b@c.d> <e@f>", "<1.2.3@x-y>"] {
            let ours = msg_ids(v).unwrap();
            let m = theirs("References", v);
            let list: Vec<String> = match m.references() {
                mail_parser::HeaderValue::Text(t) => vec![t.to_string()],
                mail_parser::HeaderValue::TextList(l) => l.iter().map(|t| t.to_string()).collect(),
                _ => Vec::new(),
            };
            assert_eq!(ours, list, "{v}");
        }
        for v in ["A2A request", "re: [x] y (z) 1/2", "x"] {
            assert_eq!(
                subject(v.as_bytes()).as_deref(),
                theirs("Subject", v).subject(),
                "{v}"
            );
        }
        for v in [
            "Sun, 29 Nov 2026 21:54:03 +0000",
            "1 Jan 2000 00:00 -0830",
            "Tue, 29 Feb 2028 23:59:59 +1400",
            "Wed, 31 Dec 1969 23:59:59 +0000",
        ] {
            let ours = date(v).unwrap();
            let m = theirs("Date", v);
            assert_eq!(
                ours.unix_timestamp(),
                m.date().unwrap().to_timestamp(),
                "{v}"
            );
        }
    }

    #[test]
    fn anything_else_is_left_to_mail_parser() {
        for v in [
            "Alice <alice@example.net>",
            "alice@example.net, bob@example.net",
            "\"a b\"@example.net",
            "alice@[192.0.2.1]",
            "alice@example.net (comment)",
            "<alice@example.net",
            "alice@@example.net",
            ".alice@example.net",
            "=?utf-8?q?A?= <a@b>",
            "",
        ] {
            assert!(mailbox(v).is_none(), "{v}");
        }
        for v in ["<a@b>  <c@d>", "a@b", "<a b@c>", "<@b>", "<a@b>(x)", ""] {
            assert!(msg_ids(v).is_none(), "{v}");
        }
        for v in ["=?utf-8?q?x?=", "a  b", "caf\u{e9}", "", "a\tb"] {
            assert!(subject(v.as_bytes()).is_none(), "{v}");
        }
        for v in [
            "Sun, 30 Feb 2026 00:00:00 +0000",
            "29 Nov 2026 24:00:00 +0000",
            "29 Nov 2026 21:54:03 GMT",
            "29 Nov 26 21:54:03 +0000",
            "Sun, 29 Nov 2026 21:54:03 +0000 (UTC)",
            "Xyz, 29 Nov 2026 21:54:03 +0000",
            "29 Nov 2026 21:54:03 +2400",
        ] {
            assert!(date(v).is_none(), "{v}");
        }
    }
}
