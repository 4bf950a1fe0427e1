//! The directory key store: PEM files in a directory only its owner can read.
//!
//! ```text
//! STORE/certs/FPR.pem     certificates (0644)
//! STORE/anchors/FPR.pem   trust anchors (0644)
//! STORE/keys/FPR.pem      PKCS#8 private keys (0600)
//! STORE/openpgp/OFPR.pgp  OpenPGP certificates, binary, public parts (0644)
//! STORE/openpgp-keys/OFPR.pgp  OpenPGP transferable secret keys, unlocked (0600)
//! STORE/jwk/FPR.json      JSON Web Keys and the addresses bound to them (0644)
//! ```
//! `FPR` is the public-key [`fingerprint`](super::fingerprint), so a key and its
//! certificate share a name whichever is imported first; `OFPR` is the OpenPGP
//! fingerprint of the certificate.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use der::{DecodePem, EncodePem};
use x509_cert::Certificate;
use zeroize::Zeroizing;

use super::material::{cert_info, fingerprint, key_public, read_all, Material};
use super::{EntryKind, KeyEntry, KeyStore, KeyStoreError, SecretKey, StoredCertificate};

/// A key store in one directory.
#[derive(Clone)]
pub struct DirectoryStore {
    root: PathBuf,
    /// Parsed certificates per subdirectory, valid while every file's name, mtime and
    /// size are the ones recorded (a stat per file instead of a PEM parse).
    cache: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, CachedDir>>>,
    /// OpenPGP files' bytes, valid while the file's mtime and size are the recorded
    /// ones (a stat instead of an open and a read). Secret keys among them are wiped
    /// when evicted or dropped.
    files_cache: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<PathBuf, CachedFile>>>,
    /// Directory listings by (subdirectory, extension), valid while the directory's
    /// mtime is the recorded one (every file is written to a temporary name and
    /// renamed, which changes it), confirmed at most every [`LISTING_RECHECK`].
    listings: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<(&'static str, &'static str), CachedListing>>,
    >,
    /// Open PKCS#11 keys by fingerprint: one logged-in session each for the store's
    /// life, instead of a module load and a login per message.
    tokens: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<super::TokenKey>>>,
    >,
    /// Private keys decoded and checked (their public half derived, see
    /// `material::key_public`), by file, with the cached bytes they came from: while
    /// [`DirectoryStore::read_cached`] hands out those same bytes, the check is not
    /// done again (for RSA-2048 it is a key validation, tens of microseconds on every
    /// seal).
    checked_keys: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<PathBuf, CheckedKey>>>,
}

/// Its directory only: the caches hold private key bytes.
impl std::fmt::Debug for DirectoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectoryStore")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// The file bytes a key was checked from, its algorithm and its PKCS#8 DER.
type CheckedKey = (
    std::sync::Arc<Zeroizing<Vec<u8>>>,
    super::KeyAlgorithm,
    Zeroizing<Vec<u8>>,
);

/// The files of a subdirectory, by name.
type Listing = std::sync::Arc<Vec<(String, PathBuf)>>;

/// A directory listing: the directory's mtime when it was listed, when it was listed,
/// when that mtime was last confirmed, and the files.
struct CachedListing {
    mtime: std::time::SystemTime,
    listed_at: std::time::SystemTime,
    confirmed: std::time::Instant,
    files: Listing,
}

/// Whether something read at `read_at` from a file or directory last changed at
/// `mtime` may be reused while the mtime stays the same. Timestamps are coarse (a
/// kernel tick, or a second on some file systems), so a change in the same tick as the
/// read would leave the mtime as it was: only what was read well after its last change
/// is trusted ("racy" entries, as git calls them, are read again).
fn settled(mtime: std::time::SystemTime, read_at: std::time::SystemTime) -> bool {
    read_at
        .duration_since(mtime)
        .is_ok_and(|d| d > std::time::Duration::from_secs(2))
}

/// How long a cached file whose directory did not change is used without looking at
/// the file itself. Files are replaced by renaming, which changes the directory, so
/// this only bounds how late a change made in place (by hand, not by mailseal) is seen.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a directory listing is used without looking at the directory's mtime.
/// This bounds how late a certificate or key another process added or removed is
/// seen (what this process writes is seen at once): 50 ms is sooner than an operator
/// or a script can act on one message and then send the next, and at a gateway's
/// rate (thousands of messages a second) it saves all but one `stat` in hundreds.
/// Checking on every lookup cost about a dozen `stat`s per message.
const LISTING_RECHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// A file's (mtime, size) stamp, when it was read, when the stamp was last compared
/// with the file, and its bytes.
type CachedFile = (
    (Option<std::time::SystemTime>, u64),
    std::time::SystemTime,
    std::time::Instant,
    std::sync::Arc<Zeroizing<Vec<u8>>>,
);

type Stamp = Vec<(PathBuf, Option<std::time::SystemTime>, u64)>;

/// A subdirectory's parsed certificates and what they were read from.
#[derive(Debug)]
struct CachedDir {
    /// Each file's (path, mtime, size) when read.
    stamp: Stamp,
    /// Every file was read well after its last change (see `settled`).
    settled: bool,
    /// When the stamp was last compared with the files.
    checked: std::time::Instant,
    certs: std::sync::Arc<Vec<StoredCertificate>>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KeyStoreError + '_ {
    move |source| KeyStoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), KeyStoreError> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io(path))
}
#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> Result<(), KeyStoreError> {
    Ok(())
}

/// Writes `data` to `path` atomically (temp file + rename) with `mode` from creation.
fn write_file(path: &Path, data: &[u8], mode: u32) -> Result<(), KeyStoreError> {
    let tmp = path.with_extension("tmp");
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(mode);
    }
    let mut f = opts.open(&tmp).map_err(io(&tmp))?;
    set_mode(&tmp, mode)?;
    f.write_all(data).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    fs::rename(&tmp, path).map_err(io(path))
}

/// The PKCS#8 DER of a stored key file; every copy is wiped when dropped.
fn read_key(path: &Path) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    let pem = Zeroizing::new(fs::read(path).map_err(io(path))?);
    key_der(&pem, path)
}

/// The PKCS#8 DER in the PEM text of key file `path`.
fn key_der(pem: &[u8], path: &Path) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    let malformed = |reason: String| KeyStoreError::Malformed {
        what: path.display().to_string(),
        reason,
    };
    let text = std::str::from_utf8(pem).map_err(|e| malformed(e.to_string()))?;
    let (_, doc) = der::SecretDocument::from_pem(text).map_err(|e| malformed(e.to_string()))?;
    Ok(Zeroizing::new(doc.as_bytes().to_vec()))
}

impl DirectoryStore {
    /// Opens (creating it, mode 0700) the store at `root`. An existing store readable
    /// by group or others is refused: its private keys would not be private.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, KeyStoreError> {
        let root = root.into();
        for sub in [
            "",
            "certs",
            "anchors",
            "keys",
            "openpgp",
            "openpgp-keys",
            "crls",
            "jwk",
        ] {
            let dir = root.join(sub);
            if !dir.exists() {
                fs::create_dir_all(&dir).map_err(io(&dir))?;
                set_mode(&dir, 0o700)?;
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for sub in ["", "keys", "openpgp-keys"] {
                let dir = root.join(sub);
                let mode = fs::metadata(&dir).map_err(io(&dir))?.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(KeyStoreError::Permissions {
                        path: dir.display().to_string(),
                        mode,
                    });
                }
            }
        }
        Ok(DirectoryStore {
            root,
            cache: Default::default(),
            files_cache: Default::default(),
            listings: Default::default(),
            tokens: Default::default(),
            checked_keys: Default::default(),
        })
    }

    /// Records that the private key of `certificate` (DER) lives on the token `uri`
    /// names: the certificate is imported, and `keys/FINGERPRINT.pkcs11` keeps the URI
    /// without its PIN. The key itself never touches the disk.
    pub fn add_token_key(
        &self,
        certificate: &[u8],
        uri: &super::Pkcs11Uri,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let fpr = cert_info(&super::token_certificate(certificate)?).fingerprint;
        let path = self.root.join("keys").join(format!("{fpr}.pkcs11"));
        self.write(&path, uri.without_pin().as_bytes(), 0o600)?;
        self.import(certificate, "token certificate", false)
    }

    /// Deletes every file stored under `fpr` (certificate, trust anchor, private key or
    /// token reference, OpenPGP certificate and secret key). Says whether any was there.
    pub fn delete(&self, fpr: &str) -> Result<bool, KeyStoreError> {
        if fpr.is_empty() || !fpr.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(false);
        }
        let mut any = false;
        for (sub, ext) in [
            ("certs", "pem"),
            ("anchors", "pem"),
            ("keys", "pem"),
            ("keys", "pkcs11"),
            ("openpgp", "pgp"),
            ("openpgp-keys", "pgp"),
            ("crls", "crl"),
            ("jwk", "json"),
        ] {
            let path = self.root.join(sub).join(format!("{fpr}.{ext}"));
            let removed = fs::remove_file(&path);
            self.forget_listings();
            match removed {
                Ok(()) => any = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&path)(e)),
            }
        }
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(fpr);
        Ok(any)
    }

    /// The certificate stored under `fpr`: PEM for X.509, armored for OpenPGP.
    pub fn export_certificate(&self, fpr: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
        if fpr.is_empty() || !fpr.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        for sub in ["certs", "anchors"] {
            let path = self.root.join(sub).join(format!("{fpr}.pem"));
            if let Ok(pem) = fs::read(&path) {
                return Ok(Some(pem));
            }
        }
        let path = self.root.join("openpgp").join(format!("{fpr}.pgp"));
        match fs::read(&path) {
            Ok(bytes) => crate::keystore::openpgp::armored_certificate(&bytes).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// The token key reference file for `fpr`, when the `keys` listing has one.
    fn token_ref(&self, fpr: &str) -> Result<Option<PathBuf>, KeyStoreError> {
        let (files, _) = self.listing("keys", "pkcs11")?;
        Ok(files
            .binary_search_by(|(stem, _)| stem.as_str().cmp(fpr))
            .ok()
            .map(|i| files[i].1.clone()))
    }

    /// The open token key for `fpr`, opening it the first time.
    fn token_key(&self, fpr: &str, path: &Path) -> Result<SecretKey, KeyStoreError> {
        let mut open = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = open.get(fpr) {
            return Ok(SecretKey::on_token(fpr.to_string(), k.clone()));
        }
        let text = fs::read_to_string(path).map_err(io(path))?;
        let uri = super::Pkcs11Uri::parse_stored(text.trim())?;
        let key = std::sync::Arc::new(super::TokenKey::open(&uri)?);
        open.insert(fpr.to_string(), key.clone());
        Ok(SecretKey::on_token(fpr.to_string(), key))
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn pems(&self, sub: &'static str) -> Result<Listing, KeyStoreError> {
        self.files(sub, "pem")
    }

    /// The files `*.EXT` in a subdirectory, by name.
    fn files(&self, sub: &'static str, ext: &'static str) -> Result<Listing, KeyStoreError> {
        Ok(self.listing(sub, ext)?.0)
    }

    /// The files `*.EXT` in a subdirectory, and whether the listing is the one read
    /// before: it is reused while the directory's mtime is unchanged (and settled).
    /// The files of `sub` with extension `ext`, and whether the cached listing was
    /// reused. A listing confirmed against its directory's mtime less than
    /// [`LISTING_RECHECK`] ago is reused without looking at the directory: one open or
    /// seal asks for the same four listings about a dozen times, and each look is a
    /// `stat` (2 µs here, a tenth of a P-256 open). Writes through this store (any
    /// clone) drop the listings at once.
    fn listing(
        &self,
        sub: &'static str,
        ext: &'static str,
    ) -> Result<(Listing, bool), KeyStoreError> {
        let key = (sub, ext);
        {
            let listings = self.listings.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(l) = listings.get(&key) {
                if l.confirmed.elapsed() < LISTING_RECHECK && settled(l.mtime, l.listed_at) {
                    return Ok((l.files.clone(), true));
                }
            }
        }
        let dir = self.root.join(sub);
        let mtime = fs::metadata(&dir).and_then(|m| m.modified()).ok();
        if let Some(mtime) = mtime {
            let mut listings = self.listings.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(l) = listings.get_mut(&key) {
                if l.mtime == mtime && settled(mtime, l.listed_at) {
                    l.confirmed = std::time::Instant::now();
                    return Ok((l.files.clone(), true));
                }
            }
        }
        let listed_at = std::time::SystemTime::now();
        let confirmed = std::time::Instant::now();
        let files = std::sync::Arc::new(self.list_files(&dir, ext)?);
        if let Some(mtime) = mtime {
            self.listings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(
                    key,
                    CachedListing {
                        mtime,
                        listed_at,
                        confirmed,
                        files: files.clone(),
                    },
                );
        }
        Ok((files, false))
    }

    /// Writes a file of the store and drops the cached listings, so that this
    /// process sees the change at once.
    fn write(&self, path: &Path, data: &[u8], mode: u32) -> Result<(), KeyStoreError> {
        let written = write_file(path, data, mode);
        self.forget_listings();
        written
    }

    fn forget_listings(&self) {
        self.listings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn list_files(&self, dir: &Path, ext: &str) -> Result<Vec<(String, PathBuf)>, KeyStoreError> {
        let dir = dir.to_path_buf();
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io(&dir))? {
            let path = entry.map_err(io(&dir))?.path();
            if path.extension().is_some_and(|e| e == ext) {
                if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                    out.push((stem.to_string(), path));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn read_cert(path: &Path) -> Result<(Certificate, Vec<u8>), KeyStoreError> {
        let pem = fs::read(path).map_err(io(path))?;
        let cert = Certificate::from_pem(&pem).map_err(|e| KeyStoreError::Malformed {
            what: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let der = der::Encode::to_der(&cert).map_err(|e| KeyStoreError::Malformed {
            what: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok((cert, der))
    }

    /// The certificates of a subdirectory, parsed once and reused while every file's
    /// (mtime, size) is the recorded one and was read well after its last change (the
    /// `settled` rule); with the directory unchanged, the files themselves are looked
    /// at again only every [`RECHECK`].
    fn certs_in(
        &self,
        sub: &'static str,
    ) -> Result<std::sync::Arc<Vec<StoredCertificate>>, KeyStoreError> {
        let (files, unchanged) = self.listing(sub, "pem")?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if unchanged {
            if let Some(entry) = cache.get(sub) {
                if entry.checked.elapsed() < RECHECK && entry.settled {
                    return Ok(entry.certs.clone());
                }
            }
        }
        let stamp: Stamp = files
            .iter()
            .map(|(_, p)| {
                let meta = fs::metadata(p).ok();
                let modified = meta.as_ref().and_then(|m| m.modified().ok());
                (p.clone(), modified, meta.map_or(0, |m| m.len()))
            })
            .collect();
        let checked = std::time::Instant::now();
        if let Some(entry) = cache.get_mut(sub) {
            if entry.stamp == stamp && entry.settled {
                entry.checked = checked;
                return Ok(entry.certs.clone());
            }
        }
        let read_at = std::time::SystemTime::now();
        let mut out = Vec::new();
        for (_, path) in files.iter() {
            let (cert, der) = Self::read_cert(path)?;
            let info = cert_info(&cert);
            out.push(StoredCertificate {
                fingerprint: info.fingerprint,
                der,
                emails: info.emails,
            });
        }
        let certs = std::sync::Arc::new(out);
        let settled = stamp
            .iter()
            .all(|(_, m, _)| m.is_some_and(|m| settled(m, read_at)));
        cache.insert(
            sub.to_string(),
            CachedDir {
                stamp,
                settled,
                checked,
                certs: certs.clone(),
            },
        );
        Ok(certs)
    }

    /// Stores every certificate (and secret key) of an OpenPGP input.
    fn import_openpgp(
        &self,
        input: &[u8],
        what: &str,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let certs = crate::keystore::openpgp::read_certs(input, what, passphrase)?;
        let mut entries = Vec::new();
        for c in certs {
            let name = format!("{}.pgp", c.fingerprint);
            // A certificate already stored is merged with the new copy (new User IDs,
            // subkeys, revocations), never replaced by an older one.
            let path = self.root.join("openpgp").join(&name);
            let public = match fs::read(&path) {
                Ok(old) => crate::keystore::openpgp::merge(&old, &c.public).unwrap_or(c.public),
                Err(_) => c.public,
            };
            self.write(&path, &public, 0o644)?;
            let mut entry = c.entry;
            if let Some(secret) = c.secret {
                self.write(&self.root.join("openpgp-keys").join(&name), &secret, 0o600)?;
            } else {
                entry.has_private_key = self.root.join("openpgp-keys").join(&name).exists();
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    /// The bytes of `path`, from the cache while its mtime and size are unchanged;
    /// `None` when it does not exist. With `directory_unchanged` (its directory's
    /// listing was reused), an entry compared with the file less than [`RECHECK`] ago
    /// is used without looking at the file again.
    fn read_cached(
        &self,
        path: &Path,
        directory_unchanged: bool,
    ) -> Result<Option<std::sync::Arc<Zeroizing<Vec<u8>>>>, KeyStoreError> {
        if directory_unchanged {
            let cache = self.files_cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((stamp, read_at, checked, bytes)) = cache.get(path) {
                if checked.elapsed() < RECHECK && stamp.0.is_some_and(|m| settled(m, *read_at)) {
                    return Ok(Some(bytes.clone()));
                }
            }
        }
        let meta = match fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(path)(e)),
        };
        let stamp = (meta.modified().ok(), meta.len());
        let checked = std::time::Instant::now();
        let mut cache = self.files_cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((s, read_at, when, bytes)) = cache.get_mut(path) {
            if *s == stamp && stamp.0.is_some_and(|m| settled(m, *read_at)) {
                *when = checked;
                return Ok(Some(bytes.clone()));
            }
        }
        let read_at = std::time::SystemTime::now();
        let bytes = match fs::read(path) {
            Ok(b) => std::sync::Arc::new(Zeroizing::new(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(path)(e)),
        };
        if cache.len() >= 4096 {
            cache.clear();
        }
        cache.insert(path.to_path_buf(), (stamp, read_at, checked, bytes.clone()));
        Ok(Some(bytes))
    }

    /// The path of the private key file for `fpr`, when the `keys` listing has one.
    fn key_file(&self, fpr: &str) -> Result<Option<(PathBuf, bool)>, KeyStoreError> {
        let (files, unchanged) = self.listing("keys", "pem")?;
        Ok(files
            .binary_search_by(|(stem, _)| stem.as_str().cmp(fpr))
            .ok()
            .map(|i| (files[i].1.clone(), unchanged)))
    }

    fn has_key(&self, fpr: &str) -> bool {
        self.key_file(fpr).ok().flatten().is_some() || self.token_ref(fpr).ok().flatten().is_some()
    }

    fn cert_entry(&self, cert: &Certificate, kind: EntryKind) -> KeyEntry {
        let fingerprint = super::material::cert_info(cert).fingerprint;
        super::material::cert_entry(cert, kind, self.has_key(&fingerprint))
    }
}

impl KeyStore for DirectoryStore {
    fn token_key_uri(&self, fpr: &str) -> Result<Option<String>, KeyStoreError> {
        let Some(path) = self.token_ref(fpr)? else {
            return Ok(None);
        };
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        Ok(Some(text.trim().to_string()))
    }

    /// The directory's `mailseal.db`, where the command line keeps the state of a
    /// directory store.
    fn state_location(&self) -> Option<crate::keystore::StateLocation> {
        Some(crate::keystore::StateLocation::Sqlite(
            self.root.join(crate::sqlite::FILE_NAME),
        ))
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
        let materials = read_all(input, what, passphrase)?;
        let mut imported_keys = Vec::new();
        let mut entries = Vec::new();
        for m in materials {
            match m {
                Material::Certificate(cert) => {
                    let info = cert_info(&cert);
                    let sub = if trusted { "anchors" } else { "certs" };
                    let pem = cert.to_pem(der::pem::LineEnding::LF).map_err(|e| {
                        KeyStoreError::Malformed {
                            what: what.to_string(),
                            reason: e.to_string(),
                        }
                    })?;
                    let path = self
                        .root
                        .join(sub)
                        .join(format!("{}.pem", info.fingerprint));
                    self.write(&path, pem.as_bytes(), 0o644)?;
                    let kind = if trusted {
                        EntryKind::TrustAnchor
                    } else {
                        EntryKind::Certificate
                    };
                    entries.push(self.cert_entry(&cert, kind));
                }
                Material::Crl(der) => {
                    let entry = super::material::crl_entry(&der);
                    let path = self
                        .root
                        .join("crls")
                        .join(format!("{}.crl", entry.fingerprint));
                    self.write(&path, &der, 0o644)?;
                    entries.push(entry);
                }
                Material::PrivateKey { der } => {
                    let (alg, public) = key_public(&der, what)?;
                    let fpr = fingerprint(&public);
                    let pem = Zeroizing::new(
                        der::pem::encode_string("PRIVATE KEY", der::pem::LineEnding::LF, &der)
                            .map_err(|e| KeyStoreError::Malformed {
                                what: what.to_string(),
                                reason: e.to_string(),
                            })?,
                    );
                    let path = self.root.join("keys").join(format!("{fpr}.pem"));
                    self.write(&path, pem.as_bytes(), 0o600)?;
                    imported_keys.push((fpr, alg));
                }
            }
        }
        super::list_keys_with_certificates(self, entries, imported_keys)
    }

    fn list(&self) -> Result<Vec<KeyEntry>, KeyStoreError> {
        let mut out = Vec::new();
        let mut with_cert = std::collections::HashSet::new();
        for (sub, kind) in [
            ("certs", EntryKind::Certificate),
            ("anchors", EntryKind::TrustAnchor),
        ] {
            for (_, path) in self.pems(sub)?.iter() {
                let (cert, _) = Self::read_cert(path)?;
                let e = self.cert_entry(&cert, kind);
                with_cert.insert(e.fingerprint.clone());
                out.push(e);
            }
        }
        for (fpr, path) in self.files("openpgp", "pgp")?.iter() {
            let bytes = fs::read(path).map_err(io(path))?;
            if let Some(cert) = crate::keystore::openpgp::parse_stored(&bytes) {
                let secret = self.root.join("openpgp-keys").join(format!("{fpr}.pgp"));
                out.push(crate::keystore::openpgp::entry(&cert, secret.exists()));
            }
        }
        for (fpr, path) in self.pems("keys")?.iter() {
            if with_cert.contains(fpr) {
                continue;
            }
            let doc = read_key(path)?;
            let (alg, _) = key_public(&doc, &path.display().to_string())?;
            out.push(super::key_only_entry(fpr.clone(), alg));
        }
        for der in self.crls()? {
            out.push(super::material::crl_entry(&der));
        }
        Ok(super::with_jwk_entries(out, &self.jwk_identities()?))
    }

    fn jwk_identities(&self) -> Result<Vec<super::StoredJwk>, KeyStoreError> {
        let mut out = Vec::new();
        if !self.root.join("jwk").exists() {
            return Ok(out);
        }
        // The listing and the files through the stat caches, as for keys: a message
        // does not re-read the records the one before it read.
        let (files, unchanged) = self.listing("jwk", "json")?;
        for (_, path) in files.iter() {
            let Some(text) = self.read_cached(path, unchanged)? else {
                continue;
            };
            let record = serde_json::from_slice(&text).map_err(|e| KeyStoreError::Malformed {
                what: path.display().to_string(),
                reason: e.to_string(),
            })?;
            out.push(record);
        }
        Ok(out)
    }

    fn put_jwk_identity(&self, record: &super::StoredJwk) -> Result<(), KeyStoreError> {
        let fpr = &record.fingerprint;
        if fpr.is_empty() || !fpr.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(KeyStoreError::Malformed {
                what: "JWK identity".into(),
                reason: "fingerprint is not hex".into(),
            });
        }
        let dir = self.root.join("jwk");
        if !dir.exists() {
            fs::create_dir_all(&dir).map_err(io(&dir))?;
            set_mode(&dir, 0o700)?;
        }
        let text = serde_json::to_vec_pretty(record).map_err(|e| KeyStoreError::Malformed {
            what: "JWK identity".into(),
            reason: e.to_string(),
        })?;
        self.write(&dir.join(format!("{fpr}.json")), &text, 0o644)
    }

    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        let mut out = Vec::new();
        for (_, path) in self.files("crls", "crl")?.iter() {
            out.push(fs::read(path).map_err(io(path))?);
        }
        Ok(out)
    }

    fn certificates_for(&self, email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        let email = email.trim().to_ascii_lowercase();
        Ok(self
            .certs_in("certs")?
            .iter()
            .filter(|c| c.emails.contains(&email))
            .cloned()
            .collect())
    }

    fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        Ok(self.certs_in("anchors")?.to_vec())
    }

    fn intermediates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        Ok(self
            .certs_in("certs")?
            .iter()
            .filter(|c| super::material::is_ca_der(&c.der))
            .cloned()
            .collect())
    }

    fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        Ok(self
            .certs_in("certs")?
            .iter()
            .filter(|c| self.has_key(&c.fingerprint))
            .cloned()
            .collect())
    }

    fn private_key(&self, fpr: &str) -> Result<Option<SecretKey>, KeyStoreError> {
        if !fpr.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let Some((path, unchanged)) = self.key_file(fpr)? else {
            return match self.token_ref(fpr)? {
                Some(path) => self.token_key(fpr, &path).map(Some),
                None => Ok(None),
            };
        };
        let Some(pem) = self.read_cached(&path, unchanged)? else {
            return Ok(None);
        };
        {
            let checked = self.checked_keys.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((from, alg, der)) = checked.get(&path) {
                if std::sync::Arc::ptr_eq(from, &pem) {
                    return Ok(Some(SecretKey::new(fpr.to_string(), *alg, der.clone())));
                }
            }
        }
        let der = key_der(&pem, &path)?;
        let (alg, _) = key_public(&der, &path.display().to_string())?;
        self.checked_keys
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path, (pem, alg, der.clone()));
        Ok(Some(SecretKey::new(fpr.to_string(), alg, der)))
    }

    fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        let (files, unchanged) = self.listing("openpgp", "pgp")?;
        let mut out = Vec::with_capacity(files.len());
        for (_, path) in files.iter() {
            if let Some(bytes) = self.read_cached(path, unchanged)? {
                out.push(bytes.to_vec());
            }
        }
        Ok(out)
    }

    fn openpgp_secret_key(&self, fpr: &str) -> Result<Option<Zeroizing<Vec<u8>>>, KeyStoreError> {
        if fpr.is_empty() || !fpr.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        // The directory's listing says which keys exist: a certificate without a
        // secret key costs no lookup of a file that is not there.
        let fpr = fpr.to_ascii_lowercase();
        let (files, unchanged) = self.listing("openpgp-keys", "pgp")?;
        let Ok(i) = files.binary_search_by(|(stem, _)| stem.as_str().cmp(&fpr)) else {
            return Ok(None);
        };
        Ok(self
            .read_cached(&files[i].1, unchanged)?
            .map(|bytes| Zeroizing::new(bytes.to_vec())))
    }
}
