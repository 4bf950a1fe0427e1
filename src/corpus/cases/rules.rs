//! The receiver's rules, which need what Bob received before.

use super::*;

/// The receiver's rules, which need what Bob received before.
pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    for mode in MODES {
        let alice = b.alice(mode);
        // A redelivery.
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let first = b.seal("duplicate", &d, alice)?;
        let again = b.seal("duplicate", &d, alice)?;
        b.push(
            format!("{}--duplicate--redelivered", mode.name()),
            Rule::Duplicate,
            "the same request delivered twice",
            mode,
            again,
            vec![first],
            Crypto::Pass,
        )?;

        // The same messageId with other content.
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let first = b.seal("conflict", &d, alice)?;
        let mut changed = env.clone();
        changed["payload"]["message"]["parts"][0]["text"] = json!("Delete every report.");
        let d = b.draft(mode, &changed)?;
        b.add(
            "conflict--same-message-id-other-content",
            Rule::Refuse("rules.conflict"),
            "a second message with the first one's messageId and other content",
            &d,
            alice,
            vec![first],
            Crypto::Pass,
        )?;

        // An idempotency key reused for another operation.
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let first = b.seal("idempotency", &d, alice)?;
        let mut other = b.request("tasks/cancel");
        other["idempotencyKey"] = env["idempotencyKey"].clone();
        let d = b.draft(mode, &other)?;
        b.add(
            "idempotency-key-reused",
            Rule::Refuse("rules.idempotency-conflict"),
            "a tasks/cancel reusing a message/send's idempotency key",
            &d,
            alice,
            vec![first],
            Crypto::Pass,
        )?;

        // Expired, and from the future.
        let env = with(
            b.request("message/send"),
            json!({"createdAt": crate::replay::rfc3339(crate::corpus::NOW - 7200), "expiresAt": crate::replay::rfc3339(crate::corpus::NOW - 3600)}),
        );
        let d = b.draft(mode, &env)?;
        b.add(
            "expired",
            Rule::Refuse("rules.expired"),
            "a request that expired an hour ago",
            &d,
            alice,
            vec![],
            Crypto::Pass,
        )?;
        let env = with(
            b.request("message/send"),
            json!({"createdAt": crate::replay::rfc3339(crate::corpus::NOW + 86_400), "expiresAt": crate::replay::rfc3339(crate::corpus::NOW + 2 * 86_400)}),
        );
        let d = b.draft(mode, &env)?;
        b.add(
            "from-the-future",
            Rule::Refuse("rules.from-the-future"),
            "a request created tomorrow",
            &d,
            alice,
            vec![],
            Crypto::Pass,
        )?;

        // Streams: an event after a gap waits; one that reuses a sequence number, one
        // after the final event, and one far ahead are refused.
        let corr = b.ids.id("stream");
        let event = |b: &mut Builder<'_>, seq: u64, last: bool, op: &str| {
            let mut e = b.reply(op, "event");
            e["correlationId"] = json!(corr);
            e["sequence"] = json!(seq);
            e["final"] = json!(last);
            if last {
                e["payload"] = json!({"statusUpdate": {"taskId": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}}});
            }
            e
        };
        let e1 = event(b, 1, false, "message/stream");
        let d1 = b.draft(mode, &e1)?;
        let first = b.seal("stream", &d1, alice)?;
        let e3 = event(b, 3, false, "message/stream");
        let d = b.draft(mode, &e3)?;
        b.add(
            "stream--gap",
            Rule::Held,
            "event 3 of a stream after event 1: it waits for event 2",
            &d,
            alice,
            vec![first.clone()],
            Crypto::Pass,
        )?;
        let e1b = event(b, 1, false, "message/stream");
        let d = b.draft(mode, &e1b)?;
        b.add(
            "stream--sequence-reused",
            Rule::Refuse("rules.sequence-reused"),
            "a second event 1 of a stream with another messageId",
            &d,
            alice,
            vec![first.clone()],
            Crypto::Pass,
        )?;
        let e2 = event(b, 2, false, "message/stream");
        let d = b.draft(mode, &e2)?;
        b.add(
            "stream--in-order",
            Rule::Accept,
            "event 2 of a stream after event 1",
            &d,
            alice,
            vec![first.clone()],
            Crypto::Pass,
        )?;
        let far = event(b, 5000, false, "message/stream");
        let d = b.draft(mode, &far)?;
        b.add(
            "stream--too-far-ahead",
            Rule::Refuse("rules.too-far-ahead"),
            "event 5000 of a stream after event 1",
            &d,
            alice,
            vec![first.clone()],
            Crypto::Pass,
        )?;
        let other = event(b, 2, false, "tasks/subscribe");
        let d = b.draft(mode, &other)?;
        b.add(
            "stream--other-operation",
            Rule::Refuse("rules.stream-mismatch"),
            "a tasks/subscribe event on a message/stream stream",
            &d,
            alice,
            vec![first.clone()],
            Crypto::Pass,
        )?;
        let last = event(b, 2, true, "message/stream");
        let dl = b.draft(mode, &last)?;
        let last = b.seal("stream", &dl, alice)?;
        let after = event(b, 3, false, "message/stream");
        let d = b.draft(mode, &after)?;
        b.add(
            "stream--after-final",
            Rule::Refuse("rules.after-final"),
            "event 3 after the final event 2",
            &d,
            alice,
            vec![first, last],
            Crypto::Pass,
        )?;

        // A payment nobody asked for.
        let env = with(
            b.request("message/send"),
            json!({"payment": {"kind": "payload", "x402Version": 2, "object": {"x402Version": 2, "payload": {"signature": "0x00"}}}}),
        );
        let d = b.draft(mode, &env)?;
        b.add(
            "unsolicited-payment",
            Rule::Refuse("rules.unsolicited-payment"),
            "a payment for an exchange that asked for none",
            &d,
            alice,
            vec![],
            Crypto::Pass,
        )?;
    }
    unsolicited(b)?;
    buffer_full(b)
}

/// Answers to no request of the receiver's (THREATS "Unsolicited answers"): none was
/// sent in the exchange, it went to another agent, it expired, or a settlement
/// answers a request that paid nothing. One profile: the rules lie above it.
fn unsolicited(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let mode = Mode::SmimeSigned;
    let alice = b.alice(mode);
    b.unsolicited = true;
    let env = b.reply("message/send", "response");
    let d = b.draft(mode, &env);
    b.unsolicited = false;
    b.add(
        "unsolicited--no-request",
        Rule::Refuse("rules.unsolicited"),
        "a final response in an exchange the receiver never started",
        &d?,
        alice,
        vec![],
        Crypto::Pass,
    )?;
    let cases: [(&str, &str, &str, Value); 3] = [
        (
            "unsolicited--asked-another-agent",
            "rules.unsolicited",
            "a response to a request that went to carol@smime.example, not to its sender",
            json!({}),
        ),
        (
            "unsolicited--request-expired",
            "rules.answer-too-late",
            "a response to a request that expired an hour ago",
            json!({}),
        ),
        (
            "unsolicited--settlement-unpaid",
            "rules.unsolicited-settlement",
            "an x402 SettlementResponse answering a request that carried no PaymentPayload",
            json!({"payment": {"kind": "response", "x402Version": 2, "object": {"success": true,
                "transaction": "0x1234567890abcdef", "network": "eip155:8453",
                "payer": "0x857b06519E91e3A54538791bDbb0E22373e36b66"}}}),
        ),
    ];
    for (name, code, description, patch) in cases {
        let env = with(b.reply("message/send", "response"), patch);
        let d = b.draft(mode, &env)?;
        if let Some(sent) = b.sent.last_mut() {
            match code {
                "rules.unsolicited" => sent.to = vec!["carol@smime.example".into()],
                "rules.answer-too-late" => {
                    sent.expires_at = crate::replay::rfc3339(crate::corpus::NOW - 3600)
                }
                _ => sent.paid = false,
            }
        }
        b.add(
            name,
            Rule::Refuse(code),
            description,
            &d,
            alice,
            vec![],
            Crypto::Pass,
        )?;
    }
    Ok(())
}

/// A sender's held events fill its buffer: event 1 of a stream, then events 3 to 258
/// (each held for event 2), then event 259. One profile: the rule is the same under
/// each, and the case holds 257 prior messages.
fn buffer_full(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let mode = Mode::Jws;
    let alice = b.alice(mode);
    let held = crate::replay::ReceiverPolicy::default().max_pending_per_sender;
    let corr = b.ids.id("stream");
    let mut prior = Vec::new();
    for seq in std::iter::once(1).chain(3..3 + held) {
        let mut e = b.reply("message/stream", "event");
        e["correlationId"] = json!(corr);
        e["sequence"] = json!(seq);
        let d = b.draft(mode, &e)?;
        prior.push(b.seal("buffer-full", &d, alice)?);
    }
    let mut e = b.reply("message/stream", "event");
    e["correlationId"] = json!(corr);
    e["sequence"] = json!(3 + held);
    let d = b.draft(mode, &e)?;
    b.add(
        "stream--buffer-full",
        Rule::Refuse("rules.buffer-full"),
        "one more event after 256 held for the same sender, all waiting for event 2",
        &d,
        alice,
        prior,
        Crypto::Pass,
    )
}
