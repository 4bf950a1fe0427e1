//! The draft header-protection S/MIME samples (signed by the sample LAMPS CA) verify,
//! and the one-part signed-data gives exactly its published `.inner` payload.

mod common;

use common::data;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::{OpenError, OpenPolicy, Opener};
use mailseal::smime::Smime;

fn store(dir: &std::path::Path, trust_ca: bool) -> DirectoryStore {
    let store = DirectoryStore::open(dir.join("s")).unwrap();
    if trust_ca {
        let ca = std::fs::read(data("header-protection/sample-ca.pem")).unwrap();
        store.import(&ca, "sample-ca.pem", true).unwrap();
    }
    store
}

#[test]
fn onepart_signed_data_gives_the_published_inner_payload() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), true);
    let raw = std::fs::read(data("header-protection/smime-onepart-signed.eml")).unwrap();
    let signed = Smime::new(&store)
        .verified_entity(&raw, &OpenPolicy::default())
        .unwrap();
    let inner = std::fs::read(data("header-protection/smime-onepart-signed.inner")).unwrap();
    let crlf = |b: &[u8]| String::from_utf8_lossy(b).replace("\r\n", "\n");
    assert_eq!(crlf(&signed.entity), crlf(&inner));
    match signed.signer {
        mailseal::seal::SignerIdentity::Certificate { emails, .. } => {
            assert_eq!(emails, vec!["alice@smime.example"])
        }
        other => panic!("{other:?}"),
    }
    // It is not a MailA2A message, so opening it as one is refused after verification.
    assert!(matches!(
        Smime::new(&store).open(&raw, &OpenPolicy::default()),
        Err(OpenError::Malformed(_))
    ));
}

#[test]
fn multipart_signed_sample_verifies_and_carries_protected_headers() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), true);
    let raw = std::fs::read(data("header-protection/smime-multipart-signed.eml")).unwrap();
    let signed = Smime::new(&store)
        .verified_entity(&raw, &OpenPolicy::default())
        .unwrap();
    let text = String::from_utf8_lossy(&signed.entity);
    assert!(text.contains("protected-headers=\"v1\""), "{text}");
    assert!(text.contains("Subject: The FooCorp contract"));
}

#[test]
fn fail_without_the_sample_ca_the_signer_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), false);
    let raw = std::fs::read(data("header-protection/smime-onepart-signed.eml")).unwrap();
    let err = Smime::new(&store)
        .verified_entity(&raw, &OpenPolicy::default())
        .unwrap_err();
    assert!(matches!(err, OpenError::NoUsableKey(_)), "{err}");
}
