//! The S/MIME profile: against `openssl cms` both ways, CMS algorithms beyond what
//! OpenSSL writes, the header-protection samples, and streamed sealing.
//!
//! One test binary per area (as rustls does in `tests/`): each file is a module, so the
//! crate and its dependencies link once per area, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod detached_cms;
mod differential_openssl;
mod fail_path;
mod fail_review_chosen_time;
mod fail_review_respelled_keys;
mod fail_review_unread_forms;
mod fail_review_wrong_audience;
mod fail_trimmed_evidence;
mod fail_unread_forms;
mod header_protection_smime;
mod interop_gpgsm;
mod interop_openssl_smime;
mod interop_openssl_smime_encrypt;
mod key_choice;
mod legacy_headers;
mod open_in_place;
mod seal_output;
mod smime_cms_algorithms;
