//! Untrusted bytes as a passphrase-protected import: PKCS#12 (PFX, authenticated safes,
//! bags, the PKCS#12 KDF, PBES2 and the legacy PBEs) and encrypted PKCS#8, opened with
//! the seeds' passphrase. The fuzzing build reads on past a wrong MAC so that the parsers
//! behind it are reached. Invariant: no panic, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = mailseal::keystore::describe_with_passphrase(data, "fuzz", Some(b"hunter42"));
});
