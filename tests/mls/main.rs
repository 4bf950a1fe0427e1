//! The MLS profile: the library and the command line, five agents by mail, tampering,
//! the RFC 9420 vectors and the fuzz target's seeds.
//!
//! One test binary per area (as rustls does in `tests/`): each file is a module, so the
//! crate and its dependencies link once per area, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod fail_external_join;
mod fail_impersonation;
mod fail_review_stale_members;
mod fail_review_trimmed_evidence;
mod fail_stale_members;
mod fail_trimmed_evidence;
mod mls_agents;
mod mls_fuzz_seeds;
mod mls_group;
mod mls_key_rotation;
mod mls_openpgp_binding;
mod mls_rs_peer;
mod mls_shared_state;
mod mls_tamper;
mod mls_vectors;
