//! Per-agent receiver state, per-recipient judgement and spool entries, and the
//! notices about recipients left out, against an attacker who holds everything except
//! Bob's store: her own signing key (Alice's side), the SMTP envelope (MAIL FROM, RCPT
//! spellings) and the outer header fields of her mail. Bob's gateway store holds two
//! agents, bob@ and carlos@smime.example.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mailseal::{MailA2aMessage, Profile, SealOptions, Sender};

use crate::common;
use crate::kit::{self, Gateway, Sink};

const ALICE: &str = "alice@smime.example";
const BOB: &str = "bob@smime.example";
const CARLOS: &str = "carlos@smime.example";

/// Alice's store (her keys; Bob's and Carlos's certificates) and Bob's gateway store
/// (Bob's and Carlos's keys: two agents; Alice's certificates).
fn sides(root: &Path) -> (PathBuf, PathBuf) {
    let a = kit::store(
        &root.join("a-store"),
        &[
            ("ca.rsa.crt", true),
            ("alice.sign.crt", false),
            ("alice.sign.key", false),
            ("alice.encrypt.crt", false),
            ("alice.encrypt.key", false),
            ("bob.sign.crt", false),
            ("bob.encrypt.crt", false),
            ("carlos.sign.crt", false),
            ("carlos.encrypt.crt", false),
        ],
        &[],
    );
    let b = kit::store(
        &root.join("b-store"),
        &[
            ("ca.rsa.crt", true),
            ("bob.sign.crt", false),
            ("bob.sign.key", false),
            ("bob.encrypt.crt", false),
            ("bob.encrypt.key", false),
            ("carlos.sign.crt", false),
            ("carlos.sign.key", false),
            ("carlos.encrypt.crt", false),
            ("carlos.encrypt.key", false),
            ("alice.sign.crt", false),
            ("alice.encrypt.crt", false),
        ],
        &[],
    );
    (a, b)
}

/// `to` a request from Alice whose envelope is the common request patched by `patch`,
/// sealed (signed and encrypted) in `store`.
fn sealed(store: &Path, to: &[&str], patch: serde_json::Value) -> Vec<u8> {
    sealed_reply(store, to, patch, None)
}

/// [`sealed`], replying to the Message-ID `in_reply_to`.
fn sealed_reply(
    store: &Path,
    to: &[&str],
    patch: serde_json::Value,
    in_reply_to: Option<&str>,
) -> Vec<u8> {
    let env = common::env(common::with(common::request(), patch));
    let mut plain = MailA2aMessage::new(ALICE, to, env);
    plain.headers.in_reply_to = in_reply_to.map(str::to_string);
    let store = common::cli_store(store);
    Sender::builder_boxed(store)
        .replay(mailseal::replay::MemoryReplayStore::default())
        .build()
        .seal(&plain, &SealOptions::new(Profile::Smime))
        .unwrap()
}

struct World {
    _dir: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
    sink: Sink,
    gw: Gateway,
    port: u16,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "b",
        &b,
        &[("in", port, "inbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let gw = Gateway::start(dir.path(), "b", &conf, &[port]);
    World {
        _dir: dir,
        a,
        b,
        sink,
        gw,
        port,
    }
}

impl World {
    fn submit(&self, mail_from: &str, rcpts: &[&str], data: &[u8]) -> String {
        kit::submit(([127, 0, 0, 1], self.port).into(), mail_from, rcpts, data)
    }

    /// Everything the sink holds once the gateway had time to deliver.
    fn settled(&self) -> Vec<kit::Received> {
        std::thread::sleep(Duration::from_secs(3));
        self.sink.messages()
    }
}

/// THREATS "Shared state" / "Respelled keys": one SMTP transaction naming Bob under six
/// spellings of his address is one agent, judged once, queued once: Bob receives the
/// request once.
#[test]
fn shared_state_respelled_rcpt_is_delivered_once() {
    let w = world();
    let m = sealed(
        &w.a,
        &[BOB],
        serde_json::json!({"messageId": "urn:uuid:respelled", "idempotencyKey": "k-respelled"}),
    );
    let rcpts = [
        "bob@smime.example",
        "BOB@smime.example",
        "Bob@smime.example",
        "bob@SMIME.example",
        "bOb@smime.example",
        "boB@Smime.Example",
    ];
    let r = w.submit(ALICE, &rcpts, &m);
    assert!(r.starts_with("250"), "{r}\n{}", w.gw.log_text());
    let got = w.settled();
    let copies: Vec<_> = got
        .iter()
        .filter(|m| m.recipients.iter().any(|r| r.eq_ignore_ascii_case(BOB)))
        .map(|m| m.recipients.clone())
        .collect();
    assert_eq!(
        copies.len(),
        1,
        "Bob received the request {} times: {copies:?}\nreply: {r}",
        copies.len()
    );
}

/// THREATS "Shared state": a message naming both agents, delivered by the gateway
/// (judged for each), is a duplicate for `mailseal open` on the same store and state,
/// which judges a message naming several of its agents for each of them too.
#[test]
fn shared_state_gateway_then_cli_open_is_a_duplicate() {
    let w = world();
    let m = sealed(
        &w.a,
        &[BOB, CARLOS],
        serde_json::json!({"messageId": "urn:uuid:gw-then-cli", "idempotencyKey": "k-gw-then-cli"}),
    );
    let r = w.submit(ALICE, &[BOB, CARLOS], &m);
    assert!(r.starts_with("250") && r.contains("queued"), "{r}");
    assert_eq!(w.sink.wait_for(2, Duration::from_secs(30)).len(), 2);
    let o = common::run(&["open", "--store", w.b.to_str().unwrap()], &m);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.stdout.is_empty(),
        "mailseal open delivered again what the gateway delivered to both agents: {err}"
    );
}

/// The CLI alone: a request naming Bob only is recorded for Bob; the same envelope
/// (same messageId, idempotency key and digest) sealed again naming Bob and Carlos is
/// new for Carlos alone, so it is delivered (Carlos never had it) and recorded for
/// both: a third copy is a duplicate, and so is the first one again.
#[test]
fn shared_state_renamed_copy_is_new_only_for_the_agent_it_adds() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = sides(dir.path());
    let patch = serde_json::json!({"messageId": "urn:uuid:renamed", "idempotencyKey": "k-renamed"});
    let first = sealed(&a, &[BOB], patch.clone());
    let again = sealed(&a, &[BOB, CARLOS], patch);
    let open = |m: &[u8]| common::run(&["open", "--store", b.to_str().unwrap()], m);
    for (m, delivered) in [
        (&first, true),
        (&again, true),
        (&again, false),
        (&first, false),
    ] {
        let o = open(m);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(!o.stdout.is_empty(), delivered, "{err}");
        if !delivered {
            assert!(err.contains("duplicate"), "{err}");
        }
    }
}

/// THREATS "Unbound fields" / "Cost": a recipient refused while another took the
/// message is reported to the message's authenticated sender, never to MAIL FROM,
/// which nothing authenticates, once however often the message is sent again, by the
/// refusal's code alone (its text may quote what only the encryption carried) and
/// with none of the outer header fields the sender of the SMTP transaction wrote.
/// The attacker records messageId X for Carlos, then sends another content under X to
/// Bob and Carlos three times, with a victim as MAIL FROM.
#[test]
fn unbound_fields_refusal_dsn_is_no_reflector() {
    let w = world();
    let secret_id = "urn:uuid:only-inside-the-encryption-7f3a";
    let first = sealed(
        &w.a,
        &[CARLOS],
        serde_json::json!({"messageId": secret_id, "idempotencyKey": "k-first"}),
    );
    let r = w.submit(ALICE, &[CARLOS], &first);
    assert!(r.starts_with("250"), "{r}");
    w.sink.wait_for(1, Duration::from_secs(30));
    let other = sealed(
        &w.a,
        &[BOB, CARLOS],
        serde_json::json!({"messageId": secret_id, "idempotencyKey": "k-other"}),
    );
    assert!(
        !String::from_utf8_lossy(&other).contains(secret_id),
        "the messageId travels encrypted"
    );
    // Unsigned outer header fields of her choosing, reflected to the victim.
    let spam = "X-Reflected: BUY-NOW-http://spam.example/".to_string() + &"x".repeat(2000);
    let other = [spam.as_bytes(), b"\r\n", &other[..]].concat();
    let victim = "victim@third.example";
    let sends = 3;
    for _ in 0..sends {
        let r = w.submit(victim, &[BOB, CARLOS], &other);
        assert!(r.starts_with("250"), "{r}\n{}", w.gw.log_text());
    }
    let got = w.settled();
    let dsns: Vec<String> = got
        .iter()
        .filter(|m| m.recipients == [victim])
        .map(|m| String::from_utf8_lossy(&m.data).replace("=\r\n", ""))
        .collect();
    let to_bob = got.iter().filter(|m| m.recipients == [BOB]).count();
    assert_eq!(to_bob, 1, "Bob got the message once");
    let leaked = dsns.iter().any(|d| d.contains(secret_id));
    let reflected = dsns.iter().any(|d| d.contains("spam.example"));
    assert!(
        dsns.is_empty(),
        "{} DSNs for {sends} sends of one message to the unauthenticated MAIL FROM {victim}; \
         carrying the encrypted messageId: {leaked}; carrying her outer header: {reflected}\n{}",
        dsns.len(),
        dsns.first()
            .map(|d| &d[..d.len().min(1500)])
            .unwrap_or_default()
    );
    // One notice, to the signer's own address, naming Carlos and the rule by its code.
    let to_alice: Vec<String> = got
        .iter()
        .filter(|m| m.recipients == [ALICE] && m.mail_from.is_empty())
        .map(|m| String::from_utf8_lossy(&m.data).replace("=\r\n", ""))
        .collect();
    assert_eq!(to_alice.len(), 1, "{}", w.gw.log_text());
    let notice = &to_alice[0];
    assert!(
        notice.contains("Final-Recipient: rfc822; carlos@smime.example"),
        "{notice}"
    );
    assert!(notice.contains("rules.conflict"), "{notice}");
    assert!(
        !notice.contains(secret_id) && !notice.contains("spam.example"),
        "{notice}"
    );
}

/// THREATS "Shared state" (lost mail): two workers (two receivers on one state)
/// take events 2 and 1 of one stream at once: event 2 is previewed first (held: event
/// 1 missing), event 1 is committed by the other worker, then event 2's commit
/// delivers it. The commit's decision is the final one, and the gateway's `settle`
/// queues what the commit delivers that the preview held.
#[test]
fn shared_state_an_event_held_at_preview_is_not_delivered_unspooled_at_commit() {
    use mailseal::replay::{
        Admission, MemoryReplayStore, ReceiverPolicy, ReplayStore, Unsolicited,
    };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = sides(dir.path());
    let event = |seq: u64| {
        sealed_reply(
            &a,
            &[BOB],
            serde_json::json!({
                "kind": "event", "operation": "message/stream",
                "messageId": format!("urn:uuid:race-e{seq}"), "correlationId": "race-corr",
                "sequence": seq, "final": seq == 2, "idempotencyKey": null,
                "payload": {"statusUpdate": {"taskId": "t", "contextId": "c",
                    "status": {"state": "TASK_STATE_WORKING"}}}
            }),
            Some("<race-request@smime.example>"),
        )
    };
    let (e1, e2) = (event(1), event(2));
    let state = MemoryReplayStore::default();
    let rules = || ReceiverPolicy {
        unsolicited: Unsolicited::Accept,
        ..ReceiverPolicy::default()
    };
    let worker = || {
        mailseal::Receiver::builder_boxed(common::cli_store(&b))
            .replay_ref(&state as &dyn ReplayStore)
            .rules(rules())
            .build()
    };
    let (mut w1, mut w2) = (worker(), worker());
    let second = w1.receive(&e2).unwrap();
    let preview = second.preview_for(BOB).unwrap();
    assert!(
        matches!(preview, Some(Admission::Held { .. })),
        "{preview:?}"
    );
    let first = w2.receive(&e1).unwrap();
    assert!(matches!(
        first.preview_for(BOB).unwrap(),
        Some(Admission::Deliver { .. })
    ));
    let r = first.commit_for(&[BOB.to_string()]).unwrap();
    assert!(matches!(r[0].1, Ok(Admission::Deliver { .. })), "{r:?}");
    let r = second.commit_for(&[BOB.to_string()]).unwrap();
    assert!(matches!(r[0].1, Ok(Admission::Deliver { .. })), "{r:?}");
}

/// Alice's outbound gateway (submission open, as `kit::config` makes it) in front of
/// a sink, and the plain message `to` Bob whose protected Subject is `subject`.
fn outbound(
    subject: &str,
) -> (
    tempfile::TempDir,
    Gateway,
    std::net::SocketAddr,
    Sink,
    Vec<u8>,
) {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a,
        &[("out", port, "outbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let env = common::env(common::with(
        common::request(),
        serde_json::json!({"messageId": "urn:uuid:bcc-attack", "idempotencyKey": "k-bcc"}),
    ));
    let mut plain = MailA2aMessage::new(ALICE, &[BOB], env);
    plain.headers.subject = Some(subject.to_string());
    let plain = plain.to_rfc5322().unwrap();
    (dir, g, ([127, 0, 0, 1], port).into(), sink, plain)
}

/// THREATS "Unbound fields": the notice about a Bcc recipient carries none of the
/// header fields the agent submitted: the Subject that header protection hides in the
/// sealed copy ("[...]") never travels in clear.
#[test]
fn unbound_fields_bcc_report_carries_no_protected_header() {
    let subject = "Acquisition-of-Initech-at-42";
    let (_d, g, addr, sink, plain) = outbound(subject);
    let r = kit::submit(addr, ALICE, &[BOB, "eve@elsewhere.example"], &plain);
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    let got = sink.wait_for(2, Duration::from_secs(30));
    let sealed = got.iter().find(|m| m.mail_from == ALICE).unwrap();
    assert!(!String::from_utf8_lossy(&sealed.data).contains(subject));
    let report = got.iter().find(|m| m.mail_from.is_empty()).unwrap();
    let text = String::from_utf8_lossy(&report.data).replace("=\r\n", "");
    assert!(
        !text.contains(subject),
        "the protected Subject leaves unsealed in the DSN:\n{text}"
    );
}

/// THREATS "Shared state" (lost mail): with a null MAIL FROM there is nobody to tell
/// of a Bcc recipient left out, so the message is refused at once, never taken with
/// 250 and the Bcc recipient silently dropped.
#[test]
fn shared_state_bcc_with_null_sender_is_not_lost_silently() {
    let (_d, g, addr, sink, plain) = outbound("hello");
    let r = kit::submit(addr, "", &[BOB, "eve@elsewhere.example"], &plain);
    std::thread::sleep(Duration::from_secs(2));
    let got = sink.messages();
    let eve_heard = got
        .iter()
        .any(|m| m.recipients.iter().any(|r| r == "eve@elsewhere.example"));
    assert!(r.starts_with("550 5.7.1"), "{r}");
    assert!(
        !r.starts_with("250") || eve_heard || got.len() > 1,
        "250 ({r}) and Eve neither got it nor was reported to anyone: {:?}\n{}",
        got.iter()
            .map(|m| (&m.mail_from, &m.recipients))
            .collect::<Vec<_>>(),
        g.log_text()
    );
}

/// Two SMTP transactions bringing one message at once, under different
/// MAIL FROMs, to the same recipients, deliver it once to each (the entry is named
/// by route, recipient and message, not MAIL FROM; the second commit is a duplicate).
#[test]
fn shared_state_racing_transactions_with_other_mail_from_deliver_once() {
    let w = world();
    let rounds = 4;
    for i in 0..rounds {
        let m = sealed(
            &w.a,
            &[BOB, CARLOS],
            serde_json::json!({"messageId": format!("urn:uuid:race-{i}"), "idempotencyKey": format!("k-race-{i}")}),
        );
        std::thread::scope(|s| {
            for from in [ALICE, "mallory@evil.example"] {
                let m = &m;
                let w = &w;
                s.spawn(move || {
                    let r = w.submit(from, &[BOB, CARLOS], m);
                    assert!(r.starts_with("250"), "{r}");
                });
            }
        });
    }
    let got = w.settled();
    for agent in [BOB, CARLOS] {
        let n = got.iter().filter(|m| m.recipients == [agent]).count();
        assert_eq!(n, rounds, "{agent}: {n} deliveries of {rounds} messages");
    }
    assert!(got.iter().all(|m| m.recipients.len() == 1), "no DSN");
}

/// A stream's held events go to the agent they were held for, each once,
/// through the real gateway: event 2 for Bob and Carlos comes first (held for each),
/// event 1 comes to Bob alone (Bob's event 2 is released to Bob), then to both (Bob:
/// a duplicate; Carlos: delivered, his event 2 released to him).
#[test]
fn stale_state_held_stream_events_are_released_to_their_agent_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "b",
        &b,
        &[("in", port, "inbound", sink.addr.port(), "tls = \"none\"")],
        "\n[inbound]\nunsolicited = \"accept\"\n",
    );
    let g = Gateway::start(dir.path(), "b", &conf, &[port]);
    let event = |seq: u64| {
        sealed_reply(
            &a,
            &[BOB, CARLOS],
            serde_json::json!({
                "kind": "event", "operation": "message/stream",
                "messageId": format!("urn:uuid:gw-stream-e{seq}"), "correlationId": "gw-stream",
                "sequence": seq, "final": seq == 2, "idempotencyKey": null,
                "payload": {"statusUpdate": {"taskId": "t", "contextId": "c",
                    "status": {"state": "TASK_STATE_WORKING"}}}
            }),
            Some("<gw-stream-request@smime.example>"),
        )
    };
    let submit = |rcpts: &[&str], m: &[u8]| {
        let r = kit::submit(([127, 0, 0, 1], port).into(), ALICE, rcpts, m);
        assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
        r
    };
    let r = submit(&[BOB, CARLOS], &event(2));
    assert!(r.contains("held"), "{r}");
    submit(&["BOB@smime.example"], &event(1));
    submit(&[BOB, CARLOS], &event(1));
    std::thread::sleep(Duration::from_secs(3));
    let got = sink.messages();
    let seqs = |agent: &str| {
        let mut v: Vec<u64> = got
            .iter()
            .filter(|m| m.recipients.iter().any(|r| r.eq_ignore_ascii_case(agent)))
            .map(|m| {
                let env: serde_json::Value =
                    serde_json::from_slice(&kit::envelope_of(&m.data)).unwrap();
                env["sequence"].as_u64().unwrap()
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(seqs(BOB), [1, 2], "{}", g.log_text());
    assert_eq!(seqs(CARLOS), [1, 2], "{}", g.log_text());
    assert_eq!(got.len(), 4);
}
