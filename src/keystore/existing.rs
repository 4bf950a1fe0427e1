//! Opening a key store that must already exist. `DirectoryStore::open` and
//! `SqliteStore::open` create what is missing, which is right for the one step that
//! writes the first key and wrong for everything after it: a mistyped path would be a
//! new, empty store, and every refusal after it ("no key for ...") would point at the
//! keys rather than at the path. These calls refuse a path that holds no store, naming
//! it, so the rule "only a step that writes keys creates a store" lives here.

use std::path::{Path, PathBuf};

use super::{DirectoryStore, KeyStoreError, SqliteStore};

/// What a store directory holds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreLayout {
    /// One SQLite database, `DIR/mailseal.db` (the default).
    Database(PathBuf),
    /// The file layout of earlier versions (`certs/`, `keys/`, `anchors/`, ...), read
    /// by [`DirectoryStore`].
    Files,
}

/// The subdirectories whose presence marks the file layout of earlier versions.
const LEGACY_DIRS: [&str; 5] = ["certs", "anchors", "keys", "openpgp", "openpgp-keys"];

fn not_a_store(path: &Path, reason: &str) -> KeyStoreError {
    KeyStoreError::NotAStore {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Whether `dir` holds a key store, and of which layout; a missing path, a regular
/// file, or a directory with neither layout in it is refused with
/// [`KeyStoreError::NotAStore`]. Nothing is created.
pub fn existing_layout(dir: &Path) -> Result<StoreLayout, KeyStoreError> {
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(not_a_store(dir, "no such file or directory"))
        }
        Err(source) => {
            return Err(KeyStoreError::Io {
                path: dir.display().to_string(),
                source,
            })
        }
    };
    if !meta.is_dir() {
        return Err(not_a_store(dir, "not a directory"));
    }
    // The file layout first: its directory holds a `mailseal.db` too, for the
    // replay state, which is not its keys.
    if LEGACY_DIRS.iter().any(|sub| dir.join(sub).is_dir()) {
        return Ok(StoreLayout::Files);
    }
    let db = dir.join(crate::sqlite::FILE_NAME);
    if db.is_file() {
        return Ok(StoreLayout::Database(db));
    }
    Err(not_a_store(
        dir,
        &format!("a directory without {}", crate::sqlite::FILE_NAME),
    ))
}

impl DirectoryStore {
    /// Opens the store directory `root` of the file layout, refusing (with
    /// [`KeyStoreError::NotAStore`]) a path that does not hold one: unlike
    /// [`DirectoryStore::open`], it creates nothing.
    pub fn open_existing(root: impl Into<PathBuf>) -> Result<Self, KeyStoreError> {
        let root = root.into();
        match existing_layout(&root)? {
            StoreLayout::Files => DirectoryStore::open(root),
            StoreLayout::Database(_) => Err(not_a_store(
                &root,
                "it holds a database store (open it with SqliteStore)",
            )),
        }
    }
}

impl SqliteStore {
    /// Opens the database file `path`, refusing (with [`KeyStoreError::NotAStore`]) a
    /// path where there is none: unlike [`SqliteStore::open`], it creates nothing.
    pub fn open_existing(path: &Path, passphrase: Option<&[u8]>) -> Result<Self, KeyStoreError> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => SqliteStore::open(path, passphrase),
            Ok(_) => Err(not_a_store(path, "not a database file")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(not_a_store(path, "no such file"))
            }
            Err(source) => Err(KeyStoreError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_paths_that_hold_no_store_are_refused_and_nothing_is_created() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("typo");
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        for p in [&missing, &file, &empty] {
            let e = existing_layout(p).unwrap_err();
            assert!(matches!(e, KeyStoreError::NotAStore { .. }), "{p:?}: {e}");
            assert!(e.to_string().contains(&p.display().to_string()), "{e}");
            assert_eq!(
                crate::error::Classify::kind(&e),
                crate::error::ErrorKind::InvalidArgument
            );
            assert!(DirectoryStore::open_existing(p.as_path()).is_err());
        }
        assert!(SqliteStore::open_existing(&missing.join("mailseal.db"), None).is_err());
        assert!(!missing.exists());
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    }

    #[test]
    fn existing_stores_of_either_layout_open() {
        let tmp = tempfile::tempdir().unwrap();
        let files = tmp.path().join("files");
        DirectoryStore::open(&files).unwrap();
        assert_eq!(existing_layout(&files).unwrap(), StoreLayout::Files);
        DirectoryStore::open_existing(&files).unwrap();
        let db = tmp.path().join("db");
        std::fs::create_dir(&db).unwrap();
        SqliteStore::open(&db.join("mailseal.db"), None).unwrap();
        assert!(matches!(
            existing_layout(&db).unwrap(),
            StoreLayout::Database(_)
        ));
        SqliteStore::open_existing(&db.join("mailseal.db"), None).unwrap();
    }
}
