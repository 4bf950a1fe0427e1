//! Who may have the outbound listener sign as which agent (issue #57; THREATS "the
//! gateway signs for whoever submits"). The attacker holds a submitter login of its
//! own (mallory), reaches the listener, and writes our agent's address in From; it
//! also tries without a login, with a wrong password, and with a password in clear.
//! Only the agent's own login gets its mail sealed. An MTA in front logs in with a
//! relay login, and the From must be the envelope sender it checked.
//! Submissions go through swaks (STARTTLS, AUTH PLAIN and LOGIN), as an agent's mail
//! client would.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;

use crate::kit::{self, Client, Gateway, Sink};

const ALICE: &str = "alice@smime.example";
const BOB: &str = "bob@smime.example";

/// Alice's outbound gateway: `submission = "auth"` under STARTTLS, two submitters
/// (alice-agent may send as Alice; mallory only as herself).
fn auth_gateway() -> (tempfile::TempDir, Gateway, u16, Sink) {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = kit::two_sides(dir.path());
    let (_, cert, key) = kit::tls_files(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let hash = |pw: &str| mailseal::gateway::submission::hash_password(pw).unwrap();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[(
            "out",
            port,
            "outbound",
            sink.addr.port(),
            "tls = \"starttls\"\nsubmission = \"auth\"",
        )],
        &format!(
            "{}\n[[submitter]]\nlogin = \"alice-agent\"\npassword_hash = \"{}\"\naddresses = [\"{ALICE}\"]\n\
             \n[[submitter]]\nlogin = \"mallory\"\npassword_hash = \"{}\"\naddresses = [\"mallory@smime.example\"]\n",
            kit::tls_table(&cert, &key),
            hash("alice's password"),
            hash("mallory's password"),
        ),
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    (dir, g, port, sink)
}

/// Alice's outbound gateway without TLS, for a client on its host: `submission =
/// "auth"` with Postfix's relay login (in clear on loopback).
fn relay_gateway() -> (tempfile::TempDir, Gateway, std::net::SocketAddr, Sink) {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[(
            "out",
            port,
            "outbound",
            sink.addr.port(),
            "tls = \"none\"\nsubmission = \"auth\"",
        )],
        &kit::relay_submitter(),
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    (dir, g, ([127, 0, 0, 1], port).into(), sink)
}

/// swaks from ALICE to BOB over STARTTLS, with `auth` (mechanism, login, password)
/// if any: everything it printed.
fn swaks(dir: &Path, port: u16, auth: Option<(&str, &str, &str)>, data: &[u8]) -> String {
    swaks_from(dir, port, ALICE, auth, data)
}

/// [`swaks`] with MAIL FROM `mail_from`.
fn swaks_from(
    dir: &Path,
    port: u16,
    mail_from: &str,
    auth: Option<(&str, &str, &str)>,
    data: &[u8],
) -> String {
    let file = dir.join("m.eml");
    std::fs::write(&file, data).unwrap();
    let mut cmd = Command::new("swaks");
    cmd.args(["--server", "127.0.0.1", "--port", &port.to_string()])
        .args(["--from", mail_from, "--to", BOB, "--tls"])
        .arg("--data")
        .arg(format!("@{}", file.display()));
    if let Some((mechanism, login, password)) = auth {
        cmd.args([
            "--auth",
            mechanism,
            "--auth-user",
            login,
            "--auth-password",
            password,
        ]);
    }
    let out = cmd.output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn swaks_usable() -> bool {
    crate::common::peer_available("swaks", Command::new("swaks").arg("--version"))
}

#[test]
fn fail_submission_only_the_agents_own_login_has_its_mail_sealed() {
    if !swaks_usable() {
        return;
    }
    let (dir, _g, port, sink) = auth_gateway();
    let mail = |id: &str| kit::plain(ALICE, BOB, id);

    // No login: MAIL is refused.
    let out = swaks(dir.path(), port, None, &mail("urn:uuid:none"));
    assert!(out.contains("530 5.7.0 authentication required"), "{out}");
    // A wrong password.
    let out = swaks(
        dir.path(),
        port,
        Some(("PLAIN", "alice-agent", "guess")),
        &mail("urn:uuid:guess"),
    );
    assert!(out.contains("535 5.7.8"), "{out}");
    // An unknown login.
    let out = swaks(
        dir.path(),
        port,
        Some(("LOGIN", "treasury", "alice's password")),
        &mail("urn:uuid:unknown"),
    );
    assert!(out.contains("535 5.7.8"), "{out}");
    // The attacker's own, proved login, writing Alice in From (with Alice's MAIL
    // FROM, then with its own): not signed.
    let out = swaks(
        dir.path(),
        port,
        Some(("PLAIN", "mallory", "mallory's password")),
        &mail("urn:uuid:mallory"),
    );
    assert!(out.contains("235 2.7.0"), "mallory's login is good: {out}");
    assert!(
        out.contains("550 5.7.1 mallory may not use the envelope sender alice@smime.example"),
        "{out}"
    );
    let out = swaks_from(
        dir.path(),
        port,
        "mallory@smime.example",
        Some(("LOGIN", "mallory", "mallory's password")),
        &mail("urn:uuid:mallory-2"),
    );
    assert!(
        out.contains("550 5.7.1 mallory may not send as alice@smime.example"),
        "{out}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(sink.messages().is_empty(), "nothing was sealed and sent");

    // Alice's agent, by PLAIN and by LOGIN: sealed and sent.
    for (mechanism, id) in [("PLAIN", "urn:uuid:plain"), ("LOGIN", "urn:uuid:login")] {
        let out = swaks(
            dir.path(),
            port,
            Some((mechanism, "alice-agent", "alice's password")),
            &mail(id),
        );
        assert!(out.contains("235 2.7.0"), "{mechanism}: {out}");
        assert!(out.contains("250 2.0.0"), "{mechanism}: {out}");
    }
    let got = sink.wait_for(2, Duration::from_secs(30));
    for m in &got {
        let text = String::from_utf8_lossy(&m.data);
        assert!(text.contains("application/pkcs7-mime"), "sealed: {text}");
    }
}

/// A password is never taken in clear: before STARTTLS, AUTH is neither offered nor
/// accepted, and MAIL without it is refused.
#[test]
fn fail_submission_no_password_before_tls() {
    let (_dir, _g, port, _sink) = auth_gateway();
    let mut c = Client::connect(([127, 0, 0, 1], port).into());
    let ehlo = c.cmd("EHLO agent.test");
    assert!(!ehlo.contains("AUTH"), "AUTH offered in clear: {ehlo}");
    // "\0alice-agent\0alice's password"
    let r = c.cmd("AUTH PLAIN AGFsaWNlLWFnZW50AGFsaWNlJ3MgcGFzc3dvcmQ=");
    assert!(r.starts_with("538 5.7.11"), "{r}");
    let r = c.cmd(&format!("MAIL FROM:<{ALICE}>"));
    assert!(r.starts_with("530 5.7.0"), "{r}");
}

/// An MTA in front (Postfix, which checked MAIL FROM against its own submitter's
/// login) logs in with a relay login, in clear on loopback; what it hands over is
/// signed only when From is that MAIL FROM. An agent on the same host that goes to the
/// listener itself, skipping the MTA, has no login and nothing is signed (the review
/// of the first version, which trusted any loopback client for the MTA, found this).
#[test]
fn fail_submission_through_a_relay_login_from_must_be_the_envelope_sender() {
    let (_dir, _g, addr, sink) = relay_gateway();
    let forged = kit::plain(ALICE, BOB, "urn:uuid:forged");

    // Straight to the port, no login (what the first version let through).
    let r = kit::submit(addr, ALICE, &[BOB], &forged);
    assert!(r.starts_with("530 5.7.0"), "{r}");

    let relay = || {
        let mut c = Client::connect(addr);
        let ehlo = c.cmd("EHLO postfix.test");
        assert!(
            ehlo.contains("AUTH"),
            "AUTH offered to a loopback client: {ehlo}"
        );
        let plain = format!("\0postfix\0{}", kit::RELAY_PASSWORD);
        let r = c.cmd(&format!(
            "AUTH PLAIN {}",
            base64::engine::general_purpose::STANDARD.encode(plain)
        ));
        assert!(r.starts_with("235 2.7.0"), "{r}");
        c
    };
    let r = relay().submit("mallory@smime.example", &[BOB], &forged);
    assert!(r.starts_with("550 5.7.1"), "{r}");
    assert!(r.contains("not the envelope sender"), "{r}");
    let good = kit::plain(ALICE, BOB, "urn:uuid:good");
    let r = relay().submit(ALICE, &[BOB], &good);
    assert!(r.starts_with("250"), "{r}");
    let got = sink.wait_for(1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        sink.messages().len(),
        1,
        "only the one whose From was checked"
    );
    assert!(String::from_utf8_lossy(&got[0].data).contains("application/pkcs7-mime"));
}

/// An agent's login sends under its own addresses only, in MAIL FROM as in From, and
/// passes nothing on (already sealed, or not MailA2A) under another's.
#[test]
fn fail_submission_mail_from_and_passed_on_mail_are_the_logins_too() {
    if !swaks_usable() {
        return;
    }
    let (dir, _g, port, sink) = auth_gateway();
    let as_mallory = Some(("PLAIN", "mallory", "mallory's password"));
    // Mallory's From, Alice's MAIL FROM (bounces and SPF in Alice's name).
    let own = kit::plain("mallory@smime.example", BOB, "urn:uuid:own-from");
    let out = swaks(dir.path(), port, as_mallory, &own);
    assert!(
        out.contains("550 5.7.1 mallory may not use the envelope sender"),
        "{out}"
    );
    // Plain mail under Alice's From: passed on unsigned before, now refused.
    let out = swaks(
        dir.path(),
        port,
        as_mallory,
        format!("From: {ALICE}\r\nTo: {BOB}\r\nSubject: hi\r\n\r\nplain\r\n").as_bytes(),
    );
    assert!(out.contains("550 5.7.1"), "{out}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(sink.messages().is_empty());
}

/// The peak memory of a process (VmHWM), bytes.
fn peak_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

/// Cost before authentication (THREATS): each password check is an Argon2id run of
/// 19 MiB, and wrong passwords are free to send. Forty connections at once, each
/// sending wrong passwords, cost the gateway a few checks' memory, not one each: the
/// checks once ran on tokio's blocking pool with the argon2 crate allocating for each,
/// and this grew the gateway by 1.2 GB; now 4 threads reuse their blocks (83 MB).
#[test]
fn fail_cost_a_flood_of_wrong_passwords_runs_a_few_checks_at_once() {
    let (_dir, g, addr, _sink) = relay_gateway();
    let before = peak_of(g.child.id());
    let wrong = base64::engine::general_purpose::STANDARD.encode("\0postfix\0guess");
    let threads: Vec<_> = (0..40)
        .map(|_| {
            let wrong = wrong.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                c.cmd("EHLO flood.test");
                for _ in 0..2 {
                    let r = c.cmd(&format!("AUTH PLAIN {wrong}"));
                    assert!(r.starts_with("535 5.7.8"), "{r}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let grew = peak_of(g.child.id()).saturating_sub(before);
    println!("80 wrong passwords from 40 connections: peak grew {grew} bytes");
    // Four checks at once are 76 MiB; forty were 760.
    assert!(grew < 160 << 20, "peak grew {} MiB", grew >> 20);
}
