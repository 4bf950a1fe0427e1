//! Keys in the store's SQLite database (`crate::sqlite`), beside the replay state: the
//! tables of a [`SqlKeyStore`].

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};
use zeroize::Zeroizing;

use super::sql::{db, KeyRow, KeyTables, PgpRow, SqlKeyStore, Which};
use super::KeyStoreError;

/// Certificates and keys in a SQLite file (see [`SqlKeyStore`]).
pub type SqliteStore = SqlKeyStore<SqliteTables>;

/// The key tables of a SQLite database.
pub struct SqliteTables {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl SqlKeyStore<SqliteTables> {
    /// Opens (creating it owner-only, in an owner-only directory) the database at
    /// `path`. With `passphrase`, keys imported from now on are encrypted at rest, and
    /// encrypted keys can be used.
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
        let tables = SqliteTables {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        };
        Ok(SqlKeyStore::with_tables(tables, passphrase))
    }

    /// A store in a database in memory (no file; its path is empty), gone when
    /// dropped: the certificates and keys of a [`super::MemoryStore`].
    pub(crate) fn in_memory() -> Result<Self, KeyStoreError> {
        let conn = crate::sqlite::open_in_memory().map_err(db)?;
        let tables = SqliteTables {
            path: PathBuf::new(),
            conn: Mutex::new(conn),
        };
        Ok(SqlKeyStore::with_tables(tables, None))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.tables.path
    }
}

impl SqliteTables {
    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KeyRow> {
    Ok(KeyRow {
        fingerprint: r.get(0)?,
        algorithm: r.get(1)?,
        stored: r.get::<_, Option<Vec<u8>>>(2)?.map(Zeroizing::new),
        encrypted: r.get(3)?,
        token_uri: r.get(4)?,
    })
}

fn pgp_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PgpRow> {
    Ok(PgpRow {
        fingerprint: r.get(0)?,
        cert: r.get(1)?,
        secret: r.get::<_, Option<Vec<u8>>>(2)?.map(Zeroizing::new),
        locked: r.get(3)?,
    })
}

const KEY_COLUMNS: &str = "fingerprint, algorithm, pkcs8, encrypted, token_uri";
const PGP_COLUMNS: &str = "fingerprint, cert, secret, secret_locked";

impl KeyTables for SqliteTables {
    fn state_location(&self) -> Option<crate::keystore::StateLocation> {
        // A database in memory keeps nothing durable.
        (!self.path.as_os_str().is_empty())
            .then(|| crate::keystore::StateLocation::Sqlite(self.path.clone()))
    }

    fn put_certificate(
        &self,
        fingerprint: &str,
        anchor: bool,
        der: &[u8],
        emails: &[String],
    ) -> Result<(), KeyStoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(db)?;
        tx.execute(
            "INSERT OR REPLACE INTO x509_certificate (fingerprint, anchor, der) VALUES (?1, ?2, ?3)",
            params![fingerprint, anchor, der],
        )
        .map_err(db)?;
        for email in emails {
            tx.execute(
                "INSERT OR IGNORE INTO x509_email (email, fingerprint) VALUES (?1, ?2)",
                params![email, fingerprint],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    fn certificates(&self, which: Which<'_>) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        let conn = self.conn();
        let get = |r: &rusqlite::Row<'_>| r.get::<_, Vec<u8>>(0);
        let rows = match which {
            Which::Email(email) => conn
                .prepare_cached(
                    "SELECT c.der FROM x509_email e JOIN x509_certificate c
                     ON c.fingerprint = e.fingerprint AND c.anchor = 0 WHERE e.email = ?1",
                )
                .map_err(db)?
                .query_map(params![email], get)
                .map_err(db)?
                .collect::<Result<_, _>>(),
            Which::Certificates | Which::Anchors => conn
                .prepare_cached(
                    "SELECT der FROM x509_certificate WHERE anchor = ?1 ORDER BY fingerprint",
                )
                .map_err(db)?
                .query_map(params![matches!(which, Which::Anchors)], get)
                .map_err(db)?
                .collect::<Result<_, _>>(),
            Which::Own => conn
                .prepare_cached(
                    "SELECT c.der FROM x509_certificate c JOIN private_key k
                     ON k.fingerprint = c.fingerprint WHERE c.anchor = 0",
                )
                .map_err(db)?
                .query_map([], get)
                .map_err(db)?
                .collect::<Result<_, _>>(),
        };
        rows.map_err(db)
    }

    fn put_key(&self, row: &KeyRow) -> Result<(), KeyStoreError> {
        self.conn()
            .execute(
                &format!("INSERT OR REPLACE INTO private_key ({KEY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"),
                params![
                    row.fingerprint,
                    row.algorithm,
                    row.stored.as_deref().map(|s| &s[..]),
                    row.encrypted,
                    row.token_uri
                ],
            )
            .map(drop)
            .map_err(db)
    }

    fn key(&self, fingerprint: &str) -> Result<Option<KeyRow>, KeyStoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM private_key WHERE fingerprint = ?1"
            ))
            .map_err(db)?
            .query_row(params![fingerprint], key_row)
            .optional()
            .map_err(db)
    }

    fn keys(&self) -> Result<Vec<KeyRow>, KeyStoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM private_key ORDER BY fingerprint"
            ))
            .map_err(db)?
            .query_map([], key_row)
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)
    }

    fn openpgp(&self, fingerprint: &str) -> Result<Option<PgpRow>, KeyStoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {PGP_COLUMNS} FROM openpgp_certificate WHERE fingerprint = ?1"
            ))
            .map_err(db)?
            .query_row(params![fingerprint], pgp_row)
            .optional()
            .map_err(db)
    }

    fn openpgp_all(&self) -> Result<Vec<PgpRow>, KeyStoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {PGP_COLUMNS} FROM openpgp_certificate ORDER BY fingerprint"
            ))
            .map_err(db)?
            .query_map([], pgp_row)
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)
    }

    fn put_openpgp(&self, row: &PgpRow) -> Result<(), KeyStoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO openpgp_certificate (fingerprint, cert) VALUES (?1, ?2)
             ON CONFLICT (fingerprint) DO UPDATE SET cert = excluded.cert",
            params![row.fingerprint, row.cert],
        )
        .map_err(db)?;
        if let Some(secret) = &row.secret {
            conn.execute(
                "UPDATE openpgp_certificate SET secret = ?2, secret_locked = ?3
                 WHERE fingerprint = ?1",
                params![row.fingerprint, &secret[..], row.locked],
            )
            .map_err(db)?;
        }
        Ok(())
    }

    fn put_crl(&self, fingerprint: &str, der: &[u8]) -> Result<(), KeyStoreError> {
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO x509_crl (fingerprint, der) VALUES (?1, ?2)",
                params![fingerprint, der],
            )
            .map_err(db)?;
        Ok(())
    }

    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached("SELECT der FROM x509_crl ORDER BY fingerprint")
            .map_err(db)?;
        let rows = st.query_map([], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn put_jwk(&self, fingerprint: &str, record: &str) -> Result<(), KeyStoreError> {
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO jwk_identity (fingerprint, record) VALUES (?1, ?2)",
                params![fingerprint, record],
            )
            .map_err(db)?;
        Ok(())
    }

    fn jwks(&self) -> Result<Vec<String>, KeyStoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached("SELECT record FROM jwk_identity ORDER BY fingerprint")
            .map_err(db)?;
        let rows = st.query_map([], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn delete(&self, fingerprint: &str) -> Result<bool, KeyStoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(db)?;
        let mut n = 0;
        for q in [
            "DELETE FROM x509_certificate WHERE fingerprint = ?1",
            "DELETE FROM x509_email WHERE fingerprint = ?1",
            "DELETE FROM private_key WHERE fingerprint = ?1",
            "DELETE FROM openpgp_certificate WHERE fingerprint = ?1",
            "DELETE FROM x509_crl WHERE fingerprint = ?1",
            "DELETE FROM jwk_identity WHERE fingerprint = ?1",
        ] {
            n += tx.execute(q, params![fingerprint]).map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(n > 0)
    }

    fn replace_secrets(&self, keys: &[KeyRow], pgp: &[PgpRow]) -> Result<(), KeyStoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(db)?;
        for k in keys {
            tx.execute(
                "UPDATE private_key SET pkcs8 = ?2, encrypted = ?3 WHERE fingerprint = ?1",
                params![
                    k.fingerprint,
                    k.stored.as_deref().map(|s| &s[..]),
                    k.encrypted
                ],
            )
            .map_err(db)?;
        }
        for p in pgp {
            tx.execute(
                "UPDATE openpgp_certificate SET secret = ?2, secret_locked = ?3 WHERE fingerprint = ?1",
                params![p.fingerprint, p.secret.as_deref().map(|s| &s[..]), p.locked],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }
}
