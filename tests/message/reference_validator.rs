//! The MailA2A reference validator's 8 tests (16 assertions), over JSON.
//! Upstream: kotoba-lang/mail-a2a `test/mail_a2a/core_test.cljk`.

use crate::common;

use common::{codes, env, request, violations, violations_under, with};
use mailseal::envelope::{next_event, Code};
use mailseal::replay::Candidate;
use mailseal::{A2aErrorType, Profile};
use serde_json::json;

#[test]
fn t1_valid_request() {
    assert_eq!(violations(request()), vec![]);
}

/// The reference's own fixture has `parts: []`; in A2A v1.0 `Message.parts` is a
/// REQUIRED repeated field and so non-empty (§5.7): we report that payload precisely.
#[test]
fn t1b_empty_parts_is_invalid_a2a_v1() {
    let v = violations(with(
        request(),
        json!({"payload": {"message": {"messageId": "message-1", "role": "ROLE_USER", "parts": []}}}),
    ));
    assert_eq!(codes(&v), vec![Code::InvalidPayload]);
    assert_eq!(v[0].path, "/payload/message/parts");
    assert_eq!(v[0].a2a_error(), A2aErrorType::InvalidParamsError);
}

#[test]
fn t2_effectful_request_requires_idempotency() {
    let v = violations(with(request(), json!({"idempotencyKey": null})));
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].code, Code::RequiredForEffectfulOperation);
    assert_eq!(v[0].path, "/idempotencyKey");
    assert_eq!(v[0].code.as_str(), "required-for-effectful-operation");
}

#[test]
fn t3_replies_require_correlation() {
    let v = violations(with(
        request(),
        json!({"kind": "response", "sequence": 1, "correlationId": null}),
    ));
    assert!(codes(&v).contains(&Code::RequiredForReply), "{v:?}");
}

#[test]
fn t4_terminal_state_is_final() {
    let event = with(
        request(),
        json!({"kind": "event", "sequence": 2,
               "payload": {"task": {"id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}}}}),
    );
    let v = violations(event.clone());
    assert!(codes(&v).contains(&Code::TerminalStateMustBeFinal), "{v:?}");
    assert_eq!(violations(with(event, json!({"final": true}))), vec![]);
}

#[test]
fn t4b_terminal_state_in_a_v1_status_update_event() {
    let event = with(
        request(),
        json!({"kind": "event", "sequence": 2,
               "payload": {"statusUpdate": {"taskId": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_FAILED"}}}}),
    );
    assert_eq!(
        codes(&violations(event.clone())),
        vec![Code::TerminalStateMustBeFinal]
    );
    assert_eq!(violations(with(event, json!({"final": true}))), vec![]);
}

fn payment_required_reply() -> serde_json::Value {
    with(
        request(),
        json!({"kind": "error", "sequence": 1, "idempotencyKey": null, "payload": {},
               "error": {"type": "PaymentRequiredError", "message": "Payment is required."},
               "payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 2, "accepts": []}}}),
    )
}

#[test]
fn t5_payment_is_exactly_v2() {
    // x402 v2 PaymentRequired on the PaymentRequiredError reply is accepted.
    assert_eq!(violations(payment_required_reply()), vec![]);
    // An old payment wrapper is rejected (a retried request carrying a payload).
    let v = violations(with(
        request(),
        json!({"payment": {"kind": "payload", "x402Version": 1, "object": {"x402Version": 2}}}),
    ));
    assert!(codes(&v).contains(&Code::MustBeX402V2), "{v:?}");
    // PaymentPayload keeps its own x402Version 2.
    let v = violations(with(
        request(),
        json!({"payment": {"kind": "payload", "x402Version": 2, "object": {"x402Version": 1}}}),
    ));
    assert!(
        codes(&v).contains(&Code::X402ObjectVersionMismatch),
        "{v:?}"
    );
    // SettlementResponse stays exact and gains no invented field, on a response.
    let response = with(
        request(),
        json!({"kind": "response", "sequence": 1, "idempotencyKey": null,
               "payload": {"message": {"messageId": "m-2", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}},
               "payment": {"kind": "response", "x402Version": 2,
                           "object": {"success": true, "transaction": "0xabc", "network": "eip155:8453"}}}),
    );
    assert_eq!(violations(response), vec![]);
}

#[test]
fn t6_groups_require_mls() {
    let grouped = with(
        request(),
        json!({"group": {"id": "group-1", "epoch": 7, "generation": 3}}),
    );
    assert!(codes(&violations(grouped.clone())).contains(&Code::GroupRequiresMls));
    assert!(
        codes(&violations_under(grouped.clone(), Profile::Smime)).contains(&Code::GroupRequiresMls)
    );
    assert_eq!(violations_under(grouped, Profile::Mls), vec![]);
}

#[test]
fn t7_event_ordering() {
    let e1 = with(request(), json!({"kind": "event", "sequence": 1}));
    let e2 = with(
        e1.clone(),
        json!({"messageId": "urn:uuid:event-2", "sequence": 2}),
    );
    assert!(next_event(&env(e1.clone()), &env(e2.clone())));
    assert!(!next_event(
        &env(e1.clone()),
        &env(with(e2.clone(), json!({"sequence": 3})))
    ));
    assert!(!next_event(
        &env(with(e1.clone(), json!({"final": true}))),
        &env(e2.clone())
    ));
    assert!(!next_event(
        &env(e1),
        &env(with(e2, json!({"correlationId": "other"})))
    ));
}

#[test]
fn t8_replay_key_keeps_authority_and_content() {
    let e = env(request());
    let bytes = e.to_json();
    let key = Candidate::new("did:web:alice.example".into(), &e, &bytes).unwrap();
    assert_eq!(
        (
            key.signer.as_str(),
            key.message_id.as_str(),
            key.idempotency_key.as_deref(),
            key.operation.as_str(),
            key.digest
        ),
        (
            "did:web:alice.example",
            "urn:uuid:request-1",
            Some("effect-1"),
            "message/send",
            mailseal::envelope::content_digest(&bytes)
        )
    );
}
