//! `mailseal key generate --kind smime`: certificates OpenSSL accepts for S/MIME
//! (self-signed, issued by a CA made here, issued by the RFC 9216 CA from files), that
//! seal and open with OpenSSL both ways; and what it refuses.

use crate::common;

use std::path::{Path, PathBuf};

use common::{fixture, openssl, run};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;

fn mailseal(args: &[&str]) -> std::process::Output {
    let out = run(args, b"");
    assert_eq!(
        out.status.code(),
        Some(0),
        "mailseal {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Generates an identity in `store`; returns the certificate PEM file it wrote.
fn generate(dir: &Path, store: &str, extra: &[&str]) -> PathBuf {
    let cert = dir.join(format!(
        "{store}-{}.pem",
        extra.join("_").replace(['/', '.'], "")
    ));
    let store = dir.join(store);
    let mut args = vec![
        "key",
        "generate",
        "--kind",
        "smime",
        "--store",
        store.to_str().unwrap(),
        "--cert-out",
        cert.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    mailseal(&args);
    cert
}

fn import(dir: &Path, store: &str, file: &Path, trusted: bool) {
    let store = dir.join(store);
    let mut args = vec!["key", "import", "--store", store.to_str().unwrap()];
    if trusted {
        args.push("--trusted");
    }
    args.push(file.to_str().unwrap());
    mailseal(&args);
}

/// The store's one private key (the store file owner-only, checked), written as a
/// PEM file beside the store for openssl.
fn key_file(store: &Path) -> PathBuf {
    let mut keys = common::stored_private_keys(store);
    assert_eq!(keys.len(), 1);
    let pem =
        der::pem::encode_string("PRIVATE KEY", der::pem::LineEnding::LF, &keys.remove(0)).unwrap();
    let path = store.with_extension("key.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

/// `openssl verify -purpose smimesign` of `cert` under `ca` must succeed.
fn verify_smimesign(dir: &Path, ca: &Path, cert: &Path) {
    let (ca, cert) = (ca.to_str().unwrap(), cert.to_str().unwrap());
    openssl(
        &["verify", "-CAfile", ca, "-purpose", "smimesign", cert],
        dir,
    );
}

fn text(cert: &Path, dir: &Path) -> String {
    let out = openssl(
        &["x509", "-in", cert.to_str().unwrap(), "-noout", "-text"],
        dir,
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn self_signed_p256_is_an_smime_certificate_openssl_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cert = generate(d, "alice", &["--email", "alice@example.org"]);
    let shown = text(&cert, d);
    for want in [
        "Signature Algorithm: ecdsa-with-SHA256",
        "CA:FALSE",
        "Digital Signature, Key Agreement",
        "E-mail Protection",
        "email:alice@example.org",
        "Subject Key Identifier",
    ] {
        assert!(shown.contains(want), "{want} missing:\n{shown}");
    }
    // OpenSSL's smimeencrypt purpose asks for keyEncipherment, which is RSA's usage; an
    // EC key agrees keys (RFC 8550), which the ECDH interop tests exercise instead.
    verify_smimesign(d, &cert, &cert);
    key_file(&d.join("alice"));
}

#[test]
fn ca_issued_identities_seal_and_open_with_openssl_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A CA (P-384) in its own store; Alice's P-256 identity issued by it from files.
    let ca = generate(
        d,
        "ca",
        &["--ca", "--name", "Example Agents CA", "--algorithm", "p384"],
    );
    assert!(text(&ca, d).contains("Certificate Sign, CRL Sign"));
    let ca_key = key_file(&d.join("ca"));
    let alice = generate(
        d,
        "alice",
        &[
            "--email",
            "alice@example.org",
            "--issuer-cert",
            ca.to_str().unwrap(),
            "--issuer-key",
            ca_key.to_str().unwrap(),
        ],
    );
    verify_smimesign(d, &ca, &alice);
    // Bob: RSA-3072, self-signed. They exchange certificates; Bob trusts the CA.
    let bob = generate(
        d,
        "bob",
        &["--email", "bob@example.org", "--algorithm", "rsa3072"],
    );
    import(d, "alice", &bob, false);
    import(d, "bob", &ca, true);

    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "gen-1");
    env.set("correlationId", "gen-c");
    env.set("idempotencyKey", "gen-e");
    env.set("payload", &serde_json::json!({"message": {"messageId": "m-g", "role": "ROLE_USER", "parts": [{"text": "hello Bob"}]}}));
    let msg = MailA2aMessage::new("alice@example.org", &["bob@example.org"], env);
    let sealed = common::seal_smime_cli(&d.join("alice"), &msg, d, false);
    std::fs::write(d.join("sealed.eml"), &sealed).unwrap();

    // OpenSSL decrypts with Bob's generated key and verifies Alice under the CA.
    let bob_key = key_file(&d.join("bob"));
    openssl(
        &[
            "cms",
            "-decrypt",
            "-in",
            "sealed.eml",
            "-recip",
            bob.to_str().unwrap(),
            "-inkey",
            bob_key.to_str().unwrap(),
            "-out",
            "signed.eml",
        ],
        d,
    );
    openssl(
        &[
            "cms",
            "-verify",
            "-in",
            "signed.eml",
            "-CAfile",
            ca.to_str().unwrap(),
            "-out",
            "inner.eml",
        ],
        d,
    );
    let inner = MailA2aMessage::parse(
        &std::fs::read(d.join("inner.eml")).unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(inner.envelope_bytes(), msg.envelope_bytes());
    // Bob opens it with mailseal.
    assert!(open_ok(d, "bob", "sealed.eml").contains("gen-1"));

    // And the other way: OpenSSL signs with Bob's generated key and encrypts to Alice.
    std::fs::write(
        d.join("reply-inner.eml"),
        msg_reply().to_inner_entity(true).unwrap(),
    )
    .unwrap();
    openssl(
        &[
            "cms",
            "-sign",
            "-in",
            "reply-inner.eml",
            "-signer",
            bob.to_str().unwrap(),
            "-inkey",
            bob_key.to_str().unwrap(),
            "-out",
            "reply-signed.eml",
        ],
        d,
    );
    openssl(
        &[
            "cms",
            "-encrypt",
            "-aes-256-gcm",
            "-in",
            "reply-signed.eml",
            "-recip",
            alice.to_str().unwrap(),
            // OpenSSL's default KDF for an EC recipient is SHA-1 (legacy, refused).
            "-keyopt",
            "ecdh_kdf_md:sha256",
            "-out",
            "reply.eml",
        ],
        d,
    );
    assert!(open_ok(d, "alice", "reply.eml").contains("gen-reply-1"));
}

/// `mailseal open` of `file` (in `dir`) with the store `store`: must succeed; its output.
fn open_ok(dir: &Path, store: &str, file: &str) -> String {
    open_with(dir, store, file, &[])
}

/// `open` of `file` by `store` with `extra` options; what it printed.
fn open_with(dir: &Path, store: &str, file: &str, extra: &[&str]) -> String {
    let store = dir.join(store);
    let file = dir.join(file);
    let mut args = vec![
        "open",
        "--store",
        store.to_str().unwrap(),
        "--in",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = mailseal(&args);
    String::from_utf8(out.stdout).unwrap()
}

fn msg_reply() -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "gen-reply-1");
    env.set("payload", &serde_json::json!({"id": "task-7"}));
    MailA2aMessage::new("bob@example.org", &["alice@example.org"], env)
}

#[test]
fn ed25519_identity_gets_an_x25519_certificate_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let carol = generate(
        d,
        "carol",
        &["--email", "carol@example.org", "--algorithm", "ed25519"],
    );
    let pem = std::fs::read_to_string(&carol).unwrap();
    assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 2);
    let dave = generate(
        d,
        "dave",
        &["--email", "dave@example.org", "--algorithm", "ed25519"],
    );
    import(d, "carol", &dave, false);
    import(d, "dave", &carol, false);
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "ed-1");
    env.set("payload", &serde_json::json!({"id": "task-9"}));
    let msg = MailA2aMessage::new("carol@example.org", &["dave@example.org"], env);
    let sealed = common::seal_smime_cli(&d.join("carol"), &msg, d, false);
    let path = d.join("ed.eml");
    std::fs::write(&path, &sealed).unwrap();
    let shown = String::from_utf8(run(&["inspect", path.to_str().unwrap()], b"").stdout).unwrap();
    assert_eq!(
        shown.matches("(x25519 ephemeral key)").count(),
        2,
        "{shown}"
    );
    assert!(open_ok(d, "dave", "ed.eml").contains("ed-1"));
    // Carol reads her own copy by asking for it; by default it is a reflection.
    let carol_store = d.join("carol");
    let refused = run(
        &[
            "open",
            "--store",
            carol_store.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(refused.status.code(), Some(6));
    assert!(refused.stdout.is_empty());
    assert!(open_with(d, "carol", "ed.eml", &["--own-copy"]).contains("ed-1"));
}

#[test]
fn rfc9216_ca_issues_from_its_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = fixture("rfc9216/ca.rsa.crt");
    let cert = generate(
        d,
        "erin",
        &[
            "--email",
            "erin@smime.example",
            "--issuer-cert",
            ca.to_str().unwrap(),
            "--issuer-key",
            fixture("rfc9216/ca.rsa.key").to_str().unwrap(),
        ],
    );
    assert!(text(&cert, d).contains("Signature Algorithm: sha256WithRSAEncryption"));
    verify_smimesign(d, &ca, &cert);
}

#[test]
fn fail_generate_without_address_bad_algorithm_or_mismatched_issuer_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let s = store.to_str().unwrap();
    let out = run(&["key", "generate", "--kind", "smime", "--store", s], b"");
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("email address"));
    let out = run(
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--store",
            s,
            "--email",
            "a@b.example",
            "--algorithm",
            "dsa",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = run(
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--store",
            s,
            "--email",
            "a@b.example",
            "--issuer-cert",
            fixture("rfc9216/ca.rsa.crt").to_str().unwrap(),
            "--issuer-key",
            fixture("rfc9216/alice.sign.key").to_str().unwrap(),
        ],
        b"",
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not belong"));
    assert!(common::stored_private_keys(&store).is_empty());
}

#[test]
fn ca_in_the_store_issues_by_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = generate(d, "ca", &["--ca", "--name", "Store CA"]);
    let store = d.join("ca");
    let list = run(&["key", "list", "--store", store.to_str().unwrap()], b"");
    let list = String::from_utf8(list.stdout).unwrap();
    let fpr = list
        .lines()
        .find(|l| l.contains("trust-anchor ec+secret"))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no CA with its key in:\n{list}"))
        .to_string();
    let cert = generate(d, "ca", &["--email", "frank@example.org", "--issuer", &fpr]);
    verify_smimesign(d, &ca, &cert);
    // An unknown fingerprint is an error, not a self-signed certificate.
    let out = run(
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--store",
            store.to_str().unwrap(),
            "--email",
            "g@example.org",
            "--issuer",
            "00ff",
        ],
        b"",
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no trust anchor"));
}
