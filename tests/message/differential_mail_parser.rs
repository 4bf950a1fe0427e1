//! The `mime_split_diff` fuzz target's findings, replayed (`tests/cases/differential/`,
//! reasons in its README): where our MIME split and mail-parser's read one message
//! differently, what we read, what mail-parser reads, and why ours stands.

use std::path::PathBuf;

use mail_parser::{MessageParser, PartType};
use mailseal::message::{structure, Limits, MessageError};

fn case(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases/differential")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The children mail-parser sees in the top-level multipart.
fn their_children(raw: &[u8]) -> usize {
    let msg = MessageParser::default()
        .parse(raw)
        .expect("mail-parser reads it");
    match &msg.parts[0].body {
        PartType::Multipart(children) => children.len(),
        _ => 0,
    }
}

/// A `message/rfc822` part whose own multipart is not closed: the enclosing
/// multipart's delimiter ends it (RFC 2046 5.1.2), so the two parts after it are
/// parts of the outer message. mail-parser reads on inside the nested message and
/// loses them.
#[test]
fn a_nested_message_ends_at_the_enclosing_delimiter() {
    let raw = case("mime_split_diff-nested-message-swallows-parts.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    let shape: Vec<_> = ours
        .iter()
        .map(|p| (p.depth, p.content_type.as_str()))
        .collect();
    assert_eq!(
        shape,
        [
            (1, "multipart/mixed"),
            (2, "text/plain"),
            (2, "message/rfc822"),
            (2, "text/plain"),
            (2, "message/rfc822"),
        ]
    );
    // The first nested message stops right before the next outer delimiter.
    let next = &raw[ours[2].body.end..];
    assert!(next.starts_with(b"\n--D7F------------D7FD5A0B8AB9C65CCDBFA872\n"));
    assert_eq!(their_children(&raw), 2, "mail-parser's reading changed");
}

/// A body part that is header fields alone (RFC 2046 5.1.1 makes the body optional):
/// we read a part with an empty body, mail-parser drops the part. It carries nothing
/// either way, and as a machine part it is refused (an empty envelope).
#[test]
fn a_part_without_a_body_is_an_empty_part() {
    let raw = case("mime_split_diff-part-without-body.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    assert_eq!(ours.len(), 3);
    assert_eq!(ours[2].content_type, "application/a2a+json");
    assert!(ours[2].body.is_empty());
    assert_eq!(their_children(&raw), 1, "mail-parser's reading changed");
    assert!(mailseal::message::MailA2aMessage::parse(&raw, &Limits::default()).is_err());
}

/// A line that starts with the delimiter and goes on with other bytes: mail-parser
/// takes it as a delimiter (as RFC 2046 5.1.1 allows) and sees a third part holding
/// a machine part; a reader that wants the whole line sees two. Refused.
#[test]
fn fail_a_line_that_starts_with_the_delimiter() {
    let raw = case("mime_split_diff-delimiter-line-prefix.eml");
    assert!(matches!(
        structure(&raw, &Limits::default()),
        Err(MessageError::BadMultipart { .. })
    ));
    assert_eq!(their_children(&raw), 2, "mail-parser's reading changed");
}

/// `--boundary` in the middle of a line (here inside the machine part's JSON):
/// mail-parser splits there and reads a third part, a text part, out of the machine
/// part; RFC 2046 does not. Refused: every `--boundary` must be a delimiter line.
#[test]
fn fail_the_boundary_inside_a_line() {
    let raw = case("mime_split_diff-boundary-inside-a-line.eml");
    assert!(matches!(
        structure(&raw, &Limits::default()),
        Err(MessageError::BadMultipart { .. })
    ));
    assert_eq!(their_children(&raw), 3, "mail-parser's reading changed");
}

/// A Date with trailing text (`+0000bo`) before the blank line: mail-parser's date
/// reader runs over the blank line and reads the body's first lines as header fields.
/// Our header section ends at the blank line, and we hand mail-parser only that
/// section, so our own reading of the Date (and every other field) is not moved.
#[test]
fn the_header_section_ends_at_the_first_blank_line() {
    let raw = case("mime_split_diff-date-with-trailing-text.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    let blank = raw.windows(2).position(|w| w == b"\n\n").unwrap() + 2;
    assert_eq!(ours[0].body.start, blank);
    let theirs = MessageParser::default().parse(&raw[..]).unwrap();
    assert!(
        theirs.parts[0].offset_body as usize > blank,
        "mail-parser's reading changed"
    );
    assert!(
        theirs.message_id().is_some(),
        "mail-parser's reading changed"
    );
}

/// A Content-Type without the semicolon before its boundary: RFC 2045 5.2 reads
/// text/plain, mail-parser the multipart and its machine part. Refused
/// (`tests/cases/fail-bad-header--content-type-without-semicolon.eml`).
#[test]
fn fail_a_content_type_that_does_not_parse() {
    let raw = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/cases/fail-bad-header--content-type-without-semicolon.eml"),
    )
    .unwrap();
    assert!(matches!(
        structure(&raw, &Limits::default()),
        Err(MessageError::BadHeader { .. })
    ));
    assert_eq!(their_children(&raw), 2, "mail-parser's reading changed");
}
