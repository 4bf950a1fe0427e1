//! Untrusted edge-cloud extension objects (a peer's contract, a caller's requirements,
//! a callee's receipt), split from the input at `\n--\n`. Invariants: no panic; a
//! contract that reads writes back to JSON that reads as the same contract with the
//! same digest; whenever the matcher picks a site, a receipt for that site with the
//! right digests (and an attestation reference when attestation is required)
//! verifies (the matcher and the receipt check agree); a receipt that
//! reads is checked without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::ext::edge_cloud::{
    select, sha256_tag, verify_receipt, CapabilityContract, ExecutionReceipt,
    ExecutionRequirements, Verification,
};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split_inner(b"\n--\n");
    let contract = parts.next().and_then(|b| CapabilityContract::from_json(b).ok());
    let req = parts.next().and_then(|b| ExecutionRequirements::from_json(b).ok());
    let receipt = parts.next().and_then(|b| ExecutionReceipt::from_json(b).ok());
    let result = parts.next().unwrap_or_default();
    if let Some(c) = &contract {
        let again = CapabilityContract::from_json(&serde_json::to_vec(c).unwrap())
            .expect("a contract we read writes back readable");
        assert_eq!(&again, c);
        assert_eq!(again.digest(), c.digest());
    }
    let (Some(c), Some(r)) = (&contract, &req) else {
        return;
    };
    if let Ok(site) = select(c, r) {
        let method = r
            .required_verification
            .as_ref()
            .and_then(|v| v.first().cloned())
            .unwrap_or_else(|| "sha256-result".into());
        let made = ExecutionReceipt {
            site_id: site.id.clone(),
            site_type: site.site_type,
            region: site.region.clone(),
            contract_digest: c.digest(),
            result_digest: sha256_tag(result),
            verification: Verification {
                method,
                status: "passed".into(),
            },
            // A caller that requires attestation gets a reference to check it by.
            attestation_reference: r
                .required_attestation
                .as_ref()
                .filter(|m| !m.is_empty())
                .map(|_| "attestation-1".into()),
            idempotency_key_digest: r.idempotency_key.as_ref().map(|k| sha256_tag(k.as_bytes())),
        };
        verify_receipt(&made, c, r, result).expect("a receipt for the chosen site verifies");
    }
    if let Some(rc) = &receipt {
        let _ = verify_receipt(rc, c, r, result);
    }
});

/// `split` by a multi-byte separator.
trait SplitInner {
    fn split_inner<'a>(&'a self, sep: &'a [u8]) -> SplitIter<'a>;
}

impl SplitInner for [u8] {
    fn split_inner<'a>(&'a self, sep: &'a [u8]) -> SplitIter<'a> {
        SplitIter { rest: Some(self), sep }
    }
}

struct SplitIter<'a> {
    rest: Option<&'a [u8]>,
    sep: &'a [u8],
}

impl<'a> Iterator for SplitIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        match rest.windows(self.sep.len()).position(|w| w == self.sep) {
            Some(i) => {
                self.rest = Some(&rest[i + self.sep.len()..]);
                Some(&rest[..i])
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }
}
