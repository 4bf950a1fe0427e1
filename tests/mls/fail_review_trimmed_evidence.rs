//! Attacker's review of issue 55 (after the id-x509 merge), "Trimmed or padded
//! evidence" for MLS: Alice's leaf is certified by her S/MIME certificate, issued by
//! a corporate sub-CA; the victim trusts the root, imported the sub-CA and, as
//! operators do to encrypt to a peer, imported Alice's certificate (a pin). The root
//! then revokes the sub-CA (its key compromised) and the victim imports the root's
//! CRL: without the pin the binding is refused ("corp-ca is revoked"), with the pin it
//! still verifies, so Alice's leaf keeps sending. Against the built binary (a group
//! made with `mls create/add/join`, `seal --profile mls`) the same: exit 0 with the
//! pin, exit 4 without. The S/MIME twin is tests/smime/fail_review_unread_forms.rs.

use std::path::Path;

use crate::common;

use common::mls::ok;
use common::openssl;
use mailseal::keystore::{KeyStore, SqliteStore};
use mailseal::mls::authentication::statement;
use mailseal::mls::{Authenticator, StoreAuthenticator};

const ALICE: &str = "alice@corp.example";
const CA_EXT: &str = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";

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

#[test]
fn fail_review_trimmed_evidence_an_mls_leaf_certified_under_a_revoked_sub_ca_with_a_pin() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    issue(&pki, "root", None, CA_EXT);
    issue(&pki, "corp-ca", Some("root"), CA_EXT);

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

    // The root revokes the sub-CA.
    openssl(
        &[
            "ca",
            "-config",
            "ca.cnf",
            "-revoke",
            "corp-ca.crt",
            "-keyfile",
            "root.key",
            "-cert",
            "root.crt",
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
            "root.key",
            "-cert",
            "root.crt",
            "-out",
            "root.crl.pem",
        ],
        &pki,
    );
    let read = |f: &Path| std::fs::read(f).unwrap();

    for pinned in [false, true] {
        let victim_dir = dir.path().join(format!("victim-{pinned}"));
        std::fs::create_dir_all(&victim_dir).unwrap();
        let victim = SqliteStore::open(&victim_dir.join("mailseal.db"), None).unwrap();
        victim
            .import(&read(&pki.join("root.crt")), "root", true)
            .unwrap();
        victim
            .import(&read(&pki.join("corp-ca.crt")), "corp-ca", false)
            .unwrap();
        if pinned {
            victim.import(&read(&alice_pem), "alice", false).unwrap();
        }
        victim
            .import(&read(&pki.join("root.crl.pem")), "root CRL", false)
            .unwrap();
        let got = StoreAuthenticator::new(&victim).verify(ALICE, &mls_key, Some(&binding));
        assert!(
            got.as_ref().is_err_and(|e| e.contains("revoked")),
            "pinned={pinned}: a leaf certified under a revoked sub-CA verified: {got:?}"
        );
    }
}
