//! THREATS "Unsolicited answers" and "Stale members and state" (idempotency), against
//! the rules themselves on every state backend: the receiver delivers a response,
//! error or event only when it answers a request we recorded, from an agent that
//! request went to, before it expired, in the attempt we made (never the one the reply
//! states), one signer per attempt; a settlement only for a request that paid; an
//! idempotency key is the sender address's whatever key signs, and a retry after the
//! first request's lifetime is refused, never performed again.

use crate::common;

use mailseal::envelope::Envelope;
use mailseal::replay::{
    Admission, Candidate, ReceiverError, ReceiverPolicy, ReplayStore, SentRequest, Unsolicited,
};
use serde_json::{json, Value};

const NOW: i64 = 1_796_000_000; // 2026-11-30T00:53:20Z
const CLIENT: &str = "alice@example.org";
const AGENT: &str = "bob@example.org";
const MALLORY: &str = "mallory@example.org";

fn backends() -> (tempfile::TempDir, common::ReplayBackends) {
    common::replay_backends()
}

/// A unique correlation per backend and test: PostgreSQL is shared by every test.
fn corr(name: &str, tag: &str) -> String {
    format!("{tag}-{name}-{}", std::process::id())
}

/// The request we sent (the client's Sender records it so).
fn request(corr: &str, id: &str, retry: u64, payment: bool) -> mailseal::MailA2aMessage {
    let mut v = json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": id, "correlationId": corr,
        "sequence": 0, "final": false, "idempotencyKey": format!("key-{corr}"),
        "createdAt": "2026-11-30T00:00:00Z", "expiresAt": "2026-11-30T02:00:00Z",
        "serviceParameters": {"retry": retry},
        "payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    });
    if payment {
        v["payment"] = json!({"kind": "payload", "x402Version": 2,
            "object": {"x402Version": 2, "accepted": {}, "payload": {}}});
    }
    let mut m = mailseal::MailA2aMessage::new(CLIENT, &[AGENT], common::env(v));
    m.headers.message_id = Some(format!("{id}@example.org"));
    m
}

fn record(s: &dyn ReplayStore, m: &mailseal::MailA2aMessage, group: Option<&str>) {
    let sent = SentRequest::of(
        m,
        group.map(str::to_string),
        NOW - 60,
        &ReceiverPolicy::default(),
    )
    .unwrap();
    s.record_request(&sent).unwrap();
}

fn reply(corr: &str, id: &str, seq: u64, last: bool, patch: Value) -> Value {
    common::with(
        json!({
            "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "response",
            "operation": "message/send", "messageId": id, "correlationId": corr,
            "sequence": seq, "final": last,
            "payload": {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
        }),
        patch,
    )
}

/// A reply from `peer` (signed by `signer`), answering the mail `in_reply_to`.
pub(crate) fn from(peer: &str, signer: &str, v: Value, in_reply_to: Option<&str>) -> Candidate {
    let bytes = serde_json::to_vec(&v).unwrap();
    let env = Envelope::from_json(&bytes).unwrap();
    let mut c = Candidate::new(signer.to_string(), &env, &bytes).unwrap();
    c.peer = peer.to_string();
    c.in_reply_to = in_reply_to.map(str::to_string);
    c
}

fn admit(s: &dyn ReplayStore, c: &Candidate) -> Result<Admission, ReceiverError> {
    s.admit(c, NOW, &ReceiverPolicy::default())
}

fn delivered(r: Result<Admission, ReceiverError>) -> bool {
    matches!(r, Ok(Admission::Deliver { .. }))
}

#[test]
fn fail_unsolicited_answers_a_reply_in_an_exchange_we_never_started() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "never");
        let answer = from(
            AGENT,
            "x509:bob",
            reply(&c, &format!("{c}-r"), 1, true, json!({})),
            None,
        );
        let err = admit(s, &answer).unwrap_err();
        assert!(
            matches!(err, ReceiverError::Unsolicited { .. }),
            "{name}: {err}"
        );
        assert_eq!(err.code(), "rules.unsolicited");
        // A receiver that only receives accepts it by a policy it names.
        let accept = ReceiverPolicy {
            unsolicited: Unsolicited::Accept,
            ..ReceiverPolicy::default()
        };
        assert!(delivered(s.admit(&answer, NOW, &accept)), "{name}");
    }
}

#[test]
fn fail_unsolicited_answers_from_an_agent_we_did_not_ask() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "asked-bob");
        record(s, &request(&c, &format!("{c}-q"), 0, false), None);
        // Mallory, whose key the store trusts for her own address, answers for Bob:
        // a final, a PaymentRequired with her payTo, an event.
        for (i, patch) in [
            json!({}),
            json!({"kind": "error", "payload": {}, "error": {"type": "PaymentRequiredError",
                "message": "pay"}, "payment": {"kind": "required", "x402Version": 2,
                "object": {"x402Version": 2, "accepts": [{"payTo": "0xMALLORY"}]}}}),
        ]
        .into_iter()
        .enumerate()
        {
            let forged = from(
                MALLORY,
                "x509:mallory",
                reply(&c, &format!("{c}-m{i}"), 1, true, patch),
                Some(&format!("{c}-q@example.org")),
            );
            let err = admit(s, &forged).unwrap_err();
            assert!(
                matches!(err, ReceiverError::Unsolicited { .. }),
                "{name}: {err}"
            );
        }
        // Bob, asked, answers: delivered, and Mallory's tries left no trace.
        let genuine = from(
            AGENT,
            "x509:bob",
            reply(&c, &format!("{c}-b"), 1, true, json!({})),
            None,
        );
        assert!(delivered(admit(s, &genuine)), "{name}");
    }
}

#[test]
fn fail_unsolicited_answers_after_the_request_expired() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "late");
        record(s, &request(&c, &format!("{c}-q"), 0, false), None);
        let late = from(
            AGENT,
            "x509:bob",
            reply(&c, &format!("{c}-b"), 1, true, json!({})),
            None,
        );
        // The request expired at 02:00 (plus five minutes' skew).
        let err = s
            .admit(&late, NOW + 3 * 3600, &ReceiverPolicy::default())
            .unwrap_err();
        assert!(
            matches!(err, ReceiverError::AnswerTooLate { .. }),
            "{name}: {err}"
        );
        assert!(delivered(admit(s, &late)), "{name}");
    }
}

#[test]
fn fail_unsolicited_answers_the_attempt_is_ours_not_the_replys() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "attempt");
        record(s, &request(&c, &format!("{c}-q"), 0, false), None);
        // Bob's final states retry 1; then two more finals state 77 and 2: the
        // attempt is the one we made (0), whatever the reply says, so one final.
        let first = from(
            AGENT,
            "x509:bob",
            reply(
                &c,
                &format!("{c}-1"),
                1,
                true,
                json!({"serviceParameters": {"retry": 1}}),
            ),
            None,
        );
        assert!(delivered(admit(s, &first)), "{name}");
        for (i, retry) in [77, 2].into_iter().enumerate() {
            let extra = from(
                AGENT,
                "x509:bob",
                reply(
                    &c,
                    &format!("{c}-x{i}"),
                    1,
                    true,
                    json!({"serviceParameters": {"retry": retry}}),
                ),
                None,
            );
            let err = admit(s, &extra).unwrap_err();
            assert!(
                matches!(
                    err,
                    ReceiverError::SequenceReused { .. } | ReceiverError::AfterFinal { .. }
                ),
                "{name}: {err}"
            );
        }
        let streams = s.streams(Some(&c)).unwrap();
        assert_eq!(streams.len(), 1, "{name}: {streams:?}");
        assert_eq!(streams[0].attempt, 0, "{name}");
    }
}

#[test]
fn a_reply_belongs_to_the_attempt_its_in_reply_to_names() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "irt");
        record(s, &request(&c, &format!("{c}-q0"), 0, false), None);
        record(s, &request(&c, &format!("{c}-q1"), 1, true), None);
        // The PaymentRequired answers attempt 0 (named), the settlement attempt 1 (our
        // latest, which paid): each its own stream, each with its final.
        let required = from(
            AGENT,
            "x509:bob",
            reply(
                &c,
                &format!("{c}-pr"),
                1,
                true,
                json!({"kind": "error", "payload": {}, "error": {"type": "PaymentRequiredError",
                    "message": "pay"}, "payment": {"kind": "required", "x402Version": 2,
                    "object": {"x402Version": 2, "accepts": []}}}),
            ),
            Some(&format!("{c}-q0@example.org")),
        );
        assert!(delivered(admit(s, &required)), "{name}");
        let settled = from(
            AGENT,
            "x509:bob",
            reply(
                &c,
                &format!("{c}-ok"),
                1,
                true,
                json!({"payment": {"kind": "response", "x402Version": 2,
                    "object": {"success": true}}}),
            ),
            None,
        );
        assert!(delivered(admit(s, &settled)), "{name}");
        let mut attempts: Vec<u64> = s
            .streams(Some(&c))
            .unwrap()
            .iter()
            .map(|x| x.attempt)
            .collect();
        attempts.sort();
        assert_eq!(attempts, [0, 1], "{name}");
    }
}

#[test]
fn fail_unsolicited_answers_a_settlement_for_a_request_that_paid_nothing() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "settle");
        record(s, &request(&c, &format!("{c}-q"), 0, false), None);
        let settled = from(
            AGENT,
            "x509:bob",
            reply(
                &c,
                &format!("{c}-ok"),
                1,
                true,
                json!({"payment": {"kind": "response", "x402Version": 2,
                    "object": {"success": true}}}),
            ),
            None,
        );
        let err = admit(s, &settled).unwrap_err();
        assert!(
            matches!(err, ReceiverError::UnsolicitedSettlement { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn fail_unsolicited_answers_one_signer_per_attempt_even_in_a_group() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "group");
        record(
            s,
            &request(&c, &format!("{c}-q"), 0, false),
            Some("GROUP-A"),
        );
        // Any member of the group may answer (MLS authenticated it as one)...
        let mut carol = from(
            "carol@example.org",
            "mls:carol",
            reply(
                &c,
                &format!("{c}-c1"),
                1,
                false,
                json!({"kind": "event", "payload":
                {"statusUpdate": {"taskId": "t", "contextId": "x", "status": {"state": "TASK_STATE_WORKING"}}}}),
            ),
            None,
        );
        carol.group = Some("GROUP-A".into());
        assert!(delivered(admit(s, &carol)), "{name}");
        // ...but then she answers this attempt, and another member's final is refused.
        let mut dave = from(
            "dave@example.org",
            "mls:dave",
            reply(&c, &format!("{c}-d1"), 2, true, json!({})),
            None,
        );
        dave.group = Some("GROUP-A".into());
        let err = admit(s, &dave).unwrap_err();
        assert!(
            matches!(err, ReceiverError::AnsweredByAnother { .. }),
            "{name}: {err}"
        );
        // A member of another group is not a member of this one.
        let mut eve = from(
            "eve@example.org",
            "mls:eve",
            reply(&c, &format!("{c}-e1"), 2, true, json!({})),
            None,
        );
        eve.group = Some("GROUP-B".into());
        assert!(
            matches!(admit(s, &eve), Err(ReceiverError::Unsolicited { .. })),
            "{name}"
        );
    }
}

/// Two requests of one exchange and attempt, one to Bob and one to Carol: each is
/// answered by its own agent (the one-signer rule is per request, not per exchange),
/// while a second signer for Bob's request, even Bob's address under another key, is
/// refused, and Carol answering Bob's request by its Message-ID is unsolicited.
#[test]
fn fail_unsolicited_answers_one_signer_per_request_two_agents_in_one_exchange() {
    const CAROL: &str = "carol@example.org";
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "two-agents");
        record(s, &request(&c, &format!("{c}-qb"), 0, false), None);
        let mut to_carol = request(&c, &format!("{c}-qc"), 0, false);
        to_carol.headers.to = vec![mailseal::message::Mailbox::new(CAROL)];
        record(s, &to_carol, None);

        // Carol, by Message-ID, answers Bob's request: not hers to answer.
        let err = admit(
            s,
            &from(
                CAROL,
                "x509:carol",
                reply(&c, &format!("{c}-c0"), 1, true, json!({})),
                Some(&format!("{c}-qb@example.org")),
            ),
        )
        .unwrap_err();
        assert!(
            matches!(err, ReceiverError::Unsolicited { .. }),
            "{name}: {err}"
        );
        // Each answers its own: both finals delivered.
        let bob = from(
            AGENT,
            "x509:bob",
            reply(&c, &format!("{c}-b1"), 1, true, json!({})),
            Some(&format!("{c}-qb@example.org")),
        );
        assert!(delivered(admit(s, &bob)), "{name}");
        let carol = from(
            CAROL,
            "x509:carol",
            reply(&c, &format!("{c}-c1"), 1, true, json!({})),
            None,
        );
        assert!(
            delivered(admit(s, &carol)),
            "{name}: {:?}",
            admit(s, &carol)
        );
        // Bob's address under another key, answering his request again: a second
        // signer for one request.
        let err = admit(
            s,
            &from(
                AGENT,
                "openpgp:bob-other-key",
                reply(&c, &format!("{c}-b2"), 1, true, json!({})),
                Some(&format!("{c}-qb@example.org")),
            ),
        )
        .unwrap_err();
        assert!(
            matches!(err, ReceiverError::AnsweredByAnother { .. }),
            "{name}: {err}"
        );
        // Carol again: her stream ended with its final.
        let err = admit(
            s,
            &from(
                CAROL,
                "x509:carol",
                reply(&c, &format!("{c}-c2"), 2, true, json!({})),
                None,
            ),
        )
        .unwrap_err();
        assert!(
            matches!(err, ReceiverError::AfterFinal { .. }),
            "{name}: {err}"
        );
    }
}

fn incoming_request(corr: &str, id: &str, retry: u64, expires: &str) -> Value {
    json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": id, "correlationId": corr,
        "sequence": 0, "final": false, "idempotencyKey": format!("key-{corr}"),
        "createdAt": "2026-11-30T00:00:00Z", "expiresAt": expires,
        "serviceParameters": {"retry": retry},
        "payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "pay 5"}]}}
    })
}

#[test]
fn fail_stale_state_an_idempotency_key_is_the_senders_under_any_key_or_profile() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "idem");
        let first = from(
            CLIENT,
            "x509:alice-smime",
            incoming_request(&c, &format!("{c}-0"), 0, "2026-11-30T02:00:00Z"),
            None,
        );
        assert!(delivered(admit(s, &first)), "{name}");
        // The same request again, signed under OpenPGP by the same address: a retry.
        let again = from(
            CLIENT,
            "openpgp:alice",
            incoming_request(&c, &format!("{c}-1"), 1, "2026-11-30T02:00:00Z"),
            None,
        );
        assert_eq!(
            admit(s, &again).unwrap(),
            Admission::Deliver {
                retry_of: Some(format!("{c}-0")),
                released: 0
            },
            "{name}"
        );
        // Another address with the same key string is another operation.
        let other = from(
            MALLORY,
            "x509:mallory",
            incoming_request(&c, &format!("{c}-m"), 0, "2026-11-30T02:00:00Z"),
            None,
        );
        assert_eq!(
            admit(s, &other).unwrap(),
            Admission::Deliver {
                retry_of: None,
                released: 0
            },
            "{name}"
        );
    }
}

#[test]
fn fail_stale_state_a_retry_after_the_first_requests_lifetime_is_refused_not_performed() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "window");
        let first = from(
            CLIENT,
            "x509:alice",
            incoming_request(&c, &format!("{c}-0"), 0, "2026-11-30T02:00:00Z"),
            None,
        );
        assert!(delivered(admit(s, &first)), "{name}");
        // A day later, a retry with a fresh lifetime of its own: the first request's
        // window has closed, and its key is still remembered (30 days by default).
        let later = NOW + 24 * 3600;
        let retry = from(
            CLIENT,
            "x509:alice",
            incoming_request(&c, &format!("{c}-1"), 1, "2026-12-02T00:00:00Z"),
            None,
        );
        let err = s
            .admit(&retry, later, &ReceiverPolicy::default())
            .unwrap_err();
        assert!(
            matches!(err, ReceiverError::RetryTooLate { .. }),
            "{name}: {err}"
        );
    }
}

/// A payment retry of `incoming_request(corr, "{corr}-0", ...)` (`text` its payload's).
fn payment(corr: &str, id: &str, retry: u64, text: &str) -> Value {
    let mut v = incoming_request(corr, id, retry, "2026-11-30T02:00:00Z");
    v["payload"]["message"]["parts"][0]["text"] = json!(text);
    v["payment"] = json!({"kind": "payload", "x402Version": 2,
        "object": {"x402Version": 2, "accepted": {}, "payload": {"signature": "0x01"}}});
    v
}

#[test]
fn fail_unsolicited_answers_a_payment_is_the_one_retry_of_the_priced_request() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "x402");
        let priced = from(
            CLIENT,
            "x509:alice",
            incoming_request(&c, &format!("{c}-0"), 0, "2026-11-30T02:00:00Z"),
            None,
        );
        assert!(delivered(admit(s, &priced)), "{name}");
        s.record_payment_required(CLIENT, &c, None, NOW).unwrap();
        // Another payload, or no retry counter: not the priced request's retry.
        for (i, bad) in [
            payment(&c, "b1", 1, "pay 5000"),
            payment(&c, "b2", 0, "pay 5"),
        ]
        .into_iter()
        .enumerate()
        {
            let mut bad = bad;
            bad["messageId"] = json!(format!("{c}-bad{i}"));
            let err = admit(s, &from(CLIENT, "x509:alice", bad, None)).unwrap_err();
            assert!(
                matches!(err, ReceiverError::PaymentNotBound { .. }),
                "{name}: {err}"
            );
        }
        // A payload with a key the peer never used before.
        let mut fresh = payment(&c, &format!("{c}-f"), 1, "pay 5");
        fresh["idempotencyKey"] = json!("another-key");
        let err = admit(s, &from(CLIENT, "x509:alice", fresh, None)).unwrap_err();
        assert!(
            matches!(err, ReceiverError::PaymentNotBound { .. }),
            "{name}: {err}"
        );
        // The retry: accepted, once.
        let retry = from(
            CLIENT,
            "x509:alice",
            payment(&c, &format!("{c}-1"), 1, "pay 5"),
            None,
        );
        assert_eq!(
            admit(s, &retry).unwrap(),
            Admission::Deliver {
                retry_of: Some(format!("{c}-0")),
                released: 0
            },
            "{name}"
        );
        let twice = from(
            CLIENT,
            "x509:alice",
            payment(&c, &format!("{c}-2"), 2, "pay 5"),
            None,
        );
        let err = admit(s, &twice).unwrap_err();
        assert!(
            matches!(err, ReceiverError::PaymentNotBound { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn fail_unsolicited_answers_a_second_payment_required_in_one_exchange() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "pr2");
        record(s, &request(&c, &format!("{c}-q0"), 0, false), None);
        let required = |id: &str, irt: &str| {
            from(
                AGENT,
                "x509:bob",
                reply(
                    &c,
                    id,
                    1,
                    true,
                    json!({"kind": "error", "payload": {}, "error": {"type": "PaymentRequiredError",
                        "message": "pay"}, "payment": {"kind": "required", "x402Version": 2,
                        "object": {"x402Version": 2, "accepts": []}}}),
                ),
                Some(irt),
            )
        };
        assert!(
            delivered(admit(
                s,
                &required(&format!("{c}-pr1"), &format!("{c}-q0@example.org"))
            )),
            "{name}"
        );
        // Our paid retry, then a PaymentRequired answering it (the payment failed):
        // accepted. Another one naming the unpaid request: refused.
        record(s, &request(&c, &format!("{c}-q1"), 1, true), None);
        let again = required(&format!("{c}-pr2"), &format!("{c}-q0@example.org"));
        let err = admit(s, &again).unwrap_err();
        assert!(
            matches!(err, ReceiverError::PaymentRequiredAgain { .. }),
            "{name}: {err}"
        );
        assert!(
            delivered(admit(
                s,
                &required(&format!("{c}-pr3"), &format!("{c}-q1@example.org"))
            )),
            "{name}"
        );
    }
}

// What the attacker review found (each got through before it was fixed).

#[test]
fn fail_review_a_payment_spent_on_another_request_of_the_payer() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "spent");
        let other = corr(name, "spent-b");
        // Mallory's two requests: mA priced (its Message-ID named by our
        // PaymentRequired), mB with another key, in the same exchange and in another.
        let mut ma = from(
            MALLORY,
            "x509:mallory",
            incoming_request(&c, &format!("{c}-a"), 0, "2026-11-30T02:00:00Z"),
            None,
        );
        ma.mail_id = Some(format!("{c}-a@example.org"));
        assert!(delivered(admit(s, &ma)), "{name}");
        for (corr_b, id) in [(&c, "b-same"), (&other, "b-other")] {
            let mut v = incoming_request(corr_b, &format!("{c}-{id}"), 0, "2026-11-30T02:00:00Z");
            v["idempotencyKey"] = json!(format!("expensive-{id}-{c}"));
            v["payload"]["message"]["parts"][0]["text"] = json!("EXPENSIVE");
            assert!(
                delivered(admit(s, &from(MALLORY, "x509:mallory", v, None))),
                "{name}"
            );
        }
        s.record_payment_required(MALLORY, &c, Some(&format!("{c}-a@example.org")), NOW)
            .unwrap();
        for id in ["b-same", "b-other"] {
            let mut pay = payment(&c, &format!("{c}-pay-{id}"), 1, "EXPENSIVE");
            pay["idempotencyKey"] = json!(format!("expensive-{id}-{c}"));
            let err = admit(s, &from(MALLORY, "x509:mallory", pay, None)).unwrap_err();
            assert!(
                matches!(err, ReceiverError::PaymentNotBound { .. }),
                "{name} {id}: {err}"
            );
        }
        // The retry of mA itself is the payment.
        let mut pay = payment(&c, &format!("{c}-pay-a"), 1, "pay 5");
        pay["idempotencyKey"] = json!(format!("key-{c}"));
        assert!(
            delivered(admit(s, &from(MALLORY, "x509:mallory", pay, None))),
            "{name}"
        );
    }
}

#[test]
fn fail_review_a_reply_for_another_operation() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "op");
        record(s, &request(&c, &format!("{c}-q"), 0, false), None);
        let cancel = from(
            AGENT,
            "x509:bob",
            reply(
                &c,
                &format!("{c}-x"),
                1,
                true,
                json!({"operation": "tasks/cancel", "payload": {"id": "t1",
                    "status": {"state": "TASK_STATE_CANCELED"}}}),
            ),
            None,
        );
        let err = admit(s, &cancel).unwrap_err();
        assert!(
            matches!(err, ReceiverError::StreamMismatch { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn fail_review_an_unrecorded_stream_never_claims_a_recorded_exchange() {
    let (_d, stores) = backends();
    let accept = ReceiverPolicy {
        unsolicited: Unsolicited::Accept,
        ..ReceiverPolicy::default()
    };
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "guess");
        // Mallory guesses the correlation before we send: accepted as unrecorded.
        let early = from(
            MALLORY,
            "x509:mallory",
            reply(&c, &format!("{c}-m"), 1, false, json!({})),
            None,
        );
        assert!(delivered(s.admit(&early, NOW, &accept)), "{name}");
        record(s, &request(&c, &format!("{c}-q"), 0, false), None);
        let genuine = from(
            AGENT,
            "x509:bob",
            reply(&c, &format!("{c}-b"), 1, true, json!({})),
            None,
        );
        assert!(delivered(s.admit(&genuine, NOW, &accept)), "{name}");
    }
}

#[test]
fn fail_review_a_final_is_not_forgotten_while_its_request_is_on_record() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let c = corr(name, "prune");
        let mut m = request(&c, &format!("{c}-q"), 0, false);
        let mut env = m.envelope().clone();
        env.set("expiresAt", "2099-01-01T00:00:00Z");
        m.set_envelope(env);
        record(s, &m, None);
        // Bob's final, 20 days ago; then the stream is quiet and the store prunes.
        let then = NOW - 20 * 86_400;
        let first = from(
            AGENT,
            "x509:bob",
            reply(&c, &format!("{c}-1"), 1, true, json!({})),
            None,
        );
        assert!(
            delivered(s.admit(&first, then, &ReceiverPolicy::default())),
            "{name}"
        );
        let other = corr(name, "prune-trigger");
        let trigger = from(
            CLIENT,
            "x509:alice",
            incoming_request(&other, &format!("{other}-0"), 0, "2026-11-30T02:00:00Z"),
            None,
        );
        assert!(delivered(admit(s, &trigger)), "{name}");
        let second = from(
            AGENT,
            "x509:bob",
            reply(&c, &format!("{c}-2"), 2, true, json!({})),
            None,
        );
        let err = admit(s, &second).unwrap_err();
        assert!(
            matches!(err, ReceiverError::AfterFinal { .. }),
            "{name}: {err}"
        );
    }
}
