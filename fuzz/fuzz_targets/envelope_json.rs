//! Untrusted bytes as a protected envelope: strict JSON reading, then every binding
//! rule, under no profile and under MLS. Invariants: no panic; an envelope that reads
//! re-serialises to bytes that read back to the same envelope.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::envelope::{validate, Envelope, ValidationContext};
use mailseal::Profile;

fuzz_target!(|data: &[u8]| {
    if let Ok(env) = Envelope::from_json(data) {
        let _ = validate(&env, &ValidationContext::default());
        let _ = validate(&env, &ValidationContext::new(Some(Profile::Mls)));
        let _ = (env.kind(), env.operation(), env.group(), env.task_state(), env.payment_kind());
        let again = Envelope::from_json(&env.to_json()).expect("serialised envelope reads back");
        assert_eq!(again, env);
    }
});
