//! Bob's inbound gateway against an attacker who controls everything except Bob's
//! store: her own CA and a certificate it issued for alice@smime.example, a genuine
//! message Alice signed for the attacker, replays, and the header fields of her mail.
//! Every forgery is refused at SMTP time (5xx) and nothing of it reaches Bob's sink;
//! a redelivered genuine message is accepted and dropped.

use std::path::Path;
use std::time::Duration;

use mailseal::{MailA2aMessage, Profile, SealOptions, Sender};

use crate::common;
use crate::kit::{self, Gateway, Sink};

fn seal(store: &Path, plain: &[u8], sign_only: bool) -> Vec<u8> {
    let store = common::cli_store(store);
    let plain = MailA2aMessage::parse(plain, &mailseal::Limits::default()).unwrap();
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = sign_only;
    // The sender's own state records its requests.
    Sender::builder_boxed(store)
        .replay(mailseal::replay::MemoryReplayStore::default())
        .build()
        .seal(&plain, &opts)
        .unwrap()
}

#[test]
fn forgeries_are_refused_at_smtp_time_and_replays_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let b_in = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[("in", b_in, "inbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let b = Gateway::start(dir.path(), "b", &conf, &[b_in]);
    let to_b = |from: &str, data: &[u8]| {
        kit::submit(
            ([127, 0, 0, 1], b_in).into(),
            from,
            &["bob@smime.example"],
            data,
        )
    };

    // Mallory's own CA issued her a certificate for Alice's address.
    let attacker = dir.path().join("attacker");
    std::fs::create_dir_all(&attacker).unwrap();
    let mallory = attacker.join("store");
    common::mls::mls_identity(&attacker, &mallory, "alice@smime.example");
    // Her store's anchor (her own CA) speaks for smime.example: Bob's certificate from
    // another CA is a change she accepts in her own store.
    common::mls::ok(
        &mallory,
        &[
            "key",
            "import",
            "--accept-changed",
            &common::fixture("rfc9216/bob.encrypt.crt")
                .display()
                .to_string(),
        ],
    );
    let forged = seal(
        &mallory,
        &kit::plain(
            "alice@smime.example",
            "bob@smime.example",
            "urn:uuid:forged",
        ),
        false,
    );
    let r = to_b("alice@smime.example", &forged);
    assert!(r.starts_with("550 5.7.1"), "{r}");

    // Unsigned MailA2A mail in Alice's name.
    let r = to_b(
        "alice@smime.example",
        &kit::plain(
            "alice@smime.example",
            "bob@smime.example",
            "urn:uuid:unsigned",
        ),
    );
    assert!(r.starts_with("550"), "{r}");

    // A genuine message Alice signed for Mallory, forwarded to Bob.
    let for_mallory = seal(
        &a_store,
        &kit::plain(
            "alice@smime.example",
            "mallory@evil.example",
            "urn:uuid:fwd",
        ),
        true,
    );
    let r = to_b("mallory@evil.example", &for_mallory);
    assert!(
        r.starts_with("550") && r.contains("not a protected recipient"),
        "{r}"
    );

    // Something that calls itself S/MIME and is not.
    let garbage = b"From: alice@smime.example\r\nTo: bob@smime.example\r\nMIME-Version: 1.0\r\nContent-Type: application/pkcs7-mime; smime-type=enveloped-data\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA!!!!\r\n";
    let r = to_b("alice@smime.example", garbage);
    assert!(r.starts_with("554 5.6.0") || r.starts_with("550"), "{r}");

    // Plain mail passes, with only the gateway's verdict: a forged one is stripped.
    let plain_mail = b"From: someone@else.example\r\nTo: bob@smime.example\r\nSubject: hi\r\nMailseal-Verdict: pass; profile=smime; from=alice@smime.example\r\n\r\nhello\r\n";
    let r = to_b("someone@else.example", plain_mail);
    assert!(r.starts_with("250"), "{r}");

    // Alice's genuine message, delivered twice by SMTP: accepted twice, delivered once.
    let genuine = seal(
        &a_store,
        &kit::plain(
            "alice@smime.example",
            "bob@smime.example",
            "urn:uuid:genuine",
        ),
        false,
    );
    for _ in 0..2 {
        let r = to_b("alice@smime.example", &genuine);
        assert!(r.starts_with("250"), "{r}");
    }

    let got = sink.wait_for(2, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    let got_all = sink.messages();
    assert_eq!(
        got_all.len(),
        2,
        "only the plain mail and one genuine copy: {got_all:?}"
    );
    let plain_copy = got
        .iter()
        .find(|m| m.mail_from == "someone@else.example")
        .unwrap();
    let text = String::from_utf8_lossy(kit::trace_fields(&plain_copy.data).1);
    assert_eq!(text.matches("Mailseal-Verdict").count(), 1, "{text}");
    assert!(
        text.starts_with("Mailseal-Verdict: none; not MailA2A\r\n"),
        "{text}"
    );
    let genuine_copy = got
        .iter()
        .find(|m| m.mail_from == "alice@smime.example")
        .unwrap();
    assert!(String::from_utf8_lossy(&genuine_copy.data).contains("urn:uuid:genuine"));
    for m in &got_all {
        let t = String::from_utf8_lossy(&m.data);
        assert!(
            !t.contains("urn:uuid:forged")
                && !t.contains("urn:uuid:fwd")
                && !t.contains("urn:uuid:unsigned"),
            "{t}"
        );
    }
    let log = b.log_text();
    assert!(log.contains("verdict=\"duplicate\""), "{log}");
    assert!(log.contains("verdict=\"refused\""), "{log}");
}

/// Bob's gateway holds the keys of two of its agents (bob@smime.example and
/// bob@openpgp.example). A genuine message Alice sealed for the first, sent on (by
/// whoever saw it) to the second's address, passes every receiver rule (the message
/// names one of the store's addresses) but is not for that agent: refused at SMTP
/// time, whether alone or beside the right recipient, and nothing reaches the sink.
#[test]
fn fail_message_forwarded_to_another_agent_behind_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let b_in = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[("in", b_in, "inbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let b = Gateway::start(dir.path(), "b", &conf, &[b_in]);
    let sealed = seal(
        &a_store,
        &kit::plain(
            "alice@smime.example",
            "bob@smime.example",
            "urn:uuid:for-bob",
        ),
        false,
    );
    let to = |rcpts: &[&str]| {
        kit::submit(
            ([127, 0, 0, 1], b_in).into(),
            "alice@smime.example",
            rcpts,
            &sealed,
        )
    };
    for rcpts in [
        &["bob@openpgp.example"][..],
        &["bob@smime.example", "bob@openpgp.example"][..],
    ] {
        let r = to(rcpts);
        assert!(
            r.starts_with("550 5.7.1") && r.contains("bob@openpgp.example"),
            "{rcpts:?}: {r}"
        );
    }
    // Refused means not recorded: the same message to the agent it names is opened.
    let r = to(&["bob@smime.example"]);
    assert!(r.starts_with("250"), "{r}\n{}", b.log_text());
    let got = sink.wait_for(1, Duration::from_secs(30));
    assert_eq!(got[0].recipients, vec!["bob@smime.example".to_string()]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sink.messages().len(), 1);
}

/// Bob's own message to Mallory, mailed back by her to Bob's inbound gateway (RCPT TO
/// Bob, the address that signed it): it names only Mallory, so it is a reflection,
/// refused at SMTP time whether signed only or signed and encrypted to Bob's own copy;
/// nothing reaches Bob's sink.
#[test]
fn fail_wrong_audience_our_own_message_mailed_back_to_us() {
    let dir = tempfile::tempdir().unwrap();
    let (_a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let b_in = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[("in", b_in, "inbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let b = Gateway::start(dir.path(), "b", &conf, &[b_in]);
    for (id, sign_only) in [
        ("urn:uuid:reflected-1", true),
        ("urn:uuid:reflected-2", false),
    ] {
        // Encrypted, it goes to Alice (whose certificate Bob holds) and to Bob's own copy.
        let ours = seal(
            &b_store,
            &kit::plain("bob@smime.example", "alice@smime.example", id),
            sign_only,
        );
        let r = kit::submit(
            ([127, 0, 0, 1], b_in).into(),
            "mallory@evil.example",
            &["bob@smime.example"],
            &ours,
        );
        assert!(
            r.starts_with("550") && r.contains("reflection"),
            "{id}: {r}"
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(sink.messages().is_empty(), "{:?}", sink.messages());
    assert!(b.log_text().contains("verdict=\"refused\""));

    // Bob's message to Alice that names Bob and his other agent too: sent back to Bob
    // alone, it is his own (a duplicate: accepted, not delivered, not recorded, so it
    // suppresses nobody's copy); to both, only the other agent gets it; again to the
    // other agent, a duplicate.
    let env = common::env(common::with(
        common::request(),
        serde_json::json!({"messageId": "urn:uuid:self-cc", "idempotencyKey": "k-self-cc"}),
    ));
    let plain = MailA2aMessage::new(
        "bob@smime.example",
        &[
            "alice@smime.example",
            "bob@smime.example",
            "bob@openpgp.example",
        ],
        env,
    )
    .to_rfc5322()
    .unwrap();
    let ours = seal(&b_store, &plain, true);
    let to = |rcpts: &[&str]| {
        kit::submit(
            ([127, 0, 0, 1], b_in).into(),
            "mallory@evil.example",
            rcpts,
            &ours,
        )
    };
    let r = to(&["bob@smime.example"]);
    assert!(r.starts_with("250"), "{r}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(sink.messages().is_empty(), "{:?}", sink.messages());
    let r = to(&["bob@smime.example", "bob@openpgp.example"]);
    assert!(r.starts_with("250"), "{r}");
    let got = sink.wait_for(1, Duration::from_secs(60));
    assert_eq!(got[0].recipients, ["bob@openpgp.example"]);
    let r = to(&["bob@openpgp.example"]);
    assert!(r.starts_with("250"), "{r}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sink.messages().len(), 1);
    let log = b.log_text();
    assert_eq!(log.matches("verdict=\"duplicate\"").count(), 2, "{log}");
}

/// Issue #57: an inbound listener exposed on port 25 relays for no one. RCPT for a
/// domain outside its `local_domains` is refused at SMTP time, and nothing reaches the
/// next hop; mail for its own domain is taken.
#[test]
fn fail_relay_rcpt_for_a_domain_it_does_not_serve() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let b_in = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[(
            "in",
            b_in,
            "inbound",
            sink.addr.port(),
            "tls = \"none\"\nlocal_domains = [\"smime.example\"]",
        )],
        "\n[inbound]\nnon_maila2a = \"pass\"\n",
    );
    let _b = Gateway::start(dir.path(), "b", &conf, &[b_in]);
    let addr = ([127, 0, 0, 1], b_in).into();
    let r = kit::submit(
        addr,
        "spammer@x.example",
        &["victim@elsewhere.example"],
        b"Subject: relay me\r\n\r\nhi\r\n",
    );
    assert!(r.starts_with("550 5.7.1 relay access denied"), "{r}");
    let genuine = seal(
        &a_store,
        &kit::plain("alice@smime.example", "bob@smime.example", "urn:uuid:local"),
        false,
    );
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["bob@smime.example"],
        &genuine,
    );
    assert!(r.starts_with("250"), "{r}");
    let got = sink.wait_for(1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sink.messages().len(), 1);
    assert!(got[0]
        .recipients
        .iter()
        .all(|r| r.ends_with("@smime.example")));
}

/// Issue #57: a message for two of Bob's agents, replayed by the attacker to one of
/// them first (or retried per recipient by an upstream MTA after a 4xx), is still
/// delivered to the other when the genuine copy comes: each recipient is judged in
/// its own replay state and gets its own spool entry. A third copy is a duplicate for
/// both, and nothing is delivered twice.
#[test]
fn fail_replay_to_one_recipient_never_suppresses_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let b_in = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[("in", b_in, "inbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let b = Gateway::start(dir.path(), "b", &conf, &[b_in]);
    let env = common::env(common::with(
        common::request(),
        serde_json::json!({"messageId": "urn:uuid:for-both", "idempotencyKey": "k-both"}),
    ));
    let plain = MailA2aMessage::new(
        "alice@smime.example",
        &["bob@smime.example", "bob@openpgp.example"],
        env,
    )
    .to_rfc5322()
    .unwrap();
    // Signed only: bob@openpgp.example has no certificate to encrypt to.
    let sealed = seal(&a_store, &plain, true);
    let to = |rcpts: &[&str]| {
        kit::submit(
            ([127, 0, 0, 1], b_in).into(),
            "alice@smime.example",
            rcpts,
            &sealed,
        )
    };
    let r = to(&["bob@smime.example"]);
    assert!(r.starts_with("250"), "{r}\n{}", b.log_text());
    let first = sink.wait_for(1, Duration::from_secs(30));
    assert_eq!(first[0].recipients, ["bob@smime.example"]);
    let r = to(&["bob@smime.example", "bob@openpgp.example"]);
    assert!(
        r.starts_with("250") && r.contains("queued as"),
        "{r}\n{}",
        b.log_text()
    );
    let got = sink.wait_for(2, Duration::from_secs(30));
    assert_eq!(
        got[1].recipients,
        ["bob@openpgp.example"],
        "{}",
        b.log_text()
    );
    assert_eq!(
        kit::envelope_of(&got[1].data),
        kit::envelope_of(&got[0].data),
        "the same message"
    );
    let r = to(&["bob@openpgp.example", "bob@smime.example"]);
    assert!(r.starts_with("250") && r.contains("duplicate"), "{r}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sink.messages().len(), 2, "{}", b.log_text());
}
