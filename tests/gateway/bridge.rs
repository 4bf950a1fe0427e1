//! `mailseal bridge` end to end: an A2A client written on the official SDK at one
//! organisation calls, through its bridge, sealed mail and the other organisation's
//! bridge, an agent written on the SDK there, and gets its answer, under S/MIME,
//! OpenPGP and MLS; over JSON-RPC and HTTP+JSON.

use std::path::Path;
use std::time::Duration;

use mailseal::IdentityKind;
use serde_json::Value;

use crate::bridge_kit::{eventually, sdk_python, two_stores, Org, Peer, Router};

fn text_of(v: &Value) -> String {
    v.to_string()
}

/// Every kind of call, through two bridges, with `transport` at the caller and the
/// callee's agent on `binding`.
fn every_call(kind: IdentityKind, profile: &str, binding: &str, transport: &str) {
    let Some(py) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = ("alice@a.example", "bob@b.example");
    let (sa, sb) = two_stores(dir.path(), kind, alice, bob);
    let router = Router::start();
    let a = Org::start(
        dir.path(),
        "a",
        alice,
        &sa,
        &router,
        &[Peer {
            address: bob,
            group: None,
            profile: Some(profile),
        }],
        None,
        binding,
        "",
    );
    let b = Org::start(
        dir.path(),
        "b",
        bob,
        &sb,
        &router,
        &[Peer {
            address: alice,
            group: None,
            profile: Some(profile),
        }],
        Some(&py),
        binding,
        "",
    );

    calls_of_every_kind(&py, &a, alice, &b, bob, transport, profile);
}

/// A2A calls of every kind from `a`'s agent (`alice`) to `b`'s (`bob`), through their
/// bridges, each checked against what the SDK's agent did.
fn calls_of_every_kind(
    py: &Path,
    a: &Org,
    alice: &str,
    b: &Org,
    bob: &str,
    transport: &str,
    profile: &str,
) {
    let py = py.to_path_buf();
    let before = b.agent.as_ref().unwrap().calls().len();
    // A direct message answered by a message.
    let (r, code) = a.client(&py, bob, transport, &["send", "echo: hello over mail"]);
    assert_eq!(code, 0, "{r}\n{}\n{}", a.log_text(), b.log_text());
    assert_eq!(r["kind"], "message", "{r}");
    assert!(
        text_of(&r["result"]).contains("echo: hello over mail"),
        "{r}"
    );
    // The agent heard the gateway's verdict, not anything the sender could write.
    let calls = b.agent.as_ref().unwrap().calls();
    let verdict = &calls[before]["metadata"]["mailseal.verdict"];
    assert_eq!(verdict["profile"], profile, "{calls:?}");
    assert_eq!(verdict["from"], alice, "{calls:?}");
    assert_eq!(verdict["result"], "pass");

    // A task, answered when it completed.
    let (r, code) = a.client(&py, bob, transport, &["send", "task: weigh the parcel"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        r["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
    assert!(
        text_of(&r["result"]["artifacts"]).contains("done: weigh the parcel"),
        "{r}"
    );

    // A stream: every event, in order, the last one final.
    let (r, code) = a.client(&py, bob, transport, &["stream", "stream: 3"]);
    assert_eq!(code, 0, "{r}");
    let events = r["events"].as_array().unwrap();
    let parts: Vec<String> = events
        .iter()
        .filter_map(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .map(str::to_string)
        .collect();
    assert_eq!(parts, ["part 1", "part 2", "part 3"], "{r}");
    let last = events.last().unwrap();
    assert!(text_of(last).contains("TASK_STATE_COMPLETED"), "{r}");

    // Returned at once, then polled with GetTask until it completes.
    let (r, code) = a.client(
        &py,
        bob,
        transport,
        &["send", "--return-immediately", "slow: 2"],
    );
    assert_eq!(code, 0, "{r}");
    let task = r["result"]["id"].as_str().unwrap().to_string();
    let (r, code) = a.client(
        &py,
        bob,
        transport,
        &["poll", &task, "--until", "COMPLETED", "--timeout", "60"],
    );
    assert_eq!(code, 0, "{r}");
    assert!(
        text_of(&r["result"]["artifacts"]).contains("slept 2"),
        "{r}"
    );

    // Canceled: a task that waits, its id from the answer, then CancelTask.
    let (r, code) = a.client(
        &py,
        bob,
        transport,
        &["send", "--return-immediately", "wait"],
    );
    assert_eq!(code, 0, "{r}");
    let pending = r["result"]["id"].as_str().unwrap().to_string();
    let mut remote = String::new();
    eventually(Duration::from_secs(60), "the waiting task is known", || {
        let (r, _) = a.client(&py, bob, transport, &["get", &pending]);
        remote = r["result"]["id"].as_str().unwrap_or_default().to_string();
        r["result"]["status"]["state"] == "TASK_STATE_WORKING"
    });
    let (r, code) = a.client(&py, bob, transport, &["cancel", &remote]);
    assert_eq!(code, 0, "{r}\n{}", b.log_text());
    assert_eq!(r["result"]["status"]["state"], "TASK_STATE_CANCELED", "{r}");

    // An A2A error from the agent reaches the caller as that error.
    let (r, code) = a.client(&py, bob, transport, &["send", "fail"]);
    assert_eq!(code, 3, "{r}");
    assert_eq!(r["error"]["code"], -32004, "{r}");
    assert!(text_of(&r).contains("fail requested"), "{r}");

    // Each call reached the agent once.
    let calls = b.agent.as_ref().unwrap().calls();
    let executes = calls[before..]
        .iter()
        .filter(|c| c["method"] == "execute")
        .count();
    assert_eq!(executes, 6, "{calls:?}");
}

#[test]
fn smime_every_call_over_jsonrpc() {
    every_call(IdentityKind::Smime, "smime", "JSONRPC", "JSONRPC");
}

#[test]
fn openpgp_every_call_over_http_json() {
    every_call(IdentityKind::OpenPgp, "openpgp", "HTTP+JSON", "HTTP+JSON");
}

/// MLS: three agents in one group, each behind its own bridge; two of them call the
/// third through the group, and its answers come back in the group.
#[test]
fn mls_group_of_three() {
    let Some(py) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (agents, group) = crate::common::mls::group(dir.path(), 3);
    let router = Router::start();
    let addr: Vec<&str> = agents.iter().map(|a| a.email.as_str()).collect();
    let one = Org::start(
        dir.path(),
        "one",
        addr[0],
        &agents[0].store,
        &router,
        &[Peer {
            address: addr[1],
            group: Some(&group),
            profile: None,
        }],
        None,
        "JSONRPC",
        "",
    );
    let two = Org::start(
        dir.path(),
        "two",
        addr[1],
        &agents[1].store,
        &router,
        &[
            Peer {
                address: addr[0],
                group: Some(&group),
                profile: None,
            },
            Peer {
                address: addr[2],
                group: Some(&group),
                profile: None,
            },
        ],
        Some(&py),
        "JSONRPC",
        "",
    );
    let three = Org::start(
        dir.path(),
        "three",
        addr[2],
        &agents[2].store,
        &router,
        &[Peer {
            address: addr[1],
            group: Some(&group),
            profile: None,
        }],
        None,
        "JSONRPC",
        "",
    );
    for (org, text) in [(&one, "task: from one"), (&three, "task: from three")] {
        let (r, code) = org.client(&py, addr[1], "JSONRPC", &["send", text]);
        assert_eq!(code, 0, "{r}\n{}\n{}", org.log_text(), two.log_text());
        assert_eq!(
            r["result"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{r}"
        );
    }
    let (r, code) = three.client(&py, addr[1], "JSONRPC", &["stream", "stream: 2"]);
    assert_eq!(code, 0, "{r}");
    assert!(text_of(&r).contains("part 2"), "{r}");
    let calls = two.agent.as_ref().unwrap().calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    for (c, from) in calls.iter().zip([addr[0], addr[2], addr[2]]) {
        assert_eq!(c["metadata"]["mailseal.verdict"]["profile"], "mls", "{c}");
        assert_eq!(c["metadata"]["mailseal.verdict"]["from"], from, "{c}");
    }
    // And every other kind of call, through the group.
    calls_of_every_kind(&py, &one, addr[0], &two, addr[1], "JSONRPC", "mls");
}

/// The A2A side over TLS (rustls): the SDK's client verifies the bridge's certificate
/// against the organisation's CA and makes its call; a request in clear gets nothing.
#[test]
fn the_a2a_side_over_tls() {
    let Some(py) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = ("alice@a.example", "bob@b.example");
    let (sa, sb) = two_stores(dir.path(), IdentityKind::Smime, alice, bob);
    let tls_dir = dir.path().join("tls");
    std::fs::create_dir_all(&tls_dir).unwrap();
    let (ca, cert, key) = crate::kit::tls_files(&tls_dir);
    let router = Router::start();
    let peer = |address| Peer {
        address,
        group: None,
        profile: Some("smime"),
    };
    let mut a = Org::configure(
        dir.path(),
        "a",
        alice,
        &sa,
        &router,
        &[peer(bob)],
        None,
        "JSONRPC",
        "",
    );
    let text = std::fs::read_to_string(&a.config).unwrap().replace(
        &format!("listen = \"127.0.0.1:{}\"", a.http),
        &format!(
            "listen = \"127.0.0.1:{}\"\nbase_url = \"https://localhost:{}\"\ntls = {{ certificate = \"{}\", key = \"{}\" }}",
            a.http,
            a.http,
            cert.display(),
            key.display()
        ),
    );
    std::fs::write(&a.config, text).unwrap();
    a.start_bridge();
    let _b = Org::start(
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
    let out = std::process::Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/a2a_bridge_client.py"))
        .args([
            "--card",
            &format!(
                "https://localhost:{}/peers/{bob}/.well-known/agent-card.json",
                a.http
            ),
            "--transport",
            "JSONRPC",
            "--token",
            &a.token,
            "send",
            "echo: over TLS",
        ])
        .env("SSL_CERT_FILE", &ca)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        a.log_text()
    );
    assert!(text.contains("echo: over TLS"), "{text}");
    let (status, _) = a.http(
        "GET",
        &format!("/peers/{bob}/.well-known/agent-card.json"),
        &[],
        b"",
    );
    assert_eq!(status, 0, "no answer in clear on the TLS port");
}
