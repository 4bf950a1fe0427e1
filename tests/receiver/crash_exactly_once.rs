//! Exactly once across crashes: `mailseal open --batch` is killed with SIGKILL at random
//! points, again and again (200 runs by default, `MAILSEAL_CRASH_RUNS`), over a mixed
//! batch: S/MIME signed requests, OpenPGP signed and encrypted requests, a stream whose
//! events arrive with a gap, and MLS application messages with one held for an epoch
//! whose Commit comes later in the batch. A consumer takes every delivered file out of
//! the output directory after each run, as an agent would.
//!
//! What must hold: no message is delivered twice (a file never reappears once taken),
//! every message an unkilled run delivers is delivered in the end, with the same bytes,
//! and the MLS state is never ahead of what was delivered (a message whose ratchet
//! step was committed without its delivery would never be delivered again, and the
//! final set would lack it). The random seed is printed; `MAILSEAL_CRASH_SEED` replays
//! one.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::mls::{ok, send, update};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::openpgp::OpenPgp;
use mailseal::smime::Smime;
use mailseal::{Profile, SealOptions, Sealer};
use serde_json::json;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn request(i: usize) -> serde_json::Value {
    common::with(
        common::request(),
        json!({"messageId": format!("crash-req-{i}"), "idempotencyKey": format!("crash-effect-{i}"),
               "correlationId": format!("crash-corr-{i}")}),
    )
}

fn event(seq: u64) -> serde_json::Value {
    json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "event",
        "operation": "message/stream", "messageId": format!("crash-ev-{seq}"),
        "correlationId": "crash-stream", "sequence": seq, "final": false,
        "payload": {"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"}}}
    })
}

/// Bob's store (an MLS member that also trusts the RFC 9216 CA, knows Alice's S/MIME
/// certificate, holds his own S/MIME identity and his OpenPGP key) and the inbox, in
/// `root`.
fn setup(root: &Path) -> (PathBuf, PathBuf) {
    let (agents, group) = common::mls::group(root, 2);
    let bob = agents[1].store.clone();
    let fx = |rel: &str| common::fixture(rel).display().to_string();
    ok(
        &bob,
        &["key", "import", "--trusted", &fx("rfc9216/ca.rsa.crt")],
    );
    ok(
        &bob,
        &[
            "key",
            "import",
            &fx("rfc9216/alice.sign.crt"),
            &fx("rfc9216/bob.sign.crt"),
            &fx("rfc9216/bob.sign.key"),
        ],
    );
    ok(
        &bob,
        &[
            "key",
            "import",
            &fx("openpgp/bob@openpgp.example.sec.asc"),
            &fx("openpgp/alice@openpgp.example.pub.asc"),
        ],
    );
    let inbox = root.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let put = |name: &str, bytes: &[u8]| std::fs::write(inbox.join(name), bytes).unwrap();

    // S/MIME, signed: requests, then a stream whose event 3 arrives before event 2.
    let alice = DirectoryStore::open(root.join("alice-smime")).unwrap();
    for f in ["alice.sign.crt", "alice.sign.key"] {
        let bytes = std::fs::read(common::fixture(&format!("rfc9216/{f}"))).unwrap();
        alice.import(&bytes, f, false).unwrap();
    }
    let mut signed = SealOptions::new(Profile::Smime);
    signed.sign_only = true;
    // The request the stream answers (Bob's), for the events' In-Reply-To.
    let asked = MailA2aMessage::new(
        "bob@smime.example",
        &["alice@smime.example"],
        common::env(request(99)),
    );
    let smime = |v: serde_json::Value| {
        let mut msg = MailA2aMessage::new(
            "alice@smime.example",
            &["bob@smime.example"],
            common::env(v.clone()),
        );
        if v["kind"] == "event" {
            msg.in_reply_to(&asked.headers);
        }
        Smime::new(&alice).seal(&msg, &signed).unwrap()
    };
    for i in 0..8 {
        put(&format!("a{i:02}-smime.eml"), &smime(request(i)));
    }
    for (name, seq) in [("c01", 1), ("c02", 3), ("c03", 2), ("c04", 5)] {
        put(&format!("{name}-stream.eml"), &smime(event(seq)));
    }

    // OpenPGP, signed and encrypted.
    let pgp = DirectoryStore::open(root.join("alice-pgp")).unwrap();
    for f in [
        "alice@openpgp.example.sec.asc",
        "bob@openpgp.example.pub.asc",
    ] {
        let bytes = std::fs::read(common::fixture(&format!("openpgp/{f}"))).unwrap();
        pgp.import(&bytes, f, false).unwrap();
    }
    for i in 0..5 {
        let msg = MailA2aMessage::new(
            "alice@openpgp.example",
            &["bob@openpgp.example"],
            common::env(request(100 + i)),
        );
        let sealed = OpenPgp::new(&pgp)
            .seal(&msg, &SealOptions::new(Profile::OpenPgp))
            .unwrap();
        put(&format!("b{i:02}-openpgp.eml"), &sealed);
    }

    // MLS: one message at the group's epoch, then a self-update; one message of the
    // new epoch arrives before the Commit (held), one after.
    let mail = root.join("mls-mail");
    let now = send(&mail, &agents[0], &[&agents[1]], &group, 1);
    put("d00-mls.eml", &std::fs::read(now).unwrap());
    let commit = update(&agents[0], &group, &root.join("mls-update"));
    let future = send(&mail, &agents[0], &[&agents[1]], &group, 2);
    let after = send(&mail, &agents[0], &[&agents[1]], &group, 3);
    put("d01-mls-future.eml", &std::fs::read(future).unwrap());
    put("d02-mls-commit.eml", &std::fs::read(commit).unwrap());
    put("d03-mls.eml", &std::fs::read(after).unwrap());
    (bob, inbox)
}

fn batch(store: &Path, inbox: &Path, out: &Path) -> Command {
    let mut c = Command::new(common::bin());
    c.arg("--store")
        .arg(store)
        // The stream's events answer a request another system sent (this test is about
        // crashes, not the request record).
        .args(["open", "--allow-unsolicited", "--batch"])
        .arg(inbox)
        .arg("--out-dir")
        .arg(out)
        .env_remove("MAILSEAL_STATE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Moves every delivered file of `out` into `taken`; a name taken before is a second
/// delivery. Returns how many were taken.
fn consume(out: &Path, taken: &mut BTreeMap<String, Vec<u8>>, context: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(out) else {
        return 0;
    };
    let mut n = 0;
    for e in entries {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert!(
            taken.insert(name.clone(), bytes).is_none(),
            "{context}: {name} was delivered a second time"
        );
        n += 1;
    }
    n
}

/// A fresh copy of the initial store.
fn fresh(initial: &Path, work: &Path) {
    common::mls::copy_store(initial, work);
}

#[test]
fn sigkill_at_random_points_never_loses_or_repeats_a_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let (initial, inbox) = setup(dir.path());
    let work = dir.path().join("work");
    let out = dir.path().join("out");

    // The reference: one run, not killed.
    fresh(&initial, &work);
    let started = Instant::now();
    let reference_run = batch(&work, &inbox, &out).output().unwrap();
    let took = started.elapsed();
    assert!(
        reference_run.status.success(),
        "{}",
        String::from_utf8_lossy(&reference_run.stderr)
    );
    let lines = String::from_utf8_lossy(&reference_run.stdout).into_owned();
    let mut reference = BTreeMap::new();
    consume(&out, &mut reference, "reference");
    // The batch exercises what it claims to: every profile delivers, the stream holds
    // an event, and the Commit releases the held MLS message.
    for expected in [
        "a00-smime.json",
        "b04-openpgp.json",
        "c01-stream.json",
        "c03-stream.json",
        "d00-mls.json",
        "d01-mls-future.json",
        "d03-mls.json",
    ] {
        assert!(reference.contains_key(expected), "{expected}: {lines}");
    }
    assert!(lines.contains(r#""result":"held""#), "{lines}");
    assert!(lines.contains(r#""result":"deliver-released""#), "{lines}");
    assert!(lines.contains(r#""result":"applied""#), "{lines}");

    let runs: usize = std::env::var("MAILSEAL_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed = std::env::var("MAILSEAL_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!(
        "crash test: {runs} runs, seed {seed} (MAILSEAL_CRASH_SEED), an unkilled run takes {took:?}"
    );
    let mut rng = Rng(seed);
    // Kill points spread over the whole run (process start included) and a little
    // past it, so some runs also finish.
    let span = (took.as_micros() as u64 * 11 / 10).max(1);

    let mut run = 0;
    let mut rounds = 0;
    let mut killed = 0;
    while run < runs {
        rounds += 1;
        fresh(&initial, &work);
        let _ = std::fs::remove_dir_all(&out);
        let mut taken = BTreeMap::new();
        // Kill runs until one finishes by itself, then one more to be sure of the end.
        loop {
            run += 1;
            let context = format!("seed {seed}, round {rounds}, run {run}");
            let mut child = batch(&work, &inbox, &out).spawn().unwrap();
            std::thread::sleep(Duration::from_micros(rng.next() % span));
            let finished = child.try_wait().unwrap().is_some();
            if !finished {
                child.kill().unwrap();
                killed += 1;
            }
            let status = child.wait().unwrap();
            consume(&out, &mut taken, &context);
            if finished {
                assert!(status.success(), "{context}: the batch failed");
                break;
            }
        }
        let last = batch(&work, &inbox, &out).output().unwrap();
        assert!(last.status.success(), "round {rounds}");
        consume(
            &out,
            &mut taken,
            &format!("seed {seed}, round {rounds}, last run"),
        );
        // Nothing lost, nothing changed, nothing half-written left behind.
        assert_eq!(
            taken.keys().collect::<Vec<_>>(),
            reference.keys().collect::<Vec<_>>(),
            "seed {seed}, round {rounds}: the delivered set differs from an unkilled run"
        );
        for (name, bytes) in &taken {
            assert_eq!(
                bytes, &reference[name],
                "seed {seed}, round {rounds}: {name}"
            );
        }
        let partial = std::fs::read_dir(&out)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "partial")
            })
            .count();
        assert_eq!(partial, 0, "seed {seed}, round {rounds}: staged files left");
        // The held stream event waits in the state, once.
        let next = ok(&work, &["stream", "next", "--correlation", "crash-stream"]);
        let events = String::from_utf8_lossy(&next).lines().count();
        assert_eq!(events, 1, "seed {seed}, round {rounds}: {next:?}");
    }
    eprintln!("crash test: {run} runs in {rounds} rounds, {killed} killed");
    assert!(
        killed * 2 >= run,
        "most runs must be killed midway: {killed} of {run}"
    );
}
