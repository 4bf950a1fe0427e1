//! The JSON Schema (draft 2020-12) keywords our embedded schemas use, and nothing else.
//!
//! The A2A payload check (`schemas/a2a-v1.0.1.strict.schema.json`) and the edge-cloud
//! extension objects (`schemas/edge-cloud/`) are validated against schemas that ship
//! inside the crate and use 17 keywords between them. They were validated by
//! `jsonschema`, a complete implementation (every draft, every format, ECMA-262 regular
//! expressions, remote references, arbitrary-precision numbers): its subtree was about
//! 80 s of the 700 s of CPU a first release build takes, plus the code its generic
//! validators instantiated inside this crate (issue #23). This module is hand-written
//! for that reason. What keeps it honest:
//!
//! - **It refuses what it does not implement.** Compiling a schema that uses any other
//!   keyword, a reference other than `#` or `#/$defs/NAME`, a pattern whose meaning
//!   could differ between ECMA-262 and the `regex` crate, or `$ref`s that loop without
//!   reading deeper into the instance, is an error (the embedded schemas compile: unit
//!   tests). A schema that changes can therefore never be checked more loosely than it
//!   says.
//! - **It is held to jsonschema**, kept as a dev-dependency: the payload and edge-cloud
//!   tests validate every fixture and thousands of mutations of them with both and
//!   compare, and the `schema_diff` fuzz target does the same on whatever the fuzzer
//!   writes.
//!
//! Annotations (`title`, `description`, `format`, `deprecated`, `default`,
//! `contentEncoding`, ...) are read and ignored, as 2020-12 specifies for a validator
//! that does not assert formats (jsonschema's default for this draft too).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::Value as Json;

use super::borrowed::{Items, Number, Value, View};

/// Why a schema cannot be compiled.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum SchemaError {
    /// A keyword this validator does not implement.
    #[error("{at}: keyword `{keyword}` is not supported")]
    Unsupported { keyword: String, at: String },
    /// A keyword whose value is not what the draft allows (or not what we support).
    #[error("{at}: `{keyword}` is malformed")]
    Malformed { keyword: &'static str, at: String },
    /// A `$ref` to something other than the root or a `$defs` entry of the root.
    #[error("{at}: reference `{reference}` does not resolve")]
    Reference { reference: String, at: String },
    /// References that apply to the same instance forever.
    #[error("{at}: references loop without reading into the instance")]
    Cycle { at: String },
}

/// One violation: where in the instance (a JSON pointer) and why. The reason never
/// contains a value of the instance (it may be decrypted content bound for logs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    pub pointer: String,
    pub reason: String,
}

/// A compiled schema document: its root and its `$defs`, each a node.
#[derive(Debug)]
pub(crate) struct Schema {
    nodes: Vec<Node>,
    defs: HashMap<String, usize>,
    root: usize,
}

#[derive(Debug)]
enum Node {
    /// `true` or `false`.
    Always(bool),
    Rules(Box<Rules>),
}

/// The six JSON types and `integer`, as bits.
const NULL: u8 = 1;
const BOOLEAN: u8 = 2;
const OBJECT: u8 = 4;
const ARRAY: u8 = 8;
const NUMBER: u8 = 16;
const STRING: u8 = 32;
const INTEGER: u8 = 64;

#[derive(Debug, Default)]
struct Rules {
    /// Allowed types (bits); 0 when `type` is absent.
    types: u8,
    properties: Vec<(String, usize)>,
    /// The required names among the first 64 `properties`, as bits of their indexes.
    required_mask: u64,
    /// The other required names.
    required: Vec<String>,
    additional: Option<usize>,
    items: Option<usize>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    min_length: Option<u64>,
    max_length: Option<u64>,
    minimum: Option<Number>,
    maximum: Option<Number>,
    choices: Option<Vec<Json>>,
    constant: Option<Json>,
    pattern: Option<regex::Regex>,
    /// `$ref` (resolved to a node).
    reference: Option<usize>,
    all_of: Vec<usize>,
    any_of: Vec<usize>,
    one_of: Vec<usize>,
}

/// Keywords read and ignored (annotations and identifiers).
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "deprecated",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "format",
    "contentEncoding",
    "contentMediaType",
];

impl Schema {
    /// Compiles a schema document (the root may carry `$defs`).
    pub(crate) fn compile(doc: &Json) -> Result<Schema, SchemaError> {
        let mut c = Compiler {
            nodes: Vec::new(),
            refs: Vec::new(),
            def_names: HashMap::new(),
        };
        let root = c.reserve();
        if let Some(defs) = doc.as_object().and_then(|o| o.get("$defs")) {
            let defs = defs.as_object().ok_or_else(|| SchemaError::Malformed {
                keyword: "$defs",
                at: "#".into(),
            })?;
            for name in defs.keys() {
                let slot = c.reserve();
                c.def_names.insert(name.clone(), slot);
            }
            for (name, def) in defs {
                let slot = c.def_names[name];
                let node = c.node(slot, def, &format!("#/$defs/{}", escape(name)))?;
                c.nodes[slot] = node;
            }
        }
        let node = c.node(root, doc, "#")?;
        c.nodes[root] = node;
        // Resolve references now that every def has its slot.
        for (slot, reference, at) in std::mem::take(&mut c.refs) {
            let target = if reference == "#" {
                root
            } else {
                let name = reference
                    .strip_prefix("#/$defs/")
                    .map(unescape)
                    .and_then(|n| c.def_names.get(&n).copied());
                name.ok_or_else(|| SchemaError::Reference {
                    reference: reference.clone(),
                    at: at.clone(),
                })?
            };
            if let Node::Rules(r) = &mut c.nodes[slot] {
                r.reference = Some(target);
            }
        }
        let schema = Schema {
            nodes: c.nodes,
            defs: c.def_names,
            root,
        };
        schema.refuse_cycles()?;
        Ok(schema)
    }

    /// The node of the root schema.
    pub(crate) fn root(&self) -> usize {
        self.root
    }

    /// The node of `#/$defs/NAME`.
    pub(crate) fn def(&self, name: &str) -> Option<usize> {
        self.defs.get(name).copied()
    }

    /// Whether `value` is valid against node `at` (stops at the first violation).
    pub(crate) fn is_valid(&self, at: usize, value: Value<'_>) -> bool {
        let mut walk = Walk {
            schema: self,
            path: Vec::new(),
            faults: None,
            limit: 0,
        };
        walk.check(at, value)
    }

    /// The first `limit` violations of `value` against node `at` (none: it is valid).
    pub(crate) fn faults(&self, at: usize, value: Value<'_>, limit: usize) -> Vec<Fault> {
        let mut out = Vec::new();
        let mut walk = Walk {
            schema: self,
            path: Vec::new(),
            faults: Some(&mut out),
            limit: limit.max(1),
        };
        let valid = walk.check(at, value);
        debug_assert_eq!(valid, out.is_empty());
        out.truncate(limit);
        out
    }

    /// Refuses references that can apply to the same instance forever (`$ref`,
    /// `allOf`, `anyOf` and `oneOf` apply in place; only `properties`, `items` and
    /// `additionalProperties` read deeper).
    fn refuse_cycles(&self) -> Result<(), SchemaError> {
        // 0 unvisited, 1 on the stack, 2 done.
        let mut state = vec![0u8; self.nodes.len()];
        for start in 0..self.nodes.len() {
            if state[start] != 0 {
                continue;
            }
            let mut stack = vec![(start, 0usize)];
            state[start] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let edges = self.in_place(node);
                if let Some(&to) = edges.get(*next) {
                    *next += 1;
                    match state[to] {
                        1 => {
                            return Err(SchemaError::Cycle {
                                at: format!("node {to}"),
                            })
                        }
                        0 => {
                            state[to] = 1;
                            stack.push((to, 0));
                        }
                        _ => {}
                    }
                } else {
                    state[node] = 2;
                    stack.pop();
                }
            }
        }
        Ok(())
    }

    fn in_place(&self, node: usize) -> Vec<usize> {
        match &self.nodes[node] {
            Node::Always(_) => Vec::new(),
            Node::Rules(r) => r
                .reference
                .iter()
                .chain(&r.all_of)
                .chain(&r.any_of)
                .chain(&r.one_of)
                .copied()
                .collect(),
        }
    }
}

struct Compiler {
    nodes: Vec<Node>,
    /// (node, `$ref` value, where) to resolve once every node exists.
    refs: Vec<(usize, String, String)>,
    def_names: HashMap<String, usize>,
}

impl Compiler {
    fn reserve(&mut self) -> usize {
        self.nodes.push(Node::Always(false));
        self.nodes.len() - 1
    }

    fn add(&mut self, schema: &Json, at: &str) -> Result<usize, SchemaError> {
        let slot = self.reserve();
        let node = self.node(slot, schema, at)?;
        self.nodes[slot] = node;
        Ok(slot)
    }

    /// Compiles the schema that goes into node `slot` (its `$ref` is resolved later).
    fn node(&mut self, slot: usize, schema: &Json, at: &str) -> Result<Node, SchemaError> {
        let object = match schema {
            Json::Bool(b) => return Ok(Node::Always(*b)),
            Json::Object(o) => o,
            _ => {
                return Err(SchemaError::Malformed {
                    keyword: "schema",
                    at: at.into(),
                })
            }
        };
        let mut r = Rules::default();
        let malformed = |keyword: &'static str| SchemaError::Malformed {
            keyword,
            at: at.to_owned(),
        };
        for (keyword, v) in object {
            let here = format!("{at}/{}", escape(keyword));
            match keyword.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                // The root's `$defs` are compiled first ([`Schema::compile`]); nowhere
                // else are they read.
                "$defs" if at == "#" => {}
                "type" => {
                    let names: Vec<&Json> = match v {
                        Json::Array(a) if !a.is_empty() => a.iter().collect(),
                        Json::String(_) => vec![v],
                        _ => return Err(malformed("type")),
                    };
                    for n in names {
                        r.types |= match n.as_str() {
                            Some("null") => NULL,
                            Some("boolean") => BOOLEAN,
                            Some("object") => OBJECT,
                            Some("array") => ARRAY,
                            Some("number") => NUMBER,
                            Some("string") => STRING,
                            Some("integer") => INTEGER,
                            _ => return Err(malformed("type")),
                        };
                    }
                }
                "properties" => {
                    let o = v.as_object().ok_or_else(|| malformed("properties"))?;
                    for (name, sub) in o {
                        let n = self.add(sub, &format!("{here}/{}", escape(name)))?;
                        r.properties.push((name.clone(), n));
                    }
                }
                "required" => {
                    let a = v.as_array().ok_or_else(|| malformed("required"))?;
                    for name in a {
                        let name = name.as_str().ok_or_else(|| malformed("required"))?;
                        r.required.push(name.to_owned());
                    }
                }
                "additionalProperties" => r.additional = Some(self.add(v, &here)?),
                "items" => r.items = Some(self.add(v, &here)?),
                "minItems" => r.min_items = Some(count(v).ok_or_else(|| malformed("minItems"))?),
                "maxItems" => r.max_items = Some(count(v).ok_or_else(|| malformed("maxItems"))?),
                "minLength" => r.min_length = Some(count(v).ok_or_else(|| malformed("minLength"))?),
                "maxLength" => r.max_length = Some(count(v).ok_or_else(|| malformed("maxLength"))?),
                "uniqueItems" => {
                    r.unique_items = v.as_bool().ok_or_else(|| malformed("uniqueItems"))?
                }
                "minimum" => r.minimum = Some(number(v).ok_or_else(|| malformed("minimum"))?),
                "maximum" => r.maximum = Some(number(v).ok_or_else(|| malformed("maximum"))?),
                "enum" => r.choices = Some(v.as_array().ok_or_else(|| malformed("enum"))?.clone()),
                "const" => r.constant = Some(v.clone()),
                "pattern" => {
                    let p = v.as_str().ok_or_else(|| malformed("pattern"))?;
                    if !portable_pattern(p) {
                        return Err(malformed("pattern"));
                    }
                    r.pattern = Some(regex::Regex::new(p).map_err(|_| malformed("pattern"))?);
                }
                "$ref" => {
                    let target = v.as_str().ok_or_else(|| malformed("$ref"))?;
                    self.refs.push((slot, target.to_owned(), here));
                }
                "allOf" | "anyOf" | "oneOf" => {
                    let list = match v {
                        Json::Array(a) if !a.is_empty() => a,
                        _ => return Err(malformed("allOf/anyOf/oneOf")),
                    };
                    let mut nodes = Vec::with_capacity(list.len());
                    for (i, sub) in list.iter().enumerate() {
                        nodes.push(self.add(sub, &format!("{here}/{i}"))?);
                    }
                    match keyword.as_str() {
                        "allOf" => r.all_of = nodes,
                        "anyOf" => r.any_of = nodes,
                        _ => r.one_of = nodes,
                    }
                }
                other => {
                    return Err(SchemaError::Unsupported {
                        keyword: other.to_owned(),
                        at: at.to_owned(),
                    })
                }
            }
        }
        // Required names that are properties become bits, checked in the members' pass.
        let required = std::mem::take(&mut r.required);
        for name in required {
            match r.properties.iter().position(|(n, _)| *n == name) {
                Some(i) if i < 64 => r.required_mask |= 1 << i,
                _ => r.required.push(name),
            }
        }
        Ok(Node::Rules(Box::new(r)))
    }
}

/// String equality with the cheap tests first (most member names differ in length or
/// first byte from the property they are compared with).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().first() == b.as_bytes().first() && a == b
}

/// A non-negative integer keyword value (`minItems` and the like).
fn count(v: &Json) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
            .map(|f| f as u64)
    })
}

fn number(v: &Json) -> Option<Number> {
    v.as_number().map(Number::from_serde)
}

/// Whether a pattern means the same to ECMA-262 (what JSON Schema specifies) and to
/// the `regex` crate: literals, bracket classes, groups `(` and `(?:`, alternation,
/// quantifiers and anchors; escapes of ASCII punctuation only. Refused: `.` outside a
/// class (ECMA's excludes four line terminators, the crate's one), the shorthand
/// classes (`\d` is ASCII in ECMA, Unicode in the crate), flags and look-arounds.
fn portable_pattern(p: &str) -> bool {
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if e.is_ascii_punctuation() => {}
                _ => return false,
            },
            '[' if !in_class => {
                in_class = true;
                // ECMA reads `[]` and `[^]`; the crate does not.
                if chars.peek() == Some(&'^') {
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    return false;
                }
            }
            // A nested `[` is literal in ECMA, a nested class in the crate.
            '[' => return false,
            ']' if in_class => in_class = false,
            '.' if !in_class => return false,
            '(' if !in_class && chars.peek() == Some(&'?') => {
                chars.next();
                if chars.next() != Some(':') {
                    return false;
                }
            }
            // Set operations and nesting the crate reads inside a class.
            '&' | '~' | '-' if in_class && chars.peek() == Some(&c) => return false,
            _ => {}
        }
    }
    !in_class
}

/// JSON Pointer escaping of one reference token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

#[derive(Clone, Copy)]
enum Seg<'v> {
    /// A member the schema names (its name is the schema's, not the message's).
    Key(&'v str),
    /// A member the schema does not name, by its place among the object's members
    /// (from 1): its name is content, which errors never carry (issue #58).
    Member(usize),
    Index(usize),
}

struct Walk<'a, 'o> {
    schema: &'a Schema,
    path: Vec<Seg<'a>>,
    /// `None`: only validity is wanted, so the walk stops at the first violation.
    faults: Option<&'o mut Vec<Fault>>,
    limit: usize,
}

impl<'a> Walk<'a, '_> {
    /// Records a violation; returns whether the walk should go on looking for more.
    fn fault(&mut self, reason: impl FnOnce() -> String) -> bool {
        let Some(out) = self.faults.as_deref_mut() else {
            return false;
        };
        if out.len() < self.limit {
            let mut pointer = String::new();
            for seg in &self.path {
                match seg {
                    Seg::Key(k) => {
                        pointer.push('/');
                        pointer.push_str(&escape(k));
                    }
                    Seg::Member(n) => {
                        let _ = write!(pointer, "/#{n}");
                    }
                    Seg::Index(i) => {
                        let _ = write!(pointer, "/{i}");
                    }
                }
            }
            out.push(Fault {
                pointer,
                reason: reason(),
            });
        }
        out.len() < self.limit
    }

    /// Whether `value` is valid against `node`, recording violations when asked.
    fn check(&mut self, node: usize, value: Value<'_>) -> bool {
        let schema = self.schema;
        let rules = match &schema.nodes[node] {
            Node::Always(true) => return true,
            Node::Always(false) => {
                self.fault(|| "no value is allowed here".into());
                return false;
            }
            Node::Rules(r) => r,
        };
        let mut valid = true;
        // Each failing keyword marks the value invalid; the walk goes on only when
        // collecting faults and under the limit.
        macro_rules! fail {
            ($reason:expr) => {{
                valid = false;
                if !self.fault(|| $reason) {
                    return false;
                }
            }};
        }
        // Checks a subschema, at a member or item below (`at`) or in place; its faults
        // are its own, and the walk goes on as for a fault of this node.
        macro_rules! apply {
            ($sub:expr, $value:expr) => {{
                if !self.check($sub, $value) {
                    valid = false;
                    if !self.going_on() {
                        return false;
                    }
                }
            }};
            ($sub:expr, $value:expr, at $seg:expr) => {{
                self.path.push($seg);
                let ok = self.check($sub, $value);
                self.path.pop();
                if !ok {
                    valid = false;
                    if !self.going_on() {
                        return false;
                    }
                }
            }};
        }
        if rules.types != 0 && !has_type(rules.types, value) {
            // Other keywords would only repeat the same fault in other words.
            self.fault(|| format!("not of type {}", type_names(rules.types)));
            return false;
        }
        if let Some(target) = rules.reference {
            apply!(target, value);
        }
        if let Some(choices) = &rules.choices {
            if !choices.iter().any(|c| equals_json(value, c)) {
                fail!("not one of the values the schema allows".into());
            }
        }
        if let Some(constant) = &rules.constant {
            if !equals_json(value, constant) {
                fail!("not the value the schema requires".into());
            }
        }
        match value.view() {
            View::Object(members) => {
                // One pass over the members: each found among `properties` (and
                // ticked off if required) or else judged by `additionalProperties`.
                let mut seen = 0u64;
                for (position, (k, v)) in members.iter().enumerate() {
                    let sub = match rules.properties.iter().position(|(n, _)| same(n, k)) {
                        Some(i) => {
                            if i < 64 {
                                seen |= 1 << i;
                            }
                            let (name, sub) = &rules.properties[i];
                            apply!(*sub, v, at Seg::Key(name));
                            continue;
                        }
                        // A member `additionalProperties: false` refuses is the
                        // object's fault (as jsonschema reports it), said by its
                        // place, never its name: a name is content (it may come from
                        // inside an encrypted part, and be a secret), and errors
                        // carry none (issue #58).
                        None if rules
                            .additional
                            .is_some_and(|a| matches!(schema.nodes[a], Node::Always(false))) =>
                        {
                            fail!(format!(
                                "member {} of {} ({} characters) is not allowed",
                                position + 1,
                                members.len(),
                                k.chars().count()
                            ));
                            continue;
                        }
                        None => rules.additional,
                    };
                    if let Some(sub) = sub {
                        apply!(sub, v, at Seg::Member(position + 1));
                    }
                }
                if seen & rules.required_mask != rules.required_mask {
                    for (i, (name, _)) in rules.properties.iter().enumerate().take(64) {
                        if rules.required_mask & (1 << i) != 0 && seen & (1 << i) == 0 {
                            fail!(format!("required property `{name}` is missing"));
                        }
                    }
                }
                for name in &rules.required {
                    if !members.iter().any(|(k, _)| same(name, k)) {
                        fail!(format!("required property `{name}` is missing"));
                    }
                }
            }
            View::Array(items) => {
                let n = items.len() as u64;
                if rules.min_items.is_some_and(|m| n < m) {
                    fail!(format!(
                        "has fewer than {} items",
                        rules.min_items.unwrap_or_default()
                    ));
                }
                if rules.max_items.is_some_and(|m| n > m) {
                    fail!(format!(
                        "has more than {} items",
                        rules.max_items.unwrap_or_default()
                    ));
                }
                if rules.unique_items && !all_unique(items) {
                    fail!("has repeated items".into());
                }
                if let Some(sub) = rules.items {
                    for (i, item) in items.iter().enumerate() {
                        apply!(sub, item, at Seg::Index(i));
                    }
                }
            }
            View::String(s) => {
                if rules.min_length.is_some() || rules.max_length.is_some() {
                    let n = s.chars().count() as u64;
                    if let Some(m) = rules.min_length.filter(|m| n < *m) {
                        fail!(format!("is shorter than {m} characters"));
                    }
                    if let Some(m) = rules.max_length.filter(|m| n > *m) {
                        fail!(format!("is longer than {m} characters"));
                    }
                }
                if rules.pattern.as_ref().is_some_and(|p| !p.is_match(s)) {
                    fail!("does not match the pattern the schema requires".into());
                }
            }
            View::Number(n) => {
                if let Some(m) = rules.minimum.filter(|m| compare(n, *m) == Ordering::Less) {
                    fail!(format!("is less than the minimum {}", show(m)));
                }
                if let Some(m) = rules
                    .maximum
                    .filter(|m| compare(n, *m) == Ordering::Greater)
                {
                    fail!(format!("is greater than the maximum {}", show(m)));
                }
            }
            View::Null | View::Bool(_) => {}
        }
        for &sub in &rules.all_of {
            apply!(sub, value);
        }
        if !rules.any_of.is_empty() && !rules.any_of.iter().any(|&s| self.quietly(s, value)) {
            fail!("is valid against none of the schemas `anyOf` lists".into());
        }
        if !rules.one_of.is_empty() {
            let matching = rules
                .one_of
                .iter()
                .filter(|&&s| self.quietly(s, value))
                .take(2)
                .count();
            match matching {
                1 => {}
                0 => fail!("is valid against none of the schemas `oneOf` lists".into()),
                _ => fail!("is valid against more than one of the schemas `oneOf` lists".into()),
            }
        }
        valid
    }

    /// Whether the walk goes on after a failure found below (it recorded its own fault).
    fn going_on(&self) -> bool {
        self.faults.as_ref().is_some_and(|f| f.len() < self.limit)
    }

    /// Validity against `node` without recording anything (for `anyOf` and `oneOf`,
    /// whose branches' faults are not the instance's).
    fn quietly(&self, node: usize, value: Value<'_>) -> bool {
        let mut walk = Walk {
            schema: self.schema,
            path: Vec::new(),
            faults: None,
            limit: 0,
        };
        walk.check(node, value)
    }
}

fn has_type(types: u8, value: Value<'_>) -> bool {
    let bit = match value.view() {
        View::Null => NULL,
        View::Bool(_) => BOOLEAN,
        View::Object(_) => OBJECT,
        View::Array(_) => ARRAY,
        View::String(_) => STRING,
        View::Number(n) => {
            // 2020-12: an integer is any number with a zero fractional part.
            let integral = match n {
                Number::Float(f) => f.fract() == 0.0,
                _ => true,
            };
            return types & NUMBER != 0 || (integral && types & INTEGER != 0);
        }
    };
    types & bit != 0
}

fn type_names(types: u8) -> String {
    let names = [
        (NULL, "null"),
        (BOOLEAN, "boolean"),
        (OBJECT, "object"),
        (ARRAY, "array"),
        (NUMBER, "number"),
        (STRING, "string"),
        (INTEGER, "integer"),
    ];
    names
        .iter()
        .filter(|(bit, _)| types & bit != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(" or ")
}

fn show(n: Number) -> String {
    match n {
        Number::PosInt(u) => u.to_string(),
        Number::NegInt(i) => i.to_string(),
        Number::Float(f) => f.to_string(),
    }
}

/// Mathematical order of two JSON numbers (exact across integers and floats).
fn compare(a: Number, b: Number) -> Ordering {
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (None, Some(y)) => float_against_int(float(a), y),
        (Some(x), None) => float_against_int(float(b), x).reverse(),
        (None, None) => float(a).partial_cmp(&float(b)).unwrap_or(Ordering::Equal),
    }
}

fn int(n: Number) -> Option<i128> {
    match n {
        Number::PosInt(u) => Some(i128::from(u)),
        Number::NegInt(i) => Some(i128::from(i)),
        Number::Float(_) => None,
    }
}

fn float(n: Number) -> f64 {
    match n {
        Number::PosInt(u) => u as f64,
        Number::NegInt(i) => i as f64,
        Number::Float(f) => f,
    }
}

/// A finite float against an integer, exactly: its integral part compared as an
/// integer (exact: every float of that size is an integer), then its fraction.
fn float_against_int(f: f64, i: i128) -> Ordering {
    let whole = f.trunc();
    // Beyond every i64 and u64 an integer instance can hold.
    if whole < -1.0e20 {
        return Ordering::Less;
    }
    if whole > 1.0e20 {
        return Ordering::Greater;
    }
    match (whole as i128).cmp(&i) {
        Ordering::Equal if f > whole => Ordering::Greater,
        Ordering::Equal if f < whole => Ordering::Less,
        o => o,
    }
}

/// JSON equality (numbers by value, objects regardless of member order).
fn equals_json(v: Value<'_>, j: &Json) -> bool {
    match (v.view(), j) {
        (View::Null, Json::Null) => true,
        (View::Bool(a), Json::Bool(b)) => a == *b,
        (View::String(a), Json::String(b)) => a == b,
        (View::Number(a), Json::Number(_)) => {
            number(j).is_some_and(|b| compare(a, b) == Ordering::Equal)
        }
        (View::Array(a), Json::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equals_json(x, y))
        }
        (View::Object(a), Json::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, x)| b.get(k).is_some_and(|y| equals_json(x, y)))
        }
        _ => false,
    }
}

/// Whether no two items are equal as JSON, in O(n) expected time: each item's
/// canonical text (numbers by value, members sorted) goes into a set.
fn all_unique(items: Items<'_>) -> bool {
    let mut seen = HashSet::with_capacity(items.len());
    items.iter().all(|item| {
        let mut key = String::new();
        canonical(item, &mut key);
        seen.insert(key)
    })
}

fn canonical(v: Value<'_>, out: &mut String) {
    match v.view() {
        View::Null => out.push('n'),
        View::Bool(b) => out.push(if b { 't' } else { 'f' }),
        View::Number(n) => {
            let integral = match n {
                Number::Float(f) if f.fract() == 0.0 && f.abs() < 1.0e20 => Some(f as i128),
                Number::Float(_) => None,
                other => int(other),
            };
            match integral {
                Some(i) => {
                    let _ = write!(out, "i{i};");
                }
                None => {
                    let _ = write!(out, "f{};", float(n).to_bits());
                }
            }
        }
        View::String(s) => {
            let _ = write!(out, "s{}:{s}", s.len());
        }
        View::Array(items) => {
            out.push('[');
            for item in items.iter() {
                canonical(item, out);
            }
            out.push(']');
        }
        View::Object(members) => {
            let mut sorted: Vec<_> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (k, item) in sorted {
                let _ = write!(out, "{}:{k}", k.len());
                canonical(item, out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::borrowed::Tree;
    use super::*;
    use serde_json::json;

    fn valid(schema: &Json, instance: &Json) -> bool {
        let s = Schema::compile(schema).unwrap();
        let text = instance.to_string();
        let t = Tree::parse(&text).unwrap();
        let ok = s.is_valid(s.root(), t.root());
        assert_eq!(ok, s.faults(s.root(), t.root(), 10).is_empty());
        ok
    }

    #[test]
    fn keywords_it_does_not_implement_are_refused() {
        for schema in [
            json!({"not": {}}),
            json!({"patternProperties": {}}),
            json!({"if": true, "then": false}),
            json!({"properties": {"a": {"exclusiveMinimum": 1}}}),
            json!({"multipleOf": 2}),
        ] {
            assert!(
                matches!(
                    Schema::compile(&schema),
                    Err(SchemaError::Unsupported { .. })
                ),
                "{schema}"
            );
        }
    }

    #[test]
    fn patterns_that_could_mean_two_things_are_refused() {
        for p in [
            r"^\d+$", "a.b", r"\w", "(?i)a", "(?=a)", "[[a]]", "[]a]", "[a&&b]", r"\p{L}",
        ] {
            assert!(!portable_pattern(p), "{p}");
            assert!(Schema::compile(&json!({ "pattern": p })).is_err(), "{p}");
        }
        for p in [
            "^sha256:[0-9a-f]{64}$",
            r"^[0-9]{4}(\.[0-9]{1,9})?Z$",
            "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
            "[.]",
        ] {
            assert!(portable_pattern(p), "{p}");
        }
    }

    #[test]
    fn references_resolve_to_defs_or_are_refused() {
        let s = json!({"$defs": {"A": {"type": "string"}, "a/b": {"type": "integer"}},
            "properties": {"x": {"$ref": "#/$defs/A"}, "y": {"$ref": "#/$defs/a~1b"}}});
        assert!(valid(&s, &json!({"x": "s", "y": 2})));
        assert!(!valid(&s, &json!({"x": 1})));
        assert!(!valid(&s, &json!({"y": 2.5})));
        assert!(matches!(
            Schema::compile(&json!({"$ref": "#/$defs/missing"})),
            Err(SchemaError::Reference { .. })
        ));
        assert!(matches!(
            Schema::compile(&json!({"$ref": "https://example.com/s.json"})),
            Err(SchemaError::Reference { .. })
        ));
    }

    #[test]
    fn references_that_loop_in_place_are_refused_and_recursion_through_data_is_not() {
        assert!(matches!(
            Schema::compile(&json!({"$ref": "#"})),
            Err(SchemaError::Cycle { .. })
        ));
        assert!(matches!(
            Schema::compile(&json!({"$defs": {"A": {"oneOf": [{"$ref": "#/$defs/B"}]},
                "B": {"allOf": [{"$ref": "#/$defs/A"}]}}})),
            Err(SchemaError::Cycle { .. })
        ));
        let tree = json!({"type": "object", "additionalProperties": {"$ref": "#"}});
        assert!(valid(&tree, &json!({"a": {"b": {}}})));
        assert!(!valid(&tree, &json!({"a": {"b": 1}})));
    }

    #[test]
    fn integers_are_numbers_with_no_fraction_and_bounds_compare_exactly() {
        let s = json!({"type": "integer", "minimum": 1, "maximum": 9007199254740993u64});
        assert!(valid(&s, &json!(1)));
        assert!(valid(&s, &json!(1.0)));
        assert!(!valid(&s, &json!(1.5)));
        assert!(!valid(&s, &json!(0)));
        assert!(valid(&s, &json!(9007199254740993u64)));
        assert!(!valid(&s, &json!(9007199254740994u64)));
        // 9007199254740992.0 is below the bound even though the bound as f64 is equal.
        assert!(valid(&s, &json!(9007199254740992.0)));
        assert!(!valid(&json!({"maximum": -1}), &json!(-0.5)));
        assert!(valid(&json!({"minimum": -1}), &json!(-0.5)));
    }

    #[test]
    fn enum_const_and_unique_items_compare_as_json() {
        assert!(valid(&json!({"enum": [1, "a"]}), &json!(1.0)));
        assert!(valid(
            &json!({"const": {"a": [1, 2], "b": null}}),
            &json!({"b": null, "a": [1.0, 2]})
        ));
        assert!(!valid(
            &json!({"const": {"a": 1}}),
            &json!({"a": 1, "b": 1})
        ));
        let u = json!({"uniqueItems": true});
        assert!(!valid(&u, &json!([1, 1.0])));
        assert!(!valid(&u, &json!([{"a": 1, "b": 2}, {"b": 2, "a": 1}])));
        assert!(valid(&u, &json!(["1", 1, [1], {"1": 1}, true, null, 1.5])));
        assert!(valid(&u, &json!(["ab", "a"])));
    }

    #[test]
    fn lengths_count_characters() {
        let s = json!({"minLength": 2, "maxLength": 2});
        assert!(valid(&s, &json!("é😀")));
        assert!(!valid(&s, &json!("é")));
        assert!(!valid(&s, &json!("abc")));
    }

    #[test]
    fn one_of_needs_exactly_one() {
        let s = json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert!(valid(&s, &json!({"a": 1})));
        assert!(!valid(&s, &json!({"a": 1, "b": 1})));
        assert!(!valid(&s, &json!({})));
    }

    #[test]
    fn faults_point_at_the_value_and_never_quote_it() {
        let s = json!({"type": "object", "additionalProperties": false,
            "properties": {"a~b": {"type": "array", "items": {"type": "string"}}}});
        let s = Schema::compile(&s).unwrap();
        let text = r#"{"a~b": ["ok", 12345], "se/cret": "hunter2"}"#;
        let faults = s.faults(s.root(), Tree::parse(text).unwrap().root(), 10);
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert_eq!(faults[0].pointer, "/a~0b/1");
        assert_eq!(faults[0].reason, "not of type string");
        assert_eq!(faults[1].pointer, "");
        assert_eq!(
            faults[1].reason,
            "member 2 of 2 (7 characters) is not allowed"
        );
        assert!(faults.iter().all(|f| !f.reason.contains("se/cret")));
        assert!(faults
            .iter()
            .all(|f| !f.reason.contains("12345") && !f.reason.contains("hunter2")));
        assert_eq!(
            s.faults(s.root(), Tree::parse(text).unwrap().root(), 1)
                .len(),
            1
        );
    }
}
