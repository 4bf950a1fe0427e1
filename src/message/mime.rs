//! The MIME entity tree (RFC 2045, RFC 2046 5.1): header fields, `Content-Type`
//! parameters and multipart splitting, over untrusted bytes, strictly.
//!
//! This module owns how a message is cut into entities; the meaning of the top-level
//! header *values* (addresses, dates, encoded words) is read by `fields` in their plain
//! forms and by mail-parser otherwise. Cutting it ourselves keeps every byte range exact
//! (what `multipart/signed` signs is a range of the input, not a re-serialisation),
//! enforces the limits while splitting (a nesting or part bomb is refused after
//! `max_parts` entities, whatever its size) and refuses what readers could disagree on:
//! a header line that is not a field, a repeated MIME header, a Content-Type that does
//! not parse, a multipart without a boundary, without a delimiter or without its close
//! delimiter.
//!
//! Line ends may be CRLF or a bare LF (OpenSSL writes LF); the line break before a
//! delimiter belongs to the delimiter (RFC 2046 5.1.1).

use std::borrow::Cow;
use std::ops::Range;

use super::{Limits, MessageError};

/// One header field: the name and the raw value after the colon (folding kept), as
/// ranges of the input.
#[derive(Clone, Debug)]
pub(crate) struct Field {
    name: Range<usize>,
    value: Range<usize>,
}

impl Field {
    /// The field name as written (without trailing white space).
    pub(crate) fn name<'r>(&self, raw: &'r [u8]) -> &'r [u8] {
        &raw[self.name.clone()]
    }

    /// The raw value after the colon, folding kept.
    pub(crate) fn value<'r>(&self, raw: &'r [u8]) -> &'r [u8] {
        &raw[self.value.clone()]
    }

    /// The whole field as written, folding kept, without its final line break.
    pub(crate) fn line<'r>(&self, raw: &'r [u8]) -> &'r [u8] {
        &raw[self.name.start..self.value.end]
    }

    /// The value unfolded (RFC 5322 2.2.3) and trimmed; bytes that are not UTF-8 are
    /// replaced.
    pub(crate) fn text(&self, raw: &[u8]) -> String {
        self.str(raw).into_owned()
    }

    /// [`Field::text`], borrowed from `raw` when the value is one line of UTF-8 (the
    /// common case): for the values that are only read, not kept.
    pub(crate) fn str<'r>(&self, raw: &'r [u8]) -> Cow<'r, str> {
        unfold(&raw[self.value.clone()])
    }

    /// Whether the field is named `name` (ASCII case-insensitive).
    pub(crate) fn is(&self, raw: &[u8], name: &str) -> bool {
        self.name(raw).eq_ignore_ascii_case(name.as_bytes())
    }
}

/// Unfolds and trims a raw header value.
fn unfold(value: &[u8]) -> Cow<'_, str> {
    let trim = |s: &str| s.trim_matches([' ', '\t', '\r']).to_string();
    if find_byte(b'\n', value).is_none() {
        // One line (the common case): no joining needed.
        return match std::str::from_utf8(value) {
            Ok(s) => Cow::Borrowed(s.trim_matches([' ', '\t', '\r'])),
            Err(_) => Cow::Owned(trim(&String::from_utf8_lossy(value))),
        };
    }
    let mut out = String::with_capacity(value.len());
    for line in value.split(|&b| b == b'\n') {
        let line = match std::str::from_utf8(line) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(line),
        };
        let line = line.trim_matches([' ', '\t', '\r']);
        if line.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    Cow::Owned(out)
}

/// A `Content-Type` (or `Content-Disposition`) value: the lower-case value before the
/// parameters and the parameters, names lower-case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Params {
    /// `type/subtype` (or the disposition type), lower case.
    pub value: String,
    /// Parameters in order, names lower case, values unquoted (RFC 2231 sections joined).
    pub params: Vec<(String, String)>,
}

impl Params {
    /// The value of parameter `name` (lower case).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One entity of the tree.
#[derive(Clone, Debug)]
pub(crate) struct Entity {
    /// Nesting depth; the message itself is 1.
    pub depth: usize,
    /// The enclosing multipart's index, `None` for the message.
    pub parent: Option<usize>,
    /// The first byte of the entity (its first header line).
    pub start: usize,
    /// The first byte of its body (after the blank line).
    pub body_start: usize,
    /// The end of the entity, without the line break that belongs to the next
    /// delimiter.
    pub end: usize,
    /// Header fields in order.
    pub fields: Vec<Field>,
    /// `type/subtype`, lower case; `text/plain` when absent (RFC 2045 5.2). An
    /// unreadable one is refused: readers guess differently at it.
    pub media_type: String,
    /// Content-Type parameters.
    pub params: Vec<(String, String)>,
    /// Declared Content-Transfer-Encoding, as written (trimmed).
    pub transfer_encoding: Option<String>,
    /// Content-ID without the angle brackets.
    pub content_id: Option<String>,
    /// Content-Disposition, if any.
    pub disposition: Option<Params>,
}

impl Entity {
    /// The raw body (still transfer-encoded).
    pub(crate) fn body<'r>(&self, raw: &'r [u8]) -> &'r [u8] {
        &raw[self.body_range()]
    }

    /// Where [`Self::body`] lies in the input.
    pub(crate) fn body_range(&self) -> std::ops::Range<usize> {
        self.body_start..self.end
    }

    /// The entity as it stands in the input, headers included.
    pub(crate) fn bytes<'r>(&self, raw: &'r [u8]) -> &'r [u8] {
        &raw[self.start..self.end]
    }

    /// Whether it is a multipart (its children follow it in the tree).
    pub(crate) fn is_multipart(&self) -> bool {
        self.media_type.starts_with("multipart/")
    }

    /// A Content-Type parameter (name lower case).
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `Content-Disposition: attachment`.
    pub(crate) fn is_attachment(&self) -> bool {
        self.disposition
            .as_ref()
            .is_some_and(|d| d.value == "attachment")
    }

    /// The file name from Content-Disposition `filename`, else Content-Type `name`.
    pub(crate) fn file_name(&self) -> Option<&str> {
        self.disposition
            .as_ref()
            .and_then(|d| d.get("filename"))
            .or_else(|| self.param("name"))
    }
}

/// A message cut into entities, depth first (the message is entity 0).
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    pub entities: Vec<Entity>,
}

impl Tree {
    /// Cuts `raw` into entities within `limits` (size is the caller's check).
    pub(crate) fn parse(raw: &[u8], limits: &Limits) -> Result<Tree, MessageError> {
        Self::cut(raw, limits, false)
    }

    /// Cuts only the top level: the message and, for a multipart, its direct children,
    /// which are not split further. A child whose header section cannot be read is kept
    /// as an opaque entity (empty media type): the first part of `multipart/signed` is
    /// not interpreted before its signature is checked, so damage inside it is the
    /// signature's to report.
    pub(crate) fn parse_top(raw: &[u8], limits: &Limits) -> Result<Tree, MessageError> {
        Self::cut(raw, limits, true)
    }

    fn cut(raw: &[u8], limits: &Limits, top_only: bool) -> Result<Tree, MessageError> {
        // A MailA2A message is a few entities of a dozen or so fields each: sized so
        // that neither vector grows while a common message is read.
        let mut entities: Vec<Entity> = Vec::with_capacity(4);
        // Pending entities as (range, depth, parent); popped in document order.
        let mut pending: Vec<(Range<usize>, usize, Option<usize>)> = vec![(0..raw.len(), 1, None)];
        while let Some((range, depth, parent)) = pending.pop() {
            if depth > limits.max_mime_depth {
                return Err(MessageError::TooDeep {
                    limit: limits.max_mime_depth,
                });
            }
            if entities.len() >= limits.max_parts {
                return Err(MessageError::TooManyParts {
                    limit: limits.max_parts,
                });
            }
            let mut entity = match read_entity(raw, range.clone(), depth, parent) {
                Err(_) if top_only && depth > 1 => opaque(range, depth, parent),
                other => other?,
            };
            // RFC 2046 5.1.5: in a digest, a part without a Content-Type is a message,
            // not text (mail-parser reads it so; we read text/plain until the
            // `mime_split_diff` fuzz target found the difference).
            if parent.is_some_and(|p| entities[p].media_type == "multipart/digest")
                && !entity
                    .fields
                    .iter()
                    .any(|f| f.name(raw).eq_ignore_ascii_case(b"content-type"))
            {
                entity.media_type = "message/rfc822".into();
                entity.params.clear();
            }
            let index = entities.len();
            if entity.is_multipart() && !(top_only && depth > 1) {
                let boundary = entity
                    .param("boundary")
                    .filter(|b| valid_boundary(b))
                    .ok_or(MessageError::BadMultipart {
                        reason: "a multipart without a valid boundary",
                    })?;
                let children = split(raw, entity.body_start..entity.end, boundary.as_bytes())?;
                if children.len() > limits.max_parts {
                    return Err(MessageError::TooManyParts {
                        limit: limits.max_parts,
                    });
                }
                pending.extend(
                    children
                        .into_iter()
                        .rev()
                        .map(|r| (r, depth + 1, Some(index))),
                );
            }
            entities.push(entity);
        }
        Ok(Tree { entities })
    }

    /// The message itself.
    pub(crate) fn root(&self) -> &Entity {
        &self.entities[0]
    }

    /// The direct children of entity `index`, in order.
    pub(crate) fn children(&self, index: usize) -> impl Iterator<Item = &Entity> {
        self.entities
            .iter()
            .filter(move |e| e.parent == Some(index))
    }
}

/// An entity whose header section is not read.
fn opaque(range: Range<usize>, depth: usize, parent: Option<usize>) -> Entity {
    Entity {
        depth,
        parent,
        start: range.start,
        body_start: range.start,
        end: range.end,
        fields: Vec::new(),
        media_type: String::new(),
        params: Vec::new(),
        transfer_encoding: None,
        content_id: None,
        disposition: None,
    }
}

/// RFC 2046 5.1.1: 1 to 70 characters of a restricted set, not ending in a space. A
/// little more length is accepted (some mailers exceed 70); nothing else is.
fn valid_boundary(b: &str) -> bool {
    !b.is_empty() && b.len() <= 200 && !b.ends_with(' ') && b.bytes().all(|c| BCHARS[c as usize])
}

/// RFC 2046 bchars: letters, digits and `'()+_,-./:=? ` (space included).
static BCHARS: [bool; 256] = {
    let mut table = [false; 256];
    let mut c = 0;
    while c < 256 {
        table[c] = (c as u8).is_ascii_alphanumeric();
        c += 1;
    }
    let specials = b"'()+_,-./:=? ";
    let mut i = 0;
    while i < specials.len() {
        table[specials[i] as usize] = true;
        i += 1;
    }
    table
};

/// The first `needle` in `hay`. Header lines are short: their first bytes are searched
/// a word at a time (memchr's portable search, eight bytes a step), which beats both a
/// byte loop and the call into a SIMD search there; long ones get the SIMD search.
fn find_byte(needle: u8, hay: &[u8]) -> Option<usize> {
    const SHORT: usize = 96;
    match memchr::arch::all::memchr::One::new(needle).find(&hay[..hay.len().min(SHORT)]) {
        Some(i) => Some(i),
        None if hay.len() > SHORT => memchr::memchr(needle, &hay[SHORT..]).map(|i| i + SHORT),
        None => None,
    }
}

/// The end of the line starting at `at`: (end of content, start of the next line).
fn line_at(raw: &[u8], at: usize, end: usize) -> (usize, usize) {
    match find_byte(b'\n', &raw[at..end]) {
        Some(i) => {
            let nl = at + i;
            let content_end = if nl > at && raw[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            };
            (content_end, nl + 1)
        }
        None => (end, end),
    }
}

/// Reads the header block of the entity in `range`.
fn read_entity(
    raw: &[u8],
    range: Range<usize>,
    depth: usize,
    parent: Option<usize>,
) -> Result<Entity, MessageError> {
    let mut fields: Vec<Field> = Vec::with_capacity(16);
    let mut at = range.start;
    // Whether the last header line read ended with its own line break.
    let mut terminated = true;
    let body_start = loop {
        if at >= range.end {
            // A body part may end in its header fields (RFC 2046 5.1.1: the blank line
            // and the body are optional; the line break before a delimiter is the
            // delimiter's, so `field CRLF CRLF --b` is an empty part). But when the
            // last field's own line break is the delimiter's (`field CRLF --b`),
            // readers differ: mail-parser drops the part, or reads on across the close
            // delimiter into the epilogue as more fields and a body (found by the
            // `mime_split_diff` fuzz target). Refused.
            if parent.is_some() && !terminated {
                return Err(MessageError::BadHeader {
                    reason: "a body part whose last header field runs into the delimiter",
                });
            }
            break range.end;
        }
        let (content_end, next) = line_at(raw, at, range.end);
        terminated = next > content_end;
        let line = &raw[at..content_end];
        if line.is_empty() {
            break next;
        }
        if matches!(line[0], b' ' | b'\t') {
            // A continuation line (RFC 5322 2.2.3) extends the previous field.
            let last = fields.last_mut().ok_or(MessageError::BadHeader {
                reason: "the header section starts with a continuation line",
            })?;
            last.value.end = content_end;
        } else {
            let name_len = line
                .iter()
                .take_while(|&&b| (33..=126).contains(&b) && b != b':')
                .count();
            // obs-optional: white space between the name and the colon.
            let colon = name_len
                + line[name_len..]
                    .iter()
                    .take_while(|b| matches!(b, b' ' | b'\t'))
                    .count();
            if name_len == 0 || line.get(colon) != Some(&b':') {
                return Err(MessageError::BadHeader {
                    reason: "a header line that is not a field",
                });
            }
            fields.push(Field {
                name: at..at + name_len,
                value: at + colon + 1..content_end,
            });
        }
        at = next;
    };

    let mut content_type = None;
    let mut transfer_encoding = None;
    let mut content_id = None;
    let mut disposition = None;
    for f in &fields {
        let name = f.name(raw);
        let slot = if name.eq_ignore_ascii_case(b"content-type") {
            &mut content_type
        } else if name.eq_ignore_ascii_case(b"content-transfer-encoding") {
            &mut transfer_encoding
        } else if name.eq_ignore_ascii_case(b"content-id") {
            &mut content_id
        } else if name.eq_ignore_ascii_case(b"content-disposition") {
            &mut disposition
        } else {
            continue;
        };
        if slot.is_some() {
            return Err(MessageError::DuplicateHeader {
                name: String::from_utf8_lossy(name).chars().take(60).collect(),
            });
        }
        *slot = Some(f.str(raw));
    }
    // RFC 2045 5.2 reads an unreadable Content-Type as text/plain, but readers do not:
    // mail-parser (and the clients it mimics) guess the type and parameters of
    // `multipart/mixed boundary="b"`, so one reader would see a text body and another
    // the parts inside it, a second machine part among them (found by the
    // `mime_split_diff` fuzz target). Present and unreadable is refused.
    let (media_type, params) = match content_type.as_deref().map(parse_params) {
        None => ("text/plain".to_string(), Vec::new()),
        Some(Some(p)) if is_media_type(&p.value) => (p.value, p.params),
        Some(_) => {
            return Err(MessageError::BadHeader {
                reason: "a Content-Type that does not parse",
            })
        }
    };
    Ok(Entity {
        depth,
        parent,
        start: range.start,
        body_start,
        end: range.end,
        fields,
        media_type,
        params,
        transfer_encoding: transfer_encoding.map(Cow::into_owned),
        content_id: content_id.map(|c| c.trim_matches(['<', '>', ' ']).to_string()),
        disposition: disposition.as_deref().and_then(parse_params),
    })
}

/// `type/subtype`, both RFC 2045 tokens.
fn is_media_type(v: &str) -> bool {
    match v.split_once('/') {
        Some((t, s)) => is_token(t) && is_token(s),
        None => false,
    }
}

/// A byte table: `true` for printable ASCII (33 to 126) except `excluded`. One lookup
/// per byte instead of a search through the special characters (parameter parsing runs
/// for every part of every message).
const fn printable_except(excluded: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 33;
    while b <= 126 {
        table[b] = true;
        b += 1;
    }
    let mut i = 0;
    while i < excluded.len() {
        table[excluded[i] as usize] = false;
        i += 1;
    }
    table
}

/// RFC 2045 token characters: printable ASCII but the tspecials.
static TOKEN: [bool; 256] = printable_except(b"()<>@,;:\\\"/[]?=");

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| TOKEN[b as usize])
}

/// Splits the multipart body in `body` at its delimiters: the ranges of the body
/// parts. Refuses a body without a delimiter, without parts or without its close
/// delimiter (a truncated message), and any other appearance of `--boundary`.
///
/// RFC 2046 5.1.1 says the delimiter "MUST NOT appear inside any of the encapsulated
/// parts, on a line by itself or as the prefix of any line", and readers differ on
/// what a line that breaks it is: some take any line that starts with `--boundary`
/// as a delimiter (the RFC's note to implementors allows it), some want the whole
/// line, and mail-parser even splits at `--boundary` in the middle of a line (all
/// three found by the `mime_split_diff` fuzz target). Each reading gives different
/// parts, so every `--boundary` in the body must be a whole delimiter line: at the
/// start of a line, followed by `--` or nothing but transport padding, before the
/// close delimiter, and none after it.
fn split(
    raw: &[u8],
    body: Range<usize>,
    boundary: &[u8],
) -> Result<Vec<Range<usize>>, MessageError> {
    let ambiguous = |reason| Err(MessageError::BadMultipart { reason });
    let text = &raw[body.clone()];
    let dashed = [b"--", boundary].concat();
    let mut parts = Vec::new();
    // Start of the current part's content, once the first delimiter is seen.
    let mut open: Option<usize> = None;
    // Occurrences inside a delimiter line already taken are skipped.
    let mut resume = 0;
    let mut closed = false;
    for rel in memchr::memmem::find_iter(text, &dashed) {
        if rel < resume {
            continue;
        }
        if closed {
            return ambiguous("the boundary after the close delimiter");
        }
        if rel > 0 && text[rel - 1] != b'\n' {
            return ambiguous("the boundary inside a line");
        }
        let at = body.start + rel;
        let after = at + dashed.len();
        let close = raw[after..body.end].starts_with(b"--");
        let rest = if close { after + 2 } else { after };
        let (content_end, next) = line_at(raw, rest, body.end);
        if raw[rest..content_end]
            .iter()
            .any(|b| !matches!(b, b' ' | b'\t'))
        {
            return ambiguous("a line that starts with the boundary but is not a delimiter");
        }
        if let Some(start) = open {
            // The line break before the delimiter belongs to the delimiter.
            let mut end = at;
            if end > body.start && raw[end - 1] == b'\n' {
                end -= 1;
                if end > body.start && raw[end - 1] == b'\r' {
                    end -= 1;
                }
            }
            parts.push(start..end.max(start));
        }
        // The next occurrence may start right at `next` (an empty part).
        resume = next - body.start;
        if close {
            if parts.is_empty() {
                return ambiguous("a multipart with no body part");
            }
            closed = true;
        } else {
            open = Some(next);
        }
    }
    if closed {
        return Ok(parts);
    }
    ambiguous(if open.is_none() {
        "a multipart without a delimiter"
    } else {
        "a multipart without its close delimiter (truncated?)"
    })
}

/// Parameters one header field may have (RFC 2231 sections included); more is not
/// mail any writer makes, and is refused.
const MAX_PARAMS: usize = 1024;

/// Up to this many parameters, repeats are found by a scan.
const FEW_PARAMS: usize = 16;

/// White space as RFC 5322 knows it (WSP: space and tab; line breaks are unfolded
/// before). `str::trim` would also take a form feed or U+0085, which mail-parser does
/// not: `;\x0c boundary=b` was a boundary to us and none to it (found by the
/// `mime_split_diff` fuzz target).
fn wsp_trim(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// Reads `value *(";" parameter)` (RFC 2045 5.1, RFC 2183), with comments removed and
/// RFC 2231 parameter sections and charsets decoded. `None` when it does not parse or a
/// parameter repeats (readers could pick different ones).
pub(crate) fn parse_params(text: &str) -> Option<Params> {
    let text = strip_comments(text)?;
    let mut items = SplitUnquoted {
        s: &text,
        sep: b';',
        done: false,
    };
    let value = wsp_trim(items.next()?).to_ascii_lowercase();
    let mut raw_params: Vec<(String, String)> = Vec::new();
    // Repeats are found by scanning what came before while there are a few (the
    // common case, cheaper than hashing), then with a set: a header with a hundred
    // thousand parameters must cost linear time (issue #17).
    let mut seen: Option<std::collections::HashSet<String>> = None;
    for item in items {
        let item = wsp_trim(item);
        if item.is_empty() {
            continue;
        }
        if raw_params.len() >= MAX_PARAMS {
            return None;
        }
        let (name, v) = item.split_once('=')?;
        let name = wsp_trim(name).to_ascii_lowercase();
        if !is_token(&name) {
            return None;
        }
        // `boundary= "b"` (often `boundary=` and a folded line): mail-parser reads no
        // value there, we would read "b" (found by `mime_split_diff`). The value
        // follows its `=` directly.
        if v.starts_with([' ', '\t']) {
            return None;
        }
        let v = wsp_trim(v);
        let v = match v.strip_prefix('"') {
            Some(q) => unquote(q)?,
            None if is_token(v) || name.ends_with('*') => v.to_string(),
            None => return None,
        };
        let repeated = match &mut seen {
            Some(set) => !set.insert(name.clone()),
            None => {
                let repeated = raw_params.iter().any(|(k, _)| *k == name);
                if raw_params.len() >= FEW_PARAMS {
                    let mut set: std::collections::HashSet<String> =
                        raw_params.iter().map(|(k, _)| k.clone()).collect();
                    set.insert(name.clone());
                    seen = Some(set);
                }
                repeated
            }
        };
        if repeated {
            return None;
        }
        raw_params.push((name, v));
    }
    let params = if raw_params.iter().any(|(k, _)| k.contains('*')) {
        join_rfc2231(raw_params)?
    } else {
        raw_params
    };
    Some(Params { value, params })
}

/// One RFC 2231 parameter section: its number, whether it is percent-encoded, its text.
type Section = (u32, bool, String);

/// RFC 2231: `name*=charset'lang'%xx`, `name*0=`, `name*1*=`... joined into `name`.
fn join_rfc2231(raw: Vec<(String, String)>) -> Option<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    // Sections per base name: (number, extended, value).
    let mut sections: Vec<(String, Vec<Section>)> = Vec::new();
    for (name, value) in raw {
        let Some(star) = name.find('*') else {
            out.push((name, value));
            continue;
        };
        let base = name[..star].to_string();
        let rest = &name[star + 1..];
        let (number, extended) = if rest.is_empty() {
            (0, true)
        } else {
            let (digits, ext) = match rest.strip_suffix('*') {
                Some(d) => (d, true),
                None => (rest, false),
            };
            (digits.parse::<u32>().ok()?, ext)
        };
        match sections.iter_mut().find(|(b, _)| *b == base) {
            Some((_, list)) => list.push((number, extended, value)),
            None => sections.push((base, vec![(number, extended, value)])),
        }
    }
    for (base, mut list) in sections {
        if out.iter().any(|(k, _)| *k == base) {
            return None;
        }
        list.sort_by_key(|(n, _, _)| *n);
        if list
            .iter()
            .enumerate()
            .any(|(i, (n, _, _))| *n as usize != i)
        {
            return None;
        }
        let mut bytes = Vec::new();
        let mut utf8 = true;
        for (i, (_, extended, value)) in list.iter().enumerate() {
            if !*extended {
                bytes.extend_from_slice(value.as_bytes());
                continue;
            }
            let encoded = if i == 0 {
                let mut pieces = value.splitn(3, '\'');
                let charset = pieces.next()?;
                let _language = pieces.next()?;
                utf8 = charset.is_empty()
                    || charset.eq_ignore_ascii_case("utf-8")
                    || charset.eq_ignore_ascii_case("us-ascii");
                pieces.next()?
            } else {
                value.as_str()
            };
            bytes.extend(percent_decode(encoded)?);
        }
        let text = if utf8 {
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            // Latin-1 and friends: each byte as its code point (exact for ISO-8859-1).
            bytes.iter().map(|&b| b as char).collect()
        };
        out.push((base, text));
    }
    Some(out)
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The content of a quoted string whose opening quote is already consumed; the closing
/// quote must end `q`.
fn unquote(q: &str) -> Option<String> {
    // Without quoted pairs, the content runs to the first quote.
    if let Some(end) = q.find(['"', '\\']) {
        if q.as_bytes()[end] == b'"' {
            return wsp_trim(&q[end + 1..])
                .is_empty()
                .then(|| q[..end].to_string());
        }
    }
    let mut out = String::with_capacity(q.len());
    let mut chars = q.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return wsp_trim(chars.as_str()).is_empty().then_some(out),
            c => out.push(c),
        }
    }
    None
}

/// The pieces of `s` between `sep`s outside quoted strings.
struct SplitUnquoted<'s> {
    s: &'s str,
    sep: u8,
    done: bool,
}

impl<'s> Iterator for SplitUnquoted<'s> {
    type Item = &'s str;
    fn next(&mut self) -> Option<&'s str> {
        if self.done {
            return None;
        }
        let b = self.s.as_bytes();
        let mut quoted = false;
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' if quoted => i += 1,
                b'"' => quoted = !quoted,
                c if c == self.sep && !quoted => {
                    let piece = &self.s[..i];
                    self.s = &self.s[i + 1..];
                    return Some(piece);
                }
                _ => {}
            }
            i += 1;
        }
        self.done = true;
        Some(self.s)
    }
}

/// Removes RFC 5322 comments (nested, with quoted pairs) outside quoted strings; `None`
/// when a comment or quoted string is not closed.
fn strip_comments(s: &str) -> Option<Cow<'_, str>> {
    if find_byte(b'(', s.as_bytes()).is_none() {
        return Some(Cow::Borrowed(s));
    }
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    let mut quoted = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted || depth > 0 => {
                let next = chars.next()?;
                if depth == 0 {
                    out.push('\\');
                    out.push(next);
                }
            }
            '"' if depth == 0 => {
                quoted = !quoted;
                out.push(c);
            }
            '(' if !quoted => depth += 1,
            ')' if !quoted && depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push(' ');
                }
            }
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    (depth == 0 && !quoted).then_some(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_tables_are_the_rfc_character_classes() {
        for b in 0..=255u8 {
            let token = (33..=126).contains(&b) && !b"()<>@,;:\\\"/[]?=".contains(&b);
            assert_eq!(TOKEN[b as usize], token, "token {b}");
            let bchar = b.is_ascii_alphanumeric() || b"'()+_,-./:=? ".contains(&b);
            assert_eq!(BCHARS[b as usize], bchar, "bchar {b}");
        }
    }

    fn tree(raw: &str) -> Result<Tree, MessageError> {
        Tree::parse(raw.as_bytes(), &Limits::default())
    }

    #[test]
    fn multipart_ranges_exclude_the_delimiter_line_break() {
        let raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\npreamble\r\n--b\r\nContent-Type: text/plain\r\n\r\none\r\n--b \t\r\n\r\ntwo\r\n--b--\r\nepilogue\r\n";
        let t = tree(raw).unwrap();
        assert_eq!(t.entities.len(), 3);
        let one = &t.entities[1];
        assert_eq!(
            one.bytes(raw.as_bytes()),
            b"Content-Type: text/plain\r\n\r\none"
        );
        assert_eq!(one.body(raw.as_bytes()), b"one");
        assert_eq!(t.entities[2].body(raw.as_bytes()), b"two");
        assert_eq!(t.entities[2].media_type, "text/plain");
        assert_eq!(t.children(0).count(), 2);
    }

    #[test]
    fn bare_lf_and_nested_multiparts() {
        let raw = "Content-Type: multipart/mixed; boundary=\"o ut\"\n\n--o ut\nContent-Type: multipart/alternative; boundary=in\n\n--in\n\nx\n--in--\n--o ut--\n";
        let t = tree(raw).unwrap();
        assert_eq!(t.entities.len(), 3);
        assert_eq!(t.entities[2].depth, 3);
        assert_eq!(t.entities[2].parent, Some(1));
        assert_eq!(t.entities[2].body(raw.as_bytes()), b"x");
    }

    /// RFC 2046 5.1.1 lets readers take a line that merely starts with the delimiter as
    /// one; others want the whole line. Either way the parts differ: refused.
    #[test]
    fn a_line_that_starts_with_the_delimiter_is_refused() {
        for line in ["--bb", "--b x", "--b\u{85}", "--b--x", "--b-"] {
            let raw = format!(
                "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n{line}\r\n--b--\r\n"
            );
            assert!(
                matches!(tree(&raw), Err(MessageError::BadMultipart { .. })),
                "{line:?} was read"
            );
        }
        // Transport padding after the delimiter is not a different line.
        let raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b \t\r\n\r\nx\r\n--b-- \r\n";
        assert_eq!(tree(raw).unwrap().entities[1].body(raw.as_bytes()), b"x");
        // Nor does the boundary appear inside a line (mail-parser splits there), in
        // the preamble, or after the close delimiter.
        for raw in [
            "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx --b\r\n--b--\r\n",
            "Content-Type: multipart/mixed; boundary=b\r\n\r\npre --b\r\n--b\r\n\r\nx\r\n--b--\r\n",
            "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx\r\n--b--\r\n--b\r\n",
            "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx\r\n--b--\r\nepilogue--b\r\n",
        ] {
            assert!(
                matches!(tree(raw), Err(MessageError::BadMultipart { .. })),
                "{raw:?} was read"
            );
        }
        // Empty parts, dashes in the content and a boundary made of dashes still read.
        let raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n--b\r\n\r\n- -\r\n--b--";
        let t = tree(raw).unwrap();
        assert_eq!(t.entities.len(), 3);
        assert_eq!(t.entities[2].body(raw.as_bytes()), b"- -");
        let raw = "Content-Type: multipart/mixed; boundary=\"-\"\r\n\r\n---\r\n\r\nx\r\n-----\r\n";
        let t = tree(raw).unwrap();
        assert_eq!(t.entities[1].body(raw.as_bytes()), b"x");
    }

    #[test]
    fn fail_truncated_or_unbounded_multiparts() {
        for raw in [
            "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx\r\n",
            "Content-Type: multipart/mixed; boundary=b\r\n\r\nno delimiter\r\n",
            "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b--\r\n",
            "Content-Type: multipart/mixed\r\n\r\n--b\r\n\r\nx\r\n--b--\r\n",
        ] {
            assert!(
                matches!(tree(raw), Err(MessageError::BadMultipart { .. })),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn fail_header_lines_that_are_not_fields() {
        for raw in [
            "To: a@b\r\nnot a field\r\n\r\n",
            " folded\r\nTo: a@b\r\n\r\n",
        ] {
            assert!(matches!(tree(raw), Err(MessageError::BadHeader { .. })));
        }
        assert!(matches!(
            tree("Content-Type: text/plain\r\nContent-type: text/html\r\n\r\n"),
            Err(MessageError::DuplicateHeader { .. })
        ));
    }

    #[test]
    fn parameters_quoted_commented_and_rfc2231() {
        let p = parse_params(
            "Application/A2A+JSON (comment \\) here); charset=\"utf-8\"; name*0*=utf-8''%E2%82%AC; name*1=\".txt\"",
        )
        .unwrap();
        assert_eq!(p.value, "application/a2a+json");
        assert_eq!(p.get("charset"), Some("utf-8"));
        assert_eq!(p.get("name"), Some("€.txt"));
        assert!(parse_params("text/plain; charset=a; charset=b").is_none());
        assert!(parse_params("text/plain; charset=\"open").is_none());
        let escaped = parse_params(r#"text/plain; name="a\"b;c"; x="y""#).unwrap();
        assert_eq!(escaped.get("name"), Some("a\"b;c"));
        assert_eq!(escaped.get("x"), Some("y"));
        assert!(parse_params(r#"text/plain; name="ab"junk"#).is_none());
        assert!(parse_params("text/plain; a b=c").is_none());
    }

    #[test]
    fn absent_content_type_is_text_plain() {
        let t = tree("Subject: x\r\n\r\nbody").unwrap();
        assert_eq!(t.root().media_type, "text/plain");
        assert_eq!(t.root().body(b"Subject: x\r\n\r\nbody"), b"body");
    }

    /// A body part whose last header field runs into the next delimiter (its line break
    /// is the delimiter's): refused, readers drop it or read across the delimiter. A
    /// part of header fields and a blank line, an empty part and a message without a
    /// body still read.
    #[test]
    fn a_body_part_ends_its_header_fields_with_a_blank_line() {
        let raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n--b--\r\n";
        assert!(matches!(tree(raw), Err(MessageError::BadHeader { .. })));
        let raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n--b--\r\n";
        assert!(tree(raw).unwrap().entities[1]
            .body(raw.as_bytes())
            .is_empty());
        let raw =
            "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\n--b--\n";
        assert!(tree(raw).unwrap().entities[1]
            .body(raw.as_bytes())
            .is_empty());
        let raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n--b--\r\n";
        assert_eq!(tree(raw).unwrap().entities.len(), 2);
        assert_eq!(tree("Subject: no body\r\n").unwrap().entities.len(), 1);
    }

    /// Only space and tab are white space around parameters: a form feed or a
    /// vertical tab makes the header unreadable (mail-parser reads no boundary there).
    #[test]
    fn only_space_and_tab_are_white_space_in_parameters() {
        for ws in ["\x0c", "\x0b", "\u{85}", "\u{a0}"] {
            assert!(
                parse_params(&format!("multipart/mixed;{ws}boundary=b")).is_none(),
                "{ws:?}"
            );
            assert!(parse_params(&format!("multipart/mixed; boundary=\"b\"{ws}")).is_none());
        }
        let p = parse_params("multipart/mixed; \t boundary=b \t").unwrap();
        assert_eq!(p.get("boundary"), Some("b"));
        // Nor between `=` and the value (a fold there unfolds to a space).
        assert!(parse_params("multipart/mixed; boundary= \"b\"").is_none());
        assert!(parse_params("multipart/mixed; boundary=\tb").is_none());
    }

    /// Readers guess differently at an unreadable Content-Type (mail-parser reads the
    /// first two as multipart/mixed with a boundary): refused, not read as text/plain.
    #[test]
    fn unreadable_content_type_is_refused() {
        for ct in [
            "multipart/mixed\r\n\tboundary=\"b\"",
            "multipart/mixed boundary=b",
            "message/external-body;\r\n access-type=mail-server\r\n server=\"x@y\"",
            "nonsense",
            "text/plain; charset=\"open",
            "",
        ] {
            let raw = format!("Content-Type: {ct}\r\n\r\n--b\r\n\r\nx\r\n--b--\r\n");
            assert!(
                matches!(tree(&raw), Err(MessageError::BadHeader { .. })),
                "{ct:?} was read"
            );
        }
    }
}
