//! The payload check: the `payload` of each (operation, kind) against the A2A v1.0
//! message it must be.
//!
//! The schema is the strict JSON Schema bundle derived from `a2a-v1.0.1.proto`
//! (`schemas/`, see its PROVENANCE.md): canonical camelCase names, symbolic enums,
//! exactly-one oneofs and no unknown fields. That is what refuses v0.3 shapes such as
//! `{"kind":"text"}` parts or `"completed"` states, which a serde model would let
//! through. The bundle is compiled once, on first use (`super::schema`: the keywords
//! it uses, held to jsonschema by the tests and the `schema_diff` fuzz target).

use std::sync::OnceLock;

use super::borrowed::Value;
use super::model::{Kind, Operation};
use super::schema::Schema;

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

/// The bundle, compiled once for the process: every A2A message type is a `$defs` entry.
fn bundle() -> Option<&'static Schema> {
    static COMPILED: OnceLock<Option<Schema>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let doc: serde_json::Value = serde_json::from_str(BUNDLE).ok()?;
            Schema::compile(&doc).ok()
        })
        .as_ref()
}

/// Member names of the binding's own envelope objects (the envelope, `error`,
/// `payment`, `group`, `serviceParameters`).
const BINDING_NAMES: &[&str] = &[
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
    "type",
    "code",
    "message",
    "data",
    "x402Version",
    "object",
    "id",
    "epoch",
    "generation",
    "retry",
    "A2A-Extensions",
    "A2A-Version",
];

/// Whether `name` is a member name the binding or the A2A v1.0 schema defines: public,
/// so an error may show it. Any other name in a message is content (it may come from
/// inside an encrypted part, and be a secret): errors name that member by its place
/// (`#3`, the third member of its object), never by its name (issue #58).
pub(crate) fn is_public_name(name: &str) -> bool {
    static NAMES: OnceLock<std::collections::HashSet<String>> = OnceLock::new();
    if BINDING_NAMES.contains(&name) {
        return true;
    }
    let names = NAMES.get_or_init(|| {
        let mut names = std::collections::HashSet::new();
        if let Ok(doc) = serde_json::from_str::<serde_json::Value>(BUNDLE) {
            collect_property_names(&doc, &mut names);
        }
        names
    });
    names.contains(name)
}

/// Every name under a `properties` keyword of a schema document.
fn collect_property_names(v: &serde_json::Value, out: &mut std::collections::HashSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Object(props)) = m.get("properties") {
                out.extend(props.keys().cloned());
            }
            m.values().for_each(|c| collect_property_names(c, out));
        }
        serde_json::Value::Array(items) => {
            items.iter().for_each(|c| collect_property_names(c, out))
        }
        _ => {}
    }
}

/// How a pointer in an error names the member `name`, the `position`th (from 1) of its
/// object: by its name when it is public ([`is_public_name`]), else `#position`.
pub(crate) fn member_token(name: &str, position: usize) -> String {
    if is_public_name(name) {
        name.replace('~', "~0").replace('/', "~1")
    } else {
        format!("#{position}")
    }
}

/// The node of one A2A message type in the compiled bundle.
pub(crate) fn validator(name: &str) -> Option<(&'static Schema, usize)> {
    let bundle = bundle()?;
    Some((bundle, bundle.def(name)?))
}

/// Checks a payload; an empty list means it is the A2A message it must be.
pub(crate) fn check_payload(payload: Value<'_>, expect: Expect, limit: usize) -> Vec<PayloadFault> {
    match expect {
        Expect::AnyObject => Vec::new(),
        Expect::Empty => match payload.as_object() {
            Some(m) if m.is_empty() => Vec::new(),
            _ => vec![PayloadFault {
                pointer: String::new(),
                reason: "must be the empty object".into(),
            }],
        },
        Expect::Message(name) => match validator(name) {
            // The common case, a valid payload, takes the fast path without error reports.
            Some((schema, node)) if schema.is_valid(node, payload) => Vec::new(),
            Some((schema, node)) => schema
                .faults(node, payload, limit)
                .into_iter()
                .map(|f| PayloadFault {
                    pointer: f.pointer,
                    reason: format!("not a valid A2A v1.0 {name}: {}", f.reason),
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
    use super::super::borrowed::Tree;
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
            Tree::parse(&v03).unwrap().root(),
            Expect::Message("SendMessageRequest"),
            10,
        );
        assert!(!faults.is_empty());
        let v10 = serde_json::json!({"message": {"messageId": "m", "role": "ROLE_USER",
            "parts": [{"text": "hi"}]}});
        assert_eq!(
            check_payload(
                Tree::parse(&v10.to_string()).unwrap().root(),
                Expect::Message("SendMessageRequest"),
                10
            ),
            vec![]
        );
    }
}
