//! A member renews its mail key: its peers drop the old certificate and pin the new
//! one. Until the member re-certifies its MLS key and updates in the group, its
//! messages no longer authenticate for them; after `key generate --kind mls` and
//! `mls update`, they do again.

use std::path::Path;

use crate::common;

use common::mls::{mailseal, ok, Agent};

/// A self-signed S/MIME identity for `agent`, its certificate written to `out`.
fn smime(agent: &Agent, out: &Path) {
    ok(
        &agent.store,
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            &agent.email,
            "--cert-out",
            out.to_str().unwrap(),
        ],
    );
}

/// The fingerprints of the certificates `store` holds for `email`.
fn certificates(store: &Path, email: &str) -> Vec<String> {
    let list: serde_json::Value =
        serde_json::from_slice(&ok(store, &["key", "list", "--json"])).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "certificate" && e["emails"][0] == email)
        .map(|e| e["fingerprint"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_renewed_mail_key_recertifies_the_mls_key_through_an_update() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let [ann, bob] = ["ann", "bob"].map(|n| Agent {
        email: format!("{n}@rotate.example"),
        store: root.join(n),
    });
    for (a, other) in [(&ann, &bob), (&bob, &ann)] {
        smime(a, &root.join(format!("{}.pem", a.email)));
        ok(
            &a.store,
            &["key", "generate", "--kind", "mls", "--email", &a.email],
        );
        let _ = other;
    }
    ok(
        &ann.store,
        &[
            "key",
            "import",
            root.join("bob@rotate.example.pem").to_str().unwrap(),
        ],
    );
    ok(
        &bob.store,
        &[
            "key",
            "import",
            root.join("ann@rotate.example.pem").to_str().unwrap(),
        ],
    );
    ok(&bob.store, &["mls", "inviters", "--allow", &ann.email]);
    let group =
        String::from_utf8(ok(&ann.store, &["mls", "create", "--email", &ann.email])).unwrap();
    let group = group.trim().to_string();
    let kp = root.join("bob-kp.eml");
    ok(
        &bob.store,
        &[
            "mls",
            "keypackage",
            "--email",
            &bob.email,
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
            &group,
            kp.to_str().unwrap(),
            "--out-dir",
            add.to_str().unwrap(),
        ],
    );
    ok(
        &bob.store,
        &[
            "mls",
            "join",
            "--in",
            add.join("welcome.eml").to_str().unwrap(),
        ],
    );
    let first = common::mls::send(&root.join("m1"), &bob, &[&ann], &group, 1);
    ok(&ann.store, &["open", "--in", first.to_str().unwrap()]);

    // Bob renews his S/MIME key and retires the old one (both would have the same
    // notBefore within a second, and the newest is what signs); Ann replaces his old
    // certificate with the new one.
    let old = certificates(&ann.store, &bob.email);
    assert_eq!(old.len(), 1);
    assert_eq!(certificates(&bob.store, &bob.email), old);
    let renewed = root.join("bob-renewed.pem");
    smime(&bob, &renewed);
    let mut retire = vec!["key", "delete"];
    retire.extend(old.iter().map(String::as_str));
    ok(&bob.store, &retire);
    let mut args = vec!["key", "delete"];
    args.extend(old.iter().map(String::as_str));
    ok(&ann.store, &args);
    ok(&ann.store, &["key", "import", renewed.to_str().unwrap()]);

    // His leaf still carries the old certification: refused (exit 4).
    let second = common::mls::send(&root.join("m2"), &bob, &[&ann], &group, 2);
    let out = mailseal(&ann.store, &["open", "--in", second.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("unauthenticated MLS credential: bob@rotate.example"),
        "{stderr}"
    );

    // Re-certified with the new key and carried by an update, it authenticates again.
    ok(
        &bob.store,
        &["key", "generate", "--kind", "mls", "--email", &bob.email],
    );
    let commit = common::mls::update(&bob, &group, &root.join("update"));
    ok(&ann.store, &["open", "--in", commit.to_str().unwrap()]);
    let third = common::mls::send(&root.join("m3"), &bob, &[&ann], &group, 3);
    let opened = ok(&ann.store, &["open", "--in", third.to_str().unwrap()]);
    let env: serde_json::Value = serde_json::from_slice(&opened).unwrap();
    assert_eq!(env["messageId"], "urn:uuid:group-3");
}
