//! OpenPGP/MIME against Debian's `sq` (Sequoia 1.x on Nettle), both ways: `sq decrypt`
//! and `sq verify` open and verify what `mailseal seal --profile openpgp` writes (the
//! inner entity byte for byte), and mailseal opens what `sq encrypt --signer-key` and
//! `sq sign --detached` write, with a key `sq key generate` made.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{armored_block, peer_available, run};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;
use mailseal::openpgp::OpenPgp;
use mailseal::seal::OpenPolicy;

fn sq_available() -> bool {
    peer_available("sq", Command::new("sq").arg("--version"))
}

fn sq(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("sq")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sq runs");
    assert!(
        out.status.success(),
        "sq {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn message(from: &str, to: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "urn:uuid:sq-1");
    env.set("correlationId", "corr-sq");
    env.set("idempotencyKey", "idem-sq");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-sq", "role": "ROLE_USER", "parts": [{"text": "hello sq"}]}}),
    );
    MailA2aMessage::new(from, &[to], env)
}

/// Alice's and Bob's mailseal stores (each with the other's certificate) in `dir`.
fn stores(dir: &Path) -> (PathBuf, PathBuf) {
    let alice = dir.join("alice");
    let bob = dir.join("bob");
    for (store, email) in [(&alice, "alice@pgp.example"), (&bob, "bob@pgp.example")] {
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
                s(&dir.join(format!("{email}.asc"))),
            ],
            b"",
        ));
    }
    ok(&run(
        &[
            "key",
            "import",
            "--store",
            s(&alice),
            s(&dir.join("bob@pgp.example.asc")),
        ],
        b"",
    ));
    ok(&run(
        &[
            "key",
            "import",
            "--store",
            s(&bob),
            s(&dir.join("alice@pgp.example.asc")),
        ],
        b"",
    ));
    (alice, bob)
}

/// The store's one OpenPGP secret key, in a file beside the store for `sq`.
fn secret_of(store: &Path) -> PathBuf {
    let mut secrets = common::stored_openpgp_secrets(store);
    assert_eq!(secrets.len(), 1, "one secret key");
    let path = store.with_extension("secret.pgp");
    std::fs::write(&path, secrets.remove(0)).unwrap();
    path
}

fn seal(store: &Path, msg: &MailA2aMessage, dir: &Path, sign_only: bool) -> Vec<u8> {
    let plain = dir.join("plain.eml");
    std::fs::write(&plain, msg.to_rfc5322().unwrap()).unwrap();
    let mut args = vec![
        "seal",
        "--store",
        s(store),
        "--profile",
        "openpgp",
        "--in",
        s(&plain),
    ];
    if sign_only {
        args.push("--sign-only");
    }
    let out = run(&args, b"");
    ok(&out);
    out.stdout
}

#[test]
fn sq_decrypts_and_verifies_what_mailseal_seals() {
    if !sq_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (alice, bob) = stores(d);
    let msg = message("alice@pgp.example", "bob@pgp.example");
    let sealed = seal(&alice, &msg, d, false);
    std::fs::write(d.join("enc.asc"), armored_block(&sealed, "MESSAGE")).unwrap();
    let out = sq(
        d,
        &[
            "decrypt",
            "--recipient-key",
            s(&secret_of(&bob)),
            "--signer-cert",
            "alice@pgp.example.asc",
            "enc.asc",
        ],
    );
    let store = common::cli_store(&bob);
    let (entity, _) = OpenPgp::new(store.as_ref())
        .verified_entity(&sealed, &OpenPolicy::default())
        .unwrap();
    assert!(
        out.stdout == entity,
        "sq and mailseal recover the same inner entity"
    );
    let inner = MailA2aMessage::parse(&out.stdout, &Default::default()).unwrap();
    assert_eq!(inner.envelope_bytes(), msg.envelope_bytes());

    // Signed only: sq verifies the detached signature over the signed part.
    let sealed = seal(&alice, &msg, d, true);
    let text = String::from_utf8_lossy(&sealed).into_owned();
    let boundary = text
        .split("boundary=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let delimiter = format!("\r\n--{boundary}\r\n");
    let start = text.find(&delimiter).unwrap() + delimiter.len();
    let end = start + text[start..].find(&delimiter).unwrap();
    std::fs::write(d.join("entity"), &sealed[start..end]).unwrap();
    std::fs::write(d.join("entity.sig"), armored_block(&sealed, "SIGNATURE")).unwrap();
    sq(
        d,
        &[
            "verify",
            "--signer-cert",
            "alice@pgp.example.asc",
            "--detached",
            "entity.sig",
            "entity",
        ],
    );
    // And a changed signed part does not verify for sq either.
    let mut changed = sealed[start..end].to_vec();
    let at = changed.len() / 2;
    changed[at] ^= 0x01;
    std::fs::write(d.join("entity"), changed).unwrap();
    let out = Command::new("sq")
        .args([
            "verify",
            "--signer-cert",
            "alice@pgp.example.asc",
            "--detached",
            "entity.sig",
            "entity",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn mailseal_opens_what_sq_encrypts_signs_and_detach_signs() {
    if !sq_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, bob) = stores(d);
    sq(
        d,
        &[
            "key",
            "generate",
            "--userid",
            "Carol <carol@sq.example>",
            "--export",
            "carol.tsk",
        ],
    );
    let cert = sq(d, &["key", "extract-cert", "carol.tsk"]).stdout;
    std::fs::write(d.join("carol.asc"), cert).unwrap();
    ok(&run(
        &["key", "import", "--store", s(&bob), s(&d.join("carol.asc"))],
        b"",
    ));

    let msg = message("carol@sq.example", "bob@pgp.example");
    std::fs::write(d.join("inner.eml"), msg.to_inner_entity(true).unwrap()).unwrap();
    let armored = sq(
        d,
        &[
            "encrypt",
            "--recipient-cert",
            "bob@pgp.example.asc",
            "--signer-key",
            "carol.tsk",
            "inner.eml",
        ],
    )
    .stdout;
    let mut mail = b"From: <carol@sq.example>\r\nTo: <bob@pgp.example>\r\nSubject: [...]\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"q\"\r\n\r\n\
--q\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n\
--q\r\nContent-Type: application/octet-stream\r\n\r\n"
        .to_vec();
    for line in String::from_utf8(armored).unwrap().lines() {
        mail.extend_from_slice(line.as_bytes());
        mail.extend_from_slice(b"\r\n");
    }
    mail.extend_from_slice(b"--q--\r\n");
    let out = run(&["open", "--store", s(&bob)], &mail);
    ok(&out);
    assert_eq!(out.stdout, [msg.envelope_bytes(), b"\n"].concat());

    // Signed only with `sq sign --detached`.
    let entity = msg.to_inner_entity(false).unwrap();
    std::fs::write(d.join("signed.eml"), &entity).unwrap();
    let sig = sq(
        d,
        &[
            "sign",
            "--detached",
            "--signer-key",
            "carol.tsk",
            "signed.eml",
        ],
    )
    .stdout;
    let mut mail = b"From: <carol@sq.example>\r\nTo: <bob@pgp.example>\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/signed; micalg=pgp-sha512; protocol=\"application/pgp-signature\"; boundary=\"s\"\r\n\r\n--s\r\n"
        .to_vec();
    mail.extend_from_slice(&entity);
    mail.extend_from_slice(b"\r\n--s\r\nContent-Type: application/pgp-signature\r\n\r\n");
    for line in String::from_utf8(sig).unwrap().lines() {
        mail.extend_from_slice(line.as_bytes());
        mail.extend_from_slice(b"\r\n");
    }
    mail.extend_from_slice(b"--s--\r\n");
    // The same envelope again (now signed only): with the receiver rules it would be a
    // duplicate, so this open verifies without them.
    let out = run(&["open", "--stateless", "--store", s(&bob)], &mail);
    ok(&out);
    assert_eq!(out.stdout, [msg.envelope_bytes(), b"\n"].concat());
}
