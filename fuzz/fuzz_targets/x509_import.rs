//! Untrusted bytes as a key-store import: PEM blocks or DER, X.509 certificates
//! (subject, SAN emails, validity) and PKCS#8 keys (public key derivation for RSA, EC,
//! Ed25519, X25519). Invariant: no panic, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = mailseal::keystore::describe(data, "fuzz");
});
