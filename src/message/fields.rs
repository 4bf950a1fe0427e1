//! Readers of the top-level header values. For addresses, message-ids and the
//! subject, the plain forms: one `addr-spec` (bare or in angle brackets), `<msg-id>`
//! lists, a one-line ASCII subject. That is what agents write, and reading it here
//! spares a call into mail-parser on every message. Anything else (display names,
//! comments, groups, encoded words, folding) is not "plain": the reader returns `None`
//! and the value goes to mail-parser, whose reading of a plain value is the same (the
//! tests below compare the two). The Date is read here in every form RFC 5322 allows
//! (`date_time`), never by mail-parser.

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

/// A Date value in full: RFC 5322 `date-time` (3.3) with the obsolete forms a reader
/// must accept (4.3: comments and folding white space anywhere, no day name or
/// seconds, two- and three-digit years, the named and military zones), and nothing
/// after it but comments and white space.
///
/// The one Date reader: the message reader and the `date_diff` fuzz target call it.
///
/// Why hand-written: mail-parser 0.11.9, which read every Date that was not plain,
/// takes a date followed by other text (`... 07:00:00Final: no`, `+0000 garbage`) as
/// valid and drops the rest, and refuses the named zones (`GMT`). The first lets a
/// message carry a Date that a reader of the whole message (mail-parser among them:
/// `tests/cases/differential/mime_split_diff-date-swallows-the-next-field.eml`)
/// runs over into the next field; the second refused valid mail. The `date_diff`
/// fuzz target compares this reader with mail-parser's where both accept.
pub(crate) fn date_time(value: &str) -> Option<OffsetDateTime> {
    // Comments (nested, with quoted pairs) become white space; ',' and ':' become
    // tokens of their own, so the obsolete forms' white space around them reads alike.
    let mut flat = String::with_capacity(value.len() + 16);
    let (mut depth, mut escaped) = (0usize, false);
    for c in value.chars() {
        if depth > 0 {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        flat.push(' ');
                    }
                }
                _ => {}
            }
            continue;
        }
        match c {
            '(' => depth = 1,
            ')' => return None,
            ',' | ':' => {
                flat.push(' ');
                flat.push(c);
                flat.push(' ');
            }
            ' ' | '\t' | '\r' | '\n' => flat.push(' '),
            c if c.is_ascii_graphic() => flat.push(c),
            _ => return None,
        }
    }
    if depth > 0 {
        return None;
    }
    let mut tokens = flat.split(' ').filter(|t| !t.is_empty()).peekable();
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    // A day name, if any, is one of the seven; that it is the date's is not checked
    // (as the plain reader above and mail-parser do not).
    if tokens
        .peek()
        .is_some_and(|t| DAYS.iter().any(|d| d.eq_ignore_ascii_case(t)))
    {
        tokens.next();
        (tokens.next()? == ",").then_some(())?;
    }
    let digits = |t: &str, len: std::ops::RangeInclusive<usize>| -> Option<u32> {
        (len.contains(&t.len()) && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let day = digits(tokens.next()?, 1..=2)?;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month_token = tokens.next()?;
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(month_token))? as u8
        + 1;
    let year_token = tokens.next()?;
    let year = match (digits(year_token, 2..=9)?, year_token.len()) {
        // RFC 5322 4.3: two digits are 2000-2049 or 1950-1999, three add 1900.
        (y, 2) if y < 50 => y + 2000,
        (y, 2 | 3) => y + 1900,
        // 3.3: "any numeric year 1900 or later".
        (y, _) if y < 1900 => return None,
        (y, _) => y,
    };
    let hour = digits(tokens.next()?, 2..=2)?;
    (tokens.next()? == ":").then_some(())?;
    let minute = digits(tokens.next()?, 2..=2)?;
    let mut zone = tokens.next()?;
    let mut second = 0;
    if zone == ":" {
        second = digits(tokens.next()?, 2..=2)?;
        zone = tokens.next()?;
    }
    if tokens.next().is_some() {
        return None;
    }
    let offset = match zone.as_bytes() {
        [sign @ (b'+' | b'-'), ..] => {
            let hhmm = digits(&zone[1..], 4..=4)?;
            let (h, m) = ((hhmm / 100) as i8, (hhmm % 100) as i8);
            if h > 23 || m > 59 {
                return None;
            }
            let sign = if *sign == b'-' { -1 } else { 1 };
            UtcOffset::from_hms(sign * h, sign * m, 0).ok()?
        }
        _ => {
            const NAMED: [(&str, i8); 10] = [
                ("UT", 0),
                ("GMT", 0),
                ("EST", -5),
                ("EDT", -4),
                ("CST", -6),
                ("CDT", -5),
                ("MST", -7),
                ("MDT", -6),
                ("PST", -8),
                ("PDT", -7),
            ];
            match NAMED.iter().find(|(n, _)| n.eq_ignore_ascii_case(zone)) {
                Some((_, h)) => UtcOffset::from_hms(*h, 0, 0).ok()?,
                // A military zone letter (any but J): RFC 5322 4.3 reads it as -0000,
                // an unknown offset from UTC.
                None if zone.len() == 1
                    && zone.as_bytes()[0].is_ascii_alphabetic()
                    && !zone.eq_ignore_ascii_case("j") =>
                {
                    UtcOffset::UTC
                }
                None => return None,
            }
        }
    };
    let date = Date::from_calendar_date(
        i32::try_from(year).ok()?,
        Month::try_from(month).ok()?,
        u8::try_from(day).ok()?,
    )
    .ok()?;
    // A leap second (60) is read as the second before it.
    let time = Time::from_hms(hour as u8, minute as u8, second.min(59) as u8).ok()?;
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
            let ours = date_time(v).unwrap();
            let m = theirs("Date", v);
            assert_eq!(
                ours.unix_timestamp(),
                m.date().unwrap().to_timestamp(),
                "{v}"
            );
        }
    }

    /// The Unix time of `y-m-d h:m:s` at UTC offset `zone_hours`.
    fn at(y: i32, m: u8, d: u8, (h, mi, sec): (u8, u8, u8), zone_hours: i8) -> i64 {
        PrimitiveDateTime::new(
            Date::from_calendar_date(y, Month::try_from(m).unwrap(), d).unwrap(),
            Time::from_hms(h, mi, sec).unwrap(),
        )
        .assume_offset(UtcOffset::from_hms(zone_hours, 0, 0).unwrap())
        .unix_timestamp()
    }

    #[test]
    fn date_time_reads_the_obsolete_forms_and_comments() {
        let t = at(2026, 11, 29, (21, 54, 3), 0);
        for (v, want) in [
            ("Sun, 29 Nov 2026 21:54:03 +0000", t),
            ("Sun, 29 Nov 2026 21:54:03 +0000 (UTC)", t),
            ("29 Nov 2026 21:54:03 GMT", t),
            ("29 Nov 2026 21:54:03 UT", t),
            ("sun, 29 nov 2026 21:54:03 gmt", t),
            ("29 Nov 2026 21:54:03 Z", t),
            ("29 Nov 26 21:54:03 +0000", t),
            ("29 Nov 126 21:54:03 +0000", t),
            (
                "(sent) Sun (day) , 29 (x (nested) \\) ) Nov 2026 21 : 54 : 03 +0000",
                t,
            ),
            ("Sun,\r\n 29 Nov\t2026 21:54:03 +0000", t),
            ("29 Nov 2026 16:54:03 EST", t),
            ("29 Nov 2026 13:54:03 PST", t),
            ("29 Nov 2026 21:54 +0000", at(2026, 11, 29, (21, 54, 0), 0)),
            ("1 Jan 99 00:00:00 -0000", at(1999, 1, 1, (0, 0, 0), 0)),
            (
                "Mon, 1 Jan 1900 00:00:00 +0000",
                at(1900, 1, 1, (0, 0, 0), 0),
            ),
            (
                "31 Dec 2026 23:59:60 +0000",
                at(2026, 12, 31, (23, 59, 59), 0),
            ),
        ] {
            assert_eq!(date_time(v).map(|d| d.unix_timestamp()), Some(want), "{v}");
            // Where mail-parser reads it too, the same moment.
            if let Some(d) = theirs("Date", v).date().filter(|d| d.is_valid()) {
                assert_eq!(d.to_timestamp(), want, "{v}");
            }
        }
    }

    /// RFC 5322 4.3: "any three digit year is encountered, the year is interpreted by
    /// adding 1900". mail-parser 0.11.9 adds 2000 (found by `date_diff`,
    /// `tests/cases/differential/date_diff-three-digit-year.txt`).
    #[test]
    fn a_three_digit_year_adds_1900_where_mail_parser_adds_2000() {
        let v = include_str!("../../tests/cases/differential/date_diff-three-digit-year.txt");
        let ours = date_time(v).unwrap().unix_timestamp();
        assert_eq!(ours, at(1922, 11, 29, (21, 54, 3), 0));
        let theirs = theirs("Date", v).date().unwrap().to_timestamp();
        assert_eq!(theirs, at(2022, 11, 29, (21, 54, 3), 0));
    }

    /// RFC 5322 4.3: `obs-year = [CFWS] 2*DIGIT [CFWS]`, so a comment may follow the
    /// month with no space before it. mail-parser 0.11.9 reads `Aug(s)() 02029` (and
    /// `Aug(s)() 2029`) as a moment 330 years later (found by `date_diff`'s third 10-minute run,
    /// `tests/cases/differential/date_diff-comment-right-after-the-month.txt`); with a
    /// space before the comment it reads what we read.
    #[test]
    fn a_comment_right_after_the_month_is_the_obsolete_year_s_cfws() {
        let v = include_str!(
            "../../tests/cases/differential/date_diff-comment-right-after-the-month.txt"
        );
        assert_eq!(v, "Tue, 29 Aug(s)() 02029 23:59:59 +1400");
        let want = at(2029, 8, 29, (23, 59, 59), 14);
        assert_eq!(date_time(v).unwrap().unix_timestamp(), want);
        let theirs_at = |v| theirs("Date", v).date().unwrap().to_timestamp();
        assert_eq!(theirs_at(v), at(2359, 8, 28, (10, 0, 0), 0));
        let four_digits = "Tue, 29 Aug(s)() 2029 23:59:59 +1400";
        assert_eq!(date_time(four_digits).unwrap().unix_timestamp(), want);
        assert_eq!(theirs_at(four_digits), theirs_at(v));
        let spaced = "Tue, 29 Aug (s)() 2029 23:59:59 +1400";
        assert_eq!(date_time(spaced).unwrap().unix_timestamp(), want);
        assert_eq!(theirs_at(spaced), want);
    }

    /// RFC 5322 3.3: `year = FWS 4*DIGIT FWS`, so `002029` is the year 2029.
    /// mail-parser 0.11.9 reads 2020 (found while reducing the finding above).
    #[test]
    fn a_year_of_more_than_four_digits_is_read_whole() {
        let v = "Wed, 29 Aug 002029 23:59:59 +1400";
        let want = at(2029, 8, 29, (23, 59, 59), 14);
        assert_eq!(date_time(v).unwrap().unix_timestamp(), want);
        let theirs = theirs("Date", v).date().unwrap().to_timestamp();
        assert_eq!(theirs, at(2020, 8, 29, (23, 59, 59), 14));
        assert_eq!(date_time("Wed, 29 Aug 12029 23:59:59 +1400"), None);
    }

    /// RFC 5322's zone names are ABNF literals, case-insensitive (RFC 5234 2.3):
    /// `est` is -0500. mail-parser 0.11.9 reads a zone name not in capitals as +0000
    /// (found by `date_diff`'s fourth 10-minute run,
    /// `tests/cases/differential/date_diff-named-zone-in-lower-case.txt`).
    #[test]
    fn a_named_zone_in_lower_case_is_that_zone() {
        let v =
            include_str!("../../tests/cases/differential/date_diff-named-zone-in-lower-case.txt");
        assert_eq!(v, "14 Nov 2026 16:54:03 eST");
        let want = at(2026, 11, 14, (16, 54, 3), -5);
        for v in [v, "14 Nov 2026 16:54:03 est", "14 Nov 2026 16:54:03 EST"] {
            assert_eq!(date_time(v).unwrap().unix_timestamp(), want, "{v}");
        }
        let theirs_at = |v| theirs("Date", v).date().unwrap().to_timestamp();
        assert_eq!(theirs_at(v), at(2026, 11, 14, (16, 54, 3), 0));
        assert_eq!(theirs_at("14 Nov 2026 16:54:03 EST"), want);
    }

    /// `date_diff`'s finding: a named zone after a time without seconds, with anything
    /// after the zone (white space, a comment), is +0000 to mail-parser 0.11; RFC 5322
    /// 4.3 makes `MDT` -0600 wherever CFWS may follow it, and so do we.
    #[test]
    fn a_named_zone_after_a_time_without_seconds_is_that_zone() {
        let v = include_str!(
            "../../tests/cases/differential/date_diff-named-zone-after-a-time-without-seconds.txt"
        );
        assert_eq!(v.trim(), "1 Nov 06 16:54 MDT");
        let want = at(2006, 11, 1, (16, 54, 0), -6);
        for v in [v, "1 Nov 2006 16:54 MDT (c)", "1 Nov 2006 16:54 MDT"] {
            assert_eq!(date_time(v).unwrap().unix_timestamp(), want, "{v}");
        }
        let theirs_at = |v| theirs("Date", v).date().unwrap().to_timestamp();
        assert_eq!(
            theirs_at("1 Nov 06 16:54 MDT "),
            at(2006, 11, 1, (16, 54, 0), 0)
        );
        assert_eq!(theirs_at("1 Nov 2006 16:54:00 MDT "), want);
    }

    /// mail-parser takes these for dates and drops what follows; a reader of the whole
    /// message may run on into the next field.
    #[test]
    fn fail_a_date_with_anything_else_in_its_field() {
        for v in [
            "Sun, 31 Aug 2026 07:00:00Final: no",
            "Thu, 03 Dec 2026 10:00:00 +0000 garbage",
            "Thu, 03 Dec 2026 10:00:00 +0000X-Evil: 1",
            "Thu, 03 Dec 2026 10:00:00 +0000 +0000",
            "Thu, 03 Dec 2026 10:00:00",
            "Thu, 03 Dec 2026 10:00:00 +2400",
            "Thu, 03 Dec 2026 10:00:00 +0060",
            "Thu, 03 Dec 2026 10:00:00 J",
            "Thu, 03 Dec 2026 10:00:00 XYZ",
            "Thu, 03 Dec 2026 24:00:00 +0000",
            "Thu, 03 Dec 2026 1:00:00 +0000",
            "Mon, 30 Feb 2026 10:00:00 +0000",
            "Xyz, 03 Dec 2026 10:00:00 +0000",
            "Thu 03 Dec 2026 10:00:00 +0000",
            "Thu, 03 Dec 2026 10:00:00 +0000 (unclosed",
            "Thu, 03 Dec 2026 10:00:00 +0000 )",
            "Thu, 03 Dez 2026 10:00:00 +0000",
            "Thu, 03 Dec 2026 10:00:00 +0000 \u{e9}",
            "03 Dec 2026",
            "",
            // Found by `date_diff`: RFC 5322 3.3 has no year before 1900.
            "31 Dec 1013 23:49:60 +0000",
            "Tue, 31 Dec 1899 23:59:59 +0000",
        ] {
            assert!(date_time(v).is_none(), "{v:?}");
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
    }
}
