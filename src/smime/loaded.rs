//! Private keys parsed once per [`super::Smime`] object rather than on every message.
//!
//! aws-lc validates an RSA key each time it is loaded from PKCS#8 (about 170 µs for
//! RSA-2048) and sets up its blinding on the key's first use, and checks an EC key
//! against its public point (a scalar multiplication); for small messages that was
//! most of the cost of signing or decrypting. The parsed keys live as long as the
//! profile object and are freed (and cleansed by aws-lc) with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_lc_rs::rsa::{OaepPrivateDecryptingKey, Pkcs1PrivateDecryptingKey, PrivateDecryptingKey};
use aws_lc_rs::signature::{EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};

use super::SmimeError;
use crate::keystore::SecretKey;

/// One parsed key, for one use.
pub(crate) enum Loaded {
    /// RSA signing.
    RsaSign(RsaKeyPair),
    /// ECDSA signing (P-256 or P-384, by the algorithm it was loaded for).
    Ecdsa(EcdsaKeyPair),
    /// Ed25519 signing.
    Ed25519(Ed25519KeyPair),
    /// RSAES-OAEP key transport.
    Oaep(OaepPrivateDecryptingKey),
    /// RSAES-PKCS1-v1_5 key transport.
    Pkcs1(Pkcs1PrivateDecryptingKey),
    /// ECDH key agreement (P-256, P-384, X25519): loading a NIST key from PKCS#8
    /// checks it against its public point, a scalar multiplication per message.
    Agreement(aws_lc_rs::agreement::PrivateKey),
}

/// Which use a key was loaded for (one key may sign and decrypt).
#[derive(Clone, Copy, Hash, PartialEq, Eq)]
pub(crate) enum Use {
    Sign,
    Oaep,
    Pkcs1,
    Agree,
}

/// The cache. Keys without a fingerprint (a key being certified) are never cached.
#[derive(Default)]
pub(crate) struct LoadedKeys(Mutex<HashMap<(String, Use), Arc<Loaded>>>);

impl LoadedKeys {
    /// The parsed `key` for `purpose`, loading it with `load` the first time.
    pub(crate) fn get(
        &self,
        key: &SecretKey,
        purpose: Use,
        load: impl FnOnce() -> Result<Loaded, SmimeError>,
    ) -> Result<Arc<Loaded>, SmimeError> {
        if key.fingerprint().is_empty() {
            return load().map(Arc::new);
        }
        let id = (key.fingerprint().to_string(), purpose);
        if let Some(found) = self.0.lock().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(found);
        }
        let loaded = Arc::new(load()?);
        if let Ok(mut map) = self.0.lock() {
            map.insert(id, loaded.clone());
        }
        Ok(loaded)
    }
}

/// An RSA decryption key for `purpose` (OAEP or PKCS#1 v1.5).
pub(crate) fn rsa_decryptor(key: &SecretKey, purpose: Use) -> Result<Loaded, SmimeError> {
    let unusable = || SmimeError::Key("the RSA private key does not load".into());
    let private = PrivateDecryptingKey::from_pkcs8(key.pkcs8_der()).map_err(|_| unusable())?;
    Ok(match purpose {
        Use::Pkcs1 => {
            Loaded::Pkcs1(Pkcs1PrivateDecryptingKey::new(private).map_err(|_| unusable())?)
        }
        _ => Loaded::Oaep(OaepPrivateDecryptingKey::new(private).map_err(|_| unusable())?),
    })
}
