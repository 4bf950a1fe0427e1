//! Structure-aware: sequences of validly signed messages through one `Receiver`, so
//! that the receiver rules (redeliveries, reused message ids and idempotency keys,
//! lifetimes and clock skew, stream order, held events and gaps, final events) meet
//! inputs a byte-level fuzzer cannot sign.
//!
//! The fuzzer's bytes are read through `arbitrary::Unstructured`: for each message,
//! its kind and operation, identifiers from small pools (so that they collide), a
//! sequence number, timestamps around the receiver's clock, and whether the caller
//! commits it. Each message is composed and signed by Alice (detached-jws, Ed25519:
//! fast and deterministic) with the library's `Sender`, then received by Bob.
//!
//! Between messages, Bob may send a request of his own (recorded in his state as his
//! `Sender` records it): to Alice or to someone else, in one of the correlations, at
//! an attempt, expiring around the clock. A reply is delivered only as the answer to
//! one of those.
//!
//! Invariants: no panic; a message previewed as delivered commits as delivered, and
//! its redelivery is a duplicate; a refused message is refused the same way when it
//! comes again (a refusal records nothing); a delivered reply answers a request Bob
//! recorded in its correlation, sent to Alice, not expired.
#![no_main]

use libfuzzer_sys::arbitrary::{Result as ArbitraryResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use mailseal::keystore::DirectoryStore;
use mailseal::receiver::Clock;
use mailseal::{Envelope, MailA2aMessage, Outcome, Profile, Receiver, SealOptions, Sender};
use serde_json::{json, Value};

const ALICE: &str = "alice@smime.example";
const BOB: &str = "bob@smime.example";
/// The receiver's clock: 2026-06-01T00:00:00Z.
const NOW: i64 = 1_780_272_000;
/// Alice's Ed25519 JWK (the conformance corpus's, from a fixed seed: public test
/// material).
const ALICE_JWK: &str = r#"{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","x":"IYXwRVLb-ndGtjiA7L5P3125b66bNjs843E5XinXGAI","d":"Z8oRgszFMQf3DfLNC14-qKI2Ew8TniqSH0Tiv7nC-Xs"}"#;

const OPERATIONS: [&str; 5] = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/subscribe",
];

/// Alice's store (her private JWK) and Bob's (her public key bound to her address,
/// and his own address).
struct Parties {
    _dir: tempfile::TempDir,
    alice: DirectoryStore,
    bob: DirectoryStore,
}

fn parties() -> Parties {
    let dir = tempfile::tempdir().expect("temp dir");
    let alice = DirectoryStore::open(dir.path().join("alice")).expect("store");
    let bob = DirectoryStore::open(dir.path().join("bob")).expect("store");
    let private = mailseal::jws::Jwk::parse(ALICE_JWK.as_bytes()).expect("JWK");
    mailseal::jws::jwk::bind(&alice, &private, &[ALICE.into()], "jwk").expect("bind");
    let mut public: Value = serde_json::from_str(ALICE_JWK).expect("JSON");
    public.as_object_mut().expect("object").remove("d");
    let public = mailseal::jws::Jwk::parse(public.to_string().as_bytes()).expect("JWK");
    mailseal::jws::jwk::bind(&bob, &public, &[ALICE.into()], "jwk").expect("bind");
    Parties {
        _dir: dir,
        alice,
        bob,
    }
}

thread_local! {
    static PARTIES: Parties = parties();
}

fn rfc3339(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// One message's envelope, from the fuzzer's choices.
fn envelope(u: &mut Unstructured<'_>) -> ArbitraryResult<(Value, Option<usize>, i64)> {
    let kind = *u.choose(&["request", "response", "event", "error"])?;
    let operation = *u.choose(&OPERATIONS)?;
    let message_id = u.int_in_range(0..=5u8)?;
    let correlation = u.int_in_range(0..=2u8)?;
    let created = NOW + i64::from(u.int_in_range(-3000..=300i16)?) * 60;
    let mut env = json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": kind,
        "operation": operation, "messageId": format!("msg-{message_id}"),
        "correlationId": format!("exchange-{correlation}"),
        "sequence": u.int_in_range(0..=6u8)?, "final": u.arbitrary::<bool>()?,
        "payload": {},
    });
    if u.arbitrary::<bool>()? {
        env["createdAt"] = json!(rfc3339(created));
    }
    if u.arbitrary::<bool>()? {
        let expires = created + i64::from(u.int_in_range(-60..=2880i16)?) * 60;
        env["expiresAt"] = json!(rfc3339(expires));
    }
    if u.arbitrary::<bool>()? {
        env["idempotencyKey"] = json!(format!("effect-{}", u.int_in_range(0..=2u8)?));
    }
    env["payload"] = match (kind, operation) {
        ("request", "message/send" | "message/stream") => json!({"message": {
            "messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Summarize."}]}}),
        ("request", _) => json!({"id": "task-1"}),
        ("event", _) => json!({"statusUpdate": {"taskId": "task-1", "contextId": "ctx-1",
            "status": {"state": "TASK_STATE_WORKING"}}}),
        ("error", _) => json!({}),
        _ => json!({"task": {"id": "task-1", "contextId": "ctx-1",
            "status": {"state": "TASK_STATE_COMPLETED"}}}),
    };
    if kind == "error" {
        env["error"] = json!({"type": "TaskNotFoundError", "code": -32001, "message": "no such task"});
    }
    // A reply names one of a few requests in its thread.
    let thread = (kind != "request").then_some(usize::from(correlation));
    Ok((env, thread, created))
}

/// Composes and signs one message; `None` when the fuzzer's envelope is one the
/// sender refuses to write.
fn sealed(alice: &DirectoryStore, env: &Value, thread: Option<usize>, date: i64) -> Option<Vec<u8>> {
    let envelope = Envelope::from_json(env.to_string().as_bytes()).ok()?;
    let mut msg = MailA2aMessage::new(ALICE, &[BOB], envelope);
    msg.headers.date = time::OffsetDateTime::from_unix_timestamp(date).ok();
    msg.headers.message_id = Some(format!("{}@smime.example", env["messageId"].as_str()?));
    if let Some(t) = thread {
        let request = mailseal::message::Headers {
            message_id: Some(format!("request-{t}@smime.example")),
            ..Default::default()
        };
        msg.in_reply_to(&request);
    }
    let mut options = SealOptions::new(Profile::Jws);
    options.signing_time = time::OffsetDateTime::from_unix_timestamp(date).ok();
    // Alice's own state: her Sender records the requests she sends.
    Sender::builder(alice)
        .clock(Clock::Fixed(NOW))
        .replay(mailseal::replay::MemoryReplayStore::default())
        .build()
        .seal(&msg, &options)
        .ok()
}

/// A request Bob sends, as his `Sender` records it.
fn bob_asks(u: &mut Unstructured<'_>) -> ArbitraryResult<mailseal::replay::SentRequest> {
    let correlation = u.int_in_range(0..=2u8)?;
    let to = if u.ratio(3, 4)? { ALICE } else { "carol@smime.example" };
    let mut env = json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": *u.choose(&OPERATIONS)?,
        "messageId": format!("bob-{}", u.int_in_range(0..=5u8)?),
        "correlationId": format!("exchange-{correlation}"), "sequence": 0, "final": false,
        "createdAt": rfc3339(NOW - 3600),
        "expiresAt": rfc3339(NOW + i64::from(u.int_in_range(-120..=120i16)?) * 60),
        "payload": {"id": "task-1"},
    });
    if u.arbitrary::<bool>()? {
        env["serviceParameters"] = json!({"retry": u.int_in_range(0..=2u8)?});
    }
    let envelope = Envelope::from_json(env.to_string().as_bytes())
        .map_err(|_| libfuzzer_sys::arbitrary::Error::IncorrectFormat)?;
    let mut msg = MailA2aMessage::new(BOB, &[to], envelope);
    msg.headers.message_id = Some(format!("request-{correlation}@smime.example"));
    mailseal::replay::SentRequest::of(
        &msg,
        None,
        NOW - 3600,
        &mailseal::replay::ReceiverPolicy::default(),
    )
    .ok_or(libfuzzer_sys::arbitrary::Error::IncorrectFormat)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    PARTIES.with(|p| {
        // Bob's store holds no key of his own (detached-jws is signed only): his
        // address is given, or every message is refused as not addressed to him.
        // Fresh state for every input, in memory (named: the store's own is durable).
        let mut receiver = Receiver::builder(&p.bob)
            .replay_in_memory()
            .our_addresses([BOB])
            .clock(Clock::Fixed(NOW))
            .build();
        // What Bob asked: (correlation, expiry, sent to Alice).
        let mut asked: Vec<(String, i64, bool)> = Vec::new();
        for _ in 0..8 {
            if u.ratio(1, 3).unwrap_or(false) {
                let Ok(record) = bob_asks(&mut u) else {
                    return;
                };
                // A record the state cannot take is skipped (none is refused now).
                if receiver.replay().record_request(&record).is_err() {
                    continue;
                }
                asked.push((
                    record.correlation_id.clone(),
                    record.expires_at,
                    record.recipients.iter().any(|r| r == ALICE),
                ));
                continue;
            }
            let Ok((env, thread, created)) = envelope(&mut u) else {
                return;
            };
            let commit = u.arbitrary::<bool>().unwrap_or(true);
            let Some(mail) = sealed(&p.alice, &env, thread, created) else {
                continue;
            };
            let (delivered, refused) = match receiver.receive(&mail) {
                Ok(incoming) => {
                    let delivered = matches!(incoming.outcome(), Outcome::Deliver { .. });
                    if delivered && env["kind"] != "request" {
                        let corr = env["correlationId"].as_str().unwrap_or_default();
                        assert!(
                            asked
                                .iter()
                                .any(|(c, exp, to_alice)| c == corr && *to_alice && NOW <= exp + 300),
                            "a reply in {corr} delivered, which Bob never asked of Alice"
                        );
                    }
                    if !commit {
                        continue;
                    }
                    let committed = incoming.commit();
                    if delivered {
                        let committed = committed.expect("a previewed delivery commits");
                        assert!(
                            matches!(committed, Outcome::Deliver { .. }),
                            "preview said deliver, commit said {}",
                            committed.word()
                        );
                    }
                    (delivered, None)
                }
                Err(e) => (false, Some(e.code())),
            };
            let again = receiver.receive(&mail);
            if delivered {
                let again = again.expect("delivered once, opens again");
                assert!(
                    matches!(again.outcome(), Outcome::Duplicate { .. }),
                    "a redelivery previewed as {}",
                    again.outcome().word()
                );
            } else if let Some(code) = refused {
                let code_again = again.err().map(|e| e.code());
                assert_eq!(
                    code_again.as_deref(),
                    Some(code.as_str()),
                    "refused as {code}, then not the same way"
                );
            }
        }
    });
});
