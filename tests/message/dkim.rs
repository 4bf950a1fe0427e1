//! DKIM: mailseal signs outbound mail and checks inbound signatures with a static key
//! map (no DNS). A pass is a transport signal in the verdict; a failure never refuses a
//! message the profile authenticated, and never counts as protection.

use crate::common;

use mailseal::dkim::{sign, verify, DkimSigningKey, KeyMap};

/// An Ed25519 and an RSA key made by OpenSSL, with their DNS TXT records.
fn keys(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String, &'static str)> {
    let mut out = Vec::new();
    for (name, args, kind) in [
        (
            "ed.pem",
            vec!["genpkey", "-algorithm", "ed25519"],
            "ed25519",
        ),
        (
            "rsa.pem",
            vec![
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ],
            "rsa",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["-out", name]);
        common::openssl(&a, dir);
        let der = common::openssl(&["pkey", "-in", name, "-pubout", "-outform", "DER"], dir).stdout;
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        // RFC 8463: an Ed25519 key is the bare 32 bytes; RSA the SubjectPublicKeyInfo.
        let p = if kind == "ed25519" {
            b64.encode(&der[der.len() - 32..])
        } else {
            b64.encode(&der)
        };
        out.push((dir.join(name), format!("v=DKIM1; k={kind}; p={p}"), kind));
    }
    out
}

fn message() -> Vec<u8> {
    let mut env = mailseal::Envelope::new(
        mailseal::Kind::Request,
        mailseal::Operation::TasksGet,
        "dkim-1",
    );
    env.set("payload", &serde_json::json!({"id": "task-1"}));
    mailseal::MailA2aMessage::new("agent@mail.example", &["peer@other.example"], env)
        .to_rfc5322()
        .unwrap()
}

#[test]
fn signed_by_mailseal_verifies_and_a_changed_body_fails() {
    let dir = tempfile::tempdir().unwrap();
    for (path, record, kind) in keys(dir.path()) {
        let key = DkimSigningKey::from_pkcs8(&std::fs::read(&path).unwrap(), "mail.example", kind)
            .unwrap();
        let signed = sign(&message(), &key).unwrap();
        assert!(signed.starts_with(b"DKIM-Signature:"));
        let mut map = KeyMap::new();
        map.insert(kind, "mail.example", &record).unwrap();
        let v = verify(&signed, &map);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].result, "pass", "{kind}: {v:?}");
        assert_eq!(v[0].domain.as_deref(), Some("mail.example"));
        // One byte of the body changed: the body hash no longer matches.
        let text = String::from_utf8(signed.clone()).unwrap();
        let changed = text.replacen("task-1", "task-2", 1);
        assert_ne!(changed, text);
        let v = verify(changed.as_bytes(), &map);
        assert_ne!(v[0].result, "pass", "{kind}");
        // A signed header changed: fail.
        let changed = text.replacen("Subject: A2A request", "Subject: A2A requesT", 1);
        assert_ne!(verify(changed.as_bytes(), &map)[0].result, "pass");
        // No key for the selector: not a pass, and no network was asked.
        assert_ne!(verify(&signed, &KeyMap::new())[0].result, "pass");
    }
    // Unsigned: none.
    assert_eq!(verify(&message(), &KeyMap::new())[0].result, "none");
}

#[test]
fn fail_bad_key_material() {
    assert!(DkimSigningKey::from_pkcs8(b"not a key", "d", "s").is_err());
    let mut map = KeyMap::new();
    assert!(map.insert("s", "d", "v=DKIM1; k=ed25519; p=@@@").is_err());
    assert!(KeyMap::from_json(br#"{"no-domainkey-here": "v=DKIM1; p="}"#).is_err());
}

#[test]
fn reported_in_the_verdict_never_refusing() {
    // S/MIME signed by Alice (RFC 9216 sample), DKIM-signed by her domain's server,
    // then the server-visible Subject altered in transit: the DKIM signal fails,
    // the S/MIME-authenticated message is still delivered, protection unchanged.
    let dir = tempfile::tempdir().unwrap();
    let (_alice, bob) = common::alice_signs_for_bob(dir.path());
    let alice_dir = dir.path().join("alice").display().to_string();
    let mut env = mailseal::Envelope::new(
        mailseal::Kind::Request,
        mailseal::Operation::TasksGet,
        "dkim-2",
    );
    env.set("payload", &serde_json::json!({"id": "task-1"}));
    let plain = mailseal::MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env)
        .to_rfc5322()
        .unwrap();
    let out = common::run(
        &[
            "--store",
            &alice_dir,
            "seal",
            "--profile",
            "smime",
            "--sign-only",
        ],
        &plain,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (path, record, kind) = keys(dir.path()).remove(0);
    let key =
        DkimSigningKey::from_pkcs8(&std::fs::read(path).unwrap(), "smime.example", kind).unwrap();
    let signed = sign(&out.stdout, &key).unwrap();
    let map = dir.path().join("dkim.json");
    std::fs::write(
        &map,
        serde_json::json!({format!("{kind}._domainkey.smime.example"): record}).to_string(),
    )
    .unwrap();
    let bob_s = bob.display().to_string();
    let report = dir.path().join("report.json");
    let open = |raw: &[u8]| {
        common::run(
            &[
                "--store",
                &bob_s,
                "open",
                "--stateless",
                "--dkim-keys",
                &map.display().to_string(),
                "--report",
                &report.display().to_string(),
            ],
            raw,
        )
    };
    let out = open(&signed);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("dkim (transport signal only): pass"));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["dkim"][0]["result"], "pass");
    assert_eq!(r["protection"], "signed");
    // In transit, a relay adds a footer line to a header DKIM covers but S/MIME does
    // not protect on the outside (the Date is re-folded): DKIM fails, S/MIME holds.
    let text = String::from_utf8(signed).unwrap();
    let tampered = text.replacen("MIME-Version: 1.0", "MIME-Version: 1.0 (relayed)", 1);
    assert_ne!(tampered, text);
    let out = open(tampered.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["dkim"][0]["result"], "fail", "{r}");
    assert_eq!(r["protection"], "signed");
}

#[test]
fn command_line_signs_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (path, record, kind) = keys(dir.path()).remove(1); // RSA
    let map = dir.path().join("keys.json");
    std::fs::write(
        &map,
        serde_json::json!({format!("{kind}._domainkey.mail.example"): record}).to_string(),
    )
    .unwrap();
    let out = common::run(
        &[
            "dkim",
            "sign",
            "--key",
            &path.display().to_string(),
            "--domain",
            "mail.example",
            "--selector",
            kind,
        ],
        &message(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let signed = out.stdout;
    let out = common::run(
        &["dkim", "verify", "--keys", &map.display().to_string()],
        &signed,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["result"], "pass");
    assert_eq!(line["domain"], "mail.example");
    let tampered = String::from_utf8(signed)
        .unwrap()
        .replacen("task-1", "task-9", 1);
    let out = common::run(
        &["dkim", "verify", "--keys", &map.display().to_string()],
        tampered.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(4));
}
