//! The `jws` profile (MailA2A `detached-jws`): sealing and opening through the library
//! and the command line, the attacks on it, JWK and DID identities, Agent Cards over
//! HTTPS, and an independent JOSE implementation (Python's jwcrypto) both ways.

#[path = "../common/mod.rs"]
mod common;

mod did;
mod fail_jws;
mod fail_pins;
mod fail_report_escapes;
mod fail_review_unread_forms;
mod https_cards;
mod interop_jwcrypto;
mod kit;
mod seal_open;
mod server;
