//! Untrusted bytes as a MailA2A message: RFC 5322/MIME parse within the limits, machine
//! part lookup, strict transfer decoding, outer hint check, every rule; plus the MIME
//! structure walk and profile detection. Invariants: a message that passes every rule
//! composes again and reads back with the same envelope bytes; reading it from a
//! buffer it may decode in (`parse_vec`) gives what reading it borrowed gives.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::envelope::ValidationContext;
use mailseal::message::{structure, Limits, MailA2aMessage};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let _ = mailseal::dispatch::detect_profile(data);
    let _ = structure(data, &limits);
    let parsed = MailA2aMessage::parse(data, &limits);
    let in_place = MailA2aMessage::parse_vec(data.to_vec(), &limits);
    match (&parsed, &in_place) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "parse and parse_vec read different messages"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("parse {:?} but parse_vec {:?}", a.is_ok(), b.is_ok()),
    }
    if let Ok(msg) = parsed {
        let violations = msg.check(&ValidationContext::default());
        if violations.is_empty() {
            let bytes = msg.to_rfc5322().expect("a valid message composes");
            let back = MailA2aMessage::parse(&bytes, &limits).expect("composed message reads back");
            assert_eq!(back.envelope_bytes(), msg.envelope_bytes());
            assert!(back.check(&ValidationContext::default()).is_empty());
        }
    }
});
