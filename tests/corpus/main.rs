//! The conformance corpus: generated, labelled, and run (`mailseal corpus`).
//!
//! One test binary per area (as rustls does in `tests/`).

#[path = "../common/mod.rs"]
mod common;

mod corpus_run;
mod mutate;
mod mutate_packets;
