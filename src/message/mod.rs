//! The RFC 5322 MailA2A message: one request, response, error or stream event.
//!
//! [`MailA2aMessage`] is the plain message every profile protects (DESIGN "Inner
//! entity"): the correlation headers, the `Mail-A2A-*` hints, the envelope, an optional
//! text fallback and `cid:` attachments. [`MailA2aMessage::parse`] reads untrusted bytes
//! within [`Limits`]; [`MailA2aMessage::check`] applies the binding's rules.

mod check;
mod compose;
mod fields;
mod limits;
mod mime;
mod parse;
pub(crate) mod transfer;

mod canonical;
pub(crate) use canonical::{canonical_crlf, CanonicalReader};
pub(crate) use compose::{content_len, size_hint, write_header_section};
pub use limits::Limits;
pub(crate) use parse::{read_outer, Outer};

/// The top-level header fields of `raw` in order: (name as written, unfolded value).
pub(crate) fn header_fields(
    raw: &[u8],
    limits: &Limits,
) -> Result<Vec<(String, String)>, MessageError> {
    let tree = mime::Tree::parse_top(raw, limits)?;
    Ok(tree
        .root()
        .fields
        .iter()
        .map(|f| {
            (
                String::from_utf8_lossy(f.name(raw)).into_owned(),
                f.text(raw),
            )
        })
        .collect())
}

/// Appends `data` in MIME base64 lines (76 characters, CRLF) to `out`.
pub(crate) fn push_base64_mime(out: &mut Vec<u8>, data: &[u8]) {
    transfer::push_base64_lines(out, data, transfer::Width::Mime);
}
pub use parse::{structure, PartInfo};

/// The moment (Unix time) a Date field's value `value` gives, as the message reader
/// reads it, for the `date_diff` fuzz target. Not a stable API (feature `fuzz-api`).
#[cfg(feature = "fuzz-api")]
#[doc(hidden)]
pub fn fuzz_date(value: &str) -> Option<i64> {
    fields::date_time(value).map(|d| d.unix_timestamp())
}

use time::OffsetDateTime;

use crate::envelope::{self, Envelope, EnvelopeError, ValidationContext, Violation};
use crate::error::{A2aErrorType, Classify, ErrorKind};

/// The media type of the machine part.
pub const A2A_MEDIA_TYPE: &str = "application/a2a+json";

/// Why bytes could not be read as a MailA2A message (before any binding rule).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// The raw message is larger than [`Limits::max_message_bytes`].
    #[error("message is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Size of the input.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The bytes are not an RFC 5322 message with a header section.
    #[error("not an RFC 5322 message")]
    NotMime,
    /// Multiparts nest deeper than [`Limits::max_mime_depth`].
    #[error("MIME nesting is deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// More MIME parts than [`Limits::max_parts`].
    #[error("message has more than {limit} MIME parts")]
    TooManyParts {
        /// The limit.
        limit: usize,
    },
    /// A multipart cannot be cut into its parts: no valid boundary, no delimiter, no
    /// body part, or no close delimiter (a truncated message).
    #[error("malformed multipart: {reason}")]
    BadMultipart {
        /// What is wrong.
        reason: &'static str,
    },
    /// A line of a header section is not a header field (RFC 5322 2.2), so readers
    /// could disagree on where the headers end.
    #[error("malformed header section: {reason}")]
    BadHeader {
        /// What is wrong.
        reason: &'static str,
    },
    /// Transfer-decoded parts add up to more than [`Limits::max_decoded_bytes`].
    #[error("decoded parts exceed {limit} bytes")]
    DecodedTooLarge {
        /// The limit.
        limit: usize,
    },
    /// Compressed content inflates past what content of its size may
    /// ([`Limits::inflation_budget`]): read before its signature can be checked, it
    /// may not cost more than a multiple of what it weighs.
    #[error(
        "compressed content inflates past {limit} bytes: at most {ratio} times its own size (at least {floor} bytes) is read"
    )]
    InflatedTooLarge {
        /// The budget the content went past.
        limit: usize,
        /// [`Limits::inflation_ratio`].
        ratio: usize,
        /// [`Limits::inflation_floor`].
        floor: usize,
    },
    /// A header that may appear once appears more often (readers could disagree on
    /// which one counts).
    #[error("header {} appears more than once", crate::error::quoted(.name))]
    DuplicateHeader {
        /// The header name.
        name: String,
    },
    /// No `application/a2a+json` part.
    #[error("no application/a2a+json part")]
    NoMachinePart,
    /// More than one `application/a2a+json` part (which one would be authoritative?).
    #[error("{count} application/a2a+json parts; exactly one is allowed")]
    MultipleMachineParts {
        /// How many there are.
        count: usize,
    },
    /// The machine part declares a charset other than UTF-8.
    #[error("application/a2a+json part has charset {}; it must be UTF-8", crate::error::quoted(.charset))]
    UnsupportedCharset {
        /// The declared charset.
        charset: String,
    },
    /// A part declares a Content-Transfer-Encoding this reader does not know.
    #[error("unknown Content-Transfer-Encoding {}", crate::error::quoted(.encoding))]
    UnknownTransferEncoding {
        /// The declared encoding.
        encoding: String,
    },
    /// A part's body is not valid in its declared transfer encoding (for example
    /// truncated base64).
    #[error("{} body of the {part} part does not decode", crate::error::quoted(.encoding))]
    BadTransferEncoding {
        /// `base64` or `quoted-printable`.
        encoding: &'static str,
        /// Which part (`application/a2a+json`, or an attachment's Content-ID).
        part: String,
    },
    /// The machine part is not a readable envelope.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// Writing the message failed (an I/O error of the output).
    #[error("cannot write the message: {0}")]
    Write(String),
    /// Composing needs a header that is missing.
    #[error("cannot compose: {0} is missing")]
    MissingForCompose(&'static str),
}

impl MessageError {
    /// Every code [`Self::code`] gives (an envelope's own among them).
    pub const CODES: &'static [&'static str] = &[
        "message-too-large",
        "not-mime",
        "mime-too-deep",
        "too-many-parts",
        "decoded-too-large",
        "bad-multipart",
        "bad-header",
        "duplicate-header",
        "no-machine-part",
        "multiple-machine-parts",
        "unsupported-charset",
        "unknown-transfer-encoding",
        "bad-transfer-encoding",
        "invalid-utf8",
        "invalid-json",
        "duplicate-key",
        "json-too-deep",
        "must-be-map",
        "missing-header",
        "write-failed",
    ];

    /// A stable kebab-case code, as printed by `mailseal validate`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "message-too-large",
            Self::NotMime => "not-mime",
            Self::TooDeep { .. } => "mime-too-deep",
            Self::TooManyParts { .. } => "too-many-parts",
            Self::DecodedTooLarge { .. } | Self::InflatedTooLarge { .. } => "decoded-too-large",
            Self::BadMultipart { .. } => "bad-multipart",
            Self::BadHeader { .. } => "bad-header",
            Self::DuplicateHeader { .. } => "duplicate-header",
            Self::NoMachinePart => "no-machine-part",
            Self::MultipleMachineParts { .. } => "multiple-machine-parts",
            Self::UnsupportedCharset { .. } => "unsupported-charset",
            Self::UnknownTransferEncoding { .. } => "unknown-transfer-encoding",
            Self::BadTransferEncoding { .. } => "bad-transfer-encoding",
            Self::Envelope(e) => e.code(),
            Self::MissingForCompose(_) => "missing-header",
            Self::Write(_) => "write-failed",
        }
    }
}

impl Classify for MessageError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Envelope(e) => e.a2a_error(),
            Self::UnsupportedCharset { .. } => A2aErrorType::ContentTypeNotSupportedError,
            _ => A2aErrorType::InvalidRequestError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::MissingForCompose(_) => ErrorKind::InvalidArgument,
            Self::Write(_) => ErrorKind::Other,
            _ => ErrorKind::Malformed,
        }
    }
}

/// A mailbox: an addr-spec and an optional display name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mailbox {
    /// Display name, if any.
    pub name: Option<String>,
    /// The addr-spec (`local@domain`).
    pub address: String,
}

impl Mailbox {
    /// A mailbox from `local@domain` or `Display Name <local@domain>`.
    pub fn new(text: &str) -> Self {
        let text = text.trim();
        match (text.rfind('<'), text.ends_with('>')) {
            (Some(lt), true) => {
                let name = text[..lt].trim().trim_matches('"').trim();
                Mailbox {
                    name: (!name.is_empty()).then(|| name.to_string()),
                    address: text[lt + 1..text.len() - 1].trim().to_string(),
                }
            }
            _ => Mailbox {
                name: None,
                address: text.to_string(),
            },
        }
    }
    /// Whether the address is an RFC 5322 addr-spec (RFC 6532 allows UTF-8): a non-empty
    /// local part, one `@`, a domain of non-empty labels (or a bracketed literal), and
    /// nothing that cannot stand in an address (controls, white space, `<>()[],;:\"`
    /// outside a quoted local part).
    pub fn is_valid_addr_spec(&self) -> bool {
        let a = &self.address;
        let Some((local, domain)) = a.rsplit_once('@') else {
            return false;
        };
        let bad = |c: char| c.is_control() || c.is_whitespace();
        let special = |c: char| "<>()[],;:\\\"@".contains(c);
        let local_ok = if local.len() >= 2 && local.starts_with('"') && local.ends_with('"') {
            !local[1..local.len() - 1]
                .chars()
                .any(|c| c.is_control() || c == '"')
        } else {
            !local.is_empty()
                && !local.chars().any(|c| bad(c) || special(c))
                && !local.starts_with('.')
                && !local.ends_with('.')
                && !local.contains("..")
        };
        let domain_ok = if domain.starts_with('[') && domain.ends_with(']') {
            domain.len() > 2 && !domain.chars().any(bad)
        } else {
            !domain.is_empty()
                && domain
                    .split('.')
                    .all(|l| !l.is_empty() && l.chars().all(|c| c.is_alphanumeric() || c == '-'))
        };
        local_ok && domain_ok
    }

    /// The address lower-cased for comparison (the domain is case-insensitive; local
    /// parts are compared case-insensitively too, as every major provider does).
    pub fn normalized(&self) -> String {
        self.address.to_ascii_lowercase()
    }
}

/// The outer `Mail-A2A-*` routing hints (spec 4.1), as the text of each field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    /// `Mail-A2A-Binding`.
    pub binding: Option<String>,
    /// `Mail-A2A-Operation`.
    pub operation: Option<String>,
    /// `Mail-A2A-Kind`.
    pub kind: Option<String>,
    /// `Mail-A2A-Correlation-ID`.
    pub correlation_id: Option<String>,
    /// `Mail-A2A-Sequence`.
    pub sequence: Option<String>,
    /// `Mail-A2A-Final` (`yes`/`no`).
    pub final_: Option<String>,
}

impl Hints {
    /// Header names, in the order they are written.
    pub const NAMES: [&'static str; 6] = [
        "Mail-A2A-Binding",
        "Mail-A2A-Operation",
        "Mail-A2A-Kind",
        "Mail-A2A-Correlation-ID",
        "Mail-A2A-Sequence",
        "Mail-A2A-Final",
    ];

    /// Every hint derived from the envelope.
    pub fn from_envelope(env: &Envelope) -> Self {
        Hints {
            binding: Some(envelope::BINDING_VERSION.to_string()),
            operation: env.get("operation"),
            kind: env.get("kind"),
            correlation_id: env.correlation_id(),
            sequence: env.sequence().map(|s| s.to_string()),
            final_: env
                .is_final()
                .map(|f| if f { "yes" } else { "no" }.to_string()),
        }
    }

    /// Only `Mail-A2A-Binding: 1.0` (what an outer protected message shows by default).
    pub fn binding_only() -> Self {
        Hints {
            binding: Some(envelope::BINDING_VERSION.to_string()),
            ..Hints::default()
        }
    }

    /// (name, value) of each hint present.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let values = [
            &self.binding,
            &self.operation,
            &self.kind,
            &self.correlation_id,
            &self.sequence,
            &self.final_,
        ];
        Self::NAMES
            .into_iter()
            .zip(values)
            .filter_map(|(n, v)| v.as_deref().map(|v| (n, v)))
    }

    /// Sets the hint `NAMES[i]`.
    pub(crate) fn set_nth(&mut self, i: usize, value: String) {
        let slot = match i {
            0 => &mut self.binding,
            1 => &mut self.operation,
            2 => &mut self.kind,
            3 => &mut self.correlation_id,
            4 => &mut self.sequence,
            5 => &mut self.final_,
            _ => return,
        };
        *slot = Some(value);
    }
}

/// The header fields a MailA2A message carries (and header protection protects).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    /// `From`: exactly one mailbox.
    pub from: Option<Mailbox>,
    /// `To`.
    pub to: Vec<Mailbox>,
    /// `Cc`.
    pub cc: Vec<Mailbox>,
    /// `Date`.
    pub date: Option<OffsetDateTime>,
    /// `Message-ID`, without angle brackets.
    pub message_id: Option<String>,
    /// `In-Reply-To`, without angle brackets.
    pub in_reply_to: Option<String>,
    /// `References`, oldest first, without angle brackets.
    pub references: Vec<String>,
    /// `Subject`.
    pub subject: Option<String>,
    /// `MIME-Version` as written.
    pub mime_version: Option<String>,
    /// `Auto-Submitted` (RFC 3834), set on replies.
    pub auto_submitted: Option<String>,
    /// The `Mail-A2A-*` hints.
    pub hints: Hints,
    /// Number of `From` mailboxes seen (more than one is refused by the rules).
    pub from_count: usize,
}

/// A sibling MIME part referenced from the payload by `cid:` (spec 4.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// The Content-ID, without angle brackets.
    pub content_id: String,
    /// The media type (`type/subtype`), lower case.
    pub content_type: String,
    /// A file name for the Content-Disposition, if any.
    pub filename: Option<String>,
    /// The decoded bytes.
    pub data: Vec<u8>,
}

/// A plain MailA2A message.
#[derive(Clone, Debug, PartialEq)]
pub struct MailA2aMessage {
    /// Header fields and hints.
    pub headers: Headers,
    envelope: Envelope,
    /// Shared, not copied, with the replay candidate and any other holder.
    envelope_bytes: bytes::Bytes,
    /// The human fallback (`text/plain`): informative only, never instructions.
    pub text: Option<String>,
    /// `cid:` attachments.
    pub attachments: Vec<Attachment>,
}

impl MailA2aMessage {
    /// A message from `from` to `to` carrying `envelope`, dated now, with a fresh
    /// Message-ID in the sender's domain, a minimal Subject and every hint.
    pub fn new(from: &str, to: &[&str], envelope: Envelope) -> Self {
        let from = Mailbox::new(from);
        let domain = from
            .address
            .rsplit_once('@')
            .map_or("localhost", |(_, d)| d)
            .to_string();
        let kind = envelope.kind().map_or("message", |k| k.as_str());
        let headers = Headers {
            subject: Some(format!("A2A {kind}")),
            from: Some(from),
            from_count: 1,
            to: to.iter().map(|a| Mailbox::new(a)).collect(),
            date: Some(now_seconds()),
            message_id: Some(format!("{}@{domain}", uuid::Uuid::new_v4())),
            mime_version: Some("1.0".into()),
            hints: Hints::from_envelope(&envelope),
            ..Headers::default()
        };
        let envelope_bytes = bytes::Bytes::from(envelope.to_json());
        MailA2aMessage {
            headers,
            envelope,
            envelope_bytes,
            text: None,
            attachments: Vec::new(),
        }
    }

    /// A reply from `from` to the sender of `request` carrying `envelope` (see
    /// [`Envelope::response_to`]), in `request`'s thread ([`Self::in_reply_to`]): the
    /// In-Reply-To is how the requester's receiver finds the request it answers.
    pub fn reply(request: &MailA2aMessage, from: &str, envelope: Envelope) -> Self {
        let to = request.sender().unwrap_or_default();
        let mut m = MailA2aMessage::new(from, &[to.as_str()], envelope);
        m.in_reply_to(&request.headers);
        m
    }

    /// Makes this message a reply in `request`'s thread: In-Reply-To, References and
    /// `Auto-Submitted: auto-replied` (DESIGN decision 9).
    pub fn in_reply_to(&mut self, request: &Headers) {
        self.headers.in_reply_to = request.message_id.clone();
        let mut refs = request.references.clone();
        refs.extend(request.message_id.clone());
        self.headers.references = refs;
        self.headers.auto_submitted = Some("auto-replied".into());
    }

    /// The sender's address (the protected From), normalised for comparison.
    pub fn sender(&self) -> Option<String> {
        self.headers.from.as_ref().map(Mailbox::normalized)
    }

    /// The envelope.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// Replaces the envelope (and re-derives the hints from it).
    pub fn set_envelope(&mut self, envelope: Envelope) {
        self.envelope_bytes = bytes::Bytes::from(envelope.to_json());
        self.headers.hints = Hints::from_envelope(&envelope);
        self.envelope = envelope;
    }

    /// The exact transfer-decoded bytes of the machine part.
    pub fn envelope_bytes(&self) -> &[u8] {
        &self.envelope_bytes
    }

    /// [`Self::envelope_bytes`] as a shared buffer: a reference, not a copy.
    pub fn envelope_shared(&self) -> bytes::Bytes {
        self.envelope_bytes.clone()
    }

    /// SHA-256 of [`Self::envelope_bytes`] (the replay tuple's content digest).
    pub fn content_digest(&self) -> [u8; 32] {
        envelope::content_digest(&self.envelope_bytes)
    }

    /// Reads a message from untrusted bytes within `limits`.
    pub fn parse(raw: &[u8], limits: &Limits) -> Result<Self, MessageError> {
        parse::parse(raw, limits)
    }

    /// [`Self::parse`] of a buffer it may keep: the machine part is decoded in it and
    /// becomes the envelope's text, so a large payload is held once (not as the input
    /// and a decoded copy).
    pub fn parse_vec(raw: Vec<u8>, limits: &Limits) -> Result<Self, MessageError> {
        let all = 0..raw.len();
        parse::parse_owned(raw, all, limits)
    }

    /// [`Self::parse`] of `buffer[range]`, keeping the buffer as the envelope's text
    /// when the machine part needs no decoding (no copy of a large payload).
    pub(crate) fn parse_owned(
        buffer: Vec<u8>,
        range: std::ops::Range<usize>,
        limits: &Limits,
    ) -> Result<Self, MessageError> {
        parse::parse_owned(buffer, range, limits)
    }

    /// Serialises the message (CRLF line ends, 7-bit safe).
    pub fn to_rfc5322(&self) -> Result<Vec<u8>, MessageError> {
        compose::compose(self, &compose::Options::default())
    }

    /// The inner entity a profile protects: this message with RFC 9788 header
    /// protection marked on its Content-Type (`hp="clear"` when only signed,
    /// `hp="cipher"` when encrypted).
    ///
    /// Encrypted, the machine part is written 8bit or binary rather than base64 (the
    /// entity never meets a 7-bit transport inside the ciphertext; RFC 8551 3.1.2);
    /// [`Self::to_inner_entity_7bit`] keeps it 7-bit for a recipient that cannot read
    /// binary inner parts.
    pub fn to_inner_entity(&self, encrypted: bool) -> Result<Vec<u8>, MessageError> {
        compose::compose(self, &inner_options(encrypted, encrypted))
    }

    /// [`Self::to_inner_entity`] with every part 7-bit safe, even when encrypted.
    pub fn to_inner_entity_7bit(&self, encrypted: bool) -> Result<Vec<u8>, MessageError> {
        compose::compose(self, &inner_options(encrypted, false))
    }

    /// [`Self::to_inner_entity`], appended to `out` (so a profile can write it straight
    /// into the buffer it signs or encrypts in).
    pub(crate) fn write_inner_entity(
        &self,
        encrypted: bool,
        binary_inside: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), MessageError> {
        out.reserve(compose::size_hint(compose::content_len(self)));
        compose::compose_into(self, &inner_options(encrypted, binary_inside), out)
    }

    /// Every rule of the binding this message breaks, envelope rules included.
    pub fn check(&self, ctx: &ValidationContext) -> Vec<Violation> {
        // The payload is parsed once, for the envelope rules and the cid: references.
        let tree = self.envelope.payload_tree();
        let payload = tree.as_ref().map(|t| t.root());
        let attachments = check::check_attachments(payload, &self.attachments);
        let mut out = check::check_headers(&self.headers, &self.envelope);
        out.extend(envelope::validate_with_payload(
            &self.envelope,
            payload,
            ctx,
        ));
        out.extend(attachments);
        out
    }
}

/// The options of an inner entity: RFC 9788 `hp` (`cipher` when encrypted, `clear`
/// when only signed) and whether its parts may be 8bit or binary.
fn inner_options(encrypted: bool, binary_inside: bool) -> compose::Options {
    compose::Options {
        header_protection: Some(if encrypted { "cipher" } else { "clear" }),
        binary_inside: encrypted && binary_inside,
        content_boundary: !encrypted,
    }
}

fn now_seconds() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(0).unwrap_or(now)
}

/// Parses and checks in one step: the message and its violations, or why it could not
/// be read. Unprotected (validation context without a profile).
pub fn validate_message(
    raw: &[u8],
    limits: &Limits,
) -> Result<(MailA2aMessage, Vec<Violation>), MessageError> {
    let msg = MailA2aMessage::parse(raw, limits)?;
    let violations = msg.check(&ValidationContext::default());
    Ok((msg, violations))
}

/// The RFC 2392 `mid:` URL of a Message-ID (with or without its angle brackets), as
/// an x402 `PaymentRequired.resource.url` names the request when no web resource
/// exists (MailA2A section 8). Characters outside RFC 3986's unreserved and
/// sub-delims (and `@`) are percent-encoded.
pub fn mid_url(message_id: &str) -> String {
    let id = message_id
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>');
    let mut out = String::from("mid:");
    for b in id.bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'.'
            | b'_'
            | b'~'
            | b'!'
            | b'$'
            | b'&'
            | b'\''
            | b'('
            | b')'
            | b'*'
            | b'+'
            | b','
            | b';'
            | b'='
            | b'@' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Mailbox;

    #[test]
    fn mailbox_forms() {
        assert_eq!(Mailbox::new(" a@example.net ").address, "a@example.net");
        let m = Mailbox::new("\"Client Agent\" <c@example.net>");
        assert_eq!(
            (m.name.as_deref(), m.address.as_str()),
            (Some("Client Agent"), "c@example.net")
        );
        let m = Mailbox::new("<c@example.net>");
        assert_eq!((m.name, m.address.as_str()), (None, "c@example.net"));
    }

    #[test]
    fn addr_spec_syntax() {
        for ok in [
            "a@example.net",
            "first.last+tag@sub.example.com",
            "\"a b\"@example.net",
            "j@[192.0.2.1]",
            "ü@bücher.example",
        ] {
            assert!(Mailbox::new(ok).is_valid_addr_spec(), "{ok}");
        }
        for bad in [
            "",
            "a",
            "@example.net",
            "a@",
            "a@@b",
            "a b@example.net",
            "a@exa mple.net",
            "\u{1}\0@x",
            ".a@x.y",
            "a..b@x.y",
            "a@x..y",
            "a@-x.y!",
        ] {
            assert!(!Mailbox::new(bad).is_valid_addr_spec(), "{bad:?}");
        }
    }
}
