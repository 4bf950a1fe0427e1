//! DKIM (RFC 6376) on `mail-auth`: signing outbound mail, and verifying inbound mail as
//! an *outer transport signal*. A DKIM pass says that a domain's mail server handled
//! the message; it never authenticates the agent behind it, so it is reported beside
//! the verdict and never counts toward the protection an effectful operation needs
//! (the cryptography of the profile is the only authority).
//!
//! Keys come from a [`KeyMap`] (selector and domain to the DNS TXT record), never from
//! the network: a gateway fills it from its own DNS view, tests from fixtures.

use std::collections::HashMap;
use std::sync::Arc;

use mail_auth::common::crypto::{Ed25519Key, RsaKey, Sha256, SigningKey};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::common::parse::TxtRecordParser;
use mail_auth::common::verify::DomainKey;
use mail_auth::dkim::DkimSigner;
use mail_auth::{
    AuthenticatedMessage, DkimResult, MessageAuthenticator, Parameters, ResolverCache, Txt,
};

/// Why signing or verifying could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DkimError {
    /// The signing key is not a PKCS#8 Ed25519 or RSA key.
    #[error("DKIM key: {0}")]
    Key(String),
    /// The message cannot be signed (no From, no header section).
    #[error("DKIM signing: {0}")]
    Sign(String),
    /// A DNS record of the key map does not parse.
    #[error("DKIM key record for {name}: {reason}")]
    Record {
        /// `selector._domainkey.domain`.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

impl crate::error::Classify for DkimError {
    fn a2a_error(&self) -> crate::error::A2aErrorType {
        crate::error::A2aErrorType::InternalError
    }
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::ErrorKind::InvalidArgument
    }
}

/// The outcome of one DKIM signature (RFC 8601 result names).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DkimSignal {
    /// `pass`, `fail`, `neutral`, `temperror`, `permerror` or `none`.
    pub result: &'static str,
    /// The signing domain (`d=`), when a signature was read.
    pub domain: Option<String>,
    /// The selector (`s=`).
    pub selector: Option<String>,
    /// Why it did not pass.
    pub reason: Option<String>,
}

/// DKIM public keys by `selector._domainkey.domain`, parsed once when added.
#[derive(Clone, Default)]
pub struct KeyMap {
    /// By the fully qualified name (trailing dot) `mail-auth` looks up.
    records: HashMap<Box<str>, Txt>,
}

impl std::fmt::Debug for KeyMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.records.keys()).finish()
    }
}

impl KeyMap {
    /// An empty map (every signature's key is then "not found").
    pub fn new() -> Self {
        KeyMap::default()
    }

    /// Adds the TXT record (`v=DKIM1; k=ed25519; p=...`) of `selector` at `domain`.
    pub fn insert(&mut self, selector: &str, domain: &str, record: &str) -> Result<(), DkimError> {
        let name = format!("{selector}._domainkey.{domain}").to_ascii_lowercase();
        let key = DomainKey::parse(record.as_bytes()).map_err(|e| DkimError::Record {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        self.records.insert(
            format!("{name}.").into_boxed_str(),
            Txt::DomainKey(Arc::new(key)),
        );
        Ok(())
    }

    /// Reads a JSON object `{"selector._domainkey.domain": "v=DKIM1; ..."}`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, DkimError> {
        let map: HashMap<String, String> =
            serde_json::from_slice(bytes).map_err(|e| DkimError::Record {
                name: "(the key map)".into(),
                reason: e.to_string(),
            })?;
        let mut out = KeyMap::new();
        for (name, record) in map {
            let (selector, domain) =
                name.split_once("._domainkey.")
                    .ok_or_else(|| DkimError::Record {
                        name: name.clone(),
                        reason: "not selector._domainkey.domain".into(),
                    })?;
            out.insert(selector, domain, &record)?;
        }
        Ok(out)
    }
}

/// The resolver cache `mail-auth` looks in first: answers from the key map only, and
/// "not found" for every other name, so no lookup ever reaches the network.
struct StaticTxt<'a>(&'a HashMap<Box<str>, Txt>);

impl ResolverCache<Box<str>, Txt> for StaticTxt<'_> {
    fn get<Q>(&self, name: &Q) -> Option<Txt>
    where
        Box<str>: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        Some(self.0.get(name).cloned().unwrap_or_else(|| {
            Txt::Error(mail_auth::Error::Dns(mail_auth::DnsError::RecordNotFound(
                mail_auth::hickory_resolver::proto::op::ResponseCode::NXDomain,
            )))
        }))
    }
    fn remove<Q>(&self, _: &Q) -> Option<Txt>
    where
        Box<str>: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        None
    }
    fn insert(&self, _: Box<str>, _: Txt, _: std::time::Instant) {}
}

/// A DKIM signing key: PKCS#8 (DER or PEM), Ed25519 or RSA. The DER is kept (zeroized
/// on drop) and the key object made for each signature: `mail-auth`'s keys are not
/// `Clone`.
pub struct DkimSigningKey {
    der: zeroize::Zeroizing<Vec<u8>>,
    ed25519: bool,
    domain: String,
    selector: String,
}

impl DkimSigningKey {
    /// Reads a PKCS#8 private key (PEM or DER) for `selector` at `domain`.
    pub fn from_pkcs8(input: &[u8], domain: &str, selector: &str) -> Result<Self, DkimError> {
        let der = match std::str::from_utf8(input) {
            Ok(text) if text.contains("-----BEGIN") => {
                let (label, der) = der::pem::decode_vec(text.trim().as_bytes())
                    .map_err(|e| DkimError::Key(e.to_string()))?;
                if label != "PRIVATE KEY" {
                    return Err(DkimError::Key(format!(
                        "a {label}, not a PKCS#8 PRIVATE KEY"
                    )));
                }
                zeroize::Zeroizing::new(der)
            }
            _ => zeroize::Zeroizing::new(input.to_vec()),
        };
        let ed25519 = Ed25519Key::from_pkcs8_maybe_unchecked_der(&der).is_ok();
        if !ed25519 && rsa_key(&der).is_err() {
            return Err(DkimError::Key(
                "neither an Ed25519 nor an RSA PKCS#8 key".into(),
            ));
        }
        Ok(DkimSigningKey {
            der,
            ed25519,
            domain: domain.to_string(),
            selector: selector.to_string(),
        })
    }
}

#[allow(deprecated)] // from_key_der needs rustls-pki-types' wrapper for the same bytes
fn rsa_key(der: &[u8]) -> Result<RsaKey<Sha256>, DkimError> {
    RsaKey::<Sha256>::from_pkcs8_der(der).map_err(|e| DkimError::Key(e.to_string()))
}

/// The headers a DKIM signature of ours covers: the ones MailA2A correlates and routes
/// on, each listed once more than it appears so none can be added unnoticed.
const SIGNED: [&str; 12] = [
    "From",
    "To",
    "Cc",
    "Subject",
    "Date",
    "Message-ID",
    "In-Reply-To",
    "References",
    "MIME-Version",
    "Content-Type",
    "Mail-A2A-Binding",
    "Auto-Submitted",
];

fn sign_with<T: SigningKey>(key: T, k: &DkimSigningKey, raw: &[u8]) -> Result<Vec<u8>, DkimError> {
    let sig = DkimSigner::from_key(key)
        .domain(k.domain.clone())
        .selector(k.selector.clone())
        .headers(SIGNED)
        .sign(raw)
        .map_err(|e| DkimError::Sign(e.to_string()))?;
    let mut out = sig.to_header().into_bytes();
    out.extend_from_slice(raw);
    Ok(out)
}

/// Signs `raw` (a whole message): the message with a `DKIM-Signature` header first.
pub fn sign(raw: &[u8], key: &DkimSigningKey) -> Result<Vec<u8>, DkimError> {
    if AuthenticatedMessage::parse(raw).is_none() {
        return Err(DkimError::Sign("not an RFC 5322 message".into()));
    }
    if key.ed25519 {
        let k = Ed25519Key::from_pkcs8_maybe_unchecked_der(&key.der)
            .map_err(|e| DkimError::Key(e.to_string()))?;
        sign_with(k, key, raw)
    } else {
        sign_with(rsa_key(&key.der)?, key, raw)
    }
}

/// The authenticator, made once: building a resolver costs milliseconds. It is never
/// asked (the cache answers every name), so its default configuration is only a
/// placeholder.
fn authenticator() -> Option<&'static MessageAuthenticator> {
    static AUTH: std::sync::OnceLock<Option<MessageAuthenticator>> = std::sync::OnceLock::new();
    AUTH.get_or_init(|| MessageAuthenticator::new(Default::default(), Default::default()).ok())
        .as_ref()
}

/// Verifies every DKIM signature of `raw` with the keys of `keys`. An unsigned message
/// gives one `none`.
pub fn verify(raw: &[u8], keys: &KeyMap) -> Vec<DkimSignal> {
    let Some(message) = AuthenticatedMessage::parse(raw) else {
        return vec![DkimSignal {
            result: "permerror",
            domain: None,
            selector: None,
            reason: Some("not an RFC 5322 message".into()),
        }];
    };
    let cache = StaticTxt(&keys.records);
    let Some(authenticator) = authenticator() else {
        return vec![DkimSignal {
            result: "temperror",
            domain: None,
            selector: None,
            reason: Some("no resolver".into()),
        }];
    };
    let params = Parameters::new(&message).with_txt_cache(&cache);
    let outputs = pollster::block_on(authenticator.verify_dkim(params));
    if outputs.is_empty() {
        return vec![DkimSignal {
            result: "none",
            domain: None,
            selector: None,
            reason: None,
        }];
    }
    outputs
        .iter()
        .map(|o| {
            let (result, reason) = match o.result() {
                DkimResult::Pass => ("pass", None),
                DkimResult::Fail(e) => ("fail", Some(e.to_string())),
                DkimResult::Neutral(e) => ("neutral", Some(e.to_string())),
                DkimResult::PermError(e) => ("permerror", Some(e.to_string())),
                DkimResult::TempError(e) => ("temperror", Some(e.to_string())),
                DkimResult::None => ("none", None),
            };
            DkimSignal {
                result,
                domain: o.signature().map(|s| s.d.clone()),
                selector: o.signature().map(|s| s.s.clone()),
                reason,
            }
        })
        .collect()
}
