//! Shared by the benches: after criterion has run, read its estimates and print each
//! comparison as a ratio (ours / peer), so every bench reports against its peer.
#![allow(dead_code)]

use std::path::PathBuf;

fn estimate_ns(group: &str, id: &str) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")));
    let path = dir
        .join("criterion")
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.2} µs", ns / 1e3)
    }
}

/// Prints `group: ours X, peer Y, ratio R` for each (group, ours, peer).
pub fn print_ratios(rows: &[(&str, &str, &str)]) {
    println!("\nratios (median, ours / peer):");
    for (group, ours, peer) in rows {
        match (estimate_ns(group, ours), estimate_ns(group, peer)) {
            (Some(a), Some(b)) => println!(
                "  {group}: {ours} {} vs {peer} {} -> {:.2}x",
                human(a),
                human(b),
                a / b
            ),
            _ => println!("  {group}: not measured in this run"),
        }
    }
}

/// A `message/send` request from `from` to `to` whose text part is `text_len` bytes of
/// lorem ipsum.
pub fn message(from: &str, to: &str, text_len: usize) -> mailseal::message::MailA2aMessage {
    use mailseal::envelope::{Envelope, Kind, Operation};
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "bench-1");
    env.set("correlationId", "corr-1");
    env.set("idempotencyKey", "idem-1");
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(text_len)
        .collect();
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}),
    );
    mailseal::message::MailA2aMessage::new(from, &[to], env)
}
