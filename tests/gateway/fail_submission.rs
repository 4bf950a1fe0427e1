//! Who may have the outbound listener sign as which agent (issue #57; THREATS "the
//! gateway signs for whoever submits"). The attacker holds a submitter login of its
//! own (mallory), reaches the listener, and writes our agent's address in From; it
//! also tries without a login, with a wrong password, and with a password in clear.
//! Only the agent's own login gets its mail sealed. Behind an MTA (`submission =
//! "mta"`), the From must be the envelope sender the MTA checked against the login.
//! Submissions go through swaks (STARTTLS, AUTH PLAIN and LOGIN), as an agent's mail
//! client would.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

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

/// swaks from ALICE to BOB over STARTTLS, with `auth` (mechanism, login, password)
/// if any: everything it printed.
fn swaks(dir: &Path, port: u16, auth: Option<(&str, &str, &str)>, data: &[u8]) -> String {
    let file = dir.join("m.eml");
    std::fs::write(&file, data).unwrap();
    let mut cmd = Command::new("swaks");
    cmd.args(["--server", "127.0.0.1", "--port", &port.to_string()])
        .args(["--from", ALICE, "--to", BOB, "--tls"])
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
    // The attacker's own, proved login, writing Alice in From: not signed.
    let out = swaks(
        dir.path(),
        port,
        Some(("PLAIN", "mallory", "mallory's password")),
        &mail("urn:uuid:mallory"),
    );
    assert!(out.contains("235 2.7.0"), "mallory's login is good: {out}");
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

/// Behind an MTA that checked the sender's login (Postfix's
/// `reject_sender_login_mismatch`), the gateway signs only when From is the envelope
/// sender that MTA checked.
#[test]
fn fail_submission_behind_an_mta_from_must_be_the_envelope_sender() {
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
            "tls = \"none\"\nsubmission = \"mta\"",
        )],
        "",
    );
    let _g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let addr = ([127, 0, 0, 1], port).into();
    let forged = kit::plain(ALICE, BOB, "urn:uuid:forged");
    let r = kit::submit(addr, "mallory@smime.example", &[BOB], &forged);
    assert!(r.starts_with("550 5.7.1"), "{r}");
    assert!(r.contains("not the envelope sender"), "{r}");
    let good = kit::plain(ALICE, BOB, "urn:uuid:good");
    let r = kit::submit(addr, ALICE, &[BOB], &good);
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
