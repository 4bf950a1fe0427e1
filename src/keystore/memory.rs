//! A key store that lives in memory: for stateless tools (`mailseal sop`) that take
//! their keys from files on each call yet must go through the same policy layer as the
//! profiles, and for tests and programs that make their identities as they start.
//!
//! It holds what a store holds: X.509 certificates, trust anchors, private keys, CRLs
//! and JWK identities (in a SQLite database in memory, so every rule of the SQL store
//! applies unchanged), and OpenPGP certificates and secret keys. Nothing is written
//! anywhere, and it keeps no replay state: a [`crate::Receiver`] over it keeps its
//! state in memory ([`super::KeyStore::state_location`] is `None`).

use std::sync::Mutex;

use zeroize::Zeroizing;

use super::{
    KeyEntry, KeyStore, KeyStoreError, SecretKey, SqliteStore, StoredCertificate, StoredJwk,
};

/// Keys held in memory; nothing is written anywhere.
pub struct MemoryStore {
    /// X.509 material and JWKs, in a database in memory made at the first import of
    /// one (an OpenPGP-only store, as `sop` makes for each call, makes none).
    x509: std::sync::OnceLock<SqliteStore>,
    certs: Mutex<Vec<(String, Vec<u8>)>>,
    secrets: Mutex<Vec<(String, Zeroizing<Vec<u8>>)>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            x509: std::sync::OnceLock::new(),
            certs: Mutex::default(),
            secrets: Mutex::default(),
        }
    }
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

    /// The X.509 tables, made now if they are not yet.
    fn x509(&self) -> Result<&SqliteStore, KeyStoreError> {
        if let Some(s) = self.x509.get() {
            return Ok(s);
        }
        let made = SqliteStore::in_memory()?;
        Ok(self.x509.get_or_init(|| made))
    }

    /// What the X.509 tables answer, or nothing when none was imported yet.
    fn read<T: Default>(
        &self,
        f: impl FnOnce(&SqliteStore) -> Result<T, KeyStoreError>,
    ) -> Result<T, KeyStoreError> {
        self.x509.get().map_or(Ok(T::default()), f)
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
        trusted: bool,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        if !crate::keystore::openpgp::looks_like_openpgp(input) {
            return self
                .x509()?
                .import_with_passphrase(input, what, trusted, passphrase);
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
        let mut out = self.read(|s| s.list())?;
        let secrets = lock(&self.secrets);
        out.extend(lock(&self.certs).iter().filter_map(|(fpr, bytes)| {
            let cert = crate::keystore::openpgp::parse_stored(bytes)?;
            Some(crate::keystore::openpgp::entry(
                &cert,
                secrets.iter().any(|(f, _)| f == fpr),
            ))
        }));
        Ok(out)
    }

    fn certificates_for(&self, email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.read(|s| s.certificates_for(email))
    }

    fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.read(|s| s.trust_anchors())
    }

    fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.read(|s| s.own_certificates())
    }

    fn private_key(&self, fingerprint: &str) -> Result<Option<SecretKey>, KeyStoreError> {
        self.read(|s| s.private_key(fingerprint))
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

    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        self.read(|s| s.crls())
    }

    fn intermediates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.read(|s| s.intermediates())
    }

    fn jwk_identities(&self) -> Result<Vec<StoredJwk>, KeyStoreError> {
        self.read(|s| s.jwk_identities())
    }

    fn put_jwk_identity(&self, record: &StoredJwk) -> Result<(), KeyStoreError> {
        self.x509()?.put_jwk_identity(record)
    }
}
