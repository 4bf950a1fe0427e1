//! Cross-check with the published envelope JSON Schema: every envelope the schema
//! rejects, mailseal's validator rejects too (the validator adds rules; it never drops
//! one of the schema's). Mutations of valid envelopes are run as data.

use crate::common;

use common::{request, with};
use mailseal::envelope::{validate, Envelope, ValidationContext};
use serde_json::{json, Value};

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/envelope-v1.schema.json"
    ))
    .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn bases() -> Vec<Value> {
    vec![
        request(),
        with(
            request(),
            json!({"kind": "response", "sequence": 1, "idempotencyKey": null,
            "payload": {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}},
            "payment": {"kind": "response", "x402Version": 2, "object": {"success": true}}}),
        ),
        with(
            request(),
            json!({"kind": "error", "sequence": 1, "payload": {}, "idempotencyKey": null,
            "error": {"type": "PaymentRequiredError"},
            "payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 2, "accepts": []}}}),
        ),
    ]
}

fn mutations() -> Vec<Value> {
    let odd: [Value; 7] = [
        json!(null),
        json!(-1),
        json!(1.5),
        json!("x"),
        json!(true),
        json!([]),
        json!({}),
    ];
    let fields = [
        "bindingVersion",
        "a2aVersion",
        "kind",
        "operation",
        "messageId",
        "correlationId",
        "taskId",
        "contextId",
        "sequence",
        "final",
        "createdAt",
        "expiresAt",
        "idempotencyKey",
        "serviceParameters",
        "payload",
        "error",
        "payment",
        "group",
    ];
    let mut out = Vec::new();
    for f in fields {
        for v in &odd {
            out.push(json!({ f: v }));
        }
    }
    for v in &odd {
        out.push(json!({"payment": {"kind": v, "x402Version": 2, "object": {}}}));
        out.push(json!({"payment": {"kind": "payload", "x402Version": v, "object": {}}}));
        out.push(json!({"payment": {"kind": "payload", "x402Version": 2, "object": v}}));
        out.push(json!({"group": {"id": v, "epoch": 1, "generation": 1}}));
        out.push(json!({"group": {"id": "g", "epoch": v, "generation": 1}}));
        out.push(json!({"group": {"id": "g", "epoch": 1, "generation": v}}));
    }
    out
}

#[test]
fn whatever_the_schema_rejects_is_rejected() {
    let schema = schema();
    let mut checked = 0;
    let mut disagreements = Vec::new();
    for base in bases() {
        assert!(schema.is_valid(&base), "base must be schema-valid: {base}");
        for m in mutations() {
            // `null` removes the field in `with`; also try it literally.
            for doc in [with(base.clone(), m.clone()), {
                let mut d = base.clone();
                for (k, v) in m.as_object().unwrap() {
                    d[k] = v.clone();
                }
                d
            }] {
                if schema.is_valid(&doc) {
                    continue;
                }
                checked += 1;
                let env = Envelope::from_json(doc.to_string().as_bytes()).unwrap();
                if validate(&env, &ValidationContext::new(Some(mailseal::Profile::Mls))).is_empty()
                {
                    disagreements.push(doc.to_string());
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} schema-invalid documents");
    assert!(
        disagreements.is_empty(),
        "schema rejects, we accept:\n{}",
        disagreements.join("\n")
    );
}
