//! What the operator reads before the offline key signs: the signer, the time and
//! every value the signed entity carries that a person acts on, in plain words (the
//! A2A text and data parts, files, the x402 amounts and pay-to address, expiry), all
//! taken from the entity itself, never from what the request says about it.

use serde_json::Value;

use super::request::{short_fingerprint, SigningRequest};
use crate::message::MailA2aMessage;

/// Labelled lines, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// (label, value) pairs; a value may span lines.
    pub lines: Vec<(String, String)>,
}

/// The x402 members a payer acts on.
const PAYMENT_KEYS: [&str; 9] = [
    "scheme",
    "network",
    "amount",
    "maxAmountRequired",
    "value",
    "asset",
    "payTo",
    "to",
    "from",
];

fn walk_parts(v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(parts)) = m.get("parts") {
                for p in parts {
                    if let Some(text) = p.get("text").and_then(Value::as_str) {
                        out.push(("text part".into(), text.to_string()));
                    } else if let Some(data) = p.get("data") {
                        out.push(("data part".into(), data.to_string()));
                    } else if let Some(file) = p.get("file").or_else(|| p.get("url")) {
                        out.push(("file part".into(), file.to_string()));
                    } else {
                        out.push(("other part".into(), p.to_string()));
                    }
                }
            }
            for (k, child) in m {
                if k != "parts" {
                    walk_parts(child, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| walk_parts(c, out)),
        _ => {}
    }
}

fn walk_payment(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let here = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if PAYMENT_KEYS.contains(&k.as_str()) && !child.is_object() && !child.is_array() {
                    let shown = child
                        .as_str()
                        .map_or_else(|| child.to_string(), str::to_string);
                    out.push((format!("x402 {here}"), shown));
                } else {
                    walk_payment(child, &here, out);
                }
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                walk_payment(c, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

impl Summary {
    pub(super) fn of(request: &SigningRequest, fingerprint: &str, msg: &MailA2aMessage) -> Summary {
        let mut lines: Vec<(String, String)> = Vec::new();
        let mut push = |k: &str, v: String| lines.push((k.to_string(), v));
        push("request", short_fingerprint(fingerprint));
        push("profile", request.profile.to_string());
        push(
            "signer",
            format!("{} (key {})", request.signer_address, request.signer),
        );
        push(
            "signing time",
            request
                .signing_time
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        );
        let c = &request.covers;
        push("from", c.from.clone());
        push("to", c.to.join(", "));
        if !c.cc.is_empty() {
            push("cc", c.cc.join(", "));
        }
        if let Some(s) = &c.subject {
            push("subject", s.clone());
        }
        push("date", c.date.clone());
        push("message-id", c.message_id.clone());
        if let Some(r) = &c.in_reply_to {
            push("in reply to", r.clone());
        }
        push("kind", c.kind.clone());
        push("operation", c.operation.clone());
        push(
            "expires",
            c.expires_at.clone().unwrap_or_else(|| "never".into()),
        );
        let env = msg.envelope();
        let mut parts = Vec::new();
        if let Some(payload) = env.payload_as_read() {
            walk_parts(&payload, &mut parts);
        }
        if let Some(payment) = env.value("payment") {
            let kind = payment
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("(none)");
            parts.push(("x402 step".into(), kind.to_string()));
            if let Some(object) = payment.get("object") {
                walk_payment(object, "", &mut parts);
            }
        }
        lines.extend(parts);
        for a in &msg.attachments {
            lines.push((
                "attachment".into(),
                format!(
                    "cid:{} {} ({} bytes)",
                    a.content_id,
                    a.content_type,
                    a.data.len()
                ),
            ));
        }
        if let Some(text) = &msg.text {
            lines.push(("mail text".into(), text.trim_end().to_string()));
        }
        Summary { lines }
    }
}

/// Unicode format characters that change how the text around them reads.
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{061c}')
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let width = self.lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in &self.lines {
            // Control characters and the invisible ones that reorder or hide text
            // (bidirectional overrides, zero-width marks) are shown escaped: a value
            // cannot rewrite the screen or make an address or amount read otherwise.
            let v: String = v
                .chars()
                .flat_map(|c| {
                    if (c.is_control() && c != '\n') || invisible(c) {
                        c.escape_default().collect::<Vec<_>>()
                    } else {
                        vec![c]
                    }
                })
                .collect();
            let mut first = true;
            for line in v.split('\n') {
                if first {
                    writeln!(f, "{k:>width$}: {line}")?;
                    first = false;
                } else {
                    // A value's further lines are marked, so text inside a value
                    // cannot pass for a line of the summary ("operation: ...").
                    writeln!(f, "{:>width$} | {line}", "")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Summary;

    #[test]
    fn fail_a_value_that_would_rewrite_the_screen_or_reorder_itself_is_escaped() {
        let s = Summary {
            lines: vec![
                ("operation".into(), "message/send".into()),
                ("text part".into(), "hello\noperation: tasks/cancel".into()),
                ("text part".into(), "pay \u{1b}[2Jtoday".into()),
                ("x402 accepted.payTo".into(), "0xabc\u{202e}fed0".into()),
                ("mail text".into(), "two\nlines\u{200b}".into()),
            ],
        };
        let shown = s.to_string();
        assert!(
            !shown.contains('\u{1b}') && shown.contains("\\u{1b}[2J"),
            "{shown}"
        );
        assert!(
            !shown.contains('\u{202e}') && shown.contains("\\u{202e}"),
            "{shown}"
        );
        assert!(!shown.contains('\u{200b}'), "{shown}");
        // An injected line shows as a continuation, not as a label of its own.
        let labels: Vec<&str> = shown
            .lines()
            .filter_map(|l| l.split_once(": ").map(|(k, _)| k.trim()))
            .filter(|k| *k == "operation")
            .collect();
        assert_eq!(labels.len(), 1, "{shown}");
        assert!(
            shown.contains("two\n") && shown.contains("lines"),
            "{shown}"
        );
    }
}
