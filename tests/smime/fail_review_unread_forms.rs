//! Attacker's review of issue 55 after the X.509 part (branch id-x509) was merged.
//!
//! 1. "Unread forms" / "Respelled keys": a CRL is matched to a certificate by the
//!    exact DER bytes of the issuer name. The corporate sub-CA's certificate is
//!    renewed (same key, same name, the name now encoded as PrintableString, as
//!    `string_mask = default` writes it), and the real `openssl ca -gencrl` with the
//!    renewed certificate writes the CRL that revokes the CEO. That CRL is the
//!    issuer's: its authorityKeyIdentifier matches, the issuer's key verifies it, and
//!    OpenSSL (`openssl verify -crl_check`) reports the CEO revoked. mailseal imports
//!    it with exit 0 and then never applies it: the pinned CEO certificate is
//!    accepted. A CRL held for an issuer (same key identifier, same name under RFC
//!    5280's comparison rules) that is not applied must fail closed or be refused at
//!    import, not count as "nothing revoked".
//! 2. "Trimmed evidence": a pinned certificate whose issuing sub-CA is revoked by the
//!    root's CRL is still accepted (the anchored path refuses it). The sub-CA is no
//!    longer a validated issuer, so nothing checks the pin's revocation; had the
//!    store also held the sub-CA's CRL, the same pin would fail closed ("cannot be
//!    checked"). The MLS twin is tests/mls/fail_review_trimmed_evidence.rs.

use crate::common::openssl;
use crate::fail_path::{assert_refused, forged, import, open, victim, Pki, CA_EXT, CEO};

fn opens(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// root -> corp-ca -> ceo.
fn sub_ca_pki(dir: &std::path::Path) -> Pki {
    let pki = Pki::new(dir);
    pki.root("", crate::fail_path::NOW_START, crate::fail_path::NOW_END);
    pki.ca("corp-ca", "root", CA_EXT);
    pki.leaf("ceo", "corp-ca", CEO, "");
    pki
}

#[test]
fn fail_review_unread_forms_crl_whose_issuer_name_is_encoded_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let pki = sub_ca_pki(dir.path());
    let d = &pki.dir;
    let store = victim(dir.path(), &d.join("root.crt"));
    import(&store, &[&d.join("corp-ca.crt"), &d.join("ceo.crt")], false);
    let msg = forged(&pki, "ceo", &[]);
    opens(&open(&store, &msg, &["--stateless"]));

    // The sub-CA's certificate renewed: same key and name, PrintableString encoding.
    std::fs::write(
        d.join("req-ps.cnf"),
        "[req]\ndistinguished_name=dn\nstring_mask=default\n[dn]\n",
    )
    .unwrap();
    openssl(
        &[
            "req",
            "-new",
            "-config",
            "req-ps.cnf",
            "-key",
            "corp-ca.key",
            "-subj",
            "/CN=corp-ca",
            "-out",
            "corp-ca-v2.csr",
        ],
        d,
    );
    std::fs::write(
        d.join("corp-ca-v2.ext"),
        format!("{CA_EXT}subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"),
    )
    .unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "corp-ca-v2.csr",
            "-CA",
            "root.crt",
            "-CAkey",
            "root.key",
            "-set_serial",
            "4242",
            "-days",
            "3650",
            "-extfile",
            "corp-ca-v2.ext",
            "-out",
            "corp-ca-v2.crt",
        ],
        d,
    );
    // The CA revokes the CEO and issues its CRL with the renewed certificate.
    pki.revoke("ceo", "corp-ca");
    openssl(
        &[
            "ca",
            "-config",
            "ca.cnf",
            "-gencrl",
            "-keyfile",
            "corp-ca.key",
            "-cert",
            "corp-ca-v2.crt",
            "-out",
            "corp-ca-v2.crl.pem",
        ],
        d,
    );
    // OpenSSL: this CRL revokes the CEO.
    let verify = std::process::Command::new("openssl")
        .args([
            "verify",
            "-crl_check",
            "-CAfile",
            "root.crt",
            "-untrusted",
            "corp-ca.crt",
            "-CRLfile",
            "corp-ca-v2.crl.pem",
            "ceo.crt",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stdout).into_owned()
        + &String::from_utf8_lossy(&verify.stderr);
    assert!(
        said.contains("certificate revoked"),
        "openssl verify: {said}"
    );

    let imported = crate::common::run(
        &[
            "key",
            "import",
            "--store",
            store.to_str().unwrap(),
            d.join("corp-ca-v2.crl.pem").to_str().unwrap(),
        ],
        b"",
    );
    if imported.status.code() == Some(0) {
        let out = open(&store, &msg, &["--stateless"]);
        assert!(
            out.status.code() != Some(0),
            "the CRL revoking the CEO was imported (exit 0) and then not applied: the \
             revoked certificate opened: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn fail_review_trimmed_evidence_a_pinned_certificate_under_a_revoked_sub_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = sub_ca_pki(dir.path());
    let d = &pki.dir;
    let msg = forged(&pki, "ceo", &[]);
    pki.revoke("corp-ca", "root");
    let root_crl = pki.crl("root");

    // Control: anchored (not pinned), the revoked sub-CA breaks the path.
    let anchored = victim(&dir.path().join("anchored"), &d.join("root.crt"));
    import(&anchored, &[&d.join("corp-ca.crt"), &root_crl], false);
    assert_refused(
        &open(&anchored, &msg, &["--stateless"]),
        "certificate CN=corp-ca is revoked",
    );

    // Pinned: the same certificate, the same store evidence, opens.
    let pinned = victim(&dir.path().join("pinned"), &d.join("root.crt"));
    import(
        &pinned,
        &[&d.join("corp-ca.crt"), &d.join("ceo.crt"), &root_crl],
        false,
    );
    let out = open(&pinned, &msg, &["--stateless"]);
    assert!(
        out.status.code() != Some(0),
        "a pinned certificate issued by a sub-CA the root revoked was accepted: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same CRL (the issuer's, written with its renewed certificate) does not stop a
/// card signed by the revoked certificate from being imported as "signed by a trusted
/// key" (`key import --agent-card --require-signature`, exit 0); the CRL written with
/// the original certificate does refuse it.
#[test]
fn fail_review_unread_forms_card_signed_by_a_certificate_revoked_by_a_respelled_crl() {
    const ALICE: &str = "alice@corp.example";
    let dir = tempfile::tempdir().unwrap();
    let pki = sub_ca_pki(dir.path());
    let d = &pki.dir;
    let p = |f: &str| d.join(f).display().to_string();
    let run = |args: &[&str]| crate::common::run(args, b"");
    let ok = |args: &[&str]| {
        let out = run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(
        &[
            "pkcs8",
            "-topk8",
            "-nocrypt",
            "-in",
            "corp-ca.key",
            "-out",
            "corp-ca.p8",
        ],
        d,
    );
    ok(&[
        "key",
        "generate",
        "--store",
        &p("alice"),
        "--kind",
        "smime",
        "--email",
        ALICE,
        "--issuer-cert",
        &p("corp-ca.crt"),
        "--issuer-key",
        &p("corp-ca.p8"),
        "--cert-out",
        &p("alice.pem"),
    ]);
    import(&d.join("alice"), &[&d.join("corp-ca.crt")], false);
    ok(&[
        "card",
        "--store",
        &p("alice"),
        "--email",
        ALICE,
        "--sign",
        "--out",
        &p("card.json"),
    ]);

    // Renewed sub-CA certificate (same key, PrintableString name), as above.
    std::fs::write(
        d.join("req-ps.cnf"),
        "[req]\ndistinguished_name=dn\nstring_mask=default\n[dn]\n",
    )
    .unwrap();
    openssl(
        &[
            "req",
            "-new",
            "-config",
            "req-ps.cnf",
            "-key",
            "corp-ca.key",
            "-subj",
            "/CN=corp-ca",
            "-out",
            "corp-ca-v2.csr",
        ],
        d,
    );
    std::fs::write(
        d.join("corp-ca-v2.ext"),
        format!("{CA_EXT}subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"),
    )
    .unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "corp-ca-v2.csr",
            "-CA",
            "root.crt",
            "-CAkey",
            "root.key",
            "-set_serial",
            "4242",
            "-days",
            "3650",
            "-extfile",
            "corp-ca-v2.ext",
            "-out",
            "corp-ca-v2.crt",
        ],
        d,
    );
    openssl(
        &[
            "ca",
            "-config",
            "ca.cnf",
            "-revoke",
            "alice.pem",
            "-keyfile",
            "corp-ca.key",
            "-cert",
            "corp-ca.crt",
        ],
        d,
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
            "corp-ca-v2.crt",
            "-out",
            "v2.crl.pem",
        ],
        d,
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
            "v1.crl.pem",
        ],
        d,
    );

    let import_card = |store: &str, crl: &str| {
        let s = dir.path().join(store);
        import(&s, &[&d.join("root.crt")], true);
        import(&s, &[&d.join("corp-ca.crt"), &d.join(crl)], false);
        run(&[
            "key",
            "import",
            "--store",
            s.to_str().unwrap(),
            "--agent-card",
            &p("card.json"),
            "--require-signature",
        ])
    };
    // Control: the CRL written with the original certificate refuses the card.
    assert_ne!(import_card("v1", "v1.crl.pem").status.code(), Some(0));
    let out = import_card("v2", "v2.crl.pem");
    assert!(
        out.status.code() != Some(0),
        "a card signed by a revoked certificate was imported as trusted: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
