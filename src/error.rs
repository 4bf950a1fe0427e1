//! The A2A error vocabulary and the kinds of failure every error maps to.
//!
//! Each concern has its own error type (envelope parsing, message parsing, key store,
//! seal, open); they all map to an [`A2aErrorType`] (what a MailA2A agent would put in
//! the `error` object of its reply) and to an [`ErrorKind`]. Exit statuses are the
//! command line's business (`src/cli/exit.rs`), not the library's.

use std::fmt;

/// A2A v1.0 error types (JSON-RPC codes from the A2A v1.0 table) plus the MailA2A
/// `PaymentRequiredError` extension, which has no code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum A2aErrorType {
    /// -32700: the bytes are not JSON.
    JsonParseError,
    /// -32600: malformed envelope, MIME mismatch, invalid fields.
    InvalidRequestError,
    /// -32601: unknown operation token.
    MethodNotFoundError,
    /// -32602: valid operation with an invalid payload.
    InvalidParamsError,
    /// -32603: the receiver failed internally.
    InternalError,
    /// -32001: inaccessible or absent task.
    TaskNotFoundError,
    /// -32002: the task cannot be canceled.
    TaskNotCancelableError,
    /// -32003: push notifications are disabled.
    PushNotificationNotSupportedError,
    /// -32004: the declared capabilities do not support the operation.
    UnsupportedOperationError,
    /// -32005: unacceptable A2A Part media type.
    ContentTypeNotSupportedError,
    /// -32006: the peer returned a nonconforming response.
    InvalidAgentResponseError,
    /// -32007: an extended card is declared but absent.
    ExtendedAgentCardNotConfiguredError,
    /// -32008: a required extension was not negotiated.
    ExtensionSupportRequiredError,
    /// -32009: the A2A or binding version is unsupported.
    VersionNotSupportedError,
    /// MailA2A extension (no code): carries an x402 `PaymentRequired` object.
    PaymentRequiredError,
}

impl A2aErrorType {
    /// Every type, in table order.
    pub const ALL: [A2aErrorType; 15] = [
        Self::JsonParseError,
        Self::InvalidRequestError,
        Self::MethodNotFoundError,
        Self::InvalidParamsError,
        Self::InternalError,
        Self::TaskNotFoundError,
        Self::TaskNotCancelableError,
        Self::PushNotificationNotSupportedError,
        Self::UnsupportedOperationError,
        Self::ContentTypeNotSupportedError,
        Self::InvalidAgentResponseError,
        Self::ExtendedAgentCardNotConfiguredError,
        Self::ExtensionSupportRequiredError,
        Self::VersionNotSupportedError,
        Self::PaymentRequiredError,
    ];

    /// The `type` string of the error object.
    pub fn name(self) -> &'static str {
        match self {
            Self::JsonParseError => "JSONParseError",
            Self::InvalidRequestError => "InvalidRequestError",
            Self::MethodNotFoundError => "MethodNotFoundError",
            Self::InvalidParamsError => "InvalidParamsError",
            Self::InternalError => "InternalError",
            Self::TaskNotFoundError => "TaskNotFoundError",
            Self::TaskNotCancelableError => "TaskNotCancelableError",
            Self::PushNotificationNotSupportedError => "PushNotificationNotSupportedError",
            Self::UnsupportedOperationError => "UnsupportedOperationError",
            Self::ContentTypeNotSupportedError => "ContentTypeNotSupportedError",
            Self::InvalidAgentResponseError => "InvalidAgentResponseError",
            Self::ExtendedAgentCardNotConfiguredError => "ExtendedAgentCardNotConfiguredError",
            Self::ExtensionSupportRequiredError => "ExtensionSupportRequiredError",
            Self::VersionNotSupportedError => "VersionNotSupportedError",
            Self::PaymentRequiredError => "PaymentRequiredError",
        }
    }

    /// The JSON-RPC code, `None` for `PaymentRequiredError` (DESIGN decision 3).
    pub fn code(self) -> Option<i32> {
        Some(match self {
            Self::JsonParseError => -32700,
            Self::InvalidRequestError => -32600,
            Self::MethodNotFoundError => -32601,
            Self::InvalidParamsError => -32602,
            Self::InternalError => -32603,
            Self::TaskNotFoundError => -32001,
            Self::TaskNotCancelableError => -32002,
            Self::PushNotificationNotSupportedError => -32003,
            Self::UnsupportedOperationError => -32004,
            Self::ContentTypeNotSupportedError => -32005,
            Self::InvalidAgentResponseError => -32006,
            Self::ExtendedAgentCardNotConfiguredError => -32007,
            Self::ExtensionSupportRequiredError => -32008,
            Self::VersionNotSupportedError => -32009,
            Self::PaymentRequiredError => return None,
        })
    }

    /// Looks a type up by its `type` string.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Looks a type up by its JSON-RPC `code` (A2A v1.0 section 10): what an error
    /// object without `type` (the SDKs' standard `{code, message, data}`) is.
    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.code().map(i64::from) == Some(code))
    }

    /// The error object of DESIGN decision 3: `{"type", "code", "message"}`.
    pub fn to_error_object(self, message: &str) -> serde_json::Value {
        let mut obj = serde_json::Map::new();
        obj.insert("type".into(), self.name().into());
        if let Some(code) = self.code() {
            obj.insert("code".into(), code.into());
        }
        obj.insert("message".into(), message.into());
        serde_json::Value::Object(obj)
    }
}

impl fmt::Display for A2aErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of failure an error is: the one classification every consumer needs.
///
/// The command line maps it to its exit status, a gateway to an SMTP reply and a
/// bounce, a Rust caller to its own retry logic; none of those mappings live here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Anything else: I/O, a store that cannot be reached, an internal failure.
    Other,
    /// The caller asked for something that cannot be done as asked (a missing
    /// address, a profile this build lacks, an option that contradicts another).
    InvalidArgument,
    /// The input is malformed: not MIME, not CMS, not OpenPGP, not an A2A envelope.
    Malformed,
    /// Authentication failed: a signature, a MAC or an integrity check.
    Authentication,
    /// No usable key: none of ours decrypts it, or no key is known for a peer.
    NoUsableKey,
    /// Refused by policy: a downgrade, a replay, an expiry, a binding mismatch.
    Policy,
}

impl ErrorKind {
    /// A short lowercase token for logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Other => "other",
            Self::InvalidArgument => "invalid-argument",
            Self::Malformed => "malformed",
            Self::Authentication => "authentication",
            Self::NoUsableKey => "no-usable-key",
            Self::Policy => "policy",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Implemented by every error type of the crate.
pub trait Classify {
    /// The A2A error a MailA2A agent reports for this failure.
    fn a2a_error(&self) -> A2aErrorType;
    /// What kind of failure this is.
    fn kind(&self) -> ErrorKind;
}

/// An error with a stable verdict code, kept when a profile's error is wrapped.
pub trait Coded {
    /// The code: `layer.reason`.
    fn verdict_code(&self) -> &'static str;
}

/// Gives an error enum its stable verdict codes: `code()` for a value and `CODES`, the
/// list of every code it can have, written from the same arms so the two cannot
/// drift apart. A code is `layer.reason` in kebab-case (`smime.bad-signature`); the
/// conformance corpus ([`crate::corpus`]) labels its cases with them and a test
/// checks that each appears in at least one case.
macro_rules! verdict_codes {
    ($ty:ty, $layer:literal, { $($pat:pat => $code:literal),+ $(,)? }) => {
        impl $ty {
            /// Every code of this error (see [`Self::code`]).
            pub const CODES: &'static [&'static str] = &[$(concat!($layer, ".", $code)),+];
            /// The stable verdict code of this error: `layer.reason`.
            pub fn code(&self) -> &'static str {
                #[allow(unused_variables)]
                match self {
                    $($pat => concat!($layer, ".", $code)),+
                }
            }
        }
        impl $crate::error::Coded for $ty {
            fn verdict_code(&self) -> &'static str {
                self.code()
            }
        }
    };
}
pub(crate) use verdict_codes;

/// How many characters of a value a message put there (an address, an identity, an
/// identifier) an error quotes.
pub const QUOTED_CHARS: usize = 64;

/// `text`, a value a message put there, as an error quotes it: [`shown`], at most
/// [`QUOTED_CHARS`] characters (issue #58: whoever prints or logs a library error gets
/// no control character and no line of the attacker's length).
pub fn quoted(text: impl AsRef<str>) -> String {
    shown(text.as_ref(), QUOTED_CHARS)
}

/// `text` as it may be shown on a terminal or in a log line: every control character
/// (C0, DEL, C1), line and paragraph separator, bidi control and zero-width or
/// invisible format character written as `\u{XXXX}`, and at most `max_chars`
/// characters kept, the rest counted. An error may quote what a message says (an
/// identity, a member name): shown so, it can neither forge another line, move the
/// cursor nor reorder what follows, and its length is bounded whatever the message's
/// (issue #58).
pub fn shown(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 2));
    let mut chars = text.chars();
    for (kept, c) in chars.by_ref().enumerate() {
        if kept == max_chars {
            let rest = 1 + chars.count();
            out.push_str(&format!("... ({rest} more characters)"));
            return out;
        }
        push_shown(&mut out, c);
    }
    out
}

/// `c` as [`shown`] writes it: itself, or `\u{XXXX}` when [`is_hidden`]. The one
/// escaping every display of untrusted text goes through (the offline signing summary
/// writes its values with it too).
pub fn push_shown(out: &mut String, c: char) {
    if is_hidden(c) {
        out.push_str(&format!("\\u{{{:04x}}}", c as u32));
    } else {
        out.push(c);
    }
}

/// Whether `c` is a character that does not show, or changes how what follows shows.
/// By general category: controls (Cc: C0, DEL, C1), format characters (Cf: bidi
/// controls, zero-width marks, the soft hyphen, the Mongolian vowel separator, tag
/// characters), line and paragraph separators (Zl, Zp), spaces other than U+0020 (Zs:
/// a no-break or ideographic space reads as a space and is not one), private-use,
/// surrogate and unassigned code points (nothing a terminal can be trusted to draw).
/// And by name, the letters and marks that draw nothing: the Hangul fillers
/// (U+115F, U+1160, U+3164, U+FFA0), the Khmer inherent vowels, the variation
/// selectors, the combining grapheme joiner (U+034F), the Mongolian free variation
/// selectors, the musical symbol format marks, the Braille blank, the Khitan small
/// script filler (U+16FE4) and the object replacement character (U+FFFC: a box on
/// some terminals, nothing on others).
pub fn is_hidden(c: char) -> bool {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    matches!(
        c.general_category(),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::SpaceSeparator
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
    ) || matches!(c,
            '\u{034f}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
            | '\u{180b}'..='\u{180f}' | '\u{2800}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}'
            | '\u{ffa0}' | '\u{fff0}'..='\u{fffc}' | '\u{16fe4}' | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}')
}

#[cfg(test)]
mod shown_tests {
    use super::shown;

    #[test]
    fn fail_display_controls_escaped_and_length_bounded() {
        assert_eq!(
            shown("a\nmailseal: open: ok delivered\u{1b}[2J\u{0}\u{7}\r", 100),
            "a\\u{000a}mailseal: open: ok delivered\\u{001b}[2J\\u{0000}\\u{0007}\\u{000d}"
        );
        assert_eq!(
            shown("x\u{202e}gpj.exe\u{200b}", 100),
            "x\\u{202e}gpj.exe\\u{200b}"
        );
        // Tag characters (invisible text after an address), variation selectors and
        // the combining grapheme joiner.
        assert_eq!(
            shown("ceo@corp.example\u{e0020}\u{e0065}x\u{fe0f}\u{34f}", 100),
            "ceo@corp.example\\u{e0020}\\u{e0065}x\\u{fe0f}\\u{034f}"
        );
        assert_eq!(shown("é😀 plain", 100), "é😀 plain");
        // Issue #59: what the offline summary printed raw (line separator, soft
        // hyphen, Hangul fillers, Mongolian vowel separator, grapheme joiner), spaces
        // that are not U+0020, private use and unassigned code points.
        for c in [
            '\u{2028}',
            '\u{2029}',
            '\u{00ad}',
            '\u{115f}',
            '\u{3164}',
            '\u{180e}',
            '\u{034f}',
            '\u{202e}',
            '\u{200b}',
            '\u{00a0}',
            '\u{3000}',
            '\u{e000}',
            '\u{0378}',
            '\u{13430}',
            '\u{1bca0}',
            '\u{2800}',
            '\u{85}',
        ] {
            assert_eq!(
                shown(&format!("a{c}b"), 10),
                format!("a\\u{{{:04x}}}b", c as u32)
            );
        }
        assert_eq!(
            shown("Ωμέγα ünïcödé 日本語 한국어 👍🏽", 100),
            "Ωμέγα ünïcödé 日本語 한국어 👍🏽"
        );
        let long = "A".repeat(10_000_000);
        let s = shown(&long, 200);
        assert!(s.starts_with(&"A".repeat(200)));
        assert!(
            s.ends_with("... (9999800 more characters)"),
            "{}",
            &s[190..]
        );
        assert_eq!(shown("abc", 3), "abc");
    }
}
