//! The summary shows every member the A2A v1.0 schema allows: for each message type
//! of the strict bundle (`schemas/a2a-v1.0.1.strict.schema.json`), an instance with
//! every property set (objects and arrays filled the same way, four levels down, free
//! `Struct`s given a member of their own) and every leaf a marker naming its path, as
//! the payload of a request whose envelope also sets every member of the MailA2A
//! envelope schema; each marker must be in the summary. A rendering that left out a
//! member, a type or a level would fail here.

use serde_json::{json, Map, Value};

use super::Summary;
use crate::offline::request::{Covers, SigningRequest};
use crate::profile::Profile;
use crate::{Envelope, Kind, MailA2aMessage, Operation};

static BUNDLE: &str = include_str!("../../../schemas/a2a-v1.0.1.strict.schema.json");
static ENVELOPE: &str = include_str!("../../../schemas/envelope-v1.schema.json");

/// The schema `s` points to, `$ref`s followed.
fn resolve<'a>(defs: &'a Map<String, Value>, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/$defs/")
            .and_then(|name| defs.get(name))
            .map_or(s, |d| resolve(defs, d)),
        None => s,
    }
}

/// An instance of `s` with everything set, leaves as `"mk:PATH"` markers (recorded).
fn instance(
    defs: &Map<String, Value>,
    s: &Value,
    path: &str,
    depth: usize,
    markers: &mut Vec<String>,
) -> Value {
    let s = resolve(defs, s);
    let leaf = |markers: &mut Vec<String>| {
        let m = format!("mk:{path}");
        markers.push(m.clone());
        Value::String(m)
    };
    if depth > 4 {
        return leaf(markers);
    }
    let ty = s.get("type").and_then(Value::as_str);
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let mut out = Map::new();
        for (name, p) in props {
            out.insert(
                name.clone(),
                instance(defs, p, &format!("{path}.{name}"), depth + 1, markers),
            );
        }
        return Value::Object(out);
    }
    match ty {
        Some("array") => {
            let items = s.get("items").cloned().unwrap_or(Value::Null);
            json!([instance(
                defs,
                &items,
                &format!("{path}[0]"),
                depth + 1,
                markers
            )])
        }
        Some("object") => {
            // A map (`additionalProperties` a schema) or a free Struct.
            let values = s
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .cloned()
                .unwrap_or(Value::Null);
            let mut out = Map::new();
            out.insert(
                "anyKey".into(),
                instance(defs, &values, &format!("{path}.anyKey"), depth + 1, markers),
            );
            Value::Object(out)
        }
        _ => leaf(markers),
    }
}

fn request_for(msg: &MailA2aMessage) -> SigningRequest {
    use base64::Engine;
    let entity = msg.to_inner_entity(false).expect("composes");
    SigningRequest {
        profile: Profile::Jws,
        signer: "0".repeat(64),
        signer_address: "alice@jws.example".into(),
        signing_key: None,
        signing_time: time::OffsetDateTime::UNIX_EPOCH,
        rsa_pss: false,
        outer_hints: false,
        boundary: String::new(),
        covers: Covers {
            from: "alice@jws.example".into(),
            to: vec!["bob@jws.example".into()],
            cc: Vec::new(),
            subject: None,
            date: String::new(),
            message_id: String::new(),
            in_reply_to: None,
            kind: "request".into(),
            operation: "message/send".into(),
            expires_at: None,
        },
        entity,
        to_be_signed: base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"alg":"EdDSA","mk":"mk:jws-header"}"#)
            .into_bytes(),
    }
}

#[test]
fn every_member_of_every_a2a_message_type_is_shown() {
    let bundle: Value = serde_json::from_str(BUNDLE).expect("bundle");
    let defs = bundle["$defs"].as_object().expect("$defs");
    let envelope_schema: Value = serde_json::from_str(ENVELOPE).expect("envelope schema");
    let mut walked = 0;
    for (name, def) in defs {
        if def.get("properties").is_none() {
            continue;
        }
        walked += 1;
        let mut markers = Vec::new();
        let payload = instance(defs, def, name, 0, &mut markers);
        let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "walk-1");
        // Every member of the envelope schema, the binding's own objects filled.
        for (member, s) in envelope_schema["properties"].as_object().expect("props") {
            if [
                "bindingVersion",
                "kind",
                "operation",
                "messageId",
                "payload",
            ]
            .contains(&member.as_str())
            {
                continue;
            }
            let v = instance(defs, s, &format!("envelope.{member}"), 1, &mut markers);
            env.set(member, &v);
        }
        env.set("notInTheSchema", &json!({"nested": ["mk:envelope.extra"]}));
        markers.push("mk:envelope.extra".into());
        env.set("payload", &payload);
        let msg = MailA2aMessage::new("alice@jws.example", &["bob@jws.example"], env);
        let request = request_for(&msg);
        let summary = Summary::of(&request, &request.fingerprint(), &msg);
        let text = super::render::flat(summary.text());
        for m in &markers {
            assert!(
                text.contains(&format!("\"{m}\"")),
                "{name}: {m} is not shown:\n{text}"
            );
        }
        // And each property's name, as the member it is.
        for prop in def["properties"].as_object().expect("props").keys() {
            assert!(text.contains(&format!("\"{prop}\": ")), "{name}.{prop}");
        }
        assert!(text.contains("\"mk:jws-header\""), "the JWS header in full");
    }
    assert_eq!(walked, 44, "the bundle's object types");
}
