//! The `detached-jws` profile (MailA2A 9.2: "a JWS over canonical protected JSON for
//! non-confidential messages"): signed-only mail whose signature is a JWS (RFC 7515)
//! with a detached payload (appendix F), and the JWK and DID identities it is checked
//! against.
//!
//! # Wire format
//!
//! ```text
//! From: alice@jws.example            <- outer header fields, as for S/MIME and OpenPGP
//! To: bob@jws.example
//! Message-ID: <m-1@jws.example>
//! Date: ...
//! Mail-A2A-Binding: 1.0
//! MIME-Version: 1.0
//! Content-Type: multipart/signed; protocol="application/jose";
//!  micalg="jws-eddsa"; boundary="B"
//!
//! --B
//! From: alice@jws.example            <- the inner entity: the header fields (RFC 9788
//! To: bob@jws.example                   header protection) and the A2A parts, exactly
//! Message-ID: <m-1@jws.example>         as S/MIME and OpenPGP sign it
//! ...
//! Content-Type: multipart/mixed; ...
//!
//! ...application/a2a+json part, readable by anyone...
//! --B
//! Content-Type: application/jose
//!
//! eyJhbGciOiJFZERTQSIsImN0eSI6Im1lc3NhZ2UvcmZjODIyIiwia2lkIjoiLi4uIn0..SIGNATURE
//! --B--
//! ```
//!
//! The JWS payload is the first part exactly as multipart/signed signs it (RFC 1847:
//! from its first header to the CRLF before the delimiter, in canonical CRLF form); the
//! compact serialization leaves it out (`HEADER..SIGNATURE`), so the signing input is
//! `BASE64URL(HEADER) "." BASE64URL(entity)`. The protected header is `{"alg", "cty":
//! "message/rfc822", "kid"}`: `kid` is the signer's RFC 7638 JWK thumbprint and `cty`
//! says what was signed, so a JWS made over anything else (an Agent Card's JCS form) is
//! never taken for a mail signature.
//!
//! Why the inner entity and not the envelope's JCS form plus header claims: the entity
//! already binds the sender, the recipients, the Message-ID, the date and the
//! `Mail-A2A-*` hints together with the envelope and any attachment, and it is what
//! the two other direct profiles sign, so header protection, the signer and recipient
//! bindings and the outer/inner comparison are one code path for all three
//! (`binding::finish`). A second canonical form would be a second thing to get wrong.
//! `micalg` is `jws-` and the `alg` in lower case; the header's `alg` decides.
//!
//! Algorithms: EdDSA (Ed25519), ES256, ES384, RS256, PS256. Refused: `none`, HMAC,
//! any `crit`, `b64: false`, a key from the message (`jwk`, `x5c`, `jku` are never
//! trusted): the key is one the store binds to the sender's address.

pub(crate) mod compact;
pub mod did;
pub mod jwk;
mod offline;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::binding::{finish, Authenticated, Entity};
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::{KeyStore, KeyStoreError};
use crate::message::{canonical_crlf, read_outer, write_header_section, Hints, MailA2aMessage};
use crate::profile::{Profile, Protection};
use crate::seal::{
    OpenError, OpenPolicy, Opened, Opener, SealError, SealOptions, Sealer, SignerIdentity,
};

pub use compact::JwsAlgorithm;
pub use jwk::Jwk;

/// The `cty` of a mail signature's protected header.
pub const CONTENT_TYPE: &str = "message/rfc822";
/// Largest JWS text read from the signature part.
const MAX_JWS_BYTES: usize = 16 * 1024;

/// Why the `jws` profile refused or failed. Nothing in it is secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwsError {
    /// The message is not a detached-jws message (structure, encoding).
    #[error("not a detached-jws message: {0}")]
    Malformed(String),
    /// The protected header is not one we accept (`none`, HMAC, `crit`, another
    /// `cty`).
    #[error("JWS header refused: {0}")]
    Header(String),
    /// No JWK in the store has the signature's `kid` (or, without one, verifies it).
    #[error("signed by an unknown key (kid {}): import the sender's JWK with `key import --jwk FILE --email ADDR`, its DID, or its Agent Card", crate::error::quoted(.kid))]
    UnknownSigner {
        /// The `kid`, or `none`.
        kid: String,
    },
    /// The signature does not verify with the key its `kid` names.
    #[error("the JWS signature does not verify")]
    BadSignature,
    /// A JWK or DID could not be read or used.
    #[error("{0}")]
    Key(String),
    /// A DID could not be resolved.
    #[error("DID: {0}")]
    Did(String),
    /// No private key to sign with.
    #[error("no JWK with its private key bound to {address}: `mailseal key generate --kind jws --email {address}`")]
    NoSigningKey {
        /// The From address.
        address: String,
    },
    /// The key store failed.
    #[error(transparent)]
    Store(#[from] KeyStoreError),
    /// A binding the store's pins refuse: a key bound to another address, or a key
    /// that changes what an address holds.
    #[error(transparent)]
    Pin(#[from] crate::identity::pins::PinError),
}

impl Classify for JwsError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InvalidRequestError
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Malformed(_) | Self::Key(_) | Self::Did(_) => ErrorKind::Malformed,
            Self::Header(_) | Self::UnknownSigner { .. } | Self::BadSignature => {
                ErrorKind::Authentication
            }
            Self::NoSigningKey { .. } => ErrorKind::NoUsableKey,
            Self::Store(e) => e.kind(),
            Self::Pin(e) => e.kind(),
        }
    }
}

impl From<JwsError> for SealError {
    fn from(e: JwsError) -> Self {
        SealError::profile(Profile::Jws, e)
    }
}

impl From<JwsError> for OpenError {
    fn from(e: JwsError) -> Self {
        OpenError::profile(Profile::Jws, e)
    }
}

/// Parsed JWKs and signing keys, kept across messages by a long-lived owner (the
/// [`crate::Receiver`] and [`crate::Sender`] keep one): a JWK record is parsed and its
/// thumbprint computed once, a private key turned into a key pair once (for Ed25519
/// that is a scalar multiplication, as costly as the signature).
#[derive(Clone, Default)]
#[doc(hidden)]
pub struct KeyCache(std::sync::Arc<Caches>);

#[derive(Default)]
struct Caches {
    /// Record JSON -> the parsed key and its thumbprint.
    public: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<(Jwk, String)>>>,
    /// SHA-256 of the algorithm and a PKCS#8 key -> its key pair.
    signing:
        std::sync::Mutex<std::collections::HashMap<[u8; 32], std::sync::Arc<compact::KeyPair>>>,
}

/// Most entries a cache keeps before it starts again.
const CACHE_LIMIT: usize = 4096;

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl KeyCache {
    fn public(
        &self,
        record: &crate::keystore::StoredJwk,
    ) -> Result<std::sync::Arc<(Jwk, String)>, JwsError> {
        if let Some(k) = lock(&self.0.public).get(&record.jwk) {
            return Ok(k.clone());
        }
        let jwk = jwk::stored_key(record)?;
        let thumbprint = jwk.thumbprint();
        let entry = std::sync::Arc::new((jwk, thumbprint));
        let mut map = lock(&self.0.public);
        if map.len() >= CACHE_LIMIT {
            map.clear();
        }
        map.insert(record.jwk.clone(), entry.clone());
        Ok(entry)
    }

    fn signing(
        &self,
        alg: JwsAlgorithm,
        pkcs8: &[u8],
    ) -> Result<std::sync::Arc<compact::KeyPair>, JwsError> {
        use sha2::Digest;
        // The algorithm too: one RSA key may sign RS256 and PS256.
        let id: [u8; 32] = sha2::Sha256::new()
            .chain_update(alg.name())
            .chain_update(pkcs8)
            .finalize()
            .into();
        if let Some(k) = lock(&self.0.signing).get(&id) {
            return Ok(k.clone());
        }
        let pair =
            std::sync::Arc::new(compact::KeyPair::from_pkcs8(alg, pkcs8).map_err(JwsError::Key)?);
        let mut map = lock(&self.0.signing);
        if map.len() >= CACHE_LIMIT {
            map.clear();
        }
        map.insert(id, pair.clone());
        Ok(pair)
    }
}

/// The `jws` profile over a key store.
pub struct Jws<'a> {
    store: &'a dyn KeyStore,
    cache: KeyCache,
}

impl<'a> Jws<'a> {
    /// The profile over `store`: its JWK identities sign and verify.
    pub fn new(store: &'a dyn KeyStore) -> Self {
        Jws {
            store,
            cache: KeyCache::default(),
        }
    }

    /// As [`Jws::new`], reusing the parsed keys `cache` holds and adding to them.
    #[doc(hidden)]
    pub fn with_cache(store: &'a dyn KeyStore, cache: &KeyCache) -> Self {
        Jws {
            store,
            cache: cache.clone(),
        }
    }

    /// Our signing key for `address`: a JWK bound to it whose private key the store
    /// holds in software (the one whose fingerprint is `chosen`, when given).
    #[allow(clippy::type_complexity)]
    fn signing_key(
        &self,
        address: &str,
        chosen: Option<&str>,
    ) -> Result<
        (
            std::sync::Arc<(Jwk, String)>,
            std::sync::Arc<compact::KeyPair>,
        ),
        JwsError,
    > {
        for record in self.store.jwk_identities()? {
            if !record.emails.iter().any(|e| e == address)
                || chosen.is_some_and(|f| !record.fingerprint.eq_ignore_ascii_case(f))
            {
                continue;
            }
            if let Some(secret) = self.store.private_key(&record.fingerprint)? {
                if secret.token().is_some() {
                    continue;
                }
                let public = self.cache.public(&record)?;
                let pair = self.cache.signing(public.0.alg, secret.pkcs8_der())?;
                return Ok((public, pair));
            }
        }
        Err(JwsError::NoSigningKey {
            address: address.to_string(),
        })
    }

    /// Signs `entity` (canonical CRLF) with our key for `address` (`chosen`, when
    /// given): the compact JWS with the payload left out, and the algorithm.
    pub(crate) fn sign_entity(
        &self,
        address: &str,
        chosen: Option<&str>,
        entity: &[u8],
    ) -> Result<(String, JwsAlgorithm), JwsError> {
        let (public, pair) = self.signing_key(address, chosen)?;
        let (jwk, thumbprint) = &*public;
        let protected = protected_header(jwk, thumbprint);
        let input = compact::signing_input(&protected, entity);
        let sig = pair.sign(&input).map_err(JwsError::Key)?;
        Ok((
            format!("{protected}..{}", URL_SAFE_NO_PAD.encode(sig)),
            jwk.alg,
        ))
    }

    /// Verifies a compact JWS with a detached payload over `entity` against the
    /// store's JWK identities; the identity that verified it and the algorithm.
    pub fn verify_detached(
        &self,
        jws: &str,
        entity: &[u8],
    ) -> Result<(crate::keystore::StoredJwk, JwsAlgorithm), JwsError> {
        let parts: Vec<&str> = jws.split('.').collect();
        let [protected, payload, signature] = parts.as_slice() else {
            return Err(JwsError::Malformed(
                "the signature is not a JWS compact serialization (three parts)".into(),
            ));
        };
        if !payload.is_empty() {
            return Err(JwsError::Malformed(
                "the JWS carries its payload: detached-jws leaves it out (RFC 7515 appendix F)"
                    .into(),
            ));
        }
        let header = compact::parse_header(protected).map_err(JwsError::Header)?;
        if let Some(member) = header.key_members.first() {
            return Err(JwsError::Header(format!(
                "the protected header carries `{member}`: a mail signature's key is the one the store binds to the From address, never one the message names"
            )));
        }
        if !header
            .cty
            .as_deref()
            .is_some_and(|c| c.eq_ignore_ascii_case(CONTENT_TYPE))
        {
            return Err(JwsError::Header(format!(
                "cty is not {CONTENT_TYPE}: this JWS was not made for a mail entity"
            )));
        }
        let sig = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| JwsError::Malformed("the JWS signature is not base64url".into()))?;
        let input = compact::signing_input(protected, entity);
        let mut named = false;
        for record in self.store.jwk_identities()? {
            let Ok(entry) = self.cache.public(&record) else {
                continue;
            };
            let (key, thumbprint) = &*entry;
            if let Some(kid) = &header.kid {
                if !key.named_by(kid, thumbprint) {
                    continue;
                }
            }
            named = true;
            if !key.accepts(header.alg) {
                continue;
            }
            if key.key.verify(header.alg, &input, &sig) {
                return Ok((record, header.alg));
            }
        }
        if named {
            Err(JwsError::BadSignature)
        } else {
            Err(JwsError::UnknownSigner {
                kid: header.kid.unwrap_or_else(|| "none".into()),
            })
        }
    }
}

/// One line on a detached-jws message for `inspect`, without verifying it: the
/// protected header's algorithm and `kid`.
pub fn describe(raw: &[u8], limits: &crate::Limits) -> Result<String, JwsError> {
    let outer = read_outer(raw, limits).map_err(|e| JwsError::Malformed(e.to_string()))?;
    let sig = outer
        .parts
        .get(1)
        .filter(|p| p.media_type == "application/jose")
        .ok_or_else(|| JwsError::Malformed("no application/jose part".into()))?;
    let text = sig
        .decoded()
        .map_err(|e| JwsError::Malformed(e.to_string()))?;
    let text = String::from_utf8_lossy(&text);
    let protected = text.trim().split('.').next().unwrap_or_default();
    let header = compact::parse_header(protected).map_err(JwsError::Header)?;
    Ok(format!(
        "detached-jws (signed, not encrypted), {} by kid {} (not verified here)",
        header.alg.name(),
        header.kid.as_deref().unwrap_or("(none)")
    ))
}

impl Sealer for Jws<'_> {
    /// Signs (never encrypts: the profile is for non-confidential messages; the
    /// Sender refuses it for a peer whose minimum is `signed-encrypted`).
    fn seal(&self, plain: &MailA2aMessage, opts: &SealOptions) -> Result<Vec<u8>, SealError> {
        let (from, _) = crate::seal::sealing_addresses(plain, opts, Profile::Jws)?;
        let hints = if opts.outer_hints {
            plain.headers.hints.clone()
        } else {
            Hints::binding_only()
        };
        let mut entity = Vec::new();
        plain.write_inner_entity(false, false, &mut entity)?;
        let at = opts
            .signing_time
            .unwrap_or_else(time::OffsetDateTime::now_utc);
        self.seal_raw_as(
            &plain.headers,
            &hints,
            &entity,
            &from,
            opts.signer.as_deref(),
            at,
        )
    }
}

impl Jws<'_> {
    /// `entity` as it is, signed by our key for `signer`, under `headers` and outer
    /// `hints`. Nothing of `entity` is checked: the sealer's own last step, and what
    /// the conformance corpus ([`crate::corpus`]) signs its hostile inner entities
    /// with. As S/MIME and OpenPGP sign-only, the boundary follows from the entity and
    /// `at` (no time is signed here: the message's own Date stands for it).
    pub(crate) fn seal_raw(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signer: &str,
        at: time::OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        self.seal_raw_as(headers, hints, entity, signer, None, at)
    }

    /// [`Self::seal_raw`] with the key whose fingerprint is `chosen`, when given.
    fn seal_raw_as(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signer: &str,
        chosen: Option<&str>,
        at: time::OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        let boundary = crate::seal::content_boundary(entity, at)?;
        let (jws, alg) =
            self.sign_entity(signer, chosen, entity)
                .map_err(|e| match (e, chosen) {
                    (JwsError::NoSigningKey { address }, Some(f)) => SealError::NoSuchSigner {
                        address,
                        signer: f.to_string(),
                    },
                    (e, _) => e.into(),
                })?;
        let mut head = Vec::with_capacity(1024);
        write_header_section(&mut head, headers, hints)?;
        Ok(signed_message(&head, &boundary, alg, entity, &jws))
    }
}

/// The protected header of a mail signature by `jwk` (base64url of its JSON): the
/// algorithm, `cty` (so a mail signature is never taken for a card signature) and the
/// key's RFC 7638 thumbprint.
pub(crate) fn protected_header(jwk: &Jwk, thumbprint: &str) -> String {
    let header = serde_json::json!({
        "alg": jwk.alg.name(),
        "cty": CONTENT_TYPE,
        "kid": thumbprint,
    });
    URL_SAFE_NO_PAD.encode(header.to_string())
}

/// A detached-jws message: `head`, then `multipart/signed` over `entity` with the
/// compact JWS `jws` (payload left out).
pub(crate) fn signed_message(
    head: &[u8],
    boundary: &str,
    alg: JwsAlgorithm,
    entity: &[u8],
    jws: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len() + entity.len() + jws.len() + 512);
    out.extend_from_slice(head);
    out.extend_from_slice(
        format!(
            "Content-Type: multipart/signed; protocol=\"application/jose\";\r\n micalg=\"jws-{}\"; boundary=\"{boundary}\"\r\n\r\n--{boundary}\r\n",
            alg.name().to_ascii_lowercase()
        )
        .as_bytes(),
    );
    out.extend_from_slice(entity);
    out.extend_from_slice(
        format!(
            "\r\n--{boundary}\r\nContent-Type: application/jose\r\nContent-Disposition: attachment; filename=\"signature.jws\"\r\n\r\n{jws}\r\n--{boundary}--\r\n"
        )
        .as_bytes(),
    );
    out
}

impl Opener for Jws<'_> {
    fn open(&self, raw: &[u8], policy: &OpenPolicy) -> Result<Opened, OpenError> {
        let outer = read_outer(raw, &policy.limits)?;
        let protocol = outer.param("protocol").map(str::to_ascii_lowercase);
        if outer.media_type != "multipart/signed" || protocol.as_deref() != Some("application/jose")
        {
            return Err(JwsError::Malformed(format!(
                "{} is not multipart/signed with protocol application/jose",
                outer.media_type
            ))
            .into());
        }
        let [content, sig] = outer.parts.as_slice() else {
            return Err(
                JwsError::Malformed("multipart/signed must have exactly two parts".into()).into(),
            );
        };
        if sig.media_type != "application/jose" {
            return Err(
                JwsError::Malformed("the second part is not application/jose".into()).into(),
            );
        }
        let text = sig.decoded()?;
        if text.len() > MAX_JWS_BYTES {
            return Err(JwsError::Malformed(format!(
                "a signature part of {} bytes, more than {MAX_JWS_BYTES}",
                text.len()
            ))
            .into());
        }
        let jws: String = String::from_utf8_lossy(&text)
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let entity = canonical_crlf(content.entity);
        let (record, alg) = self.verify_detached(&jws, &entity)?;
        let thumbprint = self.cache.public(&record)?.1.clone();
        finish(
            Authenticated {
                profile: Profile::Jws,
                entity: Entity::Borrowed(&entity),
                outer_headers: &outer.headers,
                encrypted: false,
                protection: Protection::Signed,
                signer: SignerIdentity::Jwk {
                    thumbprint,
                    emails: record.emails.clone(),
                    source: record.source.clone(),
                },
                signer_emails: record.emails,
                algorithm: alg.name().to_string(),
                signed_at: None,
                warnings: Vec::new(),
                our_identities: &|| crate::keystore::own_addresses(self.store),
            },
            policy,
        )
    }
}

crate::error::verdict_codes!(JwsError, "jws", {
    Self::Malformed(_) => "malformed",
    Self::Header(_) => "header",
    Self::UnknownSigner { .. } => "unknown-signer",
    Self::BadSignature => "bad-signature",
    Self::Key(_) => "key",
    Self::Did(_) => "did",
    Self::NoSigningKey { .. } => "no-signing-key",
    Self::Store(_) => "key-store",
    Self::Pin(_) => "pin",
});
