//! The edge-cloud capability contract extension: the schemas accept the extension's
//! own examples and refuse altered ones; the matcher picks a site only when every
//! requirement holds there, and otherwise names every reason (one case per
//! constraint, accepted and refused); a receipt is checked against the contract, the
//! request and the result, and a tampered digest is refused.

use mailseal::ext::edge_cloud::{
    receipts_in, select, sha256_tag, verify_receipt, CapabilityContract, ContractRefusal,
    EdgeCloudError, ExecutionReceipt, ExecutionRequirements, NetworkMode, ReceiptError,
    SideEffectKind, SiteRefusal, SiteType, URI,
};
use serde_json::{json, Value};

fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/data/edge-cloud/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn contract() -> CapabilityContract {
    CapabilityContract::from_json(&data("contract")).unwrap()
}

fn requirements() -> ExecutionRequirements {
    ExecutionRequirements::from_json(&data("requirements")).unwrap()
}

/// The example requirements with `patch`'s fields set (null removes one).
fn req(patch: Value) -> ExecutionRequirements {
    let mut v: Value = serde_json::from_slice(&data("requirements")).unwrap();
    for (k, x) in patch.as_object().unwrap() {
        if x.is_null() {
            v.as_object_mut().unwrap().remove(k);
        } else {
            v[k] = x.clone();
        }
    }
    ExecutionRequirements::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
}

#[test]
fn the_schemas_accept_the_extensions_own_examples() {
    let c = contract();
    assert_eq!(c.execution_sites.len(), 2);
    assert_eq!(c.side_effects.kind, SideEffectKind::ExternalWrite);
    let r = requirements();
    assert_eq!(r.network_mode, Some(NetworkMode::Offline));
    let receipt = ExecutionReceipt::from_json(&data("receipt")).unwrap();
    assert_eq!(receipt.site_type, SiteType::Edge);
    // From a request's metadata, under the extension URI.
    let metadata = json!({ URI: serde_json::from_slice::<Value>(&data("requirements")).unwrap() });
    assert_eq!(
        ExecutionRequirements::from_metadata(&metadata).unwrap(),
        Some(r)
    );
    assert_eq!(
        ExecutionRequirements::from_metadata(&json!({})).unwrap(),
        None
    );
}

#[test]
fn fail_the_schemas_refuse_unknown_fields_wrong_types_and_bad_digests() {
    let mut c: Value = serde_json::from_slice(&data("contract")).unwrap();
    c["extra"] = json!(1);
    assert!(matches!(
        CapabilityContract::from_json(&serde_json::to_vec(&c).unwrap()),
        Err(EdgeCloudError::Schema { .. })
    ));
    let mut c: Value = serde_json::from_slice(&data("contract")).unwrap();
    c["executionSites"][0]["p95LatencyMs"] = json!(0);
    assert!(CapabilityContract::from_json(&serde_json::to_vec(&c).unwrap()).is_err());
    let mut r: Value = serde_json::from_slice(&data("requirements")).unwrap();
    r["networkMode"] = json!("satellite");
    assert!(ExecutionRequirements::from_json(&serde_json::to_vec(&r).unwrap()).is_err());
    let mut rc: Value = serde_json::from_slice(&data("receipt")).unwrap();
    rc["resultDigest"] = json!("sha256:XYZ");
    let err = ExecutionReceipt::from_json(&serde_json::to_vec(&rc).unwrap()).unwrap_err();
    assert!(
        matches!(&err, EdgeCloudError::Schema { pointer, .. } if pointer == "/resultDigest"),
        "{err}"
    );
    assert!(matches!(
        CapabilityContract::from_json(b"{"),
        Err(EdgeCloudError::Json { .. })
    ));
}

/// Every case: requirements patch, then the chosen site or the refusal expected.
#[test]
fn the_matcher_enforces_every_requirement() {
    let c = contract();
    // 1. The extension's example: restricted data, edge only, offline -> the device.
    assert_eq!(select(&c, &requirements()).unwrap().id, "device");
    // 2. Public data, any site, connected, 100 ms: both fit, the lowest latency wins.
    let open = req(
        json!({"dataClassification": "public", "allowedSiteTypes": null,
        "allowedRegions": null, "maxLatencyMs": 100, "networkMode": "connected"}),
    );
    assert_eq!(select(&c, &open).unwrap().id, "device");
    // 3. Cloud only: the cloud site, though slower.
    let cloud = req(
        json!({"dataClassification": "public", "allowedSiteTypes": ["cloud"],
        "allowedRegions": null, "maxLatencyMs": 100, "networkMode": "connected"}),
    );
    assert_eq!(select(&c, &cloud).unwrap().id, "cloud-cn-hangzhou");
    // 4. Region: only cn-hangzhou allowed, restricted data -> refused (the cloud
    //    site does not take restricted data, the device is in another region).
    let err = select(
        &c,
        &req(
            json!({"allowedSiteTypes": null, "allowedRegions": ["cn-hangzhou"],
        "networkMode": "connected", "maxLatencyMs": 100}),
        ),
    )
    .unwrap_err();
    assert_eq!(
        err.sites,
        vec![
            (
                "device".to_string(),
                vec![SiteRefusal::Region("customer-premises".into())]
            ),
            (
                "cloud-cn-hangzhou".to_string(),
                vec![SiteRefusal::DataClassification("restricted".into())]
            ),
        ]
    );
    // 5. Site type refused.
    let err = select(&c, &req(json!({"allowedSiteTypes": ["cloud"]}))).unwrap_err();
    assert!(err
        .sites
        .iter()
        .any(|(id, r)| id == "device" && r.contains(&SiteRefusal::SiteType(SiteType::Edge))));
    // 6. Data classification nobody accepts.
    let err = select(
        &c,
        &req(
            json!({"dataClassification": "secret", "allowedSiteTypes": null,
        "allowedRegions": null, "networkMode": "connected", "maxLatencyMs": 100}),
        ),
    )
    .unwrap_err();
    assert_eq!(err.sites.len(), 2);
    assert!(err
        .sites
        .iter()
        .all(|(_, r)| r == &[SiteRefusal::DataClassification("secret".into())]));
    // 7. Latency: 10 ms is under every site's p95.
    let err = select(&c, &req(json!({"maxLatencyMs": 10}))).unwrap_err();
    assert!(err.sites[0].1.contains(&SiteRefusal::Latency {
        declared: 20,
        max: 10
    }));
    // 8. Latency exactly at the bound is accepted.
    assert_eq!(
        select(&c, &req(json!({"maxLatencyMs": 20}))).unwrap().id,
        "device"
    );
    // 9. Offline: the cloud site is not offline-capable.
    let err = select(
        &c,
        &req(
            json!({"dataClassification": "public", "allowedSiteTypes": ["cloud"],
        "allowedRegions": null, "maxLatencyMs": 100, "networkMode": "offline"}),
        ),
    )
    .unwrap_err();
    assert_eq!(
        err.sites,
        vec![
            (
                "device".to_string(),
                vec![SiteRefusal::SiteType(SiteType::Edge)]
            ),
            (
                "cloud-cn-hangzhou".to_string(),
                vec![SiteRefusal::NotOfflineCapable]
            ),
        ]
    );
    // 10. Degraded network: connectivity is not required to be absent, the cloud may run.
    let degraded = req(
        json!({"dataClassification": "public", "allowedSiteTypes": ["cloud"],
        "allowedRegions": null, "maxLatencyMs": 100, "networkMode": "degraded"}),
    );
    assert_eq!(select(&c, &degraded).unwrap().id, "cloud-cn-hangzhou");
    // 11. Attestation not offered: the whole contract is refused, no site considered.
    let err = select(&c, &req(json!({"requiredAttestation": ["sev-snp"]}))).unwrap_err();
    assert_eq!(
        err.contract,
        vec![ContractRefusal::AttestationUnsupported("sev-snp".into())]
    );
    assert!(err.sites.is_empty());
    // 12. Verification not offered.
    let err = select(&c, &req(json!({"requiredVerification": ["merkle-proof"]}))).unwrap_err();
    assert_eq!(
        err.contract,
        vec![ContractRefusal::VerificationUnsupported(
            "merkle-proof".into()
        )]
    );
    // 13. A side-effecting capability and no idempotency key: fail closed.
    let err = select(&c, &req(json!({"idempotencyKey": null}))).unwrap_err();
    assert_eq!(err.contract, vec![ContractRefusal::MissingIdempotencyKey]);
    // 14. Side effects without idempotency support: refused even with a key.
    let mut no_idem = c.clone();
    no_idem.side_effects.supports_idempotency_key = false;
    let err = select(&no_idem, &requirements()).unwrap_err();
    assert_eq!(
        err.contract,
        vec![ContractRefusal::SideEffectsWithoutIdempotency(
            SideEffectKind::ExternalWrite
        )]
    );
    // 15. No side effects: no key needed.
    let mut pure = c.clone();
    pure.side_effects.kind = SideEffectKind::None;
    pure.side_effects.supports_idempotency_key = false;
    assert_eq!(
        select(&pure, &req(json!({"idempotencyKey": null})))
            .unwrap()
            .id,
        "device"
    );
    // 16. Another contract version: refused.
    let mut v2 = c.clone();
    v2.version = "2.0".into();
    assert_eq!(
        select(&v2, &requirements()).unwrap_err().contract,
        vec![ContractRefusal::UnsupportedVersion("2.0".into())]
    );
    // 17. Every contract-level reason at once, none hidden behind the first.
    let err = select(
        &no_idem,
        &req(json!({"idempotencyKey": null, "requiredAttestation": ["x"]})),
    )
    .unwrap_err();
    assert_eq!(err.contract.len(), 3, "{err}");
    // 18. Several reasons for one site are all listed.
    let err = select(
        &c,
        &req(
            json!({"allowedSiteTypes": ["cloud"], "allowedRegions": ["eu"],
        "maxLatencyMs": 5}),
        ),
    )
    .unwrap_err();
    let device = &err.sites.iter().find(|(id, _)| id == "device").unwrap().1;
    assert_eq!(device.len(), 3, "{device:?}");
    // 19. Equal latencies: the first declared site, every time.
    let mut tie = c.clone();
    tie.execution_sites[1].p95_latency_ms = 20;
    tie.execution_sites[1]
        .accepted_data_classifications
        .push("restricted".into());
    tie.execution_sites[1].offline_capable = true;
    let any = req(json!({"allowedSiteTypes": null, "allowedRegions": null}));
    assert_eq!(select(&tie, &any).unwrap().id, "device");
}

fn receipt_for(c: &CapabilityContract, result: &[u8]) -> ExecutionReceipt {
    let mut r = ExecutionReceipt::from_json(&data("receipt")).unwrap();
    r.contract_digest = c.digest();
    r.result_digest = sha256_tag(result);
    r.idempotency_key_digest = Some(sha256_tag(b"task-7b9c"));
    r
}

#[test]
fn a_receipt_holds_for_its_contract_request_and_result() {
    let (c, r) = (contract(), requirements());
    let result = br#"{"artifactId":"a-1","parts":[{"text":"done"}]}"#;
    let receipt = receipt_for(&c, result);
    verify_receipt(&receipt, &c, &r, result).unwrap();
    // The digest is the canonical JSON's: member order in the source does not matter.
    let reordered: Value = serde_json::from_slice(&data("contract")).unwrap();
    let mut text = serde_json::to_string_pretty(&reordered).unwrap();
    text = text.replace("\"version\": \"1.0\",", "");
    text.insert_str(1, "\"version\": \"1.0\",");
    assert_eq!(
        CapabilityContract::from_json(text.as_bytes())
            .unwrap()
            .digest(),
        c.digest()
    );
}

#[test]
fn fail_tampered_receipts_are_refused() {
    let (c, r) = (contract(), requirements());
    let result = b"the result";
    let good = receipt_for(&c, result);
    // The result changed after the receipt was made.
    assert_eq!(
        verify_receipt(&good, &c, &r, b"the resulT"),
        Err(ReceiptError::ResultDigest)
    );
    // One digit of the result digest flipped.
    let mut t = good.clone();
    let last = t.result_digest.pop().unwrap();
    t.result_digest.push(if last == '0' { '1' } else { '0' });
    assert_eq!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::ResultDigest)
    );
    // The contract the callee evaluated is not the one published.
    let mut other = c.clone();
    other.execution_sites[0].p95_latency_ms = 1;
    assert_eq!(
        verify_receipt(&good, &other, &r, result),
        Err(ReceiptError::ContractDigest)
    );
    // A site the contract does not declare, or declared differently.
    let mut t = good.clone();
    t.site_id = "elsewhere".into();
    assert!(matches!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::UnknownSite(_))
    ));
    let mut t = good.clone();
    t.region = "cn-hangzhou".into();
    assert!(matches!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::UnknownSite(_))
    ));
    // The declared cloud site breaks the request (restricted data, offline).
    let mut t = good.clone();
    t.site_id = "cloud-cn-hangzhou".into();
    t.site_type = SiteType::Cloud;
    t.region = "cn-hangzhou".into();
    assert!(matches!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::SiteBreaksRequirements { .. })
    ));
    // Verification was required and did not pass, or passed by another method.
    let mut t = good.clone();
    t.verification.status = "failed".into();
    assert!(matches!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::VerificationFailed { .. })
    ));
    let mut t = good.clone();
    t.verification.method = "self-reported".into();
    assert!(matches!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::VerificationNotPassed { .. })
    ));
    // Another request's idempotency key.
    let mut t = good.clone();
    t.idempotency_key_digest = Some(sha256_tag(b"task-other"));
    assert_eq!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::IdempotencyKeyDigest)
    );
}

#[test]
fn fail_unsolicited_answers_a_receipt_that_ignores_the_callers_requirements() {
    // The callee answers with a receipt that leaves out what the request demanded:
    // each requirement the request stated is enforced, failing closed (contract
    // sections 5 and 6).
    let (c, r) = (contract(), requirements());
    let result = b"the result";
    let good = receipt_for(&c, result);
    verify_receipt(&good, &c, &r, result).unwrap();
    // Attestation required, no reference to check it by (absent or blank).
    for reference in [None, Some("  ".to_string())] {
        let mut t = good.clone();
        t.attestation_reference = reference;
        assert!(matches!(
            verify_receipt(&t, &c, &r, result),
            Err(ReceiptError::NoAttestationReference { .. })
        ));
    }
    // A failed verification is no receipt of success, even where the request asked
    // for none; nor is a status the contract does not define.
    let mut lenient = r.clone();
    lenient.required_verification = None;
    for status in ["failed", "PASSED", "skipped"] {
        let mut t = good.clone();
        t.verification.status = status.into();
        assert!(
            matches!(
                verify_receipt(&t, &c, &lenient, result),
                Err(ReceiptError::VerificationFailed { .. })
            ),
            "{status}"
        );
    }
    let mut t = good.clone();
    t.verification.status = "not_requested".into();
    verify_receipt(&t, &c, &lenient, result).unwrap();
    // The request carried an idempotency key: the receipt must say it answers it.
    let mut t = good.clone();
    t.idempotency_key_digest = None;
    assert_eq!(
        verify_receipt(&t, &c, &r, result),
        Err(ReceiptError::NoIdempotencyKeyDigest)
    );
    // The command line checks the same (exit 6 and the reason; exit 0 when it holds).
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: &dyn erased::Json| {
        let path = dir.path().join(name);
        std::fs::write(&path, v.json()).unwrap();
        path.display().to_string()
    };
    let contract_f = write("contract.json", &c);
    let req_f = write("requirements.json", &r);
    let result_f = dir.path().join("result.bin");
    std::fs::write(&result_f, result).unwrap();
    let check = |receipt: &ExecutionReceipt| {
        let receipt_f = write("receipt.json", receipt);
        crate::common::run(
            &[
                "edge-cloud",
                "verify-receipt",
                "--contract",
                &contract_f,
                "--requirements",
                &req_f,
                "--receipt",
                &receipt_f,
                "--result",
                result_f.to_str().unwrap(),
            ],
            b"",
        )
    };
    let out = check(&good);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut t = good.clone();
    t.attestation_reference = None;
    let out = check(&t);
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("attestationReference"));
}

/// Serialises the contract's types for the command-line check.
mod erased {
    pub trait Json {
        fn json(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap()
        }
    }
}

#[test]
fn receipts_travel_in_the_payload_and_are_read_from_it() {
    let (c, r) = (contract(), requirements());
    let result = b"artifact bytes";
    let receipt = serde_json::to_value(receipt_for(&c, result)).unwrap();
    // A SendMessageResponse whose task's final artifact carries the receipt, and a
    // response message carrying one.
    let payload = json!({"task": {"id": "t", "contextId": "c",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}], "metadata": {URI: receipt.clone()}}]}});
    let found = receipts_in(&payload).unwrap();
    assert_eq!(found.len(), 1);
    verify_receipt(&found[0], &c, &r, result).unwrap();
    let payload = json!({"message": {"messageId": "m", "role": "ROLE_AGENT",
        "parts": [{"text": "x"}], "metadata": {URI: receipt}}});
    assert_eq!(receipts_in(&payload).unwrap().len(), 1);
    assert!(receipts_in(&json!({"message": {"messageId": "m"}}))
        .unwrap()
        .is_empty());
    // A malformed receipt is an error, not silently skipped.
    let bad = json!({"message": {"metadata": {URI: {"siteId": "device"}}}});
    assert!(receipts_in(&bad).is_err());
}
