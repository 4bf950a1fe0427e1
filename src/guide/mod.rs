//! The cookbook: short recipes for what a program does with mailseal, each a doc test
//! that `cargo test --doc` compiles and runs (the token recipe is compiled only).
//!
//! - [`seal_open`]: identities in one call, a message sealed by one agent and opened
//!   by the other.
//! - [`reply`]: a request, its response in the request's thread, and an A2A error.
//! - [`replay`]: where the replay state lives, and why a second receiver refuses a
//!   message the first accepted.
//! - [`receive_loop`]: the two phases of receiving (nothing recorded until the
//!   output is safe), in a loop.
//! - [`token`]: private keys on a PKCS#11 token.
//! - [`mls`]: two agents in one MLS group.
//! - [`errors`]: what a refusal says, and what a `main` prints.
//!
//! `examples/first_program.rs` puts the first three together in 40 lines; the other
//! examples (`cargo run --example ...`) show each profile end to end.
//!
//! What these pages describe is the stable API. Modules marked hidden (the
//! conformance corpus, the gateway's internals, the key caches) serve the command line
//! and the tests, and may change in any release.

pub mod errors;
pub mod mls;
pub mod receive_loop;
pub mod replay;
pub mod reply;
pub mod seal_open;
pub mod token;
