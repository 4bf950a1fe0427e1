//! A key store that lives in memory: OpenPGP certificates and secret keys given as
//! bytes, for stateless tools (`mailseal sop`) that take their keys from files on each
//! call yet must go through the same policy layer as the profiles.

use std::sync::Mutex;

use zeroize::Zeroizing;

use super::{KeyEntry, KeyStore, KeyStoreError, SecretKey, StoredCertificate};

/// OpenPGP material held in memory; nothing is written anywhere. X.509 material is not
/// held (import refuses it).
#[derive(Default)]
pub struct MemoryStore {
    certs: Mutex<Vec<(String, Vec<u8>)>>,
    secrets: Mutex<Vec<(String, Zeroizing<Vec<u8>>)>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl KeyStore for MemoryStore {
    fn import_with_passphrase(
        &self,
        input: &[u8],
        what: &str,
        _trusted: bool,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        if !crate::keystore::openpgp::looks_like_openpgp(input) {
            return Err(KeyStoreError::Unrecognised {
                what: what.to_string(),
            });
        }
        let mut entries = Vec::new();
        for c in crate::keystore::openpgp::read_certs(input, what, passphrase)? {
            let mut certs = lock(&self.certs);
            match certs.iter_mut().find(|(f, _)| *f == c.fingerprint) {
                Some((_, old)) => {
                    if let Some(merged) = crate::keystore::openpgp::merge(old, &c.public) {
                        *old = merged;
                    }
                }
                None => certs.push((c.fingerprint.clone(), c.public)),
            }
            if let Some(secret) = c.secret {
                lock(&self.secrets).push((c.fingerprint.clone(), secret));
            }
            entries.push(c.entry);
        }
        Ok(entries)
    }

    fn list(&self) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let secrets = lock(&self.secrets);
        Ok(lock(&self.certs)
            .iter()
            .filter_map(|(fpr, bytes)| {
                let cert = crate::keystore::openpgp::parse_stored(bytes)?;
                Some(crate::keystore::openpgp::entry(
                    &cert,
                    secrets.iter().any(|(f, _)| f == fpr),
                ))
            })
            .collect())
    }

    fn certificates_for(&self, _email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        Ok(Vec::new())
    }

    fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        Ok(Vec::new())
    }

    fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        Ok(Vec::new())
    }

    fn private_key(&self, _fingerprint: &str) -> Result<Option<SecretKey>, KeyStoreError> {
        Ok(None)
    }

    fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        Ok(lock(&self.certs).iter().map(|(_, b)| b.clone()).collect())
    }

    fn openpgp_secret_key(
        &self,
        fingerprint: &str,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, KeyStoreError> {
        let fingerprint = fingerprint.to_ascii_lowercase();
        Ok(lock(&self.secrets)
            .iter()
            .find(|(f, _)| *f == fingerprint)
            .map(|(_, s)| s.clone()))
    }
}
