//! Our JSON Schema validator (`src/envelope/schema.rs`) against jsonschema, the
//! reference it replaced: the first byte picks a schema (an A2A v1.0 message type of
//! the strict bundle, or an edge-cloud schema), the rest is the instance. Invariants:
//! whenever the instance is JSON, both give the same verdict; our quick verdict and our
//! fault list agree; nothing panics.
#![no_main]

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const BUNDLE: &str = include_str!("../../schemas/a2a-v1.0.1.strict.schema.json");
const EDGE: [&str; 3] = [
    include_str!("../../schemas/edge-cloud/capability-contract.schema.json"),
    include_str!("../../schemas/edge-cloud/execution-requirements.schema.json"),
    include_str!("../../schemas/edge-cloud/execution-receipt.schema.json"),
];

fn names() -> &'static Vec<String> {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let bundle: Value = serde_json::from_str(BUNDLE).unwrap();
        bundle["$defs"].as_object().unwrap().keys().cloned().collect()
    })
}

/// jsonschema's validator for schema `i`, compiled once.
fn reference(i: usize, schema: &Value) -> &'static jsonschema::Validator {
    static CACHE: OnceLock<Mutex<HashMap<usize, &'static jsonschema::Validator>>> =
        OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    cache
        .entry(i)
        .or_insert_with(|| Box::leak(Box::new(jsonschema::validator_for(schema).unwrap())))
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(instance) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let names = names();
    let i = usize::from(pick) % (names.len() + EDGE.len());
    if let Some(name) = names.get(i) {
        let bundle: &'static Value = {
            static B: OnceLock<Value> = OnceLock::new();
            B.get_or_init(|| serde_json::from_str(BUNDLE).unwrap())
        };
        let schema = json!({"$defs": bundle["$defs"], "$ref": format!("#/$defs/{name}")});
        let theirs = reference(i, &schema).is_valid(&instance);
        let (ours, faults) = mailseal::envelope::a2a_verdict(name, text)
            .expect("every text serde_json reads, ours reads");
        assert_eq!(ours, faults.is_empty(), "verdict and faults disagree");
        assert_eq!(ours, theirs, "{name}: jsonschema says {theirs}");
    } else {
        let schema: Value = serde_json::from_str(EDGE[i - names.len()]).unwrap();
        let theirs = reference(i, &schema).is_valid(&instance);
        let ours = mailseal::envelope::schema_verdict(&schema, text)
            .expect("the edge-cloud schemas compile")
            .expect("every text serde_json reads, ours reads");
        assert_eq!(ours, theirs, "edge-cloud schema {}: jsonschema says {theirs}", i - names.len());
    }
});
