//! THREATS "Replays and lost mail" and "Unsolicited answers" for a store that holds
//! several agents (a gateway's): each agent keeps its own replay tuples, idempotency
//! keys and streams, and takes only answers to requests it sent itself. A copy of a
//! message that one agent received already is still delivered to another it names
//! (a replay to one recipient never suppresses the genuine delivery to the other), and
//! an answer to Alice's request is no answer for Bob. State written for no agent in
//! particular (before agents were told apart) stays binding for every agent.

use mailseal::replay::{
    Admission, Candidate, ReceiverError, ReceiverPolicy, ReplayStore, SentRequest,
};
use serde_json::json;

use crate::common;
use crate::fail_unsolicited_answers::from;

const NOW: i64 = 1_796_000_000; // 2026-11-30T00:53:20Z
const ALICE: &str = "alice@ours.example";
const BOB: &str = "bob@ours.example";
const PEER: &str = "carol@partner.example";

fn corr(name: &str, tag: &str) -> String {
    format!("agents-{tag}-{name}-{}", std::process::id())
}

fn request_env(corr: &str, id: &str, key: &str) -> serde_json::Value {
    json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": id, "correlationId": corr,
        "sequence": 0, "final": false, "idempotencyKey": key,
        "createdAt": "2026-11-30T00:00:00Z", "expiresAt": "2026-11-30T02:00:00Z",
        "payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    })
}

fn event(corr: &str, id: &str, seq: u64, last: bool) -> serde_json::Value {
    json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "event",
        "operation": "message/stream", "messageId": id, "correlationId": corr,
        "sequence": seq, "final": last, "expiresAt": "2026-11-30T02:00:00Z",
        "payload": {"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"}}}
    })
}

fn for_agent(c: &Candidate, agent: Option<&str>) -> Candidate {
    let mut c = c.clone();
    c.agent = agent.map(str::to_string);
    c
}

fn admit(s: &dyn ReplayStore, c: &Candidate) -> Result<Admission, ReceiverError> {
    s.admit(c, NOW, &ReceiverPolicy::default())
}

fn is_deliver(r: &Result<Admission, ReceiverError>) -> bool {
    matches!(r, Ok(Admission::Deliver { retry_of: None, .. }))
}

fn is_duplicate(r: &Result<Admission, ReceiverError>) -> bool {
    matches!(r, Ok(Admission::Duplicate { .. }))
}

#[test]
fn a_copy_one_agent_received_is_still_delivered_to_another() {
    let (_d, stores) = common::replay_backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "copy");
        let m = from(
            PEER,
            "x509:carol",
            request_env(&c, &format!("{c}-1"), &format!("{c}-k")),
            None,
        );
        // The attacker's replay to Alice alone comes first.
        assert!(is_deliver(&admit(s, &for_agent(&m, Some(ALICE)))), "{name}");
        // The genuine copy: a duplicate for Alice, new for Bob (never a retry of
        // Alice's idempotency key), then a duplicate for both.
        assert!(
            is_duplicate(&admit(s, &for_agent(&m, Some(ALICE)))),
            "{name}"
        );
        let bob = admit(s, &for_agent(&m, Some(BOB)));
        assert!(is_deliver(&bob), "{name}: {bob:?}");
        assert!(is_duplicate(&admit(s, &for_agent(&m, Some(BOB)))), "{name}");
        // The agent's address is compared as an address: its case does not make a
        // new agent.
        assert!(
            is_duplicate(&admit(s, &for_agent(&m, Some("Bob@OURS.example")))),
            "{name}"
        );
    }
}

#[test]
fn fail_state_written_for_no_agent_binds_every_agent() {
    let (_d, stores) = common::replay_backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "legacy");
        let m = from(
            PEER,
            "x509:carol",
            request_env(&c, &format!("{c}-1"), &format!("{c}-k")),
            None,
        );
        assert!(is_deliver(&admit(s, &for_agent(&m, None))), "{name}");
        // Accepted before agents were told apart: a replay is a duplicate for each.
        for agent in [ALICE, BOB] {
            assert!(
                is_duplicate(&admit(s, &for_agent(&m, Some(agent)))),
                "{name}"
            );
        }
        // Another message with its idempotency key is a retry for each agent, not
        // a new operation.
        let retry = from(
            PEER,
            "x509:carol",
            request_env(&c, &format!("{c}-2"), &format!("{c}-k")),
            None,
        );
        for agent in [ALICE, BOB] {
            let r = admit(s, &for_agent(&retry, Some(agent)));
            assert!(
                matches!(&r, Ok(Admission::Deliver { retry_of: Some(first), .. }) if *first == format!("{c}-1")),
                "{name} {agent}: {r:?}"
            );
        }
        // The same messageId with other bytes is a conflict for every agent.
        let mut other = request_env(&c, &format!("{c}-1"), &format!("{c}-k"));
        other["payload"]["message"]["parts"][0]["text"] = json!("changed");
        let forged = from(PEER, "x509:carol", other, None);
        let r = admit(s, &for_agent(&forged, Some(BOB)));
        assert!(
            matches!(r, Err(ReceiverError::Conflict { .. })),
            "{name}: {r:?}"
        );
    }
}

#[test]
fn fail_an_answer_to_alices_request_is_no_answer_for_bob() {
    let (_d, stores) = common::replay_backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "asked");
        // Alice asked Carol.
        let mut q = mailseal::MailA2aMessage::new(
            ALICE,
            &[PEER],
            common::env(request_env(&c, &format!("{c}-q"), &format!("{c}-k"))),
        );
        q.headers.message_id = Some(format!("{c}-q@ours.example"));
        let sent = SentRequest::of(&q, None, NOW - 60, &ReceiverPolicy::default()).unwrap();
        s.record_request(&sent).unwrap();
        let answer = from(
            PEER,
            "x509:carol",
            json!({
                "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "response",
                "operation": "message/send", "messageId": format!("{c}-r"),
                "correlationId": c, "sequence": 1, "final": true,
                "payload": {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
            }),
            Some(&format!("{c}-q@ours.example")),
        );
        let r = admit(s, &for_agent(&answer, Some(BOB)));
        assert!(
            matches!(r, Err(ReceiverError::Unsolicited { .. })),
            "{name}: Bob took an answer to Alice's request: {r:?}"
        );
        assert!(
            is_deliver(&admit(s, &for_agent(&answer, Some(ALICE)))),
            "{name}"
        );
    }
}

#[test]
fn each_agent_keeps_its_own_stream() {
    let (_d, stores) = common::replay_backends();
    let accept = ReceiverPolicy {
        unsolicited: mailseal::replay::Unsolicited::Accept,
        ..ReceiverPolicy::default()
    };
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "stream");
        let e = |seq: u64, last: bool| {
            from(
                PEER,
                "x509:carol",
                event(&c, &format!("{c}-e{seq}"), seq, last),
                None,
            )
        };
        // Alice has event 1; Bob gets event 2 first: held for Bob alone.
        assert!(matches!(
            s.admit(&for_agent(&e(1, false), Some(ALICE)), NOW, &accept),
            Ok(Admission::Deliver { .. })
        ));
        let held = s.admit(&for_agent(&e(2, true), Some(BOB)), NOW, &accept);
        assert!(
            matches!(held, Ok(Admission::Held { ref missing }) if missing == &[1]),
            "{name}: {held:?}"
        );
        // Alice's event 2 completes Alice's stream; Bob's event 1 releases Bob's 2.
        assert!(matches!(
            s.admit(&for_agent(&e(2, true), Some(ALICE)), NOW, &accept),
            Ok(Admission::Deliver { released: 0, .. })
        ));
        let one = s.admit(&for_agent(&e(1, false), Some(BOB)), NOW, &accept);
        assert!(
            matches!(one, Ok(Admission::Deliver { released: 1, .. })),
            "{name}: {one:?}"
        );
        // The released event is Bob's: it says so, and nobody else's is taken.
        let taken = s.take_deliverable(&c).unwrap();
        assert_eq!(taken.len(), 1, "{name}");
        assert_eq!(taken[0].agent.as_deref(), Some(BOB), "{name}");
        assert_eq!(
            (taken[0].signer.as_str(), taken[0].sequence),
            ("unrecorded:x509:carol", 2)
        );
        let status = s.streams(Some(&c)).unwrap();
        let mut agents: Vec<_> = status.iter().map(|st| st.agent.clone()).collect();
        agents.sort();
        assert_eq!(
            agents,
            [Some(ALICE.to_string()), Some(BOB.to_string())],
            "{name}"
        );
        assert!(status.iter().all(|st| st.complete), "{name}: {status:?}");
    }
}
