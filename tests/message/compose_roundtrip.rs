//! `compose` then `validate` round-trips, and a composed message reads the same in
//! mail-parser (through mailseal) and in Python's `email` package.

use crate::common;

use common::run;
use mailseal::envelope::{Envelope, Kind, Operation, ValidationContext};
use mailseal::message::{Attachment, Limits, MailA2aMessage};
use sha2::{Digest, Sha256};

fn rich_message() -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "req-ü-1");
    env.set("correlationId", "corr-1");
    env.set("idempotencyKey", "idem-1");
    env.set("createdAt", "2026-08-30T07:00:00Z");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [
            {"text": "Grüße, 日本語, emoji 🚀 and a long line ".repeat(40)},
            {"url": "cid:data@example.net", "mediaType": "application/octet-stream"}
        ]}}),
    );
    let mut m = MailA2aMessage::new(
        "Client Agent <client@example.net>",
        &["bot@example.com", "audit@example.org"],
        env,
    );
    m.headers.from = Some(mailseal::message::Mailbox {
        name: Some("Client Agent Ü".into()),
        address: "client@example.net".into(),
    });
    m.headers.subject = Some("Résumé request".into());
    m.text = Some("Bonjour ! Voici la requête.\nLigne 2 with trailing space \n".into());
    m.attachments.push(Attachment {
        content_id: "data@example.net".into(),
        content_type: "application/octet-stream".into(),
        filename: Some("data.bin".into()),
        data: (0..=255u8).cycle().take(5000).collect(),
    });
    m
}

#[test]
fn compose_parse_round_trip_keeps_everything() {
    let m = rich_message();
    let bytes = m.to_rfc5322().unwrap();
    // CRLF only, 7-bit only, no line over 998.
    assert!(bytes.is_ascii());
    for line in bytes.split(|&b| b == b'\n') {
        assert!(line.len() <= 999);
    }
    assert!(!bytes.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'));
    let back = MailA2aMessage::parse(&bytes, &Limits::default()).unwrap();
    assert_eq!(back.check(&ValidationContext::default()), vec![]);
    assert_eq!(back.envelope_bytes(), m.envelope_bytes());
    assert_eq!(back.envelope(), m.envelope());
    assert_eq!(back.attachments, m.attachments);
    assert_eq!(
        back.text.as_deref().map(|t| t.replace("\r\n", "\n")),
        m.text
    );
    assert_eq!(back.headers.from, m.headers.from);
    assert_eq!(back.headers.to, m.headers.to);
    assert_eq!(back.headers.subject, m.headers.subject);
    assert_eq!(back.headers.message_id, m.headers.message_id);
    assert_eq!(back.headers.date, m.headers.date);
    assert_eq!(back.headers.hints, m.headers.hints);
}

#[test]
fn reply_threading_round_trips() {
    let request = rich_message();
    let mut env = Envelope::new(Kind::Response, Operation::MessageSend, "resp-1");
    env.set("correlationId", "corr-1");
    env.set("sequence", &1u64);
    env.set("final", &true);
    env.set("payload", &serde_json::json!({"message": {"messageId": "m-2", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}));
    let mut reply = MailA2aMessage::new("bot@example.com", &["client@example.net"], env);
    reply.in_reply_to(&request.headers);
    let back = MailA2aMessage::parse(&reply.to_rfc5322().unwrap(), &Limits::default()).unwrap();
    assert_eq!(back.headers.in_reply_to, request.headers.message_id);
    assert_eq!(
        back.headers.references,
        vec![request.headers.message_id.clone().unwrap()]
    );
    assert_eq!(back.headers.auto_submitted.as_deref(), Some("auto-replied"));
    assert_eq!(back.check(&ValidationContext::default()), vec![]);
}

#[test]
fn cli_compose_then_validate() {
    let envelope = std::fs::read_to_string(common::data("maila2a/request.eml")).unwrap();
    let json = envelope
        .lines()
        .find(|l| l.starts_with("{\"binding"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let attach = dir.path().join("report.csv");
    std::fs::write(&attach, "a,b\n1,2\n").unwrap();
    let json = json.replace(
        "\"parts\":[{\"text\":\"Summarize the attached report.\"}]",
        "\"parts\":[{\"text\":\"Summarize the attached report.\"},{\"url\":\"cid:report@x\",\"mediaType\":\"text/csv\"}]",
    );
    let out_path = dir.path().join("out.eml");
    let out = run(
        &[
            "compose",
            "--from",
            "client-agent@example.net",
            "--to",
            "research-bot@example.com",
            "--text",
            "see attached",
            "--attach",
            &format!("report@x={}", attach.display()),
            "--out",
            out_path.to_str().unwrap(),
        ],
        json.as_bytes(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = run(&["validate", out_path.to_str().unwrap()], b"");
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );

    // A reply composed with --in-reply-to validates; without it, compose refuses it.
    let reply_json = r#"{"bindingVersion":"1.0","a2aVersion":"1.0","kind":"response","operation":"tasks/get","messageId":"r1","correlationId":"c1","sequence":1,"final":true,"payload":{"id":"t1","status":{"state":"TASK_STATE_COMPLETED"}}}"#;
    let ok = run(
        &[
            "compose",
            "--from",
            "b@example.com",
            "--to",
            "a@example.net",
            "--in-reply-to",
            "<req-1@example.net>",
        ],
        reply_json.as_bytes(),
    );
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("In-Reply-To: <req-1@example.net>"));
    let refused = run(
        &[
            "compose",
            "--from",
            "b@example.com",
            "--to",
            "a@example.net",
        ],
        reply_json.as_bytes(),
    );
    assert_eq!(refused.status.code(), Some(3));
    assert!(refused.stdout.is_empty());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("reply-without-in-reply-to"), "{err}");
}

const PY: &str = r#"
import email, email.policy, hashlib, json, sys
msg = email.message_from_bytes(open(sys.argv[1], 'rb').read(), policy=email.policy.default)
parts = []
for p in msg.walk():
    if p.is_multipart():
        continue
    body = p.get_payload(decode=True)
    parts.append({"type": p.get_content_type(), "cid": (p.get("Content-ID") or "").strip("<>"),
                  "sha256": hashlib.sha256(body).hexdigest(), "len": len(body)})
print(json.dumps({"from": msg["From"].addresses[0].addr_spec,
                  "to": [a.addr_spec for a in msg["To"].addresses],
                  "subject": str(msg["Subject"]), "message_id": msg["Message-ID"].strip("<>"),
                  "binding": msg["Mail-A2A-Binding"], "defects": len(msg.defects), "parts": parts}))
"#;

#[test]
fn python_email_reads_what_mail_parser_reads() {
    let m = rich_message();
    let bytes = m.to_rfc5322().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.eml");
    std::fs::write(&path, &bytes).unwrap();
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(PY)
        .arg(&path)
        .output()
        .expect("python3 is on every machine");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let ours = MailA2aMessage::parse(&bytes, &Limits::default()).unwrap();
    let hex = |b: &[u8]| mailseal::keystore::hex(&Sha256::digest(b));
    assert_eq!(py["defects"], 0);
    assert_eq!(
        py["from"],
        ours.headers.from.as_ref().unwrap().address.as_str()
    );
    assert_eq!(
        py["to"],
        serde_json::json!(ours
            .headers
            .to
            .iter()
            .map(|t| t.address.clone())
            .collect::<Vec<_>>())
    );
    assert_eq!(py["subject"], ours.headers.subject.as_deref().unwrap());
    assert_eq!(
        py["message_id"],
        ours.headers.message_id.as_deref().unwrap()
    );
    assert_eq!(py["binding"], "1.0");
    let parts = py["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0]["type"], "application/a2a+json");
    assert_eq!(parts[0]["sha256"], hex(ours.envelope_bytes()));
    assert_eq!(parts[1]["type"], "text/plain");
    // Python keeps the text's CRLF line ends as decoded; compare the bytes we decoded.
    assert_eq!(
        parts[1]["sha256"],
        hex(ours.text.as_ref().unwrap().as_bytes())
    );
    assert_eq!(parts[2]["cid"], "data@example.net");
    assert_eq!(parts[2]["sha256"], hex(&ours.attachments[0].data));
}
