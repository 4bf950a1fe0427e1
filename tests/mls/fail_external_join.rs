//! Issue #17, through the command line with a store per party: joining by GroupInfo.
//! A GroupInfo travels sealed to the one invited: Mallory cannot use one sealed to
//! someone else, nor one that leaked in clear. Invited herself, she joins under the
//! CEO's name: every member refuses her Commit (exit 6, nothing on stdout, the group
//! as it was) until the members turn external joins on; even then her leaf, certified
//! only by the S/MIME key she made for the CEO's address, does not authenticate
//! (exit 4), while a real joiner's does.

use crate::common;

use common::mls::{mailseal, ok};

const CEO: &str = "ceo@group.example";

fn members(store: &std::path::Path, group: &str) -> serde_json::Value {
    serde_json::from_slice(&ok(store, &["mls", "members", "--group", group, "--json"])).unwrap()
}

fn refused(out: &std::process::Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.contains(needle), "{stderr}");
}

/// `inviter` seals the group's GroupInfo to `to` (whose certificate it imports).
fn invite(root: &std::path::Path, inviter: &std::path::Path, group: &str, to: &str) -> String {
    let cert = root.join(format!("{to}.pem"));
    ok(inviter, &["key", "import", cert.to_str().unwrap()]);
    let info = root.join(format!("gi-{to}.eml"));
    ok(
        inviter,
        &[
            "mls",
            "group-info",
            "--group",
            group,
            "--to",
            to,
            "--out",
            info.to_str().unwrap(),
        ],
    );
    info.to_str().unwrap().to_string()
}

fn join(
    store: &std::path::Path,
    email: &str,
    info: &str,
    out: &std::path::Path,
) -> std::process::Output {
    mailseal(
        store,
        &[
            "mls",
            "join",
            "--external",
            "--email",
            email,
            "--in",
            info,
            "--out-dir",
            out.to_str().unwrap(),
        ],
    )
}

#[test]
fn fail_an_external_join_into_a_group_that_does_not_accept_them() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let (agents, group) = common::mls::group(root, 3);
    // Dan is invited: his GroupInfo is sealed to him.
    let dan = root.join("dan");
    common::mls::mls_identity(root, &dan, "dan@group.example");
    let for_dan = invite(root, &agents[0].store, &group, "dan@group.example");
    assert!(!std::fs::read(&for_dan)
        .unwrap()
        .windows(b"message/mls".len())
        .any(|w| w == b"message/mls"));
    // Mallory: a certificate of her own from the group's CA, and in her own store an
    // S/MIME key she made for the CEO's address and an MLS key it certifies.
    let mallory = root.join("mallory");
    common::mls::mls_identity(root, &mallory, "mallory@group.example");
    for kind in ["smime", "mls"] {
        ok(
            &mallory,
            &["key", "generate", "--kind", kind, "--email", CEO],
        );
    }
    let out_dir = root.join("mallory-out");
    // Dan's GroupInfo is not hers to open.
    refused(
        &join(&mallory, CEO, &for_dan, &out_dir),
        5,
        "mls join --external",
    );
    // A GroupInfo in clear (a copy written by the library) is refused as such.
    let clear = root.join("clear-gi.eml");
    {
        let m = mailseal::mls::Mls::open(&agents[0].store).unwrap();
        std::fs::write(&clear, m.group_info(&group).unwrap()).unwrap();
    }
    refused(
        &join(&mallory, CEO, clear.to_str().unwrap(), &out_dir),
        6,
        "in clear",
    );
    refused(
        &mailseal(&agents[1].store, &["open", "--in", clear.to_str().unwrap()]),
        6,
        "in clear",
    );
    // Invited herself, she joins as the CEO.
    let for_mallory = invite(root, &agents[0].store, &group, "mallory@group.example");
    let out = join(&mallory, CEO, &for_mallory, &out_dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let commit = out_dir.join("commit.eml");
    let commit = commit.to_str().unwrap();
    for a in &agents {
        let before = members(&a.store, &group);
        refused(
            &mailseal(&a.store, &["open", "--in", commit]),
            6,
            "does not accept external joins",
        );
        assert_eq!(
            members(&a.store, &group),
            before,
            "{}: group unchanged",
            a.email
        );
    }
    // A member that turns external joins on still refuses her: her leaf is not bound
    // to a key it trusts for the CEO's address.
    ok(
        &agents[1].store,
        &["mls", "external-joins", "--group", &group, "on"],
    );
    let before = members(&agents[1].store, &group);
    refused(
        &mailseal(&agents[1].store, &["open", "--in", commit]),
        4,
        "unauthenticated MLS credential: ceo@group.example",
    );
    assert_eq!(members(&agents[1].store, &group), before);
    // Dan, whose certificate the group's CA issued, is applied.
    let dan_out = root.join("dan-out");
    let out = join(&dan, "dan@group.example", &for_dan, &dan_out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = mailseal(
        &agents[1].store,
        &["open", "--in", dan_out.join("commit.eml").to_str().unwrap()],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        members(&agents[1].store, &group)["members"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}
