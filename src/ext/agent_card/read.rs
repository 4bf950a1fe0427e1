//! Reading a peer's card: its one address, its `#protection` parameters, every key
//! checked to be for that address, and the import into the store.

use crate::envelope::BINDING_URI;
use crate::ext::peers::PeerPolicies;
use crate::identity::pins::{self, Changes, Offer, Vouched};
use crate::jws::compact as jws;
use crate::keystore::{KeyEntry, KeyStore, KeyStoreError};
use crate::profile::Protection;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use der::{DecodePem, Encode};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use x509_cert::Certificate;

use super::sign::{check_signature, CardOperators, CardSignature, SignerTrust};
use super::{
    address_of_mailto, check_schema_text, CardError, CardLimits, MAX_CARD_BYTES, MAX_KEYS_PER_KIND,
    PROTECTION_URI,
};

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
    /// Public JWKs (the `jws` profile), checked, bound to the card's address.
    pub jwks: Vec<Value>,
    /// The resource limits it publishes, if any.
    pub limits: Option<CardLimits>,
    /// The signatures, all verified.
    pub signatures: Vec<CardSignature>,
    /// SHA-256 (hex) of what the signatures cover: the card's identity.
    pub digest: String,
}

impl PeerCard {
    /// How far its signatures vouch for it: what a later card of the address may not
    /// fall below ([`crate::identity::pins`]).
    pub fn vouched(&self) -> Vouched {
        if self.trusted() {
            Vouched::Trusted
        } else if self.signatures.is_empty() {
            Vouched::Unsigned
        } else {
            Vouched::Signed
        }
    }

    /// Whether a signature by a pinned or anchored key vouches for the card.
    pub fn trusted(&self) -> bool {
        self.signatures.iter().any(|s| {
            matches!(
                s.trust,
                SignerTrust::Pinned | SignerTrust::Anchored | SignerTrust::Operator
            )
        })
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
    read_card_with(bytes, store, now, &CardOperators::new())
}

/// As [`read_card`], with the operator keys local configuration allows to sign the
/// cards of a domain.
pub fn read_card_with(
    bytes: &[u8],
    store: &dyn KeyStore,
    now: OffsetDateTime,
    operators: &CardOperators,
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
            peer.signatures.push(check_signature(
                index, sig, &payload, &address, store, now, operators,
            )?);
        }
    }
    Ok(peer)
}

/// The one address of the card's MailA2A interfaces.
pub(super) fn card_address(card: &Value) -> Result<String, CardError> {
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
pub(super) fn protection_params(card: &Value) -> Result<&Map<String, Value>, CardError> {
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

pub(super) fn strings<'a>(
    params: &'a Map<String, Value>,
    key: &str,
) -> Result<Vec<&'a str>, CardError> {
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

pub(super) fn read_params(
    address: &str,
    params: &Map<String, Value>,
) -> Result<PeerCard, CardError> {
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
        // Scoped to the card's address (issue #17): a certificate that also names
        // another address would be pinned for that one too, so it is refused whole.
        let emails = crate::keystore::emails_of(&cert);
        if emails.is_empty() || emails.iter().any(|e| e != address) {
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
                match e {
                    // An identity rule's refusal stays one (exit 6), not malformed input.
                    refused @ KeyStoreError::Refused { .. } => CardError::Store(refused),
                    KeyStoreError::PassphraseRequired { .. } => CardError::Key {
                        what: what.clone(),
                        reason: "carries secret key material".into(),
                    },
                    other => CardError::Key {
                        what: what.clone(),
                        reason: other.to_string(),
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
            // Judged on every User ID the certificate carries, valid now or not (a
            // binding dated in the future, or a User ID revoked now, would otherwise
            // pass and later speak for its address: identity::openpgp); and one
            // valid now must name the card's address.
            if c.every_email.iter().any(|e| e != address) {
                return Err(foreign(what, names(&c.every_email)));
            }
            if c.entry.emails.is_empty() {
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
    let mut jwks = Vec::new();
    match params.get("jwks") {
        None => {}
        Some(Value::Array(list)) if list.len() <= MAX_KEYS_PER_KIND => {
            for (i, v) in list.iter().enumerate() {
                let what = format!("JWK {i}");
                let Value::Object(m) = v else {
                    return Err(CardError::Key {
                        what,
                        reason: "not a JSON object".into(),
                    });
                };
                let jwk = crate::jws::Jwk::from_map(m).map_err(|e| CardError::Key {
                    what: what.clone(),
                    reason: e.to_string(),
                })?;
                if jwk.is_private() {
                    return Err(CardError::Key {
                        what,
                        reason: "carries a private key".into(),
                    });
                }
                jwks.push(jwk.public_value());
            }
        }
        Some(_) => {
            return Err(CardError::Protection(format!(
                "jwks is not an array of at most {MAX_KEYS_PER_KIND} JWKs"
            )))
        }
    }
    Ok(PeerCard {
        address: address.to_string(),
        minimum,
        profiles,
        smime_certificates: smime,
        openpgp_certificates: openpgp,
        mls_key_packages: mls,
        jwks,
        limits,
        signatures: Vec::new(),
        digest: String::new(),
    })
}

pub(super) fn names(emails: &[String]) -> String {
    if emails.is_empty() {
        "no address".into()
    } else {
        emails.join(", ")
    }
}

/// The key store fingerprints of every key a card publishes (S/MIME certificates'
/// public keys, OpenPGP certificates, JWKs), sorted: the card's part of its address's
/// pin. MLS KeyPackages are left out: they are meant to rotate.
pub fn key_fingerprints(card: &PeerCard) -> Vec<String> {
    use der::Decode;
    let mut out = Vec::new();
    for der in &card.smime_certificates {
        if let Ok(c) = x509_cert::Certificate::from_der(der) {
            out.push(crate::keystore::fingerprint(
                c.tbs_certificate()
                    .subject_public_key_info()
                    .subject_public_key
                    .raw_bytes(),
            ));
        }
    }
    for armored in &card.openpgp_certificates {
        if let Ok(certs) = crate::keystore::openpgp::read_certs(armored, "card", None) {
            out.extend(certs.into_iter().map(|c| c.fingerprint));
        }
    }
    for jwk in &card.jwks {
        if let Ok(k) = crate::jws::Jwk::parse(jwk.to_string().as_bytes()) {
            out.push(k.fingerprint());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// How [`import_card`] imports a card.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ImportOptions {
    /// Refuse a card without a signature by a key the store trusts.
    pub require_signature: bool,
    /// Accept a card that changes the address's pin (`--accept-changed`).
    pub accept_changed: bool,
    /// The normalised origin the card was fetched from (none: a file), recorded with
    /// the pin ([`crate::identity::pins::origin`]).
    pub origin: Option<String>,
}

impl ImportOptions {
    /// No signature required, no change accepted, no origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`ImportOptions::require_signature`].
    pub fn require_signature(mut self, on: bool) -> Self {
        self.require_signature = on;
        self
    }

    /// Sets [`ImportOptions::accept_changed`].
    pub fn accept_changed(mut self, on: bool) -> Self {
        self.accept_changed = on;
        self
    }

    /// Sets [`ImportOptions::origin`].
    pub fn origin(mut self, origin: Option<String>) -> Self {
        self.origin = origin;
        self
    }
}

/// What [`import_card`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct CardImport {
    /// The keys imported.
    pub entries: Vec<KeyEntry>,
    /// How the card differs from what the store held for its address.
    pub changes: Changes,
}

/// Imports a checked card as every card path does (`card fetch URL`, `key import
/// --agent-card FILE`): compared with the pin of its address, whatever path made it
/// ([`PeerPolicies::pin`]; a changed key, a lower minimum or a card vouched for less is
/// refused unless `opts.accept_changed`), then its keys into `store` and its policy
/// into `policies`. The pin is keyed by the address, never by the URL or file the card
/// came from, so respelling the URL is no first use.
pub fn import_card(
    card: &PeerCard,
    store: &dyn KeyStore,
    policies: &mut PeerPolicies,
    opts: &ImportOptions,
    now: OffsetDateTime,
) -> Result<CardImport, CardError> {
    if opts.require_signature && !card.trusted() {
        return Err(CardError::Untrusted(card.address.clone()));
    }
    let mut held = policies.pin(store, &card.address)?;
    pins::store_holds(&mut held, store, now)?;
    let offer = Offer::card(
        &card.address,
        key_fingerprints(card),
        card.minimum,
        card.vouched(),
        opts.origin.clone(),
    );
    let changes = pins::check(&held, &offer, opts.accept_changed)?;
    let entries = import_keys(card, store)?;
    policies.record(card, now);
    if let Some(r) = policies.peers.get_mut(&card.address) {
        r.origin = opts.origin.clone();
    }
    Ok(CardImport { entries, changes })
}

/// Imports a checked card's certificates into `store` (never as trust anchors).
/// Returns what was imported. A card JWK the store binds to other addresses refuses
/// the card before anything is imported: a card speaks for its own address only, and
/// no card moves a key (that takes `key import --jwk --rebind`).
pub fn import_keys(card: &PeerCard, store: &dyn KeyStore) -> Result<Vec<KeyEntry>, CardError> {
    let mut keys = Vec::new();
    let bindings = store.jwk_identities()?;
    for (i, v) in card.jwks.iter().enumerate() {
        let key = crate::jws::Jwk::parse(v.to_string().as_bytes()).map_err(|e| CardError::Key {
            what: format!("JWK {i}"),
            reason: e.to_string(),
        })?;
        let fpr = key.fingerprint();
        if let Some(existing) = bindings.iter().find(|r| r.fingerprint == fpr) {
            if pins::check_rebind(
                &fpr,
                &existing.emails,
                std::slice::from_ref(&card.address),
                &[],
            )
            .is_err()
            {
                return Err(CardError::ForeignKey {
                    address: card.address.clone(),
                    what: format!("JWK {i}"),
                    named: existing.emails.join(", "),
                });
            }
        }
        keys.push(key);
    }
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
    for (i, key) in keys.iter().enumerate() {
        let entry = crate::jws::jwk::bind(
            store,
            key,
            std::slice::from_ref(&card.address),
            "agent-card",
        )
        .map_err(|e| CardError::Key {
            what: format!("JWK {i}"),
            reason: e.to_string(),
        })?;
        entries.push(entry);
    }
    Ok(entries)
}
