//! A bridge killed mid-call (SIGKILL, nothing flushed) and started again: the call
//! completes, and the remote agent made it exactly once.

use std::time::Duration;

use mailseal::IdentityKind;

use crate::bridge_kit::two_stores;
use crate::bridge_kit::{eventually, sdk_python, Org, Peer, Router};

fn pair(dir: &std::path::Path, py: &std::path::Path, router: &Router) -> (Org, Org) {
    crate::bridge_kit::alice_and_bob(dir, Some(py), router, "")
}

fn executes(b: &Org, text: &str) -> usize {
    b.agent
        .as_ref()
        .unwrap()
        .calls()
        .iter()
        .filter(|c| c["method"] == "execute" && c["text"] == text)
        .count()
}

/// The callee's bridge dies while its agent works on the call; started again, it
/// finds the agent's task (it made the call once), follows it to its end and mails
/// the answer.
#[test]
fn callee_bridge_killed_while_its_agent_works() {
    let Some(py) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start();
    let (a, mut b) = pair(dir.path(), &py, &router);
    let (r, code) = a.client(
        &py,
        "bob@b.example",
        "JSONRPC",
        &["send", "--return-immediately", "slow: 4"],
    );
    assert_eq!(code, 0, "{r}");
    let task = r["result"]["id"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(60),
        "the call reaches the agent",
        || executes(&b, "slow: 4") == 1,
    );
    b.kill_bridge();
    std::thread::sleep(Duration::from_secs(1));
    b.start_bridge();
    let (r, code) = a.client(
        &py,
        "bob@b.example",
        "JSONRPC",
        &["poll", &task, "--until", "COMPLETED", "--timeout", "90"],
    );
    assert_eq!(code, 0, "{r}\n{}\n{}", a.log_text(), b.log_text());
    assert!(
        r["result"]["artifacts"].to_string().contains("slept 4"),
        "{r}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(executes(&b, "slow: 4"), 1, "made once at the remote agent");
}

/// The caller's bridge dies once the call is mailed; the answer waits for it (the
/// hop retries), and, started again, it takes the answer the agent polls for.
#[test]
fn caller_bridge_killed_after_mailing_the_call() {
    let Some(py) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start();
    let (mut a, b) = pair(dir.path(), &py, &router);
    let (r, code) = a.client(
        &py,
        "bob@b.example",
        "JSONRPC",
        &["send", "--return-immediately", "slow: 3"],
    );
    assert_eq!(code, 0, "{r}");
    let task = r["result"]["id"].as_str().unwrap().to_string();
    a.kill_bridge();
    eventually(
        Duration::from_secs(60),
        "the call reaches the agent",
        || executes(&b, "slow: 3") == 1,
    );
    std::thread::sleep(Duration::from_secs(4));
    a.start_bridge();
    let (r, code) = a.client(
        &py,
        "bob@b.example",
        "JSONRPC",
        &["poll", &task, "--until", "COMPLETED", "--timeout", "90"],
    );
    assert_eq!(code, 0, "{r}\n{}\n{}", a.log_text(), b.log_text());
    assert!(
        r["result"]["artifacts"].to_string().contains("slept 3"),
        "{r}"
    );
    assert_eq!(executes(&b, "slow: 3"), 1, "made once at the remote agent");
}

/// Two instances of one organisation's bridge share their state, spool and replay
/// state in PostgreSQL: a call made at the first, killed at once, is answered through
/// the second, where its caller polls it to its end; the remote agent made it once.
#[test]
fn instances_sharing_postgresql_take_over_each_others_calls() {
    let Some(py) = sdk_python() else { return };
    let Some(url) = crate::common::postgres_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start();
    let (alice, bob) = ("alice@a.example", "bob@b.example");
    let (sa, sb) = two_stores(dir.path(), IdentityKind::Smime, alice, bob);
    let peer = |address| Peer {
        address,
        group: None,
        profile: Some("smime"),
    };
    let b = Org::start(
        dir.path(),
        "b",
        bob,
        &sb,
        &router,
        &[peer(alice)],
        Some(&py),
        "JSONRPC",
        "",
    );
    let mut one = Org::configure(
        dir.path(),
        "a1",
        alice,
        &sa,
        &router,
        &[peer(bob)],
        None,
        "JSONRPC",
        "",
    );
    let token = one.token.clone();
    one.share(&url, &token);
    one.start_bridge();
    let mut two = Org::configure(
        dir.path(),
        "a2",
        alice,
        &sa,
        &router,
        &[peer(bob)],
        None,
        "JSONRPC",
        "",
    );
    two.share(&url, &token);
    two.start_bridge();
    // The mail for Alice goes to the second instance (an answer the first took and
    // left leased in the shared spool would wait for its lease to run out).
    router.route(alice, two.smtp_in);

    let (r, code) = one.client(
        &py,
        bob,
        "JSONRPC",
        &["send", "--return-immediately", "slow: 3"],
    );
    assert_eq!(code, 0, "{r}\n{}", one.log_text());
    let task = r["result"]["id"].as_str().unwrap().to_string();
    one.kill_bridge();
    let (r, code) = two.client(
        &py,
        bob,
        "JSONRPC",
        &["poll", &task, "--until", "COMPLETED", "--timeout", "90"],
    );
    assert_eq!(code, 0, "{r}\n{}\n{}", two.log_text(), b.log_text());
    assert!(
        r["result"]["artifacts"].to_string().contains("slept 3"),
        "{r}"
    );
    assert_eq!(executes(&b, "slow: 3"), 1, "made once at the remote agent");

    // A call made at the second instance is answered there too.
    let (r, code) = two.client(&py, bob, "JSONRPC", &["send", "echo: through the second"]);
    assert_eq!(code, 0, "{r}\n{}", two.log_text());
    assert!(r.to_string().contains("echo: through the second"), "{r}");
}
