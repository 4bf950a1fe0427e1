//! Untrusted bytes as an inbound message whose DKIM signatures are checked (the
//! `mail-auth` parser of the message and of `DKIM-Signature` fields, body
//! canonicalization, and the checks against a static key map of one Ed25519 and one RSA
//! key). Invariants: no panic; never a pass unless a signature names a domain and
//! selector of the key map; the checker never asks DNS (the key map answers every
//! name).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mailseal::dkim::{verify, KeyMap};

fn keys() -> &'static KeyMap {
    static KEYS: OnceLock<KeyMap> = OnceLock::new();
    KEYS.get_or_init(|| {
        let json = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/dkim/keys.json"))
            .expect("fixture");
        KeyMap::from_json(&json).expect("fixture key map")
    })
}

fuzz_target!(|data: &[u8]| {
    for signal in verify(data, keys()) {
        if signal.result == "pass" {
            let d = signal.domain.as_deref().unwrap_or_default();
            let s = signal.selector.as_deref().unwrap_or_default();
            assert!(
                d.eq_ignore_ascii_case("mail.example") && (s == "ed25519" || s == "rsa"),
                "a pass for a key the map does not hold: {s}._domainkey.{d}"
            );
        }
    }
});
