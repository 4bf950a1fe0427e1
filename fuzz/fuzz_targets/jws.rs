//! Untrusted bytes through the `jws` profile's parsers. The first byte picks one:
//! 0, a whole detached-jws message opened by the profile against a store that binds
//! the RFC 8037 sample key to alice@jws.example (so the verification path runs, not
//! only the refusal of unknown keys); 1, a JWK; 2, a DID document for
//! `did:web:jws.example`; 3, a DID resolved offline (did:key, did:jwk); anything else,
//! a compact JWS checked against a fixed entity.
//! Invariants: no panic; a message that opens was signed by the bound key and comes
//! from its address; a JWK that reads has a thumbprint that is stable across a write
//! and a read; a DID document yields only public keys.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::jws::{did, Jwk, Jws};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::{OpenPolicy, Opener};

struct Fixture {
    _dir: tempfile::TempDir,
    store: DirectoryStore,
    thumbprint: String,
}

fn fixture() -> &'static Fixture {
    static F: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = DirectoryStore::open(dir.path().join("store")).expect("store");
        let key = Jwk::parse(include_bytes!("../fixtures/jws/alice.rfc8037.jwk")).expect("jwk");
        mailseal::jws::jwk::bind(&store, &key, &["alice@jws.example".into()], "fixture")
            .expect("bind");
        Fixture {
            thumbprint: key.thumbprint(),
            _dir: dir,
            store,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    match mode {
        0 => {
            let mut policy = OpenPolicy::default();
            policy.our_addresses = vec!["bob@jws.example".into()];
            if let Ok(opened) = Jws::new(&f.store).open(rest, &policy) {
                assert_eq!(opened.message.sender().as_deref(), Some("alice@jws.example"));
                let Some(mailseal::seal::SignerIdentity::Jwk { thumbprint, .. }) =
                    &opened.verdict.signer
                else {
                    panic!("a jws message opened without a JWK signer")
                };
                assert_eq!(*thumbprint, f.thumbprint);
            }
        }
        1 => {
            if let Ok(k) = Jwk::parse(rest) {
                let again = Jwk::parse(k.public_value().to_string().as_bytes())
                    .expect("a JWK we write reads back");
                assert_eq!(again.thumbprint(), k.thumbprint());
                assert_eq!(again.fingerprint(), k.fingerprint());
                assert!(!again.is_private());
            }
        }
        2 => {
            if let Ok(keys) = did::document_keys("did:web:jws.example", rest) {
                assert!(!keys.is_empty());
                assert!(keys.iter().all(|k| !k.is_private()));
            }
        }
        3 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                if let Ok(keys) = did::resolve_offline(text) {
                    assert!(keys.iter().all(|k| !k.is_private()));
                }
            }
        }
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = Jws::new(&f.store).verify_detached(text, b"From: a\r\n\r\nbody");
            }
        }
    }
    let _ = f.store.jwk_identities();
});
