//! The `mime_split_diff` fuzz target's findings, replayed (`tests/cases/differential/`,
//! reasons in its README): where our MIME split and mail-parser's read one message
//! differently, what we read, what mail-parser reads, and why ours stands.

use std::path::PathBuf;

use mail_parser::{MessageParser, PartType};
use mailseal::message::{structure, Limits, MessageError, PartInfo};

fn case(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases/differential")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Our parts as (depth, content type).
fn shape(parts: &[PartInfo]) -> Vec<(usize, &str)> {
    parts
        .iter()
        .map(|p| (p.depth, p.content_type.as_str()))
        .collect()
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

/// We refuse `raw` as `bad-multipart` (`multipart`) or `bad-header`; mail-parser reads
/// it, with `children` parts in its top-level multipart.
fn refused_where_mail_parser_reads(raw: &[u8], multipart: bool, children: usize) {
    match structure(raw, &Limits::default()) {
        Err(MessageError::BadMultipart { .. }) if multipart => {}
        Err(MessageError::BadHeader { .. }) if !multipart => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        their_children(raw),
        children,
        "mail-parser's reading changed"
    );
}

/// A `message/rfc822` part whose own multipart is not closed: the enclosing
/// multipart's delimiter ends it (RFC 2046 5.1.2), so the two parts after it are
/// parts of the outer message. mail-parser reads on inside the nested message and
/// loses them.
#[test]
fn a_nested_message_ends_at_the_enclosing_delimiter() {
    let raw = case("mime_split_diff-nested-message-swallows-parts.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    let shape = shape(&ours);
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

/// An empty `message/rfc822` part (header fields, a blank line, the next delimiter):
/// mail-parser reads the lines after it, the next part among them, as the nested
/// message; we read an empty part and then the next part.
#[test]
fn an_empty_nested_message_ends_at_the_next_delimiter() {
    let raw = case("mime_split_diff-empty-nested-message.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    let shape: Vec<_> = ours
        .iter()
        .map(|p| (p.depth, p.content_type.as_str(), p.body.is_empty()))
        .collect();
    assert_eq!(
        shape,
        [
            (1, "multipart/mixed", false),
            (2, "text/plain", false),
            (2, "message/rfc822", true),
            (2, "text/plain", false),
        ]
    );
    assert_eq!(their_children(&raw), 2, "mail-parser's reading changed");
}

/// A body part that is header fields alone, without the blank line (RFC 2046 5.1.1
/// makes the body optional): mail-parser drops the part. Refused.
#[test]
fn fail_a_part_without_the_blank_line_after_its_header_fields() {
    let raw = case("mime_split_diff-part-without-body.eml");
    refused_where_mail_parser_reads(&raw, false, 1);
}

/// The same, before the close delimiter and an epilogue: mail-parser reads on across
/// the close delimiter, takes the epilogue's lines for header fields and finds a body
/// (an `application/json` part) where we read an epilogue. Refused.
#[test]
fn fail_a_part_whose_header_fields_run_into_the_close_delimiter() {
    let raw = case("mime_split_diff-header-fields-across-the-close-delimiter.eml");
    refused_where_mail_parser_reads(&raw, false, 2);
}

/// A line that starts with the delimiter and goes on with other bytes: mail-parser
/// takes it as a delimiter (as RFC 2046 5.1.1 allows) and sees a third part holding
/// a machine part; a reader that wants the whole line sees two. Refused.
#[test]
fn fail_a_line_that_starts_with_the_delimiter() {
    let raw = case("mime_split_diff-delimiter-line-prefix.eml");
    refused_where_mail_parser_reads(&raw, true, 2);
}

/// `--boundary` in the middle of a line (here inside the machine part's JSON):
/// mail-parser splits there and reads a third part, a text part, out of the machine
/// part; RFC 2046 does not. Refused: every `--boundary` must be a delimiter line.
#[test]
fn fail_the_boundary_inside_a_line() {
    let raw = case("mime_split_diff-boundary-inside-a-line.eml");
    refused_where_mail_parser_reads(&raw, true, 3);
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

/// A form feed in the white space before `boundary=`: we took it for white space
/// (`str::trim`) and read the multipart; mail-parser reads no boundary and no parts.
/// Only space and tab are white space there now: refused.
#[test]
fn fail_a_form_feed_before_a_parameter() {
    let raw = case("mime_split_diff-form-feed-before-a-parameter.eml");
    refused_where_mail_parser_reads(&raw, false, 0);
}

/// The same date reader after `Date: ... 07:00:00Final: no`: mail-parser takes the
/// next field (the Content-Type) into the date and reads the message as one text
/// part; we read the multipart. Ours stands (the closing note of 2026-12-03 proposes
/// refusing a Date with trailing text, so that no reader built on mail-parser sees a
/// field less).
#[test]
fn a_date_with_trailing_text_does_not_take_the_next_field() {
    let raw = case("mime_split_diff-date-swallows-the-next-field.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    assert_eq!(ours[0].content_type, "multipart/alternative");
    assert_eq!(ours.len(), 3);
    assert_eq!(their_children(&raw), 0, "mail-parser's reading changed");
}

/// `boundary=` then a folded line with the quoted value: we unfolded and read the
/// boundary; mail-parser reads none and sees one part. A parameter's value now
/// follows its `=` directly: refused.
#[test]
fn fail_folding_between_the_equals_sign_and_the_value() {
    let raw = case("mime_split_diff-folding-after-the-equals-sign.eml");
    refused_where_mail_parser_reads(&raw, false, 0);
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
    refused_where_mail_parser_reads(&raw, false, 2);
}

/// mail-parser 0.11.9 builds a part tree with a cycle for this input (a multipart part
/// whose children include itself and the root), so a consumer that recurses over
/// `parts` overflows its stack: the target's own walk did. Our reader returns one
/// finite, depth-first list of entities for it; the library reads only header
/// sections with mail-parser, never its part tree.
#[test]
fn mail_parser_part_tree_with_a_cycle_is_read_as_a_finite_list_by_us() {
    let raw = case("mime_split_diff-mail-parser-part-cycle.eml");
    let theirs = MessageParser::default()
        .parse(&raw[..])
        .expect("mail-parser reads it");
    let cyclic = theirs.parts.iter().enumerate().any(|(i, p)| match &p.body {
        PartType::Multipart(children) => children.iter().any(|&c| c as usize <= i),
        _ => false,
    });
    assert!(
        cyclic,
        "mail-parser's tree has no cycle any more: the finding can go"
    );
    if let Ok(ours) = structure(&raw, &Limits::default()) {
        assert!(ours.len() <= Limits::default().max_parts);
        assert!(ours
            .iter()
            .all(|p| p.depth <= Limits::default().max_mime_depth));
    }
}

/// A `multipart/digest` part with header fields, no Content-Type and an empty body:
/// both readers now take it for a nested message (RFC 2046 5.1.5: the digest's
/// default); mail-parser reads that message on across the next delimiter and
/// swallows the second part, we end each part at its delimiter.
#[test]
fn a_digest_part_without_content_type_is_a_message_ended_by_its_delimiter() {
    let raw = case("mime_split_diff-digest-part-without-content-type.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    let shape = shape(&ours);
    assert_eq!(
        shape,
        [
            (1, "multipart/digest"),
            (2, "message/rfc822"),
            (2, "message/rfc822")
        ]
    );
    assert!(ours[1].body.is_empty());
    assert!(ours[2].body.start > ours[1].body.end);
    assert_eq!(their_children(&raw), 1, "mail-parser's reading changed");
}

/// The same date reader in a body part's header section (found by the campaign of
/// 2026-12-03 after the digest fix): a `message/rfc822` part whose own Date has
/// trailing text. mail-parser runs over the part's blank line (in the campaign's
/// input it started the nested message 25 bytes later; here it reads the nested
/// message's fields as the part's own); we start the nested message after the blank
/// line, as RFC 2046 5.1.1 reads.
#[test]
fn a_part_header_section_ends_at_its_first_blank_line() {
    let raw = case("mime_split_diff-date-in-a-part-header.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    let part_blank = raw.windows(4).position(|w| w == b"bo\n\n").unwrap() + 4;
    let nested = ours
        .iter()
        .find(|p| p.content_type == "message/rfc822")
        .unwrap();
    assert_eq!(nested.body.start, part_blank);
    // mail-parser runs on through the nested message's own header section: the part
    // it reads starts at the nested body (`text`), and is no message at all.
    let theirs = MessageParser::default().parse(&raw[..]).unwrap();
    let part = &theirs.parts[1];
    assert!(
        part.offset_body as usize > part_blank && !matches!(part.body, PartType::Message(_)),
        "mail-parser's reading changed: {}",
        part.offset_body
    );
}

/// A `multipart/digest` part with header fields, no Content-Type and a body (found by
/// a five-minute campaign on 2026-12-05, 60,745 runs in): a nested message by the
/// digest's default (RFC 2046 5.1.5), which we end at the close delimiter; mail-parser
/// does not read it as a message and runs its body on across the close delimiter to
/// the end of the input.
#[test]
fn a_digest_message_mail_parser_does_not_read_ends_at_the_close_delimiter() {
    let raw = case("mime_split_diff-digest-message-read-past-the-close-delimiter.eml");
    let ours = structure(&raw, &Limits::default()).unwrap();
    let shape = shape(&ours);
    assert_eq!(shape, [(1, "multipart/digest"), (2, "message/rfc822")]);
    let close = b"\r\n--18ec9cfcb369129c_163caed79a6645d8_ec7eb091e40346dd--\r\n";
    assert!(raw[ours[1].body.end..].starts_with(close));
    assert!(!ours[1].body.is_empty());
    // mail-parser: the same start, no nested message, and a body through the close
    // delimiter to the end.
    let theirs = MessageParser::default().parse(&raw[..]).unwrap();
    let part = &theirs.parts[1];
    assert_eq!(part.offset_body as usize, ours[1].body.start);
    assert!(
        !matches!(part.body, PartType::Message(_)) && part.offset_end as usize == raw.len(),
        "mail-parser's reading changed: {}..{}",
        part.offset_body,
        part.offset_end
    );
}

/// The Date quirk again, through RFC 5322's obsolete white space before the colon
/// (`Date :`, found by a ten-minute campaign on 2026-12-05, 131,713 runs in): in the
/// one body part's header section, mail-parser's date reader runs on and it reads no
/// part at all; we read the part. The same message with the field renamed is read alike
/// by both.
#[test]
fn a_part_date_with_white_space_before_the_colon_is_the_date_quirk() {
    let raw = case("mime_split_diff-part-date-with-white-space-before-the-colon.eml");
    let children = |raw: &[u8]| {
        let ours = structure(raw, &Limits::default()).unwrap();
        let ours: Vec<_> = ours
            .iter()
            .map(|p| (p.depth, p.content_type.clone()))
            .collect();
        (ours, their_children(raw))
    };
    let ours = vec![
        (1, "multipart/mixed".to_string()),
        (2, "text/plain".to_string()),
    ];
    assert_eq!(
        children(&raw),
        (ours.clone(), 0),
        "mail-parser's reading changed"
    );
    let at = raw
        .windows(6)
        .position(|w| {
            w == b"
Date "
        })
        .unwrap()
        + 1;
    let mut renamed = raw.clone();
    renamed[at] = b'X';
    assert_eq!(children(&renamed), (ours, 1));
}
