//! DID identities: did:key and did:jwk offline, did:web over HTTPS from the test
//! server, and the documents that must be refused.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use mailseal::jws::{did, JwsAlgorithm};
use mailseal::{Outcome, Receiver};

use super::kit;
use super::server::{self, Answer, Cert};

/// did:key of an Ed25519 JWK (multicodec 0xed, base58btc).
fn did_key(jwk: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(jwk).unwrap();
    let x = URL_SAFE_NO_PAD.decode(v["x"].as_str().unwrap()).unwrap();
    format!(
        "did:key:z{}",
        bs58::encode([&[0xed, 0x01][..], &x].concat()).into_string()
    )
}

#[test]
fn did_key_and_did_jwk_resolve_offline() {
    // Keys of a party made in a temporary store, turned into DIDs.
    let dir = tempfile::tempdir().unwrap();
    let alice = kit::party(
        dir.path(),
        "alice",
        "alice@jws.example",
        JwsAlgorithm::EdDsa,
    );
    let by_key = did::resolve_offline(&did_key(&alice.jwk)).unwrap();
    assert_eq!(
        by_key[0].thumbprint(),
        mailseal::jws::Jwk::parse(&alice.jwk).unwrap().thumbprint()
    );
    let by_jwk =
        did::resolve_offline(&format!("did:jwk:{}", URL_SAFE_NO_PAD.encode(&alice.jwk))).unwrap();
    assert_eq!(by_jwk[0].thumbprint(), by_key[0].thumbprint());
    // A did:jwk with a private key, and a did:key of another codec, are refused.
    let private = br#"{"kty":"OKP","crv":"Ed25519","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;
    assert!(did::resolve_offline(&format!("did:jwk:{}", URL_SAFE_NO_PAD.encode(private))).is_err());
    let x25519 = format!(
        "did:key:z{}",
        bs58::encode([&[0xec, 0x01][..], &[7u8; 32]].concat()).into_string()
    );
    assert!(did::resolve_offline(&x25519).is_err());
}

#[test]
fn a_did_key_imported_on_the_command_line_verifies_mail() {
    use super::common::run;
    let dir = tempfile::tempdir().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    let ok = kit::cli;
    ok(&[
        "key",
        "generate",
        "--kind",
        "jws",
        "--email",
        "alice@jws.example",
        "--store",
        &d("alice"),
        "--cert-out",
        &d("alice.jwk"),
    ]);
    ok(&[
        "key",
        "generate",
        "--kind",
        "jws",
        "--email",
        "bob@jws.example",
        "--store",
        &d("bob"),
    ]);
    let didk = did_key(&std::fs::read(d("alice.jwk")).unwrap());
    ok(&[
        "key",
        "import",
        "--store",
        &d("bob"),
        "--did",
        &didk,
        "--email",
        "alice@jws.example",
    ]);
    let signed = kit::cli_signed(
        dir.path(),
        &d("alice"),
        "alice@jws.example",
        "bob@jws.example",
        "k-1",
    );
    ok(&[
        "open",
        "--store",
        &d("bob"),
        "--in",
        &signed,
        "--report",
        &d("v.json"),
    ]);
    let v = std::fs::read_to_string(d("v.json")).unwrap();
    assert!(v.contains("\"profile\": \"jws\""), "{v}");
    // --did without --email is a usage error: the binding must be declared.
    let out = run(
        &["key", "import", "--store", &d("bob"), "--did", &didk],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
}

fn web_document(did: &str, jwk: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": did,
        "verificationMethod": [{
            "id": format!("{did}#key-1"),
            "type": "JsonWebKey2020",
            "controller": did,
            "publicKeyJwk": jwk,
        }],
        "assertionMethod": ["#key-1"],
    })
}

#[test]
fn did_web_resolves_over_https_and_hostile_documents_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let alice = kit::party(
        dir.path(),
        "alice",
        "alice@jws.example",
        JwsAlgorithm::Es256,
    );
    let jwk: serde_json::Value = serde_json::from_slice(&alice.jwk).unwrap();
    let srv = server::start(Cert::Good);
    let did = format!("did:web:localhost%3A{}", srv.port);
    assert_eq!(
        did::web_document_url(&did).unwrap(),
        srv.url("/.well-known/did.json")
    );
    srv.route(
        "/.well-known/did.json",
        Answer::Body(web_document(&did, &jwk).to_string().into_bytes(), None),
    );
    let keys = did::resolve_web(&did, &srv.options()).unwrap();
    assert_eq!(keys.len(), 1);
    // The resolved key verifies Alice's mail (sealed from her store, opened by Bob).
    {
        let bob = kit::party(dir.path(), "bob", "bob@jws.example", JwsAlgorithm::EdDsa);
        mailseal::jws::jwk::bind(&bob.store, &keys[0], &["alice@jws.example".into()], &did)
            .unwrap();
        let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "w-1");
        let mut receiver = Receiver::builder(&bob.store).build();
        let out = receiver.receive(&sealed).unwrap().commit().unwrap();
        let Outcome::Deliver { delivery, .. } = out else {
            panic!()
        };
        assert!(matches!(&delivery.opened.verdict.signer,
            Some(mailseal::seal::SignerIdentity::Jwk { source, .. }) if *source == did));
    }
    // A document that names another DID cannot speak for this one.
    srv.route(
        "/.well-known/did.json",
        Answer::Body(
            web_document("did:web:evil.example", &jwk)
                .to_string()
                .into_bytes(),
            None,
        ),
    );
    let e = did::resolve_web(&did, &srv.options()).unwrap_err();
    assert!(e.to_string().contains("not did:web:localhost"), "{e}");
    // A method controlled by another DID, a private key, no assertion key.
    let mut doc = web_document(&did, &jwk);
    doc["verificationMethod"][0]["controller"] = "did:web:evil.example".into();
    assert!(did::document_keys(&did, doc.to_string().as_bytes()).is_err());
    let mut doc = web_document(&did, &jwk);
    doc["verificationMethod"][0]["publicKeyJwk"]["d"] = "AAAA".into();
    assert!(did::document_keys(&did, doc.to_string().as_bytes()).is_err());
    let mut doc = web_document(&did, &jwk);
    doc.as_object_mut().unwrap().remove("assertionMethod");
    assert!(did::document_keys(&did, doc.to_string().as_bytes()).is_err());
    let mut doc = web_document(&did, &jwk);
    doc["assertionMethod"] = serde_json::json!(["did:web:evil.example#key-1"]);
    assert!(did::document_keys(&did, doc.to_string().as_bytes()).is_err());
    // Without --allow-private the loopback host is not reached at all.
    let mut strict = srv.options();
    strict.allow_private = false;
    assert!(did::resolve_web(&did, &strict).is_err());
}
