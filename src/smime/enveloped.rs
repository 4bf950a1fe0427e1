//! CMS AuthEnvelopedData (RFC 5083) with AES-GCM content encryption (RFC 5084) and
//! RSAES-OAEP key transport (RFC 8017, RFC 4055), with aws-lc-rs.
//!
//! The content key is fresh per message and wiped after use. Nothing decrypted leaves
//! this module unless the GCM tag verified. RecipientInfos are outside the AEAD, so their
//! fields are checked exactly: a recipient identifier that was altered is reported as
//! tampering, not as "not for us", when one of our keys still opens the content.

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use aws_lc_rs::hkdf;
use aws_lc_rs::key_wrap::{KeyEncryptionKey, KeyWrap, AES_128, AES_256};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::rsa::{
    OaepPublicEncryptingKey, PublicEncryptingKey, OAEP_SHA1_MGF1SHA1, OAEP_SHA256_MGF1SHA256,
};
use cms::cert::IssuerAndSerialNumber;
use cms::content_info::CmsVersion;
use cms::enveloped_data::{
    KekRecipientInfo, KeyTransRecipientInfo, RecipientIdentifier, RecipientInfo, RecipientInfos,
};
use der::asn1::{OctetString, SetOfVec};
use der::{Any, Decode, Encode};
use spki::AlgorithmIdentifierOwned;
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::loaded::{rsa_decryptor, Loaded, LoadedKeys, Use};
use super::SmimeError;
use crate::asn1::ber::push_header;
use crate::asn1::oids::*;
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

fn header_len(len: usize) -> usize {
    let mut v = Vec::with_capacity(6);
    push_header(&mut v, 0, len);
    v.len()
}

/// One RecipientInfo per certificate in `recipients`, carrying `cek`.
fn recipient_infos(
    recipients: &[Certificate],
    cek: &[u8],
) -> Result<Vec<RecipientInfo>, SmimeError> {
    let mut infos = Vec::with_capacity(recipients.len());
    for cert in recipients {
        let spki = cert.tbs_certificate().subject_public_key_info();
        if super::kari::supports(cert) {
            infos.push(super::kari::recipient_info(cert, cek)?);
            continue;
        }
        if spki.algorithm.oid != RSA_ENCRYPTION {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "encryption to a {} key",
                spki.algorithm.oid
            )));
        }
        let spki_der = spki.to_der().map_err(malformed("recipient key"))?;
        let wrapped = match crate::entropy::with_seeded(|rng| seeded_oaep(&spki_der, cek, rng)) {
            Some(wrapped) => wrapped?,
            None => oaep(&spki_der, cek)?,
        };
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
    Ok(infos)
}

/// RSAES-OAEP-SHA256 of `cek` to the key `spki_der` (aws-lc-rs, the system's
/// generator).
fn oaep(spki_der: &[u8], cek: &[u8]) -> Result<Vec<u8>, SmimeError> {
    let key = PublicEncryptingKey::from_der(spki_der)
        .ok()
        .and_then(|k| OaepPublicEncryptingKey::new(k).ok())
        .ok_or_else(|| SmimeError::Key("a recipient's RSA key is not usable".into()))?;
    let mut wrapped = vec![0u8; key.ciphertext_size()];
    let n = key
        .encrypt(&OAEP_SHA256_MGF1SHA256, cek, &mut wrapped, None)
        .map_err(|_| SmimeError::Key("RSA-OAEP key transport failed".into()))?
        .len();
    wrapped.truncate(n);
    Ok(wrapped)
}

/// [`oaep`] with the corpus's seeded generator ([`crate::entropy`]): aws-lc-rs draws
/// OAEP's seed itself, RustCrypto's RSA takes a generator.
fn seeded_oaep(
    spki_der: &[u8],
    cek: &[u8],
    rng: &mut rand_chacha::ChaCha20Rng,
) -> Result<Vec<u8>, SmimeError> {
    use rsa::pkcs8::DecodePublicKey;
    let key = rsa::RsaPublicKey::from_public_key_der(spki_der)
        .map_err(|_| SmimeError::Key("a recipient's RSA key is not usable".into()))?;
    key.encrypt(rng, rsa::Oaep::new::<sha2::Sha256>(), cek)
        .map_err(|_| SmimeError::Key("RSA-OAEP key transport failed".into()))
}

/// An AuthEnvelopedData (AES-256-GCM under a fresh key, RSAES-OAEP-SHA256 or key
/// agreement per recipient) around the content that `write` appends to a buffer.
///
/// The content is written once, straight into the buffer that becomes the DER
/// ContentInfo, and encrypted there in place: no copy of it is made for the CMS
/// encoding. Returns the buffer and where the DER starts in it (`buffer[start..]`).
pub(crate) fn encrypt_into<E: From<SmimeError>>(
    recipients: &[Certificate],
    size_hint: usize,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(Vec<u8>, usize), E> {
    let mut cek = Zeroizing::new([0u8; 32]);
    let mut nonce = [0u8; NONCE_LEN];
    crate::entropy::fill(&mut cek[..]).map_err(|_| SmimeError::Key("no randomness".into()))?;
    crate::entropy::fill(&mut nonce).map_err(|_| SmimeError::Key("no randomness".into()))?;
    let infos = RecipientInfos(
        SetOfVec::try_from(recipient_infos(recipients, &cek[..])?)
            .map_err(malformed("recipients"))?,
    );
    let infos_der = infos.to_der().map_err(malformed("recipients"))?;
    let params = GcmParameters {
        nonce: OctetString::new(nonce.to_vec()).map_err(malformed("nonce"))?,
        icv_len: Some(TAG_LEN as u8),
    };
    let alg_der = AlgorithmIdentifierOwned {
        oid: AES256_GCM,
        parameters: Some(Any::encode_from(&params).map_err(malformed("GCM parameters"))?),
    }
    .to_der()
    .map_err(malformed("GCM parameters"))?;
    let data_oid = ID_DATA.to_der().map_err(malformed("OID"))?;
    let aed_oid = ID_CT_AUTH_ENVELOPED_DATA
        .to_der()
        .map_err(malformed("OID"))?;

    // Room for every header in front of the content; the headers are written once the
    // content's length is known, right-aligned against it.
    let reserve = infos_der.len() + alg_der.len() + data_oid.len() + aed_oid.len() + 64;
    let mut buf = Vec::with_capacity(reserve + size_hint + 2 + TAG_LEN);
    buf.resize(reserve, 0);
    write(&mut buf)?;
    let len = buf.len() - reserve;

    let key = LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, &cek[..]).map_err(|_| SmimeError::Key("AES key".into()))?,
    );
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::empty(),
            &mut buf[reserve..],
        )
        .map_err(|_| SmimeError::Key("AES-GCM encryption failed".into()))?;
    push_header(&mut buf, 0x04, TAG_LEN);
    buf.extend_from_slice(tag.as_ref());

    // ContentInfo { OID, [0] { AuthEnvelopedData { version 0, recipientInfos,
    //   EncryptedContentInfo { id-data, AES-256-GCM, [0] IMPLICIT ciphertext }, mac } } }
    let eci_len = data_oid.len() + alg_der.len() + header_len(len) + len;
    let aed_len = 3 + infos_der.len() + header_len(eci_len) + eci_len + 2 + TAG_LEN;
    let explicit_len = header_len(aed_len) + aed_len;
    let ci_len = aed_oid.len() + header_len(explicit_len) + explicit_len;
    let mut head = Vec::with_capacity(reserve);
    push_header(&mut head, 0x30, ci_len);
    head.extend_from_slice(&aed_oid);
    push_header(&mut head, 0xa0, explicit_len);
    push_header(&mut head, 0x30, aed_len);
    head.extend_from_slice(&[0x02, 0x01, 0x00]);
    head.extend_from_slice(&infos_der);
    push_header(&mut head, 0x30, eci_len);
    head.extend_from_slice(&data_oid);
    head.extend_from_slice(&alg_der);
    push_header(&mut head, 0x80, len);
    let start = reserve - head.len();
    buf[start..reserve].copy_from_slice(&head);
    Ok((buf, start))
}

/// A legacy EnvelopedData (AES-256-CBC, no integrity) around `content`, with the
/// same RecipientInfos as [`encrypt_into`]. Nothing we send uses it: the conformance
/// corpus ([`crate::corpus`]) writes it, to show receivers that refuse it by default
/// (EFAIL) and read it only when told to; the DER ContentInfo.
pub(crate) fn encrypt_legacy_cbc(
    content: &[u8],
    recipients: &[Certificate],
) -> Result<Vec<u8>, SmimeError> {
    use cbc::cipher::{block_padding::Pkcs7, BlockModeEncrypt, KeyIvInit};
    let mut cek = Zeroizing::new([0u8; 32]);
    let mut iv = [0u8; 16];
    crate::entropy::fill(&mut cek[..]).map_err(|_| SmimeError::Key("no randomness".into()))?;
    crate::entropy::fill(&mut iv).map_err(|_| SmimeError::Key("no randomness".into()))?;
    let mut ciphertext = content.to_vec();
    ciphertext.resize(content.len() + 16, 0);
    let len = cbc::Encryptor::<aes::Aes256>::new_from_slices(&cek[..], &iv)
        .map_err(|_| SmimeError::Key("AES key".into()))?
        .encrypt_padded::<Pkcs7>(&mut ciphertext, content.len())
        .map_err(|_| SmimeError::Key("CBC padding".into()))?
        .len();
    ciphertext.truncate(len);
    let enveloped = cms::enveloped_data::EnvelopedData {
        // RFC 5652 6.1: version 2 with a KeyAgreeRecipientInfo or key transport by
        // subject key identifier; 0 for key transport by issuer and serial alone.
        version: if recipients.iter().any(super::kari::supports) {
            CmsVersion::V2
        } else {
            CmsVersion::V0
        },
        originator_info: None,
        recip_infos: RecipientInfos(
            SetOfVec::try_from(recipient_infos(recipients, &cek[..])?)
                .map_err(malformed("recipients"))?,
        ),
        encrypted_content: cms::enveloped_data::EncryptedContentInfo {
            content_type: ID_DATA,
            content_enc_alg: AlgorithmIdentifierOwned {
                oid: AES256_CBC,
                parameters: Some(
                    Any::encode_from(&OctetString::new(iv.to_vec()).map_err(malformed("IV"))?)
                        .map_err(malformed("IV"))?,
                ),
            },
            encrypted_content: Some(OctetString::new(ciphertext).map_err(malformed("content"))?),
        },
        unprotected_attrs: None,
    };
    cms::content_info::ContentInfo {
        content_type: ID_ENVELOPED_DATA,
        content: Any::encode_from(&enveloped).map_err(malformed("EnvelopedData"))?,
    }
    .to_der()
    .map_err(malformed("EnvelopedData"))
}

/// [`encrypt_into`] for content already in one buffer; the DER ContentInfo.
#[cfg(test)]
pub(crate) fn encrypt(content: &[u8], recipients: &[Certificate]) -> Result<Vec<u8>, SmimeError> {
    let (buf, start) = encrypt_into::<SmimeError>(recipients, content.len(), |b| {
        b.extend_from_slice(content);
        Ok(())
    })?;
    Ok(buf[start..].to_vec())
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
    loaded: &LoadedKeys,
    key: &SecretKey,
    ktri: &KeyTransRecipientInfo,
    cek_len: usize,
) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    if key.algorithm() != KeyAlgorithm::Rsa {
        return Err(SmimeError::Key("not an RSA key".into()));
    }
    if let Some(token) = key.token() {
        return token_unwrap_cek(token, ktri, cek_len);
    }
    if ktri.key_enc_alg.oid == RSA_ENCRYPTION {
        let private = loaded.get(key, Use::Pkcs1, || rsa_decryptor(key, Use::Pkcs1))?;
        return Ok(unwrap_pkcs1(&private, ktri.enc_key.as_bytes(), cek_len));
    }
    let alg = oaep_algorithm(&ktri.key_enc_alg)?;
    let private = loaded.get(key, Use::Oaep, || rsa_decryptor(key, Use::Oaep))?;
    let Loaded::Oaep(private) = &*private else {
        return Err(SmimeError::Key("not an RSA decryption key".into()));
    };
    let mut out = Zeroizing::new(vec![0u8; private.min_output_size()]);
    let n = private
        .decrypt(alg, ktri.enc_key.as_bytes(), &mut out, None)
        .map_err(|_| SmimeError::Undecryptable)?
        .len();
    out.truncate(n);
    Ok(out)
}

/// Key transport decrypted on a PKCS#11 token. A PKCS#1 v1.5 padding failure continues
/// with a random content key, as in software (the token's own timing is its maker's
/// to vouch for).
fn token_unwrap_cek(
    token: &crate::keystore::TokenKey,
    ktri: &KeyTransRecipientInfo,
    cek_len: usize,
) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    let wrapped = ktri.enc_key.as_bytes();
    if ktri.key_enc_alg.oid == RSA_ENCRYPTION {
        let mut random = Zeroizing::new(vec![0u8; cek_len]);
        let _ = SystemRandom::new().fill(&mut random);
        return Ok(match token.rsa_decrypt_pkcs1(wrapped) {
            Ok(cek) if cek.len() == cek_len => cek,
            _ => random,
        });
    }
    let sha256 = std::ptr::eq(oaep_algorithm(&ktri.key_enc_alg)?, &OAEP_SHA256_MGF1SHA256);
    token
        .rsa_decrypt_oaep(sha256, wrapped)
        .map_err(|e| match e {
            // What the token cannot do says so; anything the ciphertext may have caused
            // looks like every other failed decryption (no OAEP oracle).
            crate::keystore::KeyStoreError::TokenUnsupported(m) => {
                SmimeError::Token(format!("the PKCS#11 token does not support {m}"))
            }
            _ => SmimeError::Undecryptable,
        })
}

/// RSAES-PKCS1-v1_5 key transport (OpenSSL's default), without a padding oracle: the
/// RSA operation is AWS-LC's constant-time one, and a padding failure (or a key of the
/// wrong length) continues with a random content key, so it fails exactly like a wrong
/// GCM tag and at the same point ("implicit rejection").
fn unwrap_pkcs1(private: &Loaded, wrapped: &[u8], cek_len: usize) -> Zeroizing<Vec<u8>> {
    let mut random = Zeroizing::new(vec![0u8; cek_len]);
    // Without randomness the all-zero key still fails the tag; it is never the content key.
    let _ = SystemRandom::new().fill(&mut random);
    let Loaded::Pkcs1(private) = private else {
        return random;
    };
    let mut out = Zeroizing::new(vec![0u8; private.min_output_size()]);
    match private.decrypt(wrapped, &mut out) {
        Ok(cek) if cek.len() == cek_len => Zeroizing::new(cek.to_vec()),
        _ => random,
    }
}

/// A pre-shared key-encryption key for KEKRecipientInfo (RFC 5652 6.2.3): the
/// identifier the sender names it by and the AES key (16 or 32 bytes).
pub struct Kek {
    /// The KEKIdentifier's `keyIdentifier` octets.
    pub id: Vec<u8>,
    /// The key; wiped on drop.
    pub key: Zeroizing<Vec<u8>>,
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

/// Decrypted content and how it was protected.
pub struct Decrypted {
    /// The plaintext; wiped on drop.
    pub plaintext: Zeroizing<Vec<u8>>,
    /// `true` for AuthEnvelopedData (the AEAD tag verified); `false` for legacy CBC
    /// EnvelopedData, whose content anyone could have altered.
    pub authenticated: bool,
    /// The content-encryption algorithm, e.g. `AES-256-GCM` or `AES-128-GCM (RFC 9709 HKDF)`.
    pub algorithm: String,
}

impl std::fmt::Debug for Decrypted {
    /// Never shows the plaintext.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decrypted")
            .field("len", &self.plaintext.len())
            .field("authenticated", &self.authenticated)
            .field("algorithm", &self.algorithm)
            .finish()
    }
}

impl std::fmt::Debug for Kek {
    /// Never shows the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kek")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The content cipher of an EncryptedContentInfo.
enum ContentCipher {
    /// AES-GCM or ChaCha20-Poly1305 with its 12-byte nonce.
    Aead(&'static aead::Algorithm, [u8; NONCE_LEN], &'static str),
    /// Legacy CBC with its IV.
    Cbc(CbcCipher, Vec<u8>),
}

#[derive(Clone, Copy)]
enum CbcCipher {
    Aes128,
    Aes192,
    Aes256,
    TripleDes,
}

impl CbcCipher {
    fn key_len(self) -> usize {
        match self {
            CbcCipher::Aes128 => 16,
            CbcCipher::Aes192 | CbcCipher::TripleDes => 24,
            CbcCipher::Aes256 => 32,
        }
    }
    fn name(self) -> &'static str {
        match self {
            CbcCipher::Aes128 => "AES-128-CBC",
            CbcCipher::Aes192 => "AES-192-CBC",
            CbcCipher::Aes256 => "AES-256-CBC",
            CbcCipher::TripleDes => "3DES-CBC",
        }
    }
}

/// The content cipher named by `alg`, and for RFC 9709 (`id-alg-cek-hkdf-sha256`) the
/// DER of the inner algorithm identifier, which is the HKDF `info`.
fn content_cipher(
    alg: &AlgorithmIdentifierOwned,
    authenticated: bool,
) -> Result<(ContentCipher, Option<Vec<u8>>), SmimeError> {
    if alg.oid == CEK_HKDF_SHA256 {
        let params = alg
            .parameters
            .as_ref()
            .ok_or_else(|| SmimeError::Malformed("CEK-HKDF without its algorithm".into()))?;
        let inner: AlgorithmIdentifierOwned = params
            .decode_as()
            .map_err(malformed("CEK-HKDF algorithm"))?;
        if inner.oid == CEK_HKDF_SHA256 {
            return Err(SmimeError::Malformed("nested CEK-HKDF".into()));
        }
        let info = params.to_der().map_err(malformed("CEK-HKDF algorithm"))?;
        return Ok((content_cipher(&inner, authenticated)?.0, Some(info)));
    }
    let param = || {
        alg.parameters
            .as_ref()
            .ok_or_else(|| SmimeError::Malformed("content encryption without parameters".into()))
    };
    let aead_nonce = |nonce: &[u8]| -> Result<[u8; NONCE_LEN], SmimeError> {
        nonce.try_into().map_err(|_| {
            SmimeError::UnsupportedAlgorithm("an AEAD nonce other than 12 bytes".into())
        })
    };
    let cipher = match alg.oid {
        AES256_GCM | AES128_GCM if authenticated => {
            let p: GcmParameters = param()?.decode_as().map_err(malformed("GCM parameters"))?;
            if p.icv_len.unwrap_or(12) as usize != TAG_LEN {
                return Err(SmimeError::UnsupportedAlgorithm(
                    "AES-GCM with a tag other than 16 bytes".into(),
                ));
            }
            let nonce = aead_nonce(p.nonce.as_bytes())?;
            if alg.oid == AES256_GCM {
                ContentCipher::Aead(&aead::AES_256_GCM, nonce, "AES-256-GCM")
            } else {
                ContentCipher::Aead(&aead::AES_128_GCM, nonce, "AES-128-GCM")
            }
        }
        CHACHA20_POLY1305 if authenticated => {
            let nonce: OctetString = param()?.decode_as().map_err(malformed("nonce"))?;
            ContentCipher::Aead(
                &aead::CHACHA20_POLY1305,
                aead_nonce(nonce.as_bytes())?,
                "ChaCha20-Poly1305",
            )
        }
        AES128_CBC | AES192_CBC | AES256_CBC | DES_EDE3_CBC if !authenticated => {
            let iv: OctetString = param()?.decode_as().map_err(malformed("CBC IV"))?;
            let cipher = match alg.oid {
                AES128_CBC => CbcCipher::Aes128,
                AES192_CBC => CbcCipher::Aes192,
                AES256_CBC => CbcCipher::Aes256,
                _ => CbcCipher::TripleDes,
            };
            let block = if matches!(cipher, CbcCipher::TripleDes) {
                8
            } else {
                16
            };
            if iv.as_bytes().len() != block {
                return Err(SmimeError::Malformed("CBC IV of the wrong length".into()));
            }
            ContentCipher::Cbc(cipher, iv.as_bytes().to_vec())
        }
        other => {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "content encryption {other} in {}",
                if authenticated {
                    "AuthEnvelopedData (AES-GCM and ChaCha20-Poly1305 only)"
                } else {
                    "EnvelopedData (AES-CBC and 3DES-CBC only)"
                }
            )))
        }
    };
    Ok((cipher, None))
}

/// RFC 9709: CEK' = HKDF-SHA256(salt = "The Cryptographic Message Syntax", IKM = CEK,
/// info = DER of the inner content-encryption AlgorithmIdentifier), as long as the CEK.
fn cek_hkdf(cek: &[u8], info: &[u8]) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let mut out = Zeroizing::new(vec![0u8; cek.len()]);
    hkdf::Salt::new(hkdf::HKDF_SHA256, b"The Cryptographic Message Syntax")
        .extract(cek)
        .expand(&[info], Len(cek.len()))
        .and_then(|okm| okm.fill(&mut out))
        .map_err(|_| SmimeError::Undecryptable)?;
    Ok(out)
}

/// Unwraps a KEKRecipientInfo's content key with `kek` (AES key wrap, RFC 3394).
fn unwrap_kek(kekri: &KekRecipientInfo, kek: &Kek) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    if kekri.version != CmsVersion::V4 {
        return Err(SmimeError::Malformed(
            "KEKRecipientInfo version is not 4".into(),
        ));
    }
    let cipher = match (kekri.key_enc_alg.oid, kek.key.len()) {
        (AES128_WRAP, 16) => &AES_128,
        (AES256_WRAP, 32) => &AES_256,
        (AES128_WRAP | AES256_WRAP, _) => {
            return Err(SmimeError::Key(
                "the pre-shared key's length does not match its key wrap algorithm".into(),
            ))
        }
        (other, _) => {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "KEK key wrap {other}"
            )))
        }
    };
    let wrapped = kekri.encrypted_key.as_bytes();
    let mut out = Zeroizing::new(vec![0u8; wrapped.len()]);
    let n = KeyEncryptionKey::new(cipher, &kek.key)
        .map_err(|_| SmimeError::Undecryptable)?
        .unwrap(wrapped, &mut out)
        .map_err(|_| SmimeError::Undecryptable)?
        .len();
    out.truncate(n);
    Ok(out)
}

/// Recipient infos a message may have (issue #17: bounded work before
/// authentication).
const MAX_RECIPIENT_INFOS: usize = 1024;

/// Recipient infos that name none of our keys tried by trial decryption (to tell an
/// altered identifier from a message for someone else).
const MAX_TRIAL_RECIPIENTS: usize = 4;

/// One RecipientInfo as read: key agreement in place ([`super::kari::KariRef`], the
/// kind every P-256 message carries), the others decoded by the `cms` crate.
enum Info<'a> {
    Kari(super::kari::KariRef<'a>),
    Other(RecipientInfo),
}

/// The RecipientInfos (a SET, DER), each read in the order written. Not as the `cms`
/// crate's SET OF, which sorts them on decoding with comparisons that encode each one
/// again: the order does not matter here (ours is found by identifier).
fn decode_recipient_infos(set: &[u8]) -> Result<Vec<Info<'_>>, SmimeError> {
    let set = der::asn1::AnyRef::from_der(set).map_err(malformed("recipient infos"))?;
    if der::Tagged::tag(&set) != der::Tag::Set {
        return Err(SmimeError::Malformed(
            "recipient infos are not a SET".into(),
        ));
    }
    let mut reader = der::SliceReader::new(set.value()).map_err(malformed("recipient infos"))?;
    let mut out = Vec::new();
    while !der::Reader::is_finished(&reader) {
        let tlv = der::Reader::tlv_bytes(&mut reader).map_err(malformed("recipient infos"))?;
        // [1] IMPLICIT KeyAgreeRecipientInfo (constructed, tag number 1).
        if tlv.first() == Some(&0xa1) {
            let any = der::asn1::AnyRef::from_der(tlv).map_err(malformed("recipient info"))?;
            out.push(Info::Kari(super::kari::KariRef::from_implicit(
                any.value(),
            )?));
        } else {
            out.push(Info::Other(
                RecipientInfo::from_der(tlv).map_err(malformed("recipient info"))?,
            ));
        }
    }
    Ok(out)
}

/// The content key from the recipient infos, with one of our certificate keys or
/// pre-shared keys, and whether it was agreed with the SHA-1 X9.63 KDF (taken when
/// `sha1_kdf`).
fn content_key(
    loaded: &LoadedKeys,
    infos: &[Info<'_>],
    keys: &[(Certificate, SecretKey)],
    keks: &[Kek],
    cek_len: usize,
    sha1_kdf: bool,
) -> Result<(Zeroizing<Vec<u8>>, bool), DecryptFailure> {
    let ktris: Vec<&KeyTransRecipientInfo> = infos
        .iter()
        .filter_map(|ri| match ri {
            Info::Other(RecipientInfo::Ktri(k)) => Some(k),
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
    for (cert, key) in keys {
        let ours = super::kari::OurId::of(cert);
        let kari = infos.iter().find_map(|ri| match ri {
            Info::Kari(k) => super::kari::find(k, &ours).map(|rek| (k, rek)),
            _ => None,
        });
        if let Some((k, rek)) = kari {
            let cek = super::kari::unwrap(loaded, k, &rek, cert, key, sha1_kdf)?;
            return Ok((cek, k.sha1_kdf()));
        }
        if let Some(k) = ktris.iter().find(|k| matches_rid(cert, &k.rid)) {
            return Ok((unwrap_cek(loaded, key, k, cek_len)?, false));
        }
    }
    for kek in keks {
        let found = infos.iter().find_map(|ri| match ri {
            Info::Other(RecipientInfo::Kekri(k))
                if k.kek_id.kek_identifier.as_bytes() == kek.id =>
            {
                Some(k)
            }
            _ => None,
        });
        if let Some(k) = found {
            return Ok((unwrap_kek(k, kek)?, false));
        }
    }
    // Bounded (issue #17): a message with many recipient infos costs at most
    // MAX_TRIAL_RECIPIENTS trial decryptions per key of ours, never one per info.
    let opens = keys.iter().any(|(_, key)| {
        ktris
            .iter()
            .filter(|k| k.key_enc_alg.oid == RSAES_OAEP)
            .take(MAX_TRIAL_RECIPIENTS)
            .any(|k| unwrap_cek(loaded, key, k, cek_len).is_ok())
    });
    Err(if opens {
        DecryptFailure::Refused(SmimeError::Malformed(
            "a recipient identifier was altered".into(),
        ))
    } else {
        DecryptFailure::NotForUs
    })
}

/// Decrypts `buf` in place with legacy CBC; the plaintext's length (padding removed).
///
/// Bad padding is [`SmimeError::LegacyUndecryptable`], the error of every failure
/// after the decryption: as `undecryptable` it told an attacker who changed the
/// ciphertext whether the padding still checked, which a later failure (MIME, the
/// signature) did not (a padding oracle; found by the conformance corpus's legacy
/// cases).
fn cbc_decrypt_in_place(
    cipher: CbcCipher,
    key: &[u8],
    iv: &[u8],
    buf: &mut [u8],
) -> Result<usize, SmimeError> {
    use cbc::cipher::{block_padding::Pkcs7, BlockModeDecrypt, KeyIvInit};
    macro_rules! run {
        ($c:ty) => {
            cbc::Decryptor::<$c>::new_from_slices(key, iv)
                .map_err(|_| SmimeError::Undecryptable)?
                .decrypt_padded::<Pkcs7>(buf)
                .map_err(|_| SmimeError::LegacyUndecryptable)?
                .len()
        };
    }
    Ok(match cipher {
        CbcCipher::Aes128 => run!(aes::Aes128),
        CbcCipher::Aes192 => run!(aes::Aes192),
        CbcCipher::Aes256 => run!(aes::Aes256),
        CbcCipher::TripleDes => run!(des::TdesEde3),
    })
}

/// Decrypts a CMS AuthEnvelopedData (or, when `allow_legacy`, a legacy CBC
/// EnvelopedData) with one of `keys` (certificate and its private key) or `keks`.
/// AuthEnvelopedData plaintext is returned only when its tag verified; legacy
/// plaintext is marked unauthenticated. BER (streamed) input is read.
///
/// The content is decrypted in place in `cms`, which becomes the plaintext buffer:
/// no copy of the content is made on the way.
pub(crate) fn decrypt(
    loaded: &LoadedKeys,
    cms: Vec<u8>,
    keys: &[(Certificate, SecretKey)],
    keks: &[Kek],
    allow_legacy: bool,
) -> Result<Decrypted, DecryptFailure> {
    let InPlace {
        mut buffer,
        range,
        authenticated,
        algorithm,
    } = decrypt_in_place(loaded, cms, keys, keks, allow_legacy)?;
    buffer.truncate(range.end);
    buffer.drain(..range.start);
    Ok(Decrypted {
        plaintext: buffer,
        authenticated,
        algorithm,
    })
}

/// Plaintext left where it was decrypted: `buffer[range]`.
pub(crate) struct InPlace {
    /// The decoded CMS buffer, now holding the plaintext; wiped on drop.
    pub buffer: Zeroizing<Vec<u8>>,
    /// Where the plaintext is in it.
    pub range: std::ops::Range<usize>,
    /// As [`Decrypted::authenticated`].
    pub authenticated: bool,
    /// As [`Decrypted::algorithm`].
    pub algorithm: String,
}

/// [`decrypt`] without moving the plaintext to the front of its buffer.
pub(crate) fn decrypt_in_place(
    loaded: &LoadedKeys,
    cms: Vec<u8>,
    keys: &[(Certificate, SecretKey)],
    keks: &[Kek],
    allow_legacy: bool,
) -> Result<InPlace, DecryptFailure> {
    let mut der = if crate::asn1::ber::is_ber(&cms) {
        crate::asn1::ber::to_der(&cms).map_err(SmimeError::from)?
    } else {
        cms
    };
    let layout = match super::layout::enveloped(&der) {
        Ok(l) => l,
        // BER inside a definite-length outer element: rewrite once and read again.
        Err(first) => match crate::asn1::ber::to_der(&der) {
            Ok(rewritten) if rewritten != der => {
                der = rewritten;
                super::layout::enveloped(&der)?
            }
            _ => return Err(first.into()),
        },
    };
    if !layout.authenticated && !allow_legacy {
        return Err(SmimeError::LegacyEncryption.into());
    }
    let content_type = der::asn1::ObjectIdentifier::from_der(&der[layout.content_type.clone()])
        .map_err(malformed("encrypted content type"))?;
    if content_type != ID_DATA {
        return Err(SmimeError::Malformed("encrypted content is not id-data".into()).into());
    }
    let algorithm = AlgorithmIdentifierOwned::from_der(&der[layout.algorithm.clone()])
        .map_err(malformed("content encryption algorithm"))?;
    let infos_der = &der[layout.recipient_infos.clone()];
    // Counted before they are decoded: decoding a SET OF checks its DER order with
    // comparisons that re-encode, so tens of thousands of them cost seconds.
    if crate::asn1::count::elements_of(infos_der, MAX_RECIPIENT_INFOS) > MAX_RECIPIENT_INFOS {
        return Err(SmimeError::Malformed(format!(
            "more than {MAX_RECIPIENT_INFOS} recipient infos"
        ))
        .into());
    }
    let infos = decode_recipient_infos(infos_der)?;
    let (cipher, hkdf_info) = content_cipher(&algorithm, layout.authenticated)?;
    let key_len = match &cipher {
        ContentCipher::Aead(a, ..) => a.key_len(),
        ContentCipher::Cbc(c, _) => c.key_len(),
    };
    // The SHA-1 X9.63 KDF (RFC 5753's dhSinglePass-stdDH-sha1kdf, what `openssl cms
    // -encrypt` uses for an EC recipient unless told otherwise) derives the key-wrap
    // key: no collision use of SHA-1 (NIST SP 800-131A allows it in KDFs). It is
    // taken with authenticated content, whose tag checks the whole agreement, and
    // with CBC content only in legacy mode; the verdict names it. We never write it.
    let (mut cek, sha1_kdf) = content_key(
        loaded,
        &infos,
        keys,
        keks,
        key_len,
        allow_legacy || layout.authenticated,
    )?;
    if let Some(info) = &hkdf_info {
        cek = cek_hkdf(&cek, info)?;
    }
    if cek.len() != key_len {
        return Err(SmimeError::Undecryptable.into());
    }
    let named = |name: &str| {
        let mut n = name.to_string();
        if hkdf_info.is_some() {
            n.push_str(" (RFC 9709 HKDF)");
        }
        if sha1_kdf {
            n.push_str(" (ECDH with the SHA-1 KDF)");
        }
        n
    };
    let std::ops::Range { start, end } = layout.ciphertext;
    // From here the buffer may hold plaintext, authenticated or not: wiped when dropped,
    // on the error paths too.
    let mut der = Zeroizing::new(der);
    match cipher {
        ContentCipher::Aead(aead_alg, nonce, name) => {
            let mac = layout
                .mac
                .ok_or_else(|| SmimeError::Malformed("no mac".into()))?;
            if mac.len() != TAG_LEN {
                return Err(
                    SmimeError::UnsupportedAlgorithm("a tag other than 16 bytes".into()).into(),
                );
            }
            // RFC 5083 2.1: the authenticated attributes are authenticated as their DER
            // with the SET OF tag in place of [1].
            let aad = match &layout.auth_attrs {
                Some(r) => {
                    let mut a = der[r.clone()].to_vec();
                    a[0] = 0x31;
                    a
                }
                None => Vec::new(),
            };
            // The tag follows the ciphertext (over the bytes after it, all read by now).
            der.copy_within(mac.clone(), end);
            let key = LessSafeKey::new(
                UnboundKey::new(aead_alg, &cek).map_err(|_| SmimeError::Undecryptable)?,
            );
            let n = key
                .open_in_place(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(&aad),
                    &mut der[start..end + TAG_LEN],
                )
                .map_err(|_| SmimeError::Undecryptable)?
                .len();
            Ok(InPlace {
                buffer: der,
                range: start..start + n,
                authenticated: true,
                algorithm: named(name),
            })
        }
        ContentCipher::Cbc(cbc, iv) => {
            let n = cbc_decrypt_in_place(cbc, &cek, &iv, &mut der[start..end])?;
            Ok(InPlace {
                buffer: der,
                range: start..start + n,
                authenticated: false,
                algorithm: named(&format!("{} (legacy, unauthenticated)", cbc.name())),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keystore::{DirectoryStore, KeyStore};
    use der::Decode;

    fn bob() -> (tempfile::TempDir, Certificate, SecretKey) {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryStore::open(dir.path().join("s")).unwrap();
        let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/keys-fixtures/rfc9216/");
        for f in ["bob.encrypt.crt", "bob.encrypt.key"] {
            store
                .import(&std::fs::read(format!("{fx}{f}")).unwrap(), f, false)
                .unwrap();
        }
        let c = store.own_certificates().unwrap().remove(0);
        let key = store.private_key(&c.fingerprint).unwrap().unwrap();
        (dir, Certificate::from_der(&c.der).unwrap(), key)
    }

    /// Inside the corpus's seeded scope an AuthEnvelopedData is a function of the
    /// seed, for a key-transport (RSA-OAEP) and a key-agreement (P-256 ECDH)
    /// recipient alike, and still decrypts for both; outside it, it is not.
    #[test]
    fn a_seeded_envelope_repeats_and_decrypts_for_rsa_and_p256_recipients() {
        let (_dir, rsa, rsa_key) = bob();
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryStore::open(dir.path().join("p256")).unwrap();
        let p256 = {
            let _seeded = crate::entropy::Seeded::new(1, "test p256 key");
            let req = crate::smime::issue::IdentityRequest {
                email: Some("carol@example.com".into()),
                common_name: None,
                kind: crate::smime::issue::KeyKind::P256,
                days: 30,
                ca: false,
            };
            crate::smime::issue::generate(&req, None).unwrap().remove(0)
        };
        let pem = crate::keystore::identity_pem(&p256.certificate, &p256.private_key).unwrap();
        store.import(pem.as_bytes(), "carol", false).unwrap();
        let c = store.own_certificates().unwrap().remove(0);
        let p256_key = store.private_key(&c.fingerprint).unwrap().unwrap();
        let to = [rsa.clone(), p256.certificate.clone()];
        assert!(to[1..].iter().all(super::super::kari::supports));
        let content = b"the signed entity".to_vec();
        let seeded = |seed| {
            let _seeded = crate::entropy::Seeded::new(seed, "test envelope");
            encrypt(&content, &to).unwrap()
        };
        let (a, b, other) = (seeded(7), seeded(7), seeded(8));
        assert_eq!(a, b, "the same seed, the same envelope");
        assert_ne!(a, other);
        assert_ne!(
            encrypt(&content, &to).unwrap(),
            encrypt(&content, &to).unwrap()
        );
        for key in [(rsa, rsa_key), (p256.certificate, p256_key)] {
            let out = decrypt(&LoadedKeys::default(), a.clone(), &[key], &[], false)
                .unwrap_or_else(|_| panic!("does not decrypt"));
            assert_eq!(&out.plaintext[..], &content[..]);
        }
    }

    #[test]
    fn der_written_in_place_decodes_and_decrypts_at_every_length_boundary() {
        let (_dir, cert, key) = bob();
        let keys = [(cert.clone(), key)];
        for len in [
            0usize, 1, 100, 127, 128, 200, 255, 256, 65_535, 65_536, 70_000,
        ] {
            let content: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let der = encrypt(&content, std::slice::from_ref(&cert)).unwrap();
            // Strict DER: the decoder accepts it as is, and re-encoding gives it back.
            let info = cms::content_info::ContentInfo::from_der(&der).unwrap();
            assert_eq!(info.to_der().unwrap(), der, "length {len}");
            let out = match decrypt(&LoadedKeys::default(), der.clone(), &keys, &[], false) {
                Ok(d) => d,
                Err(_) => panic!("length {len} does not decrypt"),
            };
            assert_eq!(&out.plaintext[..], &content[..], "length {len}");
        }
    }
}
