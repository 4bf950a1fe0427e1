//! The draft header-protection PGP/MIME samples open with the draft-bre Alice and Bob
//! keys (`keys-fixtures/openpgp/`: Bob's RSA-3072 secret key, Alice's certificate) and
//! give their published `.inner` payloads: signed+encrypted (one OpenPGP message),
//! layered (RFC 3156 6.1: `multipart/signed` inside the encryption), encrypted only
//! (decrypts, but is reported unsigned), and signed only.
//!
//! The samples are read from the project's shared vector folder beside the clone
//! (`../shared/vectors/header-protection/`), not copied into the repository, for the
//! reason given in `header_protection_smime.rs`. Without that folder these tests say so
//! and skip.

use std::path::PathBuf;

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::openpgp::OpenPgp;
use mailseal::seal::{OpenError, OpenPolicy, Opener, SignerIdentity};
use mailseal::Classify;

fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/vectors/header-protection/autocrypt-protected-headers/"
    ))
    .join(name)
}

fn available() -> bool {
    let ok = data("pgpmime-signed.eml").exists();
    if !ok {
        crate::common::skip("../shared/vectors/header-protection is not beside this clone");
    }
    ok
}

/// Bob's store: his secret key and Alice's certificate.
fn bob(dir: &std::path::Path) -> DirectoryStore {
    let store = DirectoryStore::open(dir.join("bob")).unwrap();
    let keys = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/keys-fixtures/openpgp/"
    ));
    for f in [
        "bob@openpgp.example.sec.asc",
        "alice@openpgp.example.pub.asc",
    ] {
        store
            .import(&std::fs::read(keys.join(f)).unwrap(), f, false)
            .unwrap();
    }
    store
}

/// The armored OpenPGP message of a PGP/MIME sample.
fn armored(raw: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(raw);
    let start = text.find("-----BEGIN PGP MESSAGE-----").unwrap();
    let end = text.find("-----END PGP MESSAGE-----").unwrap() + 25;
    text[start..end].as_bytes().to_vec()
}

fn lf(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "\n")
}

fn alice_signed(signer: &SignerIdentity) {
    assert_eq!(
        signer.replay_id(),
        "openpgp:eb85bb5fa33a75e15e944e63f231550c4f47e38e"
    );
}

#[test]
fn signed_and_encrypted_samples_give_their_inner_payloads() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = bob(dir.path());
    let pgp = OpenPgp::new(&store);
    for name in [
        "pgpmime-sign+enc",
        "pgpmime-sign+enc+legacy-disp",
        "pgpmime-layered",
        "pgpmime-layered+legacy-disp",
        "unfortunately-complex",
    ] {
        let raw = std::fs::read(data(&format!("{name}.eml"))).unwrap();
        let (entity, signer) = pgp
            .verified_entity(&raw, &OpenPolicy::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let inner = std::fs::read(data(&format!("{name}.inner"))).unwrap();
        // `.inner` is what decryption gives: for the one-message samples the signed
        // entity itself, for the layered ones the `multipart/signed` around it.
        let decrypted = pgp
            .decrypt_message(&armored(&raw), &OpenPolicy::default())
            .unwrap();
        assert_eq!(lf(&decrypted.content), lf(&inner), "{name}");
        if name.starts_with("pgpmime-layered") || name == "unfortunately-complex" {
            assert!(decrypted.signer.is_none(), "{name}");
            assert!(lf(&inner).contains(&lf(&entity)), "{name}");
            assert!(lf(&inner).starts_with("Content-Type: multipart/signed"));
        } else {
            assert_eq!(lf(&entity), lf(&inner), "{name}");
            alice_signed(decrypted.signer.as_ref().unwrap());
        }
        alice_signed(&signer);
        // Not MailA2A: opening it as such is refused after the cryptography passed.
        assert!(matches!(
            pgp.open(&raw, &OpenPolicy::default()),
            Err(OpenError::Malformed(_) | OpenError::Invalid(_))
        ));
    }
}

#[test]
fn encrypted_only_sample_decrypts_but_is_not_authenticated() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = bob(dir.path());
    let pgp = OpenPgp::new(&store);
    let raw = std::fs::read(data("pgpmime-enc+legacy-disp.eml")).unwrap();
    let err = pgp
        .verified_entity(&raw, &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
    assert!(err.to_string().contains("not authenticated"), "{err}");
    // The content itself decrypts to the published payload, with no signer.
    let d = pgp
        .decrypt_message(&armored(&raw), &OpenPolicy::default())
        .unwrap();
    assert!(d.signer.is_none());
    let inner = std::fs::read(data("pgpmime-enc+legacy-disp.inner")).unwrap();
    assert_eq!(lf(&d.content), lf(&inner));
}

#[test]
fn signed_only_sample_verifies_and_a_changed_copy_does_not() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = bob(dir.path());
    let pgp = OpenPgp::new(&store);
    let raw = std::fs::read(data("pgpmime-signed.eml")).unwrap();
    let (entity, signer) = pgp.verified_entity(&raw, &OpenPolicy::default()).unwrap();
    alice_signed(&signer);
    assert!(lf(&entity).contains("Bob, we need to cancel this contract."));
    let changed = String::from_utf8_lossy(&raw).replace("cancel this", "renew this");
    let err = pgp
        .verified_entity(changed.as_bytes(), &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
}
