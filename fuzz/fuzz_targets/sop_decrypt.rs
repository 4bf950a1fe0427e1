//! Untrusted bytes as `sop decrypt` input, with a legacy key (GnuPG's DSA/ElGamal
//! "Carol", `fixtures/sop/`) and a session key: PKESK handling, the hand-written
//! ElGamal decryption and its EME-PKCS1-v1_5 decoding, signature collection. No panic
//! escapes. (No password: each try costs the message's chosen S2K, up to 65 MB of
//! hashing, which held the target to one run a second; the password loop is ours, the
//! SKESK decryption Sequoia's, and `tests/openpgp/sop_*` exercise both.) The same bytes as an EME block:
//! mailseal's branch-free decoder agrees with a plain reference. The same bytes as a
//! SOP session key: parsed or refused, never a panic.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "sequoia_panics.rs"]
mod sequoia_panics;
use mailseal::openpgp::sop::{self, DecryptRequest};
use zeroize::Zeroizing;

struct Fixture {
    key: Vec<u8>,
    cert: Vec<u8>,
    session_key: Zeroizing<Vec<u8>>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        sequoia_panics::let_through(); // Sequoia-internal panics are caught and refused
        let key = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/sop/carol-dsa-elgamal.sec.asc"
        ))
        .expect("fixture");
        let cert = sop::extract_cert(&key).expect("a key");
        Fixture {
            key,
            cert,
            session_key: Zeroizing::new(format!("9:{}", "00".repeat(32)).into_bytes()),
        }
    })
}

/// EME-PKCS1-v1_5 decoding written the obvious way.
fn reference_unpad(block: &[u8]) -> Option<&[u8]> {
    if block.len() < 11 || block[0] != 0 || block[1] != 2 {
        return None;
    }
    let zero = block[2..].iter().position(|&b| b == 0)? + 2;
    if zero < 10 {
        return None;
    }
    Some(&block[zero + 1..])
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let request = DecryptRequest {
        keys: std::slice::from_ref(&f.key),
        session_keys: std::slice::from_ref(&f.session_key),
        verify_with: std::slice::from_ref(&f.cert),
        session_key_out: true,
        ..Default::default()
    };
    let _ = sop::decrypt(&request, data);
    assert_eq!(
        mailseal::openpgp::eme_pkcs1_v15_decode(data),
        reference_unpad(data)
    );
    let _ = sop::parse_session_key(data);
});
