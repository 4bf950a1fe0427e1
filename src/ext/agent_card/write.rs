//! Writing our card: the A2A v1.0 AgentCard with the MailA2A interface and the
//! `#protection` extension for our keys, and moving a v0.3 card to v1.0.

use crate::envelope::BINDING_URI;
use crate::keystore::{EntryKind, KeyStore};
use crate::profile::Protection;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::{
    address_of_mailto, check_schema, mailto, CardError, CardLimits, Published, JWS_TOKEN,
    MLS_TOKEN, OPENPGP_TOKEN, PROTECTION_URI, SMIME_TOKEN,
};

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
        let own_jwks: Vec<String> = store
            .list()?
            .into_iter()
            .filter(|e| {
                e.kind == EntryKind::Jwk && e.has_private_key && e.emails.contains(&address)
            })
            .map(|e| e.fingerprint)
            .collect();
        let mut jwks = Vec::new();
        for r in store.jwk_identities()? {
            if own_jwks.contains(&r.fingerprint) {
                jwks.push(
                    serde_json::from_str(&r.jwk)
                        .map_err(|e| CardError::Sign(format!("our JWK: {e}")))?,
                );
            }
        }
        Ok(Published {
            smime_certificates,
            openpgp_certificates,
            mls_key_packages: Vec::new(),
            jwks,
            minimum: Protection::Signed,
            limits: Some(CardLimits::enforced()),
        })
    }

    /// Whether there is nothing to publish.
    pub fn is_empty(&self) -> bool {
        self.smime_certificates.is_empty()
            && self.openpgp_certificates.is_empty()
            && self.mls_key_packages.is_empty()
            && self.jwks.is_empty()
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
        if !self.jwks.is_empty() {
            profiles.push(JWS_TOKEN);
            params.insert("jwks".into(), json!(self.jwks));
        }
        params.insert("profiles".into(), json!(profiles));
        params.insert("minimumProtection".into(), json!(self.minimum.token()));
        if let Some(l) = &self.limits {
            params.insert("limits".into(), serde_json::to_value(l).unwrap_or_default());
        }
        Value::Object(params)
    }
}

pub(super) fn mail_interface(address: &str) -> Value {
    json!({
        "url": mailto(address),
        "protocolBinding": BINDING_URI,
        "protocolVersion": crate::envelope::BINDING_VERSION,
    })
}

pub(super) fn default_skill() -> Value {
    json!({
        "id": "maila2a",
        "name": "MailA2A",
        "description": "Receives A2A requests as end-to-end protected email (MailA2A binding 1.0) and answers in the same thread.",
        "tags": ["maila2a", "email", "a2a"],
    })
}

/// Moves the A2A v0.3 members a card may still carry to their v1.0 places, noting
/// each change.
pub(super) fn migrate_v03(card: &mut Map<String, Value>, notes: &mut Vec<String>) {
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
