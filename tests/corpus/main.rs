//! The conformance corpus: generated, labelled, and run (`mailseal corpus`).
//!
//! One test binary per area (as rustls does in `tests/`).

#[path = "../common/mod.rs"]
mod common;

mod corpus_run;
// The shipped mls-rs adapter, run in-process by `corpus_run` (its `main` unused here).
#[path = "../../examples/corpus_adapter_mls_rs.rs"]
#[allow(dead_code)]
mod mls_rs_adapter;
mod mutate;
mod mutate_packets;
