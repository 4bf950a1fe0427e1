//! Agent Card key discovery (DESIGN decision 11): the MailA2A interface and the
//! `#protection` extension of an A2A v1.0 Agent Card, written for our keys and read
//! from a peer's card.
//!
//! The interface is `{"url": "mailto:ADDR", "protocolBinding": BINDING_URI,
//! "protocolVersion": "1.0"}`. The extension is an `AgentExtension` whose `uri` is
//! [`PROTECTION_URI`] and whose `params` are:
//!
//! ```json
//! {
//!   "profiles": ["smime-4", "openpgp-mime", "mls"],
//!   "minimumProtection": "signed-encrypted",
//!   "smimeCertificates": ["-----BEGIN CERTIFICATE-----\n..."],
//!   "openpgpCertificates": ["-----BEGIN PGP PUBLIC KEY BLOCK-----\n..."],
//!   "mlsKeyPackages": ["AAEABQ..."]
//! }
//! ```
//!
//! `profiles` uses the tokens of MailA2A section 9 (`smime-4`, `openpgp-mime`) and
//! `mls` for the group profile. `minimumProtection` is the weakest protection the agent
//! sends and accepts for effectful operations: a receiver that imported the card
//! refuses anything weaker from that agent as a downgrade, and a sender sealing to it
//! never goes below it. S/MIME certificates are PEM, OpenPGP certificates ASCII armor,
//! MLS KeyPackages standard base64 of the MLSMessage (last-resort KeyPackages, so one
//! card serves many groups).
//!
//! Every key a card carries must belong to the card's address: a certificate's
//! rfc822Name, an OpenPGP User ID's email, a KeyPackage's credential identity. A card
//! cannot introduce keys for anyone else. Signatures (`signatures`, JWS, see
//! [`super::jws`]) are verified when present; one that does not verify refuses the
//! card. Who the signer is and how far the store trusts it is reported.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use der::{Decode, DecodePem, Encode};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use x509_cert::Certificate;

use super::jws::{self, JwsAlgorithm, PublicKey};
use crate::envelope::BINDING_URI;
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::{EntryKind, KeyEntry, KeyStore, KeyStoreError};
use crate::mls::MlsError;
use crate::profile::Protection;

/// The `uri` of the extension that carries an agent's protection profiles and keys.
pub const PROTECTION_URI: &str = "https://kotoba-lang.github.io/mail-a2a/spec/v1/#protection";

/// The largest card read (a card is a manifest, not a key ring).
pub const MAX_CARD_BYTES: usize = 1 << 20;

/// The most keys of one kind a card may carry.
pub const MAX_KEYS_PER_KIND: usize = 16;

/// Profile token of S/MIME 4.0 (MailA2A 9.2).
pub const SMIME_TOKEN: &str = "smime-4";
/// Profile token of OpenPGP/MIME (MailA2A 9.2).
pub const OPENPGP_TOKEN: &str = "openpgp-mime";
/// Profile token of the MLS group profile (MailA2A 9.3).
pub const MLS_TOKEN: &str = "mls";

/// Why a card could not be written, read or imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CardError {
    /// The card is not UTF-8 JSON, is nested too deep, or is larger than
    /// [`MAX_CARD_BYTES`].
    #[error("agent card is not JSON: {0}")]
    NotJson(String),
    /// The card is not a valid A2A v1.0 AgentCard (the strict schema of
    /// `schemas/a2a-v1.0.1.strict.schema.json`).
    #[error("agent card is not a valid A2A v1.0 AgentCard: at `{pointer}`: {reason}")]
    Schema {
        /// JSON pointer of the first violation.
        pointer: String,
        /// The schema's reason.
        reason: String,
    },
    /// No MailA2A interface, several for different addresses, a `url` that is not a
    /// `mailto:` URI with one address, or a binding version other than 1.0.
    #[error("agent card: {0}")]
    Interface(String),
    /// The `#protection` extension is absent, repeated, or its params are not as this
    /// binding defines them.
    #[error("agent card #protection extension: {0}")]
    Protection(String),
    /// A key the card carries does not decode, or carries secret key material.
    #[error("agent card {what}: {reason}")]
    Key {
        /// Which key.
        what: String,
        /// Why (never key material).
        reason: String,
    },
    /// A key the card carries belongs to another address than the card's mailbox.
    #[error("agent card of {address}: its {what} is for {named}, not for the card's address")]
    ForeignKey {
        /// The card's address.
        address: String,
        /// Which key.
        what: String,
        /// The address(es) it names.
        named: String,
    },
    /// A signature is malformed, uses an algorithm that is not accepted, or names no
    /// key to check it with.
    #[error("agent card signature {index}: {reason}")]
    SignatureMalformed {
        /// Its position in `signatures`.
        index: usize,
        /// Why.
        reason: String,
    },
    /// A signature does not verify: the card changed after it was signed, or the
    /// certificate in `x5c` was altered.
    #[error("agent card signature {index} does not verify: the card is not as it was signed")]
    SignatureInvalid {
        /// Its position in `signatures`.
        index: usize,
    },
    /// A signature by a trusted key was required and the card has none.
    #[error("agent card of {0} has no signature by a key this store trusts (pinned certificate or trust anchor)")]
    Untrusted(String),
    /// The store holds nothing to publish for the address.
    #[error("no certificate, OpenPGP key or MLS identity of {0} in the store to publish")]
    NothingToPublish(String),
    /// Signing the card failed.
    #[error("agent card signing: {0}")]
    Sign(String),
    /// The key store failed.
    #[error(transparent)]
    Store(#[from] KeyStoreError),
    /// The MLS state failed (making a KeyPackage).
    #[error(transparent)]
    Mls(#[from] MlsError),
}

impl Classify for CardError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Store(_) | Self::Sign(_) | Self::Mls(_) => A2aErrorType::InternalError,
            _ => A2aErrorType::InvalidParamsError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotJson(_)
            | Self::Schema { .. }
            | Self::Interface(_)
            | Self::Protection(_)
            | Self::Key { .. }
            | Self::SignatureMalformed { .. } => ErrorKind::Malformed,
            Self::SignatureInvalid { .. } => ErrorKind::Authentication,
            Self::ForeignKey { .. } | Self::Untrusted(_) => ErrorKind::Policy,
            Self::NothingToPublish(_) => ErrorKind::NoUsableKey,
            Self::Sign(_) => ErrorKind::NoUsableKey,
            Self::Store(e) => e.kind(),
            Self::Mls(e) => e.kind(),
        }
    }
}

/// What an agent publishes in its card's `#protection` extension.
#[derive(Clone, Debug)]
pub struct Published {
    /// S/MIME certificates, DER.
    pub smime_certificates: Vec<Vec<u8>>,
    /// OpenPGP certificates, ASCII armored, without secret key material.
    pub openpgp_certificates: Vec<Vec<u8>>,
    /// MLS KeyPackages (MLSMessage bytes).
    pub mls_key_packages: Vec<Vec<u8>>,
    /// The weakest protection the agent sends and accepts for effectful operations.
    pub minimum: Protection,
    /// The resource limits it enforces, if published.
    pub limits: Option<CardLimits>,
}

/// The resource limits an agent publishes (MailA2A section 11: "Agent Cards SHOULD
/// publish maximum decoded message size, MIME part count, ... buffered reorder
/// window, expiry horizon"), in the `#protection` params as `limits`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardLimits {
    /// Largest raw message accepted, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u64>,
    /// Most transfer-decoded bytes over all parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_decoded_bytes: Option<u64>,
    /// Most MIME parts, containers included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mime_parts: Option<u64>,
    /// Deepest MIME nesting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mime_depth: Option<u64>,
    /// Deepest JSON nesting of the envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_json_depth: Option<u64>,
    /// MLS messages buffered per group while they wait for a Commit (the reorder
    /// window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_held_messages: Option<u64>,
    /// How long a message without `expiresAt` is accepted after its `createdAt`,
    /// seconds (the expiry horizon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_horizon_seconds: Option<u64>,
    /// Clock skew allowed on `createdAt` and `expiresAt`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<u64>,
}

impl CardLimits {
    /// What this build enforces with its default configuration.
    pub fn enforced() -> CardLimits {
        let l = crate::message::Limits::default();
        let r = crate::replay::ReceiverPolicy::default();
        CardLimits {
            max_message_bytes: Some(l.max_message_bytes as u64),
            max_decoded_bytes: Some(l.max_decoded_bytes as u64),
            max_mime_parts: Some(l.max_parts as u64),
            max_mime_depth: Some(l.max_mime_depth as u64),
            max_json_depth: Some(l.max_json_depth as u64),
            max_held_messages: Some(crate::mls::MlsConfig::default().max_held as u64),
            expiry_horizon_seconds: u64::try_from(r.default_lifetime).ok(),
            clock_skew_seconds: u64::try_from(r.skew).ok(),
        }
    }
}

impl Published {
    /// Our certificates for `address` in `store`: the S/MIME certificates and OpenPGP
    /// certificates whose private keys the store holds (public parts only). MLS
    /// KeyPackages are added by the caller, which owns the MLS state.
    pub fn from_store(store: &dyn KeyStore, address: &str) -> Result<Published, CardError> {
        let address = address.trim().to_ascii_lowercase();
        let smime_certificates = store
            .own_certificates()?
            .into_iter()
            .filter(|c| c.emails.contains(&address))
            .map(|c| c.der)
            .collect();
        let own_openpgp: Vec<String> = store
            .list()?
            .into_iter()
            .filter(|e| {
                e.kind == EntryKind::OpenPgpCertificate
                    && e.has_private_key
                    && e.emails.contains(&address)
            })
            .map(|e| e.fingerprint)
            .collect();
        let mut openpgp_certificates = Vec::new();
        for cert in store.openpgp_certificates()? {
            let Some(parsed) = crate::keystore::openpgp::parse_stored(&cert) else {
                continue;
            };
            if own_openpgp.contains(&crate::keystore::openpgp::fingerprint(&parsed)) {
                openpgp_certificates.push(crate::keystore::openpgp::armored_certificate(&cert)?);
            }
        }
        Ok(Published {
            smime_certificates,
            openpgp_certificates,
            mls_key_packages: Vec::new(),
            minimum: Protection::Signed,
            limits: Some(CardLimits::enforced()),
        })
    }

    /// Whether there is nothing to publish.
    pub fn is_empty(&self) -> bool {
        self.smime_certificates.is_empty()
            && self.openpgp_certificates.is_empty()
            && self.mls_key_packages.is_empty()
    }

    fn params(&self) -> Value {
        let mut profiles = Vec::new();
        let mut params = Map::new();
        if !self.smime_certificates.is_empty() {
            profiles.push(SMIME_TOKEN);
            let pems: Vec<String> = self
                .smime_certificates
                .iter()
                .map(|der| {
                    der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, der)
                        .unwrap_or_default()
                })
                .collect();
            params.insert("smimeCertificates".into(), json!(pems));
        }
        if !self.openpgp_certificates.is_empty() {
            profiles.push(OPENPGP_TOKEN);
            let armored: Vec<String> = self
                .openpgp_certificates
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            params.insert("openpgpCertificates".into(), json!(armored));
        }
        if !self.mls_key_packages.is_empty() {
            profiles.push(MLS_TOKEN);
            let kps: Vec<String> = self
                .mls_key_packages
                .iter()
                .map(|k| STANDARD.encode(k))
                .collect();
            params.insert("mlsKeyPackages".into(), json!(kps));
        }
        params.insert("profiles".into(), json!(profiles));
        params.insert("minimumProtection".into(), json!(self.minimum.token()));
        if let Some(l) = &self.limits {
            params.insert("limits".into(), serde_json::to_value(l).unwrap_or_default());
        }
        Value::Object(params)
    }
}

/// The descriptive fields of a card `mailseal card` writes (each keeps the given
/// card's value when `None`).
#[derive(Clone, Debug, Default)]
pub struct CardFields {
    /// `name` (default: the address).
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `version` of the agent (default "1.0.0").
    pub version: Option<String>,
}

/// `mailto:` + the address, with the characters RFC 6068 does not allow bare in an
/// addr-spec percent-encoded.
pub fn mailto(address: &str) -> String {
    let mut url = String::from("mailto:");
    for b in address.bytes() {
        let c = b as char;
        if c.is_ascii_alphanumeric() || "-._~!$'()*+;:@".contains(c) {
            url.push(c);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// The address of a `mailto:` URI with exactly one addr-spec, no header fields (no
/// pre-filled body, MailA2A section 3), lower case.
pub fn address_of_mailto(url: &str) -> Result<String, CardError> {
    let bad = |why: &str| CardError::Interface(format!("MailA2A interface url: {why}"));
    let rest = url
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("mailto:"))
        .map(|_| &url[7..])
        .ok_or_else(|| bad("not a mailto: URI"))?;
    if rest.contains('?') {
        return Err(bad("a mailto: URI with header fields (MailA2A 3: none)"));
    }
    if rest.contains(',') {
        return Err(bad("more than one address"));
    }
    let mut bytes = Vec::with_capacity(rest.len());
    let raw = rest.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hex = rest
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("a broken percent-encoding"))?;
            bytes.push(hex);
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    let address = String::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    if address.contains(',') {
        return Err(bad("more than one address"));
    }
    let mailbox = crate::message::Mailbox::new(&address);
    if mailbox.name.is_some() || mailbox.address != address || !mailbox.is_valid_addr_spec() {
        return Err(bad("not one addr-spec"));
    }
    Ok(mailbox.normalized())
}

fn mail_interface(address: &str) -> Value {
    json!({
        "url": mailto(address),
        "protocolBinding": BINDING_URI,
        "protocolVersion": crate::envelope::BINDING_VERSION,
    })
}

fn default_skill() -> Value {
    json!({
        "id": "maila2a",
        "name": "MailA2A",
        "description": "Receives A2A requests as end-to-end protected email (MailA2A binding 1.0) and answers in the same thread.",
        "tags": ["maila2a", "email", "a2a"],
    })
}

/// Moves the A2A v0.3 members a card may still carry to their v1.0 places, noting
/// each change.
fn migrate_v03(card: &mut Map<String, Value>, notes: &mut Vec<String>) {
    let old_version = card.remove("protocolVersion");
    if let Some(v) = &old_version {
        notes.push(format!(
            "dropped the card-level protocolVersion {v} (A2A v1.0 puts it on each interface)"
        ));
    }
    let version = old_version
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or("0.3")
        .to_string();
    let mut moved = Vec::new();
    if let Some(Value::String(url)) = card.remove("url") {
        let binding = match card.remove("preferredTransport") {
            Some(Value::String(t)) => t,
            _ => "JSONRPC".to_string(),
        };
        moved.push(json!({"url": url, "protocolBinding": binding, "protocolVersion": version}));
    }
    if let Some(Value::Array(extra)) = card.remove("additionalInterfaces") {
        for i in extra {
            if let (Some(url), Some(t)) = (
                i.get("url").and_then(Value::as_str),
                i.get("transport").and_then(Value::as_str),
            ) {
                moved.push(json!({"url": url, "protocolBinding": t, "protocolVersion": version}));
            }
        }
    }
    if !moved.is_empty() {
        notes.push(format!(
            "moved {} v0.3 interface(s) (url, additionalInterfaces) into supportedInterfaces",
            moved.len()
        ));
        let list = card
            .entry("supportedInterfaces")
            .or_insert_with(|| json!([]));
        if let Value::Array(list) = list {
            for m in moved {
                if !list.contains(&m) {
                    list.push(m);
                }
            }
        }
    }
    if let Some(Value::Bool(b)) = card.remove("supportsAuthenticatedExtendedCard") {
        notes.push(
            "moved supportsAuthenticatedExtendedCard to capabilities.extendedAgentCard".into(),
        );
        if let Some(Value::Object(caps)) = card.get_mut("capabilities") {
            caps.insert("extendedAgentCard".into(), Value::Bool(b));
        }
    }
}

/// Writes a complete A2A v1.0 Agent Card for `address` with the MailA2A interface
/// and the `#protection` extension of `published`, or adds them to `base` (a card's
/// JSON). Returns the card and notes on what was changed in `base` beyond that (v0.3
/// members moved, required members filled in, signatures dropped because the card
/// changed). The result is checked against the A2A v1.0 schema.
pub fn write_card(
    base: Option<&[u8]>,
    address: &str,
    fields: &CardFields,
    published: &Published,
) -> Result<(Value, Vec<String>), CardError> {
    let address = address.trim().to_ascii_lowercase();
    let own = mailto(&address);
    if address_of_mailto(&own).ok().as_deref() != Some(address.as_str()) {
        return Err(CardError::Interface(format!(
            "`{address}` is not one addr-spec"
        )));
    }
    let mut notes = Vec::new();
    let mut card = match base {
        None => Map::new(),
        Some(bytes) => match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(CardError::NotJson("the card is not a JSON object".into())),
            Err(e) => return Err(CardError::NotJson(e.to_string())),
        },
    };
    let given = base.is_some();
    if !matches!(card.get("capabilities"), Some(Value::Object(_))) {
        card.insert("capabilities".into(), json!({}));
    }
    migrate_v03(&mut card, &mut notes);
    if let Some(Value::Array(sigs)) = card.remove("signatures") {
        if !sigs.is_empty() {
            notes.push(format!(
                "dropped {} signature(s): the card changed (sign it again with --sign)",
                sigs.len()
            ));
        }
    }

    // The interface: ours replaces any MailA2A interface for another address.
    let interfaces = card
        .entry("supportedInterfaces")
        .or_insert_with(|| json!([]));
    if !interfaces.is_array() {
        *interfaces = json!([]);
    }
    if let Value::Array(list) = interfaces {
        let before = list.len();
        list.retain(|i| {
            i.get("protocolBinding").and_then(Value::as_str) != Some(BINDING_URI)
                || i.get("url").and_then(Value::as_str) == Some(own.as_str())
        });
        if list.len() != before {
            notes.push("replaced the MailA2A interface of another address".into());
        }
        match list
            .iter_mut()
            .find(|i| i.get("protocolBinding").and_then(Value::as_str) == Some(BINDING_URI))
        {
            Some(existing) => *existing = mail_interface(&address),
            None => list.push(mail_interface(&address)),
        }
    }

    // The extension: ours replaces any earlier #protection.
    let extension = json!({
        "uri": PROTECTION_URI,
        "description": "MailA2A protection profiles and public keys: seal to these, expect at least minimumProtection.",
        "required": false,
        "params": published.params(),
    });
    if let Some(Value::Object(caps)) = card.get_mut("capabilities") {
        let list = caps.entry("extensions").or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        if let Value::Array(list) = list {
            list.retain(|e| e.get("uri").and_then(Value::as_str) != Some(PROTECTION_URI));
            list.push(extension);
        }
    }

    // The members A2A v1.0 requires.
    let mut set = |key: &str, value: Option<&String>, default: Value, note: bool| {
        let empty = match card.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        match value {
            Some(v) => {
                card.insert(key.into(), Value::String(v.clone()));
            }
            None if empty => {
                if note && given {
                    notes.push(format!(
                        "added the required `{key}` (it was missing or empty)"
                    ));
                }
                card.insert(key.into(), default);
            }
            None => {}
        }
    };
    set("name", fields.name.as_ref(), json!(address), true);
    set(
        "description",
        fields.description.as_ref(),
        json!(format!(
            "A2A agent reachable by protected email at {address} (MailA2A)"
        )),
        true,
    );
    set("version", fields.version.as_ref(), json!("1.0.0"), true);
    set(
        "defaultInputModes",
        None,
        json!(["application/json", "text/plain"]),
        true,
    );
    set(
        "defaultOutputModes",
        None,
        json!(["application/json", "text/plain"]),
        true,
    );
    set("skills", None, json!([default_skill()]), true);

    let card = Value::Object(card);
    check_schema(&card)?;
    Ok((card, notes))
}

/// The card as pretty JSON, its members in the order the A2A v1.0 AgentCard defines
/// them (name first, signatures last) rather than alphabetically.
pub fn to_pretty_json(card: &Value) -> Vec<u8> {
    const ORDER: [&str; 14] = [
        "name",
        "description",
        "supportedInterfaces",
        "provider",
        "version",
        "documentationUrl",
        "capabilities",
        "securitySchemes",
        "securityRequirements",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
        "signatures",
        "iconUrl",
    ];
    let Value::Object(members) = card else {
        return serde_json::to_vec_pretty(card).unwrap_or_default();
    };
    let mut keys: Vec<&String> = ORDER
        .iter()
        .filter_map(|k| members.get_key_value(*k).map(|(k, _)| k))
        .collect();
    keys.extend(members.keys().filter(|k| !ORDER.contains(&k.as_str())));
    let mut out = String::from("{\n");
    for (i, k) in keys.iter().enumerate() {
        let value = serde_json::to_string_pretty(&members[k.as_str()]).unwrap_or_default();
        out.push_str("  ");
        out.push_str(&Value::String((*k).clone()).to_string());
        out.push_str(": ");
        out.push_str(&value.replace('\n', "\n  "));
        out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
    }
    out.push_str("}\n");
    out.into_bytes()
}

/// The card against the strict A2A v1.0 AgentCard schema.
fn check_schema(card: &Value) -> Result<(), CardError> {
    check_schema_text(&card.to_string())
}

fn check_schema_text(text: &str) -> Result<(), CardError> {
    let faults = crate::envelope::check_a2a_json(text, "AgentCard", 1)
        .ok_or_else(|| CardError::NotJson("not JSON, or nested too deep".into()))?;
    match faults.into_iter().next() {
        None => Ok(()),
        Some((pointer, reason)) => Err(CardError::Schema {
            pointer: if pointer.is_empty() {
                "/".into()
            } else {
                pointer
            },
            reason: reason
                .strip_prefix("not a valid A2A v1.0 AgentCard: ")
                .map(str::to_string)
                .unwrap_or(reason),
        }),
    }
}

/// Signs `card` (adds one entry to `signatures`) with our S/MIME key for `address`:
/// ES256 (P-256), ES384 (P-384), RS256 (RSA) or EdDSA (Ed25519), the certificate in
/// `x5c` and its fingerprint as `kid`, so a peer checks the card with the same
/// certificate it checks our mail with.
pub fn sign_card(card: &mut Value, store: &dyn KeyStore, address: &str) -> Result<(), CardError> {
    let address = address.trim().to_ascii_lowercase();
    let mut chosen = None;
    for c in store.own_certificates()? {
        if !c.emails.contains(&address) {
            continue;
        }
        let cert = Certificate::from_der(&c.der)
            .map_err(|e| CardError::Sign(format!("our certificate: {e}")))?;
        let key = PublicKey::from_spki(cert.tbs_certificate().subject_public_key_info());
        let alg = match key {
            Some(PublicKey::P256(_)) => JwsAlgorithm::Es256,
            Some(PublicKey::P384(_)) => JwsAlgorithm::Es384,
            Some(PublicKey::Rsa { .. }) => JwsAlgorithm::Rs256,
            Some(PublicKey::Ed25519(_)) => JwsAlgorithm::EdDsa,
            None => continue, // an X25519 key-agreement certificate
        };
        chosen = Some((c, cert, alg, key));
        break;
    }
    let Some((stored, cert, alg, Some(public))) = chosen else {
        return Err(CardError::Sign(format!(
            "no S/MIME signing certificate of {address} with its key in the store"
        )));
    };
    let secret = store.private_key(&stored.fingerprint)?.ok_or_else(|| {
        CardError::Sign(format!("the private key of {address} is not in the store"))
    })?;
    let header = json!({
        "alg": alg.name(),
        "typ": "JOSE",
        "kid": stored.fingerprint,
        "x5c": [STANDARD.encode(&stored.der)],
    });
    let protected = URL_SAFE_NO_PAD.encode(header.to_string());
    let input = jws::signing_input(&protected, &jws::signed_payload(card));
    let raw = crate::smime::sign_with(&secret, &cert, &input)
        .map_err(|e| CardError::Sign(e.to_string()))?;
    let sig = match alg {
        JwsAlgorithm::Es256 => jws::ecdsa_fixed(&raw, 32),
        JwsAlgorithm::Es384 => jws::ecdsa_fixed(&raw, 48),
        _ => Some(raw),
    }
    .ok_or_else(|| CardError::Sign("the ECDSA signature did not decode".into()))?;
    if !public.verify(alg, &input, &sig) {
        return Err(CardError::Sign(
            "the signature made does not verify with our certificate".into(),
        ));
    }
    let entry = json!({"protected": protected, "signature": URL_SAFE_NO_PAD.encode(sig)});
    if let Value::Object(m) = card {
        match m.entry("signatures").or_insert_with(|| json!([])) {
            Value::Array(list) => list.push(entry),
            other => *other = json!([entry]),
        }
    }
    check_schema(card)
}

/// How far the store trusts the key that made a card signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SignerTrust {
    /// The signer's certificate (or its key) is one the store already holds for the
    /// card's address.
    Pinned,
    /// The signer's certificate chains to a trust anchor of the store.
    Anchored,
    /// Neither: the signature proves the card is intact, not who made it.
    Unknown,
}

impl std::fmt::Display for SignerTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Pinned => "pinned",
            Self::Anchored => "anchored",
            Self::Unknown => "signer unknown",
        })
    }
}

/// One verified card signature.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CardSignature {
    /// The JWS `alg`.
    pub algorithm: &'static str,
    /// Who signed: the certificate's addresses or subject, or the `kid`.
    pub signer: String,
    /// How far the store trusts that key.
    pub trust: SignerTrust,
}

/// A peer's card, checked: every key belongs to its address, every signature verifies.
#[derive(Clone, Debug)]
pub struct PeerCard {
    /// The MailA2A interface's address, lower case.
    pub address: String,
    /// `minimumProtection`.
    pub minimum: Protection,
    /// `profiles`, as given (tokens this version does not know are kept).
    pub profiles: Vec<String>,
    /// S/MIME certificates, DER.
    pub smime_certificates: Vec<Vec<u8>>,
    /// OpenPGP certificates, as given (armored or binary).
    pub openpgp_certificates: Vec<Vec<u8>>,
    /// MLS KeyPackages (MLSMessage bytes), with whether each is last-resort.
    pub mls_key_packages: Vec<(Vec<u8>, bool)>,
    /// The resource limits it publishes, if any.
    pub limits: Option<CardLimits>,
    /// The signatures, all verified.
    pub signatures: Vec<CardSignature>,
    /// SHA-256 (hex) of what the signatures cover: the card's identity.
    pub digest: String,
}

impl PeerCard {
    /// Whether a signature by a pinned or anchored key vouches for the card.
    pub fn trusted(&self) -> bool {
        self.signatures
            .iter()
            .any(|s| matches!(s.trust, SignerTrust::Pinned | SignerTrust::Anchored))
    }
}

/// Reads and checks a peer's card: A2A v1.0 schema, one MailA2A address, the
/// `#protection` extension, every key for that address, every signature verified
/// (trust judged against `store`'s certificates for the address and trust anchors, at
/// `now`).
pub fn read_card(
    bytes: &[u8],
    store: &dyn KeyStore,
    now: OffsetDateTime,
) -> Result<PeerCard, CardError> {
    if bytes.len() > MAX_CARD_BYTES {
        return Err(CardError::NotJson(format!(
            "{} bytes, more than the {MAX_CARD_BYTES} a card may have",
            bytes.len()
        )));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| CardError::NotJson("not UTF-8".into()))?;
    check_schema_text(text)?;
    let card: Value = serde_json::from_str(text).map_err(|e| CardError::NotJson(e.to_string()))?;
    let address = card_address(&card)?;
    let params = protection_params(&card)?;
    let mut peer = read_params(&address, params)?;
    let payload = jws::signed_payload(&card);
    peer.digest = crate::keystore::hex(&Sha256::digest(&payload));
    if let Some(Value::Array(sigs)) = card.get("signatures") {
        for (index, sig) in sigs.iter().enumerate() {
            peer.signatures
                .push(check_signature(index, sig, &payload, &address, store, now)?);
        }
    }
    Ok(peer)
}

/// The one address of the card's MailA2A interfaces.
fn card_address(card: &Value) -> Result<String, CardError> {
    let mut address: Option<String> = None;
    let interfaces = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for i in interfaces {
        if i.get("protocolBinding").and_then(Value::as_str) != Some(BINDING_URI) {
            continue;
        }
        let version = i
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if version != crate::envelope::BINDING_VERSION {
            return Err(CardError::Interface(format!(
                "MailA2A binding version `{version}` is not supported (1.0)"
            )));
        }
        let a = address_of_mailto(i.get("url").and_then(Value::as_str).unwrap_or(""))?;
        match &address {
            Some(prev) if *prev != a => {
                return Err(CardError::Interface(format!(
                    "MailA2A interfaces for two addresses ({prev}, {a})"
                )))
            }
            _ => address = Some(a),
        }
    }
    address.ok_or_else(|| {
        CardError::Interface(format!(
            "no MailA2A interface (protocolBinding {BINDING_URI})"
        ))
    })
}

/// The params of the one `#protection` extension.
fn protection_params(card: &Value) -> Result<&Map<String, Value>, CardError> {
    let found: Vec<&Value> = card
        .get("capabilities")
        .and_then(|c| c.get("extensions"))
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter(|e| e.get("uri").and_then(Value::as_str) == Some(PROTECTION_URI))
                .collect()
        })
        .unwrap_or_default();
    match found.as_slice() {
        [] => Err(CardError::Protection(format!(
            "absent ({PROTECTION_URI}): the card publishes no keys"
        ))),
        [one] => one
            .get("params")
            .and_then(Value::as_object)
            .ok_or_else(|| CardError::Protection("no params".into())),
        _ => Err(CardError::Protection("present more than once".into())),
    }
}

fn strings<'a>(params: &'a Map<String, Value>, key: &str) -> Result<Vec<&'a str>, CardError> {
    let list = match params.get(key) {
        None => return Ok(Vec::new()),
        Some(Value::Array(l)) => l,
        Some(_) => return Err(CardError::Protection(format!("{key} is not an array"))),
    };
    if list.len() > MAX_KEYS_PER_KIND && key != "profiles" {
        return Err(CardError::Protection(format!(
            "{key} has {} entries, more than {MAX_KEYS_PER_KIND}",
            list.len()
        )));
    }
    list.iter()
        .map(|v| {
            v.as_str().ok_or_else(|| {
                CardError::Protection(format!("{key} has an entry that is not a string"))
            })
        })
        .collect()
}

fn read_params(address: &str, params: &Map<String, Value>) -> Result<PeerCard, CardError> {
    let profiles: Vec<String> = strings(params, "profiles")?
        .into_iter()
        .map(str::to_string)
        .collect();
    if profiles.len() > 64 {
        return Err(CardError::Protection("more than 64 profiles".into()));
    }
    let minimum = match params.get("minimumProtection") {
        None => Protection::Signed,
        Some(Value::String(s)) => s.parse().map_err(CardError::Protection)?,
        Some(_) => {
            return Err(CardError::Protection(
                "minimumProtection is not a string".into(),
            ))
        }
    };
    let foreign = |what: String, named: String| CardError::ForeignKey {
        address: address.to_string(),
        what,
        named,
    };
    let mut smime = Vec::new();
    for (i, pem) in strings(params, "smimeCertificates")?
        .into_iter()
        .enumerate()
    {
        let what = format!("S/MIME certificate {i}");
        let cert = Certificate::from_pem(pem.trim().as_bytes()).map_err(|e| CardError::Key {
            what: what.clone(),
            reason: format!("not one PEM certificate: {e}"),
        })?;
        let emails = crate::keystore::emails_of(&cert);
        if !emails.iter().any(|e| e == address) {
            return Err(foreign(what, names(&emails)));
        }
        smime.push(cert.to_der().map_err(|e| CardError::Key {
            what,
            reason: e.to_string(),
        })?);
    }
    let mut openpgp = Vec::new();
    for (i, armored) in strings(params, "openpgpCertificates")?
        .into_iter()
        .enumerate()
    {
        let what = format!("OpenPGP certificate {i}");
        let certs =
            crate::keystore::openpgp::read_certs(armored.as_bytes(), &what, None).map_err(|e| {
                CardError::Key {
                    what: what.clone(),
                    reason: match e {
                        KeyStoreError::PassphraseRequired { .. } => {
                            "carries secret key material".into()
                        }
                        other => other.to_string(),
                    },
                }
            })?;
        for c in &certs {
            if c.secret.is_some() {
                return Err(CardError::Key {
                    what,
                    reason: "carries secret key material".into(),
                });
            }
            if !c.entry.emails.iter().any(|e| e == address) {
                return Err(foreign(what, names(&c.entry.emails)));
            }
        }
        openpgp.push(armored.as_bytes().to_vec());
    }
    let limits = match params.get("limits") {
        None => None,
        Some(v @ Value::Object(m)) => {
            if let Some((k, _)) = m.iter().find(|(_, v)| !v.is_u64()) {
                return Err(CardError::Protection(format!(
                    "limits.{k} is not a non-negative integer"
                )));
            }
            Some(
                serde_json::from_value::<CardLimits>(v.clone())
                    .map_err(|e| CardError::Protection(format!("limits: {e}")))?,
            )
        }
        Some(_) => return Err(CardError::Protection("limits is not an object".into())),
    };
    let mut mls = Vec::new();
    for (i, b64) in strings(params, "mlsKeyPackages")?.into_iter().enumerate() {
        let what = format!("MLS KeyPackage {i}");
        let bytes = STANDARD.decode(b64.trim()).map_err(|_| CardError::Key {
            what: what.clone(),
            reason: "not base64".into(),
        })?;
        let (identity, last_resort) =
            crate::mls::key_package_identity(&bytes).map_err(|e| CardError::Key {
                what: what.clone(),
                reason: e.to_string(),
            })?;
        if identity != address {
            return Err(foreign(what, identity));
        }
        mls.push((bytes, last_resort));
    }
    Ok(PeerCard {
        address: address.to_string(),
        minimum,
        profiles,
        smime_certificates: smime,
        openpgp_certificates: openpgp,
        mls_key_packages: mls,
        limits,
        signatures: Vec::new(),
        digest: String::new(),
    })
}

fn names(emails: &[String]) -> String {
    if emails.is_empty() {
        "no address".into()
    } else {
        emails.join(", ")
    }
}

fn check_signature(
    index: usize,
    sig: &Value,
    payload: &[u8],
    address: &str,
    store: &dyn KeyStore,
    now: OffsetDateTime,
) -> Result<CardSignature, CardError> {
    let malformed = |reason: String| CardError::SignatureMalformed { index, reason };
    let protected = sig
        .get("protected")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("no protected header".into()))?;
    let signature = sig
        .get("signature")
        .and_then(Value::as_str)
        .and_then(|s| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok())
        .ok_or_else(|| malformed("the signature is not base64url".into()))?;
    let header = jws::parse_header(protected).map_err(malformed)?;
    let input = jws::signing_input(protected, payload);
    let pinned: Vec<Vec<u8>> = store
        .certificates_for(address)?
        .into_iter()
        .map(|c| c.der)
        .collect();
    let pinned_keys: Vec<PublicKey> = pinned
        .iter()
        .filter_map(|d| Certificate::from_der(d).ok())
        .filter_map(|c| PublicKey::from_spki(c.tbs_certificate().subject_public_key_info()))
        .collect();
    let (key, signer, trust) = if let Some(leaf_der) = header.x5c.first() {
        let leaf = Certificate::from_der(leaf_der)
            .map_err(|_| malformed("x5c[0] is not a certificate".into()))?;
        let key = PublicKey::from_spki(leaf.tbs_certificate().subject_public_key_info())
            .ok_or_else(|| malformed("the x5c certificate's key type is not accepted".into()))?;
        if header.jwk.as_ref().is_some_and(|j| *j != key) {
            return Err(malformed("jwk and x5c name different keys".into()));
        }
        let intermediates: Vec<Certificate> = header.x5c[1..]
            .iter()
            .map(|d| Certificate::from_der(d))
            .collect::<Result<_, _>>()
            .map_err(|_| malformed("an x5c entry is not a certificate".into()))?;
        let anchors: Vec<Certificate> = store
            .trust_anchors()?
            .iter()
            .filter_map(|a| Certificate::from_der(&a.der).ok())
            .collect();
        let emails = crate::keystore::emails_of(&leaf);
        let trust = match crate::smime::trust(&leaf, &intermediates, &anchors, &pinned, now) {
            crate::smime::Trust::Broken => return Err(CardError::SignatureInvalid { index }),
            _ if crate::smime::check_signer_usage(&leaf, now).is_err() => SignerTrust::Unknown,
            crate::smime::Trust::Pinned => SignerTrust::Pinned,
            crate::smime::Trust::Anchored => SignerTrust::Anchored,
            crate::smime::Trust::Unknown => SignerTrust::Unknown,
        };
        let signer = if emails.is_empty() {
            leaf.tbs_certificate().subject().to_string()
        } else {
            emails.join(", ")
        };
        (key, signer, trust)
    } else if let Some(key) = header.jwk.clone() {
        let trust = if pinned_keys.contains(&key) {
            SignerTrust::Pinned
        } else {
            SignerTrust::Unknown
        };
        let signer = header
            .kid
            .clone()
            .unwrap_or_else(|| "an embedded jwk".into());
        (key, signer, trust)
    } else {
        // A bare `kid`: the fingerprint of a certificate the store holds for the address.
        let kid = header.kid.clone().unwrap_or_default();
        let found = store
            .certificates_for(address)?
            .into_iter()
            .find(|c| c.fingerprint.eq_ignore_ascii_case(&kid))
            .and_then(|c| Certificate::from_der(&c.der).ok())
            .and_then(|c| PublicKey::from_spki(c.tbs_certificate().subject_public_key_info()));
        let key = found.ok_or_else(|| {
            malformed(
                "no key to check it with (x5c, jwk, or a kid naming a certificate of the address in this store)"
                    .into(),
            )
        })?;
        (key, kid, SignerTrust::Pinned)
    };
    if !key.verify(header.alg, &input, &signature) {
        return Err(CardError::SignatureInvalid { index });
    }
    Ok(CardSignature {
        algorithm: header.alg.name(),
        signer,
        trust,
    })
}

/// Imports a checked card's certificates into `store` (never as trust anchors).
/// Returns what was imported.
pub fn import_keys(card: &PeerCard, store: &dyn KeyStore) -> Result<Vec<KeyEntry>, CardError> {
    let mut entries = Vec::new();
    for der in &card.smime_certificates {
        let pem =
            der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, der).map_err(|e| {
                CardError::Key {
                    what: "S/MIME certificate".into(),
                    reason: e.to_string(),
                }
            })?;
        entries.extend(store.import(pem.as_bytes(), "agent card S/MIME certificate", false)?);
    }
    for cert in &card.openpgp_certificates {
        entries.extend(store.import(cert, "agent card OpenPGP certificate", false)?);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailto_round_trips_and_refuses_what_is_not_one_address() {
        for a in [
            "bob@example.com",
            "a+b/c@example.com",
            "o'neil%x@example.org",
        ] {
            assert_eq!(address_of_mailto(&mailto(a)).unwrap(), a);
        }
        assert_eq!(
            address_of_mailto("MAILTO:Bob@Example.COM").unwrap(),
            "bob@example.com"
        );
        for bad in [
            "https://example.com/a2a",
            "mailto:a@example.com?body=hi",
            "mailto:a@example.com,b@example.com",
            "mailto:a%2Cb@example.com",
            "mailto:",
            "mailto:no-at-sign",
            "mailto:a@b@c",
            "mailto:a%zz@example.com",
            "mailto:Bob <bob@example.com>",
            "mailto:a%0d%0aBcc:x@example.com",
        ] {
            assert!(address_of_mailto(bad).is_err(), "{bad}");
        }
    }
}
