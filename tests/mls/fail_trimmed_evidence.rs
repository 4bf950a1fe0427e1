//! Trimmed evidence (THREATS.md), issue 55 finding 2, for MLS: Alice's leaf is
//! certified by her S/MIME certificate, which a corporate sub-CA issued. The binding
//! carries only her certificate; the victim's store builds the chain from its own
//! anchor and the sub-CA it imported, and decides revocation again on every message:
//! the cache of verified bindings keeps the signature work, not the verdict, so the
//! sub-CA's CRL imported after caching refuses the very next message. One store per
//! party; the certificates and the CRL are made by the real `openssl ca`.

use crate::common;

use common::mls::ok;
use common::pki::{Pki, CA_EXT, NOW_END, NOW_START};
use mailseal::keystore::{KeyStore, SqliteStore};
use mailseal::mls::authentication::statement;
use mailseal::mls::{Authenticator, StoreAuthenticator, VerifiedBindings};

const ALICE: &str = "alice@corp.example";

#[test]
fn fail_trimmed_evidence_an_mls_leaf_whose_sub_ca_revokes_it_after_caching() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let ca = Pki::new(&pki);
    ca.issue("root", None, CA_EXT, NOW_START, NOW_END);
    ca.issue("corp-ca", Some("root"), CA_EXT, NOW_START, NOW_END);

    // Alice's store: an S/MIME identity the sub-CA issued, which certifies her MLS key.
    let alice_dir = dir.path().join("alice");
    let alice_pem = dir.path().join("alice.pem");
    ok(
        &alice_dir,
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            ALICE,
            "--issuer-cert",
            pki.join("corp-ca.crt").to_str().unwrap(),
            "--issuer-key",
            pki.join("corp-ca.key").to_str().unwrap(),
            "--cert-out",
            alice_pem.to_str().unwrap(),
        ],
    );
    let alice = SqliteStore::open(&alice_dir.join("mailseal.db"), None).unwrap();
    let mls_key = [7u8; 32];
    let binding = StoreAuthenticator::new(&alice)
        .certify(ALICE, &statement(ALICE, &mls_key))
        .unwrap();

    // The victim trusts the root and imported the sub-CA (an intermediate of its own);
    // the binding does not carry it.
    let victim_dir = dir.path().join("victim");
    std::fs::create_dir_all(&victim_dir).unwrap();
    let victim = SqliteStore::open(&victim_dir.join("mailseal.db"), None).unwrap();
    let read = |f: &str| std::fs::read(pki.join(f)).unwrap();
    victim.import(&read("root.crt"), "root", true).unwrap();
    let unknown = StoreAuthenticator::new(&victim).verify(ALICE, &mls_key, Some(&binding));
    assert!(
        unknown
            .as_ref()
            .is_err_and(|e| e.contains("self-signed or unknown")),
        "{unknown:?}"
    );
    victim
        .import(&read("corp-ca.crt"), "corp-ca", false)
        .unwrap();

    let cache = VerifiedBindings::default();
    let auth = StoreAuthenticator::new(&victim).cached(&cache);
    auth.verify(ALICE, &mls_key, Some(&binding)).unwrap();
    // Cached: the next message is vouched for without verifying the signature again.
    assert!(auth.vouched(ALICE, &mls_key, &binding));

    // The sub-CA revokes Alice's certificate; the victim imports its CRL, well within
    // the cache's lifetime.
    ca.revoke_file(&alice_pem, "corp-ca");
    ca.crl("corp-ca");
    victim
        .import(&read("corp-ca.crl.pem"), "corp-ca CRL", false)
        .unwrap();
    // The next message: no longer vouched for, and verified afresh it is refused.
    assert!(!auth.vouched(ALICE, &mls_key, &binding));
    let refused = auth.verify(ALICE, &mls_key, Some(&binding));
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("is revoked")),
        "{refused:?}"
    );
    // And stays refused (the cache did not keep the old verdict).
    assert!(!auth.vouched(ALICE, &mls_key, &binding));
}
