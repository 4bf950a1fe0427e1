//! Issue #17, the MLS authentication service, through the command line with a store
//! per party. Mallory controls everything but the victims' stores: her own keys, an
//! S/MIME certificate she made for the CEO's address, her own groups and her own mail.
//! The victims trust the group's CA. Each attack is refused with its exit code,
//! nothing on stdout, and the victim's MLS state as it was.

use std::path::{Path, PathBuf};

use crate::common;

use common::mls::{mailseal, ok};

const CEO: &str = "ceo@group.example";

/// Mallory's store for the CEO's address: the group's CA as her anchor (it is public),
/// a self-signed S/MIME certificate naming the CEO, and an MLS key it certifies.
/// Returns the store and the forged certificate's file.
fn forged_ceo(root: &Path, name: &str) -> (PathBuf, PathBuf) {
    forged_ceo_key(root, name).0
}

/// [`forged_ceo`], and the forged MLS key (hex).
fn forged_ceo_key(root: &Path, name: &str) -> ((PathBuf, PathBuf), String) {
    let store = root.join(name);
    let cert = root.join(format!("{name}.pem"));
    let (ca, _) = common::mls::test_ca(root);
    ok(
        &store,
        &["key", "import", "--trusted", ca.to_str().unwrap()],
    );
    ok(
        &store,
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            CEO,
            "--cert-out",
            cert.to_str().unwrap(),
        ],
    );
    let out = mailseal(
        &store,
        &["key", "generate", "--kind", "mls", "--email", CEO],
    );
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "reported on stderr, as for other kinds"
    );
    // "generated mls KEY Ed25519 ADDRESS"
    let line = String::from_utf8(out.stderr).unwrap();
    let key = line.split_whitespace().nth(2).unwrap().to_string();
    ((store, cert), key)
}

fn members(store: &Path, group: &str) -> serde_json::Value {
    serde_json::from_slice(&ok(store, &["mls", "members", "--group", group, "--json"])).unwrap()
}

fn groups(store: &Path) -> Vec<u8> {
    ok(store, &["mls", "members"])
}

/// The refusal: `code`, nothing on stdout, `needle` on stderr.
fn refused(out: &std::process::Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
    assert!(stderr.contains(needle), "{stderr}");
}

/// A KeyPackage mail of `email` from `store`.
fn key_package(store: &Path, email: &str, out: &Path) -> String {
    ok(
        store,
        &[
            "mls",
            "keypackage",
            "--email",
            email,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    out.to_str().unwrap().to_string()
}

#[test]
fn fail_a_welcome_into_a_group_whose_creator_claims_the_ceo() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let victim = root.join("victim");
    common::mls::mls_identity(root, &victim, "victim@group.example");
    let kp = key_package(&victim, "victim@group.example", &root.join("victim-kp.eml"));
    // Mallory's group: its only leaf says the CEO; she adds the victim.
    let (mallory, _) = forged_ceo(root, "mallory");
    let group = String::from_utf8(ok(&mallory, &["mls", "create", "--email", CEO])).unwrap();
    let add = root.join("add");
    ok(
        &mallory,
        &[
            "mls",
            "add",
            "--group",
            group.trim(),
            &kp,
            "--out-dir",
            add.to_str().unwrap(),
        ],
    );
    let welcome = add.join("welcome.eml");
    let welcome = welcome.to_str().unwrap();
    let before = groups(&victim);
    // Nobody may add the victim yet: refused before the Welcome is read (issue #58).
    refused(
        &mailseal(&victim, &["open", "--in", welcome]),
        6,
        "ceo@group.example may not add us",
    );
    // A real colleague, whose certificate the CA issued, may not add the victim either
    // until the victim's policy names who may (nobody by default).
    let boss = root.join("boss");
    common::mls::mls_identity(root, &boss, "boss@group.example");
    let real = String::from_utf8(ok(
        &boss,
        &["mls", "create", "--email", "boss@group.example"],
    ))
    .unwrap();
    let boss_add = root.join("boss-add");
    ok(
        &boss,
        &[
            "mls",
            "add",
            "--group",
            real.trim(),
            &kp,
            "--out-dir",
            boss_add.to_str().unwrap(),
        ],
    );
    let boss_welcome = boss_add.join("welcome.eml");
    let boss_welcome = boss_welcome.to_str().unwrap();
    refused(
        &mailseal(&victim, &["open", "--in", boss_welcome]),
        6,
        "boss@group.example may not add us",
    );
    // A victim that accepts invitations from anyone who authenticates still refuses
    // Mallory's, by either command: the CEO's leaf is certified by a key the victim
    // does not trust for that address.
    ok(&victim, &["mls", "inviters", "--allow", "*"]);
    for args in [
        &["open", "--in", welcome][..],
        &["mls", "join", "--in", welcome],
    ] {
        refused(
            &mailseal(&victim, args),
            4,
            "unauthenticated MLS credential: ceo@group.example",
        );
    }
    assert_eq!(groups(&victim), before, "no group joined");
    // The colleague's Welcome now joins: the refusals left the KeyPackage usable.
    let joined = ok(&victim, &["mls", "join", "--in", boss_welcome]);
    assert_eq!(String::from_utf8_lossy(&joined).trim(), real.trim());
    // The group's messages then mean nothing to the victim.
    let sealed = common::mls::send(
        &root.join("msg"),
        &common::mls::Agent {
            email: CEO.into(),
            store: mallory.clone(),
        },
        &[&common::mls::Agent {
            email: "victim@group.example".into(),
            store: victim.clone(),
        }],
        group.trim(),
        1,
    );
    refused(
        &mailseal(&victim, &["open", "--in", sealed.to_str().unwrap()]),
        5,
        "not a member",
    );
}

#[test]
fn fail_a_member_adds_a_leaf_named_after_someone_else() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let (agents, group) = common::mls::group(root, 3);
    // agent3 is Mallory: a real member, who adds a KeyPackage for the CEO certified by
    // the key she made for that address (her own store pins it, so she can).
    let ((forged, cert), forged_key) = forged_ceo_key(root, "mallory-ceo");
    let mallory = &agents[2];
    // In her own store, her anchor speaks for group.example: she accepts the change.
    ok(
        &mallory.store,
        &["key", "import", "--accept-changed", cert.to_str().unwrap()],
    );
    let kp = key_package(&forged, CEO, &root.join("ceo-kp.eml"));
    let add = root.join("mallory-add");
    ok(
        &mallory.store,
        &[
            "mls",
            "add",
            "--group",
            &group,
            &kp,
            "--out-dir",
            add.to_str().unwrap(),
        ],
    );
    let commit = add.join("commit.eml");
    for victim in &agents[..2] {
        let before = members(&victim.store, &group);
        refused(
            &mailseal(&victim.store, &["open", "--in", commit.to_str().unwrap()]),
            4,
            "unauthenticated MLS credential: ceo@group.example",
        );
        assert_eq!(members(&victim.store, &group), before, "{}", victim.email);
    }
    // The group's admin is not fooled by the same KeyPackage mail either.
    let admin_add = root.join("admin-add");
    refused(
        &mailseal(
            &agents[0].store,
            &[
                "mls",
                "add",
                "--group",
                &group,
                &kp,
                "--out-dir",
                admin_add.to_str().unwrap(),
            ],
        ),
        4,
        "unauthenticated MLS credential: ceo@group.example",
    );
    assert!(!admin_add.join("welcome.eml").exists());
    // The KeyPackage mail itself, opened, is reported as unauthenticated too.
    refused(
        &mailseal(&agents[0].store, &["open", "--in", &kp]),
        4,
        "ceo@group.example",
    );
    // Only the victim's own decision changes that: pinning that very key for the
    // address (as for a member on another MLS stack) makes the Commit apply.
    let victim = &agents[1];
    ok(
        &victim.store,
        &["mls", "pin", "--email", CEO, "--key", &forged_key],
    );
    let pins = String::from_utf8(ok(&victim.store, &["mls", "pin"])).unwrap();
    assert_eq!(pins.trim(), format!("{CEO} {forged_key}"));
    ok(&victim.store, &["open", "--in", commit.to_str().unwrap()]);
    assert_eq!(
        members(&victim.store, &group)["members"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}
