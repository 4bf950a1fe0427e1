//! The message layer and the extensions: the case files, compose and validate, the
//! JSON Schema and the reference validator, the rules as data, hostile input, the README,
//! unprotected mail, and the extensions (edge-cloud, AEP, DKIM, x402, Agent Cards).
//!
//! One test binary per area (as rustls does in `tests/`): each file is a module, so the
//! crate and its dependencies link once per area, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod aep;
mod agent_card;
mod agent_card_fuzz_seeds;
mod cases;
mod cli_help;
mod cli_input;
mod compose_roundtrip;
mod differential_mail_parser;
mod dkim;
mod docs_blocks;
mod edge_cloud;
mod fail_card_openpgp_time;
mod fail_card_signer;
mod fail_cost;
mod fail_cost_certificate;
mod fail_cost_compression;
mod first_hour;
mod interop_a2a_sdk;
mod layering;
mod open_plain;
mod readme;
mod reference_validator;
mod robustness;
mod rules;
mod schema_agreement;
mod schema_reference;
mod x402;
