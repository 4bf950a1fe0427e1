//! The `receiver` fuzz target's seeds (and any crash reproducers kept beside them, in
//! `fuzz/seeds/receiver/crash-*`) through `mailseal::Receiver` with the target's keys
//! and MLS state: no panic, every profile delivers at least one seed, and the target's
//! invariants hold (a previewed delivery commits as one; its redelivery is a
//! duplicate).

use std::path::Path;

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::mls::Mls;
use mailseal::receiver::Clock;
use mailseal::{Outcome, Profile, Receiver};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn receiver_seeds_and_reproducers() {
    let dir = tempfile::tempdir().unwrap();
    let keys = DirectoryStore::open(dir.path().join("keys")).expect("store");
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
        let bytes = std::fs::read(format!("{ROOT}/keys-fixtures/{f}")).unwrap();
        keys.import(&bytes, f, trusted).unwrap();
    }
    std::fs::copy(
        format!("{ROOT}/fuzz/fixtures/mls/bob-mls.db"),
        dir.path().join("mls.db"),
    )
    .unwrap();
    // The day the seeds were made: none has expired then.
    let clock = Clock::Fixed(1_796_040_000); // 2026-11-30T12:00:00Z
    let mut receiver = Receiver::builder(keys)
        .mls(Mls::open(dir.path()).unwrap())
        // The fixture group predates credential bindings: its members are pinned.
        .mls_pinned_keys(
            mailseal::mls::PinnedKeys::parse(
                &std::fs::read_to_string(format!("{ROOT}/fuzz/fixtures/mls/pinned.txt")).unwrap(),
            )
            .unwrap(),
        )
        .clock(clock)
        .build();
    let seeds = Path::new(ROOT).join("fuzz/seeds/receiver");
    let mut files: Vec<_> = std::fs::read_dir(&seeds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 40, "{} seeds", files.len());
    let mut delivered = Vec::new();
    for path in &files {
        let data = std::fs::read(path).unwrap();
        let profile = mailseal::dispatch::detect_profile(&data);
        let Ok(incoming) = receiver.receive(&data) else {
            continue;
        };
        let previewed = matches!(incoming.outcome(), Outcome::Deliver { .. });
        if profile == Some(Profile::Mls) {
            if previewed {
                delivered.push(profile);
            }
            continue; // dropped: rolled back, as the target does
        }
        let committed = incoming.commit().unwrap();
        assert_eq!(
            previewed,
            matches!(committed, Outcome::Deliver { .. }),
            "{}",
            path.display()
        );
        if previewed {
            delivered.push(profile);
            let again = receiver.receive(&data).unwrap();
            assert!(
                matches!(again.outcome(), Outcome::Duplicate { .. }),
                "{}",
                path.display()
            );
        }
    }
    for p in [Profile::Smime, Profile::OpenPgp, Profile::Mls] {
        assert!(
            delivered.contains(&Some(p)),
            "no {p} seed delivered: {delivered:?}"
        );
    }
}
