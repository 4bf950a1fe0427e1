//! Running the gateway: LMTP delivery with a refused recipient (a DSN to the sender, a
//! copy in quarantine), the metrics page, SIGHUP reloading the TLS certificate, and
//! SIGTERM stopping cleanly with the queue kept for the next start.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::kit::{self, Gateway, Sink};

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

/// Submits the `i`-th of a run of plain messages, from a@x.test to b@y.test.
fn submit_nth(port: u16, i: usize) {
    let r = kit::submit(
        addr(port),
        "a@x.test",
        &["b@y.test"],
        format!("Subject: {i}\r\n\r\nmessage {i}\r\n").as_bytes(),
    );
    assert!(r.starts_with("250"), "{r}");
}

fn metrics(port: u16) -> String {
    let mut s = TcpStream::connect(addr(port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn lmtp_delivery_bounces_a_refused_recipient_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    let sink = Sink::start_lmtp();
    let [port, mport] = [(); 2].map(|_| kit::free_port());
    // Top-level keys go before the tables.
    let conf = format!("metrics = \"127.0.0.1:{mport}\"\n")
        + &kit::config(
            dir.path(),
            "g",
            &store,
            &[("relay", port, "relay", sink.addr.port(), "tls = \"none\"")],
            "",
        )
        .replace(
            "tls = \"none\"\n\n[delivery]",
            "tls = \"none\"\nprotocol = \"lmtp\"\n\n[delivery]",
        );
    assert!(conf.contains("protocol = \"lmtp\""), "{conf}");
    let g = Gateway::start(dir.path(), "g", &conf, &[port, mport]);
    let mut c = kit::Client::connect(addr(port));
    c.cmd("EHLO x");
    let r = c.submit(
        "sender@a.test",
        &["bob@b.test", "reject-me@b.test"],
        b"Subject: two\r\nMessage-ID: <two@a.test>\r\n\r\nbody\r\n",
    );
    assert!(r.starts_with("250"), "{r}");
    // Bob's copy, then the DSN to the sender (null reverse path).
    let got = sink.wait_for(2, Duration::from_secs(30));
    assert_eq!(got[0].recipients, ["bob@b.test"]);
    let dsn = got.iter().find(|m| m.mail_from.is_empty()).expect("a DSN");
    assert_eq!(dsn.recipients, ["sender@a.test"]);
    let text = String::from_utf8_lossy(&dsn.data);
    assert!(
        text.contains("Final-Recipient: rfc822; reject-me@b.test"),
        "{text}"
    );
    assert!(text.contains("Status: 5.1.1"), "{text}");
    assert!(text.contains("Message-ID: <two@a.test>"), "{text}");
    let quarantined: Vec<_> = std::fs::read_dir(dir.path().join("g-quarantine"))
        .unwrap()
        .collect();
    assert_eq!(quarantined.len(), 1);
    // The sink has the DSN a moment before the gateway reads its 250 and counts it.
    let start = std::time::Instant::now();
    let mut m = metrics(mport);
    while !m.contains("mailseal_delivery_seconds_count 2")
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
        m = metrics(mport);
    }
    assert!(
        m.contains("mailseal_messages_total{direction=\"relay\",verdict=\"passed\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("mailseal_bounced_total{reason=\"5.1\"} 1"),
        "{m}"
    );
    assert!(m.contains("mailseal_delivery_seconds_count 2"), "{m}");
    drop(g);
}

fn served_certificate(port: u16) -> String {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-starttls",
            "smtp",
            "-servername",
            "localhost",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let s = text
        .find("-----BEGIN CERTIFICATE-----")
        .unwrap_or_else(|| panic!("{text}"));
    let e = text.find("-----END CERTIFICATE-----").unwrap();
    text[s..e].to_string()
}

#[test]
fn sighup_reloads_tls_and_sigterm_keeps_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    let [port, hop] = [(); 2].map(|_| kit::free_port());
    let tls_dir = dir.path().join("tls");
    std::fs::create_dir_all(&tls_dir).unwrap();
    let (_, cert, key) = kit::tls_files(&tls_dir);
    let tail = kit::tls_table(&cert, &key);
    let conf = kit::config(
        dir.path(),
        "g",
        &store,
        &[("relay", port, "relay", hop, "")],
        &tail,
    );
    let mut g = Gateway::start(dir.path(), "g", &conf, &[port]);

    let first = served_certificate(port);
    assert!(std::fs::read_to_string(&cert)
        .unwrap()
        .contains(first.trim()));
    // A new certificate in place, then SIGHUP: new connections get it.
    let again = dir.path().join("tls2");
    std::fs::create_dir_all(&again).unwrap();
    let (_, cert2, key2) = kit::tls_files(&again);
    std::fs::copy(&cert2, &cert).unwrap();
    std::fs::copy(&key2, &key).unwrap();
    Command::new("kill")
        .args(["-HUP", &g.child.id().to_string()])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let second = served_certificate(port);
    assert_ne!(first, second);
    assert!(std::fs::read_to_string(&cert2)
        .unwrap()
        .contains(second.trim()));

    // The next hop is down: the message waits. SIGTERM stops the gateway cleanly.
    let r = kit::submit(
        addr(port),
        "a@x.test",
        &["b@y.test"],
        b"Subject: wait\r\n\r\nfor the hop\r\n",
    );
    assert!(r.starts_with("250"), "{r}");
    let status = g.terminate();
    assert!(status.success(), "{status}: {}", g.log_text());
    assert!(g.log_text().contains("stopped"));
    // The hop comes up; the next start delivers what was queued.
    let sink = Sink::start_on(hop);
    let _g = Gateway::start_file(dir.path(), "g", &g.config.clone(), &[port]);
    let got = sink.wait_for(1, Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&got[0].data).contains("for the hop"));
}

/// Whether the tests run as root (who may bind any port and write anywhere).
fn nix_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

#[test]
fn check_config_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    let port = kit::free_port();
    let good = kit::config(
        dir.path(),
        "g",
        &store,
        &[("relay", port, "relay", 1, "tls = \"none\"")],
        "",
    );
    let check = |text: &str| {
        let path = dir.path().join("checked.toml");
        std::fs::write(&path, text).unwrap();
        let out = common::run(&["gateway", "check-config", path.to_str().unwrap()], b"");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            err,
        )
    };
    let (code, stdout, stderr) = check(&good);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout
            .contains("ok (1 listeners; private keys for bob@openpgp.example, bob@smime.example)"),
        "{stdout}"
    );
    // Issue #57: what startup would find, found now.
    let store_text = store.display().to_string();
    // A store that is not there, which it does not create.
    let missing = dir.path().join("no-store");
    let (code, _, stderr) = check(&good.replace(&store_text, &missing.display().to_string()));
    assert_eq!(code, Some(2));
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!missing.exists(), "check-config made the store");
    // A store without private keys.
    let empty = dir.path().join("empty-store");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::set_permissions(&empty, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let (code, _, stderr) = check(&good.replace(&store_text, &empty.display().to_string()));
    assert_eq!(code, Some(2));
    // An empty directory is no store (issue 61: only key commands make one).
    assert!(stderr.contains("no key store at"), "{stderr}");
    let out = common::run(
        &[
            "key",
            "import",
            "--store",
            empty.to_str().unwrap(),
            common::fixture("rfc9216/bob.sign.crt").to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, _, stderr) = check(&good.replace(&store_text, &empty.display().to_string()));
    assert_eq!(code, Some(2));
    assert!(stderr.contains("holds no private key"), "{stderr}");
    // A store that is no directory (sqlite:, as postgres:// and pkcs11:) is opened, not
    // looked for on disk, and its location is not repeated (it may hold a password).
    let sqlite = format!("sqlite:{}", dir.path().join("keys.db").display());
    let fixture = |f: &str| common::fixture(&format!("rfc9216/{f}"));
    let out = common::run(
        &[
            "key",
            "import",
            "--store",
            &sqlite,
            fixture("bob.sign.crt").to_str().unwrap(),
            fixture("bob.sign.key").to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, stdout, stderr) = check(&good.replace(&store_text, &sqlite));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("private keys for bob@smime.example"),
        "{stdout}"
    );
    // Two listeners on one address.
    let two = good.replace(
        "[delivery]",
        &format!(
            "[[listener]]\nname = \"again\"\naddress = \"127.0.0.1:{port}\"\nmode = \"relay\"\ntls = \"none\"\nnext_hop = {{ address = \"127.0.0.1:1\" }}\n\n[delivery]"
        ),
    );
    let (code, _, stderr) = check(&two);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("already has the address"), "{stderr}");
    // A spool it cannot write (root writes anywhere: a file stands where a directory
    // of it would be).
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, b"a file").unwrap();
    let spool_line = good
        .lines()
        .find(|l| l.starts_with("spool = "))
        .unwrap()
        .to_string();
    let (code, _, stderr) = check(&good.replace(
        &spool_line,
        &format!("spool = \"{}\"", blocked.join("spool").display()),
    ));
    assert_eq!(code, Some(2));
    assert!(stderr.contains("spool"), "{stderr}");
    // A port another process holds: a note (it may be this gateway, running).
    let held = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let (code, _, stderr) = check(&good);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("is in use"), "{stderr}");
    drop(held);
    // A port below 1024 as a user that may not bind it: only when not root.
    if !nix_root() {
        let low = good.replace(&format!("127.0.0.1:{port}"), "127.0.0.1:25");
        let (code, _, stderr) = check(&low);
        assert_eq!(code, Some(2));
        assert!(stderr.contains("cannot listen on 127.0.0.1:25"), "{stderr}");
    }
    // A misspelt key; a TLS file that is not there.
    let (code, _, stderr) = check(&good.replace("quarantine", "quarantaine"));
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown field `quarantaine`"), "{stderr}");
    let (code, _, stderr) = check(&format!(
        "{good}\n[tls]\ncertificate = \"/nonexistent.pem\"\nkey = \"/nonexistent.key\"\n"
    ));
    assert_eq!(code, Some(2));
    assert!(stderr.contains("/nonexistent.pem"), "{stderr}");
}

#[test]
fn implicit_tls_listener_greets_inside_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let (_, cert, key) = kit::tls_files(dir.path());
    let tail = kit::tls_table(&cert, &key);
    let conf = kit::config(
        dir.path(),
        "g",
        &store,
        &[(
            "smtps",
            port,
            "relay",
            sink.addr.port(),
            "tls = \"implicit\"",
        )],
        &tail,
    );
    let _g = Gateway::start(dir.path(), "g", &conf, &[port]);
    let mut child = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-quiet",
            "-servername",
            "localhost",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"EHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\nSubject: tls\r\n\r\nover TLS\r\n.\r\nQUIT\r\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("220 g.test ESMTP"), "{text}");
    assert!(!text.contains("STARTTLS"), "not offered inside TLS: {text}");
    assert!(text.contains("250 2.0.0 queued as"), "{text}");
    let got = sink.wait_for(1, Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&got[0].data).contains("over TLS"));
}

/// Delivery keeps a session to its next hop open between messages: ten messages,
/// each sent once the previous one was delivered, take one session. A hop that
/// closes its sessions after each message costs a new session each time, never a
/// message: nothing is deferred.
#[test]
fn delivery_reuses_sessions_and_survives_closed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    for (name, sink, expected) in [
        ("keeps", Sink::start(), 1),
        ("closes", Sink::start_closing(), 10),
    ] {
        let port = kit::free_port();
        let conf = kit::config(
            dir.path(),
            name,
            &store,
            &[("relay", port, "relay", sink.addr.port(), "")],
            "",
        );
        let g = Gateway::start(dir.path(), name, &conf, &[port]);
        for i in 0..10 {
            submit_nth(port, i);
            sink.wait_for(i + 1, Duration::from_secs(30));
            // Its delivery ended (the session is idle again) before the next one.
            let start = std::time::Instant::now();
            while g.log_text().matches("status=\"delivered\"").count() < i + 1 {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "{}",
                    g.log_text()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        assert_eq!(sink.connections(), expected, "{}", g.log_text());
        assert!(
            !g.log_text().contains("status=\"deferred\""),
            "{}",
            g.log_text()
        );
    }
}

/// What a listener accepts goes out at once, not at the deliverer's next poll: with
/// `delivery.poll_ms` an hour, each message still reaches the hop (the spool wakes
/// the deliverer when it queues; the A2A bridge's four passes through the spool
/// depend on it).
#[test]
fn what_is_accepted_is_delivered_without_waiting_for_the_poll() {
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "awake",
        &store,
        &[("relay", port, "relay", sink.addr.port(), "")],
        "",
    );
    let hour = conf.replace("poll_ms = 50\n", "poll_ms = 3600000\n");
    assert_ne!(hour, conf);
    let g = Gateway::start(dir.path(), "awake", &hour, &[port]);
    for i in 0..3 {
        submit_nth(port, i);
        // Each one alone: the deliverer sleeps between them.
        let got = sink.wait_for(i + 1, Duration::from_secs(30));
        assert_eq!(got.len(), i + 1, "{}", g.log_text());
    }
}

/// Issue #57: under systemd (`Type=notify`, `WatchdogSec=`), the gateway says READY=1
/// only once it listens, WATCHDOG=1 while it answers, and STOPPING=1 when told to stop;
/// the unit in `dist/` asks for this.
#[test]
fn tells_systemd_when_it_is_ready_alive_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "g",
        &store,
        &[("relay", port, "relay", 1, "tls = \"none\"")],
        "",
    );
    let path = dir.path().join("g.toml");
    std::fs::write(&path, conf).unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut child = std::process::Command::new(common::bin())
        .args(["gateway", "--config"])
        .arg(&path)
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "200000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut said = Vec::new();
    let mut buf = [0u8; 256];
    while !said.iter().any(|s: &String| s == "WATCHDOG=1") {
        let n = socket
            .recv(&mut buf)
            .expect("the gateway told systemd nothing");
        let state = String::from_utf8_lossy(&buf[..n]).to_string();
        if state == "READY=1" {
            // It listens by the time it says so.
            assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        }
        said.push(state);
    }
    assert_eq!(said[0], "READY=1", "{said:?}");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    loop {
        let n = socket.recv(&mut buf).expect("no STOPPING=1");
        if &buf[..n] == b"STOPPING=1" {
            break;
        }
    }
    assert!(child.wait().unwrap().success());
}
