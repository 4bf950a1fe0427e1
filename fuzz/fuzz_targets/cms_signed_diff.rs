//! Differential: our CMS SignedData verdict against OpenSSL's on the same bytes.
//!
//! Input: a big-endian `u16` content length, the content, then a detached CMS
//! ContentInfo (DER or BER). We verify it with [`Smime::verify_detached_cms`] against a
//! store that trusts the RFC 9216 CAs (and holds a P-256 signer issued under the RSA
//! one, `fuzz/fixtures/cms/`); OpenSSL verifies it with `CMS_verify` in binary mode
//! against an `X509_STORE` holding the same CAs, as `openssl cms -verify -binary
//! -content` would. Both check every signature and the signer's chain at the current
//! time.
//!
//! Invariant: **we never accept what OpenSSL refuses**, but for what OpenSSL cannot
//! check (Ed25519) or cannot decode in a certificate the verdict does not use. The
//! other direction (OpenSSL accepts, we refuse) is allowed only where we are stricter on purpose, each class
//! named in `stricter` below with its reason: an algorithm outside our list, or a
//! structure we refuse as malformed. A refusal for a bad signature, a changed digest
//! or an untrusted signer where OpenSSL accepts is a disagreement. Ed25519
//! signatures are checked by us only: OpenSSL 3.0 cannot (`openssl_cannot`).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::{OpenError, OpenPolicy, SignerIdentity};
use mailseal::{Classify, ErrorKind};
use mailseal::smime::Smime;
use openssl::cms::{CMSOptions, CmsContentInfo};
use openssl::x509::store::{X509Store, X509StoreBuilder};
use openssl::x509::X509;

const RFC9216: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../keys-fixtures/rfc9216/");
const CAS: [&str; 2] = ["ca.rsa.crt", "ca.25519.crt"];

fn read(path: String) -> Vec<u8> {
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

fn store() -> &'static DirectoryStore {
    static STORE: OnceLock<(tempfile::TempDir, DirectoryStore)> = OnceLock::new();
    &STORE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let store = DirectoryStore::open(dir.path().join("s")).expect("store");
            for ca in CAS {
                store
                    .import(&read(format!("{RFC9216}{ca}")), ca, true)
                    .expect("import CA");
            }
            (dir, store)
        })
        .1
}

fn openssl_store() -> &'static X509Store {
    static STORE: OnceLock<X509Store> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut b = X509StoreBuilder::new().expect("X509 store");
        for ca in CAS {
            b.add_cert(X509::from_pem(&read(format!("{RFC9216}{ca}"))).expect("CA"))
                .expect("add CA");
        }
        b.build()
    })
}

/// Where we refuse what OpenSSL accepts, on purpose. `None`: not on purpose.
fn stricter(e: &OpenError) -> Option<&'static str> {
    let text = e.to_string();
    // We verify SHA-256/384/512 digests and a closed list of signature algorithms
    // (DESIGN, algorithms); OpenSSL 3.0 also takes SHA-1, MD5 and others.
    if text.contains("unsupported algorithm") {
        return Some("an algorithm outside our list");
    }
    // Structure: we decode DER (BER only where streaming signers write it), check
    // the unsigned version numbers against the signer identifiers (RFC 5652 5.1,
    // 5.3), and take id-data content only (RFC 8551 3.1); OpenSSL reads past all of
    // these. Found by this target on 2026-12-03: a SignerInfo version that does not
    // match its identifier, an eContentType other than id-data
    // (`tests/cases/differential/`).
    // The signer identifier names its certificate's issuer byte for byte: OpenSSL
    // compares names as RFC 5280 7.1 does (case-folded, white space collapsed), so
    // "CErtification" finds the certificate of "Certification" (found 2026-12-03).
    // The identifier is not signed; matching it loosely gains nothing.
    if text.contains("no signer certificate") {
        return Some("a signer identifier that is not the certificate's, byte for byte");
    }
    if e.kind() == ErrorKind::Malformed {
        return Some("a structure we refuse as malformed");
    }
    None
}

/// Where OpenSSL refuses what we accept because it cannot check it. OpenSSL 3.0 does
/// not verify Ed25519 SignedData (RFC 8419): `eddsa_digest_signverify_init: invalid
/// digest`, whatever the digest; 3.2 does.
fn openssl_cannot(algorithm: &str) -> bool {
    algorithm == "ed25519"
}

/// OpenSSL refuses to decode the whole SignedData when any certificate it carries
/// breaks its rules (a name attribute in a string type RFC 5280 does not allow, found
/// 2026-12-03); we decode the certificates we use. Allowed when the signer's own
/// certificate is one OpenSSL reads: the unreadable one is not used for the verdict.
fn unused_certificate_unreadable(der: &[u8], signer: &SignerIdentity, openssl: &str) -> bool {
    let SignerIdentity::Certificate { fingerprint, .. } = signer else {
        return false;
    };
    if !openssl.contains("Field=certificates") {
        return false;
    }
    // Every DER SEQUENCE with a two-byte length is a candidate certificate.
    (0..der.len().saturating_sub(4)).any(|at| {
        if der[at..at + 2] != [0x30, 0x82] {
            return false;
        }
        let len = usize::from(u16::from_be_bytes([der[at + 2], der[at + 3]])) + 4;
        let Some(tlv) = der.get(at..at + len) else {
            return false;
        };
        let Ok(cert) = <x509_cert::Certificate as der::Decode>::from_der(tlv) else {
            return false;
        };
        let key = cert
            .tbs_certificate()
            .subject_public_key_info()
            .subject_public_key
            .raw_bytes();
        mailseal::keystore::fingerprint(key) == *fingerprint && X509::from_der(tlv).is_ok()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let len = usize::from(u16::from_be_bytes(*len));
    if len > rest.len() {
        return;
    }
    let (content, der) = rest.split_at(len);

    let smime = Smime::new(store());
    let ours = smime.verify_detached_cms(der, content, &OpenPolicy::default());
    let theirs = CmsContentInfo::from_der(der).and_then(|mut cms| {
        cms.verify(
            None,
            Some(openssl_store()),
            Some(content),
            None,
            CMSOptions::BINARY,
        )
    });
    match (&ours, &theirs) {
        (Ok(_), Ok(())) | (Err(_), Err(_)) => {}
        (Ok(v), Err(_)) if openssl_cannot(v.algorithm) => {}
        (Ok(v), Err(e)) if unused_certificate_unreadable(der, &v.signer, &e.to_string()) => {}
        (Ok(v), Err(e)) => panic!("we accept a signature OpenSSL refuses ({e}): {v:?}"),
        (Err(e), Ok(())) => {
            if stricter(e).is_none() {
                panic!("OpenSSL accepts a signature we refuse: {e}");
            }
        }
    }
});
