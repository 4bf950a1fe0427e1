//! Differential: our reading of a Date field's value (`src/message/fields.rs`,
//! `date_time`: RFC 5322 `date-time` with its obsolete forms, hand-written) against
//! mail-parser's on the same value.
//!
//! mail-parser is a lax reference: it takes a date followed by other text and drops
//! the text, and it refuses some forms RFC 5322 allows, so a value only one of the two
//! accepts is not a finding; three forms it misreads are not compared (below, each with
//! its finding in `tests/cases/differential/`). Invariants: where both accept, the same
//! moment; what we accept, we accept again written canonically (`Sun, 29 Nov 2026
//! 21:54:03 +0000`) at the same moment, and with a comment after it; and followed by
//! any other text, we refuse it (nothing a reader could run on into another field).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mail_parser::MessageParser;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = std::str::from_utf8(data) else {
        return;
    };
    if value.contains(['\r', '\n']) {
        // A header field's value is one unfolded line; folding is the reader's.
        return;
    }
    let ours = mailseal::message::fuzz_date(value);
    let field = format!("Date: {value}\r\n\r\n");
    let theirs = MessageParser::new()
        .parse_headers(field.as_bytes())
        .and_then(|m| m.date().filter(|d| d.is_valid()).map(|d| d.to_timestamp()));
    let Some(t) = ours else {
        return;
    };
    // mail-parser adds 2000 to a three-digit year where RFC 5322 4.3 adds 1900
    // (`tests/cases/differential/date_diff-three-digit-year.txt`), and reads a year of
    // more than four digits with leading zeros (`002029`) otherwise than its value:
    // not compared.
    let year_read_otherwise = value.split([' ', '\t', '(', ')', ',']).any(|t| {
        t.bytes().all(|c| c.is_ascii_digit())
            && (t.len() == 3 || (t.len() > 4 && t.starts_with('0')))
    });
    // mail-parser misreads a comment that follows a word with no space before it
    // (`Aug(s)`, `tests/cases/differential/date_diff-comment-right-after-the-month.txt`):
    // not compared.
    let glued_comment = value
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_alphanumeric() && w[1] == b'(');
    // mail-parser reads a named zone not in capitals (`est`, RFC 5322's literals are
    // case-insensitive) as +0000
    // (`tests/cases/differential/date_diff-named-zone-in-lower-case.txt`): not compared.
    let zone_in_lower_case = value.split([' ', '\t', '(', ')', ',']).any(|t| {
        [
            "UT", "GMT", "EST", "EDT", "CST", "CDT", "MST", "MDT", "PST", "PDT",
        ]
        .iter()
        .any(|z| t.eq_ignore_ascii_case(z) && t != *z)
    });
    // mail-parser reads a named zone as +0000 when the time has no seconds and
    // anything (white space, a comment) follows the zone
    // (`tests/cases/differential/date_diff-named-zone-after-a-time-without-seconds.txt`):
    // a value with a named zone and fewer than two colons is not compared.
    let named_zone = value.split([' ', '\t', '(', ')', ',']).any(|t| {
        ["EST", "EDT", "CST", "CDT", "MST", "MDT", "PST", "PDT"]
            .iter()
            .any(|z| t.eq_ignore_ascii_case(z))
    });
    let zone_after_short_time = named_zone && value.matches(':').count() < 2;
    let skip = year_read_otherwise || glued_comment || zone_in_lower_case || zone_after_short_time;
    if let (Some(theirs), false) = (theirs, skip) {
        assert_eq!(t, theirs, "the readers disagree on {value:?}");
    }
    let canonical = time::OffsetDateTime::from_unix_timestamp(t)
        .expect("a moment time can hold")
        .format(&time::format_description::well_known::Rfc2822)
        .expect("RFC 2822 form");
    assert_eq!(
        mailseal::message::fuzz_date(&canonical),
        Some(t),
        "{value:?} read as {canonical:?}, which reads otherwise"
    );
    // Nothing may follow a date but comments: text after it (a field a lax reader
    // would run on into) is refused, a comment is not.
    assert_eq!(
        mailseal::message::fuzz_date(&format!("{value}Final: no")),
        None,
        "{value:?} takes text after it"
    );
    assert_eq!(
        mailseal::message::fuzz_date(&format!("{value} (comment)")),
        Some(t),
        "{value:?} with a comment after it"
    );
});
