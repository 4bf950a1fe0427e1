//! Untrusted bytes as an S/MIME message: outer MIME, multipart/signed structure, base64,
//! CMS ContentInfo/SignedData/SignerInfo decoding, certificate lookup and signature
//! checks, BER rewriting, recipient infos and decryption (Bob's RSA and Dana's X25519
//! keys are in the store; legacy CBC is allowed for odd-length inputs), against a key
//! store with the RFC 9216 identities and CAs. No panic, nothing opens unless it
//! verified, and opening in the input's own buffer (`open_owned`: base64 decoded and
//! decrypted in place) decides as opening it borrowed does.
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
            for (f, trusted) in [
                ("alice.sign.crt", false),
                ("carlos.sign.crt", false),
                ("bob.encrypt.crt", false),
                ("bob.encrypt.key", false),
                ("dana.encrypt.crt", false),
                ("dana.encrypt.key", false),
                ("ca.rsa.crt", true),
                ("ca.25519.crt", true),
            ] {
                let bytes = std::fs::read(format!("{fx}{f}")).expect("fixture");
                store.import(&bytes, f, trusted).expect("import");
            }
            (dir, store)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let policy = {
        let mut p = OpenPolicy::default();
        p.allow_legacy_cbc = data.len() % 2 == 1;
        p
    };
    let smime = Smime::new(store());
    let borrowed = smime.open(data, &policy);
    let owned = smime.open_owned(data.to_vec(), &policy);
    match (&borrowed, &owned) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.message, b.message, "open and open_owned read different messages");
            assert_eq!(a.verdict, b.verdict);
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!("open {:?} but open_owned {:?}", a.is_ok(), b.is_ok()),
    }
});
