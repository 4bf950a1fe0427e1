//! Untrusted bytes through the whole receive path, `mailseal::Receiver`: dispatch by
//! outer Content-Type, every profile (S/MIME with Bob's and Dana's keys and the RFC
//! 9216 CAs, OpenPGP with Alice's secret key and Bob's certificate, MLS as Bob of the
//! `mls_open` fixture group), the binding checks, and the receiver rules' dry run.
//!
//! Invariants: no panic; the outcome's delivery carries exactly the envelope bytes it
//! was opened with; with a single receiver, what `receive` previews is what `commit`
//! records (a non-MLS message previewed as delivered commits as delivered, and its
//! redelivery is then a duplicate). MLS receipts are dropped, never committed, so every
//! input meets the same group state.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;

#[path = "sequoia_panics.rs"]
mod sequoia_panics;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::mls::Mls;
use mailseal::{Outcome, Receiver};

struct Bob {
    _dir: tempfile::TempDir,
    receiver: Receiver<'static>,
}

fn bob() -> Bob {
    sequoia_panics::let_through(); // Sequoia-internal panics are caught and refused
    let dir = tempfile::tempdir().expect("temp dir");
    let keys = DirectoryStore::open(dir.path().join("keys")).expect("store");
    let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/../keys-fixtures/");
    for (f, trusted) in [
        ("rfc9216/alice.sign.crt", false),
        ("rfc9216/carlos.sign.crt", false),
        ("rfc9216/bob.encrypt.crt", false),
        ("rfc9216/bob.encrypt.key", false),
        ("rfc9216/dana.encrypt.crt", false),
        ("rfc9216/dana.encrypt.key", false),
        ("rfc9216/ca.rsa.crt", true),
        ("rfc9216/ca.25519.crt", true),
        ("openpgp/alice@openpgp.example.sec.asc", false),
        ("openpgp/bob@openpgp.example.pub.asc", false),
    ] {
        let bytes = std::fs::read(format!("{fx}{f}")).expect("fixture");
        keys.import(&bytes, f, trusted).expect("import");
    }
    let mls_fx = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/mls/bob-mls.db");
    std::fs::copy(mls_fx, dir.path().join("mls.db")).expect("fixture");
    let mls = Mls::open(dir.path()).expect("Bob's MLS state");
    // Welcomes from anyone reach openmls (with nobody allowed to invite, the
    // fixture's default, they are refused before it reads them).
    mls.allow_inviter("*", true).expect("inviter policy");
    // The fixture group predates credential bindings: its members' keys are pinned.
    let pinned = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/mls/pinned.txt"
    ))
    .expect("fixture");
    let pinned = mailseal::mls::PinnedKeys::parse(&pinned).expect("pinned keys");
    Bob {
        _dir: dir,
        // Memory, named: a fuzz run writes no replay database.
        receiver: Receiver::builder(keys)
            .replay_in_memory()
            .mls(mls)
            .mls_pinned_keys(pinned)
            .build(),
    }
}

thread_local! {
    static BOB: RefCell<Bob> = RefCell::new(bob());
}

fuzz_target!(|data: &[u8]| {
    let is_mls = mailseal::dispatch::detect_profile(data) == Some(mailseal::Profile::Mls);
    BOB.with(|b| {
        let receiver = &mut b.borrow_mut().receiver;
        let Ok(incoming) = receiver.receive(data) else {
            return;
        };
        if let Some(d) = incoming.outcome().delivery() {
            assert_eq!(
                d.envelope_json(),
                [d.opened.message.envelope_bytes(), b"\n"].concat()
            );
        }
        let previewed_deliver = matches!(incoming.outcome(), Outcome::Deliver { .. });
        if is_mls {
            return; // dropped: rolled back
        }
        let committed = incoming.commit();
        if previewed_deliver {
            let committed = committed.expect("a previewed delivery commits");
            assert!(
                matches!(committed, Outcome::Deliver { .. }),
                "preview said deliver, commit said {}",
                committed.word()
            );
            let again = receiver.receive(data).expect("opened once, opens again");
            assert!(
                matches!(again.outcome(), Outcome::Duplicate { .. }),
                "a redelivery previewed as {}",
                again.outcome().word()
            );
        }
    });
});
