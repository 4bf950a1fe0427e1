//! Card signatures: the JWS over the card's JCS form that we make, and the check of a
//! peer card's signatures with the trust the store gives its signer.

use crate::jws::compact::{self as jws, JwsAlgorithm, PublicKey};
use crate::keystore::KeyStore;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use der::Decode;
use serde_json::{json, Value};
use time::OffsetDateTime;
use x509_cert::Certificate;

use super::{check_schema, CardError};

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
    /// A certificate this machine's configuration names as an operator key for the
    /// card's domain ([`CardOperators`]): it vouches for every card of the domain.
    Operator,
    /// Neither: the signature proves the card is intact, not who made it.
    Unknown,
}

/// Operator keys: certificates (by key store fingerprint) that local configuration
/// allows to sign the cards of every address of a domain, as a provider signs its
/// agents' cards. Without one, a card's signer must name the card's own address.
#[derive(Clone, Debug, Default)]
pub struct CardOperators {
    by_domain: std::collections::HashMap<String, Vec<String>>,
}

impl CardOperators {
    /// No operator keys.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets the certificate whose key store fingerprint is `fingerprint` sign the
    /// cards of `domain`.
    pub fn allow(&mut self, domain: &str, fingerprint: &str) {
        self.by_domain
            .entry(domain.trim().to_ascii_lowercase())
            .or_default()
            .push(fingerprint.trim().to_ascii_lowercase());
    }

    /// Reads `DOMAIN=FINGERPRINT` (the command line's form).
    pub fn allow_text(&mut self, text: &str) -> Result<(), CardError> {
        let (domain, fpr) = text.split_once('=').ok_or_else(|| {
            CardError::Protection(format!("{text}: an operator key is DOMAIN=FINGERPRINT"))
        })?;
        self.allow(domain, fpr);
        Ok(())
    }

    fn allows(&self, address: &str, fingerprint: &str) -> bool {
        address
            .rsplit_once('@')
            .and_then(|(_, d)| self.by_domain.get(&d.to_ascii_lowercase()))
            .is_some_and(|f| f.iter().any(|f| f == fingerprint))
    }
}

impl std::fmt::Display for SignerTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Pinned => "pinned",
            Self::Anchored => "anchored",
            Self::Operator => "operator",
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

pub(super) fn check_signature(
    index: usize,
    sig: &Value,
    payload: &[u8],
    address: &str,
    store: &dyn KeyStore,
    now: OffsetDateTime,
    operators: &CardOperators,
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
    let held = || -> Result<crate::smime::HeldStore, CardError> {
        let decode = |all: Vec<crate::keystore::StoredCertificate>| -> Vec<Certificate> {
            all.iter()
                .filter_map(|a| Certificate::from_der(&a.der).ok())
                .collect()
        };
        Ok(crate::smime::HeldStore {
            anchors: decode(store.trust_anchors()?),
            intermediates: decode(store.intermediates()?),
            crls: crate::smime::decode_crls(store.crls()?),
        })
    };
    // A pinned certificate's key speaks for the card only while the certificate is
    // valid and not revoked (the CRLs of its validated issuers).
    let pinned_live = |c: &Certificate| -> Result<bool, CardError> {
        Ok(
            crate::identity::x509::trust(c, &[], &held()?.view(false), true, now)
                == crate::smime::Trust::Pinned
                && crate::identity::x509::valid_at(c, now),
        )
    };
    let mut pinned_keys: Vec<PublicKey> = Vec::new();
    for c in pinned.iter().filter_map(|d| Certificate::from_der(d).ok()) {
        if let Some(k) = PublicKey::from_spki(c.tbs_certificate().subject_public_key_info()) {
            if pinned_live(&c)? {
                pinned_keys.push(k);
            }
        }
    }
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
        let emails = crate::keystore::emails_of(&leaf);
        let is_pinned = pinned.iter().any(|p| p == leaf_der);
        // The same trust and revocation decision as a mail signer's: the store's
        // anchors, intermediates and CRLs, the x5c entries only as candidates.
        let trust = match crate::identity::x509::trust(
            &leaf,
            &intermediates,
            &held()?.view(false),
            is_pinned,
            now,
        ) {
            crate::smime::Trust::Broken => return Err(CardError::SignatureInvalid { index }),
            _ if crate::smime::check_signer_usage(&leaf, now).is_err() => SignerTrust::Unknown,
            crate::smime::Trust::Invalid(_) => SignerTrust::Unknown,
            _ if operators.allows(
                address,
                &crate::keystore::fingerprint(
                    leaf.tbs_certificate()
                        .subject_public_key_info()
                        .subject_public_key
                        .raw_bytes(),
                ),
            ) =>
            {
                SignerTrust::Operator
            }
            crate::smime::Trust::Pinned => SignerTrust::Pinned,
            // A CA vouches for the addresses it certified, not for any card: an
            // anchored signer counts only for a card of its own address.
            crate::smime::Trust::Anchored if !emails.iter().any(|e| e == address) => {
                SignerTrust::Unknown
            }
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
            .and_then(|c| Certificate::from_der(&c.der).ok());
        let cert = found.ok_or_else(|| {
            malformed(
                "no key to check it with (x5c, jwk, or a kid naming a certificate of the address in this store)"
                    .into(),
            )
        })?;
        let key = PublicKey::from_spki(cert.tbs_certificate().subject_public_key_info())
            .ok_or_else(|| malformed("the certificate's key type is not accepted".into()))?;
        let trust = if pinned_live(&cert)? {
            SignerTrust::Pinned
        } else {
            SignerTrust::Unknown
        };
        (key, kid, trust)
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
