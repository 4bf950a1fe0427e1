//! Who a message is for: us among the protected recipients, no reflection of our own
//! mail, and legacy mail only from peers marked as legacy.
//!
//! Every decision here reads only what the signature covers. A message with header
//! protection (RFC 9788) carries its To and Cc inside the signed entity: we must be
//! named there ([`names_us`]), or the message was signed for someone else and forwarded
//! (surreptitious forwarding), or it is our own mail reflected back to us by its
//! recipient. A message signed by one of our own identities gets no exception: the
//! sender's copy of its own mail is opened only when the caller asks for exactly that
//! (`open --own-copy`, [`crate::OpenPolicy::own_copy`]), never by default, since
//! otherwise anyone we wrote to could mail our message back to us and have it
//! delivered as if we had asked ourselves.
//!
//! A legacy sender's message (MailA2A 9.2: `openssl cms -sign` or `gpg --sign` of the
//! A2A part alone) carries no header fields inside the signature: its To, Cc and Date
//! are the outer ones, which anyone can rewrite. Nothing binds its recipients or its
//! date, so it is opened only from peers the store marks as legacy ([`LegacyPeers`]:
//! `open --allow-legacy-from ADDR|@DOMAIN`, a peer policy's `legacy`, the gateway's
//! `allow_legacy_from`), and its lifetime is taken from signed data (the envelope's
//! `createdAt`/`expiresAt`, else the signature's own time), never the outer Date.

use crate::message::Mailbox;

/// The peers whose mail may arrive without header protection: addresses and whole
/// domains (`@example.com`), lower case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LegacyPeers {
    addresses: Vec<String>,
    domains: Vec<String>,
}

/// A legacy mark that is neither an address nor `@DOMAIN`.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LegacyMarkError {
    /// Not `local@domain` nor `@domain`.
    #[error("{0:?} is neither an address (agent@example.com) nor a domain (@example.com)")]
    NotAnAddressOrDomain(String),
}

impl LegacyPeers {
    /// No peer is legacy: every signed message must protect its header fields.
    pub fn none() -> Self {
        Self::default()
    }

    /// Marks `spec` as legacy: an address (`agent@example.com`) or every address of a
    /// domain (`@example.com`, that domain only, not its subdomains).
    pub fn add(&mut self, spec: &str) -> Result<(), LegacyMarkError> {
        let s = spec.trim().trim_end_matches('.').to_ascii_lowercase();
        let bad = || LegacyMarkError::NotAnAddressOrDomain(spec.to_string());
        if let Some(domain) = s.strip_prefix('@') {
            if domain.is_empty()
                || domain.contains('@')
                || !domain
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                return Err(bad());
            }
            if !self.domains.iter().any(|d| d == domain) {
                self.domains.push(domain.to_string());
            }
            return Ok(());
        }
        if !Mailbox::new(&s).is_valid_addr_spec() {
            return Err(bad());
        }
        let normalized = Mailbox::new(&s).normalized();
        if !self.addresses.contains(&normalized) {
            self.addresses.push(normalized);
        }
        Ok(())
    }

    /// Whether `sender` (an address) is marked as legacy.
    pub fn allows(&self, sender: &str) -> bool {
        let sender = Mailbox::new(sender).normalized();
        if sender.is_empty() {
            return false;
        }
        self.addresses.contains(&sender)
            || sender
                .rsplit_once('@')
                .is_some_and(|(_, d)| self.domains.iter().any(|x| x == d))
    }

    /// Whether no peer is marked.
    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty() && self.domains.is_empty()
    }

    /// The marks, as given to [`LegacyPeers::add`] (addresses, then `@domains`).
    pub fn marks(&self) -> Vec<String> {
        self.addresses
            .iter()
            .cloned()
            .chain(self.domains.iter().map(|d| format!("@{d}")))
            .collect()
    }
}

impl std::str::FromStr for LegacyPeers {
    type Err = LegacyMarkError;
    /// One mark, or several separated by commas.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = LegacyPeers::default();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            out.add(part)?;
        }
        Ok(out)
    }
}

/// Whether the protected recipients (`to` and `cc` of the signed entity) name one of
/// `ours` (normalized addresses). The sender is not a recipient: our own address in
/// From counts for nothing here.
pub fn names_us<'a>(recipients: impl IntoIterator<Item = &'a Mailbox>, ours: &[String]) -> bool {
    recipients
        .into_iter()
        .any(|m| ours.contains(&m.normalized()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_marks_are_addresses_or_whole_domains() {
        let mut p = LegacyPeers::none();
        assert!(!p.allows("alice@example.com"));
        p.add("Alice@Example.com").unwrap();
        p.add("@legacy.example.").unwrap();
        assert!(p.allows("alice@example.com"));
        assert!(p.allows("ALICE@example.COM"));
        assert!(!p.allows("bob@example.com"));
        assert!(p.allows("any@legacy.example"));
        assert!(!p.allows("any@sub.legacy.example"));
        assert!(!p.allows("any@notlegacy.example"));
        assert!(!p.allows(""));
        for bad in ["", "@", "example.com", "@a@b", "@exa mple.com", "a@@b"] {
            assert!(p.clone().add(bad).is_err(), "{bad:?}");
        }
        assert_eq!(p.marks(), ["alice@example.com", "@legacy.example"]);
        let parsed: LegacyPeers = "alice@example.com, @legacy.example".parse().unwrap();
        assert_eq!(parsed, p);
    }

    #[test]
    fn our_address_in_from_does_not_name_us() {
        let to = [Mailbox::new("mallory@evil.example")];
        let ours = vec!["alice@example.com".to_string()];
        assert!(!names_us(&to, &ours));
        let to = [Mailbox::new("Alice@Example.com")];
        assert!(names_us(&to, &ours));
    }
}
