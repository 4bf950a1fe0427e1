//! The steps of the x402 v2 flow (MailA2A section 8), each built from the message it
//! answers, as `mailseal compose` writes them. The x402 objects are carried exactly
//! as given (no member added, renamed or reordered); what the binding adds is the
//! wrapper `{"kind": ..., "x402Version": 2, "object": ...}` and the threading.
//!
//! 1. [`required_reply`]: the agent's `PaymentRequiredError` to a request.
//! 2. [`paid_retry`]: the client's retry of that request: the same operation,
//!    payload, idempotency key and correlation, a new `messageId`,
//!    `serviceParameters.retry` one more, and the `PaymentPayload`.
//! 3. [`with_settlement`]: the agent's response (or event) carrying the
//!    `SettlementResponse`.

use crate::envelope::{Envelope, EnvelopeError, Kind, PaymentKind};
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::message::{mid_url, Headers, MailA2aMessage};

/// Why a payment step could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PaymentStepError {
    /// The x402 object is not one strict JSON object.
    #[error("the x402 {what} is not a JSON object: {reason}")]
    Object {
        /// Which object.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The message answered is not what this step answers (a request for steps 1
    /// and 2, a response or event for step 3), or lacks what the step copies.
    #[error("{0}")]
    WrongMessage(String),
    /// `PaymentRequired.resource.url` is a `mid:` URL of another message than the
    /// request.
    #[error("PaymentRequired.resource.url is {found}, but the request is {expected}")]
    ResourceMismatch {
        /// The request's `mid:` URL.
        expected: String,
        /// What the object names.
        found: String,
    },
    /// The envelope could not take the field.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
}

impl Classify for PaymentStepError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InvalidParamsError
    }
    fn kind(&self) -> ErrorKind {
        ErrorKind::Malformed
    }
}

/// The wrapper around `object` (its bytes kept, outer white space aside).
fn wrapper(
    kind: PaymentKind,
    what: &'static str,
    object: &[u8],
) -> Result<String, PaymentStepError> {
    let text = std::str::from_utf8(object)
        .map_err(|_| PaymentStepError::Object {
            what,
            reason: "not UTF-8".into(),
        })?
        .trim();
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => {
            return Err(PaymentStepError::Object {
                what,
                reason: "not an object".into(),
            })
        }
        Err(e) => {
            return Err(PaymentStepError::Object {
                what,
                reason: e.to_string(),
            })
        }
    }
    Ok(format!(
        r#"{{"kind":"{}","x402Version":2,"object":{text}}}"#,
        kind.as_str()
    ))
}

fn new_message_id() -> String {
    format!("urn:uuid:{}", uuid::Uuid::new_v4())
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc())
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The request's From address.
fn sender_of(request: &MailA2aMessage) -> Result<String, PaymentStepError> {
    request
        .headers
        .from
        .as_ref()
        .map(|m| m.address.clone())
        .ok_or_else(|| PaymentStepError::WrongMessage("the request has no From".into()))
}

fn request_of(m: &MailA2aMessage, step: &str) -> Result<(), PaymentStepError> {
    if m.envelope().kind() != Some(Kind::Request) {
        return Err(PaymentStepError::WrongMessage(format!(
            "{step} answers a request; this message is a {}",
            m.envelope()
                .kind()
                .map_or("message without kind", |k| k.as_str())
        )));
    }
    Ok(())
}

/// Step 1: the agent's `PaymentRequiredError` reply to `request`, from its first
/// recipient to its sender, in its thread, carrying `payment_required` (an x402
/// `PaymentRequired`). A `mid:` resource URL must name the request.
pub fn required_reply(
    request: &MailA2aMessage,
    payment_required: &[u8],
) -> Result<MailA2aMessage, PaymentStepError> {
    request_of(request, "a PaymentRequired reply")?;
    let req = request.envelope();
    let payment = wrapper(PaymentKind::Required, "PaymentRequired", payment_required)?;
    if let Some(id) = &request.headers.message_id {
        let object: serde_json::Value =
            serde_json::from_slice(payment_required).unwrap_or_default();
        if let Some(url) = object
            .pointer("/resource/url")
            .and_then(|u| u.as_str())
            .filter(|u| u.starts_with("mid:"))
        {
            let expected = mid_url(id);
            if url != expected {
                return Err(PaymentStepError::ResourceMismatch {
                    expected,
                    found: url.to_string(),
                });
            }
        }
    }
    let mut env = Envelope::new(
        Kind::Error,
        req.operation()
            .ok_or_else(|| PaymentStepError::WrongMessage("the request has no operation".into()))?,
        &new_message_id(),
    );
    if let Some(v) = req.value("a2aVersion") {
        env.set("a2aVersion", &v);
    }
    let correlation = req
        .value("correlationId")
        .ok_or_else(|| PaymentStepError::WrongMessage("the request has no correlationId".into()))?;
    env.set("correlationId", &correlation);
    env.set("sequence", &1);
    env.set("final", &false);
    env.set("createdAt", &now_rfc3339());
    env.set_raw("payload", "{}")?;
    env.set_raw(
        "error",
        r#"{"type":"PaymentRequiredError","message":"Payment is required for this request."}"#,
    )?;
    env.set_raw("payment", &payment)?;
    let from = request
        .headers
        .to
        .first()
        .map(|m| m.address.clone())
        .ok_or_else(|| PaymentStepError::WrongMessage("the request has no recipient".into()))?;
    let to = sender_of(request)?;
    let mut reply = MailA2aMessage::new(&from, &[to.as_str()], env);
    reply.in_reply_to(&request.headers);
    reply.headers.subject = Some("A2A error: payment required".into());
    Ok(reply)
}

/// Step 2: the client's retry of `request` with `payment_payload` (an x402
/// `PaymentPayload`): the same parties, operation, payload, attachments, idempotency
/// key and correlation; a new `messageId`; `serviceParameters.retry` one more than
/// the request's. Threaded after `required` (the agent's reply) when given.
pub fn paid_retry(
    request: &MailA2aMessage,
    required: Option<&Headers>,
    payment_payload: &[u8],
) -> Result<MailA2aMessage, PaymentStepError> {
    request_of(request, "a paid retry")?;
    let payment = wrapper(PaymentKind::Payload, "PaymentPayload", payment_payload)?;
    let mut env = request.envelope().clone();
    if env.value("idempotencyKey").is_none() {
        return Err(PaymentStepError::WrongMessage(
            "the request has no idempotencyKey: a retry must repeat it".into(),
        ));
    }
    env.set("messageId", &new_message_id());
    let mut params = match env.value("serviceParameters") {
        Some(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let retry = params
        .get("retry")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
        + 1;
    params.insert("retry".into(), retry.into());
    env.set("serviceParameters", &params);
    if env.value("createdAt").is_some() {
        env.set("createdAt", &now_rfc3339());
    }
    env.set_raw("payment", &payment)?;
    let from = sender_of(request)?;
    let to: Vec<&str> = request
        .headers
        .to
        .iter()
        .map(|m| m.address.as_str())
        .collect();
    let mut retry_msg = MailA2aMessage::new(&from, &to, env);
    retry_msg.headers.cc = request.headers.cc.clone();
    retry_msg.headers.subject = request.headers.subject.clone();
    retry_msg.text = request.text.clone();
    retry_msg.attachments = request.attachments.clone();
    // The retry continues the thread: after the PaymentRequired reply when known.
    let mut refs = request.headers.references.clone();
    refs.extend(request.headers.message_id.clone());
    if let Some(r) = required.and_then(|h| h.message_id.clone()) {
        refs.push(r.clone());
        retry_msg.headers.in_reply_to = Some(r);
    }
    retry_msg.headers.references = refs;
    Ok(retry_msg)
}

/// Step 3: `response` (an envelope of kind `response` or `event`) with
/// `settlement` (an x402 `SettlementResponse`, which has no `x402Version` of its own).
pub fn with_settlement(response: &mut Envelope, settlement: &[u8]) -> Result<(), PaymentStepError> {
    if !matches!(response.kind(), Some(Kind::Response | Kind::Event)) {
        return Err(PaymentStepError::WrongMessage(
            "a SettlementResponse goes on a response or event".into(),
        ));
    }
    let payment = wrapper(PaymentKind::Response, "SettlementResponse", settlement)?;
    response.set_raw("payment", &payment)?;
    Ok(())
}
