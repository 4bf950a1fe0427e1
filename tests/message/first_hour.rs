//! What a new user meets first (issue #23): a message named as a plain argument, a
//! file that is not MailA2A, an empty store, a seal without keys, where reports go.

use std::path::Path;

use crate::common;

use common::run;

fn ok(args: &[&str], stdin: &[u8]) -> std::process::Output {
    let out = run(args, stdin);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn open_and_seal_take_the_message_as_a_plain_argument() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = ok(
        &[
            "key",
            "generate",
            "--kind",
            "openpgp",
            "--email",
            "alice@pgp.example",
            "--store",
            s(&store),
        ],
        b"",
    );
    assert!(out.stdout.is_empty(), "key generate reports on stderr");
    assert!(String::from_utf8_lossy(&out.stderr).contains("alice@pgp.example"));
    let plain = dir.path().join("plain.eml");
    let envelope = serde_json::to_vec(&common::request()).unwrap();
    ok(
        &[
            "compose",
            "--from",
            "alice@pgp.example",
            "--to",
            "alice@pgp.example",
            "--out",
            s(&plain),
        ],
        &envelope,
    );
    // `seal FILE` is `seal --in FILE`; `open FILE` is `open --in FILE`.
    let sealed = ok(
        &[
            "seal",
            "--store",
            s(&store),
            "--profile",
            "openpgp",
            s(&plain),
        ],
        b"",
    )
    .stdout;
    let sealed_path = dir.path().join("sealed.eml");
    std::fs::write(&sealed_path, &sealed).unwrap();
    let opened = ok(&["open", "--store", s(&store), s(&sealed_path)], b"").stdout;
    let json: serde_json::Value = serde_json::from_slice(&opened).unwrap();
    assert_eq!(json["messageId"], "urn:uuid:request-1");
    // Both ways at once is a usage error, not a guess.
    let out = run(
        &[
            "open",
            "--store",
            s(&store),
            "--in",
            s(&sealed_path),
            s(&sealed_path),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn fail_inspect_of_a_file_that_is_not_maila2a_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("passwd");
    std::fs::write(&f, b"root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let out = run(&["inspect", s(&f)], b"");
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("not a MailA2A message"), "{stdout}");
    assert!(!stdout.contains("plain MailA2A message"), "{stdout}");
    let out = run(&["inspect", "--json", s(&f)], b"");
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn fail_key_list_on_a_store_that_does_not_exist_names_it_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("nowhere");
    for json in [false, true] {
        let mut args = vec!["key", "list", "--store", s(&store)];
        if json {
            args.push("--json");
        }
        let out = run(&args, b"");
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(s(&store)) && stderr.contains("key generate"),
            "{stderr}"
        );
        assert!(!store.exists(), "looking created nothing");
    }
    // An empty store lists nothing, and says so.
    let store = common::empty_store(dir.path());
    let out = ok(&["key", "list", "--json", "--store", s(&store)], b"");
    assert_eq!(out.stdout, b"[]\n");
}

#[test]
fn fail_seal_without_a_key_names_the_store_and_how_to_add_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::empty_store(dir.path());
    let plain = dir.path().join("plain.eml");
    ok(
        &[
            "compose",
            "--from",
            "alice@pgp.example",
            "--to",
            "bob@pgp.example",
            "--out",
            s(&plain),
        ],
        &serde_json::to_vec(&common::request()).unwrap(),
    );
    for profile in ["smime", "openpgp"] {
        let out = run(
            &[
                "seal",
                "--store",
                s(&store),
                "--profile",
                profile,
                s(&plain),
            ],
            b"",
        );
        assert_eq!(out.status.code(), Some(5));
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(s(&store)), "{stderr}");
        assert!(
            stderr.contains(&format!("key generate --kind {profile}"))
                && stderr.contains("key import"),
            "{stderr}"
        );
    }
}

#[test]
fn stream_status_with_no_streams_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let out = ok(&["--state", s(&state), "stream", "status"], b"");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no streams"), "{stderr}");
    let out = ok(
        &[
            "--state",
            s(&state),
            "stream",
            "status",
            "--correlation",
            "x-1",
        ],
        b"",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no stream for correlation x-1"));
}

/// On a terminal, `open` without a file says what it waits for instead of waiting
/// silently (`script` gives it a terminal; its end of input ends the message).
#[test]
fn open_on_a_terminal_says_it_reads_the_message_from_it() {
    if !common::peer_available(
        "script",
        std::process::Command::new("script").arg("--version"),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    common::empty_store(dir.path());
    let command = format!(
        "{} open --store {}",
        common::bin().display(),
        dir.path().join("store").display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("reading the message from the terminal (end with Ctrl-D"),
        "{text}"
    );
    // Piped input (not a terminal): no such line.
    let piped = run(&["open", "--store", s(&dir.path().join("store"))], b"x");
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("from the terminal"));
}
