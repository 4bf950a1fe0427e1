//! Debian's Postfix in front, with the gateway as its after-queue content filter as
//! the README sets it up (`dist/postfix/master.cf.append`, its ports moved to free
//! ones): an agent's message submitted with `swaks` goes Postfix → Alice's gateway
//! (sealed) → Postfix → Bob's gateway (opened) → Bob's sink; Bob's reply comes back
//! through Postfix's MX path → Alice's gateway (opened) → Postfix → Alice's sink. Under
//! S/MIME and OpenPGP. Needs root (Postfix's master runs as root) and Postfix and
//! swaks (`.ci/run` installs them); skips without, unless MAILSEAL_REQUIRE_PEERS=1.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::kit::{self, Gateway, Sink};

const SNIPPET: &str = include_str!("../../dist/postfix/master.cf.append");

fn usable() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    common::peer_available(
        "postfix (as root)",
        Command::new("sh").args(["-c", if root { "command -v postfix" } else { "false" }]),
    ) && common::peer_available("swaks", Command::new("swaks").arg("--version"))
}

/// A Postfix instance of its own in `dir`, stopped when dropped.
struct Postfix {
    etc: std::path::PathBuf,
}

impl Drop for Postfix {
    fn drop(&mut self) {
        let _ = Command::new("postfix")
            .arg("-c")
            .arg(&self.etc)
            .arg("stop")
            .status();
    }
}

fn postfix(dir: &Path, ports: &[(u16, u16)], transports: &[(String, u16)]) -> Postfix {
    let etc = dir.join("etc");
    let (queue, data) = (dir.join("queue"), dir.join("data"));
    for d in [&etc, &queue, &data] {
        std::fs::create_dir_all(d).unwrap();
    }
    // Postfix's own user walks to its queue and data directories.
    let chmod = |p: &Path, mode: &str| {
        assert!(Command::new("chmod")
            .arg(mode)
            .arg(p)
            .status()
            .unwrap()
            .success());
    };
    chmod(dir, "755");
    assert!(Command::new("chown")
        .arg("postfix")
        .arg(&data)
        .status()
        .unwrap()
        .success());
    let map: Vec<String> = transports
        .iter()
        .map(|(rcpt, port)| format!("{rcpt}=smtp:[127.0.0.1]:{port}"))
        .collect();
    let main = format!(
        "compatibility_level = 3.6\nqueue_directory = {q}\ndata_directory = {d}\nmail_owner = postfix\nsetgid_group = postdrop\n\
         inet_interfaces = 127.0.0.1\ninet_protocols = ipv4\nmyhostname = postfix.test\nmydestination =\nmynetworks = 127.0.0.0/8\n\
         smtpd_relay_restrictions = permit_mynetworks, reject\nalias_maps =\nalias_database =\n\
         maillog_file = {dir}/maillog\nmaillog_file_prefixes = {dir}\n\
         transport_maps = inline:{{ {map} }}\nsmtp_tls_security_level = none\n\
         delay_warning_time = 0\nqueue_run_delay = 1s\nminimal_backoff_time = 1s\nmaximal_backoff_time = 2s\n",
        q = queue.display(),
        d = data.display(),
        dir = dir.display(),
        map = map.join(", "),
    );
    std::fs::write(etc.join("main.cf"), main).unwrap();
    let system = std::fs::read_to_string("/etc/postfix/master.cf").unwrap();
    let mut master: String = system
        .lines()
        .filter(|l| !l.starts_with("smtp      inet") && !l.starts_with("smtp inet"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut snippet = SNIPPET.to_string();
    for (from, to) in ports {
        // `127.0.0.1:PORT` and `[127.0.0.1]:PORT`: the snippet's ports are distinct.
        snippet = snippet.replace(&format!(":{from}\n"), &format!(":{to}\n"));
        snippet = snippet.replace(&format!(":{from} "), &format!(":{to} "));
    }
    master.push_str(&snippet);
    std::fs::write(etc.join("master.cf"), master).unwrap();
    let out = Command::new("postfix")
        .arg("-c")
        .arg(&etc)
        .arg("start")
        .output()
        .unwrap();
    let pf = Postfix { etc };
    assert!(
        out.status.success(),
        "postfix start: {}{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("maillog")).unwrap_or_default()
    );
    pf
}

fn swaks(port: u16, from: &str, to: &str, data: &[u8], dir: &Path) {
    let file = dir.join(format!("{}.eml", to.replace('@', "_")));
    std::fs::write(&file, data).unwrap();
    let out = Command::new("swaks")
        .args([
            "--server",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--from",
            from,
            "--to",
            to,
            "--data",
        ])
        .arg(format!("@{}", file.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "swaks: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn round_trip(profile: &str, domain: &str) {
    if !usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let (sink_a, sink_b) = (Sink::start(), Sink::start());
    // Postfix's ports (submission, MX, re-injection) and Alice's gateway's (outbound,
    // inbound), as in the snippet; Bob's gateway has no Postfix.
    let [submission, mx, reinject, a_out, a_in, b_in, b_out] = [(); 7].map(|_| kit::free_port());
    let (alice, bob) = (format!("alice@{domain}"), format!("bob@{domain}"));
    let pf_dir = dir.path().join("postfix");
    let _pf = postfix(
        &pf_dir,
        &[
            (10587, submission),
            (10024, mx),
            (10026, reinject),
            (10025, a_out),
            (10027, a_in),
        ],
        &[(bob.clone(), b_in), (alice.clone(), sink_a.addr.port())],
    );
    let tail = format!("\n[outbound]\ndefault_profile = \"{profile}\"\n");
    let a_conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[
            ("outbound", a_out, "outbound", reinject, "tls = \"none\""),
            ("inbound", a_in, "inbound", reinject, "tls = \"none\""),
        ],
        &tail,
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

    let request = kit::plain(&alice, &bob, &format!("urn:uuid:postfix-{profile}-1"));
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
    let text = String::from_utf8_lossy(&got[0].data);
    assert!(
        text.starts_with(&format!(
            "Mailseal-Verdict: pass; profile={profile}; protection=signed-encrypted"
        )),
        "{text}"
    );
    assert_eq!(kit::envelope_of(&got[0].data), kit::envelope_of(&request));
    assert!(a.log_text().contains("verdict=\"sealed\""));

    let answer = kit::plain(&bob, &alice, &format!("urn:uuid:postfix-{profile}-2"));
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
    assert_eq!(kit::envelope_of(&got[0].data), kit::envelope_of(&answer));
    // Postfix puts its Received field on top when the gateway hands the message back.
    let text = String::from_utf8_lossy(&got[0].data);
    assert!(text.starts_with("Received: "), "{text}");
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
