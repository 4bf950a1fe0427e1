//! Debian's Postfix in front, with the gateway as its after-queue content filter as
//! the README sets it up (`dist/postfix/master.cf.append`, its ports moved to free
//! ones): an agent's message submitted with `swaks` goes Postfix → Alice's gateway
//! (sealed) → Postfix → Bob's gateway (opened) → Bob's sink; Bob's reply comes back
//! through Postfix's MX path → Alice's gateway (opened) → Postfix → Alice's sink. Under
//! S/MIME, OpenPGP and MLS (the agents name their group in `Mailseal-Group`). Alice's
//! gateway reads Postfix's XFORWARD, so its trace field and log name Postfix's client.
//! The recommended before-queue set-up (`dist/postfix/master.cf.before-queue.append`)
//! delivers too, and its refusals reach the sending client with no bounce. Needs root
//! (Postfix's master runs as root) and Postfix and swaks (`.ci/run` installs them);
//! skips without, unless MAILSEAL_REQUIRE_PEERS=1.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::kit::{self, Gateway, Sink};

/// What swaks says in EHLO: the client Postfix forwards to the gateway (XFORWARD).
const SWAKS_HELO: &str = "agent.mailseal.test";

/// The agent's login at Postfix.
const ALICE_LOGIN: (&str, &str) = ("alice-agent", "alice's password");

/// swaks into Postfix's submission port, logged in as `login`: its exit status and
/// everything it printed.
fn try_swaks(
    port: u16,
    login: Option<(&str, &str)>,
    from: &str,
    to: &str,
    data: &[u8],
    dir: &Path,
) -> (bool, String) {
    let file = dir.join(format!("{}.eml", to.replace('@', "_")));
    std::fs::write(&file, data).unwrap();
    let mut cmd = Command::new("swaks");
    cmd.args([
        "--server",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--helo",
        SWAKS_HELO,
        "--from",
        from,
        "--to",
        to,
        "--data",
    ])
    .arg(format!("@{}", file.display()));
    if let Some((user, password)) = login {
        cmd.args([
            "--auth",
            "PLAIN",
            "--auth-user",
            user,
            "--auth-password",
            password,
        ]);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn swaks(port: u16, from: &str, to: &str, data: &[u8], dir: &Path) {
    let (ok, out) = try_swaks(port, Some(ALICE_LOGIN), from, to, data, dir);
    assert!(
        ok,
        "swaks: {out}\nmaillog:\n{}",
        std::fs::read_to_string(dir.join("postfix/maillog")).unwrap_or_default()
    );
}

/// The envelope as the agent wrote it: an MLS one gains its group coordinates.
fn written(data: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(&kit::envelope_of(data)).unwrap();
    v.as_object_mut().unwrap().remove("group");
    v
}

fn round_trip(profile: &str, domain: &str) {
    if !kit::postfix_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let (alice, bob) = (format!("alice@{domain}"), format!("bob@{domain}"));
    run(profile, dir, a_store, b_store, alice, bob, None);
}

/// Alice's message out through Postfix and her gateway to Bob's; Bob's answer back
/// through Postfix's MX path. `group`: the MLS group both are in.
fn run(
    profile: &str,
    dir: tempfile::TempDir,
    a_store: std::path::PathBuf,
    b_store: std::path::PathBuf,
    alice: String,
    bob: String,
    group: Option<String>,
) {
    let (sink_a, sink_b) = (Sink::start(), Sink::start());
    // Postfix's ports (submission, MX, re-injection) and Alice's gateway's (outbound,
    // inbound), as in the snippet; Bob's gateway has no Postfix.
    let [submission, mx, reinject, a_out, a_in, b_in, b_out] = [(); 7].map(|_| kit::free_port());
    let pf_dir = dir.path().join("postfix");
    let _pf = kit::postfix(
        &pf_dir,
        true,
        &[
            (10587, submission),
            (10024, mx),
            (10026, reinject),
            (10025, a_out),
            (10027, a_in),
        ],
        &[(bob.clone(), b_in), (alice.clone(), sink_a.addr.port())],
        &[(ALICE_LOGIN.0, ALICE_LOGIN.1, &[alice.as_str()])],
    );
    // MLS is chosen per message (the group field); the default is for the others.
    let default = if profile == "mls" { "smime" } else { profile };
    let tail = format!("\n[outbound]\ndefault_profile = \"{default}\"\n");
    let a_tail = format!("{tail}{}", kit::relay_submitter());
    let a_conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[
            (
                "outbound",
                a_out,
                "outbound",
                reinject,
                &format!(
                    "tls = \"none\"\nsubmission = \"auth\"\nxforward = true{}",
                    kit::reinject_login(dir.path())
                ),
            ),
            (
                "inbound",
                a_in,
                "inbound",
                reinject,
                &format!(
                    "tls = \"none\"\nclients = [\"127.0.0.1\"]\nxforward = true{}",
                    kit::reinject_login(dir.path())
                ),
            ),
        ],
        &a_tail,
    );
    let b_conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[
            ("in", b_in, "inbound", sink_b.addr.port(), "tls = \"none\""),
            ("out", b_out, "outbound", mx, "tls = \"none\""),
        ],
        &tail,
    );
    let a = Gateway::start(dir.path(), "a", &a_conf, &[a_out, a_in]);
    let b = Gateway::start(dir.path(), "b", &b_conf, &[b_in, b_out]);
    let maillog = || std::fs::read_to_string(pf_dir.join("maillog")).unwrap_or_default();

    let mail = |from: &str, to: &str, id: &str| {
        let mut m = match &group {
            Some(g) => format!("Mailseal-Group: {g}\r\n").into_bytes(),
            None => Vec::new(),
        };
        m.extend(kit::plain(from, to, id));
        m
    };
    let request = mail(&alice, &bob, &format!("urn:uuid:postfix-{profile}-1"));
    swaks(submission, &alice, &bob, &request, dir.path());
    let got = std::panic::catch_unwind(|| sink_b.wait_for(1, Duration::from_secs(90)))
        .unwrap_or_else(|_| {
            panic!(
                "not delivered\nmaillog:\n{}\nA:\n{}\nB:\n{}",
                maillog(),
                a.log_text(),
                b.log_text()
            )
        });
    // Bob's gateway took it from Postfix (no XFORWARD there): its field names Postfix.
    let received = kit::received_by(&got[0].data, "b.test");
    assert!(
        received.starts_with(
            "Received: from postfix.test ([127.0.0.1]) by b.test (mailseal) with ESMTP id "
        ),
        "{received}"
    );
    let text = String::from_utf8_lossy(kit::trace_fields(&got[0].data).1);
    assert!(
        text.starts_with(&format!(
            "Mailseal-Verdict: pass; profile={profile}; protection=signed-encrypted"
        )),
        "{text}"
    );
    if group.is_some() {
        assert_eq!(written(&got[0].data), written(&request));
    } else {
        assert_eq!(kit::envelope_of(&got[0].data), kit::envelope_of(&request));
    }
    assert!(a.log_text().contains("verdict=\"sealed\""));
    // Postfix forwarded its client (swaks) to Alice's outbound listener.
    assert!(
        a.log_text()
            .contains(&format!("client=\"{SWAKS_HELO} [127.0.0.1]\"")),
        "{}",
        a.log_text()
    );
    // The gateway's delivery line carries Postfix's reply and so its queue id: the
    // message is followed from the gateway's log into Postfix's.
    let line = a
        .log_text()
        .lines()
        .find(|l| l.contains("status=\"delivered\""))
        .map(str::to_string)
        .unwrap_or_default();
    let queue_id = line
        .split("reply=\"250 2.0.0 Ok: queued as ")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no Postfix queue id in: {line}"));
    assert!(
        maillog().contains(&format!(" {queue_id}: ")),
        "{queue_id} not in\n{}",
        maillog()
    );

    let answer = mail(&bob, &alice, &format!("urn:uuid:postfix-{profile}-2"));
    let r = kit::submit(([127, 0, 0, 1], b_out).into(), &bob, &[&alice], &answer);
    assert!(r.starts_with("250"), "{r}");
    let got = std::panic::catch_unwind(|| sink_a.wait_for(1, Duration::from_secs(90)))
        .unwrap_or_else(|_| {
            panic!(
                "not delivered back\nmaillog:\n{}\nA:\n{}\nB:\n{}",
                maillog(),
                a.log_text(),
                b.log_text()
            )
        });
    assert_eq!(written(&got[0].data), written(&answer));
    // Postfix puts its Received field on top when the gateway hands the message back;
    // under it, Alice's gateway's names the client Postfix forwarded (Bob's gateway,
    // which says EHLO b.test), not Postfix itself.
    let text = String::from_utf8_lossy(&got[0].data);
    assert!(text.starts_with("Received: "), "{text}");
    let received = kit::received_by(&got[0].data, "a.test");
    assert!(
        received.starts_with("Received: from b.test (")
            && received.contains("[127.0.0.1]) by a.test (mailseal) with ESMTP id "),
        "{received}"
    );
    assert_eq!(
        text.matches("\r\nMailseal-Verdict: pass; profile=").count(),
        1,
        "{text}"
    );
    assert!(a.log_text().contains("verdict=\"opened\""));
}

#[test]
fn postfix_content_filter_smime() {
    round_trip("smime", "smime.example");
}

#[test]
fn postfix_content_filter_openpgp() {
    round_trip("openpgp", "openpgp.example");
}

#[test]
fn postfix_content_filter_mls() {
    if !kit::postfix_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (agents, group) = crate::common::mls::group(dir.path(), 2);
    let [a, b]: [crate::common::mls::Agent; 2] = agents.try_into().ok().unwrap();
    run("mls", dir, a.store, b.store, a.email, b.email, Some(group));
}

/// Issue #57 with the README's Postfix files: an agent that does not log in, or logs
/// in and names another agent as MAIL FROM, is refused by Postfix; one that logs in
/// as itself and writes another agent in From gets past Postfix and is refused by the
/// gateway (Postfix logs in as a relay submitter, whose MAIL FROM the From must be);
/// one that goes to the gateway's port itself has no login there. Only Alice's own
/// login has mail sealed as Alice. The attacker (mallory) has a login of its own.
#[test]
fn fail_postfix_submission_unauthenticated_or_as_another_agent() {
    if !kit::postfix_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = kit::two_sides(dir.path());
    let (alice, bob, mallory) = (
        "alice@smime.example",
        "bob@smime.example",
        "mallory@smime.example",
    );
    let sink_b = Sink::start();
    let [submission, mx, reinject, a_out, a_in] = [(); 5].map(|_| kit::free_port());
    let pf_dir = dir.path().join("postfix");
    let _pf = kit::postfix(
        &pf_dir,
        true,
        &[
            (10587, submission),
            (10024, mx),
            (10026, reinject),
            (10025, a_out),
            (10027, a_in),
        ],
        &[(bob.to_string(), sink_b.addr.port())],
        &[
            (ALICE_LOGIN.0, ALICE_LOGIN.1, &[alice]),
            ("mallory", "mallory's password", &[mallory]),
        ],
    );
    let a_conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[
            (
                "outbound",
                a_out,
                "outbound",
                reinject,
                &format!(
                    "tls = \"none\"\nsubmission = \"auth\"{}",
                    kit::reinject_login(dir.path())
                ),
            ),
            (
                "inbound",
                a_in,
                "inbound",
                reinject,
                &format!("tls = \"none\"{}", kit::reinject_login(dir.path())),
            ),
        ],
        &kit::relay_submitter(),
    );
    let a = Gateway::start(dir.path(), "a", &a_conf, &[a_out, a_in]);
    let maillog = || std::fs::read_to_string(pf_dir.join("maillog")).unwrap_or_default();
    let mallory_login = Some(("mallory", "mallory's password"));

    let forged = kit::plain(alice, bob, "urn:uuid:postfix-forged");
    // Not logged in.
    let (ok, out) = try_swaks(submission, None, alice, bob, &forged, dir.path());
    assert!(!ok && out.contains("5.7.1"), "{out}");
    // Logged in as mallory, MAIL FROM Alice.
    let (ok, out) = try_swaks(submission, mallory_login, alice, bob, &forged, dir.path());
    assert!(!ok && out.contains("not owned by user mallory"), "{out}");
    // Logged in as mallory, MAIL FROM mallory, From Alice: Postfix takes it (it checks
    // the envelope), the gateway does not sign it.
    let (ok, out) = try_swaks(submission, mallory_login, mallory, bob, &forged, dir.path());
    assert!(ok, "Postfix takes mallory's own envelope: {out}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !a.log_text().contains("is not the envelope sender") {
        assert!(
            std::time::Instant::now() < deadline,
            "the gateway did not refuse it\nmaillog:\n{}\nA:\n{}",
            maillog(),
            a.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Mallory skips Postfix and goes to the gateway's port on the same host herself:
    // no login, nothing signed.
    let r = kit::submit(([127, 0, 0, 1], a_out).into(), alice, &[bob], &forged);
    assert!(r.starts_with("530 5.7.0"), "{r}");
    // Or to Postfix's re-injection port, where the gateway hands back what it sealed
    // or opened (a verdict of her own on top): no login, refused (found by review).
    let verdict = [
        b"Mailseal-Verdict: pass; profile=smime; from=alice@smime.example\r\n".as_slice(),
        &forged,
    ]
    .concat();
    let r = kit::submit(([127, 0, 0, 1], reinject).into(), alice, &[bob], &verdict);
    assert!(!r.starts_with("250"), "{r}");
    // Alice's own login: sealed and delivered, and it is the only message Bob's side
    // ever sees.
    let good = kit::plain(alice, bob, "urn:uuid:postfix-good");
    let (ok, out) = try_swaks(submission, Some(ALICE_LOGIN), alice, bob, &good, dir.path());
    assert!(ok, "{out}");
    let got = std::panic::catch_unwind(|| sink_b.wait_for(1, Duration::from_secs(90)))
        .unwrap_or_else(|_| {
            panic!(
                "not delivered\nmaillog:\n{}\nA:\n{}",
                maillog(),
                a.log_text()
            )
        });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sink_b.messages().len(), 1, "{}", maillog());
    let text = String::from_utf8_lossy(&got[0].data);
    assert!(text.contains("application/pkcs7-mime"), "sealed: {text}");
    assert!(!text.contains("postfix-forged"));
}

/// Issue #57, the recommended set-up (`dist/postfix/master.cf.before-queue.append`):
/// Postfix's MX service hands each message to the gateway's inbound listener before it
/// queues anything. A sealed message from Alice's gateway is opened and delivered, the
/// gateway's trace field naming the client Postfix forwarded (XFORWARD) rather than
/// Postfix. A forged one (unsigned, from a sender anyone could name) is refused to the
/// client that sent it, in its SMTP session: Postfix queues nothing and bounces
/// nothing, so the forged sender (whose mail would go to `victim`) gets no backscatter.
#[test]
fn postfix_before_queue_refuses_to_the_client_without_a_bounce() {
    if !kit::postfix_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let (bob, alice, forged) = (
        "bob@smime.example",
        "alice@smime.example",
        "forger@victim.example",
    );
    let (sink_b, victim) = (Sink::start(), Sink::start());
    let [submission, mx, reinject, b_out, b_in, a_out] = [(); 6].map(|_| kit::free_port());
    let pf_dir = dir.path().join("postfix");
    let _pf = kit::postfix_before_queue(
        &pf_dir,
        &[
            (10587, submission),
            (10024, mx),
            (10026, reinject),
            (10025, b_out),
            (10027, b_in),
        ],
        &[
            (bob.to_string(), sink_b.addr.port()),
            (forged.to_string(), victim.addr.port()),
        ],
        &[],
    );
    // Bob's gateway behind Postfix, as dist/gateway.toml has it; Alice's sends to
    // Postfix's MX port.
    let b_conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[(
            "inbound",
            b_in,
            "inbound",
            reinject,
            &format!(
                "tls = \"none\"\nlocal_domains = [\"smime.example\"]\nclients = [\"127.0.0.1\"]\nxforward = true{}",
                kit::reinject_login(dir.path())
            ),
        )],
        "",
    );
    let a_conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[("out", a_out, "outbound", mx, "tls = \"none\"")],
        "",
    );
    let b = Gateway::start(dir.path(), "b", &b_conf, &[b_in]);
    let a = Gateway::start(dir.path(), "a", &a_conf, &[a_out]);
    let maillog = || std::fs::read_to_string(pf_dir.join("maillog")).unwrap_or_default();

    let request = kit::plain(alice, bob, "urn:uuid:before-queue-1");
    let r = kit::submit(([127, 0, 0, 1], a_out).into(), alice, &[bob], &request);
    assert!(r.starts_with("250"), "{r}");
    let got = std::panic::catch_unwind(|| sink_b.wait_for(1, Duration::from_secs(90)))
        .unwrap_or_else(|_| {
            panic!(
                "not delivered\nmaillog:\n{}\nA:\n{}\nB:\n{}",
                maillog(),
                a.log_text(),
                b.log_text()
            )
        });
    assert_eq!(kit::envelope_of(&got[0].data), kit::envelope_of(&request));
    let received = kit::received_by(&got[0].data, "b.test");
    assert!(
        received.starts_with("Received: from a.test (")
            && received.contains("[127.0.0.1]) by b.test (mailseal) with ESMTP id ")
            && received.contains(&format!(" for <{bob}>; ")),
        "the client Postfix forwarded, not Postfix: {received}"
    );

    // The forgery: refused to swaks itself, at the end of its DATA.
    let forgery = kit::plain(forged, bob, "urn:uuid:before-queue-forged");
    let (ok, out) = try_swaks(mx, None, forged, bob, &forgery, dir.path());
    assert!(!ok, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("<** 5")),
        "the gateway's refusal, in swaks's session: {out}\nB:\n{}",
        b.log_text()
    );
    // Postfix writes its line through syslog after the client has its reply: waited for.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut log = maillog();
    while !log.contains("proxy-reject: END-OF-MESSAGE") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        log = maillog();
    }
    assert!(
        log.contains("proxy-reject: END-OF-MESSAGE"),
        "Postfix passed the refusal on: {log}"
    );
    assert!(
        b.log_text().contains("verdict=\"refused\" code=5")
            && b.log_text()
                .contains(&format!("client=\"{SWAKS_HELO} [127.0.0.1]\"")),
        "{}",
        b.log_text()
    );
    // Nothing queued, nothing bounced: Postfix's queue empties once Bob's message is
    // out (removed just after the sink's 250), and no notification went to the forged
    // sender.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let queue = Command::new("postqueue")
            .arg("-c")
            .arg(pf_dir.join("etc"))
            .arg("-p")
            .output()
            .unwrap();
        let queue = String::from_utf8_lossy(&queue.stdout).to_string();
        if queue.contains("Mail queue is empty") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{queue}\n{}",
            maillog()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = maillog();
    assert!(!log.contains("sender non-delivery notification"), "{log}");
    assert!(victim.messages().is_empty(), "{:?}", victim.messages());
    assert_eq!(sink_b.messages().len(), 1);
}
