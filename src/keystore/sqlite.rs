//! Keys in the store's SQLite database (`crate::sqlite`), beside the replay state.
//!
//! With a passphrase, private keys are encrypted at rest in standard forms: PKCS#8
//! keys as EncryptedPrivateKeyInfo (PBES2, scrypt and AES-256-CBC), OpenPGP secret keys
//! locked with the passphrase's S2K. A key written without a passphrase stays readable
//! without one until `set_passphrase` encrypts it. Keys on a PKCS#11 token are stored
//! as their URI (no PIN): the key never touches the database.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use der::Decode;
use rusqlite::{params, Connection, OptionalExtension};
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::material::{cert_info, fingerprint, key_public, read_all, Material};
use super::{
    EntryKind, KeyAlgorithm, KeyEntry, KeyStore, KeyStoreError, SecretKey, StoredCertificate,
    TokenKey,
};

/// A `private_key` row: algorithm, stored PKCS#8 (maybe encrypted), whether
/// encrypted, token URI.
type KeyRow = (String, Option<Vec<u8>>, bool, Option<String>);

/// Certificates and keys in a SQLite file.
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    passphrase: Option<Zeroizing<Vec<u8>>>,
    tokens: Mutex<HashMap<String, Arc<TokenKey>>>,
    /// Keys decrypted once (the passphrase's scrypt costs tens of milliseconds), wiped
    /// when the store is dropped.
    unlocked: Mutex<HashMap<String, Zeroizing<Vec<u8>>>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("passphrase", &self.passphrase.is_some())
            .finish_non_exhaustive()
    }
}

fn db(e: impl std::fmt::Display) -> KeyStoreError {
    KeyStoreError::Database(e.to_string())
}

fn algorithm_name(a: KeyAlgorithm) -> String {
    a.to_string()
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

impl SqliteStore {
    /// Opens (creating it owner-only) the database at `path`. With `passphrase`, keys
    /// imported from now on are encrypted at rest, and encrypted keys can be used.
    pub fn open(path: &Path, passphrase: Option<&[u8]>) -> Result<Self, KeyStoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::create_dir_all(dir).map_err(|source| KeyStoreError::Io {
                    path: dir.display().to_string(),
                    source,
                })?;
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
                }
            }
        }
        let conn = crate::sqlite::open(path).map_err(db)?;
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            passphrase: passphrase.map(|p| Zeroizing::new(p.to_vec())),
            tokens: Mutex::new(HashMap::new()),
            unlocked: Mutex::new(HashMap::new()),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// PKCS#8 DER as stored: encrypted under the passphrase when there is one.
    fn seal_pkcs8(&self, der: &[u8]) -> Result<(Zeroizing<Vec<u8>>, bool), KeyStoreError> {
        let Some(pass) = &self.passphrase else {
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
        let ciphertext = scheme.encrypt(&pass[..], der).map_err(db)?;
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

    fn insert_certificate(
        &self,
        cert: &Certificate,
        anchor: bool,
    ) -> Result<KeyEntry, KeyStoreError> {
        use der::Encode;
        let info = cert_info(cert);
        let der = cert.to_der().map_err(db)?;
        let conn = self.conn();
        conn.execute(
            "INSERT OR REPLACE INTO x509_certificate (fingerprint, anchor, der) VALUES (?1, ?2, ?3)",
            params![info.fingerprint, anchor, der],
        )
        .map_err(db)?;
        for email in &info.emails {
            conn.execute(
                "INSERT OR IGNORE INTO x509_email (email, fingerprint) VALUES (?1, ?2)",
                params![email, info.fingerprint],
            )
            .map_err(db)?;
        }
        drop(conn);
        let kind = if anchor {
            EntryKind::TrustAnchor
        } else {
            EntryKind::Certificate
        };
        Ok(super::material::cert_entry(
            cert,
            kind,
            self.has_key(&info.fingerprint),
        ))
    }

    fn has_key(&self, fpr: &str) -> bool {
        self.conn()
            .query_row(
                "SELECT 1 FROM private_key WHERE fingerprint = ?1",
                params![fpr],
                |_| Ok(()),
            )
            .optional()
            .ok()
            .flatten()
            .is_some()
    }

    /// Records that the private key of `certificate` (DER) lives on the token `uri`
    /// names (the URI is kept without its PIN).
    pub fn add_token_key(
        &self,
        certificate: &[u8],
        uri: &super::Pkcs11Uri,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let cert = Certificate::from_der(certificate).map_err(|e| KeyStoreError::Malformed {
            what: "token certificate".into(),
            reason: e.to_string(),
        })?;
        let info = cert_info(&cert);
        let algorithm = super::material::cert_entry(&cert, EntryKind::Certificate, true).algorithm;
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO private_key (fingerprint, algorithm, pkcs8, encrypted, token_uri)
                 VALUES (?1, ?2, NULL, 0, ?3)",
                params![info.fingerprint, algorithm_name(algorithm), uri.without_pin()],
            )
            .map_err(db)?;
        Ok(vec![self.insert_certificate(&cert, false)?])
    }

    /// Deletes everything stored under `fingerprint` (certificate, trust anchor,
    /// private key, OpenPGP certificate). Says whether anything was there.
    pub fn delete(&self, fpr: &str) -> Result<bool, KeyStoreError> {
        self.unlocked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(fpr);
        let conn = self.conn();
        let mut n = 0;
        for q in [
            "DELETE FROM x509_certificate WHERE fingerprint = ?1",
            "DELETE FROM x509_email WHERE fingerprint = ?1",
            "DELETE FROM private_key WHERE fingerprint = ?1",
            "DELETE FROM openpgp_certificate WHERE fingerprint = ?1",
        ] {
            n += conn.execute(q, params![fpr]).map_err(db)?;
        }
        Ok(n > 0)
    }

    /// The certificate stored under `fingerprint`: PEM for X.509, armored for OpenPGP.
    pub fn export_certificate(&self, fpr: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
        let conn = self.conn();
        let x509: Option<Vec<u8>> = conn
            .query_row(
                "SELECT der FROM x509_certificate WHERE fingerprint = ?1 ORDER BY anchor LIMIT 1",
                params![fpr],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
        if let Some(der) = x509 {
            return Ok(Some(
                der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, &der)
                    .map_err(db)?
                    .into_bytes(),
            ));
        }
        let pgp: Option<Vec<u8>> = conn
            .query_row(
                "SELECT cert FROM openpgp_certificate WHERE fingerprint = ?1",
                params![fpr],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
        pgp.map(|c| crate::openpgp::keys::armored_certificate(&c))
            .transpose()
    }

    /// Encrypts every private key under `new` (or stores them in the clear when
    /// `None`), after opening them with the store's current passphrase. Returns how
    /// many keys were rewritten. All of them or none: one transaction.
    pub fn set_passphrase(&self, new: Option<&[u8]>) -> Result<usize, KeyStoreError> {
        let rows: Vec<(String, Vec<u8>, bool)> = {
            let conn = self.conn();
            let mut st = conn
                .prepare(
                    "SELECT fingerprint, pkcs8, encrypted FROM private_key WHERE pkcs8 IS NOT NULL",
                )
                .map_err(db)?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(db)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db)?;
            rows
        };
        let pgp: Vec<(String, Vec<u8>, bool)> = {
            let conn = self.conn();
            let mut st = conn
                .prepare("SELECT fingerprint, secret, secret_locked FROM openpgp_certificate WHERE secret IS NOT NULL")
                .map_err(db)?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(db)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db)?;
            rows
        };
        let target = SqliteStore {
            path: self.path.clone(),
            conn: Mutex::new(Connection::open_in_memory().map_err(db)?),
            passphrase: new.map(|p| Zeroizing::new(p.to_vec())),
            tokens: Mutex::new(HashMap::new()),
            unlocked: Mutex::new(HashMap::new()),
        };
        let mut rewritten = Vec::new();
        for (fpr, stored, encrypted) in rows {
            let der = self.open_pkcs8(&stored, encrypted)?;
            let (sealed, enc) = target.seal_pkcs8(&der)?;
            rewritten.push(("pkcs8", fpr, sealed, enc));
        }
        for (fpr, stored, locked) in pgp {
            let tsk = self.open_tsk(&stored, locked)?;
            let (sealed, enc) = target.seal_tsk(&tsk)?;
            rewritten.push(("openpgp", fpr, sealed, enc));
        }
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(db)?;
        for (table, fpr, sealed, enc) in &rewritten {
            let q = if *table == "pkcs8" {
                "UPDATE private_key SET pkcs8 = ?2, encrypted = ?3 WHERE fingerprint = ?1"
            } else {
                "UPDATE openpgp_certificate SET secret = ?2, secret_locked = ?3 WHERE fingerprint = ?1"
            };
            tx.execute(q, params![fpr, &sealed[..], enc]).map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(rewritten.len())
    }

    fn seal_tsk(&self, tsk: &[u8]) -> Result<(Zeroizing<Vec<u8>>, bool), KeyStoreError> {
        match &self.passphrase {
            Some(p) => Ok((crate::openpgp::keys::lock(tsk, p)?, true)),
            None => Ok((Zeroizing::new(tsk.to_vec()), false)),
        }
    }

    fn open_tsk(&self, stored: &[u8], locked: bool) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
        if !locked {
            return Ok(Zeroizing::new(stored.to_vec()));
        }
        let pass = self.passphrase.as_ref().ok_or(KeyStoreError::Locked)?;
        crate::openpgp::keys::unlock_stored(stored, pass)
    }

    fn import_openpgp(
        &self,
        input: &[u8],
        what: &str,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let certs = crate::openpgp::keys::read_certs(input, what, passphrase)?;
        let mut entries = Vec::new();
        for c in certs {
            let old: Option<Vec<u8>> = self
                .conn()
                .query_row(
                    "SELECT cert FROM openpgp_certificate WHERE fingerprint = ?1",
                    params![c.fingerprint],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db)?;
            // A certificate already stored is merged with the new copy.
            let public = match old {
                Some(old) => crate::openpgp::keys::merge(&old, &c.public).unwrap_or(c.public),
                None => c.public,
            };
            let mut entry = c.entry;
            let conn = self.conn();
            conn.execute(
                "INSERT INTO openpgp_certificate (fingerprint, cert) VALUES (?1, ?2)
                 ON CONFLICT (fingerprint) DO UPDATE SET cert = excluded.cert",
                params![c.fingerprint, public],
            )
            .map_err(db)?;
            drop(conn);
            if let Some(secret) = c.secret {
                let (sealed, locked) = self.seal_tsk(&secret)?;
                self.conn()
                    .execute(
                        "UPDATE openpgp_certificate SET secret = ?2, secret_locked = ?3 WHERE fingerprint = ?1",
                        params![c.fingerprint, &sealed[..], locked],
                    )
                    .map_err(db)?;
            } else {
                entry.has_private_key = self
                    .conn()
                    .query_row(
                        "SELECT secret IS NOT NULL FROM openpgp_certificate WHERE fingerprint = ?1",
                        params![c.fingerprint],
                        |r| r.get(0),
                    )
                    .map_err(db)?;
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    fn certificates(
        &self,
        sql: &str,
        arg: Option<&str>,
    ) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(sql).map_err(db)?;
        let get = |r: &rusqlite::Row<'_>| r.get::<_, Vec<u8>>(0);
        let ders: Vec<Vec<u8>> = match arg {
            Some(a) => st
                .query_map(params![a], get)
                .map_err(db)?
                .collect::<Result<_, _>>(),
            None => st.query_map([], get).map_err(db)?.collect::<Result<_, _>>(),
        }
        .map_err(db)?;
        let mut out = Vec::with_capacity(ders.len());
        for der in ders {
            let cert = Certificate::from_der(&der).map_err(|e| KeyStoreError::Malformed {
                what: self.path.display().to_string(),
                reason: e.to_string(),
            })?;
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

impl KeyStore for SqliteStore {
    fn import_with_passphrase(
        &self,
        input: &[u8],
        what: &str,
        trusted: bool,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        if crate::openpgp::keys::looks_like_openpgp(input) {
            return self.import_openpgp(input, what, passphrase);
        }
        let mut entries = Vec::new();
        let mut keys = Vec::new();
        for m in read_all(input, what, passphrase)? {
            match m {
                Material::Certificate(cert) => {
                    entries.push(self.insert_certificate(&cert, trusted)?)
                }
                Material::PrivateKey { der } => {
                    let (alg, public) = key_public(&der, what)?;
                    let fpr = fingerprint(&public);
                    let (sealed, encrypted) = self.seal_pkcs8(&der)?;
                    self.conn()
                        .execute(
                            "INSERT OR REPLACE INTO private_key (fingerprint, algorithm, pkcs8, encrypted, token_uri)
                             VALUES (?1, ?2, ?3, ?4, NULL)",
                            params![fpr, algorithm_name(alg), &sealed[..], encrypted],
                        )
                        .map_err(db)?;
                    keys.push((fpr, alg));
                }
            }
        }
        for (fpr, alg) in keys {
            if let Some(e) = entries.iter_mut().find(|e| e.fingerprint == fpr) {
                e.has_private_key = true;
            } else if let Some(e) = self.list()?.into_iter().find(|e| e.fingerprint == fpr) {
                entries.push(e);
            } else {
                entries.push(super::key_only_entry(fpr, alg));
            }
        }
        Ok(entries)
    }

    fn list(&self) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let mut out = Vec::new();
        let mut with_cert = std::collections::HashSet::new();
        for (anchor, kind) in [
            (false, EntryKind::Certificate),
            (true, EntryKind::TrustAnchor),
        ] {
            let q = if anchor {
                "SELECT der FROM x509_certificate WHERE anchor = 1 ORDER BY fingerprint"
            } else {
                "SELECT der FROM x509_certificate WHERE anchor = 0 ORDER BY fingerprint"
            };
            for c in self.certificates(q, None)? {
                let cert = Certificate::from_der(&c.der).map_err(db)?;
                with_cert.insert(c.fingerprint.clone());
                out.push(super::material::cert_entry(
                    &cert,
                    kind,
                    self.has_key(&c.fingerprint),
                ));
            }
        }
        let pgp: Vec<(Vec<u8>, bool)> = {
            let conn = self.conn();
            let mut st = conn
                .prepare(
                    "SELECT cert, secret IS NOT NULL FROM openpgp_certificate ORDER BY fingerprint",
                )
                .map_err(db)?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(db)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db)?;
            rows
        };
        for (bytes, secret) in pgp {
            if let Some(cert) = crate::openpgp::keys::parse_stored(&bytes) {
                out.push(crate::openpgp::keys::entry(&cert, secret));
            }
        }
        let keys: Vec<(String, String)> = {
            let conn = self.conn();
            let mut st = conn
                .prepare("SELECT fingerprint, algorithm FROM private_key ORDER BY fingerprint")
                .map_err(db)?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(db)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db)?;
            rows
        };
        for (fpr, alg) in keys {
            if !with_cert.contains(&fpr) {
                out.push(super::key_only_entry(fpr, algorithm_of(&alg)));
            }
        }
        Ok(out)
    }

    fn certificates_for(&self, email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.certificates(
            "SELECT c.der FROM x509_email e JOIN x509_certificate c
             ON c.fingerprint = e.fingerprint AND c.anchor = 0 WHERE e.email = ?1",
            Some(&email.to_ascii_lowercase()),
        )
    }

    fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.certificates("SELECT der FROM x509_certificate WHERE anchor = 1", None)
    }

    fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.certificates(
            "SELECT c.der FROM x509_certificate c JOIN private_key k
             ON k.fingerprint = c.fingerprint WHERE c.anchor = 0",
            None,
        )
    }

    fn private_key(&self, fpr: &str) -> Result<Option<SecretKey>, KeyStoreError> {
        let row: Option<KeyRow> = self
            .conn()
            .query_row(
                "SELECT algorithm, pkcs8, encrypted, token_uri FROM private_key WHERE fingerprint = ?1",
                params![fpr],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(db)?;
        let Some((alg, pkcs8, encrypted, token)) = row else {
            return Ok(None);
        };
        if let Some(uri) = token {
            let mut open = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
            let key = match open.get(fpr) {
                Some(k) => k.clone(),
                None => {
                    let k = Arc::new(TokenKey::open(&super::Pkcs11Uri::parse(&uri)?)?);
                    open.insert(fpr.to_string(), k.clone());
                    k
                }
            };
            return Ok(Some(SecretKey::on_token(fpr.to_string(), key)));
        }
        let Some(stored) = pkcs8 else {
            return Ok(None);
        };
        let der = if encrypted {
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
            Zeroizing::new(stored)
        };
        Ok(Some(SecretKey::new(
            fpr.to_string(),
            algorithm_of(&alg),
            der,
        )))
    }

    fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached("SELECT cert FROM openpgp_certificate ORDER BY fingerprint")
            .map_err(db)?;
        let rows = st
            .query_map([], |r| r.get(0))
            .map_err(db)?
            .collect::<Result<Vec<Vec<u8>>, _>>()
            .map_err(db);
        rows
    }

    fn openpgp_secret_key(&self, fpr: &str) -> Result<Option<Zeroizing<Vec<u8>>>, KeyStoreError> {
        let row: Option<(Option<Vec<u8>>, bool)> = self
            .conn()
            .query_row(
                "SELECT secret, secret_locked FROM openpgp_certificate WHERE fingerprint = ?1",
                params![fpr],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db)?;
        match row {
            Some((Some(stored), locked)) => self.open_tsk(&stored, locked).map(Some),
            _ => Ok(None),
        }
    }
}
