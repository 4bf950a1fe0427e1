//! The receive pipeline: the receiver rules, `open` with them, the library's
//! `Receiver` and `Sender`, several processes on one state, the fuzz target's seeds, and
//! exactly once across crashes.
//!
//! One test binary per area (as rustls does in `tests/`): each file is a module, so the
//! crate and its dependencies link once per area, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod crash_exactly_once;
mod fail_forwarded;
mod fail_keyless_recipient;
mod fail_output_edges;
mod fail_replay_default;
mod fail_review_per_request;
mod fail_unsolicited_answers;
mod fail_unsolicited_cli;
mod open_receiver;
mod per_agent_state;
mod pipeline_api;
mod receiver_fuzz_seeds;
mod receiver_rules;
mod replay_processes;
