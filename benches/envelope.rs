//! compose + parse + validate of a MailA2A message against the floor: mail-parser only
//! parsing the same bytes (what any reader of the message pays at least).
//!
//! Sizes: 2 KiB (an envelope with a short payload), 1 MiB as a `cid:` attachment (a
//! report travelling with the request), and 1 MiB of inline JSON payload.

mod common;

use criterion::{BenchmarkId, Criterion, Throughput};
use mailseal::envelope::{Envelope, Kind, Operation, ValidationContext};
use mailseal::message::{Attachment, Limits, MailA2aMessage};
use std::hint::black_box;

fn message(text_len: usize, attachment_len: usize) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "bench-1");
    env.set("correlationId", "corr-1");
    env.set("idempotencyKey", "idem-1");
    env.set("createdAt", "2026-08-30T07:00:00Z");
    env.set("expiresAt", "2026-08-31T07:00:00Z");
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(text_len)
        .collect();
    let mut parts = vec![serde_json::json!({"text": text})];
    if attachment_len > 0 {
        parts.push(serde_json::json!({"url": "cid:data@example.net", "mediaType": "application/octet-stream"}));
    }
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": parts}}),
    );
    let mut m = MailA2aMessage::new("client@example.net", &["bot@example.com"], env);
    if attachment_len > 0 {
        m.attachments.push(Attachment {
            content_id: "data@example.net".into(),
            content_type: "application/octet-stream".into(),
            filename: None,
            data: (0..attachment_len).map(|i| (i * 31 % 251) as u8).collect(),
        });
    }
    m
}

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    let cases = [
        ("2KiB", message(1500, 0)),
        ("1MiB-attachment", message(1500, 1 << 20)),
        ("1MiB-json", message(1 << 20, 0)),
    ];
    for (name, msg) in cases {
        let bytes = msg.to_rfc5322().unwrap();
        let mut g = c.benchmark_group(format!("envelope_{name}"));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| {
                let out = black_box(&msg).to_rfc5322().unwrap();
                let parsed = MailA2aMessage::parse(&out, &limits).unwrap();
                assert!(parsed.check(&ValidationContext::default()).is_empty());
                parsed
            })
        });
        g.bench_function(BenchmarkId::from_parameter("mail-parser"), |b| {
            b.iter(|| {
                mail_parser::MessageParser::default()
                    .parse(black_box(&bytes[..]))
                    .unwrap()
                    .parts
                    .len()
            })
        });
        g.finish();
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    common::print_ratios(&[
        ("envelope_2KiB", "mailseal", "mail-parser"),
        ("envelope_1MiB-attachment", "mailseal", "mail-parser"),
        ("envelope_1MiB-json", "mailseal", "mail-parser"),
    ]);
}
