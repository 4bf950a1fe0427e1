//! Helpers shared by the integration tests: envelopes from JSON, the built binary, the
//! repository's test data.
#![allow(dead_code)]

pub mod mls;
pub mod pki;

use std::path::PathBuf;

use base64::Engine;
use std::process::{Command, Output, Stdio};

use mailseal::envelope::{validate, Code, Envelope, ValidationContext, Violation};
use mailseal::Profile;

/// An envelope from a JSON value.
pub fn env(v: serde_json::Value) -> Envelope {
    Envelope::from_json(v.to_string().as_bytes()).expect("test envelope is JSON")
}

/// Violations of a JSON envelope, unprotected.
pub fn violations(v: serde_json::Value) -> Vec<Violation> {
    validate(&env(v), &ValidationContext::default())
}

/// Violations under a profile.
pub fn violations_under(v: serde_json::Value, profile: Profile) -> Vec<Violation> {
    validate(&env(v), &ValidationContext::new(Some(profile)))
}

/// The codes of violations.
pub fn codes(v: &[Violation]) -> Vec<Code> {
    v.iter().map(|v| v.code).collect()
}

/// The reference validator's valid request, in canonical A2A v1.0 (one text part: A2A
/// v1.0 §5.7 makes the REQUIRED repeated `parts` non-empty).
pub fn request() -> serde_json::Value {
    serde_json::json!({
        "bindingVersion": "1.0",
        "a2aVersion": "1.0",
        "kind": "request",
        "operation": "message/send",
        "messageId": "urn:uuid:request-1",
        "correlationId": "exchange-1",
        "sequence": 0,
        "final": false,
        "idempotencyKey": "effect-1",
        "payload": {"message": {"messageId": "message-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    })
}

/// `base` with `patch`'s top-level fields set (null removes a field).
pub fn with(mut base: serde_json::Value, patch: serde_json::Value) -> serde_json::Value {
    let obj = base.as_object_mut().expect("object");
    for (k, v) in patch.as_object().expect("object") {
        if v.is_null() {
            obj.remove(k);
        } else {
            obj.insert(k.clone(), v.clone());
        }
    }
    base
}

/// The `mailseal` binary cargo built for this test run.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mailseal"))
}

/// Runs `mailseal ARGS` with `stdin`.
pub fn run(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    // A command without --store gets a fresh, empty store of its own, never the
    // user's (made here: only the commands that write keys make a store).
    let home = tempfile::tempdir().expect("temporary MAILSEAL_HOME");
    let store = empty_store(home.path());
    let mut child = Command::new(bin())
        .args(args)
        .env("MAILSEAL_HOME", store)
        .env_remove("MAILSEAL_STATE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mailseal runs");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("mailseal finishes");
    let _ = writer.join();
    out
}

/// An empty key store (the default layout, owner-only) at `dir/store`, or the one
/// there already.
pub fn empty_store(dir: &std::path::Path) -> PathBuf {
    empty_store_at(&dir.join("store"))
}

/// An empty key store at `store`, or the one there already.
pub fn empty_store_at(store: &std::path::Path) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let store = store.to_path_buf();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&store)
        .expect("store directory");
    mailseal::keystore::SqliteStore::open(&store.join("mailseal.db"), None).expect("empty store");
    store
}

/// A file under `tests/data/`.
pub fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// A file under `keys-fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("keys-fixtures")
        .join(rel)
}

/// Runs the real `openssl` (on every machine) in `dir`; fails the test if it fails.
pub fn openssl(args: &[&str], dir: &std::path::Path) -> Output {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is on every machine");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Seals the plain `msg` through `mailseal seal --profile smime` with the key store at
/// `store` (signed only, or signed and encrypted) and returns the sealed bytes.
pub fn seal_smime_cli(
    store: &std::path::Path,
    msg: &mailseal::message::MailA2aMessage,
    dir: &std::path::Path,
    sign_only: bool,
) -> Vec<u8> {
    let plain = dir.join("plain.eml");
    std::fs::write(&plain, msg.to_rfc5322().expect("composes")).expect("writes");
    let mut args = vec![
        "seal",
        "--store",
        store.to_str().expect("utf-8 path"),
        "--profile",
        "smime",
    ];
    if sign_only {
        args.push("--sign-only");
    }
    args.extend(["--in", plain.to_str().expect("utf-8 path")]);
    let out = run(&args, b"");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `mailseal compose` of the envelope JSON `envelope` from `from` to `to` (a reply
/// naming the Message-ID `in_reply_to`), then `mailseal seal --profile smime
/// --sign-only` in `store` (which records a request it seals): the sealed bytes.
pub fn compose_and_sign(
    store: &std::path::Path,
    from: &str,
    to: &str,
    in_reply_to: Option<&str>,
    envelope: &[u8],
) -> Vec<u8> {
    let mut args = vec!["compose", "--from", from, "--to", to];
    if let Some(id) = in_reply_to {
        args.extend(["--in-reply-to", id]);
    }
    let plain = run(&args, envelope);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let store = store.to_str().expect("utf-8 path");
    let sealed = run(
        &[
            "seal",
            "--store",
            store,
            "--profile",
            "smime",
            "--sign-only",
        ],
        &plain.stdout,
    );
    assert!(
        sealed.status.success(),
        "{}",
        String::from_utf8_lossy(&sealed.stderr)
    );
    sealed.stdout
}

/// The Message-ID of a mail, as a reply's `--in-reply-to` names it.
pub fn mail_id(mail: &[u8]) -> String {
    let text = String::from_utf8_lossy(mail);
    let line = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("message-id:"))
        .expect("a Message-ID");
    line["message-id:".len()..].trim().to_string()
}

/// Replay-state backends by name.
pub type ReplayBackends = Vec<(&'static str, Box<dyn mailseal::replay::ReplayStore>)>;

/// Every replay-state backend, fresh: in memory, SQLite, and PostgreSQL when one is
/// configured (skipped with a message otherwise; required in CI). The temporary
/// directory lives as long as the stores.
pub fn replay_backends() -> (tempfile::TempDir, ReplayBackends) {
    use mailseal::replay::{MemoryReplayStore, PostgresReplayStore, SqliteReplayStore};
    let dir = tempfile::tempdir().expect("temp dir");
    let mut out: ReplayBackends = vec![
        ("memory", Box::new(MemoryReplayStore::default())),
        (
            "sqlite",
            Box::new(SqliteReplayStore::open(&dir.path().join("state.db")).expect("opens")),
        ),
    ];
    if let Some(url) = postgres_database() {
        out.push((
            "postgres",
            Box::new(PostgresReplayStore::connect(&url).expect("connects")),
        ));
    }
    (dir, out)
}

/// Where the body of a one-part message starts, and its end.
pub fn body_span(sealed: &[u8]) -> (usize, usize) {
    let text = String::from_utf8_lossy(sealed);
    // Ours end headers with CRLF CRLF; OpenSSL's output uses bare LF.
    let start = match (text.find("\r\n\r\n"), text.find("\n\n")) {
        (Some(a), Some(b)) if b + 2 < a + 4 => b + 2,
        (Some(a), _) => a + 4,
        (None, Some(b)) => b + 2,
        (None, None) => panic!("no header/body separator"),
    };
    (start, sealed.len())
}

/// The bytes of a base64 body in lines (whitespace ignored).
pub fn unbase64(body: &[u8]) -> Vec<u8> {
    let compact: Vec<u8> = body
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .unwrap()
}

/// `bytes` as a base64 body: lines of 76 characters joined by CRLF, no final CRLF.
pub fn base64_lines(bytes: &[u8]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let lines: Vec<&[u8]> = b64.as_bytes().chunks(76).collect();
    lines.join(&b"\r\n"[..])
}

/// The DER inside the base64 body of a one-part S/MIME message.
pub fn der_of(sealed: &[u8]) -> Vec<u8> {
    let (s, e) = body_span(sealed);
    unbase64(&sealed[s..e])
}

/// `sealed` with its base64 body replaced by `der`.
pub fn with_der(sealed: &[u8], der: &[u8]) -> Vec<u8> {
    let (s, _) = body_span(sealed);
    [&sealed[..s], &base64_lines(der)[..], b"\r\n"].concat()
}

/// Whether an optional peer is usable; when it is not, says why and returns `false` so
/// the test skips, unless `MAILSEAL_REQUIRE_PEERS=1` (CI), where it fails instead.
pub fn peer_available(name: &str, probe: &mut Command) -> bool {
    let ok = probe
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("MAILSEAL_REQUIRE_PEERS").as_deref() != Ok("1"),
            "{name} is required (MAILSEAL_REQUIRE_PEERS=1) but not usable"
        );
        skip(&format!("{name} is not installed"));
    }
    ok
}

/// Records that the running test returns early because `reason` (a peer is absent):
/// said now, and counted in the summary `tests/zz_skipped.rs` prints at the end of
/// `cargo test`, so a test that skipped is not taken for one that passed.
pub fn skip(reason: &str) {
    use std::io::Write;
    eprintln!("skipping: {reason}");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mailseal-skipped");
    let _ = std::fs::create_dir_all(&dir);
    // The test binary's name without cargo's hash, and the test's (libtest names the
    // thread after it).
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| s.rsplit_once('-').map_or(s.clone(), |(b, _)| b.to_string()))
        .unwrap_or_default();
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{binary}.log")))
    {
        let _ = f.write_all(format!("{now}\t{binary} {test}\t{reason}\n").as_bytes());
    }
}

/// A throw-away GnuPG home (the real `gpg`, on every machine): batch mode, no agent
/// prompts, no trust database questions.
pub struct Gpg {
    /// The GNUPGHOME directory.
    pub home: tempfile::TempDir,
}

impl Gpg {
    /// A new empty keyring.
    pub fn new() -> Self {
        let home = tempfile::Builder::new()
            .prefix("gpg")
            .tempdir()
            .expect("temp dir");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700))
                .expect("chmod");
        }
        Gpg { home }
    }

    /// Runs `gpg ARGS` with `stdin`; the output, whatever the exit status.
    pub fn try_run(&self, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child = Command::new("gpg")
            .env("GNUPGHOME", self.home.path())
            .args([
                "--batch",
                "--yes",
                "--no-tty",
                "--pinentry-mode",
                "loopback",
                "--trust-model",
                "always",
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpg is on every machine");
        let mut input = child.stdin.take().expect("stdin");
        let data = stdin.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = input.write_all(&data);
        });
        let out = child.wait_with_output().expect("gpg finishes");
        let _ = writer.join();
        out
    }

    /// Runs `gpg ARGS`; fails the test if gpg fails.
    pub fn run(&self, args: &[&str], stdin: &[u8]) -> Output {
        let out = self.try_run(args, stdin);
        assert!(
            out.status.success(),
            "gpg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// The bytes from `begin` (an armor header line) through its END line, inclusive.
pub fn armored_block(text: &[u8], kind: &str) -> Vec<u8> {
    let begin = format!("-----BEGIN PGP {kind}-----");
    let end = format!("-----END PGP {kind}-----");
    let s = memchr::memmem::find(text, begin.as_bytes()).expect("armor begins");
    let e = s + memchr::memmem::find(&text[s..], end.as_bytes()).expect("armor ends") + end.len();
    text[s..e].to_vec()
}

/// A new, empty PostgreSQL database on the server `MAILSEAL_TEST_POSTGRES` names (a URL
/// whose user may create databases; `.ci/postgres-up` starts one and prints it), as a
/// URL. `None` (the test skips, saying why) when the variable is unset, unless
/// `MAILSEAL_REQUIRE_PEERS=1`, where it fails instead.
#[allow(dead_code)]
pub fn postgres_database() -> Option<String> {
    let Some(admin) = std::env::var("MAILSEAL_TEST_POSTGRES")
        .ok()
        .filter(|s| !s.is_empty())
    else {
        assert!(
            std::env::var("MAILSEAL_REQUIRE_PEERS").as_deref() != Ok("1"),
            "PostgreSQL is required (MAILSEAL_REQUIRE_PEERS=1): set MAILSEAL_TEST_POSTGRES"
        );
        skip("MAILSEAL_TEST_POSTGRES is not set (.ci/postgres-up starts a server)");
        return None;
    };
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "mailseal_t{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let mut client = postgres::Client::connect(&admin, postgres::NoTls)
        .unwrap_or_else(|e| panic!("MAILSEAL_TEST_POSTGRES: cannot connect: {e}"));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create a test database");
    let cut = admin
        .rfind('/')
        .expect("MAILSEAL_TEST_POSTGRES ends in /DATABASE");
    Some(format!("{}/{name}", &admin[..cut]))
}

/// Alice's key store (her RFC 9216 signing identity) in `dir/alice`, and Bob's store
/// directory `dir/bob`, which trusts the RFC 9216 CA and knows Alice's certificate.
#[allow(dead_code)]
pub fn alice_signs_for_bob(dir: &std::path::Path) -> (mailseal::keystore::DirectoryStore, PathBuf) {
    use mailseal::keystore::{DirectoryStore, KeyStore};
    let import = |root: &std::path::Path, files: &[(&str, bool)]| {
        let s = DirectoryStore::open(root).unwrap();
        for (f, trusted) in files {
            let bytes = std::fs::read(fixture(&format!("rfc9216/{f}"))).unwrap();
            s.import(&bytes, f, *trusted).unwrap();
        }
        s
    };
    let alice = import(
        &dir.join("alice"),
        &[("alice.sign.crt", false), ("alice.sign.key", false)],
    );
    let bob = dir.join("bob");
    // Bob's own identity too: a signed message is accepted only by a recipient it
    // names, and Bob knows he is one from the key he holds.
    import(
        &bob,
        &[
            ("alice.sign.crt", false),
            ("ca.rsa.crt", true),
            ("bob.sign.crt", false),
            ("bob.sign.key", false),
        ],
    );
    (alice, bob)
}

/// The key store the CLI keeps at `dir`: its database (the default), or the file
/// layout when the test made the store with `DirectoryStore`.
#[allow(dead_code)]
pub fn cli_store(dir: &std::path::Path) -> Box<dyn mailseal::keystore::KeyStore> {
    let db = dir.join("mailseal.db");
    if db.exists() && !dir.join("certs").is_dir() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&db).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "store database mode {mode:o}");
        }
        Box::new(mailseal::keystore::SqliteStore::open(&db, None).unwrap())
    } else {
        Box::new(mailseal::keystore::DirectoryStore::open(dir).unwrap())
    }
}

/// The PKCS#8 DER of every private key in the CLI's store at `dir`.
#[allow(dead_code)]
pub fn stored_private_keys(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let store = cli_store(dir);
    store
        .list()
        .unwrap()
        .iter()
        .filter(|e| {
            e.has_private_key && e.kind != mailseal::keystore::EntryKind::OpenPgpCertificate
        })
        .filter_map(|e| store.private_key(&e.fingerprint).unwrap())
        .map(|k| k.pkcs8_der().to_vec())
        .collect()
}

/// Every OpenPGP secret key (binary) in the CLI's store at `dir`.
#[allow(dead_code)]
pub fn stored_openpgp_secrets(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let store = cli_store(dir);
    store
        .list()
        .unwrap()
        .iter()
        .filter(|e| e.kind == mailseal::keystore::EntryKind::OpenPgpCertificate)
        .filter_map(|e| store.openpgp_secret_key(&e.fingerprint).unwrap())
        .map(|k| k.to_vec())
        .collect()
}

/// A P-256 test CA made by `openssl req -x509` in `dir`: `ca.key` and `ca.pem`.
pub fn openssl_test_ca(dir: &std::path::Path, name: &str) {
    openssl_test_ca_files(dir, name, "ca.key", "ca.pem");
}

/// A P-256 test CA named `name` (critical basicConstraints CA, keyCertSign and
/// cRLSign, 30 days), made by `openssl req -x509` in `dir` into the files `key` and
/// `cert` (relative to `dir`, or absolute).
pub fn openssl_test_ca_files(dir: &std::path::Path, name: &str, key: &str, cert: &str) {
    let subject = format!("/CN={name}");
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-subj",
            &subject,
            "-days",
            "30",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        dir,
    );
}

/// `openssl x509 -req`: the certificate the CA of [`openssl_test_ca`] in `dir` issues
/// from the PKCS#10 request `csr`, its requested extensions copied, written to `out`.
pub fn openssl_issue(dir: &std::path::Path, csr: &str, out: &str) {
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-copy_extensions",
            "copy",
            "-days",
            "30",
            "-out",
            out,
        ],
        dir,
    );
}
