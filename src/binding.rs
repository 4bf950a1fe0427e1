//! What every profile checks once its cryptography passed: the authenticated entity is
//! read as the inner MailA2A message, the outer headers must agree with it (RFC 9788),
//! the verified signer must be its From and we one of its recipients (DESIGN decision
//! 7), and the protection must be enough for the operation (decision 8).
//!
//! Profiles differ in how they establish *who signed*; from there on, one code path.

use crate::envelope::{Code, ValidationContext, Violation};
use crate::message::{Headers, MailA2aMessage};
use crate::profile::{Profile, Protection};
use crate::seal::{BindingError, OpenError, OpenPolicy, Opened, SignerIdentity, Verdict};

/// An entity whose signature (and, when encrypted, integrity) a profile verified.
pub(crate) struct Authenticated<'a> {
    /// The profile that verified it.
    pub profile: Profile,
    /// The signed entity, exactly as signed.
    pub entity: Entity<'a>,
    /// The outermost message's headers (routing hints to compare).
    pub outer_headers: &'a Headers,
    /// Whether it arrived encrypted (the outer Subject is then obscured).
    pub encrypted: bool,
    /// What the cryptography established.
    pub protection: Protection,
    /// The verified signer.
    pub signer: SignerIdentity,
    /// The signer's addresses, from its authenticated certificate.
    pub signer_emails: Vec<String>,
    /// The signature algorithm.
    pub algorithm: String,
    /// The time the signature states it was made, when it states one.
    pub signed_at: Option<time::OffsetDateTime>,
    /// What the profile opened but warns of ([`Verdict::warnings`]).
    pub warnings: Vec<String>,
    /// Our identities, asked only when the policy does not list our addresses: the
    /// recipient binding's default.
    pub our_identities: &'a dyn Fn() -> Vec<String>,
}

/// The authenticated entity: borrowed, or a buffer of the profile's (the decrypted
/// content) that the inner message may keep instead of copying from it.
pub(crate) enum Entity<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>, std::ops::Range<usize>),
}

impl Entity<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Entity::Borrowed(b) => b,
            Entity::Owned(buffer, range) => buffer.get(range.clone()).unwrap_or_default(),
        }
    }
}

/// Reads `a.entity` as the inner message and applies the binding's checks.
pub(crate) fn finish(mut a: Authenticated<'_>, policy: &OpenPolicy) -> Result<Opened, OpenError> {
    // Only now is the content authentic: read it as the inner MailA2A message.
    let header_protection = has_header_fields(a.entity.bytes());
    let inner = if header_protection {
        match std::mem::replace(&mut a.entity, Entity::Borrowed(&[])) {
            Entity::Borrowed(b) => MailA2aMessage::parse(b, &policy.limits)?,
            Entity::Owned(buffer, range) => {
                MailA2aMessage::parse_owned(buffer, range, &policy.limits)?
            }
        }
    } else {
        legacy_message(&a, policy)?
    };
    let mut violations = inner.check(&ValidationContext::new(Some(a.profile)));
    violations.extend(compare_outer(a.outer_headers, &inner.headers, a.encrypted));
    if !violations.is_empty() {
        return Err(OpenError::Invalid(violations));
    }
    let from = inner.sender().unwrap_or_default();
    if !a.signer_emails.contains(&from) {
        return Err(OpenError::Binding(BindingError::SignerIsNotSender {
            sender: from,
        }));
    }
    if !header_protection {
        // Nothing binds a legacy message's date but what is signed: without a signed
        // time it would be fresh whenever it is sent again.
        let env = inner.envelope();
        if a.signed_at.is_none() && env.created_at().is_none() && env.expires_at().is_none() {
            return Err(OpenError::Binding(BindingError::LegacyUndated {
                sender: from,
            }));
        }
    }
    if policy.check_recipients {
        let mut ours: Vec<String> = policy
            .our_addresses
            .iter()
            .map(|a| a.trim().to_ascii_lowercase())
            .collect();
        // The store's identities when the policy lists none; for MLS always our
        // member identity in this group (cheap: it is at hand).
        if ours.is_empty() || a.profile == Profile::Mls {
            ours.extend((a.our_identities)());
        }
        // A legacy message names its recipients only in the unsigned outer To: our own
        // such message may have been sent to anyone and mailed back to us.
        if !header_protection && ours.contains(&from) && !policy.own_copy {
            return Err(OpenError::Binding(BindingError::OwnMessageNotForUs));
        }
        // Only the protected To and Cc name us: our own address in From is no
        // exception (reflection), unless the caller asked for its own copy.
        let listed = crate::identity::recipients::names_us(
            inner.headers.to.iter().chain(&inner.headers.cc),
            &ours,
        );
        if !listed {
            if ours.contains(&from) {
                if !policy.own_copy {
                    return Err(OpenError::Binding(BindingError::OwnMessageNotForUs));
                }
            } else {
                return Err(OpenError::Binding(BindingError::NotARecipient));
            }
        }
    }
    policy.check_protection(&inner, a.protection)?;
    let mut protected_headers: Vec<String> = Vec::new();
    if header_protection {
        protected_headers.extend(
            [
                "From",
                "To",
                "Cc",
                "Date",
                "Message-ID",
                "In-Reply-To",
                "References",
                "Subject",
            ]
            .into_iter()
            .map(String::from),
        );
        protected_headers.extend(inner.headers.hints.iter().map(|(n, _)| n.to_string()));
    }
    Ok(Opened {
        message: inner,
        verdict: Verdict {
            profile: Some(a.profile),
            protection: a.protection,
            signer: Some(a.signer),
            protected_headers,
            outer_headers_matched: true,
            header_protection,
            algorithm: Some(a.algorithm),
            signed_at: a.signed_at,
            dkim: Vec::new(),
            warnings: a.warnings,
        },
    })
}

/// Whether the signed entity's header section has a From field: an entity with
/// header protection (RFC 9788) carries the message's header fields; a legacy
/// sender's carries only its Content-* fields.
fn has_header_fields(entity: &[u8]) -> bool {
    let mut rest = entity;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let line = &rest[..end];
        if line == b"\r\n" || line == b"\n" {
            return false;
        }
        if line.len() >= 5 && line[..5].eq_ignore_ascii_case(b"from:") {
            return true;
        }
        rest = &rest[end..];
    }
    false
}

/// A legacy sender's message (MailA2A 9.2): the outer header fields (unauthenticated
/// except for the From, which the signer binding below ties to the signature) over
/// the signed entity. Opened only from a peer the policy marks as legacy
/// ([`crate::identity::recipients`]), and refused when the policy demands header
/// protection of the sender.
fn legacy_message(a: &Authenticated<'_>, policy: &OpenPolicy) -> Result<MailA2aMessage, OpenError> {
    let sender = a
        .outer_headers
        .from
        .as_ref()
        .map(|m| m.normalized())
        .unwrap_or_default();
    if policy.require_header_protection
        || policy
            .require_header_protection_from
            .iter()
            .any(|p| p.trim().eq_ignore_ascii_case(&sender))
    {
        return Err(OpenError::Binding(BindingError::NoHeaderProtection {
            sender,
        }));
    }
    if !policy.legacy_peers.allows(&sender) {
        return Err(OpenError::Binding(BindingError::LegacyNotAllowed {
            sender,
        }));
    }
    let entity = a.entity.bytes();
    let mut bytes = Vec::with_capacity(entity.len() + 1024);
    crate::message::write_header_section(&mut bytes, a.outer_headers, &a.outer_headers.hints)
        .map_err(OpenError::Malformed)?;
    bytes.extend_from_slice(entity);
    Ok(MailA2aMessage::parse(&bytes, &policy.limits)?)
}

fn mismatch(name: &str) -> Violation {
    Violation::new(
        format!("header:{name}"),
        Code::HintMismatch,
        "outer header differs from the protected one",
    )
}

/// RFC 9788 / DESIGN: every outer value that is also protected must match it.
fn compare_outer(outer: &Headers, inner: &Headers, encrypted: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    let norm = |m: &Option<crate::message::Mailbox>| m.as_ref().map(|m| m.normalized());
    let list = |l: &[crate::message::Mailbox]| {
        let mut v: Vec<String> = l.iter().map(|m| m.normalized()).collect();
        v.sort();
        v
    };
    // Only values the outer message shows are compared: a missing outer field is no
    // claim (OpenSSL's `cms -sign` writes none), the inner one is authoritative.
    if outer.from.is_some() && norm(&outer.from) != norm(&inner.from) {
        out.push(mismatch("From"));
    }
    if !outer.to.is_empty() && list(&outer.to) != list(&inner.to) {
        out.push(mismatch("To"));
    }
    if !outer.cc.is_empty() && list(&outer.cc) != list(&inner.cc) {
        out.push(mismatch("Cc"));
    }
    if outer.message_id.is_some() && outer.message_id != inner.message_id {
        out.push(mismatch("Message-ID"));
    }
    if outer.in_reply_to.is_some() && outer.in_reply_to != inner.in_reply_to {
        out.push(mismatch("In-Reply-To"));
    }
    if outer.date.is_some() && outer.date != inner.date {
        out.push(mismatch("Date"));
    }
    // A signed-only message shows its Subject; an encrypted one shows "[...]" outside.
    if !encrypted && outer.subject.is_some() && outer.subject != inner.subject {
        out.push(mismatch("Subject"));
    }
    let hints = [
        (
            "Mail-A2A-Binding",
            &outer.hints.binding,
            &inner.hints.binding,
        ),
        (
            "Mail-A2A-Operation",
            &outer.hints.operation,
            &inner.hints.operation,
        ),
        ("Mail-A2A-Kind", &outer.hints.kind, &inner.hints.kind),
        (
            "Mail-A2A-Correlation-ID",
            &outer.hints.correlation_id,
            &inner.hints.correlation_id,
        ),
        (
            "Mail-A2A-Sequence",
            &outer.hints.sequence,
            &inner.hints.sequence,
        ),
        ("Mail-A2A-Final", &outer.hints.final_, &inner.hints.final_),
    ];
    for (name, o, i) in hints {
        if o.is_some() && o != i {
            out.push(mismatch(name));
        }
    }
    out
}
