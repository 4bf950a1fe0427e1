//! Attacker's review of issue 55, class "Unread forms": a DID document's verification
//! method may say it is revoked (`revoked`) or expired (`expires`), W3C Controlled
//! Identifiers 1.0, section 2.2 (the properties DID Core's verification methods use).
//! `did::document_keys` does not read them: a key its owner marked revoked is bound
//! to the address like a live one, without a word at import. Against the built
//! binary (`key import --did did:web:127.0.0.1%3A8443 --email alice@... --ca ...
//! --allow-private`, the document served by a local HTTPS server) both keys were
//! imported, and Mallory, who holds the revoked (stolen) key, sealed a jws request
//! From alice@ that Bob's `open` delivered with exit 0. Issue 55: a form we skip must
//! never count as "nothing to check": refuse, or say so at import.

use mailseal::jws::did;

fn method(did: &str, id: &str, x: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut m = serde_json::json!({
        "id": format!("{did}#{id}"),
        "type": "JsonWebKey2020",
        "controller": did,
        "publicKeyJwk": {"kty": "OKP", "crv": "Ed25519", "x": x},
    });
    for (k, v) in extra.as_object().unwrap() {
        m[k] = v.clone();
    }
    m
}

#[test]
fn fail_review_unread_forms_did_document_key_marked_revoked_or_expired_is_bound() {
    let did = "did:web:alice.example";
    let live = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
    let stolen = "2Abs0GAVumB3n5w9U1kAzkGbi0kk-tJ6A0mLcyA6j-M";
    for marked in [
        serde_json::json!({"revoked": "2026-11-01T00:00:00Z"}),
        serde_json::json!({"expires": "2025-01-01T00:00:00Z"}),
    ] {
        let doc = serde_json::json!({
            "@context": ["https://www.w3.org/ns/did/v1"],
            "id": did,
            "verificationMethod": [
                method(did, "k2", live, serde_json::json!({})),
                method(did, "k1", stolen, marked.clone()),
            ],
            "assertionMethod": [format!("{did}#k2"), format!("{did}#k1")],
        });
        match did::document_keys(did, doc.to_string().as_bytes()) {
            Err(_) => {}
            Ok(keys) => {
                let xs: Vec<String> = keys
                    .iter()
                    .map(|k| k.public_value()["x"].as_str().unwrap().to_string())
                    .collect();
                assert!(
                    !xs.iter().any(|x| x == stolen),
                    "a verification method marked {marked} was returned as a live key: {xs:?}"
                );
            }
        }
    }
}
