//! JSON Web Keys (RFC 7517) as identities of the `jws` profile: reading one (public or
//! private), its RFC 7638 thumbprint (the `kid` we write and look up), the fingerprint
//! the key store files it under, and the declared binding of a key to addresses.
//!
//! A JWK names no address, so nothing in it can bind it to one: the binding is always
//! declared by the store's owner (`key import --jwk FILE --email ADDR`, a DID imported
//! for an address) or by the address's own Agent Card. A key bound to addresses is
//! bound to others only by an explicit rebind naming the addresses it is bound to now
//! (`--rebind`, [`crate::identity::pins::check_rebind`]); a new binding then replaces
//! the old one, it never widens it. A key offered for an address that already holds
//! other keys is a change of that address's pin, refused until accepted
//! ([`import`]).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::compact::{JwsAlgorithm, PublicKey};
use super::JwsError;
use crate::identity::pins::{self, Offer, Pin};
use crate::keystore::{KeyEntry, KeyStore, StoredJwk};

/// Largest JWK text read (an RSA-8192 private JWK is about 6 KiB).
pub const MAX_JWK_BYTES: usize = 16 * 1024;

/// The longest JWK `kid` kept, bytes (RFC 7517 sets none; key IDs seen in use are
/// names, dates, URLs and thumbprints).
pub const MAX_KID_BYTES: usize = 256;

/// A JWK read: its public key, the algorithm it signs with, and its private key as
/// PKCS#8 (wiped on drop) when it carried one.
pub struct Jwk {
    /// The public key.
    pub(crate) key: PublicKey,
    /// The algorithm: the JWK's `alg` when given (it must fit the key), else the
    /// key type's (EdDSA, ES256, ES384, RS256).
    pub alg: JwsAlgorithm,
    /// Whether the JWK declared `alg` (then only it verifies; else any algorithm of
    /// the key type does: RS256 or PS256 for RSA).
    declared: bool,
    /// The JWK's own `kid`, as its publisher named the key: JOSE signers usually put
    /// it in their signatures, so a signature whose `kid` is this, or the RFC 7638
    /// thumbprint, names this key.
    pub kid: Option<String>,
    pkcs8: Option<Zeroizing<Vec<u8>>>,
}

impl std::fmt::Debug for Jwk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwk")
            .field("alg", &self.alg)
            .field("thumbprint", &thumbprint(&self.key))
            .field("private", &self.pkcs8.is_some())
            .finish()
    }
}

impl Jwk {
    /// Reads a JWK from JSON text.
    pub fn parse(text: &[u8]) -> Result<Jwk, JwsError> {
        if text.len() > MAX_JWK_BYTES {
            return Err(JwsError::Key(format!(
                "a JWK of {} bytes, more than {MAX_JWK_BYTES}",
                text.len()
            )));
        }
        match serde_json::from_slice::<Value>(text) {
            Ok(Value::Object(m)) => Jwk::from_map(&m),
            Ok(_) => Err(JwsError::Key("a JWK is a JSON object".into())),
            Err(e) => Err(JwsError::Key(format!("not JSON: {e}"))),
        }
    }

    /// Reads a JWK object. Refused: symmetric keys (`oct`: an HMAC secret is never a
    /// signer here), key types and curves outside Ed25519, P-256, P-384 and RSA of at
    /// least 2048 bits, an `alg` that does not fit the key, a `use` other than `sig`.
    pub(crate) fn from_map(m: &Map<String, Value>) -> Result<Jwk, JwsError> {
        if m.get("kty").and_then(Value::as_str) == Some("oct") {
            return Err(JwsError::Key(
                "a symmetric JWK (kty oct) cannot be a signer's identity".into(),
            ));
        }
        if let Some(u) = m.get("use") {
            if u.as_str() != Some("sig") {
                return Err(JwsError::Key("a JWK whose `use` is not `sig`".into()));
            }
        }
        let key = PublicKey::from_jwk(m).map_err(JwsError::Key)?;
        if let PublicKey::Rsa { n, .. } = &key {
            let bits = n.iter().skip_while(|b| **b == 0).count() * 8;
            if bits < 2048 {
                return Err(JwsError::Key(format!(
                    "an RSA JWK of about {bits} bits (at least 2048)"
                )));
            }
        }
        let declared = m.get("alg").and_then(Value::as_str);
        let alg = alg_for(&key, declared)?;
        let pkcs8 = match m.get("d") {
            None => None,
            Some(_) => Some(private_pkcs8(m, &key)?),
        };
        let kid = match m.get("kid") {
            None => None,
            Some(Value::String(k))
                if !k.is_empty()
                    && k.len() <= MAX_KID_BYTES
                    && !k.chars().any(char::is_control) =>
            {
                Some(k.clone())
            }
            Some(_) => {
                return Err(JwsError::Key(format!(
                    "a JWK whose `kid` is not a string of 1 to {MAX_KID_BYTES} bytes without control characters"
                )))
            }
        };
        Ok(Jwk {
            key,
            alg,
            declared: declared.is_some(),
            kid,
            pkcs8,
        })
    }

    /// Whether a signature under `alg` may be made by this key.
    pub fn accepts(&self, alg: JwsAlgorithm) -> bool {
        if self.declared {
            return alg == self.alg;
        }
        matches!(
            (&self.key, alg),
            (PublicKey::Ed25519(_), JwsAlgorithm::EdDsa)
                | (PublicKey::P256(_), JwsAlgorithm::Es256)
                | (PublicKey::P384(_), JwsAlgorithm::Es384)
                | (
                    PublicKey::Rsa { .. },
                    JwsAlgorithm::Rs256 | JwsAlgorithm::Ps256
                )
        )
    }

    /// The public key as a JWK with its public members only (and `alg` when the JWK
    /// declared one, or we made it).
    pub fn public_value(&self) -> Value {
        let mut v = public_members(&self.key);
        if let Value::Object(m) = &mut v {
            if self.declared {
                m.insert("alg".into(), Value::String(self.alg.name().into()));
            }
            if let Some(kid) = &self.kid {
                m.insert("kid".into(), Value::String(kid.clone()));
            }
        }
        v
    }

    /// Whether a signature's `kid` names this key: its RFC 7638 thumbprint, or the
    /// JWK's own `kid`.
    pub fn named_by(&self, kid: &str, thumbprint: &str) -> bool {
        kid == thumbprint || self.kid.as_deref() == Some(kid)
    }

    /// RFC 7638 thumbprint (SHA-256, base64url): the `kid` of our signatures.
    pub fn thumbprint(&self) -> String {
        thumbprint(&self.key)
    }

    /// The key store fingerprint: SHA-256 of the raw public key, as for a PKCS#8 key.
    pub fn fingerprint(&self) -> String {
        crate::keystore::fingerprint(&raw_public(&self.key))
    }

    /// Whether it carried a private key.
    pub fn is_private(&self) -> bool {
        self.pkcs8.is_some()
    }
}

/// The algorithm of `key`, `declared` (a JWK's `alg`) when it fits the key.
fn alg_for(key: &PublicKey, declared: Option<&str>) -> Result<JwsAlgorithm, JwsError> {
    let natural = match key {
        PublicKey::Ed25519(_) => JwsAlgorithm::EdDsa,
        PublicKey::P256(_) => JwsAlgorithm::Es256,
        PublicKey::P384(_) => JwsAlgorithm::Es384,
        PublicKey::Rsa { .. } => JwsAlgorithm::Rs256,
    };
    let Some(name) = declared else {
        return Ok(natural);
    };
    let alg = JwsAlgorithm::from_name(name).ok_or_else(|| {
        JwsError::Key(format!(
            "the JWK's alg `{}` is not accepted",
            crate::error::quoted(name)
        ))
    })?;
    let fits = match key {
        PublicKey::Rsa { .. } => matches!(alg, JwsAlgorithm::Rs256 | JwsAlgorithm::Ps256),
        _ => alg == natural,
    };
    if !fits {
        return Err(JwsError::Key(format!(
            "the JWK's alg `{name}` does not fit its key type"
        )));
    }
    Ok(alg)
}

/// The required public members of RFC 7638, section 3.2, for `key`.
fn public_members(key: &PublicKey) -> Value {
    let b = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    match key {
        PublicKey::Ed25519(x) => json!({"crv": "Ed25519", "kty": "OKP", "x": b(x)}),
        PublicKey::P256(p) | PublicKey::P384(p) => {
            let (crv, len) = if matches!(key, PublicKey::P256(_)) {
                ("P-256", 32)
            } else {
                ("P-384", 48)
            };
            let (x, y) = p
                .get(1..)
                .unwrap_or_default()
                .split_at(len.min(p.len().saturating_sub(1)));
            json!({"crv": crv, "kty": "EC", "x": b(x), "y": b(y)})
        }
        PublicKey::Rsa { n, e } => {
            let trim = |v: &[u8]| {
                v.iter()
                    .skip_while(|x| **x == 0)
                    .copied()
                    .collect::<Vec<u8>>()
            };
            json!({"e": b(&trim(e)), "kty": "RSA", "n": b(&trim(n))})
        }
    }
}

/// The public JWK text of `key` (no `alg`).
pub(crate) fn public_jwk_text(key: &PublicKey) -> String {
    public_members(key).to_string()
}

/// RFC 7638: SHA-256 over the required members in lexicographic order, no white
/// space (serde_json writes an object's members sorted and compact).
pub(crate) fn thumbprint(key: &PublicKey) -> String {
    let text = public_members(key).to_string();
    URL_SAFE_NO_PAD.encode(Sha256::digest(text.as_bytes()))
}

/// The raw public key, as the SPKI BIT STRING of the key carries it (what the key
/// store fingerprints): the point, the Ed25519 key, or the PKCS#1 RSAPublicKey DER.
pub(crate) fn raw_public(key: &PublicKey) -> Vec<u8> {
    match key {
        PublicKey::Ed25519(k) | PublicKey::P256(k) | PublicKey::P384(k) => k.clone(),
        PublicKey::Rsa { n, e } => {
            use der::Encode;
            #[derive(der::Sequence)]
            struct RsaPublic<'a> {
                n: der::asn1::UintRef<'a>,
                e: der::asn1::UintRef<'a>,
            }
            let encode = || -> Result<Vec<u8>, der::Error> {
                RsaPublic {
                    n: der::asn1::UintRef::new(n)?,
                    e: der::asn1::UintRef::new(e)?,
                }
                .to_der()
            };
            encode().unwrap_or_default()
        }
    }
}

/// The public key of a PKCS#8 private key (Ed25519, P-256, P-384, RSA).
pub(crate) fn public_of_pkcs8(der: &[u8]) -> Result<PublicKey, JwsError> {
    use crate::keystore::KeyAlgorithm;
    let (alg, public) = crate::keystore::key_public(der, "private key")
        .map_err(|e| JwsError::Key(e.to_string()))?;
    match alg {
        KeyAlgorithm::Ed25519 if public.len() == 32 => Ok(PublicKey::Ed25519(public)),
        KeyAlgorithm::Ec if public.len() == 65 => Ok(PublicKey::P256(public)),
        KeyAlgorithm::Ec if public.len() == 97 => Ok(PublicKey::P384(public)),
        KeyAlgorithm::Rsa => super::compact::pkcs1_public(&public)
            .ok_or_else(|| JwsError::Key("an RSA key that does not decode".into())),
        other => Err(JwsError::Key(format!(
            "a {other} key cannot sign JWS (Ed25519, P-256, P-384 or RSA)"
        ))),
    }
}

/// The PKCS#8 form of a private JWK, checked to match its public members.
fn private_pkcs8(m: &Map<String, Value>, key: &PublicKey) -> Result<Zeroizing<Vec<u8>>, JwsError> {
    use aws_lc_rs::signature::{EcdsaKeyPair, Ed25519KeyPair};
    let d = Zeroizing::new(
        m.get("d")
            .and_then(Value::as_str)
            .and_then(|t| URL_SAFE_NO_PAD.decode(t).ok())
            .ok_or_else(|| JwsError::Key("the JWK's `d` is not base64url".into()))?,
    );
    let mismatch = || JwsError::Key("the JWK's private key does not match its public key".into());
    let doc = match key {
        PublicKey::Ed25519(x) => Ed25519KeyPair::from_seed_and_public_key(&d, x)
            .map_err(|_| mismatch())?
            .to_pkcs8v1()
            .map_err(|_| mismatch())?
            .as_ref()
            .to_vec(),
        PublicKey::P256(p) | PublicKey::P384(p) => {
            let alg = if matches!(key, PublicKey::P256(_)) {
                &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING
            } else {
                &aws_lc_rs::signature::ECDSA_P384_SHA384_FIXED_SIGNING
            };
            EcdsaKeyPair::from_private_key_and_public_key(alg, &d, p)
                .map_err(|_| mismatch())?
                .to_pkcs8v1()
                .map_err(|_| mismatch())?
                .as_ref()
                .to_vec()
        }
        PublicKey::Rsa { .. } => {
            return Err(JwsError::Key(
                "RSA private JWKs are not imported: import the key as PKCS#8 PEM (`key import`), or generate one with `key generate --kind jws --algorithm rs256`".into(),
            ))
        }
    };
    Ok(Zeroizing::new(doc))
}

/// Binds `jwk` to `emails` in `store`, and stores its private key when it carries one.
/// `source` says where the binding came from (`jwk`, `agent-card`, a DID). A key
/// already bound to other addresses is refused
/// ([`crate::identity::pins::PinError::BoundElsewhere`]): moving
/// it takes [`bind_with`] and the addresses it is bound to now.
pub fn bind(
    store: &dyn KeyStore,
    jwk: &Jwk,
    emails: &[String],
    source: &str,
) -> Result<KeyEntry, JwsError> {
    bind_with(store, jwk, emails, source, &[])
}

/// Imports `jwk` for `emails` as `key import --jwk`/`--did` does: each address's pin
/// (`held`, what the store holds for it, [`crate::ext::peers::PeerPolicies::pin`])
/// must already hold the key, or be empty, unless `accept_changed`; then
/// [`bind_with`] under `rebind`. Every address is checked before anything is bound.
pub fn import(
    store: &dyn KeyStore,
    jwk: &Jwk,
    emails: &[String],
    source: &str,
    held: &[Pin],
    accept_changed: bool,
    rebind: &[String],
) -> Result<KeyEntry, JwsError> {
    let fingerprint = jwk.fingerprint();
    for email in emails {
        let address = pins::normalise_address(email);
        let empty = Pin::new(&address);
        let pin = held.iter().find(|p| p.address == address).unwrap_or(&empty);
        pins::check(pin, &Offer::key(&address, &fingerprint), accept_changed)?;
    }
    bind_with(store, jwk, emails, source, rebind)
}

/// As [`bind`]; a key bound to other addresses is moved when `rebind` names exactly
/// the addresses it is bound to now (the new binding replaces the old).
pub fn bind_with(
    store: &dyn KeyStore,
    jwk: &Jwk,
    emails: &[String],
    source: &str,
    rebind: &[String],
) -> Result<KeyEntry, JwsError> {
    let mut emails: Vec<String> = emails
        .iter()
        .map(|e| e.trim().to_ascii_lowercase())
        .collect();
    emails.sort();
    emails.dedup();
    if emails.is_empty()
        || emails
            .iter()
            .any(|e| !crate::message::Mailbox::new(e).is_valid_addr_spec())
    {
        return Err(JwsError::Key(
            "a JWK is bound to one or more addresses (--email ADDR)".into(),
        ));
    }
    let fingerprint = jwk.fingerprint();
    let bound_to = store
        .jwk_identities()?
        .into_iter()
        .find(|r| r.fingerprint == fingerprint)
        .map(|r| r.emails)
        .unwrap_or_default();
    pins::check_rebind(&fingerprint, &bound_to, &emails, rebind)?;
    if let Some(pkcs8) = &jwk.pkcs8 {
        let pem = Zeroizing::new(
            der::pem::encode_string("PRIVATE KEY", der::pem::LineEnding::LF, pkcs8)
                .map_err(|e| JwsError::Key(e.to_string()))?,
        );
        store.import(pem.as_bytes(), "JWK private key", false)?;
    }
    let record = StoredJwk {
        fingerprint,
        emails,
        jwk: jwk.public_value().to_string(),
        source: source.to_string(),
    };
    store.put_jwk_identity(&record)?;
    // The store lists it as every store does (`with_jwk_entries`): with its addresses
    // and whether the private key is there.
    store
        .list()?
        .into_iter()
        .find(|e| e.fingerprint == record.fingerprint && e.kind == crate::keystore::EntryKind::Jwk)
        .ok_or_else(|| JwsError::Key("the JWK identity was not stored".into()))
}

/// Generates a key for `alg` (Ed25519 by default), stores it and binds it to `email`.
pub fn generate(
    store: &dyn KeyStore,
    email: &str,
    alg: JwsAlgorithm,
) -> Result<KeyEntry, JwsError> {
    use crate::smime::KeyKind;
    let kind = match alg {
        JwsAlgorithm::EdDsa => KeyKind::Ed25519,
        JwsAlgorithm::Es256 => KeyKind::P256,
        JwsAlgorithm::Es384 => KeyKind::P384,
        JwsAlgorithm::Rs256 | JwsAlgorithm::Ps256 => KeyKind::Rsa2048,
    };
    let pkcs8 =
        crate::smime::generate_key(kind, false).map_err(|e| JwsError::Key(e.to_string()))?;
    let key = public_of_pkcs8(&pkcs8)?;
    let jwk = Jwk {
        key,
        alg,
        declared: true,
        kid: None,
        pkcs8: Some(pkcs8),
    };
    bind(store, &jwk, &[email.to_string()], "generated")
}

/// A stored identity read back: its key and algorithm.
pub(crate) fn stored_key(record: &StoredJwk) -> Result<Jwk, JwsError> {
    let jwk = Jwk::parse(record.jwk.as_bytes())?;
    if jwk.is_private() {
        return Err(JwsError::Key(
            "a stored JWK record holds a private key".into(),
        ));
    }
    Ok(jwk)
}

/// The public JWKs bound to `email` in `store` (for an Agent Card, `key export`).
pub fn public_jwks(store: &dyn KeyStore, email: &str) -> Result<Vec<Value>, JwsError> {
    let email = email.trim().to_ascii_lowercase();
    let mut out = Vec::new();
    for r in store.jwk_identities()? {
        if r.emails.contains(&email) {
            out.push(stored_key(&r)?.public_value());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7638_thumbprint_example() {
        // RFC 7638 section 3.1.
        let jwk = br#"{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}"#;
        let jwk = Jwk::parse(jwk).unwrap();
        assert_eq!(
            jwk.thumbprint(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }

    #[test]
    fn refused_keys() {
        for bad in [
            r#"{"kty":"oct","k":"c2VjcmV0"}"#,
            r#"{"kty":"OKP","crv":"X25519","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#,
            r#"{"kty":"OKP","crv":"Ed25519","x":"AAAA"}"#,
            r#"{"kty":"RSA","n":"AQAB","e":"AQAB"}"#,
            r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","alg":"ES256"}"#,
            r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","use":"enc"}"#,
            r#"[1]"#,
        ] {
            assert!(Jwk::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn rfc8037_private_key_reads_and_matches() {
        // RFC 8037 appendix A.1.
        let jwk = br#"{"kty":"OKP","crv":"Ed25519","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;
        let k = Jwk::parse(jwk).unwrap();
        assert!(k.is_private());
        // RFC 8037 appendix A.3.
        assert_eq!(
            k.thumbprint(),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
        let wrong = br#"{"kty":"OKP","crv":"Ed25519","d":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;
        assert!(Jwk::parse(wrong).is_err());
    }
}
