//! Untrusted bytes as an S/MIME message: outer MIME, multipart/signed structure, base64,
//! CMS ContentInfo/SignedData/SignerInfo decoding, certificate lookup and signature
//! checks, against a key store with the RFC 9216 identities and CA. No panic, and
//! nothing opens unless it verified.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::{OpenPolicy, Opener};
use mailseal::smime::Smime;

fn store() -> &'static DirectoryStore {
    static STORE: OnceLock<(tempfile::TempDir, DirectoryStore)> = OnceLock::new();
    &STORE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let store = DirectoryStore::open(dir.path().join("s")).expect("store");
            let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/../keys-fixtures/rfc9216/");
            for (f, trusted) in [("alice.sign.crt", false), ("ca.rsa.crt", true), ("ca.25519.crt", true)] {
                let bytes = std::fs::read(format!("{fx}{f}")).expect("fixture");
                store.import(&bytes, f, trusted).expect("import");
            }
            (dir, store)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let _ = Smime::new(store()).open(data, &OpenPolicy::default());
});
