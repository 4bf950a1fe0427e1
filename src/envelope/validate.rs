//! The binding's stateless rules (spec sections 4 to 8), reporting every violation.
//!
//! The codes include all of the MailA2A reference validator's, with the same meaning,
//! plus codes for the rules it leaves to the host (timestamps, error objects, the A2A
//! payload, service parameters). Stateful receiver rules (replay, expiry against the
//! clock, stream gaps) live in `replay`.

use std::fmt;

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::a2a;
use super::borrowed::{Tree, Value, View};
use super::model::{task_state, Kind, PaymentKind, TERMINAL_TASK_STATES};
use super::{Envelope, A2A_VERSION, BINDING_VERSION};
use crate::error::A2aErrorType;
use crate::profile::Profile;

/// What a violation is. Codes are stable kebab-case strings ([`Code::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `bindingVersion` is absent or not `1.0` (also the outer `Mail-A2A-Binding`).
    UnsupportedBindingVersion,
    /// A required field (or header) is absent or empty.
    Required,
    /// `kind` is not request, response, event or error.
    UnknownKind,
    /// `operation` is not a token of spec section 5.
    UnknownOperation,
    /// A field that must be a non-negative integer is not.
    MustBeNatural,
    /// A field that must be a boolean is not.
    MustBeBoolean,
    /// A field that must be a JSON object is not.
    MustBeMap,
    /// A request whose `sequence` is not 0.
    RequestMustStartAtZero,
    /// A response, event or error without `correlationId`.
    RequiredForReply,
    /// An effectful request (DESIGN decision 2) without `idempotencyKey`.
    RequiredForEffectfulOperation,
    /// The payload reports a terminal task state but `final` is not true.
    TerminalStateMustBeFinal,
    /// `payment.kind` is not required, payload or response.
    UnknownPaymentKind,
    /// The payment wrapper's `x402Version` is not 2.
    MustBeX402V2,
    /// A `PaymentRequired` or `PaymentPayload` object whose own `x402Version` is not 2.
    X402ObjectVersionMismatch,
    /// A `SettlementResponse` with an `x402Version` of its own: x402 defines none, and
    /// the object is carried exactly as x402 defines it.
    SettlementWithX402Version,
    /// `group` coordinates on a message not protected by MLS (the profile comes from
    /// the verdict, never from the JSON).
    GroupRequiresMls,
    /// A field that must be a string (or null, for `taskId`/`contextId`) is not.
    MustBeString,
    /// `a2aVersion` names an A2A version other than 1.0.
    UnsupportedA2aVersion,
    /// A timestamp that is not an RFC 3339 UTC date-time.
    MustBeTimestamp,
    /// `expiresAt` is not after `createdAt`.
    ExpiresBeforeCreated,
    /// A response, event or error with `sequence` 0 (the request's number).
    ReplyMustFollowRequest,
    /// A request marked `final`: finality belongs to the last reply.
    RequestMustNotBeFinal,
    /// The payload is not the A2A v1.0 message of its operation and kind.
    InvalidPayload,
    /// `error` on a message whose kind is not `error`.
    ErrorOnlyOnErrorKind,
    /// `error.type` is not an A2A v1.0 error (nor `PaymentRequiredError`).
    UnknownErrorType,
    /// `error.code` is not the code of `error.type`.
    ErrorCodeMismatch,
    /// A payment kind on the wrong message: `required` only on a PaymentRequiredError
    /// reply, `payload` only on a request, `response` only on a response or event.
    PaymentKindMismatch,
    /// `serviceParameters["A2A-Extensions"]` is not a list of URI strings.
    MustBeUriList,
    /// `serviceParameters["A2A-Version"]` differs from `a2aVersion` (decision 12).
    A2aVersionMismatch,
    /// `group.id` is not unpadded base64url.
    MustBeBase64Url,
    /// An outer `Mail-A2A-*` hint or header disagrees with its protected value.
    HintMismatch,
    /// A response, event or error without `In-Reply-To`.
    ReplyWithoutInReplyTo,
    /// A required RFC 5322 / MIME header is absent or unreadable.
    InvalidHeader,
    /// A `cid:` reference names no part, or two parts share a Content-ID.
    InvalidContentId,
    /// An externalised part's MIME type differs from the A2A part's `mediaType`.
    MediaTypeMismatch,
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 35] = {
        use Code::*;
        [
            UnsupportedBindingVersion,
            Required,
            UnknownKind,
            UnknownOperation,
            MustBeNatural,
            MustBeBoolean,
            MustBeMap,
            RequestMustStartAtZero,
            RequiredForReply,
            RequiredForEffectfulOperation,
            TerminalStateMustBeFinal,
            UnknownPaymentKind,
            MustBeX402V2,
            X402ObjectVersionMismatch,
            SettlementWithX402Version,
            GroupRequiresMls,
            MustBeString,
            UnsupportedA2aVersion,
            MustBeTimestamp,
            ExpiresBeforeCreated,
            ReplyMustFollowRequest,
            RequestMustNotBeFinal,
            InvalidPayload,
            ErrorOnlyOnErrorKind,
            UnknownErrorType,
            ErrorCodeMismatch,
            PaymentKindMismatch,
            MustBeUriList,
            A2aVersionMismatch,
            MustBeBase64Url,
            HintMismatch,
            ReplyWithoutInReplyTo,
            InvalidHeader,
            InvalidContentId,
            MediaTypeMismatch,
        ]
    };

    /// The stable code string.
    pub fn as_str(self) -> &'static str {
        use Code::*;
        match self {
            UnsupportedBindingVersion => "unsupported-binding-version",
            Required => "required",
            UnknownKind => "unknown-kind",
            UnknownOperation => "unknown-operation",
            MustBeNatural => "must-be-natural",
            MustBeBoolean => "must-be-boolean",
            MustBeMap => "must-be-map",
            RequestMustStartAtZero => "request-must-start-at-zero",
            RequiredForReply => "required-for-reply",
            RequiredForEffectfulOperation => "required-for-effectful-operation",
            TerminalStateMustBeFinal => "terminal-state-must-be-final",
            UnknownPaymentKind => "unknown-payment-kind",
            MustBeX402V2 => "must-be-x402-v2",
            X402ObjectVersionMismatch => "x402-object-version-mismatch",
            SettlementWithX402Version => "settlement-with-x402-version",
            GroupRequiresMls => "group-requires-mls",
            MustBeString => "must-be-string",
            UnsupportedA2aVersion => "unsupported-a2a-version",
            MustBeTimestamp => "must-be-timestamp",
            ExpiresBeforeCreated => "expires-before-created",
            ReplyMustFollowRequest => "reply-must-follow-request",
            RequestMustNotBeFinal => "request-must-not-be-final",
            InvalidPayload => "invalid-payload",
            ErrorOnlyOnErrorKind => "error-only-on-error-kind",
            UnknownErrorType => "unknown-error-type",
            ErrorCodeMismatch => "error-code-mismatch",
            PaymentKindMismatch => "payment-kind-mismatch",
            MustBeUriList => "must-be-uri-list",
            A2aVersionMismatch => "a2a-version-mismatch",
            MustBeBase64Url => "must-be-base64url",
            HintMismatch => "hint-mismatch",
            ReplyWithoutInReplyTo => "reply-without-in-reply-to",
            InvalidHeader => "invalid-header",
            InvalidContentId => "invalid-content-id",
            MediaTypeMismatch => "media-type-mismatch",
        }
    }

    /// The A2A error a receiver answers with (spec section 10).
    pub fn a2a_error(self) -> A2aErrorType {
        use Code::*;
        match self {
            UnsupportedBindingVersion | UnsupportedA2aVersion => {
                A2aErrorType::VersionNotSupportedError
            }
            UnknownOperation => A2aErrorType::MethodNotFoundError,
            InvalidPayload => A2aErrorType::InvalidParamsError,
            MediaTypeMismatch => A2aErrorType::ContentTypeNotSupportedError,
            _ => A2aErrorType::InvalidRequestError,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule: where (a JSON pointer into the envelope, or `header:NAME` for the
/// message), which rule, and a short human reason that never quotes payload content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer (`/payment/x402Version`) or `header:Mail-A2A-Kind`.
    pub path: String,
    /// The rule.
    pub code: Code,
    /// A short reason.
    pub detail: String,
}

impl Violation {
    pub(crate) fn new(path: impl Into<String>, code: Code, detail: impl Into<String>) -> Self {
        Violation {
            path: path.into(),
            code,
            detail: detail.into(),
        }
    }
    /// The A2A error of this violation.
    pub fn a2a_error(&self) -> A2aErrorType {
        self.code.a2a_error()
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(
            f,
            "{} at {}: {} ({})",
            self.code,
            path,
            self.detail,
            self.code.a2a_error()
        )
    }
}

/// What validation knows beyond the JSON: how the message was protected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValidationContext {
    /// The profile that verified the message (from the verdict), `None` if unprotected.
    pub profile: Option<Profile>,
}

impl ValidationContext {
    /// A message as it was opened under `profile` (`None`: unprotected).
    pub fn new(profile: Option<Profile>) -> Self {
        ValidationContext { profile }
    }
}

/// How many schema faults of one payload are reported (the first ones suffice).
const MAX_PAYLOAD_FAULTS: usize = 16;

fn present_string(v: Option<Value<'_>>) -> bool {
    v.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

fn natural(v: Option<Value<'_>>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

/// The value of a field read as a tree (`None`: absent).
fn root<'a>(tree: &'a Option<Tree<'_>>) -> Option<Value<'a>> {
    tree.as_ref().map(|t| t.root())
}

/// What a field is (`None`: absent).
fn view<'a>(tree: &'a Option<Tree<'_>>) -> Option<View<'a>> {
    root(tree).map(Value::view)
}

/// Parses an RFC 3339 date-time in UTC (`Z` or `+00:00`), as the spec requires.
pub(crate) fn parse_utc_timestamp(s: &str) -> Option<OffsetDateTime> {
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    t.offset().is_utc().then_some(t)
}

/// Checks every stateless rule of the binding; an empty list means valid.
pub fn validate(env: &Envelope, ctx: &ValidationContext) -> Vec<Violation> {
    let payload = env.payload_tree();
    validate_with_payload(env, payload.as_ref().map(|t| t.root()), ctx)
}

/// [`validate`] with the payload already parsed (the message rules need it too).
pub(crate) fn validate_with_payload(
    env: &Envelope,
    payload: Option<Value<'_>>,
    ctx: &ValidationContext,
) -> Vec<Violation> {
    let mut out = Vec::new();
    // Every field is read as a tree over the envelope's text, never as a
    // serde_json::Value, which costs some fifty times its text (`borrowed`): this runs
    // before the sender is known.
    let get = |k: &str| env.field_tree(k);

    // Section 4.2: versions.
    match view(&get("bindingVersion")) {
        Some(View::String(s)) if s == BINDING_VERSION => {}
        _ => out.push(Violation::new(
            "/bindingVersion",
            Code::UnsupportedBindingVersion,
            "this binding is 1.0",
        )),
    }
    let a2a_version_tree = get("a2aVersion");
    let a2a_version = root(&a2a_version_tree);
    match a2a_version.map(Value::view) {
        Some(View::String(s)) if !s.is_empty() => {
            if !(s == A2A_VERSION || s.starts_with("1.0.")) {
                out.push(Violation::new(
                    "/a2aVersion",
                    Code::UnsupportedA2aVersion,
                    "only A2A 1.0 is supported",
                ));
            }
        }
        Some(View::String(_)) | None => {
            out.push(Violation::new(
                "/a2aVersion",
                Code::Required,
                "a2aVersion is required",
            ));
        }
        Some(_) => out.push(Violation::new(
            "/a2aVersion",
            Code::Required,
            "a2aVersion must be a non-empty string",
        )),
    }

    // Kind and operation.
    let kind = env.kind();
    if kind.is_none() {
        out.push(Violation::new(
            "/kind",
            Code::UnknownKind,
            "kind must be request, response, event or error",
        ));
    }
    let operation = env.operation();
    if operation.is_none() {
        out.push(Violation::new(
            "/operation",
            Code::UnknownOperation,
            "not a MailA2A operation token",
        ));
    }

    // Identifiers.
    match view(&get("messageId")) {
        Some(View::String(s)) if !s.is_empty() => {}
        Some(View::String(_)) | None => {
            out.push(Violation::new(
                "/messageId",
                Code::Required,
                "messageId is required",
            ));
        }
        Some(_) => out.push(Violation::new(
            "/messageId",
            Code::MustBeString,
            "messageId must be a string",
        )),
    }
    let correlation_tree = get("correlationId");
    let correlation = root(&correlation_tree);
    if correlation.is_some() && !present_string(correlation) {
        out.push(Violation::new(
            "/correlationId",
            Code::MustBeString,
            "correlationId must be a non-empty string",
        ));
    }
    for key in ["taskId", "contextId"] {
        if root(&get(key)).is_some_and(|v| !(v.is_string() || v.is_null())) {
            out.push(Violation::new(
                format!("/{key}"),
                Code::MustBeString,
                format!("{key} must be a string or null"),
            ));
        }
    }

    // Section 6: sequence and finality.
    let sequence = natural(root(&get("sequence")));
    if sequence.is_none() {
        out.push(Violation::new(
            "/sequence",
            Code::MustBeNatural,
            "sequence must be a non-negative integer",
        ));
    }
    let is_final = match view(&get("final")) {
        Some(View::Bool(b)) => Some(b),
        _ => {
            out.push(Violation::new(
                "/final",
                Code::MustBeBoolean,
                "final must be true or false",
            ));
            None
        }
    };
    match (kind, sequence) {
        (Some(Kind::Request), Some(n)) if n != 0 => out.push(Violation::new(
            "/sequence",
            Code::RequestMustStartAtZero,
            "a request has sequence 0",
        )),
        (Some(k), Some(0)) if k.is_reply() => out.push(Violation::new(
            "/sequence",
            Code::ReplyMustFollowRequest,
            "replies are numbered from 1",
        )),
        _ => {}
    }
    if kind == Some(Kind::Request) && is_final == Some(true) {
        out.push(Violation::new(
            "/final",
            Code::RequestMustNotBeFinal,
            "only the last reply of an exchange is final",
        ));
    }
    if kind.is_some_and(Kind::is_reply) && !present_string(correlation) {
        out.push(Violation::new(
            "/correlationId",
            Code::RequiredForReply,
            "a reply carries its request's correlationId",
        ));
    }

    // Section 7: idempotency.
    let idem_tree = get("idempotencyKey");
    let idem = root(&idem_tree);
    let effectful_request =
        kind == Some(Kind::Request) && operation.is_some_and(|o| o.is_effectful());
    if effectful_request && !present_string(idem) {
        out.push(Violation::new(
            "/idempotencyKey",
            Code::RequiredForEffectfulOperation,
            "an effectful request needs an idempotencyKey",
        ));
    } else if idem.is_some() && !present_string(idem) {
        out.push(Violation::new(
            "/idempotencyKey",
            Code::MustBeString,
            "idempotencyKey must be a non-empty string",
        ));
    }

    // Timestamps.
    let mut stamps = [None, None];
    for (i, key) in ["createdAt", "expiresAt"].into_iter().enumerate() {
        let Some(value) = get(key) else { continue };
        stamps[i] = value.root().as_str().and_then(parse_utc_timestamp);
        if stamps[i].is_none() {
            out.push(Violation::new(
                format!("/{key}"),
                Code::MustBeTimestamp,
                "must be an RFC 3339 UTC date-time",
            ));
        }
    }
    if let [Some(created), Some(expires)] = stamps {
        if expires <= created {
            out.push(Violation::new(
                "/expiresAt",
                Code::ExpiresBeforeCreated,
                "expiresAt must be after createdAt",
            ));
        }
    }

    // Service parameters (DESIGN decision 12).
    check_service_parameters(root(&get("serviceParameters")), a2a_version, &mut out);

    // Payload.
    match payload.map(Value::view) {
        Some(View::Object(_)) => {}
        None => out.push(Violation::new(
            "/payload",
            Code::Required,
            "payload is required",
        )),
        _ => out.push(Violation::new(
            "/payload",
            Code::MustBeMap,
            "payload must be an object",
        )),
    }
    if let Some(p) = payload.filter(|p| p.as_object().is_some()) {
        if let Some(state) = task_state(p) {
            if TERMINAL_TASK_STATES.contains(&state) && is_final != Some(true) {
                out.push(Violation::new(
                    "/final",
                    Code::TerminalStateMustBeFinal,
                    format!("{state} is terminal: the message must be final"),
                ));
            }
        }
        if let (Some(op), Some(k)) = (operation, kind) {
            for fault in a2a::check_payload(p, a2a::expected(op, k), MAX_PAYLOAD_FAULTS) {
                out.push(Violation::new(
                    format!("/payload{}", fault.pointer),
                    Code::InvalidPayload,
                    fault.reason,
                ));
            }
        }
    }

    // Section 10: the error object.
    let error_type = check_error(root(&get("error")), kind, &mut out);

    // Section 8: payment.
    check_payment(root(&get("payment")), kind, error_type, &mut out);

    // Section 9.3: groups.
    check_group(root(&get("group")), ctx, &mut out);

    out
}

fn check_service_parameters(
    sp: Option<Value<'_>>,
    a2a_version: Option<Value<'_>>,
    out: &mut Vec<Violation>,
) {
    let Some(sp) = sp else { return };
    let Some(map) = sp.as_object() else {
        out.push(Violation::new(
            "/serviceParameters",
            Code::MustBeMap,
            "serviceParameters must be an object",
        ));
        return;
    };
    if let Some(retry) = map.get("retry") {
        if retry.as_u64().is_none() {
            out.push(Violation::new(
                "/serviceParameters/retry",
                Code::MustBeNatural,
                "retry must be a non-negative integer",
            ));
        }
    }
    if let Some(ext) = map.get("A2A-Extensions") {
        let ok = ext.as_array().is_some_and(|a| {
            a.iter().all(|u| {
                u.as_str()
                    .is_some_and(|s| s.contains(':') && !s.contains(char::is_whitespace))
            })
        });
        if !ok {
            out.push(Violation::new(
                "/serviceParameters/A2A-Extensions",
                Code::MustBeUriList,
                "A2A-Extensions must be a list of extension URIs",
            ));
        }
    }
    if let Some(v) = map.get("A2A-Version") {
        // Both strings (a2aVersion must be one: reported above when it is not).
        if v.as_str().is_none() || v.as_str() != a2a_version.and_then(Value::as_str) {
            out.push(Violation::new(
                "/serviceParameters/A2A-Version",
                Code::A2aVersionMismatch,
                "A2A-Version must equal a2aVersion",
            ));
        }
    }
}

/// Checks `error`; returns its type when it names one.
fn check_error(
    error: Option<Value<'_>>,
    kind: Option<Kind>,
    out: &mut Vec<Violation>,
) -> Option<A2aErrorType> {
    match (kind, error.map(|e| (e, e.view()))) {
        (Some(Kind::Error), None) => {
            out.push(Violation::new(
                "/error",
                Code::Required,
                "an error message carries an A2A error object",
            ));
            None
        }
        (Some(k), Some(_)) if k != Kind::Error => {
            out.push(Violation::new(
                "/error",
                Code::ErrorOnlyOnErrorKind,
                "only kind error carries an error object",
            ));
            None
        }
        (_, Some((_, View::Object(obj)))) => {
            let ty = match obj.get("type").map(Value::view) {
                Some(View::String(name)) => match A2aErrorType::from_name(name) {
                    Some(t) => Some(t),
                    None => {
                        out.push(Violation::new(
                            "/error/type",
                            Code::UnknownErrorType,
                            "not an A2A v1.0 error type",
                        ));
                        None
                    }
                },
                // The SDKs' standard error object `{code, message, data}` names its
                // type by its A2A code alone (A2A v1.0 section 10 asks for "an A2A error
                // object"); the payment error, which has no code, must name its type.
                None => match obj
                    .get("code")
                    .and_then(|c| c.as_i64())
                    .and_then(A2aErrorType::from_code)
                {
                    Some(t) => Some(t),
                    None => {
                        out.push(Violation::new(
                            "/error/type",
                            Code::Required,
                            "error.type is required unless error.code is an A2A error code",
                        ));
                        None
                    }
                },
                Some(_) => {
                    out.push(Violation::new(
                        "/error/type",
                        Code::MustBeString,
                        "error.type must be a string",
                    ));
                    None
                }
            };
            if let (Some(t), Some(code)) = (ty, obj.get("code")) {
                if code.as_i64() != t.code().map(i64::from) {
                    out.push(Violation::new(
                        "/error/code",
                        Code::ErrorCodeMismatch,
                        match t.code() {
                            Some(c) => format!("{t} has code {c}"),
                            None => format!("{t} has no code"),
                        },
                    ));
                }
            }
            if matches!(obj.get("message"), Some(m) if !m.is_string()) {
                out.push(Violation::new(
                    "/error/message",
                    Code::MustBeString,
                    "error.message must be a string",
                ));
            }
            ty
        }
        (_, Some(_)) => {
            out.push(Violation::new(
                "/error",
                Code::MustBeMap,
                "error must be an object",
            ));
            None
        }
        (_, None) => None,
    }
}

fn check_payment(
    payment: Option<Value<'_>>,
    kind: Option<Kind>,
    error_type: Option<A2aErrorType>,
    out: &mut Vec<Violation>,
) {
    let Some(payment) = payment else {
        if error_type == Some(A2aErrorType::PaymentRequiredError) {
            out.push(Violation::new(
                "/payment",
                Code::Required,
                "PaymentRequiredError carries an x402 PaymentRequired object",
            ));
        }
        return;
    };
    let Some(p) = payment.as_object() else {
        out.push(Violation::new(
            "/payment",
            Code::MustBeMap,
            "payment must be an object",
        ));
        return;
    };
    let pkind = p
        .get("kind")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<PaymentKind>().ok());
    if pkind.is_none() {
        out.push(Violation::new(
            "/payment/kind",
            Code::UnknownPaymentKind,
            "payment.kind must be required, payload or response",
        ));
    }
    if p.get("x402Version").and_then(Value::as_u64) != Some(2) {
        out.push(Violation::new(
            "/payment/x402Version",
            Code::MustBeX402V2,
            "the MailA2A payment wrapper is x402 version 2",
        ));
    }
    let object = p.get("object");
    let object = object.and_then(Value::as_object);
    if object.is_none() {
        out.push(Violation::new(
            "/payment/object",
            Code::MustBeMap,
            "payment.object must be an x402 object",
        ));
    }
    if let (Some(PaymentKind::Required | PaymentKind::Payload), Some(o)) = (pkind, object) {
        if o.get("x402Version").and_then(Value::as_u64) != Some(2) {
            out.push(Violation::new(
                "/payment/object/x402Version",
                Code::X402ObjectVersionMismatch,
                "PaymentRequired and PaymentPayload keep x402Version 2",
            ));
        }
    }
    if let (Some(PaymentKind::Response), Some(o)) = (pkind, object) {
        if o.contains_key("x402Version") {
            out.push(Violation::new(
                "/payment/object/x402Version",
                Code::SettlementWithX402Version,
                "a SettlementResponse is carried as x402 defines it, without x402Version",
            ));
        }
    }
    let fits = match (pkind, kind) {
        (Some(PaymentKind::Required), Some(Kind::Error)) => {
            error_type == Some(A2aErrorType::PaymentRequiredError)
        }
        (Some(PaymentKind::Required), _) => false,
        (Some(PaymentKind::Payload), Some(k)) => k == Kind::Request,
        (Some(PaymentKind::Response), Some(k)) => matches!(k, Kind::Response | Kind::Event),
        _ => true, // already reported as an unknown kind
    };
    if !fits {
        out.push(Violation::new(
            "/payment/kind",
            Code::PaymentKindMismatch,
            "required goes on a PaymentRequiredError, payload on a request, response on a response or event",
        ));
    }
}

fn check_group(group: Option<Value<'_>>, ctx: &ValidationContext, out: &mut Vec<Violation>) {
    let Some(group) = group else { return };
    let Some(g) = group.as_object() else {
        out.push(Violation::new(
            "/group",
            Code::MustBeMap,
            "group must be an object",
        ));
        return;
    };
    if ctx.profile != Some(Profile::Mls) {
        out.push(Violation::new(
            "/group",
            Code::GroupRequiresMls,
            "group coordinates are only meaningful inside MLS",
        ));
    }
    match g.get("id").map(Value::view) {
        Some(View::String(s)) if !s.is_empty() => {
            let b64url = s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !b64url || s.len() % 4 == 1 {
                out.push(Violation::new(
                    "/group/id",
                    Code::MustBeBase64Url,
                    "group.id is the unpadded base64url group id",
                ));
            }
        }
        _ => out.push(Violation::new(
            "/group/id",
            Code::Required,
            "group.id is required",
        )),
    }
    for key in ["epoch", "generation"] {
        if natural(g.get(key)).is_none() {
            out.push(Violation::new(
                format!("/group/{key}"),
                Code::MustBeNatural,
                format!("group.{key} must be a non-negative integer"),
            ));
        }
    }
}

/// True only when `candidate` is the next message of `previous`'s exchange: same
/// correlation and operation, sequence one higher, and `previous` not final. Duplicate
/// recognition comes first and is the replay store's job.
pub fn next_event(previous: &Envelope, candidate: &Envelope) -> bool {
    let same_correlation = previous.correlation_id().is_some()
        && previous.correlation_id() == candidate.correlation_id();
    let same_operation =
        previous.operation().is_some() && previous.operation() == candidate.operation();
    let follows = matches!(
        (previous.sequence(), candidate.sequence()),
        (Some(a), Some(b)) if a.checked_add(1) == Some(b)
    );
    same_correlation && same_operation && follows && previous.is_final() != Some(true)
}
