//! The MailA2A protected envelope: the JSON object in the `application/a2a+json` part.
//!
//! [`Envelope`] keeps every top-level field as the exact JSON text it arrived as, in
//! order, so fields this version does not know (and x402 objects, which must travel
//! byte-exact) are re-serialised unchanged. Typed accessors read the fields the binding
//! defines; [`validate`] checks the binding's rules and reports every violation.

mod a2a;
pub(crate) mod borrowed;
mod json;
mod model;
pub(crate) mod schema;
pub(crate) mod validate;

pub(crate) use a2a::member_token;
pub(crate) use json::check_strict as check_strict_json;
pub use model::{GroupCoordinates, Kind, Operation, PaymentKind, TERMINAL_TASK_STATES};
pub(crate) use validate::validate_with_payload;
pub use validate::{next_event, validate, Code, ValidationContext, Violation};

use std::ops::Range;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{A2aErrorType, Classify, ErrorKind};

/// The binding version this crate implements (`bindingVersion`, `Mail-A2A-Binding`).
pub const BINDING_VERSION: &str = "1.0";
/// The A2A protocol version this crate implements (`a2aVersion`).
pub const A2A_VERSION: &str = "1.0";
/// The binding URI (Agent Card `protocolBinding`).
pub const BINDING_URI: &str = "https://kotoba-lang.github.io/mail-a2a/spec/v1/";
/// Default bound on JSON nesting (DESIGN decision 10).
pub const DEFAULT_MAX_JSON_DEPTH: usize = 64;

/// Why bytes could not be read as an envelope at all (before any binding rule).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The bytes are not UTF-8 (RFC 8259 requires it); `offset` is the first bad byte.
    #[error("envelope is not UTF-8 (first invalid byte at offset {offset})")]
    InvalidUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// The bytes are not one JSON value.
    #[error("envelope is not JSON: {reason} at line {line} column {column}")]
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the JSON parser expected.
        reason: String,
    },
    /// An object has the same key twice (an ambiguity relays and agents may read apart).
    #[error("envelope has a duplicate JSON key at {path}")]
    DuplicateKey {
        /// JSON pointer of the second occurrence.
        path: String,
    },
    /// Arrays/objects nest deeper than the limit.
    #[error("envelope JSON nests deeper than {limit} levels at {path}")]
    TooDeep {
        /// The limit in force.
        limit: usize,
        /// JSON pointer where the limit was crossed.
        path: String,
    },
    /// The JSON value is not an object.
    #[error("envelope is not a JSON object")]
    NotAnObject,
}

impl EnvelopeError {
    /// A stable kebab-case code, as printed by `mailseal validate`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUtf8 { .. } => "invalid-utf8",
            Self::Syntax { .. } => "invalid-json",
            Self::DuplicateKey { .. } => "duplicate-key",
            Self::TooDeep { .. } => "json-too-deep",
            Self::NotAnObject => "must-be-map",
        }
    }
}

impl Classify for EnvelopeError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::InvalidUtf8 { .. } | Self::Syntax { .. } => A2aErrorType::JsonParseError,
            _ => A2aErrorType::InvalidRequestError,
        }
    }
    fn kind(&self) -> ErrorKind {
        ErrorKind::Malformed
    }
}

/// A protected envelope: an ordered map from field name to its exact JSON text.
#[derive(Clone)]
pub struct Envelope {
    /// The JSON text the envelope was read from, followed by decoded keys and the text
    /// of fields set since; `fields` point into it. One buffer instead of two
    /// allocations per field. Shared (not copied) with the message's exact JSON bytes
    /// ([`Envelope::source_bytes`]): a 12 MiB payload is held once; a change to a
    /// shared envelope copies it first.
    text: std::sync::Arc<String>,
    /// The length of the JSON text it was read from, at the start of `text`; `None`
    /// for an envelope built by setters.
    source_len: Option<usize>,
    /// (key, value) ranges of `text`, in order. A vector, not a map: envelopes have a
    /// dozen fields, where a linear search beats hashing, and the reader has already
    /// refused duplicate keys.
    fields: Vec<(Range<usize>, Range<usize>)>,
}

impl std::fmt::Debug for Envelope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.entries()).finish()
    }
}

/// Two envelopes are equal when they have the same fields in the same order with the
/// same JSON text.
impl PartialEq for Envelope {
    fn eq(&self, other: &Self) -> bool {
        self.fields.len() == other.fields.len() && self.entries().eq(other.entries())
    }
}

impl Envelope {
    /// A new envelope with the fields every message has, in the order of the spec's
    /// example: `bindingVersion`, `a2aVersion`, `kind`, `operation`, `messageId`,
    /// `sequence` (0), `final` (false) and an empty `payload`.
    pub fn new(kind: Kind, operation: Operation, message_id: &str) -> Self {
        let mut e = Envelope {
            text: Default::default(),
            source_len: None,
            fields: Vec::new(),
        };
        e.set("bindingVersion", &BINDING_VERSION);
        e.set("a2aVersion", &A2A_VERSION);
        e.set("kind", &kind.as_str());
        e.set("operation", &operation.as_str());
        e.set("messageId", &message_id);
        e.set("sequence", &0u64);
        e.set("final", &false);
        e.set("payload", &serde_json::json!({}));
        e
    }

    /// The response to `request`, numbered `message_id`: kind `response`, the request's
    /// operation, `correlationId`, `taskId` and `contextId`, its attempt
    /// (`serviceParameters.retry`, when a retry), sequence 1 (a request is 0 and its
    /// replies are numbered from 1) and `final` (a response ends its exchange; a
    /// stream's events are [`Kind::Event`] instead, DESIGN decision 4), and an empty
    /// `payload` for the caller to set. A request without a `correlationId` was not
    /// recorded by its sender, so no reply to it is accepted: the response then lacks
    /// one too, and [`validate`] says so.
    pub fn response_to(request: &Envelope, message_id: &str) -> Envelope {
        Self::reply_to(request, Kind::Response, message_id)
    }

    /// The A2A error answering `request` (see [`Envelope::response_to`]): kind
    /// `error`, final, with the error object `{type, code, message}` of `error`.
    pub fn error_to(
        request: &Envelope,
        message_id: &str,
        error: A2aErrorType,
        message: &str,
    ) -> Envelope {
        let mut e = Self::reply_to(request, Kind::Error, message_id);
        let mut object = serde_json::Map::new();
        object.insert("type".into(), error.name().into());
        if let Some(code) = error.code() {
            object.insert("code".into(), code.into());
        }
        object.insert("message".into(), message.into());
        e.set("error", &object);
        e
    }

    fn reply_to(request: &Envelope, kind: Kind, message_id: &str) -> Envelope {
        let mut e = Envelope::new(kind, Operation::MessageSend, message_id);
        // The request's own operation text (a token this version may not know is
        // answered as it was asked).
        if let Some(op) = request.raw("operation") {
            e.insert("operation", op);
        }
        for key in ["correlationId", "taskId", "contextId"] {
            if let Some(raw) = request.raw(key) {
                e.insert(key, raw);
            }
        }
        let attempt = request.retry_attempt();
        if attempt > 0 {
            e.set(
                "serviceParameters",
                &serde_json::json!({ "retry": attempt }),
            );
        }
        e.set("sequence", &1u64);
        e.set("final", &true);
        // `payload` last, where a reader looks for it.
        e.remove("payload");
        e.set("payload", &serde_json::json!({}));
        e
    }

    /// Reads an envelope from untrusted bytes with the default JSON depth limit.
    pub fn from_json(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        Self::from_json_with_depth(bytes, DEFAULT_MAX_JSON_DEPTH)
    }

    /// Reads an envelope, refusing invalid UTF-8, duplicate keys, nesting deeper than
    /// `max_depth` and anything but a JSON object. Binding rules are [`validate`]'s job.
    pub fn from_json_with_depth(bytes: &[u8], max_depth: usize) -> Result<Self, EnvelopeError> {
        Self::from_text(String::from(json::utf8(bytes)?), max_depth)
    }

    /// [`Self::from_json_with_depth`] taking the bytes: they become the envelope's
    /// buffer, not copied (a large payload is decoded once and held once).
    pub(crate) fn from_json_vec(bytes: Vec<u8>, max_depth: usize) -> Result<Self, EnvelopeError> {
        let text = String::from_utf8(bytes).map_err(|e| EnvelopeError::InvalidUtf8 {
            offset: e.utf8_error().valid_up_to(),
        })?;
        Self::from_text(text, max_depth)
    }

    fn from_text(mut text: String, max_depth: usize) -> Result<Self, EnvelopeError> {
        let Some(spans) = json::read_object(&text, max_depth)? else {
            return Err(EnvelopeError::NotAnObject);
        };
        let source_len = text.len();
        let fields = spans
            .into_iter()
            .map(|(k, value)| {
                let key = match k {
                    json::Key::At(at) => at,
                    json::Key::Decoded(d) => {
                        text.push_str(&d);
                        text.len() - d.len()..text.len()
                    }
                };
                (key, value)
            })
            .collect();
        Ok(Envelope {
            text: std::sync::Arc::new(text),
            source_len: Some(source_len),
            fields,
        })
    }

    /// The exact JSON text this envelope was read from, sharing its buffer; `None`
    /// for an envelope built by setters.
    pub(crate) fn source_bytes(&self) -> Option<bytes::Bytes> {
        /// The first `len` bytes of a shared text, as a `Bytes` owner.
        struct Prefix(std::sync::Arc<String>, usize);
        impl AsRef<[u8]> for Prefix {
            fn as_ref(&self) -> &[u8] {
                &self.0.as_bytes()[..self.1]
            }
        }
        let len = self.source_len?;
        Some(bytes::Bytes::from_owner(Prefix(self.text.clone(), len)))
    }

    /// Every field as (key, JSON text), in order.
    fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields
            .iter()
            .map(|(k, v)| (&self.text[k.clone()], &self.text[v.clone()]))
    }

    /// Serialises the envelope: every field's JSON text exactly as read or set, in order.
    pub fn to_json(&self) -> Vec<u8> {
        let len: usize = self.entries().map(|(k, v)| k.len() + v.len() + 4).sum();
        let mut out = Vec::with_capacity(len + 2);
        out.push(b'{');
        for (i, (k, v)) in self.entries().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Keys came from JSON or from our own setters: serialising a str cannot fail.
            let key = serde_json::to_string(k).unwrap_or_default();
            out.extend_from_slice(key.as_bytes());
            out.push(b':');
            out.extend_from_slice(v.as_bytes());
        }
        out.push(b'}');
        out
    }

    fn field(&self, key: &str) -> Option<&str> {
        self.position(key)
            .map(|i| &self.text[self.fields[i].1.clone()])
    }

    /// The index of `key` (lengths compared first: most keys differ in length).
    fn position(&self, key: &str) -> Option<usize> {
        let text = self.text.as_bytes();
        self.fields
            .iter()
            .position(|(k, _)| k.len() == key.len() && &text[k.clone()] == key.as_bytes())
    }

    /// Appends `json` to the buffer as the value of `key` (the old text, if any, stays
    /// in the buffer unreferenced).
    fn insert(&mut self, key: &str, json: &str) {
        self.source_len = None;
        let text = std::sync::Arc::make_mut(&mut self.text);
        text.push_str(json);
        let value = text.len() - json.len()..text.len();
        match self.position(key) {
            Some(i) => self.fields[i].1 = value,
            None => {
                let text = std::sync::Arc::make_mut(&mut self.text);
                text.push_str(key);
                let k = text.len() - key.len()..text.len();
                self.fields.push((k, value));
            }
        }
    }

    /// The field names in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries().map(|(k, _)| k)
    }

    /// The exact JSON text of a field.
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.field(key)
    }

    /// A field read as `T`; `None` when absent or not a `T`.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.field(key)
            .and_then(|raw| serde_json::from_str(raw).ok())
    }

    /// A string field, borrowed from the JSON text when it has no escapes; `None` when
    /// absent or not a string.
    pub fn str_field(&self, key: &str) -> Option<std::borrow::Cow<'_, str>> {
        let raw = self.field(key)?;
        // A string without escapes is its text (the reader checked it is valid JSON),
        // as in `value`; the rest goes through serde_json.
        if let Some(inner) = raw
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .filter(|i| !i.contains('\\'))
        {
            return Some(std::borrow::Cow::Borrowed(inner));
        }
        match serde_json::from_str::<&str>(raw) {
            Ok(s) => Some(std::borrow::Cow::Borrowed(s)),
            Err(_) => serde_json::from_str::<String>(raw)
                .ok()
                .map(std::borrow::Cow::Owned),
        }
    }

    /// A field as a loose JSON value (for validation and inspection).
    pub fn value(&self, key: &str) -> Option<serde_json::Value> {
        let raw = self.field(key)?;
        // Scalars the binding reads on every message (identifiers, versions, flags,
        // sequence numbers) are taken from their text directly; the reader already
        // checked it is valid JSON. Anything else goes through serde_json.
        let quick = match raw.as_bytes() {
            [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') => {
                std::str::from_utf8(inner).ok().map(serde_json::Value::from)
            }
            b"true" => Some(serde_json::Value::Bool(true)),
            b"false" => Some(serde_json::Value::Bool(false)),
            b"null" => Some(serde_json::Value::Null),
            digits
                if !digits.is_empty()
                    && digits.len() < 19
                    && digits.iter().all(u8::is_ascii_digit)
                    && (digits[0] != b'0' || digits.len() == 1) =>
            {
                raw.parse::<u64>().ok().map(serde_json::Value::from)
            }
            _ => None,
        };
        quick.or_else(|| serde_json::from_str(raw).ok())
    }

    /// Sets a field, keeping its position if it exists, appending it otherwise.
    pub fn set<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        // Serialising plain data (strings, numbers, serde_json::Value, derived structs
        // without maps keyed by non-strings) cannot fail; a failure would be a bug in the
        // caller's Serialize impl, and then the field is left unchanged.
        if let Ok(json) = serde_json::to_string(value) {
            self.insert(key, &json);
        }
    }

    /// Sets a field to JSON text the caller already has (kept byte-for-byte).
    pub fn set_raw(&mut self, key: &str, json: &str) -> Result<(), EnvelopeError> {
        json::check_strict(json.as_bytes(), DEFAULT_MAX_JSON_DEPTH)?;
        self.insert(key, json);
        Ok(())
    }

    /// Removes a field.
    pub fn remove(&mut self, key: &str) -> Option<Box<str>> {
        let i = self.position(key)?;
        self.source_len = None;
        let (_, value) = self.fields.remove(i);
        Some(self.text[value].into())
    }

    /// `kind`, when it is one of the four.
    pub fn kind(&self) -> Option<Kind> {
        self.str_field("kind").and_then(|s| s.parse().ok())
    }
    /// `operation`, when it is a known token.
    pub fn operation(&self) -> Option<Operation> {
        self.str_field("operation").and_then(|s| s.parse().ok())
    }
    /// `messageId`.
    pub fn message_id(&self) -> Option<String> {
        self.get("messageId")
    }
    /// `correlationId`.
    pub fn correlation_id(&self) -> Option<String> {
        self.get("correlationId")
    }
    /// `idempotencyKey`.
    pub fn idempotency_key(&self) -> Option<String> {
        self.get("idempotencyKey")
    }
    /// `sequence`, when it is a natural number.
    pub fn sequence(&self) -> Option<u64> {
        self.get("sequence")
    }
    /// `final`, when it is a boolean.
    pub fn is_final(&self) -> Option<bool> {
        self.get("final")
    }
    /// `createdAt` as a timestamp, when it is RFC 3339.
    pub fn created_at(&self) -> Option<time::OffsetDateTime> {
        self.get::<String>("createdAt")
            .and_then(|s| validate::parse_utc_timestamp(&s))
    }
    /// `expiresAt` as a timestamp, when it is RFC 3339.
    pub fn expires_at(&self) -> Option<time::OffsetDateTime> {
        self.get::<String>("expiresAt")
            .and_then(|s| validate::parse_utc_timestamp(&s))
    }
    /// `group`, when well formed.
    pub fn group(&self) -> Option<GroupCoordinates> {
        self.get("group")
    }
    /// `serviceParameters.retry`: which attempt of its request this is (0, the first,
    /// when absent or not a natural number).
    pub fn retry_attempt(&self) -> u64 {
        self.field_tree("serviceParameters")
            .and_then(|t| t.root().get("retry")?.as_u64())
            .unwrap_or(0)
    }
    /// `payment.kind`, when known.
    pub fn payment_kind(&self) -> Option<PaymentKind> {
        let payment = self.field_tree("payment")?;
        let kind = payment.root().get("kind")?.as_str()?.parse().ok();
        kind
    }
    /// The task state the payload reports (`task.status.state`, `status.state` or the
    /// A2A v1.0 stream event `statusUpdate.status.state`), if any.
    pub fn task_state(&self) -> Option<String> {
        let payload = self.payload_tree()?;
        model::task_state(payload.root()).map(str::to_string)
    }

    /// The payload as a tree over the envelope's text (strings borrowed), or `None`
    /// when there is no payload or it is not JSON.
    pub(crate) fn payload_tree(&self) -> Option<borrowed::Tree<'_>> {
        self.field_tree("payload")
    }

    /// A field as a tree over the envelope's text: how the binding's rules read any
    /// field that may be large (a `serde_json::Value` costs some fifty times its text:
    /// see `borrowed`).
    pub(crate) fn field_tree(&self, key: &str) -> Option<borrowed::Tree<'_>> {
        borrowed::Tree::parse(self.field(key)?)
    }

    /// The payload as the binding's rules read it (see `payload_tree`), converted: for
    /// the fuzz target that holds it equal to what serde_json reads.
    #[doc(hidden)]
    pub fn payload_as_read(&self) -> Option<serde_json::Value> {
        self.payload_tree().map(|t| t.root().to_serde())
    }
}

/// Whether `instance` (JSON text) is valid against `schema` by this crate's schema
/// validator: `Err` when the schema does not compile (it uses a keyword the validator
/// does not implement), `Ok(None)` when the instance is not JSON. For the tests and the
/// `schema_diff` fuzz target that hold the validator to jsonschema; not a stable API.
#[doc(hidden)]
pub fn schema_verdict(schema: &serde_json::Value, instance: &str) -> Result<Option<bool>, String> {
    let compiled = schema::Schema::compile(schema).map_err(|e| e.to_string())?;
    Ok(borrowed::Tree::parse(instance).map(|t| compiled.is_valid(compiled.root(), t.root())))
}

/// Whether `instance` (JSON text) is the A2A v1.0 message `name` (a `$defs` entry of
/// the strict bundle, compiled once), and its first ten faults as (JSON pointer,
/// reason): `None` when the instance is not JSON or `name` is not in the bundle. The
/// verdict and the faults come from the validator's two modes, which must agree. Same
/// purpose as [`schema_verdict`].
#[doc(hidden)]
pub fn a2a_verdict(name: &str, instance: &str) -> Option<(bool, Vec<(String, String)>)> {
    let (compiled, node) = a2a::validator(name)?;
    let tree = borrowed::Tree::parse(instance)?;
    let faults = compiled.faults(node, tree.root(), 10);
    Some((
        compiled.is_valid(node, tree.root()),
        faults.into_iter().map(|f| (f.pointer, f.reason)).collect(),
    ))
}

/// Checks `text` against the A2A v1.0 message `name` of the strict schema bundle:
/// `None` when it is not JSON (or deeper than the parser allows), else the first
/// `limit` violations as (JSON pointer, reason), values masked.
pub(crate) fn check_a2a_json(
    text: &str,
    name: &'static str,
    limit: usize,
) -> Option<Vec<(String, String)>> {
    let tree = borrowed::Tree::parse(text)?;
    Some(
        a2a::check_payload(tree.root(), a2a::Expect::Message(name), limit)
            .into_iter()
            .map(|f| (f.pointer, f.reason))
            .collect(),
    )
}

/// SHA-256 of the transfer-decoded `application/a2a+json` bytes: the protected-content
/// digest of the replay tuple (DESIGN decision 5).
pub fn content_digest(envelope_bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(envelope_bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_round_trip_byte_for_byte() {
        let text = br#"{"bindingVersion":"1.0","x-future":{"b":1.50,"a":"\u00e9"},"kind":"request","n":1e3}"#;
        let env = Envelope::from_json(text).unwrap();
        assert_eq!(env.to_json(), text.to_vec());
        assert_eq!(
            env.keys().collect::<Vec<_>>(),
            ["bindingVersion", "x-future", "kind", "n"]
        );
        assert_eq!(env.raw("n").unwrap(), "1e3");
    }

    #[test]
    fn str_field_reads_plain_and_escaped_strings() {
        let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "m-1");
        for (raw, expected) in [
            ("\"plain\"", Some("plain")),
            ("\"\"", Some("")),
            ("\"a\\u0041\\\"b\"", Some("aA\"b")),
            ("\"tab\\there\"", Some("tab\there")),
            ("7", None),
            ("null", None),
            ("[\"x\"]", None),
        ] {
            env.set_raw("x", raw).unwrap();
            assert_eq!(env.str_field("x").as_deref(), expected, "{raw}");
            let serde: Option<String> = serde_json::from_str(raw).ok();
            assert_eq!(expected.map(str::to_string), serde, "{raw}");
        }
        assert!(matches!(
            env.str_field("kind"),
            Some(std::borrow::Cow::Borrowed("request"))
        ));
    }

    #[test]
    fn a_response_and_an_error_answer_their_request_and_validate() {
        let mut request = Envelope::new(Kind::Request, Operation::TasksGet, "req-1");
        request.set("correlationId", "exchange-1");
        request.set("taskId", "task-7");
        request.set("serviceParameters", &serde_json::json!({"retry": 2}));
        request.set("payload", &serde_json::json!({"id": "task-7"}));
        let mut response = Envelope::response_to(&request, "resp-1");
        response.set(
            "payload",
            &serde_json::json!({"id": "task-7", "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED"}}),
        );
        assert_eq!(response.kind(), Some(Kind::Response));
        assert_eq!(response.operation(), Some(Operation::TasksGet));
        assert_eq!(response.correlation_id().as_deref(), Some("exchange-1"));
        assert_eq!(response.message_id().as_deref(), Some("resp-1"));
        assert_eq!(
            (response.sequence(), response.is_final()),
            (Some(1), Some(true))
        );
        assert_eq!(response.retry_attempt(), 2);
        assert_eq!(response.raw("taskId"), Some("\"task-7\""));
        let ctx = ValidationContext::default();
        assert_eq!(validate(&response, &ctx), vec![]);
        let error = Envelope::error_to(&request, "err-1", A2aErrorType::TaskNotFoundError, "gone");
        assert_eq!(error.kind(), Some(Kind::Error));
        assert_eq!(
            error.value("error"),
            Some(
                serde_json::json!({"type": "TaskNotFoundError", "code": -32001, "message": "gone"})
            )
        );
        assert_eq!(validate(&error, &ctx), vec![]);
        // A request that names no correlation gets a response that says so.
        let bare = Envelope::new(Kind::Request, Operation::TasksGet, "req-2");
        let codes: Vec<Code> = validate(&Envelope::response_to(&bare, "r"), &ctx)
            .iter()
            .map(|v| v.code)
            .collect();
        assert!(codes.contains(&Code::RequiredForReply), "{codes:?}");
    }

    #[test]
    fn set_keeps_position() {
        let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "m-1");
        env.set("sequence", &4u64);
        assert_eq!(env.keys().nth(5), Some("sequence"));
        assert_eq!(env.sequence(), Some(4));
    }

    #[test]
    fn not_an_object() {
        assert_eq!(
            Envelope::from_json(b" [1]"),
            Err(EnvelopeError::NotAnObject)
        );
        assert_eq!(
            Envelope::from_json(b"\"x\""),
            Err(EnvelopeError::NotAnObject)
        );
    }
}
