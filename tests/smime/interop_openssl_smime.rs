//! S/MIME signed messages against the real `openssl cms` (3.0), both ways, and the
//! refusals: tampering (exit 4), unknown signer (exit 4), signer not the sender,
//! forwarding and downgrade (exit 6), outer/inner mismatch (exit 3).

use crate::common;

use std::path::{Path, PathBuf};

use common::{fixture, openssl, run};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::{Limits, MailA2aMessage};
use mailseal::seal::{OpenError, OpenPolicy, Opener, SealOptions, Sealer};
use mailseal::smime::Smime;
use mailseal::{Classify, Profile, Protection};

/// A CA and an email-protection leaf for `email`, made by openssl: `kind` is
/// `ec` (P-256) or `rsa`.
pub(crate) fn pki(dir: &Path, kind: &str, email: &str) -> (PathBuf, PathBuf, PathBuf) {
    // "ec" (P-256), "ec:P-384", "ec:P-521", or RSA-2048.
    let curve = format!(
        "ec_paramgen_curve:{}",
        kind.strip_prefix("ec:").unwrap_or("P-256")
    );
    let newkey: &[&str] = if kind.starts_with("ec") {
        &["-newkey", "ec", "-pkeyopt", curve.leak()]
    } else {
        &["-newkey", "rsa:2048"]
    };
    // The CA signs with the digest of its curve's size (RFC 5758 3.2), which gpgsm
    // requires of a P-384 or P-521 certificate.
    let md = match kind {
        "ec:P-384" => "-sha384",
        "ec:P-521" => "-sha512",
        _ => "-sha256",
    };
    let mut ca = vec![
        "req",
        "-x509",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=Test CA",
        "-days",
        "3650",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ];
    ca.extend_from_slice(newkey);
    ca.push(md);
    openssl(&ca, dir);
    let mut csr = vec![
        "req",
        "-new",
        "-nodes",
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=agent",
    ];
    csr.extend_from_slice(newkey);
    openssl(&csr, dir);
    std::fs::write(
        dir.join("leaf.ext"),
        format!("subjectAltName=email:{email}\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=emailProtection\n"),
    )
    .unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.crt",
            "-days",
            "365",
            "-extfile",
            "leaf.ext",
            md,
        ],
        dir,
    );
    (
        dir.join("ca.crt"),
        dir.join("leaf.crt"),
        dir.join("leaf.key"),
    )
}

pub(crate) fn store(dir: &Path, files: &[&Path], anchors: &[&Path]) -> PathBuf {
    let s = dir.join("store");
    for (list, trusted) in [(files, false), (anchors, true)] {
        if list.is_empty() {
            continue;
        }
        let mut args = vec![
            "key".to_string(),
            "import".into(),
            "--store".into(),
            s.display().to_string(),
        ];
        if trusted {
            args.push("--trusted".into());
        }
        args.extend(list.iter().map(|p| p.display().to_string()));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&a, b"");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    s
}

pub(crate) fn plain(from: &str, to: &str, op: Operation) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, op, "smime-req-1");
    env.set("correlationId", "smime-ex-1");
    if op.is_effectful() {
        env.set("idempotencyKey", "smime-effect-1");
        env.set("payload", &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Grüße"}]}}));
    } else {
        env.set("payload", &serde_json::json!({"id": "task-1"}));
    }
    let mut m = MailA2aMessage::new(from, &[to], env);
    m.text = Some("signed request".into());
    m
}

pub(crate) fn seal_cli(store: &Path, msg: &MailA2aMessage, dir: &Path) -> Vec<u8> {
    common::seal_smime_cli(store, msg, dir, true)
}

/// A store with Alice's RFC 9216 signing identity and the RSA CA as trust anchor.
fn alice_store(dir: &Path) -> PathBuf {
    store(
        dir,
        &[
            &fixture("rfc9216/alice.sign.crt"),
            &fixture("rfc9216/alice.sign.key"),
        ],
        &[&fixture("rfc9216/ca.rsa.crt")],
    )
}

/// The first part of a multipart/signed message: exactly the signed bytes.
pub(crate) fn first_part(sealed: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(sealed);
    let b = text
        .split("boundary=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let open = format!("--{b}\r\n");
    let start = text.find(&open).unwrap() + open.len();
    let end = text[start..].find(&format!("\r\n--{b}")).unwrap() + start;
    sealed[start..end].to_vec()
}

/// `open` by the store that sealed `raw` (these tests seal and open with one store):
/// its own copy, which it reads only by asking for it.
fn open_cli(store: &Path, raw: &[u8]) -> std::process::Output {
    run(
        &["open", "--own-copy", "--store", store.to_str().unwrap()],
        raw,
    )
}

/// The policy of a store that opens its own copy (these tests seal and open with one
/// store; by default its own message to others is a reflection).
fn own_copy() -> OpenPolicy {
    {
        let mut p = OpenPolicy::default();
        p.own_copy = true;
        p
    }
}

fn verify_in_openssl(sealed: &[u8], ca: &Path, dir: &Path) {
    std::fs::write(dir.join("sealed.eml"), sealed).unwrap();
    let out = openssl(
        &[
            "cms",
            "-verify",
            "-in",
            "sealed.eml",
            "-CAfile",
            ca.to_str().unwrap(),
            "-out",
            "content.bin",
        ],
        dir,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Verification successful"));
    assert_eq!(
        std::fs::read(dir.join("content.bin")).unwrap(),
        first_part(sealed),
        "openssl recovers the signed entity byte for byte"
    );
}

#[test]
fn rsa_rfc9216_signed_by_mailseal_verifies_in_openssl_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let msg = plain(
        "alice@smime.example",
        "bob@smime.example",
        Operation::MessageSend,
    );
    let sealed = seal_cli(&s, &msg, dir.path());
    verify_in_openssl(&sealed, &fixture("rfc9216/ca.rsa.crt"), dir.path());
    let out = open_cli(&s, &sealed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = msg.envelope_bytes().to_vec();
    expected.push(b'\n');
    assert_eq!(out.stdout, expected);
    // The outer message shows only the binding hint; the inner carries every hint.
    let text = String::from_utf8_lossy(&sealed);
    let outer_head = text.split("\r\n\r\n").next().unwrap();
    assert!(
        outer_head.contains("Mail-A2A-Binding: 1.0") && !outer_head.contains("Mail-A2A-Operation")
    );
    assert!(String::from_utf8_lossy(&first_part(&sealed)).contains("hp=\"clear\""));
}

#[test]
fn rsa_pss_signed_by_mailseal_verifies_in_openssl_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let msg = plain(
        "alice@smime.example",
        "bob@smime.example",
        Operation::MessageSend,
    );
    let plain_path = dir.path().join("plain.eml");
    std::fs::write(&plain_path, msg.to_rfc5322().unwrap()).unwrap();
    let out = run(
        &[
            "seal",
            "--store",
            s.to_str().unwrap(),
            "--profile",
            "smime",
            "--sign-only",
            "--rsa-pss",
            "--in",
            plain_path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sealed = out.stdout;
    verify_in_openssl(&sealed, &fixture("rfc9216/ca.rsa.crt"), dir.path());
    // OpenSSL reads the signature algorithm as RSASSA-PSS with SHA-256 and MGF1-SHA-256.
    let printed = openssl(
        &["cms", "-cmsout", "-print", "-in", "sealed.eml"],
        dir.path(),
    );
    let printed = String::from_utf8_lossy(&printed.stdout).to_string();
    assert!(printed.contains("rsassaPss"), "{printed}");
    assert!(
        printed.contains("mgf1") && printed.contains("sha256"),
        "{printed}"
    );
    let sealed_path = dir.path().join("sealed.eml");
    let out = run(
        &[
            "inspect",
            "--store",
            s.to_str().unwrap(),
            sealed_path.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("signature rsa-pss"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = open_cli(&s, &sealed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ecdsa_p256_both_ways_with_openssl() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, crt, key) = pki(dir.path(), "ec", "agent@example.net");
    let s = store(dir.path(), &[&crt, &key], &[&ca]);
    let msg = plain(
        "agent@example.net",
        "peer@example.com",
        Operation::MessageSend,
    );
    let sealed = seal_cli(&s, &msg, dir.path());
    verify_in_openssl(&sealed, &ca, dir.path());

    // openssl signs, mailseal opens and reports ECDSA P-256.
    std::fs::write(
        dir.path().join("inner.eml"),
        msg.to_inner_entity(false).unwrap(),
    )
    .unwrap();
    openssl(
        &[
            "cms",
            "-sign",
            "-in",
            "inner.eml",
            "-signer",
            crt.to_str().unwrap(),
            "-inkey",
            key.to_str().unwrap(),
            "-from",
            "agent@example.net",
            "-to",
            "peer@example.com",
            "-out",
            "osigned.eml",
        ],
        dir.path(),
    );
    let raw = std::fs::read(dir.path().join("osigned.eml")).unwrap();
    let report = dir.path().join("report.json");
    let out = run(
        &[
            "open",
            "--own-copy",
            "--store",
            s.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        &raw,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    assert_eq!(report["algorithm"], "ecdsa-p256-sha256");
    assert_eq!(report["protection"], "signed");
}

#[test]
fn openssl_rsa_pkcs1_and_pss_signatures_open() {
    let dir = tempfile::tempdir().unwrap();
    // Bob's store: Alice's certificate, and Bob's own identity (the recipient named).
    let s = store(
        dir.path(),
        &[
            &fixture("rfc9216/alice.sign.crt"),
            &fixture("rfc9216/bob.sign.crt"),
            &fixture("rfc9216/bob.sign.key"),
        ],
        &[&fixture("rfc9216/ca.rsa.crt")],
    );
    let msg = plain(
        "alice@smime.example",
        "bob@smime.example",
        Operation::MessageSend,
    );
    std::fs::write(
        dir.path().join("inner.eml"),
        msg.to_inner_entity(false).unwrap(),
    )
    .unwrap();
    for (extra, alg) in [
        (vec![], "rsa-pkcs1-sha256"),
        (vec!["-keyopt", "rsa_padding_mode:pss"], "rsa-pss-sha256"),
    ] {
        let mut args = vec![
            "cms",
            "-sign",
            "-in",
            "inner.eml",
            "-signer",
            fixture("rfc9216/alice.sign.crt")
                .to_str()
                .unwrap()
                .to_string()
                .leak(),
            "-inkey",
            fixture("rfc9216/alice.sign.key")
                .to_str()
                .unwrap()
                .to_string()
                .leak(),
            "-out",
            "o.eml",
        ];
        args.extend(extra);
        openssl(&args, dir.path());
        let raw = std::fs::read(dir.path().join("o.eml")).unwrap();
        let store = common::cli_store(&s);
        let opened = Smime::new(store.as_ref())
            .open(&raw, &OpenPolicy::default())
            .unwrap();
        assert_eq!(opened.verdict.algorithm.as_deref(), Some(alg));
        assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());
    }
}

#[test]
fn ed25519_rfc9216_round_trip() {
    // OpenSSL 3.0 cannot sign or verify Ed25519 CMS; this checks us against ourselves
    // and the RFC 9216 Ed25519 CA.
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        &[
            &fixture("rfc9216/carlos.sign.crt"),
            &fixture("rfc9216/carlos.sign.key"),
        ],
        &[&fixture("rfc9216/ca.25519.crt")],
    );
    let msg = plain(
        "carlos@smime.example",
        "dana@smime.example",
        Operation::TasksGet,
    );
    let sealed = seal_cli(&s, &msg, dir.path());
    assert!(String::from_utf8_lossy(&sealed).contains("micalg=\"sha-512\""));
    let store = common::cli_store(&s);
    let opened = Smime::new(store.as_ref())
        .open(&sealed, &own_copy())
        .unwrap();
    assert_eq!(opened.verdict.algorithm.as_deref(), Some("ed25519"));
}

/// Where the base64 body of the signature part stands in `sealed`.
fn signature_span(sealed: &[u8]) -> (usize, usize) {
    let text = String::from_utf8_lossy(sealed);
    let part = text
        .find("Content-Type: application/pkcs7-signature")
        .unwrap();
    let start = part + text[part..].find("\r\n\r\n").unwrap() + 4;
    let end = start + text[start..].find("\r\n\r\n--").unwrap();
    (start, end)
}

/// Re-encodes `der` as the signature part of `sealed`.
fn with_signature(sealed: &[u8], der: &[u8]) -> Vec<u8> {
    let (start, end) = signature_span(sealed);
    // mail-builder ends a base64 body with CRLF before the delimiter's own CRLF.
    [
        &sealed[..start],
        &common::base64_lines(der)[..],
        b"\r\n",
        &sealed[end..],
    ]
    .concat()
}

pub(crate) fn signature_der(sealed: &[u8]) -> Vec<u8> {
    let (start, end) = signature_span(sealed);
    common::unbase64(&sealed[start..end])
}

#[test]
fn fail_every_flipped_cms_byte_is_refused_as_unauthentic() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, crt, key) = pki(dir.path(), "ec", "agent@example.net");
    let s = store(dir.path(), &[&crt, &key], &[&ca]);
    let sealed = seal_cli(
        &s,
        &plain(
            "agent@example.net",
            "peer@example.com",
            Operation::MessageSend,
        ),
        dir.path(),
    );
    let der = signature_der(&sealed);
    let store = common::cli_store(&s);
    let smime = Smime::new(store.as_ref());
    let policy = own_copy();
    assert!(smime.open(&sealed, &policy).is_ok());
    assert!(
        smime.open(&with_signature(&sealed, &der), &policy).is_ok(),
        "re-encoding the same DER opens"
    );
    let mut wrong = Vec::new();
    for i in 0..der.len() {
        for mask in [0x01u8, 0x80] {
            let mut d = der.clone();
            d[i] ^= mask;
            match smime.open(&with_signature(&sealed, &d), &policy) {
                Ok(_) => wrong.push(format!("byte {i} ^ {mask:#x}: accepted")),
                // A flip that breaks the DER is a malformed CMS (exit 3), one that keeps
                // it well formed fails the signature (exit 4): both refuse.
                Err(e)
                    if !matches!(
                        e.kind(),
                        mailseal::ErrorKind::Authentication | mailseal::ErrorKind::Malformed
                    ) =>
                {
                    wrong.push(format!("byte {i} ^ {mask:#x}: exit {} ({e})", e.kind()))
                }
                Err(_) => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} flips:\n{}",
        wrong.len(),
        der.len() * 2,
        wrong.join("\n")
    );

    // Through the command line, sampled: exit 3 (the DER no longer decodes) or 4 (it
    // does, and the signature fails), and nothing on stdout.
    for i in (0..der.len()).step_by(der.len() / 12) {
        let mut d = der.clone();
        d[i] ^= 0x01;
        let out = open_cli(&s, &with_signature(&sealed, &d));
        assert!(
            matches!(out.status.code(), Some(3 | 4)),
            "byte {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn fail_every_flipped_content_byte_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let sealed = seal_cli(
        &s,
        &plain(
            "alice@smime.example",
            "bob@smime.example",
            Operation::MessageSend,
        ),
        dir.path(),
    );
    let content = first_part(&sealed);
    let start = sealed
        .windows(content.len())
        .position(|w| w == content.as_slice())
        .unwrap();
    let store = common::cli_store(&s);
    let smime = Smime::new(store.as_ref());
    let mut wrong = Vec::new();
    for i in start..start + content.len() {
        let mut m = sealed.clone();
        m[i] ^= 0x01;
        match smime.open(&m, &OpenPolicy::default()) {
            Err(e) if e.kind() == mailseal::ErrorKind::Authentication => {}
            Ok(_) => wrong.push(format!("{}: accepted", i - start)),
            Err(e) => wrong.push(format!("{}: {} {e}", i - start, e.kind())),
        }
    }
    assert!(
        wrong.is_empty(),
        "content flips not refused as unauthentic at {wrong:?}"
    );
}

#[test]
fn fail_unknown_signer_is_exit_5() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let sealed = seal_cli(
        &s,
        &plain(
            "alice@smime.example",
            "bob@smime.example",
            Operation::TasksGet,
        ),
        dir.path(),
    );
    // A store that knows nobody who signs (only Bob's encryption certificate).
    let empty = dir.path().join("empty-store");
    let made = run(
        &[
            "key",
            "import",
            "--store",
            empty.to_str().unwrap(),
            common::fixture("rfc9216/bob.encrypt.crt").to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = run(&["open", "--store", empty.to_str().unwrap()], &sealed);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("self-signed or unknown"));
}

#[test]
fn fail_signer_who_is_not_the_sender_is_exit_6() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        &[&fixture("rfc9216/alice.sign.crt")],
        &[&fixture("rfc9216/ca.rsa.crt")],
    );
    // Alice's key signs a message claiming to come from Bob.
    let msg = plain(
        "bob@smime.example",
        "carol@example.net",
        Operation::MessageSend,
    );
    std::fs::write(
        dir.path().join("inner.eml"),
        msg.to_inner_entity(false).unwrap(),
    )
    .unwrap();
    openssl(
        &[
            "cms",
            "-sign",
            "-in",
            "inner.eml",
            "-signer",
            fixture("rfc9216/alice.sign.crt").to_str().unwrap(),
            "-inkey",
            fixture("rfc9216/alice.sign.key").to_str().unwrap(),
            "-out",
            "o.eml",
        ],
        dir.path(),
    );
    let out = open_cli(&s, &std::fs::read(dir.path().join("o.eml")).unwrap());
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn fail_outer_header_that_lies_is_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let sealed = seal_cli(
        &s,
        &plain(
            "alice@smime.example",
            "bob@smime.example",
            Operation::MessageSend,
        ),
        dir.path(),
    );
    let forged = String::from_utf8_lossy(&sealed).replacen(
        "Subject: A2A request",
        "Subject: URGENT wire money",
        1,
    );
    let out = open_cli(&s, forged.as_bytes());
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("hint-mismatch at header:Subject"));
}

#[test]
fn fail_forwarded_to_a_third_party_and_downgrade_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let sealed = seal_cli(
        &s,
        &plain(
            "alice@smime.example",
            "bob@smime.example",
            Operation::MessageSend,
        ),
        dir.path(),
    );
    let store = common::cli_store(&s);
    let smime = Smime::new(store.as_ref());
    // Bob forwards Alice's signed request to Carol: Carol is not a protected recipient.
    let carol = {
        let mut p = OpenPolicy::default();
        p.our_addresses = vec!["carol@example.net".into()];
        p
    };
    let err = smime.open(&sealed, &carol).unwrap_err();
    assert!(matches!(err, OpenError::Binding(_)), "{err}");
    assert_eq!(err.kind(), mailseal::ErrorKind::Policy);
    let bob = {
        let mut p = OpenPolicy::default();
        p.our_addresses = vec!["BOB@smime.example".into()];
        p
    };
    assert!(smime.open(&sealed, &bob).is_ok());
    // A peer whose policy demands encryption: a signed-only effectful request is refused.
    let mut strict = own_copy();
    strict
        .minimum_per_peer
        .insert("alice@smime.example".into(), Protection::SignedEncrypted);
    let err = smime.open(&sealed, &strict).unwrap_err();
    assert!(
        matches!(
            err,
            OpenError::Downgrade {
                got: Protection::Signed,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn sealing_refuses_invalid_messages_and_missing_keys() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        &[
            &fixture("rfc9216/alice.sign.crt"),
            &fixture("rfc9216/alice.sign.key"),
        ],
        &[],
    );
    let store = common::cli_store(&s);
    let smime = Smime::new(store.as_ref());
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let nobody = plain(
        "nobody@example.net",
        "bob@smime.example",
        Operation::TasksGet,
    );
    assert_eq!(
        smime.seal(&nobody, &opts).unwrap_err().kind(),
        mailseal::ErrorKind::NoUsableKey
    );
    let mut invalid = plain(
        "alice@smime.example",
        "bob@smime.example",
        Operation::MessageSend,
    );
    let mut env = invalid.envelope().clone();
    env.remove("idempotencyKey");
    invalid.set_envelope(env);
    assert_eq!(
        smime.seal(&invalid, &opts).unwrap_err().kind(),
        mailseal::ErrorKind::Malformed
    );
    // Encrypting to Bob needs Bob's certificate, which this store lacks: exit 5.
    let to_bob = MailA2aMessage::parse(
        &plain(
            "alice@smime.example",
            "bob@smime.example",
            Operation::TasksGet,
        )
        .to_rfc5322()
        .unwrap(),
        &Limits::default(),
    )
    .unwrap();
    let err = smime
        .seal(&to_bob, &SealOptions::new(Profile::Smime))
        .unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::NoUsableKey, "{err}");
    assert!(err.to_string().contains("bob@smime.example"), "{err}");
}

/// Issue #60: every signature pair RFC 8551 with RFC 5753/5754/5758 defines for the
/// keys we read, made by `openssl cms -sign -md ...` with an OpenSSL-made identity,
/// opens and is reported by its name: ECDSA on P-256, P-384 and P-521 with SHA-256,
/// SHA-384 and SHA-512, and RSA PKCS#1 v1.5 and PSS with the same three. And what we
/// write with a P-384 identity verifies in OpenSSL.
#[test]
fn every_rfc_8551_signature_pair_from_openssl_opens() {
    let pairs: &[(&str, &[&str], &str)] = &[
        ("ec", &[], "ecdsa-p256"),
        ("ec:P-384", &[], "ecdsa-p384"),
        ("ec:P-521", &[], "ecdsa-p521"),
        ("rsa", &[], "rsa-pkcs1"),
        ("rsa", &["-keyopt", "rsa_padding_mode:pss"], "rsa-pss"),
    ];
    for (kind, extra, name) in pairs {
        let dir = tempfile::tempdir().unwrap();
        let (ca, crt, key) = pki(dir.path(), kind, "agent@example.net");
        let s = store(dir.path(), &[&crt, &key], &[&ca]);
        let msg = plain(
            "agent@example.net",
            "peer@example.com",
            Operation::MessageSend,
        );
        if *kind == "ec:P-384" {
            let sealed = seal_cli(&s, &msg, dir.path());
            verify_in_openssl(&sealed, &ca, dir.path());
        }
        std::fs::write(
            dir.path().join("inner.eml"),
            msg.to_inner_entity(false).unwrap(),
        )
        .unwrap();
        for md in ["sha256", "sha384", "sha512"] {
            let mut args = vec![
                "cms",
                "-sign",
                "-md",
                md,
                "-in",
                "inner.eml",
                "-signer",
                crt.to_str().unwrap(),
                "-inkey",
                key.to_str().unwrap(),
                "-out",
                "osigned.eml",
            ];
            args.extend_from_slice(extra);
            openssl(&args, dir.path());
            let raw = std::fs::read(dir.path().join("osigned.eml")).unwrap();
            let report = dir.path().join("report.json");
            let out = run(
                &[
                    "open",
                    "--own-copy",
                    "--store",
                    s.to_str().unwrap(),
                    "--report",
                    report.to_str().unwrap(),
                ],
                &raw,
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "{kind} {extra:?} {md}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
            assert_eq!(report["algorithm"], format!("{name}-{md}"), "{kind} {md}");
            assert_eq!(report["protection"], "signed");
            // It was checked: the same signature over a changed entity is refused.
            let text = String::from_utf8_lossy(&raw).replace("signed request", "signed requesT");
            assert_ne!(text.as_bytes(), &raw[..]);
            let out = run(
                &["open", "--own-copy", "--store", s.to_str().unwrap()],
                text.as_bytes(),
            );
            assert_ne!(
                out.status.code(),
                Some(0),
                "{kind} {md}: a changed entity opened"
            );
        }
    }
}

/// Issue #60: a `micalg` that does not name the signature's digest opens (RFC 8551
/// 3.5.3.2: receivers are lenient), with a warning on stderr and in the report;
/// OpenSSL's own and ours carry none.
#[test]
fn a_micalg_that_names_another_digest_opens_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, crt, key) = pki(dir.path(), "ec", "agent@example.net");
    let s = store(dir.path(), &[&crt, &key], &[&ca]);
    let msg = plain(
        "agent@example.net",
        "peer@example.com",
        Operation::MessageSend,
    );
    std::fs::write(
        dir.path().join("inner.eml"),
        msg.to_inner_entity(false).unwrap(),
    )
    .unwrap();
    openssl(
        &[
            "cms",
            "-sign",
            "-md",
            "sha256",
            "-in",
            "inner.eml",
            "-signer",
            crt.to_str().unwrap(),
            "-inkey",
            key.to_str().unwrap(),
            "-out",
            "o.eml",
        ],
        dir.path(),
    );
    let theirs = std::fs::read(dir.path().join("o.eml")).unwrap();
    let ours = seal_cli(&s, &msg, dir.path());
    let open = |raw: &[u8]| {
        let report = dir.path().join("r.json");
        let out = run(
            &[
                "open",
                "--own-copy",
                "--store",
                s.to_str().unwrap(),
                "--report",
                report.to_str().unwrap(),
            ],
            raw,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
        (String::from_utf8_lossy(&out.stderr).to_string(), r)
    };
    for clean in [&theirs, &ours] {
        let (stderr, r) = open(clean);
        assert!(!stderr.contains("warning"), "{stderr}");
        assert_eq!(r["warnings"], serde_json::json!([]));
    }
    let text = String::from_utf8_lossy(&theirs);
    assert!(text.contains("micalg=\"sha-256\""), "{text}");
    let relabelled = text.replace("micalg=\"sha-256\"", "micalg=\"sha-512\"");
    let (stderr, r) = open(relabelled.as_bytes());
    assert!(
        stderr.contains("warning: micalg sha-512 does not name the signature's digest sha-256"),
        "{stderr}"
    );
    assert_eq!(r["warnings"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["protection"], "signed");
}
