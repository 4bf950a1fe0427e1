//! `open` on unprotected messages: the downgrade rule (DESIGN decision 8, widened by
//! issue #17) refuses every unsigned message, of any kind; one from a peer the policy
//! explicitly allows opens and says it was unprotected. Nothing reaches stdout unless
//! the message was accepted.

use crate::common;

use common::{data, run};
use mailseal::dispatch::{detect_profile, Dispatcher};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;
use mailseal::seal::{OpenError, OpenPolicy, Opener};
use mailseal::{Profile, Protection};
use sha2::{Digest, Sha256};

fn tasks_get() -> Vec<u8> {
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "get-1");
    env.set("payload", &serde_json::json!({"id": "task-1"}));
    MailA2aMessage::new("a@example.net", &["b@example.com"], env)
        .to_rfc5322()
        .unwrap()
}

#[test]
fn fail_unsigned_effectful_request_is_refused_with_exit_6() {
    let raw = std::fs::read(data("maila2a/request.eml")).unwrap();
    let out = run(&["open"], &raw);
    assert_eq!(out.status.code(), Some(6));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("message/send") && err.contains("needs signed protection"),
        "{err}"
    );
}

#[test]
fn fail_unsigned_read_only_request_is_refused_too() {
    // Every kind needs a signature by default (issue #17), read-only requests too.
    let out = run(&["open"], &tasks_get());
    assert_eq!(out.status.code(), Some(6));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tasks/get") && err.contains("needs signed protection"),
        "{err}"
    );
}

#[test]
fn read_only_request_from_an_allowed_peer_opens_and_reports_no_protection() {
    let raw = tasks_get();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = run(
        &[
            "open",
            "--allow-unsigned-from",
            "A@example.net",
            "--report",
            report.to_str().unwrap(),
        ],
        &raw,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let msg = MailA2aMessage::parse(&raw, &Default::default()).unwrap();
    let mut expected = msg.envelope_bytes().to_vec();
    expected.push(b'\n');
    assert_eq!(out.stdout, expected);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    assert_eq!(report["protection"], "none");
    assert_eq!(report["profile"], serde_json::Value::Null);
    assert_eq!(
        report["envelopeSha256"],
        mailseal::keystore::hex(&Sha256::digest(msg.envelope_bytes()))
    );

    assert_eq!(report["delivery"], "deliver");

    // Inspecting it again: the receiver rules would call it a duplicate.
    let out = run(
        &[
            "open",
            "--eml",
            "--stateless",
            "--allow-unsigned-from",
            "a@example.net",
        ],
        &raw,
    );
    assert_eq!(out.status.code(), Some(0));
    let inner = MailA2aMessage::parse(&out.stdout, &Default::default()).unwrap();
    assert_eq!(inner.envelope_bytes(), msg.envelope_bytes());
}

#[test]
fn fail_invalid_message_is_exit_3_with_nothing_on_stdout() {
    let raw = std::fs::read(common::data("../cases/fail-hint-mismatch--kind.eml")).unwrap();
    let out = run(&["open"], &raw);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_peer_policy_can_lower_the_minimum() {
    let raw = std::fs::read(data("maila2a/request.eml")).unwrap();
    let mut policy = OpenPolicy::default();
    assert!(matches!(
        Dispatcher::new().open(&raw, &policy),
        Err(OpenError::Downgrade {
            required: Protection::Signed,
            got: Protection::None,
            ..
        })
    ));
    policy
        .minimum_per_peer
        .insert("client-agent@example.net".into(), Protection::None);
    let opened = Dispatcher::new().open(&raw, &policy).unwrap();
    assert_eq!(opened.verdict.protection, Protection::None);
    assert_eq!(opened.envelope().message_id().as_deref(), Some("request-1"));
}

#[test]
fn profiles_are_detected_from_the_outer_content_type() {
    let cases: [(&[u8], Option<Profile>); 6] = [
        (b"Content-Type: application/pkcs7-mime; smime-type=authEnveloped-data\r\n\r\nx", Some(Profile::Smime)),
        (b"Content-Type: multipart/signed;\r\n protocol=\"application/pkcs7-signature\"; micalg=sha-256\r\n\r\n", Some(Profile::Smime)),
        (b"content-type: multipart/encrypted; protocol=\"application/pgp-encrypted\"\r\n\r\n", Some(Profile::OpenPgp)),
        (b"Content-Type: multipart/signed; protocol=\"application/pgp-signature\"\r\n\r\n", Some(Profile::OpenPgp)),
        (b"Content-Type: message/mls; version=1.0\r\n\r\n", Some(Profile::Mls)),
        (b"Content-Type: multipart/mixed; boundary=x\r\n\r\n", None),
    ];
    for (raw, expected) in cases {
        assert_eq!(
            detect_profile(raw),
            expected,
            "{}",
            String::from_utf8_lossy(raw)
        );
    }
    // A Content-Type in the body is not the outer one.
    assert_eq!(
        detect_profile(b"Subject: x\r\n\r\nContent-Type: message/mls\r\n"),
        None
    );
}

#[test]
fn fail_unsigned_response_and_payment_required_are_refused() {
    // A forged task result or `PaymentRequired` is as dangerous as a forged request:
    // unsigned, neither is delivered, whatever its kind.
    let response = {
        let mut env = Envelope::new(Kind::Response, Operation::MessageSend, "resp-1");
        env.set("correlationId", "exchange-1");
        env.set("sequence", &1);
        env.set("final", &true);
        env.set(
            "payload",
            &serde_json::json!({"task": {"id": "t-1", "contextId": "c-1",
                "status": {"state": "TASK_STATE_COMPLETED"}}}),
        );
        let mut m = MailA2aMessage::new("agent@example.com", &["client@example.net"], env);
        m.headers.in_reply_to = Some("<request-1@example.net>".into());
        m.to_rfc5322().unwrap()
    };
    let payment = std::fs::read(data("maila2a/payment-required.eml")).unwrap();
    for raw in [response, payment] {
        let out = run(&["open"], &raw);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{err}");
        assert!(out.stdout.is_empty());
        assert!(err.contains("needs signed protection"), "{err}");
    }
}
