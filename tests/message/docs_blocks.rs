//! The README's and the guide's shell blocks, pasted into one shell in reading order
//! (the README, then `docs/` in the order of its index), as a reader would: "Try it"
//! at a repository root, the rest in the scratch directory it moves to. A block that
//! fails fails the walk; a block marked `<!-- not run: REASON -->` (root, a hardware
//! token, a second build) is skipped with its reason said, and the test covering it
//! is named in the reason. The Rust blocks run as doc tests (`src/lib.rs`).
//!
//! The "repository root" the walk starts in holds this build: `target/release` is the
//! directory of the test's `mailseal`, `cargo` is a shim that takes the two builds the
//! blocks ask for (the release build, already made; the mls-rs corpus adapter, built
//! here with the real cargo into this build's target directory).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common;

/// One shell block: the file and line it starts at, its text, whether it runs.
struct Block {
    at: String,
    text: String,
    not_run: Option<String>,
}

/// The pages in reading order: the README, then the guide's index order.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let index = std::fs::read_to_string(root.join("docs/README.md")).unwrap();
    let mut pages = vec![root.join("README.md")];
    for line in index.lines() {
        // "1. [S/MIME](smime.md): ..."
        let Some(link) = line.split("](").nth(1) else {
            continue;
        };
        let Some(file) = link.split(')').next() else {
            continue;
        };
        if line.trim_start().starts_with(|c: char| c.is_ascii_digit()) && file.ends_with(".md") {
            pages.push(root.join("docs").join(file));
        }
    }
    pages
}

fn blocks() -> Vec<Block> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root).unwrap().display().to_string();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            if lines[i] == "```sh" {
                let start = i + 1;
                let end = start
                    + lines[start..]
                        .iter()
                        .position(|l| *l == "```")
                        .unwrap_or_else(|| panic!("{name}:{start}: an unclosed block"));
                let not_run = (i > 0)
                    .then(|| lines[i - 1])
                    .and_then(|l| l.strip_prefix("<!-- not run: "))
                    .and_then(|l| l.strip_suffix(" -->"))
                    .map(str::to_string);
                out.push(Block {
                    at: format!("{name}:{start}"),
                    text: lines[start..end].join("\n"),
                    not_run,
                });
                i = end;
            }
            i += 1;
        }
    }
    out
}

/// What the walk printed, block by block.
struct Walk {
    ok: bool,
    /// (block, stdout, stderr), in order.
    outputs: Vec<(String, String, String)>,
    /// The scratch directory "Try it" moved to.
    scratch: PathBuf,
    all_stdout: String,
    all_stderr: String,
    _dirs: Vec<tempfile::TempDir>,
}

impl Walk {
    /// The output of the first block whose text contains `marker`.
    fn of(&self, marker: &str) -> (&str, &str) {
        let at = blocks()
            .into_iter()
            .find(|b| b.text.contains(marker))
            .unwrap_or_else(|| panic!("no block contains {marker:?}"))
            .at;
        let (_, out, err) = self
            .outputs
            .iter()
            .find(|(b, _, _)| *b == at)
            .unwrap_or_else(|| panic!("block {at} did not run"));
        (out, err)
    }
}

const MARK: &str = "@@block ";

fn walk() -> Option<&'static Walk> {
    static WALK: OnceLock<Option<Walk>> = OnceLock::new();
    WALK.get_or_init(run_walk).as_ref()
}

fn run_walk() -> Option<Walk> {
    // The corpus block runs the three crypto-layer adapters' tools.
    for (tool, arg) in [("sqop", "version"), ("gpg", "--version")] {
        if !common::peer_available(tool, std::process::Command::new(tool).arg(arg)) {
            return None;
        }
    }
    // The bridge page's agents and client are the official A2A SDK's.
    let python = std::env::var("MAILSEAL_PEER_PYTHON")
        .unwrap_or_else(|_| "/var/lib/mailseal-peers/venv/bin/python3".into());
    if !common::peer_available(
        "the official A2A SDK with its HTTP server (.ci/peers-venv; MAILSEAL_PEER_PYTHON)",
        std::process::Command::new(&python).args(["-c", "import a2a.client, a2a.server, uvicorn"]),
    ) {
        return None;
    }
    let root = tempfile::tempdir().unwrap();
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(root.path().join("target/debug/examples")).unwrap();
    std::os::unix::fs::symlink(&bin_dir, root.path().join("target/release")).unwrap();
    for link in ["keys-fixtures", "dist", "Cargo.toml", "tests"] {
        std::os::unix::fs::symlink(manifest.join(link), root.path().join(link)).unwrap();
    }
    let shims = tempfile::tempdir().unwrap();
    let cargo = shims.path().join("cargo");
    // The release build is this test's build; the example is built for real, into the
    // target directory of this build, and linked where the block looks for it.
    let target_dir = bin_dir.parent().unwrap();
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n\
             case \"$*\" in\n\
             'build --release') exit 0 ;;\n\
             *'--example corpus_adapter_mls_rs'*)\n\
               '{cargo}' build -q --manifest-path '{manifest}/Cargo.toml' --target-dir '{target}' \
                 --example corpus_adapter_mls_rs || exit 1\n\
               ln -sf '{bin}/examples/corpus_adapter_mls_rs' '{root}/target/debug/examples/' ;;\n\
             *) echo \"unexpected: cargo $*\" >&2; exit 1 ;;\n\
             esac\n",
            cargo = env!("CARGO"),
            manifest = manifest.display(),
            target = target_dir.display(),
            bin = bin_dir.display(),
            root = root.path().display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();

    let mut script = String::new();
    for b in blocks() {
        script.push_str(&format!(
            "printf '\\n{MARK}%s\\n' '{at}'; printf '\\n{MARK}%s\\n' '{at}' >&2\n",
            at = b.at
        ));
        match &b.not_run {
            Some(reason) => {
                eprintln!("docs block {} not run: {reason}", b.at);
            }
            None => {
                script.push_str(&b.text);
                script.push('\n');
            }
        }
    }
    script.push_str(&format!("printf '\\n{MARK}end %s\\n' \"$PWD\"\n"));
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
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
        .env_remove("MAILSEAL_STATE")
        // The SDK peers run from the checkout (`$REPO/tests`): no bytecode written there.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MAILSEAL_PEER_PYTHON", &python)
        .env_remove("FIXTURES")
        .env_remove("REPO")
        .env("HOME", home.path())
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let all_stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all_stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let split = |s: &str| -> Vec<(String, String)> {
        s.split(&format!("\n{MARK}"))
            .skip(1)
            .map(|chunk| {
                let (at, rest) = chunk.split_once('\n').unwrap_or((chunk, ""));
                (at.to_string(), rest.to_string())
            })
            .collect()
    };
    let outs = split(&all_stdout);
    let errs = split(&all_stderr);
    let scratch = outs
        .iter()
        .find_map(|(at, _)| at.strip_prefix("end ").map(PathBuf::from))
        .unwrap_or_default();
    let outputs = outs
        .iter()
        .filter(|(at, _)| !at.starts_with("end "))
        .map(|(at, o)| {
            let e = errs
                .iter()
                .find(|(a, _)| a == at)
                .map_or(String::new(), |(_, e)| e.clone());
            (at.clone(), o.clone(), e)
        })
        .collect();
    // Nothing was written into the "checkout" (but the example's link) or the home.
    let mut left: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["Cargo.toml", "dist", "keys-fixtures", "target", "tests"]
    );
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
    Some(Walk {
        ok: out.status.success(),
        outputs,
        scratch,
        all_stdout,
        all_stderr,
        _dirs: vec![root, shims, home, tmp],
    })
}

#[test]
fn every_shell_block_of_the_readme_and_the_guide_runs_in_order() {
    let Some(w) = walk() else { return };
    let last = w.outputs.last().map_or("none", |(at, _, _)| at.as_str());
    assert!(
        w.ok,
        "the walk stopped in block {last}\nstdout:\n{}\nstderr:\n{}",
        tail(&w.all_stdout),
        tail(&w.all_stderr)
    );
    let ran: Vec<_> = w.outputs.iter().map(|(at, _, _)| at.clone()).collect();
    let all: Vec<_> = blocks().into_iter().map(|b| b.at).collect();
    assert_eq!(ran, all, "every block was reached");
    assert!(w.scratch.join("store").is_dir());
}

fn tail(s: &str) -> &str {
    &s[s.len().saturating_sub(6000)..]
}

/// The walk's output for the block containing `marker`, once the walk passed.
fn block(marker: &str) -> Option<(&'static Walk, &'static str, &'static str)> {
    let w = walk()?;
    assert!(w.ok, "the walk failed: see every_shell_block_...");
    let (o, e) = w.of(marker);
    Some((w, o, e))
}

#[test]
fn the_try_it_block_runs_the_demo_outside_the_checkout() {
    let Some((_, out, _)) = block("mailseal demo") else {
        return;
    };
    assert!(out.contains("demo finished"), "{out}");
}

#[test]
fn the_first_ten_minutes_validate_refuse_and_sign() {
    let Some((w, out, _)) = block("mailseal validate request.eml") else {
        return;
    };
    assert!(out.contains("OK request.eml"), "{out}");
    assert!(out.contains("FAIL forged.eml: hint-mismatch"), "{out}");
    assert!(out.contains("refused with exit 3"), "{out}");
    assert!(out.contains("application/a2a+json"), "{out}");
    let (out, err) = w.of("--sign-only plain.eml");
    assert!(out.contains("refused with exit 6"), "{out}");
    assert!(err.contains("Verification successful"), "{err}");
    assert!(out.contains("\"messageId\":\"req-1\""), "{out}");
    assert!(err.contains("duplicate: message req-1"), "{err}");
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.scratch.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(verdict["profile"], "smime");
    assert_eq!(verdict["protection"], "signed");
}

#[test]
fn the_smime_page_encrypts_and_makes_an_identity() {
    let Some((w, out, err)) = block("mailseal seal --profile smime --in plain.eml") else {
        return;
    };
    assert!(err.contains("--stateless"), "{err}");
    assert!(out.contains("agent.pem: OK"), "{out}");
    let sealed = std::fs::read_to_string(w.scratch.join("sealed.eml")).unwrap();
    assert!(sealed.contains("authEnveloped-data"));
}

#[test]
fn the_openpgp_page_seals_opens_and_speaks_sop() {
    let Some((w, out, _)) = block("--email alice@pgp.example") else {
        return;
    };
    assert!(out.contains("\"messageId\":\"req-1\""), "{out}");
    assert!(out.contains(" mode:binary"), "{out}");
    assert!(out.lines().any(|l| l == "hello"), "{out}");
    let sk = std::fs::read_to_string(w.scratch.join("hello.sk")).unwrap();
    assert!(
        sk.starts_with("9:") && sk.trim_end().len() == 2 + 64,
        "{sk}"
    );
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.scratch.join("pgp-verdict.json")).unwrap())
            .unwrap();
    assert_eq!(verdict["profile"], "openpgp");
    assert_eq!(verdict["protection"], "signed-encrypted");
}

#[test]
fn the_jws_page_signs_and_binds_keys() {
    let Some((w, out, err)) = block("--kind jws") else {
        return;
    };
    assert!(out.contains("\"messageId\":\"req-1\""), "{out}\n{err}");
    assert!(out.contains("jwk ed25519 carol@jws.example"), "{out}");
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.scratch.join("jws-verdict.json")).unwrap())
            .unwrap();
    assert_eq!(verdict["profile"], "jws");
    assert_eq!(verdict["protection"], "signed");
}

#[test]
fn the_mls_page_holds_releases_and_removes() {
    let Some((_, out, err)) = block("mls create") else {
        return;
    };
    assert!(err.contains("joined MLS group"), "{err}");
    assert!(out.contains("\"messageId\":\"req-1\""), "{out}");
    assert!(err.contains("duplicate: this MLS message"), "{err}");
    assert!(err.contains("held: group"), "{err}");
    assert!(err.contains("1 held message(s) can now be opened"), "{err}");
    // The hint, pasted as shown, acts on the store the Commit was opened with.
    assert!(
        err.contains("`mailseal mls next --store cal --group "),
        "{err}"
    );
    assert!(out.contains("\"messageId\":\"req-2\""), "{out}");
    assert!(out.contains("1 bea@mls.example"), "{out}");
    assert!(!out.contains("2 cal@mls.example"), "{out}");
}

#[test]
fn the_cards_page_imports_and_enforces_a_minimum() {
    let Some((w, out, err)) = block("mailseal card --store card-bob") else {
        return;
    };
    assert!(
        err.contains("imported card bob@card.example: minimum signed-encrypted"),
        "{err}"
    );
    assert!(out.contains("\"messageId\":\"req-7\""), "{out}");
    assert!(out.contains("refused with exit 6"), "{out}");
    assert!(err.contains("joined MLS group"), "{err}");
    let card2: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.scratch.join("card2.json")).unwrap()).unwrap();
    assert_eq!(
        card2["supportedInterfaces"][0]["url"],
        "mailto:bob@card.example"
    );
}

#[test]
fn the_offline_page_signs_across_the_gap() {
    let Some((w, out, err)) = block("mailseal sign-request") else {
        return;
    };
    assert!(err.contains("request fingerprint: "), "{err}");
    assert!(
        err.contains("To sign, type the first 8 characters of the request digest"),
        "{err}"
    );
    assert!(
        err.contains("effect: EFFECTFUL: message/send request"),
        "{err}"
    );
    assert!(err.contains("signed; signing log entry 1"), "{err}");
    assert!(out.contains("signed 1 of 1"), "{out}");
    assert!(out.contains("ok: 3 entries"), "{out}");
    assert!(err.contains("Verification successful"), "{err}");
    assert!(out.contains("refused with exit 4"), "{out}");
    let (_, err) = w.of("--csr treasury.csr");
    assert!(err.contains("imported certificate ec+secret"), "{err}");
    assert_eq!(err.matches("Verification successful").count(), 1, "{err}");
    assert!(w.scratch.join("t-signed.eml").exists());
}

#[test]
fn the_corpus_page_runs_every_adapter_and_mutates() {
    let Some((w, out, _)) = block("mailseal corpus generate") else {
        return;
    };
    // OpenSSL and sqop agree at their layer; GnuPG 2.2 and mls-rs disagree where the
    // page says, and the block goes on.
    assert!(out.contains("gpg: exit 1"), "{out}");
    assert!(out.contains("mls-rs: exit 1"), "{out}");
    assert!(w.scratch.join("junit.xml").exists());
    let mutants = std::fs::read_dir(w.scratch.join("mutants"))
        .unwrap()
        .count();
    assert_eq!(mutants, 1000);
}

#[test]
fn the_bridge_page_calls_an_sdk_agent_through_two_bridges() {
    let Some((_, out, err)) = block("alice send \"echo: hello, Bob\"") else {
        return;
    };
    assert!(
        out.contains("\"text\": \"echo: hello, Bob\""),
        "{out}\n{err}"
    );
    assert!(out.contains("TASK_STATE_COMPLETED"), "{out}");
    assert!(out.contains("part 3"), "the stream's events: {out}");
    // What Bob's agent saw of each call: the gateway's verdict, Alice's signature.
    let verdict = out
        .lines()
        .find(|l| l.starts_with("echo: hello, Bob {"))
        .unwrap_or_else(|| panic!("no verdict line: {out}"));
    assert!(
        verdict.contains("\"from\": \"alice@a.example\""),
        "{verdict}"
    );
    assert!(verdict.contains("\"profile\": \"smime\""), "{verdict}");
    assert!(
        verdict.contains("\"protection\": \"signed-encrypted\""),
        "{verdict}"
    );
}
