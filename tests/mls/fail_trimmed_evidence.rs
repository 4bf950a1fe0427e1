//! Trimmed evidence (THREATS.md), issue 55 finding 2, for MLS: Alice's leaf is
//! certified by her S/MIME certificate, which a corporate sub-CA issued. The binding
//! carries only her certificate; the victim's store builds the chain from its own
//! anchor and the sub-CA it imported, and decides revocation again on every message:
//! the cache of verified bindings keeps the signature work, not the verdict, so the
//! sub-CA's CRL imported after caching refuses the very next message. One store per
//! party; the certificates and the CRL are made by the real `openssl ca`.

use std::path::Path;

use crate::common;

use common::mls::ok;
use common::openssl;
use mailseal::keystore::{KeyStore, SqliteStore};
use mailseal::mls::authentication::statement;
use mailseal::mls::{Authenticator, StoreAuthenticator, VerifiedBindings};

const ALICE: &str = "alice@corp.example";

/// An `openssl ca` database in `dir` issuing `name.crt` (key `name.key`, PKCS#8
/// P-256) with the extension lines `ext`, signed by `issuer` (`None`: self-signed).
fn issue(dir: &Path, name: &str, issuer: Option<&str>, ext: &str) {
    if !dir.join("ca.cnf").exists() {
        std::fs::write(
            dir.join("ca.cnf"),
            "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\n\
             serial = serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n\
             copy_extensions = none\ndefault_crl_days = 30\n\
             crl_extensions = crl_ext\n[p]\ncommonName = supplied\n\
             [crl_ext]\nauthorityKeyIdentifier = keyid:always\n",
        )
        .unwrap();
        std::fs::write(dir.join("index.txt"), "").unwrap();
        std::fs::write(dir.join("serial"), "1000\n").unwrap();
    }
    let (key, csr, crt, extfile) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    openssl(
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &key,
        ],
        dir,
    );
    let subj = format!("/CN={name}");
    openssl(
        &["req", "-new", "-key", &key, "-subj", &subj, "-out", &csr],
        dir,
    );
    std::fs::write(dir.join(&extfile), ext).unwrap();
    let mut args = vec![
        "ca", "-batch", "-config", "ca.cnf", "-notext", "-in", &csr, "-out", &crt, "-days", "3650",
        "-extfile", &extfile,
    ];
    let (ic, ik);
    match issuer {
        None => args.extend(["-selfsign", "-keyfile", &key]),
        Some(i) => {
            ic = format!("{i}.crt");
            ik = format!("{i}.key");
            args.extend(["-cert", &ic, "-keyfile", &ik]);
        }
    }
    openssl(&args, dir);
}

const CA_EXT: &str = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";

#[test]
fn fail_trimmed_evidence_an_mls_leaf_whose_sub_ca_revokes_it_after_caching() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    issue(&pki, "root", None, CA_EXT);
    issue(&pki, "corp-ca", Some("root"), CA_EXT);

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
    openssl(
        &[
            "ca",
            "-config",
            "ca.cnf",
            "-revoke",
            alice_pem.to_str().unwrap(),
            "-keyfile",
            "corp-ca.key",
            "-cert",
            "corp-ca.crt",
        ],
        &pki,
    );
    openssl(
        &[
            "ca",
            "-config",
            "ca.cnf",
            "-gencrl",
            "-keyfile",
            "corp-ca.key",
            "-cert",
            "corp-ca.crt",
            "-out",
            "corp-ca.crl.pem",
        ],
        &pki,
    );
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
