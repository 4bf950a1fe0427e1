//! The attacker controls everything but the victim's store: their own keys (and any
//! public key), their own card, and the mail. Each case must be refused, with nothing
//! delivered.

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use mailseal::error::{Classify, ErrorKind};
use mailseal::jws::JwsAlgorithm;
use mailseal::keystore::KeyStore;
use mailseal::{Profile, Receiver, SealOptions, Sender};

use super::kit;

fn refused(store: &dyn KeyStore, raw: &[u8]) -> (ErrorKind, String) {
    let mut receiver = Receiver::builder(store).build();
    let result = match receiver.receive(raw) {
        Ok(incoming) => Err(format!("accepted: {:?}", incoming.commit())),
        Err(e) => Ok((e.kind(), e.to_string())),
    };
    result.expect("refused")
}

/// The Ed25519 key pair of `email` in `store`.
fn key_pair(store: &dyn KeyStore, email: &str) -> Ed25519KeyPair {
    let r = store
        .jwk_identities()
        .unwrap()
        .into_iter()
        .find(|r| r.emails.iter().any(|e| e == email))
        .unwrap();
    let secret = store.private_key(&r.fingerprint).unwrap().unwrap();
    Ed25519KeyPair::from_pkcs8_maybe_unchecked(secret.pkcs8_der()).unwrap()
}

fn b64(v: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(v)
}

/// A compact detached JWS over `entity` with header `header`, signed by `key`.
fn sign(key: &Ed25519KeyPair, header: serde_json::Value, entity: &[u8]) -> String {
    sign_text(key, &header.to_string(), entity)
}

/// [`sign`] with the header as written (which a JSON value cannot hold: a member
/// twice).
fn sign_text(key: &Ed25519KeyPair, header: &str, entity: &[u8]) -> String {
    let h = b64(header.as_bytes());
    let input = format!("{h}.{}", b64(entity));
    format!("{h}..{}", b64(key.sign(input.as_bytes()).as_ref()))
}

fn thumbprint(store: &dyn KeyStore, email: &str) -> String {
    let jwk = mailseal::jws::jwk::public_jwks(store, email).unwrap();
    mailseal::jws::Jwk::parse(jwk[0].to_string().as_bytes())
        .unwrap()
        .thumbprint()
}

#[test]
fn fail_tampered_entity_header_or_signature() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::EdDsa);
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
    let text = String::from_utf8(sealed.clone()).unwrap();
    // The envelope: one base64 character of the A2A part (inside the signature).
    let (entity, jws) = kit::split(&sealed);
    let entity_text = String::from_utf8(entity).unwrap();
    let part = entity_text.find("application/a2a+json").unwrap();
    let a2a_at = entity_text[part..].find("\r\n\r\n").unwrap() + part + 4;
    let mut forged_entity = entity_text.clone().into_bytes();
    forged_entity[a2a_at + 5] = if forged_entity[a2a_at + 5] == b'A' {
        b'B'
    } else {
        b'A'
    };
    let forged = text.replace(&entity_text, std::str::from_utf8(&forged_entity).unwrap());
    let (kind, why) = refused(&bob.store, forged.as_bytes());
    assert_eq!(kind, ErrorKind::Authentication, "{why}");
    // A header value inside the signed entity (the protected Subject).
    let forged = text.replacen("Subject: A2A request", "Subject: A2A urgent", 2);
    assert_eq!(
        refused(&bob.store, forged.as_bytes()).0,
        ErrorKind::Authentication
    );
    // An outer header value that disagrees with the protected one.
    let outer_end = text.find("\r\n\r\n").unwrap();
    let forged = format!(
        "{}{}",
        text[..outer_end].replace(
            "To: <bob@jws.example>",
            "To: <bob@jws.example>, <eve@jws.example>"
        ),
        &text[outer_end..]
    );
    assert_ne!(forged, text);
    assert_eq!(
        refused(&bob.store, forged.as_bytes()).0,
        ErrorKind::Malformed
    );
    // The signature: one character.
    let mut sig = jws.clone().into_bytes();
    let last = sig.len() - 3;
    sig[last] = if sig[last] == b'A' { b'B' } else { b'A' };
    let forged = kit::with_jws(&sealed, std::str::from_utf8(&sig).unwrap());
    let (kind, why) = refused(&bob.store, &forged);
    assert_eq!(kind, ErrorKind::Authentication);
    assert!(why.contains("does not verify"), "{why}");
    // The untouched message is delivered: the refusals above were the forgeries'.
    assert!(Receiver::builder(&bob.store)
        .build()
        .receive(&sealed)
        .is_ok());
}

#[test]
fn fail_a_key_bound_to_another_address_signs_as_the_victim() {
    let dir = tempfile::tempdir().unwrap();
    let (_alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::EdDsa);
    // Mallory's own key, which Bob imported honestly for mallory@evil.example.
    let mallory = kit::party(
        dir.path(),
        "mallory",
        "mallory@evil.example",
        JwsAlgorithm::EdDsa,
    );
    kit::import(&bob.store, &mallory.jwk, "mallory@evil.example");
    // Mallory binds her key to alice in her own store and signs as alice.
    kit::import(&mallory.store, &mallory.jwk, "mallory@evil.example");
    let key = mailseal::jws::Jwk::parse(&mallory.jwk).unwrap();
    let mut emails = vec![
        "alice@jws.example".to_string(),
        "mallory@evil.example".to_string(),
    ];
    emails.sort();
    // In her own store she may move her key: she names its current address.
    mailseal::jws::jwk::bind_with(
        &mallory.store,
        &key,
        &emails,
        "jwk",
        &["mallory@evil.example".to_string()],
    )
    .unwrap();
    let forged = kit::sealed_by(
        &mallory.store,
        "alice@jws.example",
        "bob@jws.example",
        "m-evil",
    );
    let (kind, why) = refused(&bob.store, &forged);
    assert_eq!(kind, ErrorKind::Policy, "{why}");
    assert!(
        why.contains("does not name the sender alice@jws.example"),
        "{why}"
    );
    // A key Bob never imported: unknown signer.
    let stranger = kit::party(
        dir.path(),
        "stranger",
        "alice@jws.example",
        JwsAlgorithm::EdDsa,
    );
    let forged = kit::sealed_by(
        &stranger.store,
        "alice@jws.example",
        "bob@jws.example",
        "m-x",
    );
    let (kind, why) = refused(&bob.store, &forged);
    assert_eq!(kind, ErrorKind::Authentication);
    assert!(why.contains("unknown key"), "{why}");
}

#[test]
fn fail_algorithm_confusion_none_and_hmac() {
    let dir = tempfile::tempdir().unwrap();
    let alice = kit::party(
        dir.path(),
        "alice",
        "alice@jws.example",
        JwsAlgorithm::Rs256,
    );
    let bob = kit::party(dir.path(), "bob", "bob@jws.example", JwsAlgorithm::EdDsa);
    kit::import(&bob.store, &alice.jwk, "alice@jws.example");
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
    let (entity, _) = kit::split(&sealed);
    let kid = thumbprint(&bob.store, "alice@jws.example");
    // HS256 keyed with Alice's public key (its JWK text, and its n bytes): the classic
    // confusion that makes a verifier treat a public key as a shared secret.
    let jwk: serde_json::Value = serde_json::from_slice(&alice.jwk).unwrap();
    let n = URL_SAFE_NO_PAD.decode(jwk["n"].as_str().unwrap()).unwrap();
    for secret in [alice.jwk.clone(), n] {
        let h = b64(
            serde_json::json!({"alg":"HS256","cty":"message/rfc822","kid":kid})
                .to_string()
                .as_bytes(),
        );
        let input = format!("{h}.{}", b64(&entity));
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &secret);
        let tag = aws_lc_rs::hmac::sign(&key, input.as_bytes());
        let forged = kit::with_jws(&sealed, &format!("{h}..{}", b64(tag.as_ref())));
        let (kind, why) = refused(&bob.store, &forged);
        assert_eq!(kind, ErrorKind::Authentication, "{why}");
        assert!(why.contains("HS256"), "{why}");
    }
    // alg none, empty signature.
    let h = b64(
        serde_json::json!({"alg":"none","cty":"message/rfc822","kid":kid})
            .to_string()
            .as_bytes(),
    );
    let (kind, _) = refused(&bob.store, &kit::with_jws(&sealed, &format!("{h}..")));
    assert_eq!(kind, ErrorKind::Authentication);
    // A crit extension, and b64:false.
    for extra in [
        serde_json::json!({"crit":["exp"],"exp":1}),
        serde_json::json!({"b64":false,"crit":["b64"]}),
    ] {
        let mut header = serde_json::json!({"alg":"RS256","cty":"message/rfc822","kid":kid});
        header
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let h = b64(header.to_string().as_bytes());
        let (kind, _) = refused(&bob.store, &kit::with_jws(&sealed, &format!("{h}..AAAA")));
        assert_eq!(kind, ErrorKind::Authentication);
    }
}

/// Alice's genuine signature under a header that names a key (`jwk`, `x5c`, `jku`,
/// `x5u`) or repeats a member: refused, however well it verifies with her bound key.
#[test]
fn fail_unread_forms_a_header_naming_a_key_or_repeating_a_member() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::EdDsa);
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
    let (entity, _) = kit::split(&sealed);
    let key = key_pair(&alice.store, "alice@jws.example");
    let kid = thumbprint(&alice.store, "alice@jws.example");
    let jwk: serde_json::Value = serde_json::from_slice(&alice.jwk).unwrap();
    // Control: the same header without them opens.
    let plain = serde_json::json!({"alg":"EdDSA","cty":"message/rfc822","kid":kid});
    let good = sign(&key, plain.clone(), &entity);
    let mut receiver = Receiver::builder(&bob.store).build();
    assert!(receiver.receive(&kit::with_jws(&sealed, &good)).is_ok());
    for (member, value) in [
        ("jwk", jwk),
        ("x5c", serde_json::json!(["MAA="])),
        ("jku", serde_json::json!("https://evil.example/jwks.json")),
        ("x5u", serde_json::json!("https://evil.example/cert.pem")),
    ] {
        let mut header = plain.clone();
        header[member] = value;
        let forged = kit::with_jws(&sealed, &sign(&key, header, &entity));
        let (kind, why) = refused(&bob.store, &forged);
        assert_eq!(kind, ErrorKind::Authentication, "{member}: {why}");
        assert!(why.contains(&format!("carries `{member}`")), "{why}");
    }
    // `alg` twice: read last-wins it would be EdDSA, read first-wins `none`.
    let twice = sign_text(
        &key,
        &format!(r#"{{"alg":"none","alg":"EdDSA","cty":"message/rfc822","kid":"{kid}"}}"#),
        &entity,
    );
    let (kind, why) = refused(&bob.store, &kit::with_jws(&sealed, &twice));
    assert_eq!(kind, ErrorKind::Authentication, "{why}");
    assert!(why.contains("member twice"), "{why}");
}

#[test]
fn fail_a_jws_for_something_else_or_with_its_payload() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::EdDsa);
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
    let (entity, _) = kit::split(&sealed);
    let key = key_pair(&alice.store, "alice@jws.example");
    let kid = thumbprint(&alice.store, "alice@jws.example");
    // Alice's real signature over the same bytes, without `cty`: a JWS made for an
    // Agent Card (typ JOSE) is never taken for a mail signature.
    let card_like = sign(
        &key,
        serde_json::json!({"alg":"EdDSA","kid":kid,"typ":"JOSE"}),
        &entity,
    );
    let (kind, why) = refused(&bob.store, &kit::with_jws(&sealed, &card_like));
    assert_eq!(kind, ErrorKind::Authentication);
    assert!(why.contains("cty"), "{why}");
    // The payload attached (a valid JWS, but not the detached form).
    let good = sign(
        &key,
        serde_json::json!({"alg":"EdDSA","cty":"message/rfc822","kid":kid}),
        &entity,
    );
    let attached = good.replacen("..", &format!(".{}.", b64(&entity)), 1);
    let (kind, why) = refused(&bob.store, &kit::with_jws(&sealed, &attached));
    assert_eq!(kind, ErrorKind::Malformed, "{why}");
    // Our own hand-made signature with the right header is accepted: the refusals were
    // about the header and the form, not the key.
    assert!(Receiver::builder(&bob.store)
        .build()
        .receive(&kit::with_jws(&sealed, &good))
        .is_ok());
    // alg EdDSA with a kid that names Alice's key but an ES256 label: alg/key mismatch.
    let wrong = sign(
        &key,
        serde_json::json!({"alg":"ES256","cty":"message/rfc822","kid":kid}),
        &entity,
    );
    assert_eq!(
        refused(&bob.store, &kit::with_jws(&sealed, &wrong)).0,
        ErrorKind::Authentication
    );
    // Key material in the header is never trusted: Mallory's key in `jwk`, her
    // signature, Alice's kid.
    let mallory = Ed25519KeyPair::generate().unwrap();
    let embedded =
        serde_json::json!({"kty":"OKP","crv":"Ed25519","x": b64(mallory.public_key().as_ref())});
    let forged = sign(
        &mallory,
        serde_json::json!({"alg":"EdDSA","cty":"message/rfc822","kid":kid,"jwk":embedded}),
        &entity,
    );
    assert_eq!(
        refused(&bob.store, &kit::with_jws(&sealed, &forged)).0,
        ErrorKind::Authentication
    );
}

#[test]
fn fail_forwarded_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::Es256);
    // Signed for Carol, forwarded to Bob.
    let to_carol = kit::sealed_by(
        &alice.store,
        "alice@jws.example",
        "carol@jws.example",
        "m-c",
    );
    let (kind, why) = refused(&bob.store, &to_carol);
    assert_eq!(kind, ErrorKind::Policy);
    assert!(why.contains("not a protected recipient"), "{why}");
    // The same message twice: delivered once.
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-r");
    let mut receiver = Receiver::builder(&bob.store).build();
    assert!(matches!(
        receiver.receive(&sealed).unwrap().commit().unwrap(),
        mailseal::Outcome::Deliver { .. }
    ));
    assert!(matches!(
        receiver.receive(&sealed).unwrap().commit().unwrap(),
        mailseal::Outcome::Duplicate { .. }
    ));
}

#[test]
fn fail_below_a_peer_minimum_of_signed_encrypted() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::EdDsa);
    // Bob demands signed-encrypted of Alice: detached-jws can never satisfy it.
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
    let mut policy = mailseal::OpenPolicy::default();
    policy.minimum_per_peer.insert(
        "alice@jws.example".into(),
        mailseal::Protection::SignedEncrypted,
    );
    let err = Receiver::builder(&bob.store)
        .policy(policy)
        .build()
        .receive(&sealed)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Policy);
    assert!(err.to_string().contains("signed-encrypted"), "{err}");
    // Alice, holding Bob's card that asks signed-encrypted, refuses to seal jws to him.
    let published = {
        let mut p = mailseal::ext::agent_card::Published::from_store(&bob.store, "bob@jws.example")
            .unwrap();
        p.minimum = mailseal::Protection::SignedEncrypted;
        p
    };
    let card = kit::card_text("bob@jws.example", &published);
    let now = time::OffsetDateTime::now_utc();
    let peer = mailseal::ext::agent_card::read_card(card.as_bytes(), &alice.store, now).unwrap();
    let mut peers = mailseal::ext::peers::PeerPolicies::default();
    peers.record(&peer, now);
    let err = Sender::builder(&alice.store)
        .peers(peers)
        .build()
        .seal(
            &kit::request("alice@jws.example", "bob@jws.example", "m-2"),
            &SealOptions::new(Profile::Jws),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Policy);
}

#[test]
fn fail_a_card_that_claims_a_key_bound_to_someone_else() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::EdDsa);
    // Mallory's card publishes Alice's public key for mallory@evil.example: importing
    // it would move Alice's binding to Mallory.
    let mallory = kit::party(
        dir.path(),
        "mallory",
        "mallory@evil.example",
        JwsAlgorithm::EdDsa,
    );
    let mut published =
        mailseal::ext::agent_card::Published::from_store(&mallory.store, "mallory@evil.example")
            .unwrap();
    published.jwks = vec![serde_json::from_slice(&alice.jwk).unwrap()];
    let card = kit::card_text("mallory@evil.example", &published);
    let now = time::OffsetDateTime::now_utc();
    let peer = mailseal::ext::agent_card::read_card(card.as_bytes(), &bob.store, now).unwrap();
    let err = mailseal::ext::agent_card::import_keys(&peer, &bob.store).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Policy, "{err}");
    // Alice's binding is unchanged: her mail still opens.
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
    assert!(Receiver::builder(&bob.store)
        .build()
        .receive(&sealed)
        .is_ok());
    // A card carrying a private JWK is refused whole.
    let mut private = serde_json::from_slice::<serde_json::Value>(&alice.jwk).unwrap();
    private["d"] = serde_json::json!("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A");
    published.jwks = vec![private];
    let card = kit::card_text("mallory@evil.example", &published);
    assert!(mailseal::ext::agent_card::read_card(card.as_bytes(), &bob.store, now).is_err());
}
