//! What the signed message makes happen, said first: whether its operation is one of
//! the design's effectful ones (`message/send`, `message/stream`, `tasks/cancel`,
//! `push/create`, `push/delete`, DESIGN decision 2) or carries a payment, and the
//! members that decide the effect, each with its place in the envelope: the task a
//! request acts on, where push notifications go and with which credentials, the
//! metadata the partner's agent reads, the amount, payee, asset and network of a
//! payment. These members are in the full envelope below as well; here they are
//! where the operator looks first.

use crate::envelope::borrowed::Value;
use crate::{Kind, Operation};

/// The member at `path` (names) under `v`.
fn at<'a>(v: Value<'a>, path: &[&str]) -> Option<Value<'a>> {
    path.iter().try_fold(v, |v, name| v.get(name))
}

/// The deciding members of a request's payload: (label, path under `payload`).
fn deciding(operation: Operation) -> &'static [(&'static str, &'static [&'static str])] {
    use Operation as Op;
    match operation {
        Op::MessageSend | Op::MessageStream => &[
            ("task id", &["message", "taskId"]),
            ("context id", &["message", "contextId"]),
            ("reference task ids", &["message", "referenceTaskIds"]),
            (
                "push URL",
                &["configuration", "taskPushNotificationConfig", "url"],
            ),
            (
                "push task id",
                &["configuration", "taskPushNotificationConfig", "taskId"],
            ),
            (
                "push token",
                &["configuration", "taskPushNotificationConfig", "token"],
            ),
            (
                "push authentication",
                &[
                    "configuration",
                    "taskPushNotificationConfig",
                    "authentication",
                ],
            ),
            ("message metadata", &["message", "metadata"]),
            ("request metadata", &["metadata"]),
            ("tenant", &["tenant"]),
        ],
        Op::TasksCancel => &[
            ("task id", &["id"]),
            ("metadata", &["metadata"]),
            ("tenant", &["tenant"]),
        ],
        Op::PushCreate => &[
            ("push URL", &["url"]),
            ("task id", &["taskId"]),
            ("push token", &["token"]),
            ("push authentication", &["authentication"]),
            ("config id", &["id"]),
            ("tenant", &["tenant"]),
        ],
        Op::PushDelete => &[
            ("task id", &["taskId"]),
            ("config id", &["id"]),
            ("tenant", &["tenant"]),
        ],
        _ => &[],
    }
}

/// The x402 members a payer acts on, and what the summary calls them.
const PAYMENT: [(&str, &str); 9] = [
    ("amount", "amount"),
    ("maxAmountRequired", "amount"),
    ("value", "amount"),
    ("payTo", "payee"),
    ("to", "payee"),
    ("from", "payer"),
    ("asset", "asset"),
    ("network", "network"),
    ("scheme", "scheme"),
];

/// The payment members of `v` (under `path`), depth first.
fn payment<'a>(v: Value<'a>, path: &str, out: &mut Vec<(String, String, Value<'a>)>) {
    if let Some(members) = v.as_object() {
        for (name, child) in members.iter() {
            let here = super::render::child_path(path, super::render::Key::Member(name), 0);
            let label = PAYMENT.iter().find(|(k, _)| *k == name).map(|(_, l)| *l);
            match label {
                Some(label) if child.as_object().is_none() && child.as_array().is_none() => {
                    out.push((label.to_string(), here, child))
                }
                _ => payment(child, &here, out),
            }
        }
    } else if let Some(items) = v.as_array() {
        for (i, item) in items.iter().enumerate() {
            payment(item, &format!("{path}[{i}]"), out);
        }
    }
}

/// The effect of an envelope: a headline, and the deciding members (label, path,
/// value) in the order the operator should read them.
pub(super) struct Effect<'a> {
    /// Whether signing makes the partner's agent act (or pay).
    pub effectful: bool,
    /// One line: what the message does.
    pub headline: String,
    /// (label, path, value).
    pub members: Vec<(String, String, Value<'a>)>,
}

/// The effect of `envelope` (the whole envelope's JSON).
pub(super) fn of(envelope: Value<'_>) -> Effect<'_> {
    let kind = envelope.get("kind").and_then(|k| k.as_str());
    let operation = envelope
        .get("operation")
        .and_then(|o| o.as_str())
        .and_then(|o| o.parse::<Operation>().ok());
    let request = kind == Some(Kind::Request.as_str());
    let mut members = Vec::new();
    if let (Some(op), true, Some(payload)) = (operation, request, envelope.get("payload")) {
        for (label, path) in deciding(op) {
            if let Some(v) = at(payload, path) {
                members.push((label.to_string(), format!("payload.{}", path.join(".")), v));
            }
        }
    }
    for (label, name) in [
        ("envelope task id", "taskId"),
        ("envelope context id", "contextId"),
        ("idempotency key", "idempotencyKey"),
        ("expires at", "expiresAt"),
    ] {
        if let Some(v) = envelope.get(name) {
            members.push((label.to_string(), name.to_string(), v));
        }
    }
    let pay = envelope.get("payment");
    if let Some(p) = pay {
        if let Some(k) = p.get("kind") {
            members.push(("payment step".into(), "payment.kind".into(), k));
        }
        if let Some(object) = p.get("object") {
            payment(object, "payment.object", &mut members);
        }
    }
    let effectful = (request && operation.is_some_and(Operation::is_effectful)) || pay.is_some();
    let what = match (kind, operation) {
        (Some(k), Some(op)) => format!("{} {} (A2A {})", op.as_str(), k, op.a2a_method()),
        _ => "an envelope without a known kind and operation".into(),
    };
    let headline = match (effectful, pay.is_some()) {
        (true, true) => format!("EFFECTFUL, WITH A PAYMENT: {what}"),
        (true, false) => format!("EFFECTFUL: {what}"),
        (false, _) => format!("no effect on its own: {what}"),
    };
    Effect {
        effectful,
        headline,
        members,
    }
}
