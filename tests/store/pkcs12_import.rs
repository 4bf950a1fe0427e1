//! PKCS#12 import (`mailseal key import --passphrase-file`): files written by the real
//! `openssl pkcs12 -export` (OpenSSL 3's PBES2/AES default and the legacy SHA-1/3DES
//! PBEs), the RustCrypto sample (RC2-40 certificates), and what is refused: a wrong
//! passphrase, a missing one, an altered file.

use crate::common;

use std::path::{Path, PathBuf};

use common::{fixture, openssl, run};

fn import(store: &Path, file: &Path, passphrase: Option<&str>) -> std::process::Output {
    let mut args = vec![
        "key".to_string(),
        "import".into(),
        "--store".into(),
        store.display().to_string(),
    ];
    if let Some(p) = passphrase {
        let pw = store.with_extension("pw");
        std::fs::write(&pw, format!("{p}\n")).unwrap();
        args.extend(["--passphrase-file".into(), pw.display().to_string()]);
    }
    args.push(file.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args, b"")
}

fn listing(store: &Path) -> String {
    let out = run(&["key", "list", "--store", store.to_str().unwrap()], b"");
    String::from_utf8(out.stdout).unwrap()
}

fn export(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let cert = fixture("rfc9216/alice.sign.crt").display().to_string();
    let key = fixture("rfc9216/alice.sign.key").display().to_string();
    let mut args = vec![
        "pkcs12",
        "-export",
        "-in",
        &cert,
        "-inkey",
        &key,
        "-passout",
        "pass:s3cret pass",
        "-out",
        name,
    ];
    args.extend_from_slice(extra);
    openssl(&args, dir);
    dir.join(name)
}

#[test]
fn openssl_pkcs12_exports_import_with_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let variants: [(&str, &[&str]); 4] = [
        ("default.p12", &[]),
        (
            "legacy-3des.p12",
            &[
                "-keypbe",
                "PBE-SHA1-3DES",
                "-certpbe",
                "PBE-SHA1-3DES",
                "-macalg",
                "sha1",
            ],
        ),
        ("nocertenc.p12", &["-certpbe", "NONE", "-macalg", "sha512"]),
        (
            "aes128.p12",
            &[
                "-keypbe",
                "AES-128-CBC",
                "-certpbe",
                "AES-128-CBC",
                "-iter",
                "5000",
            ],
        ),
    ];
    for (name, extra) in variants {
        let file = export(dir.path(), name, extra);
        let store = dir.path().join(format!("store-{name}"));
        let out = import(&store, &file, Some("s3cret pass"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list = listing(&store);
        assert!(
            list.contains("certificate rsa+secret alice@smime.example"),
            "{name}: {list}"
        );
        // One key imported, in an owner-only store (checked by the helper).
        assert_eq!(common::stored_private_keys(&store).len(), 1, "{name}");
    }
}

#[test]
fn imported_pkcs12_key_signs_what_openssl_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let file = export(dir.path(), "alice.p12", &[]);
    let store = dir.path().join("store");
    assert_eq!(
        import(&store, &file, Some("s3cret pass")).status.code(),
        Some(0)
    );
    let mut env = mailseal::envelope::Envelope::new(
        mailseal::envelope::Kind::Request,
        mailseal::envelope::Operation::TasksGet,
        "p12-1",
    );
    env.set("payload", &serde_json::json!({"id": "task-1"}));
    let msg =
        mailseal::message::MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
    let sealed = common::seal_smime_cli(&store, &msg, dir.path(), true);
    std::fs::write(dir.path().join("signed.eml"), &sealed).unwrap();
    let ca = fixture("rfc9216/ca.rsa.crt").display().to_string();
    openssl(
        &[
            "cms",
            "-verify",
            "-in",
            "signed.eml",
            "-CAfile",
            &ca,
            "-out",
            "inner.eml",
        ],
        dir.path(),
    );
}

#[test]
fn rustcrypto_sample_with_rc2_40_certificates_imports() {
    let dir = tempfile::tempdir().unwrap();
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pkcs12/example.pfx");
    let store = dir.path().join("store");
    let out = import(&store, &file, Some("hunter42"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listing(&store).contains("certificate rsa+secret"));
}

#[test]
fn fail_wrong_missing_passphrase_and_altered_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = export(dir.path(), "alice.p12", &[]);
    let store = dir.path().join("store");

    let out = import(&store, &file, Some("wrong"));
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wrong passphrase"), "{err}");
    assert!(!err.contains("wrong\n") && !err.contains("s3cret"), "{err}");

    let out = import(&store, &file, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a passphrase"));

    // Every single flipped byte in the last half is refused (MAC or structure), never
    // imported silently altered.
    let bytes = std::fs::read(&file).unwrap();
    for at in (bytes.len() / 2..bytes.len()).step_by(7) {
        let mut bad = bytes.clone();
        bad[at] ^= 0x10;
        let altered = dir.path().join("altered.p12");
        std::fs::write(&altered, &bad).unwrap();
        let out = import(&store, &altered, Some("s3cret pass"));
        assert_ne!(out.status.code(), Some(0), "flip at {at} imported");
    }
    let keys = if store.exists() {
        common::stored_private_keys(&store).len()
    } else {
        0
    };
    assert_eq!(keys, 0, "nothing was imported from a refused file");
}

#[test]
fn encrypted_pkcs8_keys_from_openssl_import() {
    // PBES2 with PBKDF2 + AES-256-CBC, with scrypt, and the legacy SHA-1/3DES PBE.
    let dir = tempfile::tempdir().unwrap();
    let key = fixture("rfc9216/alice.sign.key").display().to_string();
    let variants: [(&str, &[&str]); 3] = [
        ("pbkdf2.pem", &["-v2", "aes-256-cbc"]),
        ("scrypt.pem", &["-scrypt"]),
        ("legacy.der", &["-v1", "PBE-SHA1-3DES", "-outform", "DER"]),
    ];
    for (name, extra) in variants {
        let mut args = vec![
            "pkcs8", "-topk8", "-in", &key, "-passout", "pass:k3y", "-out", name,
        ];
        args.extend_from_slice(extra);
        openssl(&args, dir.path());
        let store = dir.path().join(format!("store-{name}"));
        let file = dir.path().join(name);
        let out = import(&store, &file, None);
        assert_eq!(out.status.code(), Some(2), "{name} without a passphrase");
        let out = import(&store, &file, Some("not it"));
        assert_eq!(out.status.code(), Some(3), "{name} with a wrong passphrase");
        let out = import(&store, &file, Some("k3y"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(common::stored_private_keys(&store).len(), 1);
    }
}
