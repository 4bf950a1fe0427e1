//! Unread forms (THREATS.md), issue 55 finding 3: a CRL of a form the revocation check
//! does not implement (an issuingDistributionPoint that scopes it, a delta CRL, a
//! critical extension nobody knows) is refused at `key import` with the extension
//! named, never stored and then skipped as if it revoked nothing; one a store already
//! holds (written before this rule) refuses its issuer's certificates.
//!
//! The CRLs are made by the real `openssl ca -gencrl` with the extensions given.

use std::path::PathBuf;

use crate::common::{openssl, run};
use crate::fail_path::{
    assert_refused, forged, import, open, victim, Pki, CEO, NOW_END, NOW_START,
};

/// The root's CRL (PEM, listing what it revoked) with the CRL extensions `exts`.
fn crl_with(pki: &Pki, name: &str, exts: &str) -> PathBuf {
    let cnf = pki.dir.join("ca.cnf");
    let mut text = std::fs::read_to_string(&cnf).unwrap();
    text.push_str(&format!(
        "\n[{name}]\nauthorityKeyIdentifier = keyid:always\n{exts}\n"
    ));
    std::fs::write(&cnf, text).unwrap();
    let out = format!("{name}.crl.pem");
    openssl(
        &[
            "ca", "-config", "ca.cnf", "-gencrl", "-keyfile", "root.key", "-cert", "root.crt",
            "-crlexts", name, "-out", &out,
        ],
        &pki.dir,
    );
    pki.dir.join(out)
}

/// The forms, each with what the refusal names.
const FORMS: [(&str, &str, &str); 5] = [
    (
        "delta",
        "2.5.29.27 = critical,DER:02:01:01",
        "delta CRL (deltaCRLIndicator, 2.5.29.27), which is not supported",
    ),
    (
        "idp_user",
        "2.5.29.28 = critical,DER:30:03:81:01:FF",
        "issuingDistributionPoint extension (2.5.29.28",
    ),
    (
        "idp_ca_noncritical",
        "2.5.29.28 = DER:30:03:82:01:FF",
        "issuingDistributionPoint extension (2.5.29.28",
    ),
    (
        "idp_indirect",
        "2.5.29.28 = critical,DER:30:03:84:01:FF",
        "issuingDistributionPoint extension (2.5.29.28",
    ),
    (
        "unknown_critical",
        "1.3.6.1.4.1.99999.1 = critical,DER:05:00",
        "critical extension 1.3.6.1.4.1.99999.1 that is not supported",
    ),
];

#[test]
fn fail_unread_forms_crls_we_do_not_implement_are_refused_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.leaf("ceo", "root", CEO, "");
    pki.revoke("ceo", "root");
    let store = victim(dir.path(), &root);
    let msg = forged(&pki, "ceo", &[]);
    for (name, exts, named) in FORMS {
        let crl = crl_with(&pki, name, exts);
        let out = run(
            &[
                "key",
                "import",
                "--store",
                store.to_str().unwrap(),
                crl.to_str().unwrap(),
            ],
            b"",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{name}: {stderr}");
        assert!(stderr.contains("CRL not imported"), "{name}: {stderr}");
        assert!(stderr.contains(named), "{name}: {named:?} in {stderr}");
        assert!(
            stderr.contains("import the issuer's complete, direct CRL"),
            "{name}: {stderr}"
        );
        // Nothing was stored: the store lists no CRL.
        let listed = run(&["key", "list", "--store", store.to_str().unwrap()], b"");
        assert!(
            !String::from_utf8_lossy(&listed.stdout).contains("crl"),
            "{name}: {}",
            String::from_utf8_lossy(&listed.stdout)
        );
    }
    // The complete CRL of the same issuer imports, and revokes.
    import(&store, &[&pki.crl("root")], false);
    assert_refused(
        &open(&store, &msg, &["--stateless"]),
        "certificate CN=ceo is revoked",
    );
}

#[test]
fn fail_unread_forms_a_held_crl_we_cannot_read_fails_closed() {
    // A store written before import refused these forms holds a delta CRL of the
    // root: the root's certificates are refused until it is deleted, never accepted
    // because the CRL was skipped.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.leaf("ceo", "root", CEO, "");
    let store = victim(dir.path(), &root);
    let msg = forged(&pki, "ceo", &[]);
    assert_eq!(open(&store, &msg, &["--stateless"]).status.code(), Some(0));
    pki.revoke("ceo", "root");
    let (_, exts, _) = FORMS[0];
    let pem = std::fs::read_to_string(crl_with(&pki, "delta", exts)).unwrap();
    let der = {
        use base64::Engine;
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    };
    // Written into the store's database as an earlier version's import did.
    let db = rusqlite::Connection::open(store.join("mailseal.db")).unwrap();
    db.execute(
        "INSERT INTO x509_crl (fingerprint, der) VALUES ('0123456789abcdef', ?1)",
        [der],
    )
    .unwrap();
    drop(db);
    assert_refused(
        &open(&store, &msg, &["--stateless"]),
        "revocation of certificate CN=ceo cannot be checked",
    );
    assert_refused(&open(&store, &msg, &["--stateless"]), "delta CRL");
}
