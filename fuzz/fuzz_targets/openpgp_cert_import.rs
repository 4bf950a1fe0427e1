//! Untrusted bytes as OpenPGP key material for `key import` / `key list`: armor,
//! certificate and transferable-secret-key parsing, the RFC 9580 conformance check,
//! the passphrase derivation bound and unlocking, serialisation back to the store's
//! form. No panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // One input in eight is tried with a passphrase, so locked keys reach unlocking.
    let passphrase: Option<&[u8]> = if data.first().is_some_and(|b| b % 8 == 0) {
        Some(b"fuzz")
    } else {
        None
    };
    let _ = mailseal::keystore::describe_with_passphrase(data, "fuzz", passphrase);
});
