//! The SMTP gateway, end to end: real gateway processes, a sink behind each, SMTP in
//! and out, crashes, bad input.

mod bridge_kit;
#[path = "../common/mod.rs"]
mod common;
mod kit;

mod bridge;
mod bridge_restart;
mod crash_kill;
mod end_to_end;
mod fail_bounce_content;
mod fail_bridge;
mod fail_folded_top;
mod fail_inbound;
mod fail_outbound;
mod fail_per_agent;
mod fail_queue_tools_owner;
mod fail_smtp_input;
mod fail_split;
mod fail_submission;
mod operations;
mod postfix;
mod postgres_instances;
mod postgres_recovery;
mod queue_tools;
mod readme_walk;
mod signals;
mod smtp_session_seeds;
mod trace;
