//! The OpenPGP profile: against `gpg`, `sq` and `sqop` both ways, the RFC 9580
//! vectors, the refusals and the header-protection samples. CI runs this binary again on
//! the Nettle backend.
//!
//! One test binary per area (as rustls does in `tests/`): each file is a module, so the
//! crate and its dependencies link once per area, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod differential_armor;
mod fail_chosen_time;
mod fail_cost_argon2;
mod fail_cost_flooded_certificate;
mod fail_review_respelled_keys;
mod header_protection_openpgp;
mod interop_gpg_openpgp;
mod interop_sq_openpgp;
mod openpgp_refusals;
mod openpgp_vectors;
mod signers;
mod sop_conformance;
mod sop_gpg;
mod sop_roundtrip;
