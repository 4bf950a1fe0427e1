//! The replay state across processes: several `mailseal open --batch` processes on one
//! state store accept every message exactly once, and a process killed (SIGKILL) in the
//! middle of a batch loses no accepted message and accepts none twice. Against SQLite
//! (always) and PostgreSQL (skipped with a message when no server is configured;
//! required in CI).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::with;
use mailseal::message::MailA2aMessage;
use mailseal::smime::Smime;
use mailseal::{Profile, SealOptions, Sealer};
use serde_json::json;

/// Bob's key store (trusts the RFC 9216 CA, knows Alice) and an inbox of `n` messages
/// Alice signed, named `m0000.eml`...
fn inbox(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    let (alice, bob) = common::alice_signs_for_bob(dir);
    let inbox = dir.join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    for i in 0..n {
        let v = with(
            common::request(),
            json!({"messageId": format!("msg-{i}"), "idempotencyKey": format!("effect-{i}"),
                   "correlationId": format!("corr-{i}")}),
        );
        let msg = MailA2aMessage::new(
            "alice@smime.example",
            &["bob@smime.example"],
            common::env(v),
        );
        let sealed = Smime::new(&alice).seal(&msg, &opts).unwrap();
        std::fs::write(inbox.join(format!("m{i:04}.eml")), sealed).unwrap();
    }
    (bob, inbox)
}

fn batch(bob: &Path, state: &str, inbox: &Path, out: &Path) -> Command {
    let mut c = Command::new(common::bin());
    c.args(["open", "--store"])
        .arg(bob)
        .args(["--state", state, "--batch"])
        .arg(inbox)
        .arg("--out-dir")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// messageId -> results, from batch result lines.
fn results(stdout: &[u8], into: &mut BTreeMap<String, Vec<String>>) {
    for line in String::from_utf8_lossy(stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_ne!(v["result"], "refused", "{line}");
        into.entry(v["messageId"].as_str().unwrap().to_string())
            .or_default()
            .push(v["result"].as_str().unwrap().to_string());
    }
}

fn outputs(dir: &Path, ext: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn states(dir: &Path) -> Vec<(&'static str, String)> {
    let mut out = vec![(
        "sqlite",
        format!("sqlite:{}", dir.join("shared.db").display()),
    )];
    if let Some(url) = common::postgres_database() {
        out.push(("postgres", url));
    }
    out
}

#[test]
fn four_processes_accept_each_of_200_messages_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let (bob, inbox) = inbox(dir.path(), 200);
    for (name, state) in states(dir.path()) {
        let outs: Vec<PathBuf> = (0..4)
            .map(|i| dir.path().join(format!("{name}-out{i}")))
            .collect();
        let children: Vec<_> = outs
            .iter()
            .map(|o| batch(&bob, &state, &inbox, o).spawn().unwrap())
            .collect();
        let mut seen = BTreeMap::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            results(&out.stdout, &mut seen);
        }
        assert_eq!(seen.len(), 200, "{name}");
        for (id, r) in &seen {
            let delivered = r.iter().filter(|x| *x == "deliver").count();
            let duplicates = r.iter().filter(|x| *x == "duplicate").count();
            assert_eq!((delivered, duplicates), (1, 3), "{name}: {id}: {r:?}");
        }
        let files: usize = outs.iter().map(|o| outputs(o, "json").len()).sum();
        assert_eq!(files, 200, "{name}: one delivered envelope per message");
    }
}

#[test]
fn a_batch_killed_midway_loses_nothing_and_accepts_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300;
    let (bob, inbox) = inbox(dir.path(), n);
    for (name, state) in states(dir.path()) {
        let out = dir.path().join(format!("{name}-out"));
        let mut child = batch(&bob, &state, &inbox, &out).spawn().unwrap();
        // Kill it once it is well into the batch.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while outputs(&out, "json").len() < 40 {
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: batch made no progress"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "{name}: finished too early"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        let killed = child.wait_with_output().unwrap();
        assert!(!killed.status.success());
        let before = outputs(&out, "json");
        assert!(
            before.len() < n,
            "{name}: the kill came too late to test anything"
        );

        let again = batch(&bob, &state, &inbox, &out).output().unwrap();
        assert!(
            again.status.success(),
            "{}",
            String::from_utf8_lossy(&again.stderr)
        );
        let mut second = BTreeMap::new();
        results(&again.stdout, &mut second);
        assert_eq!(second.len(), n, "{name}");
        for (id, r) in &second {
            let file = format!(
                "m{:04}",
                id.trim_start_matches("msg-").parse::<usize>().unwrap()
            );
            let expected = if before.contains(&file) {
                // Accepted and delivered by the killed run: a duplicate now.
                vec!["duplicate"]
            } else {
                // Never accepted, or accepted just before the kill (then completed now).
                assert!(
                    r == &["deliver"] || r == &["deliver-resumed"],
                    "{name}: {id}: {r:?}"
                );
                continue;
            };
            assert_eq!(r, &expected, "{name}: {id}");
        }
        // Every message delivered exactly once, nothing half-written left behind, and
        // the decrypted outputs readable by their owner only.
        assert_eq!(outputs(&out, "json").len(), n, "{name}");
        #[cfg(unix)]
        for f in std::fs::read_dir(&out).unwrap() {
            use std::os::unix::fs::PermissionsExt;
            let mode = f.unwrap().metadata().unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{name}: output mode {mode:o}");
        }
        assert!(outputs(&out, "partial").is_empty(), "{name}");
    }
}

#[test]
fn processes_opening_a_new_state_file_at_once_all_succeed() {
    // Regression: the first processes to open a new database race to switch it to WAL
    // and migrate it; SQLite answered the loser "database is locked" at once.
    let dir = tempfile::tempdir().unwrap();
    for round in 0..10 {
        let state = format!(
            "sqlite:{}",
            dir.path().join(format!("r{round}.db")).display()
        );
        let children: Vec<_> = (0..8)
            .map(|_| {
                Command::new(common::bin())
                    .args(["stream", "status", "--state", &state])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
