//! Differential: our MIME split (`message::structure`, hand-written, see
//! `src/message/mime.rs`) against mail-parser's on the same bytes.
//!
//! We are stricter by design (a repeated MIME header, a multipart without its close
//! delimiter, a header line that is not a field are refused), so only messages we
//! accept are compared. For those, both readers must see the same tree: the same
//! entities depth first, each at the same depth, with the same `type/subtype` where
//! the message declares one, and the same body bytes for every leaf. A nested
//! `message/rfc822` is one leaf for us (we do not read inside it) and a message for
//! mail-parser, whose inside is skipped.
//!
//! A disagreement is where two mail readers would see different content in one
//! message: the ground of header-protection and multipart/signed confusion attacks.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "sequoia_panics.rs"]
mod sequoia_panics;
use mail_parser::{Message, MessageParser, MimeHeaders, PartType};
use mailseal::message::{structure, Limits, PartInfo};

/// One entity as mail-parser sees it: depth, declared type, body range.
#[derive(Debug, PartialEq)]
struct Seen {
    depth: usize,
    media_type: Option<String>,
    body: std::ops::Range<usize>,
    multipart: bool,
    nested: bool,
}

/// Appends the entities of part `id` and below, depth first; `false` when
/// mail-parser's part tree is not a tree (a part that contains itself or an ancestor:
/// mail-parser 0.11.9 builds such a tree for some inputs, and walking it recursed
/// until the stack overflowed, `tests/cases/differential/README.md`).
fn walk(msg: &Message<'_>, id: usize, depth: usize, out: &mut Vec<Seen>, on_path: &mut Vec<usize>) -> bool {
    let Some(part) = msg.parts.get(id) else {
        return true;
    };
    if on_path.contains(&id) {
        return false;
    }
    let media_type = part.content_type().map(|ct| {
        format!(
            "{}/{}",
            ct.ctype(),
            ct.subtype().unwrap_or_default()
        )
        .to_ascii_lowercase()
    });
    let multipart = matches!(part.body, PartType::Multipart(_));
    out.push(Seen {
        depth,
        media_type: media_type.clone(),
        body: part.offset_body as usize..part.offset_end as usize,
        multipart,
        nested: matches!(part.body, PartType::Message(_))
            || matches!(media_type.as_deref(), Some("message/rfc822" | "message/global")),
    });
    if let PartType::Multipart(children) = &part.body {
        on_path.push(id);
        for &child in children {
            if !walk(msg, child as usize, depth + 1, out, on_path) {
                return false;
            }
        }
        on_path.pop();
    }
    true
}

/// The field lines of the top-level header section: lines up to the first empty one
/// that do not start with white space.
fn field_lines(data: &[u8]) -> usize {
    let mut n = 0;
    for line in data.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match line.first() {
            None => break,
            Some(b' ' | b'\t') => {}
            Some(_) => n += 1,
        }
    }
    n
}

/// Whether one of our body entities has a Date field in its header section: there
/// mail-parser's date reader can run over the blank line that ends the section, as it
/// does in the top-level section (below), and read the body as more fields, start a
/// nested message later or drop the part (the campaigns of 2026-12-03,
/// `tests/cases/differential/mime_split_diff-date-in-a-part-header.eml`). A body
/// part's section starts after its delimiter line.
fn date_in_a_part_header(data: &[u8], ours: &[PartInfo]) -> bool {
    ours.iter().enumerate().skip(1).any(|(i, e)| {
        let parent = ours[..i].iter().rev().find(|p| p.depth + 1 == e.depth);
        let Some(parent) = parent else {
            return false;
        };
        if !parent.content_type.starts_with("multipart/") {
            // A nested message's own header section: the comparison stops at the
            // first nested message anyway (below).
            return false;
        }
        // After the last delimiter line before the body.
        let start = data[..e.body.start]
            .windows(3)
            .rposition(|w| w == b"\n--")
            .and_then(|d| {
                data[d + 1..e.body.start]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map(|n| d + 2 + n)
            })
            .unwrap_or(parent.body.start);
        data.get(start..e.body.start).is_some_and(|head| {
            head.split(|&c| c == b'\n').any(is_date_field)
        })
    })
}

/// Whether `line` is a Date field: `Date`, then RFC 5322's obsolete white space if
/// any (`Date :`, which both readers accept: found on 2026-12-05), then the colon.
fn is_date_field(line: &[u8]) -> bool {
    line.len() >= 5
        && line[..4].eq_ignore_ascii_case(b"date")
        && line[4..].iter().find(|&&c| c != b' ' && c != b'\t') == Some(&b':')
}

/// libFuzzer's panic hook aborts before `catch_unwind` can catch: panics raised in
/// mail-parser's own files are let through to it (every other panic still aborts).
fn let_mail_parser_panics_through() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| sequoia_panics::let_through_from("mail-parser-"));
}

fuzz_target!(|data: &[u8]| {
    let_mail_parser_panics_through();
    let Ok(ours) = structure(data, &Limits::default()) else {
        return;
    };
    // mail-parser 0.11.9 has a `debug_assert!(false)` that hostile input reaches
    // ("Invalid part ID", `tests/cases/crashes/message_parse-mail-parser-lost-multipart`),
    // and fuzz builds keep debug assertions: such an input has no reading of theirs.
    let Ok(parsed) = std::panic::catch_unwind(|| MessageParser::default().parse(data)) else {
        return;
    };
    let theirs = parsed.expect("mail-parser reads every message we accept");
    let mut seen = Vec::new();
    if !walk(&theirs, 0, 1, &mut seen, &mut Vec::new()) {
        // Their tree has a cycle: no reading to compare ours with.
        return;
    }
    // mail-parser's date reader runs over the blank line that ends the header
    // section when a Date has trailing text (`... +0000bo`), and reads the body's
    // first lines as header fields (`tests/cases/differential/`). We hand mail-parser
    // only our header section, so this cannot reach our own reading; the two trees
    // are not comparable past it.
    // The same quirk can swallow just the next field (`Date: ... 07:00:00Final: no`
    // then `Content-Type:`, found the same day): mail-parser then has fewer top-level
    // fields than the header section has field lines.
    if seen
        .first()
        .zip(ours.first())
        .is_some_and(|(s, o)| s.body.start > o.body.start)
        || theirs.parts[0].headers.len() < field_lines(data)
        || date_in_a_part_header(data, &ours)
    {
        return;
    }
    // mail-parser reads on inside a `message/rfc822` part past the enclosing
    // multipart's delimiter when the nested message's own multipart is not closed,
    // swallowing the parts that follow (RFC 2046 5.1.2: the outer delimiter ends it, as
    // we read it). After its first nested message the two trees are not comparable.
    // A body part may be header fields and a blank line alone (RFC 2046 5.1.1:
    // `[CRLF *OCTET]`); mail-parser drops such a part. It carries nothing either way:
    // left out; but for `message/rfc822`, which mail-parser reads on into (below).
    // (A part whose last field runs into the delimiter we refuse.)
    let mut ours: Vec<_> = ours
        .into_iter()
        .filter(|p| {
            p.depth == 1
                || !p.body.is_empty()
                || matches!(p.content_type.as_str(), "message/rfc822" | "message/global")
        })
        .collect();
    seen.retain(|s| s.depth == 1 || !s.body.is_empty() || s.nested);
    if let Some(n) = seen.iter().position(|s| s.nested) {
        seen.truncate(n + 1);
        ours.truncate(n + 1);
    }
    assert_eq!(
        ours.iter().map(|p| p.depth).collect::<Vec<_>>(),
        seen.iter().map(|s| s.depth).collect::<Vec<_>>(),
        "the two readers cut the message into different trees: ours {ours:?}, mail-parser {seen:?}"
    );
    for (i, (a, b)) in ours.iter().zip(&seen).enumerate() {
        if let Some(declared) = &b.media_type {
            assert_eq!(
                &a.content_type, declared,
                "entity {i}: different media types ({ours:?} / {seen:?})"
            );
        }
        if a.body.is_empty() && (b.nested || a.content_type == "message/rfc822") {
            // An empty nested message (a digest part's default type included): its
            // line break is the next delimiter's for us and the end of its header
            // section for mail-parser, which reads on past the delimiter (into the next
            // part, or across the close delimiter). Not comparable past it.
            break;
        } else if b.nested || a.content_type == "message/rfc822" {
            // mail-parser ends a `message/rfc822` part at the end of the enclosing
            // multipart, whether or not it reads as a message (a digest part that it
            // does not read as one runs on across the close delimiter: found on
            // 2026-12-05, `tests/cases/differential/`): only the start can be compared.
            assert_eq!(a.body.start, b.body.start, "entity {i}: nested message starts differ");
        } else if !b.multipart {
            assert_eq!(
                a.body, b.body,
                "entity {i}: different body bytes ({ours:?} / {seen:?})"
            );
        }
    }
});
