//! The A2A edge-cloud capability contract extension (v1, a2a-samples PR 649): where a
//! task may run, decided before any side effect, and the callee's receipt of where it
//! ran.
//!
//! - A callee publishes a [`CapabilityContract`] (its Agent Card's extension params).
//! - A caller attaches [`ExecutionRequirements`] to its request.
//! - [`select`] picks the site or says every reason it cannot, failing closed: the
//!   requirements are never relaxed.
//! - The callee answers with an [`ExecutionReceipt`]; [`verify_receipt`] checks it
//!   against the contract, the request and the result it describes. Inside a sealed
//!   MailA2A envelope the receipt is signed by the callee, but it stays a claim:
//!   the digests are what this module can check.
//!
//! Each object is validated against its schema (`schemas/edge-cloud/`) before it is
//! read, so an unknown field or a wrong type is refused, not ignored.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::envelope::borrowed::Tree;
use crate::envelope::schema::Schema;

/// The extension's URI (Agent Card extension, `A2A-Extensions`, metadata key).
pub const URI: &str =
    "https://github.com/a2aproject/a2a-samples/extensions/edge-cloud-capability-contract/v1";

static CONTRACT_SCHEMA: &str =
    include_str!("../../schemas/edge-cloud/capability-contract.schema.json");
static REQUIREMENTS_SCHEMA: &str =
    include_str!("../../schemas/edge-cloud/execution-requirements.schema.json");
static RECEIPT_SCHEMA: &str =
    include_str!("../../schemas/edge-cloud/execution-receipt.schema.json");

/// Why an extension object was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EdgeCloudError {
    /// The bytes are not JSON.
    #[error("{what}: not JSON: {reason}")]
    Json {
        /// Which object.
        what: &'static str,
        /// The parser's reason.
        reason: String,
    },
    /// The object breaks its schema (first violation: its JSON pointer and reason).
    #[error("{what}: {pointer}: {reason}")]
    Schema {
        /// Which object.
        what: &'static str,
        /// Where.
        pointer: String,
        /// Why.
        reason: String,
    },
}

/// A site type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SiteType {
    /// At the edge (device, premises).
    Edge,
    /// In a cloud region.
    Cloud,
}

/// What running the capability changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffectKind {
    /// Nothing.
    None,
    /// Local state.
    LocalWrite,
    /// Another system.
    ExternalWrite,
    /// The physical world.
    PhysicalAction,
}

/// The network the caller expects the task to run under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// Connected (the default).
    #[default]
    Connected,
    /// Degraded connectivity.
    Degraded,
    /// No network: only an offline-capable site may run it.
    Offline,
}

/// One place the capability can run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionSite {
    /// Its identifier.
    pub id: String,
    /// Edge or cloud.
    #[serde(rename = "type")]
    pub site_type: SiteType,
    /// Its region.
    pub region: String,
    /// Declared 95th-percentile latency.
    pub p95_latency_ms: u64,
    /// Whether it runs without a network.
    pub offline_capable: bool,
    /// The data classifications it accepts.
    pub accepted_data_classifications: Vec<String>,
}

/// The side effects of the capability.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SideEffects {
    /// What it changes.
    pub kind: SideEffectKind,
    /// Whether repeated requests with one idempotency key act once.
    pub supports_idempotency_key: bool,
}

/// A callee's capability claim (`AgentExtension.params`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilityContract {
    /// "1.0".
    pub version: String,
    /// Where it can run.
    pub execution_sites: Vec<ExecutionSite>,
    /// What it changes.
    pub side_effects: SideEffects,
    /// Attestation it can provide.
    pub attestation_methods: Vec<String>,
    /// Result verification it can provide.
    pub verification_methods: Vec<String>,
}

/// A caller's constraints (input `Message.metadata[URI]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionRequirements {
    /// The data's classification.
    pub data_classification: String,
    /// Site types allowed (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_site_types: Option<Vec<SiteType>>,
    /// Regions allowed (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_regions: Option<Vec<String>>,
    /// The most latency acceptable.
    pub max_latency_ms: u64,
    /// The network mode (connected when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_mode: Option<NetworkMode>,
    /// The idempotency key (required for side-effecting capabilities).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Attestation the callee must provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_attestation: Option<Vec<String>>,
    /// Verification the callee must provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_verification: Option<Vec<String>>,
}

/// How a receipt's result was verified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    /// The method.
    pub method: String,
    /// "passed", "failed" or "not_requested".
    pub status: String,
}

/// A callee's statement of where and how it ran (response metadata).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionReceipt {
    /// The site.
    pub site_id: String,
    /// Its type.
    pub site_type: SiteType,
    /// Its region.
    pub region: String,
    /// `sha256:` of the canonical contract evaluated.
    pub contract_digest: String,
    /// `sha256:` of the result.
    pub result_digest: String,
    /// The verification.
    pub verification: Verification,
    /// Attestation evidence to check under an independent policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation_reference: Option<String>,
    /// `sha256:` of the request's idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key_digest: Option<String>,
}

/// A compiled embedded schema. The embedded schemas compile (unit test); should one
/// not, every object of its kind is refused rather than read unchecked.
fn validator(
    schema: &'static str,
    cell: &'static OnceLock<Option<Schema>>,
) -> Option<&'static Schema> {
    cell.get_or_init(|| Schema::compile(&serde_json::from_str(schema).ok()?).ok())
        .as_ref()
}

/// Parses `bytes` as `T` after validating it against `schema`.
fn read<T: serde::de::DeserializeOwned>(
    what: &'static str,
    bytes: &[u8],
    schema: Option<&'static Schema>,
) -> Result<T, EdgeCloudError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| EdgeCloudError::Json {
            what,
            reason: e.to_string(),
        })?;
    from_value(what, value, schema)
}

fn from_value<T: serde::de::DeserializeOwned>(
    what: &'static str,
    value: serde_json::Value,
    schema: Option<&'static Schema>,
) -> Result<T, EdgeCloudError> {
    let Some(schema) = schema else {
        return Err(EdgeCloudError::Schema {
            what,
            pointer: String::new(),
            reason: "the embedded schema does not compile".into(),
        });
    };
    // The schema walks a tree over JSON text; the object is small (a card or an
    // offer), so writing it out again costs nothing worth keeping a second reader for.
    let text = value.to_string();
    let fault = Tree::parse(&text).map_or_else(
        || {
            vec![crate::envelope::schema::Fault {
                pointer: String::new(),
                reason: "not JSON".into(),
            }]
        },
        |t| schema.faults(schema.root(), t.root(), 1),
    );
    if let Some(f) = fault.into_iter().next() {
        return Err(EdgeCloudError::Schema {
            what,
            pointer: f.pointer,
            reason: f.reason,
        });
    }
    serde_json::from_value(value).map_err(|e| EdgeCloudError::Schema {
        what,
        pointer: String::new(),
        reason: e.to_string(),
    })
}

static CONTRACT: OnceLock<Option<Schema>> = OnceLock::new();
static REQUIREMENTS: OnceLock<Option<Schema>> = OnceLock::new();
static RECEIPT: OnceLock<Option<Schema>> = OnceLock::new();

impl CapabilityContract {
    /// Reads and validates a contract (JSON).
    pub fn from_json(bytes: &[u8]) -> Result<Self, EdgeCloudError> {
        read(
            "capability contract",
            bytes,
            validator(CONTRACT_SCHEMA, &CONTRACT),
        )
    }
    /// The digest a receipt's `contractDigest` must carry: `sha256:` of the contract's
    /// canonical JSON (RFC 8785: members sorted, no whitespace; the schema has no
    /// fractional numbers).
    pub fn digest(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or_default();
        sha256_tag(&canonical(&value))
    }
}

impl ExecutionRequirements {
    /// Reads and validates requirements (JSON).
    pub fn from_json(bytes: &[u8]) -> Result<Self, EdgeCloudError> {
        read(
            "execution requirements",
            bytes,
            validator(REQUIREMENTS_SCHEMA, &REQUIREMENTS),
        )
    }
    /// The requirements in a request's `Message.metadata` (under [`URI`]), if any.
    pub fn from_metadata(metadata: &serde_json::Value) -> Result<Option<Self>, EdgeCloudError> {
        match metadata.get(URI) {
            None => Ok(None),
            Some(v) => from_value(
                "execution requirements",
                v.clone(),
                validator(REQUIREMENTS_SCHEMA, &REQUIREMENTS),
            )
            .map(Some),
        }
    }
}

impl ExecutionReceipt {
    /// Reads and validates a receipt (JSON).
    pub fn from_json(bytes: &[u8]) -> Result<Self, EdgeCloudError> {
        read(
            "execution receipt",
            bytes,
            validator(RECEIPT_SCHEMA, &RECEIPT),
        )
    }
}

/// The receipts an A2A payload carries under [`URI`]: in a response `Message`'s
/// metadata, or in the metadata of a final `Artifact` (of a `Task`, or of an artifact
/// update event). In a sealed MailA2A envelope they are signed by the callee. A
/// receipt that breaks its schema is an error, not skipped.
pub fn receipts_in(payload: &serde_json::Value) -> Result<Vec<ExecutionReceipt>, EdgeCloudError> {
    let mut holders: Vec<&serde_json::Value> = Vec::new();
    holders.extend(payload.get("message"));
    holders.extend(payload.pointer("/statusUpdate/status/message"));
    holders.extend(payload.pointer("/task/status/message"));
    holders.extend(payload.pointer("/artifactUpdate/artifact"));
    for task in [payload.get("task"), Some(payload)].into_iter().flatten() {
        if let Some(serde_json::Value::Array(artifacts)) = task.get("artifacts") {
            holders.extend(artifacts.iter());
        }
    }
    let mut out = Vec::new();
    for h in holders {
        if let Some(r) = h.get("metadata").and_then(|m| m.get(URI)) {
            out.push(from_value(
                "execution receipt",
                r.clone(),
                validator(RECEIPT_SCHEMA, &RECEIPT),
            )?);
        }
    }
    Ok(out)
}

/// `sha256:` and the lower-case hex digest of `bytes`.
pub fn sha256_tag(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::keystore::hex(&Sha256::digest(bytes)))
}

/// RFC 8785 canonical JSON (the one JCS implementation, shared with Agent Card
/// signatures).
fn canonical(v: &serde_json::Value) -> Vec<u8> {
    let mut out = Vec::new();
    crate::jws::compact::jcs(v, &mut out);
    out
}

/// Why the contract as a whole cannot serve the requirements.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContractRefusal {
    /// The contract's version is not "1.0".
    UnsupportedVersion(String),
    /// A required attestation method the contract does not offer.
    AttestationUnsupported(String),
    /// A required verification method the contract does not offer.
    VerificationUnsupported(String),
    /// The capability has side effects but no idempotency-key support: fail closed.
    SideEffectsWithoutIdempotency(SideEffectKind),
    /// The capability has side effects and the request carries no idempotency key.
    MissingIdempotencyKey,
}

/// Why one site cannot run the task.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SiteRefusal {
    /// Its type is not among the allowed ones.
    SiteType(SiteType),
    /// Its region is not among the allowed ones.
    Region(String),
    /// It does not accept the data's classification.
    DataClassification(String),
    /// Its declared p95 latency is over the maximum.
    Latency {
        /// Declared.
        declared: u64,
        /// Allowed.
        max: u64,
    },
    /// The request is offline and the site is not offline-capable.
    NotOfflineCapable,
}

/// Every reason no site was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// What the contract as a whole lacks (then no site was considered).
    pub contract: Vec<ContractRefusal>,
    /// Per site (by id), what it lacks.
    pub sites: Vec<(String, Vec<SiteRefusal>)>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.contract.is_empty() {
            return write!(
                f,
                "the contract cannot serve the request: {:?}",
                self.contract
            );
        }
        write!(f, "no execution site satisfies every requirement:")?;
        for (id, reasons) in &self.sites {
            write!(f, " {id}: {reasons:?};")?;
        }
        Ok(())
    }
}

/// The site to run on: every requirement holds there, and among those sites the one
/// with the lowest declared p95 latency (the first declared on a tie). Otherwise
/// every reason, before any side effect.
pub fn select<'c>(
    contract: &'c CapabilityContract,
    req: &ExecutionRequirements,
) -> Result<&'c ExecutionSite, Refusal> {
    let mut whole = Vec::new();
    if contract.version != "1.0" {
        whole.push(ContractRefusal::UnsupportedVersion(
            contract.version.clone(),
        ));
    }
    for m in req.required_attestation.iter().flatten() {
        if !contract.attestation_methods.contains(m) {
            whole.push(ContractRefusal::AttestationUnsupported(m.clone()));
        }
    }
    for m in req.required_verification.iter().flatten() {
        if !contract.verification_methods.contains(m) {
            whole.push(ContractRefusal::VerificationUnsupported(m.clone()));
        }
    }
    if contract.side_effects.kind != SideEffectKind::None {
        if !contract.side_effects.supports_idempotency_key {
            whole.push(ContractRefusal::SideEffectsWithoutIdempotency(
                contract.side_effects.kind,
            ));
        }
        if req.idempotency_key.as_deref().is_none_or(str::is_empty) {
            whole.push(ContractRefusal::MissingIdempotencyKey);
        }
    }
    if !whole.is_empty() {
        return Err(Refusal {
            contract: whole,
            sites: Vec::new(),
        });
    }
    let mut refused = Vec::new();
    let mut best: Option<&ExecutionSite> = None;
    for site in &contract.execution_sites {
        let reasons = site_refusals(site, req);
        if reasons.is_empty() {
            if best.is_none_or(|b| site.p95_latency_ms < b.p95_latency_ms) {
                best = Some(site);
            }
        } else {
            refused.push((site.id.clone(), reasons));
        }
    }
    best.ok_or(Refusal {
        contract: Vec::new(),
        sites: refused,
    })
}

fn site_refusals(site: &ExecutionSite, req: &ExecutionRequirements) -> Vec<SiteRefusal> {
    let mut out = Vec::new();
    if let Some(types) = &req.allowed_site_types {
        if !types.contains(&site.site_type) {
            out.push(SiteRefusal::SiteType(site.site_type));
        }
    }
    if let Some(regions) = &req.allowed_regions {
        if !regions.contains(&site.region) {
            out.push(SiteRefusal::Region(site.region.clone()));
        }
    }
    if !site
        .accepted_data_classifications
        .contains(&req.data_classification)
    {
        out.push(SiteRefusal::DataClassification(
            req.data_classification.clone(),
        ));
    }
    if site.p95_latency_ms > req.max_latency_ms {
        out.push(SiteRefusal::Latency {
            declared: site.p95_latency_ms,
            max: req.max_latency_ms,
        });
    }
    if req.network_mode == Some(NetworkMode::Offline) && !site.offline_capable {
        out.push(SiteRefusal::NotOfflineCapable);
    }
    out
}

/// Why a receipt does not hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptError {
    /// `contractDigest` is not the digest of the contract the request was evaluated
    /// against.
    #[error("the receipt's contractDigest is not the evaluated contract's")]
    ContractDigest,
    /// `resultDigest` is not the digest of the result.
    #[error("the receipt's resultDigest is not the result's")]
    ResultDigest,
    /// The site is not one the contract declares (id, type and region).
    #[error("the receipt names site {0}, which the contract does not declare")]
    UnknownSite(String),
    /// The site breaks the request's requirements.
    #[error("the receipt's site {site} breaks the requirements: {reasons:?}")]
    SiteBreaksRequirements {
        /// The site.
        site: String,
        /// Why.
        reasons: Vec<SiteRefusal>,
    },
    /// Verification was required and the receipt does not say it passed with a
    /// required method.
    #[error("verification {method} was required; the receipt says {status} with {got}")]
    VerificationNotPassed {
        /// The required method.
        method: String,
        /// The receipt's method.
        got: String,
        /// The receipt's status.
        status: String,
    },
    /// `idempotencyKeyDigest` is not the digest of the request's key.
    #[error("the receipt's idempotencyKeyDigest is not the request's key")]
    IdempotencyKeyDigest,
    /// The request carried an idempotency key and the receipt does not say which
    /// request it answers (no `idempotencyKeyDigest`).
    #[error("the request carried an idempotency key; the receipt has no idempotencyKeyDigest")]
    NoIdempotencyKeyDigest,
    /// The receipt says its verification failed (or has a status the contract does
    /// not define): never a receipt of a successful execution.
    #[error("the receipt's verification {method} has status {status}, not passed")]
    VerificationFailed {
        /// The receipt's method.
        method: String,
        /// The receipt's status.
        status: String,
    },
    /// Attestation was required and the receipt carries no `attestationReference`
    /// to check it by.
    #[error("attestation {methods:?} was required; the receipt has no attestationReference")]
    NoAttestationReference {
        /// The required methods.
        methods: Vec<String>,
    },
}

/// Checks `receipt` for the request `req` evaluated against `contract`, whose result
/// is `result` (the exact representation the verification method digests; for
/// `sha256-result`, the result's bytes).
pub fn verify_receipt(
    receipt: &ExecutionReceipt,
    contract: &CapabilityContract,
    req: &ExecutionRequirements,
    result: &[u8],
) -> Result<(), ReceiptError> {
    if receipt.contract_digest != contract.digest() {
        return Err(ReceiptError::ContractDigest);
    }
    if receipt.result_digest != sha256_tag(result) {
        return Err(ReceiptError::ResultDigest);
    }
    let site = contract
        .execution_sites
        .iter()
        .find(|s| {
            s.id == receipt.site_id
                && s.site_type == receipt.site_type
                && s.region == receipt.region
        })
        .ok_or_else(|| ReceiptError::UnknownSite(receipt.site_id.clone()))?;
    let reasons = site_refusals(site, req);
    if !reasons.is_empty() {
        return Err(ReceiptError::SiteBreaksRequirements {
            site: site.id.clone(),
            reasons,
        });
    }
    // A receipt is evidence of a successful execution: a failed verification (or a
    // status the contract does not define) never is, whatever the request asked.
    if !matches!(
        receipt.verification.status.as_str(),
        "passed" | "not_requested"
    ) {
        return Err(ReceiptError::VerificationFailed {
            method: receipt.verification.method.clone(),
            status: receipt.verification.status.clone(),
        });
    }
    for method in req.required_verification.iter().flatten() {
        if receipt.verification.method != *method || receipt.verification.status != "passed" {
            return Err(ReceiptError::VerificationNotPassed {
                method: method.clone(),
                got: receipt.verification.method.clone(),
                status: receipt.verification.status.clone(),
            });
        }
    }
    // Every requirement the request stated holds, failing closed (sections 5 and 6):
    // required attestation needs a reference an independent policy can check.
    if let Some(methods) = req.required_attestation.as_ref().filter(|m| !m.is_empty()) {
        if receipt
            .attestation_reference
            .as_deref()
            .is_none_or(|r| r.trim().is_empty())
        {
            return Err(ReceiptError::NoAttestationReference {
                methods: methods.clone(),
            });
        }
    }
    match (&req.idempotency_key, &receipt.idempotency_key_digest) {
        (Some(key), Some(digest)) if *digest != sha256_tag(key.as_bytes()) => {
            return Err(ReceiptError::IdempotencyKeyDigest)
        }
        (Some(_), None) => return Err(ReceiptError::NoIdempotencyKeyDigest),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_schemas_compile() {
        for schema in [CONTRACT_SCHEMA, REQUIREMENTS_SCHEMA, RECEIPT_SCHEMA] {
            let v: serde_json::Value = serde_json::from_str(schema).unwrap();
            Schema::compile(&v).unwrap();
        }
    }

    #[test]
    fn canonical_json_sorts_members_and_drops_whitespace() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{ "b": [1, {"d": true, "c": "x"}], "a": null }"#).unwrap();
        assert_eq!(canonical(&v), br#"{"a":null,"b":[1,{"c":"x","d":true}]}"#);
    }
}
