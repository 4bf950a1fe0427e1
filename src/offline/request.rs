//! The signing request and the signing response: what crosses the air gap, as armored
//! text (a BEGIN line, the short fingerprint for the operator, pretty JSON, an END
//! line) that a person can read and a QR code can carry.
//!
//! The JSON is read strictly (no unknown member, every binary field standard
//! base64), and each object's fingerprint is SHA-256 over its canonical JSON (the
//! fields in their fixed order, as this module writes them): a request that was
//! re-indented is the same request, one with any value changed is another.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::OfflineError;
use crate::profile::Profile;

/// The largest request or response text read (a message at the receiver's 25 MiB
/// limit, base64-encoded, with room).
pub const MAX_TEXT: usize = 48 << 20;

const REQUEST_LABEL: &str = "MAILSEAL SIGNING REQUEST";
const RESPONSE_LABEL: &str = "MAILSEAL SIGNING RESPONSE";
const REQUEST_FORMAT: &str = "mailseal-signing-request/1";
const RESPONSE_FORMAT: &str = "mailseal-signing-response/1";

/// The header and envelope values the signed entity carries, stated in the request
/// so both hosts can show them; each host recomputes them from the entity and refuses
/// a request that states others.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct Covers {
    /// `From`.
    pub from: String,
    /// `To`.
    pub to: Vec<String>,
    /// `Cc`.
    pub cc: Vec<String>,
    /// `Subject`.
    pub subject: Option<String>,
    /// `Date` (RFC 3339).
    pub date: String,
    /// `Message-ID`.
    pub message_id: String,
    /// `In-Reply-To`.
    pub in_reply_to: Option<String>,
    /// The envelope's kind (`request`, `response`, ...).
    pub kind: String,
    /// The envelope's A2A operation.
    pub operation: String,
    /// The envelope's `expiresAt`, if any.
    pub expires_at: Option<String>,
}

/// What the offline key is asked to sign, with everything needed to check it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SigningRequest {
    /// The profile (S/MIME, OpenPGP or detached-jws).
    pub profile: Profile,
    /// The signer: the store fingerprint of its S/MIME certificate, OpenPGP
    /// certificate or JWK.
    pub signer: String,
    /// The signer's address (the message's From).
    pub signer_address: String,
    /// OpenPGP: the fingerprint of the signing (sub)key.
    pub signing_key: Option<String>,
    /// The signing time (whole seconds).
    pub signing_time: OffsetDateTime,
    /// S/MIME with an RSA key: RSASSA-PSS.
    pub rsa_pss: bool,
    /// Repeat the `Mail-A2A-*` hints on the outer message.
    pub outer_hints: bool,
    /// The `multipart/signed` boundary (from the entity and the time).
    pub boundary: String,
    /// What the entity states, for display.
    pub covers: Covers,
    /// The signed entity (the inner MIME entity, CRLF canonical, 7-bit).
    pub entity: Vec<u8>,
    /// The exact bytes the key signs, or for OpenPGP hashes after the entity: the
    /// DER of the CMS signed attributes (S/MIME), the v4 signature trailer with the
    /// hashed subpacket area (OpenPGP), the protected header of the JWS (its
    /// base64url text; the signing input is it, `.`, and the entity in base64url).
    pub to_be_signed: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RequestJson {
    format: String,
    profile: String,
    signer: String,
    signer_address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signing_key: Option<String>,
    signing_time: String,
    rsa_pss: bool,
    outer_hints: bool,
    boundary: String,
    covers: Covers,
    entity: String,
    to_be_signed: String,
}

/// The signature made offline, for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SigningResponse {
    /// The request's fingerprint (hex).
    pub request: String,
    /// The signer (as the request names it).
    pub signer: String,
    /// When the offline host signed (its clock; not part of any signature).
    pub signed_at: OffsetDateTime,
    /// The signature: the raw signature value (S/MIME), the binary signature packet
    /// (OpenPGP), the base64url signature (detached-jws, as ASCII).
    pub signature: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResponseJson {
    format: String,
    request: String,
    signer: String,
    signed_at: String,
    signature: String,
}

fn bad(what: &str) -> impl Fn(String) -> OfflineError + '_ {
    move |why| OfflineError::Malformed {
        what: what.to_string(),
        why,
    }
}

fn time_text(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn parse_time(s: &str, what: &str) -> Result<OffsetDateTime, OfflineError> {
    let t = OffsetDateTime::parse(s, &Rfc3339)
        .map_err(|e| bad(what)(format!("{s} is not an RFC 3339 time: {e}")))?;
    if t.nanosecond() != 0 {
        return Err(bad(what)("the time has a fraction of a second".into()));
    }
    Ok(t.to_offset(time::UtcOffset::UTC))
}

fn decode(s: &str, what: &str) -> Result<Vec<u8>, OfflineError> {
    STANDARD
        .decode(s)
        .map_err(|e| bad(what)(format!("not base64: {e}")))
}

/// SHA-256 over `json`, hex.
fn digest_hex(json: &[u8]) -> String {
    crate::hex::hex(&Sha256::digest(json))
}

/// The first 16 bytes of a hex fingerprint in groups of four, upper case: what the
/// operator compares across the gap.
pub fn short_fingerprint(hex: &str) -> String {
    hex.as_bytes()
        .chunks(4)
        .take(8)
        .map(|c| String::from_utf8_lossy(c).to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Text between `-----BEGIN label-----` and `-----END label-----`, after the one
/// `Fingerprint:` line and a blank line; nothing else may surround it but white space.
fn unarmor<'t>(text: &'t str, label: &str, what: &str) -> Result<(&'t str, &'t str), OfflineError> {
    if text.len() > MAX_TEXT {
        return Err(bad(what)(format!("longer than {MAX_TEXT} bytes")));
    }
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let text = text.trim();
    let body = text
        .strip_prefix(begin.as_str())
        .and_then(|t| t.strip_suffix(end.as_str()))
        .ok_or_else(|| bad(what)(format!("not between {begin} and {end}")))?;
    let body = body.trim_start_matches('\r').trim_start_matches('\n');
    let (line, rest) = body
        .split_once('\n')
        .ok_or_else(|| bad(what)("no Fingerprint line".into()))?;
    let shown = line
        .trim_end_matches('\r')
        .strip_prefix("Fingerprint: ")
        .ok_or_else(|| bad(what)("no Fingerprint line".into()))?;
    Ok((shown, rest))
}

fn armor(label: &str, fingerprint: &str, json: &[u8]) -> String {
    format!(
        "-----BEGIN {label}-----\nFingerprint: {}\n\n{}\n-----END {label}-----\n",
        short_fingerprint(fingerprint),
        String::from_utf8_lossy(json)
    )
}

fn parse_profile(token: &str) -> Result<Profile, OfflineError> {
    match token {
        "smime" => Ok(Profile::Smime),
        "openpgp" => Ok(Profile::OpenPgp),
        "jws" => Ok(Profile::Jws),
        other => Err(bad("signing request")(format!(
            "profile {other} is not signed offline"
        ))),
    }
}

fn profile_token(p: Profile) -> &'static str {
    match p {
        Profile::Smime => "smime",
        Profile::OpenPgp => "openpgp",
        Profile::Jws => "jws",
        Profile::Mls => "mls",
    }
}

impl SigningRequest {
    fn json(&self) -> RequestJson {
        RequestJson {
            format: REQUEST_FORMAT.into(),
            profile: profile_token(self.profile).into(),
            signer: self.signer.clone(),
            signer_address: self.signer_address.clone(),
            signing_key: self.signing_key.clone(),
            signing_time: time_text(self.signing_time),
            rsa_pss: self.rsa_pss,
            outer_hints: self.outer_hints,
            boundary: self.boundary.clone(),
            covers: self.covers.clone(),
            entity: STANDARD.encode(&self.entity),
            to_be_signed: STANDARD.encode(&self.to_be_signed),
        }
    }

    /// The request's fingerprint: SHA-256 of its canonical JSON, hex.
    pub fn fingerprint(&self) -> String {
        digest_hex(&serde_json::to_vec(&self.json()).unwrap_or_default())
    }

    /// The armored text.
    pub fn to_text(&self) -> String {
        let json = serde_json::to_vec_pretty(&self.json()).unwrap_or_default();
        armor(REQUEST_LABEL, &self.fingerprint(), &json)
    }

    /// Reads an armored request strictly; its shown fingerprint must be its own.
    pub fn parse(text: &[u8]) -> Result<Self, OfflineError> {
        let what = "signing request";
        let text = std::str::from_utf8(text).map_err(|_| bad(what)("not UTF-8".into()))?;
        let (shown, body) = unarmor(text, REQUEST_LABEL, what)?;
        let j: RequestJson =
            serde_json::from_str(body).map_err(|e| bad(what)(format!("JSON: {e}")))?;
        if j.format != REQUEST_FORMAT {
            return Err(bad(what)(format!(
                "format {} is not {REQUEST_FORMAT}",
                j.format
            )));
        }
        let request = SigningRequest {
            profile: parse_profile(&j.profile)?,
            signer: j.signer,
            signer_address: j.signer_address,
            signing_key: j.signing_key,
            signing_time: parse_time(&j.signing_time, what)?,
            rsa_pss: j.rsa_pss,
            outer_hints: j.outer_hints,
            boundary: j.boundary,
            covers: j.covers,
            entity: decode(&j.entity, what)?,
            to_be_signed: decode(&j.to_be_signed, what)?,
        };
        if shown != short_fingerprint(&request.fingerprint()) {
            return Err(OfflineError::Inconsistent(
                "the request's Fingerprint line is not the fingerprint of its content".into(),
            ));
        }
        Ok(request)
    }
}

impl SigningResponse {
    fn json(&self) -> ResponseJson {
        ResponseJson {
            format: RESPONSE_FORMAT.into(),
            request: self.request.clone(),
            signer: self.signer.clone(),
            signed_at: time_text(self.signed_at),
            signature: STANDARD.encode(&self.signature),
        }
    }

    /// The response's fingerprint: SHA-256 of its canonical JSON, hex.
    pub fn fingerprint(&self) -> String {
        digest_hex(&serde_json::to_vec(&self.json()).unwrap_or_default())
    }

    /// The armored text; its Fingerprint line shows the request's fingerprint, which
    /// the operator compares with the one shown when the request was made.
    pub fn to_text(&self) -> String {
        let json = serde_json::to_vec_pretty(&self.json()).unwrap_or_default();
        armor(RESPONSE_LABEL, &self.request, &json)
    }

    /// Reads an armored response strictly.
    pub fn parse(text: &[u8]) -> Result<Self, OfflineError> {
        let what = "signing response";
        let text = std::str::from_utf8(text).map_err(|_| bad(what)("not UTF-8".into()))?;
        let (shown, body) = unarmor(text, RESPONSE_LABEL, what)?;
        let j: ResponseJson =
            serde_json::from_str(body).map_err(|e| bad(what)(format!("JSON: {e}")))?;
        if j.format != RESPONSE_FORMAT {
            return Err(bad(what)(format!(
                "format {} is not {RESPONSE_FORMAT}",
                j.format
            )));
        }
        if j.request.len() != 64 || !j.request.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(what)(
                "the request fingerprint is not 64 hex digits".into(),
            ));
        }
        let response = SigningResponse {
            request: j.request.to_ascii_lowercase(),
            signer: j.signer,
            signed_at: parse_time(&j.signed_at, what)?,
            signature: decode(&j.signature, what)?,
        };
        if shown != short_fingerprint(&response.request) {
            return Err(OfflineError::Inconsistent(
                "the response's Fingerprint line is not its request's".into(),
            ));
        }
        Ok(response)
    }
}
