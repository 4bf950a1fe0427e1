//! AEP (the Agent Email Protocol draft) to MailA2A and back: the draft's section 7
//! conversation (a `task.submit` with conversation and JSON payload, the `task.result`
//! reply), the other AEP types, and each sealed and opened under every profile.

use crate::common;

use mailseal::envelope::ValidationContext;
use mailseal::ext::aep::{is_aep, AepBody, AepError, AepMessage};
use mailseal::keystore::{KeyStore, MemoryStore, SqliteStore};
use mailseal::seal::{OpenPolicy, Opener, SealOptions, Sealer};
use mailseal::{Limits, MailA2aMessage, Profile};

const A: &str = "agent-a-x1@kankan.email";
const B: &str = "agent-b-y2@kankan.email";

/// An AEP mail as the AEP server writes it (section 3: typed headers, JSON body).
fn aep_mail(headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut m = String::new();
    for (n, v) in headers {
        m.push_str(&format!("{n}: {v}\r\n"));
    }
    m.push_str("MIME-Version: 1.0\r\n\r\n");
    m.push_str(body);
    m.into_bytes()
}

/// Section 7: agent-a submits a task to agent-b.
fn task_submit() -> Vec<u8> {
    task_submit_at("Mon, 30 Nov 2026 10:00:00 +0000")
}

/// [`task_submit`], dated `date`.
fn task_submit_at(date: &str) -> Vec<u8> {
    aep_mail(
        &[
            ("From", A),
            ("To", B),
            ("Subject", "translate README to French"),
            ("Date", date),
            ("Message-ID", "<15@kankan.email>"),
            ("X-AEP-Type", "task.submit"),
            ("X-AEP-Conversation-Id", "c-abc123"),
            ("X-AEP-Content-Type", "application/json"),
            ("x-aep-version", "0.2"),
            ("Content-Type", "application/json"),
        ],
        r#"{"task_id":"t-42","input":"https://example.org/README.md"}"#,
    )
}

/// Section 7: agent-b's reply, threaded, same conversation.
fn task_result() -> Vec<u8> {
    aep_mail(
        &[
            ("From", B),
            ("To", A),
            ("Subject", "Re: translate README to French"),
            ("Date", "Mon, 30 Nov 2026 10:05:00 +0000"),
            ("Message-ID", "<16@kankan.email>"),
            ("In-Reply-To", "<15@kankan.email>"),
            ("References", "<15@kankan.email>"),
            ("X-AEP-Type", "task.result"),
            ("X-AEP-Conversation-Id", "c-abc123"),
            ("X-AEP-Content-Type", "application/json"),
            ("Content-Type", "application/json"),
        ],
        r#"{"task_id":"t-42","status":"ok","output":"https://example.org/README.fr.md"}"#,
    )
}

fn parse(raw: &[u8]) -> AepMessage {
    AepMessage::parse(raw, &Limits::default()).unwrap()
}

/// AEP -> MailA2A (valid under `profile`) -> RFC 5322 -> parsed -> AEP: the same.
fn round_trip(aep: &AepMessage, profile: Option<Profile>) -> MailA2aMessage {
    let m = aep.to_maila2a().unwrap();
    assert!(
        m.check(&ValidationContext::new(profile)).is_empty(),
        "{:?}",
        m.check(&ValidationContext::new(profile))
    );
    let bytes = m.to_rfc5322().unwrap();
    let again = MailA2aMessage::parse(&bytes, &Limits::default()).unwrap();
    assert_eq!(&AepMessage::from_maila2a(&again).unwrap(), aep);
    again
}

#[test]
fn section_7_conversation_maps_both_ways() {
    let submit = parse(&task_submit());
    assert_eq!(submit.aep_type, "task.submit");
    assert_eq!(submit.conversation_id.as_deref(), Some("c-abc123"));
    assert_eq!(
        submit.body,
        AepBody::Json(
            serde_json::json!({"task_id": "t-42", "input": "https://example.org/README.md"})
        )
    );
    let m = round_trip(&submit, None);
    let env: serde_json::Value = serde_json::from_slice(m.envelope_bytes()).unwrap();
    assert_eq!(env["kind"], "request");
    assert_eq!(env["operation"], "message/send");
    assert_eq!(env["correlationId"], "15@kankan.email");
    assert_eq!(env["payload"]["message"]["contextId"], "c-abc123");
    assert_eq!(
        env["payload"]["message"]["parts"][0]["data"]["task_id"],
        "t-42"
    );

    let result = parse(&task_result());
    let r = round_trip(&result, None);
    let renv: serde_json::Value = serde_json::from_slice(r.envelope_bytes()).unwrap();
    assert_eq!(renv["kind"], "response");
    // The reply correlates with the request by the request's Message-ID.
    assert_eq!(renv["correlationId"], env["correlationId"]);
    assert_eq!(r.headers.in_reply_to.as_deref(), Some("15@kankan.email"));

    // And the AEP mail written back reads as the same AEP message.
    for aep in [&submit, &result] {
        let written = aep.to_rfc5322().unwrap();
        assert!(is_aep(&written));
        assert_eq!(&parse(&written), aep);
    }
}

#[test]
fn every_aep_type_maps_both_ways() {
    let cases: Vec<(&str, Option<&str>, &str, &str)> = vec![
        ("ping", None, "", ""),
        ("pong", Some("<p@kankan.email>"), "", ""),
        (
            "capability.query",
            None,
            "application/json",
            r#"{"asker":"boss-x2@kankan.email"}"#,
        ),
        (
            "capability.result",
            Some("<q@kankan.email>"),
            "application/json",
            r#"{"registered":true,"address":"worker-x1@kankan.email","capabilities":["translate"]}"#,
        ),
        ("message", None, "", "hello in plain text"),
        (
            "error",
            Some("<t@kankan.email>"),
            "application/json",
            r#"{"message":"no such task","task_id":"t-9"}"#,
        ),
        (
            "custom.thing",
            None,
            "application/json",
            r#"[1,2,{"x":null}]"#,
        ),
    ];
    for (i, (ty, irt, ct, body)) in cases.into_iter().enumerate() {
        let id = format!("<m{i}@kankan.email>");
        let mut h = vec![
            ("From", A),
            ("To", B),
            ("Message-ID", id.as_str()),
            ("X-AEP-Type", ty),
            ("Date", "Mon, 30 Nov 2026 10:00:00 +0000"),
        ];
        if let Some(r) = irt {
            h.push(("In-Reply-To", r));
        }
        if !ct.is_empty() {
            h.push(("X-AEP-Content-Type", ct));
        }
        let aep = parse(&aep_mail(&h, body));
        round_trip(&aep, None);
    }
}

#[test]
fn fail_aep_cases() {
    // A reply that answers nothing.
    let raw = aep_mail(
        &[
            ("From", B),
            ("To", A),
            ("Message-ID", "<r@k>"),
            ("X-AEP-Type", "task.result"),
        ],
        "x",
    );
    assert!(matches!(
        parse(&raw).to_maila2a().unwrap_err(),
        AepError::Unthreaded(_)
    ));
    // JSON announced, not JSON.
    let raw = aep_mail(
        &[
            ("From", A),
            ("To", B),
            ("Message-ID", "<j@k>"),
            ("X-AEP-Type", "task.submit"),
            ("X-AEP-Content-Type", "application/json"),
        ],
        "{not json",
    );
    assert!(matches!(
        AepMessage::parse(&raw, &Limits::default()).unwrap_err(),
        AepError::Json
    ));
    // A type given twice.
    let raw = aep_mail(
        &[
            ("From", A),
            ("To", B),
            ("Message-ID", "<d@k>"),
            ("X-AEP-Type", "ping"),
            ("X-AEP-Type", "pong"),
        ],
        "",
    );
    assert!(matches!(
        AepMessage::parse(&raw, &Limits::default()).unwrap_err(),
        AepError::Header(_)
    ));
    // A MailA2A message that did not come from AEP.
    let mut env =
        mailseal::Envelope::new(mailseal::Kind::Request, mailseal::Operation::TasksGet, "x");
    env.set("payload", &serde_json::json!({"id": "t"}));
    let plain = MailA2aMessage::new(A, &[B], env);
    assert!(matches!(
        AepMessage::from_maila2a(&plain).unwrap_err(),
        AepError::NotAep(_)
    ));
    assert!(!is_aep(&plain.to_rfc5322().unwrap()));
}

fn smime_stores(dir: &std::path::Path) -> (SqliteStore, SqliteStore) {
    let (sa, sb) = (
        SqliteStore::open(&dir.join("a.db"), None).unwrap(),
        SqliteStore::open(&dir.join("b.db"), None).unwrap(),
    );
    let mut certs = Vec::new();
    for (store, email) in [(&sa, A), (&sb, B)] {
        let req = mailseal::smime::IdentityRequest {
            email: Some(email.into()),
            common_name: None,
            kind: mailseal::smime::KeyKind::P256,
            days: 30,
            ca: false,
        };
        for id in mailseal::smime::generate(&req, None).unwrap() {
            let pem = mailseal::keystore::identity_pem(&id.certificate, &id.private_key).unwrap();
            store.import(pem.as_bytes(), "generated", false).unwrap();
            let cert = pem[..pem.find("-----BEGIN PRIVATE KEY-----").unwrap()].to_string();
            certs.push((email, cert));
        }
    }
    for (email, cert) in certs {
        let other = if email == A { &sb } else { &sa };
        other.import(cert.as_bytes(), "peer.pem", false).unwrap();
        other.import(cert.as_bytes(), "peer.pem", true).unwrap();
    }
    (sa, sb)
}

fn openpgp_stores() -> (MemoryStore, MemoryStore) {
    let (sa, sb) = (MemoryStore::new(), MemoryStore::new());
    for (store, other, email) in [(&sa, &sb, A), (&sb, &sa, B)] {
        let tsk = mailseal::openpgp::generate(email, None, mailseal::openpgp::KeyProfile::Rfc4880)
            .unwrap();
        store.import(&tsk, email, false).unwrap();
        let cert = mailseal::keystore::openpgp::armored_certificate(&tsk).unwrap();
        other.import(&cert, email, false).unwrap();
    }
    (sa, sb)
}

/// Seals `aep` from its sender, opens it at `receiver`, and maps back.
fn through(profile: Profile, sealer: &dyn Sealer, opener: &dyn Opener, aep: &AepMessage) {
    let plain = aep.to_maila2a().unwrap();
    let sealed = sealer.seal(&plain, &SealOptions::new(profile)).unwrap();
    assert!(
        !String::from_utf8_lossy(&sealed).contains("t-42"),
        "{profile}: payload in the clear"
    );
    let opened = opener.open(&sealed, &OpenPolicy::default()).unwrap();
    assert_eq!(
        &AepMessage::from_maila2a(&opened.message).unwrap(),
        aep,
        "{profile}"
    );
}

#[test]
fn sealed_and_opened_under_smime_and_openpgp() {
    let submit = parse(&task_submit());
    let result = parse(&task_result());
    let dir = tempfile::tempdir().unwrap();
    let (sa, sb) = smime_stores(dir.path());
    through(
        Profile::Smime,
        &mailseal::smime::Smime::new(&sa),
        &mailseal::smime::Smime::new(&sb),
        &submit,
    );
    through(
        Profile::Smime,
        &mailseal::smime::Smime::new(&sb),
        &mailseal::smime::Smime::new(&sa),
        &result,
    );
    let (pa, pb) = openpgp_stores();
    through(
        Profile::OpenPgp,
        &mailseal::openpgp::OpenPgp::new(&pa),
        &mailseal::openpgp::OpenPgp::new(&pb),
        &submit,
    );
    through(
        Profile::OpenPgp,
        &mailseal::openpgp::OpenPgp::new(&pb),
        &mailseal::openpgp::OpenPgp::new(&pa),
        &result,
    );
}

#[test]
fn sealed_and_opened_under_mls() {
    use mailseal::mls::{Mls, Received};
    // One store pinning both parties' S/MIME keys certifies and checks the MLS keys.
    let auth = common::mls::shared_authority(&[A, B]);
    let (ma, mb) = (Mls::in_memory().unwrap(), Mls::in_memory().unwrap());
    ma.generate_identity(A, &auth).unwrap();
    mb.generate_identity(B, &auth).unwrap();
    mb.allow_inviter(A, true).unwrap();
    let g = ma.create_group(A).unwrap();
    let added = ma.add(&g, &[mb.key_package(B).unwrap()], &auth).unwrap();
    mb.receive(&added.welcome, &OpenPolicy::default(), "w", &auth)
        .unwrap()
        .commit()
        .unwrap();
    for (from, to, raw) in [(&ma, &mb, task_submit()), (&mb, &ma, task_result())] {
        let aep = parse(&raw);
        let mut opts = SealOptions::new(Profile::Mls);
        opts.group = Some(g.clone());
        let sealed = Sealer::seal(from, &aep.to_maila2a().unwrap(), &opts).unwrap();
        let Received::Application(opened) = to
            .receive(&sealed, &OpenPolicy::default(), "m", &auth)
            .unwrap()
            .commit()
            .unwrap()
        else {
            panic!("not an application message");
        };
        // The group coordinates were added inside; the AEP message is unchanged.
        assert!(opened.envelope().group().is_some());
        assert_eq!(AepMessage::from_maila2a(&opened.message).unwrap(), aep);
    }
}

#[test]
fn command_line_maps_and_seals_aep_mail() {
    let dir = tempfile::tempdir().unwrap();
    let submit = dir.path().join("submit.eml");
    std::fs::write(&submit, task_submit()).unwrap();
    let p = |f: &str| dir.path().join(f).display().to_string();
    // AEP -> MailA2A -> AEP.
    let out = common::run(
        &[
            "aep",
            "to-maila2a",
            "--in",
            &p("submit.eml"),
            "--out",
            &p("m.eml"),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::run(&["validate", &p("m.eml")], b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = common::run(&["aep", "from-maila2a", "--in", &p("m.eml")], b"");
    assert!(out.status.success());
    assert_eq!(parse(&out.stdout), parse(&task_submit()));
    // `seal` takes the AEP mail as it is (OpenPGP between two stores), dated now: the
    // receiver opens only what is fresh.
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap();
    std::fs::write(&submit, task_submit_at(&now)).unwrap();
    let (a, b) = (p("a"), p("b"));
    for (store, email, other) in [(&a, A, &b), (&b, B, &a)] {
        let cert = p(&format!("{email}.asc"));
        let out = common::run(
            &[
                "--store",
                store,
                "key",
                "generate",
                "--kind",
                "openpgp",
                "--email",
                email,
                "--cert-out",
                &cert,
            ],
            b"",
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = common::run(&["--store", other, "key", "import", &cert], b"");
        assert!(out.status.success());
    }
    let out = common::run(
        &[
            "--store",
            &a,
            "seal",
            "--profile",
            "openpgp",
            "--in",
            &p("submit.eml"),
            "--out",
            &p("sealed.eml"),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::run(
        &[
            "--store",
            &b,
            "open",
            "--eml",
            "--in",
            &p("sealed.eml"),
            "--out",
            &p("inner.eml"),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::run(&["aep", "from-maila2a", "--in", &p("inner.eml")], b"");
    assert_eq!(parse(&out.stdout), parse(&task_submit_at(&now)));
}

/// The `aep_map` fuzzer's finding (`tests/cases/crashes/aep_map-*`): a From with
/// control characters read as AEP but did not read back the same once written. Such
/// a mail is refused now; whatever reads maps back without loss.
#[test]
fn fuzz_reproducers_refused_or_round_trip() {
    let dir = common::data("../cases/crashes");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("aep_map-")
        {
            continue;
        }
        n += 1;
        let raw = std::fs::read(&path).unwrap();
        if let Ok(aep) = AepMessage::parse(&raw, &Limits::default()) {
            assert_eq!(parse(&aep.to_rfc5322().unwrap()), aep);
        }
    }
    assert!(n >= 1);
    let raw = std::fs::read(common::data(
        "../cases/crashes/aep_map-control-chars-in-from",
    ))
    .unwrap();
    assert!(matches!(
        AepMessage::parse(&raw, &Limits::default()).unwrap_err(),
        AepError::Header(_)
    ));
}

#[test]
fn fail_output_edges_aep_header_names_from_the_envelope_are_checked() {
    // The sender writes `metadata.aep.headers` inside its signed envelope: a name that
    // is a structural field (a second From, a Reply-To), carries a line break or a
    // colon, or is one this writer sets itself would inject into the AEP mail. Each is
    // refused; an X-AEP-* extension field passes.
    let aep = parse(&task_submit());
    let m = aep.to_maila2a().unwrap();
    let with_headers = |headers: serde_json::Value| {
        let mut env = m.envelope().clone();
        let mut payload = env.value("payload").unwrap();
        payload["message"]["metadata"]["aep"]["headers"] = headers;
        env.set("payload", &payload);
        let mut msg = m.clone();
        msg.set_envelope(env);
        msg
    };
    for bad in [
        serde_json::json!([["from", "ceo@a.example"]]),
        serde_json::json!([["Reply-To", "mallory@evil.example"]]),
        serde_json::json!([["X-AEP-Evil\r\nReply-To", "mallory@evil.example"]]),
        serde_json::json!([["X-AEP-Evil: x\r\nReply-To", "v"]]),
        serde_json::json!([["x-aep-type", "task.result"]]),
        serde_json::json!([["X-AEP-", "v"]]),
        serde_json::json!([["", "v"]]),
    ] {
        let from_mail = AepMessage::from_maila2a(&with_headers(bad.clone())).unwrap();
        let err = from_mail.to_rfc5322().unwrap_err();
        assert!(matches!(err, AepError::Header(_)), "{bad}: {err}");
    }
    let ok = AepMessage::from_maila2a(&with_headers(serde_json::json!([[
        "x-aep-priority",
        "high"
    ]])))
    .unwrap()
    .to_rfc5322()
    .unwrap();
    let text = String::from_utf8(ok).unwrap();
    assert!(text.contains("\r\nx-aep-priority: high\r\n"), "{text}");
    assert_eq!(
        text.matches("\r\nFrom: ").count() + usize::from(text.starts_with("From: ")),
        1
    );
}
