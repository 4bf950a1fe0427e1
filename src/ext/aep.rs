//! AEP, the Agent Email Protocol draft (v0.2): typed agent mail with `X-AEP-Type`
//! (`message`, `ping`/`pong`, `capability.query`/`capability.result`,
//! `task.submit`/`task.result`, `error`, or a sender's own type),
//! `X-AEP-Conversation-Id`, `In-Reply-To` threading and a JSON (or text) body.
//!
//! [`AepMessage::to_maila2a`] maps an AEP message to a MailA2A message (and
//! [`AepMessage::from_maila2a`] back, without loss), so an AEP agent's mail can be
//! sealed end to end under any profile, which AEP itself leaves to the payload layer:
//! - every AEP message is an A2A `message/send`: a request, or (for `pong`, `error` and
//!   any `*.result`) its reply;
//! - the conversation is the A2A `contextId`; the correlation of a request is its own
//!   Message-ID, of a reply the Message-ID it answers (`In-Reply-To`);
//! - the JSON body is a `data` part (`mediaType: application/json`), a text body a
//!   `text` part; an `error`'s body is `error.data`;
//! - the AEP type, the subject, the body's form and the other `X-AEP-*` headers (the
//!   server's transport markers) travel in the A2A message's `metadata.aep`.

use serde_json::{json, Map, Value};

use crate::envelope::{Envelope, Kind, Operation};
use crate::message::{Headers, Limits, MailA2aMessage, Mailbox, MessageError};

/// The body of an AEP message.
#[derive(Clone, Debug, PartialEq)]
pub enum AepBody {
    /// `X-AEP-Content-Type: application/json`: a JSON payload.
    Json(Value),
    /// A plain-text body.
    Text(String),
    /// No body (control messages such as `ping`).
    Empty,
}

/// An AEP message: the mail headers AEP uses and its body.
#[derive(Clone, Debug, PartialEq)]
pub struct AepMessage {
    /// `From`.
    pub from: String,
    /// `To`.
    pub to: Vec<String>,
    /// `Cc`.
    pub cc: Vec<String>,
    /// `Subject`.
    pub subject: Option<String>,
    /// `Message-ID`, without angle brackets.
    pub message_id: String,
    /// `Date` (Unix seconds).
    pub date: Option<i64>,
    /// `In-Reply-To`, without angle brackets.
    pub in_reply_to: Option<String>,
    /// `References`, oldest first.
    pub references: Vec<String>,
    /// `X-AEP-Type` (default `message`).
    pub aep_type: String,
    /// `X-AEP-Conversation-Id`.
    pub conversation_id: Option<String>,
    /// The other `X-AEP-*` headers (lower-case names), in order.
    pub extra: Vec<(String, String)>,
    /// The body.
    pub body: AepBody,
}

/// Why an AEP message could not be read or mapped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AepError {
    /// The mail does not parse.
    #[error(transparent)]
    Mail(#[from] MessageError),
    /// A header AEP needs is missing or unreadable.
    #[error("AEP: {0}")]
    Header(String),
    /// `X-AEP-Content-Type: application/json` with a body that is not JSON.
    #[error("AEP: the body is not the JSON its X-AEP-Content-Type announces")]
    Json,
    /// A reply type without `In-Reply-To`: it answers nothing.
    #[error("AEP: a {0} without In-Reply-To answers nothing")]
    Unthreaded(String),
    /// The MailA2A message did not come from AEP (no `metadata.aep`) or lost parts of
    /// it.
    #[error("not an AEP mapping: {0}")]
    NotAep(String),
}

impl crate::error::Classify for AepError {
    fn a2a_error(&self) -> crate::error::A2aErrorType {
        crate::error::A2aErrorType::InvalidRequestError
    }
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::ErrorKind::Malformed
    }
}

/// Whether an AEP type is a reply (pong, error, `*.result`).
fn is_reply(t: &str) -> bool {
    t == "pong" || t == "error" || t.ends_with(".result")
}

/// Whether `raw` looks like an AEP message (an `X-AEP-Type` header, no MailA2A part).
pub fn is_aep(raw: &[u8]) -> bool {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n"))
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    head.lines().any(|l| l.starts_with("x-aep-type:")) && !head.contains("mail-a2a-binding:")
}

impl AepMessage {
    /// Reads an AEP mail within `limits`. A mail whose headers would not read back the
    /// same once written again (an address that is not an addr-spec, control
    /// characters, an unreadable date) is refused: what maps must map back.
    pub fn parse(raw: &[u8], limits: &Limits) -> Result<AepMessage, AepError> {
        let aep = Self::parse_once(raw, limits)?;
        for a in std::iter::once(&aep.from).chain(&aep.to).chain(&aep.cc) {
            if !Mailbox::new(a).is_valid_addr_spec() {
                return Err(AepError::Header(format!(
                    "{}: not an addr-spec",
                    a.chars().take(80).collect::<String>()
                )));
            }
        }
        let written = aep.to_rfc5322()?;
        match Self::parse_once(&written, limits) {
            Ok(again) if again == aep => Ok(aep),
            _ => Err(AepError::Header(
                "a header that does not read back the same once written".into(),
            )),
        }
    }

    fn parse_once(raw: &[u8], limits: &Limits) -> Result<AepMessage, AepError> {
        if raw.len() > limits.max_message_bytes {
            return Err(MessageError::TooLarge {
                size: raw.len(),
                limit: limits.max_message_bytes,
            }
            .into());
        }
        let outer = crate::message::read_outer(raw, limits)?;
        let h = &outer.headers;
        let from = h
            .from
            .as_ref()
            .map(|m| m.address.clone())
            .ok_or_else(|| AepError::Header("no From".into()))?;
        let message_id = h
            .message_id
            .clone()
            .ok_or_else(|| AepError::Header("no Message-ID".into()))?;
        let fields = crate::message::header_fields(raw, limits)?;
        let mut aep_type = None;
        let mut conversation_id = None;
        let mut content_type = None;
        let mut extra = Vec::new();
        for (name, value) in fields {
            let lower = name.to_ascii_lowercase();
            if !lower.starts_with("x-aep-") {
                continue;
            }
            let seen = match lower.as_str() {
                "x-aep-type" => aep_type.replace(value).is_some(),
                "x-aep-conversation-id" => conversation_id.replace(value).is_some(),
                "x-aep-content-type" => content_type.replace(value).is_some(),
                _ => {
                    extra.push((lower, value));
                    false
                }
            };
            if seen {
                return Err(AepError::Header(format!("{name} appears twice")));
            }
        }
        let aep_type = aep_type.unwrap_or_else(|| "message".into());
        if aep_type.is_empty() || aep_type.len() > 128 {
            return Err(AepError::Header("X-AEP-Type is empty or too long".into()));
        }
        let part = outer
            .single
            .as_ref()
            .ok_or_else(|| AepError::Header("a multipart AEP body is not supported".into()))?;
        let bytes = part.decoded()?;
        let json = content_type
            .as_deref()
            .map(|c| c.trim().eq_ignore_ascii_case("application/json"))
            .unwrap_or(false)
            || part.media_type == "application/json";
        let body = if json {
            AepBody::Json(serde_json::from_slice(&bytes).map_err(|_| AepError::Json)?)
        } else if bytes.iter().all(|b| b.is_ascii_whitespace()) {
            AepBody::Empty
        } else {
            AepBody::Text(
                String::from_utf8(bytes)
                    .map_err(|_| AepError::Header("a text body that is not UTF-8".into()))?,
            )
        };
        Ok(AepMessage {
            from,
            to: h.to.iter().map(|m| m.address.clone()).collect(),
            cc: h.cc.iter().map(|m| m.address.clone()).collect(),
            subject: h.subject.clone(),
            message_id,
            date: h.date.map(|d| d.unix_timestamp()),
            in_reply_to: h.in_reply_to.clone(),
            references: h.references.clone(),
            aep_type,
            conversation_id,
            extra,
            body,
        })
    }

    /// Writes the AEP mail (what an AEP server would deliver).
    pub fn to_rfc5322(&self) -> Result<Vec<u8>, AepError> {
        let mut out = Vec::new();
        let mut headers = self.headers()?;
        let undated = headers.date.is_none();
        if undated {
            headers.date = Some(time::OffsetDateTime::UNIX_EPOCH);
        }
        crate::message::write_header_section(&mut out, &headers, &Default::default())?;
        if undated {
            // The section writer always dates; an undated AEP mail stays undated.
            let text = String::from_utf8_lossy(&out).into_owned();
            if let Some(start) = text.find("\r\nDate: ") {
                let end = text[start + 2..]
                    .find("\r\n")
                    .map_or(text.len(), |e| start + 2 + e);
                out = format!("{}{}", &text[..start], &text[end..]).into_bytes();
            }
        }
        let mut field = |name: &str, value: &str| {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        };
        field("X-AEP-Type", &self.aep_type);
        if let Some(c) = &self.conversation_id {
            field("X-AEP-Conversation-Id", c);
        }
        for (name, value) in &self.extra {
            field(name, value);
        }
        let body = match &self.body {
            AepBody::Json(v) => {
                field("X-AEP-Content-Type", "application/json");
                field("Content-Type", "application/json; charset=utf-8");
                serde_json::to_vec(v).unwrap_or_default()
            }
            AepBody::Text(t) => {
                field("Content-Type", "text/plain; charset=utf-8");
                t.as_bytes().to_vec()
            }
            AepBody::Empty => {
                field("Content-Type", "text/plain; charset=utf-8");
                Vec::new()
            }
        };
        out.extend_from_slice(b"Content-Transfer-Encoding: base64\r\n\r\n");
        crate::message::push_base64_mime(&mut out, &body);
        Ok(out)
    }

    fn headers(&self) -> Result<Headers, AepError> {
        // The names come from the signed envelope's `metadata.aep.headers`, which the
        // sender wrote: only the `X-AEP-*` extension fields AEP reads may be named,
        // never a structural one (From, Reply-To, ...) nor one this writer sets itself,
        // and every name must be an RFC 5322 field name (no line break, no colon).
        for (name, _) in &self.extra {
            let lower = name.to_ascii_lowercase();
            if name.is_empty()
                || !name.bytes().all(|b| (33..=126).contains(&b) && b != b':')
                || !lower.starts_with("x-aep-")
                || lower.len() == "x-aep-".len()
                || matches!(
                    lower.as_str(),
                    "x-aep-type" | "x-aep-conversation-id" | "x-aep-content-type"
                )
            {
                return Err(AepError::Header(format!(
                    "{:?} is not an X-AEP-* extension field name",
                    name.escape_debug().to_string()
                )));
            }
        }
        for v in [&self.aep_type]
            .into_iter()
            .chain(self.conversation_id.iter())
            .chain(self.extra.iter().map(|(_, v)| v))
        {
            if v.contains(['\r', '\n']) {
                return Err(AepError::Header("a header value with a line break".into()));
            }
        }
        Ok(Headers {
            from: Some(Mailbox::new(&self.from)),
            from_count: 1,
            to: self.to.iter().map(|a| Mailbox::new(a)).collect(),
            cc: self.cc.iter().map(|a| Mailbox::new(a)).collect(),
            subject: self.subject.clone(),
            message_id: Some(self.message_id.clone()),
            date: self
                .date
                .and_then(|d| time::OffsetDateTime::from_unix_timestamp(d).ok()),
            in_reply_to: self.in_reply_to.clone(),
            references: self.references.clone(),
            ..Headers::default()
        })
    }

    /// The MailA2A message for this AEP message (see the module documentation).
    pub fn to_maila2a(&self) -> Result<MailA2aMessage, AepError> {
        let reply = is_reply(&self.aep_type);
        let kind = match self.aep_type.as_str() {
            "error" => Kind::Error,
            _ if reply => Kind::Response,
            _ => Kind::Request,
        };
        let correlation = if reply {
            self.in_reply_to
                .clone()
                .ok_or_else(|| AepError::Unthreaded(self.aep_type.clone()))?
        } else {
            self.message_id.clone()
        };
        let mut aep = Map::new();
        aep.insert("type".into(), json!(self.aep_type));
        if let Some(s) = &self.subject {
            aep.insert("subject".into(), json!(s));
        }
        if self.date.is_none() {
            // A MailA2A message is dated; that the AEP one was not is kept here.
            aep.insert("undated".into(), json!(true));
        }
        if !self.extra.is_empty() {
            aep.insert(
                "headers".into(),
                Value::Array(self.extra.iter().map(|(n, v)| json!([n, v])).collect()),
            );
        }
        let part = match &self.body {
            AepBody::Json(v) => json!({"data": v, "mediaType": "application/json"}),
            AepBody::Text(t) => json!({"text": t}),
            AepBody::Empty => {
                aep.insert("body".into(), json!("empty"));
                json!({"text": ""})
            }
        };
        let mut message = json!({
            "messageId": self.message_id,
            "role": if reply { "ROLE_AGENT" } else { "ROLE_USER" },
            "parts": [part],
            "metadata": {"aep": Value::Object(aep)},
        });
        if let Some(c) = &self.conversation_id {
            message["contextId"] = json!(c);
        }
        let mut env = Envelope::new(kind, Operation::MessageSend, &self.message_id);
        env.set("correlationId", &json!(correlation));
        match kind {
            Kind::Request => {
                env.set("idempotencyKey", &json!(self.message_id));
                env.set("payload", &json!({ "message": message }));
            }
            Kind::Response => {
                env.set("sequence", &json!(1));
                env.set("final", &json!(true));
                env.set("payload", &json!({ "message": message }));
            }
            _ => {
                env.set("sequence", &json!(1));
                env.set("final", &json!(true));
                let text = match &self.body {
                    AepBody::Json(v) => v
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("AEP error")
                        .to_string(),
                    AepBody::Text(t) => t.clone(),
                    AepBody::Empty => "AEP error".into(),
                };
                env.set(
                    "error",
                    &json!({"type": "InternalError", "code": -32603, "message": text,
                        "data": {"aep": message}}),
                );
            }
        }
        let mut msg = MailA2aMessage::new(&self.from, &[], env);
        let mut headers = self.headers()?;
        headers.hints = msg.headers.hints.clone();
        headers.mime_version = Some("1.0".into());
        if headers.date.is_none() {
            headers.date = msg.headers.date;
        }
        msg.headers = headers;
        Ok(msg)
    }

    /// The AEP message a MailA2A message made by [`AepMessage::to_maila2a`] came from.
    pub fn from_maila2a(msg: &MailA2aMessage) -> Result<AepMessage, AepError> {
        let env = msg.envelope();
        let v: Value = serde_json::from_slice(msg.envelope_bytes())
            .map_err(|_| AepError::NotAep("the envelope is not JSON".into()))?;
        let message = match env.kind() {
            Some(Kind::Error) => v.pointer("/error/data/aep"),
            _ => v.pointer("/payload/message"),
        }
        .ok_or_else(|| AepError::NotAep("no A2A message".into()))?;
        let aep = message
            .pointer("/metadata/aep")
            .and_then(Value::as_object)
            .ok_or_else(|| AepError::NotAep("no metadata.aep".into()))?;
        let aep_type = aep
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| AepError::NotAep("no metadata.aep.type".into()))?
            .to_string();
        let part = message
            .pointer("/parts/0")
            .ok_or_else(|| AepError::NotAep("no part".into()))?;
        let body = if aep.get("body").and_then(Value::as_str) == Some("empty") {
            AepBody::Empty
        } else if let Some(d) = part.get("data") {
            AepBody::Json(d.clone())
        } else if let Some(t) = part.get("text").and_then(Value::as_str) {
            AepBody::Text(t.to_string())
        } else {
            return Err(AepError::NotAep(
                "a part that is neither data nor text".into(),
            ));
        };
        let extra = match aep.get("headers") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|p| {
                    match (
                        p.get(0).and_then(Value::as_str),
                        p.get(1).and_then(Value::as_str),
                    ) {
                        (Some(n), Some(v)) => Ok((n.to_string(), v.to_string())),
                        _ => Err(AepError::NotAep("metadata.aep.headers".into())),
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(AepError::NotAep("metadata.aep.headers".into())),
        };
        let h = &msg.headers;
        Ok(AepMessage {
            from: h
                .from
                .as_ref()
                .map(|m| m.address.clone())
                .ok_or_else(|| AepError::NotAep("no From".into()))?,
            to: h.to.iter().map(|m| m.address.clone()).collect(),
            cc: h.cc.iter().map(|m| m.address.clone()).collect(),
            subject: aep.get("subject").and_then(Value::as_str).map(String::from),
            message_id: h
                .message_id
                .clone()
                .ok_or_else(|| AepError::NotAep("no Message-ID".into()))?,
            date: if aep.get("undated") == Some(&Value::Bool(true)) {
                None
            } else {
                h.date.map(|d| d.unix_timestamp())
            },
            in_reply_to: h.in_reply_to.clone(),
            references: h.references.clone(),
            aep_type,
            conversation_id: message
                .get("contextId")
                .and_then(Value::as_str)
                .map(String::from),
            extra,
            body,
        })
    }
}
