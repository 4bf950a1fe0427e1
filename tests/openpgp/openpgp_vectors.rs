//! The RFC 9580 key and message vectors of rPGP (`tests/data/openpgp-rfc9580/`, see its
//! PROVENANCE.md), run as data: each directory's transferable secret key is imported,
//! each message decrypts (or verifies) to "hello world\n", and what Sequoia's backend
//! in this build cannot do, or must refuse, is listed with the reason.

use std::path::{Path, PathBuf};

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::openpgp::OpenPgp;
use mailseal::seal::OpenPolicy;
use mailseal::Classify;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openpgp-rfc9580")
}

/// One vector's outcome: the literal data, or why not (import or open error).
fn run(dir: &Path, file: &str) -> Result<Vec<u8>, String> {
    let home = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(home.path().join("s")).unwrap();
    let tsk = std::fs::read(dir.join("tsk.asc")).unwrap();
    store
        .import(&tsk, "tsk.asc", false)
        .map_err(|e| format!("import: {e}"))?;
    let msg = std::fs::read(dir.join(file)).unwrap();
    let pgp = OpenPgp::new(&store);
    let policy = OpenPolicy::default();
    if file.starts_with("csf") {
        pgp.verify_inline(&msg, &policy)
            .map(|(c, _)| c.to_vec())
            .map_err(|e| format!("verify ({}): {e}", e.kind()))
    } else {
        pgp.decrypt_message(&msg, &policy)
            .map(|d| d.content.to_vec())
            .map_err(|e| format!("decrypt ({}): {e}", e.kind()))
    }
}

/// Which directories this build cannot use, and why. Every other vector must give
/// "hello world\n". (Every key type of the set works on both backends: RSA, NIST
/// P-256/384/521, Ed25519/X25519 old and new, Ed448/X448.)
const REFUSED: &[(&str, &str)] = &[(
    "v6-legacy_illegal",
    "v4-only legacy algorithm EdDSA (RFC 9580 5.5.2)",
)];

/// The one gap of the Nettle backend: Nettle before 3.9 (Debian 12 ships 3.8) has no
/// OCB, the AEAD mode every `enc-seipdv2.msg` of the set uses, so those fail with
/// Sequoia's "Unsupported AEAD algorithm: OCB" there (and nowhere else).
fn no_ocb(file: &str, error: &str) -> bool {
    cfg!(feature = "crypto-nettle")
        && file == "enc-seipdv2.msg"
        && error.contains("Unsupported AEAD algorithm: OCB")
}

#[test]
fn every_vector_gives_hello_world_or_its_listed_reason() {
    let mut dirs: Vec<_> = std::fs::read_dir(vectors())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 10, "the vector set is complete");
    let mut wrong = Vec::new();
    let mut seen = 0;
    for dir in dirs {
        let dir_name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|f| f.ends_with(".msg"))
            .collect();
        files.sort();
        for f in files {
            seen += 1;
            let outcome = run(&dir, &f);
            let refused = REFUSED.iter().find(|(d, _)| *d == dir_name);
            match (refused, &outcome) {
                (None, Ok(c)) if c == b"hello world\n" => {}
                (Some((_, why)), Err(e)) if e.contains(why) => {}
                (None, Err(e)) if no_ocb(&f, e) => {
                    println!("{dir_name}/{f}: not readable on this backend: {e}")
                }
                _ => wrong.push(format!("{dir_name}/{f}: {outcome:?}")),
            }
        }
    }
    assert_eq!(seen, 23);
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn seipd_versions_are_reported_and_cleartext_signatures_name_their_signer() {
    let dir = vectors().join("v6-25519-annex-a-4");
    let home = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(home.path().join("s")).unwrap();
    store
        .import(&std::fs::read(dir.join("tsk.asc")).unwrap(), "tsk", false)
        .unwrap();
    let pgp = OpenPgp::new(&store);
    let policy = OpenPolicy::default();
    for (file, aead) in [("enc-seipdv1.msg", false), ("enc-seipdv2.msg", true)] {
        match pgp.decrypt_message(&std::fs::read(dir.join(file)).unwrap(), &policy) {
            Ok(d) => assert_eq!(d.aead, aead, "{file}"),
            Err(e) => assert!(no_ocb(file, &e.to_string()), "{file}: {e}"),
        }
    }
    let (content, signer) = pgp
        .verify_inline(&std::fs::read(dir.join("csf.msg")).unwrap(), &policy)
        .unwrap();
    assert_eq!(&content[..], b"hello world\n");
    // RFC 9580 Annex A.4's v6 key.
    assert!(
        signer.replay_id().starts_with(
            "openpgp:cb186c4f0609a697e4d52dfa6c722b0c1f1e27c18a56708f6525ec27bad9acc9"
        ),
        "{signer:?}"
    );
}

#[test]
fn fail_a_legacy_v6_key_planted_in_the_store_is_still_not_used() {
    let dir = vectors().join("v6-legacy_illegal");
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("s");
    let store = DirectoryStore::open(&root).unwrap();
    // Bypass `key import` (which refuses it): copy the key files in by hand.
    let tsk = std::fs::read(dir.join("tsk.asc")).unwrap();
    let fpr = "ebf0718843a1c0e5f0b767804a102af46d2478e360b0dd0a7504b2bcd9ee0f76";
    std::fs::write(root.join(format!("openpgp/{fpr}.pgp")), &tsk).unwrap();
    std::fs::write(root.join(format!("openpgp-keys/{fpr}.pgp")), &tsk).unwrap();
    let pgp = OpenPgp::new(&store);
    let err = pgp
        .decrypt_message(
            &std::fs::read(dir.join("enc-seipdv2.msg")).unwrap(),
            &OpenPolicy::default(),
        )
        .unwrap_err();
    assert!(
        err.kind() == mailseal::ErrorKind::NoUsableKey
            || no_ocb("enc-seipdv2.msg", &err.to_string()),
        "{err}"
    );
    let err = pgp
        .verify_inline(
            &std::fs::read(dir.join("csf.msg")).unwrap(),
            &OpenPolicy::default(),
        )
        .unwrap_err();
    // Its signature is by a key the store does not (cannot) use: not authenticated.
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
}
