//! Attacker review of issue #56 (THREATS "Unsolicited answers"): one signer answers
//! each request of ours, on every replay backend.

use crate::common;
use crate::fail_unsolicited_answers::from;

use mailseal::message::Mailbox;
use mailseal::replay::{
    Admission, Candidate, ReceiverError, ReceiverPolicy, ReplayStore, SentRequest,
};
use serde_json::{json, Value};

const NOW: i64 = 1_796_000_000; // 2026-11-30T00:53:20Z
const CLIENT: &str = "alice@example.org";
const AGENT: &str = "bob@example.org";
const MALLORY: &str = "mallory@example.org";

fn corr(name: &str, tag: &str) -> String {
    format!("rv56-{tag}-{name}-{}", std::process::id())
}

/// Our request `id` of exchange `corr` (attempt 0), to `to`.
fn request(corr: &str, id: &str, to: &[&str]) -> mailseal::MailA2aMessage {
    let v = json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": id, "correlationId": corr,
        "sequence": 0, "final": false, "idempotencyKey": format!("key-{id}"),
        "createdAt": "2026-11-30T00:00:00Z", "expiresAt": "2026-11-30T02:00:00Z",
        "serviceParameters": {"retry": 0},
        "payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    });
    let mut m = mailseal::MailA2aMessage::new(CLIENT, &[AGENT], common::env(v));
    m.headers.to = to.iter().map(|a| Mailbox::new(a)).collect();
    m.headers.message_id = Some(format!("{id}@example.org"));
    m
}

fn record(s: &dyn ReplayStore, m: &mailseal::MailA2aMessage) {
    let sent = SentRequest::of(m, None, NOW - 60, &ReceiverPolicy::default()).unwrap();
    s.record_request(&sent).unwrap();
}

fn reply(corr: &str, id: &str, seq: u64, last: bool) -> Value {
    let mut v = json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "response",
        "operation": "message/send", "messageId": id, "correlationId": corr,
        "sequence": seq, "final": last,
        "payload": {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
    });
    if !last {
        v["kind"] = json!("event");
        v["payload"] = json!({"statusUpdate": {"taskId": "t", "contextId": "x",
            "status": {"state": "TASK_STATE_WORKING"}}});
    }
    v
}

fn admit(s: &dyn ReplayStore, c: &Candidate) -> Result<Admission, ReceiverError> {
    s.admit(c, NOW, &ReceiverPolicy::default())
}

fn delivered(r: &Result<Admission, ReceiverError>) -> bool {
    matches!(r, Ok(Admission::Deliver { .. }))
}

/// Our request qb to Bob, and qbm to Bob and Mallory, one exchange and attempt. Bob
/// starts his stream answering qb, then answers qbm (by its Message-ID) with a final
/// in the same stream. Bob has answered qbm; Mallory's final for qbm is a second
/// signer for one request. It is delivered: Bob's stream is labelled with the first
/// request it answered (qb) only, so qbm looks unanswered.
#[test]
fn fail_review_per_request_second_signer_after_a_shared_stream() {
    let (_d, stores) = common::replay_backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "shared");
        record(s, &request(&c, &format!("{c}-qb"), &[AGENT]));
        record(s, &request(&c, &format!("{c}-qbm"), &[AGENT, MALLORY]));
        let qb = format!("{c}-qb@example.org");
        let qbm = format!("{c}-qbm@example.org");
        let r = admit(
            s,
            &from(
                AGENT,
                "x509:bob",
                reply(&c, &format!("{c}-b1"), 1, false),
                Some(&qb),
            ),
        );
        assert!(delivered(&r), "{name}: {r:?}");
        let r = admit(
            s,
            &from(
                AGENT,
                "x509:bob",
                reply(&c, &format!("{c}-b2"), 2, true),
                Some(&qbm),
            ),
        );
        assert!(delivered(&r), "{name}: Bob answers qbm: {r:?}");
        let r = admit(
            s,
            &from(
                MALLORY,
                "x509:mallory",
                reply(&c, &format!("{c}-m1"), 1, true),
                Some(&qbm),
            ),
        );
        assert!(
            matches!(r, Err(ReceiverError::AnsweredByAnother { .. })),
            "{name}: Mallory's final for the request Bob answered: {r:?}"
        );
    }
}

/// Our two requests of one exchange and attempt, both to Bob. MailA2A section 6: one
/// correlation is one exchange, its replies one sequence with exactly one final, so
/// Bob answers both in one stream: his final for the first ends it, and an answer to
/// the second is refused as such (sequence reused, after the final), never delivered
/// as a second final; numbered on from the first, his answers to both are taken.
#[test]
fn fail_review_per_request_agent_addressed_twice_answers_in_one_stream() {
    let (_d, stores) = common::replay_backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "twice");
        record(s, &request(&c, &format!("{c}-q1"), &[AGENT]));
        record(s, &request(&c, &format!("{c}-q2"), &[AGENT]));
        let answer = |id: &str, seq: u64, last: bool, to: &str| {
            admit(
                s,
                &from(
                    AGENT,
                    "x509:bob",
                    reply(&c, &format!("{c}-{id}"), seq, last),
                    Some(&format!("{c}-{to}@example.org")),
                ),
            )
        };
        let r = answer("b1", 1, false, "q1");
        assert!(delivered(&r), "{name}: {r:?}");
        let r = answer("b2", 1, true, "q2");
        assert!(
            matches!(r, Err(ReceiverError::SequenceReused { .. })),
            "{name}: {r:?}"
        );
        let r = answer("b3", 2, true, "q2");
        assert!(delivered(&r), "{name}: {r:?}");
        let r = answer("b4", 3, true, "q1");
        assert!(
            matches!(r, Err(ReceiverError::AfterFinal { .. })),
            "{name}: {r:?}"
        );
    }
}

/// Control: Mallory, addressed by one request of the exchange, answers Bob's request
/// by its Message-ID, and without In-Reply-To after Bob's final: the first is
/// unsolicited, the second is taken as an answer to her own request only.
#[test]
fn fail_review_per_request_mallory_answers_bobs_request() {
    let (_d, stores) = common::replay_backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "mallory");
        record(s, &request(&c, &format!("{c}-qb"), &[AGENT]));
        record(s, &request(&c, &format!("{c}-qm"), &[MALLORY]));
        let qb = format!("{c}-qb@example.org");
        let r = admit(
            s,
            &from(
                MALLORY,
                "x509:mallory",
                reply(&c, &format!("{c}-m0"), 1, true),
                Some(&qb),
            ),
        );
        assert!(
            matches!(r, Err(ReceiverError::Unsolicited { .. })),
            "{name}: {r:?}"
        );
        let r = admit(
            s,
            &from(
                AGENT,
                "x509:bob",
                reply(&c, &format!("{c}-b1"), 1, true),
                None,
            ),
        );
        assert!(delivered(&r), "{name}: {r:?}");
        // Bob's address under another key, no In-Reply-To: still Bob's request.
        let r = admit(
            s,
            &from(
                AGENT,
                "openpgp:bob-2",
                reply(&c, &format!("{c}-b2"), 1, true),
                None,
            ),
        );
        assert!(
            matches!(r, Err(ReceiverError::AnsweredByAnother { .. })),
            "{name}: {r:?}"
        );
        let r = admit(
            s,
            &from(
                MALLORY,
                "x509:mallory",
                reply(&c, &format!("{c}-m1"), 1, true),
                None,
            ),
        );
        assert!(delivered(&r), "{name}: {r:?}");
        let streams = s.streams(Some(&c)).unwrap();
        assert_eq!(streams.len(), 2, "{name}: {streams:?}");
    }
}
