//! Private keys and certificates parsed once per [`super::Smime`] object (or
//! [`super::KeyCache`]) rather than on every message.
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
/// Certificates are kept by their DER bytes: a P-256 open decodes the signer's
/// certificate the message carries, our own and the trust anchors, about 4 µs each
/// (a tenth of the open) that a lookup replaces.
#[derive(Default)]
pub(crate) struct LoadedKeys {
    keys: Mutex<HashMap<(String, Use), Arc<Loaded>>>,
    certificates: Mutex<HashMap<Box<[u8]>, x509_cert::Certificate>>,
}

/// Certificates kept at most (the cache is emptied when full: a sender who sends a
/// new certificate with every message only keeps it busy).
const MAX_CERTIFICATES: usize = 1024;

/// Larger certificates are decoded each time rather than kept (an RSA-4096
/// certificate with the usual extensions is under 2 KiB): a sender who fills the
/// cache with certificates of its own holds a few MiB at most.
const MAX_KEPT_CERTIFICATE: usize = 4 * 1024;

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
        if let Some(found) = self.keys.lock().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(found);
        }
        let loaded = Arc::new(load()?);
        if let Ok(mut map) = self.keys.lock() {
            map.insert(id, loaded.clone());
        }
        Ok(loaded)
    }

    /// The certificate whose DER is `der`, decoded the first time it is seen. Keyed
    /// by the whole encoding, so two certificates never share an entry.
    pub(crate) fn certificate(&self, der: &[u8]) -> Result<x509_cert::Certificate, der::Error> {
        use der::Decode;
        if let Some(found) = self
            .certificates
            .lock()
            .ok()
            .and_then(|m| m.get(der).cloned())
        {
            return Ok(found);
        }
        let cert = x509_cert::Certificate::from_der(der)?;
        if der.len() <= MAX_KEPT_CERTIFICATE {
            if let Ok(mut map) = self.certificates.lock() {
                if map.len() >= MAX_CERTIFICATES {
                    map.clear();
                }
                map.insert(der.into(), cert.clone());
            }
        }
        Ok(cert)
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

#[cfg(test)]
mod tests {
    use super::*;
    use der::{Decode, DecodePem, Encode};
    use x509_cert::Certificate;

    fn der(name: &str) -> Vec<u8> {
        let pem = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("keys-fixtures/rfc9216")
                .join(name),
        )
        .unwrap();
        Certificate::from_pem(&pem).unwrap().to_der().unwrap()
    }

    #[test]
    fn certificates_are_kept_by_their_whole_encoding() {
        let cache = LoadedKeys::default();
        let bob = der("bob.sign.crt");
        let alice = der("alice.sign.crt");
        assert_eq!(
            cache.certificate(&bob).unwrap(),
            Certificate::from_der(&bob).unwrap()
        );
        assert_eq!(
            cache.certificate(&alice).unwrap(),
            Certificate::from_der(&alice).unwrap()
        );
        // Kept: the second lookup is the same certificate, not another one's.
        assert_eq!(
            cache.certificate(&bob).unwrap(),
            Certificate::from_der(&bob).unwrap()
        );
        assert_eq!(cache.certificates.lock().unwrap().len(), 2);
        // One changed byte is another key, decoded (and here refused) on its own.
        let mut altered = bob.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        let decoded = cache.certificate(&altered);
        assert_eq!(decoded.is_ok(), Certificate::from_der(&altered).is_ok());
        if let Ok(c) = decoded {
            assert_ne!(c, Certificate::from_der(&bob).unwrap());
        }
        // Malformed bytes are an error, not kept.
        assert!(cache.certificate(&bob[..bob.len() / 2]).is_err());
        assert!(cache.certificate(b"").is_err());
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = LoadedKeys::default();
        let bob = der("bob.sign.crt");
        let alice = der("alice.sign.crt");
        {
            let mut map = cache.certificates.lock().unwrap();
            // Fill it with distinct keys (the same certificate under other encodings
            // would not decode, so the entries are made directly).
            for i in 0..MAX_CERTIFICATES {
                let mut k = bob.clone();
                k.extend_from_slice(&(i as u32).to_be_bytes());
                map.insert(k.into(), Certificate::from_der(&bob).unwrap());
            }
            assert!(map.len() >= MAX_CERTIFICATES);
        }
        cache.certificate(&alice).unwrap();
        assert_eq!(cache.certificates.lock().unwrap().len(), 1);
    }
}
