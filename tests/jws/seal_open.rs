//! What must work: every algorithm through `Sender` and `Receiver`, the command line
//! end to end, a SQLite store, and JWKs published in an Agent Card and read from one.

use mailseal::ext::agent_card::{self, CardFields, Published};
use mailseal::ext::peers::PeerPolicies;
use mailseal::keystore::KeyStore;
use mailseal::seal::SignerIdentity;
use mailseal::{Outcome, Profile, Receiver, SealOptions, Sender};

use super::kit;

fn deliver(receiver: &mut Receiver<'_>, sealed: &[u8]) -> mailseal::Opened {
    match receiver
        .receive(sealed)
        .expect("accepted")
        .commit()
        .expect("committed")
    {
        Outcome::Deliver { delivery, .. } => delivery.opened,
        other => panic!("not delivered: {other:?}"),
    }
}

#[test]
fn every_algorithm_round_trips_through_sender_and_receiver() {
    for alg in kit::ALGORITHMS {
        let dir = tempfile::tempdir().unwrap();
        let (alice, bob) = kit::alice_and_bob(dir.path(), alg);
        let plain = kit::request("alice@jws.example", "bob@jws.example", "m-1");
        let sealed = Sender::builder(&alice.store)
            .build()
            .seal(&plain, &SealOptions::new(Profile::Jws))
            .unwrap();
        let text = String::from_utf8_lossy(&sealed);
        assert!(text.contains("protocol=\"application/jose\""), "{alg:?}");
        assert!(text.contains(&format!(
            "micalg=\"jws-{}\"",
            alg.name().to_ascii_lowercase()
        )));
        let opened = deliver(&mut Receiver::builder(&bob.store).build(), &sealed);
        let v = &opened.verdict;
        assert_eq!(v.profile, Some(Profile::Jws));
        assert_eq!(v.protection.to_string(), "signed");
        assert!(v.header_protection);
        assert_eq!(v.algorithm.as_deref(), Some(alg.name()));
        let Some(SignerIdentity::Jwk { emails, source, .. }) = &v.signer else {
            panic!("signer {:?}", v.signer)
        };
        assert_eq!(emails, &["alice@jws.example"]);
        assert_eq!(source, "jwk");
        assert_eq!(opened.envelope().message_id().as_deref(), Some("m-1"));
        // The sender's own copy verifies at the sender (its own key, its own address)
        // when it asks for its own copy; by default it is a reflection.
        assert!(Receiver::builder(&alice.store)
            .build()
            .receive(&sealed)
            .is_err());
        let own_copy = {
            let mut p = mailseal::OpenPolicy::default();
            p.own_copy = true;
            p
        };
        let own = deliver(
            &mut Receiver::builder(&alice.store).policy(own_copy).build(),
            &sealed,
        );
        assert_eq!(own.verdict.protection.to_string(), "signed");
    }
}

#[test]
fn a_sqlite_store_holds_jwk_identities() {
    let dir = tempfile::tempdir().unwrap();
    let alice = mailseal::keystore::SqliteStore::open(&dir.path().join("alice.db"), None).unwrap();
    let bob = mailseal::keystore::SqliteStore::open(&dir.path().join("bob.db"), None).unwrap();
    mailseal::jws::jwk::generate(
        &alice,
        "alice@jws.example",
        mailseal::jws::JwsAlgorithm::Es256,
    )
    .unwrap();
    let jwk = mailseal::jws::jwk::public_jwks(&alice, "alice@jws.example").unwrap();
    kit::import(&bob, jwk[0].to_string().as_bytes(), "alice@jws.example");
    let listed = alice.list().unwrap();
    assert!(listed.iter().any(|e| e.kind.to_string() == "jwk"
        && e.has_private_key
        && e.emails == ["alice@jws.example"]));
    assert!(bob.list().unwrap().iter().all(|e| !e.has_private_key));
    let plain = kit::request("alice@jws.example", "bob@jws.example", "m-sql");
    let sealed = Sender::builder(&alice)
        .build()
        .seal(&plain, &SealOptions::new(Profile::Jws))
        .unwrap();
    // Bob's store holds no private key: recipients are checked against our_addresses.
    let mut policy = mailseal::OpenPolicy::default();
    policy.our_addresses = vec!["bob@jws.example".into()];
    let opened = deliver(&mut Receiver::builder(&bob).policy(policy).build(), &sealed);
    assert_eq!(opened.verdict.algorithm.as_deref(), Some("ES256"));
}

#[test]
fn an_agent_card_publishes_jwks_and_a_peer_imports_them() {
    let dir = tempfile::tempdir().unwrap();
    let alice = kit::party(
        dir.path(),
        "alice",
        "alice@jws.example",
        mailseal::jws::JwsAlgorithm::EdDsa,
    );
    let bob = kit::party(
        dir.path(),
        "bob",
        "bob@jws.example",
        mailseal::jws::JwsAlgorithm::EdDsa,
    );
    let published = Published::from_store(&alice.store, "alice@jws.example").unwrap();
    let (card, _) = agent_card::write_card(
        None,
        "alice@jws.example",
        &CardFields::default(),
        &published,
    )
    .unwrap();
    let text = serde_json::to_string(&card).unwrap();
    assert!(text.contains("\"detached-jws\""), "{text}");
    assert!(text.contains("\"jwks\""));
    assert!(!text.contains("\"d\""), "no private member in a card");
    let now = time::OffsetDateTime::now_utc();
    let peer = agent_card::read_card(text.as_bytes(), &bob.store, now).unwrap();
    assert_eq!(peer.jwks.len(), 1);
    agent_card::import_keys(&peer, &bob.store).unwrap();
    let record = bob.store.jwk_identities().unwrap();
    assert!(record
        .iter()
        .any(|r| r.source == "agent-card" && r.emails == ["alice@jws.example"]));
    let plain = kit::request("alice@jws.example", "bob@jws.example", "m-card");
    let sealed = Sender::builder(&alice.store)
        .build()
        .seal(&plain, &SealOptions::new(Profile::Jws))
        .unwrap();
    let opened = deliver(&mut Receiver::builder(&bob.store).build(), &sealed);
    assert!(
        matches!(&opened.verdict.signer, Some(SignerIdentity::Jwk { source, .. }) if source == "agent-card")
    );

    // A card that lists only detached-jws: the sender uses it, and nothing else.
    let mut peers = PeerPolicies::default();
    peers.record(&peer, now);
    let sender = Sender::builder(&bob.store).peers(peers).build();
    let to_alice = kit::request("bob@jws.example", "alice@jws.example", "m-2");
    let err = sender
        .seal(&to_alice, &SealOptions::new(Profile::OpenPgp))
        .unwrap_err();
    assert!(err.to_string().contains("detached-jws"), "{err}");
}

#[test]
fn the_command_line_seals_opens_and_inspects() {
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
        "--algorithm",
        "es384",
        "--email",
        "bob@jws.example",
        "--store",
        &d("bob"),
    ]);
    ok(&[
        "key",
        "import",
        "--store",
        &d("bob"),
        "--jwk",
        &d("alice.jwk"),
        "--email",
        "alice@jws.example",
    ]);
    let list = ok(&["key", "list", "--store", &d("bob")]);
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("jwk ed25519 alice@jws.example"), "{list}");
    assert!(list.contains("jwk ec+secret bob@jws.example"), "{list}");
    // `key export` of a JWK writes the public JWK, never `d`.
    let fpr = list
        .lines()
        .find(|l| l.contains("alice@"))
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let exported = ok(&["key", "export", "--store", &d("bob"), fpr]);
    let exported: serde_json::Value = serde_json::from_slice(&exported.stdout).unwrap();
    assert_eq!(exported["kty"], "OKP");
    assert!(exported.get("d").is_none());
    let signed = kit::cli_signed(
        dir.path(),
        &d("alice"),
        "alice@jws.example",
        "bob@jws.example",
        "cli-1",
    );
    ok(&[
        "open",
        "--store",
        &d("bob"),
        "--in",
        &signed,
        "--report",
        &d("v.json"),
        "--out",
        &d("env-out.json"),
    ]);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d("v.json")).unwrap()).unwrap();
    assert_eq!(report["profile"], "jws");
    assert_eq!(report["protection"], "signed");
    assert_eq!(report["algorithm"], "EdDSA");
    let inspect = ok(&["inspect", &d("signed.eml")]);
    assert!(String::from_utf8_lossy(&inspect.stdout).contains("detached-jws"));
    // Bob has no key of Alice's in a fresh store: authentication failed, exit 4.
    ok(&[
        "key",
        "generate",
        "--kind",
        "jws",
        "--email",
        "bob@jws.example",
        "--store",
        &d("bob2"),
    ]);
    let out = run(
        &["open", "--store", &d("bob2"), "--in", &d("signed.eml")],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("key import --jwk"));
}

/// The fuzz target's message seeds verify against its fixture key (so the fuzzer
/// starts on the verification path, not only on refusals), and once a byte of the
/// entity changes they do not.
#[test]
fn the_fuzz_seeds_verify_with_the_fixture_key() {
    use mailseal::Opener;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let store = mailseal::keystore::DirectoryStore::open(dir.path().join("s")).unwrap();
    let key = mailseal::jws::Jwk::parse(
        &std::fs::read(root.join("fuzz/fixtures/jws/alice.rfc8037.jwk")).unwrap(),
    )
    .unwrap();
    mailseal::jws::jwk::bind(&store, &key, &["alice@jws.example".into()], "fixture").unwrap();
    let mut policy = mailseal::OpenPolicy::default();
    policy.our_addresses = vec!["bob@jws.example".into()];
    for seed in ["message-eddsa.bin", "message-text.bin"] {
        let bytes = std::fs::read(root.join("fuzz/seeds/jws").join(seed)).unwrap();
        let raw = &bytes[1..];
        let opened = mailseal::jws::Jws::new(&store).open(raw, &policy).unwrap();
        assert_eq!(
            opened.message.sender().as_deref(),
            Some("alice@jws.example")
        );
        let (entity, _) = kit::split(raw);
        let text = String::from_utf8_lossy(raw).replace(
            std::str::from_utf8(&entity).unwrap(),
            &String::from_utf8_lossy(&entity).replacen("Subject: A2A", "Subject: B2A", 1),
        );
        assert!(mailseal::jws::Jws::new(&store)
            .open(text.as_bytes(), &policy)
            .is_err());
    }
}
