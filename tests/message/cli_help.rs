//! What the command line says of itself (issue #61): the global options described once,
//! in `mailseal --help`, and still taken by every subcommand; `demo`, which runs on a
//! store of its own, refusing them; and completions and man pages generated from the
//! same definitions, naming every subcommand.

use crate::common;

/// The subcommands `mailseal --help` lists (without clap's `help`).
fn subcommands() -> Vec<String> {
    let out = common::run(&["--help"], b"");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let list = help
        .split("Commands:\n")
        .nth(1)
        .and_then(|t| t.split("\n\n").next())
        .unwrap_or_else(|| panic!("no command list: {help}"));
    let names: Vec<String> = list
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect();
    for expected in ["open", "seal", "key", "mls", "completions", "man", "demo"] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    names
}

fn stdout(args: &[&str]) -> String {
    let out = common::run(args, b"");
    assert!(
        out.status.success(),
        "mailseal {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--store` and `--state` (three lines of help) are described in the top-level help
/// only; a subcommand's help does not repeat them, and still takes them.
#[test]
fn global_options_are_described_once() {
    let top = stdout(&["--help"]);
    assert!(top.contains("--store <DIR>"), "{top}");
    assert!(top.contains("--state <URL>"), "{top}");
    assert!(top.contains("the MLS group state"), "{top}");
    for args in [
        &["open", "--help"][..],
        &["seal", "--help"],
        &["key", "generate", "--help"],
        &["mls", "create", "--help"],
        &["stream", "status", "--help"],
        &["demo", "--help"],
    ] {
        let help = stdout(args);
        assert!(!help.contains("--store <"), "{args:?}: {help}");
        assert!(!help.contains("--state <"), "{args:?}: {help}");
        assert!(!help.contains("the MLS group state"), "{args:?}: {help}");
    }
    // Still taken after the subcommand: the typo is named, not a usage error of clap's.
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let out = common::run(
        &["open", "--store", typo.to_str().unwrap(), "--state", "x"],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(typo.to_str().unwrap()), "{err}");
    assert!(err.contains("key generate"), "{err}");
}

/// `demo` uses a temporary store: a `--store` or `--state` it would ignore is refused.
#[test]
fn fail_demo_refuses_a_store() {
    for args in [
        &["--store", "/nonexistent/store", "demo"][..],
        &["demo", "--store", "/nonexistent/store"],
        &["demo", "--state", "sqlite:/nonexistent/state.db"],
    ] {
        let out = common::run(args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("temporary store"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// The bash completion script completes every subcommand; every other shell's is
/// generated too.
#[test]
fn completions_name_every_subcommand() {
    let bash = stdout(&["completions", "bash"]);
    for name in subcommands() {
        assert!(
            bash.contains(&format!("mailseal,{name})")),
            "{name} not in the bash completion"
        );
    }
    // A subcommand's options are completed too.
    assert!(bash.contains("--also-addressed-to"));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        assert!(script.contains("mailseal"), "{shell}");
        assert!(script.contains("also-addressed-to"), "{shell}");
    }
    let out = common::run(&["completions", "tcsh"], b"");
    assert_eq!(out.status.code(), Some(2));
}

/// `man --out DIR` writes mailseal.1, naming every subcommand, and a page for each
/// (and for each of theirs); `man` alone prints mailseal.1.
#[test]
fn man_pages_name_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    stdout(&["man", "--out", out_dir.to_str().unwrap()]);
    let top = std::fs::read_to_string(out_dir.join("mailseal.1")).unwrap();
    assert!(
        top.starts_with(".ie") || top.contains(".TH mailseal 1"),
        "{top}"
    );
    assert!(top.contains("Exit status"), "{top}");
    for name in subcommands() {
        // roff writes a hyphen as `\-`.
        assert!(
            top.contains(&name.replace('-', "\\-")),
            "{name} not in mailseal.1"
        );
        let page = out_dir.join(format!("mailseal-{name}.1"));
        let text =
            std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        assert!(
            text.contains(&format!(".TH mailseal-{name} 1")),
            "{}",
            page.display()
        );
        // Every page says which program it is of, with its version.
        assert!(
            text.contains(&format!("\"mailseal {}\"", env!("CARGO_PKG_VERSION"))),
            "{}",
            page.display()
        );
    }
    // Nested subcommands have pages; clap's `help` has none.
    assert!(out_dir.join("mailseal-key-generate.1").exists());
    assert!(out_dir.join("mailseal-mls-create.1").exists());
    let helps: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("-help"))
        .collect();
    assert!(helps.is_empty(), "{helps:?}");
    assert_eq!(stdout(&["man"]), top);
}

/// The demo shows a key's fingerprint as `key list` does: the whole lower-case hex,
/// never a cut of it; the signer it names is one of those keys.
#[test]
fn demo_shows_whole_fingerprints() {
    let out = common::run(&["demo"], b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let step = text
        .split("[1] ")
        .nth(1)
        .and_then(|t| t.split("\n\n").next())
        .unwrap_or_else(|| panic!("no step 1: {text}"));
    let listed: Vec<&str> = step
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(listed.len(), 3, "{step}");
    for f in &listed {
        assert!(
            f.len() == 64 && f.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
            "{f}: {step}"
        );
    }
    let signer = text
        .split("signer x509:")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_else(|| panic!("no signer: {text}"));
    assert!(listed.contains(&signer), "{signer}: {listed:?}");
}
