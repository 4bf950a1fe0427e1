//! The payload as the binding's rules read it: a JSON tree over the envelope's text in
//! which every string written without escapes is borrowed, not copied.
//!
//! A payload is mostly text (an agent's message parts, a task's artifacts). Reading it
//! into a `serde_json::Value` copied every string, after a scan for its end that goes
//! a word at a time: for a 1 MiB payload that cost more than the AES-GCM pass over it.
//! This tree is built by a small parser that finds string ends with a SIMD search, and
//! it is what the A2A schema check (`super::schema`), the task-state rule and the `cid:` reference walk read. It reads every
//! text as serde_json does (tests and the `envelope_json` fuzz target hold the two
//! equal); the envelope's strict reader has already refused duplicate keys and depth.

use std::borrow::Cow;

/// One JSON value borrowing from the text it was read from.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum Value<'t> {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'t, str>),
    Array(Vec<Value<'t>>),
    /// Members in document order (keys are unique: the strict reader saw to it).
    Object(Vec<(Cow<'t, str>, Value<'t>)>),
}

/// A JSON number as serde_json reads it (without arbitrary precision).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Number {
    PosInt(u64),
    NegInt(i64),
    Float(f64),
}

impl<'t> Value<'t> {
    /// Reads `text` as one JSON value (RFC 8259, at most [`MAX_DEPTH`] levels), or
    /// `None` when it is not JSON. What serde_json reads a text as, this reads it as;
    /// strings are found with a SIMD search, where serde_json's scan goes a word at a
    /// time (for a 1 MiB payload, most of the time it took).
    pub(crate) fn parse(text: &'t str) -> Option<Value<'t>> {
        let mut p = Parser {
            text,
            b: text.as_bytes(),
            pos: 0,
        };
        let v = p.value(0)?;
        p.ws();
        (p.pos == p.b.len()).then_some(v)
    }

    /// The member `key` of an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Value<'t>> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text of a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A `serde_json::Value` read as this tree, strings borrowed (the edge-cloud objects,
    /// which are read with serde, go through the same schema check this way).
    pub(crate) fn from_serde(v: &'t serde_json::Value) -> Value<'t> {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Number(Number::from_serde(n)),
            serde_json::Value::String(s) => Value::String(Cow::Borrowed(s)),
            serde_json::Value::Array(items) => {
                Value::Array(items.iter().map(Value::from_serde).collect())
            }
            serde_json::Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Value::from_serde(v)))
                    .collect(),
            ),
        }
    }

    /// The same value as a `serde_json::Value` (error reports and other cold paths).
    pub(crate) fn to_serde(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(n) => serde_json::Value::Number(n.to_serde()),
            Value::String(s) => serde_json::Value::String(s.to_string()),
            Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_serde).collect())
            }
            Value::Object(members) => serde_json::Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_serde()))
                    .collect(),
            ),
        }
    }
}

impl Number {
    /// A serde_json number as this tree holds it.
    pub(crate) fn from_serde(n: &serde_json::Number) -> Number {
        if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            // Without arbitrary precision every other number is an f64.
            Number::Float(n.as_f64().unwrap_or_default())
        }
    }

    fn to_serde(self) -> serde_json::Number {
        match self {
            Number::PosInt(u) => u.into(),
            Number::NegInt(i) => i.into(),
            // serde_json never reads a non-finite float; 0 is unreachable.
            Number::Float(f) => serde_json::Number::from_f64(f).unwrap_or_else(|| 0.into()),
        }
    }
}

/// How deep arrays and objects may nest: serde_json's limit (it refuses a 128th level),
/// far above the envelope strict reader's.
pub(crate) const MAX_DEPTH: usize = 127;

struct Parser<'t> {
    text: &'t str,
    b: &'t [u8],
    pos: usize,
}

/// Objects up to this many members are searched for a repeated key one by one; larger
/// ones through a hash map.
const SMALL_OBJECT: usize = 16;

impl<'t> Parser<'t> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.pos), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.b.get(self.pos) == Some(&c)).then(|| self.pos += 1)
    }

    fn value(&mut self, depth: usize) -> Option<Value<'t>> {
        self.ws();
        match *self.b.get(self.pos)? {
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                let mut members: Vec<(Cow<'t, str>, Value<'t>)> = Vec::new();
                // Where each key is, once an object has more members than a linear
                // search should look through: finding a repeat stays linear in the
                // object's size, whatever its number of keys (issue #58).
                let mut index: Option<std::collections::HashMap<Cow<'t, str>, usize>> = None;
                if self.eat(b'}').is_some() {
                    return Some(Value::Object(members));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.eat(b':')?;
                    let value = self.value(depth + 1)?;
                    // The last of duplicate keys wins, as in serde_json (the strict
                    // reader refuses them before this is read).
                    let at = match &index {
                        Some(index) => index.get(&key).copied(),
                        None => members.iter().position(|(k, _)| *k == key),
                    };
                    match at {
                        Some(i) => members[i].1 = value,
                        None => {
                            if let Some(index) = &mut index {
                                index.insert(key.clone(), members.len());
                            } else if members.len() >= SMALL_OBJECT {
                                let mut built: std::collections::HashMap<_, _> = members
                                    .iter()
                                    .enumerate()
                                    .map(|(i, (k, _))| (k.clone(), i))
                                    .collect();
                                built.insert(key.clone(), members.len());
                                index = Some(built);
                            }
                            members.push((key, value));
                        }
                    }
                    self.ws();
                    match *self.b.get(self.pos)? {
                        b',' => self.pos += 1,
                        b'}' => {
                            self.pos += 1;
                            return Some(Value::Object(members));
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                let mut items = Vec::new();
                if self.eat(b']').is_some() {
                    return Some(Value::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match *self.b.get(self.pos)? {
                        b',' => self.pos += 1,
                        b']' => {
                            self.pos += 1;
                            return Some(Value::Array(items));
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(Value::String),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &str, v: Value<'t>) -> Option<Value<'t>> {
        let end = self.pos + word.len();
        (self.b.get(self.pos..end)? == word.as_bytes()).then(|| {
            self.pos = end;
            v
        })
    }

    fn number(&mut self) -> Option<Value<'t>> {
        let start = self.pos;
        let b = self.b;
        let digits = |p: &mut usize| {
            let s = *p;
            while b.get(*p).is_some_and(u8::is_ascii_digit) {
                *p += 1;
            }
            *p > s
        };
        let mut p = self.pos;
        let negative = b[p] == b'-';
        if negative {
            p += 1;
        }
        let int_start = p;
        if !digits(&mut p) || (b[int_start] == b'0' && p - int_start > 1) {
            return None;
        }
        let mut integer = true;
        if b.get(p) == Some(&b'.') {
            p += 1;
            if !digits(&mut p) {
                return None;
            }
            integer = false;
        }
        if matches!(b.get(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(b.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            if !digits(&mut p) {
                return None;
            }
            integer = false;
        }
        self.pos = p;
        let literal = &self.text[start..p];
        // serde_json's choice: an integer that fits u64 (i64 when negative), else f64.
        if integer {
            if negative {
                if let Ok(i) = literal.parse::<i64>() {
                    return Some(Value::Number(if i == 0 {
                        Number::Float(-0.0)
                    } else {
                        Number::NegInt(i)
                    }));
                }
            } else if let Ok(u) = literal.parse::<u64>() {
                return Some(Value::Number(Number::PosInt(u)));
            }
        }
        literal
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(|f| Value::Number(Number::Float(f)))
    }

    /// A string at `pos` (its opening quote): borrowed when it has no escape.
    fn string(&mut self) -> Option<Cow<'t, str>> {
        if self.b.get(self.pos) != Some(&b'"') {
            return None;
        }
        let start = self.pos + 1;
        let rest = &self.b[start..];
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[end] == b'"' {
            if super::json::has_control(&rest[..end]) {
                return None;
            }
            self.pos = start + end + 1;
            return Some(Cow::Borrowed(&self.text[start..start + end]));
        }
        // With escapes: decode into a new string.
        let mut out = String::with_capacity(end + 16);
        let mut p = start;
        loop {
            let rest = &self.b[p..];
            let i = memchr::memchr2(b'"', b'\\', rest)?;
            if super::json::has_control(&rest[..i]) {
                return None;
            }
            out.push_str(&self.text[p..p + i]);
            p += i;
            if self.b[p] == b'"' {
                self.pos = p + 1;
                return Some(Cow::Owned(out));
            }
            let c = match *self.b.get(p + 1)? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let unit = self.hex4(p + 2)?;
                    p += 6;
                    let c = match unit {
                        0xD800..=0xDBFF => {
                            if self.b.get(p..p + 2)? != b"\\u" {
                                return None;
                            }
                            let low = self.hex4(p + 2)?;
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return None;
                            }
                            p += 6;
                            let code = 0x10000
                                + ((u32::from(unit) - 0xD800) << 10)
                                + (u32::from(low) - 0xDC00);
                            char::from_u32(code)?
                        }
                        0xDC00..=0xDFFF => return None,
                        _ => char::from_u32(u32::from(unit))?,
                    };
                    out.push(c);
                    continue;
                }
                _ => return None,
            };
            out.push(c);
            p += 2;
        }
    }

    fn hex4(&self, at: usize) -> Option<u16> {
        let digits = self.text.get(at..at + 4)?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u16::from_str_radix(digits, 16).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever serde_json reads, this reads as the same value; whatever it refuses,
    /// this refuses.
    fn agrees(text: &str) {
        let ours = Value::parse(text).map(|v| v.to_serde());
        let theirs = serde_json::from_str::<serde_json::Value>(text).ok();
        assert_eq!(ours, theirs, "{text:?}");
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let text = r#"{"a":"plain","b":"esc\"aped"}"#;
        let v = Value::parse(text).unwrap();
        assert!(matches!(
            v.get("a"),
            Some(Value::String(Cow::Borrowed("plain")))
        ));
        assert!(matches!(v.get("b"), Some(Value::String(Cow::Owned(s))) if s == "esc\"aped"));
    }

    /// An object past the size searched one by one: repeats found through the index,
    /// early and late, the last one winning as in serde_json.
    #[test]
    fn large_objects_read_as_serde_json_reads() {
        let mut members: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        members.push(r#""k3":"again""#.into());
        members.push(r#""k99":[1]"#.into());
        members.insert(10, r#""k2":"early repeat""#.into());
        members.insert(20, r#""k\u0031":"escaped k1""#.into());
        agrees(&format!("{{{}}}", members.join(",")));
        let text = format!("{{{}}}", members.join(","));
        let v = Value::parse(&text).unwrap();
        let Value::Object(m) = &v else { panic!() };
        assert_eq!(m.len(), 100);
        assert_eq!(v.get("k3").and_then(Value::as_str), Some("again"));
        assert_eq!(v.get("k1").and_then(Value::as_str), Some("escaped k1"));
    }

    #[test]
    fn reads_as_serde_json_reads() {
        for text in [
            r#"{"a":"plain","b":"esc\"aped","c":[1,-2,3.5,true,null,{"d":{}}],"e":18446744073709551615}"#,
            r#"[0, -0, -0.0, 1e2, 1E-2, -1.5e+3, 18446744073709551616, -9223372036854775808, -9223372036854775809]"#,
            r#"["\u00e9\ud83d\ude00\n\t\b\f\r\/\\", "é😀", ""]"#,
            r#"  {"k" : [ ] , "l" : { } }  "#,
            r#"{"dup":1,"dup":2}"#,
            "[1e308, -1.7e308, 1e-400, 0.1, 123456789.123456789e-5]",
            "[1e309]",
            "[01]",
            "[1.]",
            "[.5]",
            "[-]",
            "[1e]",
            "[+1]",
            "[tru]",
            "[nul]",
            "[\"\u{1}\"]",
            "[\"a\u{1}\"]",
            "[\"\\ud800\"]",
            "[\"\\udc00\"]",
            "[\"\\ud800\\u0041\"]",
            "[\"\\x\"]",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\"}",
            "[] []",
            "",
            " ",
            "\"unterminated",
            "[\"a\\\"]",
        ] {
            agrees(text);
        }
        let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
        agrees(&deep(MAX_DEPTH));
        agrees(&deep(MAX_DEPTH + 1));
        agrees(&format!("[{}]", "9".repeat(400)));
    }

    #[test]
    fn agrees_with_serde_json_on_mutations() {
        let doc =
            r#"{"k":[0,-1,2.5e-3,true,false,null,"s\n\u00e9\ud83d\ude00"],"o":{"p":{}},"q":"x"}"#;
        let subs = b" \t\n\"\\/{}[],:0123456789-+.eEtfnrux\x01\x7f";
        for n in 0..=doc.len() {
            agrees(&doc[..n]);
        }
        for i in 0..doc.len() {
            for &c in subs {
                let mut m = doc.as_bytes().to_vec();
                m[i] = c;
                if let Ok(text) = std::str::from_utf8(&m) {
                    agrees(text);
                }
            }
        }
    }
}
