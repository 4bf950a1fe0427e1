//! The key directory in PostgreSQL, so several gateway processes on several machines
//! share one view of certificates, trust anchors and keys: the tables of a
//! [`SqlKeyStore`] (`--store postgres://...`).

use std::sync::Mutex;

use postgres::{Client, Row};
use zeroize::Zeroizing;

use super::sql::{db, KeyRow, KeyTables, PgpRow, SqlKeyStore, Which};
use super::KeyStoreError;

/// Certificates and keys in PostgreSQL (see [`SqlKeyStore`]).
pub type PostgresStore = SqlKeyStore<PostgresTables>;

/// The key tables of a PostgreSQL database.
pub struct PostgresTables {
    client: Mutex<Client>,
    /// The connection URL, for the replay state in the same database (it may hold a
    /// password: never shown).
    url: Zeroizing<String>,
}

impl SqlKeyStore<PostgresTables> {
    /// Connects (`postgres://user:password@host/db`), brings the schema up to date,
    /// and uses `passphrase` for private keys as [`SqlKeyStore`] describes.
    pub fn connect(url: &str, passphrase: Option<&[u8]>) -> Result<Self, KeyStoreError> {
        let client = crate::postgres_db::connect(url).map_err(db)?;
        Ok(SqlKeyStore::with_tables(
            PostgresTables {
                client: Mutex::new(client),
                url: Zeroizing::new(url.to_string()),
            },
            passphrase,
        ))
    }
}

impl PostgresTables {
    fn client(&self) -> std::sync::MutexGuard<'_, Client> {
        self.client.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn key_row(r: &Row) -> KeyRow {
    KeyRow {
        fingerprint: r.get(0),
        algorithm: r.get(1),
        stored: r.get::<_, Option<Vec<u8>>>(2).map(Zeroizing::new),
        encrypted: r.get(3),
        token_uri: r.get(4),
    }
}

fn pgp_row(r: &Row) -> PgpRow {
    PgpRow {
        fingerprint: r.get(0),
        cert: r.get(1),
        secret: r.get::<_, Option<Vec<u8>>>(2).map(Zeroizing::new),
        locked: r.get(3),
    }
}

const KEY_COLUMNS: &str = "fingerprint, algorithm, pkcs8, encrypted, token_uri";
const PGP_COLUMNS: &str = "fingerprint, cert, secret, secret_locked";

impl KeyTables for PostgresTables {
    fn state_location(&self) -> Option<crate::keystore::StateLocation> {
        Some(crate::keystore::StateLocation::Postgres(
            self.url.to_string(),
        ))
    }

    fn put_certificate(
        &self,
        fingerprint: &str,
        anchor: bool,
        der: &[u8],
        emails: &[String],
    ) -> Result<(), KeyStoreError> {
        let mut c = self.client();
        let mut tx = c.transaction().map_err(db)?;
        tx.execute(
            "INSERT INTO mailseal_x509_certificate (fingerprint, anchor, der) VALUES ($1, $2, $3)
             ON CONFLICT (fingerprint, anchor) DO UPDATE SET der = EXCLUDED.der",
            &[&fingerprint, &anchor, &der],
        )
        .map_err(db)?;
        for email in emails {
            tx.execute(
                "INSERT INTO mailseal_x509_email (email, fingerprint) VALUES ($1, $2)
                 ON CONFLICT DO NOTHING",
                &[email, &fingerprint],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    fn certificates(&self, which: Which<'_>) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        let mut c = self.client();
        let rows = match which {
            Which::Email(email) => c.query(
                "SELECT c.der FROM mailseal_x509_email e JOIN mailseal_x509_certificate c
                 ON c.fingerprint = e.fingerprint AND NOT c.anchor WHERE e.email = $1",
                &[&email],
            ),
            Which::Certificates | Which::Anchors => c.query(
                "SELECT der FROM mailseal_x509_certificate WHERE anchor = $1 ORDER BY fingerprint",
                &[&matches!(which, Which::Anchors)],
            ),
            Which::Own => c.query(
                "SELECT c.der FROM mailseal_x509_certificate c JOIN mailseal_private_key k
                 ON k.fingerprint = c.fingerprint WHERE NOT c.anchor",
                &[],
            ),
        }
        .map_err(db)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn put_key(&self, row: &KeyRow) -> Result<(), KeyStoreError> {
        self.client()
            .execute(
                &format!(
                    "INSERT INTO mailseal_private_key ({KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (fingerprint) DO UPDATE SET algorithm = EXCLUDED.algorithm,
                     pkcs8 = EXCLUDED.pkcs8, encrypted = EXCLUDED.encrypted,
                     token_uri = EXCLUDED.token_uri"
                ),
                &[
                    &row.fingerprint,
                    &row.algorithm,
                    &row.stored.as_deref().map(|s| &s[..]),
                    &row.encrypted,
                    &row.token_uri,
                ],
            )
            .map(drop)
            .map_err(db)
    }

    fn key(&self, fingerprint: &str) -> Result<Option<KeyRow>, KeyStoreError> {
        let rows = self
            .client()
            .query(
                &format!("SELECT {KEY_COLUMNS} FROM mailseal_private_key WHERE fingerprint = $1"),
                &[&fingerprint],
            )
            .map_err(db)?;
        Ok(rows.first().map(key_row))
    }

    fn keys(&self) -> Result<Vec<KeyRow>, KeyStoreError> {
        let rows = self
            .client()
            .query(
                &format!("SELECT {KEY_COLUMNS} FROM mailseal_private_key ORDER BY fingerprint"),
                &[],
            )
            .map_err(db)?;
        Ok(rows.iter().map(key_row).collect())
    }

    fn openpgp(&self, fingerprint: &str) -> Result<Option<PgpRow>, KeyStoreError> {
        let rows = self
            .client()
            .query(
                &format!(
                    "SELECT {PGP_COLUMNS} FROM mailseal_openpgp_certificate WHERE fingerprint = $1"
                ),
                &[&fingerprint],
            )
            .map_err(db)?;
        Ok(rows.first().map(pgp_row))
    }

    fn openpgp_all(&self) -> Result<Vec<PgpRow>, KeyStoreError> {
        let rows = self
            .client()
            .query(
                &format!(
                    "SELECT {PGP_COLUMNS} FROM mailseal_openpgp_certificate ORDER BY fingerprint"
                ),
                &[],
            )
            .map_err(db)?;
        Ok(rows.iter().map(pgp_row).collect())
    }

    fn put_openpgp(&self, row: &PgpRow) -> Result<(), KeyStoreError> {
        let mut c = self.client();
        let mut tx = c.transaction().map_err(db)?;
        tx.execute(
            "INSERT INTO mailseal_openpgp_certificate (fingerprint, cert) VALUES ($1, $2)
             ON CONFLICT (fingerprint) DO UPDATE SET cert = EXCLUDED.cert",
            &[&row.fingerprint, &row.cert],
        )
        .map_err(db)?;
        if let Some(secret) = &row.secret {
            tx.execute(
                "UPDATE mailseal_openpgp_certificate SET secret = $2, secret_locked = $3
                 WHERE fingerprint = $1",
                &[&row.fingerprint, &&secret[..], &row.locked],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    fn put_crl(&self, fingerprint: &str, der: &[u8]) -> Result<(), KeyStoreError> {
        self.client()
            .execute(
                "INSERT INTO mailseal_x509_crl (fingerprint, der) VALUES ($1, $2)
                 ON CONFLICT (fingerprint) DO NOTHING",
                &[&fingerprint, &der],
            )
            .map_err(db)?;
        Ok(())
    }

    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        Ok(self
            .client()
            .query(
                "SELECT der FROM mailseal_x509_crl ORDER BY fingerprint",
                &[],
            )
            .map_err(db)?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    fn put_jwk(&self, fingerprint: &str, record: &str) -> Result<(), KeyStoreError> {
        self.client()
            .execute(
                "INSERT INTO mailseal_jwk_identity (fingerprint, record) VALUES ($1, $2)
                 ON CONFLICT (fingerprint) DO UPDATE SET record = EXCLUDED.record",
                &[&fingerprint, &record],
            )
            .map_err(db)?;
        Ok(())
    }

    fn jwks(&self) -> Result<Vec<String>, KeyStoreError> {
        Ok(self
            .client()
            .query(
                "SELECT record FROM mailseal_jwk_identity ORDER BY fingerprint",
                &[],
            )
            .map_err(db)?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    fn delete(&self, fingerprint: &str) -> Result<bool, KeyStoreError> {
        let mut c = self.client();
        let mut tx = c.transaction().map_err(db)?;
        let mut n = 0;
        for q in [
            "DELETE FROM mailseal_x509_certificate WHERE fingerprint = $1",
            "DELETE FROM mailseal_x509_email WHERE fingerprint = $1",
            "DELETE FROM mailseal_private_key WHERE fingerprint = $1",
            "DELETE FROM mailseal_openpgp_certificate WHERE fingerprint = $1",
            "DELETE FROM mailseal_x509_crl WHERE fingerprint = $1",
            "DELETE FROM mailseal_jwk_identity WHERE fingerprint = $1",
        ] {
            n += tx.execute(q, &[&fingerprint]).map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(n > 0)
    }

    fn replace_secrets(&self, keys: &[KeyRow], pgp: &[PgpRow]) -> Result<(), KeyStoreError> {
        let mut c = self.client();
        let mut tx = c.transaction().map_err(db)?;
        for k in keys {
            tx.execute(
                "UPDATE mailseal_private_key SET pkcs8 = $2, encrypted = $3 WHERE fingerprint = $1",
                &[
                    &k.fingerprint,
                    &k.stored.as_deref().map(|s| &s[..]),
                    &k.encrypted,
                ],
            )
            .map_err(db)?;
        }
        for p in pgp {
            tx.execute(
                "UPDATE mailseal_openpgp_certificate SET secret = $2, secret_locked = $3
                 WHERE fingerprint = $1",
                &[
                    &p.fingerprint,
                    &p.secret.as_deref().map(|s| &s[..]),
                    &p.locked,
                ],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }
}
