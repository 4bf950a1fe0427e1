//! Issue 55: the CA certificates imported without `--trusted` are the store's own
//! intermediates, offered to path building (so a message cannot trim its issuer
//! away); anchors and end-entity certificates are not among them. Every store.

use crate::common;

use mailseal::keystore::{DirectoryStore, KeyStore};

#[test]
fn every_store_offers_its_imported_ca_certificates_as_intermediates() {
    let dir = tempfile::tempdir().unwrap();
    let mut stores: Vec<(&str, Box<dyn KeyStore>)> = vec![
        (
            "directory",
            Box::new(DirectoryStore::open(dir.path().join("dir-store")).unwrap()),
        ),
        (
            "sqlite",
            Box::new(
                mailseal::keystore::SqliteStore::open(&dir.path().join("s/mailseal.db"), None)
                    .unwrap(),
            ),
        ),
    ];
    if let Some(url) = common::postgres_database() {
        stores.push((
            "postgres",
            Box::new(mailseal::keystore::PostgresStore::connect(&url, None).unwrap()),
        ));
    }
    let read = |f: &str| std::fs::read(common::fixture(&format!("rfc9216/{f}"))).unwrap();
    for (name, store) in &stores {
        assert!(store.intermediates().unwrap().is_empty(), "{name}");
        // An anchor is not an intermediate; a leaf is not either.
        store.import(&read("ca.25519.crt"), "anchor", true).unwrap();
        store
            .import(&read("alice.sign.crt"), "leaf", false)
            .unwrap();
        assert!(store.intermediates().unwrap().is_empty(), "{name}");
        // A CA certificate imported without --trusted is.
        let entries = store.import(&read("ca.rsa.crt"), "sub-ca", false).unwrap();
        let got = store.intermediates().unwrap();
        assert_eq!(got.len(), 1, "{name}");
        assert_eq!(got[0].fingerprint, entries[0].fingerprint, "{name}");
    }
}
