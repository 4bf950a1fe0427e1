//! The key ceremony: a key made with a PKCS#10 request, the request checked and
//! issued from by an OpenSSL test CA, the issued certificate imported onto the key,
//! and mail signed with it verified by `openssl cms -verify` against that CA.

use super::common::{openssl, openssl_issue, openssl_test_ca};
use super::kit::{self, read};

#[test]
fn a_csr_is_issued_by_an_openssl_ca_and_the_certificate_signs_mail() {
    let h = kit::smime();
    let d = h.dir.path();
    openssl_test_ca(d, "Test Treasury CA");
    for (store, extra) in [
        ("treasury", vec![]),
        ("treasury-rsa", vec!["--algorithm", "rsa2048"]),
    ] {
        let csr = h.p(&format!("{store}.csr"));
        let mut args = vec![
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            "treasury@example.org",
            "--csr",
            &csr,
        ];
        args.extend(extra);
        h.ok(store, &args, b"");
        assert!(read(&csr).starts_with(b"-----BEGIN CERTIFICATE REQUEST-----"));
        let text = openssl(&["req", "-in", &csr, "-verify", "-noout", "-text"], d);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&text.stdout),
            String::from_utf8_lossy(&text.stderr)
        );
        assert!(
            all.contains("verify OK") || all.contains("self-signature ok"),
            "{all}"
        );
        assert!(all.contains("email:treasury@example.org"), "{all}");
        assert!(all.contains("Digital Signature, Non Repudiation"), "{all}");
        let issued = h.p(&format!("{store}.pem"));
        openssl_issue(d, &csr, &issued);
        // Imported without a key file: bound to the key the request was made with.
        let out = h.ok(store, &["key", "import", &issued], b"");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("+secret"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        h.ok(store, &["key", "import", "--trusted", &h.p("ca.pem")], b"");
        let env = serde_json::json!({"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request",
            "operation":"tasks/get","messageId":"t-1","correlationId":"c","sequence":0,"final":false,
            "payload":{"id":"task-1"}});
        std::fs::write(d.join("t.json"), env.to_string()).expect("write");
        let plain = h.p("t.eml");
        h.ok(
            store,
            &[
                "compose",
                "--from",
                "treasury@example.org",
                "--to",
                "bob@example.com",
                "--in",
                &h.p("t.json"),
                "--out",
                &plain,
            ],
            b"",
        );
        let signed = h.p(&format!("{store}.signed.eml"));
        h.ok(
            store,
            &[
                "seal",
                "--profile",
                "smime",
                "--sign-only",
                &plain,
                "--out",
                &signed,
            ],
            b"",
        );
        openssl(
            &[
                "cms",
                "-verify",
                "-in",
                &signed,
                "-CAfile",
                "ca.pem",
                "-out",
                "/dev/null",
            ],
            d,
        );
    }
}

#[test]
fn key_export_public_writes_no_secret_for_any_kind() {
    let h = kit::openpgp();
    let list = |store: &str| {
        let out = h.ok(store, &["key", "list", "--json"], b"");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")
    };
    let fpr = list("offline")[0]["fingerprint"]
        .as_str()
        .expect("fpr")
        .to_string();
    let out = h.ok("offline", &["key", "export", "--public", &fpr], b"");
    assert!(String::from_utf8_lossy(&out.stdout).contains("BEGIN PGP PUBLIC KEY BLOCK"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PRIVATE"));
    let j = kit::jws("es256");
    let out = j.ok("offline", &["key", "list", "--json"], b"");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let fpr = v[0]["fingerprint"].as_str().expect("fpr").to_string();
    let out = j.ok("offline", &["key", "export", "--public", &fpr], b"");
    let jwk: serde_json::Value = serde_json::from_slice(&out.stdout).expect("jwk");
    assert!(jwk.get("d").is_none() && jwk["kty"] == "EC", "{jwk}");
    let s = kit::smime();
    let out = s.ok("offline", &["key", "list", "--json"], b"");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for e in v.as_array().expect("array") {
        let fpr = e["fingerprint"].as_str().expect("fpr");
        let out = s.ok("offline", &["key", "export", "--public", fpr], b"");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("BEGIN CERTIFICATE") && !text.contains("PRIVATE"),
            "{text}"
        );
    }
}
