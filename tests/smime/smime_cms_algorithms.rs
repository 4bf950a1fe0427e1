//! CMS algorithms beyond what OpenSSL 3.0 writes into mail: the OpenSSL AuthEnvelopedData
//! test files (streamed BER, a KEK recipient, authenticated attributes), X25519
//! recipients (RFC 8418), ChaCha20-Poly1305 (RFC 8103) and RFC 9709 HKDF-derived content
//! keys, and legacy CBC only when allowed.

use crate::common;

use std::path::{Path, PathBuf};

use common::fixture;
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::seal::{OpenPolicy, Opener};
use mailseal::smime::{Kek, Smime};
use mailseal::{Classify, Protection};
use zeroize::Zeroizing;

fn pem_body(path: &Path) -> Vec<u8> {
    use base64::Engine;
    let text = std::fs::read_to_string(path).unwrap();
    let b64: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

fn openssl_sample(name: &str) -> Vec<u8> {
    pem_body(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/cms-openssl")
            .join(name),
    )
}

fn sample_kek() -> Kek {
    Kek {
        id: vec![0xc0, 0xfe, 0xe0],
        key: Zeroizing::new((0u8..16).collect()),
    }
}

#[test]
fn openssl_authenveloped_kek_sample_opens() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    let ber = openssl_sample("authenveloped_attrs.pem");
    assert_eq!(&ber[..2], &[0x30, 0x80], "the sample is streamed BER");
    let out = Smime::new(&store)
        .decrypt_cms(&ber, &[sample_kek()], &OpenPolicy::default())
        .unwrap();
    assert_eq!(&out.plaintext[..], b"Hello AuthEnvelopedData world\n");
    assert!(out.authenticated);
    assert_eq!(out.algorithm, "AES-128-GCM");
}

#[test]
fn fail_openssl_sample_with_altered_authenticated_attribute() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    let ber = openssl_sample("bad_authenveloped_attrs.pem");
    let err = Smime::new(&store)
        .decrypt_cms(&ber, &[sample_kek()], &OpenPolicy::default())
        .err()
        .unwrap();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
    assert!(err.to_string().contains("does not decrypt"), "{err}");
}

#[test]
fn fail_openssl_sample_with_wrong_or_unknown_kek() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    let ber = openssl_sample("authenveloped_attrs.pem");
    let smime = Smime::new(&store);
    let mut wrong = sample_kek();
    wrong.key[0] ^= 1;
    let err = smime
        .decrypt_cms(&ber, &[wrong], &OpenPolicy::default())
        .err()
        .unwrap();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
    let unknown = Kek {
        id: b"other".to_vec(),
        key: Zeroizing::new(vec![0; 16]),
    };
    let err = smime
        .decrypt_cms(&ber, &[unknown], &OpenPolicy::default())
        .err()
        .unwrap();
    assert!(
        matches!(
            err.profile_error()
                .and_then(|e| e.downcast_ref::<mailseal::smime::SmimeError>()),
            Some(mailseal::smime::SmimeError::NotForUs)
        ),
        "{err}"
    );
    assert_eq!(
        mailseal::Classify::kind(&err),
        mailseal::ErrorKind::NoUsableKey
    );
}

fn x25519_store(dir: &Path, name: &str, files: &[&str]) -> PathBuf {
    let s = dir.join(name);
    let st = DirectoryStore::open(&s).unwrap();
    for f in files {
        let path = fixture(&format!("rfc9216/{f}"));
        st.import(&std::fs::read(&path).unwrap(), f, false).unwrap();
    }
    let ca = std::fs::read(fixture("rfc9216/ca.25519.crt")).unwrap();
    st.import(&ca, "ca", true).unwrap();
    s
}

/// Carlos: Ed25519 signing and X25519 key agreement, with Dana's X25519 certificate.
fn carlos_store(dir: &Path) -> PathBuf {
    x25519_store(
        dir,
        "carlos",
        &[
            "carlos.sign.crt",
            "carlos.sign.key",
            "carlos.encrypt.crt",
            "carlos.encrypt.key",
            "dana.encrypt.crt",
        ],
    )
}

/// Dana: her X25519 key agreement pair only.
fn dana_store(dir: &Path) -> PathBuf {
    x25519_store(dir, "dana", &["dana.encrypt.crt", "dana.encrypt.key"])
}

fn carlos_to_dana() -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "x25519-1");
    env.set("correlationId", "x25519-c");
    env.set("idempotencyKey", "x25519-e");
    env.set("payload", &serde_json::json!({"message": {"messageId": "m-x", "role": "ROLE_USER", "parts": [{"text": "over X25519"}]}}));
    MailA2aMessage::new("carlos@smime.example", &["dana@smime.example"], env)
}

#[test]
fn x25519_recipients_round_trip_rfc8418() {
    let dir = tempfile::tempdir().unwrap();
    let carlos = carlos_store(dir.path());
    let dana = dana_store(dir.path());
    let msg = carlos_to_dana();
    let sealed = common::seal_smime_cli(&carlos, &msg, dir.path(), false);
    // Carlos reads his own copy by asking for it.
    let own_copy = {
        let mut p = OpenPolicy::default();
        p.own_copy = true;
        p
    };
    for (store, policy) in [(&dana, OpenPolicy::default()), (&carlos, own_copy)] {
        let st = DirectoryStore::open(store).unwrap();
        let opened = Smime::new(&st).open(&sealed, &policy).unwrap();
        assert_eq!(opened.verdict.protection, Protection::SignedEncrypted);
        assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());
    }
    // Two key-agreement recipients (Dana, and Carlos's own copy), X25519 ephemeral keys
    // and RFC 8418's HKDF-SHA-256 scheme.
    let sealed_path = dir.path().join("sealed.eml");
    std::fs::write(&sealed_path, &sealed).unwrap();
    let out = common::run(&["inspect", sealed_path.to_str().unwrap()], b"");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("key agreement ecdh-hkdf-sha256 (x25519 ephemeral key)")
            .count(),
        2,
        "{text}"
    );
}

/// The independent Python CMS peer (`tests/peers/cms_peer.py`, pyca/cryptography).
fn python_peer() -> Option<PathBuf> {
    let ok = common::peer_available(
        "python3 with pyca/cryptography",
        std::process::Command::new("python3").args(["-c", "import cryptography"]),
    );
    ok.then(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/cms_peer.py"))
}

fn peer(script: &Path, args: &[&str]) {
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cms_peer.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn x25519_chacha20_and_rfc9709_both_ways_with_an_independent_peer() {
    let Some(script) = python_peer() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let carlos = carlos_store(d);
    let dana = dana_store(d);
    let dana_store = DirectoryStore::open(&dana).unwrap();
    let smime = Smime::new(&dana_store);
    let msg = carlos_to_dana();
    let sealed = common::seal_smime_cli(&carlos, &msg, d, false);

    // The peer decrypts what we wrote to Dana's X25519 key and gets the same entity.
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    std::fs::write(d.join("ours.der"), common::der_of(&sealed)).unwrap();
    let entity = d.join("entity.eml");
    peer(
        &script,
        &[
            "decrypt",
            "--cert",
            &k("dana.encrypt.crt"),
            "--key",
            &k("dana.encrypt.key"),
            d.join("ours.der").to_str().unwrap(),
            entity.to_str().unwrap(),
        ],
    );
    let ours = smime
        .decrypt_entity(&sealed, &OpenPolicy::default())
        .unwrap();
    assert_eq!(std::fs::read(&entity).unwrap(), &ours.plaintext[..]);

    // The peer re-encrypts that signed entity; we open every variant.
    let variants: [(&[&str], &str); 5] = [
        (&["--cipher", "aes-256-gcm"], "AES-256-GCM"),
        (&["--cipher", "chacha20-poly1305"], "ChaCha20-Poly1305"),
        (
            &["--cipher", "chacha20-poly1305", "--hkdf"],
            "ChaCha20-Poly1305 (RFC 9709 HKDF)",
        ),
        (
            &["--cipher", "aes-256-gcm", "--hkdf", "--ukm", "--auth-attr"],
            "AES-256-GCM (RFC 9709 HKDF)",
        ),
        (
            &["--cipher", "chacha20-poly1305", "--ukm", "--auth-attr"],
            "ChaCha20-Poly1305",
        ),
    ];
    for (i, (flags, algorithm)) in variants.iter().enumerate() {
        let out = d.join(format!("peer{i}.der"));
        let mut args = vec!["encrypt"];
        args.extend_from_slice(flags);
        let dana_cert = k("dana.encrypt.crt");
        args.extend(["--recip", &dana_cert]);
        args.extend([entity.to_str().unwrap(), out.to_str().unwrap()]);
        peer(&script, &args);
        let der = std::fs::read(&out).unwrap();
        let theirs = common::with_der(&sealed, &der);
        let decrypted = smime
            .decrypt_entity(&theirs, &OpenPolicy::default())
            .unwrap();
        assert_eq!(decrypted.algorithm, *algorithm, "{flags:?}");
        let opened = smime.open(&theirs, &OpenPolicy::default()).unwrap();
        assert_eq!(opened.verdict.protection, Protection::SignedEncrypted);
        assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());

        // One flipped byte anywhere in the last 200 (tag, attributes, ciphertext) fails.
        for at in der.len().saturating_sub(200)..der.len() {
            let mut bad = der.clone();
            bad[at] ^= 0x01;
            let err = smime
                .open(&common::with_der(&sealed, &bad), &OpenPolicy::default())
                .err()
                .unwrap_or_else(|| panic!("flip at {at} of variant {flags:?} was accepted"));
            assert!(
                matches!(
                    err.kind(),
                    mailseal::ErrorKind::Authentication | mailseal::ErrorKind::Malformed
                ),
                "{flags:?} at {at}: {err}"
            );
        }
    }
}

#[test]
fn fail_rfc9709_key_derivation_stripped_from_the_identifier() {
    // RFC 9709 binds the content key to the algorithm identifier. A message encrypted
    // under the derived key whose identifier was rewritten to the bare algorithm (the
    // downgrade it defends against) is refused; the same message left intact opens.
    let Some(script) = python_peer() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dana = dana_store(d);
    let store = DirectoryStore::open(&dana).unwrap();
    let input = d.join("in.txt");
    std::fs::write(&input, b"Content-Type: text/plain\r\n\r\nhi\r\n").unwrap();
    let cert = fixture("rfc9216/dana.encrypt.crt").display().to_string();
    let out = d.join("c.der");
    for strip in [false, true] {
        let mut args = vec!["encrypt", "--cipher", "chacha20-poly1305", "--hkdf"];
        if strip {
            args.push("--strip-hkdf");
        }
        args.extend(["--recip", &cert]);
        args.extend([input.to_str().unwrap(), out.to_str().unwrap()]);
        peer(&script, &args);
        let der = std::fs::read(&out).unwrap();
        let result = Smime::new(&store).decrypt_cms(&der, &[], &OpenPolicy::default());
        if strip {
            let err = result.err().unwrap();
            assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
        } else {
            assert_eq!(
                &result.unwrap().plaintext[..],
                b"Content-Type: text/plain\r\n\r\nhi\r\n"
            );
        }
    }
}

#[test]
fn fail_truncated_extended_or_relengthened_cms_is_refused() {
    // The in-place decryption reads the CMS layout itself (strict DER): every sampled cut
    // of an AuthEnvelopedData, data after it, and an inserted length byte are refused
    // (malformed where the DER breaks, an authentication failure where it still decodes),
    // and nothing opens.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let carlos = carlos_store(d);
    let dana = dana_store(d);
    let store = DirectoryStore::open(&dana).unwrap();
    let smime = Smime::new(&store);
    let sealed = common::seal_smime_cli(&carlos, &carlos_to_dana(), d, false);
    let der = common::der_of(&sealed);
    let refused = |bad: &[u8], what: &str| {
        let err = smime
            .open(&common::with_der(&sealed, bad), &OpenPolicy::default())
            .err()
            .unwrap_or_else(|| panic!("{what} was opened"));
        assert!(
            matches!(
                err.kind(),
                mailseal::ErrorKind::Authentication | mailseal::ErrorKind::Malformed
            ),
            "{what}: {err}"
        );
    };
    let step = (der.len() / 400).max(1);
    for cut in (0..der.len())
        .step_by(step)
        .chain(der.len() - 40..der.len())
    {
        refused(&der[..cut], &format!("cut at {cut}"));
    }
    let mut longer = der.clone();
    longer.push(0);
    refused(&longer, "a byte after the ContentInfo");
    // A long-form length byte inserted before the first short one (the contentType OID):
    // DER forbids the form, and the enclosing lengths no longer add up either.
    let oid_at = der.iter().position(|&b| b == 0x06).unwrap();
    let mut relength = der[..oid_at + 1].to_vec();
    relength.push(0x81);
    relength.extend_from_slice(&der[oid_at + 1..]);
    refused(&relength, "a non-minimal length");
}

#[test]
fn fail_a_cms_that_does_not_decode_is_malformed_not_unauthentic() {
    // A format error is exit 3 and keeps its cause: the S/MIME layer's own error is
    // the source of the open error, not a string inside an authentication failure.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let carlos = carlos_store(d);
    let dana = dana_store(d);
    let store = DirectoryStore::open(&dana).unwrap();
    let sealed = common::seal_smime_cli(&carlos, &carlos_to_dana(), d, false);
    // A SEQUENCE that claims more than it holds.
    let broken = common::with_der(&sealed, &[0x30, 0x82, 0x10, 0x00, 0x06, 0x01]);
    let err = Smime::new(&store)
        .open(&broken, &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Malformed, "{err}");
    let source = err
        .profile_error()
        .and_then(|e| e.downcast_ref::<mailseal::smime::SmimeError>());
    assert!(
        matches!(source, Some(mailseal::smime::SmimeError::Malformed(_))),
        "{err:?}"
    );
    let state = format!("sqlite:{}", d.join("state.db").display());
    let out = common::run(
        &["open", "--store", dana.to_str().unwrap(), "--state", &state],
        &broken,
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}
