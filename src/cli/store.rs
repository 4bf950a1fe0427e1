//! Which key store a command uses: `--store DIR` (the database `DIR/mailseal.db`, or
//! the file layout of earlier versions when DIR has it), `--store sqlite:PATH`, or
//! `--store postgres://...` (a key directory several gateways share), or `--store
//! pkcs11:token=...?module-path=...` (a token's certificates and keys). Private
//! keys in a database are encrypted at rest when `MAILSEAL_PASSPHRASE_FILE` names the
//! store's passphrase.

use std::path::Path;

use super::exit::ExitCode;
use super::{read_passphrase, Failure};
use crate::keystore::{
    existing_layout, DirectoryStore, KeyEntry, KeyStore, KeyStoreError, Pkcs11Uri, PostgresStore,
    SqliteStore, StoreLayout, TokenStore,
};

/// The store passphrase, from the file `MAILSEAL_PASSPHRASE_FILE` names.
pub(crate) fn passphrase() -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, Failure> {
    std::env::var_os("MAILSEAL_PASSPHRASE_FILE")
        .filter(|v| !v.is_empty())
        .map(|f| read_passphrase(Path::new(&f)))
        .transpose()
}

/// Creates the store directory owner-only, or refuses one others can read.
fn private_dir(dir: &Path) -> Result<(), Failure> {
    let fail = |e: std::io::Error| {
        Failure::new(ExitCode::Other, format!("key store {}: {e}", dir.display()))
    };
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(fail)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir).map_err(fail)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Failure::from(
                "key store",
                KeyStoreError::Permissions {
                    path: dir.display().to_string(),
                    mode,
                },
            ));
        }
    }
    Ok(())
}

/// A store that is not there, said with the command that makes one.
pub(crate) fn no_store(e: KeyStoreError) -> Failure {
    if !matches!(e, KeyStoreError::NotAStore { .. }) {
        return Failure::from("key store", e);
    }
    Failure::new(
        ExitCode::of(&e),
        format!(
            "{e} (check --store or MAILSEAL_HOME; a store is created by `mailseal key generate` or `mailseal key import`)"
        ),
    )
}

/// Refuses, as [`Keys::open`] does, a store directory that holds no store: for a
/// command that uses the store's directory (its state, its signing log) without
/// opening its keys.
pub(crate) fn require_existing(location: &Path) -> Result<(), Failure> {
    let text = location.to_string_lossy();
    if let Some(file) = text.strip_prefix("sqlite:") {
        // A database store is a file that must be there: opening it would create it.
        return match std::fs::metadata(file) {
            Ok(m) if m.is_file() => Ok(()),
            _ => Err(no_store(KeyStoreError::NotAStore {
                path: file.to_string(),
                reason: "no database file there".into(),
            })),
        };
    }
    if text.contains("://") || text.starts_with("pkcs11:") {
        return Ok(());
    }
    existing_layout(location).map(|_| ()).map_err(no_store)
}

/// An open key store of either kind.
pub(crate) enum Keys {
    Directory(DirectoryStore),
    Sqlite(Box<SqliteStore>),
    Postgres(Box<PostgresStore>),
    Token(TokenStore),
}

impl Keys {
    /// Opens the store `location` names, which must exist: a command that does not
    /// write keys never creates a store, so a mistyped `--store` is refused, naming
    /// the path and how a store is made, not taken for a new empty store
    /// ([`crate::keystore::existing_layout`]).
    pub(crate) fn open(location: &Path) -> Result<Keys, Failure> {
        Keys::open_as(location, false)
    }

    /// Opens the store `location` names, creating it (owner-only) when it does not
    /// exist: for the commands that write keys (`key generate`, `key import`, `card
    /// fetch`).
    pub(crate) fn open_or_create(location: &Path) -> Result<Keys, Failure> {
        Keys::open_as(location, true)
    }

    fn open_as(location: &Path, create: bool) -> Result<Keys, Failure> {
        let text = location.to_string_lossy();
        if text.starts_with("pkcs11:") {
            return TokenStore::open(&text)
                .map(Keys::Token)
                .map_err(|e| Failure::from("key store", e));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            let passphrase = passphrase()?;
            return PostgresStore::connect(&text, passphrase.as_deref().map(|p| &p[..]))
                .map(|s| Keys::Postgres(Box::new(s)))
                .map_err(|e| Failure::from("key store", e));
        }
        if let Some(path) = text.strip_prefix("sqlite:") {
            let passphrase = passphrase()?;
            let passphrase = passphrase.as_deref().map(|p| &p[..]);
            let opened = if create {
                SqliteStore::open(Path::new(path), passphrase)
            } else {
                SqliteStore::open_existing(Path::new(path), passphrase)
            };
            return opened.map(|s| Keys::Sqlite(Box::new(s))).map_err(no_store);
        }
        // A directory written by an earlier mailseal keeps its file layout; any other
        // directory holds one SQLite database, the embedded default.
        let layout = match existing_layout(location) {
            Ok(layout) => Some(layout),
            Err(KeyStoreError::NotAStore { .. }) if create && !location.is_file() => None,
            Err(e) => return Err(no_store(e)),
        };
        if layout == Some(StoreLayout::Files) {
            return DirectoryStore::open(location)
                .map(Keys::Directory)
                .map_err(|e| Failure::from("key store", e));
        }
        private_dir(location)?;
        let passphrase = passphrase()?;
        SqliteStore::open(
            &location.join(crate::sqlite::FILE_NAME),
            passphrase.as_deref().map(|p| &p[..]),
        )
        .map(|s| Keys::Sqlite(Box::new(s)))
        .map_err(|e| Failure::from("key store", e))
    }

    /// The store, owned behind the common interface (a gateway worker shares it between
    /// its receiver and sender).
    #[cfg(feature = "gateway")]
    pub(crate) fn into_store(self) -> std::rc::Rc<dyn KeyStore> {
        match self {
            Keys::Directory(d) => std::rc::Rc::new(d),
            Keys::Sqlite(s) => std::rc::Rc::from(s as Box<dyn KeyStore>),
            Keys::Postgres(s) => std::rc::Rc::from(s as Box<dyn KeyStore>),
            Keys::Token(t) => std::rc::Rc::new(t),
        }
    }

    /// The store behind the common interface.
    pub(crate) fn store(&self) -> &dyn KeyStore {
        match self {
            Keys::Directory(d) => d,
            Keys::Sqlite(s) => s.as_ref(),
            Keys::Postgres(s) => s.as_ref(),
            Keys::Token(t) => t,
        }
    }

    pub(crate) fn add_token_key(
        &self,
        certificate: &[u8],
        uri: &Pkcs11Uri,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        match self {
            Keys::Directory(d) => d.add_token_key(certificate, uri),
            Keys::Sqlite(s) => s.add_token_key(certificate, uri),
            Keys::Postgres(s) => s.add_token_key(certificate, uri),
            // On a token store the certificate object beside the key is the record.
            Keys::Token(_) => Ok(vec![crate::keystore::cert_entry_of(
                &crate::keystore::token_certificate(certificate)?,
                true,
            )]),
        }
    }

    pub(crate) fn delete(&self, fingerprint: &str) -> Result<bool, KeyStoreError> {
        match self {
            Keys::Directory(d) => d.delete(fingerprint),
            Keys::Sqlite(s) => s.delete(fingerprint),
            Keys::Postgres(s) => s.delete(fingerprint),
            Keys::Token(_) => Err(KeyStoreError::Token(
                "delete objects on the token with the token's own tools".into(),
            )),
        }
    }

    pub(crate) fn export_certificate(
        &self,
        fingerprint: &str,
    ) -> Result<Option<Vec<u8>>, KeyStoreError> {
        match self {
            Keys::Directory(d) => d.export_certificate(fingerprint),
            Keys::Sqlite(s) => s.export_certificate(fingerprint),
            Keys::Postgres(s) => s.export_certificate(fingerprint),
            Keys::Token(t) => Ok(t.certificates_for_fingerprint(fingerprint)?.map(|der| {
                der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, &der)
                    .unwrap_or_default()
                    .into_bytes()
            })),
        }
    }

    pub(crate) fn set_passphrase(&self, new: Option<&[u8]>) -> Result<usize, Failure> {
        match self {
            Keys::Directory(_) => Err(Failure::new(
                ExitCode::Usage,
                "key passwd: a directory store keeps keys in owner-only files, unencrypted; \
                 use a sqlite: store for keys encrypted at rest",
            )),
            Keys::Sqlite(s) => s
                .set_passphrase(new)
                .map_err(|e| Failure::from("key passwd", e)),
            Keys::Postgres(s) => s
                .set_passphrase(new)
                .map_err(|e| Failure::from("key passwd", e)),
            Keys::Token(_) => Err(Failure::new(
                ExitCode::Usage,
                "key passwd: a token's PIN is changed with the token's own tools",
            )),
        }
    }
}

impl Keys {
    /// The token a `key generate` without `--pkcs11` creates its key on: the store's,
    /// when the store is a token (the key labelled with the address).
    pub(crate) fn token_key_uri(&self, label: &str) -> Option<Pkcs11Uri> {
        match self {
            Keys::Token(t) => Some(t.key_uri(label)),
            _ => None,
        }
    }
}
