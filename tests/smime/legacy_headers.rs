//! Mail from legacy S/MIME senders (issue #17, MailA2A 9.2): `openssl cms -sign` of the
//! A2A part alone, then `openssl cms -encrypt`, puts no header fields inside the
//! signature. Such mail opens with the outer From bound to the signer, the outer To
//! checked for recipient binding, and the report saying the header fields were not
//! protected; a policy refuses it for senders that must protect them.

use crate::common;

use std::path::{Path, PathBuf};

use common::{fixture, openssl, run};

use super::fail_path::import;
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;

const ALICE: &str = "alice@smime.example";
const BOB: &str = "bob@smime.example";

/// Bob's store: his encryption and signing identities, Alice's certificate, the CA.
fn bob_store(dir: &Path) -> PathBuf {
    let store = dir.join("bob");
    let fx = |f: &str| fixture(&format!("rfc9216/{f}"));
    let own = [
        "bob.encrypt.crt",
        "bob.encrypt.key",
        "bob.sign.crt",
        "bob.sign.key",
    ]
    .map(fx);
    import(&store, &own.each_ref().map(|p| p.as_path()), false);
    import(&store, &[&fx("ca.rsa.crt")], true);
    store
}

/// The legacy sender's mail from `from` (signed by Alice's key whatever it says) to
/// `to`: the A2A part alone signed, then encrypted to Bob; the outer header fields a
/// mail system adds (Date, Message-ID) and the binding hint on top.
fn legacy_mail(dir: &Path, from: &str, to: &str) -> (Vec<u8>, Vec<u8>) {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "legacy-1");
    env.set("correlationId", "legacy-c-1");
    env.set("idempotencyKey", "legacy-effect-1");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "from an old client"}]}}),
    );
    let json = MailA2aMessage::new(ALICE, &[BOB], env)
        .envelope_bytes()
        .to_vec();
    let mut part = b"Content-Type: application/a2a+json\r\n\r\n".to_vec();
    part.extend_from_slice(&json);
    std::fs::write(dir.join("part.eml"), &part).unwrap();
    let crt = fixture("rfc9216/alice.sign.crt");
    let key = fixture("rfc9216/alice.sign.key");
    openssl(
        &[
            "cms",
            "-sign",
            "-in",
            "part.eml",
            "-signer",
            crt.to_str().unwrap(),
            "-inkey",
            key.to_str().unwrap(),
            "-out",
            "signed.eml",
        ],
        dir,
    );
    let bob = fixture("rfc9216/bob.encrypt.crt");
    openssl(
        &[
            "cms",
            "-encrypt",
            "-aes-256-gcm",
            "-in",
            "signed.eml",
            "-out",
            "encrypted.eml",
            "-from",
            from,
            "-to",
            to,
            "-subject",
            "task",
            bob.to_str().unwrap(),
        ],
        dir,
    );
    // Dated now, as the signature's signingTime (openssl's clock) is: a receipt
    // time before the signature was made is refused (identity::check_signed_at).
    let date = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap();
    let mut mail = format!(
        "Date: {date}\r\nMessage-ID: <legacy-1@smime.example>\r\nMail-A2A-Binding: 1.0\r\n"
    )
    .into_bytes();
    let body = std::fs::read(dir.join("encrypted.eml")).unwrap();
    // openssl writes LF line ends: mail is CRLF.
    let text = String::from_utf8(body).unwrap();
    for line in text.lines() {
        mail.extend_from_slice(line.as_bytes());
        mail.extend_from_slice(b"\r\n");
    }
    (mail, json)
}

fn open(store: &Path, raw: &[u8], extra: &[&str], report: &Path) -> std::process::Output {
    // Received a minute after it was written (see `legacy_mail`).
    let now = (time::OffsetDateTime::now_utc() + time::Duration::minutes(1))
        .replace_nanosecond(0)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let mut args = vec![
        "open",
        "--store",
        store.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--now",
        &now,
    ];
    args.extend_from_slice(extra);
    run(&args, raw)
}

#[test]
fn legacy_signed_then_encrypted_mail_opens_with_unprotected_headers_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = bob_store(dir.path());
    let (mail, json) = legacy_mail(dir.path(), ALICE, BOB);
    let report = dir.path().join("report.json");
    let out = open(&store, &mail, &[], &report);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(out.stdout, [json.as_slice(), b"\n"].concat());
    assert!(stderr.contains("no header protection"), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["headerProtection"], false);
    assert_eq!(r["protection"], "signed-encrypted");
    assert_eq!(r["protectedHeaders"], serde_json::json!([]));
}

#[test]
fn fail_legacy_mail_from_a_sender_that_must_protect_its_headers() {
    let dir = tempfile::tempdir().unwrap();
    let store = bob_store(dir.path());
    let (mail, _) = legacy_mail(dir.path(), ALICE, BOB);
    let report = dir.path().join("report.json");
    for extra in [
        &["--require-header-protection"][..],
        &["--require-header-protection-from", ALICE][..],
    ] {
        let out = open(&store, &mail, extra, &report);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{extra:?}: {stderr}");
        assert!(out.stdout.is_empty());
        assert!(
            stderr.contains("must protect its header fields"),
            "{stderr}"
        );
    }
}

#[test]
fn fail_legacy_mail_whose_outer_from_is_not_the_signer_or_to_is_not_us() {
    // Mallory re-sends Alice's legacy message: with her own From it is not the
    // signer's; addressed to someone else it is not for Bob.
    let dir = tempfile::tempdir().unwrap();
    let store = bob_store(dir.path());
    let report = dir.path().join("report.json");
    let (mail, _) = legacy_mail(dir.path(), "ceo@smime.example", BOB);
    let out = open(&store, &mail, &[], &report);
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let (mail, _) = legacy_mail(dir.path(), ALICE, "carol@smime.example");
    let out = open(&store, &mail, &[], &report);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("not a protected recipient"), "{stderr}");
    assert!(out.stdout.is_empty());
}
