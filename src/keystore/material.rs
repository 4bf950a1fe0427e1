//! Reading certificates and PKCS#8 keys, and the fingerprint that pairs them.

use der::asn1::{BitStringRef, ObjectIdentifier, OctetStringRef, UintRef};
use der::{Decode, DecodePem, Encode, Sequence};
use sha2::{Digest, Sha256};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::Certificate;

use super::KeyStoreError;

/// Public-key algorithms the store recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyAlgorithm {
    /// RSA (rsaEncryption).
    Rsa,
    /// ECDSA/ECDH on a named curve (id-ecPublicKey).
    Ec,
    /// Ed25519 (RFC 8410).
    Ed25519,
    /// X25519 (RFC 8410).
    X25519,
    /// Anything else (listed, not usable).
    Other,
}

impl std::fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Rsa => "rsa",
            Self::Ec => "ec",
            Self::Ed25519 => "ed25519",
            Self::X25519 => "x25519",
            Self::Other => "other",
        })
    }
}

const RSA: &str = "1.2.840.113549.1.1.1";
const EC: &str = "1.2.840.10045.2.1";
const ED25519: &str = "1.3.101.112";
const X25519: &str = "1.3.101.110";

fn algorithm(oid: &str) -> KeyAlgorithm {
    match oid {
        RSA => KeyAlgorithm::Rsa,
        EC => KeyAlgorithm::Ec,
        ED25519 => KeyAlgorithm::Ed25519,
        X25519 => KeyAlgorithm::X25519,
        _ => KeyAlgorithm::Other,
    }
}

/// SHA-256 of public key bytes (the SPKI BIT STRING contents), lower-case hex.
pub fn fingerprint(public_key: &[u8]) -> String {
    crate::hex::hex(&Sha256::digest(public_key))
}

/// One decoded input object.
/// A CRL under the RFC 5280 profile.
pub(crate) type CertificateList = x509_cert::crl::CertificateList<x509_cert::certificate::Rfc5280>;

pub(crate) enum Material {
    Certificate(Box<Certificate>),
    PrivateKey {
        der: zeroize::Zeroizing<Vec<u8>>,
    },
    /// A certificate revocation list (RFC 5280 section 5), DER.
    Crl(Vec<u8>),
}

/// A key file that needs a passphrase and was given none.
fn needs_passphrase(what: &str, kind: &str) -> KeyStoreError {
    KeyStoreError::PassphraseRequired {
        what: what.to_string(),
        kind: kind.to_string(),
    }
}

/// An encrypted PKCS#8 key (DER EncryptedPrivateKeyInfo) decrypted with `passphrase`.
fn decrypt_pkcs8(
    der_bytes: &[u8],
    what: &str,
    passphrase: Option<&[u8]>,
) -> Result<Material, KeyStoreError> {
    let epki = super::pkcs12::EncryptedPrivateKeyInfo::from_der(der_bytes).map_err(|e| {
        KeyStoreError::Malformed {
            what: what.to_string(),
            reason: e.to_string(),
        }
    })?;
    let passphrase = passphrase.ok_or_else(|| needs_passphrase(what, "encrypted PKCS#8 key"))?;
    let der = super::pkcs12::pbe_decrypt(
        what,
        &epki.algorithm,
        passphrase,
        epki.encrypted_data.as_bytes(),
    )?;
    pkcs8::PrivateKeyInfoRef::from_der(&der).map_err(|_| KeyStoreError::Malformed {
        what: what.to_string(),
        reason: "does not decrypt to a PKCS#8 key: wrong passphrase or altered file".into(),
    })?;
    Ok(Material::PrivateKey { der })
}

/// Splits `input` into certificates and PKCS#8 keys: PEM blocks (certificates, keys,
/// encrypted keys, PKCS#12) or one DER object (certificate, key, encrypted key, PFX).
/// `passphrase` opens encrypted keys and PKCS#12.
pub(crate) fn read_all(
    input: &[u8],
    what: &str,
    passphrase: Option<&[u8]>,
) -> Result<Vec<Material>, KeyStoreError> {
    let malformed = |e: &dyn std::fmt::Display| KeyStoreError::Malformed {
        what: what.to_string(),
        reason: e.to_string(),
    };
    let text = std::str::from_utf8(input)
        .ok()
        .filter(|t| t.contains("-----BEGIN "));
    let mut out = Vec::new();
    match text {
        Some(text) => {
            let mut rest = text;
            while let Some(start) = rest.find("-----BEGIN ") {
                let block = &rest[start..];
                let label_end = block[11..]
                    .find("-----")
                    .map(|i| i + 11)
                    .ok_or_else(|| malformed(&"unterminated PEM"))?;
                let label = &block[11..label_end];
                let end_marker = format!("-----END {label}-----");
                let end = block
                    .find(&end_marker)
                    .ok_or_else(|| malformed(&"unterminated PEM"))?
                    + end_marker.len();
                let pem = &block[..end];
                match label {
                    "CERTIFICATE" => {
                        let cert =
                            Certificate::from_pem(pem.as_bytes()).map_err(|e| malformed(&e))?;
                        out.push(Material::Certificate(Box::new(cert)));
                    }
                    "PRIVATE KEY" => {
                        let (_, doc) =
                            der::SecretDocument::from_pem(pem).map_err(|e| malformed(&e))?;
                        out.push(Material::PrivateKey {
                            der: zeroize::Zeroizing::new(doc.as_bytes().to_vec()),
                        });
                    }
                    "ENCRYPTED PRIVATE KEY" => {
                        let (_, doc) =
                            der::SecretDocument::from_pem(pem).map_err(|e| malformed(&e))?;
                        out.push(decrypt_pkcs8(doc.as_bytes(), what, passphrase)?);
                    }
                    "X509 CRL" => {
                        let (_, doc) = der::Document::from_pem(pem).map_err(|e| malformed(&e))?;
                        let crl =
                            CertificateList::from_der(doc.as_bytes()).map_err(|e| malformed(&e))?;
                        check_crl_form(&crl, what)?;
                        out.push(Material::Crl(doc.as_bytes().to_vec()));
                    }
                    "PKCS12" => {
                        let (_, doc) =
                            der::SecretDocument::from_pem(pem).map_err(|e| malformed(&e))?;
                        let passphrase =
                            passphrase.ok_or_else(|| needs_passphrase(what, "PKCS#12 file"))?;
                        out.extend(super::pkcs12::read(doc.as_bytes(), what, passphrase)?);
                    }
                    _ => {} // other blocks (parameters, CSRs) are skipped
                }
                rest = &block[end..];
            }
        }
        None => {
            if let Ok(cert) = Certificate::from_der(input) {
                out.push(Material::Certificate(Box::new(cert)));
            } else if pkcs8::PrivateKeyInfoRef::from_der(input).is_ok() {
                out.push(Material::PrivateKey {
                    der: zeroize::Zeroizing::new(input.to_vec()),
                });
            } else if let Ok(crl) = CertificateList::from_der(input) {
                check_crl_form(&crl, what)?;
                out.push(Material::Crl(input.to_vec()));
            } else if super::pkcs12::looks_like_pfx(input) {
                let passphrase =
                    passphrase.ok_or_else(|| needs_passphrase(what, "PKCS#12 file"))?;
                out.extend(super::pkcs12::read(input, what, passphrase)?);
            } else if super::pkcs12::EncryptedPrivateKeyInfo::from_der(input).is_ok() {
                out.push(decrypt_pkcs8(input, what, passphrase)?);
            }
        }
    }
    if out.is_empty() {
        return Err(KeyStoreError::Unrecognised {
            what: what.to_string(),
        });
    }
    Ok(out)
}

const CRL_AUTHORITY_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");
const CRL_NUMBER: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.20");
const ISSUER_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.18");
const DELTA_CRL_INDICATOR: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.27");
const ISSUING_DISTRIBUTION_POINT: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.28");
const FRESHEST_CRL: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.46");
const AUTHORITY_INFO_ACCESS: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.1");
/// Entry extensions: reasonCode, holdInstructionCode and invalidityDate are
/// informational (a listed certificate is refused whatever the reason).
const REASON_CODE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.21");
const HOLD_INSTRUCTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.23");
const INVALIDITY_DATE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.24");
const CERTIFICATE_ISSUER: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.29");

/// CRL extensions read (or that change nothing in the answer) and so may be present.
const KNOWN_CRL_EXTENSIONS: [ObjectIdentifier; 4] = [
    CRL_AUTHORITY_KEY_ID,
    CRL_NUMBER,
    ISSUER_ALT_NAME,
    AUTHORITY_INFO_ACCESS,
];

/// Why a CRL is of a form the revocation check ([`crate::identity::crl`]) does not
/// implement, naming the extension; `None` when it is a complete, direct CRL it reads
/// whole. A CRL with such a form is refused at import, and one already held fails its
/// issuer's certificates closed.
pub(crate) fn unsupported_crl_form(crl: &CertificateList) -> Option<String> {
    let list = &crl.tbs_cert_list;
    for e in list.crl_extensions.iter().flatten() {
        if e.extn_id == ISSUING_DISTRIBUTION_POINT {
            return Some(
                "it has an issuingDistributionPoint extension (2.5.29.28: a partitioned, \
                 scoped or indirect CRL), which is not supported"
                    .into(),
            );
        }
        if e.extn_id == DELTA_CRL_INDICATOR {
            return Some(
                "it is a delta CRL (deltaCRLIndicator, 2.5.29.27), which is not supported".into(),
            );
        }
        if e.extn_id == FRESHEST_CRL && e.critical {
            return Some("it has a critical freshestCRL extension (2.5.29.46: delta CRLs), which is not supported".into());
        }
        if e.critical && !KNOWN_CRL_EXTENSIONS.contains(&e.extn_id) {
            return Some(format!(
                "it has a critical extension {} that is not supported",
                e.extn_id
            ));
        }
    }
    for r in list.revoked_certificates.iter().flatten() {
        for e in r.crl_entry_extensions.iter().flatten() {
            if e.extn_id == CERTIFICATE_ISSUER {
                return Some(
                    "an entry has a certificateIssuer extension (2.5.29.29: an indirect CRL), \
                     which is not supported"
                        .into(),
                );
            }
            if e.critical && ![REASON_CODE, HOLD_INSTRUCTION, INVALIDITY_DATE].contains(&e.extn_id)
            {
                return Some(format!(
                    "an entry has a critical extension {} that is not supported",
                    e.extn_id
                ));
            }
        }
    }
    None
}

/// A CRL of a form the revocation check reads whole, else refused here with the
/// extension named: one stored and then skipped would count as "nothing revoked"
/// (see [`crate::identity::crl`]).
fn check_crl_form(crl: &CertificateList, what: &str) -> Result<(), KeyStoreError> {
    match unsupported_crl_form(crl) {
        None => Ok(()),
        Some(reason) => Err(KeyStoreError::UnsupportedCrl {
            what: what.to_string(),
            reason,
        }),
    }
}

/// A CA certificate (basicConstraints with cA): one the store may offer as an
/// intermediate of a certification path.
pub(crate) fn is_ca_der(der_bytes: &[u8]) -> bool {
    Certificate::from_der(der_bytes).is_ok_and(|c| {
        matches!(
            c.tbs_certificate()
                .get_extension::<x509_cert::ext::pkix::BasicConstraints>(),
            Ok(Some((_, bc))) if bc.ca
        )
    })
}

/// The listed entry of a CRL: its SHA-256 as fingerprint, its issuer as subject, its
/// nextUpdate as end.
pub(crate) fn crl_entry(der_bytes: &[u8]) -> super::KeyEntry {
    use sha2::Digest;
    let crl = CertificateList::from_der(der_bytes).ok();
    let rfc3339 = |t: &x509_cert::time::Time| {
        time::OffsetDateTime::from_unix_timestamp(t.to_unix_duration().as_secs() as i64)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
    };
    super::KeyEntry {
        fingerprint: super::hex(&sha2::Sha256::digest(der_bytes)),
        kind: super::EntryKind::Crl,
        algorithm: super::KeyAlgorithm::Other,
        emails: Vec::new(),
        subject: crl.as_ref().map(|c| c.tbs_cert_list.issuer.to_string()),
        not_after: crl
            .as_ref()
            .and_then(|c| c.tbs_cert_list.next_update.as_ref().and_then(rfc3339)),
        has_private_key: false,
    }
}

/// Fingerprint, algorithm, emails, subject and notAfter of a certificate.
pub(crate) struct CertInfo {
    pub fingerprint: String,
    pub algorithm: KeyAlgorithm,
    pub emails: Vec<String>,
    pub subject: String,
    pub not_after: Option<String>,
}

/// The email addresses a certificate names, lower case: its subjectAltName
/// rfc822Names, then a subject emailAddress not already among them.
pub fn emails_of(cert: &Certificate) -> Vec<String> {
    let tbs = cert.tbs_certificate();
    let mut emails = Vec::new();
    if let Ok(Some((_, san))) = tbs.get_extension::<SubjectAltName>() {
        for name in san.0 {
            if let GeneralName::Rfc822Name(m) = name {
                emails.push(m.to_string().to_ascii_lowercase());
            }
        }
    }
    if let Ok(Some(m)) = tbs.subject().email_address() {
        let m = m.to_string().to_ascii_lowercase();
        if !emails.contains(&m) {
            emails.push(m);
        }
    }
    emails
}

pub(crate) fn cert_info(cert: &Certificate) -> CertInfo {
    let tbs = cert.tbs_certificate();
    let spki = tbs.subject_public_key_info();
    let emails = emails_of(cert);
    let not_after = time::OffsetDateTime::from_unix_timestamp(
        tbs.validity().not_after.to_unix_duration().as_secs() as i64,
    )
    .ok()
    .and_then(|t| {
        t.format(&time::format_description::well_known::Rfc3339)
            .ok()
    });
    CertInfo {
        fingerprint: fingerprint(spki.subject_public_key.raw_bytes()),
        algorithm: algorithm(&spki.algorithm.oid.to_string()),
        emails,
        subject: tbs.subject().to_string(),
        not_after,
    }
}

/// The listed entry of a certificate.
pub(crate) fn cert_entry(
    cert: &Certificate,
    kind: super::EntryKind,
    has_private_key: bool,
) -> super::KeyEntry {
    let info = cert_info(cert);
    super::KeyEntry {
        fingerprint: info.fingerprint,
        kind,
        algorithm: info.algorithm,
        emails: info.emails,
        subject: Some(info.subject),
        not_after: info.not_after,
        has_private_key,
    }
}

/// RFC 8017 RSAPrivateKey (only the public half is read).
#[derive(Sequence)]
struct RsaPrivateKey<'a> {
    version: UintRef<'a>,
    modulus: UintRef<'a>,
    public_exponent: UintRef<'a>,
    private_exponent: UintRef<'a>,
    prime1: UintRef<'a>,
    prime2: UintRef<'a>,
    exponent1: UintRef<'a>,
    exponent2: UintRef<'a>,
    coefficient: UintRef<'a>,
}

/// RFC 8017 RSAPublicKey.
#[derive(Sequence)]
struct RsaPublicKey<'a> {
    modulus: UintRef<'a>,
    public_exponent: UintRef<'a>,
}

/// RFC 5915 ECPrivateKey.
#[derive(Sequence)]
struct EcPrivateKey<'a> {
    version: UintRef<'a>,
    private_key: &'a OctetStringRef,
    #[asn1(context_specific = "0", optional = "true")]
    parameters: Option<der::asn1::ObjectIdentifier>,
    #[asn1(context_specific = "1", optional = "true")]
    public_key: Option<BitStringRef<'a>>,
}

/// The public key bytes (as in the certificate's SPKI) of a PKCS#8 private key.
pub(crate) fn key_public(
    pkcs8_der: &[u8],
    what: &str,
) -> Result<(KeyAlgorithm, Vec<u8>), KeyStoreError> {
    let malformed = |e: &dyn std::fmt::Display| KeyStoreError::Malformed {
        what: what.to_string(),
        reason: e.to_string(),
    };
    let info = pkcs8::PrivateKeyInfoRef::from_der(pkcs8_der).map_err(|e| malformed(&e))?;
    let oid = info.algorithm.oid.to_string();
    let alg = algorithm(&oid);
    let inner = info.private_key.as_bytes();
    // The public half is derived from the private key, never taken from the file
    // (issue #17): a stated public key that differs would pair this private key with
    // someone else's certificate.
    let public = match alg {
        KeyAlgorithm::Rsa => {
            {
                use rsa::pkcs1::DecodeRsaPrivateKey;
                rsa::RsaPrivateKey::from_pkcs1_der(inner)
                    .ok()
                    .filter(|k| k.validate().is_ok())
                    .ok_or_else(|| malformed(&"the RSA private key is not consistent"))?;
            }
            let k = RsaPrivateKey::from_der(inner).map_err(|e| malformed(&e))?;
            RsaPublicKey {
                modulus: k.modulus,
                public_exponent: k.public_exponent,
            }
            .to_der()
            .map_err(|e| malformed(&e))?
        }
        KeyAlgorithm::Ec => {
            use aws_lc_rs::signature::{self as sig, EcdsaKeyPair, KeyPair};
            let derived = [
                &sig::ECDSA_P256_SHA256_ASN1_SIGNING,
                &sig::ECDSA_P384_SHA384_ASN1_SIGNING,
                &sig::ECDSA_P521_SHA512_ASN1_SIGNING,
            ]
            .into_iter()
            .find_map(|a| EcdsaKeyPair::from_private_key_der(a, pkcs8_der).ok())
            .map(|k| k.public_key().as_ref().to_vec())
            .ok_or_else(|| malformed(&"not a valid P-256, P-384 or P-521 private key"))?;
            let k = EcPrivateKey::from_der(inner).map_err(|e| malformed(&e))?;
            if k.public_key.is_some_and(|p| p.raw_bytes() != derived) {
                return Err(malformed(
                    &"its public key does not belong to its private key",
                ));
            }
            derived
        }
        KeyAlgorithm::Ed25519 | KeyAlgorithm::X25519 => {
            let seed = <&OctetStringRef>::from_der(inner).map_err(|e| malformed(&e))?;
            let seed: zeroize::Zeroizing<[u8; 32]> = zeroize::Zeroizing::new(
                seed.as_bytes()
                    .try_into()
                    .map_err(|_| malformed(&"curve25519 key is not 32 bytes"))?,
            );
            if alg == KeyAlgorithm::Ed25519 {
                ed25519_dalek::SigningKey::from_bytes(&seed)
                    .verifying_key()
                    .to_bytes()
                    .to_vec()
            } else {
                let secret = x25519_dalek::StaticSecret::from(*seed);
                x25519_dalek::PublicKey::from(&secret).as_bytes().to_vec()
            }
        }
        KeyAlgorithm::Other => {
            return Err(KeyStoreError::UnsupportedAlgorithm {
                what: what.to_string(),
                oid,
            })
        }
    };
    if info.public_key.is_some_and(|pk| pk.raw_bytes() != public) {
        return Err(malformed(
            &"its public key does not belong to its private key",
        ));
    }
    Ok((alg, public))
}
