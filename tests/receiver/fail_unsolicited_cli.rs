//! THREATS "Unsolicited answers", through the command line as the parties would run it,
//! each with its own store: Alice (the client) asks Bob; Mallory (carlos@, whose
//! certificate Alice's store trusts for his own mail) holds his own key and sends
//! whatever he likes. Only Bob's answer to Alice's request is delivered, once.

use crate::common;

use std::path::{Path, PathBuf};

use common::{fixture, mail_id, run};
use serde_json::{json, Value};

const ALICE: &str = "alice@smime.example";
const BOB: &str = "bob@smime.example";
const MALLORY: &str = "carlos@smime.example";

fn import(store: &Path, files: &[&str]) {
    for f in files {
        let path = fixture(&format!("rfc9216/{f}")).display().to_string();
        let o = run(
            &["key", "import", "--store", store.to_str().unwrap(), &path],
            b"",
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

struct World {
    _dir: tempfile::TempDir,
    alice: PathBuf,
    bob: PathBuf,
    mallory: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob, mallory) = (
        dir.path().join("alice"),
        dir.path().join("bob"),
        dir.path().join("mallory"),
    );
    import(
        &alice,
        &[
            "alice.sign.crt",
            "alice.sign.key",
            "bob.sign.crt",
            "carlos.sign.crt",
        ],
    );
    import(&bob, &["bob.sign.crt", "bob.sign.key", "alice.sign.crt"]);
    import(
        &mallory,
        &["carlos.sign.crt", "carlos.sign.key", "alice.sign.crt"],
    );
    World {
        _dir: dir,
        alice,
        bob,
        mallory,
    }
}

/// `compose` then `seal --sign-only` in `store`: the sealed bytes.
fn send(store: &Path, from: &str, to: &str, in_reply_to: Option<&str>, env: &Value) -> Vec<u8> {
    common::compose_and_sign(store, from, to, in_reply_to, env.to_string().as_bytes())
}

fn open(store: &Path, extra: &[&str], sealed: &[u8]) -> std::process::Output {
    let mut args = vec!["open", "--store", store.to_str().unwrap()];
    args.extend(extra);
    run(&args, sealed)
}

fn refused(o: &std::process::Output, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(o.stdout.is_empty(), "nothing reaches the agent");
    assert!(err.contains(what), "{err}");
}

fn request(corr: &str) -> Value {
    json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": format!("{corr}-q"), "correlationId": corr,
        "sequence": 0, "final": false, "idempotencyKey": format!("{corr}-k"),
        "payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "quote?"}]}}})
}

fn response(corr: &str, id: &str, patch: Value) -> Value {
    common::with(
        json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "response",
            "operation": "message/send", "messageId": id, "correlationId": corr,
            "sequence": 1, "final": true,
            "payload": {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "42"}]}}}),
        patch,
    )
}

#[test]
fn fail_unsolicited_answers_only_the_agent_asked_answers_once() {
    let w = world();
    let asked = send(&w.alice, ALICE, BOB, None, &request("corr-1"));
    let irt = mail_id(&asked);

    // Mallory answers Alice's exchange with a final, and then with a PaymentRequired
    // naming his own payTo: refused, though his signature is good for his address.
    let final_for_bob = send(
        &w.mallory,
        MALLORY,
        ALICE,
        Some(&irt),
        &response("corr-1", "m-final", json!({})),
    );
    refused(&open(&w.alice, &[], &final_for_bob), "unsolicited");
    let pay_me = send(
        &w.mallory,
        MALLORY,
        ALICE,
        Some(&irt),
        &response(
            "corr-1",
            "m-pay",
            json!({"kind": "error", "payload": {}, "error": {"type": "PaymentRequiredError",
                "message": "pay"}, "payment": {"kind": "required", "x402Version": 2,
                "object": {"x402Version": 2, "accepts": [{"scheme": "exact",
                "network": "eip155:8453", "amount": "10000", "asset": "0x0",
                "payTo": "0x000000000000000000000000000000000000dEaD", "maxTimeoutSeconds": 60}]}}}),
        ),
    );
    refused(&open(&w.alice, &[], &pay_me), "unsolicited");
    // A reply in an exchange Alice never started.
    let never = send(
        &w.mallory,
        MALLORY,
        ALICE,
        Some("<never-sent@smime.example>"),
        &response("corr-never", "m-never", json!({})),
    );
    refused(&open(&w.alice, &[], &never), "unsolicited");

    // Bob's answer stating its own retry counter: delivered once as the answer to
    // attempt 0, naming Bob; a second final (retry 77) is refused.
    let answer = send(
        &w.bob,
        BOB,
        ALICE,
        Some(&irt),
        &response(
            "corr-1",
            "b-final",
            json!({"serviceParameters": {"retry": 1}}),
        ),
    );
    let o = open(&w.alice, &[], &answer);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("b-final"));
    assert!(String::from_utf8_lossy(&o.stderr).contains(BOB));
    let extra = send(
        &w.bob,
        BOB,
        ALICE,
        Some(&irt),
        &response(
            "corr-1",
            "b-again",
            json!({"serviceParameters": {"retry": 77}}),
        ),
    );
    let o = open(&w.alice, &[], &extra);
    assert_eq!(
        o.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty());

    // A receiver that only receives may accept answers to no record, by name: then
    // Mallory's reply in an exchange nobody here started is judged by the stream
    // rules alone. An answer to a recorded request is still judged by the record.
    let o = open(&w.alice, &["--allow-unsolicited"], &never);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let late_mallory = send(
        &w.mallory,
        MALLORY,
        ALICE,
        Some(&irt),
        &response("corr-1", "m-final-2", json!({})),
    );
    refused(
        &open(&w.alice, &["--allow-unsolicited"], &late_mallory),
        "unsolicited",
    );
}

#[test]
fn fail_unsolicited_answers_after_our_request_expired() {
    let w = world();
    let mut req = request("corr-exp");
    req["createdAt"] = json!("2026-01-01T00:00:00Z");
    req["expiresAt"] = json!("2026-01-01T01:00:00Z");
    // Sealed "then": the clock of the sealing machine is not ours to set, but the
    // record keeps the request's own expiry.
    let asked = send(&w.alice, ALICE, BOB, None, &req);
    let answer = send(
        &w.bob,
        BOB,
        ALICE,
        Some(&mail_id(&asked)),
        &response("corr-exp", "b-late", json!({})),
    );
    refused(&open(&w.alice, &[], &answer), "expired");
}
