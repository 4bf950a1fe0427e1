//! A store is made only by the commands that write keys (issue #61): every other
//! command given a path that holds no store (a typo, a regular file, an empty
//! directory) refuses with exit 2, naming the path and the command that makes a
//! store, and creates nothing there.

use crate::common;

use std::path::Path;

/// Every command that uses the store without writing keys to it.
fn commands(store: &str) -> Vec<Vec<String>> {
    let request = common::data("maila2a/request.eml");
    let request = request.to_str().unwrap();
    [
        vec!["open", "--store", store, request],
        vec!["open", "--store", store, "--stateless", request],
        vec!["seal", "--store", store, "--profile", "smime", request],
        vec![
            "sign-request",
            "--store",
            store,
            "--profile",
            "smime",
            request,
        ],
        vec!["sign", "--store", store, "--yes", request],
        vec!["assemble", "--store", store, request, request],
        vec!["sign-log", "verify", "--store", store],
        vec!["key", "list", "--store", store],
        vec!["key", "list", "--store", store, "--json"],
        vec!["key", "export", "--store", store, "00"],
        vec!["key", "delete", "--store", store, "00"],
        vec!["key", "passwd", "--store", store, "--clear"],
        vec![
            "key",
            "generate",
            "--store",
            store,
            "--kind",
            "mls",
            "--email",
            "a@example.com",
        ],
        vec![
            "mls",
            "create",
            "--store",
            store,
            "--email",
            "a@example.com",
        ],
        vec!["mls", "members", "--store", store],
        vec!["mls", "next", "--store", store],
        vec!["card", "--store", store, "--email", "a@example.com"],
        vec!["stream", "status", "--store", store],
        vec![
            "corpus", "mutate", "--store", store, "--layer", "json", "--count", "1", "--stream",
            request,
        ],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_string).collect())
    .collect()
}

fn refused(args: &[String], path: &Path) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::run(&args, b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(&path.display().to_string()) && stderr.contains("mailseal key generate"),
        "{args:?}: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{args:?}");
}

#[test]
fn fail_a_missing_store_path_is_refused_and_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let typo = tmp.path().join("typo");
    for args in commands(typo.to_str().unwrap()) {
        refused(&args, &typo);
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
}

#[test]
fn fail_a_regular_file_as_store_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("notes.txt");
    std::fs::write(&file, b"not a store\n").unwrap();
    for args in commands(file.to_str().unwrap()) {
        refused(&args, &file);
        assert_eq!(std::fs::read(&file).unwrap(), b"not a store\n");
    }
    // Not even the commands that write keys make a store over a file.
    let out = common::run(
        &[
            "key",
            "generate",
            "--store",
            file.to_str().unwrap(),
            "--kind",
            "smime",
            "--email",
            "a@example.com",
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn fail_an_empty_directory_is_not_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for args in commands(empty.to_str().unwrap()) {
        refused(&args, &empty);
        assert_eq!(
            std::fs::read_dir(&empty).unwrap().count(),
            0,
            "{args:?} wrote into {}",
            empty.display()
        );
    }
}

#[test]
fn fail_a_missing_sqlite_store_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("keys.db");
    let store = format!("sqlite:{}", db.display());
    let out = common::run(&["key", "list", "--store", &store], b"");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!db.exists());
}

#[test]
fn the_commands_that_write_keys_make_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let made = tmp.path().join("new");
    let store = made.to_str().unwrap();
    let out = common::run(
        &[
            "key",
            "generate",
            "--store",
            store,
            "--kind",
            "smime",
            "--email",
            "a@example.com",
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(made.join("mailseal.db").is_file());
    let listed = common::run(&["key", "list", "--store", store], b"");
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("a@example.com"));

    // `key import` too, into a path that did not exist.
    let pem = tmp.path().join("a.pem");
    let out = common::run(
        &[
            "key",
            "generate",
            "--store",
            store,
            "--kind",
            "smime",
            "--email",
            "b@example.com",
            "--cert-out",
            pem.to_str().unwrap(),
        ],
        b"",
    );
    assert!(out.status.success());
    let imported = tmp.path().join("imported");
    let out = common::run(
        &[
            "key",
            "import",
            "--store",
            imported.to_str().unwrap(),
            pem.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(imported.join("mailseal.db").is_file());
}
