//! Where the time of compose + parse + validate goes (a development aid).
use mailseal::envelope::{Envelope, Kind, Operation, ValidationContext};
use mailseal::message::{Attachment, Limits, MailA2aMessage};
use std::time::Instant;

fn time<T>(label: &str, n: u32, mut f: impl FnMut() -> T) {
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(f());
    }
    println!("{label:<28} {:>10.1} µs", t.elapsed().as_secs_f64() * 1e6 / n as f64);
}

fn main() {
    for (name, text_len, att) in [("2KiB", 1500usize, 0usize), ("1MiB-att", 1500, 1 << 20), ("1MiB-json", 1 << 20, 0)] {
        println!("== {name}");
        let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "bench-1");
        env.set("correlationId", "corr-1");
        env.set("idempotencyKey", "idem-1");
        let text: String = "lorem ipsum dolor sit amet ".chars().cycle().take(text_len).collect();
        let mut parts = vec![serde_json::json!({"text": text})];
        if att > 0 {
            parts.push(serde_json::json!({"url": "cid:d@x", "mediaType": "application/octet-stream"}));
        }
        env.set("payload", &serde_json::json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": parts}}));
        let mut m = MailA2aMessage::new("c@example.net", &["b@example.com"], env);
        if att > 0 {
            m.attachments.push(Attachment { content_id: "d@x".into(), content_type: "application/octet-stream".into(), filename: None, data: vec![7; att] });
        }
        let n = if att > 0 || text_len > 10000 { 50 } else { 5000 };
        let bytes = m.to_rfc5322().unwrap();
        let limits = Limits::default();
        time("compose", n, || m.to_rfc5322().unwrap());
        time("mail-parser parse", n, || mail_parser::MessageParser::default().parse(&bytes[..]).unwrap().parts.len());
        time("MailA2aMessage::parse", n, || MailA2aMessage::parse(&bytes, &limits).unwrap());
        let parsed = MailA2aMessage::parse(&bytes, &limits).unwrap();
        time("check", n, || parsed.check(&ValidationContext::default()));
        let json = parsed.envelope_bytes().to_vec();
        time("Envelope::from_json", n, || Envelope::from_json(&json).unwrap());
        time("serde_json::Value", n, || serde_json::from_slice::<serde_json::Value>(&json).unwrap());
        time("structure", n, || mailseal::message::structure(&bytes, &limits).unwrap());
    }
}
