//! Making S/MIME identities (`mailseal key generate --kind smime`): a fresh key and an
//! X.509 v3 certificate for it, self-signed or issued by a CA key, with the extensions
//! RFC 8550 asks of an email certificate: key usage (critical), extended key usage
//! emailProtection, the rfc822Name in subjectAltName, basic constraints (critical),
//! subject and authority key identifiers. A CA certificate can be made the same way.
//!
//! Ed25519 cannot encrypt, so an Ed25519 identity is two certificates as in RFC 9216:
//! an Ed25519 signing certificate and an X25519 key-agreement certificate issued by the
//! same issuer (or, self-signed, by the new Ed25519 key).

use std::str::FromStr;

use aws_lc_rs::signature::{
    EcdsaKeyPair, Ed25519KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING,
};
use der::asn1::{BitString, Ia5String, Null, ObjectIdentifier, OctetString};
use der::oid::AssociatedOid;
use der::{Any, Decode, Encode};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use time::OffsetDateTime;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages,
    SubjectAltName, SubjectKeyIdentifier,
};
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::{Time, Validity};
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::SmimeError;
use crate::asn1::oids::*;
use crate::keystore::{KeyAlgorithm, SecretKey};

const EMAIL_PROTECTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.4");

/// The key of a new identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyKind {
    /// ECDSA and ECDH on P-256 (one key signs and agrees keys). The default.
    P256,
    /// ECDSA and ECDH on P-384.
    P384,
    /// RSA 2048 (PKCS#1 v1.5 or PSS signatures, OAEP key transport).
    Rsa2048,
    /// RSA 3072.
    Rsa3072,
    /// RSA 4096.
    Rsa4096,
    /// Ed25519 signing plus an X25519 key-agreement certificate.
    Ed25519,
}

impl FromStr for KeyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "p256" | "p-256" | "ec" => KeyKind::P256,
            "p384" | "p-384" => KeyKind::P384,
            "rsa" | "rsa2048" => KeyKind::Rsa2048,
            "rsa3072" => KeyKind::Rsa3072,
            "rsa4096" => KeyKind::Rsa4096,
            "ed25519" => KeyKind::Ed25519,
            other => {
                return Err(format!(
                "unknown key algorithm {other}: p256, p384, rsa2048, rsa3072, rsa4096 or ed25519"
            ))
            }
        })
    }
}

/// What to put in a new certificate. [`IdentityRequest::new`] (or `Default`, then the
/// address) gives what `mailseal key generate --kind smime` makes: P-256, a year.
#[derive(Clone, Debug)]
pub struct IdentityRequest {
    /// The email address (subjectAltName rfc822Name); `None` only for a CA.
    pub email: Option<String>,
    /// The subject's common name (default: the address).
    pub common_name: Option<String>,
    /// The key.
    pub kind: KeyKind,
    /// Days of validity from now.
    pub days: u32,
    /// Make a CA certificate (keyCertSign, cRLSign) instead of an email certificate.
    pub ca: bool,
}

impl Default for IdentityRequest {
    /// No address yet, P-256, 365 days, not a CA.
    fn default() -> Self {
        IdentityRequest {
            email: None,
            common_name: None,
            kind: KeyKind::P256,
            days: 365,
            ca: false,
        }
    }
}

impl IdentityRequest {
    /// An email certificate for `email`, with the defaults.
    pub fn new(email: &str) -> Self {
        IdentityRequest {
            email: Some(email.to_string()),
            ..Self::default()
        }
    }
}

/// A new certificate and its private key (PKCS#8 DER, wiped on drop).
pub struct Identity {
    /// The certificate.
    pub certificate: Certificate,
    /// The private key.
    pub private_key: Zeroizing<Vec<u8>>,
}

/// TBSCertificate written out field by field (x509-cert 0.3 keeps its own private).
#[derive(der::Sequence)]
struct Tbs {
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT")]
    version: u8,
    serial: SerialNumber,
    signature: AlgorithmIdentifierOwned,
    issuer: Name,
    validity: Validity,
    subject: Name,
    spki: SubjectPublicKeyInfoOwned,
    #[asn1(context_specific = "3", tag_mode = "EXPLICIT")]
    extensions: Vec<Extension>,
}

#[derive(der::Sequence)]
struct CertificateDer {
    tbs: Tbs,
    algorithm: AlgorithmIdentifierOwned,
    signature: BitString,
}

fn err(what: &str) -> impl Fn(der::Error) -> SmimeError + '_ {
    move |e| SmimeError::Malformed(format!("{what}: {e}"))
}

fn no_key() -> SmimeError {
    SmimeError::Key("key generation failed".into())
}

fn extension<T: Encode + AssociatedOid>(
    value: &T,
    critical: bool,
) -> Result<Extension, SmimeError> {
    Ok(Extension {
        extn_id: T::OID,
        critical,
        extn_value: OctetString::new(value.to_der().map_err(err("extension"))?)
            .map_err(err("extension"))?,
    })
}

/// A fresh private key for `kind` as PKCS#8 DER (for `x25519`, an X25519 key).
pub(crate) fn generate_key(kind: KeyKind, x25519: bool) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    if x25519 {
        // RFC 8410: PrivateKeyInfo { v1, id-X25519, OCTET STRING { OCTET STRING (32) } }.
        let mut secret = Zeroizing::new([0u8; 32]);
        crate::entropy::fill(&mut secret[..]).map_err(|_| no_key())?;
        let mut der = Zeroizing::new(vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22,
            0x04, 0x20,
        ]);
        der.extend_from_slice(&secret[..]);
        return Ok(der);
    }
    // Inside the corpus's seeded scope ([`crate::entropy`]) a P-256 key comes from
    // the seeded stream (aws-lc-rs generates only from its own source).
    if kind == KeyKind::P256 {
        let seeded = crate::entropy::with_seeded(|rng| {
            use p256::pkcs8::EncodePrivateKey;
            let key = p256::SecretKey::random(rng);
            key.to_pkcs8_der().map(|doc| doc.as_bytes().to_vec())
        });
        if let Some(doc) = seeded {
            return Ok(Zeroizing::new(doc.map_err(|_| no_key())?));
        }
    }
    let doc = match kind {
        KeyKind::P256 | KeyKind::P384 => {
            let alg = if kind == KeyKind::P256 {
                &ECDSA_P256_SHA256_ASN1_SIGNING
            } else {
                &ECDSA_P384_SHA384_ASN1_SIGNING
            };
            let pair = EcdsaKeyPair::generate(alg).map_err(|_| no_key())?;
            pair.to_pkcs8v1().map_err(|_| no_key())?.as_ref().to_vec()
        }
        KeyKind::Rsa2048 | KeyKind::Rsa3072 | KeyKind::Rsa4096 => {
            use aws_lc_rs::encoding::AsDer;
            let size = match kind {
                KeyKind::Rsa2048 => aws_lc_rs::rsa::KeySize::Rsa2048,
                KeyKind::Rsa3072 => aws_lc_rs::rsa::KeySize::Rsa3072,
                _ => aws_lc_rs::rsa::KeySize::Rsa4096,
            };
            let pair = aws_lc_rs::rsa::KeyPair::generate(size).map_err(|_| no_key())?;
            let der: aws_lc_rs::encoding::Pkcs8V1Der = pair.as_der().map_err(|_| no_key())?;
            der.as_ref().to_vec()
        }
        KeyKind::Ed25519 => {
            let pair = Ed25519KeyPair::generate().map_err(|_| no_key())?;
            pair.to_pkcs8v1().map_err(|_| no_key())?.as_ref().to_vec()
        }
    };
    Ok(Zeroizing::new(doc))
}

/// The SubjectPublicKeyInfo of a PKCS#8 private key.
fn spki_of(pkcs8_der: &[u8]) -> Result<SubjectPublicKeyInfoOwned, SmimeError> {
    let info = pkcs8::PrivateKeyInfoRef::from_der(pkcs8_der).map_err(err("private key"))?;
    let (alg, public) = crate::keystore::key_public(pkcs8_der, "new key")
        .map_err(|e| SmimeError::Key(e.to_string()))?;
    let parameters = match alg {
        KeyAlgorithm::Ec => info
            .algorithm
            .parameters
            .map(|p| Any::from_der(&p.to_der()?))
            .transpose()
            .map_err(err("curve"))?,
        KeyAlgorithm::Rsa => Some(Any::from(Null)),
        _ => None,
    };
    Ok(SubjectPublicKeyInfoOwned {
        algorithm: AlgorithmIdentifierOwned {
            oid: info.algorithm.oid,
            parameters,
        },
        subject_public_key: BitString::from_bytes(&public).map_err(err("public key"))?,
    })
}

/// RFC 7093 method 1: the leftmost 160 bits of SHA-256 of the public key bits.
fn key_identifier(spki: &SubjectPublicKeyInfoOwned) -> Result<OctetString, SmimeError> {
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        spki.subject_public_key.raw_bytes(),
    );
    OctetString::new(&digest.as_ref()[..20]).map_err(err("key identifier"))
}

fn serial() -> Result<SerialNumber, SmimeError> {
    let mut bytes = [0u8; 16];
    crate::entropy::fill(&mut bytes).map_err(|_| no_key())?;
    bytes[0] = (bytes[0] & 0x7f) | 0x01; // positive, sixteen significant bytes
    SerialNumber::new(&bytes).map_err(err("serial number"))
}

fn validity(days: u32, now: OffsetDateTime) -> Result<Validity, SmimeError> {
    let start = now - time::Duration::minutes(5);
    let end = now + time::Duration::days(days.max(1) as i64);
    let t = |at: OffsetDateTime| {
        let secs = std::time::Duration::from_secs(at.unix_timestamp().max(0) as u64);
        Time::try_from(std::time::UNIX_EPOCH + secs).map_err(err("validity"))
    };
    Ok(Validity::new(t(start)?, t(end)?))
}

/// Who signs a new certificate: a CA's certificate and key, or the new key itself.
pub struct Issuer<'a> {
    /// The CA certificate.
    pub certificate: &'a Certificate,
    /// Its private key.
    pub key: &'a SecretKey,
}

/// The key a new certificate is for.
enum SubjectKey<'a> {
    /// Generated here: PKCS#8 DER.
    Software(&'a [u8]),
    /// On a PKCS#11 token: its public key, and the handle that signs.
    Token(SubjectPublicKeyInfoOwned, &'a SecretKey),
}

/// Builds and signs one certificate for `key_der` (PKCS#8).
fn certify(
    req: &IdentityRequest,
    key_der: &[u8],
    usage: KeyUsage,
    issuer: Option<&Issuer<'_>>,
    now: OffsetDateTime,
) -> Result<Certificate, SmimeError> {
    certify_key(req, SubjectKey::Software(key_der), usage, issuer, now)
}

/// A certificate for a key on a PKCS#11 token, `spki_der` being its public key: signed
/// by `issuer`, or by the token key itself. Key usages as for a generated key of the
/// same algorithm (P-256: digitalSignature and keyAgreement; RSA: digitalSignature and
/// keyEncipherment).
pub fn certify_token_key(
    req: &IdentityRequest,
    spki_der: &[u8],
    key: &SecretKey,
    issuer: Option<&Issuer<'_>>,
) -> Result<Certificate, SmimeError> {
    let spki = SubjectPublicKeyInfoOwned::from_der(spki_der).map_err(err("token public key"))?;
    let usage = match key.algorithm() {
        KeyAlgorithm::Ec => KeyUsage(KeyUsages::DigitalSignature | KeyUsages::KeyAgreement),
        _ => KeyUsage(KeyUsages::DigitalSignature | KeyUsages::KeyEncipherment),
    };
    certify_key(
        req,
        SubjectKey::Token(spki, key),
        usage,
        issuer,
        OffsetDateTime::now_utc(),
    )
}

/// Validity runs from `now` (less five minutes of clock skew) for `req.days`.
fn certify_key(
    req: &IdentityRequest,
    subject_key: SubjectKey<'_>,
    usage: KeyUsage,
    issuer: Option<&Issuer<'_>>,
    now: OffsetDateTime,
) -> Result<Certificate, SmimeError> {
    let spki = match &subject_key {
        SubjectKey::Software(der) => spki_of(der)?,
        SubjectKey::Token(spki, _) => spki.clone(),
    };
    let ski = key_identifier(&spki)?;
    let cn = req
        .common_name
        .clone()
        .or_else(|| req.email.clone())
        .unwrap_or_else(|| "mailseal CA".into());
    let subject = Name::from_str(&format!(
        "CN={}",
        cn.replace(['\\', ',', '+', '=', '"'], " ")
    ))
    .map_err(err("subject"))?;
    let mut usages = usage;
    let mut extensions = vec![extension(
        &BasicConstraints {
            ca: req.ca,
            path_len_constraint: None,
        },
        true,
    )?];
    if req.ca {
        usages = KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign);
    }
    extensions.push(extension(&usages, true)?);
    if !req.ca {
        extensions.push(extension(&ExtendedKeyUsage(vec![EMAIL_PROTECTION]), false)?);
    }
    if let Some(email) = &req.email {
        let name = GeneralName::Rfc822Name(Ia5String::new(email).map_err(err("email address"))?);
        extensions.push(extension(&SubjectAltName(vec![name]), false)?);
    }
    extensions.push(extension(&SubjectKeyIdentifier(ski.clone()), false)?);
    let issuer_ski = match issuer {
        Some(i) => i
            .certificate
            .tbs_certificate()
            .get_extension::<SubjectKeyIdentifier>()
            .ok()
            .flatten()
            .map(|(_, s)| s.0),
        None => Some(ski),
    };
    if let Some(id) = issuer_ski {
        extensions.push(extension(
            &AuthorityKeyIdentifier {
                key_identifier: Some(id),
                authority_cert_issuer: None,
                authority_cert_serial_number: None,
            },
            false,
        )?);
    }
    let issuer_name = match issuer {
        Some(i) => i.certificate.tbs_certificate().subject().clone(),
        None => subject.clone(),
    };
    // The key that signs: the CA's, or for a self-signed certificate the new one, read
    // through a provisional certificate that carries only its public key.
    let provisional;
    let own_key;
    let (signer_cert, signer_key) = match issuer {
        Some(i) => (i.certificate, i.key),
        None => {
            let placeholder = AlgorithmIdentifierOwned {
                oid: SHA256,
                parameters: None,
            };
            let tbs = Tbs {
                version: 2,
                serial: serial()?,
                signature: placeholder.clone(),
                issuer: subject.clone(),
                validity: validity(req.days, now)?,
                subject: subject.clone(),
                spki: spki.clone(),
                extensions: Vec::new(),
            };
            let der = CertificateDer {
                tbs,
                algorithm: placeholder,
                signature: BitString::from_bytes(&[]).map_err(err("certificate"))?,
            }
            .to_der()
            .map_err(err("certificate"))?;
            provisional = Certificate::from_der(&der).map_err(err("certificate"))?;
            match subject_key {
                SubjectKey::Software(key_der) => {
                    let (alg, _) = crate::keystore::key_public(key_der, "new key")
                        .map_err(|e| SmimeError::Key(e.to_string()))?;
                    own_key = SecretKey::new(String::new(), alg, Zeroizing::new(key_der.to_vec()));
                    (&provisional, &own_key)
                }
                SubjectKey::Token(_, key) => (&provisional, key),
            }
        }
    };
    let mut algorithm = super::signed_data::signature_algorithm(signer_key, signer_cert)?;
    if algorithm.oid == SHA256_WITH_RSA {
        algorithm.parameters = Some(Any::from(Null)); // RFC 4055: NULL in certificates
    }
    let tbs = Tbs {
        version: 2,
        serial: serial()?,
        signature: algorithm.clone(),
        issuer: issuer_name,
        validity: validity(req.days, now)?,
        subject,
        spki,
        extensions,
    };
    let tbs_der = tbs.to_der().map_err(err("certificate"))?;
    let signature = super::signed_data::sign_with(signer_key, signer_cert, &tbs_der)?;
    let der = CertificateDer {
        tbs,
        algorithm,
        signature: BitString::from_bytes(&signature).map_err(err("signature"))?,
    }
    .to_der()
    .map_err(err("certificate"))?;
    Certificate::from_der(&der).map_err(err("certificate"))
}

/// A new identity: one certificate and key, or for Ed25519 the signing pair followed
/// by the X25519 key-agreement pair.
pub fn generate(
    req: &IdentityRequest,
    issuer: Option<&Issuer<'_>>,
) -> Result<Vec<Identity>, SmimeError> {
    generate_at(req, issuer, OffsetDateTime::now_utc())
}

/// [`generate`] as of `now`: the certificates' validity starts then (the conformance
/// corpus judges its cases at a fixed time, [`crate::corpus::NOW`]).
pub(crate) fn generate_at(
    req: &IdentityRequest,
    issuer: Option<&Issuer<'_>>,
    now: OffsetDateTime,
) -> Result<Vec<Identity>, SmimeError> {
    if !req.ca && req.email.is_none() {
        return Err(SmimeError::Certificate(
            "an S/MIME certificate needs an email address".into(),
        ));
    }
    let key = generate_key(req.kind, false)?;
    let usage = match req.kind {
        KeyKind::P256 | KeyKind::P384 => {
            KeyUsage(KeyUsages::DigitalSignature | KeyUsages::KeyAgreement)
        }
        KeyKind::Rsa2048 | KeyKind::Rsa3072 | KeyKind::Rsa4096 => {
            KeyUsage(KeyUsages::DigitalSignature | KeyUsages::KeyEncipherment)
        }
        KeyKind::Ed25519 => KeyUsage(KeyUsages::DigitalSignature.into()),
    };
    let certificate = certify(req, &key, usage, issuer, now)?;
    let mut out = vec![Identity {
        certificate,
        private_key: key,
    }];
    if req.kind == KeyKind::Ed25519 && !req.ca {
        let agreement = generate_key(req.kind, true)?;
        let signing = &out[0];
        let own;
        let by = match issuer {
            Some(i) => i,
            None => {
                own = (
                    signing.certificate.clone(),
                    SecretKey::new(
                        String::new(),
                        KeyAlgorithm::Ed25519,
                        signing.private_key.clone(),
                    ),
                );
                &Issuer {
                    certificate: &own.0,
                    key: &own.1,
                }
            }
        };
        let usage = KeyUsage(KeyUsages::KeyAgreement.into());
        let certificate = certify(req, &agreement, usage, Some(by), now)?;
        out.push(Identity {
            certificate,
            private_key: agreement,
        });
    }
    Ok(out)
}

/// A PKCS#10 certificate request (RFC 2986), DER, for the key of `cert` (the
/// placeholder certificate the key was generated with), signed by `key`: subject
/// `CN=` the name or address, and requested extensions the subjectAltName rfc822Name
/// `email`, key usage digitalSignature and nonRepudiation (critical), extended key
/// usage emailProtection. What a CA issues an S/MIME signing certificate from; the
/// issued certificate, imported, is bound to the same key.
pub fn certificate_request(
    email: &str,
    common_name: Option<&str>,
    cert: &Certificate,
    key: &SecretKey,
) -> Result<Vec<u8>, SmimeError> {
    use x509_cert::request::{CertReq, CertReqInfo, ExtensionReq, Version};
    let cn = common_name.unwrap_or(email);
    let subject = Name::from_str(&format!(
        "CN={}",
        cn.replace(['\\', ',', '+', '=', '"'], " ")
    ))
    .map_err(err("subject"))?;
    let name = GeneralName::Rfc822Name(Ia5String::new(email).map_err(err("email address"))?);
    let extensions = vec![
        extension(
            &KeyUsage(KeyUsages::DigitalSignature | KeyUsages::NonRepudiation),
            true,
        )?,
        extension(&ExtendedKeyUsage(vec![EMAIL_PROTECTION]), false)?,
        extension(&SubjectAltName(vec![name]), false)?,
    ];
    let attribute = x509_cert::attr::Attribute::try_from(ExtensionReq(extensions))
        .map_err(err("extension request"))?;
    let info = CertReqInfo {
        version: Version::V1,
        subject,
        public_key: cert.tbs_certificate().subject_public_key_info().clone(),
        attributes: der::asn1::SetOfVec::try_from(vec![attribute]).map_err(err("attributes"))?,
    };
    let info_der = info.to_der().map_err(err("certificate request"))?;
    let mut algorithm = super::signed_data::signature_algorithm(key, cert)?;
    if algorithm.oid == SHA256_WITH_RSA {
        algorithm.parameters = Some(Any::from(Null));
    }
    let signature = super::signed_data::sign_with(key, cert, &info_der)?;
    CertReq {
        info,
        algorithm,
        signature: BitString::from_bytes(&signature).map_err(err("signature"))?,
    }
    .to_der()
    .map_err(err("certificate request"))
}
