//! The payload as the binding's rules read it: a JSON tree over the envelope's text in
//! which every string written without escapes is borrowed, not copied.
//!
//! A payload is mostly text (an agent's message parts, a task's artifacts). Reading it
//! into a `serde_json::Value` copied every string, after a scan for its end that goes
//! a word at a time: for a 1 MiB payload that cost more than the AES-GCM pass over it.
//! This tree is built by a small parser that finds string ends with a SIMD search, and
//! it is what the A2A schema check (through jsonschema's custom-representation
//! interface), the task-state rule and the `cid:` reference walk read. It reads every
//! text as serde_json does (tests and the `envelope_json` fuzz target hold the two
//! equal); the envelope's strict reader has already refused duplicate keys and depth.

use std::borrow::Cow;

use jsonschema::json::{Array, Json, JsonNumber, Node, NodeIdentity, Object};
use jsonschema::JsonType;

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
                    match members.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = value,
                        None => members.push((key, value)),
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

/// The representation jsonschema validates: nodes are references into a [`Value`].
pub(crate) struct Borrowed;

impl Json for Borrowed {
    type Node<'a> = &'a Value<'a>;
    type PreparedKey = String;
    type StringBuffer = Value<'static>;

    fn prepare_key(key: &str) -> String {
        key.to_owned()
    }

    fn with_string_node<T>(
        buffer: &mut Value<'static>,
        string: &str,
        f: impl FnOnce(Self::Node<'_>) -> T,
    ) -> T {
        *buffer = Value::String(Cow::Owned(string.to_owned()));
        f(buffer)
    }
}

impl JsonNumber for Number {
    fn as_u64(&self) -> Option<u64> {
        match *self {
            Number::PosInt(u) => Some(u),
            _ => None,
        }
    }
    fn as_i64(&self) -> Option<i64> {
        match *self {
            Number::PosInt(u) => i64::try_from(u).ok(),
            Number::NegInt(i) => Some(i),
            Number::Float(_) => None,
        }
    }
    fn as_f64(&self) -> Option<f64> {
        Some(match *self {
            Number::PosInt(u) => u as f64,
            Number::NegInt(i) => i as f64,
            Number::Float(f) => f,
        })
    }
    fn as_str(&self) -> Cow<'_, str> {
        Cow::Owned(self.to_serde().to_string())
    }
    fn to_number(&self) -> Cow<'_, serde_json::Number> {
        Cow::Owned(self.to_serde())
    }
    fn is_written_as_integer(&self) -> bool {
        !matches!(self, Number::Float(_))
    }
}

impl<'a> Node<'a, Borrowed> for &'a Value<'a> {
    type Object = &'a [(Cow<'a, str>, Value<'a>)];
    type Array = &'a [Value<'a>];
    type Number = Number;

    fn as_object(&self) -> Option<Self::Object> {
        match self {
            Value::Object(members) => Some(members),
            _ => None,
        }
    }
    fn as_array(&self) -> Option<Self::Array> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self {
            Value::String(s) => Some(Cow::Borrowed(s.as_ref())),
            _ => None,
        }
    }
    fn as_number(&self) -> Option<Number> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }
    fn as_boolean(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    fn json_type(&self) -> JsonType {
        match self {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Boolean,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }
    fn to_value(&self) -> Cow<'a, serde_json::Value> {
        Cow::Owned(self.to_serde())
    }
    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::new(
            std::ptr::from_ref::<Value<'a>>(*self) as usize
        ))
    }
}

impl<'a> Object<'a, Borrowed> for &'a [(Cow<'a, str>, Value<'a>)] {
    type Node = &'a Value<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }
    fn get(&self, key: &String) -> Option<&'a Value<'a>> {
        self.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    fn members(&self) -> Members<'a> {
        Members(self.iter())
    }
}

/// An object's members, in order.
pub(crate) struct Members<'a>(std::slice::Iter<'a, (Cow<'a, str>, Value<'a>)>);

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, &'a Value<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k.as_ref(), v))
    }
}

impl<'a> Array<'a, Borrowed> for &'a [Value<'a>] {
    type Node = &'a Value<'a>;
    type ElementsIter = std::slice::Iter<'a, Value<'a>>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }
    fn elements(&self) -> std::slice::Iter<'a, Value<'a>> {
        self.iter()
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

    /// jsonschema's own check of a representation's accessor contract (code-point
    /// lengths, number equality, node identity).
    #[test]
    fn conforms_to_jsonschema_representation_contract() {
        let document = jsonschema::json::conformance::document().to_string();
        let tree = Value::parse(&document).unwrap();
        jsonschema::json::conformance::assert_conformance::<Borrowed>(&&tree);
    }
}
