//! The `agent_card_import` fuzz target's seeds and fixture as a regression test: each
//! seed card comes to what it was made to be (read with the fixture certificate
//! pinned, at the time the target uses), and every fuzzer crash reproducer
//! (`tests/cases/crashes/agent_card_import-*`) is handled without a panic.

use mailseal::ext::agent_card::{read_card, CardError, SignerTrust};
use mailseal::keystore::{KeyStore, SqliteStore};

fn repo(rel: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A store holding the fixture certificate (as the fuzz target's), and its directory.
fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("trust.db"), None).unwrap();
    let pem = std::fs::read(repo("fuzz/fixtures/agent_card/bob-cert.pem")).unwrap();
    store.import(&pem, "fixture", false).unwrap();
    (dir, store)
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

fn seed(name: &str) -> Result<mailseal::ext::agent_card::PeerCard, CardError> {
    let bytes = std::fs::read(repo(&format!("fuzz/seeds/agent_card_import/{name}"))).unwrap();
    let (_dir, store) = store();
    read_card(&bytes, &store, now())
}

#[test]
fn seeds_come_to_what_they_were_made_to_be() {
    let all = seed("signed-eddsa-all-profiles.json").unwrap();
    assert_eq!(all.address, "bob@fuzz.example");
    assert_eq!(all.profiles, ["smime-4", "openpgp-mime", "mls"]);
    assert_eq!(all.minimum, mailseal::Protection::SignedEncrypted);
    assert_eq!(all.mls_key_packages.len(), 1);
    assert!(
        all.mls_key_packages[0].1,
        "a card's KeyPackage is last-resort"
    );
    assert_eq!(all.signatures.len(), 1);
    assert_eq!(all.signatures[0].algorithm, "EdDSA");
    // Signed with Bob's Ed25519 certificate, which the fixture pins.
    assert_eq!(all.signatures[0].trust, SignerTrust::Pinned);

    let unsigned = seed("unsigned-no-mls.json").unwrap();
    assert!(unsigned.signatures.is_empty());
    assert!(unsigned.mls_key_packages.is_empty());

    for (name, alg) in [
        ("signed-eddsa.json", "EdDSA"),
        ("signed-es384.json", "ES384"),
        ("signed-rs256-smime-only.json", "RS256"),
        ("signed-jwk-openssl.json", "ES256"),
    ] {
        let card = seed(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(card.signatures[0].algorithm, alg, "{name}");
    }
    assert!(seed("spec-example-added.json").is_ok());
    // Signed by Bob's pinned certificate too; limits published.
    let limits = seed("signed-with-limits.json").unwrap();
    assert_eq!(limits.signatures[0].trust, SignerTrust::Pinned);
    assert_eq!(
        limits.limits.as_ref().and_then(|l| l.max_mime_parts),
        Some(64)
    );
    // The draft's example is a v0.3-style card without keys: refused by the schema.
    assert!(matches!(
        seed("spec-example-v03.json"),
        Err(CardError::Schema { .. })
    ));
}

#[test]
fn crash_reproducers_do_not_panic() {
    let dir = repo("tests/cases/crashes");
    let (_tmp, store) = store();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("agent_card_import-") {
            let bytes = std::fs::read(&path).unwrap();
            let _ = read_card(&bytes, &store, now());
        }
    }
}
