//! The three steps: [`prepare`] and [`assemble`] on the connected host, [`review`]
//! and [`Review::sign`] on the offline one. The checks both hosts make of a request
//! are one function, [`check`].

use time::OffsetDateTime;

use super::request::{Covers, SigningRequest, SigningResponse};
use super::summary::Summary;
use super::OfflineError;
use crate::dispatch::ProfileCaches;
use crate::envelope::ValidationContext;
use crate::jws::Jws;
use crate::keystore::KeyStore;
use crate::message::{write_header_section, Headers, Hints, Limits, MailA2aMessage};
use crate::openpgp::offline::Template;
use crate::openpgp::OpenPgp;
use crate::profile::Profile;
use crate::seal::{content_boundary, SealError, SealOptions};
use crate::smime::offline as smime_parts;
use crate::smime::Smime;

fn whole_seconds(t: OffsetDateTime) -> OffsetDateTime {
    let t = t.to_offset(time::UtcOffset::UTC);
    t.replace_nanosecond(0).unwrap_or(t)
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// What `msg` states, as a request shows it.
fn covers(msg: &MailA2aMessage) -> Covers {
    let h = &msg.headers;
    let env = msg.envelope();
    Covers {
        from: h
            .from
            .as_ref()
            .map(|m| m.address.clone())
            .unwrap_or_default(),
        to: h.to.iter().map(|m| m.address.clone()).collect(),
        cc: h.cc.iter().map(|m| m.address.clone()).collect(),
        subject: h.subject.clone(),
        date: h.date.map(rfc3339).unwrap_or_default(),
        message_id: h.message_id.clone().unwrap_or_default(),
        in_reply_to: h.in_reply_to.clone(),
        kind: env
            .kind()
            .map(|k| k.as_str().to_string())
            .unwrap_or_default(),
        operation: env
            .operation()
            .map(|o| o.as_str().to_string())
            .unwrap_or_default(),
        expires_at: env.expires_at().map(rfc3339),
    }
}

/// The OpenPGP template a request carries: its trailer, read back and rebuilt.
fn template_of(request: &SigningRequest) -> Result<Template, OfflineError> {
    let tbs = &request.to_be_signed;
    let key = request.signing_key.clone().ok_or_else(|| {
        OfflineError::Inconsistent("the OpenPGP request names no signing key".into())
    })?;
    if tbs.len() < 12 || tbs[0] != 4 {
        return Err(OfflineError::Inconsistent(
            "the OpenPGP trailer is not a v4 signature trailer".into(),
        ));
    }
    let len = u16::from_be_bytes([tbs[4], tbs[5]]) as usize;
    let area = tbs
        .get(6..6 + len)
        .ok_or_else(|| OfflineError::Inconsistent("the OpenPGP trailer is cut short".into()))?;
    let template = Template {
        key,
        pk_algo: tbs[2],
        hashed_area: area.to_vec(),
    };
    if template.trailer() != *tbs {
        return Err(OfflineError::Inconsistent(
            "the OpenPGP trailer is not the one its own fields make".into(),
        ));
    }
    Ok(template)
}

/// One host's key store and the keys parsed from it, kept across the requests of a
/// batch (loading a P-256 or RSA key from PKCS#8 costs more than the rest of a review).
#[derive(Clone)]
pub struct Offline<'s> {
    store: &'s dyn KeyStore,
    caches: ProfileCaches,
}

impl<'s> Offline<'s> {
    /// A host over `store`.
    pub fn new(store: &'s dyn KeyStore) -> Self {
        Self::with_caches(store, ProfileCaches::default())
    }

    /// A host over `store` sharing `caches` (a [`crate::Sender`]'s).
    #[doc(hidden)]
    pub fn with_caches(store: &'s dyn KeyStore, caches: ProfileCaches) -> Self {
        Offline { store, caches }
    }

    fn smime(&self) -> Smime<'s> {
        Smime::with_cache(self.store, &self.caches.smime)
    }

    fn openpgp(&self) -> OpenPgp<'s> {
        OpenPgp::with_cache(self.store, &self.caches.openpgp)
    }

    fn jws(&self) -> Jws<'s> {
        Jws::with_cache(self.store, &self.caches.jws)
    }
}

/// What [`check`] established: the entity as a message.
struct Checked {
    message: MailA2aMessage,
    /// S/MIME: the signer's certificate, as the store holds it.
    certificate: Option<x509_cert::Certificate>,
}

/// Every check of a request that needs no private key, made the same way on both
/// hosts: the entity is a valid MailA2A message from the signer, the values the
/// request states are the entity's, the boundary is the one the entity and time
/// make, and the bytes to be signed are what the profile makes of the entity, the
/// signer and the time.
fn check(host: &Offline<'_>, request: &SigningRequest) -> Result<Checked, OfflineError> {
    let message = MailA2aMessage::parse(&request.entity, &Limits::default())?;
    let violations = message.check(&ValidationContext::new(Some(request.profile)));
    if let Some(v) = violations.first() {
        return Err(OfflineError::Invalid(v.to_string()));
    }
    if covers(&message) != request.covers {
        return Err(OfflineError::Inconsistent(
            "the values the request states are not those of the signed entity".into(),
        ));
    }
    if request.covers.from != request.signer_address {
        return Err(OfflineError::Inconsistent(
            "the signer's address is not the message's From".into(),
        ));
    }
    if whole_seconds(request.signing_time) != request.signing_time {
        return Err(OfflineError::Inconsistent(
            "the signing time has a fraction".into(),
        ));
    }
    if content_boundary(&request.entity, request.signing_time)? != request.boundary {
        return Err(OfflineError::Inconsistent(
            "the boundary is not the one the entity and the time make".into(),
        ));
    }
    let address = request.signer_address.as_str();
    let mut certificate = None;
    match request.profile {
        Profile::Smime => {
            if request.signing_key.is_some() {
                return Err(OfflineError::Inconsistent(
                    "an S/MIME request names an OpenPGP key".into(),
                ));
            }
            let cert =
                host.smime()
                    .signer_certificate(&request.signer, address, request.signing_time)?;
            let attrs = smime_parts::signed_attributes(
                &cert,
                request.rsa_pss,
                &request.entity,
                request.signing_time,
            )
            .map_err(SealError::from)?;
            if attrs != request.to_be_signed {
                return Err(OfflineError::Inconsistent(
                    "the signed attributes are not those of the entity, the signer and the time"
                        .into(),
                ));
            }
            certificate = Some(cert);
        }
        Profile::OpenPgp => {
            if request.rsa_pss {
                return Err(OfflineError::Inconsistent(
                    "rsa-pss is an S/MIME option".into(),
                ));
            }
            let template = template_of(request)?;
            host.openpgp()
                .check_template(
                    &request.signer,
                    &template,
                    request.signing_time,
                    &request.entity,
                )
                .map_err(SealError::from)?;
        }
        Profile::Jws => {
            if request.rsa_pss || request.signing_key.is_some() {
                return Err(OfflineError::Inconsistent(
                    "a detached-jws request carries options of another profile".into(),
                ));
            }
            let protected = std::str::from_utf8(&request.to_be_signed)
                .map_err(|_| OfflineError::Inconsistent("the JWS header is not text".into()))?;
            host.jws()
                .check_header(&request.signer, address, protected)
                .map_err(SealError::from)?;
        }
        Profile::Mls => return Err(OfflineError::Unsupported(Profile::Mls)),
    }
    Ok(Checked {
        message,
        certificate,
    })
}

/// Connected host: the signing request for `plain` under `opts` (profile, RSA-PSS,
/// outer hints, signing time: `None`, now), signed by the newest certificate or key
/// `store` holds for the From address (public parts only are needed).
pub fn prepare(
    store: &dyn KeyStore,
    plain: &MailA2aMessage,
    opts: &SealOptions,
) -> Result<SigningRequest, OfflineError> {
    Offline::new(store).prepare(plain, opts)
}

impl Offline<'_> {
    /// [`prepare`] with this host's store and caches.
    pub fn prepare(
        &self,
        plain: &MailA2aMessage,
        opts: &SealOptions,
    ) -> Result<SigningRequest, OfflineError> {
        let (from, _) = crate::seal::sealing_addresses(plain, opts, opts.profile)?;
        let at = whole_seconds(opts.signing_time.unwrap_or_else(OffsetDateTime::now_utc));
        let mut entity = Vec::new();
        plain.write_inner_entity(false, false, &mut entity)?;
        let boundary = content_boundary(&entity, at)?;
        let (signer, signing_key, to_be_signed) = match opts.profile {
            Profile::Smime => {
                let (cert, fingerprint) =
                    self.smime()
                        .signing_certificate(&from, at, opts.signer.as_deref())?;
                let attrs = smime_parts::signed_attributes(&cert, opts.rsa_pss, &entity, at)
                    .map_err(SealError::from)?;
                (fingerprint, None, attrs)
            }
            Profile::OpenPgp => {
                let (fingerprint, template) = self
                    .openpgp()
                    .signature_template(&from, at, opts.signer.as_deref())
                    .map_err(SealError::from)?;
                let trailer = template.trailer();
                (fingerprint, Some(template.key), trailer)
            }
            Profile::Jws => {
                let (fingerprint, protected) = self
                    .jws()
                    .signing_header(&from, opts.signer.as_deref())
                    .map_err(SealError::from)?;
                (fingerprint, None, protected.into_bytes())
            }
            Profile::Mls => return Err(OfflineError::Unsupported(Profile::Mls)),
        };
        let request = SigningRequest {
            profile: opts.profile,
            signer,
            signer_address: from,
            signing_key,
            signing_time: at,
            rsa_pss: opts.rsa_pss && opts.profile == Profile::Smime,
            outer_hints: opts.outer_hints,
            boundary,
            // What `plain` states; `check` below reads the entity back and holds the
            // two equal.
            covers: covers(plain),
            entity,
            to_be_signed,
        };
        // What the offline host will check, checked here first.
        check(self, &request)?;
        Ok(request)
    }
}

/// A request the offline host has checked, ready for the operator's decision.
pub struct Review<'s> {
    host: Offline<'s>,
    request: SigningRequest,
    /// S/MIME: the signer's certificate the review found.
    certificate: Option<x509_cert::Certificate>,
    /// The request's fingerprint, computed once (it hashes the whole request).
    fingerprint: String,
    summary: Summary,
}

/// Offline host: checks `request` against `store` (which holds the signer's private
/// key) and describes it for the operator.
pub fn review(store: &dyn KeyStore, request: SigningRequest) -> Result<Review<'_>, OfflineError> {
    Offline::new(store).review(request)
}

impl<'s> Offline<'s> {
    /// [`review`] with this host's store and caches (a batch reuses them).
    pub fn review(&self, request: SigningRequest) -> Result<Review<'s>, OfflineError> {
        let checked = check(self, &request)?;
        let fingerprint = request.fingerprint();
        let summary = Summary::of(&request, &fingerprint, &checked.message);
        Ok(Review {
            host: self.clone(),
            request,
            certificate: checked.certificate,
            fingerprint,
            summary,
        })
    }
}

/// How many characters of the request's digest the operator types to confirm.
pub const CONFIRM_CHARS: usize = 8;

impl Review<'_> {
    /// What the operator reads before signing.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Whether `typed` confirms signing: the first [`CONFIRM_CHARS`] characters of
    /// the request's digest as the summary shows it, in either case, spaces ignored.
    /// Typing them back makes the operator look at the digest of this request (a `y`
    /// answers any question); the connected host printed the same digest when it
    /// made the request.
    pub fn confirms(&self, typed: &str) -> bool {
        let typed: String = typed.chars().filter(|c| !c.is_whitespace()).collect();
        typed.len() == CONFIRM_CHARS
            && self
                .fingerprint
                .get(..CONFIRM_CHARS)
                .is_some_and(|want| want.eq_ignore_ascii_case(&typed))
    }

    /// The request reviewed.
    pub fn request(&self) -> &SigningRequest {
        &self.request
    }

    /// Its fingerprint (hex).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Signs, at the operator's word: the response (`now` is the offline host's
    /// clock, recorded, never signed).
    pub fn sign(&self, now: OffsetDateTime) -> Result<SigningResponse, OfflineError> {
        let r = &self.request;
        let signature = match r.profile {
            Profile::Smime => {
                let cert = self.certificate.as_ref().ok_or_else(|| {
                    OfflineError::Inconsistent("the review found no certificate".into())
                })?;
                self.host
                    .smime()
                    .sign_attributes(&r.signer, cert, r.rsa_pss, &r.to_be_signed)?
            }
            Profile::OpenPgp => self
                .host
                .openpgp()
                .sign_template(&r.signer, &template_of(r)?, r.signing_time, &r.entity)
                .map_err(SealError::from)?,
            Profile::Jws => {
                let protected = std::str::from_utf8(&r.to_be_signed)
                    .map_err(|_| OfflineError::Inconsistent("the JWS header is not text".into()))?;
                self.host
                    .jws()
                    .sign_header(&r.signer, &r.signer_address, protected, &r.entity)
                    .map_err(SealError::from)?
                    .into_bytes()
            }
            Profile::Mls => return Err(OfflineError::Unsupported(Profile::Mls)),
        };
        Ok(SigningResponse {
            request: self.fingerprint.clone(),
            signer: r.signer.clone(),
            signed_at: whole_seconds(now),
            signature,
        })
    }
}

/// A message assembled from a request and its response.
#[derive(Debug)]
#[non_exhaustive]
pub struct Assembled {
    /// The signed message, as a signed-only seal writes it.
    pub message: Vec<u8>,
    /// Its `multipart/signed` entity (the message without its header section), what
    /// an encryption afterwards encloses.
    pub signed_entity: Vec<u8>,
    /// The message's header fields (from the signed entity).
    pub headers: Headers,
    /// The outer hints written.
    pub hints: Hints,
    /// The signed message as the library reads it (for the sender's rules).
    pub plain: MailA2aMessage,
}

/// Connected host: checks that `response` answers `request`, by its signer, with a
/// signature that verifies, and writes the signed message.
pub fn assemble(
    store: &dyn KeyStore,
    request: &SigningRequest,
    response: &SigningResponse,
) -> Result<Assembled, OfflineError> {
    Offline::new(store).assemble(request, response)
}

impl Offline<'_> {
    /// [`assemble`] with this host's store and caches.
    pub fn assemble(
        &self,
        request: &SigningRequest,
        response: &SigningResponse,
    ) -> Result<Assembled, OfflineError> {
        let expected = request.fingerprint();
        if response.request != expected {
            return Err(OfflineError::WrongRequest {
                expected,
                found: response.request.clone(),
            });
        }
        if response.signer != request.signer {
            return Err(OfflineError::WrongSigner {
                expected: request.signer.clone(),
                found: response.signer.clone(),
            });
        }
        let checked = check(self, request)?;
        let r = request;
        let signed_entity = match r.profile {
            Profile::Smime => {
                let cert = checked.certificate.as_ref().ok_or_else(|| {
                    OfflineError::Inconsistent("the check found no certificate".into())
                })?;
                smime_parts::check_attributes_signature(
                    cert,
                    r.rsa_pss,
                    &r.to_be_signed,
                    &response.signature,
                )
                .map_err(SealError::from)?;
                let cms = smime_parts::detached_from_parts(
                    cert,
                    r.rsa_pss,
                    &r.to_be_signed,
                    response.signature.clone(),
                )
                .map_err(SealError::from)?;
                crate::smime::signed_message(&[], cert, &r.boundary, &r.entity, &cms)
            }
            Profile::OpenPgp => {
                let template = template_of(r)?;
                self.openpgp()
                    .check_signature_packet(
                        &r.signer,
                        &template,
                        r.signing_time,
                        &r.entity,
                        &response.signature,
                    )
                    .map_err(SealError::from)?;
                crate::openpgp::offline::signed_message(
                    &[],
                    &r.boundary,
                    &r.entity,
                    &response.signature,
                )
            }
            Profile::Jws => {
                let protected = std::str::from_utf8(&r.to_be_signed)
                    .map_err(|_| OfflineError::Inconsistent("the JWS header is not text".into()))?;
                let signature = std::str::from_utf8(&response.signature).map_err(|_| {
                    OfflineError::Inconsistent("the JWS signature is not text".into())
                })?;
                let (jws, alg) = self
                    .jws()
                    .check_header_signature(
                        &r.signer,
                        &r.signer_address,
                        protected,
                        &r.entity,
                        signature,
                    )
                    .map_err(SealError::from)?;
                crate::jws::signed_message(&[], &r.boundary, alg, &r.entity, &jws)
            }
            Profile::Mls => return Err(OfflineError::Unsupported(Profile::Mls)),
        };
        let plain = checked.message;
        let headers = plain.headers.clone();
        let hints = if r.outer_hints {
            headers.hints.clone()
        } else {
            Hints::binding_only()
        };
        let mut message = Vec::with_capacity(signed_entity.len() + 1024);
        write_header_section(&mut message, &headers, &hints).map_err(SealError::from)?;
        message.extend_from_slice(&signed_entity);
        Ok(Assembled {
            message,
            signed_entity,
            headers,
            hints,
            plain,
        })
    }
}
