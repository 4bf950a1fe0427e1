//! `mailseal open` applies the receiver rules (MailA2A sections 6 and 7): what reaches
//! stdout is exactly what an agent may act on, once. Duplicates and held events are a
//! status line with exit 0; conflicts and expired messages exit 6 with nothing on
//! stdout; `mailseal stream status|next` shows and releases held events.

use crate::common;

use std::path::Path;

use common::{run, with};
use mailseal::keystore::DirectoryStore;
use mailseal::message::MailA2aMessage;
use mailseal::smime::Smime;
use mailseal::{Profile, SealOptions, Sealer};
use serde_json::json;

fn signed(alice: &DirectoryStore, v: serde_json::Value) -> Vec<u8> {
    signed_at(alice, v, None)
}

/// [`signed`], with the signature's signingTime `at` (default now).
fn signed_at(
    alice: &DirectoryStore,
    v: serde_json::Value,
    at: Option<time::OffsetDateTime>,
) -> Vec<u8> {
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    opts.signing_time = at;
    let mut msg = MailA2aMessage::new(
        "alice@smime.example",
        &["bob@smime.example"],
        common::env(v),
    );
    if msg.envelope().correlation_id().is_some() && msg.envelope().sequence() != Some(0) {
        // A reply, in the request's thread.
        msg.headers.in_reply_to = Some("<request-1@smime.example>".into());
    }
    Smime::new(alice).seal(&msg, &opts).unwrap()
}

fn open(bob: &Path, extra: &[&str], raw: &[u8]) -> std::process::Output {
    let mut args = vec!["open", "--store", bob.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args, raw)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_redelivered_message_reaches_stdout_once() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = common::alice_signs_for_bob(dir.path());
    let raw = signed(&alice, common::request());
    let first = open(&bob, &[], &raw);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(first.stdout.starts_with(b"{"));
    let report = dir.path().join("report.json");
    let again = open(&bob, &["--report", report.to_str().unwrap()], &raw);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(again.stdout.is_empty());
    assert!(stderr(&again).contains("duplicate"), "{}", stderr(&again));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    assert_eq!(report["delivery"], "duplicate");
    // When it was first accepted, as RFC 3339 (not Unix seconds).
    let accepted = report["firstAccepted"].as_str().expect("firstAccepted");
    time::OffsetDateTime::parse(accepted, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{accepted}: {e}"));
    // Verification without the rules still works, and says not to act on it.
    let stateless = open(&bob, &["--stateless"], &raw);
    assert_eq!(stateless.stdout, first.stdout);
    assert!(stderr(&stateless).contains("--stateless"));
}

/// A refused message's `--report` is written too (over the report of an earlier
/// message at the same path): the refusal's code, kind, exit status and line, and the
/// profile; nothing of what the message says.
#[test]
fn fail_refused_message_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = common::alice_signs_for_bob(dir.path());
    let report = dir.path().join("report.json");
    let r = report.to_str().unwrap();
    let read = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap()
    };
    let delivered = open(&bob, &["--report", r], &signed(&alice, common::request()));
    assert_eq!(delivered.status.code(), Some(0), "{}", stderr(&delivered));
    assert_eq!(read()["delivery"], "deliver");

    const MARKER: &str = "plaintext-marker-6a1f";
    let expired = with(
        common::request(),
        json!({"createdAt": "2026-01-01T00:00:00Z", "expiresAt": "2026-01-02T00:00:00Z",
            "messageId": "expired-1", "idempotencyKey": "expired-1",
            "payload": {"message": {"messageId": "m-expired", "role": "ROLE_USER",
                "parts": [{"text": MARKER}]}}}),
    );
    let made = time::OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap();
    let raw = signed_at(&alice, expired, Some(made));
    for extra in [
        &[][..],
        &["--out", dir.path().join("out.json").to_str().unwrap()],
    ] {
        let mut args = vec!["--report", r];
        args.extend_from_slice(extra);
        let out = open(&bob, &args, &raw);
        assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
        let v = read();
        assert_eq!(v["delivery"], "refused", "{v:#}");
        assert_eq!(v["profile"], "smime", "{v:#}");
        let refusal = &v["refusal"];
        assert_eq!(refusal["exit"], 6, "{v:#}");
        assert_eq!(refusal["kind"], "policy", "{v:#}");
        let code = refusal["code"].as_str().expect("a code");
        assert!(code.contains('.') && code.contains("expired"), "{v:#}");
        let line = refusal["message"].as_str().expect("a message");
        assert!(line.contains("expired"), "{v:#}");
        assert!(stderr(&out).contains(line), "{}", stderr(&out));
        let text = std::fs::read_to_string(&report).unwrap();
        assert!(!text.contains(MARKER), "{text}");
        assert!(
            v.get("envelopeSha256").is_none() && v.get("from").is_none(),
            "{v:#}"
        );
    }

    // A signature that does not verify, without the rules (--stateless): exit 4, and
    // the report says so.
    let mut tampered = signed(
        &alice,
        with(common::request(), json!({"messageId": "tampered-1"})),
    );
    let at = tampered
        .windows(b"ROLE_USER".len())
        .position(|w| w == b"ROLE_USER")
        .expect("the signed envelope is in clear");
    tampered[at] = b'X';
    let out = open(&bob, &["--stateless", "--report", r], &tampered);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let v = read();
    assert_eq!(v["delivery"], "refused", "{v:#}");
    assert_eq!(v["refusal"]["exit"], 4, "{v:#}");
    assert_eq!(v["refusal"]["kind"], "authentication", "{v:#}");
    assert_eq!(v["profile"], "smime", "{v:#}");
}

#[test]
fn fail_same_message_id_with_other_content_exits_6() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = common::alice_signs_for_bob(dir.path());
    assert_eq!(
        open(&bob, &[], &signed(&alice, common::request()))
            .status
            .code(),
        Some(0)
    );
    let changed = with(
        common::request(),
        json!({"payload": {"message": {"messageId": "message-1", "role": "ROLE_USER",
            "parts": [{"text": "something else"}]}}}),
    );
    let out = open(&bob, &[], &signed(&alice, changed));
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("different content"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fail_expired_message_exits_6_unless_judged_at_an_earlier_time() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = common::alice_signs_for_bob(dir.path());
    let old = with(
        common::request(),
        json!({"createdAt": "2026-01-01T00:00:00Z", "expiresAt": "2026-01-02T00:00:00Z"}),
    );
    // Signed when it was created: judged at an earlier time, a signature made after
    // that time would be refused (identity::check_signed_at).
    let made = time::OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap(); // 2026-01-01
    let raw = signed_at(&alice, old, Some(made));
    let out = open(&bob, &[], &raw);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("expired"), "{}", stderr(&out));
    let out = open(&bob, &["--now", "2026-01-01T12:00:00Z"], &raw);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!out.stdout.is_empty());
}

#[test]
fn a_stream_gap_holds_events_until_it_closes() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = common::alice_signs_for_bob(dir.path());
    let event = |seq: u64| {
        signed(
            &alice,
            json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "event",
                "operation": "message/stream", "messageId": format!("ev-{seq}"),
                "correlationId": "stream-1", "sequence": seq, "final": seq == 3,
                "payload": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state":
                    if seq == 3 { "TASK_STATE_COMPLETED" } else { "TASK_STATE_WORKING" }}}}}),
        )
    };
    let b = bob.to_str().unwrap();
    let one = open(&bob, &["--allow-unsolicited"], &event(1));
    assert!(
        String::from_utf8_lossy(&one.stdout).contains("\"ev-1\""),
        "{}",
        stderr(&one)
    );
    let three = open(&bob, &["--allow-unsolicited"], &event(3));
    assert_eq!(three.status.code(), Some(0));
    assert!(
        three.stdout.is_empty(),
        "a held event does not reach the agent"
    );
    assert!(stderr(&three).contains("held"), "{}", stderr(&three));

    let status = run(
        &[
            "stream",
            "status",
            "--store",
            b,
            "--correlation",
            "stream-1",
            "--json",
        ],
        b"",
    );
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status[0]["missing"], json!([2]));
    assert_eq!(status[0]["held"], json!([3]));
    assert_eq!(status[0]["complete"], json!(false));
    assert!(status[0]["gapSince"].is_string());
    let text = run(&["stream", "status", "--store", b], b"");
    assert!(String::from_utf8_lossy(&text.stdout).contains("gap: missing 2 since"));

    let nothing = run(
        &["stream", "next", "--store", b, "--correlation", "stream-1"],
        b"",
    );
    assert!(nothing.stdout.is_empty());
    let two = open(&bob, &["--allow-unsolicited"], &event(2));
    assert!(String::from_utf8_lossy(&two.stdout).contains("\"ev-2\""));
    assert!(stderr(&two).contains("1 held event(s)"), "{}", stderr(&two));
    // Who it is from is named with what is printed.
    assert!(stderr(&two).contains("mailseal: from "), "{}", stderr(&two));
    let next = run(
        &["stream", "next", "--store", b, "--correlation", "stream-1"],
        b"",
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&next.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["messageId"], "ev-3");
    assert!(
        stderr(&next).contains("event 3 of stream-1 from "),
        "{}",
        stderr(&next)
    );
    let status = run(&["stream", "status", "--store", b, "--json"], b"");
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status[0]["complete"], json!(true));
}
