//! Key-agreement recipients, ephemeral-static: ECDH on P-256 and P-384 (RFC 5753 §3.1,
//! `dhSinglePass-stdDH-sha*kdf-scheme`, the ANSI X9.63 KDF over ECC-CMS-SharedInfo) and
//! X25519 (RFC 8418, HKDF over the same SharedInfo; X9.63 also read), the content key
//! wrapped with AES key wrap (RFC 3394).
//!
//! Written here rather than taken from the `cms` 0.3.0-rc.0 KeyAgree builder, which
//! wraps the content key under an all-zero key (see STACK-NOTES); the tests prove the
//! wrapped key does not unwrap under a zero key and that OpenSSL decrypts ours.

use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey, ECDH_P256, ECDH_P384, X25519};
use aws_lc_rs::digest;
use aws_lc_rs::hkdf;
use aws_lc_rs::key_wrap::{KeyEncryptionKey, KeyWrap, AES_128, AES_256};
use cms::cert::IssuerAndSerialNumber;
use cms::content_info::CmsVersion;
use cms::enveloped_data::{
    KeyAgreeRecipientIdentifier, KeyAgreeRecipientInfo, OriginatorIdentifierOrKey,
    OriginatorPublicKey, RecipientEncryptedKey, RecipientInfo,
};
use der::asn1::{BitString, ObjectIdentifier, OctetString};
use der::{Any, Encode};
use spki::AlgorithmIdentifierOwned;
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::loaded::{Loaded, LoadedKeys, Use};
use super::SmimeError;
use crate::asn1::oids::*;
use crate::keystore::SecretKey;

/// RFC 5753 ECC-CMS-SharedInfo.
#[derive(der::Sequence)]
struct EccCmsSharedInfo {
    key_info: AlgorithmIdentifierOwned,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    entity_u_info: Option<OctetString>,
    #[asn1(context_specific = "2", tag_mode = "EXPLICIT")]
    supp_pub_info: OctetString,
}

fn malformed(what: &str) -> impl Fn(der::Error) -> SmimeError + '_ {
    move |e| SmimeError::Malformed(format!("{what}: {e}"))
}

fn curve_of(cert: &Certificate) -> Option<&'static agreement::Algorithm> {
    let spki = cert.tbs_certificate().subject_public_key_info();
    if spki.algorithm.oid == ID_X25519 && spki.algorithm.parameters.is_none() {
        return Some(&X25519);
    }
    if spki.algorithm.oid != ID_EC_PUBLIC_KEY {
        return None;
    }
    match spki
        .algorithm
        .parameters
        .as_ref()?
        .decode_as::<ObjectIdentifier>()
        .ok()?
    {
        SECP256R1 => Some(&ECDH_P256),
        SECP384R1 => Some(&ECDH_P384),
        _ => None,
    }
}

/// Whether this certificate's key agrees keys with this module.
pub(crate) fn supports(cert: &Certificate) -> bool {
    curve_of(cert).is_some()
}

/// ANSI X9.63 KDF: hash(Z || counter || SharedInfo) blocks, truncated to `len`.
fn x963_kdf(
    hash: &'static digest::Algorithm,
    z: &[u8],
    shared_info: &[u8],
    len: usize,
) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(len + hash.output_len()));
    let mut counter = 1u32;
    while out.len() < len {
        let mut ctx = digest::Context::new(hash);
        ctx.update(z);
        ctx.update(&counter.to_be_bytes());
        ctx.update(shared_info);
        out.extend_from_slice(ctx.finish().as_ref());
        counter += 1;
    }
    out.truncate(len);
    out
}

fn kek(
    scheme: ObjectIdentifier,
    wrap: &AlgorithmIdentifierOwned,
    ukm: Option<&OctetString>,
    z: &[u8],
) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    enum Kdf {
        X963(&'static digest::Algorithm),
        Hkdf(hkdf::Algorithm),
    }
    let kdf = match scheme {
        DH_SHA1KDF => Kdf::X963(&digest::SHA1_FOR_LEGACY_USE_ONLY),
        DH_SHA256KDF => Kdf::X963(&digest::SHA256),
        DH_SHA384KDF => Kdf::X963(&digest::SHA384),
        DH_SHA512KDF => Kdf::X963(&digest::SHA512),
        DH_HKDF_SHA256 => Kdf::Hkdf(hkdf::HKDF_SHA256),
        DH_HKDF_SHA384 => Kdf::Hkdf(hkdf::HKDF_SHA384),
        DH_HKDF_SHA512 => Kdf::Hkdf(hkdf::HKDF_SHA512),
        other => {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "key agreement {other}"
            )))
        }
    };
    let len = match wrap.oid {
        AES128_WRAP => 16,
        AES256_WRAP => 32,
        other => {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "key wrap {other}"
            )))
        }
    };
    let info = EccCmsSharedInfo {
        key_info: AlgorithmIdentifierOwned {
            oid: wrap.oid,
            parameters: None,
        },
        entity_u_info: ukm.cloned(),
        supp_pub_info: OctetString::new(((len * 8) as u32).to_be_bytes().to_vec())
            .map_err(malformed("SharedInfo"))?,
    };
    let info = info.to_der().map_err(malformed("SharedInfo"))?;
    match kdf {
        Kdf::X963(hash) => Ok(x963_kdf(hash, z, &info, len)),
        // RFC 8418 2.2: salt = ukm (absent: empty), IKM = Z, info = SharedInfo.
        Kdf::Hkdf(alg) => {
            let mut out = Zeroizing::new(vec![0u8; len]);
            hkdf::Salt::new(alg, ukm.map_or(&[][..], |u| u.as_bytes()))
                .extract(z)
                .expand(&[&info], Len(len))
                .and_then(|okm| okm.fill(&mut out))
                .map_err(|_| SmimeError::Undecryptable)?;
            Ok(out)
        }
    }
}

/// An HKDF output length.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn wrap_alg() -> AlgorithmIdentifierOwned {
    AlgorithmIdentifierOwned {
        oid: AES256_WRAP,
        parameters: None,
    }
}

/// A KeyAgreeRecipientInfo carrying `cek` to `cert` with a fresh ephemeral key and
/// AES-256 key wrap: ECDH P-256/P-384 with the X9.63 SHA-256 KDF (what OpenSSL reads),
/// X25519 with HKDF-SHA-256 (RFC 8418's own scheme).
pub(crate) fn recipient_info(cert: &Certificate, cek: &[u8]) -> Result<RecipientInfo, SmimeError> {
    let curve = curve_of(cert)
        .ok_or_else(|| SmimeError::UnsupportedAlgorithm("key agreement with this key".into()))?;
    let ephemeral =
        PrivateKey::generate(curve).map_err(|_| SmimeError::Key("no ephemeral key".into()))?;
    let ephemeral_public = ephemeral
        .compute_public_key()
        .map_err(|_| SmimeError::Key("no ephemeral key".into()))?;
    let peer = cert
        .tbs_certificate()
        .subject_public_key_info()
        .subject_public_key
        .raw_bytes();
    let wrap = wrap_alg();
    let x25519 = std::ptr::eq(curve, &X25519);
    let (scheme, originator_oid) = if x25519 {
        (DH_HKDF_SHA256, ID_X25519)
    } else {
        (DH_SHA256KDF, ID_EC_PUBLIC_KEY)
    };
    let kek = agreement::agree(
        &ephemeral,
        UnparsedPublicKey::new(curve, peer),
        SmimeError::Key("key agreement failed".into()),
        |z| kek(scheme, &wrap, None, z),
    )?;
    let mut wrapped = vec![0u8; cek.len() + 8];
    let n = KeyEncryptionKey::new(&AES_256, &kek)
        .map_err(|_| SmimeError::Key("key wrap".into()))?
        .wrap(cek, &mut wrapped)
        .map_err(|_| SmimeError::Key("key wrap".into()))?
        .len();
    wrapped.truncate(n);
    let tbs = cert.tbs_certificate();
    Ok(RecipientInfo::Kari(KeyAgreeRecipientInfo {
        version: CmsVersion::V3,
        originator: OriginatorIdentifierOrKey::OriginatorKey(OriginatorPublicKey {
            algorithm: AlgorithmIdentifierOwned {
                oid: originator_oid,
                parameters: None,
            },
            public_key: BitString::from_bytes(ephemeral_public.as_ref())
                .map_err(malformed("ephemeral key"))?,
        }),
        ukm: None,
        key_enc_alg: AlgorithmIdentifierOwned {
            oid: scheme,
            parameters: Some(Any::encode_from(&wrap).map_err(malformed("key wrap"))?),
        },
        recipient_enc_keys: vec![RecipientEncryptedKey {
            rid: KeyAgreeRecipientIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
                issuer: tbs.issuer().clone(),
                serial_number: tbs.serial_number().clone(),
            }),
            enc_key: OctetString::new(wrapped).map_err(malformed("wrapped key"))?,
        }],
    }))
}

fn matches(cert: &Certificate, rid: &KeyAgreeRecipientIdentifier) -> bool {
    match rid {
        KeyAgreeRecipientIdentifier::IssuerAndSerialNumber(ias) => {
            cert.tbs_certificate().issuer() == &ias.issuer
                && cert.tbs_certificate().serial_number() == &ias.serial_number
        }
        KeyAgreeRecipientIdentifier::RKeyId(rkid) => matches!(
            cert.tbs_certificate().get_extension::<x509_cert::ext::pkix::SubjectKeyIdentifier>(),
            Ok(Some((_, own))) if own == rkid.subject_key_identifier
        ),
    }
}

/// The wrapped key of `kari` meant for `cert`, if any.
pub(crate) fn find<'k>(
    kari: &'k KeyAgreeRecipientInfo,
    cert: &Certificate,
) -> Option<&'k RecipientEncryptedKey> {
    kari.recipient_enc_keys
        .iter()
        .find(|r| matches(cert, &r.rid))
}

/// Our key-agreement private key: PKCS#8 for the NIST curves; for X25519 the 32-byte
/// secret inside the PKCS#8 (RFC 8410 CurvePrivateKey), which aws-lc-rs takes raw.
fn private_key(
    curve: &'static agreement::Algorithm,
    key: &SecretKey,
) -> Result<PrivateKey, SmimeError> {
    let unusable = || SmimeError::Key("our key-agreement private key does not load".into());
    if !std::ptr::eq(curve, &X25519) {
        return PrivateKey::from_private_key_der(curve, key.pkcs8_der()).map_err(|_| unusable());
    }
    use der::Decode;
    let info = pkcs8::PrivateKeyInfoRef::from_der(key.pkcs8_der()).map_err(|_| unusable())?;
    let secret = <&der::asn1::OctetStringRef>::from_der(info.private_key.as_bytes())
        .map_err(|_| unusable())?;
    PrivateKey::from_private_key(&X25519, secret.as_bytes()).map_err(|_| unusable())
}

/// The key-encryption key from our software `key` (parsed once per profile object)
/// and the originator's public key.
fn software_kek(
    loaded: &LoadedKeys,
    curve: &'static agreement::Algorithm,
    key: &SecretKey,
    originator: &[u8],
    scheme: ObjectIdentifier,
    wrap: &AlgorithmIdentifierOwned,
    ukm: Option<&OctetString>,
) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    let private = loaded.get(key, Use::Agree, || {
        private_key(curve, key).map(Loaded::Agreement)
    })?;
    let Loaded::Agreement(private) = &*private else {
        return Err(SmimeError::Key(
            "our key-agreement private key does not load".into(),
        ));
    };
    // The cache is keyed by the key's fingerprint, so it is the key of this curve (and
    // the agreement refuses a peer key of another curve).
    agreement::agree(
        private,
        UnparsedPublicKey::new(curve, originator),
        SmimeError::Undecryptable,
        |z| kek(scheme, wrap, ukm, z),
    )
}

/// Unwraps the content key of `rek` in `kari` with our `key` for `cert`.
pub(crate) fn unwrap(
    loaded: &LoadedKeys,
    kari: &KeyAgreeRecipientInfo,
    rek: &RecipientEncryptedKey,
    cert: &Certificate,
    key: &SecretKey,
    allow_legacy: bool,
) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    if kari.version != CmsVersion::V3 {
        return Err(SmimeError::Malformed(
            "KeyAgreeRecipientInfo version is not 3".into(),
        ));
    }
    // The SHA-1 X9.63 KDF (RFC 5753's dhSinglePass-stdDH-sha1kdf) only in legacy mode
    // (issue #17), like CBC content encryption.
    if kari.key_enc_alg.oid == DH_SHA1KDF && !allow_legacy {
        return Err(SmimeError::UnsupportedAlgorithm(
            "ECDH with the SHA-1 KDF (legacy; --allow-legacy-cbc reads it)".into(),
        ));
    }
    let curve = curve_of(cert)
        .ok_or_else(|| SmimeError::UnsupportedAlgorithm("key agreement with this key".into()))?;
    let OriginatorIdentifierOrKey::OriginatorKey(originator) = &kari.originator else {
        return Err(SmimeError::UnsupportedAlgorithm(
            "static-static ECDH".into(),
        ));
    };
    let expected = if std::ptr::eq(curve, &X25519) {
        ID_X25519
    } else {
        ID_EC_PUBLIC_KEY
    };
    if originator.algorithm.oid != expected || originator.public_key.unused_bits() != 0 {
        return Err(SmimeError::Malformed(
            "the originator key is not of the recipient's key type".into(),
        ));
    }
    let wrap: AlgorithmIdentifierOwned = kari
        .key_enc_alg
        .parameters
        .as_ref()
        .ok_or_else(|| {
            SmimeError::Malformed("key agreement without its key wrap algorithm".into())
        })?
        .decode_as()
        .map_err(malformed("key wrap algorithm"))?;
    if wrap.parameters.is_some() {
        return Err(SmimeError::Malformed(
            "key wrap algorithm with parameters".into(),
        ));
    }
    let scheme = kari.key_enc_alg.oid;
    let ukm = kari.ukm.as_ref();
    let kek = if let Some(token) = key.token() {
        // The token computes Z; the KDF runs here on it.
        let z = token
            .ecdh(originator.public_key.raw_bytes())
            .map_err(|_| SmimeError::Undecryptable)?;
        kek(scheme, &wrap, ukm, &z)?
    } else {
        software_kek(
            loaded,
            curve,
            key,
            originator.public_key.raw_bytes(),
            scheme,
            &wrap,
            ukm,
        )?
    };
    let cipher = if kek.len() == 16 { &AES_128 } else { &AES_256 };
    let wrapped = rek.enc_key.as_bytes();
    let mut out = Zeroizing::new(vec![0u8; wrapped.len()]);
    let n = KeyEncryptionKey::new(cipher, &kek)
        .map_err(|_| SmimeError::Undecryptable)?
        .unwrap(wrapped, &mut out)
        .map_err(|_| SmimeError::Undecryptable)?
        .len();
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x963_matches_a_hand_computation() {
        // One block: SHA-256(Z || 00000001 || info); two blocks for 40 bytes.
        let z = [7u8; 32];
        let info = b"info";
        let one = x963_kdf(&digest::SHA256, &z, info, 32);
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(&z);
        ctx.update(&[0, 0, 0, 1]);
        ctx.update(info);
        assert_eq!(&one[..], ctx.finish().as_ref());
        let two = x963_kdf(&digest::SHA256, &z, info, 40);
        assert_eq!(&two[..32], &one[..]);
        assert_eq!(two.len(), 40);
    }
}
