//! The library pipeline as a Rust caller uses it: `Receiver` is two-phase (nothing is
//! recorded until commit; dropped, every store is as before), and `Sender` refuses a
//! message the receiver could not accept before sealing it.

use crate::common;

use mailseal::keystore::DirectoryStore;
use mailseal::message::MailA2aMessage;
use mailseal::replay::SqliteReplayStore;
use mailseal::smime::Smime;
use mailseal::Identities;
use mailseal::{Outcome, Profile, Receiver, SealOptions, Sealer, SendError, Sender};
use serde_json::json;

fn signed_request(alice: &DirectoryStore, id: &str) -> Vec<u8> {
    let v = common::with(
        common::request(),
        json!({"messageId": id, "idempotencyKey": format!("effect-{id}")}),
    );
    let msg = MailA2aMessage::new(
        "alice@smime.example",
        &["bob@smime.example"],
        common::env(v),
    );
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    Smime::new(alice).seal(&msg, &opts).unwrap()
}

#[test]
fn nothing_is_recorded_until_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob_dir) = common::alice_signs_for_bob(dir.path());
    let bob = DirectoryStore::open(&bob_dir).unwrap();
    let state = SqliteReplayStore::open(&dir.path().join("state.db")).unwrap();
    let raw = signed_request(&alice, "two-phase-1");
    let mut receiver = Receiver::builder(&bob).replay_ref(&state).build();

    // Received three times and dropped: each time it would be delivered.
    for _ in 0..3 {
        let incoming = receiver.receive(&raw).unwrap();
        assert!(matches!(incoming.outcome(), Outcome::Deliver { .. }));
        drop(incoming);
    }
    // Committed once: delivered; then it is a duplicate, also in another receiver
    // over the same state.
    let first = receiver.receive(&raw).unwrap().commit().unwrap();
    let Outcome::Deliver { delivery, .. } = &first else {
        panic!("{first:?}")
    };
    assert_eq!(delivery.candidate.message_id, "two-phase-1");
    assert!(
        delivery.candidate.signer.starts_with("x509:"),
        "{}",
        delivery.candidate.signer
    );
    assert_eq!(
        delivery.opened.message.sender().as_deref(),
        Some("alice@smime.example")
    );
    let again = receiver.receive(&raw).unwrap();
    assert!(matches!(again.outcome(), Outcome::Duplicate { .. }));
    drop(again);
    let mut other = Receiver::builder(&bob).replay_ref(&state).build();
    assert!(matches!(
        other.receive(&raw).unwrap().commit().unwrap(),
        Outcome::Duplicate { .. }
    ));
}

#[test]
fn fail_a_refused_message_is_a_typed_error_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob_dir) = common::alice_signs_for_bob(dir.path());
    let bob = DirectoryStore::open(&bob_dir).unwrap();
    let mut receiver = Receiver::builder(&bob).build();
    let mut raw = signed_request(&alice, "tampered-1");
    // Flip a byte of the signed content: authentication fails (exit 4), not a format
    // error.
    let at = raw.windows(10).position(|w| w == b"tampered-1").unwrap();
    raw[at] ^= 0x01;
    let err = receiver.receive(&raw).unwrap_err();
    assert_eq!(
        mailseal::Classify::kind(&err),
        mailseal::ErrorKind::Authentication,
        "{err}"
    );
    // Garbage is malformed (exit 3).
    let err = receiver.receive(b"\x00\x01 not mail").unwrap_err();
    assert_eq!(
        mailseal::Classify::kind(&err),
        mailseal::ErrorKind::Malformed,
        "{err}"
    );
}

#[test]
fn fail_sender_refuses_a_message_over_the_receivers_limit_before_sealing() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, _) = common::alice_signs_for_bob(dir.path());
    let big = "x".repeat(20 * 1024 * 1024);
    let v = common::with(
        common::request(),
        json!({"payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": big}]}}}),
    );
    let msg = MailA2aMessage::new(
        "alice@smime.example",
        &["bob@smime.example"],
        common::env(v),
    );
    let sender = Sender::builder(&alice).build();
    let mut out = Vec::new();
    let err = sender
        .seal_to(&msg, &SealOptions::new(Profile::Smime), &mut out)
        .unwrap_err();
    assert!(matches!(err, SendError::TooLarge { .. }), "{err}");
    assert_eq!(mailseal::Classify::kind(&err), mailseal::ErrorKind::Policy);
    assert!(out.is_empty(), "nothing written");
    // Signed only it is under 25 MiB, but not under a peer's published 1 MiB.
    let mut peers = mailseal::ext::peers::PeerPolicies::default();
    peers.peers.insert(
        "bob@smime.example".into(),
        serde_json::from_value(json!({"minimumProtection": "signed", "profiles": [],
            "cardDigest": "", "importedAt": "", "limits": {"maxMessageBytes": 1048576}}))
        .unwrap(),
    );
    let sender = Sender::builder(&alice).peers(peers).build();
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let err = sender.seal(&msg, &opts).unwrap_err();
    match err {
        SendError::TooLarge { limit, who, .. } => {
            assert_eq!((limit, who.as_str()), (1048576, "bob@smime.example"));
        }
        other => panic!("{other}"),
    }
}

#[test]
fn sender_records_a_payment_request_for_its_recipients() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, _) = common::alice_signs_for_bob(dir.path());
    let env = json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "error",
        "operation": "message/send", "messageId": "pr-1", "correlationId": "corr-pay",
        "sequence": 1, "final": true,
        "error": {"type": "PaymentRequiredError", "message": "pay first"},
        "payload": {"message": {"messageId": "m-pr", "role": "ROLE_AGENT", "parts": [{"text": "pay first"}]}},
        "payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 2, "accepts": []}}
    });
    let request = MailA2aMessage::new(
        "bob@smime.example",
        &["alice@smime.example"],
        common::env(common::request()),
    );
    let mut msg = MailA2aMessage::new(
        "alice@smime.example",
        &["bob@smime.example"],
        common::env(env),
    );
    msg.in_reply_to(&request.headers);
    let state = mailseal::replay::MemoryReplayStore::default();
    // Without replay state to record in, refused: the payment would be refused later.
    // (A store in memory has none of its own; Alice's directory store has.)
    let keys = mailseal::keystore::MemoryStore::new();
    for f in ["alice.sign.crt", "alice.sign.key"] {
        let bytes = std::fs::read(common::fixture(&format!("rfc9216/{f}"))).unwrap();
        keys.import_as(&bytes, mailseal::ImportAs::Own).unwrap();
    }
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let err = Sender::builder(&keys).build().seal(&msg, &opts);
    if let Err(SendError::Seal(e)) = &err {
        // The envelope above may not be a valid PaymentRequiredError under this
        // build's rules: then the test says which rule, rather than passing silently.
        panic!("the test's PaymentRequired message is not valid: {e}");
    }
    assert!(matches!(err, Err(SendError::Rules(_))), "{err:?}");
    Sender::builder(&keys)
        .replay_ref(&state)
        .build()
        .seal(&msg, &opts)
        .unwrap();
    // Over Alice's directory store, the record goes to the store's own state.
    let db = dir.path().join("alice/mailseal.db");
    assert!(!db.exists());
    Sender::builder(&alice).build().seal(&msg, &opts).unwrap();
    assert!(
        db.is_file(),
        "the payment request was recorded in the store's state"
    );
}
