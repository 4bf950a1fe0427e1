//! The key directory in PostgreSQL (`--store postgres://...`): gateway processes that
//! share one database see the same certificates, anchors and keys, and the same
//! replay state; private keys are encrypted at rest under the store passphrase as in
//! SQLite. Skips (saying why) without `MAILSEAL_TEST_POSTGRES`; required in CI.

use crate::common;

use common::fixture;
use mailseal::keystore::{KeyStore, KeyStoreError, PostgresStore};

fn mailseal(
    args: &[&str],
    stdin: &[u8],
    passphrase: Option<&std::path::Path>,
) -> std::process::Output {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let mut c = std::process::Command::new(common::bin());
    c.args(args)
        .env("MAILSEAL_HOME", home.path().join("unused"))
        .env_remove("MAILSEAL_STATE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    match passphrase {
        Some(p) => c.env("MAILSEAL_PASSPHRASE_FILE", p),
        None => c.env_remove("MAILSEAL_PASSPHRASE_FILE"),
    };
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn gateways_sharing_a_database_share_keys_and_replay_state() {
    let Some(url) = common::postgres_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pass = dir.path().join("pass");
    std::fs::write(&pass, "gateway secret\n").unwrap();
    let p = Some(pass.as_path());
    // One process imports Alice's identity and the CA ...
    for (f, trusted) in [
        ("alice.sign.crt", false),
        ("alice.sign.key", false),
        ("ca.rsa.crt", true),
    ] {
        let file = fixture(&format!("rfc9216/{f}"));
        let mut args = vec!["key", "import", "--store", &url];
        if trusted {
            args.push("--trusted");
        }
        args.push(file.to_str().unwrap());
        let out = mailseal(&args, b"", p);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // ... another signs with it ...
    let msg = mailseal::message::MailA2aMessage::new(
        "alice@smime.example",
        &["alice@smime.example"],
        common::env(common::request()),
    );
    let signed = mailseal(
        &["seal", "--store", &url, "--profile", "smime", "--sign-only"],
        &msg.to_rfc5322().unwrap(),
        p,
    );
    assert!(
        signed.status.success(),
        "{}",
        String::from_utf8_lossy(&signed.stderr)
    );
    // ... a third opens it, and a fourth sees the same message as a duplicate.
    let first = mailseal(&["open", "--store", &url], &signed.stdout, None);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(first.stdout, [msg.envelope_bytes(), b"\n"].concat());
    let again = mailseal(&["open", "--store", &url], &signed.stdout, None);
    assert!(again.status.success());
    assert!(again.stdout.is_empty());
    assert!(String::from_utf8_lossy(&again.stderr).contains("duplicate"));
    // Signing needs the passphrase: the key is encrypted in the shared database.
    let locked = mailseal(
        &["seal", "--store", &url, "--profile", "smime", "--sign-only"],
        &msg.to_rfc5322().unwrap(),
        None,
    );
    assert_eq!(
        locked.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&locked.stderr)
    );
    assert!(locked.stdout.is_empty());
}

#[test]
fn keys_are_encrypted_at_rest_in_postgres() {
    let Some(url) = common::postgres_database() else {
        return;
    };
    let key_pem = std::fs::read(fixture("rfc9216/bob.sign.key")).unwrap();
    let s = PostgresStore::connect(&url, Some(b"pg pass")).unwrap();
    s.import(
        &std::fs::read(fixture("rfc9216/bob.sign.crt")).unwrap(),
        "crt",
        false,
    )
    .unwrap();
    let fpr = s.import(&key_pem, "key", false).unwrap()[0]
        .fingerprint
        .clone();
    let clear = s.private_key(&fpr).unwrap().unwrap().pkcs8_der().to_vec();

    let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row = raw
        .query_one(
            "SELECT pkcs8, encrypted FROM mailseal_private_key WHERE fingerprint = $1",
            &[&fpr],
        )
        .unwrap();
    let stored: Vec<u8> = row.get(0);
    assert!(row.get::<_, bool>(1));
    assert!(memchr::memmem::find(&stored, &clear[clear.len() - 40..]).is_none());

    let other = PostgresStore::connect(&url, None).unwrap();
    assert!(matches!(
        other.private_key(&fpr),
        Err(KeyStoreError::Locked)
    ));
    assert_eq!(
        other.certificates_for("bob@smime.example").unwrap().len(),
        1
    );
    assert!(other.delete(&fpr).unwrap());
    assert!(s.certificates_for("bob@smime.example").unwrap().is_empty());
}

/// The test CA of the server's TLS certificate (`.ci/postgres-up` makes it); skips
/// without it, required in CI.
fn tls_ca() -> Option<String> {
    match std::env::var("MAILSEAL_TEST_POSTGRES_TLS_CA") {
        Ok(ca) if std::path::Path::new(&ca).exists() => Some(ca),
        _ => {
            assert!(
                std::env::var("MAILSEAL_REQUIRE_PEERS").as_deref() != Ok("1"),
                "MAILSEAL_TEST_POSTGRES_TLS_CA is required (MAILSEAL_REQUIRE_PEERS=1): .ci/postgres-up"
            );
            common::skip("no MAILSEAL_TEST_POSTGRES_TLS_CA (.ci/postgres-up makes one)");
            None
        }
    }
}

/// Issue #17: `sslmode=verify-full` connects over TLS (rustls) and verifies the
/// server's certificate against `sslrootcert`; another CA's roots refuse the server,
/// and a mode that would not verify is refused rather than silently downgraded.
#[test]
fn postgres_over_tls_verifies_the_server_with_rustls() {
    let Some(url) = common::postgres_database() else {
        return;
    };
    let Some(ca) = tls_ca() else { return };
    let store =
        PostgresStore::connect(&format!("{url}?sslmode=verify-full&sslrootcert={ca}"), None)
            .unwrap();
    store
        .import(
            &std::fs::read(fixture("rfc9216/alice.sign.crt")).unwrap(),
            "alice",
            false,
        )
        .unwrap();
    assert_eq!(
        store.certificates_for("alice@smime.example").unwrap().len(),
        1
    );

    // Roots of another CA: the handshake fails, nothing is read.
    let dir = tempfile::tempdir().unwrap();
    common::openssl(
        &[
            "req",
            "-x509",
            "-nodes",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-keyout",
            "other.key",
            "-out",
            "other.crt",
            "-subj",
            "/CN=other",
            "-days",
            "2",
        ],
        dir.path(),
    );
    let other = dir.path().join("other.crt");
    let err = PostgresStore::connect(
        &format!("{url}?sslmode=verify-full&sslrootcert={}", other.display()),
        None,
    )
    .unwrap_err();
    assert!(matches!(err, KeyStoreError::Database(_)), "{err}");
    let text = err.to_string().to_ascii_lowercase();
    assert!(
        text.contains("certificate") || text.contains("tls"),
        "{err}"
    );

    // sslmode=require would not verify: refused, with the way to do it.
    let err = PostgresStore::connect(&format!("{url}?sslmode=require"), None).unwrap_err();
    assert!(err.to_string().contains("verify-full"), "{err}");
}
