//! A key store over SQL tables: the logic once (import, encryption at rest, lookups,
//! token keys), the tables per database ([`KeyTables`]: SQLite in `sqlite.rs`,
//! PostgreSQL in `postgres.rs`).
//!
//! With a passphrase, private keys are encrypted at rest in standard forms: PKCS#8
//! keys as EncryptedPrivateKeyInfo (PBES2, scrypt and AES-256-CBC), OpenPGP secret keys
//! locked with the passphrase's S2K. A key written without a passphrase stays readable
//! without one until `set_passphrase` encrypts it. Keys on a PKCS#11 token are stored
//! as their URI (no PIN): the key never touches the database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use der::Decode;
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::material::{cert_info, fingerprint, key_public, read_all, Material};
use super::{
    EntryKind, KeyAlgorithm, KeyEntry, KeyStore, KeyStoreError, SecretKey, StoredCertificate,
    TokenKey,
};

/// Which certificates to read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Which<'a> {
    /// Certificates (not anchors) naming this address (lower case).
    Email(&'a str),
    /// Every certificate that is not an anchor.
    Certificates,
    /// Trust anchors.
    Anchors,
    /// Certificates whose private key the store holds.
    Own,
}

/// A private key row.
pub(crate) struct KeyRow {
    pub fingerprint: String,
    pub algorithm: String,
    /// PKCS#8 DER, or EncryptedPrivateKeyInfo DER when `encrypted`; `None` for a token
    /// key.
    pub stored: Option<Zeroizing<Vec<u8>>>,
    pub encrypted: bool,
    pub token_uri: Option<String>,
}

/// An OpenPGP certificate row.
pub(crate) struct PgpRow {
    pub fingerprint: String,
    pub cert: Vec<u8>,
    /// The transferable secret key, locked when `locked`.
    pub secret: Option<Zeroizing<Vec<u8>>>,
    pub locked: bool,
}

/// The tables a SQL key store keeps. Every method is one statement or one
/// transaction; the connection is the implementation's.
pub(crate) trait KeyTables: Send + Sync {
    /// Inserts or replaces a certificate and its addresses.
    fn put_certificate(
        &self,
        fingerprint: &str,
        anchor: bool,
        der: &[u8],
        emails: &[String],
    ) -> Result<(), KeyStoreError>;
    /// Certificates (DER).
    fn certificates(&self, which: Which<'_>) -> Result<Vec<Vec<u8>>, KeyStoreError>;
    /// Inserts or replaces a private key.
    fn put_key(&self, row: &KeyRow) -> Result<(), KeyStoreError>;
    /// The private key of `fingerprint`.
    fn key(&self, fingerprint: &str) -> Result<Option<KeyRow>, KeyStoreError>;
    /// Every private key row.
    fn keys(&self) -> Result<Vec<KeyRow>, KeyStoreError>;
    /// The OpenPGP certificate of `fingerprint`.
    fn openpgp(&self, fingerprint: &str) -> Result<Option<PgpRow>, KeyStoreError>;
    /// Every OpenPGP certificate, by fingerprint.
    fn openpgp_all(&self) -> Result<Vec<PgpRow>, KeyStoreError>;
    /// Inserts or replaces an OpenPGP certificate; its secret only when `row.secret`
    /// is set (a certificate without one keeps the stored secret).
    fn put_openpgp(&self, row: &PgpRow) -> Result<(), KeyStoreError>;
    /// Inserts a CRL (DER) under its SHA-256.
    fn put_crl(&self, fingerprint: &str, der: &[u8]) -> Result<(), KeyStoreError>;
    /// Every CRL (DER).
    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError>;
    /// Inserts or replaces a JWK identity (the record's JSON) under its fingerprint.
    fn put_jwk(&self, fingerprint: &str, record: &str) -> Result<(), KeyStoreError>;
    /// Every JWK identity record (JSON).
    fn jwks(&self) -> Result<Vec<String>, KeyStoreError>;
    /// Deletes every row of `fingerprint`; says whether there was one.
    fn delete(&self, fingerprint: &str) -> Result<bool, KeyStoreError>;
    /// Rewrites the stored form of these keys and secrets, all or none.
    fn replace_secrets(&self, keys: &[KeyRow], pgp: &[PgpRow]) -> Result<(), KeyStoreError>;
    /// The database's replay and stream state (the same database).
    fn state_location(&self) -> Option<crate::keystore::StateLocation>;
}

pub(crate) fn db(e: impl std::fmt::Display) -> KeyStoreError {
    KeyStoreError::Database(e.to_string())
}

fn algorithm_of(s: &str) -> KeyAlgorithm {
    match s {
        "rsa" => KeyAlgorithm::Rsa,
        "ec" => KeyAlgorithm::Ec,
        "ed25519" => KeyAlgorithm::Ed25519,
        "x25519" => KeyAlgorithm::X25519,
        _ => KeyAlgorithm::Other,
    }
}

/// Certificates and keys in SQL tables.
pub struct SqlKeyStore<T> {
    pub(crate) tables: T,
    passphrase: Option<Zeroizing<Vec<u8>>>,
    tokens: Mutex<HashMap<String, Arc<TokenKey>>>,
    /// Keys decrypted once (the passphrase's scrypt costs tens of milliseconds), wiped
    /// when the store is dropped.
    unlocked: Mutex<HashMap<String, Zeroizing<Vec<u8>>>>,
}

impl<T> std::fmt::Debug for SqlKeyStore<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlKeyStore")
            .field("passphrase", &self.passphrase.is_some())
            .finish_non_exhaustive()
    }
}

// The tables trait is the crate's own (SQLite and PostgreSQL): users get the stores,
// not a way to plug in tables.
#[allow(private_bounds)]
impl<T: KeyTables> SqlKeyStore<T> {
    pub(crate) fn with_tables(tables: T, passphrase: Option<&[u8]>) -> Self {
        SqlKeyStore {
            tables,
            passphrase: passphrase.map(|p| Zeroizing::new(p.to_vec())),
            tokens: Mutex::new(HashMap::new()),
            unlocked: Mutex::new(HashMap::new()),
        }
    }

    /// PKCS#8 DER as stored: encrypted under `passphrase` when there is one.
    fn seal_pkcs8(
        passphrase: Option<&[u8]>,
        der: &[u8],
    ) -> Result<(Zeroizing<Vec<u8>>, bool), KeyStoreError> {
        let Some(pass) = passphrase else {
            return Ok((Zeroizing::new(der.to_vec()), false));
        };
        // The DER exactly as imported (attributes included) is what gets encrypted:
        // PBES2 with scrypt (the pkcs5 defaults) and AES-256-CBC.
        pkcs8::PrivateKeyInfoRef::from_der(der).map_err(db)?;
        let mut salt = [0u8; 16];
        let mut iv = [0u8; 16];
        getrandom::fill(&mut salt).map_err(db)?;
        getrandom::fill(&mut iv).map_err(db)?;
        let params = pkcs8::pkcs5::pbes2::Parameters::generate_scrypt_aes256cbc(
            Default::default(),
            &salt,
            iv,
        )
        .map_err(db)?;
        let scheme = pkcs8::pkcs5::EncryptionScheme::Pbes2(params);
        let ciphertext = scheme.encrypt(pass, der).map_err(db)?;
        let epki = pkcs8::EncryptedPrivateKeyInfoOwned {
            encryption_algorithm: scheme,
            encrypted_data: der::asn1::OctetString::new(ciphertext).map_err(db)?,
        };
        use der::Encode;
        Ok((Zeroizing::new(epki.to_der().map_err(db)?), true))
    }

    fn open_pkcs8(
        &self,
        stored: &[u8],
        encrypted: bool,
    ) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
        if !encrypted {
            return Ok(Zeroizing::new(stored.to_vec()));
        }
        let pass = self.passphrase.as_ref().ok_or(KeyStoreError::Locked)?;
        match read_all(stored, "stored key", Some(&pass[..])) {
            Ok(mut m) => match m.pop() {
                Some(Material::PrivateKey { der }) => Ok(der),
                _ => Err(KeyStoreError::WrongPassphrase),
            },
            Err(_) => Err(KeyStoreError::WrongPassphrase),
        }
    }

    fn seal_tsk(
        passphrase: Option<&[u8]>,
        tsk: &[u8],
    ) -> Result<(Zeroizing<Vec<u8>>, bool), KeyStoreError> {
        match passphrase {
            Some(p) => Ok((crate::keystore::openpgp::lock(tsk, p)?, true)),
            None => Ok((Zeroizing::new(tsk.to_vec()), false)),
        }
    }

    fn open_tsk(&self, stored: &[u8], locked: bool) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
        if !locked {
            return Ok(Zeroizing::new(stored.to_vec()));
        }
        let pass = self.passphrase.as_ref().ok_or(KeyStoreError::Locked)?;
        crate::keystore::openpgp::unlock_stored(stored, pass)
    }

    fn own_fingerprints(&self) -> Result<std::collections::HashSet<String>, KeyStoreError> {
        Ok(self
            .tables
            .keys()?
            .into_iter()
            .map(|k| k.fingerprint)
            .collect())
    }

    fn insert_certificate(
        &self,
        cert: &Certificate,
        anchor: bool,
    ) -> Result<KeyEntry, KeyStoreError> {
        use der::Encode;
        let info = cert_info(cert);
        let der = cert.to_der().map_err(db)?;
        self.tables
            .put_certificate(&info.fingerprint, anchor, &der, &info.emails)?;
        let kind = if anchor {
            EntryKind::TrustAnchor
        } else {
            EntryKind::Certificate
        };
        let has_key = self.tables.key(&info.fingerprint)?.is_some();
        Ok(super::material::cert_entry(cert, kind, has_key))
    }

    /// Records that the private key of `certificate` (DER) lives on the token `uri`
    /// names (the URI is kept without its PIN).
    pub fn add_token_key(
        &self,
        certificate: &[u8],
        uri: &super::Pkcs11Uri,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let cert = super::token_certificate(certificate)?;
        let info = cert_info(&cert);
        let algorithm = super::material::cert_entry(&cert, EntryKind::Certificate, true).algorithm;
        self.tables.put_key(&KeyRow {
            fingerprint: info.fingerprint,
            algorithm: algorithm.to_string(),
            stored: None,
            encrypted: false,
            token_uri: Some(uri.without_pin()),
        })?;
        Ok(vec![self.insert_certificate(&cert, false)?])
    }

    /// Deletes everything stored under `fingerprint` (certificate, trust anchor,
    /// private key, OpenPGP certificate). Says whether anything was there.
    pub fn delete(&self, fpr: &str) -> Result<bool, KeyStoreError> {
        self.unlocked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(fpr);
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(fpr);
        self.tables.delete(fpr)
    }

    /// The certificate stored under `fingerprint`: PEM for X.509, armored for OpenPGP.
    pub fn export_certificate(&self, fpr: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
        for which in [Which::Certificates, Which::Anchors] {
            for der in self.tables.certificates(which)? {
                let cert = Certificate::from_der(&der).map_err(db)?;
                if cert_info(&cert).fingerprint == fpr {
                    return Ok(Some(
                        der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, &der)
                            .map_err(db)?
                            .into_bytes(),
                    ));
                }
            }
        }
        self.tables
            .openpgp(fpr)?
            .map(|row| crate::keystore::openpgp::armored_certificate(&row.cert))
            .transpose()
    }

    /// Encrypts every private key under `new` (or stores them in the clear when
    /// `None`), after opening them with the store's current passphrase. Returns how
    /// many keys were rewritten. All of them or none: one transaction.
    pub fn set_passphrase(&self, new: Option<&[u8]>) -> Result<usize, KeyStoreError> {
        let mut keys = Vec::new();
        for row in self.tables.keys()? {
            let Some(stored) = &row.stored else { continue };
            let der = self.open_pkcs8(stored, row.encrypted)?;
            let (sealed, encrypted) = Self::seal_pkcs8(new, &der)?;
            keys.push(KeyRow {
                stored: Some(sealed),
                encrypted,
                ..row
            });
        }
        let mut pgp = Vec::new();
        for row in self.tables.openpgp_all()? {
            let Some(stored) = &row.secret else { continue };
            let tsk = self.open_tsk(stored, row.locked)?;
            let (sealed, locked) = Self::seal_tsk(new, &tsk)?;
            pgp.push(PgpRow {
                secret: Some(sealed),
                locked,
                ..row
            });
        }
        self.tables.replace_secrets(&keys, &pgp)?;
        Ok(keys.len() + pgp.len())
    }

    fn import_openpgp(
        &self,
        input: &[u8],
        what: &str,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let certs = crate::keystore::openpgp::read_certs(input, what, passphrase)?;
        let mut entries = Vec::new();
        for c in certs {
            let old = self.tables.openpgp(&c.fingerprint)?;
            // A certificate already stored is merged with the new copy.
            let public = match &old {
                Some(old) => {
                    crate::keystore::openpgp::merge(&old.cert, &c.public).unwrap_or(c.public)
                }
                None => c.public,
            };
            let mut entry = c.entry;
            let (secret, locked) = match c.secret {
                Some(s) => {
                    let (sealed, locked) =
                        Self::seal_tsk(self.passphrase.as_deref().map(|p| &p[..]), &s)?;
                    (Some(sealed), locked)
                }
                None => {
                    entry.has_private_key = old.as_ref().is_some_and(|o| o.secret.is_some());
                    (None, false)
                }
            };
            self.tables.put_openpgp(&PgpRow {
                fingerprint: c.fingerprint,
                cert: public,
                secret,
                locked,
            })?;
            entries.push(entry);
        }
        Ok(entries)
    }

    fn stored(&self, which: Which<'_>) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        let mut out = Vec::new();
        for der in self.tables.certificates(which)? {
            let cert = Certificate::from_der(&der).map_err(db)?;
            let info = cert_info(&cert);
            out.push(StoredCertificate {
                fingerprint: info.fingerprint,
                der,
                emails: info.emails,
            });
        }
        Ok(out)
    }
}

#[allow(private_bounds)]
impl<T: KeyTables> KeyStore for SqlKeyStore<T> {
    /// The same database: the command line keeps a store's replay state beside its
    /// keys.
    fn state_location(&self) -> Option<crate::keystore::StateLocation> {
        self.tables.state_location()
    }

    fn import_with_passphrase(
        &self,
        input: &[u8],
        what: &str,
        trusted: bool,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        if crate::keystore::openpgp::looks_like_openpgp(input) {
            return self.import_openpgp(input, what, passphrase);
        }
        let mut entries = Vec::new();
        let mut keys = Vec::new();
        for m in read_all(input, what, passphrase)? {
            match m {
                Material::Certificate(cert) => {
                    entries.push(self.insert_certificate(&cert, trusted)?)
                }
                Material::Crl(der) => {
                    let entry = super::material::crl_entry(&der);
                    self.tables.put_crl(&entry.fingerprint, &der)?;
                    entries.push(entry);
                }
                Material::PrivateKey { der } => {
                    let (alg, public) = key_public(&der, what)?;
                    let fpr = fingerprint(&public);
                    let (sealed, encrypted) =
                        Self::seal_pkcs8(self.passphrase.as_deref().map(|p| &p[..]), &der)?;
                    self.tables.put_key(&KeyRow {
                        fingerprint: fpr.clone(),
                        algorithm: alg.to_string(),
                        stored: Some(sealed),
                        encrypted,
                        token_uri: None,
                    })?;
                    keys.push((fpr, alg));
                }
            }
        }
        super::list_keys_with_certificates(self, entries, keys)
    }

    fn list(&self) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let own = self.own_fingerprints()?;
        let mut out = Vec::new();
        let mut with_cert = std::collections::HashSet::new();
        for (which, kind) in [
            (Which::Certificates, EntryKind::Certificate),
            (Which::Anchors, EntryKind::TrustAnchor),
        ] {
            for c in self.stored(which)? {
                let cert = Certificate::from_der(&c.der).map_err(db)?;
                out.push(super::material::cert_entry(
                    &cert,
                    kind,
                    own.contains(&c.fingerprint),
                ));
                with_cert.insert(c.fingerprint);
            }
        }
        for row in self.tables.openpgp_all()? {
            if let Some(cert) = crate::keystore::openpgp::parse_stored(&row.cert) {
                out.push(crate::keystore::openpgp::entry(&cert, row.secret.is_some()));
            }
        }
        for der in self.tables.crls()? {
            out.push(super::material::crl_entry(&der));
        }
        for k in self.tables.keys()? {
            if !with_cert.contains(&k.fingerprint) {
                out.push(super::key_only_entry(
                    k.fingerprint,
                    algorithm_of(&k.algorithm),
                ));
            }
        }
        Ok(super::with_jwk_entries(out, &self.jwk_identities()?))
    }

    fn jwk_identities(&self) -> Result<Vec<super::StoredJwk>, KeyStoreError> {
        self.tables
            .jwks()?
            .iter()
            .map(|r| serde_json::from_str(r).map_err(db))
            .collect()
    }

    fn put_jwk_identity(&self, record: &super::StoredJwk) -> Result<(), KeyStoreError> {
        let text = serde_json::to_string(record).map_err(db)?;
        self.tables.put_jwk(&record.fingerprint, &text)
    }

    fn certificates_for(&self, email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.stored(Which::Email(&email.to_ascii_lowercase()))
    }

    fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.stored(Which::Anchors)
    }

    fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.stored(Which::Own)
    }

    fn token_key_uri(&self, fpr: &str) -> Result<Option<String>, KeyStoreError> {
        Ok(self.tables.key(fpr)?.and_then(|row| row.token_uri))
    }

    fn private_key(&self, fpr: &str) -> Result<Option<SecretKey>, KeyStoreError> {
        let Some(row) = self.tables.key(fpr)? else {
            return Ok(None);
        };
        if let Some(uri) = &row.token_uri {
            let mut open = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
            let key = match open.get(fpr) {
                Some(k) => k.clone(),
                None => {
                    let k = Arc::new(TokenKey::open(&super::Pkcs11Uri::parse_stored(uri)?)?);
                    open.insert(fpr.to_string(), k.clone());
                    k
                }
            };
            return Ok(Some(SecretKey::on_token(fpr.to_string(), key)));
        }
        let Some(stored) = row.stored else {
            return Ok(None);
        };
        let der = if row.encrypted {
            let mut cache = self.unlocked.lock().unwrap_or_else(|p| p.into_inner());
            match cache.get(fpr) {
                Some(der) => der.clone(),
                None => {
                    let der = self.open_pkcs8(&stored, true)?;
                    cache.insert(fpr.to_string(), der.clone());
                    der
                }
            }
        } else {
            stored
        };
        Ok(Some(SecretKey::new(
            fpr.to_string(),
            algorithm_of(&row.algorithm),
            der,
        )))
    }

    fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        Ok(self
            .tables
            .openpgp_all()?
            .into_iter()
            .map(|r| r.cert)
            .collect())
    }

    fn intermediates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        let mut all = self.stored(Which::Certificates)?;
        all.retain(|c| super::material::is_ca_der(&c.der));
        Ok(all)
    }

    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        self.tables.crls()
    }

    fn openpgp_secret_key(&self, fpr: &str) -> Result<Option<Zeroizing<Vec<u8>>>, KeyStoreError> {
        match self.tables.openpgp(fpr)? {
            Some(PgpRow {
                secret: Some(stored),
                locked,
                ..
            }) => self.open_tsk(&stored, locked).map(Some),
            _ => Ok(None),
        }
    }
}
