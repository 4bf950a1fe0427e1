//! The SQLite key store (`--store sqlite:PATH`): what the directory store holds, in one
//! owner-only file, with private keys encrypted at rest under a passphrase (PKCS#8
//! EncryptedPrivateKeyInfo, OpenPGP S2K), rotated by `key passwd`.

use crate::common;

use common::{fixture, run};
use mailseal::keystore::{KeyStore, KeyStoreError, SqliteStore};

fn fixture_bytes(f: &str) -> Vec<u8> {
    std::fs::read(fixture(&format!("rfc9216/{f}"))).unwrap()
}

/// The PKCS#8 DER inside a PEM key file.
fn pkcs8_der(pem: &[u8]) -> Vec<u8> {
    let text = std::str::from_utf8(pem).unwrap();
    let b64: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

#[test]
fn keys_are_encrypted_at_rest_and_open_with_the_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.db");
    let key_pem = fixture_bytes("alice.sign.key");
    let der = pkcs8_der(&key_pem);
    let fpr = {
        let s = SqliteStore::open(&path, Some(b"correct horse")).unwrap();
        s.import(&fixture_bytes("alice.sign.crt"), "crt", false)
            .unwrap();
        let e = s.import(&key_pem, "key", false).unwrap();
        assert!(e[0].has_private_key);
        e[0].fingerprint.clone()
    };
    let file = std::fs::read(&path).unwrap();
    let wal = std::fs::read(dir.path().join("keys.db-wal")).unwrap_or_default();
    for bytes in [&file, &wal] {
        assert!(
            memchr::memmem::find(bytes, &der[der.len() - 40..]).is_none(),
            "the private key is in the database in the clear"
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    let s = SqliteStore::open(&path, Some(b"correct horse")).unwrap();
    assert_eq!(s.private_key(&fpr).unwrap().unwrap().pkcs8_der(), &der[..]);
    assert_eq!(s.certificates_for("ALICE@smime.example").unwrap().len(), 1);
    assert_eq!(s.own_certificates().unwrap().len(), 1);

    let locked = SqliteStore::open(&path, None).unwrap();
    assert!(matches!(
        locked.private_key(&fpr),
        Err(KeyStoreError::Locked)
    ));
    // Listing needs no passphrase.
    assert!(locked
        .list()
        .unwrap()
        .iter()
        .any(|e| e.fingerprint == fpr && e.has_private_key));
    let wrong = SqliteStore::open(&path, Some(b"battery staple")).unwrap();
    assert!(matches!(
        wrong.private_key(&fpr),
        Err(KeyStoreError::WrongPassphrase)
    ));

    // Rotation: all keys under the new passphrase; the old one no longer opens them.
    assert_eq!(s.set_passphrase(Some(b"new one")).unwrap(), 1);
    let old = SqliteStore::open(&path, Some(b"correct horse")).unwrap();
    assert!(matches!(
        old.private_key(&fpr),
        Err(KeyStoreError::WrongPassphrase)
    ));
    let new = SqliteStore::open(&path, Some(b"new one")).unwrap();
    assert_eq!(
        new.private_key(&fpr).unwrap().unwrap().pkcs8_der(),
        &der[..]
    );
    assert_eq!(new.set_passphrase(None).unwrap(), 1);
    let clear = SqliteStore::open(&path, None).unwrap();
    assert_eq!(
        clear.private_key(&fpr).unwrap().unwrap().pkcs8_der(),
        &der[..]
    );

    assert!(clear.delete(&fpr).unwrap());
    assert!(clear.private_key(&fpr).unwrap().is_none());
    assert!(clear.list().unwrap().is_empty());
    assert!(!clear.delete(&fpr).unwrap());
}

#[test]
fn openpgp_secret_keys_are_locked_at_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.db");
    let tsk = mailseal::openpgp::generate(
        "carol@pgp.example",
        None,
        mailseal::openpgp::KeyProfile::Rfc4880,
    )
    .unwrap();
    let s = SqliteStore::open(&path, Some(b"pgp pass")).unwrap();
    let e = s.import(&tsk, "tsk", false).unwrap();
    let fpr = e[0].fingerprint.clone();
    assert!(e[0].has_private_key);
    assert_eq!(s.openpgp_certificates().unwrap().len(), 1);
    let unlocked = s.openpgp_secret_key(&fpr).unwrap().unwrap();
    assert_eq!(
        &unlocked[..],
        &tsk[..],
        "unlocked, the secret key is the one imported"
    );
    let locked = SqliteStore::open(&path, None).unwrap();
    assert!(matches!(
        locked.openpgp_secret_key(&fpr),
        Err(KeyStoreError::Locked)
    ));
    let text = String::from_utf8(s.export_certificate(&fpr).unwrap().unwrap()).unwrap();
    assert!(
        text.starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----"),
        "{text}"
    );
    assert!(!text.contains("PRIVATE"));
}

#[test]
fn the_cli_seals_and_opens_with_a_passphrase_protected_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let pass = dir.path().join("pass.txt");
    std::fs::write(&pass, "s3cret\n").unwrap();
    let store = format!("sqlite:{}", dir.path().join("alice.db").display());
    let with_pass = |args: &[&str], stdin: &[u8]| {
        use std::io::Write;
        let mut c = std::process::Command::new(common::bin())
            .args(args)
            .env("MAILSEAL_PASSPHRASE_FILE", &pass)
            .env("MAILSEAL_HOME", dir.path().join("home"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(stdin).unwrap();
        c.wait_with_output().unwrap()
    };
    for (f, trusted) in [
        ("alice.sign.crt", false),
        ("alice.sign.key", false),
        ("ca.rsa.crt", true),
    ] {
        let p = fixture(&format!("rfc9216/{f}"));
        let mut args = vec!["key", "import", "--store", &store];
        if trusted {
            args.push("--trusted");
        }
        args.push(p.to_str().unwrap());
        let out = with_pass(&args, b"");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let msg = mailseal::message::MailA2aMessage::new(
        "alice@smime.example",
        &["alice@smime.example"],
        common::env(common::request()),
    );
    let plain = msg.to_rfc5322().unwrap();
    let signed = with_pass(
        &[
            "seal",
            "--store",
            &store,
            "--profile",
            "smime",
            "--sign-only",
        ],
        &plain,
    );
    assert!(
        signed.status.success(),
        "{}",
        String::from_utf8_lossy(&signed.stderr)
    );
    let opened = with_pass(&["open", "--store", &store], &signed.stdout);
    assert!(
        opened.status.success(),
        "{}",
        String::from_utf8_lossy(&opened.stderr)
    );
    assert_eq!(opened.stdout, [msg.envelope_bytes(), b"\n"].concat());

    // Without the passphrase the key is locked: a clear error, nothing on stdout.
    let locked = run(
        &[
            "seal",
            "--store",
            &store,
            "--profile",
            "smime",
            "--sign-only",
        ],
        &plain,
    );
    assert_eq!(
        locked.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&locked.stderr)
    );
    assert!(locked.stdout.is_empty());
    assert!(String::from_utf8_lossy(&locked.stderr).contains("MAILSEAL_PASSPHRASE_FILE"));

    // key list / export / passwd / delete.
    let list = with_pass(&["key", "list", "--json", "--store", &store], b"");
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let alice = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "certificate")
        .unwrap()["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    let export = with_pass(&["key", "export", "--store", &store, &alice], b"");
    assert!(String::from_utf8_lossy(&export.stdout).starts_with("-----BEGIN CERTIFICATE-----"));
    let newpass = dir.path().join("new.txt");
    std::fs::write(&newpass, "changed\n").unwrap();
    let passwd = with_pass(
        &[
            "key",
            "passwd",
            "--store",
            &store,
            "--new-passphrase-file",
            newpass.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        passwd.status.success(),
        "{}",
        String::from_utf8_lossy(&passwd.stderr)
    );
    let stale = with_pass(
        &[
            "seal",
            "--store",
            &store,
            "--profile",
            "smime",
            "--sign-only",
        ],
        &plain,
    );
    assert_eq!(stale.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("wrong passphrase"));
    let deleted = with_pass(&["key", "delete", "--store", &store, &alice], b"");
    assert!(deleted.status.success());
    let gone = with_pass(&["key", "export", "--store", &store, &alice], b"");
    assert_eq!(gone.status.code(), Some(5));
}

#[test]
fn a_store_written_by_the_first_schema_opens_and_keeps_its_replay_state() {
    // Schema 1 (replay state only), as the first release wrote it, with one tuple.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE replay_tuple (signer TEXT NOT NULL, message_id TEXT NOT NULL,
           idempotency_key TEXT, operation TEXT NOT NULL, digest BLOB NOT NULL,
           accepted_at INTEGER NOT NULL, keep_until INTEGER,
           PRIMARY KEY (signer, message_id)) WITHOUT ROWID;
         CREATE INDEX replay_tuple_idempotency ON replay_tuple (signer, idempotency_key, accepted_at);
         CREATE INDEX replay_tuple_keep ON replay_tuple (keep_until);
         CREATE TABLE stream (signer TEXT NOT NULL, correlation_id TEXT NOT NULL,
           attempt INTEGER NOT NULL, operation TEXT NOT NULL, next_seq INTEGER NOT NULL,
           final_seq INTEGER, gap_since INTEGER, updated_at INTEGER NOT NULL,
           PRIMARY KEY (signer, correlation_id, attempt)) WITHOUT ROWID;
         CREATE INDEX stream_correlation ON stream (correlation_id);
         CREATE INDEX stream_updated ON stream (updated_at);
         CREATE TABLE stream_event (signer TEXT NOT NULL, correlation_id TEXT NOT NULL,
           attempt INTEGER NOT NULL, seq INTEGER NOT NULL, message_id TEXT NOT NULL,
           state TEXT NOT NULL, envelope BLOB NOT NULL, received_at INTEGER NOT NULL,
           PRIMARY KEY (signer, correlation_id, attempt, seq));
         PRAGMA user_version = 1;",
    )
    .unwrap();
    let env = common::env(common::request());
    let bytes = env.to_json();
    let digest = mailseal::envelope::content_digest(&bytes);
    conn.execute(
        "INSERT INTO replay_tuple VALUES ('x509:old', 'urn:uuid:request-1', 'effect-1',
         'message/send', ?1, 1796000000, NULL)",
        rusqlite::params![&digest[..]],
    )
    .unwrap();
    drop(conn);

    let keys = SqliteStore::open(&path, None).unwrap();
    keys.import(&fixture_bytes("alice.sign.crt"), "crt", false)
        .unwrap();
    let replay = mailseal::replay::SqliteReplayStore::open(&path).unwrap();
    assert_eq!(
        replay.schema_version().unwrap(),
        mailseal::replay::SCHEMA_VERSION
    );
    let c = mailseal::replay::Candidate::new("x509:old".into(), &env, &bytes).unwrap();
    assert!(matches!(
        mailseal::replay::ReplayStore::admit(
            &replay,
            &c,
            1_796_000_100,
            &mailseal::replay::ReceiverPolicy::default()
        )
        .unwrap(),
        mailseal::replay::Admission::Duplicate { .. }
    ));
    assert_eq!(keys.list().unwrap().len(), 1);
}
