//! Hostile input never panics: the MIME corpus (mail-parser's RFC and malformed
//! samples), every truncation and single-byte flips of valid messages, each through
//! parse + rules + structure + open.

use crate::common;

use mailseal::dispatch::Dispatcher;
use mailseal::envelope::ValidationContext;
use mailseal::message::{structure, Limits, MailA2aMessage};
use mailseal::seal::{OpenPolicy, Opener};

fn exercise(raw: &[u8]) -> bool {
    let limits = Limits::default();
    let _ = structure(raw, &limits);
    let _ = Dispatcher::new().open(raw, &OpenPolicy::default());
    match MailA2aMessage::parse(raw, &limits) {
        Ok(m) => m.check(&ValidationContext::default()).is_empty(),
        Err(_) => false,
    }
}

#[test]
fn mime_corpus_never_panics() {
    let mut n = 0;
    for dir in ["mime/mail-parser/rfc", "mime/mail-parser/malformed"] {
        for e in std::fs::read_dir(common::data(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "eml") {
                let raw = std::fs::read(&p).unwrap();
                // None of these is a MailA2A message.
                assert!(!exercise(&raw), "{} validated", p.display());
                n += 1;
            }
        }
    }
    assert!(n >= 16);
}

fn valid_messages() -> Vec<Vec<u8>> {
    [
        "ok--published-request.eml",
        "ok--base64-machine-part.eml",
        "ok--cid-attachment.eml",
        "ok--published-payment-required.eml",
    ]
    .iter()
    .map(|f| std::fs::read(common::data(&format!("../cases/{f}"))).unwrap())
    .collect()
}

#[test]
fn every_truncation_is_handled() {
    for raw in valid_messages() {
        assert!(exercise(&raw));
        for cut in 0..raw.len() {
            exercise(&raw[..cut]);
        }
    }
}

#[test]
fn byte_flips_are_handled_and_never_change_a_validated_envelope_silently() {
    for raw in valid_messages() {
        let original = MailA2aMessage::parse(&raw, &Limits::default()).unwrap();
        for i in 0..raw.len() {
            for mask in [0x01u8, 0x20, 0x80, 0xff] {
                let mut m = raw.clone();
                m[i] ^= mask;
                if exercise(&m) {
                    // A flip that still validates must show in what was read, or be in
                    // a part of the message that carries no meaning (case of a header
                    // name, white space, boundary text, the fallback text).
                    let flipped = MailA2aMessage::parse(&m, &Limits::default()).unwrap();
                    if flipped.envelope_bytes() != original.envelope_bytes() {
                        assert_ne!(flipped.content_digest(), original.content_digest());
                    }
                }
            }
        }
    }
}

/// Fuzzer crash reproducers (`tests/cases/crashes/`): each must be handled without a
/// panic, in this (debug-assertion) build as in release.
#[test]
fn fuzz_crash_reproducers_are_handled() {
    let dir = common::data("../cases/crashes");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let raw = std::fs::read(e.unwrap().path()).unwrap();
        exercise(&raw);
        n += 1;
    }
    assert!(n >= 2);
    // The round-trip finding: a From of control characters once passed the rules.
    let raw = std::fs::read(common::data(
        "../cases/crashes/message_parse-control-chars-in-from",
    ))
    .unwrap();
    assert!(
        !exercise(&raw),
        "a From that is not an address must not validate"
    );
}

/// Issue #17, store hygiene: every `--out` is written atomically, owner-only, and
/// never through a symlink planted at the path (here by someone who wants the output
/// written over a file of theirs choosing).
#[cfg(unix)]
#[test]
fn fail_output_edges_out_follows_only_a_symlink_nobody_else_could_plant() {
    use std::os::unix::fs::PermissionsExt;
    let compose = |out: &std::path::Path, env: &std::path::Path| {
        common::run(
            &[
                "compose",
                "--from",
                "a@example.com",
                "--to",
                "b@example.com",
                "--in",
                env.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            b"",
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env.json");
    std::fs::write(&env, serde_json::to_vec(&common::request()).unwrap()).unwrap();
    // In a directory others can write (a planted link may point at our files): the
    // link is neither followed nor replaced, and the command fails.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let planted = shared.join("plain.eml");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let r = compose(&planted, &env);
    assert_ne!(r.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("others can write"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&planted)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!shared.join("plain.eml.partial").exists());
    // In a directory only its owner writes, the link is the owner's own: the file it
    // names is replaced (owner-only), the link stays.
    let own = dir.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
    let target = own.join("real.eml");
    std::fs::write(&target, b"old").unwrap();
    let link = own.join("plain.eml");
    std::os::unix::fs::symlink("real.eml", &link).unwrap();
    let r = compose(&link, &env);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read(&target).unwrap().starts_with(b"From:"));
    let meta = std::fs::metadata(&target).unwrap();
    assert_eq!(meta.permissions().mode() & 0o077, 0, "owner-only");
}

/// Issue #17 (BENCHMARKS.md "adversarial inputs"): inputs that cost quadratic time
/// before authentication are refused by their count, early. Time is not asserted;
/// the reason is.
#[test]
fn fail_adversarial_counts_are_refused_before_the_expensive_parse() {
    let head = "From: <alice@smime.example>\r\nTo: <bob@smime.example>\r\n\
                Date: Tue, 01 Dec 2026 12:00:00 +0000\r\nMessage-ID: <adv@x>\r\n\
                MIME-Version: 1.0\r\nMail-A2A-Binding: 1.0\r\n";
    // A Content-Type with 5000 parameters.
    let params: String = (0..5000).map(|i| format!(";\r\n p{i}=v")).collect();
    let mail = format!("{head}Content-Type: multipart/mixed; boundary=b{params}\r\n\r\n--b--\r\n");
    let err = Dispatcher::new()
        .open(mail.as_bytes(), &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(
        mailseal::Classify::kind(&err),
        mailseal::ErrorKind::Malformed,
        "{err}"
    );

    // A PGP/MIME message of 1000 anonymous PKESKs.
    let mut pgp = Vec::new();
    for _ in 0..1000 {
        let mut body = vec![3u8];
        body.extend([0u8; 8]);
        body.push(18);
        body.extend(263u16.to_be_bytes());
        body.push(0x40);
        body.extend([7u8; 32]);
        body.push(40);
        body.extend([9u8; 40]);
        pgp.push(0xC1);
        pgp.push(body.len() as u8);
        pgp.extend(body);
    }
    let mut mail = format!(
        "{head}Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"e\"\r\n\r\n\
         --e\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n\
         --e\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    {
        use base64::Engine;
        let text = base64::engine::general_purpose::STANDARD.encode(&pgp);
        mail.extend(b"-----BEGIN PGP MESSAGE-----\r\n\r\n");
        for chunk in text.as_bytes().chunks(76) {
            mail.extend(chunk);
            mail.extend(b"\r\n");
        }
        mail.extend(b"-----END PGP MESSAGE-----\r\n");
    }
    mail.extend(b"\r\n--e--\r\n");
    let dir = tempfile::tempdir().unwrap();
    let store = mailseal::keystore::DirectoryStore::open(dir.path().join("s")).unwrap();
    let err = mailseal::openpgp::OpenPgp::new(&store)
        .open(&mail, &OpenPolicy::default())
        .unwrap_err();
    assert!(err.to_string().contains("top-level packets"), "{err}");
}

/// Display (THREATS.md) and issue #58: an error that quotes what a message says (here
/// a payload member's name, written by whoever sent the mail) is printed on one line,
/// its control characters escaped, its length bounded: it can forge no second line
/// (`mailseal: open: ok delivered`), drive no terminal, and a name of 200,000
/// characters is not a 200,000-character line.
#[test]
fn fail_display_an_error_quoting_the_message_is_one_bounded_escaped_line() {
    for name in [
        "x\nmailseal: open: ok delivered\u{1b}[2J\u{7}\r".to_string(),
        "N".repeat(200_000),
    ] {
        let env = serde_json::json!({
            "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
            "operation": "tasks/get", "messageId": "m1", "correlationId": "c1",
            "sequence": 0, "final": false,
            "payload": {"id": "t1", name.clone(): 1}
        });
        let mail = format!(
            "From: a@x.example\r\nTo: b@y.example\r\nMessage-ID: <1@x.example>\r\n\
             Date: Sun, 06 Dec 2026 09:00:00 +0000\r\nSubject: x\r\nMail-A2A-Binding: 1.0\r\n\
             MIME-Version: 1.0\r\nContent-Type: application/a2a+json\r\n\r\n{env}\r\n"
        );
        let out = common::run(&["open"], mail.as_bytes());
        assert_ne!(out.status.code(), Some(0));
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
        assert!(
            !stderr.chars().any(|c| c.is_control() && c != '\n'),
            "{stderr:?}"
        );
        assert!(stderr.chars().count() < 1200, "{} characters", stderr.len());
        assert!(
            stderr.contains("not allowed") || stderr.contains("more characters"),
            "{stderr}"
        );
    }
}

/// Issue #58: a member's name is content (from inside an encrypted part it may be a
/// secret), and no error shows one. A name the binding or the A2A schema defines is
/// shown; any other is named by its place (`#2`, the object's second member), whether
/// the member is not allowed, repeated, or on the way to a bad `cid:` reference. The
/// rules are the same before and after decryption, so plain mail shows them.
#[test]
fn fail_display_errors_name_a_messages_own_members_by_place_not_name() {
    let secret = "SECRET-API-KEY-7f3a9";
    let request = |payload: &str| {
        format!(
            r#"{{"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request","operation":"message/send","messageId":"m1","correlationId":"c1","sequence":0,"final":false,"idempotencyKey":"i1","payload":{payload}}}"#
        )
    };
    for (case, env, shown) in [
        (
            "a member the schema does not allow",
            request(&format!(
                r#"{{"message":{{"messageId":"a","role":"ROLE_USER","parts":[{{"text":"x"}}],"{secret}":1}}}}"#
            )),
            "/payload/message",
        ),
        (
            "a repeated member",
            request(&format!(
                r#"{{"message":{{"messageId":"a","role":"ROLE_USER","parts":[{{"text":"x"}}],"metadata":{{"{secret}":1,"{secret}":2}}}}}}"#
            )),
            "/payload/message/metadata/#2",
        ),
        (
            // (In `metadata` a `url` is opaque JSON, not checked: issue #60.)
            "a cid: reference in a part beside a secret",
            request(&format!(
                r#"{{"message":{{"messageId":"a","role":"ROLE_USER","parts":[{{"text":"x"}},{{"url":"cid:nothing@x","filename":"{secret}"}}]}}}}"#
            )),
            "/payload/message/parts/1/url",
        ),
    ] {
        let mail = format!(
            "From: a@x.example\r\nTo: b@y.example\r\nMessage-ID: <1@x.example>\r\n\
             Date: Sun, 06 Dec 2026 09:00:00 +0000\r\nSubject: x\r\nMail-A2A-Binding: 1.0\r\n\
             MIME-Version: 1.0\r\nContent-Type: application/a2a+json\r\n\r\n{env}\r\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.eml");
        std::fs::write(&file, &mail).unwrap();
        let out = common::run(&["validate", file.to_str().unwrap()], b"");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(3), "{case}: {said}");
        assert!(said.contains(shown), "{case}: {said}");
        assert!(!said.contains("SECRET"), "{case} shows the name: {said}");
    }
}

/// Issue #58: a library error that quotes what a message said (an identifier, an
/// identity, a key id) is one line of bounded length, however it is printed: the
/// caller need not know to escape it.
#[test]
fn fail_display_library_errors_quote_message_values_escaped_and_bounded() {
    let hostile = format!(
        "x\nmailseal: open: ok delivered\u{1b}[2J{}",
        "A".repeat(100_000)
    );
    let errors: Vec<Box<dyn std::error::Error>> = vec![
        Box::new(mailseal::replay::ReceiverError::Expired {
            message_id: hostile.clone(),
            expired_at: "2026-12-06T00:00:00Z".into(),
        }),
        Box::new(mailseal::mls::MlsError::SenderRemoved {
            group: "g".into(),
            sender: hostile.clone(),
        }),
        Box::new(mailseal::jws::JwsError::UnknownSigner {
            kid: hostile.clone(),
        }),
    ];
    for e in errors {
        let text = e.to_string();
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(text.contains("x\\u{000a}mailseal"), "{text:?}");
        assert!(text.chars().count() < 400, "{} characters", text.len());
    }
}
