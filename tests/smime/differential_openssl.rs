//! The `cms_signed_diff` fuzz target's findings, replayed (`tests/cases/differential/`,
//! reasons in its README): detached SignedData that OpenSSL 3.0 (`CMS_verify`, binary,
//! the RFC 9216 CAs) accepts and we refuse on purpose. Each input is a big-endian
//! `u16` content length, the content, the ContentInfo.

use std::path::PathBuf;

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::OpenPolicy;
use mailseal::smime::Smime;
use mailseal::{Classify, ErrorKind};
use openssl::cms::{CMSOptions, CmsContentInfo};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;

use crate::common::fixture;

const CAS: [&str; 2] = ["rfc9216/ca.rsa.crt", "rfc9216/ca.25519.crt"];

/// (content, ContentInfo) of a finding.
fn case(name: &str) -> (Vec<u8>, Vec<u8>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases/differential")
        .join(name);
    let data = std::fs::read(&path).unwrap();
    let len = usize::from(u16::from_be_bytes([data[0], data[1]]));
    (data[2..2 + len].to_vec(), data[2 + len..].to_vec())
}

fn openssl_accepts(content: &[u8], der: &[u8]) -> bool {
    let mut store = X509StoreBuilder::new().unwrap();
    for ca in CAS {
        store
            .add_cert(X509::from_pem(&std::fs::read(fixture(ca)).unwrap()).unwrap())
            .unwrap();
    }
    let store = store.build();
    CmsContentInfo::from_der(der)
        .and_then(|mut cms| cms.verify(None, Some(&store), Some(content), None, CMSOptions::BINARY))
        .is_ok()
}

/// Our verdict: the error, which must exist.
fn our_refusal(content: &[u8], der: &[u8]) -> mailseal::seal::OpenError {
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    for ca in CAS {
        store
            .import(&std::fs::read(fixture(ca)).unwrap(), ca, true)
            .unwrap();
    }
    Smime::new(&store)
        .verify_detached_cms(der, content, &OpenPolicy::default())
        .expect_err("we refuse it")
}

/// The SignedData's eContentType is not id-data; S/MIME signs MIME entities, which
/// are id-data (RFC 8551 3.1).
#[test]
fn content_type_other_than_id_data() {
    let (content, der) = case("cms_signed_diff-not-id-data.bin");
    assert!(openssl_accepts(&content, &der));
    let e = our_refusal(&content, &der);
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    assert!(e.to_string().contains("not id-data"), "{e}");
}

/// A SignerInfo whose version does not match its signer identifier (RFC 5652 5.3:
/// 1 for issuerAndSerialNumber, 3 for subjectKeyIdentifier). Versions are not
/// signed; we check them exactly instead of ignoring them.
#[test]
fn signerinfo_version_that_does_not_match_its_identifier() {
    let (content, der) = case("cms_signed_diff-signerinfo-version.bin");
    assert!(openssl_accepts(&content, &der));
    let e = our_refusal(&content, &der);
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    assert!(e.to_string().contains("version"), "{e}");
}

/// The signer identifier's issuer is the certificate's with one letter's case changed
/// ("CErtification"): OpenSSL compares names as RFC 5280 7.1 does and finds the
/// certificate; we match the identifier byte for byte and find no signer.
#[test]
fn signer_identifier_that_names_the_issuer_in_another_case() {
    let (content, der) = case("cms_signed_diff-issuer-name-case.bin");
    assert!(openssl_accepts(&content, &der));
    let e = our_refusal(&content, &der);
    assert!(e.to_string().contains("no signer certificate"), "{e}");
}

/// The SignedData carries, beside Alice's certificate, a copy of the CA certificate
/// whose subject CN is a VisibleString: RFC 5280 allows only the DirectoryString
/// types there, and OpenSSL refuses to decode the whole SignedData. We do not use that
/// copy (the chain ends at the store's own CA) and accept Alice's signature.
#[test]
fn unused_certificate_openssl_cannot_read() {
    let (content, der) = case("cms_signed_diff-unused-certificate-openssl-cannot-read.bin");
    assert!(!openssl_accepts(&content, &der));
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    for ca in CAS {
        store
            .import(&std::fs::read(fixture(ca)).unwrap(), ca, true)
            .unwrap();
    }
    let signed = Smime::new(&store)
        .verify_detached_cms(&der, &content, &OpenPolicy::default())
        .unwrap();
    match signed.signer {
        mailseal::seal::SignerIdentity::Certificate { emails, .. } => {
            assert_eq!(emails, ["alice@smime.example"]);
        }
        other => panic!("{other:?}"),
    }
}
