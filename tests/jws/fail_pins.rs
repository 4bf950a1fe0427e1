//! Respelled keys (THREATS.md): pins and bindings are keyed by the address and the key,
//! never by the URL, file or import path they came from. One store per party; the
//! attacker (Mallory) holds everything but Bob's store: her own keys, cards, DIDs,
//! paths on Alice's host and another server, and Bob runs only the product's own
//! import commands.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::common::run;
use super::kit;
use super::server::{self, Answer, Cert};

const ALICE: &str = "alice@localhost";
const CARD_PATH: &str = "/.well-known/agent-card.json";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The addresses each JWK in `store` is bound to, by fingerprint (`key list`).
fn bindings(store: &str) -> Vec<(String, Vec<String>)> {
    let list = kit::cli(&["key", "list", "--json", "--store", store]).stdout;
    let list: Vec<serde_json::Value> = serde_json::from_slice(&list).unwrap();
    let mut out: Vec<_> = list
        .into_iter()
        .filter(|e| e["kind"] == "jwk")
        .map(|e| {
            (
                e["fingerprint"].as_str().unwrap().to_string(),
                serde_json::from_value(e["emails"].clone()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The fingerprint of the JWS key of `email` in `store`, and its public JWK.
fn jwk_of(store: &str, email: &str) -> (String, Vec<u8>) {
    let fpr = bindings(store)
        .into_iter()
        .find(|(_, e)| e.iter().any(|e| e == email))
        .unwrap()
        .0;
    let jwk = kit::cli(&["key", "export", &fpr, "--store", store]).stdout;
    (fpr, jwk)
}

/// `card --email ADDR` on `store` with `extra` options.
fn card_of(store: &str, email: &str, extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["card", "--email", email, "--store", store];
    args.extend_from_slice(extra);
    kit::cli(&args).stdout
}

/// Replaces the JWKs a card publishes (Mallory edits her own card).
fn with_jwks(card: &[u8], jwks: &[&[u8]]) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(card).unwrap();
    let ext = v["capabilities"]["extensions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["uri"] == mailseal::ext::agent_card::PROTECTION_URI)
        .unwrap();
    ext["params"]["jwks"] = jwks
        .iter()
        .map(|j| serde_json::from_slice::<serde_json::Value>(j).unwrap())
        .collect();
    serde_json::to_vec_pretty(&v).unwrap()
}

fn generate(store: &str, kind: &str, email: &str) {
    kit::cli(&[
        "key", "generate", "--kind", kind, "--email", email, "--store", store,
    ]);
}

/// Alice's card, pinned by Bob from its one URL, then the same address reached under
/// other spellings: `?`, the host in capitals, another path on the host, another
/// server (port) altogether, a card file. Each change (Mallory's key, a lower minimum,
/// an unsigned card after a signed one) is refused without --accept-changed, whatever
/// the URL, and taken with it.
#[test]
fn fail_respelled_keys_card_urls_share_the_address_pin() {
    let dir = tempfile::tempdir().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    let (alice, mallory, bob) = (d("alice"), d("mallory"), d("bob"));
    generate(&alice, "smime", ALICE);
    generate(&alice, "jws", ALICE);
    generate(&bob, "jws", "bob@localhost");
    // Mallory's own key for Alice's address, in her own store.
    generate(&mallory, "jws", ALICE);
    let (alice_fpr, _) = jwk_of(&alice, ALICE);
    let (mallory_fpr, mallory_jwk) = jwk_of(&mallory, ALICE);

    let srv = server::start(Cert::Good);
    let other = server::start(Cert::Good);
    std::fs::write(d("ca.pem"), format!("{}{}", srv.ca_pem, other.ca_pem)).unwrap();
    let ca = d("ca.pem");
    let fetch = |url: &str, extra: &[&str]| {
        let mut args = vec![
            "card",
            "fetch",
            url,
            "--ca",
            &ca,
            "--allow-private",
            "--store",
            &bob,
        ];
        args.extend_from_slice(extra);
        run(&args, b"")
    };

    // Alice's genuine card: signed, signed-encrypted, her S/MIME and JWS keys.
    let genuine = card_of(&alice, ALICE, &["--sign", "--minimum", "signed-encrypted"]);
    srv.route(CARD_PATH, Answer::Body(genuine.clone(), None));
    let first = fetch(&srv.url(CARD_PATH), &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(stderr(&first).contains("for the first time"));
    let pinned = bindings(&bob);
    assert!(pinned.contains(&(alice_fpr.clone(), vec![ALICE.to_string()])));

    // Mallory's card for Alice: her key, unsigned, the minimum kept.
    let forged = with_jwks(
        &card_of(&mallory, ALICE, &["--minimum", "signed-encrypted"]),
        &[&mallory_jwk],
    );
    // Alice's own keys, but a lower minimum; and her card unsigned.
    let lowered = card_of(&alice, ALICE, &["--sign", "--minimum", "signed"]);
    let unsigned = card_of(&alice, ALICE, &["--minimum", "signed-encrypted"]);

    let query = format!("{CARD_PATH}?");
    let upper = srv.url(CARD_PATH).replace("localhost", "LOCALHOST");
    let cases: [(&str, String, &[u8], &str); 5] = [
        (
            query.as_str(),
            srv.url(&query),
            &forged,
            &format!("its keys changed (added: {mallory_fpr}; gone: "),
        ),
        (CARD_PATH, upper.clone(), &forged, "its keys changed"),
        (
            "/users/mallory/card.json",
            srv.url("/users/mallory/card.json"),
            &lowered,
            "its minimum protection is lowered from signed-encrypted to signed",
        ),
        (
            "/u/card.json",
            srv.url("/u/card.json"),
            &unsigned,
            "and is now unsigned",
        ),
        (CARD_PATH, other.url(CARD_PATH), &forged, "its keys changed"),
    ];
    for (path, url, card, said) in &cases {
        let server = if url.contains(&format!(":{}", other.port)) {
            &other
        } else {
            &srv
        };
        server.route(path, Answer::Body(card.to_vec(), None));
        let out = fetch(url, &[]);
        assert_eq!(out.status.code(), Some(6), "{url}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("what this store holds for {ALICE}"))
                && err.contains(said)
                && err.contains("--accept-changed"),
            "{url}: {err}"
        );
        assert_eq!(bindings(&bob), pinned, "{url}");
    }
    // The same card as a file: the same pin, the same refusal.
    std::fs::write(d("forged.json"), &forged).unwrap();
    let file = run(
        &[
            "key",
            "import",
            "--agent-card",
            &d("forged.json"),
            "--store",
            &bob,
        ],
        b"",
    );
    assert_eq!(file.status.code(), Some(6), "{}", stderr(&file));
    assert!(stderr(&file).contains("its keys changed"));
    assert_eq!(bindings(&bob), pinned);
    // The minimum Bob holds for Alice is still signed-encrypted.
    let peers: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("bob/peers.json")).unwrap()).unwrap();
    assert_eq!(
        peers["peers"][ALICE]["minimumProtection"],
        "signed-encrypted"
    );

    // Accepted, the change is taken, whichever URL it came from.
    let accepted = fetch(&other.url(CARD_PATH), &["--accept-changed"]);
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    assert!(
        stderr(&accepted).contains(&format!("warning: the keys of {ALICE} changed")),
        "{}",
        stderr(&accepted)
    );
    assert!(bindings(&bob).contains(&(mallory_fpr, vec![ALICE.to_string()])));
    let lowered_url = srv.url("/users/mallory/card.json");
    let taken = fetch(&lowered_url, &["--accept-changed"]);
    assert!(taken.status.success(), "{}", stderr(&taken));
    let peers: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("bob/peers.json")).unwrap()).unwrap();
    assert_eq!(peers["peers"][ALICE]["minimumProtection"], "signed");
}

/// A JWK bound to Alice is not moved to Mallory by `--jwk` or `--did did:jwk`
/// without `--rebind` naming Alice; with it, it moves. A card refusal is not undone by
/// the JWK or DID path, nor a JWK refusal by a card, nor by --accept-changed.
#[test]
fn fail_respelled_keys_jwk_and_did_move_no_binding() {
    let dir = tempfile::tempdir().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    let (alice, mallory, bob) = (d("alice"), d("mallory"), d("bob"));
    const A: &str = "alice@jws.example";
    const M: &str = "mallory@evil.example";
    generate(&alice, "jws", A);
    generate(&mallory, "jws", M);
    generate(&bob, "jws", "bob@jws.example");
    let (alice_fpr, alice_jwk) = jwk_of(&alice, A);
    let (mallory_fpr, mallory_jwk) = jwk_of(&mallory, M);
    std::fs::write(d("alice.jwk"), &alice_jwk).unwrap();
    std::fs::write(d("mallory.jwk"), &mallory_jwk).unwrap();
    let import = |extra: &[&str]| {
        let mut args = vec!["key", "import", "--store", bob.as_str()];
        args.extend_from_slice(extra);
        run(&args, b"")
    };
    let ok = |extra: &[&str]| {
        let out = import(extra);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
    };
    ok(&["--jwk", &d("alice.jwk"), "--email", A]);
    let held = bindings(&bob);

    // Alice's key, respelled as a did:jwk or given again as a JWK file, for Mallory.
    let did_jwk = format!("did:jwk:{}", URL_SAFE_NO_PAD.encode(&alice_jwk));
    let alice_file = d("alice.jwk");
    let moves: [&[&str]; 4] = [
        &["--did", &did_jwk, "--email", M],
        &["--jwk", &alice_file, "--email", M],
        &["--jwk", &alice_file, "--email", M, "--email", A],
        &["--did", &did_jwk, "--email", M, "--accept-changed"],
    ];
    for args in moves {
        let out = import(args);
        assert_eq!(out.status.code(), Some(6), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "the key {alice_fpr} is bound to {A} in this store"
            )) && err.contains(&format!("--rebind {A}")),
            "{args:?}: {err}"
        );
        assert_eq!(bindings(&bob), held, "{args:?}");
    }
    // A --rebind that names the wrong address moves nothing either.
    let out = import(&["--jwk", &alice_file, "--email", M, "--rebind", M]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!(
        "--rebind {M}: the key {alice_fpr} is bound to {A}"
    )));
    // --rebind without a JWK or DID is a usage error: a card never moves a key.
    let out = import(&["--rebind", A, &alice_file]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(bindings(&bob), held);

    // A card for Mallory carrying Alice's key: refused, and --accept-changed does
    // not undo the refusal of the move.
    let mallory_card = with_jwks(&card_of(&mallory, M, &[]), &[&alice_jwk]);
    std::fs::write(d("mallory-card.json"), &mallory_card).unwrap();
    for extra in [&[][..], &["--accept-changed"][..]] {
        let mut args = vec!["--agent-card", d("mallory-card.json").leak() as &str];
        args.extend_from_slice(extra);
        let out = import(&args);
        assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("is for {A}, not for the card's address alone")),
            "{}",
            stderr(&out)
        );
        assert_eq!(bindings(&bob), held);
    }

    // Mallory's own key offered for Alice, who holds a key already: a change of
    // Alice's pin, by --jwk or --did alike.
    let mallory_did = format!("did:jwk:{}", URL_SAFE_NO_PAD.encode(&mallory_jwk));
    let mallory_file = d("mallory.jwk");
    for args in [
        &["--did", mallory_did.as_str(), "--email", A][..],
        &["--jwk", mallory_file.as_str(), "--email", A][..],
    ] {
        let out = import(args);
        assert_eq!(out.status.code(), Some(6), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("what this store holds for {A}"))
                && err.contains(&format!("added: {mallory_fpr}"))
                && err.contains("--accept-changed"),
            "{args:?}: {err}"
        );
        assert_eq!(bindings(&bob), held);
    }

    // With --rebind naming Alice, the owner moves the key (as Bob was told to).
    ok(&["--jwk", &alice_file, "--email", M, "--rebind", A]);
    assert_eq!(
        bindings(&bob)
            .into_iter()
            .find(|(f, _)| *f == alice_fpr)
            .unwrap()
            .1,
        vec![M.to_string()]
    );
}

/// A card refused for Alice (Mallory's key on a respelled URL) is not undone by the
/// same key as a did:jwk or JWK file for Alice, and the card Bob pinned still opens
/// Alice's mail.
#[test]
fn fail_respelled_keys_a_card_refusal_is_not_undone_by_a_did() {
    let dir = tempfile::tempdir().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    let (alice, mallory, bob) = (d("alice"), d("mallory"), d("bob"));
    generate(&alice, "jws", ALICE);
    generate(&mallory, "jws", ALICE);
    generate(&bob, "jws", "bob@localhost");
    let (mallory_fpr, mallory_jwk) = jwk_of(&mallory, ALICE);
    let srv = server::start(Cert::Good);
    let other = server::start(Cert::Good);
    std::fs::write(d("ca.pem"), format!("{}{}", srv.ca_pem, other.ca_pem)).unwrap();
    let ca = d("ca.pem");
    let fetch = |url: &str| {
        run(
            &[
                "card",
                "fetch",
                url,
                "--ca",
                &ca,
                "--allow-private",
                "--store",
                &bob,
            ],
            b"",
        )
    };
    let genuine = card_of(&alice, ALICE, &[]);
    srv.route(CARD_PATH, Answer::Body(genuine.clone(), None));
    assert!(fetch(&srv.url(CARD_PATH)).status.success());
    // The same card from another origin: the address, not the origin, keys the pin;
    // the new origin is said and recorded.
    other.route(CARD_PATH, Answer::Body(genuine, None));
    let moved = fetch(&other.url(CARD_PATH));
    assert!(moved.status.success(), "{}", stderr(&moved));
    assert!(
        stderr(&moved).contains(&format!(
            "was fetched from https://localhost:{} before, now from https://localhost:{}",
            srv.port, other.port
        )),
        "{}",
        stderr(&moved)
    );
    srv.route(
        "/x/card.json",
        Answer::Body(card_of(&mallory, ALICE, &[]), None),
    );
    let refused = fetch(&srv.url("/x/card.json"));
    assert_eq!(refused.status.code(), Some(6), "{}", stderr(&refused));
    let held = bindings(&bob);
    let did = format!("did:jwk:{}", URL_SAFE_NO_PAD.encode(&mallory_jwk));
    std::fs::write(d("m.jwk"), &mallory_jwk).unwrap();
    for args in [
        vec!["--did", did.as_str(), "--email", ALICE],
        vec!["--jwk", d("m.jwk").leak(), "--email", ALICE],
    ] {
        let mut all = vec!["key", "import", "--store", bob.as_str()];
        all.extend(args);
        let out = run(&all, b"");
        assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("added: {mallory_fpr}")),
            "{}",
            stderr(&out)
        );
        assert_eq!(bindings(&bob), held);
    }
    // Mallory's mail as Alice is still refused; Alice's opens.
    let forged = kit::cli_signed(dir.path(), &mallory, ALICE, "bob@localhost", "p-1");
    let out = run(&["open", "--store", &bob, "--in", &forged], b"");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("signed by an unknown key"),
        "{}",
        stderr(&out)
    );
    let genuine = kit::cli_signed(dir.path(), &alice, ALICE, "bob@localhost", "p-2");
    kit::cli(&["open", "--store", &bob, "--in", &genuine]);
}

/// The same rules through the library's own import functions: a card of Mallory's key
/// for Alice, after Alice's card, is refused by [`agent_card::import_card`] and the
/// same key by [`jwk::import`]; both take it once the change is accepted.
#[test]
fn fail_respelled_keys_library_imports_share_the_pin() {
    use mailseal::error::{Classify, ErrorKind};
    use mailseal::ext::agent_card::{self, CardError, ImportOptions, Published};
    use mailseal::identity::pins::PinError;
    use mailseal::jws::{jwk, JwsAlgorithm, JwsError};

    const A: &str = "alice@jws.example";
    let dir = tempfile::tempdir().unwrap();
    let alice = kit::party(dir.path(), "alice", A, JwsAlgorithm::EdDsa);
    let mallory = kit::party(dir.path(), "mallory", A, JwsAlgorithm::EdDsa);
    let bob = kit::party(dir.path(), "bob", "bob@jws.example", JwsAlgorithm::EdDsa);
    let now = time::OffsetDateTime::now_utc();
    let mut policies = mailseal::ext::peers::PeerPolicies::default();
    let card_of = |p: &kit::Party| {
        let published = Published::from_store(&p.store, A).unwrap();
        let text = kit::card_text(A, &published);
        agent_card::read_card(text.as_bytes(), &bob.store, now).unwrap()
    };
    let first = agent_card::import_card(
        &card_of(&alice),
        &bob.store,
        &mut policies,
        &ImportOptions::new(),
        now,
    )
    .unwrap();
    assert!(first.changes.first);
    let forged = card_of(&mallory);
    let err = agent_card::import_card(
        &forged,
        &bob.store,
        &mut policies,
        &ImportOptions::new(),
        now,
    )
    .unwrap_err();
    assert!(
        matches!(&err, CardError::Pin(PinError::Changed { address, .. }) if address == A),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Policy);
    let key = mailseal::jws::Jwk::parse(&mallory.jwk).unwrap();
    let held = [policies.pin(&bob.store, A).unwrap()];
    let err =
        jwk::import(&bob.store, &key, &[A.to_string()], "jwk", &held, false, &[]).unwrap_err();
    assert!(
        matches!(err, JwsError::Pin(PinError::Changed { .. })),
        "{err}"
    );
    assert_eq!(jwk::public_jwks(&bob.store, A).unwrap().len(), 1);
    jwk::import(&bob.store, &key, &[A.to_string()], "jwk", &held, true, &[]).unwrap();
    let taken = agent_card::import_card(
        &forged,
        &bob.store,
        &mut policies,
        &ImportOptions::new().accept_changed(true),
        now,
    )
    .unwrap();
    assert!(taken.changes.needs_acceptance());
}
