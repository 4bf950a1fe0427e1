//! Untrusted bytes as a PGP/MIME message and as a bare OpenPGP message: outer MIME,
//! RFC 3156 structure, armor, packet parsing, PKESK/SEIPD handling, signature and
//! intended-recipient checks, against a key store with Alice's Cv25519 secret key (the
//! fast recipient) and Bob's RSA certificate (the seeds are Bob's messages to Alice).
//! No panic escapes, and nothing opens unless it verified. Whatever mailseal's
//! one-pass armor reader decodes, Sequoia's reader decodes to the same bytes.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "sequoia_panics.rs"]
mod sequoia_panics;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::openpgp::OpenPgp;
use mailseal::seal::{OpenPolicy, Opener};

fn store() -> &'static DirectoryStore {
    static STORE: OnceLock<(tempfile::TempDir, DirectoryStore)> = OnceLock::new();
    &STORE
        .get_or_init(|| {
            sequoia_panics::let_through(); // Sequoia-internal panics are caught and refused
            let dir = tempfile::tempdir().expect("temp dir");
            let store = DirectoryStore::open(dir.path().join("s")).expect("store");
            let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/../keys-fixtures/openpgp/");
            for f in [
                "alice@openpgp.example.sec.asc",
                "bob@openpgp.example.pub.asc",
            ] {
                let bytes = std::fs::read(format!("{fx}{f}")).expect("fixture");
                store.import(&bytes, f, false).expect("import");
            }
            (dir, store)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let pgp = OpenPgp::new(store());
    let policy = OpenPolicy::default();
    let _ = pgp.open(data, &policy);
    let _ = pgp.decrypt_message(data, &policy);
    let _ = pgp.verify_inline(data, &policy);
    for label in ["PGP MESSAGE", "PGP SIGNATURE"] {
        if let Some(ours) = mailseal::openpgp::dearmor(data, label) {
            let mut reader = sequoia_openpgp::armor::Reader::from_bytes(
                data,
                sequoia_openpgp::armor::ReaderMode::Tolerant(None),
            );
            let mut theirs = Vec::new();
            let read = std::io::Read::read_to_end(&mut reader, &mut theirs);
            assert!(read.is_ok(), "Sequoia refuses armor we decode");
            assert_eq!(ours, theirs, "the armor readers disagree");
        }
    }
});
