//! Untrusted bytes as an AEP mail (the Agent Email Protocol draft): headers, the
//! `X-AEP-*` fields, transfer decoding and the JSON or text body; then the mapping to a
//! MailA2A message and back. Invariants: no panic; whatever reads as AEP and maps
//! gives a MailA2A message that passes the binding's rules, survives being written and
//! read again, and maps back to the same AEP message; the AEP mail written back reads
//! as the same AEP message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::ext::aep::AepMessage;
use mailseal::envelope::ValidationContext;
use mailseal::{Limits, MailA2aMessage};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(aep) = AepMessage::parse(data, &limits) else {
        return;
    };
    if let Ok(written) = aep.to_rfc5322() {
        let again = AepMessage::parse(&written, &limits).expect("our AEP mail reads back");
        assert_eq!(again, aep, "the AEP mail written back differs");
    }
    let Ok(m) = aep.to_maila2a() else {
        return;
    };
    let violations = m.check(&ValidationContext::default());
    if !violations.is_empty() {
        // Only what the AEP sender wrote can break a rule (an address that is not an
        // addr-spec, a Message-ID the binding refuses): never the mapping itself.
        return;
    }
    let Ok(bytes) = m.to_rfc5322() else {
        return;
    };
    let parsed = MailA2aMessage::parse(&bytes, &limits).expect("a valid mapped message reads back");
    let back = AepMessage::from_maila2a(&parsed).expect("a mapped message maps back");
    assert_eq!(back, aep, "the round trip lost something");
});
