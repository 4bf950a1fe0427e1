//! The README's examples run: the shell block of "Command line" with the built binary
//! (each command must succeed or be one of the refusals the README announces), and the
//! Rust block of "Library" (a doc test in `src/lib.rs`).

use crate::common;

#[test]
fn readme_command_line_example_runs() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("## Command line")
        .nth(1)
        .expect("Command line section");
    let script = section
        .split("```sh\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a sh block");
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(script)
        .current_dir(dir.path())
        .env("PATH", path)
        .env("MAILSEAL_HOME", dir.path().join("store"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("OK request.eml"), "{stdout}");
    assert!(
        stdout.contains("FAIL forged.eml: hint-mismatch"),
        "{stdout}"
    );
    assert!(stdout.contains("refused with exit 3"), "{stdout}");
    assert!(stdout.contains("refused with exit 6"), "{stdout}");
    assert!(stdout.contains("application/a2a+json"), "{stdout}");
}

/// The "Try it" block, pasted whole into a shell at a repository root: the build line
/// meets a `cargo` that only checks it is asked for the release build (the test binary
/// is built already), `target/release` is this build's binary directory.
#[test]
fn readme_try_it_block_runs_as_pasted() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let block = readme
        .split("## Try it")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("a sh block under Try it");
    assert!(!block.contains("BUILD_MINUTES"));
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("target")).unwrap();
    std::os::unix::fs::symlink(
        common::bin().parent().unwrap(),
        root.path().join("target/release"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        concat!(env!("CARGO_MANIFEST_DIR"), "/keys-fixtures"),
        root.path().join("keys-fixtures"),
    )
    .unwrap();
    let shims = tempfile::tempdir().unwrap();
    let cargo = shims.path().join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\n[ \"$*\" = \"build --release\" ] || { echo \"unexpected: cargo $*\" >&2; exit 1; }\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", block])
        .current_dir(root.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                shims.path().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env_remove("MAILSEAL_HOME")
        .env_remove("FIXTURES")
        .env("HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("demo finished"), "{stdout}");
    // Nothing was written into the "checkout" or the home directory.
    let mut left: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["keys-fixtures", "target"]);
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
}

#[test]
fn readme_smime_example_runs() {
    let (stdout, stderr, dir) = run_block_after_first("mailseal seal --profile smime --sign-only");
    assert!(stderr.contains("Verification successful"), "{stderr}");
    assert!(stdout.contains("\"messageId\":\"req-1\""), "{stdout}");
    assert!(stderr.contains("duplicate: message req-1"), "{stderr}");
    assert!(stderr.contains("--stateless"), "{stderr}");
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("verdict.json")).unwrap()).unwrap();
    assert_eq!(verdict["profile"], "smime");
    assert_eq!(verdict["protection"], "signed");
}

#[test]
fn demo_runs() {
    let out = common::run(&["demo"], b"");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("refused as expected (exit 6)"), "{stdout}");
    assert!(stdout.contains("SMTP redelivery: duplicate"), "{stdout}");
    // The MLS authentication service turns away a group made under a forged identity.
    assert!(
        stdout.contains(
            "refused as expected (exit 4): unauthenticated MLS credential: ann@mls.example"
        ),
        "{stdout}"
    );
    // Offline signing: assembled and opened; a changed request refused offline.
    assert!(stdout.contains("signed offline; assembled"), "{stdout}");
    assert!(
        stdout.contains("the same request with another To: refused as expected (exit 4)"),
        "{stdout}"
    );
    assert!(stdout.contains("demo finished"), "{stdout}");
    // Plain words: no Rust debug formatting, no failure marks for expected refusals.
    for debug in [
        "Some(",
        "None",
        "{ ",
        "FAIL",
        "\"delivered",
        "Deliver",
        "Held (",
    ] {
        assert!(!stdout.contains(debug), "{debug:?} in\n{stdout}");
    }
}

#[test]
fn readme_openpgp_example_runs() {
    let (stdout, _stderr, dir) = run_block_after_first("--email alice@pgp.example");
    assert!(stdout.contains("\"messageId\":\"req-1\""), "{stdout}");
    assert!(stdout.contains(" mode:binary"), "{stdout}");
    // The SOP lines: the message decrypted with the session key alone.
    assert!(stdout.lines().any(|l| l == "hello"), "{stdout}");
    let sk = std::fs::read_to_string(dir.path().join("hello.sk")).unwrap();
    assert!(
        sk.starts_with("9:") && sk.trim_end().len() == 2 + 64,
        "{sk}"
    );
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("pgp-verdict.json")).unwrap())
            .unwrap();
    assert_eq!(verdict["profile"], "openpgp");
    assert_eq!(verdict["protection"], "signed-encrypted");
}

#[test]
fn readme_mls_example_runs() {
    let (stdout, stderr, _dir) = run_block_after_first("mls create");
    assert!(stderr.contains("joined MLS group"), "{stderr}");
    assert!(stdout.contains("\"messageId\":\"req-1\""), "{stdout}");
    assert!(stderr.contains("duplicate: this MLS message"), "{stderr}");
    assert!(stderr.contains("held: group"), "{stderr}");
    assert!(
        stderr.contains("1 held message(s) can now be opened"),
        "{stderr}"
    );
    assert!(stdout.contains("\"messageId\":\"req-2\""), "{stdout}");
    // ann and bea remain.
    assert!(stdout.contains("1 bea@mls.example"), "{stdout}");
    assert!(!stdout.contains("2 cal@mls.example"), "{stdout}");
}

/// Runs the first block of "Command line" (it makes envelope.json and report.csv),
/// then the first block containing `marker`, with the built binary first on PATH and
/// `$FIXTURES` the key fixtures: (stdout, stderr, the directory).
fn run_block_after_first(marker: &str) -> (String, String, tempfile::TempDir) {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme.split("## Command line").nth(1).unwrap();
    let blocks: Vec<&str> = section
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    let block = blocks
        .iter()
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("a block with {marker}"));
    let script = format!("{}\n{block}", blocks[0]);
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("MAILSEAL_HOME", dir.path().join("store"))
        .env(
            "FIXTURES",
            concat!(env!("CARGO_MANIFEST_DIR"), "/keys-fixtures"),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr, dir)
}

#[test]
fn readme_agent_card_example_runs() {
    let (stdout, stderr, dir) = run_block_after_first("mailseal card");
    assert!(
        stderr.contains("imported card bob@card.example: minimum signed-encrypted"),
        "{stderr}"
    );
    assert!(stdout.contains("\"messageId\":\"req-7\""), "{stdout}");
    assert!(stdout.contains("refused with exit 6"), "{stdout}");
    assert!(stderr.contains("joined MLS group"), "{stderr}");
    let card2: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("card2.json")).unwrap()).unwrap();
    assert_eq!(
        card2["supportedInterfaces"][0]["url"],
        "mailto:bob@card.example"
    );
}

#[test]
fn readme_jws_example_runs() {
    let (stdout, stderr, dir) = run_block_after_first("--kind jws");
    assert!(
        stdout.contains("\"messageId\":\"req-1\""),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("jwk ed25519 carol@jws.example"), "{stdout}");
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("jws-verdict.json")).unwrap())
            .unwrap();
    assert_eq!(verdict["profile"], "jws");
    assert_eq!(verdict["protection"], "signed");
}

#[test]
fn readme_offline_signing_example_runs() {
    let (stdout, stderr, dir) = run_block_after_first("mailseal sign-request");
    assert!(stderr.contains("request fingerprint: "), "{stderr}");
    assert!(
        stderr.contains("To sign, type the first 8 characters of the request digest"),
        "{stderr}"
    );
    assert!(
        stderr.contains("effect: EFFECTFUL: message/send request"),
        "{stderr}"
    );
    assert!(stderr.contains("signed; signing log entry 1"), "{stderr}");
    assert!(stdout.contains("signed 1 of 1"), "{stdout}");
    assert!(stdout.contains("ok: 3 entries"), "{stdout}");
    assert!(stderr.contains("Verification successful"), "{stderr}");
    assert!(stdout.contains("refused with exit 4"), "{stdout}");
    let sealed = std::fs::read_to_string(dir.path().join("sealed.eml")).unwrap();
    assert!(sealed.contains("authEnveloped-data"));
    let (_, stderr, dir) = run_block_after_first("--csr treasury.csr");
    assert!(
        stderr.contains("imported certificate ec+secret"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("Verification successful").count(),
        1,
        "{stderr}"
    );
    assert!(dir.path().join("t-signed.eml").exists());
}
