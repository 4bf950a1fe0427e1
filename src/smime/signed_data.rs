//! CMS SignedData (RFC 5652 §5) for S/MIME: detached signatures with the signed
//! attributes of RFC 8551 (contentType, messageDigest, signingTime, SMIMECapabilities),
//! made and checked with aws-lc-rs.
//!
//! Verification checks the signature over the DER of the signed attributes exactly as
//! they were decoded (DER requires the canonical SET OF order, which the decoder
//! enforces), the messageDigest against the content, and the contentType.

use aws_lc_rs::digest;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use cms::cert::{CertificateChoices, IssuerAndSerialNumber};
use cms::content_info::{CmsVersion, ContentInfo};
use cms::signed_data::{
    CertificateSet, EncapsulatedContentInfo, SignedData, SignerIdentifier, SignerInfo, SignerInfos,
};
use der::asn1::{ObjectIdentifier, OctetString, SetOfVec};
use der::{Any, Decode, Encode, Tagged};
use spki::AlgorithmIdentifierOwned;
use time::OffsetDateTime;
use x509_cert::attr::Attribute;
use x509_cert::Certificate;

use super::loaded::{Loaded, LoadedKeys, Use};
use super::SmimeError;
use crate::asn1::oids::*;
use crate::identity::x509::PssParams;
use crate::keystore::{KeyAlgorithm, SecretKey};

/// What a verified SignerInfo established.
#[derive(Clone, Debug)]
pub(crate) struct VerifiedSignature {
    /// The signer's certificate (from the SignedData).
    pub cert: Certificate,
    /// Its encoding, as the SignedData carried it.
    pub cert_der: Vec<u8>,
    /// Every certificate the SignedData carried (chain candidates).
    pub carried: Vec<Certificate>,
    /// signingTime, if signed.
    pub signing_time: Option<OffsetDateTime>,
    /// The signature algorithm, for the verdict.
    pub algorithm: &'static str,
    /// What verified but deserves notice ([`crate::seal::Verdict::warnings`]).
    pub warnings: Vec<String>,
}

fn alg(oid: ObjectIdentifier) -> AlgorithmIdentifierOwned {
    AlgorithmIdentifierOwned {
        oid,
        parameters: None,
    }
}

fn malformed(what: &str) -> impl Fn(der::Error) -> SmimeError + '_ {
    move |e| SmimeError::Malformed(format!("{what}: {e}"))
}

fn attribute(oid: ObjectIdentifier, value: Any) -> Result<Attribute, SmimeError> {
    let values = SetOfVec::try_from(vec![value]).map_err(malformed("attribute"))?;
    Ok(Attribute { oid, values })
}

/// RFC 5652 signingTime: UTCTime through 2049, GeneralizedTime after.
fn signing_time_value(t: OffsetDateTime) -> Result<Any, SmimeError> {
    let secs = std::time::Duration::from_secs(t.unix_timestamp().max(0) as u64);
    let dt = der::DateTime::from_unix_duration(secs).map_err(malformed("signingTime"))?;
    let time = if t.year() < 2050 {
        x509_cert::time::Time::UtcTime(
            der::asn1::UtcTime::from_date_time(dt).map_err(malformed("signingTime"))?,
        )
    } else {
        x509_cert::time::Time::GeneralTime(der::asn1::GeneralizedTime::from_date_time(dt))
    };
    Any::encode_from(&time).map_err(malformed("signingTime"))
}

/// The signature algorithm a key signs with, and the digest it uses.
struct SigningScheme {
    digest_oid: ObjectIdentifier,
    digest: &'static digest::Algorithm,
    signature_alg: AlgorithmIdentifierOwned,
}

fn scheme_for(
    key: &SecretKey,
    cert: &Certificate,
    rsa_pss: bool,
) -> Result<SigningScheme, SmimeError> {
    scheme_for_algorithm(key.algorithm(), cert, rsa_pss)
}

/// The algorithm of the key `cert` certifies.
fn cert_algorithm(cert: &Certificate) -> Result<KeyAlgorithm, SmimeError> {
    let oid = cert
        .tbs_certificate()
        .subject_public_key_info()
        .algorithm
        .oid;
    match oid {
        ID_EC_PUBLIC_KEY => Ok(KeyAlgorithm::Ec),
        RSA_ENCRYPTION => Ok(KeyAlgorithm::Rsa),
        ED25519 => Ok(KeyAlgorithm::Ed25519),
        other => Err(SmimeError::UnsupportedAlgorithm(format!(
            "no S/MIME signing with a {other} key"
        ))),
    }
}

/// [`scheme_for`] from the certificate alone (no private key at hand).
fn scheme_for_cert(cert: &Certificate, rsa_pss: bool) -> Result<SigningScheme, SmimeError> {
    scheme_for_algorithm(cert_algorithm(cert)?, cert, rsa_pss)
}

fn scheme_for_algorithm(
    algorithm: KeyAlgorithm,
    cert: &Certificate,
    rsa_pss: bool,
) -> Result<SigningScheme, SmimeError> {
    Ok(match algorithm {
        KeyAlgorithm::Ec => {
            let curve = cert
                .tbs_certificate()
                .subject_public_key_info()
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.decode_as::<ObjectIdentifier>().ok());
            if curve == Some(SECP384R1) {
                SigningScheme {
                    digest_oid: SHA384,
                    digest: &digest::SHA384,
                    signature_alg: alg(ECDSA_WITH_SHA384),
                }
            } else {
                SigningScheme {
                    digest_oid: SHA256,
                    digest: &digest::SHA256,
                    signature_alg: alg(ECDSA_WITH_SHA256),
                }
            }
        }
        KeyAlgorithm::Rsa if rsa_pss => SigningScheme {
            digest_oid: SHA256,
            digest: &digest::SHA256,
            signature_alg: pss_sha256()?,
        },
        KeyAlgorithm::Rsa => SigningScheme {
            digest_oid: SHA256,
            digest: &digest::SHA256,
            signature_alg: alg(SHA256_WITH_RSA),
        },
        // RFC 8419 §3.1: Ed25519 with SHA-512 as the message digest.
        KeyAlgorithm::Ed25519 => SigningScheme {
            digest_oid: SHA512,
            digest: &digest::SHA512,
            signature_alg: alg(ED25519),
        },
        other => {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "no S/MIME signing with a {other} key"
            )))
        }
    })
}

/// RFC 4055 RSASSA-PSS parameters for SHA-256: MGF1 over SHA-256, a salt as long as
/// the hash (what aws-lc-rs signs with), the default trailer.
fn pss_sha256() -> Result<AlgorithmIdentifierOwned, SmimeError> {
    let sha256 = alg(SHA256);
    let params = PssParams {
        hash: Some(sha256.clone()),
        mgf: Some(AlgorithmIdentifierOwned {
            oid: MGF1,
            parameters: Some(Any::encode_from(&sha256).map_err(malformed("MGF1"))?),
        }),
        salt: Some(32),
    };
    Ok(AlgorithmIdentifierOwned {
        oid: RSASSA_PSS,
        parameters: Some(Any::encode_from(&params).map_err(malformed("RSASSA-PSS"))?),
    })
}

/// RFC 3279 Ecdsa-Sig-Value.
#[derive(der::Sequence)]
struct EcdsaSigValue<'a> {
    r: der::asn1::UintRef<'a>,
    s: der::asn1::UintRef<'a>,
}

/// Signs on a PKCS#11 token: ECDSA over the digest (the token returns `r || s`, CMS
/// wants DER), RSA with SHA-256 hashed on the token.
fn token_sign(
    token: &crate::keystore::TokenKey,
    key: &SecretKey,
    cert: &Certificate,
    rsa_pss: bool,
    message: &[u8],
) -> Result<Vec<u8>, SmimeError> {
    let failed = |e: crate::keystore::KeyStoreError| SmimeError::Key(e.to_string());
    match key.algorithm() {
        KeyAlgorithm::Ec => {
            let scheme = scheme_for(key, cert, false)?;
            let raw = token
                .ecdsa_sign_digest(digest::digest(scheme.digest, message).as_ref())
                .map_err(failed)?;
            if raw.is_empty() || raw.len() % 2 != 0 {
                return Err(SmimeError::Key(
                    "the token's ECDSA signature is malformed".into(),
                ));
            }
            let (r, s) = raw.split_at(raw.len() / 2);
            let bad = |_| SmimeError::Key("the token's ECDSA signature is malformed".into());
            EcdsaSigValue {
                r: der::asn1::UintRef::new(r).map_err(bad)?,
                s: der::asn1::UintRef::new(s).map_err(bad)?,
            }
            .to_der()
            .map_err(bad)
        }
        KeyAlgorithm::Rsa => token.rsa_sign_sha256(message, rsa_pss).map_err(failed),
        other => Err(SmimeError::UnsupportedAlgorithm(format!(
            "no token signing with a {other} key"
        ))),
    }
}

fn sign_bytes(
    loaded: &LoadedKeys,
    key: &SecretKey,
    cert: &Certificate,
    rsa_pss: bool,
    message: &[u8],
) -> Result<Vec<u8>, SmimeError> {
    if let Some(token) = key.token() {
        return token_sign(token, key, cert, rsa_pss, message);
    }
    // The corpus's seeded scope signs its own way, without the cached key pair.
    let seeded = crate::entropy::with_seeded(|rng| seeded_sign(key, rsa_pss, message, rng));
    if let Some(sig) = seeded.flatten() {
        return sig;
    }
    let rng = SystemRandom::new();
    let bad_key = |_| SmimeError::Key("the private key does not load".into());
    let pair = loaded.get(key, Use::Sign, || {
        Ok(match key.algorithm() {
            KeyAlgorithm::Ec => {
                let p384 = scheme_for(key, cert, false)?.digest_oid == SHA384;
                let alg = if p384 {
                    &signature::ECDSA_P384_SHA384_ASN1_SIGNING
                } else {
                    &signature::ECDSA_P256_SHA256_ASN1_SIGNING
                };
                Loaded::Ecdsa(EcdsaKeyPair::from_pkcs8(alg, key.pkcs8_der()).map_err(bad_key)?)
            }
            KeyAlgorithm::Rsa => {
                Loaded::RsaSign(RsaKeyPair::from_pkcs8(key.pkcs8_der()).map_err(bad_key)?)
            }
            KeyAlgorithm::Ed25519 => Loaded::Ed25519(
                Ed25519KeyPair::from_pkcs8_maybe_unchecked(key.pkcs8_der()).map_err(bad_key)?,
            ),
            other => {
                return Err(SmimeError::UnsupportedAlgorithm(format!(
                    "no S/MIME signing with a {other} key"
                )))
            }
        })
    })?;
    match &*pair {
        Loaded::Ecdsa(pair) => {
            let sig = pair
                .sign(&rng, message)
                .map_err(|_| SmimeError::Key("ECDSA signing failed".into()))?;
            Ok(sig.as_ref().to_vec())
        }
        Loaded::RsaSign(pair) => {
            let mut sig = vec![0u8; pair.public_modulus_len()];
            let padding: &dyn signature::RsaEncoding = if rsa_pss {
                &signature::RSA_PSS_SHA256
            } else {
                &signature::RSA_PKCS1_SHA256
            };
            pair.sign(padding, &rng, message, &mut sig)
                .map_err(|_| SmimeError::Key("RSA signing failed".into()))?;
            Ok(sig)
        }
        Loaded::Ed25519(pair) => {
            let spki = cert.tbs_certificate().subject_public_key_info();
            if pair.public_key().as_ref() != spki.subject_public_key.raw_bytes() {
                return Err(SmimeError::Key(
                    "the private key does not match the certificate".into(),
                ));
            }
            Ok(pair.sign(message).as_ref().to_vec())
        }
        _ => Err(SmimeError::Key("not a signing key".into())),
    }
}

/// [`sign_bytes`] inside the corpus's seeded scope ([`crate::entropy`]), where the
/// signature must be the same bytes for the same seed: ECDSA P-256 with RFC 6979's
/// deterministic nonce, RSA-PSS with its salt from the seeded stream (aws-lc-rs draws
/// both from its own source). RSA PKCS#1 v1.5 and Ed25519 are deterministic already
/// and go the usual way, as does what neither covers (P-384).
fn seeded_sign(
    key: &SecretKey,
    rsa_pss: bool,
    message: &[u8],
    rng: &mut rand_chacha::ChaCha20Rng,
) -> Option<Result<Vec<u8>, SmimeError>> {
    use p256::pkcs8::DecodePrivateKey;
    let failed = |_| SmimeError::Key("signing failed".into());
    match key.algorithm() {
        KeyAlgorithm::Ec => {
            let key = p256::ecdsa::SigningKey::from_pkcs8_der(key.pkcs8_der()).ok()?;
            let sig: Result<p256::ecdsa::Signature, _> =
                p256::ecdsa::signature::Signer::try_sign(&key, message);
            Some(sig.map(|s| s.to_der().as_bytes().to_vec()).map_err(failed))
        }
        KeyAlgorithm::Rsa if rsa_pss => {
            use rsa::signature::{RandomizedSigner, SignatureEncoding};
            let key = rsa::RsaPrivateKey::from_pkcs8_der(key.pkcs8_der()).ok()?;
            let signer = rsa::pss::BlindedSigningKey::<sha2::Sha256>::new(key);
            Some(
                signer
                    .try_sign_with_rng(rng, message)
                    .map(|s| s.to_vec())
                    .map_err(failed),
            )
        }
        _ => None,
    }
}

/// The signature algorithm `key` signs with (as in a SignerInfo; `cert` carries its
/// public key).
pub(crate) fn signature_algorithm(
    key: &SecretKey,
    cert: &Certificate,
) -> Result<AlgorithmIdentifierOwned, SmimeError> {
    Ok(scheme_for(key, cert, false)?.signature_alg)
}

/// Signs `message` with `key` as [`signature_algorithm`] names it.
pub(crate) fn sign_with(
    key: &SecretKey,
    cert: &Certificate,
    message: &[u8],
) -> Result<Vec<u8>, SmimeError> {
    sign_bytes(&LoadedKeys::default(), key, cert, false, message)
}

/// The signed attributes (DER of the SET OF) of a detached signature over `content`
/// by `cert`'s key at `signing_time`: what the key signs. Offline signing carries
/// them across the gap and the offline host recomputes them from the content.
pub(crate) fn signed_attributes(
    cert: &Certificate,
    rsa_pss: bool,
    content: &[u8],
    signing_time: OffsetDateTime,
) -> Result<Vec<u8>, SmimeError> {
    let scheme = scheme_for_cert(cert, rsa_pss)?;
    let content_digest = digest::digest(scheme.digest, content);
    let capabilities: Vec<AlgorithmIdentifierOwned> =
        [AES256_GCM, AES128_GCM].into_iter().map(alg).collect();
    let attrs = vec![
        attribute(
            ATTR_CONTENT_TYPE,
            Any::encode_from(&ID_DATA).map_err(malformed("contentType"))?,
        )?,
        attribute(ATTR_SIGNING_TIME, signing_time_value(signing_time)?)?,
        attribute(
            ATTR_MESSAGE_DIGEST,
            Any::encode_from(
                &OctetString::new(content_digest.as_ref()).map_err(malformed("messageDigest"))?,
            )
            .map_err(malformed("messageDigest"))?,
        )?,
        attribute(
            ATTR_SMIME_CAPABILITIES,
            Any::encode_from(&capabilities).map_err(malformed("capabilities"))?,
        )?,
    ];
    SetOfVec::try_from(attrs)
        .map_err(malformed("signed attributes"))?
        .to_der()
        .map_err(malformed("signed attributes"))
}

/// Signs the DER of signed attributes with `key` (a file key or a token's).
pub(crate) fn sign_attributes(
    loaded: &LoadedKeys,
    key: &SecretKey,
    cert: &Certificate,
    rsa_pss: bool,
    attrs_der: &[u8],
) -> Result<Vec<u8>, SmimeError> {
    if key.algorithm() != cert_algorithm(cert)? {
        return Err(SmimeError::Key(
            "the private key does not match the certificate".into(),
        ));
    }
    sign_bytes(loaded, key, cert, rsa_pss, attrs_der)
}

/// Checks that `signature` is `cert`'s signature over `attrs_der` (the scheme
/// [`signed_attributes`] chose).
pub(crate) fn check_attributes_signature(
    cert: &Certificate,
    rsa_pss: bool,
    attrs_der: &[u8],
    signature: &[u8],
) -> Result<(), SmimeError> {
    let scheme = scheme_for_cert(cert, rsa_pss)?;
    verify_signature(
        cert.tbs_certificate().subject_public_key_info(),
        &scheme.signature_alg,
        scheme.digest_oid,
        attrs_der,
        signature,
    )
    .map(|_| ())
}

/// The DER ContentInfo of a detached SignedData from its signed attributes and the
/// signature over them: what [`sign_detached`] writes, made from parts signed
/// elsewhere.
pub(crate) fn detached_from_parts(
    cert: &Certificate,
    rsa_pss: bool,
    attrs_der: &[u8],
    signature: Vec<u8>,
) -> Result<Vec<u8>, SmimeError> {
    let scheme = scheme_for_cert(cert, rsa_pss)?;
    let signed_attrs =
        SetOfVec::<Attribute>::from_der(attrs_der).map_err(malformed("signed attributes"))?;
    let tbs = cert.tbs_certificate();
    let signer = SignerInfo {
        version: CmsVersion::V1,
        sid: SignerIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
            issuer: tbs.issuer().clone(),
            serial_number: tbs.serial_number().clone(),
        }),
        digest_alg: alg(scheme.digest_oid),
        signed_attrs: Some(signed_attrs),
        signature_algorithm: scheme.signature_alg,
        signature: OctetString::new(signature).map_err(malformed("signature"))?,
        unsigned_attrs: None,
    };
    let signed_data = SignedData {
        version: CmsVersion::V1,
        digest_algorithms: SetOfVec::try_from(vec![alg(scheme.digest_oid)])
            .map_err(malformed("digests"))?,
        encap_content_info: EncapsulatedContentInfo {
            econtent_type: ID_DATA,
            econtent: None,
        },
        certificates: Some(CertificateSet(
            SetOfVec::try_from(vec![CertificateChoices::Certificate(cert.clone())])
                .map_err(malformed("certificates"))?,
        )),
        crls: None,
        signer_infos: SignerInfos(
            SetOfVec::try_from(vec![signer]).map_err(malformed("signer infos"))?,
        ),
    };
    let info = ContentInfo {
        content_type: ID_SIGNED_DATA,
        content: Any::encode_from(&signed_data).map_err(malformed("SignedData"))?,
    };
    info.to_der().map_err(malformed("ContentInfo"))
}

/// A detached SignedData over `content`, signed by `key` for `cert` at `signing_time`;
/// the DER of the ContentInfo.
pub(crate) fn sign_detached(
    loaded: &LoadedKeys,
    content: &[u8],
    cert: &Certificate,
    key: &SecretKey,
    signing_time: OffsetDateTime,
    rsa_pss: bool,
) -> Result<Vec<u8>, SmimeError> {
    let attrs = signed_attributes(cert, rsa_pss, content, signing_time)?;
    let signature = sign_bytes(loaded, key, cert, rsa_pss, &attrs)?;
    detached_from_parts(cert, rsa_pss, &attrs, signature)
}

fn digest_for(oid: ObjectIdentifier) -> Result<&'static digest::Algorithm, SmimeError> {
    match oid {
        SHA256 => Ok(&digest::SHA256),
        SHA384 => Ok(&digest::SHA384),
        SHA512 => Ok(&digest::SHA512),
        other => Err(SmimeError::UnsupportedAlgorithm(format!("digest {other}"))),
    }
}

fn matches_sid(cert: &Certificate, sid: &SignerIdentifier) -> bool {
    match sid {
        SignerIdentifier::IssuerAndSerialNumber(ias) => {
            cert.tbs_certificate().issuer() == &ias.issuer
                && cert.tbs_certificate().serial_number() == &ias.serial_number
        }
        SignerIdentifier::SubjectKeyIdentifier(ski) => matches!(
            cert.tbs_certificate().get_extension::<x509_cert::ext::pkix::SubjectKeyIdentifier>(),
            Ok(Some((_, own))) if own == *ski
        ),
    }
}

fn single_value(
    attrs: &SetOfVec<Attribute>,
    oid: ObjectIdentifier,
) -> Result<Option<&Any>, SmimeError> {
    let mut found = attrs.iter().filter(|a| a.oid == oid);
    match (found.next(), found.next()) {
        (None, _) => Ok(None),
        (Some(a), None) if a.values.len() == 1 => Ok(a.values.iter().next()),
        _ => Err(SmimeError::Malformed(format!(
            "attribute {oid} is not single-valued"
        ))),
    }
}

/// Verifies a signature made over `message` with the key of `spki`
/// ([`crate::identity::x509::verify_signature`], shared with certificate paths and
/// CRLs).
pub(crate) fn verify_signature(
    spki: &spki::SubjectPublicKeyInfoOwned,
    sig_alg: &AlgorithmIdentifierOwned,
    digest_oid: ObjectIdentifier,
    message: &[u8],
    signature: &[u8],
) -> Result<&'static str, SmimeError> {
    Ok(crate::identity::x509::verify_signature(
        spki, sig_alg, digest_oid, message, signature,
    )?)
}

/// A SignedData with its certificate set left encoded: the certificates are decoded
/// one by one through the profile's cache ([`LoadedKeys::certificate`]), since most
/// messages carry a signer certificate seen before, and decoding one is about a tenth
/// of a P-256 open. The other fields are the `cms` crate's.
#[derive(der::Sequence)]
struct SignedDataParts<'a> {
    version: CmsVersion,
    digest_algorithms: cms::signed_data::DigestAlgorithmIdentifiers,
    encap_content_info: EncapsulatedContentInfo,
    #[asn1(context_specific = "0", tag_mode = "IMPLICIT", optional = "true")]
    certificates: Option<EncodedSet<'a>>,
    #[asn1(context_specific = "1", tag_mode = "IMPLICIT", optional = "true")]
    crls: Option<RevocationInfos<'a>>,
    signer_infos: SignerInfos,
}

/// RFC 5652 10.2.1 `RevocationInfoChoices`, checked and left encoded: nothing here
/// reads revocation information from a message (the key store's CRLs decide), but a
/// set that does not parse makes the SignedData malformed, as it does for OpenSSL.
/// Ours because the `cms` crate's `OtherRevocationInfoFormat` reads an
/// AlgorithmIdentifier where RFC 5652 has an OBJECT IDENTIFIER: it refused a valid
/// SignedData that OpenSSL verifies (found by `corpus mutate --layer packets`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RevocationInfos<'a>(&'a [u8]);

impl<'a> der::DecodeValue<'a> for RevocationInfos<'a> {
    type Error = der::Error;

    fn decode_value<R: der::Reader<'a>>(reader: &mut R, header: der::Header) -> der::Result<Self> {
        let set = reader.read_slice(header.length())?;
        let mut items = der::SliceReader::new(set)?;
        let other = der::Tag::ContextSpecific {
            constructed: true,
            number: der::TagNumber(1),
        };
        while !der::Reader::is_finished(&items) {
            let item = der::AnyRef::decode(&mut items)?;
            if item.tag() == der::Tag::Sequence {
                // A CRL: `CertificateList`.
                x509_cert::crl::CertificateList::<x509_cert::certificate::Rfc5280>::from_der(
                    &item.to_der()?,
                )?;
            } else if item.tag() == other {
                // `[1] IMPLICIT OtherRevocationInfoFormat`: an OBJECT IDENTIFIER, then
                // the information of that format.
                let mut fields = der::SliceReader::new(item.value())?;
                <ObjectIdentifier>::decode(&mut fields)?;
                der::AnyRef::decode(&mut fields)?;
                der::Reader::finish(fields)?;
            } else {
                return Err(item.tag().unexpected_error(None).into());
            }
        }
        Ok(Self(set))
    }
}

impl der::EncodeValue for RevocationInfos<'_> {
    fn value_len(&self) -> der::Result<der::Length> {
        der::Length::try_from(self.0.len())
    }

    fn encode_value(&self, writer: &mut impl der::Writer) -> der::Result<()> {
        writer.write(self.0)
    }
}

impl der::FixedTag for RevocationInfos<'_> {
    const TAG: der::Tag = der::Tag::Set;
}

/// The value of a SET, still encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EncodedSet<'a>(&'a [u8]);

impl<'a> der::DecodeValue<'a> for EncodedSet<'a> {
    type Error = der::Error;

    fn decode_value<R: der::Reader<'a>>(reader: &mut R, header: der::Header) -> der::Result<Self> {
        Ok(Self(reader.read_slice(header.length())?))
    }
}

impl der::EncodeValue for EncodedSet<'_> {
    fn value_len(&self) -> der::Result<der::Length> {
        der::Length::try_from(self.0.len())
    }

    fn encode_value(&self, writer: &mut impl der::Writer) -> der::Result<()> {
        writer.write(self.0)
    }
}

impl der::FixedTag for EncodedSet<'_> {
    const TAG: der::Tag = der::Tag::Set;
}

/// The DER of the SignedData of a ContentInfo (DER, or BER from a streaming signer).
fn signed_data_der(cms_der: &[u8]) -> Result<Vec<u8>, SmimeError> {
    let info = super::content_info(cms_der)?;
    if info.content_type != ID_SIGNED_DATA {
        return Err(SmimeError::Malformed(format!(
            "content type {} is not signed-data",
            info.content_type
        )));
    }
    // Bounded before the decode (issue #17): a SignedData may carry a chain, not
    // thousands of certificates, nor thousands of signers.
    let sd = info.content.to_der().map_err(malformed("SignedData"))?;
    if crate::asn1::count::elements_of_field(&sd, 0, MAX_CARRIED_CERTIFICATES)
        > MAX_CARRIED_CERTIFICATES
    {
        return Err(SmimeError::Malformed(format!(
            "more than {MAX_CARRIED_CERTIFICATES} certificates in the SignedData"
        )));
    }
    if crate::asn1::count::elements_of_last_field(&sd, MAX_SIGNER_INFOS) > MAX_SIGNER_INFOS {
        return Err(SmimeError::Malformed(format!(
            "more than {MAX_SIGNER_INFOS} SignerInfos in the SignedData"
        )));
    }
    Ok(sd)
}

/// The certificates a SignedData carries. Choices other than a plain certificate
/// (attribute certificates, other formats) are decoded, so that a malformed one is
/// refused as before, and not used.
fn carried_certificates<'a>(
    loaded: &LoadedKeys,
    set: Option<EncodedSet<'a>>,
) -> Result<Vec<(Certificate, &'a [u8])>, SmimeError> {
    let mut out = Vec::new();
    let Some(EncodedSet(bytes)) = set else {
        return Ok(out);
    };
    let mut reader = der::SliceReader::new(bytes).map_err(malformed("certificates"))?;
    while !der::Reader::is_finished(&reader) {
        let tlv = der::Reader::tlv_bytes(&mut reader).map_err(malformed("certificates"))?;
        // A name past the cap matches no other (`same_name`), and decoded it would
        // cost some fifteen times its encoding: such a certificate is refused unread.
        let cap = crate::identity::x509::MAX_NAME_ATTRIBUTES;
        if crate::asn1::count::certificate_name_attributes(tlv, cap) > cap {
            return Err(SmimeError::Malformed(format!(
                "a certificate in the SignedData has a name of more than {cap} attributes"
            )));
        }
        if tlv.first() == Some(&0x30) {
            out.push((
                loaded.certificate(tlv).map_err(malformed("certificate"))?,
                tlv,
            ));
        } else {
            CertificateChoices::from_der(tlv).map_err(malformed("certificates"))?;
        }
    }
    Ok(out)
}

/// Certificates a SignedData may carry (the signer's chain, with room to spare).
const MAX_CARRIED_CERTIFICATES: usize = 64;

/// SignerInfos a SignedData may have: a writer signs once, or once per algorithm when
/// it signs with two keys. Every one must verify, and each verification digests the
/// content (issue #58: a thousand copies of one valid SignerInfo over 2 MiB of content
/// cost a second, and the work grew with the square of the message).
const MAX_SIGNER_INFOS: usize = 8;

/// Verifies a detached SignedData (DER ContentInfo) over `content`. Every SignerInfo
/// must verify; the first one's signer is returned.
pub(crate) fn verify_detached(
    loaded: &LoadedKeys,
    cms_der: &[u8],
    content: &[u8],
) -> Result<VerifiedSignature, SmimeError> {
    let der = signed_data_der(cms_der)?;
    let sd = SignedDataParts::from_der(&der).map_err(malformed("SignedData"))?;
    verify_signed_data(loaded, &sd, content)
}

/// Verifies an encapsulating SignedData (DER ContentInfo, opaque `signed-data`) and
/// returns its content with the verified signer.
pub(crate) fn verify_encapsulated(
    loaded: &LoadedKeys,
    cms_der: &[u8],
) -> Result<(Vec<u8>, VerifiedSignature), SmimeError> {
    let der = signed_data_der(cms_der)?;
    let sd = SignedDataParts::from_der(&der).map_err(malformed("SignedData"))?;
    let content = sd
        .encap_content_info
        .econtent
        .as_ref()
        .ok_or_else(|| SmimeError::Malformed("signed-data without content".into()))?
        .decode_as::<OctetString>()
        .map_err(malformed("encapsulated content"))?
        .into_bytes();
    let verified = verify_signed_data(loaded, &sd, &content)?;
    Ok((content.into_vec(), verified))
}

/// Verifies SignedData over `content` (detached, or the encapsulated content when the
/// caller extracted it).
fn verify_signed_data(
    loaded: &LoadedKeys,
    sd: &SignedDataParts<'_>,
    content: &[u8],
) -> Result<VerifiedSignature, SmimeError> {
    if sd.encap_content_info.econtent_type != ID_DATA {
        return Err(SmimeError::Malformed(
            "signed content is not id-data".into(),
        ));
    }
    let carried = carried_certificates(loaded, sd.certificates)?;
    let mut first = None;
    let mut digests: Vec<(ObjectIdentifier, digest::Digest)> = Vec::new();
    if sd.signer_infos.0.is_empty() {
        return Err(SmimeError::NoSigner);
    }
    // RFC 5652 5.1/5.3: the versions follow from the signer identifiers. They are not
    // signed, so they are checked exactly rather than ignored.
    let uses_ski = sd
        .signer_infos
        .0
        .iter()
        .any(|si| matches!(si.sid, SignerIdentifier::SubjectKeyIdentifier(_)));
    let expected_version = if uses_ski {
        CmsVersion::V3
    } else {
        CmsVersion::V1
    };
    if sd.version != expected_version {
        return Err(SmimeError::Malformed(
            "SignedData version does not match its signers".into(),
        ));
    }
    for si in sd.signer_infos.0.iter() {
        let si_version = match si.sid {
            SignerIdentifier::IssuerAndSerialNumber(_) => CmsVersion::V1,
            SignerIdentifier::SubjectKeyIdentifier(_) => CmsVersion::V3,
        };
        if si.version != si_version {
            return Err(SmimeError::Malformed(
                "SignerInfo version does not match its identifier".into(),
            ));
        }
        if !sd
            .digest_algorithms
            .iter()
            .any(|d| d.oid == si.digest_alg.oid)
        {
            return Err(SmimeError::Malformed(
                "digestAlgorithms does not list the signer's digest".into(),
            ));
        }
        let (signer, (cert, _)) = carried
            .iter()
            .enumerate()
            .find(|(_, (c, _))| matches_sid(c, &si.sid))
            .ok_or(SmimeError::NoSigner)?;
        let digest_alg = digest_for(si.digest_alg.oid)?;
        // The content is digested once per algorithm, whatever the number of signers.
        let content_digest = match digests.iter().find(|(oid, _)| *oid == si.digest_alg.oid) {
            Some((_, d)) => *d,
            None => {
                let d = digest::digest(digest_alg, content);
                digests.push((si.digest_alg.oid, d));
                d
            }
        };
        let mut signing_time = None;
        let message = match &si.signed_attrs {
            Some(attrs) => {
                let ct = single_value(attrs, ATTR_CONTENT_TYPE)?
                    .ok_or_else(|| SmimeError::Malformed("no contentType attribute".into()))?
                    .decode_as::<ObjectIdentifier>()
                    .map_err(malformed("contentType"))?;
                if ct != sd.encap_content_info.econtent_type {
                    return Err(SmimeError::Malformed(
                        "contentType attribute differs from the content".into(),
                    ));
                }
                let md = single_value(attrs, ATTR_MESSAGE_DIGEST)?
                    .ok_or_else(|| SmimeError::Malformed("no messageDigest attribute".into()))?
                    .decode_as::<OctetString>()
                    .map_err(malformed("messageDigest"))?;
                if md.as_bytes() != content_digest.as_ref() {
                    return Err(SmimeError::DigestMismatch);
                }
                if let Some(t) = single_value(attrs, ATTR_SIGNING_TIME)? {
                    let t: x509_cert::time::Time =
                        t.decode_as().map_err(malformed("signingTime"))?;
                    signing_time =
                        OffsetDateTime::from_unix_timestamp(t.to_unix_duration().as_secs() as i64)
                            .ok();
                }
                std::borrow::Cow::Owned(attrs.to_der().map_err(malformed("signed attributes"))?)
            }
            None => std::borrow::Cow::Borrowed(content),
        };
        let spki = cert.tbs_certificate().subject_public_key_info();
        let name = verify_signature(
            spki,
            &si.signature_algorithm,
            si.digest_alg.oid,
            &message,
            si.signature.as_bytes(),
        )?;
        if first.is_none() {
            first = Some((signer, signing_time, name));
        }
    }
    let (signer, signing_time, algorithm) = first.ok_or(SmimeError::NoSigner)?;
    let cert_der = carried[signer].1.to_vec();
    let carried: Vec<Certificate> = carried.into_iter().map(|(c, _)| c).collect();
    // The signer stays among the carried certificates (a chain candidate, as before).
    let cert = carried[signer].clone();
    Ok(VerifiedSignature {
        cert,
        cert_der,
        carried,
        signing_time,
        algorithm,
        warnings: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SET { elements }` as DER.
    fn set(elements: &[&[u8]]) -> Vec<u8> {
        let body = elements.concat();
        let mut out = Vec::new();
        crate::asn1::ber::push_header(&mut out, 0x31, body.len());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn revocation_information_of_another_format_reads_as_rfc_5652_has_it() {
        // `[1] { OBJECT IDENTIFIER 1.3.6.1.4.1.1, NULL }`
        let other: &[u8] = b"\xa1\x09\x06\x05\x2b\x06\x01\x04\x01\x05\x00";
        assert!(RevocationInfos::from_der(&set(&[other, other])).is_ok());
        assert!(RevocationInfos::from_der(&set(&[])).is_ok());
        // The `cms` crate's reading: an AlgorithmIdentifier first. Not RFC 5652's.
        let algorithm: &[u8] = b"\xa1\x0b\x30\x07\x06\x05\x2b\x06\x01\x04\x01\x05\x00";
        assert!(RevocationInfos::from_der(&set(&[algorithm])).is_err());
        // Neither a CRL nor another format; a format without its information; a CRL
        // that is not one.
        for bad in [
            &b"\x02\x01\x05"[..],
            b"\xa1\x07\x06\x05\x2b\x06\x01\x04\x01",
            b"\x30\x03\x02\x01\x05",
        ] {
            assert!(RevocationInfos::from_der(&set(&[other, bad])).is_err());
        }
    }
}
