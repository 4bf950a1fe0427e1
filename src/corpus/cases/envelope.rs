//! The binding's rules: the envelope's fields, the protected header fields and the
//! parts around the envelope.

use super::*;

pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    fields(b)?;
    protected_headers(b)
}

/// The binding's envelope rules, each broken once inside a valid signature.
fn fields(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    // (name, base, patch, code)
    let table: Vec<(&str, &str, Value, &'static str)> = vec![
        (
            "binding-version-2",
            "request",
            json!({"bindingVersion": "2.0"}),
            "validation.unsupported-binding-version",
        ),
        (
            "a2a-version-absent",
            "request",
            json!({"a2aVersion": null}),
            "validation.required",
        ),
        (
            "a2a-version-0.3",
            "request",
            json!({"a2aVersion": "0.3.0"}),
            "validation.unsupported-a2a-version",
        ),
        (
            "unknown-kind",
            "request",
            json!({"kind": "notification"}),
            "validation.unknown-kind",
        ),
        (
            "unknown-operation",
            "request",
            json!({"operation": "tasks/delete"}),
            "validation.unknown-operation",
        ),
        (
            "numeric-message-id",
            "request",
            json!({"messageId": 42}),
            "validation.must-be-string",
        ),
        (
            "created-at-not-a-date",
            "request",
            json!({"createdAt": "yesterday"}),
            "validation.must-be-timestamp",
        ),
        (
            "expires-before-created",
            "request",
            json!({"createdAt": crate::replay::rfc3339(crate::corpus::NOW - 60), "expiresAt": crate::replay::rfc3339(crate::corpus::NOW - 120)}),
            "validation.expires-before-created",
        ),
        (
            "payload-a-list",
            "tasks-get",
            json!({"payload": []}),
            "validation.must-be-map",
        ),
        (
            "v03-text-part",
            "request",
            json!({"payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "hi"}]}}}),
            "validation.invalid-payload",
        ),
        (
            "v03-role",
            "request",
            json!({"payload": {"message": {"messageId": "m", "role": "user", "parts": [{"text": "hi"}]}}}),
            "validation.invalid-payload",
        ),
        (
            "sequence-negative",
            "request",
            json!({"sequence": -1}),
            "validation.must-be-natural",
        ),
        (
            "final-as-string",
            "request",
            json!({"final": "no"}),
            "validation.must-be-boolean",
        ),
        (
            "request-not-at-zero",
            "request",
            json!({"sequence": 1}),
            "validation.request-must-start-at-zero",
        ),
        (
            "reply-at-zero",
            "response",
            json!({"sequence": 0}),
            "validation.reply-must-follow-request",
        ),
        (
            "final-request",
            "request",
            json!({"final": true}),
            "validation.request-must-not-be-final",
        ),
        (
            "event-without-correlation",
            "event",
            json!({"correlationId": null}),
            "validation.required-for-reply",
        ),
        (
            "canceled-task-not-final",
            "cancel-response",
            json!({"final": false}),
            "validation.terminal-state-must-be-final",
        ),
        (
            "cancel-without-idempotency-key",
            "tasks-get",
            json!({"operation": "tasks/cancel"}),
            "validation.required-for-effectful-operation",
        ),
        (
            "extensions-not-a-list",
            "request",
            json!({"serviceParameters": {"A2A-Extensions": "https://example.com/ext"}}),
            "validation.must-be-uri-list",
        ),
        (
            "a2a-version-parameter-disagrees",
            "request",
            json!({"serviceParameters": {"A2A-Version": "0.3"}}),
            "validation.a2a-version-mismatch",
        ),
        (
            "error-on-a-response",
            "response",
            json!({"error": {"type": "TaskNotFoundError"}}),
            "validation.error-only-on-error-kind",
        ),
        (
            "unknown-error-type",
            "error",
            json!({"error": {"type": "TeapotError"}}),
            "validation.unknown-error-type",
        ),
        (
            "error-code-of-another-type",
            "error",
            json!({"error": {"type": "TaskNotFoundError", "code": -32002}}),
            "validation.error-code-mismatch",
        ),
        (
            "unknown-payment-kind",
            "request",
            json!({"payment": {"kind": "invoice", "x402Version": 2, "object": {}}}),
            "validation.unknown-payment-kind",
        ),
        (
            "payment-x402-v1",
            "request",
            json!({"payment": {"kind": "payload", "x402Version": 1, "object": {"x402Version": 2}}}),
            "validation.must-be-x402-v2",
        ),
        (
            "payment-required-object-v1",
            "error",
            json!({"error": {"type": "PaymentRequiredError"}, "payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 1, "accepts": []}}}),
            "validation.x402-object-version-mismatch",
        ),
        (
            "payment-required-on-a-request",
            "request",
            json!({"payment": {"kind": "required", "x402Version": 2, "object": {"x402Version": 2, "accepts": []}}}),
            "validation.payment-kind-mismatch",
        ),
        (
            "group-outside-mls",
            "request",
            json!({"group": {"id": "Z3JvdXA", "epoch": 1, "generation": 0}}),
            "validation.group-requires-mls",
        ),
    ];
    for (i, (name, base, patch, code)) in table.into_iter().enumerate() {
        // Every rule under two profiles, the profiles taken in turn.
        for mode in [MODES[i % MODES.len()], MODES[(i + 2) % MODES.len()]] {
            let base = match base {
                "request" => b.request("message/send"),
                "tasks-get" => b.request("tasks/get"),
                "response" => b.reply("message/send", "response"),
                "cancel-response" => b.reply("tasks/cancel", "response"),
                "event" => b.reply("message/stream", "event"),
                _ => b.reply("tasks/get", "error"),
            };
            let env = with(base, patch.clone());
            let d = b.draft(mode, &env)?;
            b.add(
                name,
                Rule::Refuse(code),
                &format!("the envelope breaks {code}"),
                &d,
                b.alice(mode),
                vec![],
                Crypto::Pass,
            )?;
        }
    }
    Ok(())
}

/// The binding's rules on the protected header fields and the parts around the
/// envelope.
fn protected_headers(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    for (i, mode) in MODES.into_iter().enumerate() {
        // No Date among the protected header fields.
        let env = b.request("tasks/get");
        let mut d = b.draft(mode, &env)?;
        d.mutate = Some(|e| {
            let Some(at) = memchr::memmem::find(&e, b"Date: ") else {
                return e;
            };
            let end = memchr::memmem::find(&e[at..], b"\r\n").map_or(e.len(), |i| at + i + 2);
            [&e[..at], &e[end..]].concat()
        });
        b.add(
            "no-date",
            Rule::Refuse("validation.invalid-header"),
            "the protected header fields have no Date",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Pass,
        )?;
        // A reply outside any thread.
        let env = b.reply("message/send", "response");
        let mut d = b.draft(mode, &env)?;
        d.msg.headers.in_reply_to = None;
        d.msg.headers.references.clear();
        b.add(
            "reply-without-in-reply-to",
            Rule::Refuse("validation.reply-without-in-reply-to"),
            "a response without In-Reply-To",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Pass,
        )?;
        // The protected Mail-A2A-Kind says response; the envelope says request.
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        d.msg.headers.hints.kind = Some("response".into());
        b.add(
            "hint-disagrees-with-envelope",
            Rule::Refuse("validation.hint-mismatch"),
            "the protected Mail-A2A-Kind disagrees with the envelope's kind",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Pass,
        )?;
        // A cid: reference without its part, and one whose part has another type.
        let env = with(
            b.request("message/send"),
            json!({"payload": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [
                {"text": "Summarize the attached report."},
                {"url": "cid:report-1@example.net", "mediaType": "text/csv", "filename": "report.csv"}
            ]}}}),
        );
        let d = b.draft(mode, &env)?;
        b.add(
            "cid-without-its-part",
            Rule::Refuse("validation.invalid-content-id"),
            "a cid: reference to a part the message does not carry",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Pass,
        )?;
        let mut d = b.draft(mode, &env)?;
        d.msg.attachments.push(crate::message::Attachment {
            content_id: "report-1@example.net".into(),
            content_type: "application/pdf".into(),
            filename: Some("report.csv".into()),
            data: b"quarter,revenue\nQ1,100\n".to_vec(),
        });
        b.add(
            "cid-part-of-another-type",
            Rule::Refuse("validation.media-type-mismatch"),
            "the cid: part is application/pdf, the payload says text/csv",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Pass,
        )?;
        // A settlement that carries an x402Version of its own.
        if i < 2 {
            let env = with(
                b.reply("message/send", "response"),
                json!({"payment": {"kind": "response", "x402Version": 2, "object": {"success": true, "x402Version": 2}}}),
            );
            let d = b.draft(mode, &env)?;
            b.add(
                "settlement-with-x402-version",
                Rule::Refuse("validation.settlement-with-x402-version"),
                "a payment settlement with an x402Version inside its object",
                &d,
                b.alice(mode),
                vec![],
                Crypto::Pass,
            )?;
        }
    }
    Ok(())
}
