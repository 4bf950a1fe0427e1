//! DIDs as identities of the `jws` profile: `did:key` (Ed25519, P-256) and `did:jwk`
//! resolved offline, `did:web` from its DID document (fetched over HTTPS by
//! [`crate::https`]; the document is read here, so it is fuzzed without a network).
//!
//! A DID names no address either: importing one binds its keys to the addresses the
//! owner declares (`key import --did DID --email ADDR`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::compact::PublicKey;
use super::jwk::Jwk;
use super::JwsError;

/// Largest DID document read.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Most verification methods taken from one document.
const MAX_METHODS: usize = 32;

fn bad(why: impl Into<String>) -> JwsError {
    JwsError::Did(why.into())
}

/// The keys of a `did:key` or `did:jwk` (no network).
pub fn resolve_offline(did: &str) -> Result<Vec<Jwk>, JwsError> {
    if let Some(rest) = did.strip_prefix("did:key:") {
        return Ok(vec![multibase_key(rest)?]);
    }
    if let Some(rest) = did.strip_prefix("did:jwk:") {
        let text = URL_SAFE_NO_PAD
            .decode(rest.trim_end_matches('='))
            .map_err(|_| bad("did:jwk is not base64url"))?;
        let jwk = Jwk::parse(&text)?;
        if jwk.is_private() {
            return Err(bad("did:jwk carries a private key"));
        }
        return Ok(vec![jwk]);
    }
    if did.starts_with("did:web:") {
        return Err(bad("did:web is resolved over HTTPS, not offline"));
    }
    Err(bad(format!(
        "`{}`: only did:key, did:jwk and did:web are supported",
        did.chars().take(80).collect::<String>()
    )))
}

/// A multibase (base58btc, `z`) multicodec public key: Ed25519 (0xed) or P-256
/// (0x1200, compressed point), as `did:key` and `publicKeyMultibase` carry it.
fn multibase_key(text: &str) -> Result<Jwk, JwsError> {
    let b58 = text
        .strip_prefix('z')
        .ok_or_else(|| bad("a multibase key that is not base58btc (z...)"))?;
    if b58.len() > 200 {
        return Err(bad("a multibase key longer than any supported key"));
    }
    let bytes = bs58::decode(b58)
        .into_vec()
        .map_err(|_| bad("not base58btc"))?;
    let key = match bytes.as_slice() {
        [0xed, 0x01, key @ ..] if key.len() == 32 => PublicKey::Ed25519(key.to_vec()),
        [0x80, 0x24, point @ ..] if point.len() == 33 => {
            let public = p256::PublicKey::from_sec1_bytes(point)
                .map_err(|_| bad("a P-256 key that is not on the curve"))?;
            use p256::elliptic_curve::sec1::ToEncodedPoint;
            PublicKey::P256(public.to_encoded_point(false).as_bytes().to_vec())
        }
        _ => {
            return Err(bad(
                "a multicodec key other than Ed25519 (0xed) or compressed P-256 (0x1200)",
            ))
        }
    };
    Jwk::parse(super::jwk::public_jwk_text(&key).as_bytes())
}

/// The URL of a `did:web`'s document (W3C did:web 3.2): `did:web:HOST` is
/// `https://HOST/.well-known/did.json`, `did:web:HOST:a:b` is
/// `https://HOST/a/b/did.json`; a port is written `%3A`.
pub fn web_document_url(did: &str) -> Result<String, JwsError> {
    let rest = did
        .strip_prefix("did:web:")
        .ok_or_else(|| bad("not a did:web"))?;
    let mut segments = rest.split(':');
    let host = segments
        .next()
        .unwrap_or_default()
        .replace("%3A", ":")
        .replace("%3a", ":");
    let ok = |s: &str, extra: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c) || extra.contains(c))
    };
    if !ok(&host, ":") {
        return Err(bad("did:web with an invalid host"));
    }
    let path: Vec<&str> = segments.collect();
    if path.iter().any(|s| !ok(s, "%") || *s == "." || *s == "..") {
        return Err(bad("did:web with an invalid path"));
    }
    Ok(if path.is_empty() {
        format!("https://{host}/.well-known/did.json")
    } else {
        format!("https://{host}/{}/did.json", path.join("/"))
    })
}

/// The signing keys of a DID document for `did`, live now: [`document_keys_at`] at
/// the current time, without the list of what was left out.
pub fn document_keys(did: &str, document: &[u8]) -> Result<Vec<Jwk>, JwsError> {
    document_keys_at(did, document, OffsetDateTime::now_utc()).map(|d| d.keys)
}

/// What a DID document gives to bind: its live keys, and the methods it marks
/// revoked or expired, which are left out (said at import, never bound silently).
#[derive(Debug)]
#[non_exhaustive]
pub struct DocumentKeys {
    /// The keys to bind.
    pub keys: Vec<Jwk>,
    /// The verification methods left out, each with why (its id, then the reason).
    pub skipped: Vec<String>,
    /// Keys bound although the document says when they expire (a binding in this
    /// store does not end then): each method's id and its `expires`.
    pub expiring: Vec<String>,
}

/// Why a verification method is not bound at `at`: its `revoked` (W3C Controlled
/// Identifiers 1.0, 2.2: the key must not be used after that time; a binding here has
/// no end, so a key with any revocation time is not bound) or an `expires` at or
/// before `at`. A value that is not an RFC 3339 time refuses the document: a form we
/// cannot read must not count as "not revoked". `Ok(Some(expires))`: live, but ends.
fn method_state(
    m: &Map<String, Value>,
    mid: &str,
    at: OffsetDateTime,
) -> Result<Result<Option<OffsetDateTime>, String>, JwsError> {
    let time_of = |field: &str| -> Result<Option<OffsetDateTime>, JwsError> {
        match m.get(field) {
            None => Ok(None),
            Some(Value::String(t)) => OffsetDateTime::parse(t, &Rfc3339).map(Some).map_err(|_| {
                bad(format!(
                    "verification method `{}`: `{field}` is not an RFC 3339 time",
                    mid.chars().take(120).collect::<String>()
                ))
            }),
            Some(_) => Err(bad(format!(
                "verification method `{}`: `{field}` is not a time",
                mid.chars().take(120).collect::<String>()
            ))),
        }
    };
    let revoked = time_of("revoked")?;
    let expires = time_of("expires")?;
    let f = |t: OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
    if let Some(r) = revoked {
        return Ok(Err(format!("revoked at {}", f(r))));
    }
    match expires {
        Some(e) if e <= at => Ok(Err(format!("expired at {}", f(e)))),
        other => Ok(Ok(other)),
    }
}

/// The signing keys of a DID document for `did` at `at`: the verification methods
/// its `assertionMethod` or `authentication` name (by reference or embedded), each
/// controlled by `did`, except those it marks revoked or expired at `at` (listed in
/// [`DocumentKeys::skipped`]). A document whose `id` is another DID is refused: it
/// cannot speak for this one; so is one with no live key left.
pub fn document_keys_at(
    did: &str,
    document: &[u8],
    at: OffsetDateTime,
) -> Result<DocumentKeys, JwsError> {
    if document.len() > MAX_DOCUMENT_BYTES {
        return Err(bad(format!(
            "a DID document of {} bytes, more than {MAX_DOCUMENT_BYTES}",
            document.len()
        )));
    }
    let doc: Value = serde_json::from_slice(document).map_err(|e| bad(format!("not JSON: {e}")))?;
    let Value::Object(doc) = doc else {
        return Err(bad("a DID document is a JSON object"));
    };
    let id = doc.get("id").and_then(Value::as_str).unwrap_or_default();
    if id != did {
        return Err(bad(format!(
            "the document is for `{}`, not {did}",
            id.chars().take(120).collect::<String>()
        )));
    }
    let methods: Vec<&Map<String, Value>> = match doc.get("verificationMethod") {
        None => Vec::new(),
        Some(Value::Array(l)) => l.iter().filter_map(Value::as_object).collect(),
        Some(_) => return Err(bad("verificationMethod is not an array")),
    };
    let absolute = |r: &str| {
        if r.starts_with('#') {
            format!("{did}{r}")
        } else {
            r.to_string()
        }
    };
    let mut chosen: Vec<&Map<String, Value>> = Vec::new();
    for relation in ["assertionMethod", "authentication"] {
        let Some(list) = doc.get(relation) else {
            continue;
        };
        let Value::Array(list) = list else {
            return Err(bad(format!("{relation} is not an array")));
        };
        for item in list {
            match item {
                Value::String(r) => {
                    let r = absolute(r);
                    if let Some(m) = methods.iter().find(|m| {
                        m.get("id").and_then(Value::as_str).map(absolute) == Some(r.clone())
                    }) {
                        chosen.push(m);
                    } else if !r.starts_with(did) {
                        return Err(bad(format!("{relation} names a key of another DID")));
                    }
                }
                Value::Object(m) => chosen.push(m),
                _ => {
                    return Err(bad(format!(
                        "{relation} has an entry that is neither a reference nor a method"
                    )))
                }
            }
        }
    }
    if chosen.len() > MAX_METHODS {
        return Err(bad(format!("more than {MAX_METHODS} verification methods")));
    }
    let mut keys: Vec<Jwk> = Vec::new();
    let (mut skipped, mut expiring, mut dead) = (Vec::new(), Vec::new(), Vec::new());
    for m in chosen {
        let mid = m
            .get("id")
            .and_then(Value::as_str)
            .map(absolute)
            .unwrap_or_default();
        let controller = m.get("controller").and_then(Value::as_str).unwrap_or(did);
        if controller != did || !mid.starts_with(&format!("{did}#")) {
            return Err(bad(format!(
                "verification method `{}` is controlled by another DID",
                mid.chars().take(120).collect::<String>()
            )));
        }
        let jwk =
            match (m.get("publicKeyJwk"), m.get("publicKeyMultibase")) {
                (Some(Value::Object(j)), None) => Jwk::from_map(j)?,
                (None, Some(Value::String(mb))) => multibase_key(mb)?,
                _ => return Err(bad(
                    "a verification method without exactly one of publicKeyJwk, publicKeyMultibase",
                )),
            };
        if jwk.is_private() {
            return Err(bad("a DID document carries a private key"));
        }
        let shown = mid.chars().take(120).collect::<String>();
        match method_state(m, &mid, at)? {
            Err(why) => {
                let entry = format!("{shown}: {why}");
                if !skipped.contains(&entry) {
                    skipped.push(entry);
                }
                dead.push(jwk.thumbprint());
                continue;
            }
            Ok(Some(e)) => {
                expiring.push(format!(
                    "{shown}: expires {}",
                    e.format(&Rfc3339).unwrap_or_default()
                ));
            }
            Ok(None) => {}
        }
        if !keys.iter().any(|k| k.thumbprint() == jwk.thumbprint()) {
            keys.push(jwk);
        }
    }
    // A key the document marks revoked or expired in one method is not live because
    // another method lists it too.
    keys.retain(|k| !dead.contains(&k.thumbprint()));
    if keys.is_empty() && !skipped.is_empty() {
        return Err(bad(format!(
            "the document names no live key: {}",
            skipped.join("; ")
        )));
    }
    if keys.is_empty() {
        return Err(bad(
            "the document names no assertionMethod or authentication key",
        ));
    }
    Ok(DocumentKeys {
        keys,
        skipped,
        expiring,
    })
}

/// The keys of a `did:web`, its document fetched over HTTPS under `fetch`.
#[cfg(feature = "https")]
pub fn resolve_web(did: &str, fetch: &crate::https::FetchOptions) -> Result<Vec<Jwk>, JwsError> {
    resolve_web_at(did, fetch, OffsetDateTime::now_utc()).map(|d| d.keys)
}

/// The keys of a `did:web` live at `at`, its document fetched over HTTPS under
/// `fetch`, with what the document marks revoked or expired ([`document_keys_at`]).
#[cfg(feature = "https")]
pub fn resolve_web_at(
    did: &str,
    fetch: &crate::https::FetchOptions,
    at: OffsetDateTime,
) -> Result<DocumentKeys, JwsError> {
    let url = web_document_url(did)?;
    let mut fetch = fetch.clone();
    fetch.max_bytes = fetch.max_bytes.min(MAX_DOCUMENT_BYTES);
    let doc = crate::https::get(&url, &fetch).map_err(|e| bad(e.to_string()))?;
    document_keys_at(did, &doc.body, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_marked_revoked_or_expired_are_left_out_and_said() {
        let did = "did:web:a.example";
        let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let m = |id: &str, x: &str, extra: Value| {
            let mut m = serde_json::json!({"id": format!("{did}#{id}"), "type": "JsonWebKey2020",
                "controller": did, "publicKeyJwk": {"kty": "OKP", "crv": "Ed25519", "x": x}});
            for (k, v) in extra.as_object().unwrap() {
                m[k] = v.clone();
            }
            m
        };
        let live = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
        let other = "2Abs0GAVumB3n5w9U1kAzkGbi0kk-tJ6A0mLcyA6j-M";
        let doc = |extra: Value| {
            serde_json::json!({"id": did,
                "verificationMethod": [m("k1", live, serde_json::json!({})), m("k2", other, extra)],
                "assertionMethod": ["#k1", "#k2"]})
            .to_string()
        };
        // Revoked, even at a time still to come: a binding here has no end.
        for extra in [
            serde_json::json!({"revoked": "2020-01-01T00:00:00Z"}),
            serde_json::json!({"revoked": "2099-01-01T00:00:00Z"}),
            serde_json::json!({"expires": "2020-01-01T00:00:00Z"}),
        ] {
            let d = document_keys_at(did, doc(extra.clone()).as_bytes(), at).unwrap();
            assert_eq!(d.keys.len(), 1, "{extra}");
            assert!(
                d.skipped[0].starts_with(&format!("{did}#k2: ")),
                "{:?}",
                d.skipped
            );
        }
        let d = document_keys_at(
            did,
            doc(serde_json::json!({"expires": "2099-01-01T00:00:00Z"})).as_bytes(),
            at,
        )
        .unwrap();
        assert_eq!((d.keys.len(), d.expiring.len()), (2, 1));
        // A time we cannot read refuses the document.
        assert!(document_keys_at(
            did,
            doc(serde_json::json!({"revoked": "soon"})).as_bytes(),
            at
        )
        .is_err());
        // The same key live in one method and revoked in another is not live.
        let d = serde_json::json!({"id": did,
            "verificationMethod": [m("k1", live, serde_json::json!({})),
                m("k2", live, serde_json::json!({"revoked": "2020-01-01T00:00:00Z"}))],
            "assertionMethod": ["#k1", "#k2"]})
        .to_string();
        let e = document_keys_at(did, d.as_bytes(), at).unwrap_err();
        assert!(e.to_string().contains("no live key"), "{e}");
    }

    #[test]
    fn did_key_examples() {
        // did:key spec, test vectors (Ed25519 and P-256).
        let ed =
            resolve_offline("did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp").unwrap();
        assert_eq!(ed[0].alg, crate::jws::JwsAlgorithm::EdDsa);
        let p =
            resolve_offline("did:key:zDnaerDaTF5BXEavCrfRZEk316dpbLsfPDZ3WJ5hRTPFU2169").unwrap();
        assert_eq!(p[0].alg, crate::jws::JwsAlgorithm::Es256);
        assert!(resolve_offline("did:key:z6Mk").is_err());
        assert!(resolve_offline("did:example:123").is_err());
    }

    #[test]
    fn did_web_urls() {
        assert_eq!(
            web_document_url("did:web:w3c-ccg.github.io").unwrap(),
            "https://w3c-ccg.github.io/.well-known/did.json"
        );
        assert_eq!(
            web_document_url("did:web:w3c-ccg.github.io:user:alice").unwrap(),
            "https://w3c-ccg.github.io/user/alice/did.json"
        );
        assert_eq!(
            web_document_url("did:web:example.com%3A3000:u").unwrap(),
            "https://example.com:3000/u/did.json"
        );
        for bad in [
            "did:web:",
            "did:web:a/b",
            "did:web:h:..",
            "did:web:h:a?b",
            "did:web:user@h",
        ] {
            assert!(web_document_url(bad).is_err(), "{bad}");
        }
    }
}
