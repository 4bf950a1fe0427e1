//! The payload as the binding's rules read it: a JSON tree over the envelope's text,
//! twelve bytes a value, in which every string and number stays where it was written.
//!
//! A payload is mostly text (an agent's message parts, a task's artifacts), and it is
//! read before its sender is known: the A2A schema check (`super::schema`), the
//! task-state rule and the `cid:` reference walk all run on mail from anyone. A tree of
//! nested `Vec`s (serde_json's `Value`, or the borrowed enum this module first held)
//! costs a heap allocation of at least four 32-byte slots for every array or object,
//! so 6 bytes of `[[0]],` became some 300 bytes of memory: 18 MB of small arrays took
//! 1 GB before the message was refused as unsigned (issue #58). This tree is one
//! `Vec` of fixed-size nodes in document order (a "tape"): a container records where its
//! descendants end, a string or number its place in the text, an escaped string its
//! place in one buffer of decoded text. Every value takes at least one byte of its
//! text and every node twelve bytes, so the tree is at most twelve times its text
//! (six for the densest real case, `0,`), whatever the nesting ([`Tree::parse`]).
//!
//! It reads every text as serde_json does (tests and the `envelope_json` fuzz target
//! hold the two equal); the envelope's strict reader has already refused duplicate
//! keys and depth, and where a text reaches this tree without it, the last of two
//! equal keys wins, as in serde_json.

use std::hash::BuildHasher;

/// A JSON text read as a tree (see the module doc). Its values are [`Value`] handles.
#[derive(Debug)]
pub(crate) struct Tree<'t> {
    text: &'t str,
    nodes: Vec<Node>,
    /// Strings written with escapes, decoded, one after another.
    decoded: String,
}

/// One value, or an object member's key (the node before the member's value).
#[derive(Clone, Copy, Debug)]
enum Node {
    Null,
    True,
    False,
    /// A number, checked when read: its literal is `text[at..at + len]`.
    Number {
        at: u32,
        len: u32,
    },
    /// A string without escapes: `text[at..at + len]`.
    Text {
        at: u32,
        len: u32,
    },
    /// A string with escapes, decoded: `decoded[at..at + len]`.
    Decoded {
        at: u32,
        len: u32,
    },
    /// `len` items follow, up to node `end` (exclusive).
    Array {
        len: u32,
        end: u32,
    },
    /// `len` members follow (key node, then value), up to node `end` (exclusive).
    Object {
        len: u32,
        end: u32,
    },
    /// The key of a member a later one of the same key replaced (serde_json keeps the
    /// last): it and its value are skipped.
    Replaced,
}

/// A JSON number as serde_json reads it (without arbitrary precision).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Number {
    PosInt(u64),
    NegInt(i64),
    Float(f64),
}

/// One value of a [`Tree`]: a place in it, copied freely.
#[derive(Clone, Copy)]
pub(crate) struct Value<'a> {
    tree: &'a Tree<'a>,
    at: u32,
}

/// What a [`Value`] is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum View<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(&'a str),
    Array(Items<'a>),
    Object(Members<'a>),
}

/// The items of an array.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Items<'a> {
    tree: &'a Tree<'a>,
    first: u32,
    end: u32,
    len: u32,
}

/// The members of an object, in document order (a replaced key's member left out).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Members<'a> {
    tree: &'a Tree<'a>,
    first: u32,
    end: u32,
    len: u32,
}

/// How deep arrays and objects may nest: serde_json's limit (it refuses a 128th level),
/// far above the envelope strict reader's.
pub(crate) const MAX_DEPTH: usize = 127;

impl<'t> Tree<'t> {
    /// Reads `text` as one JSON value (RFC 8259, at most [`MAX_DEPTH`] levels), or
    /// `None` when it is not JSON (or longer than 4 GiB, which nothing here reads:
    /// places are 32-bit). What serde_json reads a text as, this reads it as; strings
    /// are found with a SIMD search, where serde_json's scan goes a word at a time (for
    /// a 1 MiB payload, most of the time it took).
    pub(crate) fn parse(text: &'t str) -> Option<Tree<'t>> {
        u32::try_from(text.len()).ok()?;
        let mut p = Parser {
            tree: Tree {
                text,
                nodes: Vec::new(),
                decoded: String::new(),
            },
            b: text.as_bytes(),
            pos: 0,
        };
        p.value(0)?;
        p.ws();
        if p.pos != p.b.len() {
            return None;
        }
        let mut tree = p.tree;
        // Growth by doubling leaves up to half the nodes' room unused: given back.
        tree.nodes.shrink_to_fit();
        Some(tree)
    }

    /// The value the text is.
    pub(crate) fn root(&self) -> Value<'_> {
        Value { tree: self, at: 0 }
    }

    /// The bytes this tree holds beyond its text (its nodes and decoded strings): what
    /// the module doc bounds, for the tests that hold it there.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>() + self.decoded.capacity()
    }

    fn node(&self, at: u32) -> Node {
        self.nodes[at as usize]
    }

    /// The node after the value at `at` and everything in it.
    fn after(&self, at: u32) -> u32 {
        match self.node(at) {
            Node::Array { end, .. } | Node::Object { end, .. } => end,
            _ => at + 1,
        }
    }

    /// The text of a string node (a value or a key).
    fn str_at(&self, at: u32) -> &str {
        match self.node(at) {
            Node::Text { at, len } => &self.text[at as usize..(at + len) as usize],
            Node::Decoded { at, len } => &self.decoded[at as usize..(at + len) as usize],
            _ => "",
        }
    }
}

impl<'a> Value<'a> {
    /// What this value is.
    pub(crate) fn view(self) -> View<'a> {
        let tree = self.tree;
        match tree.node(self.at) {
            Node::Null | Node::Replaced => View::Null,
            Node::True => View::Bool(true),
            Node::False => View::Bool(false),
            Node::Number { at, len } => {
                View::Number(read_number(&tree.text[at as usize..(at + len) as usize]))
            }
            Node::Text { .. } | Node::Decoded { .. } => View::String(tree.str_at(self.at)),
            Node::Array { len, end } => View::Array(Items {
                tree,
                first: self.at + 1,
                end,
                len,
            }),
            Node::Object { len, end } => View::Object(Members {
                tree,
                first: self.at + 1,
                end,
                len,
            }),
        }
    }

    /// The member `key` of an object.
    pub(crate) fn get(self, key: &str) -> Option<Value<'a>> {
        self.as_object()?.get(key)
    }

    /// The text of a string.
    pub(crate) fn as_str(self) -> Option<&'a str> {
        match self.view() {
            View::String(s) => Some(s),
            _ => None,
        }
    }

    /// A number that is a non-negative integer (as serde_json's `as_u64`).
    pub(crate) fn as_u64(self) -> Option<u64> {
        match self.view() {
            View::Number(Number::PosInt(u)) => Some(u),
            _ => None,
        }
    }

    /// A number that is an integer an `i64` holds (as serde_json's `as_i64`).
    pub(crate) fn as_i64(self) -> Option<i64> {
        match self.view() {
            View::Number(Number::PosInt(u)) => i64::try_from(u).ok(),
            View::Number(Number::NegInt(i)) => Some(i),
            _ => None,
        }
    }

    /// The members of an object.
    pub(crate) fn as_object(self) -> Option<Members<'a>> {
        match self.view() {
            View::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The items of an array.
    pub(crate) fn as_array(self) -> Option<Items<'a>> {
        match self.view() {
            View::Array(i) => Some(i),
            _ => None,
        }
    }

    /// A number's literal as it was written (`1e3`, `1.0`, `100000000000000000000`):
    /// what a reader other than serde_json may take at face value.
    pub(crate) fn number_literal(self) -> Option<&'a str> {
        match self.tree.node(self.at) {
            Node::Number { at, len } => self.tree.text.get(at as usize..(at + len) as usize),
            _ => None,
        }
    }

    /// Whether this is a string.
    pub(crate) fn is_string(self) -> bool {
        matches!(self.view(), View::String(_))
    }

    /// Whether this is `null`.
    pub(crate) fn is_null(self) -> bool {
        matches!(self.view(), View::Null)
    }

    /// The same value as a `serde_json::Value` (tests and the fuzz target that hold the
    /// tree equal to serde_json; it costs what serde_json's tree costs).
    pub(crate) fn to_serde(self) -> serde_json::Value {
        match self.view() {
            View::Null => serde_json::Value::Null,
            View::Bool(b) => serde_json::Value::Bool(b),
            View::Number(n) => serde_json::Value::Number(n.to_serde()),
            View::String(s) => serde_json::Value::String(s.to_string()),
            View::Array(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_serde).collect())
            }
            View::Object(members) => serde_json::Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_serde()))
                    .collect(),
            ),
        }
    }
}

/// Written as serde_json writes the `serde_json::Value` of the same text: members sorted
/// by name (its map's order), numbers as it holds them. The replay record's payload
/// digest is of this text, so it stays what it was when it went through
/// `serde_json::Value` (which cost some fifty times the payload).
impl serde::Serialize for Value<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.view() {
            View::Null => s.serialize_unit(),
            View::Bool(b) => s.serialize_bool(b),
            View::Number(Number::PosInt(u)) => s.serialize_u64(u),
            View::Number(Number::NegInt(i)) => s.serialize_i64(i),
            View::Number(Number::Float(f)) => s.serialize_f64(f),
            View::String(text) => s.serialize_str(text),
            View::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items.iter() {
                    seq.serialize_element(&item)?;
                }
                seq.end()
            }
            View::Object(members) => {
                let mut sorted: Vec<(&str, Value<'_>)> = members.iter().collect();
                sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut map = s.serialize_map(Some(sorted.len()))?;
                for (k, v) in sorted {
                    map.serialize_entry(k, &v)?;
                }
                map.end()
            }
        }
    }
}

impl std::fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_serde())
    }
}

impl<'a> Items<'a> {
    /// How many items.
    pub(crate) fn len(self) -> usize {
        self.len as usize
    }

    /// The items, in order.
    pub(crate) fn iter(self) -> impl Iterator<Item = Value<'a>> {
        let tree = self.tree;
        let mut at = self.first;
        let end = self.end;
        std::iter::from_fn(move || {
            (at < end).then(|| {
                let v = Value { tree, at };
                at = tree.after(at);
                v
            })
        })
    }
}

impl<'a> Members<'a> {
    /// How many members.
    pub(crate) fn len(self) -> usize {
        self.len as usize
    }

    /// Whether there are none.
    pub(crate) fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The members, in document order: each key's text and its value.
    pub(crate) fn iter(self) -> impl Iterator<Item = (&'a str, Value<'a>)> {
        let tree = self.tree;
        let mut at = self.first;
        let end = self.end;
        std::iter::from_fn(move || loop {
            if at >= end {
                return None;
            }
            let key = at;
            let value = Value { tree, at: key + 1 };
            at = tree.after(key + 1);
            if !matches!(tree.node(key), Node::Replaced) {
                return Some((tree.str_at(key), value));
            }
        })
    }

    /// The value of member `key`.
    pub(crate) fn get(self, key: &str) -> Option<Value<'a>> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Whether there is a member `key`.
    pub(crate) fn contains_key(self, key: &str) -> bool {
        self.get(key).is_some()
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

/// A number literal the parser checked, read by serde_json itself: its float reader
/// (built without `float_roundtrip` here) rounds some literals otherwise than the
/// standard library's, and the replay record's payload digest is of what it reads.
fn read_number(literal: &str) -> Number {
    serde_json::from_str::<serde_json::Number>(literal)
        .map(|n| Number::from_serde(&n))
        .unwrap_or(Number::Float(0.0))
}

struct Parser<'t> {
    tree: Tree<'t>,
    b: &'t [u8],
    pos: usize,
}

/// Objects up to this many members are searched for a repeated key one by one; larger
/// ones through a hash map, so finding a repeat stays linear in the object's size,
/// whatever its number of keys (issue #58).
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

    /// Appends a node; `None` past 2^32 nodes (a text under 4 GiB never gets there).
    fn push(&mut self, node: Node) -> Option<u32> {
        let at = u32::try_from(self.tree.nodes.len()).ok()?;
        self.tree.nodes.push(node);
        Some(at)
    }

    fn end(&self) -> Option<u32> {
        u32::try_from(self.tree.nodes.len()).ok()
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        self.ws();
        match *self.b.get(self.pos)? {
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                let at = self.push(Node::Object { len: 0, end: 0 })?;
                let mut len = 0u32;
                // Members read, replaced ones included: what a search one by one would
                // look through.
                let mut read = 0usize;
                // Each live member's key node, found by the key's text, once there are
                // too many members to look through one by one: four bytes a member
                // (a map of the keys themselves took some 32), hashed with a key of
                // this process's own so no text can make its buckets collide.
                let mut index: Option<(hashbrown::HashTable<u32>, std::hash::RandomState)> = None;
                if self.eat(b'}').is_none() {
                    loop {
                        self.ws();
                        let key = self.string()?;
                        self.eat(b':')?;
                        self.value(depth + 1)?;
                        len += 1;
                        read += 1;
                        let tree = &self.tree;
                        let text = tree.str_at(key);
                        let earlier = match &mut index {
                            Some((table, state)) => {
                                let hash = state.hash_one(text);
                                match table.find_mut(hash, |&k| tree.str_at(k) == text) {
                                    Some(slot) => Some(std::mem::replace(slot, key)),
                                    None => {
                                        table.insert_unique(hash, key, |&k| {
                                            state.hash_one(tree.str_at(k))
                                        });
                                        None
                                    }
                                }
                            }
                            None => self.keys(at).find(|&k| k != key && tree.str_at(k) == text),
                        };
                        if let Some(earlier) = earlier {
                            // The last of two equal keys wins, as in serde_json.
                            self.tree.nodes[earlier as usize] = Node::Replaced;
                            len -= 1;
                        }
                        if index.is_none() && read > SMALL_OBJECT {
                            let state = std::hash::RandomState::new();
                            let mut table = hashbrown::HashTable::new();
                            let tree = &self.tree;
                            for k in self.keys(at) {
                                let hash = state.hash_one(tree.str_at(k));
                                table.insert_unique(hash, k, |&k| state.hash_one(tree.str_at(k)));
                            }
                            index = Some((table, state));
                        }
                        self.ws();
                        match *self.b.get(self.pos)? {
                            b',' => self.pos += 1,
                            b'}' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                let end = self.end()?;
                self.tree.nodes[at as usize] = Node::Object { len, end };
                Some(())
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                let at = self.push(Node::Array { len: 0, end: 0 })?;
                let mut len = 0u32;
                if self.eat(b']').is_none() {
                    loop {
                        self.value(depth + 1)?;
                        len += 1;
                        self.ws();
                        match *self.b.get(self.pos)? {
                            b',' => self.pos += 1,
                            b']' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                let end = self.end()?;
                self.tree.nodes[at as usize] = Node::Array { len, end };
                Some(())
            }
            b'"' => self.string().map(drop),
            b't' => self.literal("true", Node::True),
            b'f' => self.literal("false", Node::False),
            b'n' => self.literal("null", Node::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// The key nodes of the live members of the object at `at`, read so far.
    fn keys(&self, at: u32) -> impl Iterator<Item = u32> + '_ {
        let tree = &self.tree;
        let end = self.tree.nodes.len() as u32;
        let mut k = at + 1;
        std::iter::from_fn(move || loop {
            if k >= end {
                return None;
            }
            let key = k;
            k = tree.after(key + 1);
            if !matches!(tree.node(key), Node::Replaced) {
                return Some(key);
            }
        })
    }

    fn literal(&mut self, word: &str, node: Node) -> Option<()> {
        let end = self.pos + word.len();
        if self.b.get(self.pos..end)? != word.as_bytes() {
            return None;
        }
        self.pos = end;
        self.push(node).map(drop)
    }

    fn number(&mut self) -> Option<()> {
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
        if b[p] == b'-' {
            p += 1;
        }
        let int_start = p;
        if !digits(&mut p) || (b[int_start] == b'0' && p - int_start > 1) {
            return None;
        }
        if b.get(p) == Some(&b'.') {
            p += 1;
            if !digits(&mut p) {
                return None;
            }
        }
        if matches!(b.get(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(b.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            if !digits(&mut p) {
                return None;
            }
        }
        self.pos = p;
        let literal = &self.tree.text[start..p];
        // What serde_json refuses (`1e400`; integers past u64 or i64 are floats), it
        // decides: read again when asked (`read_number`), so nothing is stored.
        let held_integer = !literal.bytes().any(|c| matches!(c, b'.' | b'e' | b'E'))
            && (literal.parse::<u64>().is_ok() || literal.parse::<i64>().is_ok());
        if !held_integer && serde_json::from_str::<serde_json::Number>(literal).is_err() {
            return None;
        }
        self.push(Node::Number {
            at: start as u32,
            len: (p - start) as u32,
        })
        .map(drop)
    }

    /// A string at `pos` (its opening quote), as a node: its place in the text when it
    /// has no escape, else in the decoded buffer. Returns the node.
    fn string(&mut self) -> Option<u32> {
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
            return self.push(Node::Text {
                at: start as u32,
                len: end as u32,
            });
        }
        // With escapes: decoded onto the end of the buffer.
        let from = self.tree.decoded.len();
        let text = self.tree.text;
        let mut p = start;
        loop {
            let rest = &self.b[p..];
            let i = memchr::memchr2(b'"', b'\\', rest)?;
            if super::json::has_control(&rest[..i]) {
                return None;
            }
            self.tree.decoded.push_str(&text[p..p + i]);
            p += i;
            if self.b[p] == b'"' {
                self.pos = p + 1;
                let at = u32::try_from(from).ok()?;
                let len = u32::try_from(self.tree.decoded.len() - from).ok()?;
                return self.push(Node::Decoded { at, len });
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
                    self.tree.decoded.push(c);
                    continue;
                }
                _ => return None,
            };
            self.tree.decoded.push(c);
            p += 2;
        }
    }

    fn hex4(&self, at: usize) -> Option<u16> {
        let digits = self.tree.text.get(at..at + 4)?;
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
        let ours = Tree::parse(text).map(|t| t.root().to_serde());
        let theirs = serde_json::from_str::<serde_json::Value>(text).ok();
        assert_eq!(ours, theirs, "{text:?}");
    }

    /// The replay record's payload digest is of this text: it must stay what
    /// serde_json wrote.
    #[test]
    fn written_as_serde_json_writes_its_value() {
        for text in [
            r#"{"z":1,"a":[1,-2,3.5,1e300,3e23,9007199254740993.0,-0,-0.0,18446744073709551615,true,null],"m":{"b":"\u00e9\n","a":{}}}"#,
            r#"{"k":"x","k":"y","\u006b":"z"}"#,
            "[]",
            "\"s\"",
        ] {
            let ours = serde_json::to_string(&Tree::parse(text).unwrap().root()).unwrap();
            let theirs =
                serde_json::to_string(&serde_json::from_str::<serde_json::Value>(text).unwrap())
                    .unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
    }

    #[test]
    fn strings_without_escapes_stay_in_the_text() {
        let text = r#"{"a":"plain","b":"esc\"aped"}"#;
        let t = Tree::parse(text).unwrap();
        let v = t.root();
        assert_eq!(v.get("a").and_then(Value::as_str), Some("plain"));
        assert_eq!(v.get("b").and_then(Value::as_str), Some("esc\"aped"));
        assert!(std::ptr::eq(
            v.get("a").and_then(Value::as_str).unwrap().as_ptr(),
            text[6..].as_ptr()
        ));
        assert_eq!(t.decoded, "esc\"aped");
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
        let t = Tree::parse(&text).unwrap();
        let v = t.root();
        assert_eq!(v.as_object().unwrap().len(), 100);
        assert_eq!(v.as_object().unwrap().iter().count(), 100);
        assert_eq!(v.get("k3").and_then(Value::as_str), Some("again"));
        assert_eq!(v.get("k1").and_then(Value::as_str), Some("escaped k1"));
        // Small objects too, and a repeat of a repeat.
        agrees(r#"{"a":1,"b":2,"a":3,"a":[4],"c":{"a":1,"a":2}}"#);
        let t = Tree::parse(r#"{"a":1,"b":2,"a":3,"a":[4]}"#).unwrap();
        let m = t.root().as_object().unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["b", "a"]);
    }

    #[test]
    fn reads_as_serde_json_reads() {
        for text in [
            r#"{"a":"plain","b":"esc\"aped","c":[1,-2,3.5,true,null,{"d":{}}],"e":18446744073709551615}"#,
            r#"[0, -0, -0.0, 1e2, 1E-2, -1.5e+3, 18446744073709551616, -9223372036854775808, -9223372036854775809]"#,
            r#"[-00, -01, -0e0, 0e0, -0.5, 100000000000000000000000000000000]"#,
            r#"["\u00e9\ud83d\ude00\n\t\b\f\r\/\\", "é😀", ""]"#,
            r#"  {"k" : [ ] , "l" : { } }  "#,
            r#"{"dup":1,"dup":2}"#,
            "[1e308, -1.7e308, 1e-400, 0.1, 123456789.123456789e-5]",
            "[1e309]",
            "[-1e309]",
            "[3e23, 9007199254740993.0, 1.7976931348623158e308, 2.2250738585072011e-308]",
            "[1.7976931348623158e308]",
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
            "0",
            "\"s\"",
        ] {
            agrees(text);
        }
        let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
        agrees(&deep(MAX_DEPTH));
        agrees(&deep(MAX_DEPTH + 1));
        agrees(&format!("[{}]", "9".repeat(400)));
        // Past the standard library's exponent digits (it stops counting at 65536).
        agrees(&format!("[0.{}1e655361]", "0".repeat(655_360)));
        agrees(&format!("[1{}e-655360]", "0".repeat(655_360)));
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

    /// The bound of the module doc: twelve bytes a node, a node for at most every
    /// byte, for the shapes that amplified most (issue #58: 56 times the text).
    #[test]
    fn fail_cost_tree_memory_is_a_small_multiple_of_the_text() {
        assert_eq!(std::mem::size_of::<Node>(), 12);
        let n = 200_000;
        for item in [
            "[[0]]",
            "0",
            "[]",
            "{}",
            "{\"a\":[]}",
            "\"\"",
            "\"\\u0041\"",
        ] {
            let text = format!("[{}]", vec![item; n].join(","));
            let t = Tree::parse(&text).unwrap();
            let ratio = t.heap_bytes() as f64 / text.len() as f64;
            assert!(
                ratio <= 6.5,
                "{item}: {ratio:.2} bytes of tree per byte of text"
            );
        }
    }
}
