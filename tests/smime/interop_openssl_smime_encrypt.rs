//! S/MIME sign-then-encrypt (AuthEnvelopedData, AES-256-GCM, RSAES-OAEP-SHA256) against
//! the real `openssl cms` both ways, and its refusals: not for us (exit 5), legacy CBC
//! EnvelopedData and GCM relabelled as CBC (exit 4), and tampering that no recipient
//! notices.

use crate::common;

use std::path::{Path, PathBuf};

use common::{der_of, fixture, openssl, run, with_der};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::seal::{OpenPolicy, Opener};
use mailseal::smime::Smime;
use mailseal::{Classify, Protection};

/// A store with `files` imported and the RFC 9216 RSA CA trusted.
fn store(dir: &Path, name: &str, files: &[&str]) -> PathBuf {
    let s = dir.join(name);
    let st = DirectoryStore::open(&s).unwrap();
    for f in files {
        st.import(
            &std::fs::read(fixture(&format!("rfc9216/{f}"))).unwrap(),
            f,
            false,
        )
        .unwrap();
    }
    st.import(
        &std::fs::read(fixture("rfc9216/ca.rsa.crt")).unwrap(),
        "ca",
        true,
    )
    .unwrap();
    s
}

fn alice_store(dir: &Path) -> PathBuf {
    store(
        dir,
        "alice",
        &[
            "alice.sign.crt",
            "alice.sign.key",
            "alice.encrypt.crt",
            "alice.encrypt.key",
            "bob.encrypt.crt",
        ],
    )
}

fn bob_store(dir: &Path) -> PathBuf {
    store(
        dir,
        "bob",
        &["bob.encrypt.crt", "bob.encrypt.key", "alice.sign.crt"],
    )
}

fn request() -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "enc-req-1");
    env.set("correlationId", "enc-ex-1");
    env.set("idempotencyKey", "enc-effect-1");
    env.set("payload", &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "secret plans"}]}}));
    MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env)
}

/// `openssl cms -sign` (with `extra` options) of `msg`'s inner entity with Alice's
/// RFC 9216 signing key, into `dir/out`.
fn openssl_alice_signs(dir: &Path, msg: &MailA2aMessage, out: &str, extra: &[&str]) {
    std::fs::write(dir.join("inner.eml"), msg.to_inner_entity(true).unwrap()).unwrap();
    let cert = fixture("rfc9216/alice.sign.crt").display().to_string();
    let key = fixture("rfc9216/alice.sign.key").display().to_string();
    let mut args = vec!["cms", "-sign"];
    args.extend_from_slice(extra);
    args.extend([
        "-in",
        "inner.eml",
        "-signer",
        &cert,
        "-inkey",
        &key,
        "-out",
        out,
    ]);
    openssl(&args, dir);
}

/// `openssl cms -decrypt` with Bob's key, then `openssl cms -verify` against the
/// RFC 9216 CA, of the sealed message: the inner entity OpenSSL recovers.
fn openssl_decrypts_and_verifies(dir: &Path, sealed: &[u8]) -> Vec<u8> {
    std::fs::write(dir.join("enc.eml"), sealed).unwrap();
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    openssl(
        &[
            "cms",
            "-decrypt",
            "-in",
            "enc.eml",
            "-recip",
            &k("bob.encrypt.crt"),
            "-inkey",
            &k("bob.encrypt.key"),
            "-out",
            "signed.eml",
        ],
        dir,
    );
    openssl(
        &[
            "cms",
            "-verify",
            "-in",
            "signed.eml",
            "-CAfile",
            &k("ca.rsa.crt"),
            "-out",
            "inner.eml",
        ],
        dir,
    );
    std::fs::read(dir.join("inner.eml")).unwrap()
}

fn seal(store: &Path, msg: &MailA2aMessage, dir: &Path) -> Vec<u8> {
    common::seal_smime_cli(store, msg, dir, false)
}

#[test]
fn mailseal_encrypts_openssl_decrypts_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let msg = request();
    let sealed = seal(&alice_store(dir.path()), &msg, dir.path());
    let text = String::from_utf8_lossy(&sealed);
    assert!(text.contains("smime-type=\"authEnveloped-data\"") && text.contains("Subject: [...]"));
    assert!(!text.contains("secret plans") && !text.contains("Mail-A2A-Operation"));
    let inner = openssl_decrypts_and_verifies(dir.path(), &sealed);
    let parsed = MailA2aMessage::parse(&inner, &Default::default()).unwrap();
    assert_eq!(parsed.envelope_bytes(), msg.envelope_bytes());
    assert!(String::from_utf8_lossy(&inner).contains("hp=\"cipher\""));

    // Bob opens it; so can Alice, when she asks for her own copy (the sender is a
    // recipient of her own copy's encryption; by default it would be a reflection).
    let own_copy = {
        let mut p = OpenPolicy::default();
        p.own_copy = true;
        p
    };
    for (s, policy) in [
        (bob_store(dir.path()), OpenPolicy::default()),
        (dir.path().join("alice"), own_copy),
    ] {
        let store = DirectoryStore::open(&s).unwrap();
        let opened = Smime::new(&store).open(&sealed, &policy).unwrap();
        assert_eq!(opened.verdict.protection, Protection::SignedEncrypted);
        assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());
    }
}

#[test]
fn openssl_encrypts_with_oaep_and_gcm_mailseal_opens() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    openssl_alice_signs(dir.path(), &request(), "signed.eml", &[]);
    openssl(
        &[
            "cms",
            "-encrypt",
            "-aes-256-gcm",
            "-in",
            "signed.eml",
            "-recip",
            &k("alice.encrypt.crt"),
            "-keyopt",
            "rsa_padding_mode:oaep",
            "-keyopt",
            "rsa_oaep_md:sha256",
            "-out",
            "enc.eml",
        ],
        dir.path(),
    );
    let out = run(
        &["open", "--own-copy", "--store", s.to_str().unwrap()],
        &std::fs::read(dir.path().join("enc.eml")).unwrap(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("enc-req-1"));
}

#[test]
fn openssl_streamed_ber_signed_data_inside_streamed_authenveloped_data_opens() {
    // `-stream` makes OpenSSL write indefinite-length BER with the content in segments:
    // an opaque signed-data inside AuthEnvelopedData, both streamed.
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    openssl_alice_signs(
        dir.path(),
        &request(),
        "signed.eml",
        &["-nodetach", "-stream"],
    );
    openssl(
        &[
            "cms",
            "-encrypt",
            "-stream",
            "-aes-256-gcm",
            "-in",
            "signed.eml",
            "-recip",
            &k("alice.encrypt.crt"),
            "-keyopt",
            "rsa_padding_mode:oaep",
            "-keyopt",
            "rsa_oaep_md:sha256",
            "-out",
            "enc.eml",
        ],
        dir.path(),
    );
    let enc = std::fs::read(dir.path().join("enc.eml")).unwrap();
    assert_eq!(&der_of(&enc)[..2], &[0x30, 0x80], "OpenSSL streamed BER");
    let out = run(
        &["open", "--own-copy", "--store", s.to_str().unwrap()],
        &enc,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("enc-req-1"));
}

#[test]
fn fail_not_a_recipient_is_exit_5() {
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal(&alice_store(dir.path()), &request(), dir.path());
    let carol = store(dir.path(), "carol", &["alice.sign.crt"]);
    let out = run(&["open", "--store", carol.to_str().unwrap()], &sealed);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn fail_legacy_cbc_and_gcm_relabelled_as_cbc_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    openssl_alice_signs(dir.path(), &request(), "signed.eml", &[]);
    openssl(
        &[
            "cms",
            "-encrypt",
            "-aes-256-cbc",
            "-in",
            "signed.eml",
            "-recip",
            &k("alice.encrypt.crt"),
            "-keyopt",
            "rsa_padding_mode:oaep",
            "-out",
            "cbc.eml",
        ],
        dir.path(),
    );
    let out = run(
        &["open", "--own-copy", "--store", s.to_str().unwrap()],
        &std::fs::read(dir.path().join("cbc.eml")).unwrap(),
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("EFAIL"));
    // Allowed explicitly, it opens, and counts as signed only (never as authenticated
    // encryption: CBC has no integrity).
    let report = dir.path().join("verdict.json");
    let out = run(
        &[
            "open",
            "--own-copy",
            "--store",
            s.to_str().unwrap(),
            "--allow-legacy-cbc",
            "--report",
            report.to_str().unwrap(),
        ],
        &std::fs::read(dir.path().join("cbc.eml")).unwrap(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(verdict["protection"], "signed", "{verdict}");
    // Lenient is not silent (issue #60): stderr and the report say it had no integrity.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: legacy content encryption") && stderr.contains("no integrity"),
        "{stderr}"
    );
    assert!(
        verdict["warnings"][0]
            .as_str()
            .unwrap()
            .contains("no integrity"),
        "{verdict}"
    );

    // Our own GCM message with the content-encryption OID changed to AES-256-CBC.
    let sealed = seal(&s, &request(), dir.path());
    let der = der_of(&sealed);
    let gcm = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x2e];
    let at = der.windows(gcm.len()).position(|w| w == gcm).unwrap();
    let mut cbc = der.clone();
    cbc[at + gcm.len() - 1] = 0x2a; // 2.16.840.1.101.3.4.1.42 aes256-CBC
    let store = DirectoryStore::open(&s).unwrap();
    let err = Smime::new(&store)
        .open(&with_der(&sealed, &cbc), &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
}

#[test]
fn fail_no_flipped_byte_goes_unnoticed_by_every_recipient() {
    let dir = tempfile::tempdir().unwrap();
    let a = alice_store(dir.path());
    let msg = request();
    let sealed = seal(&a, &msg, dir.path());
    let der = der_of(&sealed);
    let alice = DirectoryStore::open(&a).unwrap();
    let bob = DirectoryStore::open(bob_store(dir.path())).unwrap();
    // Alice reads her own copy by asking for it; Bob is named either way.
    let policy = {
        let mut p = OpenPolicy::default();
        p.own_copy = true;
        p
    };
    assert!(Smime::new(&bob)
        .open(&with_der(&sealed, &der), &policy)
        .is_ok());
    let mut unnoticed = Vec::new();
    let mut refused_wrongly = Vec::new();
    // Every byte of the recipient infos and headers, and a sample of the ciphertext.
    let step = |i: usize| {
        if i < 1200 || i + 64 > der.len() {
            1
        } else {
            97
        }
    };
    let mut i = 0;
    while i < der.len() {
        let mut d = der.clone();
        d[i] ^= 0x01;
        let m = with_der(&sealed, &d);
        let results: Vec<_> = [&alice, &bob]
            .iter()
            .map(|s| Smime::new(*s).open(&m, &policy))
            .collect();
        if results.iter().all(Result::is_ok) {
            unnoticed.push(i);
        }
        for r in results.iter() {
            match r {
                Ok(o) => assert_eq!(
                    o.message.envelope_bytes(),
                    msg.envelope_bytes(),
                    "byte {i}: other content accepted"
                ),
                Err(e)
                    if !matches!(
                        e.kind(),
                        mailseal::ErrorKind::Authentication
                            | mailseal::ErrorKind::NoUsableKey
                            | mailseal::ErrorKind::Malformed
                    ) =>
                {
                    refused_wrongly.push(format!("{i}: {e}"))
                }
                Err(_) => {}
            }
        }
        i += step(i);
    }
    assert!(
        unnoticed.is_empty(),
        "flips no recipient noticed: {unnoticed:?}"
    );
    assert!(refused_wrongly.is_empty(), "{refused_wrongly:?}");
}

#[test]
fn openssl_default_pkcs1_v15_key_transport_opens_without_a_padding_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let s = alice_store(dir.path());
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    openssl_alice_signs(dir.path(), &request(), "signed.eml", &[]);
    openssl(
        &[
            "cms",
            "-encrypt",
            "-aes-256-gcm",
            "-in",
            "signed.eml",
            "-recip",
            &k("alice.encrypt.crt"),
            "-out",
            "enc.eml",
        ],
        dir.path(),
    );
    let sealed = std::fs::read(dir.path().join("enc.eml")).unwrap();
    let store = DirectoryStore::open(&s).unwrap();
    let smime = Smime::new(&store);
    // Alice's own message, encrypted to her: her own copy, read by asking for it.
    let policy = {
        let mut p = OpenPolicy::default();
        p.own_copy = true;
        p
    };
    assert_eq!(
        smime.open(&sealed, &policy).unwrap().verdict.protection,
        Protection::SignedEncrypted
    );

    // Corrupt the wrapped key (bad PKCS#1 padding) and, apart, the GCM tag: the two
    // failures must be indistinguishable to the sender of the message.
    let der = der_of(&sealed);
    let openssl_body = |d: &[u8]| with_der(&sealed, d);
    // The wrapped key is the 256-byte OCTET STRING (04 82 01 00) of the recipient info.
    let at = der
        .windows(4)
        .position(|w| w == [0x04, 0x82, 0x01, 0x00])
        .unwrap()
        + 4;
    let mut bad_key = der.clone();
    bad_key[at + 5] ^= 0x40;
    let mut bad_tag = der.clone();
    let last = bad_tag.len() - 1;
    bad_tag[last] ^= 0x01;
    let e1 = smime.open(&openssl_body(&bad_key), &policy).unwrap_err();
    let e2 = smime.open(&openssl_body(&bad_tag), &policy).unwrap_err();
    assert_eq!(e1.to_string(), e2.to_string());
    assert_eq!(e1.kind(), mailseal::ErrorKind::Authentication);
}

/// An EC P-256 recipient `peer@example.com` (keyAgreement), made by openssl.
fn ec_recipient(dir: &Path) -> (PathBuf, PathBuf) {
    crate::common::openssl_test_ca_files(dir, "Test CA", "ca.key", "ca.crt");
    openssl(
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "peer.key",
            "-out",
            "peer.csr",
            "-subj",
            "/CN=peer",
        ],
        dir,
    );
    std::fs::write(dir.join("peer.ext"), "subjectAltName=email:peer@example.com\nkeyUsage=critical,keyAgreement\nextendedKeyUsage=emailProtection\nsubjectKeyIdentifier=hash\n").unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "peer.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "peer.crt",
            "-days",
            "365",
            "-extfile",
            "peer.ext",
        ],
        dir,
    );
    (dir.join("peer.crt"), dir.join("peer.key"))
}

fn import(store: &Path, files: &[&Path]) {
    let st = DirectoryStore::open(store).unwrap();
    for f in files {
        st.import(&std::fs::read(f).unwrap(), &f.display().to_string(), false)
            .unwrap();
    }
    st.import(
        &std::fs::read(fixture("rfc9216/ca.rsa.crt")).unwrap(),
        "ca",
        true,
    )
    .unwrap();
}

fn to_peer() -> MailA2aMessage {
    let mut m = request();
    m.headers.to = vec![mailseal::message::Mailbox::new("peer@example.com")];
    m
}

#[test]
fn ecdh_p256_recipient_both_ways_with_openssl() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = ec_recipient(dir.path());
    let a = alice_store(dir.path());
    import(&a, &[&crt]);
    let msg = to_peer();
    let sealed = seal(&a, &msg, dir.path());
    std::fs::write(dir.path().join("enc.eml"), &sealed).unwrap();
    // OpenSSL decrypts our KeyAgreeRecipientInfo and verifies the signature inside.
    openssl(
        &[
            "cms",
            "-decrypt",
            "-in",
            "enc.eml",
            "-recip",
            crt.to_str().unwrap(),
            "-inkey",
            key.to_str().unwrap(),
            "-out",
            "signed.eml",
        ],
        dir.path(),
    );
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    openssl(
        &[
            "cms",
            "-verify",
            "-in",
            "signed.eml",
            "-CAfile",
            &k("ca.rsa.crt"),
            "-out",
            "inner.eml",
        ],
        dir.path(),
    );
    let inner = MailA2aMessage::parse(
        &std::fs::read(dir.path().join("inner.eml")).unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(inner.envelope_bytes(), msg.envelope_bytes());

    // The peer opens ours, and OpenSSL's with its default (SHA-1) and SHA-256 KDFs.
    let p = dir.path().join("peer-store");
    import(&p, &[&crt, &key, &fixture("rfc9216/alice.sign.crt")]);
    let store = DirectoryStore::open(&p).unwrap();
    let smime = Smime::new(&store);
    let policy = {
        let mut p = OpenPolicy::default();
        p.our_addresses = vec!["peer@example.com".into()];
        p
    };
    assert_eq!(
        smime.open(&sealed, &policy).unwrap().verdict.protection,
        Protection::SignedEncrypted
    );
    openssl_alice_signs(dir.path(), &msg, "osigned.eml", &[]);
    // OpenSSL's default KDF for EC recipients is X9.63 with SHA-1: with authenticated
    // (GCM) content it opens by default and the verdict says so (issue #60), as with
    // SHA-256; with CBC content it is legacy (below).
    let legacy = {
        let mut p = policy.clone();
        p.allow_legacy_cbc = true;
        p
    };
    // `-keyid`: the recipient named by its subject key identifier (rKeyId).
    for (extra, default_opens) in [
        (vec![], true),
        (vec!["-keyid"], true),
        (vec!["-keyopt", "ecdh_kdf_md:sha256"], true),
        (vec!["-keyid", "-keyopt", "ecdh_kdf_md:sha256"], true),
    ] {
        let sha1 = !extra.contains(&"ecdh_kdf_md:sha256");
        let mut args = vec![
            "cms",
            "-encrypt",
            "-aes-256-gcm",
            "-in",
            "osigned.eml",
            "-recip",
            crt.to_str().unwrap(),
            "-out",
            "oenc.eml",
        ];
        args.extend(extra.iter().copied());
        openssl(&args, dir.path());
        let raw = std::fs::read(dir.path().join("oenc.eml")).unwrap();
        match smime.open(&raw, &policy) {
            Ok(opened) if default_opens => {
                assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());
                assert_eq!(opened.verdict.protection, Protection::SignedEncrypted);
                let w = &opened.verdict.warnings;
                assert_eq!(
                    w.iter().any(|w| w.contains("SHA-1 X9.63 KDF")),
                    sha1,
                    "{extra:?}: {w:?}"
                );
            }
            Err(e) if !default_opens => assert!(e.to_string().contains("SHA-1 KDF"), "{e}"),
            other => panic!("{extra:?}: {:?}", other.map(|o| o.verdict)),
        }
        assert_eq!(
            smime.open(&raw, &legacy).unwrap().message.envelope_bytes(),
            msg.envelope_bytes()
        );
    }
}

#[test]
fn our_ecdh_wrapped_key_does_not_unwrap_under_a_zero_key() {
    use aws_lc_rs::key_wrap::{KeyEncryptionKey, KeyWrap, AES_256};
    use cms::enveloped_data::RecipientInfo;
    use der::Decode;
    let dir = tempfile::tempdir().unwrap();
    let (crt, _) = ec_recipient(dir.path());
    let a = alice_store(dir.path());
    import(&a, &[&crt]);
    let sealed = seal(&a, &to_peer(), dir.path());
    let info = cms::content_info::ContentInfo::from_der(&der_of(&sealed)).unwrap();
    let aed: cms::authenveloped_data::AuthEnvelopedData = info.content.decode_as().unwrap();
    let wrapped: Vec<Vec<u8>> = aed
        .recip_infos
        .0
        .iter()
        .filter_map(|ri| match ri {
            RecipientInfo::Kari(k) => Some(k.recipient_enc_keys[0].enc_key.as_bytes().to_vec()),
            _ => None,
        })
        .collect();
    assert_eq!(wrapped.len(), 1, "one ECDH recipient");
    assert_eq!(wrapped[0].len(), 40, "a wrapped 256-bit content key");
    let mut out = [0u8; 40];
    let zero = KeyEncryptionKey::new(&AES_256, &[0u8; 32]).unwrap();
    assert!(
        zero.unwrap(&wrapped[0], &mut out).is_err(),
        "the content key must not be wrapped under an all-zero key"
    );
}

#[test]
fn inspect_shows_layers_algorithms_recipients() {
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal(&alice_store(dir.path()), &request(), dir.path());
    let path = dir.path().join("enc.eml");
    std::fs::write(&path, &sealed).unwrap();
    let out = run(&["inspect", path.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("layer: S/MIME authEnveloped-data"), "{text}");
    assert!(text.contains("content encryption: aes-256-gcm"), "{text}");
    assert_eq!(
        text.matches("key transport rsaes-oaep").count(),
        2,
        "Bob and Alice's own copy: {text}"
    );
    assert!(!text.contains("secret plans"));
}

#[test]
fn a_large_json_travels_binary_inside_and_openssl_decrypts_and_verifies_it() {
    // RFC 8551 3.1.2: inside the binary CMS the machine part is not base64-encoded
    // again, so the message grows once (the outer base64), not twice. The JSON is
    // one line with no CR or LF, so OpenSSL's text-mode verification sees the bytes
    // that were signed.
    let dir = tempfile::tempdir().unwrap();
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "enc-big-1");
    env.set("correlationId", "enc-big");
    env.set("idempotencyKey", "enc-big-effect");
    let text = format!("Grüße\n{}", "lorem ipsum dolor ".repeat(20_000));
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-big", "role": "ROLE_USER", "parts": [{"text": text}]}}),
    );
    let msg = MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
    let json_len = msg.envelope_bytes().len();
    assert!(json_len > 300_000);
    let sealed = seal(&alice_store(dir.path()), &msg, dir.path());
    // Outer base64 (4/3 and line ends) plus headers, signature and certificates: far
    // below the 1.8x of base64 inside base64.
    assert!(
        (sealed.len() as f64) < json_len as f64 * 1.45,
        "{} bytes sealed for {json_len} bytes of JSON",
        sealed.len()
    );
    let inner = openssl_decrypts_and_verifies(dir.path(), &sealed);
    let inner_text = String::from_utf8_lossy(&inner);
    assert!(inner_text.contains("Content-Transfer-Encoding: binary\r\n"));
    assert!(inner
        .windows(msg.envelope_bytes().len())
        .any(|w| w == msg.envelope_bytes()));
    let parsed = MailA2aMessage::parse(&inner, &Default::default()).unwrap();
    assert_eq!(parsed.envelope_bytes(), msg.envelope_bytes());
    let store = DirectoryStore::open(bob_store(dir.path())).unwrap();
    let opened = Smime::new(&store)
        .open(&sealed, &OpenPolicy::default())
        .unwrap();
    assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());

    // The same through the command line: `seal --seven-bit-inside`.
    let plain = dir.path().join("big-plain.eml");
    std::fs::write(&plain, msg.to_rfc5322().unwrap()).unwrap();
    let alice_dir = dir.path().join("alice");
    let out = common::run(
        &[
            "seal",
            "--store",
            alice_dir.to_str().unwrap(),
            "--profile",
            "smime",
            "--seven-bit-inside",
            "--in",
            plain.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.len() as f64 > json_len as f64 * 1.7);
    let inner = openssl_decrypts_and_verifies(dir.path(), &out.stdout);
    assert!(!String::from_utf8_lossy(&inner).contains("Content-Transfer-Encoding: binary"));
    // A recipient that wants 7-bit inner entities gets base64 inside.
    let mut opts = mailseal::SealOptions::new(mailseal::Profile::Smime);
    opts.binary_inside = false;
    let alice = DirectoryStore::open(dir.path().join("alice")).unwrap();
    let seven_bit = mailseal::Sealer::seal(&Smime::new(&alice), &msg, &opts).unwrap();
    assert!(seven_bit.len() as f64 > json_len as f64 * 1.7);
    let opened = Smime::new(&store)
        .open(&seven_bit, &OpenPolicy::default())
        .unwrap();
    assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());
}

/// Issue #60: the SHA-1 KDF with CBC content stays legacy: refused by default, and
/// opened with `--allow-legacy-cbc` with a warning. We never write it (our own P-256
/// sealing names the SHA-256 KDF at least).
#[test]
fn fail_sha1_kdf_with_cbc_content_is_legacy_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = ec_recipient(dir.path());
    let msg = to_peer();
    openssl_alice_signs(dir.path(), &msg, "osigned.eml", &[]);
    openssl(
        &[
            "cms",
            "-encrypt",
            "-aes-256-cbc",
            "-in",
            "osigned.eml",
            "-recip",
            crt.to_str().unwrap(),
            "-out",
            "ocbc.eml",
        ],
        dir.path(),
    );
    let raw = std::fs::read(dir.path().join("ocbc.eml")).unwrap();
    let p = dir.path().join("peer-store");
    import(&p, &[&crt, &key, &fixture("rfc9216/alice.sign.crt")]);
    let store = DirectoryStore::open(&p).unwrap();
    let mut policy = OpenPolicy::default();
    policy.our_addresses = vec!["peer@example.com".into()];
    let err = Smime::new(&store).open(&raw, &policy).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
    policy.allow_legacy_cbc = true;
    let opened = Smime::new(&store).open(&raw, &policy).unwrap();
    assert_eq!(opened.verdict.protection, Protection::Signed);
    assert!(
        opened
            .verdict
            .warnings
            .iter()
            .any(|w| w.contains("no integrity") && w.contains("SHA-1 KDF")),
        "{:?}",
        opened.verdict.warnings
    );
    // Ours to the same P-256 recipient: never the SHA-1 KDF.
    let a = alice_store(dir.path());
    import(&a, &[&crt]);
    let sealed = seal(&a, &msg, dir.path());
    let sha1kdf_oid = [0x2b, 0x81, 0x05, 0x10, 0x86, 0x48, 0x3f, 0x00, 0x02];
    let der = der_of(&sealed);
    assert!(!der.windows(sha1kdf_oid.len()).any(|w| w == sha1kdf_oid));
}
