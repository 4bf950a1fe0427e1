//! Untrusted bytes as a protected envelope: strict JSON reading, then every binding
//! rule, under no profile and under MLS. Invariants: no panic; an envelope that reads
//! re-serialises to bytes that read back to the same envelope; the hand-written reader
//! agrees with serde_json (whatever we accept, serde_json reads as the same object;
//! whatever serde_json reads as an object, we accept unless we refuse it on purpose);
//! the payload tree the rules read is what serde_json reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::envelope::{validate, Envelope, EnvelopeError, ValidationContext};
use mailseal::Profile;

fuzz_target!(|data: &[u8]| {
    // serde_json gives one object key a private meaning (its RawValue token) and then
    // refuses the document; that is serde_json's quirk, so those inputs are not compared.
    let quirk = memchr_private(data);
    let theirs = serde_json::from_slice::<serde_json::Value>(data);
    match Envelope::from_json(data) {
        Ok(env) if quirk => {
            let _ = validate(&env, &ValidationContext::default());
        }
        Ok(env) => {
            let Ok(serde_json::Value::Object(map)) = &theirs else {
                panic!("we accepted what serde_json refuses: {theirs:?}");
            };
            // serde_json's map is sorted by key; ours keeps document order.
            let mut keys: Vec<&str> = env.keys().collect();
            keys.sort_unstable();
            assert!(keys.into_iter().eq(map.keys().map(String::as_str)));
            for (k, v) in map {
                assert_eq!(env.value(k).as_ref(), Some(v));
            }
            assert_eq!(env.payload_as_read().as_ref(), map.get("payload"));
            let _ = validate(&env, &ValidationContext::default());
            let _ = validate(&env, &ValidationContext::new(Some(Profile::Mls)));
            let _ = (
                env.kind(),
                env.operation(),
                env.group(),
                env.task_state(),
                env.payment_kind(),
            );
            let again =
                Envelope::from_json(&env.to_json()).expect("serialised envelope reads back");
            assert_eq!(again, env);
        }
        Err(e) => {
            if let Ok(serde_json::Value::Object(_)) = theirs {
                assert!(
                    matches!(
                        e,
                        EnvelopeError::DuplicateKey { .. } | EnvelopeError::TooDeep { .. }
                    ),
                    "serde_json reads an object we refuse: {e:?}"
                );
            }
        }
    }
});

fn memchr_private(data: &[u8]) -> bool {
    data.windows(20).any(|w| w == b"$serde_json::private")
}
