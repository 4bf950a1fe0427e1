//! Agent Card key discovery (DESIGN decision 11): the MailA2A interface and the
//! `#protection` extension of an A2A v1.0 Agent Card, written for our keys and read
//! from a peer's card.
//!
//! The interface is `{"url": "mailto:ADDR", "protocolBinding": BINDING_URI,
//! "protocolVersion": "1.0"}`. The extension is an `AgentExtension` whose `uri` is
//! [`PROTECTION_URI`] and whose `params` are:
//!
//! ```json
//! {
//!   "profiles": ["smime-4", "openpgp-mime", "mls"],
//!   "minimumProtection": "signed-encrypted",
//!   "smimeCertificates": ["-----BEGIN CERTIFICATE-----\n..."],
//!   "openpgpCertificates": ["-----BEGIN PGP PUBLIC KEY BLOCK-----\n..."],
//!   "mlsKeyPackages": ["AAEABQ..."],
//!   "jwks": [{"kty": "OKP", "crv": "Ed25519", "x": "...", "alg": "EdDSA"}]
//! }
//! ```
//!
//! `profiles` uses the tokens of MailA2A section 9 (`smime-4`, `openpgp-mime`) and
//! `mls` for the group profile. `minimumProtection` is the weakest protection the agent
//! sends and accepts, for every kind of message: a receiver that imported the card
//! refuses anything weaker from that agent as a downgrade, and a sender sealing to it
//! never goes below it. S/MIME certificates are PEM, OpenPGP certificates ASCII armor,
//! MLS KeyPackages standard base64 of the MLSMessage (last-resort KeyPackages, so one
//! card serves many groups), JWKs (profile `detached-jws`) public JWK objects.
//!
//! Every key a card carries must belong to the card's address: a certificate's
//! rfc822Name, an OpenPGP User ID's email, a KeyPackage's credential identity. A card
//! cannot introduce keys for anyone else. A JWK names no address: the card's address
//! is the binding MailA2A asks to be declared, so a card's JWKs are bound to it alone. Signatures (`signatures`, JWS, see
//! `jws::compact`) are verified when present; one that does not verify refuses the
//! card. Who the signer is and how far the store trusts it is reported.
//!
//! Every import of a card ([`import_card`]: `card fetch URL`, `key import
//! --agent-card FILE`) is compared with the pin of its address
//! ([`crate::identity::pins`]), whatever URL, file, JWK or DID made that pin: keys the
//! store does not hold for the address, card keys gone, a lower minimum protection or
//! a card vouched for less than the last are refused until `--accept-changed`.

use serde_json::Value;

use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::KeyStoreError;
use crate::mls::MlsError;

#[cfg(feature = "https")]
mod fetch;
mod read;
mod sign;
mod write;

use crate::profile::Protection;
#[cfg(feature = "https")]
pub use fetch::{fetch_card, CardCache, FetchedCard};
pub use read::{
    import_card, import_keys, key_fingerprints, read_card, read_card_with, CardImport,
    ImportOptions, PeerCard,
};
pub use sign::{sign_card, CardOperators, CardSignature, SignerTrust};
pub use write::{to_pretty_json, write_card, CardFields};

/// The `uri` of the extension that carries an agent's protection profiles and keys.
pub const PROTECTION_URI: &str = "https://kotoba-lang.github.io/mail-a2a/spec/v1/#protection";

/// The largest card read (a card is a manifest, not a key ring).
pub const MAX_CARD_BYTES: usize = 1 << 20;

/// The most keys of one kind a card may carry.
pub const MAX_KEYS_PER_KIND: usize = 16;

/// Profile token of S/MIME 4.0 (MailA2A 9.2).
pub const SMIME_TOKEN: &str = "smime-4";
/// Profile token of OpenPGP/MIME (MailA2A 9.2).
pub const OPENPGP_TOKEN: &str = "openpgp-mime";
/// Profile token of the MLS group profile (MailA2A 9.3).
pub const MLS_TOKEN: &str = "mls";
/// The `profiles` token of the `jws` profile (MailA2A 9.2).
pub const JWS_TOKEN: &str = "detached-jws";

/// Why a card could not be written, read or imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CardError {
    /// The card is not UTF-8 JSON, is nested too deep, or is larger than
    /// [`MAX_CARD_BYTES`].
    #[error("agent card is not JSON: {0}")]
    NotJson(String),
    /// The card is not a valid A2A v1.0 AgentCard (the strict schema of
    /// `schemas/a2a-v1.0.1.strict.schema.json`).
    #[error("agent card is not a valid A2A v1.0 AgentCard: at `{pointer}`: {reason}")]
    Schema {
        /// JSON pointer of the first violation.
        pointer: String,
        /// The schema's reason.
        reason: String,
    },
    /// No MailA2A interface, several for different addresses, a `url` that is not a
    /// `mailto:` URI with one address, or a binding version other than 1.0.
    #[error("agent card: {0}")]
    Interface(String),
    /// The `#protection` extension is absent, repeated, or its params are not as this
    /// binding defines them.
    #[error("agent card #protection extension: {0}")]
    Protection(String),
    /// A key the card carries does not decode, or carries secret key material.
    #[error("agent card {what}: {reason}")]
    Key {
        /// Which key.
        what: String,
        /// Why (never key material).
        reason: String,
    },
    /// A key the card carries is not for the card's mailbox alone: it names another
    /// address (or none), and importing it would install it for that address too.
    #[error(
        "agent card of {address}: its {what} is for {named}, not for the card's address alone"
    )]
    ForeignKey {
        /// The card's address.
        address: String,
        /// Which key.
        what: String,
        /// The address(es) it names.
        named: String,
    },
    /// A signature is malformed, uses an algorithm that is not accepted, or names no
    /// key to check it with.
    #[error("agent card signature {index}: {reason}")]
    SignatureMalformed {
        /// Its position in `signatures`.
        index: usize,
        /// Why.
        reason: String,
    },
    /// A signature does not verify: the card changed after it was signed, or the
    /// certificate in `x5c` was altered.
    #[error("agent card signature {index} does not verify: the card is not as it was signed")]
    SignatureInvalid {
        /// Its position in `signatures`.
        index: usize,
    },
    /// A signature by a trusted key was required and the card has none.
    #[error("agent card of {0} has no signature by a key this store trusts (pinned certificate or trust anchor)")]
    Untrusted(String),
    /// The store holds nothing to publish for the address.
    #[error("no certificate, OpenPGP key or MLS identity of {0} in the store to publish")]
    NothingToPublish(String),
    /// Signing the card failed.
    #[error("agent card signing: {0}")]
    Sign(String),
    /// The key store failed.
    #[error(transparent)]
    Store(#[from] KeyStoreError),
    /// The MLS state failed (making a KeyPackage).
    #[error(transparent)]
    Mls(#[from] MlsError),
    /// Fetching the card over HTTPS failed.
    #[cfg(feature = "https")]
    #[error("agent card fetch: {0}")]
    Fetch(#[from] crate::https::FetchError),
    /// A card fetched from one host speaks for an address of another domain.
    #[error("the card at {host} is for {address}: a card fetched over HTTPS speaks only for addresses of its host's domain (import it from a file to vouch for it yourself)")]
    WrongHost {
        /// The URL's host.
        host: String,
        /// The card's address.
        address: String,
    },
    /// The card changes what the store holds for its address (its keys, its minimum
    /// protection, how far it is signed), or a JWK it carries is bound elsewhere.
    #[error(transparent)]
    Pin(#[from] crate::identity::pins::PinError),
}

impl Classify for CardError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Store(_) | Self::Sign(_) | Self::Mls(_) => A2aErrorType::InternalError,
            _ => A2aErrorType::InvalidParamsError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotJson(_)
            | Self::Schema { .. }
            | Self::Interface(_)
            | Self::Protection(_)
            | Self::Key { .. }
            | Self::SignatureMalformed { .. } => ErrorKind::Malformed,
            Self::SignatureInvalid { .. } => ErrorKind::Authentication,
            Self::ForeignKey { .. } | Self::Untrusted(_) | Self::WrongHost { .. } => {
                ErrorKind::Policy
            }
            Self::Pin(e) => e.kind(),
            #[cfg(feature = "https")]
            Self::Fetch(e) => e.kind(),
            Self::NothingToPublish(_) => ErrorKind::NoUsableKey,
            Self::Sign(_) => ErrorKind::NoUsableKey,
            Self::Store(e) => e.kind(),
            Self::Mls(e) => e.kind(),
        }
    }
}

/// What an agent publishes in its card's `#protection` extension.
#[derive(Clone, Debug)]
pub struct Published {
    /// S/MIME certificates, DER.
    pub smime_certificates: Vec<Vec<u8>>,
    /// OpenPGP certificates, ASCII armored, without secret key material.
    pub openpgp_certificates: Vec<Vec<u8>>,
    /// MLS KeyPackages (MLSMessage bytes).
    pub mls_key_packages: Vec<Vec<u8>>,
    /// Public JWKs of the `jws` profile (detached-jws), JSON objects.
    pub jwks: Vec<serde_json::Value>,
    /// The weakest protection the agent sends and accepts, for every kind of message.
    pub minimum: Protection,
    /// The resource limits it enforces, if published.
    pub limits: Option<CardLimits>,
}

/// The resource limits an agent publishes (MailA2A section 11: "Agent Cards SHOULD
/// publish maximum decoded message size, MIME part count, ... buffered reorder
/// window, expiry horizon"), in the `#protection` params as `limits`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardLimits {
    /// Largest raw message accepted, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u64>,
    /// Most transfer-decoded bytes over all parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_decoded_bytes: Option<u64>,
    /// Most MIME parts, containers included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mime_parts: Option<u64>,
    /// Deepest MIME nesting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mime_depth: Option<u64>,
    /// Deepest JSON nesting of the envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_json_depth: Option<u64>,
    /// MLS messages buffered per group while they wait for a Commit (the reorder
    /// window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_held_messages: Option<u64>,
    /// How long a message without `expiresAt` is accepted after its `createdAt`,
    /// seconds (the expiry horizon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_horizon_seconds: Option<u64>,
    /// Clock skew allowed on `createdAt` and `expiresAt`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<u64>,
}

impl CardLimits {
    /// What this build enforces with its default configuration.
    pub fn enforced() -> CardLimits {
        let l = crate::message::Limits::default();
        let r = crate::replay::ReceiverPolicy::default();
        CardLimits {
            max_message_bytes: Some(l.max_message_bytes as u64),
            max_decoded_bytes: Some(l.max_decoded_bytes as u64),
            max_mime_parts: Some(l.max_parts as u64),
            max_mime_depth: Some(l.max_mime_depth as u64),
            max_json_depth: Some(l.max_json_depth as u64),
            max_held_messages: Some(crate::mls::MlsConfig::default().max_held as u64),
            expiry_horizon_seconds: u64::try_from(r.default_lifetime).ok(),
            clock_skew_seconds: u64::try_from(r.skew).ok(),
        }
    }
}

/// `mailto:` + the address, with the characters RFC 6068 does not allow bare in an
/// addr-spec percent-encoded.
pub fn mailto(address: &str) -> String {
    let mut url = String::from("mailto:");
    for b in address.bytes() {
        let c = b as char;
        if c.is_ascii_alphanumeric() || "-._~!$'()*+;:@".contains(c) {
            url.push(c);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// The address of a `mailto:` URI with exactly one addr-spec, no header fields (no
/// pre-filled body, MailA2A section 3), lower case.
pub fn address_of_mailto(url: &str) -> Result<String, CardError> {
    let bad = |why: &str| CardError::Interface(format!("MailA2A interface url: {why}"));
    let rest = url
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("mailto:"))
        .map(|_| &url[7..])
        .ok_or_else(|| bad("not a mailto: URI"))?;
    if rest.contains('?') {
        return Err(bad("a mailto: URI with header fields (MailA2A 3: none)"));
    }
    if rest.contains(',') {
        return Err(bad("more than one address"));
    }
    let mut bytes = Vec::with_capacity(rest.len());
    let raw = rest.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hex = rest
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("a broken percent-encoding"))?;
            bytes.push(hex);
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    let address = String::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    if address.contains(',') {
        return Err(bad("more than one address"));
    }
    let mailbox = crate::message::Mailbox::new(&address);
    if mailbox.name.is_some() || mailbox.address != address || !mailbox.is_valid_addr_spec() {
        return Err(bad("not one addr-spec"));
    }
    Ok(mailbox.normalized())
}

/// The card against the strict A2A v1.0 AgentCard schema.
fn check_schema(card: &Value) -> Result<(), CardError> {
    check_schema_text(&card.to_string())
}

fn check_schema_text(text: &str) -> Result<(), CardError> {
    let faults = crate::envelope::check_a2a_json(text, "AgentCard", 1)
        .ok_or_else(|| CardError::NotJson("not JSON, or nested too deep".into()))?;
    match faults.into_iter().next() {
        None => Ok(()),
        Some((pointer, reason)) => Err(CardError::Schema {
            pointer: if pointer.is_empty() {
                "/".into()
            } else {
                pointer
            },
            reason: reason
                .strip_prefix("not a valid A2A v1.0 AgentCard: ")
                .map(str::to_string)
                .unwrap_or(reason),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailto_round_trips_and_refuses_what_is_not_one_address() {
        for a in [
            "bob@example.com",
            "a+b/c@example.com",
            "o'neil%x@example.org",
        ] {
            assert_eq!(address_of_mailto(&mailto(a)).unwrap(), a);
        }
        assert_eq!(
            address_of_mailto("MAILTO:Bob@Example.COM").unwrap(),
            "bob@example.com"
        );
        for bad in [
            "https://example.com/a2a",
            "mailto:a@example.com?body=hi",
            "mailto:a@example.com,b@example.com",
            "mailto:a%2Cb@example.com",
            "mailto:",
            "mailto:no-at-sign",
            "mailto:a@b@c",
            "mailto:a%zz@example.com",
            "mailto:Bob <bob@example.com>",
            "mailto:a%0d%0aBcc:x@example.com",
        ] {
            assert!(address_of_mailto(bad).is_err(), "{bad}");
        }
    }
}
