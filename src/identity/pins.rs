//! Pins and bindings keyed by identity (address, key), not by the spelling they came from.
//!
//! An import path (a card fetched over HTTPS, a card file, a JWK file, a DID) reaches
//! an address's keys under a spelling the attacker may choose: another URL on the same
//! host, the host in capitals, a trailing `?`, a did:jwk instead of the JWK it
//! encodes. Anything keyed by that spelling is a "first use" again for each new one,
//! so the rules here key everything by what the spelling names:
//!
//! - **The pin of an address** ([`Pin`]) is what the store holds for it, whichever
//!   path put it there: the keys of the last card accepted for it, every JWK bound to
//!   it (by a card, `--jwk` or `--did`), the card's minimum protection and how far its
//!   signatures vouched for it, and the normalised origin it was fetched from
//!   ([`origin`]; recorded, but the address is the key). Every import for the address
//!   is compared with that pin ([`check`]): a key the store does not hold for it, a
//!   key of the last card gone, a lower minimum protection, or a card vouched for less
//!   than the one before (a signed card replaced by an unsigned one) is refused until
//!   the operator accepts the change (`--accept-changed`). Only an address the store
//!   does not identify at all takes what it is given (trust on first use): the pin
//!   also counts the certificates and OpenPGP certificates the store holds for the
//!   address, however imported ([`store_holds`]), and an address of a domain the
//!   store's anchors speak for (a certificate it holds for that domain chains to one
//!   of them) is never a first use either.
//! - **Plain imports** (`key import FILE`, [`check_import_files`]) are compared the
//!   same way for every address a certificate names (an extra SAN or User ID
//!   included), except our own (imported with their private key) and certificates
//!   that chain to the store's anchors (the CA the operator trusts vouches for them).
//! - **A key bound to addresses** moves to others only by an explicit rebind naming
//!   the addresses it is bound to now ([`check_rebind`], `--rebind ADDR`); a card,
//!   which speaks for its own address only, never moves one. Without this a did:jwk
//!   or a JWK file imported for Mallory would silently take Alice's key from her.
//!
//! Because the refusal is decided on the address and the key, no import path can undo
//! another's: a card change refused for Alice is refused again when the same key
//! comes as a DID for her, and a key refused to Mallory is refused again on her card.

use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::{EntryKind, KeyEntry, KeyStore};
use crate::profile::Protection;
use time::OffsetDateTime;

/// How far a card's signatures vouch for it. Ordered: the next card of an address
/// may stay at its pin's level or rise, not fall.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Vouched {
    /// No signature.
    Unsigned,
    /// Signatures that verify, by keys nobody in the store vouches for.
    Signed,
    /// A signature by a key the store pins or anchors for the address, or an operator
    /// key of its domain.
    Trusted,
}

impl std::fmt::Display for Vouched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Unsigned => "unsigned",
            Self::Signed => "signed by a key nobody here vouches for",
            Self::Trusted => "signed by a trusted key",
        })
    }
}

/// What the store holds for one address: the pin every import for it is compared
/// with, whatever path put it there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pin {
    /// The address, lower case.
    pub address: String,
    /// The key store fingerprints of the keys the last accepted card published.
    pub card_keys: Vec<String>,
    /// The key store fingerprints of the JWKs bound to the address (by a card,
    /// `--jwk` or `--did`).
    pub bound_keys: Vec<String>,
    /// The last accepted card's minimum protection.
    pub minimum: Option<Protection>,
    /// How far the last accepted card was vouched for.
    pub vouched: Option<Vouched>,
    /// The normalised origin the last card was fetched from (none: a file).
    pub origin: Option<String>,
    /// When the last card was accepted (RFC 3339).
    pub since: Option<String>,
    /// The key store fingerprints of the certificates and OpenPGP certificates the
    /// store holds for the address (ours or a peer's, however imported; not anchors):
    /// an address the store already has a key for is no first use ([`store_holds`]).
    pub held_keys: Vec<String>,
    /// The address's domain is one the store's anchors speak for: a certificate the
    /// store holds for an address of that domain chains to one of its anchors. A key
    /// offered for such an address outside that path is no first use either: the
    /// anchor, not the first certificate or card to arrive, says who it is.
    pub anchored: bool,
}

impl Pin {
    /// A pin of `address` with nothing held yet.
    pub fn new(address: &str) -> Pin {
        Pin {
            address: normalise_address(address),
            ..Pin::default()
        }
    }

    /// Whether nothing is held for the address (its first import is taken on trust).
    pub fn is_empty(&self) -> bool {
        self.card_keys.is_empty()
            && self.bound_keys.is_empty()
            && self.held_keys.is_empty()
            && !self.anchored
            && self.minimum.is_none()
            && self.vouched.is_none()
    }

    fn holds(&self, key: &str) -> bool {
        self.card_keys.iter().any(|k| k == key)
            || self.bound_keys.iter().any(|k| k == key)
            || self.held_keys.iter().any(|k| k == key)
    }
}

/// What an import would put in place for an address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offer {
    /// The address, lower case.
    pub address: String,
    /// The key store fingerprints of the keys offered.
    pub keys: Vec<String>,
    /// A card's minimum protection (none: a JWK or DID, which says nothing of it).
    pub minimum: Option<Protection>,
    /// How far a card is vouched for (none: a JWK or DID).
    pub vouched: Option<Vouched>,
    /// Whether the offer replaces the card's key set (a card: keys it no longer
    /// publishes are a change), or only adds keys (a JWK or DID).
    pub replaces: bool,
    /// The normalised origin it came from (none: a file).
    pub origin: Option<String>,
}

impl Offer {
    /// A card's offer: `keys` replace the card keys pinned for `address`.
    pub fn card(
        address: &str,
        keys: Vec<String>,
        minimum: Protection,
        vouched: Vouched,
        origin: Option<String>,
    ) -> Offer {
        Offer {
            address: normalise_address(address),
            keys,
            minimum: Some(minimum),
            vouched: Some(vouched),
            replaces: true,
            origin,
        }
    }

    /// A JWK or DID key offered for `address`, in addition to what it holds.
    pub fn key(address: &str, fingerprint: &str) -> Offer {
        Offer {
            address: normalise_address(address),
            keys: vec![fingerprint.to_string()],
            replaces: false,
            ..Offer::default()
        }
    }
}

/// How an offer differs from the pin of its address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Changes {
    /// Nothing was held for the address.
    pub first: bool,
    /// When the pin was made (RFC 3339), when known.
    pub since: Option<String>,
    /// Keys offered that the store does not hold for the address.
    pub added: Vec<String>,
    /// Keys of the last card that the new card no longer publishes.
    pub removed: Vec<String>,
    /// The minimum protection lowered: (held, offered).
    pub lowered: Option<(Protection, Protection)>,
    /// Vouched for less than before: (held, offered).
    pub less_vouched: Option<(Vouched, Vouched)>,
    /// Another origin than the pin's: (held, offered). Informative: the address, not
    /// the origin, is the key of the pin.
    pub origin: Option<(String, String)>,
    /// The store's anchors speak for the address's domain ([`Pin::anchored`]).
    pub anchored: bool,
}

impl Changes {
    /// Whether the change needs the operator's acceptance.
    pub fn needs_acceptance(&self) -> bool {
        !self.first
            && (!self.added.is_empty()
                || !self.removed.is_empty()
                || self.lowered.is_some()
                || self.less_vouched.is_some())
    }

    /// Whether the keys changed.
    pub fn keys_changed(&self) -> bool {
        !self.first && (!self.added.is_empty() || !self.removed.is_empty())
    }

    /// The changes that need acceptance, in words (empty when none).
    pub fn describe(&self) -> String {
        let list = |l: &[String]| {
            if l.is_empty() {
                "none".to_string()
            } else {
                l.join(", ")
            }
        };
        let mut parts = Vec::new();
        if self.keys_changed() {
            parts.push(format!(
                "its keys changed (added: {}; gone: {}{})",
                list(&self.added),
                list(&self.removed),
                if self.anchored {
                    "; a trust anchor of this store speaks for its domain"
                } else {
                    ""
                }
            ));
        }
        if let Some((held, offered)) = self.lowered {
            parts.push(format!(
                "its minimum protection is lowered from {held} to {offered}"
            ));
        }
        if let Some((held, offered)) = self.less_vouched {
            parts.push(format!("its card was {held} and is now {offered}"));
        }
        parts.join("; ")
    }
}

/// Why an import was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinError {
    /// The offer changes what the store holds for the address.
    #[error("what this store holds for {address} (since {since}) would change: {changes}: check with the agent, then import again with --accept-changed")]
    Changed {
        /// The address.
        address: String,
        /// When the pin was made.
        since: String,
        /// The changes, in words.
        changes: String,
    },
    /// The key is bound to other addresses, and moving it was not asked for.
    #[error("the key {key} is bound to {bound_to} in this store; binding it to {asked} would take it from them: if its owner moved it, import again with --rebind {rebind}")]
    BoundElsewhere {
        /// The key store fingerprint.
        key: String,
        /// The addresses it is bound to now.
        bound_to: String,
        /// The addresses asked for.
        asked: String,
        /// The `--rebind` arguments that would move it.
        rebind: String,
    },
    /// `--rebind` names addresses the key is not bound to (or leaves out some it is).
    #[error("--rebind {named}: the key {key} is bound to {bound_to}; name exactly the addresses it is bound to now")]
    RebindMismatch {
        /// The key store fingerprint.
        key: String,
        /// The addresses `--rebind` named.
        named: String,
        /// The addresses it is bound to now.
        bound_to: String,
    },
    /// The store could not be read to find what it holds for an address.
    #[error("cannot read what this store holds for {address}: {reason}")]
    Store {
        /// The address.
        address: String,
        /// Why.
        reason: String,
    },
    /// An import's input cannot be read (what the import itself would say of it).
    #[error("{reason}")]
    Unreadable {
        /// Why, as the key store said it.
        reason: String,
        /// The key store error's kind (its exit code).
        kind: ErrorKind,
    },
    /// A card's URL has no origin we can record.
    #[error("the URL {url} has no host to pin a card's origin to: {reason}")]
    Origin {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
}

impl Classify for PinError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InvalidParamsError
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Origin { .. } => ErrorKind::Malformed,
            Self::Store { .. } => ErrorKind::Other,
            Self::Unreadable { kind, .. } => *kind,
            _ => ErrorKind::Policy,
        }
    }
}

/// An address as pins key it: trimmed, lower case.
pub fn normalise_address(address: &str) -> String {
    address.trim().to_ascii_lowercase()
}

/// How `offer` differs from `held`, the pin of its address.
pub fn compare(held: &Pin, offer: &Offer) -> Changes {
    if held.is_empty() {
        return Changes {
            first: true,
            ..Changes::default()
        };
    }
    // An address the store knows only by a held certificate or its anchors (no card
    // pinned yet) takes a card vouched for by a key it pins or anchors for the
    // address: the key it already holds for it speaks for the new ones.
    let vouched_by_held = held.card_keys.is_empty()
        && held.vouched.is_none()
        && offer.vouched == Some(Vouched::Trusted);
    let mut added: Vec<String> = offer
        .keys
        .iter()
        .filter(|k| !held.holds(k) && !vouched_by_held)
        .cloned()
        .collect();
    added.sort();
    added.dedup();
    let mut removed: Vec<String> = if offer.replaces {
        held.card_keys
            .iter()
            .filter(|k| !offer.keys.contains(k))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    removed.sort();
    removed.dedup();
    let lowered = match (held.minimum, offer.minimum) {
        (Some(h), Some(o)) if o < h => Some((h, o)),
        _ => None,
    };
    let less_vouched = match (held.vouched, offer.vouched) {
        (Some(h), Some(o)) if o < h => Some((h, o)),
        _ => None,
    };
    let origin = match (&held.origin, &offer.origin) {
        (Some(h), Some(o)) if h != o => Some((h.clone(), o.clone())),
        _ => None,
    };
    Changes {
        first: false,
        since: held.since.clone(),
        added,
        removed,
        lowered,
        less_vouched,
        origin,
        anchored: held.anchored,
    }
}

/// Compares `offer` with `held` and refuses a change the operator did not accept:
/// a key the store does not hold for the address, a card key gone, a lower minimum,
/// a card vouched for less than the last.
pub fn check(held: &Pin, offer: &Offer, accept_changed: bool) -> Result<Changes, PinError> {
    let changes = compare(held, offer);
    if changes.needs_acceptance() && !accept_changed {
        return Err(PinError::Changed {
            address: offer.address.clone(),
            since: changes
                .since
                .clone()
                .unwrap_or_else(|| "an earlier import".into()),
            changes: changes.describe(),
        });
    }
    Ok(changes)
}

/// A key (`fingerprint`) bound to `bound_to` may be bound to `asked` only if that is
/// the same set of addresses, or the key is bound nowhere yet, or `rebind` names
/// exactly the addresses it is bound to now. `rebind` naming anything else is
/// refused too: a rebind is a statement about the current binding, so a wrong one is
/// a mistake to point out, not to ignore.
pub fn check_rebind(
    fingerprint: &str,
    bound_to: &[String],
    asked: &[String],
    rebind: &[String],
) -> Result<(), PinError> {
    let set = |l: &[String]| {
        let mut v: Vec<String> = l.iter().map(|a| normalise_address(a)).collect();
        v.sort();
        v.dedup();
        v
    };
    let (bound, asked, rebind) = (set(bound_to), set(asked), set(rebind));
    let names = |l: &[String]| {
        if l.is_empty() {
            "no address".to_string()
        } else {
            l.join(", ")
        }
    };
    if !rebind.is_empty() && rebind != bound {
        return Err(PinError::RebindMismatch {
            key: fingerprint.to_string(),
            named: rebind.join(" --rebind "),
            bound_to: names(&bound),
        });
    }
    if bound.is_empty() || bound == asked || rebind == bound {
        return Ok(());
    }
    Err(PinError::BoundElsewhere {
        key: fingerprint.to_string(),
        bound_to: names(&bound),
        asked: names(&asked),
        rebind: bound.join(" --rebind "),
    })
}

/// Adds to `pin` what `store` itself holds for its address at `at`: the certificates
/// and OpenPGP certificates naming it ([`Pin::held_keys`]), and whether its domain is
/// one the store's anchors speak for ([`Pin::anchored`]). A pin made only of cards
/// and JWKs would make an address the store already knows through a held certificate
/// or its anchors a "first use" for the next card or certificate naming it.
pub fn store_holds(
    pin: &mut Pin,
    store: &dyn KeyStore,
    at: OffsetDateTime,
) -> Result<(), PinError> {
    let address = pin.address.clone();
    let fail = |e: crate::keystore::KeyStoreError| PinError::Store {
        address: address.clone(),
        reason: e.to_string(),
    };
    let entries = store.list().map_err(fail)?;
    let mut held: Vec<String> = entries
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EntryKind::Certificate | EntryKind::OpenPgpCertificate
            )
        })
        .filter(|e| e.emails.iter().any(|a| normalise_address(a) == address))
        .map(|e| e.fingerprint.clone())
        .collect();
    held.sort();
    held.dedup();
    pin.held_keys = held;
    pin.anchored = domain_anchored(store, &entries, &address, at).map_err(fail)?;
    Ok(())
}

/// Whether a certificate `store` holds for an address of `address`'s domain chains to
/// one of the store's anchors on a path valid at `at` (through its intermediates).
fn domain_anchored(
    store: &dyn KeyStore,
    entries: &[KeyEntry],
    address: &str,
    at: OffsetDateTime,
) -> Result<bool, crate::keystore::KeyStoreError> {
    let Some((_, domain)) = address.rsplit_once('@') else {
        return Ok(false);
    };
    let (anchors, intermediates) = anchors_of(store)?;
    if anchors.is_empty() {
        return Ok(false);
    }
    let mut addresses: Vec<String> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Certificate)
        .flat_map(|e| e.emails.iter().map(|a| normalise_address(a)))
        .filter(|a| a.rsplit_once('@').map(|(_, d)| d) == Some(domain))
        .collect();
    addresses.sort();
    addresses.dedup();
    for a in addresses {
        for cert in decode(store.certificates_for(&a)?) {
            if anchored(&cert, &anchors, &intermediates, at) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn decode(l: Vec<crate::keystore::StoredCertificate>) -> Vec<x509_cert::Certificate> {
    use der::Decode;
    l.iter()
        .filter_map(|c| x509_cert::Certificate::from_der(&c.der).ok())
        .collect()
}

/// The store's anchors and intermediates, decoded.
#[allow(clippy::type_complexity)]
fn anchors_of(
    store: &dyn KeyStore,
) -> Result<
    (Vec<x509_cert::Certificate>, Vec<x509_cert::Certificate>),
    crate::keystore::KeyStoreError,
> {
    Ok((
        decode(store.trust_anchors()?),
        decode(store.intermediates()?),
    ))
}

/// `cert` chains to one of `anchors` (through `intermediates`) on a path valid at `at`.
fn anchored(
    cert: &x509_cert::Certificate,
    anchors: &[x509_cert::Certificate],
    intermediates: &[x509_cert::Certificate],
    at: OffsetDateTime,
) -> bool {
    let held = crate::identity::x509::Held {
        anchors,
        intermediates,
        revocation: crate::identity::crl::Revocation {
            crls: &[],
            require: false,
        },
    };
    matches!(
        crate::identity::x509::validate(cert, &[], &held, at).0,
        crate::identity::x509::Trust::Anchored
    )
}

/// [`check_import`] for the files of one `key import` (`inputs`: each file's bytes
/// and name, opened with `passphrase`), read as the import will read them and
/// compared as one import, so that a certificate and its private key in two files
/// are our own. An X.509 certificate that chains to one of the store's anchors (a
/// renewal, or a peer's second certificate, issued by a CA the store trusts) is not
/// compared: the anchor, which the operator chose, vouches for it.
pub fn check_import_files(
    store: &dyn KeyStore,
    inputs: &[(Vec<u8>, String)],
    passphrase: Option<&[u8]>,
    trusted: bool,
    pin_of: &dyn Fn(&str) -> Result<Pin, PinError>,
    accept_changed: bool,
    at: OffsetDateTime,
) -> Result<Vec<Changes>, PinError> {
    let unreadable = |e: crate::keystore::KeyStoreError| PinError::Unreadable {
        reason: e.to_string(),
        kind: e.kind(),
    };
    let mut entries = Vec::new();
    let mut certificates = Vec::new();
    for (bytes, name) in inputs {
        entries.extend(
            crate::keystore::describe_with_passphrase(bytes, name, passphrase)
                .map_err(unreadable)?,
        );
        certificates
            .extend(crate::keystore::certificates_in(bytes, name, passphrase).map_err(unreadable)?);
    }
    let (anchors, intermediates) = anchors_of(store).map_err(unreadable)?;
    let vouched: Vec<String> = certificates
        .iter()
        .filter(|c| anchored(c, &anchors, &intermediates, at))
        .map(|c| {
            crate::keystore::fingerprint(
                c.tbs_certificate()
                    .subject_public_key_info()
                    .subject_public_key
                    .raw_bytes(),
            )
        })
        .collect();
    entries.retain(|e| !vouched.contains(&e.fingerprint));
    check_import(store, &entries, trusted, pin_of, accept_changed, at)
}

/// Compares a plain import (`key import FILE`: certificates, OpenPGP certificates,
/// keys) with what the store holds for every address it names, so that no import path
/// undoes another's refusal: a certificate naming an address the store already
/// identifies (a pin, a held certificate or key, an anchored domain) with a key it
/// does not hold is refused until `accept_changed`; once accepted, the store holds it
/// for the address, which is what the next import is compared with. `entries` are
/// what the import would add ([`crate::keystore::describe_with_passphrase`]);
/// `pin_of` gives the card and JWK pin of an address. Anchors (`trusted`, the
/// operator's explicit choice of authority) and certificates imported with their
/// private key (our own) are not compared.
pub fn check_import(
    store: &dyn KeyStore,
    entries: &[KeyEntry],
    trusted: bool,
    pin_of: &dyn Fn(&str) -> Result<Pin, PinError>,
    accept_changed: bool,
    at: OffsetDateTime,
) -> Result<Vec<Changes>, PinError> {
    let mut out = Vec::new();
    if trusted {
        return Ok(out);
    }
    // Ours: its private key comes with it, or the store holds it already.
    let listed = store.list().map_err(|e| PinError::Store {
        address: "any address".into(),
        reason: e.to_string(),
    })?;
    let own = |fpr: &str| {
        entries
            .iter()
            .chain(listed.iter())
            .any(|e| e.fingerprint == fpr && e.has_private_key)
    };
    for e in entries {
        if !matches!(
            e.kind,
            EntryKind::Certificate | EntryKind::OpenPgpCertificate
        ) || e.has_private_key
            || own(&e.fingerprint)
        {
            continue;
        }
        let mut addresses: Vec<String> = e.emails.iter().map(|a| normalise_address(a)).collect();
        addresses.sort();
        addresses.dedup();
        for address in addresses {
            let mut held = pin_of(&address)?;
            store_holds(&mut held, store, at)?;
            let offer = Offer::key(&address, &e.fingerprint);
            out.push(check(&held, &offer, accept_changed)?);
        }
    }
    Ok(out)
}

/// The origin of `url` as a pin records it: scheme, host and port, normalised as the
/// `url` crate parses them (lower-case host, IDN as punycode, the scheme's default
/// port left out), with a trailing dot of the host dropped; no path, query or
/// fragment. `HTTPS://Agent.Example.:443/x?` and `https://agent.example/y` share one.
#[cfg(feature = "https")]
pub fn origin(url: &str) -> Result<String, PinError> {
    let bad = |reason: String| PinError::Origin {
        url: url.to_string(),
        reason,
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| bad("no host".into()))?
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if host.is_empty() {
        return Err(bad("no host".into()));
    }
    Ok(match parsed.port() {
        Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
        None => format!("{}://{host}", parsed.scheme()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held() -> Pin {
        Pin {
            address: "alice@example.com".into(),
            card_keys: vec!["k1".into()],
            bound_keys: vec!["j1".into()],
            minimum: Some(Protection::SignedEncrypted),
            vouched: Some(Vouched::Trusted),
            origin: Some("https://example.com".into()),
            since: Some("2026-01-01T00:00:00Z".into()),
            ..Pin::default()
        }
    }

    #[test]
    fn a_first_import_is_taken_and_the_same_card_again_is_no_change() {
        let offer = Offer::card(
            "Alice@Example.com",
            vec!["k1".into()],
            Protection::Signed,
            Vouched::Unsigned,
            None,
        );
        assert!(
            check(&Pin::new("alice@example.com"), &offer, false)
                .unwrap()
                .first
        );
        let same = Offer::card(
            "alice@example.com",
            vec!["k1".into(), "j1".into()],
            Protection::SignedEncrypted,
            Vouched::Trusted,
            Some("https://example.com".into()),
        );
        assert!(!check(&held(), &same, false).unwrap().needs_acceptance());
    }

    #[test]
    fn each_change_is_refused_until_accepted() {
        let cases = [
            (
                Offer::card(
                    "alice@example.com",
                    vec!["k2".into()],
                    Protection::SignedEncrypted,
                    Vouched::Trusted,
                    None,
                ),
                "its keys changed (added: k2; gone: k1)",
            ),
            (
                Offer::card(
                    "alice@example.com",
                    vec!["k1".into()],
                    Protection::Signed,
                    Vouched::Trusted,
                    None,
                ),
                "lowered from signed-encrypted to signed",
            ),
            (
                Offer::card(
                    "alice@example.com",
                    vec!["k1".into()],
                    Protection::SignedEncrypted,
                    Vouched::Unsigned,
                    None,
                ),
                "was signed by a trusted key and is now unsigned",
            ),
            (
                Offer::key("alice@example.com", "j2"),
                "added: j2; gone: none",
            ),
        ];
        for (offer, said) in cases {
            let e = check(&held(), &offer, false).unwrap_err();
            assert!(e.to_string().contains(said), "{e}");
            assert!(e.to_string().contains("--accept-changed"), "{e}");
            assert!(check(&held(), &offer, true).is_ok());
        }
        // A JWK already held, by any path, is no change.
        assert!(check(&held(), &Offer::key("alice@example.com", "k1"), false).is_ok());
    }

    #[test]
    fn an_address_held_or_anchored_is_no_first_use() {
        let mut held = Pin::new("alice@example.com");
        held.held_keys = vec!["c1".into()];
        assert!(check(&held, &Offer::key("alice@example.com", "c1"), false).is_ok());
        let e = check(&held, &Offer::key("alice@example.com", "m1"), false).unwrap_err();
        assert!(
            e.to_string().contains("alice@example.com")
                && e.to_string().contains("added: m1")
                && e.to_string().contains("--accept-changed"),
            "{e}"
        );
        let mut anchored = Pin::new("alice@example.com");
        anchored.anchored = true;
        let card = |vouched| {
            Offer::card(
                "alice@example.com",
                vec!["m1".into()],
                Protection::Signed,
                vouched,
                None,
            )
        };
        let e = check(&anchored, &card(Vouched::Unsigned), false).unwrap_err();
        assert!(e.to_string().contains("anchor of this store"), "{e}");
        assert!(check(&anchored, &card(Vouched::Signed), false).is_err());
        // A card a key the store holds or anchors for the address signed speaks with
        // that key's authority.
        assert!(check(&anchored, &card(Vouched::Trusted), false).is_ok());
        assert!(check(&held, &card(Vouched::Trusted), false).is_ok());
    }

    #[test]
    fn a_key_moves_only_by_a_rebind_naming_its_addresses() {
        let alice = vec!["alice@example.com".to_string()];
        let mallory = vec!["mallory@evil.example".to_string()];
        let both = vec![alice[0].clone(), mallory[0].clone()];
        assert!(check_rebind("f", &[], &mallory, &[]).is_ok());
        assert!(check_rebind("f", &alice, &alice, &[]).is_ok());
        for asked in [&mallory, &both] {
            let e = check_rebind("f", &alice, asked, &[]).unwrap_err();
            assert!(
                e.to_string()
                    .contains("bound to alice@example.com in this store")
                    && e.to_string().contains("--rebind alice@example.com"),
                "{e}"
            );
            assert!(check_rebind("f", &alice, asked, &alice).is_ok());
        }
        let e = check_rebind("f", &alice, &mallory, &mallory).unwrap_err();
        assert!(matches!(e, PinError::RebindMismatch { .. }), "{e}");
    }

    #[cfg(feature = "https")]
    #[test]
    fn respellings_of_one_origin_are_one_origin() {
        for u in [
            "https://agent.example.com/.well-known/agent-card.json",
            "https://agent.example.com/.well-known/agent-card.json?",
            "HTTPS://AGENT.Example.COM/other/path",
            "https://agent.example.com.:443/x#y",
        ] {
            assert_eq!(origin(u).unwrap(), "https://agent.example.com", "{u}");
        }
        assert_eq!(
            origin("https://bücher.example/card").unwrap(),
            "https://xn--bcher-kva.example"
        );
        assert_eq!(
            origin("https://127.0.0.1:8443/a").unwrap(),
            "https://127.0.0.1:8443"
        );
        assert!(origin("mailto:a@example.com").is_err());
    }
}
