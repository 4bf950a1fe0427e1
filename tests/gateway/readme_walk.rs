//! The guide's gateway walk (docs/gateway.md), run as written: every `mailseal` step of its "gateway
//! behind Postfix" block (an agent's identity made from nothing, its Agent Card, a
//! partner's card imported, the configuration checked) runs here in order, with the
//! shipped `dist/gateway.toml`, paths moved into a temporary directory and `sudo -u
//! mailseal` dropped. The Postfix steps of the same block run in `postfix.rs` with the
//! same `dist/postfix` files. A step the guide changes in a way the CLI does not take
//! fails here.

use std::path::Path;

use crate::common;

/// The shell block under docs/gateway.md's "The gateway behind Postfix".
fn walk() -> String {
    let page = include_str!("../../docs/gateway.md");
    let section = page
        .split("## The gateway behind Postfix")
        .nth(1)
        .expect("docs/gateway.md has the gateway walk");
    let block = section.split("```sh\n").nth(1).expect("its shell block");
    block.split("```").next().unwrap().to_string()
}

/// The block's `mailseal` command lines, continuation lines joined, with `$S` and the
/// shipped paths moved under `dir`.
fn mailseal_steps(dir: &Path) -> Vec<Vec<String>> {
    let text = walk().replace("\\\n", " ");
    let store = dir.join("store");
    let config = dir.join("gateway.toml");
    let mut steps = Vec::new();
    for line in text.lines() {
        let line = line.split(" #").next().unwrap().trim();
        let Some(cmd) = line.strip_prefix("sudo -u mailseal mailseal ") else {
            continue;
        };
        let cmd = cmd
            .replace("$S", store.to_str().unwrap())
            .replace("/etc/mailseal/gateway.toml", config.to_str().unwrap());
        steps.push(cmd.split_whitespace().map(str::to_string).collect());
    }
    steps
}

/// The shipped configuration with its paths under `dir` (ports and hosts as shipped:
/// check-config binds them, and a port in use is a note, not an error).
fn config(dir: &Path) -> String {
    let d = |p: &str| dir.join(p).display().to_string();
    std::fs::write(dir.join("reinject.pass"), "secret\n").unwrap();
    include_str!("../../dist/gateway.toml")
        .replace("/var/lib/mailseal/store", &d("store"))
        .replace("/var/lib/mailseal/spool", &d("spool"))
        .replace("/var/lib/mailseal/quarantine", &d("quarantine"))
        .replace("/etc/mailseal/reinject.pass", &d("reinject.pass"))
        .replace("127.0.0.1:9725", "127.0.0.1:0")
}

#[test]
fn the_readme_gateway_walk_runs_from_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let steps = mailseal_steps(dir.path());
    let words: Vec<&str> = steps.iter().map(|s| s[0].as_str()).collect();
    assert!(
        words.starts_with(&["key", "card", "key"]) && words.last() == Some(&"gateway"),
        "the walk's mailseal steps changed: {words:?}"
    );
    std::fs::write(dir.path().join("gateway.toml"), config(dir.path())).unwrap();
    // The partner's side: its own store, identity and card, as it would publish them.
    let partner = dir.path().join("partner");
    let p = partner.to_str().unwrap();
    for args in [
        vec![
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            "peer@partner.example",
            "--store",
            p,
        ],
        vec![
            "card",
            "--store",
            p,
            "--email",
            "peer@partner.example",
            "--sign",
            "--out",
        ],
    ] {
        let mut args = args.clone();
        let out_file = dir.path().join("peer-card.json");
        if args.last() == Some(&"--out") {
            args.push(out_file.to_str().unwrap());
        }
        let o = common::run(&args, b"");
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Each step in the guide's order, in the walk's working directory.
    let mut last = None;
    for step in &steps {
        let args: Vec<&str> = step.iter().map(String::as_str).collect();
        let o = std::process::Command::new(common::bin())
            .args(&args)
            .current_dir(dir.path())
            .env_remove("MAILSEAL_STATE")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "guide step `mailseal {}` failed: {}",
            step.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
        last = Some(o);
    }
    // What it made: our card for partners, the partner's certificate in our store,
    // and check-config naming the agent it will sign for.
    let card: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("agent-card.json")).unwrap())
            .unwrap();
    assert!(card.to_string().contains("agent@example.org"), "{card}");
    let check = last.unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(said.contains("agent@example.org"), "{said}");
    let list = common::run(
        &[
            "key",
            "list",
            "--store",
            dir.path().join("store").to_str().unwrap(),
        ],
        b"",
    );
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains("peer@partner.example"), "{listed}");
}
