//! One negative case per rule of MailA2A sections 4 to 8, run as data: each case is a
//! patch over a valid envelope and the one violation it must produce (code, path, A2A
//! error), nothing more and nothing less.

use crate::common;

use common::{request, violations_under, with};
use mailseal::envelope::{validate, Code, ValidationContext};
use mailseal::{A2aErrorType as A, Profile};
use serde_json::{json, Value};

struct Case {
    name: &'static str,
    base: fn() -> Value,
    patch: Value,
    profile: Option<Profile>,
    code: Code,
    path: &'static str,
    a2a: A,
}

fn response() -> Value {
    with(
        request(),
        json!({"kind": "response", "sequence": 1, "idempotencyKey": null,
               "payload": {"message": {"messageId": "m-2", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}}),
    )
}

fn error_reply() -> Value {
    with(
        request(),
        json!({"kind": "error", "sequence": 1, "idempotencyKey": null, "payload": {},
               "error": {"type": "TaskNotFoundError", "code": -32001, "message": "no such task"}}),
    )
}

/// An error reply whose error object is the SDKs' `{code, message}` without `type`.
fn untyped_error_reply() -> Value {
    let mut v = error_reply();
    v["error"] = json!({"code": -32001, "message": "no such task"});
    v
}

fn tasks_get() -> Value {
    with(
        request(),
        json!({"operation": "tasks/get", "idempotencyKey": null, "payload": {"id": "task-1"}}),
    )
}

fn case(
    name: &'static str,
    base: fn() -> Value,
    patch: Value,
    code: Code,
    path: &'static str,
    a2a: A,
) -> Case {
    Case {
        name,
        base,
        patch,
        profile: None,
        code,
        path,
        a2a,
    }
}

fn cases() -> Vec<Case> {
    use Code::*;
    let mut v = vec![
        // 4.2 versions
        case(
            "binding version 2.0",
            request,
            json!({"bindingVersion": "2.0"}),
            UnsupportedBindingVersion,
            "/bindingVersion",
            A::VersionNotSupportedError,
        ),
        case(
            "binding version absent",
            request,
            json!({"bindingVersion": null}),
            UnsupportedBindingVersion,
            "/bindingVersion",
            A::VersionNotSupportedError,
        ),
        case(
            "binding version as number",
            request,
            json!({"bindingVersion": 1.0}),
            UnsupportedBindingVersion,
            "/bindingVersion",
            A::VersionNotSupportedError,
        ),
        case(
            "a2aVersion absent",
            request,
            json!({"a2aVersion": null}),
            Required,
            "/a2aVersion",
            A::InvalidRequestError,
        ),
        case(
            "a2aVersion 0.3.0",
            request,
            json!({"a2aVersion": "0.3.0"}),
            UnsupportedA2aVersion,
            "/a2aVersion",
            A::VersionNotSupportedError,
        ),
        // 4.2 kind, operation, identifiers
        case(
            "unknown kind",
            request,
            json!({"kind": "notification"}),
            UnknownKind,
            "/kind",
            A::InvalidRequestError,
        ),
        case(
            "unknown operation",
            request,
            json!({"operation": "tasks/delete"}),
            UnknownOperation,
            "/operation",
            A::MethodNotFoundError,
        ),
        case(
            "empty messageId",
            request,
            json!({"messageId": ""}),
            Required,
            "/messageId",
            A::InvalidRequestError,
        ),
        case(
            "numeric messageId",
            request,
            json!({"messageId": 42}),
            MustBeString,
            "/messageId",
            A::InvalidRequestError,
        ),
        case(
            "empty correlationId",
            request,
            json!({"correlationId": ""}),
            MustBeString,
            "/correlationId",
            A::InvalidRequestError,
        ),
        case(
            "numeric taskId",
            tasks_get,
            json!({"taskId": 5}),
            MustBeString,
            "/taskId",
            A::InvalidRequestError,
        ),
        case(
            "object contextId",
            tasks_get,
            json!({"contextId": {}}),
            MustBeString,
            "/contextId",
            A::InvalidRequestError,
        ),
        // 4.2 timestamps
        case(
            "createdAt not a date",
            request,
            json!({"createdAt": "yesterday"}),
            MustBeTimestamp,
            "/createdAt",
            A::InvalidRequestError,
        ),
        case(
            "expiresAt not UTC",
            request,
            json!({"expiresAt": "2026-08-31T07:00:00+09:00"}),
            MustBeTimestamp,
            "/expiresAt",
            A::InvalidRequestError,
        ),
        case(
            "expiresAt before createdAt",
            request,
            json!({"createdAt": "2026-08-31T07:00:00Z", "expiresAt": "2026-08-30T07:00:00Z"}),
            ExpiresBeforeCreated,
            "/expiresAt",
            A::InvalidRequestError,
        ),
        // 4.2 payload shape and A2A v1.0 canonical form
        case(
            "payload absent",
            tasks_get,
            json!({"payload": null}),
            Required,
            "/payload",
            A::InvalidRequestError,
        ),
        case(
            "payload is a list",
            tasks_get,
            json!({"payload": []}),
            MustBeMap,
            "/payload",
            A::InvalidRequestError,
        ),
        case(
            "v0.3 text part",
            request,
            json!({"payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "hi"}]}}}),
            InvalidPayload,
            "/payload/message/parts/0",
            A::InvalidParamsError,
        ),
        case(
            "v0.3 role",
            request,
            json!({"payload": {"message": {"messageId": "m", "role": "user", "parts": [{"text": "hi"}]}}}),
            InvalidPayload,
            "/payload/message/role",
            A::InvalidParamsError,
        ),
        case(
            "v0.3 task state",
            response,
            json!({"payload": {"task": {"id": "t", "status": {"state": "completed"}}}}),
            InvalidPayload,
            "/payload/task/status/state",
            A::InvalidParamsError,
        ),
        case(
            "snake_case field",
            tasks_get,
            json!({"payload": {"id": "t", "history_length": 3}}),
            InvalidPayload,
            "/payload",
            A::InvalidParamsError,
        ),
        case(
            "push/delete success is empty",
            response,
            json!({"operation": "push/delete", "payload": {"id": "x"}}),
            InvalidPayload,
            "/payload",
            A::InvalidParamsError,
        ),
        // 6 sequence and finality
        case(
            "sequence negative",
            request,
            json!({"sequence": -1}),
            MustBeNatural,
            "/sequence",
            A::InvalidRequestError,
        ),
        case(
            "sequence as string",
            request,
            json!({"sequence": "0"}),
            MustBeNatural,
            "/sequence",
            A::InvalidRequestError,
        ),
        case(
            "sequence fractional",
            request,
            json!({"sequence": 0.5}),
            MustBeNatural,
            "/sequence",
            A::InvalidRequestError,
        ),
        case(
            "final as string",
            request,
            json!({"final": "no"}),
            MustBeBoolean,
            "/final",
            A::InvalidRequestError,
        ),
        case(
            "request not at zero",
            request,
            json!({"sequence": 1}),
            RequestMustStartAtZero,
            "/sequence",
            A::InvalidRequestError,
        ),
        case(
            "reply at zero",
            response,
            json!({"sequence": 0}),
            ReplyMustFollowRequest,
            "/sequence",
            A::InvalidRequestError,
        ),
        case(
            "final request",
            request,
            json!({"final": true}),
            RequestMustNotBeFinal,
            "/final",
            A::InvalidRequestError,
        ),
        case(
            "event without correlation",
            response,
            json!({"kind": "event", "correlationId": null, "payload": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}}),
            RequiredForReply,
            "/correlationId",
            A::InvalidRequestError,
        ),
        case(
            "canceled task not final",
            response,
            json!({"operation": "tasks/cancel", "payload": {"id": "t", "status": {"state": "TASK_STATE_CANCELED"}}}),
            TerminalStateMustBeFinal,
            "/final",
            A::InvalidRequestError,
        ),
        case(
            "rejected status update not final",
            response,
            json!({"kind": "event", "payload": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_REJECTED"}}}}),
            TerminalStateMustBeFinal,
            "/final",
            A::InvalidRequestError,
        ),
        // 7 idempotency and retries
        case(
            "cancel without idempotencyKey",
            tasks_get,
            json!({"operation": "tasks/cancel"}),
            RequiredForEffectfulOperation,
            "/idempotencyKey",
            A::InvalidRequestError,
        ),
        case(
            "push/create without idempotencyKey",
            tasks_get,
            json!({"operation": "push/create", "payload": {"url": "https://example.com/hook"}}),
            RequiredForEffectfulOperation,
            "/idempotencyKey",
            A::InvalidRequestError,
        ),
        case(
            "empty idempotencyKey",
            request,
            json!({"idempotencyKey": ""}),
            RequiredForEffectfulOperation,
            "/idempotencyKey",
            A::InvalidRequestError,
        ),
        case(
            "numeric idempotencyKey",
            tasks_get,
            json!({"idempotencyKey": 7}),
            MustBeString,
            "/idempotencyKey",
            A::InvalidRequestError,
        ),
        case(
            "retry negative",
            request,
            json!({"serviceParameters": {"retry": -1}}),
            MustBeNatural,
            "/serviceParameters/retry",
            A::InvalidRequestError,
        ),
        case(
            "serviceParameters not an object",
            request,
            json!({"serviceParameters": "x"}),
            MustBeMap,
            "/serviceParameters",
            A::InvalidRequestError,
        ),
        case(
            "A2A-Extensions not a list",
            request,
            json!({"serviceParameters": {"A2A-Extensions": "https://example.com/ext"}}),
            MustBeUriList,
            "/serviceParameters/A2A-Extensions",
            A::InvalidRequestError,
        ),
        case(
            "A2A-Version disagrees",
            request,
            json!({"serviceParameters": {"A2A-Version": "0.3"}}),
            A2aVersionMismatch,
            "/serviceParameters/A2A-Version",
            A::InvalidRequestError,
        ),
        // 10 errors
        case(
            "error kind without error",
            error_reply,
            json!({"error": null}),
            Required,
            "/error",
            A::InvalidRequestError,
        ),
        case(
            "error on a response",
            response,
            json!({"error": {"type": "TaskNotFoundError"}}),
            ErrorOnlyOnErrorKind,
            "/error",
            A::InvalidRequestError,
        ),
        case(
            "unknown error type",
            error_reply,
            json!({"error": {"type": "TeapotError"}}),
            UnknownErrorType,
            "/error/type",
            A::InvalidRequestError,
        ),
        case(
            "an error object with neither type nor code",
            untyped_error_reply,
            json!({"error": {"code": null}}),
            Required,
            "/error/type",
            A::InvalidRequestError,
        ),
        case(
            "an error object without type whose code is no A2A code",
            untyped_error_reply,
            json!({"error": {"code": -32099}}),
            Required,
            "/error/type",
            A::InvalidRequestError,
        ),
        case(
            "error code of another type",
            error_reply,
            json!({"error": {"type": "TaskNotFoundError", "code": -32002}}),
            ErrorCodeMismatch,
            "/error/code",
            A::InvalidRequestError,
        ),
        case(
            "PaymentRequiredError with a code",
            error_reply,
            json!({"error": {"type": "PaymentRequiredError", "code": -32600}, "payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 2, "accepts": []}}}),
            ErrorCodeMismatch,
            "/error/code",
            A::InvalidRequestError,
        ),
        case(
            "error message not a string",
            error_reply,
            json!({"error": {"type": "TaskNotFoundError", "message": 1}}),
            MustBeString,
            "/error/message",
            A::InvalidRequestError,
        ),
        // 8 payments
        case(
            "PaymentRequiredError without payment",
            error_reply,
            json!({"error": {"type": "PaymentRequiredError", "message": "pay"}}),
            Required,
            "/payment",
            A::InvalidRequestError,
        ),
        case(
            "unknown payment kind",
            request,
            json!({"payment": {"kind": "invoice", "x402Version": 2, "object": {}}}),
            UnknownPaymentKind,
            "/payment/kind",
            A::InvalidRequestError,
        ),
        case(
            "payment object not an object",
            request,
            json!({"payment": {"kind": "payload", "x402Version": 2, "object": "sig"}}),
            MustBeMap,
            "/payment/object",
            A::InvalidRequestError,
        ),
        case(
            "payment wrapper x402 v1",
            request,
            json!({"payment": {"kind": "payload", "x402Version": 1, "object": {"x402Version": 2}}}),
            MustBeX402V2,
            "/payment/x402Version",
            A::InvalidRequestError,
        ),
        case(
            "PaymentRequired object v1",
            error_reply,
            json!({"error": {"type": "PaymentRequiredError"}, "payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 1, "accepts": []}}}),
            X402ObjectVersionMismatch,
            "/payment/object/x402Version",
            A::InvalidRequestError,
        ),
        case(
            "required on a request",
            request,
            json!({"payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 2, "accepts": []}}}),
            PaymentKindMismatch,
            "/payment/kind",
            A::InvalidRequestError,
        ),
        case(
            "required on another error",
            error_reply,
            json!({"payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 2, "accepts": []}}}),
            PaymentKindMismatch,
            "/payment/kind",
            A::InvalidRequestError,
        ),
        case(
            "payload on a response",
            response,
            json!({"payment": {"kind": "payload", "x402Version": 2, "object": {"x402Version": 2}}}),
            PaymentKindMismatch,
            "/payment/kind",
            A::InvalidRequestError,
        ),
        case(
            "response on a request",
            request,
            json!({"payment": {"kind": "response", "x402Version": 2, "object": {"success": true}}}),
            PaymentKindMismatch,
            "/payment/kind",
            A::InvalidRequestError,
        ),
        // 9.3 groups
        case(
            "group outside MLS",
            request,
            json!({"group": {"id": "Z3JvdXA", "epoch": 1, "generation": 0}}),
            GroupRequiresMls,
            "/group",
            A::InvalidRequestError,
        ),
    ];
    let mls = |name, patch, code, path| Case {
        name,
        base: request,
        patch,
        profile: Some(Profile::Mls),
        code,
        path,
        a2a: A::InvalidRequestError,
    };
    v.push(mls(
        "group id padded",
        json!({"group": {"id": "Z3JvdXA=", "epoch": 1, "generation": 0}}),
        Code::MustBeBase64Url,
        "/group/id",
    ));
    v.push(mls(
        "group epoch negative",
        json!({"group": {"id": "Z3JvdXA", "epoch": -1, "generation": 0}}),
        Code::MustBeNatural,
        "/group/epoch",
    ));
    v.push(mls(
        "group generation absent",
        json!({"group": {"id": "Z3JvdXA", "epoch": 1}}),
        Code::MustBeNatural,
        "/group/generation",
    ));
    v.push(mls(
        "group without id",
        json!({"group": {"epoch": 1, "generation": 0}}),
        Code::Required,
        "/group/id",
    ));
    v.push(mls(
        "group not an object",
        json!({"group": "g"}),
        Code::MustBeMap,
        "/group",
    ));
    v
}

#[test]
fn every_negative_case_gives_exactly_its_violation() {
    let all = cases();
    assert!(all.len() >= 25);
    let mut failures = Vec::new();
    for c in &all {
        let doc = with((c.base)(), c.patch.clone());
        let got = match c.profile {
            Some(p) => violations_under(doc, p),
            None => validate(&common::env(doc), &ValidationContext::default()),
        };
        let ok = got.len() == 1
            && got[0].code == c.code
            && got[0].path == c.path
            && got[0].a2a_error() == c.a2a;
        if !ok {
            failures.push(format!(
                "{}: expected {} at {} ({}), got {:?}",
                c.name, c.code, c.path, c.a2a, got
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_bases_are_valid() {
    for base in [
        request,
        response,
        error_reply,
        untyped_error_reply,
        tasks_get,
    ] {
        assert_eq!(
            validate(&common::env(base()), &ValidationContext::default()),
            vec![]
        );
    }
}

#[test]
fn every_a2a_error_code_is_the_v1_table() {
    let table = [
        (A::InvalidRequestError, Some(-32600)),
        (A::MethodNotFoundError, Some(-32601)),
        (A::InvalidParamsError, Some(-32602)),
        (A::TaskNotFoundError, Some(-32001)),
        (A::TaskNotCancelableError, Some(-32002)),
        (A::PushNotificationNotSupportedError, Some(-32003)),
        (A::UnsupportedOperationError, Some(-32004)),
        (A::ContentTypeNotSupportedError, Some(-32005)),
        (A::InvalidAgentResponseError, Some(-32006)),
        (A::ExtendedAgentCardNotConfiguredError, Some(-32007)),
        (A::ExtensionSupportRequiredError, Some(-32008)),
        (A::VersionNotSupportedError, Some(-32009)),
        (A::PaymentRequiredError, None),
    ];
    for (t, code) in table {
        assert_eq!(t.code(), code, "{t}");
        assert_eq!(A::from_name(t.name()), Some(t));
    }
    assert_eq!(
        A::TaskNotFoundError.to_error_object("gone"),
        json!({"type": "TaskNotFoundError", "code": -32001, "message": "gone"})
    );
}

/// Issue #60: the A2A SDKs' standard JSON-RPC error object `{code, message, data}`
/// names its type by its A2A code alone: valid for every coded type (A2A v1.0 section
/// 10 asks for "an A2A error object"); the payment error, which has no code, still
/// names its type.
#[test]
fn an_sdk_error_object_without_type_is_its_codes_type() {
    for t in A::ALL {
        let Some(code) = t.code() else { continue };
        let mut doc = error_reply();
        doc["error"] =
            json!({"code": code, "message": "from the SDK", "data": {"detail": [1, 2, 3]}});
        assert_eq!(
            validate(&common::env(doc), &ValidationContext::default()),
            vec![],
            "{t}"
        );
        assert_eq!(A::from_code(i64::from(code)), Some(t));
    }
    assert_eq!(A::from_code(-32099), None);
}

/// Issue #60: a Task's `history` repeats earlier messages, whose `cid:` parts went
/// with them, and a DataPart's `data` (and any `metadata`) is opaque JSON: `cid:`
/// references there are not this message's parts and are not checked. One in this
/// message's own parts still must name a part.
#[test]
fn cid_references_are_checked_only_in_this_messages_own_parts() {
    use mailseal::message::MailA2aMessage;
    let task = json!({"id": "t-1", "contextId": "c-1",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "history": [{"messageId": "m-0", "role": "ROLE_USER",
            "parts": [{"url": "cid:earlier@x", "mediaType": "text/csv"}]}],
        "artifacts": [{"artifactId": "a-1", "parts": [
            {"data": {"url": "cid:not-a-part@x"}, "metadata": {"url": "cid:nor-this@x"}}]}]});
    let doc = with(
        request(),
        json!({"kind": "response", "operation": "tasks/get", "sequence": 1, "final": true,
               "idempotencyKey": null, "payload": task}),
    );
    let message = |doc: Value| {
        let mut m = MailA2aMessage::new("a@x.example", &["b@y.example"], common::env(doc));
        m.headers.in_reply_to = Some("request@x.example".into());
        m
    };
    let m = message(doc.clone());
    let parsed = MailA2aMessage::parse(&m.to_rfc5322().unwrap(), &Default::default()).unwrap();
    assert_eq!(parsed.check(&ValidationContext::default()), vec![]);
    // The same reference in an artifact part of this message is checked.
    let mut own = doc;
    own["payload"]["artifacts"][0]["parts"][0] =
        json!({"url": "cid:not-a-part@x", "mediaType": "text/csv"});
    let m = message(own);
    let parsed = MailA2aMessage::parse(&m.to_rfc5322().unwrap(), &Default::default()).unwrap();
    let v = parsed.check(&ValidationContext::default());
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].code, Code::InvalidContentId);
}
