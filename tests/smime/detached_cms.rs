//! `Smime::verify_detached_cms`: a detached CMS SignedData over bytes, as `openssl cms
//! -verify -binary -content` checks it (the library call the CMS differential fuzz
//! target compares with OpenSSL). Made by `openssl cms -sign -binary`; refused when
//! the content changes, when the signer is unknown to the store (the attacker's own CA
//! and certificate naming the victim's address), and when the signature is by another
//! key than the certificate's.

use crate::common;

use common::{fixture, openssl};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::{OpenError, OpenPolicy, SignerIdentity};
use mailseal::smime::Smime;
use mailseal::{Classify, ErrorKind};

const CONTENT: &[u8] =
    b"Content-Type: application/a2a+json\r\n\r\n{\"bindingVersion\":\"1.0\"}\r\n";

/// A store that trusts the RFC 9216 RSA CA, as a receiver of Alice's mail would.
fn store(dir: &std::path::Path) -> DirectoryStore {
    let store = DirectoryStore::open(dir.join("store")).unwrap();
    let ca = std::fs::read(fixture("rfc9216/ca.rsa.crt")).unwrap();
    store.import(&ca, "ca.rsa.crt", true).unwrap();
    store
}

/// `openssl cms -sign -binary` over CONTENT by `cert`/`key`, DER.
fn openssl_sign(dir: &std::path::Path, cert: &str, key: &str, extra: &[&str]) -> Vec<u8> {
    std::fs::write(dir.join("content.bin"), CONTENT).unwrap();
    let mut args = vec![
        "cms",
        "-sign",
        "-binary",
        "-in",
        "content.bin",
        "-outform",
        "DER",
        "-out",
        "sig.der",
        "-signer",
        cert,
        "-inkey",
        key,
    ];
    args.extend_from_slice(extra);
    openssl(&args, dir);
    std::fs::read(dir.join("sig.der")).unwrap()
}

#[test]
fn openssl_detached_signature_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let cert = fixture("rfc9216/alice.sign.crt");
    let key = fixture("rfc9216/alice.sign.key");
    for extra in [&[][..], &["-md", "sha512"], &["-noattr"], &["-keyid"]] {
        let der = openssl_sign(
            dir.path(),
            cert.to_str().unwrap(),
            key.to_str().unwrap(),
            extra,
        );
        let signed = Smime::new(&store)
            .verify_detached_cms(&der, CONTENT, &OpenPolicy::default())
            .unwrap_or_else(|e| panic!("openssl cms -sign {extra:?}: {e}"));
        assert_eq!(signed.entity, CONTENT);
        match &signed.signer {
            SignerIdentity::Certificate {
                emails, trusted, ..
            } => {
                assert_eq!(emails, &["alice@smime.example"]);
                assert!(trusted);
            }
            other => panic!("signer {other:?}"),
        }
        assert!(
            signed.algorithm.starts_with("rsa-pkcs1-"),
            "{}",
            signed.algorithm
        );
    }
}

#[test]
fn fail_changed_content() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let der = openssl_sign(
        dir.path(),
        fixture("rfc9216/alice.sign.crt").to_str().unwrap(),
        fixture("rfc9216/alice.sign.key").to_str().unwrap(),
        &[],
    );
    let mut changed = CONTENT.to_vec();
    let at = changed.len() - 4;
    changed[at] ^= 1;
    let e = Smime::new(&store)
        .verify_detached_cms(&der, &changed, &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
    // Without signed attributes the signature covers the content itself.
    let der = openssl_sign(
        dir.path(),
        fixture("rfc9216/alice.sign.crt").to_str().unwrap(),
        fixture("rfc9216/alice.sign.key").to_str().unwrap(),
        &["-noattr"],
    );
    let e = Smime::new(&store)
        .verify_detached_cms(&der, &changed, &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
}

/// The attacker's own CA issues a certificate naming Alice; its signature is good,
/// and refused: the store trusts the RFC 9216 CA only.
#[test]
fn fail_attacker_ca_names_the_victim() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    common::openssl_test_ca(dir.path(), "evil");
    openssl(
        &[
            "req",
            "-new",
            "-nodes",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-keyout",
            "mallory.key",
            "-out",
            "mallory.csr",
            "-subj",
            "/CN=Alice Lovelace",
            "-addext",
            "subjectAltName=email:alice@smime.example",
            "-addext",
            "extendedKeyUsage=emailProtection",
            "-addext",
            "keyUsage=critical,digitalSignature",
        ],
        dir.path(),
    );
    common::openssl_issue(dir.path(), "mallory.csr", "mallory.crt");
    let der = openssl_sign(
        dir.path(),
        "mallory.crt",
        "mallory.key",
        &["-certfile", "ca.pem"],
    );
    let e = Smime::new(&store)
        .verify_detached_cms(&der, CONTENT, &OpenPolicy::default())
        .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Authentication | ErrorKind::Policy),
        "{e}"
    );
    assert!(matches!(e, OpenError::Profile { .. }), "{e:?}");
}

/// Alice's certificate carried, the signature made by another key: refused.
#[test]
fn fail_signature_by_another_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let alice = fixture("rfc9216/alice.sign.crt");
    let bob_key = fixture("rfc9216/bob.sign.key");
    let bob = fixture("rfc9216/bob.sign.crt");
    let good = openssl_sign(
        dir.path(),
        alice.to_str().unwrap(),
        fixture("rfc9216/alice.sign.key").to_str().unwrap(),
        &[],
    );
    let by_bob = openssl_sign(
        dir.path(),
        bob.to_str().unwrap(),
        bob_key.to_str().unwrap(),
        &[],
    );
    // Same length RSA-2048 signatures: Bob's signature value put in Alice's SignerInfo.
    let sig_at = |der: &[u8]| der.len() - 256;
    let mut forged = good.clone();
    let at = sig_at(&forged);
    forged[at..].copy_from_slice(&by_bob[sig_at(&by_bob)..]);
    assert_ne!(forged, good);
    let e = Smime::new(&store)
        .verify_detached_cms(&forged, CONTENT, &OpenPolicy::default())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
}
