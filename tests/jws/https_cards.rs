//! Agent Cards over HTTPS: `card fetch` against a rustls server on 127.0.0.1 with a CA
//! the test makes, the cache and the key-change warning, and every hostile answer the
//! client must refuse (private addresses, unknown CA, expired certificate, wrong host
//! name, redirects to another host, a 50 MiB body, a card for another domain).

use mailseal::error::{Classify, ErrorKind};
use mailseal::ext::agent_card::{self, CardCache, CardError, CardOperators};
use mailseal::https::{self, FetchError};

use super::common::run;
use super::server::{self, Answer, Cert};

fn ok(args: &[&str]) -> std::process::Output {
    super::kit::cli(args)
}

/// Alice's card (a JWS key of alice@localhost) as `mailseal card` writes it.
fn alice_card(store: &str) -> Vec<u8> {
    ok(&["card", "--email", "alice@localhost", "--store", store]).stdout
}

#[test]
fn card_fetch_imports_caches_and_warns_on_changed_keys() {
    let dir = tempfile::tempdir().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    let srv = server::start(Cert::Good);
    std::fs::write(d("ca.pem"), &srv.ca_pem).unwrap();
    ok(&[
        "key",
        "generate",
        "--kind",
        "jws",
        "--email",
        "alice@localhost",
        "--store",
        &d("alice"),
    ]);
    ok(&[
        "key",
        "generate",
        "--kind",
        "jws",
        "--email",
        "bob@localhost",
        "--store",
        &d("bob"),
    ]);
    srv.route(
        "/.well-known/agent-card.json",
        Answer::Body(alice_card(&d("alice")), Some(600)),
    );
    let url = srv.url("/.well-known/agent-card.json");
    let (ca, bob) = (d("ca.pem"), d("bob"));
    let fetch = |extra: &[&str]| {
        let mut args = vec![
            "card",
            "fetch",
            url.as_str(),
            "--ca",
            &ca,
            "--allow-private",
            "--store",
            &bob,
        ];
        args.extend_from_slice(extra);
        run(&args, b"")
    };
    let first = fetch(&[]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(
        said.contains("for the first time") && said.contains("1 JWK(s)"),
        "{said}"
    );
    let list = ok(&["key", "list", "--store", &d("bob")]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("jwk ed25519 alice@localhost"));
    // Fresh under max-age: from the cache, the server not asked.
    srv.route("/.well-known/agent-card.json", Answer::NotFound);
    let second = fetch(&[]);
    assert!(second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("from the cache"));
    // Alice's key changes: a re-fetch is refused until the user accepts it.
    std::fs::remove_dir_all(d("alice")).unwrap();
    ok(&[
        "key",
        "generate",
        "--kind",
        "jws",
        "--email",
        "alice@localhost",
        "--store",
        &d("alice"),
    ]);
    srv.route(
        "/.well-known/agent-card.json",
        Answer::Body(alice_card(&d("alice")), Some(600)),
    );
    let changed = fetch(&["--refresh"]);
    assert_eq!(
        changed.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&changed.stderr)
    );
    assert!(String::from_utf8_lossy(&changed.stderr).contains("--accept-changed"));
    let accepted = fetch(&["--refresh", "--accept-changed"]);
    assert!(accepted.status.success());
    assert!(String::from_utf8_lossy(&accepted.stderr)
        .contains("warning: the keys of alice@localhost changed"));
    // Mail signed with the new key opens at Bob.
    let signed = super::kit::cli_signed(
        dir.path(),
        &d("alice"),
        "alice@localhost",
        "bob@localhost",
        "f-1",
    );
    ok(&["open", "--store", &d("bob"), "--in", &signed]);
}

fn get_err(url: &str, opts: &https::FetchOptions) -> FetchError {
    https::get(url, opts).expect_err("refused")
}

#[test]
fn fail_hostile_servers_and_answers() {
    let srv = server::start(Cert::Good);
    srv.route("/card", Answer::Body(b"{}".to_vec(), None));
    let opts = srv.options();
    assert_eq!(https::get(&srv.url("/card"), &opts).unwrap().body, b"{}");
    // Loopback without --allow-private.
    let mut strict = opts.clone();
    strict.allow_private = false;
    let e = get_err(&srv.url("/card"), &strict);
    assert!(matches!(e, FetchError::PrivateAddress { .. }), "{e}");
    assert_eq!(e.kind(), ErrorKind::Policy);
    // A CA we were not told to trust.
    let mut system_only = https::FetchOptions::default();
    system_only.allow_private = true;
    let e = get_err(&srv.url("/card"), &system_only);
    assert!(matches!(e, FetchError::Tls { .. }), "{e}");
    // An expired certificate, and one for another name, from the trusted CA.
    for cert in [Cert::Expired, Cert::WrongName] {
        let bad = server::start(cert);
        bad.route("/card", Answer::Body(b"{}".to_vec(), None));
        let e = get_err(&bad.url("/card"), &bad.options());
        assert!(matches!(e, FetchError::Tls { .. }), "{e}");
        let why = format!("{e}").to_ascii_lowercase();
        assert!(
            why.contains("expired") || why.contains("notvalidforname") || why.contains("name"),
            "{why}"
        );
    }
    // Redirects: same host followed; another host, or http, refused.
    srv.route("/moved", Answer::Redirect("/card".into()));
    assert_eq!(https::get(&srv.url("/moved"), &opts).unwrap().body, b"{}");
    srv.route(
        "/away",
        Answer::Redirect(format!("https://127.0.0.1:{}/card", srv.port)),
    );
    assert!(matches!(
        get_err(&srv.url("/away"), &opts),
        FetchError::Redirect {
            reason: "another host",
            ..
        }
    ));
    srv.route(
        "/plain",
        Answer::Redirect(format!("http://localhost:{}/card", srv.port)),
    );
    assert!(matches!(
        get_err(&srv.url("/plain"), &opts),
        FetchError::Redirect {
            reason: "not https",
            ..
        }
    ));
    srv.route("/loop", Answer::Redirect("/loop".into()));
    assert!(matches!(
        get_err(&srv.url("/loop"), &opts),
        FetchError::Redirect { .. }
    ));
    // 50 MiB, with a length and chunked: refused at the cap, not read whole.
    srv.route("/huge", Answer::Huge(50 << 20, false));
    srv.route("/huge-chunked", Answer::Huge(50 << 20, true));
    for path in ["/huge", "/huge-chunked"] {
        let e = get_err(&srv.url(path), &opts);
        assert!(
            matches!(e, FetchError::TooLarge { limit: 1048576, .. }),
            "{path}: {e}"
        );
    }
    // A server that stalls after its head: the one deadline of the fetch ends it.
    srv.route("/stall", Answer::Stall(8));
    let mut quick = opts.clone();
    quick.timeout = std::time::Duration::from_secs(1);
    // (Timeout, not the "closed before the body ended" the server's close after 8 s
    // would give: the deadline, not the server, ended the fetch.)
    let e = get_err(&srv.url("/stall"), &quick);
    assert!(matches!(e, FetchError::Timeout { .. }), "{e}");
    // Not found, and not https at all.
    assert!(matches!(
        get_err(&srv.url("/nothing"), &opts),
        FetchError::Status { status: 404, .. }
    ));
    assert!(matches!(
        get_err("http://localhost/", &opts),
        FetchError::Url { .. }
    ));
}

#[test]
fn fail_a_fetched_card_for_another_domain() {
    let dir = tempfile::tempdir().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    ok(&[
        "key",
        "generate",
        "--kind",
        "jws",
        "--email",
        "bob@bank.example",
        "--store",
        &d("mallory"),
    ]);
    // Mallory serves, from her own host, a card that speaks for bob@bank.example.
    let card = ok(&[
        "card",
        "--email",
        "bob@bank.example",
        "--store",
        &d("mallory"),
    ])
    .stdout;
    let srv = server::start(Cert::Good);
    srv.route("/.well-known/agent-card.json", Answer::Body(card, None));
    let store = mailseal::keystore::DirectoryStore::open(dir.path().join("victim")).unwrap();
    let err = agent_card::fetch_card(
        &srv.url("/.well-known/agent-card.json"),
        &srv.options(),
        &CardCache::new(dir.path().join("cache")),
        &store,
        &CardOperators::new(),
        time::OffsetDateTime::now_utc(),
        false,
    )
    .unwrap_err();
    assert!(matches!(err, CardError::WrongHost { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Policy);
    assert!(mailseal::keystore::KeyStore::jwk_identities(&store)
        .unwrap()
        .is_empty());
}
