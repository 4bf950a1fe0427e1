//! The `cms_signed_diff` fuzz target's findings, replayed (`tests/cases/differential/`,
//! reasons in its README): detached SignedData that OpenSSL 3.0 (`CMS_verify`, binary,
//! the RFC 9216 CAs) accepts and we refuse on purpose. Each input is a big-endian
//! `u16` content length, the content, the ContentInfo.

use std::path::PathBuf;

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::{OpenError, OpenPolicy, SignerIdentity};
use mailseal::smime::{SignedEntity, Smime};
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

/// Our verdict on a finding, against a store that trusts the same CAs.
fn ours(content: &[u8], der: &[u8]) -> Result<SignedEntity, OpenError> {
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    for ca in CAS {
        store
            .import(&std::fs::read(fixture(ca)).unwrap(), ca, true)
            .unwrap();
    }
    Smime::new(&store).verify_detached_cms(der, content, &OpenPolicy::default())
}

/// OpenSSL accepts the finding; we refuse it with `kind` (when given), saying `words`.
fn openssl_accepts_we_refuse(name: &str, kind: Option<ErrorKind>, words: &str) {
    let (content, der) = case(name);
    assert!(openssl_accepts(&content, &der), "OpenSSL's verdict changed");
    let e = ours(&content, &der).expect_err("we refuse it");
    if let Some(kind) = kind {
        assert_eq!(e.kind(), kind, "{e}");
    }
    assert!(e.to_string().contains(words), "{e}");
}

/// The SignedData's eContentType is not id-data; S/MIME signs MIME entities, which
/// are id-data (RFC 8551 3.1).
#[test]
fn content_type_other_than_id_data() {
    openssl_accepts_we_refuse(
        "cms_signed_diff-not-id-data.bin",
        Some(ErrorKind::Malformed),
        "not id-data",
    );
}

/// A SignerInfo whose version does not match its signer identifier (RFC 5652 5.3:
/// 1 for issuerAndSerialNumber, 3 for subjectKeyIdentifier). Versions are not
/// signed; we check them exactly instead of ignoring them.
#[test]
fn signerinfo_version_that_does_not_match_its_identifier() {
    openssl_accepts_we_refuse(
        "cms_signed_diff-signerinfo-version.bin",
        Some(ErrorKind::Malformed),
        "version",
    );
}

/// The signer identifier's issuer is the certificate's with one letter's case changed
/// ("CErtification"): OpenSSL compares names as RFC 5280 7.1 does and finds the
/// certificate; we match the identifier byte for byte and find no signer.
#[test]
fn signer_identifier_that_names_the_issuer_in_another_case() {
    openssl_accepts_we_refuse(
        "cms_signed_diff-issuer-name-case.bin",
        None,
        "no signer certificate",
    );
}

/// The SignedData carries, beside Alice's certificate, a copy of the CA certificate
/// whose subject CN is a VisibleString: RFC 5280 allows only the DirectoryString
/// types there, and OpenSSL refuses to decode the whole SignedData. We do not use that
/// copy (the chain ends at the store's own CA) and accept Alice's signature.
#[test]
fn unused_certificate_openssl_cannot_read() {
    let (content, der) = case("cms_signed_diff-unused-certificate-openssl-cannot-read.bin");
    assert!(
        !openssl_accepts(&content, &der),
        "OpenSSL's verdict changed"
    );
    match ours(&content, &der).unwrap().signer {
        SignerIdentity::Certificate { emails, .. } => {
            assert_eq!(emails, ["alice@smime.example"]);
        }
        other => panic!("{other:?}"),
    }
}
