//! Issue #17, through the command line with a store per party: Mallory has got hold of
//! a group's GroupInfo mail (it travelled in clear, or a member leaked it) and joins by
//! external commit under the CEO's name. Every member refuses her Commit (exit 6,
//! nothing on stdout) and the group stays as it was, until the members themselves turn
//! external joins on for the group.

use crate::common;

use common::mls::{mailseal, ok};

fn members(store: &std::path::Path, group: &str) -> serde_json::Value {
    serde_json::from_slice(&ok(store, &["mls", "members", "--group", group, "--json"])).unwrap()
}

#[test]
fn fail_an_external_join_into_a_group_that_does_not_accept_them() {
    let root = tempfile::tempdir().unwrap();
    let (agents, group) = common::mls::group(root.path(), 3);
    let info = root.path().join("gi.eml");
    ok(
        &agents[0].store,
        &[
            "mls",
            "group-info",
            "--group",
            &group,
            "--out",
            info.to_str().unwrap(),
        ],
    );
    let mallory = root.path().join("mallory");
    ok(
        &mallory,
        &[
            "key",
            "generate",
            "--kind",
            "mls",
            "--email",
            "ceo@group.example",
        ],
    );
    let out_dir = root.path().join("mallory-out");
    ok(
        &mallory,
        &[
            "mls",
            "join",
            "--external",
            "--email",
            "ceo@group.example",
            "--in",
            info.to_str().unwrap(),
            "--out-dir",
            out_dir.to_str().unwrap(),
        ],
    );
    let commit = out_dir.join("commit.eml");
    for a in &agents {
        let before = members(&a.store, &group);
        let out = mailseal(&a.store, &["open", "--in", commit.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{}: {stderr}", a.email);
        assert!(out.stdout.is_empty());
        assert!(
            stderr.contains("does not accept external joins"),
            "{stderr}"
        );
        assert_eq!(
            members(&a.store, &group),
            before,
            "{}: group unchanged",
            a.email
        );
    }
    // A member that turns external joins on for the group applies the same Commit.
    ok(
        &agents[1].store,
        &["mls", "external-joins", "--group", &group, "on"],
    );
    let out = mailseal(
        &agents[1].store,
        &["open", "--in", commit.to_str().unwrap()],
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
