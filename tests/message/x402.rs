//! The x402 v2 payment profile (MailA2A section 8): the published example and every
//! step of the flow keep their payment objects byte for byte through compose, seal
//! and open; the receiver accepts a `PaymentPayload` only from a peer it asked to pay
//! in that exchange; and each malformed payment gives its exact error.

use crate::common;

use std::path::Path;

use common::{codes, data, fixture, mail_id, run, violations, with};
use mailseal::envelope::Code;
use mailseal::message::{Limits, MailA2aMessage};
use serde_json::{json, Value};

const PAYMENT_REQUIRED: &str = r#"{"x402Version":2,"resource":{"url":"mid:request-1@smime.example","description":"Research task","mimeType":"application/a2a+json"},"accepts":[{"scheme":"exact","network":"eip155:8453","amount":"10000","asset":"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913","payTo":"0x209693Bc6afc0C5328bA36FaF03C514EF312287C","maxTimeoutSeconds":60,"extra":{"name":"USDC","version":"2"}}]}"#;
const PAYMENT_PAYLOAD: &str = r#"{"x402Version":2,"resource":{"url":"mid:request-1@smime.example"},"accepted":{"scheme":"exact","network":"eip155:8453","amount":"10000","asset":"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913","payTo":"0x209693Bc6afc0C5328bA36FaF03C514EF312287C","maxTimeoutSeconds":60},"payload":{"signature":"0x2d6a7588d6acca505cbf0d9a4a227e0c52c6c34008c8e8986a1283259764173608a2ce6496642e377d6da8dbbf5836e9bd15092f9ecab05ded3d6293af148b571c","authorization":{"from":"0x857b06519E91e3A54538791bDbb0E22373e36b66","to":"0x209693Bc6afc0C5328bA36FaF03C514EF312287C","value":"10000","validAfter":"1740672089","validBefore":"1740672154","nonce":"0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480"}}}"#;
const SETTLEMENT: &str = r#"{"success":true,"transaction":"0x1234567890abcdef","network":"eip155:8453","payer":"0x857b06519E91e3A54538791bDbb0E22373e36b66"}"#;

#[test]
fn the_published_payment_required_keeps_its_bytes() {
    let raw = std::fs::read(data("maila2a/payment-required.eml")).unwrap();
    let msg = MailA2aMessage::parse(&raw, &Limits::default()).unwrap();
    let text = String::from_utf8(msg.envelope_bytes().to_vec()).unwrap();
    let object = r#"{"x402Version":2,"resource":{"url":"mid:request-1@example.net","description":"Research task","mimeType":"application/a2a+json"},"accepts":[]}"#;
    assert!(text.contains(object));
    // Composed again and parsed back: the envelope, payment object included, is the
    // same bytes.
    let again = MailA2aMessage::parse(&msg.to_rfc5322().unwrap(), &Limits::default()).unwrap();
    assert_eq!(again.envelope_bytes(), msg.envelope_bytes());
    // The resource names the request by its Message-ID (RFC 2392).
    assert_eq!(
        mailseal::message::mid_url("<request-1@example.net>"),
        "mid:request-1@example.net"
    );
    assert!(codes(&violations(serde_json::from_str(&text).unwrap())).is_empty());
}

/// Stores for the client (Alice) and the agent (Bob), each with its own signing key,
/// the other's certificate and the RFC 9216 CA.
fn parties(dir: &Path) -> (String, String) {
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    let mut out = Vec::new();
    for (name, own, peer) in [("alice", "alice", "bob"), ("bob", "bob", "alice")] {
        let store = dir.join(name).display().to_string();
        for (f, trusted) in [
            (format!("{own}.sign.crt"), false),
            (format!("{own}.sign.key"), false),
            (format!("{peer}.sign.crt"), false),
            ("ca.rsa.crt".to_string(), true),
        ] {
            let mut args = vec!["key", "import", "--store", &store];
            if trusted {
                args.push("--trusted");
            }
            let path = k(&f);
            args.push(&path);
            let o = run(&args, b"");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        out.push(store);
    }
    (out.remove(0), out.remove(0))
}

/// `compose` then `seal --sign-only` by `from`'s store: the sealed bytes.
fn send(store: &str, from: &str, to: &str, reply_to: Option<&str>, envelope: &str) -> Vec<u8> {
    common::compose_and_sign(Path::new(store), from, to, reply_to, envelope.as_bytes())
}

fn receive(store: &str, sealed: &[u8]) -> std::process::Output {
    run(&["open", "--store", store], sealed)
}

fn request(id: &str, retry: Option<u64>, payment: Option<&str>) -> String {
    let mut v = json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": id, "correlationId": "exchange-1",
        "sequence": 0, "final": false, "idempotencyKey": "effect-1",
        "payload": {"message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": "research this"}]}}});
    if let Some(n) = retry {
        v["serviceParameters"] = json!({"retry": n});
    }
    let mut text = v.to_string();
    if let Some(p) = payment {
        text.pop();
        text.push_str(&format!(
            r#","payment":{{"kind":"payload","x402Version":2,"object":{p}}}}}"#
        ));
    }
    text
}

#[test]
fn every_step_of_the_flow_keeps_its_payment_object_and_unsolicited_payments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = parties(dir.path());
    let (a, b) = ("alice@smime.example", "bob@smime.example");

    // 1. Alice's request.
    let req = send(&alice, a, b, None, &request("request-1", None, None));
    let o = receive(&bob, &req);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // A payment nobody asked for: refused before Bob ever asked.
    let early = send(
        &alice,
        a,
        b,
        None,
        &request("request-early", Some(1), Some(PAYMENT_PAYLOAD)),
    );
    let o = receive(&bob, &early);
    assert_eq!(
        o.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("asked for none"));

    // 2. Bob asks for payment: a PaymentRequiredError with the exact PaymentRequired.
    let required = format!(
        r#"{{"bindingVersion":"1.0","a2aVersion":"1.0","kind":"error","operation":"message/send","messageId":"payment-required-1","correlationId":"exchange-1","sequence":1,"final":false,"payload":{{}},"error":{{"type":"PaymentRequiredError","message":"Payment is required for this task."}},"payment":{{"kind":"required","x402Version":2,"object":{PAYMENT_REQUIRED}}}}}"#
    );
    let err = send(&bob, b, a, Some(&mail_id(&req)), &required);
    let o = receive(&alice, &err);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(PAYMENT_REQUIRED));

    // 3. Alice retries with the exact PaymentPayload: same correlation and key, new
    //    messageId, retry 1. Bob accepts it and says it repeats request-1.
    let retry = send(
        &alice,
        a,
        b,
        None,
        &request("request-1-retry-1", Some(1), Some(PAYMENT_PAYLOAD)),
    );
    let o = receive(&bob, &retry);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(PAYMENT_PAYLOAD));
    assert!(String::from_utf8_lossy(&o.stderr).contains("retry of message request-1"));

    // A payment in another exchange Bob never priced: refused.
    let other =
        request("request-2", None, Some(PAYMENT_PAYLOAD)).replace("exchange-1", "exchange-2");
    let o = receive(&bob, &send(&alice, a, b, None, &other));
    assert_eq!(
        o.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // 4. Bob's response carries the exact SettlementResponse (no x402Version added).
    let response = format!(
        r#"{{"bindingVersion":"1.0","a2aVersion":"1.0","kind":"response","operation":"message/send","messageId":"response-1","correlationId":"exchange-1","sequence":1,"final":true,"serviceParameters":{{"retry":1}},"payload":{{"message":{{"messageId":"m-2","role":"ROLE_AGENT","parts":[{{"text":"done"}}]}}}},"payment":{{"kind":"response","x402Version":2,"object":{SETTLEMENT}}}}}"#
    );
    let resp = send(&bob, b, a, Some(&mail_id(&retry)), &response);
    let o = receive(&alice, &resp);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(SETTLEMENT));
}

fn payment_error(patch: Value) -> Value {
    with(
        json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "error",
            "operation": "message/send", "messageId": "pr-1", "correlationId": "exchange-1",
            "sequence": 1, "final": false, "payload": {},
            "error": {"type": "PaymentRequiredError", "message": "pay"},
            "payment": {"kind": "required", "x402Version": 2,
                "object": {"x402Version": 2, "resource": {"url": "mid:r@x"}, "accepts": []}}}),
        patch,
    )
}

fn payment_request(payment: Value) -> Value {
    with(common::request(), json!({"payment": payment}))
}

fn payment_response(payment: Value) -> Value {
    json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "response",
        "operation": "message/send", "messageId": "resp-1", "correlationId": "exchange-1",
        "sequence": 1, "final": true,
        "payload": {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}},
        "payment": payment})
}

#[test]
fn fail_each_malformed_payment_gives_its_exact_error() {
    let payload_obj = json!({"x402Version": 2, "accepted": {}, "payload": {}});
    let cases: Vec<(&str, Value, Code)> = vec![
        (
            "wrapper version 1",
            payment_error(json!({"payment": {"kind": "required", "x402Version": 1,
            "object": {"x402Version": 2, "accepts": []}}})),
            Code::MustBeX402V2,
        ),
        (
            "PaymentRequired version 1",
            payment_error(json!({"payment": {"kind": "required",
            "x402Version": 2, "object": {"x402Version": 1, "accepts": []}}})),
            Code::X402ObjectVersionMismatch,
        ),
        (
            "PaymentPayload without its version",
            payment_request(json!({"kind": "payload",
            "x402Version": 2, "object": {"accepted": {}, "payload": {}}})),
            Code::X402ObjectVersionMismatch,
        ),
        (
            "SettlementResponse with an added x402Version",
            payment_response(json!({"kind": "response",
            "x402Version": 2, "object": {"x402Version": 2, "success": true}})),
            Code::SettlementWithX402Version,
        ),
        (
            "required on a request",
            payment_request(json!({"kind": "required", "x402Version": 2,
            "object": {"x402Version": 2, "accepts": []}})),
            Code::PaymentKindMismatch,
        ),
        (
            "payload on a response",
            payment_response(json!({"kind": "payload", "x402Version": 2,
            "object": payload_obj.clone()})),
            Code::PaymentKindMismatch,
        ),
        (
            "response on a request",
            payment_request(json!({"kind": "response", "x402Version": 2,
            "object": {"success": true}})),
            Code::PaymentKindMismatch,
        ),
        (
            "required on another error type",
            payment_error(json!({"error": {"type": "TaskNotFoundError",
            "code": -32001, "message": "no"}})),
            Code::PaymentKindMismatch,
        ),
        (
            "PaymentRequiredError without payment",
            payment_error(json!({"payment": null})),
            Code::Required,
        ),
        (
            "unknown payment kind",
            payment_request(json!({"kind": "refund", "x402Version": 2,
            "object": {}})),
            Code::UnknownPaymentKind,
        ),
        (
            "payment not an object",
            payment_request(json!("pay me")),
            Code::MustBeMap,
        ),
        (
            "payment object not an object",
            payment_request(json!({"kind": "payload",
            "x402Version": 2, "object": [1]})),
            Code::MustBeMap,
        ),
    ];
    assert!(cases.len() >= 10);
    for (name, v, code) in cases {
        let got = codes(&violations(v));
        assert!(got.contains(&code), "{name}: {got:?}");
    }
    // And the well-formed steps pass.
    assert!(codes(&violations(payment_error(json!({})))).is_empty());
    assert!(codes(&violations(payment_request(
        json!({"kind": "payload", "x402Version": 2,
        "object": payload_obj})
    )))
    .is_empty());
    assert!(codes(&violations(payment_response(
        json!({"kind": "response", "x402Version": 2,
        "object": {"success": true}})
    )))
    .is_empty());
}

/// `mailseal compose` builds each step from the message it answers; sealed and
/// opened by the two parties, the receivers accept the flow and every x402 object
/// arrives byte for byte.
#[test]
fn compose_builds_every_step_and_the_flow_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (alice, bob) = parties(d);
    let (a, b) = ("alice@smime.example", "bob@smime.example");
    let path = |n: &str| d.join(n).display().to_string();
    let ok = |args: &[&str], stdin: &[u8]| {
        let o = run(args, stdin);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    };
    let seal_open = |from_store: &str, to_store: &str, plain: &str, inner: &str| {
        let sealed = ok(
            &[
                "seal",
                "--store",
                from_store,
                "--profile",
                "smime",
                "--sign-only",
                "--in",
                plain,
            ],
            b"",
        );
        let o = ok(
            &["open", "--store", to_store, "--eml", "--out", inner],
            &sealed.stdout,
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let envelope_of = |eml: &str| {
        let m = MailA2aMessage::parse(&std::fs::read(eml).unwrap(), &Limits::default()).unwrap();
        String::from_utf8(m.envelope_bytes().to_vec()).unwrap()
    };

    // The request, as Alice composes it and as Bob opens it.
    std::fs::write(path("request.json"), request("request-1", None, None)).unwrap();
    ok(
        &[
            "compose",
            "--from",
            a,
            "--to",
            b,
            "--in",
            &path("request.json"),
            "--out",
            &path("request.eml"),
        ],
        b"",
    );
    seal_open(&alice, &bob, &path("request.eml"), &path("bob-request.eml"));
    let request_id = MailA2aMessage::parse(
        &std::fs::read(path("request.eml")).unwrap(),
        &Limits::default(),
    )
    .unwrap()
    .headers
    .message_id
    .unwrap();

    // Step 1: Bob's PaymentRequired, its resource the request's mid: URL.
    let required = PAYMENT_REQUIRED.replace(
        "mid:request-1@smime.example",
        &mailseal::message::mid_url(&request_id),
    );
    std::fs::write(path("required.json"), format!("{required}\n")).unwrap();
    ok(
        &[
            "compose",
            "--payment-required",
            &path("required.json"),
            "--request",
            &path("bob-request.eml"),
            "--out",
            &path("required.eml"),
        ],
        b"",
    );
    seal_open(
        &bob,
        &alice,
        &path("required.eml"),
        &path("alice-required.eml"),
    );
    let env = envelope_of(&path("alice-required.eml"));
    assert!(
        env.contains(&format!(
            r#""payment":{{"kind":"required","x402Version":2,"object":{required}}}"#
        )),
        "{env}"
    );
    assert!(env.contains(r#""type":"PaymentRequiredError""#));
    assert!(env.contains(r#""correlationId":"exchange-1""#));

    // Step 2: Alice's paid retry of her request.
    std::fs::write(path("payload.json"), PAYMENT_PAYLOAD).unwrap();
    ok(
        &[
            "compose",
            "--payment-payload",
            &path("payload.json"),
            "--request",
            &path("request.eml"),
            "--after",
            &path("alice-required.eml"),
            "--out",
            &path("retry.eml"),
        ],
        b"",
    );
    let said = seal_open(&alice, &bob, &path("retry.eml"), &path("bob-retry.eml"));
    assert!(said.contains("retry of message request-1"), "{said}");
    let env = envelope_of(&path("bob-retry.eml"));
    assert!(
        env.contains(&format!(
            r#""payment":{{"kind":"payload","x402Version":2,"object":{PAYMENT_PAYLOAD}}}"#
        )),
        "{env}"
    );
    assert!(env.contains(r#""idempotencyKey":"effect-1""#));
    assert!(env.contains(r#""serviceParameters":{"retry":1}"#));
    assert!(
        !env.contains(r#""messageId":"request-1""#),
        "a new messageId"
    );

    // Step 3: Bob's response to the retry (its stream: retry 1) with the
    // SettlementResponse.
    let response = r#"{"bindingVersion":"1.0","a2aVersion":"1.0","kind":"response","operation":"message/send","messageId":"response-1","correlationId":"exchange-1","sequence":1,"final":true,"serviceParameters":{"retry":1},"payload":{"message":{"messageId":"m-2","role":"ROLE_AGENT","parts":[{"text":"done"}]}}}"#;
    std::fs::write(path("response.json"), response).unwrap();
    std::fs::write(path("settlement.json"), SETTLEMENT).unwrap();
    let retry_id = MailA2aMessage::parse(
        &std::fs::read(path("bob-retry.eml")).unwrap(),
        &Limits::default(),
    )
    .unwrap()
    .headers
    .message_id
    .unwrap();
    ok(
        &[
            "compose",
            "--from",
            b,
            "--to",
            a,
            "--in-reply-to",
            &retry_id,
            "--in",
            &path("response.json"),
            "--settlement",
            &path("settlement.json"),
            "--out",
            &path("response.eml"),
        ],
        b"",
    );
    seal_open(
        &bob,
        &alice,
        &path("response.eml"),
        &path("alice-response.eml"),
    );
    let env = envelope_of(&path("alice-response.eml"));
    assert!(
        env.contains(&format!(
            r#""payment":{{"kind":"response","x402Version":2,"object":{SETTLEMENT}}}"#
        )),
        "{env}"
    );

    // What each step refuses.
    let refused = |args: &[&str], why: &str| {
        let o = run(args, b"");
        assert_eq!(o.status.code(), Some(3), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(why),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    std::fs::write(
        path("other.json"),
        PAYMENT_REQUIRED.replace("request-1@smime", "other@smime"),
    )
    .unwrap();
    refused(
        &[
            "compose",
            "--payment-required",
            &path("other.json"),
            "--request",
            &path("bob-request.eml"),
        ],
        "but the request is mid:",
    );
    refused(
        &[
            "compose",
            "--payment-required",
            &path("required.json"),
            "--request",
            &path("alice-required.eml"),
        ],
        "answers a request",
    );
    std::fs::write(path("array.json"), "[1]").unwrap();
    refused(
        &[
            "compose",
            "--payment-payload",
            &path("array.json"),
            "--request",
            &path("request.eml"),
        ],
        "not an object",
    );
    refused(
        &[
            "compose",
            "--from",
            a,
            "--to",
            b,
            "--in",
            &path("request.json"),
            "--settlement",
            &path("settlement.json"),
        ],
        "goes on a response or event",
    );
}
