//! Private keys that live on a PKCS#11 token (an HSM, a smart card, SoftHSM2) and never
//! leave it: the token signs, decrypts and derives ECDH secrets; mailseal only ever
//! holds a handle.
//!
//! Keys are named by RFC 7512 URIs: `pkcs11:token=LABEL;object=LABEL?module-path=
//! /usr/lib/softhsm/libsofthsm2.so&pin-value=1234` (or `pin-source=FILE`). The store keeps
//! the URI without any PIN; at use the PIN comes from `pin-source`, else from the
//! `MAILSEAL_PKCS11_PIN` environment variable.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::mechanism::elliptic_curve::{EcKdf, Ecdh1DeriveParams};
use cryptoki::mechanism::rsa::{PkcsMgfType, PkcsOaepParams, PkcsOaepSource, PkcsPssParams};
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::types::AuthPin;
use zeroize::Zeroizing;

use super::{KeyAlgorithm, KeyStoreError};

/// An RFC 7512 PKCS#11 URI (the parts mailseal uses).
#[derive(Clone)]
pub struct Pkcs11Uri {
    /// The module (`module-path`).
    pub module: PathBuf,
    /// The token label (`token`); the first token with the object when absent.
    pub token: Option<String>,
    /// The key's label (`object`).
    pub object: String,
    pin: Option<Zeroizing<String>>,
    pin_source: Option<PathBuf>,
}

impl std::fmt::Debug for Pkcs11Uri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.without_pin())
    }
}

fn bad_uri(uri: &str, why: &str) -> KeyStoreError {
    // The URI may hold a PIN: only its scheme and object are named.
    let _ = uri;
    KeyStoreError::Malformed {
        what: "PKCS#11 URI".into(),
        reason: why.to_string(),
    }
}

/// RFC 3986 percent-decoding of one attribute value.
fn unescape(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn escape(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The environment variable listing the PKCS#11 modules a stored key reference may
/// load (absolute paths, separated by `:`).
pub const MODULE_ALLOWLIST_VAR: &str = "MAILSEAL_PKCS11_MODULES";

impl Pkcs11Uri {
    /// Parses a key reference read back from a key store (a database another host may
    /// write, a store directory): its module is loaded only when this machine's
    /// configuration lists it in `MAILSEAL_PKCS11_MODULES` (issue #17). Loading a
    /// module runs its code, so whoever could write the store must not choose it.
    pub fn parse_stored(uri: &str) -> Result<Self, KeyStoreError> {
        let parsed = Self::parse(uri)?;
        let allowed = std::env::var_os(MODULE_ALLOWLIST_VAR)
            .map(|v| std::env::split_paths(&v).any(|p| p == parsed.module))
            .unwrap_or(false);
        if !allowed {
            return Err(KeyStoreError::Token(format!(
                "the stored key reference names PKCS#11 module {}, which {MODULE_ALLOWLIST_VAR} does not list; add it there to use this key",
                parsed.module.display()
            )));
        }
        Ok(parsed)
    }

    /// Parses `pkcs11:PATH-ATTRS?QUERY-ATTRS` naming one key (`object` required).
    pub fn parse(uri: &str) -> Result<Self, KeyStoreError> {
        let parsed = Self::parse_token(uri)?;
        if parsed.object.is_empty() {
            return Err(bad_uri(uri, "no object (the key's label)"));
        }
        Ok(parsed)
    }

    /// Parses a URI naming a token (the `object` may be absent).
    pub fn parse_token(uri: &str) -> Result<Self, KeyStoreError> {
        let rest = uri
            .strip_prefix("pkcs11:")
            .ok_or_else(|| bad_uri(uri, "does not start with pkcs11:"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut token = None;
        let mut object = None;
        for attr in path.split(';').filter(|a| !a.is_empty()) {
            let (k, v) = attr
                .split_once('=')
                .ok_or_else(|| bad_uri(uri, "a path attribute without '='"))?;
            let v = unescape(v).ok_or_else(|| bad_uri(uri, "bad percent-encoding"))?;
            match k {
                "token" => token = Some(v),
                "object" => object = Some(v),
                // type=private is implied; other attributes narrow nothing we use.
                _ => {}
            }
        }
        let mut module = None;
        let mut pin = None;
        let mut pin_source = None;
        for attr in query.split('&').filter(|a| !a.is_empty()) {
            let (k, v) = attr
                .split_once('=')
                .ok_or_else(|| bad_uri(uri, "a query attribute without '='"))?;
            let v = unescape(v).ok_or_else(|| bad_uri(uri, "bad percent-encoding"))?;
            match k {
                "module-path" => module = Some(PathBuf::from(v)),
                "pin-value" => pin = Some(Zeroizing::new(v)),
                "pin-source" => {
                    pin_source = Some(PathBuf::from(v.strip_prefix("file:").unwrap_or(&v)))
                }
                _ => {}
            }
        }
        Ok(Pkcs11Uri {
            module: module.ok_or_else(|| bad_uri(uri, "no module-path"))?,
            token,
            object: object.unwrap_or_default(),
            pin,
            pin_source,
        })
    }

    /// The URI with no PIN in it (what the store keeps).
    pub fn without_pin(&self) -> String {
        let mut s = String::from("pkcs11:");
        if let Some(t) = &self.token {
            s.push_str(&format!("token={};", escape(t)));
        }
        if !self.object.is_empty() {
            s.push_str(&format!("object={};type=private", escape(&self.object)));
        }
        s.push_str(&format!(
            "?module-path={}",
            escape(&self.module.display().to_string())
        ));
        if let Some(p) = &self.pin_source {
            s.push_str(&format!(
                "&pin-source=file:{}",
                escape(&p.display().to_string())
            ));
        }
        s
    }

    fn pin(&self) -> Result<Zeroizing<String>, KeyStoreError> {
        if let Some(p) = &self.pin {
            return Ok(p.clone());
        }
        if let Some(path) = &self.pin_source {
            let text = Zeroizing::new(std::fs::read_to_string(path).map_err(|source| {
                KeyStoreError::Io {
                    path: path.display().to_string(),
                    source,
                }
            })?);
            return Ok(Zeroizing::new(
                text.lines().next().unwrap_or_default().to_string(),
            ));
        }
        std::env::var("MAILSEAL_PKCS11_PIN")
            .map(Zeroizing::new)
            .map_err(|_| {
                token_error(
                    &self.without_pin(),
                    "no PIN: add pin-source to the URI or set MAILSEAL_PKCS11_PIN",
                )
            })
    }
}

fn token_error(what: &str, e: impl std::fmt::Display) -> KeyStoreError {
    KeyStoreError::Token(format!("{what}: {e}"))
}

/// One initialised module per path per process (C_Initialize may run only once).
fn module(path: &PathBuf) -> Result<Arc<Pkcs11>, KeyStoreError> {
    static MODULES: OnceLock<Mutex<HashMap<PathBuf, Arc<Pkcs11>>>> = OnceLock::new();
    let mut map = MODULES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(m) = map.get(path) {
        return Ok(m.clone());
    }
    let m = Pkcs11::new(path).map_err(|e| token_error(&path.display().to_string(), e))?;
    m.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        .map_err(|e| token_error("C_Initialize", e))?;
    let m = Arc::new(m);
    map.insert(path.clone(), m.clone());
    Ok(m)
}

/// A logged-in read-write session on the token the URI names.
fn session(uri: &Pkcs11Uri) -> Result<Session, KeyStoreError> {
    let m = module(&uri.module)?;
    let slots = m
        .get_slots_with_token()
        .map_err(|e| token_error("C_GetSlotList", e))?;
    let slot = slots
        .into_iter()
        .find(|s| {
            uri.token.as_deref().is_none_or(|want| {
                m.get_token_info(*s)
                    .is_ok_and(|i| i.label().trim_end() == want)
            })
        })
        .ok_or_else(|| {
            KeyStoreError::Token(match uri.token.as_deref() {
                Some(label) => format!(
                    "no token labelled {label:?} in this module (SoftHSM2: create it with `softhsm2-util --init-token --free --label {label}`)"
                ),
                None => "the module has no token".into(),
            })
        })?;
    let session = m
        .open_rw_session(slot)
        .map_err(|e| token_error("C_OpenSession", e))?;
    let pin = uri.pin()?;
    match session.login(UserType::User, Some(&AuthPin::from(pin.as_str()))) {
        Ok(()) => {}
        // Another session of this process is logged in already: the login is shared.
        Err(cryptoki::error::Error::Pkcs11(cryptoki::error::RvError::UserAlreadyLoggedIn, _)) => {}
        Err(e) => return Err(token_error("C_Login", e)),
    }
    Ok(session)
}

/// A private key on a token: a handle in a logged-in session.
pub struct TokenKey {
    session: Mutex<Session>,
    handle: ObjectHandle,
    algorithm: KeyAlgorithm,
    uri: String,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKey")
            .field("uri", &self.uri)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// What kind of key pair to create on a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKeyKind {
    /// ECDSA/ECDH on P-256.
    P256,
    /// RSA with this many bits.
    Rsa(u32),
}

/// DER of the P-256 named-curve OID, as CKA_EC_PARAMS wants it.
const P256_PARAMS: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

impl TokenKey {
    /// Opens the private key the URI names.
    pub fn open(uri: &Pkcs11Uri) -> Result<TokenKey, KeyStoreError> {
        Self::find(uri, Attribute::Label(uri.object.as_bytes().to_vec()))
    }

    /// Opens the private key with this CKA_ID on the URI's token.
    fn open_by_id(uri: &Pkcs11Uri, id: &[u8]) -> Result<TokenKey, KeyStoreError> {
        Self::find(uri, Attribute::Id(id.to_vec()))
    }

    fn find(uri: &Pkcs11Uri, by: Attribute) -> Result<TokenKey, KeyStoreError> {
        let session = session(uri)?;
        let found = session
            .find_objects(&[Attribute::Class(ObjectClass::PRIVATE_KEY), by])
            .map_err(|e| token_error("C_FindObjects", e))?;
        let handle = *found
            .first()
            .ok_or_else(|| token_error(&uri.object, "no private key with this label"))?;
        let algorithm = match session
            .get_attributes(handle, &[AttributeType::KeyType])
            .map_err(|e| token_error("C_GetAttributeValue", e))?
            .first()
        {
            Some(Attribute::KeyType(t)) if *t == KeyType::EC => KeyAlgorithm::Ec,
            Some(Attribute::KeyType(t)) if *t == KeyType::RSA => KeyAlgorithm::Rsa,
            _ => return Err(token_error(&uri.object, "neither an EC nor an RSA key")),
        };
        Ok(TokenKey {
            session: Mutex::new(session),
            handle,
            algorithm,
            uri: uri.without_pin(),
        })
    }

    /// Creates a key pair on the token: sensitive, never extractable, labelled with the
    /// URI's object. Returns the public key as SubjectPublicKeyInfo DER and the key.
    pub fn generate(
        uri: &Pkcs11Uri,
        kind: TokenKeyKind,
    ) -> Result<(Vec<u8>, TokenKey), KeyStoreError> {
        let session = session(uri)?;
        let label = uri.object.as_bytes().to_vec();
        let exists = session
            .find_objects(&[
                Attribute::Class(ObjectClass::PRIVATE_KEY),
                Attribute::Label(label.clone()),
            ])
            .map_err(|e| token_error("C_FindObjects", e))?;
        if !exists.is_empty() {
            return Err(token_error(
                &uri.object,
                "the token already has a key with this label",
            ));
        }
        let private = vec![
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Sensitive(true),
            Attribute::Extractable(false),
            Attribute::Label(label.clone()),
            Attribute::Id(label.clone()),
            Attribute::Sign(true),
        ];
        let mut public = vec![
            Attribute::Token(true),
            Attribute::Label(label.clone()),
            Attribute::Id(label),
            Attribute::Verify(true),
        ];
        let (mechanism, algorithm) = match kind {
            TokenKeyKind::P256 => {
                public.push(Attribute::EcParams(P256_PARAMS.to_vec()));
                (Mechanism::EccKeyPairGen, KeyAlgorithm::Ec)
            }
            TokenKeyKind::Rsa(bits) => {
                public.push(Attribute::ModulusBits(u64::from(bits).into()));
                public.push(Attribute::PublicExponent(vec![1, 0, 1]));
                public.push(Attribute::Encrypt(true));
                (Mechanism::RsaPkcsKeyPairGen, KeyAlgorithm::Rsa)
            }
        };
        let mut private = private;
        private.push(match algorithm {
            KeyAlgorithm::Ec => Attribute::Derive(true),
            _ => Attribute::Decrypt(true),
        });
        let (pub_handle, handle) = session
            .generate_key_pair(&mechanism, &public, &private)
            .map_err(|e| token_error("C_GenerateKeyPair", e))?;
        let spki = public_spki(&session, pub_handle, algorithm)?;
        Ok((
            spki,
            TokenKey {
                session: Mutex::new(session),
                handle,
                algorithm,
                uri: uri.without_pin(),
            },
        ))
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// The URI (without PIN).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Whether the token marks the key sensitive and never extractable.
    pub fn never_leaves_the_token(&self) -> bool {
        let s = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let attrs = s
            .get_attributes(
                self.handle,
                &[AttributeType::Sensitive, AttributeType::Extractable],
            )
            .unwrap_or_default();
        attrs.contains(&Attribute::Sensitive(true))
            && attrs.contains(&Attribute::Extractable(false))
    }

    fn run<T>(
        &self,
        what: &str,
        f: impl FnOnce(&Session, ObjectHandle) -> cryptoki::error::Result<T>,
    ) -> Result<T, KeyStoreError> {
        let s = self.session.lock().unwrap_or_else(|p| p.into_inner());
        f(&s, self.handle).map_err(|e| token_error(what, e))
    }

    /// ECDSA over a precomputed digest: the raw `r || s` the token returns.
    pub(crate) fn ecdsa_sign_digest(&self, digest: &[u8]) -> Result<Vec<u8>, KeyStoreError> {
        self.run("C_Sign", |s, k| s.sign(&Mechanism::Ecdsa, k, digest))
    }

    /// RSA signature over `message` with SHA-256: PKCS#1 v1.5, or PSS (MGF1-SHA-256,
    /// 32-byte salt) when `pss`.
    pub(crate) fn rsa_sign_sha256(
        &self,
        message: &[u8],
        pss: bool,
    ) -> Result<Vec<u8>, KeyStoreError> {
        let mechanism = if pss {
            Mechanism::Sha256RsaPkcsPss(PkcsPssParams {
                hash_alg: MechanismType::SHA256,
                mgf: PkcsMgfType::MGF1_SHA256,
                s_len: 32u64.into(),
            })
        } else {
            Mechanism::Sha256RsaPkcs
        };
        self.run("C_Sign", |s, k| s.sign(&mechanism, k, message))
    }

    /// RSAES-OAEP decryption (SHA-256 and MGF1-SHA-256, or SHA-1 and MGF1-SHA-1).
    pub(crate) fn rsa_decrypt_oaep(
        &self,
        sha256: bool,
        ciphertext: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
        let params = if sha256 {
            PkcsOaepParams::new(
                MechanismType::SHA256,
                PkcsMgfType::MGF1_SHA256,
                PkcsOaepSource::empty(),
            )
        } else {
            PkcsOaepParams::new(
                MechanismType::SHA1,
                PkcsMgfType::MGF1_SHA1,
                PkcsOaepSource::empty(),
            )
        };
        let s = self.session.lock().unwrap_or_else(|p| p.into_inner());
        match s.decrypt(&Mechanism::RsaPkcsOaep(params), self.handle, ciphertext) {
            Ok(v) => Ok(Zeroizing::new(v)),
            // Refused before it saw the ciphertext: the token lacks this OAEP variant
            // (SoftHSM 2.6 does OAEP with SHA-1 only).
            Err(cryptoki::error::Error::Pkcs11(rv, cryptoki::context::Function::DecryptInit)) => {
                Err(KeyStoreError::TokenUnsupported(format!(
                    "RSAES-OAEP with {} ({rv})",
                    if sha256 { "SHA-256" } else { "SHA-1" }
                )))
            }
            Err(e) => Err(token_error("C_Decrypt", e)),
        }
    }

    /// RSAES-PKCS1-v1_5 decryption.
    pub(crate) fn rsa_decrypt_pkcs1(
        &self,
        ciphertext: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
        self.run("C_Decrypt", |s, k| {
            s.decrypt(&Mechanism::RsaPkcs, k, ciphertext)
        })
        .map(Zeroizing::new)
    }

    /// The ECDH shared secret Z with the peer's uncompressed point: derived on the token
    /// into a session object, read, and destroyed.
    pub(crate) fn ecdh(&self, peer_point: &[u8]) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
        let params = Ecdh1DeriveParams::new(EcKdf::null(), peer_point);
        let template = [
            Attribute::Token(false),
            Attribute::Class(ObjectClass::SECRET_KEY),
            Attribute::KeyType(KeyType::GENERIC_SECRET),
            Attribute::Sensitive(false),
            Attribute::Extractable(true),
            Attribute::ValueLen(32u64.into()),
        ];
        self.run("C_DeriveKey", |s, k| {
            let derived = s.derive_key(&Mechanism::Ecdh1Derive(params), k, &template)?;
            let value = s.get_attributes(derived, &[AttributeType::Value]);
            let _ = s.destroy_object(derived);
            match value?.into_iter().next() {
                Some(Attribute::Value(v)) => Ok(Zeroizing::new(v)),
                _ => Ok(Zeroizing::new(Vec::new())),
            }
        })
        .and_then(|z| {
            if z.is_empty() {
                Err(token_error("C_DeriveKey", "no shared secret"))
            } else {
                Ok(z)
            }
        })
    }
}

/// RFC 8017 RSAPublicKey.
#[derive(der::Sequence)]
struct RsaPublicKey<'a> {
    modulus: der::asn1::UintRef<'a>,
    public_exponent: der::asn1::UintRef<'a>,
}

/// SubjectPublicKeyInfo DER of a public key object.
fn public_spki(
    session: &Session,
    handle: ObjectHandle,
    algorithm: KeyAlgorithm,
) -> Result<Vec<u8>, KeyStoreError> {
    use der::asn1::{BitString, OctetString, UintRef};
    use der::{Decode, Encode};
    use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
    let bad = |e: der::Error| token_error("public key", e);
    let (algorithm_id, key_bytes) = match algorithm {
        KeyAlgorithm::Ec => {
            let attrs = session
                .get_attributes(handle, &[AttributeType::EcPoint])
                .map_err(|e| token_error("C_GetAttributeValue", e))?;
            let Some(Attribute::EcPoint(point)) = attrs.into_iter().next() else {
                return Err(token_error("public key", "no EC point"));
            };
            // CKA_EC_POINT is the point inside a DER OCTET STRING.
            let point = OctetString::from_der(&point)
                .map_err(bad)?
                .into_bytes()
                .into_vec();
            (
                AlgorithmIdentifierOwned {
                    oid: crate::asn1::oids::ID_EC_PUBLIC_KEY,
                    parameters: Some(der::Any::from_der(P256_PARAMS).map_err(bad)?),
                },
                point,
            )
        }
        _ => {
            let attrs = session
                .get_attributes(
                    handle,
                    &[AttributeType::Modulus, AttributeType::PublicExponent],
                )
                .map_err(|e| token_error("C_GetAttributeValue", e))?;
            let (mut n, mut e) = (Vec::new(), Vec::new());
            for a in attrs {
                match a {
                    Attribute::Modulus(v) => n = v,
                    Attribute::PublicExponent(v) => e = v,
                    _ => {}
                }
            }
            let rsa = RsaPublicKey {
                modulus: UintRef::new(&n).map_err(bad)?,
                public_exponent: UintRef::new(&e).map_err(bad)?,
            };
            (
                AlgorithmIdentifierOwned {
                    oid: crate::asn1::oids::RSA_ENCRYPTION,
                    parameters: Some(der::asn1::Null.into()),
                },
                rsa.to_der().map_err(bad)?,
            )
        }
    };
    SubjectPublicKeyInfoOwned {
        algorithm: algorithm_id,
        subject_public_key: BitString::from_bytes(&key_bytes).map_err(bad)?,
    }
    .to_der()
    .map_err(bad)
}

/// The certificate (DER) of a key on a token, as `key generate --pkcs11` made it.
pub(crate) fn token_certificate(der: &[u8]) -> Result<x509_cert::Certificate, KeyStoreError> {
    use der::Decode;
    x509_cert::Certificate::from_der(der).map_err(|e| KeyStoreError::Malformed {
        what: "token certificate".into(),
        reason: e.to_string(),
    })
}

/// Puts `certificate` (DER) on the token as a certificate object beside the key whose
/// CKA_ID is `id` (the label of a key mailseal generated), so the token alone holds a
/// signing identity, as a smart card does.
pub(crate) fn store_certificate(
    uri: &Pkcs11Uri,
    certificate: &[u8],
    label: &str,
    id: &[u8],
) -> Result<(), KeyStoreError> {
    use cryptoki::object::CertificateType;
    use der::{Decode, Encode};
    let bad = |e: der::Error| token_error("certificate", e);
    let cert = x509_cert::Certificate::from_der(certificate).map_err(bad)?;
    let tbs = cert.tbs_certificate();
    let session = session(uri)?;
    session
        .create_object(&[
            Attribute::Class(ObjectClass::CERTIFICATE),
            Attribute::CertificateType(CertificateType::X_509),
            Attribute::Token(true),
            Attribute::Label(label.as_bytes().to_vec()),
            Attribute::Id(id.to_vec()),
            // PKCS#11 4.6.3: an X.509 certificate object needs its subject.
            Attribute::Subject(tbs.subject().to_der().map_err(bad)?),
            Attribute::Issuer(tbs.issuer().to_der().map_err(bad)?),
            Attribute::SerialNumber(tbs.serial_number().to_der().map_err(bad)?),
            Attribute::Value(certificate.to_vec()),
        ])
        .map(drop)
        .map_err(|e| token_error("C_CreateObject", e))
}

/// A certificate object's CKA_ID and DER.
type IdAndDer = (Vec<u8>, Vec<u8>);

/// A token as a key store (`--store pkcs11:token=...?module-path=...`): its certificate
/// objects are the certificates, each with the private key of the same CKA_ID. Keys
/// enter it only by generation on the token; peers' certificates and trust anchors
/// live in another store.
pub struct TokenStore {
    uri: Pkcs11Uri,
    keys: Mutex<HashMap<String, Arc<TokenKey>>>,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("uri", &self.uri.without_pin())
            .finish_non_exhaustive()
    }
}

impl TokenStore {
    /// The token the URI names (logging in to check the PIN).
    pub fn open(uri: &str) -> Result<TokenStore, KeyStoreError> {
        let uri = Pkcs11Uri::parse_token(uri)?;
        drop(session(&uri)?);
        Ok(TokenStore {
            uri,
            keys: Mutex::new(HashMap::new()),
        })
    }

    /// The token's URI for a key labelled `object`, with the store's PIN source.
    pub fn key_uri(&self, object: &str) -> Pkcs11Uri {
        let mut uri = self.uri.clone();
        uri.object = object.to_string();
        uri
    }

    /// Every certificate object: (CKA_ID, DER).
    fn certificates(&self) -> Result<Vec<IdAndDer>, KeyStoreError> {
        let s = session(&self.uri)?;
        let handles = s
            .find_objects(&[Attribute::Class(ObjectClass::CERTIFICATE)])
            .map_err(|e| token_error("C_FindObjects", e))?;
        let mut out = Vec::new();
        for h in handles {
            let attrs = s
                .get_attributes(h, &[AttributeType::Id, AttributeType::Value])
                .map_err(|e| token_error("C_GetAttributeValue", e))?;
            let (mut id, mut der) = (Vec::new(), Vec::new());
            for a in attrs {
                match a {
                    Attribute::Id(v) => id = v,
                    Attribute::Value(v) => der = v,
                    _ => {}
                }
            }
            out.push((id, der));
        }
        Ok(out)
    }

    fn stored(&self) -> Result<Vec<(Vec<u8>, super::StoredCertificate)>, KeyStoreError> {
        use der::Decode;
        let mut out = Vec::new();
        for (id, der) in self.certificates()? {
            let Ok(cert) = x509_cert::Certificate::from_der(&der) else {
                continue;
            };
            let info = super::material::cert_info(&cert);
            out.push((
                id,
                super::StoredCertificate {
                    fingerprint: info.fingerprint,
                    der,
                    emails: info.emails,
                },
            ));
        }
        Ok(out)
    }

    fn has_key(&self, id: &[u8]) -> bool {
        session(&self.uri)
            .and_then(|s| {
                s.find_objects(&[
                    Attribute::Class(ObjectClass::PRIVATE_KEY),
                    Attribute::Id(id.to_vec()),
                ])
                .map_err(|e| token_error("C_FindObjects", e))
            })
            .is_ok_and(|found| !found.is_empty())
    }
}

fn refused(what: &str, why: &str) -> KeyStoreError {
    KeyStoreError::Malformed {
        what: what.to_string(),
        reason: why.to_string(),
    }
}

impl super::KeyStore for TokenStore {
    fn token_key_uri(&self, _fpr: &str) -> Result<Option<String>, KeyStoreError> {
        // Every key of a token store is on the token.
        Ok(Some(self.uri.without_pin()))
    }

    fn import_with_passphrase(
        &self,
        input: &[u8],
        what: &str,
        trusted: bool,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<super::KeyEntry>, KeyStoreError> {
        if trusted {
            return Err(refused(
                what,
                "a token store holds our own identities; keep trust anchors in another store",
            ));
        }
        let mut out = Vec::new();
        for m in super::material::read_all(input, what, passphrase)? {
            let super::material::Material::Certificate(cert) = m else {
                return Err(refused(
                    what,
                    "private keys enter a token only by generation on it (key generate --pkcs11)",
                ));
            };
            // The certificate goes beside the token key with the same public key.
            use der::Encode;
            let spki = cert
                .tbs_certificate()
                .subject_public_key_info()
                .to_der()
                .map_err(|e| refused(what, &e.to_string()))?;
            let id = self
                .key_id_for(&spki)?
                .ok_or_else(|| refused(what, "no key on the token belongs to this certificate"))?;
            let der = cert.to_der().map_err(|e| refused(what, &e.to_string()))?;
            let label = super::material::cert_info(&cert).fingerprint;
            store_certificate(&self.uri, &der, &label, &id)?;
            out.push(super::material::cert_entry(
                &cert,
                super::EntryKind::Certificate,
                true,
            ));
        }
        Ok(out)
    }

    fn list(&self) -> Result<Vec<super::KeyEntry>, KeyStoreError> {
        use der::Decode;
        let mut out = Vec::new();
        for (id, c) in self.stored()? {
            let cert = x509_cert::Certificate::from_der(&c.der)
                .map_err(|e| refused("token certificate", &e.to_string()))?;
            out.push(super::material::cert_entry(
                &cert,
                super::EntryKind::Certificate,
                self.has_key(&id),
            ));
        }
        Ok(out)
    }

    fn certificates_for(
        &self,
        email: &str,
    ) -> Result<Vec<super::StoredCertificate>, KeyStoreError> {
        let email = email.to_ascii_lowercase();
        Ok(self
            .stored()?
            .into_iter()
            .map(|(_, c)| c)
            .filter(|c| c.emails.contains(&email))
            .collect())
    }

    fn trust_anchors(&self) -> Result<Vec<super::StoredCertificate>, KeyStoreError> {
        Ok(Vec::new())
    }

    fn own_certificates(&self) -> Result<Vec<super::StoredCertificate>, KeyStoreError> {
        Ok(self
            .stored()?
            .into_iter()
            .filter(|(id, _)| self.has_key(id))
            .map(|(_, c)| c)
            .collect())
    }

    fn private_key(&self, fpr: &str) -> Result<Option<super::SecretKey>, KeyStoreError> {
        let mut open = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = open.get(fpr) {
            return Ok(Some(super::SecretKey::on_token(fpr.to_string(), k.clone())));
        }
        let Some((id, _)) = self
            .stored()?
            .into_iter()
            .find(|(_, c)| c.fingerprint == fpr)
        else {
            return Ok(None);
        };
        if !self.has_key(&id) {
            return Ok(None);
        }
        let key = Arc::new(TokenKey::open_by_id(&self.uri, &id)?);
        open.insert(fpr.to_string(), key.clone());
        Ok(Some(super::SecretKey::on_token(fpr.to_string(), key)))
    }

    fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        Ok(Vec::new())
    }

    fn openpgp_secret_key(&self, _: &str) -> Result<Option<Zeroizing<Vec<u8>>>, KeyStoreError> {
        Ok(None)
    }
}

impl TokenStore {
    /// The DER of the certificate object with this fingerprint.
    pub fn certificates_for_fingerprint(
        &self,
        fpr: &str,
    ) -> Result<Option<Vec<u8>>, KeyStoreError> {
        Ok(self
            .stored()?
            .into_iter()
            .find(|(_, c)| c.fingerprint == fpr)
            .map(|(_, c)| c.der))
    }

    /// The CKA_ID of the token key pair whose public key is `spki` (DER).
    fn key_id_for(&self, spki: &[u8]) -> Result<Option<Vec<u8>>, KeyStoreError> {
        let s = session(&self.uri)?;
        let handles = s
            .find_objects(&[Attribute::Class(ObjectClass::PUBLIC_KEY)])
            .map_err(|e| token_error("C_FindObjects", e))?;
        for h in handles {
            let attrs = s
                .get_attributes(h, &[AttributeType::KeyType, AttributeType::Id])
                .map_err(|e| token_error("C_GetAttributeValue", e))?;
            let (mut alg, mut id) = (None, Vec::new());
            for a in attrs {
                match a {
                    Attribute::KeyType(t) if t == KeyType::EC => alg = Some(KeyAlgorithm::Ec),
                    Attribute::KeyType(t) if t == KeyType::RSA => alg = Some(KeyAlgorithm::Rsa),
                    Attribute::Id(v) => id = v,
                    _ => {}
                }
            }
            let Some(alg) = alg else { continue };
            if public_spki(&s, h, alg).is_ok_and(|p| p == spki) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }
}
