//! Strict JSON reading for untrusted protected envelopes.
//!
//! `serde_json` silently keeps the last of two duplicate keys and only bounds nesting at
//! 128. A MailA2A receiver must not: two `operation` keys could mean one thing to us and
//! another to a relay or the agent behind us. This reader walks the document once
//! (iteratively, so no input can exhaust the stack), refuses duplicate object keys at
//! any depth, nesting deeper than the limit, lone surrogate escapes (I-JSON, RFC 7493)
//! and anything RFC 8259 does not allow, and returns where each top-level field's value
//! lies, so the envelope is split without a second parse. It allocates only for keys
//! written with escapes and for the key sets of large objects.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;

use super::EnvelopeError;

/// An object key: where it is in the input when written without escapes, else its
/// decoded text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// The key's text is this range of the input.
    At(Range<usize>),
    /// The key had escapes; this is what they spell.
    Decoded(String),
}

/// A top-level object's fields: each key and its value's byte range.
pub(crate) type Fields = Vec<(Key, Range<usize>)>;

/// Checks `bytes` is one UTF-8 JSON value without duplicate keys and at most `max_depth`
/// levels of arrays/objects.
pub(crate) fn check_strict(bytes: &[u8], max_depth: usize) -> Result<(), EnvelopeError> {
    Reader::new(utf8(bytes)?, max_depth).run(false).map(|_| ())
}

/// `bytes` as text, or where they stop being UTF-8.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, EnvelopeError> {
    std::str::from_utf8(bytes).map_err(|e| EnvelopeError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })
}

/// Reads `bytes` as one JSON object under the rules of [`check_strict`]: its keys
/// (unescaped) and the byte range of each value, in order. `Ok(None)` when the value
/// is valid JSON but not an object.
pub(crate) fn read_object(text: &str, max_depth: usize) -> Result<Option<Fields>, EnvelopeError> {
    Reader::new(text, max_depth).run(true)
}

/// One step of the path to the current position, for error reports.
enum Segment<'a> {
    /// A member: its name and its place among its object's members (from 1).
    Key(Cow<'a, str>, usize),
    Index(usize),
}

/// A key just read: its text, its range when written without escapes, and its place
/// among its object's members (from 1).
type ReadKey<'a> = (Cow<'a, str>, Option<Range<usize>>, usize);

/// An open container.
enum Frame<'a> {
    Object {
        /// Where this object's keys start in the reader's shared key stack (small
        /// objects are searched linearly there)...
        first_key: usize,
        /// ...until the object has 16 keys; then they move to a set.
        set: Option<HashSet<Cow<'a, str>>>,
        /// Members read so far.
        members: usize,
    },
    Array {
        index: usize,
    },
}

struct Reader<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    max_depth: usize,
    stack: Vec<Frame<'a>>,
    path: Vec<Segment<'a>>,
    /// Keys of the open objects, innermost last (one allocation for the document).
    keys: Vec<Cow<'a, str>>,
}

/// A top-level key: its range when it was written without escapes, else its text.
fn top_key(key: &str, span: Option<Range<usize>>) -> Key {
    match span {
        Some(at) => Key::At(at),
        None => Key::Decoded(key.to_string()),
    }
}

/// Whether `s` has a byte below 0x20 (no early exit, so the loop vectorises).
pub(crate) fn has_control(s: &[u8]) -> bool {
    s.iter().fold(false, |acc, &c| acc | (c < 0x20))
}

/// Whether the byte may follow a JSON number or literal.
fn ends_token(b: Option<&u8>) -> bool {
    matches!(
        b,
        None | Some(b' ' | b'\t' | b'\r' | b'\n' | b',' | b']' | b'}')
    )
}

impl<'a> Reader<'a> {
    fn new(text: &'a str, max_depth: usize) -> Self {
        Reader {
            text,
            b: text.as_bytes(),
            pos: 0,
            max_depth,
            stack: Vec::with_capacity(8),
            path: Vec::with_capacity(8),
            keys: Vec::with_capacity(32),
        }
    }

    fn syntax(&self, reason: &str) -> EnvelopeError {
        let upto = &self.b[..self.pos.min(self.b.len())];
        let line = 1 + memchr::memchr_iter(b'\n', upto).count();
        let column = 1 + upto.len() - memchr::memrchr(b'\n', upto).map_or(0, |i| i + 1);
        EnvelopeError::Syntax {
            line,
            column,
            reason: reason.to_string(),
        }
    }

    /// JSON pointer of the path so far, plus `last` if given.
    /// Where the reader is, as a JSON pointer in which a member is named only when its
    /// name is public, else by its place (`super::a2a::member_token`): the text may be
    /// decrypted content, and errors carry none (issue #58).
    fn pointer(&self, last: Option<(&str, usize)>) -> String {
        let mut s = String::new();
        for seg in &self.path {
            s.push('/');
            match seg {
                Segment::Key(k, position) => s.push_str(&super::a2a::member_token(k, *position)),
                Segment::Index(i) => s.push_str(&i.to_string()),
            }
        }
        if let Some((k, position)) = last {
            s.push('/');
            s.push_str(&super::a2a::member_token(k, position));
        }
        s
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }

    fn expect_byte(&mut self, c: u8, reason: &str) -> Result<(), EnvelopeError> {
        self.skip_ws();
        if self.b.get(self.pos) == Some(&c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax(reason))
        }
    }

    fn hex4(&self, at: usize) -> Option<u16> {
        let h = self.b.get(at..at + 4)?;
        let s = std::str::from_utf8(h).ok()?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u16::from_str_radix(s, 16).ok()
    }

    /// A string starting at the opening quote: its content range and whether it has
    /// escapes.
    fn string(&mut self) -> Result<(Range<usize>, bool), EnvelopeError> {
        self.pos += 1;
        let start = self.pos;
        let mut escaped = false;
        loop {
            let rest = &self.b[self.pos..];
            // Keys and identifiers end within a few bytes, where a plain loop beats the
            // call into a SIMD search; long text still gets the SIMD search.
            const SHORT: usize = 32;
            let head = &rest[..rest.len().min(SHORT)];
            let found = match head
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
            {
                Some(i) => Some(i),
                None if rest.len() > SHORT => {
                    memchr::memchr2(b'"', b'\\', &rest[SHORT..]).map(|i| i + SHORT)
                }
                None => None,
            };
            let Some(i) = found else {
                self.pos = self.b.len();
                return Err(self.syntax("EOF while parsing a string"));
            };
            if rest[i] < 0x20 || has_control(&rest[..i]) {
                self.pos += rest[..i].iter().position(|&c| c < 0x20).unwrap_or(0);
                return Err(self.syntax("control character in a string"));
            }
            self.pos += i;
            if self.b[self.pos] == b'"' {
                self.pos += 1;
                return Ok((start..self.pos - 1, escaped));
            }
            escaped = true;
            match self.b.get(self.pos + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.pos += 2,
                Some(b'u') => {
                    let unit = self
                        .hex4(self.pos + 2)
                        .ok_or_else(|| self.syntax("invalid \\u escape"))?;
                    self.pos += 6;
                    match unit {
                        0xD800..=0xDBFF => {
                            let low = (self.b.get(self.pos..self.pos + 2) == Some(b"\\u"))
                                .then(|| self.hex4(self.pos + 2))
                                .flatten();
                            if !matches!(low, Some(0xDC00..=0xDFFF)) {
                                return Err(self.syntax("lone leading surrogate"));
                            }
                            self.pos += 6;
                        }
                        0xDC00..=0xDFFF => return Err(self.syntax("lone trailing surrogate")),
                        _ => {}
                    }
                }
                _ => return Err(self.syntax("invalid escape")),
            }
        }
    }

    fn number(&mut self) -> Result<(), EnvelopeError> {
        let b = self.b;
        let digits = |p: &mut usize| {
            let s = *p;
            while b.get(*p).is_some_and(u8::is_ascii_digit) {
                *p += 1;
            }
            *p > s
        };
        let mut p = self.pos;
        if b.get(p) == Some(&b'-') {
            p += 1;
        }
        match b.get(p) {
            Some(b'0') => p += 1,
            Some(b'1'..=b'9') => {
                digits(&mut p);
            }
            _ => {
                self.pos = p;
                return Err(self.syntax("invalid number"));
            }
        }
        if b.get(p) == Some(&b'.') {
            p += 1;
            if !digits(&mut p) {
                self.pos = p;
                return Err(self.syntax("invalid number"));
            }
        }
        if matches!(b.get(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(b.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            if !digits(&mut p) {
                self.pos = p;
                return Err(self.syntax("invalid number"));
            }
        }
        let start = self.pos;
        self.pos = p;
        if !ends_token(b.get(p)) {
            return Err(self.syntax("trailing characters after a number"));
        }
        // I-JSON (RFC 7493 2.2): a number must fit a double. Only a long number or one
        // with an exponent can overflow, so only those are converted.
        let text = &b[start..p];
        if text.len() > 15 || text.iter().any(|&c| c == b'e' || c == b'E') {
            let value = std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse::<f64>().ok());
            if !value.is_some_and(f64::is_finite) {
                self.pos = start;
                return Err(self.syntax("number out of range"));
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), EnvelopeError> {
        if self.b[self.pos..].starts_with(word) && ends_token(self.b.get(self.pos + word.len())) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.syntax("expected a value"))
        }
    }

    fn open(&mut self, frame: Frame<'a>) -> Result<(), EnvelopeError> {
        if self.stack.len() >= self.max_depth {
            return Err(EnvelopeError::TooDeep {
                limit: self.max_depth,
                path: self.pointer(None),
            });
        }
        self.stack.push(frame);
        self.pos += 1;
        Ok(())
    }

    /// Closes the innermost container; every container but the root has a path
    /// segment.
    fn close(&mut self) {
        if let Some(Frame::Object {
            first_key,
            set: None,
            ..
        }) = self.stack.pop()
        {
            self.keys.truncate(first_key);
        }
        if !self.stack.is_empty() {
            self.path.pop();
        }
    }

    /// Reads an object key (after `{` or `,`), refusing a repeat, and the colon.
    fn key(&mut self) -> Result<ReadKey<'a>, EnvelopeError> {
        self.skip_ws();
        if self.b.get(self.pos) != Some(&b'"') {
            return Err(self.syntax("expected a string key"));
        }
        let (range, escaped) = self.string()?;
        let span = (!escaped).then(|| range.clone());
        let key: Cow<'a, str> = if escaped {
            let quoted = &self.b[range.start - 1..range.end + 1];
            Cow::Owned(
                serde_json::from_slice::<String>(quoted).map_err(|_| self.syntax("invalid key"))?,
            )
        } else {
            // The range lies between two quotes, so on character boundaries.
            Cow::Borrowed(self.text.get(range).unwrap_or_default())
        };
        let mut position = 0;
        let duplicate = match self.stack.last_mut() {
            Some(Frame::Object {
                first_key,
                set,
                members,
            }) => {
                *members += 1;
                position = *members;
                let mine = &mut self.keys[*first_key..];
                let seen = match set {
                    Some(set) => set.contains(&key),
                    None => mine.contains(&key),
                };
                if !seen {
                    match set {
                        Some(set) => {
                            set.insert(key.clone());
                        }
                        None if mine.len() < 16 => self.keys.push(key.clone()),
                        None => {
                            let mut big: HashSet<Cow<'a, str>> =
                                self.keys.drain(*first_key..).collect();
                            big.insert(key.clone());
                            *set = Some(big);
                        }
                    }
                }
                seen
            }
            _ => false,
        };
        if duplicate {
            return Err(EnvelopeError::DuplicateKey {
                path: self.pointer(Some((&key, position))),
            });
        }
        self.expect_byte(b':', "expected `:`")?;
        Ok((key, span, position))
    }

    /// Walks the document; with `top_fields`, returns the top-level object's fields.
    fn run(mut self, top_fields: bool) -> Result<Option<Fields>, EnvelopeError> {
        let mut fields: Fields = Vec::new();
        let mut is_object = false;
        // The segment naming the value about to be read, pushed if it is a container.
        let mut pending: Option<Segment<'a>> = None;
        // Start of a top-level field's value, while it is being read.
        let mut field_start: Option<usize> = None;
        'value: loop {
            self.skip_ws();
            if top_fields && self.stack.len() == 1 && is_object {
                field_start = Some(self.pos);
            }
            match self.b.get(self.pos) {
                Some(b'{') | Some(b'[') => {
                    if self.stack.is_empty() {
                        is_object = self.b[self.pos] == b'{';
                    }
                    if let Some(seg) = pending.take() {
                        self.path.push(seg);
                    }
                    let frame = if self.b[self.pos] == b'{' {
                        Frame::Object {
                            first_key: self.keys.len(),
                            set: None,
                            members: 0,
                        }
                    } else {
                        Frame::Array { index: 0 }
                    };
                    let is_obj = matches!(frame, Frame::Object { .. });
                    self.open(frame)?;
                    self.skip_ws();
                    let close = if is_obj { b'}' } else { b']' };
                    if self.b.get(self.pos) == Some(&close) {
                        self.pos += 1;
                        self.close();
                    } else if is_obj {
                        let (key, span, position) = self.key()?;
                        if top_fields && self.stack.len() == 1 {
                            fields.push((top_key(&key, span), 0..0));
                        }
                        pending = Some(Segment::Key(key, position));
                        continue 'value;
                    } else {
                        pending = Some(Segment::Index(0));
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(_) => return Err(self.syntax("expected a value")),
                None => return Err(self.syntax("EOF while parsing a value")),
            }
            // After a value: a separator, a close, or the end.
            loop {
                if self.stack.len() == 1 {
                    if let (Some(start), Some(last)) = (field_start.take(), fields.last_mut()) {
                        last.1 = start..self.pos;
                    }
                }
                self.skip_ws();
                let Some(frame) = self.stack.last_mut() else {
                    if self.pos != self.b.len() {
                        return Err(self.syntax("trailing characters"));
                    }
                    return Ok(if is_object || !top_fields {
                        Some(fields)
                    } else {
                        None
                    });
                };
                match (frame, self.b.get(self.pos)) {
                    (Frame::Object { .. }, Some(b',')) => {
                        self.pos += 1;
                        let (key, span, position) = self.key()?;
                        if top_fields && self.stack.len() == 1 {
                            fields.push((top_key(&key, span), 0..0));
                        }
                        pending = Some(Segment::Key(key, position));
                        continue 'value;
                    }
                    (Frame::Array { index }, Some(b',')) => {
                        self.pos += 1;
                        *index += 1;
                        pending = Some(Segment::Index(*index));
                        continue 'value;
                    }
                    (Frame::Object { .. }, Some(b'}')) | (Frame::Array { .. }, Some(b']')) => {
                        self.pos += 1;
                        self.close();
                    }
                    (Frame::Object { .. }, _) => {
                        return Err(self.syntax("expected `,` or `}`"));
                    }
                    (Frame::Array { .. }, _) => {
                        return Err(self.syntax("expected `,` or `]`"));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        let dup = |doc: &str| match check_strict(doc.as_bytes(), 64) {
            Err(EnvelopeError::DuplicateKey { path }) => path,
            other => panic!("{doc}: {other:?}"),
        };
        // Names the binding or the A2A schema defines are shown; a message's own
        // names are content (perhaps decrypted, perhaps a secret): shown by place.
        assert_eq!(
            dup(r#"{"payload":{"message":{"role":1,"parts":[],"role":2}}}"#),
            "/payload/message/role"
        );
        assert_eq!(dup(r#"{"a":{"b":1,"b":2}}"#), "/#1/#2");
        let secret = dup(
            r#"{"payload":{"metadata":{"SECRET-API-KEY-1":1,"x":[{"SECRET-API-KEY-1":1,"SECRET-API-KEY-1":2}]}}}"#,
        );
        assert_eq!(secret, "/payload/metadata/#2/0/#2");
        // Past 16 keys an object's keys move to a set; nested objects keep their own.
        let many: Vec<String> = (0..40)
            .map(|i| format!("\"k{i}\":{{\"k{i}\":1,\"a\":2}}"))
            .collect();
        let doc = format!("{{{}}}", many.join(","));
        check_strict(doc.as_bytes(), 64).unwrap();
        assert_eq!(dup(&format!("{{{},\"k25\":0}}", many.join(","))), "/#41");
        assert_eq!(
            dup(&format!("{{\"x\":{{{}}},\"x\":0}}", many.join(","))),
            "/#2"
        );
        // An escaped spelling of the same key is the same key.
        assert_eq!(dup(r#"{"kind":1,"\u006bind":2}"#), "/kind");
    }

    #[test]
    fn depth_is_bounded() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(matches!(
            check_strict(deep.as_bytes(), 64),
            Err(EnvelopeError::TooDeep { limit: 64, .. })
        ));
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        check_strict(ok.as_bytes(), 64).unwrap();
        // Far deeper than serde_json's own limit: still our error, no stack overflow.
        let bomb = "[".repeat(100_000);
        assert!(matches!(
            check_strict(bomb.as_bytes(), 64),
            Err(EnvelopeError::TooDeep { .. })
        ));
    }

    #[test]
    fn utf8_and_syntax() {
        assert!(matches!(
            check_strict(b"{\"a\":\"\xff\"}", 64),
            Err(EnvelopeError::InvalidUtf8 { offset: 6 })
        ));
        assert!(matches!(
            check_strict(b"{\"a\":1", 64),
            Err(EnvelopeError::Syntax { .. })
        ));
        assert!(matches!(
            check_strict(b"{} {}", 64),
            Err(EnvelopeError::Syntax { .. })
        ));
    }

    #[test]
    fn fields_are_the_exact_value_texts() {
        let doc = br#" { "a" : [1, {"x": "y"}] ,"b\u0063":"d\"e", "n":-1.5e+3,"t":true , "z":{}} "#;
        let fields = read_object(std::str::from_utf8(doc).unwrap(), 64)
            .unwrap()
            .unwrap();
        let text = std::str::from_utf8(doc).unwrap();
        let got: Vec<(&str, &str)> = fields
            .iter()
            .map(|(k, r)| {
                let key = match k {
                    Key::At(at) => &text[at.clone()],
                    Key::Decoded(d) => d.as_str(),
                };
                (key, &text[r.clone()])
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", r#"[1, {"x": "y"}]"#),
                ("bc", r#""d\"e""#),
                ("n", "-1.5e+3"),
                ("t", "true"),
                ("z", "{}"),
            ]
        );
        assert_eq!(read_object("[1]", 64).unwrap(), None);
    }

    /// Differential check against serde_json: every truncation and every one-byte
    /// substitution of a document is accepted by us exactly when serde_json accepts it,
    /// except for what we refuse on purpose (duplicate keys).
    #[test]
    fn agrees_with_serde_json_on_mutations() {
        let doc =
            br#"{"k":[0,-1,2.5e-3,true,false,null,"s\n\u00e9\ud83d\ude00"],"o":{"p":{}},"q":""}"#;
        assert!(check_strict(b"[1e308, -1.7e308, 1e-400]", 64).is_ok());
        assert!(check_strict(b"[1e309]", 64).is_err());
        assert!(check_strict(format!("[{}]", "9".repeat(400)).as_bytes(), 64).is_err());
        let subs = b" \t\n\"\\/{}[],:0123456789-+.eEtfnrux\x01\x7f";
        let mut cases: Vec<Vec<u8>> = (0..=doc.len()).map(|n| doc[..n].to_vec()).collect();
        for i in 0..doc.len() {
            for &c in subs {
                let mut m = doc.to_vec();
                m[i] = c;
                cases.push(m);
            }
        }
        for case in cases {
            let ours = check_strict(&case, 64);
            if matches!(ours, Err(EnvelopeError::DuplicateKey { .. })) {
                continue;
            }
            let theirs = serde_json::from_slice::<serde_json::Value>(&case);
            assert_eq!(
                ours.is_ok(),
                theirs.is_ok(),
                "{} ours {ours:?} serde {theirs:?}",
                String::from_utf8_lossy(&case)
            );
        }
    }
}
