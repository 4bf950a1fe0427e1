//! The S/MIME 4.0 profile (RFC 8551): the inner MailA2A entity (RFC 9788 header
//! protection) signed with CMS SignedData in `multipart/signed` (`hp="clear"`), or
//! signed and then encrypted in AuthEnvelopedData with AES-GCM (`hp="cipher"`, outer
//! Subject `[...]`), to RSA (RSAES-OAEP) and EC (ECDH) recipients.
//!
//! This module owns its wire format end to end: it builds and parses its CMS and its
//! MIME layer; nothing else in the crate touches CMS.

mod certificate;
mod describe;
mod enveloped;
mod issue;
mod kari;
mod layout;
mod loaded;
pub(crate) mod offline;
mod path;
mod signed_data;

use std::borrow::Cow;

use time::OffsetDateTime;
use x509_cert::Certificate;

use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::{KeyStore, StoredCertificate};
use crate::message::transfer::{push_base64_lines, Width};
use crate::message::{
    content_len, read_outer, size_hint, write_header_section, Hints, MailA2aMessage,
};
use crate::profile::{Profile, Protection};
use crate::seal::{
    OpenError, OpenPolicy, Opened, Opener, SealError, SealOptions, Sealer, SignatureEdit,
    SignerIdentity,
};

pub(crate) use crate::identity::crl::decode_crls;
pub(crate) use certificate::{check_signer_usage, Trust};
pub use describe::describe;
pub use enveloped::{Decrypted, Kek};
pub(crate) use issue::generate_at;
pub(crate) use issue::generate_key;
pub use issue::{
    certificate_request, certify_token_key, generate, Identity, IdentityRequest, Issuer, KeyKind,
};
pub(crate) use path::{Held, Revocation};
pub(crate) use signed_data::sign_with;

/// The signer's certificate `cert` is trusted (pinned, or chained through the store's
/// intermediates and `carried` to one of its anchors on a path valid at `at`, not
/// revoked on that path: [`crate::identity::x509`]) and fit to sign at `at`: what a
/// receiver asks of a signer before it believes anything the certificate says. The
/// evidence revocation was decided on comes back for callers that cache the verdict.
fn authenticate_certificate(
    cert: &Certificate,
    carried: &[Certificate],
    held: &Held<'_>,
    pinned: bool,
    at: OffsetDateTime,
) -> Result<Vec<crate::identity::x509::Edge>, SmimeError> {
    let (trust, evidence) = crate::identity::x509::trust_evidence(cert, carried, held, pinned, at);
    match trust {
        Trust::Pinned | Trust::Anchored => {}
        Trust::Broken => {
            return Err(SmimeError::Certificate(
                "the signer certificate does not verify under its issuer (altered)".into(),
            ));
        }
        Trust::Unknown => return Err(SmimeError::UnknownSigner),
        Trust::Invalid(reason) => return Err(SmimeError::Certificate(reason)),
    }
    certificate::check_signer_usage(cert, at)?;
    Ok(evidence)
}

/// The signer-certificate rules alone (extensions, pinning, path validation, CRLs,
/// validity and usage: what `authenticate_signer` asks) over DER, for the
/// structure-aware `cert_path` fuzz target, which builds validly signed chains and
/// then breaks them: byte-level inputs through a whole message rarely carry a chain
/// that verifies, so `path.rs` was 20% covered. Behind the `fuzz-api` feature, which
/// only the fuzz crate turns on; not a stable API.
///
/// Returns `None` when the signer's certificate does not decode, otherwise the
/// receiver's verdict on the signer: `Pinned`, `Anchored`, or `refused: reason`.
/// Intermediates, anchors and CRLs that do not decode are left out, as the key store
/// and the CMS reader leave them out.
#[cfg(feature = "fuzz-api")]
#[doc(hidden)]
pub fn fuzz_trust(
    signer: &[u8],
    intermediates: &[Vec<u8>],
    anchors: &[Vec<u8>],
    crls: &[Vec<u8>],
    pinned: bool,
    require_crl: bool,
    at: OffsetDateTime,
) -> Option<String> {
    use der::Decode;
    let signer = Certificate::from_der(signer).ok()?;
    let decode = |all: &[Vec<u8>]| -> Vec<Certificate> {
        all.iter()
            .filter_map(|d| Certificate::from_der(d).ok())
            .collect()
    };
    let crls: Vec<crate::keystore::CertificateList> = crls
        .iter()
        .filter_map(|d| crate::keystore::CertificateList::from_der(d).ok())
        .collect();
    let intermediates = decode(intermediates);
    let anchors = decode(anchors);
    let held = Held {
        anchors: &anchors,
        intermediates: &[],
        revocation: Revocation {
            crls: &crls,
            require: require_crl,
        },
    };
    let result = authenticate_certificate(&signer, &intermediates, &held, pinned, at);
    Some(match result {
        Ok(_) if pinned => "Pinned".to_string(),
        Ok(_) => "Anchored".to_string(),
        Err(e) => format!("refused: {e}"),
    })
}

/// Why an S/MIME layer failed to verify or to be made. Never carries content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SmimeError {
    /// The CMS or its MIME layer does not decode.
    #[error("S/MIME structure: {0}")]
    Malformed(String),
    /// No SignerInfo, or no certificate for it in the message.
    #[error("no signer certificate in the signature")]
    NoSigner,
    /// An algorithm this implementation does not accept.
    #[error("unsupported algorithm: {0}")]
    UnsupportedAlgorithm(String),
    /// The messageDigest attribute is not the digest of the signed content.
    #[error("the signed content was changed (messageDigest differs)")]
    DigestMismatch,
    /// The signature does not verify.
    #[error("the signature does not verify")]
    BadSignature,
    /// The content key or the content does not decrypt and authenticate (RSA-OAEP or
    /// the AES-GCM tag failed).
    #[error("the encrypted content does not decrypt and authenticate")]
    Undecryptable,
    /// Legacy CBC content (read by explicit choice) failed after its decryption:
    /// padding, structure or signature, deliberately not said which (a changed CBC
    /// ciphertext must not learn from the answer).
    #[error("the legacy CBC content does not decrypt to a signed entity that verifies")]
    LegacyUndecryptable,
    /// The signer's certificate is not valid or not for email signatures.
    #[error("{0}")]
    Certificate(String),
    /// A private key could not be used.
    #[error("{0}")]
    Key(String),
    /// The PKCS#11 token holding our key cannot do what the message needs (a
    /// mechanism it lacks), or refused to work (no PIN, token absent).
    #[error("{0}")]
    Token(String),
    /// Legacy CBC EnvelopedData (no integrity, open to EFAIL-style changes) and the
    /// policy does not allow it.
    #[error("legacy EnvelopedData (CBC, no integrity, EFAIL) is refused; --allow-legacy-cbc reads it as unauthenticated")]
    LegacyEncryption,
    /// No key of ours is a recipient of the EnvelopedData.
    #[error("no key of ours is a recipient of this message")]
    NotForUs,
    /// The signature verifies, but its certificate neither is pinned nor chains to an
    /// anchor.
    #[error("the signature verifies but the signer certificate is self-signed or unknown: import it or its CA (--trusted)")]
    UnknownSigner,
    /// The message (or the decrypted entity) is not an S/MIME signed message.
    #[error("{} is not an S/MIME signed message", crate::error::quoted(.media_type))]
    NotSigned {
        /// What it is instead.
        media_type: String,
    },
    /// Encrypted, but the decrypted entity is not signed: the sender is not
    /// authenticated.
    #[error("encrypted but not signed: the sender is not authenticated")]
    EncryptedNotSigned,
    /// The signature is dated after the time of receipt plus the allowed skew.
    #[error("{0}")]
    SigningTime(#[source] crate::identity::TimeError),
    /// Our keys could not be read from the store.
    #[error("the key store: {0}")]
    Store(#[source] crate::keystore::KeyStoreError),
}

impl Classify for SmimeError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InvalidRequestError
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Malformed(_) => ErrorKind::Malformed,
            // Our own key cannot be used, or none is for this message: no fault of the
            // message's integrity.
            Self::Key(_) | Self::Token(_) | Self::NotForUs | Self::Store(_) => {
                ErrorKind::NoUsableKey
            }
            // A signer nobody vouches for has not authenticated the sender.
            Self::UnknownSigner
            | Self::NoSigner
            | Self::UnsupportedAlgorithm(_)
            | Self::DigestMismatch
            | Self::BadSignature
            | Self::Undecryptable
            | Self::LegacyUndecryptable
            | Self::Certificate(_)
            | Self::SigningTime(_)
            | Self::LegacyEncryption
            | Self::NotSigned { .. }
            | Self::EncryptedNotSigned => ErrorKind::Authentication,
        }
    }
}

impl From<SmimeError> for SealError {
    fn from(e: SmimeError) -> Self {
        SealError::profile(Profile::Smime, e)
    }
}

impl From<SmimeError> for OpenError {
    fn from(e: SmimeError) -> Self {
        OpenError::profile(Profile::Smime, e)
    }
}

/// The S/MIME profile over a key store.
pub struct Smime<'s> {
    store: &'s dyn KeyStore,
    /// Private keys parsed once, reused for every message this object (and every
    /// other sharing its [`KeyCache`]) handles.
    loaded: std::sync::Arc<loaded::LoadedKeys>,
}

/// The private keys an [`Smime`] has loaded, kept by a long-lived owner
/// ([`crate::Receiver`], [`crate::Sender`]) across the `Smime` it builds per message:
/// loading an RSA key from PKCS#8 validates it (about 170 µs).
#[derive(Clone, Default)]
#[doc(hidden)]
pub struct KeyCache(std::sync::Arc<loaded::LoadedKeys>);

impl<'s> Smime<'s> {
    /// The profile using `store` for our keys, peers' certificates and trust anchors.
    pub fn new(store: &'s dyn KeyStore) -> Self {
        Smime {
            store,
            loaded: Default::default(),
        }
    }

    /// As [`Smime::new`], reusing the keys `cache` holds and adding to them.
    #[doc(hidden)]
    pub fn with_cache(store: &'s dyn KeyStore, cache: &KeyCache) -> Self {
        Smime {
            store,
            loaded: cache.0.clone(),
        }
    }

    fn signing_identity(
        &self,
        address: &str,
        now: OffsetDateTime,
    ) -> Result<(Certificate, crate::keystore::SecretKey), SealError> {
        self.chosen_signing_identity(address, now, None)
    }

    /// Our certificate and key to sign as `address` at `now`: the one whose
    /// fingerprint is `chosen`, else the newest usable one. An address with usable
    /// keys both on a PKCS#11 token and in the store is refused without `chosen`: which
    /// of the two signs is the owner's choice, never a side effect of validity dates
    /// (a token key made later would otherwise win silently).
    fn chosen_signing_identity(
        &self,
        address: &str,
        now: OffsetDateTime,
        chosen: Option<&str>,
    ) -> Result<(Certificate, crate::keystore::SecretKey), SealError> {
        let usable: Vec<_> = newest_first(&self.loaded, self.store.certificates_for(address)?)
            .into_iter()
            .filter(|(cert, _)| certificate::check_signer_usage(cert, now).is_ok())
            .collect();
        if let Some(chosen) = chosen {
            let no_such = || SealError::NoSuchSigner {
                address: address.to_string(),
                signer: chosen.to_string(),
            };
            let (cert, c) = usable
                .into_iter()
                .find(|(_, c)| c.fingerprint.eq_ignore_ascii_case(chosen))
                .ok_or_else(no_such)?;
            let key = self
                .store
                .private_key(&c.fingerprint)?
                .ok_or_else(no_such)?;
            return Ok((cert, key));
        }
        // Where each usable key is, asked without opening a token.
        let own: std::collections::HashSet<String> = self
            .store
            .own_certificates()?
            .into_iter()
            .map(|c| c.fingerprint)
            .collect();
        let mut places = Vec::new();
        for (_, c) in usable.iter().filter(|(_, c)| own.contains(&c.fingerprint)) {
            let on_token = self.store.token_key_uri(&c.fingerprint)?.is_some();
            places.push((c.fingerprint.clone(), on_token));
        }
        if places.iter().any(|(_, t)| *t) && places.iter().any(|(_, t)| !*t) {
            return Err(SealError::AmbiguousSigner {
                address: address.to_string(),
                candidates: places
                    .into_iter()
                    .map(|(f, t)| format!("{f} {}", if t { "on a token" } else { "in the store" }))
                    .collect(),
            });
        }
        for (cert, c) in usable {
            if let Some(key) = self.store.private_key(&c.fingerprint)? {
                return Ok((cert, key));
            }
        }
        Err(SealError::NoSigningKey {
            address: address.to_string(),
        })
    }
}

/// The rule that picks among an address's certificates (issue #17): the newest
/// (latest notBefore, then latest notAfter) that is usable, never the store's
/// fingerprint order, which anyone who can get a certificate into the store could
/// win by grinding keys.
fn newest_first(
    loaded: &loaded::LoadedKeys,
    stored: Vec<StoredCertificate>,
) -> Vec<(Certificate, StoredCertificate)> {
    let mut certs: Vec<(Certificate, StoredCertificate)> = stored
        .into_iter()
        .filter_map(|c| loaded.certificate(&c.der).ok().map(|cert| (cert, c)))
        .collect();
    let key = |c: &Certificate| {
        let v = c.tbs_certificate().validity();
        (
            v.not_before.to_unix_duration(),
            v.not_after.to_unix_duration(),
        )
    };
    certs.sort_by(|(a, sa), (b, sb)| {
        key(b)
            .cmp(&key(a))
            .then_with(|| sa.fingerprint.cmp(&sb.fingerprint))
    });
    certs
}

fn outer_hints(msg: &MailA2aMessage, opts: &SealOptions) -> Hints {
    if opts.outer_hints {
        msg.headers.hints.clone()
    } else {
        Hints::binding_only()
    }
}

impl Smime<'_> {
    /// One usable encryption certificate for each of `addresses`.
    fn recipient_certificates(
        &self,
        addresses: &[String],
        preferred: &[String],
    ) -> Result<Vec<Certificate>, SealError> {
        let now = OffsetDateTime::now_utc();
        let held = self.held()?;
        let held = held.view(false);
        let mut out: Vec<Certificate> = Vec::new();
        for address in addresses {
            let c = self.recipient_certificate(address, preferred, &held, now)?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// The usable encryption certificate of `address`, the card's keys (`preferred`)
    /// first, judged against the store's anchors, intermediates and CRLs (`held`).
    fn recipient_certificate(
        &self,
        address: &str,
        preferred: &[String],
        held: &Held<'_>,
        now: OffsetDateTime,
    ) -> Result<Certificate, SealError> {
        let mut candidates = newest_first(&self.loaded, self.store.certificates_for(address)?);
        // The card's keys first, the newest among them (a stable sort).
        candidates.sort_by_key(|(_, s)| !preferred.contains(&s.fingerprint));
        // A recipient certificate is judged as a signer's pin is: the CRLs of its
        // validated issuers revoke it, and one held but uncheckable refuses it.
        let mut refused = None;
        let usable = candidates.into_iter().map(|(c, _)| c).find(|c| {
            let fit = certificate::usable_for_encryption(c, now)
                && (c.tbs_certificate().subject_public_key_info().algorithm.oid
                    == crate::asn1::oids::RSA_ENCRYPTION
                    || kari::supports(c));
            if !fit {
                return false;
            }
            match crate::identity::x509::trust(c, &[], held, true, now) {
                Trust::Pinned => true,
                Trust::Invalid(reason) => {
                    refused.get_or_insert(reason);
                    false
                }
                _ => false,
            }
        });
        match (usable, refused) {
            (Some(c), _) => Ok(c),
            (None, Some(reason)) => Err(SealError::RecipientKeyRefused {
                address: address.to_string(),
                reason,
            }),
            (None, None) => Err(SealError::NoRecipientKey {
                address: address.to_string(),
            }),
        }
    }

    /// (certificate, private key) pairs of ours that can decrypt, and the first
    /// failure to load one. A key that cannot be loaded (a token whose module this
    /// machine does not allow, or that is not plugged in) is left out rather than
    /// failing every message: mail to our other addresses still opens. The failure
    /// is the answer only when no loaded key is a recipient ([`Self::decrypted`]).
    #[allow(clippy::type_complexity)]
    fn decryption_keys(
        &self,
    ) -> Result<
        (
            Vec<(Certificate, crate::keystore::SecretKey)>,
            Option<crate::keystore::KeyStoreError>,
        ),
        OpenError,
    > {
        let mut out = Vec::new();
        let mut unloaded = None;
        for c in self.store.own_certificates().map_err(key_store)? {
            let Ok(cert) = self.loaded.certificate(&c.der) else {
                continue;
            };
            match self.store.private_key(&c.fingerprint) {
                Ok(Some(key)) => out.push((cert, key)),
                Ok(None) => {}
                Err(e) => {
                    unloaded.get_or_insert(e);
                }
            }
        }
        Ok((out, unloaded))
    }

    /// A decryption's failure: "not for us" becomes why a key of ours could not be
    /// loaded, when one could not (the message may be for it).
    fn decrypted<T>(
        result: Result<T, enveloped::DecryptFailure>,
        unloaded: Option<crate::keystore::KeyStoreError>,
    ) -> Result<T, OpenError> {
        match (result, unloaded) {
            (Ok(t), _) => Ok(t),
            (Err(enveloped::DecryptFailure::NotForUs), Some(e)) => Err(key_store(e)),
            (Err(f), _) => Err(decrypt_failure(f)),
        }
    }
}

/// A sealed message before its body is laid out: whole, or the header section and the
/// AuthEnvelopedData DER still to be written in base64.
enum Sealed {
    Whole(Vec<u8>),
    Enveloped {
        head: Vec<u8>,
        /// The DER is `buf[start..]` (`encrypt_into` writes it in place).
        buf: Vec<u8>,
        start: usize,
    },
}

impl Smime<'_> {
    fn seal_parts(&self, plain: &MailA2aMessage, opts: &SealOptions) -> Result<Sealed, SealError> {
        let (from, addresses) = crate::seal::sealing_addresses(plain, opts, Profile::Smime)?;
        let signing_time = opts.signing_time.unwrap_or_else(OffsetDateTime::now_utc);
        let (cert, key) =
            self.chosen_signing_identity(&from, signing_time, opts.signer.as_deref())?;
        let encrypt = !opts.sign_only;
        // Recipients first: a message that cannot reach every recipient is not signed.
        let recipients = if encrypt {
            self.recipient_certificates(&addresses, &opts.preferred_keys)?
        } else {
            Vec::new()
        };
        let signing = Signing {
            cert: &cert,
            key: &key,
            at: signing_time,
            rsa_pss: opts.rsa_pss,
            signer: &from,
            edit: None,
        };
        let capacity = size_hint(content_len(plain)) + 8192;
        if !encrypt {
            let mut entity = Vec::with_capacity(capacity);
            plain.write_inner_entity(false, false, &mut entity)?;
            return Ok(Sealed::Whole(self.signed_only(
                &plain.headers,
                &outer_hints(plain, opts),
                &entity,
                &signing,
            )?));
        }
        let signer = SignedEntityWriter {
            smime: self,
            plain: Inner::Message(plain),
            encrypt,
            binary_inside: opts.binary_inside,
            signing,
        };
        let (buf, start) = enveloped::encrypt_into(&recipients, capacity, |buf| signer.write(buf))?;
        // RFC 9788: an encrypted message shows an obscured Subject.
        let mut outer = plain.headers.clone();
        outer.subject = Some("[...]".into());
        let mut head = Vec::with_capacity(1024);
        write_header_section(&mut head, &outer, &outer_hints(plain, opts))?;
        head.extend_from_slice(
            b"Content-Type: application/pkcs7-mime; smime-type=\"authEnveloped-data\";\r\n\
\x20name=\"smime.p7m\"\r\n\
Content-Disposition: attachment; filename=\"smime.p7m\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\n",
        );
        Ok(Sealed::Enveloped { head, buf, start })
    }
}

impl Smime<'_> {
    /// A whole MIME `entity` (CRLF canonical), signed by our key for `headers.from`
    /// and encrypted (AuthEnvelopedData) to `headers.to`, under `headers` with an
    /// obscured Subject: how a handshake message that must not travel in clear (an MLS
    /// GroupInfo, [`crate::mls::invitation`]) is sent.
    pub(crate) fn seal_entity(
        &self,
        headers: &crate::message::Headers,
        entity: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let from = headers
            .from
            .as_ref()
            .map(|m| m.normalized())
            .ok_or(crate::message::MessageError::MissingForCompose("From"))?;
        let to: Vec<String> = headers.to.iter().map(|m| m.normalized()).collect();
        let at = OffsetDateTime::now_utc();
        self.seal_raw(headers, &Hints::default(), entity, &from, Some(&to), at)
    }

    /// `entity` as it is, signed by our key for `signer` at `at` and, given
    /// `recipients`, encrypted to them, under the header section `headers` and outer
    /// `hints`. Nothing of `entity` is checked: what the conformance corpus
    /// ([`crate::corpus`]) seals its hostile inner entities with, so they reach the
    /// reader behind the signature and the decryption.
    pub(crate) fn seal_raw(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signer: &str,
        recipients: Option<&[String]>,
        at: OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        self.seal_raw_edited(headers, hints, entity, signer, recipients, at, None)
    }

    /// [`Self::seal_raw`] with the SignedData rewritten by `edit` after signing, below
    /// its signature: what the conformance corpus's `--layer packets` mutates.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn seal_raw_edited(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signer: &str,
        recipients: Option<&[String]>,
        at: OffsetDateTime,
        edit: Option<SignatureEdit<'_>>,
    ) -> Result<Vec<u8>, SealError> {
        let (cert, key) = self.signing_identity(signer, at)?;
        let signing = Signing {
            cert: &cert,
            key: &key,
            at,
            rsa_pss: false,
            signer,
            edit,
        };
        let Some(recipients) = recipients else {
            return self.signed_only(headers, hints, entity, &signing);
        };
        let recipients = self.recipient_certificates(recipients, &[])?;
        let writer = self.raw_entity_writer(entity, signing);
        let (buf, start) =
            enveloped::encrypt_into(&recipients, entity.len() + 8192, |buf| writer.write(buf))?;
        enveloped_message(headers, hints, &buf[start..])
    }
}

impl<'s> Smime<'s> {
    /// The writer of the signed entity around `entity` as it is, for encryption.
    fn raw_entity_writer<'a>(
        &'a self,
        entity: &'a [u8],
        signing: Signing<'a>,
    ) -> SignedEntityWriter<'a> {
        SignedEntityWriter {
            smime: self,
            plain: Inner::Entity(entity),
            encrypt: true,
            binary_inside: false,
            signing,
        }
    }

    /// [`Self::seal_raw`] encrypted to `recipients` in legacy CBC EnvelopedData (no
    /// integrity), `smime-type=enveloped-data`: what a pre-RFC 8551 sender writes.
    /// Only the conformance corpus seals so.
    pub(crate) fn seal_raw_legacy_cbc(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signer: &str,
        recipients: &[String],
        at: OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        let (cert, key) = self.signing_identity(signer, at)?;
        let recipients = self.recipient_certificates(recipients, &[])?;
        let signing = Signing {
            cert: &cert,
            key: &key,
            at,
            rsa_pss: false,
            signer,
            edit: None,
        };
        let writer = self.raw_entity_writer(entity, signing);
        let mut signed = Vec::with_capacity(entity.len() + 8192);
        writer.write(&mut signed)?;
        let der = enveloped::encrypt_legacy_cbc(&signed, &recipients)?;
        pkcs7_mime_message(headers, hints, &der, "enveloped-data")
    }
}

/// Who signs, with what, and when.
struct Signing<'a> {
    cert: &'a Certificate,
    key: &'a crate::keystore::SecretKey,
    at: OffsetDateTime,
    rsa_pss: bool,
    signer: &'a str,
    /// The corpus's rewrite of the SignedData after signing (`None` when sending).
    edit: Option<SignatureEdit<'a>>,
}

impl Signing<'_> {
    /// The detached SignedData over `entity`.
    fn sign(&self, loaded: &loaded::LoadedKeys, entity: &[u8]) -> Result<Vec<u8>, SealError> {
        let cms =
            signed_data::sign_detached(loaded, entity, self.cert, self.key, self.at, self.rsa_pss)
                .map_err(|e| signing_failure(e, self.signer))?;
        Ok(match self.edit {
            Some(edit) => edit(cms),
            None => cms,
        })
    }
}

impl Smime<'_> {
    /// A signed-only message: `headers` and `hints`, then `multipart/signed` over
    /// `entity`. The boundary follows from the entity and the time, so the same
    /// message signed at the same time is the same bytes, whether sealed here or
    /// through offline signing (`crate::offline`), which writes it with
    /// `signed_message` too.
    fn signed_only(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signing: &Signing<'_>,
    ) -> Result<Vec<u8>, SealError> {
        let boundary = crate::seal::content_boundary(entity, signing.at)?;
        let cms = signing.sign(&self.loaded, entity)?;
        let mut head = Vec::with_capacity(1024);
        write_header_section(&mut head, headers, hints)?;
        Ok(signed_message(&head, signing.cert, &boundary, entity, &cms))
    }
}

/// A whole encrypted message: `headers` with an obscured Subject (RFC 9788) and
/// `hints`, then the AuthEnvelopedData `der` in base64.
pub(crate) fn enveloped_message(
    headers: &crate::message::Headers,
    hints: &Hints,
    der: &[u8],
) -> Result<Vec<u8>, SealError> {
    pkcs7_mime_message(headers, hints, der, "authEnveloped-data")
}

/// `headers` (Subject obscured) and `hints` over an `application/pkcs7-mime` body of
/// `smime_type` holding `der` in base64.
fn pkcs7_mime_message(
    headers: &crate::message::Headers,
    hints: &Hints,
    der: &[u8],
    smime_type: &str,
) -> Result<Vec<u8>, SealError> {
    let mut outer = headers.clone();
    outer.subject = Some("[...]".into());
    let mut out = Vec::with_capacity(size_hint(der.len()) + 1024);
    write_header_section(&mut out, &outer, hints)?;
    out.extend_from_slice(b"Content-Type: application/pkcs7-mime; smime-type=\"");
    out.extend_from_slice(smime_type.as_bytes());
    out.extend_from_slice(
        b"\";\r\n\
\x20name=\"smime.p7m\"\r\n\
Content-Disposition: attachment; filename=\"smime.p7m\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\n",
    );
    push_base64_lines(&mut out, der, Width::Mime);
    Ok(out)
}

impl Sealer for Smime<'_> {
    fn seal(&self, plain: &MailA2aMessage, opts: &SealOptions) -> Result<Vec<u8>, SealError> {
        Ok(match self.seal_parts(plain, opts)? {
            Sealed::Whole(out) => out,
            Sealed::Enveloped { head, buf, start } => {
                let der = &buf[start..];
                let mut out = Vec::with_capacity(head.len() + size_hint(der.len()));
                out.extend_from_slice(&head);
                push_base64_lines(&mut out, der, Width::Mime);
                out
            }
        })
    }

    /// The encrypted body goes out in base64 a piece at a time: the message is never
    /// in memory twice (DER and base64), which at 16 MiB is most of the peak.
    fn seal_to(
        &self,
        plain: &MailA2aMessage,
        opts: &SealOptions,
        out: &mut dyn std::io::Write,
    ) -> Result<(), SealError> {
        match self.seal_parts(plain, opts)? {
            Sealed::Whole(whole) => out.write_all(&whole),
            Sealed::Enveloped { head, buf, start } => {
                // Whole lines per piece (57 bytes make a 76-character line).
                const PIECE: usize = 57 * 1024;
                let mut text = Vec::with_capacity(PIECE / 57 * 78);
                out.write_all(&head).and_then(|()| {
                    for piece in buf[start..].chunks(PIECE) {
                        text.clear();
                        push_base64_lines(&mut text, piece, Width::Mime);
                        out.write_all(&text)?;
                    }
                    Ok(())
                })
            }
        }
        .map_err(SealError::Output)
    }

    /// Each address judged as [`Sealer::seal`] judges a recipient, against the
    /// store's anchors and CRLs read once.
    fn without_key(
        &self,
        addresses: &[String],
        preferred: &[String],
    ) -> Result<Vec<(String, SealError)>, SealError> {
        let now = OffsetDateTime::now_utc();
        let held = self.held()?;
        let held = held.view(false);
        let mut out = Vec::new();
        for address in addresses {
            match self.recipient_certificate(address, preferred, &held, now) {
                Ok(_) => {}
                Err(e) if e.recipient_without_key().is_some() => out.push((address.clone(), e)),
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

fn decrypt_failure(f: enveloped::DecryptFailure) -> OpenError {
    match f {
        enveloped::DecryptFailure::NotForUs => SmimeError::NotForUs.into(),
        enveloped::DecryptFailure::Refused(e) => e.into(),
    }
}

/// What a [`SignedEntityWriter`] signs: a MailA2A message's inner entity, written as
/// it is signed, or a MIME entity given whole (CRLF canonical).
#[derive(Clone, Copy)]
enum Inner<'a> {
    Message(&'a MailA2aMessage),
    Entity(&'a [u8]),
}

/// Writes the `multipart/signed` entity of a message into a buffer: the inner entity is
/// composed straight into the buffer and signed where it lies, so a large message
/// exists once on its way out (into the output, or into the CMS buffer that is then
/// encrypted in place).
struct SignedEntityWriter<'a> {
    smime: &'a Smime<'a>,
    plain: Inner<'a>,
    encrypt: bool,
    binary_inside: bool,
    signing: Signing<'a>,
}

impl SignedEntityWriter<'_> {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), SealError> {
        let begin = out.len();
        // A boundary that the inner entity does not contain (it is random: a retry is
        // for correctness, not expected to happen).
        let (boundary, inner) = loop {
            out.truncate(begin);
            let boundary = crate::seal::random_boundary()?;
            open_signed(out, self.signing.cert, &boundary);
            let start = out.len();
            match self.plain {
                Inner::Message(plain) => {
                    plain.write_inner_entity(self.encrypt, self.binary_inside, out)?
                }
                Inner::Entity(entity) => out.extend_from_slice(entity),
            }
            let delimiter = format!("--{boundary}");
            if memchr::memmem::find(&out[start..], delimiter.as_bytes()).is_none() {
                break (boundary, start..out.len());
            }
        };
        let cms = self.signing.sign(&self.smime.loaded, &out[inner])?;
        close_signed(out, &boundary, &cms);
        Ok(())
    }
}

/// A signing failure for want of a usable key is "no signing key" for the sender.
fn signing_failure(e: SmimeError, from: &str) -> SealError {
    match e {
        SmimeError::Key(_) | SmimeError::UnsupportedAlgorithm(_) => SealError::NoSigningKey {
            address: from.to_string(),
        },
        other => other.into(),
    }
}

/// The opening of a `multipart/signed` entity up to its first part.
fn open_signed(out: &mut Vec<u8>, cert: &Certificate, boundary: &str) {
    out.extend_from_slice(
        b"Content-Type: multipart/signed;\r\n protocol=\"application/pkcs7-signature\";\r\n micalg=\"",
    );
    out.extend_from_slice(micalg(cert).as_bytes());
    out.extend_from_slice(b"\";\r\n boundary=\"");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"\"\r\n\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The rest of a `multipart/signed` entity after its first part: the signature part
/// with `cms` and the close delimiter.
fn close_signed(out: &mut Vec<u8>, boundary: &str, cms: &[u8]) {
    out.extend_from_slice(b"\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(
        b"\r\nContent-Type: application/pkcs7-signature; name=\"smime.p7s\"\r\n\
Content-Disposition: attachment; filename=\"smime.p7s\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\n",
    );
    push_base64_lines(out, cms, Width::Mime);
    out.extend_from_slice(b"\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"--\r\n");
}

/// A signed-only message: `head` (its header section), then `multipart/signed` over
/// `entity` with the detached SignedData `cms` by `cert`.
pub(crate) fn signed_message(
    head: &[u8],
    cert: &Certificate,
    boundary: &str,
    entity: &[u8],
    cms: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len() + entity.len() + size_hint(cms.len()) + 512);
    out.extend_from_slice(head);
    open_signed(&mut out, cert, boundary);
    out.extend_from_slice(entity);
    close_signed(&mut out, boundary, cms);
    out
}

/// A warning when a `multipart/signed`'s `micalg` does not name the digest of the
/// signature that verified (`algorithm`, as [`crate::identity::x509`] names it): RFC
/// 8551 3.5.3.2 asks receivers to be lenient, so it opens, and says so.
fn micalg_warning(micalg: Option<&str>, algorithm: &str) -> Option<String> {
    let digest = if algorithm == "ed25519" {
        "sha-512"
    } else {
        match algorithm.rsplit('-').next() {
            Some("sha256") => "sha-256",
            Some("sha384") => "sha-384",
            Some("sha512") => "sha-512",
            _ => return None,
        }
    };
    let Some(micalg) = micalg else {
        return Some(format!(
            "multipart/signed without micalg (the signature's digest is {digest})"
        ));
    };
    // `sha256` for `sha-256` is a spelling, not another digest.
    let bare = |m: &str| m.trim().replace('-', "").to_ascii_lowercase();
    if micalg.split(',').any(|m| bare(m) == bare(digest)) {
        return None;
    }
    Some(format!(
        "micalg {} does not name the signature's digest {digest}",
        crate::error::quoted(micalg)
    ))
}

/// RFC 8551 §3.5.3.2 micalg for the signer's digest.
fn micalg(cert: &Certificate) -> &'static str {
    let spki = cert.tbs_certificate().subject_public_key_info();
    if spki.algorithm.oid == crate::asn1::oids::ED25519 {
        "sha-512"
    } else if spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.decode_as::<der::asn1::ObjectIdentifier>().ok())
        == Some(crate::asn1::oids::SECP384R1)
    {
        "sha-384"
    } else {
        "sha-256"
    }
}

fn addresses_of(cert: &Certificate) -> Vec<String> {
    crate::keystore::emails_of(cert)
}

/// What opening the S/MIME layers established, before the entity is read as MailA2A.
struct Layers<'r> {
    /// A buffer holding the signed entity, exactly as signed (CRLF canonical):
    /// borrowed from the input when it arrived signed only and already canonical, else
    /// the decryption buffer it was decrypted in (or a canonical copy).
    entity: Cow<'r, [u8]>,
    /// Where the entity is in that buffer.
    range: std::ops::Range<usize>,
    /// Its verified signature.
    signature: signed_data::VerifiedSignature,
    /// Whether it arrived encrypted.
    encrypted: bool,
    /// Whether that encryption was authenticated (AuthEnvelopedData, not legacy CBC).
    authenticated_encryption: bool,
    /// The content encryption, as decrypted (`AES-256-GCM (ECDH with the SHA-1 KDF)`).
    encryption: Option<String>,
    /// The outermost message's headers (routing hints to compare).
    outer_headers: crate::message::Headers,
}

/// A signed entity whose signature verified under a trusted certificate.
#[derive(Clone, Debug)]
pub struct SignedEntity {
    /// The signed MIME entity, exactly as signed.
    pub entity: Vec<u8>,
    /// The signer.
    pub signer: SignerIdentity,
    /// The signature algorithm.
    pub algorithm: &'static str,
    /// signingTime, when signed.
    pub signing_time: Option<OffsetDateTime>,
}

impl SignedEntity {
    /// `entity`, signed by the trusted signer of `verified`.
    fn new(entity: Vec<u8>, verified: &signed_data::VerifiedSignature) -> Self {
        SignedEntity {
            entity,
            signer: SignerIdentity::Certificate {
                fingerprint: cert_fingerprint(&verified.cert),
                emails: addresses_of(&verified.cert),
                trusted: true,
            },
            algorithm: verified.algorithm,
            signing_time: verified.signing_time,
        }
    }
}

impl Smime<'_> {
    /// Verifies the S/MIME signature of `raw` (`multipart/signed`, or opaque
    /// `signed-data`) and the signer's certificate (pinned in the store, or chaining to
    /// a trust anchor; usable for email signatures at the signing time), and returns
    /// the signed entity. It does not read the entity as MailA2A: [`Opener::open`] does.
    pub fn verified_entity(
        &self,
        raw: &[u8],
        policy: &OpenPolicy,
    ) -> Result<SignedEntity, OpenError> {
        let Layers {
            entity,
            range,
            signature: verified,
            ..
        } = self.verify(raw, policy)?;
        let entity = if range == (0..entity.len()) {
            entity.into_owned()
        } else {
            entity[range].to_vec()
        };
        Ok(SignedEntity::new(entity, &verified))
    }

    /// Decrypts a CMS AuthEnvelopedData (DER or BER) with our keys or `keks`, and
    /// legacy CBC EnvelopedData only when `policy.allow_legacy_cbc` (then marked
    /// unauthenticated). Decrypting proves nothing about the sender: a caller that
    /// needs to know who wrote the content verifies its signature next.
    pub fn decrypt_cms(
        &self,
        cms: &[u8],
        keks: &[Kek],
        policy: &OpenPolicy,
    ) -> Result<Decrypted, OpenError> {
        self.decrypt_owned(cms.to_vec(), keks, policy)
    }

    /// [`Self::decrypt_cms`] on a buffer it may decrypt in place.
    fn decrypt_owned(
        &self,
        cms: Vec<u8>,
        keks: &[Kek],
        policy: &OpenPolicy,
    ) -> Result<Decrypted, OpenError> {
        let (keys, unloaded) = self.decryption_keys()?;
        Self::decrypted(
            enveloped::decrypt(&self.loaded, cms, &keys, keks, policy.allow_legacy_cbc),
            unloaded,
        )
    }

    /// Decrypts the outer `application/pkcs7-mime` layer of `raw` and returns the MIME
    /// entity inside, without verifying any signature in it (see [`Self::decrypt_cms`]).
    pub fn decrypt_entity(&self, raw: &[u8], policy: &OpenPolicy) -> Result<Decrypted, OpenError> {
        let outer = read_outer(raw, &policy.limits)?;
        let single = outer
            .single
            .as_ref()
            .filter(|_| outer.media_type.ends_with("pkcs7-mime"))
            .ok_or_else(|| SmimeError::Malformed("not an application/pkcs7-mime message".into()))?;
        let cms = single
            .decoded()
            .map_err(|e| SmimeError::Malformed(e.to_string()))?;
        self.decrypt_owned(cms, &[], policy)
    }

    /// The signed entity and its verified signature, from a `multipart/signed` or an
    /// opaque `signed-data` layer.
    fn verify_signed<'r>(
        &self,
        outer: &crate::message::Outer<'r>,
    ) -> Result<(Cow<'r, [u8]>, signed_data::VerifiedSignature), OpenError> {
        let protocol = outer.param("protocol").map(str::to_ascii_lowercase);
        let smime_type = outer.param("smime-type").map(str::to_ascii_lowercase);
        let pkcs7 = |t: &str| {
            matches!(
                t,
                "application/pkcs7-signature" | "application/x-pkcs7-signature"
            )
        };
        if outer.media_type == "multipart/signed" && protocol.as_deref().is_some_and(pkcs7) {
            let [content, sig] = outer.parts.as_slice() else {
                return Err(SmimeError::Malformed(
                    "multipart/signed must have exactly two parts".into(),
                )
                .into());
            };
            if !pkcs7(&sig.media_type) {
                return Err(SmimeError::Malformed(
                    "the second part is not a PKCS#7 signature".into(),
                )
                .into());
            }
            let cms = sig
                .decoded()
                .map_err(|e| SmimeError::Malformed(e.to_string()))?;
            // RFC 8551 3.1.1: the signature covers the canonical (CRLF) form; mail
            // stored with bare LF line ends is canonicalised before the digest.
            let entity = crate::message::canonical_crlf(content.entity);
            let mut verified = signed_data::verify_detached(&self.loaded, &cms, &entity)?;
            if let Some(w) = micalg_warning(outer.param("micalg"), verified.algorithm) {
                verified.warnings.push(w);
            }
            Ok((entity, verified))
        } else if matches!(
            outer.media_type.as_str(),
            "application/pkcs7-mime" | "application/x-pkcs7-mime"
        ) && smime_type.as_deref() == Some("signed-data")
        {
            let single = outer
                .single
                .as_ref()
                .ok_or_else(|| SmimeError::Malformed("empty signed-data".into()))?;
            let cms = single
                .decoded()
                .map_err(|e| SmimeError::Malformed(e.to_string()))?;
            let (entity, verified) = signed_data::verify_encapsulated(&self.loaded, &cms)?;
            Ok((Cow::Owned(entity), verified))
        } else {
            Err(SmimeError::NotSigned {
                media_type: outer.media_type.clone(),
            }
            .into())
        }
    }

    /// The signer's certificate is authenticated (pinned, or chained to an anchor on a
    /// path valid at the time of receipt, not revoked) and fit to sign, before
    /// anything in it, such as its addresses, is believed.
    fn authenticate_signer(
        &self,
        verified: &signed_data::VerifiedSignature,
        policy: &OpenPolicy,
    ) -> Result<Vec<crate::identity::x509::Edge>, OpenError> {
        // At the time of receipt: the signer-chosen signingTime never moves it, and
        // one after it (beyond the skew) is refused: a signature "made" later than it
        // arrived is the sender choosing a time.
        let at = policy.validation_time();
        if let Some(signed_at) = verified.signing_time {
            crate::identity::check_signed_at(signed_at, at, crate::identity::DEFAULT_SKEW)
                .map_err(SmimeError::SigningTime)?;
        }
        let held = self.held().map_err(key_store)?;
        let mut pinned = Vec::new();
        for email in addresses_of(&verified.cert) {
            pinned.extend(
                self.store
                    .certificates_for(&email)
                    .map_err(key_store)?
                    .into_iter()
                    .map(|c| c.der),
            );
        }
        let evidence = authenticate_certificate(
            &verified.cert,
            &verified.carried,
            &held.view(policy.require_crl),
            pinned.contains(&verified.cert_der),
            at,
        )?;
        // And at the time the signature says it was made: a signingTime before the
        // certificate's notBefore (or after its notAfter) is a binding that did not
        // hold then. A signature without signingTime states no time to check.
        if let Some(signed_at) = verified.signing_time {
            crate::identity::x509::check_valid_when_signed(&verified.cert, &evidence, signed_at)
                .map_err(SmimeError::Certificate)?;
        }
        Ok(evidence)
    }

    /// The store's evidence for a path: its anchors, its intermediates, its CRLs.
    pub(crate) fn held(&self) -> Result<HeldStore, crate::keystore::KeyStoreError> {
        Ok(HeldStore {
            anchors: certs(&self.loaded, self.store.trust_anchors()?),
            intermediates: certs(&self.loaded, self.store.intermediates()?),
            crls: decode_crls(self.store.crls()?),
        })
    }

    /// A detached SignedData over `statement`, signed at `now` with our S/MIME key for
    /// `address`: how that key certifies another key of ours (an MLS credential,
    /// [`crate::mls::authentication`]).
    pub(crate) fn certify(
        &self,
        address: &str,
        statement: &[u8],
        now: OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        let (cert, key) = self.signing_identity(address, now)?;
        Ok(signed_data::sign_detached(
            &self.loaded,
            statement,
            &cert,
            &key,
            now,
            false,
        )?)
    }

    /// Verifies a detached CMS SignedData (DER or BER ContentInfo) over `content`, as
    /// `openssl cms -verify -binary -content` does: every SignerInfo's signature, and
    /// the first signer's certificate (pinned in the store, or chaining to a trust
    /// anchor; usable for email signatures at the signing time). The bytes are signed
    /// exactly as given: no MIME canonicalisation. Returns `content` as the entity.
    pub fn verify_detached_cms(
        &self,
        der: &[u8],
        content: &[u8],
        policy: &OpenPolicy,
    ) -> Result<SignedEntity, OpenError> {
        let verified = signed_data::verify_detached(&self.loaded, der, content)?;
        self.authenticate_signer(&verified, policy)?;
        Ok(SignedEntity::new(content.to_vec(), &verified))
    }

    /// Verifies a [`Smime::certify`] certification: `der` signs `statement`, by a
    /// certificate this store trusts (under `policy`) that names `address`. Returns
    /// the evidence its revocation was decided on, for a cache to decide it again.
    pub(crate) fn verify_certification(
        &self,
        address: &str,
        der: &[u8],
        statement: &[u8],
        policy: &OpenPolicy,
    ) -> Result<Vec<crate::identity::x509::Edge>, OpenError> {
        let verified = signed_data::verify_detached(&self.loaded, der, statement)?;
        let evidence = self.authenticate_signer(&verified, policy)?;
        if !addresses_of(&verified.cert).iter().any(|a| a == address) {
            return Err(SmimeError::Certificate(format!(
                "the certifying certificate does not name {address}"
            ))
            .into());
        }
        Ok(evidence)
    }

    /// Decrypts (when encrypted) and verifies; the signed entity, its signature, and
    /// whether it was encrypted.
    fn verify<'r>(&self, raw: &'r [u8], policy: &OpenPolicy) -> Result<Layers<'r>, OpenError> {
        let outer = read_outer(raw, &policy.limits)?;
        if is_enveloped(&outer) {
            let cms = outer
                .single
                .as_ref()
                .ok_or_else(|| SmimeError::Malformed("empty enveloped-data".into()))?
                .decoded()
                .map_err(|e| SmimeError::Malformed(e.to_string()))?;
            return self.verify_enveloped(cms, outer.headers, policy);
        }
        self.verify_outer_signed(outer, policy)
    }

    /// [`Self::verify`] of a message that is not encrypted.
    fn verify_outer_signed<'r>(
        &self,
        outer: crate::message::Outer<'r>,
        policy: &OpenPolicy,
    ) -> Result<Layers<'r>, OpenError> {
        let (entity, verified) = self.verify_signed(&outer)?;
        let range = 0..entity.len();
        self.authenticate_signer(&verified, policy)?;
        Ok(Layers {
            entity,
            range,
            signature: verified,
            encrypted: false,
            authenticated_encryption: false,
            encryption: None,
            outer_headers: outer.headers,
        })
    }

    /// Decrypts the CMS of an enveloped message (in place) and verifies the signed
    /// entity inside.
    fn verify_enveloped(
        &self,
        cms: Vec<u8>,
        outer_headers: crate::message::Headers,
        policy: &OpenPolicy,
    ) -> Result<Layers<'static>, OpenError> {
        let authenticated_encryption;
        let encryption;
        let (entity, range, verified) = {
            let (keys, unloaded) = self.decryption_keys()?;
            let enveloped::InPlace {
                mut buffer,
                range: plain,
                authenticated,
                algorithm,
            } = Self::decrypted(
                enveloped::decrypt_in_place(&self.loaded, cms, &keys, &[], policy.allow_legacy_cbc),
                unloaded,
            )?;
            authenticated_encryption = authenticated;
            encryption = algorithm;
            // Legacy CBC has no integrity: an attacker who changes the ciphertext learns
            // from which check fails (padding, MIME, signature) something about the
            // plaintext. Every failure after its decryption is one error (issue #17).
            let legacy = |e: OpenError| -> OpenError {
                if authenticated {
                    e
                } else {
                    SmimeError::LegacyUndecryptable.into()
                }
            };
            // Confidential mode must also authenticate: the decrypted entity is signed.
            let signed = read_outer(&buffer[plain], &policy.limits).map_err(|_| {
                legacy(SmimeError::Malformed("the decrypted entity is not MIME".into()).into())
            })?;
            let (entity, verified) = self.verify_signed(&signed).map_err(|e| {
                let not_signed = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<SmimeError>())
                    .is_some_and(|s| matches!(s, SmimeError::NotSigned { .. }));
                legacy(if not_signed {
                    SmimeError::EncryptedNotSigned.into()
                } else {
                    e
                })
            })?;
            // The entity is a range of the decryption buffer when it was already
            // canonical: the buffer is kept with that range instead of copied (it is
            // handed to the caller either way, so it need not be zeroized).
            let within = match &entity {
                Cow::Borrowed(slice) => (slice.as_ptr() as usize)
                    .checked_sub(buffer.as_ptr() as usize)
                    .map(|start| start..start + slice.len())
                    // Inside the buffer's memory, so the same bytes (no need to compare).
                    .filter(|r| r.end <= buffer.len()),
                Cow::Owned(_) => None,
            };
            match within {
                Some(range) => {
                    drop(entity);
                    drop(signed);
                    (Cow::Owned(std::mem::take(&mut *buffer)), range, verified)
                }
                None => {
                    let owned = entity.into_owned();
                    let range = 0..owned.len();
                    (Cow::Owned(owned), range, verified)
                }
            }
        };
        self.authenticate_signer(&verified, policy)?;
        Ok(Layers {
            entity,
            range,
            signature: verified,
            encrypted: true,
            authenticated_encryption,
            encryption: Some(encryption),
            outer_headers,
        })
    }

    /// The binding's checks on verified layers.
    fn finish(&self, layers: Layers<'_>, policy: &OpenPolicy) -> Result<Opened, OpenError> {
        let Layers {
            entity,
            range,
            signature: verified,
            encrypted,
            authenticated_encryption,
            encryption,
            outer_headers,
        } = layers;
        let mut warnings = verified.warnings.clone();
        if let Some(e) = &encryption {
            if encrypted && !authenticated_encryption {
                warnings.push(format!(
                    "legacy content encryption {e}: no integrity, only the signature protects the content"
                ));
            } else if e.contains("SHA-1 KDF") {
                warnings.push(format!(
                    "the content key was agreed with the SHA-1 X9.63 KDF ({e}); the content is authenticated"
                ));
            }
        }
        // Legacy CBC is confidentiality without integrity: only the signature counts.
        let protection = if encrypted && authenticated_encryption {
            Protection::SignedEncrypted
        } else {
            Protection::Signed
        };
        let signer_emails = addresses_of(&verified.cert);
        crate::binding::finish(
            crate::binding::Authenticated {
                profile: Profile::Smime,
                // The decrypted buffer is handed on: its JSON becomes the envelope's text.
                entity: match entity {
                    Cow::Borrowed(b) => crate::binding::Entity::Borrowed(&b[range]),
                    Cow::Owned(buffer) => crate::binding::Entity::Owned(buffer, range),
                },
                outer_headers: &outer_headers,
                encrypted,
                protection,
                signer: SignerIdentity::Certificate {
                    fingerprint: cert_fingerprint(&verified.cert),
                    emails: signer_emails.clone(),
                    trusted: true,
                },
                signer_emails,
                algorithm: verified.algorithm.to_string(),
                signed_at: verified.signing_time,
                warnings,
                // Our S/MIME identities: the certificates whose keys the store holds
                // (the store caches them for decryption anyway).
                our_identities: &|| {
                    self.store
                        .own_certificates()
                        .map(|certs| certs.into_iter().flat_map(|c| c.emails).collect())
                        .unwrap_or_default()
                },
            },
            policy,
        )
    }
}

/// Whether the outer layer is an encrypted CMS (`application/pkcs7-mime` with an
/// enveloped `smime-type`).
fn is_enveloped(outer: &crate::message::Outer<'_>) -> bool {
    let smime_type = outer.param("smime-type").map(str::to_ascii_lowercase);
    matches!(
        outer.media_type.as_str(),
        "application/pkcs7-mime" | "application/x-pkcs7-mime"
    ) && matches!(
        smime_type.as_deref(),
        Some("authenveloped-data" | "authenticated-enveloped-data" | "enveloped-data")
    )
}

impl Opener for Smime<'_> {
    fn open(&self, raw: &[u8], policy: &OpenPolicy) -> Result<Opened, OpenError> {
        self.finish(self.verify(raw, policy)?, policy)
    }

    /// The encrypted body is base64-decoded and then decrypted in the input's own
    /// buffer: a large message is held once, not as input, CMS and plaintext.
    fn open_owned(&self, mut raw: Vec<u8>, policy: &OpenPolicy) -> Result<Opened, OpenError> {
        let outer = read_outer(&raw, &policy.limits)?;
        if !is_enveloped(&outer) {
            let layers = self.verify_outer_signed(outer, policy)?;
            return self.finish(layers, policy);
        }
        let crate::message::Outer {
            headers, single, ..
        } = outer;
        let body = single
            .ok_or_else(|| SmimeError::Malformed("empty enveloped-data".into()))?
            .in_place();
        body.decode(&mut raw)
            .map_err(|e| SmimeError::Malformed(e.to_string()))?;
        let layers = self.verify_enveloped(raw, headers, policy)?;
        self.finish(layers, policy)
    }
}

/// The key store's fingerprint of a certificate (its public key).
fn cert_fingerprint(cert: &Certificate) -> String {
    crate::keystore::fingerprint(
        cert.tbs_certificate()
            .subject_public_key_info()
            .subject_public_key
            .raw_bytes(),
    )
}

/// The store's evidence, decoded once per message.
pub(crate) struct HeldStore {
    pub(crate) anchors: Vec<Certificate>,
    pub(crate) intermediates: Vec<Certificate>,
    pub(crate) crls: Vec<crate::keystore::CertificateList>,
}

impl HeldStore {
    /// The view [`crate::identity::x509`] reads.
    pub(crate) fn view(&self, require_crl: bool) -> Held<'_> {
        Held {
            anchors: &self.anchors,
            intermediates: &self.intermediates,
            revocation: Revocation {
                crls: &self.crls,
                require: require_crl,
            },
        }
    }
}

fn key_store(e: crate::keystore::KeyStoreError) -> OpenError {
    SmimeError::Store(e).into()
}

fn certs(loaded: &loaded::LoadedKeys, stored: Vec<StoredCertificate>) -> Vec<Certificate> {
    stored
        .iter()
        .filter_map(|c| loaded.certificate(&c.der).ok())
        .collect()
}

/// A ContentInfo from DER, or from BER rewritten to DER when the DER decoder refuses it.
pub(crate) fn content_info(input: &[u8]) -> Result<cms::content_info::ContentInfo, SmimeError> {
    use der::Decode;
    let der_error = if crate::asn1::ber::is_ber(input) {
        None
    } else {
        match cms::content_info::ContentInfo::from_der(input) {
            Ok(info) => return Ok(info),
            Err(e) => Some(e),
        }
    };
    let rewritten = match crate::asn1::ber::to_der(input) {
        Ok(d) => d,
        Err(ber_error) => {
            return Err(match der_error {
                Some(e) => SmimeError::Malformed(format!("ContentInfo: {e}")),
                None => ber_error.into(),
            })
        }
    };
    cms::content_info::ContentInfo::from_der(&rewritten)
        .map_err(|e| SmimeError::Malformed(format!("ContentInfo: {e}")))
}

impl From<crate::identity::x509::SignatureError> for SmimeError {
    fn from(e: crate::identity::x509::SignatureError) -> Self {
        use crate::identity::x509::SignatureError as E;
        match e {
            E::UnsupportedAlgorithm(a) => SmimeError::UnsupportedAlgorithm(a),
            E::Bad => SmimeError::BadSignature,
            E::Malformed(m) => SmimeError::Malformed(m),
        }
    }
}

impl From<crate::asn1::BerError> for SmimeError {
    fn from(e: crate::asn1::BerError) -> Self {
        SmimeError::Malformed(e.to_string())
    }
}

crate::error::verdict_codes!(SmimeError, "smime", {
    Self::Malformed(_) => "malformed",
    Self::NoSigner => "no-signer",
    Self::UnsupportedAlgorithm(_) => "unsupported-algorithm",
    Self::DigestMismatch => "digest-mismatch",
    Self::BadSignature => "bad-signature",
    Self::Undecryptable => "undecryptable",
    Self::LegacyUndecryptable => "legacy-undecryptable",
    Self::Certificate(_) => "certificate",
    Self::SigningTime(_) => "signed-in-the-future",
    Self::Key(_) => "key",
    Self::Token(_) => "token",
    Self::LegacyEncryption => "legacy-encryption",
    Self::NotForUs => "not-for-us",
    Self::UnknownSigner => "unknown-signer",
    Self::NotSigned { .. } => "not-signed",
    Self::EncryptedNotSigned => "encrypted-not-signed",
    Self::Store(_) => "key-store",
});
