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
    OriginatorPublicKey, RecipientEncryptedKey, RecipientInfo, RecipientKeyIdentifier,
};
use der::asn1::{AnyRef, BitString, BitStringRef, ObjectIdentifier, OctetString, OctetStringRef};
use der::{Any, Decode, Encode, Header, Length, Reader, SliceReader, Tag, TagNumber, Tagged};
use spki::{AlgorithmIdentifierOwned, AlgorithmIdentifierRef};
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::loaded::{Loaded, LoadedKeys, Use};
use super::SmimeError;
use crate::asn1::oids::*;
use crate::keystore::SecretKey;

/// RFC 5753 ECC-CMS-SharedInfo.
#[derive(der::Sequence)]
struct EccCmsSharedInfo<'a> {
    key_info: AlgorithmIdentifierRef<'a>,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    entity_u_info: Option<&'a OctetStringRef>,
    #[asn1(context_specific = "2", tag_mode = "EXPLICIT")]
    supp_pub_info: &'a OctetStringRef,
}

/// A KeyAgreeRecipientInfo (RFC 5652 6.2.2) read in place from its DER.
///
/// Decoded by hand rather than as the `cms` crate's owned `KeyAgreeRecipientInfo`:
/// that copies every field and decodes each recipient's issuer `Name` (a SET OF whose
/// DER order it checks), which cost more than the AES key unwrap on every P-256 open.
/// Here the fields are borrowed and a recipient identifier stays encoded until it is
/// compared, byte for byte, with our certificate's issuer and serial number in DER
/// (equal names have one DER encoding). The identifiers of other recipients are
/// therefore not decoded: a malformed one is not ours, and nothing else reads it.
#[derive(der::Sequence)]
pub(crate) struct KariRef<'a> {
    version: CmsVersion,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT")]
    originator: AnyRef<'a>,
    #[asn1(context_specific = "1", tag_mode = "EXPLICIT", optional = "true")]
    ukm: Option<&'a OctetStringRef>,
    key_enc_alg: AlgorithmIdentifierRef<'a>,
    /// SEQUENCE OF RecipientEncryptedKey, read by [`find`].
    recipient_enc_keys: AnyRef<'a>,
}

impl KariRef<'_> {
    /// Whether its key is agreed with the SHA-1 X9.63 KDF.
    pub(crate) fn sha1_kdf(&self) -> bool {
        self.key_enc_alg.oid == DH_SHA1KDF
    }
}

/// RecipientEncryptedKey, its identifier still encoded.
#[derive(der::Sequence)]
pub(crate) struct RecipientEncryptedKeyRef<'a> {
    rid: AnyRef<'a>,
    enc_key: &'a OctetStringRef,
}

/// OriginatorPublicKey (the `[1] IMPLICIT` choice of OriginatorIdentifierOrKey).
#[derive(der::Sequence)]
struct OriginatorPublicKeyRef<'a> {
    algorithm: AlgorithmIdentifierRef<'a>,
    public_key: BitStringRef<'a>,
}

/// A context-specific constructed tag number `n`.
fn context(n: u8) -> Tag {
    Tag::ContextSpecific {
        constructed: true,
        number: TagNumber(n.into()),
    }
}

/// Reads the content of an IMPLICIT-tagged SEQUENCE `value` as `T`.
fn implicit_sequence<'a, T: der::DecodeValue<'a, Error = der::Error>>(
    value: &'a [u8],
) -> der::Result<T> {
    let mut reader = SliceReader::new(value)?;
    let header = Header::new(Tag::Sequence, Length::try_from(value.len())?);
    let out = T::decode_value(&mut reader, header)?;
    reader.finish()?;
    Ok(out)
}

impl<'a> KariRef<'a> {
    /// A KeyAgreeRecipientInfo from the content of its `[1]` RecipientInfo element,
    /// its recipient list checked to be a SEQUENCE OF well-formed entries.
    pub(crate) fn from_implicit(value: &'a [u8]) -> Result<Self, SmimeError> {
        let kari: KariRef<'a> = implicit_sequence(value).map_err(malformed("recipient info"))?;
        if kari.recipient_enc_keys.tag() != Tag::Sequence {
            return Err(SmimeError::Malformed(
                "recipient info: encrypted keys are not a SEQUENCE OF".into(),
            ));
        }
        for rek in kari.encrypted_keys() {
            rek?;
        }
        Ok(kari)
    }

    fn encrypted_keys(
        &self,
    ) -> impl Iterator<Item = Result<RecipientEncryptedKeyRef<'a>, SmimeError>> + 'a {
        let mut reader = SliceReader::new(self.recipient_enc_keys.value()).ok();
        std::iter::from_fn(move || {
            let r = reader.as_mut()?;
            if r.is_finished() {
                return None;
            }
            let item = RecipientEncryptedKeyRef::decode(r).map_err(malformed("recipient info"));
            if item.is_err() {
                reader = None;
            }
            Some(item)
        })
    }
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
    wrap: ObjectIdentifier,
    ukm: Option<&OctetStringRef>,
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
    let len = match wrap {
        AES128_WRAP => 16,
        AES256_WRAP => 32,
        other => {
            return Err(SmimeError::UnsupportedAlgorithm(format!(
                "key wrap {other}"
            )))
        }
    };
    let bits = ((len * 8) as u32).to_be_bytes();
    let info = EccCmsSharedInfo {
        key_info: AlgorithmIdentifierRef {
            oid: wrap,
            parameters: None,
        },
        entity_u_info: ukm,
        supp_pub_info: OctetStringRef::new(&bits).map_err(malformed("SharedInfo"))?,
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
/// An ephemeral key from the corpus's seeded stream ([`crate::entropy`]): a scalar
/// drawn until it is one of the curve's (aws-lc-rs generates only from its own source).
fn seeded_ephemeral(
    curve: &'static agreement::Algorithm,
    rng: &mut rand_chacha::ChaCha20Rng,
) -> Result<PrivateKey, aws_lc_rs::error::Unspecified> {
    use rand_chacha::rand_core::RngCore;
    let len = if std::ptr::eq(curve, &ECDH_P384) {
        48
    } else {
        32
    };
    let mut scalar = zeroize::Zeroizing::new([0u8; 48]);
    for _ in 0..64 {
        rng.fill_bytes(&mut scalar[..len]);
        if let Ok(key) = PrivateKey::from_private_key(curve, &scalar[..len]) {
            return Ok(key);
        }
    }
    Err(aws_lc_rs::error::Unspecified)
}

pub(crate) fn recipient_info(cert: &Certificate, cek: &[u8]) -> Result<RecipientInfo, SmimeError> {
    let curve = curve_of(cert)
        .ok_or_else(|| SmimeError::UnsupportedAlgorithm("key agreement with this key".into()))?;
    let ephemeral = match crate::entropy::with_seeded(|rng| seeded_ephemeral(curve, rng)) {
        Some(key) => key,
        None => PrivateKey::generate(curve),
    }
    .map_err(|_| SmimeError::Key("no ephemeral key".into()))?;
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
        |z| kek(scheme, wrap.oid, None, z),
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

/// Our certificate, compared with recipient identifiers: IssuerAndSerialNumber by its
/// DER content (the serial number first, then, only for an entry with our serial, the
/// issuer's encoding), rKeyId by the subject key identifier.
pub(crate) struct OurId<'c> {
    cert: &'c Certificate,
    issuer: std::cell::OnceCell<Option<Vec<u8>>>,
}

impl<'c> OurId<'c> {
    pub(crate) fn of(cert: &'c Certificate) -> OurId<'c> {
        OurId {
            cert,
            issuer: std::cell::OnceCell::new(),
        }
    }

    fn matches(&self, rid: &AnyRef<'_>) -> bool {
        let tbs = self.cert.tbs_certificate();
        if rid.tag() == Tag::Sequence {
            // issuer Name, then serialNumber INTEGER, and nothing after them.
            let Ok(mut reader) = SliceReader::new(rid.value()) else {
                return false;
            };
            let (Ok(issuer), Ok(serial)) = (reader.tlv_bytes(), AnyRef::decode(&mut reader)) else {
                return false;
            };
            return reader.is_finished()
                && serial.tag() == Tag::Integer
                && serial.value() == tbs.serial_number().as_bytes()
                && self
                    .issuer
                    .get_or_init(|| tbs.issuer().to_der().ok())
                    .as_deref()
                    == Some(issuer);
        }
        // rKeyId [0] IMPLICIT RecipientKeyIdentifier.
        if rid.tag() != context(0) {
            return false;
        }
        let Ok(Some((_, ours))) = tbs.get_extension::<x509_cert::ext::pkix::SubjectKeyIdentifier>()
        else {
            return false;
        };
        matches!(
            implicit_sequence::<RecipientKeyIdentifier>(rid.value()),
            Ok(rkid) if rkid.subject_key_identifier == ours
        )
    }
}

/// The wrapped key of `kari` meant for `ours`, if any.
pub(crate) fn find<'a>(
    kari: &KariRef<'a>,
    ours: &OurId<'_>,
) -> Option<RecipientEncryptedKeyRef<'a>> {
    kari.encrypted_keys()
        .filter_map(Result::ok)
        .find(|r| ours.matches(&r.rid))
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
    wrap: ObjectIdentifier,
    ukm: Option<&OctetStringRef>,
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
    kari: &KariRef<'_>,
    rek: &RecipientEncryptedKeyRef<'_>,
    cert: &Certificate,
    key: &SecretKey,
    sha1_kdf: bool,
) -> Result<Zeroizing<Vec<u8>>, SmimeError> {
    if kari.version != CmsVersion::V3 {
        return Err(SmimeError::Malformed(
            "KeyAgreeRecipientInfo version is not 3".into(),
        ));
    }
    // The SHA-1 X9.63 KDF (RFC 5753's dhSinglePass-stdDH-sha1kdf) only where the
    // caller allows it: with authenticated content, or CBC content in legacy mode.
    if kari.key_enc_alg.oid == DH_SHA1KDF && !sha1_kdf {
        return Err(SmimeError::UnsupportedAlgorithm(
            "ECDH with the SHA-1 KDF with unauthenticated (CBC) content (legacy; --allow-legacy-cbc reads it)".into(),
        ));
    }
    let curve = curve_of(cert)
        .ok_or_else(|| SmimeError::UnsupportedAlgorithm("key agreement with this key".into()))?;
    // OriginatorIdentifierOrKey: issuerAndSerialNumber (SEQUENCE), subjectKeyIdentifier
    // ([0]) name a static key of the sender's; originatorKey ([1]) carries the
    // ephemeral one.
    let originator = match kari.originator.tag() {
        t if t == context(1) => {
            implicit_sequence::<OriginatorPublicKeyRef<'_>>(kari.originator.value())
                .map_err(malformed("originator key"))?
        }
        Tag::Sequence => {
            return Err(SmimeError::UnsupportedAlgorithm(
                "static-static ECDH".into(),
            ))
        }
        Tag::ContextSpecific {
            constructed: false,
            number: TagNumber(0),
        } => {
            return Err(SmimeError::UnsupportedAlgorithm(
                "static-static ECDH".into(),
            ))
        }
        _ => {
            return Err(SmimeError::Malformed(
                "originator: not a known choice".into(),
            ))
        }
    };
    let expected = if std::ptr::eq(curve, &X25519) {
        ID_X25519
    } else {
        ID_EC_PUBLIC_KEY
    };
    // The ephemeral key's parameters (the curve, or nothing) say what the recipient's
    // certificate already fixes; the agreement refuses a point of another curve.
    let (Some(public_key), true) = (
        originator.public_key.as_bytes(),
        originator.algorithm.oid == expected,
    ) else {
        return Err(SmimeError::Malformed(
            "the originator key is not of the recipient's key type".into(),
        ));
    };
    let wrap: AlgorithmIdentifierRef<'_> = kari
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
    let ukm = kari.ukm;
    let kek = if let Some(token) = key.token() {
        // The token computes Z; the KDF runs here on it.
        let z = token
            .ecdh(public_key)
            .map_err(|_| SmimeError::Undecryptable)?;
        kek(scheme, wrap.oid, ukm, &z)?
    } else {
        software_kek(loaded, curve, key, public_key, scheme, wrap.oid, ukm)?
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
    use crate::smime::issue::{generate, IdentityRequest, KeyKind};

    fn p256(email: &str) -> Certificate {
        let req = IdentityRequest {
            email: Some(email.into()),
            common_name: None,
            kind: KeyKind::P256,
            days: 30,
            ca: false,
        };
        generate(&req, None).unwrap().remove(0).certificate
    }

    /// Our builder's KeyAgreeRecipientInfo for `cert`, as its `[1]` content.
    fn built(cert: &Certificate) -> Vec<u8> {
        let RecipientInfo::Kari(kari) = recipient_info(cert, &[9u8; 32]).unwrap() else {
            panic!("not a kari")
        };
        let der = kari.to_der().unwrap();
        AnyRef::from_der(&der).unwrap().value().to_vec()
    }

    fn implicit_content(kari: &KeyAgreeRecipientInfo) -> Vec<u8> {
        let der = kari.to_der().unwrap();
        AnyRef::from_der(&der).unwrap().value().to_vec()
    }

    #[test]
    fn the_borrowed_reader_finds_our_key_by_issuer_and_serial_and_only_ours() {
        let (bob, carol) = (p256("bob@example.com"), p256("carol@example.com"));
        let der = built(&bob);
        let kari = KariRef::from_implicit(&der).unwrap();
        let rek = find(&kari, &OurId::of(&bob)).expect("bob's key");
        assert_eq!(rek.enc_key.as_bytes().len(), 40);
        // Another issuer and serial.
        assert!(find(&kari, &OurId::of(&carol)).is_none());
        // Our serial number under another issuer name (one letter of it changed).
        let name = b"bob@example.com";
        let at = der.windows(name.len()).position(|w| w == name).unwrap();
        let mut renamed = der.clone();
        renamed[at] = b'c';
        let kari = KariRef::from_implicit(&renamed).unwrap();
        assert!(find(&kari, &OurId::of(&bob)).is_none());
    }

    #[test]
    fn fail_the_borrowed_reader_refuses_what_the_owned_decoder_refuses() {
        let bob = p256("bob@example.com");
        let der = built(&bob);
        // Every truncation, and a byte appended, is refused as malformed.
        for cut in 0..der.len() {
            assert!(KariRef::from_implicit(&der[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = der.clone();
        longer.push(0);
        assert!(KariRef::from_implicit(&longer).is_err());
        // The encrypted keys must be a SEQUENCE OF entries: a SET there is refused.
        let RecipientInfo::Kari(owned) = recipient_info(&bob, &[9u8; 32]).unwrap() else {
            panic!("not a kari")
        };
        let keys = owned.recipient_enc_keys.to_der().unwrap();
        let der = implicit_content(&owned);
        let at = der.windows(keys.len()).position(|w| w == keys).unwrap();
        let mut set = der.clone();
        set[at] = 0x31;
        assert!(matches!(
            KariRef::from_implicit(&set),
            Err(SmimeError::Malformed(_))
        ));
    }

    #[test]
    fn fail_an_originator_other_than_an_ephemeral_key_is_refused_by_kind() {
        let bob = p256("bob@example.com");
        let der = built(&bob);
        let ours = OurId::of(&bob);
        let loaded = LoadedKeys::default();
        let key = SecretKey::new(
            String::new(),
            crate::keystore::KeyAlgorithm::Ec,
            Zeroizing::new(Vec::new()),
        );
        // The originator's choice tag sits after version (3 bytes) and [0] (2 bytes).
        assert_eq!(der[5], 0xa1, "originatorKey [1]");
        for (tag, unsupported) in [(0x30u8, true), (0x80, true), (0xa5, false)] {
            let mut other = der.clone();
            other[5] = tag;
            let kari = KariRef::from_implicit(&other).unwrap();
            let rek = find(&kari, &ours).unwrap();
            match unwrap(&loaded, &kari, &rek, &bob, &key, false) {
                Err(SmimeError::UnsupportedAlgorithm(m)) if unsupported => {
                    assert!(m.contains("static-static"))
                }
                Err(SmimeError::Malformed(_)) if !unsupported => {}
                other => panic!("{tag:#x}: {:?}", other.map(|_| ())),
            }
        }
    }

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
