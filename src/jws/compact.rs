//! The crate's one JWS implementation (RFC 7515 compact form, detached payloads):
//! protected headers, the algorithms we accept, signing and verifying with aws-lc-rs,
//! and RFC 8785 JCS. The `jws` profile signs mail with it; Agent Card signatures (A2A
//! v1.0 `AgentCardSignature`) too.
//!
//! For a card, what is signed is the card without its `signatures` member and without empty
//! members (null, `""`, `[]`, `{}`: what the A2A SDKs omit before signing), in the JSON
//! Canonicalization Scheme (RFC 8785), as a detached payload (RFC 7515 appendix F):
//! the signing input is `BASE64URL(protected) "." BASE64URL(JCS(card))`. The JCS form
//! makes the signature independent of key order and white space, so a card can pass
//! through any JSON library and still verify.

use aws_lc_rs::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::{Map, Value};

/// The JWS algorithms an Agent Card signature may use (RFC 7518, RFC 8037).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JwsAlgorithm {
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// ECDSA P-384 with SHA-384.
    Es384,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// RSASSA-PSS with SHA-256.
    Ps256,
    /// Ed25519.
    EdDsa,
}

impl JwsAlgorithm {
    /// The `alg` header value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
            Self::Rs256 => "RS256",
            Self::Ps256 => "PS256",
            Self::EdDsa => "EdDSA",
        }
    }
    /// The algorithm an `alg` header value names, among those we accept.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "ES256" => Self::Es256,
            "ES384" => Self::Es384,
            "RS256" => Self::Rs256,
            "PS256" => Self::Ps256,
            "EdDSA" => Self::EdDsa,
            _ => return None,
        })
    }
}

/// A public key as a JWS verifier needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PublicKey {
    /// An uncompressed P-256 point.
    P256(Vec<u8>),
    /// An uncompressed P-384 point.
    P384(Vec<u8>),
    /// RSA modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An Ed25519 key.
    Ed25519(Vec<u8>),
}

impl PublicKey {
    /// The key of an X.509 SubjectPublicKeyInfo.
    pub(crate) fn from_spki(spki: &spki::SubjectPublicKeyInfoOwned) -> Option<PublicKey> {
        use crate::asn1::oids::{ID_EC_PUBLIC_KEY, RSA_ENCRYPTION, SECP256R1, SECP384R1};
        let bits = spki.subject_public_key.as_bytes()?.to_vec();
        let oid = spki.algorithm.oid;
        if oid == ID_EC_PUBLIC_KEY {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()?
                .decode_as::<der::asn1::ObjectIdentifier>()
                .ok()?;
            return match curve {
                c if c == SECP256R1 => Some(PublicKey::P256(bits)),
                c if c == SECP384R1 => Some(PublicKey::P384(bits)),
                _ => None,
            };
        }
        if oid == RSA_ENCRYPTION {
            return pkcs1_public(&bits);
        }
        if oid == crate::asn1::oids::ED25519 && bits.len() == 32 {
            return Some(PublicKey::Ed25519(bits));
        }
        None
    }

    /// The key of a JWK (RFC 7517): EC P-256/P-384, RSA, or OKP Ed25519.
    pub(crate) fn from_jwk(jwk: &Map<String, Value>) -> Result<PublicKey, String> {
        let field = |name: &str| -> Result<Vec<u8>, String> {
            let text = jwk
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("jwk without `{name}`"))?;
            URL_SAFE_NO_PAD
                .decode(text)
                .map_err(|_| format!("jwk `{name}` is not base64url"))
        };
        let point = |len: usize| -> Result<Vec<u8>, String> {
            let (x, y) = (field("x")?, field("y")?);
            if x.len() != len || y.len() != len {
                return Err("jwk coordinates of the wrong length".into());
            }
            Ok([&[4u8][..], &x, &y].concat())
        };
        match (
            jwk.get("kty").and_then(Value::as_str),
            jwk.get("crv").and_then(Value::as_str),
        ) {
            (Some("EC"), Some("P-256")) => Ok(PublicKey::P256(point(32)?)),
            (Some("EC"), Some("P-384")) => Ok(PublicKey::P384(point(48)?)),
            (Some("OKP"), Some("Ed25519")) => {
                let x = field("x")?;
                if x.len() != 32 {
                    return Err("jwk Ed25519 key of the wrong length".into());
                }
                Ok(PublicKey::Ed25519(x))
            }
            (Some("RSA"), _) => Ok(PublicKey::Rsa {
                n: field("n")?,
                e: field("e")?,
            }),
            (kty, crv) => Err(format!(
                "jwk key type {} {} is not supported",
                crate::error::quoted(kty.unwrap_or("(none)")),
                crate::error::quoted(crv.unwrap_or(""))
            )),
        }
    }

    /// Whether `signature` over `input` verifies with this key under `alg`; an
    /// algorithm that does not fit the key never verifies.
    pub(crate) fn verify(&self, alg: JwsAlgorithm, input: &[u8], sig: &[u8]) -> bool {
        use JwsAlgorithm::*;
        let ok = |a: &'static dyn signature::VerificationAlgorithm, key: &[u8]| {
            UnparsedPublicKey::new(a, key).verify(input, sig).is_ok()
        };
        match (self, alg) {
            (PublicKey::P256(k), Es256) => ok(&signature::ECDSA_P256_SHA256_FIXED, k),
            (PublicKey::P384(k), Es384) => ok(&signature::ECDSA_P384_SHA384_FIXED, k),
            (PublicKey::Ed25519(k), EdDsa) => ok(&signature::ED25519, k),
            (PublicKey::Rsa { n, e }, Rs256 | Ps256) => {
                let params = if alg == Rs256 {
                    &signature::RSA_PKCS1_2048_8192_SHA256
                } else {
                    &signature::RSA_PSS_2048_8192_SHA256
                };
                RsaPublicKeyComponents { n, e }
                    .verify(params, input, sig)
                    .is_ok()
            }
            _ => false,
        }
    }
}

/// A private key ready to sign under one JWS algorithm: Ed25519, ECDSA with
/// fixed-size `r || s` as JWS wants, RSA PKCS#1 v1.5 or PSS.
pub(crate) enum KeyPair {
    Ed25519(aws_lc_rs::signature::Ed25519KeyPair),
    Ecdsa(aws_lc_rs::signature::EcdsaKeyPair),
    Rsa(
        aws_lc_rs::signature::RsaKeyPair,
        &'static dyn signature::RsaEncoding,
    ),
}

impl KeyPair {
    /// The key pair of a PKCS#8 private key (the form every key store holds) for
    /// `alg`; a key that does not fit `alg` is refused.
    pub(crate) fn from_pkcs8(alg: JwsAlgorithm, pkcs8: &[u8]) -> Result<KeyPair, String> {
        use aws_lc_rs::signature::{EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};
        let unfit = || format!("the private key is not a {} key", alg.name());
        Ok(match alg {
            JwsAlgorithm::EdDsa => KeyPair::Ed25519(
                Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8).map_err(|_| unfit())?,
            ),
            JwsAlgorithm::Es256 => KeyPair::Ecdsa(
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8)
                    .map_err(|_| unfit())?,
            ),
            JwsAlgorithm::Es384 => KeyPair::Ecdsa(
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P384_SHA384_FIXED_SIGNING, pkcs8)
                    .map_err(|_| unfit())?,
            ),
            JwsAlgorithm::Rs256 => KeyPair::Rsa(
                RsaKeyPair::from_pkcs8(pkcs8).map_err(|_| unfit())?,
                &signature::RSA_PKCS1_SHA256,
            ),
            JwsAlgorithm::Ps256 => KeyPair::Rsa(
                RsaKeyPair::from_pkcs8(pkcs8).map_err(|_| unfit())?,
                &signature::RSA_PSS_SHA256,
            ),
        })
    }

    /// The JWS signature of `input`.
    pub(crate) fn sign(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        match self {
            KeyPair::Ed25519(k) => Ok(k.sign(input).as_ref().to_vec()),
            KeyPair::Ecdsa(k) => k
                .sign(&rng, input)
                .map(|s| s.as_ref().to_vec())
                .map_err(|_| "ECDSA signing failed".into()),
            KeyPair::Rsa(k, padding) => {
                let mut sig = vec![0u8; k.public_modulus_len()];
                k.sign(*padding, &rng, input, &mut sig)
                    .map_err(|_| "RSA signing failed".to_string())?;
                Ok(sig)
            }
        }
    }
}

/// Modulus and exponent of a PKCS#1 RSAPublicKey.
pub(crate) fn pkcs1_public(der_bytes: &[u8]) -> Option<PublicKey> {
    use der::Decode;
    #[derive(der::Sequence)]
    struct RsaPublic<'a> {
        n: der::asn1::UintRef<'a>,
        e: der::asn1::UintRef<'a>,
    }
    let k = RsaPublic::from_der(der_bytes).ok()?;
    Some(PublicKey::Rsa {
        n: k.n.as_bytes().to_vec(),
        e: k.e.as_bytes().to_vec(),
    })
}

/// A signature's protected header, as far as verification needs it.
#[derive(Clone, Debug)]
pub(crate) struct Header {
    pub alg: JwsAlgorithm,
    /// `kid`, if any.
    pub kid: Option<String>,
    /// `x5c`: DER certificates, signer first.
    pub x5c: Vec<Vec<u8>>,
    /// `jwk`, if any.
    pub jwk: Option<PublicKey>,
    /// `cty`, if any: what the payload is.
    pub cty: Option<String>,
    /// Which of the members that carry or point to a key (`jwk`, `x5c`, `jku`, `x5u`)
    /// the header has: a mail signature's key is the one the store binds to the From
    /// address, never one the message names.
    pub key_members: Vec<&'static str>,
}

/// Reads a base64url protected header. Refused: not a JSON object, a member twice
/// (read last-wins, `{"alg":"none","alg":"EdDSA"}` would be one thing to us and
/// another to a reader that keeps the first), an `alg` outside [`JwsAlgorithm`]
/// (`none` included), a `crit` list (no extension header is understood here),
/// `b64: false` (RFC 7797 payloads are not the A2A form).
pub(crate) fn parse_header(protected: &str) -> Result<Header, String> {
    let bytes = URL_SAFE_NO_PAD
        .decode(protected.trim_end_matches('='))
        .map_err(|_| "protected header is not base64url".to_string())?;
    crate::envelope::check_strict_json(&bytes, 8).map_err(|e| match e {
        crate::envelope::EnvelopeError::DuplicateKey { .. } => {
            "protected header has a member twice".to_string()
        }
        _ => "protected header is not JSON".to_string(),
    })?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|_| "protected header is not JSON".to_string())?;
    let Value::Object(h) = value else {
        return Err("protected header is not a JSON object".into());
    };
    let alg_name = h
        .get("alg")
        .and_then(Value::as_str)
        .ok_or("protected header without `alg`")?;
    let alg = JwsAlgorithm::from_name(alg_name).ok_or_else(|| {
        format!(
            "signature algorithm `{}` is not accepted",
            crate::error::quoted(alg_name)
        )
    })?;
    if h.contains_key("crit") {
        return Err("protected header has `crit` extensions, which are not understood".into());
    }
    if h.get("b64") == Some(&Value::Bool(false)) {
        return Err("unencoded payloads (b64: false) are not the A2A form".into());
    }
    let x5c = match h.get("x5c") {
        None => Vec::new(),
        Some(Value::Array(certs)) => certs
            .iter()
            .map(|c| {
                c.as_str()
                    .and_then(|s| STANDARD.decode(s).ok())
                    .ok_or_else(|| "x5c entry is not base64 DER".to_string())
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("x5c is not an array".into()),
    };
    let jwk = match h.get("jwk") {
        None => None,
        Some(Value::Object(k)) => Some(PublicKey::from_jwk(k)?),
        Some(_) => return Err("jwk is not an object".into()),
    };
    Ok(Header {
        alg,
        kid: h.get("kid").and_then(Value::as_str).map(str::to_string),
        x5c,
        jwk,
        cty: h.get("cty").and_then(Value::as_str).map(str::to_string),
        key_members: ["jwk", "x5c", "jku", "x5u"]
            .into_iter()
            .filter(|m| h.contains_key(*m))
            .collect(),
    })
}

/// The bytes a card's signatures cover: the card without `signatures` and without
/// empty members, in JCS form.
pub(crate) fn signed_payload(card: &Value) -> Vec<u8> {
    let mut card = card.clone();
    if let Value::Object(m) = &mut card {
        m.remove("signatures");
    }
    let card = without_empty(card).unwrap_or(Value::Object(Map::new()));
    let mut out = Vec::new();
    jcs(&card, &mut out);
    out
}

/// The JWS signing input for a protected header (base64url) and a payload.
pub(crate) fn signing_input(protected_b64: &str, payload: &[u8]) -> Vec<u8> {
    let mut input = protected_b64.as_bytes().to_vec();
    input.push(b'.');
    input.extend_from_slice(URL_SAFE_NO_PAD.encode(payload).as_bytes());
    input
}

/// `value` with null, empty strings, empty arrays and empty objects removed, bottom up
/// (`None` when nothing is left of it).
fn without_empty(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let items: Vec<Value> = items.into_iter().filter_map(without_empty).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(members) => {
            let members: Map<String, Value> = members
                .into_iter()
                .filter_map(|(k, v)| without_empty(v).map(|v| (k, v)))
                .collect();
            (!members.is_empty()).then_some(Value::Object(members))
        }
        other => Some(other),
    }
}

/// RFC 8785: members sorted by their UTF-16 code units, no white space, strings with
/// the minimal escapes, numbers as ECMAScript writes them.
pub(crate) fn jcs(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => out.extend_from_slice(number(n).as_bytes()),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                jcs(v, out);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push(b'{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(k, out);
                out.push(b':');
                jcs(v, out);
            }
            out.push(b'}');
        }
    }
}

fn string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\r' => out.extend_from_slice(b"\\r"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// A JSON number as ECMAScript's Number.prototype.toString writes the double it is.
fn number(n: &serde_json::Number) -> String {
    const EXACT: u64 = 1 << 53;
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT) {
        return u.to_string();
    }
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        return i.to_string();
    }
    es_number(n.as_f64().unwrap_or(0.0))
}

fn es_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // Rust's `{:e}` writes the shortest digits that read back as `x`, as ECMAScript
    // requires; only the placement of the decimal point differs.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    let n = exp.parse::<i64>().unwrap_or(0) + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let sign = if e < 0 { "-" } else { "+" };
        let (first, rest) = digits.split_at(1);
        if rest.is_empty() {
            format!("{first}e{sign}{}", e.abs())
        } else {
            format!("{first}.{rest}e{sign}{}", e.abs())
        }
    };
    format!("{sign}{body}")
}

/// A DER ECDSA signature as JWS wants it: r and s, each left-padded to `len` bytes.
pub(crate) fn ecdsa_fixed(der_sig: &[u8], len: usize) -> Option<Vec<u8>> {
    use der::Decode;
    #[derive(der::Sequence)]
    struct Sig<'a> {
        r: der::asn1::UintRef<'a>,
        s: der::asn1::UintRef<'a>,
    }
    let sig = Sig::from_der(der_sig).ok()?;
    let mut out = Vec::with_capacity(2 * len);
    for part in [sig.r.as_bytes(), sig.s.as_bytes()] {
        if part.len() > len {
            return None;
        }
        out.extend(std::iter::repeat_n(0u8, len - part.len()));
        out.extend_from_slice(part);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        let mut out = Vec::new();
        jcs(&serde_json::from_str(text).unwrap(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn rfc8785_examples() {
        // RFC 8785 section 3.2.2 (numbers) and 3.2.3 (sorting by UTF-16 code units).
        assert_eq!(
            canon(
                r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]}"#
            ),
            r#"{"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}"#
        );
        assert_eq!(
            canon("{\"\\u20ac\": 1, \"\\r\": 2, \"1\": 3, \"\\ud83d\\ude00\": 4, \"\\u00f6\": 5}"),
            "{\"\\r\":2,\"1\":3,\"\u{f6}\":5,\"\u{20ac}\":1,\"\u{1f600}\":4}"
        );
        assert_eq!(
            canon(r#"["\u001f", "a/b", 1.0, -0.0, 100000000000000000000000]"#),
            "[\"\\u001f\",\"a/b\",1,0,1e+23]"
        );
        assert_eq!(es_number(1e21), "1e+21");
        assert_eq!(es_number(123456789012345680000.0), "123456789012345680000");
        assert_eq!(es_number(0.000001), "0.000001");
        assert_eq!(es_number(1e-7), "1e-7");
    }

    #[test]
    fn empty_members_and_signatures_are_not_signed() {
        let card = serde_json::json!({"b": "", "a": {"x": [], "y": null, "z": 1},
            "signatures": [{"protected": "e30", "signature": "AA"}]});
        assert_eq!(signed_payload(&card), br#"{"a":{"z":1}}"#);
    }

    #[test]
    fn headers_refused() {
        let h = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        assert!(parse_header(&h(serde_json::json!({"alg": "none"}))).is_err());
        assert!(parse_header(&h(serde_json::json!({"alg": "HS256"}))).is_err());
        assert!(parse_header(&h(serde_json::json!({"alg": "ES256", "crit": ["b64"]}))).is_err());
        assert!(parse_header(&h(serde_json::json!({"alg": "ES256", "b64": false}))).is_err());
        assert!(parse_header(&h(serde_json::json!(["ES256"]))).is_err());
        assert!(parse_header("!!").is_err());
        let twice = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","alg":"EdDSA"}"#);
        assert_eq!(
            parse_header(&twice).unwrap_err(),
            "protected header has a member twice"
        );
        assert!(parse_header(&h(serde_json::json!({"alg": "ES256", "kid": "k"}))).is_ok());
    }
}
