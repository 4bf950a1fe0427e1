//! The gateway's SMTP session state machine (`mailseal::gateway::session`): untrusted
//! bytes in, replies and messages out, as the connection loop drives it (each
//! message answered 250, STARTTLS completed at once).
//!
//! The first byte picks how the rest is cut into reads (the TCP segmentation a client
//! controls). Invariants: no panic; every reply is whole lines of a three-digit code;
//! a message handed out has at least one recipient, no more than the limit, fits the
//! size limit and has no NUL, bare CR or bare LF; nothing happens after a close; and,
//! for inputs without STARTTLS or overlong lines (where the reads legitimately
//! matter), the messages handed out do not depend on how the bytes were cut: message
//! boundaries are the same whatever the segmentation (no smuggling by splitting).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::gateway::session::{Action, Session, SessionLimits, Transaction};

const LIMITS: SessionLimits = SessionLimits {
    max_message_bytes: 4096,
    max_recipients: 5,
    max_errors: 1000,
};

fn drive(input: &[u8], cut: usize) -> Vec<Transaction> {
    let mut s = Session::new("fuzz.test", LIMITS, true, false, false);
    let mut messages = Vec::new();
    let mut closed = false;
    for chunk in input.chunks(cut.max(1)) {
        if closed {
            break;
        }
        s.push(chunk);
        while let Some(action) = s.step() {
            match action {
                Action::Send(b) => check_replies(&b),
                Action::StartTls(b) => {
                    check_replies(&b);
                    s.tls_started();
                }
                Action::Close(b) => {
                    check_replies(&b);
                    closed = true;
                    assert!(s.step().is_none(), "nothing after a close");
                    break;
                }
                Action::Message(t) => {
                    check_message(&t);
                    messages.push(t);
                    if let Action::Send(b) = s.finish(b"250 2.0.0 ok\r\n".to_vec()) {
                        check_replies(&b);
                    }
                }
            }
        }
    }
    messages
}

fn check_replies(b: &[u8]) {
    assert!(b.ends_with(b"\r\n"), "a reply ends its line");
    for line in b.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        assert!(line.len() >= 4 && line[..3].iter().all(u8::is_ascii_digit), "a reply line starts with a code");
        assert!(line[3] == b' ' || line[3] == b'-');
    }
}

fn check_message(t: &Transaction) {
    assert!(!t.recipients.is_empty() && t.recipients.len() <= LIMITS.max_recipients);
    assert!(t.data.len() <= LIMITS.max_message_bytes);
    assert!(!t.data.contains(&0));
    let mut prev = 0u8;
    for &b in &t.data {
        assert!(b != b'\n' || prev == b'\r', "bare LF handed out");
        assert!(prev != b'\r' || b == b'\n', "bare CR handed out");
        prev = b;
    }
    assert!(prev != b'\r');
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let whole = drive(input, input.len());
    let cut_up = drive(input, cut as usize % 17 + 1);
    let lower = input.to_ascii_lowercase();
    let starttls = lower.windows(8).any(|w| w == b"starttls");
    let long_line = input.split(|&b| b == b'\n').any(|l| l.len() > 4000);
    if !starttls && !long_line {
        assert_eq!(whole, cut_up, "message boundaries depend on the segmentation");
    }
});
