//! A receiver built over a store uses that store's durable replay state unless the
//! caller names memory: a message accepted once (by an earlier receiver, by
//! `mailseal open`) is refused as a replay by every later one over the same store.

use crate::common;

use mailseal::keystore::{DirectoryStore, KeyStore, MemoryStore, SqliteStore};
use mailseal::message::MailA2aMessage;
use mailseal::smime::Smime;
use mailseal::{Outcome, Profile, Receiver, SealOptions, Sealer};
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

/// What a receiver built now over `store`, with the defaults, makes of `raw`.
fn receive_once(store: &dyn KeyStore, raw: &[u8]) -> Outcome {
    let mut receiver = Receiver::builder(store).build();
    receiver.receive(raw).unwrap().commit().unwrap()
}

#[test]
fn fail_a_second_receiver_over_one_directory_store_refuses_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob_dir) = common::alice_signs_for_bob(dir.path());
    let raw = signed_request(&alice, "default-durable-1");
    let bob = DirectoryStore::open(&bob_dir).unwrap();
    assert!(matches!(receive_once(&bob, &raw), Outcome::Deliver { .. }));
    // The state is the store's own database, where `mailseal open --store DIR` keeps
    // it.
    assert!(bob_dir.join("mailseal.db").is_file());
    // Another receiver (another run of the agent), the same store opened afresh.
    let again = DirectoryStore::open(&bob_dir).unwrap();
    let second = receive_once(&again, &raw);
    assert!(
        matches!(second, Outcome::Duplicate { .. }),
        "a receiver built later delivered the message again: {second:?}"
    );
}

#[test]
fn fail_cli_open_then_a_library_receiver_refuses_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, legacy_bob) = common::alice_signs_for_bob(dir.path());
    // Bob's store as the command line makes it (one SQLite database), and as an
    // earlier version made it (the file layout): the CLI's state is each one's.
    let cli_bob = dir.path().join("bob-cli");
    let fx = |f: &str| {
        common::fixture(&format!("rfc9216/{f}"))
            .display()
            .to_string()
    };
    let store = cli_bob.display().to_string();
    let (ca, alice_crt, bob_crt, bob_key) = (
        fx("ca.rsa.crt"),
        fx("alice.sign.crt"),
        fx("bob.sign.crt"),
        fx("bob.sign.key"),
    );
    for args in [
        vec!["key", "import", "--store", &store, "--trusted", &ca],
        vec![
            "key", "import", "--store", &store, &alice_crt, &bob_crt, &bob_key,
        ],
    ] {
        let out = common::run(&args, b"");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (n, bob_dir) in [legacy_bob, cli_bob].into_iter().enumerate() {
        let raw = signed_request(&alice, &format!("cli-then-library-{n}"));
        let store = bob_dir.display().to_string();
        let out = common::run(&["open", "--store", &store], &raw);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("cli-then-library"));
        let keys = common::cli_store(&bob_dir);
        let outcome = receive_once(keys.as_ref(), &raw);
        assert!(
            matches!(outcome, Outcome::Duplicate { .. }),
            "{}: the library delivered what `mailseal open` had accepted: {outcome:?}",
            bob_dir.display()
        );
    }
    // A SqliteStore opened by its file is the same store, with the same state.
    let raw = signed_request(&alice, "cli-then-library-1");
    let keys = SqliteStore::open(&dir.path().join("bob-cli/mailseal.db"), None).unwrap();
    assert!(matches!(
        receive_once(&keys, &raw),
        Outcome::Duplicate { .. }
    ));
}

#[test]
fn memory_only_by_name_and_a_memory_store_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob_dir) = common::alice_signs_for_bob(dir.path());
    let raw = signed_request(&alice, "memory-by-name-1");
    let bob = DirectoryStore::open(&bob_dir).unwrap();
    // Memory, named: each receiver forgets, and nothing is written to the store.
    for _ in 0..2 {
        let mut receiver = Receiver::builder(&bob).replay_in_memory().build();
        let outcome = receiver.receive(&raw).unwrap().commit().unwrap();
        assert!(matches!(outcome, Outcome::Deliver { .. }), "{outcome:?}");
    }
    assert!(!bob_dir.join("mailseal.db").exists());
    // A MemoryStore has nothing durable: its receivers keep their state in memory.
    let memory = MemoryStore::new();
    assert!(memory.state_location().is_none());
}
