//! The opener that picks a profile from the outer Content-Type. It alone knows every
//! profile; a profile missing from this build is reported as such, never guessed at.
//!
//! Unprotected messages are opened here too, and then the downgrade rule decides: with
//! the default policy an effectful request that is not at least signed is refused.

use crate::envelope::ValidationContext;
use crate::message::MailA2aMessage;
use crate::profile::{Profile, Protection};
use crate::seal::{OpenError, OpenPolicy, Opened, Opener, Verdict};

/// The profile an outer Content-Type announces, or `None` for a plain message.
pub fn detect_profile(raw: &[u8]) -> Option<Profile> {
    let ct = outer_content_type(raw)?.to_ascii_lowercase();
    if ct.starts_with("application/pkcs7-mime")
        || ct.starts_with("application/x-pkcs7-mime")
        || (ct.starts_with("multipart/signed") && ct.contains("pkcs7-signature"))
    {
        Some(Profile::Smime)
    } else if ct.starts_with("multipart/encrypted") && ct.contains("pgp-encrypted")
        || (ct.starts_with("multipart/signed") && ct.contains("pgp-signature"))
    {
        Some(Profile::OpenPgp)
    } else if ct.starts_with("message/mls") {
        Some(Profile::Mls)
    } else if ct.starts_with("multipart/signed") && ct.contains("application/jose") {
        Some(Profile::Jws)
    } else {
        None
    }
}

/// The unfolded value of the top-level Content-Type header, if any. Works on bytes:
/// header bytes are untrusted and need not be UTF-8.
fn outer_content_type(raw: &[u8]) -> Option<String> {
    const NAME: &[u8] = b"content-type:";
    let mut value: Option<Vec<u8>> = None;
    for line in raw.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break; // end of the header section
        }
        if let Some(v) = value.as_mut() {
            if line[0] == b' ' || line[0] == b'\t' {
                v.push(b' ');
                v.extend_from_slice(line.trim_ascii());
                continue;
            }
            break;
        }
        if line.len() > NAME.len() && line[..NAME.len()].eq_ignore_ascii_case(NAME) {
            value = Some(line[NAME.len()..].trim_ascii().to_vec());
        }
    }
    value.map(|v| String::from_utf8_lossy(&v).into_owned())
}

/// The parsed keys of every profile, kept across messages by a long-lived owner.
#[derive(Clone, Default)]
#[doc(hidden)]
pub struct ProfileCaches {
    /// S/MIME private keys.
    pub smime: crate::smime::KeyCache,
    /// OpenPGP certificates and secret keys.
    pub openpgp: crate::openpgp::CertCache,
    /// JWKs and JWS signing keys.
    pub jws: crate::jws::KeyCache,
}

/// Opens any MailA2A message: plain ones here, protected ones through their profile.
#[derive(Default)]
pub struct Dispatcher<'a> {
    profiles: Vec<(Profile, Box<dyn Opener + 'a>)>,
}

impl<'a> Dispatcher<'a> {
    /// A dispatcher with no profile (plain messages only).
    pub fn new() -> Self {
        Dispatcher::default()
    }

    /// A dispatcher with every profile this build has, over `store`.
    pub fn with_store(store: &'a dyn crate::keystore::KeyStore) -> Self {
        Dispatcher::new()
            .with_profile(Profile::Smime, Box::new(crate::smime::Smime::new(store)))
            .with_profile(
                Profile::OpenPgp,
                Box::new(crate::openpgp::OpenPgp::new(store)),
            )
            .with_profile(Profile::Jws, Box::new(crate::jws::Jws::new(store)))
    }

    /// As [`Dispatcher::with_store`], reusing the parsed keys of `caches` (the long-lived
    /// receiver's), so a message does not parse again what the one before it parsed.
    #[doc(hidden)]
    pub fn with_caches(store: &'a dyn crate::keystore::KeyStore, caches: &ProfileCaches) -> Self {
        Dispatcher::new()
            .with_profile(
                Profile::Smime,
                Box::new(crate::smime::Smime::with_cache(store, &caches.smime)),
            )
            .with_profile(
                Profile::OpenPgp,
                Box::new(crate::openpgp::OpenPgp::with_cache(store, &caches.openpgp)),
            )
            .with_profile(
                Profile::Jws,
                Box::new(crate::jws::Jws::with_cache(store, &caches.jws)),
            )
    }

    /// Adds the opener of a profile.
    pub fn with_profile(mut self, profile: Profile, opener: Box<dyn Opener + 'a>) -> Self {
        self.profiles.push((profile, opener));
        self
    }

    fn open_plain(&self, raw: &[u8], policy: &OpenPolicy) -> Result<Opened, OpenError> {
        let message = MailA2aMessage::parse(raw, &policy.limits)?;
        let violations = message.check(&ValidationContext::default());
        if !violations.is_empty() {
            return Err(OpenError::Invalid(violations));
        }
        policy.check_protection(&message, Protection::None)?;
        Ok(Opened {
            message,
            verdict: Verdict {
                profile: None,
                protection: Protection::None,
                signer: None,
                protected_headers: Vec::new(),
                outer_headers_matched: true,
                header_protection: false,
                algorithm: None,
                signed_at: None,
                dkim: Vec::new(),
                warnings: Vec::new(),
            },
        })
    }
}

impl Dispatcher<'_> {
    /// The opener of `raw`'s profile (`None`: a plain message), after the size bound.
    fn opener_for(
        &self,
        raw: &[u8],
        policy: &OpenPolicy,
    ) -> Result<Option<&(dyn Opener + '_)>, OpenError> {
        if raw.len() > policy.limits.max_message_bytes {
            return Err(crate::message::MessageError::TooLarge {
                size: raw.len(),
                limit: policy.limits.max_message_bytes,
            }
            .into());
        }
        match detect_profile(raw) {
            None => Ok(None),
            Some(p) => match self.profiles.iter().find(|(q, _)| *q == p) {
                Some((_, opener)) => Ok(Some(opener.as_ref())),
                None => Err(OpenError::ProfileUnavailable(p)),
            },
        }
    }
}

impl Opener for Dispatcher<'_> {
    fn open(&self, raw: &[u8], policy: &OpenPolicy) -> Result<Opened, OpenError> {
        let mut opened = match self.opener_for(raw, policy)? {
            None => self.open_plain(raw, policy),
            Some(opener) => opener.open(raw, policy),
        }?;
        if let Some(keys) = &policy.dkim_keys {
            opened.verdict.dkim = crate::dkim::verify(raw, keys);
        }
        Ok(opened)
    }

    /// The outer DKIM signatures are checked first: the profile may then decode and
    /// decrypt in the buffer.
    fn open_owned(&self, raw: Vec<u8>, policy: &OpenPolicy) -> Result<Opened, OpenError> {
        let opener = self.opener_for(&raw, policy)?;
        let dkim = policy
            .dkim_keys
            .as_ref()
            .map(|keys| crate::dkim::verify(&raw, keys));
        let mut opened = match opener {
            None => self.open_plain(&raw, policy),
            Some(opener) => opener.open_owned(raw, policy),
        }?;
        if let Some(dkim) = dkim {
            opened.verdict.dkim = dkim;
        }
        Ok(opened)
    }
}
