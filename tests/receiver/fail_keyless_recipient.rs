//! Sealing for the recipients that have a key (issue #57): `SealOptions::encrypt_to`
//! narrows the encryption to some of the addresses a message names, and
//! `Sender::seal_for_keyed` leaves out each recipient without a usable key, saying
//! which and why. What must hold whatever the caller asks: nobody the message does
//! not name is ever made a reader, the sender's own key is never left out, a message
//! with no keyed recipient is refused, and MLS is never narrowed.

use crate::common;

use mailseal::error::Classify;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::replay::MemoryReplayStore;
use mailseal::{ErrorKind, Profile, Receiver, SealOptions, Sender};
use serde_json::json;

/// Alice's store (her keys, Bob's certificates and OpenPGP key) and Bob's (his keys,
/// Alice's), both trusting the RFC 9216 CA.
fn stores(dir: &std::path::Path) -> (DirectoryStore, DirectoryStore) {
    let open = |name: &str, smime: &[&str], openpgp: &[&str]| {
        let s = DirectoryStore::open(dir.join(name)).unwrap();
        s.import(
            &std::fs::read(common::fixture("rfc9216/ca.rsa.crt")).unwrap(),
            "ca",
            true,
        )
        .unwrap();
        for f in smime {
            let b = std::fs::read(common::fixture(&format!("rfc9216/{f}"))).unwrap();
            s.import(&b, f, false).unwrap();
        }
        for f in openpgp {
            let b = std::fs::read(common::fixture(&format!("openpgp/{f}"))).unwrap();
            s.import(&b, f, false).unwrap();
        }
        s
    };
    let alice = open(
        "alice",
        &[
            "alice.sign.crt",
            "alice.sign.key",
            "alice.encrypt.crt",
            "alice.encrypt.key",
            "bob.sign.crt",
            "bob.encrypt.crt",
        ],
        &[
            "alice@openpgp.example.sec.asc",
            "bob@openpgp.example.pub.asc",
        ],
    );
    let bob = open(
        "bob",
        &[
            "bob.sign.crt",
            "bob.sign.key",
            "bob.encrypt.crt",
            "bob.encrypt.key",
            "alice.sign.crt",
            "alice.encrypt.crt",
        ],
        &[
            "bob@openpgp.example.sec.asc",
            "alice@openpgp.example.pub.asc",
        ],
    );
    (alice, bob)
}

fn message(from: &str, to: &[&str], id: &str) -> MailA2aMessage {
    let v = common::with(
        common::request(),
        json!({"messageId": id, "idempotencyKey": format!("k-{id}")}),
    );
    MailA2aMessage::new(from, to, common::env(v))
}

#[test]
fn fail_a_keyless_recipient_is_left_out_of_the_encryption_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = stores(dir.path());
    for (profile, from, to) in [
        (Profile::Smime, "alice@smime.example", "bob@smime.example"),
        (
            Profile::OpenPgp,
            "alice@openpgp.example",
            "bob@openpgp.example",
        ),
    ] {
        let sender = Sender::builder(&alice)
            .replay(MemoryReplayStore::default())
            .build();
        let id = format!("keyless-{profile:?}");
        let plain = message(
            from,
            &[to, "carol@nowhere.example", "dave@nowhere.example"],
            &id,
        );
        // Sealed whole: refused for want of Carol's key.
        let whole = sender.seal(&plain, &SealOptions::new(profile)).unwrap_err();
        assert_eq!(whole.kind(), ErrorKind::NoUsableKey, "{whole}");
        assert_eq!(whole.recipient_without_key(), Some("carol@nowhere.example"));
        // For the keyed: Bob reads it; Carol and Dave are left out, each with why.
        let (sealed, left) = sender
            .seal_for_keyed(&plain, &SealOptions::new(profile))
            .unwrap();
        let left: Vec<&str> = left.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(
            left,
            ["carol@nowhere.example", "dave@nowhere.example"],
            "{profile:?}"
        );
        let mut receiver = Receiver::builder(&bob)
            .replay(MemoryReplayStore::default())
            .build();
        let opened = receiver.receive(&sealed).unwrap().commit().unwrap();
        let d = opened.delivery().expect("delivered to Bob");
        let named: Vec<&str> = d
            .opened
            .message
            .headers
            .to
            .iter()
            .map(|m| m.address.as_str())
            .collect();
        assert_eq!(
            named,
            [to, "carol@nowhere.example", "dave@nowhere.example"],
            "still named"
        );
    }
}

#[test]
fn fail_encrypt_to_never_adds_a_reader_nor_drops_the_sender() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, _) = stores(dir.path());
    let sender = Sender::builder(&alice)
        .replay(MemoryReplayStore::default())
        .build();
    let plain = message("alice@smime.example", &["bob@smime.example"], "narrow");
    // An address the message does not name: refused, not added as a reader.
    let mut opts = SealOptions::new(Profile::Smime);
    opts.encrypt_to = Some(vec![
        "bob@smime.example".into(),
        "mallory@evil.example".into(),
    ]);
    let e = sender.seal(&plain, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.to_string().contains("not a recipient the message names"),
        "{e}"
    );
    // Nobody at all: refused (unset means everyone).
    opts.encrypt_to = Some(Vec::new());
    assert_eq!(
        sender.seal(&plain, &opts).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // MLS encrypts to its group.
    let mut mls = SealOptions::new(Profile::Mls);
    mls.group = Some("AAAA".into());
    mls.encrypt_to = Some(vec!["bob@smime.example".into()]);
    assert_eq!(
        sender.seal(&plain, &mls).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // Only one recipient, without a key: nothing to split, refused.
    let carol = message(
        "alice@smime.example",
        &["carol@nowhere.example"],
        "only-carol",
    );
    let e = sender
        .seal_for_keyed(&carol, &SealOptions::new(Profile::Smime))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoUsableKey, "{e}");
    // The sender's own key missing is no recipient's to leave out: refused.
    let store = DirectoryStore::open(dir.path().join("signs-only")).unwrap();
    for f in ["alice.sign.crt", "alice.sign.key", "bob.encrypt.crt"] {
        let b = std::fs::read(common::fixture(&format!("rfc9216/{f}"))).unwrap();
        store.import(&b, f, false).unwrap();
    }
    let sender = Sender::builder(&store)
        .replay(MemoryReplayStore::default())
        .build();
    let two = message(
        "alice@smime.example",
        &["bob@smime.example", "carol@nowhere.example"],
        "own",
    );
    let e = sender
        .seal_for_keyed(&two, &SealOptions::new(Profile::Smime))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoUsableKey, "{e}");
    assert_eq!(
        e.recipient_without_key(),
        Some("alice@smime.example"),
        "{e}"
    );
}
