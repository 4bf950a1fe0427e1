//! `message/mls` mails (RFC 9420 section 17.10, DESIGN "MLS"): one TLS-serialized
//! MLSMessage as the whole body, written base64 (SMTP is 7-bit), read base64 or binary.
//!
//! This module owns the wire format only: what the message *says* (its wire format,
//! group id, epoch and content type, all in the clear in MLS framing) is read here
//! before any cryptography, so the group state can decide what to do with it.

use openmls::prelude::tls_codec::{Deserialize as _, Serialize as _};
use openmls::prelude::{ContentType, MlsMessageBodyIn, MlsMessageIn, ProtocolMessage};

use super::MlsError;
use crate::message::{read_outer, write_header_section, Headers, Hints, Limits};

/// The media type, with the only version there is.
pub const CONTENT_TYPE: &str = "message/mls; version=1.0";

/// A `message/mls` mail as read: its outer headers and the MLSMessage bytes.
#[derive(Clone, Debug)]
pub struct MlsMail {
    /// The mail's headers (routing hints; the cryptography decides).
    pub headers: Headers,
    /// The transfer-decoded body: one TLS-serialized MLSMessage.
    pub message: Vec<u8>,
}

/// Reads a `message/mls` mail within `limits`.
pub fn read_mail(raw: &[u8], limits: &Limits) -> Result<MlsMail, MlsError> {
    let outer = read_outer(raw, limits)?;
    if outer.media_type != "message/mls" {
        return Err(MlsError::Malformed(format!(
            "the mail is {}, not message/mls",
            outer.media_type.chars().take(80).collect::<String>()
        )));
    }
    if let Some(v) = outer.param("version") {
        if v.trim() != "1.0" {
            return Err(MlsError::Malformed(format!(
                "message/mls version {} (only 1.0 exists)",
                v.chars().take(20).collect::<String>()
            )));
        }
    }
    let part = outer
        .single
        .as_ref()
        .ok_or_else(|| MlsError::Malformed("message/mls has no body".into()))?;
    let message = part.decoded()?;
    if message.is_empty() {
        return Err(MlsError::Malformed("empty message/mls body".into()));
    }
    Ok(MlsMail {
        headers: outer.headers,
        message,
    })
}

/// Writes a `message/mls` mail: `headers` (From, To, Date and Message-ID required),
/// `hints` on the outside, and `message` in base64.
pub fn write_mail(headers: &Headers, hints: &Hints, message: &[u8]) -> Result<Vec<u8>, MlsError> {
    let mut out = Vec::with_capacity(crate::message::size_hint(message.len()));
    write_header_section(&mut out, headers, hints)?;
    out.extend_from_slice(b"Content-Type: ");
    out.extend_from_slice(CONTENT_TYPE.as_bytes());
    out.extend_from_slice(b"\r\nContent-Transfer-Encoding: base64\r\n\r\n");
    crate::message::push_base64_mime(&mut out, message);
    Ok(out)
}

/// Decodes one MLSMessage; trailing bytes are an error.
pub fn decode(bytes: &[u8]) -> Result<MlsMessageIn, MlsError> {
    MlsMessageIn::tls_deserialize_exact(bytes)
        .map_err(|e| MlsError::Malformed(format!("MLSMessage: {e}")))
}

/// Encodes an MLSMessage again: for a message [`decode`] read, the same bytes.
pub fn encode(message: &MlsMessageIn) -> Result<Vec<u8>, MlsError> {
    message
        .tls_serialize_detached()
        .map_err(|e| MlsError::Malformed(format!("MLSMessage: {e}")))
}

/// What an MLSMessage says about itself before any cryptography.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    /// A PublicMessage or PrivateMessage of a group.
    Protocol {
        /// The group id.
        group_id: Vec<u8>,
        /// The epoch it was sent in.
        epoch: u64,
        /// What it carries.
        content: Content,
        /// Whether it is a PrivateMessage.
        private: bool,
    },
    /// A Welcome.
    Welcome,
    /// A GroupInfo (for an external join).
    GroupInfo,
    /// A KeyPackage.
    KeyPackage,
}

/// The content type of a group message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// Application data.
    Application,
    /// A standalone proposal.
    Proposal,
    /// A Commit.
    Commit,
}

/// An MLSMessage's body, ready for the group API.
pub(crate) enum Body {
    /// A group message (`process_message`).
    Protocol(ProtocolMessage),
    /// A Welcome.
    Welcome(openmls::prelude::Welcome),
    /// A GroupInfo.
    GroupInfo(openmls::messages::group_info::VerifiableGroupInfo),
    /// A KeyPackage (not yet validated).
    KeyPackage(openmls::prelude::KeyPackageIn),
}

/// Splits `message` into what its framing says and its body.
pub(crate) fn split(message: MlsMessageIn) -> Result<(Framing, Body), MlsError> {
    let protocol = |p: ProtocolMessage, private: bool| {
        let content = match p.content_type() {
            ContentType::Application => Content::Application,
            ContentType::Proposal => Content::Proposal,
            ContentType::Commit => Content::Commit,
        };
        (
            Framing::Protocol {
                group_id: p.group_id().as_slice().to_vec(),
                epoch: p.epoch().as_u64(),
                content,
                private,
            },
            Body::Protocol(p),
        )
    };
    Ok(match message.extract() {
        MlsMessageBodyIn::PublicMessage(m) => protocol(m.into(), false),
        MlsMessageBodyIn::PrivateMessage(m) => protocol(m.into(), true),
        MlsMessageBodyIn::Welcome(w) => (Framing::Welcome, Body::Welcome(w)),
        MlsMessageBodyIn::GroupInfo(g) => (Framing::GroupInfo, Body::GroupInfo(g)),
        MlsMessageBodyIn::KeyPackage(k) => (Framing::KeyPackage, Body::KeyPackage(k)),
        #[allow(unreachable_patterns)]
        _ => {
            return Err(MlsError::Malformed(
                "unsupported MLSMessage wire format".into(),
            ))
        }
    })
}

/// What [`framing_of`] reads from untrusted bytes: the framing, or why it does not
/// decode. For inspection and the fuzz target.
pub fn framing_of(bytes: &[u8]) -> Result<Framing, MlsError> {
    split(decode(bytes)?).map(|(f, _)| f)
}

/// One line on what a `message/mls` mail carries, from its framing alone (for
/// `inspect`: nothing is decrypted or verified).
pub fn describe(raw: &[u8], limits: &Limits) -> Result<String, MlsError> {
    let mail = read_mail(raw, limits)?;
    Ok(match framing_of(&mail.message)? {
        Framing::Protocol {
            group_id,
            epoch,
            content,
            private,
        } => format!(
            "MLS {} ({}), group {}, epoch {epoch}, {} bytes",
            if private {
                "PrivateMessage"
            } else {
                "PublicMessage"
            },
            match content {
                Content::Application => "application data: open it to see the inner layers",
                Content::Proposal => "a proposal",
                Content::Commit => "a Commit",
            },
            super::group_id_text(&group_id),
            mail.message.len()
        ),
        Framing::Welcome => format!("MLS Welcome, {} bytes", mail.message.len()),
        Framing::GroupInfo => format!("MLS GroupInfo, {} bytes", mail.message.len()),
        Framing::KeyPackage => format!("MLS KeyPackage, {} bytes", mail.message.len()),
    })
}
