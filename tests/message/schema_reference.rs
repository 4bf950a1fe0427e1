//! Our schema validator (`src/envelope/schema.rs`, hand-written for build time) against
//! jsonschema, the reference: for every A2A v1.0 message type of the strict bundle and
//! each edge-cloud schema, the fixtures and thousands of instances generated from the
//! schema itself (valid ones, then each broken at one place: a wrong type, a value out
//! of range, a missing or an unknown member, an extra `oneOf` branch) must get the same
//! verdict from both. The `schema_diff` fuzz target does the same on the fuzzer's
//! inputs.

use serde_json::{json, Map, Value};

const BUNDLE: &str = include_str!("../../schemas/a2a-v1.0.1.strict.schema.json");
const EDGE: [(&str, &str); 3] = [
    (
        "capability-contract",
        include_str!("../../schemas/edge-cloud/capability-contract.schema.json"),
    ),
    (
        "execution-requirements",
        include_str!("../../schemas/edge-cloud/execution-requirements.schema.json"),
    ),
    (
        "execution-receipt",
        include_str!("../../schemas/edge-cloud/execution-receipt.schema.json"),
    ),
];

/// A small deterministic generator (xorshift64*), so that a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Generates an instance of `schema`; `defs` resolves `$ref`s. Mostly valid; at each
/// node, with `break_percent` chance, something the schema forbids instead.
struct Generator<'a> {
    defs: &'a Map<String, Value>,
    rng: Rng,
    break_percent: u64,
}

impl Generator<'_> {
    fn odd(&mut self) -> Value {
        let odd = [
            json!(null),
            json!(true),
            json!(-1),
            json!(0),
            json!(1.5),
            json!(1.0),
            json!(2147483648u64),
            json!(-9223372036854775808i64),
            json!(18446744073709551615u64),
            json!(1e300),
            json!(""),
            json!("x"),
            json!("ROLE_USER"),
            json!("QUJD"),
            json!("2026-01-01T00:00:00Z"),
            json!([]),
            json!([1, 1]),
            json!({}),
            json!({"text": "t"}),
        ];
        odd[self.rng.below(odd.len())].clone()
    }

    fn string(&mut self, schema: &Map<String, Value>) -> Value {
        if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
            let samples = if p.contains("sha256") {
                vec![
                    format!("sha256:{}", "ab".repeat(32)),
                    format!("sha256:{}", "AB".repeat(32)),
                    "sha256:".into(),
                ]
            } else if p.contains("T[0-9]") {
                vec![
                    "2026-06-01T12:00:00Z".into(),
                    "2026-06-01T12:00:00.123456789Z".into(),
                    "2026-06-01T12:00:00.1234567890Z".into(),
                    "2026-06-01 12:00:00Z".into(),
                ]
            } else {
                vec![
                    "QUJD".into(),
                    "QUI=".into(),
                    "QQ==".into(),
                    "QUJ".into(),
                    "".into(),
                    "Q===".into(),
                ]
            };
            // The first sample matches; the others are there to break.
            let pick = if self.break_percent == 0 {
                0
            } else {
                self.rng.below(samples.len())
            };
            return Value::String(samples[pick].clone());
        }
        let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = schema.get("maxLength").and_then(Value::as_u64);
        let len = match self.rng.below(if self.break_percent == 0 { 1 } else { 4 }) {
            0 if self.break_percent == 0 => {
                min + self.rng.below(3).min(max.map_or(3, |m| m as usize - min))
            }
            0 => min,
            1 => min.saturating_sub(1),
            2 => max.map_or(min + 3, |m| m as usize + 1),
            _ => min + self.rng.below(4),
        };
        let alphabet = ['a', 'é', '😀', 'Z', '0', '/', '~'];
        Value::String(
            (0..len)
                .map(|_| alphabet[self.rng.below(alphabet.len())])
                .collect(),
        )
    }

    fn number(&mut self, schema: &Map<String, Value>, integer: bool) -> Value {
        let min = schema.get("minimum").and_then(Value::as_i64);
        let max = schema.get("maximum").and_then(Value::as_i64);
        let candidates = [
            min.map(|m| json!(m)),
            min.map(|m| json!(m - 1)),
            min.map(|m| json!(m as f64 - 0.5)),
            max.map(|m| json!(m)),
            max.map(|m| json!(m + 1)),
            max.map(|m| json!(m as f64 + 0.5)),
            Some(json!(3)),
            Some(json!(3.0)),
            (!integer).then(|| json!(2.75)),
        ];
        let mut present: Vec<Value> = candidates.into_iter().flatten().collect();
        if self.break_percent == 0 {
            // Only values inside the bounds.
            present = [
                min.map(|m| json!(m)),
                max.map(|m| json!(m)),
                Some(json!(min.unwrap_or(3).max(3).min(max.unwrap_or(3)))),
            ]
            .into_iter()
            .flatten()
            .collect();
        }
        present[self.rng.below(present.len())].clone()
    }

    fn value(&mut self, schema: &Value, depth: usize) -> Value {
        if self.rng.chance(self.break_percent) {
            return self.odd();
        }
        let Some(schema) = schema.as_object() else {
            return self.odd();
        };
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/$defs/");
            let target = self.defs.get(name).cloned().unwrap_or(json!({}));
            return self.value(&target, depth + 1);
        }
        if let Some(e) = schema.get("enum").and_then(Value::as_array) {
            return e[self.rng.below(e.len())].clone();
        }
        if let Some(c) = schema.get("const") {
            return c.clone();
        }
        let ty = match schema.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts[self.rng.below(ts.len())]
                .as_str()
                .unwrap_or("null")
                .to_owned(),
            _ if schema.contains_key("properties") => "object".into(),
            _ => return if depth > 6 { json!(null) } else { self.odd() },
        };
        match ty.as_str() {
            "object" => self.object(schema, depth),
            "array" => {
                let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
                let n = if depth > 6 {
                    min
                } else {
                    match self.rng.below(3) {
                        0 if self.break_percent > 0 => min.saturating_sub(1),
                        _ => min + self.rng.below(3),
                    }
                };
                let items = schema.get("items").cloned().unwrap_or(json!({}));
                let mut out: Vec<Value> = (0..n).map(|_| self.value(&items, depth + 1)).collect();
                if schema.get("uniqueItems") == Some(&json!(true))
                    && !out.is_empty()
                    && self.break_percent > 0
                    && self.rng.chance(30)
                {
                    out.push(out[0].clone());
                }
                Value::Array(out)
            }
            "string" => self.string(schema),
            "integer" => self.number(schema, true),
            "number" => self.number(schema, false),
            "boolean" => json!(self.rng.chance(50)),
            _ => json!(null),
        }
    }

    fn object(&mut self, schema: &Map<String, Value>, depth: usize) -> Value {
        let empty = Map::new();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        for (name, sub) in properties {
            let wanted = if required.contains(&name.as_str()) {
                !self.rng.chance(self.break_percent)
            } else {
                depth < 4 && self.rng.chance(40)
            };
            if wanted {
                out.insert(name.clone(), self.value(sub, depth + 1));
            }
        }
        if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
            // Fill one branch (or, now and then, two).
            let picks = if self.rng.chance(self.break_percent) {
                2
            } else {
                1
            };
            for _ in 0..picks {
                let branch = &branches[self.rng.below(branches.len())];
                if let Value::Object(b) = self.value(branch, depth) {
                    out.extend(b);
                }
            }
        }
        if self.rng.chance(self.break_percent) {
            out.insert("unknownMember".into(), json!(1));
        }
        if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            if self.rng.chance(30) {
                let v = self.value(extra, depth + 1);
                out.insert("extra".into(), v);
            }
        }
        Value::Object(out)
    }
}

fn reference(schema: &Value) -> jsonschema::Validator {
    jsonschema::validator_for(schema).expect("jsonschema compiles our schemas")
}

/// Runs `count` generated instances of `target` through both validators; returns how
/// many were valid (so a test can see that both kinds were exercised).
fn agree_on_generated(
    defs: &Map<String, Value>,
    target: &Value,
    count: usize,
    seed: u64,
    verdict: &dyn Fn(&str) -> bool,
    theirs: &jsonschema::Validator,
    label: &str,
) -> usize {
    let mut valid = 0;
    for i in 0..count {
        let mut g = Generator {
            defs,
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64 + 1)),
            break_percent: [0, 2, 5, 15][i % 4],
        };
        let instance = g.value(target, 0);
        let text = instance.to_string();
        let expected = theirs.is_valid(&instance);
        assert_eq!(
            verdict(&text),
            expected,
            "{label}: jsonschema says {expected} for {text}"
        );
        valid += usize::from(expected);
    }
    valid
}

#[test]
fn every_a2a_message_type_gets_jsonschemas_verdict() {
    let bundle: Value = serde_json::from_str(BUNDLE).unwrap();
    let defs = bundle["$defs"].as_object().unwrap();
    let (mut total_valid, mut total) = (0, 0);
    for (n, name) in defs.keys().enumerate() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": defs,
            "$ref": format!("#/$defs/{name}"),
        });
        let theirs = reference(&schema);
        let verdict = |text: &str| {
            let (valid, faults) = mailseal::envelope::a2a_verdict(name, text).unwrap();
            assert_eq!(valid, faults.is_empty(), "{name}: {text}");
            valid
        };
        let count = 160;
        total_valid += agree_on_generated(
            defs,
            &json!({"$ref": format!("#/$defs/{name}")}),
            count,
            n as u64 + 1,
            &verdict,
            &theirs,
            name,
        );
        total += count;
    }
    // Both verdicts were exercised in quantity.
    assert!(total_valid > total / 5, "{total_valid} of {total} valid");
    assert!(
        total_valid < total * 4 / 5,
        "{total_valid} of {total} valid"
    );
}

#[test]
fn fixtures_get_jsonschemas_verdict() {
    let bundle: Value = serde_json::from_str(BUNDLE).unwrap();
    let card = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/maila2a/agent-card.json"
    ))
    .unwrap();
    let payload = crate::common::request()["payload"].to_string();
    // The request's payload is valid; the card fixture (the MailA2A draft's illustrative
    // card) is not a strict v1.0 AgentCard: both validators must say which.
    let payload_value: Value = serde_json::from_str(&payload).unwrap();
    assert!(
        reference(&json!({"$defs": bundle["$defs"], "$ref": "#/$defs/SendMessageRequest"}))
            .is_valid(&payload_value)
    );
    for (name, text) in [("AgentCard", card), ("SendMessageRequest", payload)] {
        let theirs =
            reference(&json!({"$defs": bundle["$defs"], "$ref": format!("#/$defs/{name}")}));
        let instance: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            mailseal::envelope::a2a_verdict(name, &text).map(|v| v.0),
            Some(theirs.is_valid(&instance)),
            "{name} fixture"
        );
    }
    for (name, schema) in EDGE {
        let fixture = match name {
            "capability-contract" => "contract",
            "execution-requirements" => "requirements",
            _ => "receipt",
        };
        let text = std::fs::read_to_string(format!(
            "{}/tests/data/edge-cloud/{fixture}.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let schema: Value = serde_json::from_str(schema).unwrap();
        let instance: Value = serde_json::from_str(&text).unwrap();
        assert!(reference(&schema).is_valid(&instance), "{name}");
        assert_eq!(
            mailseal::envelope::schema_verdict(&schema, &text),
            Ok(Some(true)),
            "{name}"
        );
    }
}

#[test]
fn every_edge_cloud_schema_gets_jsonschemas_verdict() {
    for (n, (name, schema)) in EDGE.iter().enumerate() {
        let schema: Value = serde_json::from_str(schema).unwrap();
        let theirs = reference(&schema);
        let defs = Map::new();
        let verdict = |text: &str| {
            mailseal::envelope::schema_verdict(&schema, text)
                .unwrap()
                .unwrap()
        };
        let count = 1500;
        let valid = agree_on_generated(
            &defs,
            &schema,
            count,
            100 + n as u64,
            &verdict,
            &theirs,
            name,
        );
        assert!(
            valid > count / 10 && valid < count * 9 / 10,
            "{name}: {valid} of {count}"
        );
    }
}

/// Keyword edge cases written by hand, each against jsonschema's verdict.
#[test]
fn keyword_edge_cases_get_jsonschemas_verdict() {
    let cases = [
        (
            json!({"type": "integer"}),
            vec![
                json!(1),
                json!(1.0),
                json!(1.5),
                json!(-0.0),
                json!(1e20),
                json!("1"),
            ],
        ),
        (
            json!({"type": ["string", "null"]}),
            vec![json!(null), json!("a"), json!(0)],
        ),
        (
            json!({"minimum": 0, "maximum": 10}),
            vec![
                json!(-0.0),
                json!(-1e-300),
                json!(10),
                json!(10.000001),
                json!("a"),
            ],
        ),
        (
            json!({"maximum": 9007199254740993u64}),
            vec![
                json!(9007199254740993u64),
                json!(9007199254740994u64),
                json!(9007199254740992.0),
                json!(9007199254740994.0),
            ],
        ),
        (
            json!({"minimum": -9223372036854775808i64}),
            vec![
                json!(-9223372036854775808i64),
                json!(-9223372036854775809.0),
                json!(-1e19),
            ],
        ),
        (
            json!({"enum": [1, "1", [1], {"a": 1}, null]}),
            vec![
                json!(1.0),
                json!("1"),
                json!([1.0]),
                json!({"a": 1.0}),
                json!(null),
                json!(false),
                json!([1, 1]),
            ],
        ),
        (
            json!({"const": 0}),
            vec![json!(0), json!(-0.0), json!(0.0), json!(false)],
        ),
        (
            json!({"uniqueItems": true}),
            vec![
                json!([1, 1.0]),
                json!([0, -0.0]),
                json!([{"a": 1, "b": 2}, {"b": 2, "a": 1}]),
                json!([[1], [1.0]]),
                json!(["a", "b"]),
                json!([1e20, 100000000000000000000u128 as f64]),
            ],
        ),
        (
            json!({"minLength": 2, "maxLength": 3}),
            vec![
                json!("é😀"),
                json!("😀"),
                json!("abcd"),
                json!("ab"),
                json!(5),
            ],
        ),
        (
            json!({"pattern": "^sha256:[0-9a-f]{64}$"}),
            vec![
                json!(format!("sha256:{}", "a".repeat(64))),
                json!(format!("sha256:{}\n", "a".repeat(64))),
                json!(7),
            ],
        ),
        (
            json!({"pattern": "[0-9]"}),
            vec![json!("a1b"), json!("abc"), json!("٣")],
        ),
        (
            json!({"additionalProperties": false, "properties": {"a": true}}),
            vec![json!({"a": 1}), json!({"b": 1}), json!([])],
        ),
        (
            json!({"required": ["a"]}),
            vec![json!({}), json!({"a": null}), json!([]), json!("a")],
        ),
        (
            json!({"items": {"type": "string"}, "minItems": 1, "maxItems": 2}),
            vec![
                json!([]),
                json!(["a"]),
                json!(["a", 1]),
                json!(["a", "b", "c"]),
                json!({}),
            ],
        ),
        (
            json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]}),
            vec![json!(1), json!(3), json!(2.5), json!("x")],
        ),
        (
            json!({"anyOf": [{"type": "integer"}, {"minimum": 2}]}),
            vec![json!(1), json!(2.5), json!(1.5)],
        ),
        (
            json!({"allOf": [{"type": "integer"}, {"minimum": 2}]}),
            vec![json!(1), json!(3), json!(2.5)],
        ),
        (
            json!({"format": "date-time", "contentEncoding": "base64", "deprecated": true}),
            vec![json!("not a date"), json!("!!")],
        ),
        (json!(false), vec![json!(null), json!({})]),
        (
            json!({"properties": {"a": false}}),
            vec![json!({"a": 1}), json!({"b": 1})],
        ),
    ];
    for (schema, instances) in cases {
        let theirs = reference(&schema);
        for instance in instances {
            let text = instance.to_string();
            assert_eq!(
                mailseal::envelope::schema_verdict(&schema, &text),
                Ok(Some(theirs.is_valid(&instance))),
                "{schema} on {text}"
            );
        }
    }
}
