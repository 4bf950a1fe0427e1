//! OpenPGP/MIME against the real `gpg` (2.2), both ways: GnuPG decrypts and verifies
//! what `mailseal seal --profile openpgp` writes and gets the inner entity byte for
//! byte; mailseal opens what `gpg --encrypt --sign` and `gpg --detach-sign` write, put
//! in RFC 3156 structures; keys made by each are used by the other (Ed25519/Cv25519 and
//! a passphrase-protected RSA-3072 key from GnuPG).

use crate::common;

use std::path::{Path, PathBuf};

use common::{armored_block, run, Gpg};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;
use mailseal::openpgp::OpenPgp;
use mailseal::seal::{OpenPolicy, SignerIdentity};

/// A request from `from` to `to` with a payload long enough to need more than one
/// armor line and a non-ASCII character (transfer-encoded inside).
fn message(from: &str, to: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "urn:uuid:pgp-1");
    env.set("correlationId", "corr-pgp");
    env.set("idempotencyKey", "idem-pgp");
    let text = format!("Grüße, {}", "lorem ipsum ".repeat(40));
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-pgp", "role": "ROLE_USER", "parts": [{"text": text}]}}),
    );
    MailA2aMessage::new(from, &[to], env)
}

fn ok(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `mailseal key generate --kind openpgp` for `email` in `store`; the armored
/// certificate path.
fn mailseal_key(dir: &Path, store: &Path, email: &str) -> PathBuf {
    let cert = dir.join(format!("{email}.asc"));
    ok(&run(
        &[
            "key",
            "generate",
            "--kind",
            "openpgp",
            "--email",
            email,
            "--store",
            s(store),
            "--cert-out",
            s(&cert),
        ],
        b"",
    ));
    cert
}

fn import(store: &Path, file: &Path, passphrase: Option<&Path>) {
    let mut args = vec!["key", "import", "--store", s(store)];
    if let Some(p) = passphrase {
        args.extend(["--passphrase-file", s(p)]);
    }
    args.push(s(file));
    ok(&run(&args, b""));
}

fn seal(store: &Path, msg: &MailA2aMessage, dir: &Path, sign_only: bool) -> Vec<u8> {
    let plain = dir.join("plain.eml");
    std::fs::write(&plain, msg.to_rfc5322().unwrap()).unwrap();
    let mut args = vec!["seal", "--store", s(store), "--profile", "openpgp"];
    if sign_only {
        args.push("--sign-only");
    }
    args.extend(["--in", s(&plain)]);
    let out = run(&args, b"");
    ok(&out);
    out.stdout
}

/// The signed entity mailseal's library recovers from `sealed`, and its signer.
fn verified_entity(store: &Path, sealed: &[u8]) -> (Vec<u8>, SignerIdentity) {
    let store = common::cli_store(store);
    OpenPgp::new(store.as_ref())
        .verified_entity(sealed, &OpenPolicy::default())
        .unwrap()
}

fn open(store: &Path, sealed: &[u8]) -> std::process::Output {
    run(&["open", "--store", s(store)], sealed)
}

/// The transferable secret key mailseal stored for `email` (binary), for gpg.
fn stored_secret(store: &Path) -> Vec<u8> {
    let mut secrets = common::stored_openpgp_secrets(store);
    assert_eq!(secrets.len(), 1, "one secret key");
    secrets.remove(0)
}

/// gpg's key for `uid` made with `algo` (`future-default` is Ed25519/Cv25519), exported
/// as (armored certificate, armored secret key protected by `passphrase`).
fn gpg_key(gpg: &Gpg, uid: &str, algo: &str, passphrase: &str) -> (Vec<u8>, Vec<u8>) {
    gpg.run(
        &[
            "--passphrase",
            passphrase,
            "--quick-gen-key",
            uid,
            algo,
            "default",
            "2y",
        ],
        b"",
    );
    let email = uid
        .split('<')
        .nth(1)
        .and_then(|r| r.strip_suffix('>'))
        .unwrap_or(uid);
    if algo != "future-default" {
        // An explicit algorithm makes a primary key only: add the encryption subkey.
        let fpr = gpg_fingerprint(gpg, email);
        gpg.run(
            &[
                "--passphrase",
                passphrase,
                "--quick-add-key",
                &fpr,
                algo,
                "encr",
                "2y",
            ],
            b"",
        );
    }
    let cert = gpg.run(&["--armor", "--export", email], b"").stdout;
    let secret = gpg
        .run(
            &[
                "--passphrase",
                passphrase,
                "--armor",
                "--export-secret-keys",
                email,
            ],
            b"",
        )
        .stdout;
    (cert, secret)
}

/// The primary key fingerprint gpg shows for `email`, upper-case hex.
fn gpg_fingerprint(gpg: &Gpg, email: &str) -> String {
    let listing = gpg
        .run(&["--with-colons", "--list-keys", email], b"")
        .stdout;
    String::from_utf8_lossy(&listing)
        .lines()
        .find(|l| l.starts_with("fpr:"))
        .and_then(|l| l.split(':').nth(9))
        .expect("a fingerprint")
        .to_string()
}

/// An RFC 3156 section 4 message around gpg's armored output.
fn pgp_mime_encrypted(from: &str, to: &str, armored: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "From: <{from}>\r\nTo: <{to}>\r\nSubject: [...]\r\nMIME-Version: 1.0\r\n\
Mail-A2A-Binding: 1.0\r\n\
Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"b1\"\r\n\r\n\
--b1\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n\
--b1\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    m.extend_from_slice(&crlf(armored));
    m.extend_from_slice(b"\r\n--b1--\r\n");
    m
}

fn crlf(text: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(text)
        .lines()
        .flat_map(|l| [l.as_bytes(), b"\r\n"].concat())
        .collect()
}

/// Alice (mailseal store) and Bob (mailseal store) with each other's certificates, and
/// a gpg keyring holding Bob's secret key and Alice's certificate.
struct Pair {
    dir: tempfile::TempDir,
    alice: PathBuf,
    bob: PathBuf,
    gpg: Gpg,
}

fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let alice = dir.path().join("alice");
    let bob = dir.path().join("bob");
    let alice_cert = mailseal_key(dir.path(), &alice, "alice@pgp.example");
    let bob_cert = mailseal_key(dir.path(), &bob, "bob@pgp.example");
    import(&alice, &bob_cert, None);
    import(&bob, &alice_cert, None);
    let gpg = Gpg::new();
    gpg.run(&["--import"], &stored_secret(&bob));
    gpg.run(&["--import", s(&alice_cert)], b"");
    Pair {
        dir,
        alice,
        bob,
        gpg,
    }
}

#[test]
fn mailseal_seals_gpg_decrypts_the_inner_entity_byte_for_byte_with_a_good_signature() {
    let p = pair();
    let msg = message("alice@pgp.example", "bob@pgp.example");
    let sealed = seal(&p.alice, &msg, p.dir.path(), false);
    let text = String::from_utf8_lossy(&sealed);
    assert!(text.contains("multipart/encrypted;\r\n protocol=\"application/pgp-encrypted\""));
    assert!(text.contains("Subject: [...]"));
    let armored = armored_block(&sealed, "MESSAGE");
    let out = p.gpg.run(&["--status-fd", "2", "--decrypt"], &armored);
    let status = String::from_utf8_lossy(&out.stderr);
    assert!(status.contains("[GNUPG:] GOODSIG"), "{status}");
    assert!(status.contains("[GNUPG:] DECRYPTION_OKAY"), "{status}");
    // Alice's v4 key advertises SEIPDv1 only, so gpg 2.2 can read the message.
    assert!(status.contains("[GNUPG:] DECRYPTION_INFO 2 9"), "{status}");
    let (entity, _) = verified_entity(&p.bob, &sealed);
    assert!(
        out.stdout == entity,
        "gpg and mailseal recover the same inner entity"
    );
    let inner = MailA2aMessage::parse(&out.stdout, &Default::default()).unwrap();
    assert_eq!(inner.envelope_bytes(), msg.envelope_bytes());
    assert!(String::from_utf8_lossy(&out.stdout).contains("hp=\"cipher\""));
    // Inside the encryption the non-ASCII JSON travels 8bit, not base64 (RFC 8551
    // 3.1.2's rule, which OpenPGP/MIME's binary literal data allows as well).
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Content-Transfer-Encoding: 8bit\r\n"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // And Bob's mailseal opens it too.
    let opened = open(&p.bob, &sealed);
    ok(&opened);
    assert_eq!(
        opened.stdout,
        [msg.envelope_bytes(), b"\n"].concat(),
        "the envelope, byte for byte"
    );
}

#[test]
fn mailseal_signs_gpg_verifies_the_detached_signature() {
    let p = pair();
    let msg = message("alice@pgp.example", "bob@pgp.example");
    let sealed = seal(&p.alice, &msg, p.dir.path(), true);
    let text = String::from_utf8_lossy(&sealed).into_owned();
    assert!(text.contains("micalg=\"pgp-sha256\""), "{text}");
    // The signed entity: after the first delimiter line, up to the CRLF before the next.
    let boundary = text
        .split("boundary=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    let delimiter = format!("\r\n--{boundary}\r\n");
    let start = text.find(&delimiter).unwrap() + delimiter.len();
    let end = start + text[start..].find(&delimiter).unwrap();
    let entity = &sealed[start..end];
    let inner = MailA2aMessage::parse(entity, &Default::default()).unwrap();
    assert_eq!(inner.envelope_bytes(), msg.envelope_bytes());
    assert!(entity.is_ascii(), "RFC 3156: the signed part is 7-bit");
    let signature = armored_block(&sealed, "SIGNATURE");
    std::fs::write(p.dir.path().join("entity"), entity).unwrap();
    std::fs::write(p.dir.path().join("entity.asc"), &signature).unwrap();
    let out = p.gpg.run(
        &[
            "--status-fd",
            "2",
            "--verify",
            s(&p.dir.path().join("entity.asc")),
            s(&p.dir.path().join("entity")),
        ],
        b"",
    );
    let status = String::from_utf8_lossy(&out.stderr);
    assert!(status.contains("[GNUPG:] GOODSIG"), "{status}");
    // SHA-256 (hash algorithm 8), as micalg says.
    assert!(
        status.contains(" 00 ") && status.contains("VALIDSIG"),
        "{status}"
    );
    let validsig = status
        .lines()
        .find(|l| l.contains("VALIDSIG"))
        .unwrap()
        .to_string();
    assert_eq!(validsig.split(' ').nth(9), Some("8"), "{validsig}");
    ok(&open(&p.bob, &sealed));
}

#[test]
fn gpg_encrypts_and_signs_mailseal_opens() {
    let p = pair();
    // Carol's key is gpg's own Ed25519/Cv25519; Bob's is mailseal's.
    let (carol_cert, _) = gpg_key(&p.gpg, "Carol <carol@gpg.example>", "future-default", "");
    let cert_file = p.dir.path().join("carol.asc");
    std::fs::write(&cert_file, &carol_cert).unwrap();
    import(&p.bob, &cert_file, None);
    let msg = message("carol@gpg.example", "bob@pgp.example");
    let entity = msg.to_inner_entity(true).unwrap();
    let armored = p
        .gpg
        .run(
            &[
                "--armor",
                "--encrypt",
                "--sign",
                "--local-user",
                "carol@gpg.example",
                "--recipient",
                "bob@pgp.example",
            ],
            &entity,
        )
        .stdout;
    let mail = pgp_mime_encrypted("carol@gpg.example", "bob@pgp.example", &armored);
    let out = open(&p.bob, &mail);
    ok(&out);
    assert_eq!(out.stdout, [msg.envelope_bytes(), b"\n"].concat());

    // The report names Carol's gpg key and the protection.
    let report = p.dir.path().join("report.json");
    let out = run(
        &["open", "--store", s(&p.bob), "--report", s(&report)],
        &mail,
    );
    ok(&out);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["profile"], "openpgp");
    assert_eq!(report["protection"], "signed-encrypted");
    let carol = gpg_fingerprint(&p.gpg, "carol@gpg.example").to_ascii_lowercase();
    assert_eq!(report["signer"], format!("openpgp:{carol}"));
}

#[test]
fn gpg_detach_signs_mailseal_opens_multipart_signed() {
    let p = pair();
    let (carol_cert, _) = gpg_key(&p.gpg, "Carol <carol@gpg.example>", "future-default", "");
    let cert_file = p.dir.path().join("carol.asc");
    std::fs::write(&cert_file, &carol_cert).unwrap();
    import(&p.bob, &cert_file, None);
    let msg = message("carol@gpg.example", "bob@pgp.example");
    let entity = msg.to_inner_entity(false).unwrap();
    let signature = p
        .gpg
        .run(
            &[
                "--armor",
                "--detach-sign",
                "--digest-algo",
                "SHA256",
                "--local-user",
                "carol@gpg.example",
            ],
            &entity,
        )
        .stdout;
    let mut mail = b"From: <carol@gpg.example>\r\nTo: <bob@pgp.example>\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/signed; micalg=pgp-sha256; protocol=\"application/pgp-signature\"; boundary=\"s1\"\r\n\r\n--s1\r\n"
        .to_vec();
    mail.extend_from_slice(&entity);
    mail.extend_from_slice(b"\r\n--s1\r\nContent-Type: application/pgp-signature\r\n\r\n");
    mail.extend_from_slice(&crlf(&signature));
    mail.extend_from_slice(b"\r\n--s1--\r\n");
    let out = open(&p.bob, &mail);
    ok(&out);
    assert_eq!(out.stdout, [msg.envelope_bytes(), b"\n"].concat());

    // The same entity with one byte changed no longer verifies (exit 4, no output).
    let at = mail.len() / 3;
    let mut changed = mail.clone();
    changed[at] ^= 0x01;
    let out = open(&p.bob, &changed);
    assert!(out.stdout.is_empty());
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn gpg_rsa_key_with_a_passphrase_imports_and_works_both_ways() {
    let p = pair();
    // Dave: gpg's RSA-3072 key, exported passphrase-protected, imported into mailseal.
    let (dave_cert, dave_secret) =
        gpg_key(&p.gpg, "Dave <dave@gpg.example>", "rsa3072", "dave pass");
    let dave = p.dir.path().join("dave");
    let secret_file = p.dir.path().join("dave.sec.asc");
    std::fs::write(&secret_file, &dave_secret).unwrap();
    // Without the passphrase: refused (exit 2), and with a wrong one too.
    let out = run(
        &["key", "import", "--store", s(&dave), s(&secret_file)],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wrong = p.dir.path().join("wrong");
    std::fs::write(&wrong, "not it\n").unwrap();
    let out = run(
        &[
            "key",
            "import",
            "--store",
            s(&dave),
            "--passphrase-file",
            s(&wrong),
            s(&secret_file),
        ],
        b"",
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not it"));
    let pass = p.dir.path().join("pass");
    std::fs::write(&pass, "dave pass\n").unwrap();
    import(&dave, &secret_file, Some(&pass));
    import(&dave, &p.dir.path().join("alice@pgp.example.asc"), None);
    let dave_cert_file = p.dir.path().join("dave.asc");
    std::fs::write(&dave_cert_file, &dave_cert).unwrap();
    import(&p.alice, &dave_cert_file, None);

    // mailseal (Alice) seals to Dave's RSA key; gpg decrypts with Dave's secret key.
    let msg = message("alice@pgp.example", "dave@gpg.example");
    let sealed = seal(&p.alice, &msg, p.dir.path(), false);
    let out = p.gpg.run(
        &["--passphrase", "dave pass", "--status-fd", "2", "--decrypt"],
        &armored_block(&sealed, "MESSAGE"),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("[GNUPG:] GOODSIG"));
    let inner = MailA2aMessage::parse(&out.stdout, &Default::default()).unwrap();
    assert_eq!(inner.envelope_bytes(), msg.envelope_bytes());
    // Dave's mailseal store (the imported RSA key) opens the same message.
    ok(&open(&dave, &sealed));

    // gpg (Dave) signs and encrypts to Alice; Alice's mailseal opens it.
    import(&p.alice, &dave_cert_file, None);
    let reply = message("dave@gpg.example", "alice@pgp.example");
    let armored = p
        .gpg
        .run(
            &[
                "--passphrase",
                "dave pass",
                "--armor",
                "--encrypt",
                "--sign",
                "--local-user",
                "dave@gpg.example",
                "--recipient",
                "alice@pgp.example",
            ],
            &reply.to_inner_entity(true).unwrap(),
        )
        .stdout;
    let out = open(
        &p.alice,
        &pgp_mime_encrypted("dave@gpg.example", "alice@pgp.example", &armored),
    );
    ok(&out);
    assert_eq!(out.stdout, [reply.envelope_bytes(), b"\n"].concat());
}

#[test]
fn fail_a_backdated_signature_by_an_expired_key() {
    // Carol's key lived through 2020 only. Whoever holds it signs today, with gpg's
    // clock set back so the signature says June 2020, when the key was alive: Sequoia
    // accepts that signature as of its own time, so the receiver checks the key as of
    // the time of receipt (issue #17).
    let p = pair();
    let faked = |t: &str| format!("{t}!");
    p.gpg.run(
        &[
            "--faked-system-time",
            &faked("20200101T000000"),
            "--passphrase",
            "",
            "--quick-gen-key",
            "Carol <carol@gpg.example>",
            "future-default",
            "default",
            "1y",
        ],
        b"",
    );
    let cert = p
        .gpg
        .run(&["--armor", "--export", "carol@gpg.example"], b"")
        .stdout;
    let cert_file = p.dir.path().join("carol.asc");
    std::fs::write(&cert_file, &cert).unwrap();
    import(&p.bob, &cert_file, None);
    let msg = message("carol@gpg.example", "bob@pgp.example");
    let entity = msg.to_inner_entity(false).unwrap();
    let signature = p
        .gpg
        .run(
            &[
                "--faked-system-time",
                &faked("20200601T120000"),
                "--armor",
                "--detach-sign",
                "--digest-algo",
                "SHA256",
                "--local-user",
                "carol@gpg.example",
            ],
            &entity,
        )
        .stdout;
    let mut mail = b"From: <carol@gpg.example>\r\nTo: <bob@pgp.example>\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/signed; micalg=pgp-sha256; protocol=\"application/pgp-signature\"; boundary=\"s1\"\r\n\r\n--s1\r\n"
        .to_vec();
    mail.extend_from_slice(&entity);
    mail.extend_from_slice(b"\r\n--s1\r\nContent-Type: application/pgp-signature\r\n\r\n");
    mail.extend_from_slice(&crlf(&signature));
    mail.extend_from_slice(b"\r\n--s1--\r\n");
    let out = open(&p.bob, &mail);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.contains("not valid now"), "{stderr}");

    // As of June 2020, stated explicitly (archival), the same message verifies.
    let out = run(
        &[
            "open",
            "--store",
            s(&p.bob),
            "--stateless",
            "--now",
            "2020-06-02T00:00:00Z",
        ],
        &mail,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn legacy_gpg_sign_encrypt_of_the_a2a_part_opens_with_unprotected_headers() {
    // gpg signs and encrypts the A2A part alone (no header fields inside): issue #17,
    // MailA2A 9.2. The outer From is bound to the signer.
    let p = pair();
    let msg = message("alice@pgp.example", "bob@pgp.example");
    let mut part = b"Content-Type: application/a2a+json\r\n\r\n".to_vec();
    part.extend_from_slice(msg.envelope_bytes());
    // The pair's gpg holds Bob's secret key; Alice signs here, so it gets hers too.
    p.gpg.run(&["--import"], &stored_secret(&p.alice));
    let armored = p
        .gpg
        .run(
            &[
                "--armor",
                "--sign",
                "--encrypt",
                "--local-user",
                "alice@pgp.example",
                "--recipient",
                "bob@pgp.example",
            ],
            &part,
        )
        .stdout;
    let legacy = |from: &str| {
        let mut mail =
            b"Date: Tue, 01 Dec 2026 12:00:00 +0000\r\nMessage-ID: <legacy-2@pgp.example>\r\n"
                .to_vec();
        mail.extend_from_slice(&pgp_mime_encrypted(from, "bob@pgp.example", &armored));
        mail
    };
    // Opened from a peer marked as legacy; refused, naming the option, from any other.
    let open_legacy = |raw: &[u8]| {
        run(
            &[
                "open",
                "--store",
                s(&p.bob),
                "--allow-legacy-from",
                "@pgp.example",
            ],
            raw,
        )
    };
    let out = open(&p.bob, &legacy("alice@pgp.example"));
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-legacy-from"));
    let out = open_legacy(&legacy("alice@pgp.example"));
    ok(&out);
    assert_eq!(out.stdout, [msg.envelope_bytes(), b"\n"].concat());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no header protection"));
    // The same bytes under another From: not the signer (exit 6).
    let out = open_legacy(&legacy("ceo@pgp.example"));
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}
