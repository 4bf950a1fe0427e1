//! The key stores: directory, SQLite, PostgreSQL, PKCS#12 import, PKCS#11 tokens, and
//! key generation.
//!
//! One test binary per area (as rustls does in `tests/`): each file is a module, so the
//! crate and its dependencies link once per area, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod fail_import_as;
mod fail_store_path;
mod identities;
mod intermediates;
mod key_generate;
mod keystore;
mod keystore_postgres;
mod keystore_sqlite;
mod peer_policies_shared;
mod pkcs11_softhsm;
mod pkcs12_import;
mod sign_as;
