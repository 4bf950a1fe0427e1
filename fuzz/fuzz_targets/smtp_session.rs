//! The gateway's SMTP session state machine (`mailseal::gateway::session`): untrusted
//! bytes in, replies and messages out, as the connection loop drives it (each
//! message answered 250, STARTTLS completed at once). The first byte picks how the
//! rest is cut into reads (the TCP segmentation a client controls); the invariants are
//! `session::check_segmentation`'s, which `tests/gateway/smtp_session_seeds.rs` runs
//! on this target's seeds and reproducers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mailseal::gateway::session::check_segmentation(data);
});
