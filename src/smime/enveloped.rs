//! CMS AuthEnvelopedData (RFC 5083) with AES-GCM content encryption (RFC 5084) and
//! RSAES-OAEP key transport (RFC 8017, RFC 4055), with aws-lc-rs.
//!
//! The content key is fresh per message and wiped after use. Nothing decrypted leaves
//! this module unless the GCM tag verified. RecipientInfos are outside the AEAD, so their
//! fields are checked exactly: a recipient identifier that was altered is reported as
//! tampering, not as "not for us", when one of our keys still opens the content.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::rsa::{
    OaepPrivateDecryptingKey, OaepPublicEncryptingKey, Pkcs1PrivateDecryptingKey,
    PrivateDecryptingKey, PublicEncryptingKey, OAEP_SHA1_MGF1SHA1, OAEP_SHA256_MGF1SHA256,
};
use cms::authenveloped_data::AuthEnvelopedData;
use cms::cert::IssuerAndSerialNumber;
use cms::content_info::{CmsVersion, ContentInfo};
use cms::enveloped_data::{
    EncryptedContentInfo, KeyTransRecipientInfo, RecipientIdentifier, RecipientInfo, RecipientInfos,
};
use der::asn1::{OctetString, SetOfVec};
use der::{Any, Decode, Encode};
use spki::AlgorithmIdentifierOwned;
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::oids::*;
use super::SmimeError;
use crate::keystore::{KeyAlgorithm, SecretKey};

/// RFC 5084 GCMParameters.
#[derive(der::Sequence)]
struct GcmParameters {
    nonce: OctetString,
    #[asn1(optional = "true")]
    icv_len: Option<u8>,
}

/// RFC 4055 RSAES-OAEP-params (the pSourceFunc is left at its default).
#[derive(der::Sequence)]
struct OaepParams {
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    hash: Option<AlgorithmIdentifierOwned>,
    #[asn1(context_specific = "1", tag_mode = "EXPLICIT", optional = "true")]
    mgf: Option<AlgorithmIdentifierOwned>,
    #[asn1(context_specific = "2", tag_mode = "EXPLICIT", optional = "true")]
    psource: Option<AlgorithmIdentifierOwned>,
}

const TAG_LEN: usize = 16;
const NONCE_LEN: usize = 12;

fn malformed(what: &str) -> impl Fn(der::Error) -> SmimeError + '_ {
    move |e| SmimeError::Malformed(format!("{what}: {e}"))
}

fn sha256_alg() -> AlgorithmIdentifierOwned {
    AlgorithmIdentifierOwned {
        oid: SHA256,
        parameters: None,
    }
}

fn oaep_sha256() -> Result<AlgorithmIdentifierOwned, SmimeError> {
    let params = OaepParams {
        hash: Some(sha256_alg()),
        mgf: Some(AlgorithmIdentifierOwned {
            oid: MGF1,
            parameters: Some(Any::encode_from(&sha256_alg()).map_err(malformed("MGF1"))?),
        }),
        psource: None,
    };
    Ok(AlgorithmIdentifierOwned {
        oid: RSAES_OAEP,
        parameters: Some(Any::encode_from(&params).map_err(malformed("OAEP parameters"))?),
    })
}

/// Encrypts `content` to every certificate in `recipients` (RSA keys, RSAES-OAEP with
/// SHA-256) under a fresh AES-256-GCM key; the DER ContentInfo.
pub(crate) fn encrypt(content: &[u8], recipients: &[Certificate]) -> Result<Vec<u8>, SmimeError> {
    let rng = SystemRandom::new();
    let mut cek = Zeroizing::new([0u8; 32]);
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill(&mut cek[..])
        .map_err(|_| SmimeError::Key("no randomness".into()))?;
    rng.fill(&mut nonce)
        .map_err(|_| SmimeError::Key("no randomness".into()))?;

    let mut infos = Vec::with_capacity(recipients.len());
    for cert in recipients {
        let spki = cert.tbs_certificate().subject_public_key_info();
        if super::kari::supports(cert) {
            infos.push(super::kari::recipient_info(cert, &cek[..])?);
            continue;
        }
        if spki.algorithm.oid != RSA_ENCRYPTION {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "encryption to a {} key",
                spki.algorithm.oid
            )));
        }
        let spki_der = spki.to_der().map_err(malformed("recipient key"))?;
        let key = PublicEncryptingKey::from_der(&spki_der)
            .ok()
            .and_then(|k| OaepPublicEncryptingKey::new(k).ok())
            .ok_or_else(|| SmimeError::Key("a recipient's RSA key is not usable".into()))?;
        let mut wrapped = vec![0u8; key.ciphertext_size()];
        let n = key
            .encrypt(&OAEP_SHA256_MGF1SHA256, &cek[..], &mut wrapped, None)
            .map_err(|_| SmimeError::Key("RSA-OAEP key transport failed".into()))?
            .len();
        wrapped.truncate(n);
        let tbs = cert.tbs_certificate();
        infos.push(RecipientInfo::Ktri(KeyTransRecipientInfo {
            version: CmsVersion::V0,
            rid: RecipientIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
                issuer: tbs.issuer().clone(),
                serial_number: tbs.serial_number().clone(),
            }),
            key_enc_alg: oaep_sha256()?,
            enc_key: OctetString::new(wrapped).map_err(malformed("encrypted key"))?,
        }));
    }

    let key = LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, &cek[..]).map_err(|_| SmimeError::Key("AES key".into()))?,
    );
    let mut sealed = content.to_vec();
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::empty(),
            &mut sealed,
        )
        .map_err(|_| SmimeError::Key("AES-GCM encryption failed".into()))?;
    let params = GcmParameters {
        nonce: OctetString::new(nonce.to_vec()).map_err(malformed("nonce"))?,
        icv_len: Some(TAG_LEN as u8),
    };
    let aed = AuthEnvelopedData {
        version: CmsVersion::V0,
        originator_info: None,
        recip_infos: RecipientInfos(SetOfVec::try_from(infos).map_err(malformed("recipients"))?),
        auth_encrypted_content_info: EncryptedContentInfo {
            content_type: ID_DATA,
            content_enc_alg: AlgorithmIdentifierOwned {
                oid: AES256_GCM,
                parameters: Some(Any::encode_from(&params).map_err(malformed("GCM parameters"))?),
            },
            encrypted_content: Some(OctetString::new(sealed).map_err(malformed("ciphertext"))?),
        },
        auth_attrs: None,
        mac: OctetString::new(tag.as_ref().to_vec()).map_err(malformed("tag"))?,
        unauth_attrs: None,
    };
    ContentInfo {
        content_type: ID_CT_AUTH_ENVELOPED_DATA,
        content: Any::encode_from(&aed).map_err(malformed("AuthEnvelopedData"))?,
    }
    .to_der()
    .map_err(malformed("ContentInfo"))
}

fn matches_rid(cert: &Certificate, rid: &RecipientIdentifier) -> bool {
    match rid {
        RecipientIdentifier::IssuerAndSerialNumber(ias) => {
            cert.tbs_certificate().issuer() == &ias.issuer
                && cert.tbs_certificate().serial_number() == &ias.serial_number
        }
        RecipientIdentifier::SubjectKeyIdentifier(ski) => matches!(
            cert.tbs_certificate().get_extension::<x509_cert::ext::pkix::SubjectKeyIdentifier>(),
            Ok(Some((_, own))) if own == *ski
        ),
    }
}

/// The RSAES-OAEP hash a KeyTransRecipientInfo names (SHA-1 when the parameters are
/// absent or default, as RFC 4055 says).
fn oaep_algorithm(
    alg: &AlgorithmIdentifierOwned,
) -> Result<&'static aws_lc_rs::rsa::OaepAlgorithm, SmimeError> {
    if alg.oid != RSAES_OAEP {
        return Err(SmimeError::UnsupportedAlgorithm(format!(
            "key transport {}",
            alg.oid
        )));
    }
    let params: OaepParams = match &alg.parameters {
        Some(p) => p.decode_as().map_err(malformed("OAEP parameters"))?,
        None => OaepParams {
            hash: None,
            mgf: None,
            psource: None,
        },
    };
    if params.psource.is_some() {
        return Err(SmimeError::UnsupportedAlgorithm("OAEP with a label".into()));
    }
    let hash = params.hash.map_or(SHA1, |h| h.oid);
    let mgf_hash = match params.mgf {
        None => SHA1,
        Some(m) if m.oid == MGF1 => m
            .parameters
            .and_then(|p| p.decode_as::<AlgorithmIdentifierOwned>().ok())
            .map(|a| a.oid)
            .ok_or_else(|| SmimeError::Malformed("MGF1 without its hash".into()))?,
        Some(_) => {
            return Err(SmimeError::UnsupportedAlgorithm(
                "OAEP mask generation other than MGF1".into(),
            ))
        }
    };
    match (hash, mgf_hash) {
        (SHA256, SHA256) => Ok(&OAEP_SHA256_MGF1SHA256),
        (SHA1, SHA1) => Ok(&OAEP_SHA1_MGF1SHA1),
        _ => Err(SmimeError::UnsupportedAlgorithm(
            "OAEP hash combination".into(),
        )),
    }
}

fn unwrap_cek(
    key: &SecretKey,
    ktri: &KeyTransRecipientInfo,
    cek_len: usize,
) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    if key.algorithm() != KeyAlgorithm::Rsa {
        return Err(SmimeError::Key("not an RSA key".into()));
    }
    let private = PrivateDecryptingKey::from_pkcs8(key.pkcs8_der())
        .map_err(|_| SmimeError::Key("the RSA private key does not load".into()))?;
    if ktri.key_enc_alg.oid == RSA_ENCRYPTION {
        return Ok(unwrap_pkcs1(private, ktri.enc_key.as_bytes(), cek_len));
    }
    let alg = oaep_algorithm(&ktri.key_enc_alg)?;
    let private = OaepPrivateDecryptingKey::new(private)
        .map_err(|_| SmimeError::Key("the RSA private key does not load".into()))?;
    let mut out = Zeroizing::new(vec![0u8; private.min_output_size()]);
    let n = private
        .decrypt(alg, ktri.enc_key.as_bytes(), &mut out, None)
        .map_err(|_| SmimeError::Undecryptable)?
        .len();
    out.truncate(n);
    Ok(out)
}

/// RSAES-PKCS1-v1_5 key transport (OpenSSL's default), without a padding oracle: the
/// RSA operation is AWS-LC's constant-time one, and a padding failure (or a key of the
/// wrong length) continues with a random content key, so it fails exactly like a wrong
/// GCM tag and at the same point ("implicit rejection").
fn unwrap_pkcs1(
    private: PrivateDecryptingKey,
    wrapped: &[u8],
    cek_len: usize,
) -> Zeroizing<Vec<u8>> {
    let mut random = Zeroizing::new(vec![0u8; cek_len]);
    // Without randomness the all-zero key still fails the tag; it is never the content key.
    let _ = SystemRandom::new().fill(&mut random);
    let Ok(private) = Pkcs1PrivateDecryptingKey::new(private) else {
        return random;
    };
    let mut out = Zeroizing::new(vec![0u8; private.min_output_size()]);
    match private.decrypt(wrapped, &mut out) {
        Ok(cek) if cek.len() == cek_len => Zeroizing::new(cek.to_vec()),
        _ => random,
    }
}

/// Why decryption did not produce content.
pub(crate) enum DecryptFailure {
    /// None of our keys is a recipient.
    NotForUs,
    /// The message is altered or uses what we refuse.
    Refused(SmimeError),
}

impl From<SmimeError> for DecryptFailure {
    fn from(e: SmimeError) -> Self {
        DecryptFailure::Refused(e)
    }
}

/// Decrypts a DER AuthEnvelopedData with one of `keys` (certificate and its private
/// key). The plaintext is returned only when the GCM tag verified.
pub(crate) fn decrypt(
    cms_der: &[u8],
    keys: &[(Certificate, SecretKey)],
) -> Result<Zeroizing<Vec<u8>>, DecryptFailure> {
    let info = ContentInfo::from_der(cms_der).map_err(malformed("ContentInfo"))?;
    if info.content_type == ID_ENVELOPED_DATA {
        return Err(SmimeError::UnsupportedAlgorithm(
            "legacy EnvelopedData (CBC, no integrity, EFAIL) is refused".into(),
        )
        .into());
    }
    if info.content_type != ID_CT_AUTH_ENVELOPED_DATA {
        return Err(SmimeError::Malformed(format!(
            "content type {} is not authEnveloped-data",
            info.content_type
        ))
        .into());
    }
    let aed: AuthEnvelopedData = info
        .content
        .decode_as()
        .map_err(malformed("AuthEnvelopedData"))?;
    if aed.version != CmsVersion::V0 || aed.originator_info.is_some() || aed.unauth_attrs.is_some()
    {
        return Err(SmimeError::Malformed(
            "AuthEnvelopedData fields this profile does not emit or accept".into(),
        )
        .into());
    }
    let enc = &aed.auth_encrypted_content_info;
    if enc.content_type != ID_DATA {
        return Err(SmimeError::Malformed("encrypted content is not id-data".into()).into());
    }
    let aead = match enc.content_enc_alg.oid {
        AES256_GCM => &AES_256_GCM,
        AES128_GCM => &AES_128_GCM,
        other => {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "content encryption {other} in AuthEnvelopedData (AES-GCM only)"
            ))
            .into())
        }
    };
    let params: GcmParameters = enc
        .content_enc_alg
        .parameters
        .as_ref()
        .ok_or_else(|| SmimeError::Malformed("AES-GCM without parameters".into()))?
        .decode_as()
        .map_err(malformed("GCM parameters"))?;
    if params.nonce.as_bytes().len() != NONCE_LEN
        || params.icv_len.unwrap_or(12) as usize != TAG_LEN
        || aed.mac.as_bytes().len() != TAG_LEN
    {
        return Err(SmimeError::UnsupportedAlgorithm(
            "AES-GCM with a nonce other than 12 bytes or a tag other than 16".into(),
        )
        .into());
    }

    let ktris: Vec<&KeyTransRecipientInfo> = aed
        .recip_infos
        .0
        .iter()
        .filter_map(|ri| match ri {
            RecipientInfo::Ktri(k) => Some(k),
            _ => None,
        })
        .collect();
    for k in &ktris {
        let expected = match k.rid {
            RecipientIdentifier::IssuerAndSerialNumber(_) => CmsVersion::V0,
            RecipientIdentifier::SubjectKeyIdentifier(_) => CmsVersion::V2,
        };
        if k.version != expected {
            return Err(SmimeError::Malformed(
                "KeyTransRecipientInfo version does not match its identifier".into(),
            )
            .into());
        }
    }
    // Our recipient info by identifier; failing that, trial decryption tells an altered
    // identifier (tampering) from a message that is not for us.
    let mut cek = None;
    for (cert, key) in keys {
        let kari = aed.recip_infos.0.iter().find_map(|ri| match ri {
            RecipientInfo::Kari(k) => super::kari::find(k, cert).map(|rek| (k, rek)),
            _ => None,
        });
        if let Some((k, rek)) = kari {
            cek = Some(super::kari::unwrap(k, rek, cert, key)?);
            break;
        }
        if let Some(k) = ktris.iter().find(|k| matches_rid(cert, &k.rid)) {
            cek = Some(unwrap_cek(key, k, aead.key_len())?);
            break;
        }
    }
    let cek = match cek {
        Some(c) => c,
        None => {
            let opens = keys.iter().any(|(_, key)| {
                ktris.iter().any(|k| {
                    k.key_enc_alg.oid == RSAES_OAEP && unwrap_cek(key, k, aead.key_len()).is_ok()
                })
            });
            return Err(if opens {
                DecryptFailure::Refused(SmimeError::Malformed(
                    "a recipient identifier was altered".into(),
                ))
            } else {
                DecryptFailure::NotForUs
            });
        }
    };
    if cek.len() != aead.key_len() {
        return Err(SmimeError::Undecryptable.into());
    }
    let key = LessSafeKey::new(UnboundKey::new(aead, &cek).map_err(|_| SmimeError::Undecryptable)?);
    let ciphertext = enc
        .encrypted_content
        .as_ref()
        .ok_or_else(|| SmimeError::Malformed("no encrypted content".into()))?;
    let mut in_out = Zeroizing::new(Vec::with_capacity(ciphertext.as_bytes().len() + TAG_LEN));
    in_out.extend_from_slice(ciphertext.as_bytes());
    in_out.extend_from_slice(aed.mac.as_bytes());
    let nonce = Nonce::try_assume_unique_for_key(params.nonce.as_bytes())
        .map_err(|_| SmimeError::Undecryptable)?;
    let n = key
        .open_in_place(nonce, Aad::empty(), &mut in_out)
        .map_err(|_| SmimeError::Undecryptable)?
        .len();
    in_out.truncate(n);
    Ok(in_out)
}
