//! What the operator reads before signing (issue #59): every signed member that has
//! an effect is shown, the effect first; hidden and invisible characters are escaped
//! and flagged; a look-alike address is flagged with its ASCII form; an attachment
//! swapped for another of the same size shows by its digest. Each request here is
//! made and reviewed by the library as the connected and offline hosts make them
//! (S/MIME, the RFC 9216 Alice identity).

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::{Attachment, MailA2aMessage, Mailbox};
use mailseal::offline;
use mailseal::{Envelope, Kind, Operation, Profile, SealOptions};
use sha2::{Digest, Sha256};

/// A store holding Alice's signing identity and the CA (one host plays both here:
/// the review checks the same things whoever prepared the request).
fn alice() -> (tempfile::TempDir, DirectoryStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = DirectoryStore::open(dir.path().join("store")).expect("store");
    let f =
        |r: &str| std::fs::read(super::common::fixture(&format!("rfc9216/{r}"))).expect("fixture");
    let mut identity = f("alice.sign.crt");
    identity.extend(f("alice.sign.key"));
    store.import(&identity, "alice", false).expect("import");
    store.import(&f("ca.rsa.crt"), "ca", true).expect("import");
    (dir, store)
}

fn envelope(operation: Operation, id: &str, payload: serde_json::Value) -> Envelope {
    let mut env = Envelope::new(Kind::Request, operation, id);
    env.set("correlationId", "c-59");
    env.set("idempotencyKey", id);
    env.set("payload", &payload);
    env
}

fn message(env: Envelope) -> MailA2aMessage {
    MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env)
}

/// The summary the offline host shows for `plain`.
fn summary_of(store: &DirectoryStore, plain: &MailA2aMessage) -> offline::Summary {
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let request = offline::prepare(store, plain, &opts).expect("prepare");
    let review = offline::review(store, request).expect("review");
    review.summary().clone()
}

/// `text` with its continuation lines (`| `) joined to the line they continue.
fn unwrapped(text: &str) -> String {
    text.lines().fold(String::new(), |mut all, line| {
        match line.trim_start().strip_prefix("| ") {
            Some(rest) => all.push_str(rest),
            None => {
                all.push('\n');
                all.push_str(line);
            }
        }
        all
    })
}

/// The effect section: from `effect:` to `warnings:`.
/// The effect section, each value joined to its label: a value too wide to share the
/// label's line is on the next (the summary keeps every line within 80 columns), and
/// a continuation (`| `) goes on where the line before stopped.
fn effect_section(text: &str) -> String {
    let start = text.find("\neffect: ").expect("effect section");
    let end = text.find("\nwarnings: ").expect("warnings section");
    let mut out = String::new();
    for line in text[start..end].lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("| ") {
            out.push_str(rest);
        } else if trimmed.starts_with('"') && out.ends_with(':') {
            out.push(' ');
            out.push_str(trimmed);
        } else {
            out.push('\n');
            out.push_str(line);
        }
    }
    out
}

fn send(parts: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    let mut payload = serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
        "parts": parts}});
    for (k, v) in extra.as_object().expect("object") {
        payload[k] = v.clone();
    }
    payload
}

#[test]
fn fail_a_push_url_in_a_send_is_shown_first() {
    let (_d, store) = alice();
    let payload = send(
        serde_json::json!([{"text": "Please summarise the report."}]),
        serde_json::json!({"configuration": {"taskPushNotificationConfig": {
            "url": "https://collect.attacker.example/hook", "token": "t0k3n"}}}),
    );
    let s = summary_of(
        &store,
        &message(envelope(Operation::MessageSend, "push-1", payload)),
    );
    let effect = effect_section(s.text());
    assert!(s.is_effectful());
    assert!(
        effect.contains("EFFECTFUL: message/send request"),
        "{effect}"
    );
    assert!(
        effect.contains(
            "push URL (payload.configuration.taskPushNotificationConfig.url): \
             \"https://collect.attacker.example/hook\""
        ),
        "{effect}"
    );
    assert!(effect.contains("\"t0k3n\""), "{effect}");
    // And in the envelope, where it is.
    assert!(s
        .text()
        .contains("\"url\": \"https://collect.attacker.example/hook\""));
}

#[test]
fn fail_the_task_a_cancel_applies_to_is_shown() {
    let (_d, store) = alice();
    let payload = serde_json::json!({"id": "task-of-the-victim-42",
        "metadata": {"reason": "routine"}});
    let s = summary_of(
        &store,
        &message(envelope(Operation::TasksCancel, "cancel-1", payload)),
    );
    let effect = effect_section(s.text());
    assert!(
        effect.contains("EFFECTFUL: tasks/cancel request (A2A CancelTask)"),
        "{effect}"
    );
    assert!(
        effect.contains("task id (payload.id): \"task-of-the-victim-42\""),
        "{effect}"
    );
    assert!(effect.contains("\"reason\": \"routine\""), "{effect}");
}

#[test]
fn fail_message_metadata_is_shown() {
    let (_d, store) = alice();
    let mut payload = send(
        serde_json::json!([{"text": "Status update, nothing to do."}]),
        serde_json::json!({"metadata": {"autoApprove": "all-invoices"}}),
    );
    payload["message"]["metadata"] = serde_json::json!({"forwardTo": "mallory@evil.example"});
    let s = summary_of(
        &store,
        &message(envelope(Operation::MessageSend, "meta-1", payload)),
    );
    let effect = effect_section(s.text());
    assert!(
        effect.contains("message metadata (payload.message.metadata): {"),
        "{effect}"
    );
    assert!(
        effect.contains("\"forwardTo\": \"mallory@evil.example\""),
        "{effect}"
    );
    assert!(
        effect.contains("\"autoApprove\": \"all-invoices\""),
        "{effect}"
    );
}

#[test]
fn fail_an_attachment_swapped_for_one_of_the_same_size_shows_by_its_digest() {
    let (_d, store) = alice();
    let with = |data: &[u8]| {
        let payload = send(
            serde_json::json!([{"text": "The signed contract."},
                {"url": "cid:contract@smime.example", "mediaType": "application/pdf",
                 "filename": "contract.pdf"}]),
            serde_json::json!({}),
        );
        let mut m = message(envelope(Operation::MessageSend, "att-1", payload));
        m.attachments.push(Attachment {
            content_id: "contract@smime.example".into(),
            content_type: "application/pdf".into(),
            filename: Some("contract.pdf".into()),
            data: data.to_vec(),
        });
        summary_of(&store, &m)
    };
    let agreed = b"%PDF-1.7 pay 100 EUR to DE00 1234".to_vec();
    let swapped = b"%PDF-1.7 pay 900 EUR to DE00 6666".to_vec();
    assert_eq!(agreed.len(), swapped.len());
    let (a, b) = (with(&agreed), with(&swapped));
    for (s, data) in [(&a, &agreed), (&b, &swapped)] {
        let digest: String = Sha256::digest(data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let text = s.text();
        assert!(text.contains(&format!("    SHA-256: {digest}")), "{text}");
        assert!(
            text.contains("content id: contract@smime.example"),
            "{text}"
        );
        assert!(text.contains("file name: contract.pdf"), "{text}");
        assert!(text.contains("media type: application/pdf"), "{text}");
        assert!(
            text.contains(&format!("size: {} bytes", data.len())),
            "{text}"
        );
    }
    assert_ne!(a.text(), b.text());
    assert_ne!(a.digest(), b.digest());
}

#[test]
fn fail_hidden_and_bidi_characters_are_escaped_and_flagged() {
    let (_d, store) = alice();
    let hidden = [
        '\u{2028}',
        '\u{00ad}',
        '\u{115f}',
        '\u{3164}',
        '\u{180e}',
        '\u{034f}',
        '\u{202e}',
        '\u{200b}',
        '\u{1b}',
        '\u{7}',
        '\u{85}',
        '\u{2066}',
        '\u{feff}',
        '\u{e0041}',
    ];
    for c in hidden {
        let text = format!("Pay invoice 77{c} to the usual account");
        let payload = send(serde_json::json!([{"text": text}]), serde_json::json!({}));
        let mut m = message(envelope(Operation::MessageSend, "hid-1", payload));
        m.text = Some(format!("Mail text {c} too."));
        let s = summary_of(&store, &m);
        let shown = s.text();
        let escaped = format!("\\u{{{:04x}}}", c as u32);
        assert!(
            !shown.contains(c),
            "U+{:04X} printed raw:\n{shown}",
            c as u32
        );
        assert!(
            shown.contains(&format!("\"Pay invoice 77{escaped} to the usual account\"")),
            "U+{:04X}:\n{shown}",
            c as u32
        );
        assert!(
            shown.contains(&format!("| Mail text {escaped} too.")),
            "{shown}"
        );
        let warning = format!("U+{:04X}", c as u32);
        let all = unwrapped(shown);
        let warnings = &all[all.find("\nwarnings: ").expect("warnings")..];
        assert!(
            warnings.contains(&format!(
                "! payload.message.parts[0].text: hidden or invisible characters {warning}"
            )),
            "{shown}"
        );
        assert!(warnings.contains(&format!(
            "! mail text: hidden or invisible characters {warning}"
        )));
        assert!(s.warning_count() >= 2);
    }
}

#[test]
fn fail_a_look_alike_address_is_flagged_with_its_ascii_form() {
    let (_d, store) = alice();
    let payload = send(
        serde_json::json!([{"text": "Wire the deposit."},
            {"data": {"notify": "b\u{430}nk@bank.example", "portal": "https://b\u{430}nk.example/login"}}]),
        serde_json::json!({}),
    );
    let mut m = message(envelope(Operation::MessageSend, "conf-1", payload));
    m.headers.to.push(Mailbox {
        name: Some("B\u{430}nk Support".into()),
        address: "bob@smime.example".into(),
    });
    m.headers.cc.push(Mailbox {
        name: None,
        address: "b\u{430}nk@bank.example".into(),
    });
    let s = summary_of(&store, &m);
    let text = unwrapped(s.text());
    let warnings = &text[text.find("\nwarnings: ").expect("warnings")
        ..text.find("\nheader fields").expect("headers")];
    assert!(
        warnings.contains(
            "! payload.message.parts[1].data.notify: looks like \"bank@bank.example\" \
             (confusable characters); ASCII form b\\u{0430}nk@bank.example"
        ),
        "{warnings}"
    );
    assert!(
        warnings.contains("mixes scripts (Latin, Cyrillic)"),
        "{warnings}"
    );
    assert!(
        warnings.contains(
            "! payload.message.parts[1].data.portal: looks like \"https://bank.example/login\""
        ),
        "{warnings}"
    );
    assert!(
        warnings.contains("ASCII form https://xn--bnk-"),
        "{warnings}"
    );
    assert!(warnings.contains("to display name"), "{warnings}");
    // In the signed Cc header field itself.
    assert!(
        warnings.contains(
            "! cc: looks like \"bank@bank.example\" (confusable characters); \
             ASCII form b\\u{0430}nk@bank.example"
        ),
        "{warnings}"
    );
    assert!(warnings.contains("! header Cc: "), "{warnings}");
    assert!(
        text.contains("  cc: b\u{430}nk@bank.example\n    (ASCII form: b\\u{0430}nk@bank.example)"),
        "{text}"
    );
    // Beside the value itself, its ASCII form.
    assert!(
        text.contains("(ASCII form: b\\u{0430}nk@bank.example)"),
        "{text}"
    );
}

#[test]
fn a_request_that_reads_only_is_not_marked_effectful() {
    let (_d, store) = alice();
    let s = summary_of(
        &store,
        &message(envelope(
            Operation::TasksGet,
            "get-1",
            serde_json::json!({"id": "task-1"}),
        )),
    );
    assert!(!s.is_effectful());
    assert!(s
        .text()
        .contains("effect: no effect on its own: tasks/get request"));
    assert!(s.text().contains("warnings: none"), "{}", s.text());
    assert!(s.fits_view());
    assert_eq!(s.shown(false).expect("fits"), s.text());
}

#[test]
fn a_payment_shows_amount_payee_and_network_first() {
    let (_d, store) = alice();
    let mut env = envelope(
        Operation::MessageSend,
        "pay-59",
        send(
            serde_json::json!([{"text": "Paid retry."}]),
            serde_json::json!({}),
        ),
    );
    env.set(
        "payment",
        &serde_json::json!({"kind": "payload", "x402Version": 2, "object": {"x402Version": 2,
            "accepted": {"scheme": "exact", "network": "eip155:8453", "amount": "1000000",
                "asset": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
                "payTo": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"},
            "payload": {"signature": "0x2d6a"}}}),
    );
    let s = summary_of(&store, &message(env));
    let effect = effect_section(s.text());
    assert!(effect.contains("EFFECTFUL, WITH A PAYMENT"), "{effect}");
    for line in [
        "amount (payment.object.accepted.amount): \"1000000\"",
        "payee (payment.object.accepted.payTo): \"0x209693Bc6afc0C5328bA36FaF03C514EF312287C\"",
        "network (payment.object.accepted.network): \"eip155:8453\"",
    ] {
        assert!(effect.contains(line), "{line} not in {effect}");
    }
}

#[test]
fn fail_a_long_summary_is_refused_unless_the_full_view_is_asked() {
    let (_d, store) = alice();
    let data: serde_json::Map<String, serde_json::Value> = (0..300)
        .map(|i| (format!("k{i:03}"), serde_json::json!(format!("v{i}"))))
        .collect();
    let payload = send(
        serde_json::json!([{"text": "x".repeat(5000)}, {"data": data}]),
        serde_json::json!({}),
    );
    let s = summary_of(
        &store,
        &message(envelope(Operation::MessageSend, "long-1", payload)),
    );
    assert!(!s.fits_view());
    assert!(s.line_count() > offline::Summary::VIEW_LINES);
    let e = s.shown(false).expect_err("refused");
    assert!(e.to_string().contains("default view shows 200"), "{e}");
    assert_eq!(s.shown(true).expect("full"), s.text());
    assert_eq!(s.head().lines().count(), offline::Summary::VIEW_LINES);
    // Nothing cut: the 5000 characters are all there, over continuation lines, and
    // every member of the data part.
    let text = s.text();
    let xs: usize = text
        .lines()
        .map(|l| {
            l.trim_start()
                .trim_start_matches("| ")
                .trim_start_matches("\"text\": \"")
                .trim_start_matches('"')
        })
        .filter(|l| l.starts_with('x'))
        .map(|l| l.matches('x').count())
        .sum();
    assert_eq!(xs, 5000);
    assert!(text.contains("\"k299\": \"v299\""));
    let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > 160).collect();
    assert!(long.is_empty(), "lines too long: {long:?}");
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn the_operator_types_the_digest_and_the_log_records_the_summary_shown() {
    use super::kit;
    let h = kit::smime();
    let plain = h.compose("plain.eml", "req-59", "Pay invoice 77.");
    let req = h.p("r.req");
    h.request("smime", &plain, &req, &[]);
    let out = h.ok(
        "offline",
        &["sign", &req, "--out", &h.p("r.resp")],
        &kit::confirmation(&req),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let end = stderr
        .find("end of summary (")
        .expect("the summary's last line");
    let shown = &stderr[..end + stderr[end..].find('\n').expect("line end") + 1];
    assert!(shown.starts_with("request digest: "), "{stderr}");
    assert!(stderr[shown.len()..].starts_with("To sign, type the first 8 characters"));
    let log = std::fs::read_to_string(h.path("offline").join("signing.log")).expect("log");
    let entry: serde_json::Value =
        serde_json::from_str(log.lines().last().expect("entry")).expect("JSON");
    assert_eq!(entry["summary"], sha256_hex(shown.as_bytes()), "{log}");
    let verified = h.ok("offline", &["sign-log", "verify"], b"");
    assert!(String::from_utf8_lossy(&verified.stdout).contains(" summary "));
    // The response assembles and opens as before.
    h.ok(
        "connected",
        &["assemble", &req, &h.p("r.resp"), "--out", &h.p("r.eml")],
        b"",
    );
    h.ok("bob", &["open", "--in", &h.p("r.eml")], b"");
}

#[test]
fn fail_a_summary_longer_than_the_view_signs_only_with_full() {
    use super::kit;
    let h = kit::smime();
    let plain = h.compose("long.eml", "req-long", &"Read every word. ".repeat(1500));
    let req = h.p("long.req");
    h.request("smime", &plain, &req, &[]);
    let typed = kit::confirmation(&req);
    let out = h.at(
        "offline",
        &["sign", &req, "--out", &h.p("long.resp")],
        &typed,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("the default view shows 200") && stderr.contains("(--full)"),
        "{stderr}"
    );
    assert!(!stderr.contains("end of summary"), "{stderr}");
    assert!(!h.path("long.resp").exists());
    assert!(
        !h.path("offline").join("signing.log").exists(),
        "nothing logged"
    );
    let out = h.ok(
        "offline",
        &["sign", "--full", &req, "--out", &h.p("long.resp")],
        &typed,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("end of summary ("), "{stderr}");
    // Every word of it, over the continuation lines.
    assert_eq!(unwrapped(&stderr).matches("Read every word.").count(), 1500);
    h.ok("connected", &["assemble", &req, &h.p("long.resp")], b"");
}
