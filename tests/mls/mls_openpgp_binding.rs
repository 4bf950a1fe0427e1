//! The authentication service with OpenPGP keys: agents without S/MIME certificates
//! certify their MLS keys with their OpenPGP keys, exchange certificates, and form a
//! group by mail; a key someone else made for one of their addresses certifies
//! nothing.

use std::path::{Path, PathBuf};

use crate::common;

use common::mls::{mailseal, ok, Agent};

/// An agent with an OpenPGP key (its certificate written to `root/NAME.asc`) and an
/// MLS key it certifies.
fn agent(root: &Path, name: &str) -> (Agent, PathBuf) {
    let email = format!("{name}@pgp-group.example");
    let store = root.join(name);
    let cert = root.join(format!("{name}.asc"));
    ok(
        &store,
        &[
            "key",
            "generate",
            "--kind",
            "openpgp",
            "--email",
            &email,
            "--cert-out",
            cert.to_str().unwrap(),
        ],
    );
    ok(
        &store,
        &["key", "generate", "--kind", "mls", "--email", &email],
    );
    (Agent { email, store }, cert)
}

#[test]
fn openpgp_keys_certify_mls_keys_and_a_forged_one_does_not() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let (ann, ann_cert) = agent(root, "ann");
    let (ben, ben_cert) = agent(root, "ben");
    ok(&ann.store, &["key", "import", ben_cert.to_str().unwrap()]);
    ok(&ben.store, &["key", "import", ann_cert.to_str().unwrap()]);
    ok(&ben.store, &["mls", "inviters", "--allow", &ann.email]);
    let group =
        String::from_utf8(ok(&ann.store, &["mls", "create", "--email", &ann.email])).unwrap();
    let group = group.trim();
    let kp = root.join("ben-kp.eml");
    ok(
        &ben.store,
        &[
            "mls",
            "keypackage",
            "--email",
            &ben.email,
            "--out",
            kp.to_str().unwrap(),
        ],
    );
    let add = root.join("add");
    ok(
        &ann.store,
        &[
            "mls",
            "add",
            "--group",
            group,
            kp.to_str().unwrap(),
            "--out-dir",
            add.to_str().unwrap(),
        ],
    );
    let joined = ok(
        &ben.store,
        &[
            "mls",
            "join",
            "--in",
            add.join("welcome.eml").to_str().unwrap(),
        ],
    );
    assert_eq!(String::from_utf8_lossy(&joined).trim(), group);
    let sealed = common::mls::send(&root.join("msg"), &ann, &[&ben], group, 1);
    let opened = ok(&ben.store, &["open", "--in", sealed.to_str().unwrap()]);
    let env: serde_json::Value = serde_json::from_slice(&opened).unwrap();
    assert_eq!(env["messageId"], "urn:uuid:group-1");

    // Mallory makes an OpenPGP key for ben's address and an MLS key it certifies;
    // ann, who holds ben's real certificate, refuses her KeyPackage (exit 4).
    let mallory = root.join("mallory");
    for kind in ["openpgp", "mls"] {
        ok(
            &mallory,
            &["key", "generate", "--kind", kind, "--email", &ben.email],
        );
    }
    let forged = root.join("forged-kp.eml");
    ok(
        &mallory,
        &[
            "mls",
            "keypackage",
            "--email",
            &ben.email,
            "--out",
            forged.to_str().unwrap(),
        ],
    );
    let out = mailseal(&ann.store, &["open", "--in", forged.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("unauthenticated MLS credential: ben@pgp-group.example"),
        "{stderr}"
    );
}
