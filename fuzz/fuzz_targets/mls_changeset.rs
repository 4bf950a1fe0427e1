//! The changesets of the MLS state shared through PostgreSQL (`mailseal::mls`, the
//! `changeset` module): bytes read back from the database, applied to an empty
//! replica of the real schema. The invariants are `mls::check_changeset`'s (whole or
//! nothing; what applied round-trips through the encoder), which
//! `tests/mls/mls_fuzz_seeds.rs` runs on this target's seeds and reproducers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = mailseal::mls::check_changeset(data) {
        panic!("invariant broken: {broken}");
    }
});
