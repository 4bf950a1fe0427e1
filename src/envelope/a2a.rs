//! The payload check: the `payload` of each (operation, kind) against the A2A v1.0
//! message it must be.
//!
//! The schema is the strict JSON Schema bundle derived from `a2a-v1.0.1.proto`
//! (`schemas/`, see its PROVENANCE.md): canonical camelCase names, symbolic enums,
//! exactly-one oneofs and no unknown fields. That is what refuses v0.3 shapes such as
//! `{"kind":"text"}` parts or `"completed"` states, which a serde model would let
//! through. Validators are compiled once per A2A message type, on first use.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::borrowed::{Borrowed, Value};
use super::model::{Kind, Operation};

static BUNDLE: &str = include_str!("../../schemas/a2a-v1.0.1.strict.schema.json");

/// What a payload must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// The A2A v1.0 message of that name (a `$defs` entry of the bundle).
    Message(&'static str),
    /// The empty object (`push/delete` success, proto `google.protobuf.Empty`).
    Empty,
    /// Any object (an error reply's payload is not an A2A message).
    AnyObject,
}

/// The A2A message the payload of `operation` carries in a message of `kind`.
pub(crate) fn expected(operation: Operation, kind: Kind) -> Expect {
    use Expect::*;
    use Operation as Op;
    match kind {
        Kind::Error => AnyObject,
        Kind::Request => Message(match operation {
            Op::MessageSend | Op::MessageStream => "SendMessageRequest",
            Op::TasksGet => "GetTaskRequest",
            Op::TasksList => "ListTasksRequest",
            Op::TasksCancel => "CancelTaskRequest",
            Op::TasksSubscribe => "SubscribeToTaskRequest",
            Op::PushCreate => "TaskPushNotificationConfig",
            Op::PushGet => "GetTaskPushNotificationConfigRequest",
            Op::PushList => "ListTaskPushNotificationConfigsRequest",
            Op::PushDelete => "DeleteTaskPushNotificationConfigRequest",
            Op::AgentCardGetExtended => "GetExtendedAgentCardRequest",
        }),
        // An event is one StreamResponse of whichever operation produces a stream
        // (message/stream, tasks/subscribe, and message/send answered by task events).
        Kind::Event => Message("StreamResponse"),
        Kind::Response => match operation {
            Op::MessageSend => Message("SendMessageResponse"),
            Op::MessageStream | Op::TasksSubscribe => Message("StreamResponse"),
            Op::TasksGet | Op::TasksCancel => Message("Task"),
            Op::TasksList => Message("ListTasksResponse"),
            Op::PushCreate | Op::PushGet => Message("TaskPushNotificationConfig"),
            Op::PushList => Message("ListTaskPushNotificationConfigsResponse"),
            Op::PushDelete => Empty,
            Op::AgentCardGetExtended => Message("AgentCard"),
        },
    }
}

/// One schema violation inside the payload: where, and why (the instance value is
/// masked: the payload may be decrypted content and must not reach logs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PayloadFault {
    pub pointer: String,
    pub reason: String,
}

fn bundle() -> Option<&'static serde_json::Value> {
    static PARSED: OnceLock<Option<serde_json::Value>> = OnceLock::new();
    PARSED
        .get_or_init(|| serde_json::from_str(BUNDLE).ok())
        .as_ref()
}

/// A validator of payloads read as [`Borrowed`] trees.
type Validator = jsonschema::Validator<Borrowed>;

type Cache = Mutex<HashMap<&'static str, &'static Validator>>;

/// The compiled validator of one A2A message type. Compiled validators live for the
/// process (there are at most 13 of them), so they are leaked into `'static` once.
pub(crate) fn validator(name: &'static str) -> Option<&'static Validator> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(v) = map.get(name) {
        return Some(*v);
    }
    let bundle = bundle()?;
    let schema = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": bundle.get("$defs")?,
        "$ref": format!("#/$defs/{name}"),
    });
    let compiled = jsonschema::options_for::<Borrowed>().build(&schema).ok()?;
    let leaked: &'static Validator = Box::leak(Box::new(compiled));
    map.insert(name, leaked);
    Some(leaked)
}

/// Checks a payload; an empty list means it is the A2A message it must be.
pub(crate) fn check_payload(
    payload: &Value<'_>,
    expect: Expect,
    limit: usize,
) -> Vec<PayloadFault> {
    match expect {
        Expect::AnyObject => Vec::new(),
        Expect::Empty => match payload {
            Value::Object(m) if m.is_empty() => Vec::new(),
            _ => vec![PayloadFault {
                pointer: String::new(),
                reason: "must be the empty object".into(),
            }],
        },
        Expect::Message(name) => match validator(name) {
            // The common case, a valid payload, takes the fast path without error reports.
            Some(v) if v.is_valid(payload) => Vec::new(),
            Some(v) => v
                .iter_errors(payload)
                .take(limit)
                .map(|e| PayloadFault {
                    pointer: e.instance_path().to_string(),
                    reason: format!("not a valid A2A v1.0 {name}: {}", e.masked()),
                })
                .collect(),
            None => vec![PayloadFault {
                pointer: String::new(),
                reason: format!("the A2A v1.0 schema for {name} could not be compiled"),
            }],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_expected_message_compiles() {
        for op in Operation::ALL {
            for kind in [Kind::Request, Kind::Response, Kind::Event, Kind::Error] {
                if let Expect::Message(name) = expected(op, kind) {
                    assert!(validator(name).is_some(), "{name} does not compile");
                }
            }
        }
    }

    #[test]
    fn v03_shapes_are_refused() {
        let v03 = serde_json::json!({"message": {"messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "hi"}]}});
        let v03 = v03.to_string();
        let faults = check_payload(
            &Value::parse(&v03).unwrap(),
            Expect::Message("SendMessageRequest"),
            10,
        );
        assert!(!faults.is_empty());
        let v10 = serde_json::json!({"message": {"messageId": "m", "role": "ROLE_USER",
            "parts": [{"text": "hi"}]}});
        assert_eq!(
            check_payload(
                &Value::parse(&v10.to_string()).unwrap(),
                Expect::Message("SendMessageRequest"),
                10
            ),
            vec![]
        );
    }
}
