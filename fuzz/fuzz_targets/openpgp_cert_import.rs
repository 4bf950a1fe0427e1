//! Untrusted bytes as OpenPGP key material for `key import` / `key list`: armor,
//! certificate and transferable-secret-key parsing, the RFC 9580 conformance check,
//! the passphrase derivation bound and unlocking, serialisation back to the store's
//! form. No panic; the bounded certificate reading (`src/keystore/openpgp_placement.rs`)
//! agrees with Sequoia's within its budget, and with none loses no component, makes up
//! no signature and leaves nothing to search for.
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
    if let Err(broken) = mailseal::keystore::openpgp::check_placement(data) {
        panic!("{broken}");
    }
});
