//! Issue #57, signals: what the gateway tells its operator. Its metrics count
//! deliveries (a histogram that keeps sub-second latencies), deferrals, bounces and
//! refusals by a fixed set of reasons, the oldest queued message's age and whether
//! the spool's database answers; every message line, refused or delivered, says the
//! queue id, listener, From, Message-ID, recipients, verdict and the next hop's reply,
//! as text or as JSON lines; what a message wrote there cannot forge a line.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::kit::{self, Gateway, Sink};

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

/// The metrics page's body.
fn scrape(port: u16) -> String {
    let mut s = TcpStream::connect(addr(port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of `series` (name and labels, exactly as exposed).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.rsplit_once(' ').filter(|(s, _)| *s == series))
        .map(|(_, v)| v.parse().unwrap())
}

/// The series of the family `name` that have labels.
fn series_of(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(str::to_string)
        .collect()
}

/// Scrapes until `done` holds of the page (panics after 30 s).
fn scrape_until(port: u16, what: &str, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let m = scrape(port);
        if done(&m) {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} not seen in:\n{m}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the gateway's log has a line with every one of `parts`; returns it.
fn log_line(g: &Gateway, parts: &[&str]) -> String {
    let start = Instant::now();
    loop {
        let log = g.log_text();
        if let Some(l) = log.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
            return l.to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no line with {parts:?} in:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Retries that wait ten minutes: a deferred message stays queued for the test.
fn one_attempt(conf: String) -> String {
    let c = conf.replace(
        "retry_initial_secs = 1\nretry_max_secs = 2\n",
        "retry_initial_secs = 600\nretry_max_secs = 600\n",
    );
    assert_ne!(c, conf);
    c
}

/// The Message-ID (without brackets) `data` carries.
fn message_id_of(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let line = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("message-id:"))
        .unwrap();
    line[11..]
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_string()
}

/// A gateway with a relay listener and an inbound one (Bob's store) before `sink`,
/// metrics on, and one attempt per message: (gateway, relay port, inbound port,
/// metrics port).
fn relay_and_inbound(dir: &std::path::Path, sink: &Sink, tail: &str) -> (Gateway, u16, u16, u16) {
    let (_, b_store) = kit::two_sides(dir);
    let [relay, inbound, mport] = [(); 3].map(|_| kit::free_port());
    let hop = sink.addr.port();
    let conf = format!("metrics = \"127.0.0.1:{mport}\"\n")
        + &one_attempt(kit::config(
            dir,
            "g",
            &b_store,
            &[
                ("relay", relay, "relay", hop, "tls = \"none\""),
                ("in", inbound, "inbound", hop, "tls = \"none\""),
            ],
            tail,
        ));
    let g = Gateway::start(dir, "g", &conf, &[relay, inbound, mport]);
    (g, relay, inbound, mport)
}

/// An unsigned MailA2A message from Alice to Bob; its Message-ID.
fn unsigned() -> (Vec<u8>, String) {
    let data = kit::plain(
        "alice@smime.example",
        "bob@smime.example",
        "urn:uuid:unsigned",
    );
    let id = message_id_of(&data);
    (data, id)
}

#[test]
fn metrics_count_deliveries_deferrals_bounces_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start();
    let (g, relay, inbound, mport) = relay_and_inbound(dir.path(), &sink, "");
    let send = |to: &str| {
        let r = kit::submit(
            addr(relay),
            "sender@a.test",
            &[to],
            format!("From: sender@a.test\r\nMessage-ID: <{to}>\r\nSubject: x\r\n\r\nbody\r\n")
                .as_bytes(),
        );
        assert!(r.starts_with("250"), "{r}");
    };
    // Delivered; deferred (450 4.2.1); bounced (550 5.1.1), whose DSN is delivered.
    send("ok@b.test");
    send("defer-me@b.test");
    send("reject-me@b.test");
    // Unsigned at the inbound listener: refused.
    let (data, _) = unsigned();
    let r = kit::submit(
        addr(inbound),
        "alice@smime.example",
        &["bob@smime.example"],
        &data,
    );
    assert!(r.starts_with("550 5.7.1"), "{r}");
    sink.wait_for(2, Duration::from_secs(30));

    // The queue is read once a second: in the end the deferred message alone is there.
    let m = scrape_until(mport, "two deliveries, a deferral and the queue", |m| {
        sample(m, "mailseal_delivery_seconds_count") == Some(2.0)
            && !series_of(m, "mailseal_deferred_total").is_empty()
            && sample(m, "mailseal_queue_depth") == Some(1.0)
            && sample(m, "mailseal_queue_oldest_age_seconds").is_some_and(|a| a > 0.0)
    });
    let exactly = |series: &str, want: f64| {
        assert_eq!(sample(&m, series), Some(want), "{series} in\n{m}");
    };
    exactly(
        "mailseal_messages_total{direction=\"relay\",verdict=\"passed\"}",
        3.0,
    );
    exactly(
        "mailseal_messages_total{direction=\"inbound\",verdict=\"refused\"}",
        1.0,
    );
    assert_eq!(
        series_of(&m, "mailseal_refused_total"),
        ["mailseal_refused_total{direction=\"inbound\",status=\"5.7.1\"} 1"],
        "{m}"
    );
    assert_eq!(
        series_of(&m, "mailseal_deferred_total"),
        ["mailseal_deferred_total{reason=\"4.2\"} 1"],
        "{m}"
    );
    assert_eq!(
        series_of(&m, "mailseal_bounced_total"),
        ["mailseal_bounced_total{reason=\"5.1\"} 1"],
        "{m}"
    );
    exactly("mailseal_database_up", 1.0);
    // Milliseconds are kept: the sum is not 0, and a next hop on this machine took
    // the message within half a second at least once (whole seconds put both at 0).
    let sum = sample(&m, "mailseal_delivery_seconds_sum").unwrap();
    assert!(sum > 0.0, "{m}");
    let half = sample(&m, "mailseal_delivery_seconds_bucket{le=\"0.5\"}").unwrap();
    assert!(half >= 1.0, "{m}");
    exactly("mailseal_delivery_seconds_bucket{le=\"+Inf\"}", 2.0);

    // The lines say the same, each with the queue id and the next hop's reply.
    let delivered = log_line(&g, &["status=\"delivered\"", "to=\"ok@b.test\""]);
    for part in [
        "listener=\"relay\"",
        "from=\"sender@a.test\"",
        "message_id=\"ok@b.test\"",
        "reply=\"250 2.0.0 Ok: queued as SINK0\"",
        "dsn=\"2.0.0\"",
    ] {
        assert!(delivered.contains(part), "{part}: {delivered}");
    }
    let deferred = log_line(&g, &["status=\"deferred\""]);
    assert!(
        deferred.contains("reply=\"450 4.2.1 mailbox busy, try later\""),
        "{deferred}"
    );
    assert!(
        deferred.contains("message_id=\"defer-me@b.test\""),
        "{deferred}"
    );
    let bounced = log_line(&g, &["status=\"bounced\""]);
    assert!(bounced.contains("dsn=\"5.1.1\""), "{bounced}");
    let refused = log_line(&g, &["verdict=\"refused\""]);
    for part in [
        "listener=\"in\"",
        "from=\"alice@smime.example\"",
        "recipients=\"bob@smime.example\"",
        "dsn=\"5.7.1\"",
    ] {
        assert!(refused.contains(part), "{part}: {refused}");
    }
    // Nothing was queued, yet the line names the message (a digest, not "-").
    let id = refused
        .split("id=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    assert_eq!(id.len(), 32, "{refused}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{refused}");
}

#[test]
fn json_log_lines_carry_what_the_message_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start();
    let (g, relay, inbound, _) =
        relay_and_inbound(dir.path(), &sink, "\n[log]\nformat = \"json\"\n");
    let (data, message_id) = unsigned();
    let r = kit::submit(
        addr(inbound),
        "alice@smime.example",
        &["bob@smime.example", "carol@smime.example"],
        &data,
    );
    assert!(r.starts_with("550 5.7.1"), "{r}");
    let r = kit::submit(
        addr(relay),
        "sender@a.test",
        &["ok@b.test"],
        b"From: Sender <sender@a.test>\r\nMessage-ID: <j1@a.test>\r\n\r\nbody\r\n",
    );
    assert!(r.starts_with("250"), "{r}");
    sink.wait_for(1, Duration::from_secs(30));
    log_line(&g, &["\"status\":\"delivered\""]);

    let lines: Vec<serde_json::Value> = g
        .log_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let find = |message: &str, key: &str, value: &str| {
        lines
            .iter()
            .find(|l| l["message"] == message && l[key] == value)
            .unwrap_or_else(|| panic!("no {message} line with {key}={value}: {lines:#?}"))
            .clone()
    };
    let refused = find("message", "verdict", "refused");
    assert_eq!(refused["listener"], "in", "{refused}");
    assert_eq!(refused["from"], "alice@smime.example", "{refused}");
    assert_eq!(refused["message_id"], message_id.as_str(), "{refused}");
    assert_eq!(
        refused["recipients"], "bob@smime.example,carol@smime.example",
        "{refused}"
    );
    assert_eq!(refused["nrcpt"], 2, "{refused}");
    assert_eq!(refused["code"], 550, "{refused}");
    assert_eq!(refused["dsn"], "5.7.1", "{refused}");
    assert_eq!(refused["direction"], "inbound", "{refused}");
    assert_eq!(refused["level"], "INFO", "{refused}");
    assert_eq!(refused["id"].as_str().unwrap().len(), 32, "{refused}");

    let passed = find("message", "verdict", "passed");
    let queue_id = passed["id"].as_str().unwrap();
    let delivered = find("delivery", "status", "delivered");
    assert_eq!(delivered["id"], queue_id, "{delivered}");
    assert_eq!(delivered["listener"], "relay", "{delivered}");
    assert_eq!(delivered["from"], "sender@a.test", "{delivered}");
    assert_eq!(delivered["message_id"], "j1@a.test", "{delivered}");
    assert_eq!(delivered["to"], "ok@b.test", "{delivered}");
    assert_eq!(
        delivered["reply"], "250 2.0.0 Ok: queued as SINK0",
        "{delivered}"
    );
}

/// `MAILSEAL_LOG_FORMAT` says instead of the configuration; a value it does not know
/// stops the gateway before it starts, saying so.
#[test]
fn log_format_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (_, b_store) = kit::two_sides(dir.path());
    let port = kit::free_port();
    let path = dir.path().join("g.toml");
    std::fs::write(
        &path,
        kit::config(
            dir.path(),
            "g",
            &b_store,
            &[("relay", port, "relay", 1, "tls = \"none\"")],
            "",
        ),
    )
    .unwrap();
    let g = Gateway::start_file_env(
        dir.path(),
        "g",
        &path,
        &[port],
        &[("MAILSEAL_LOG_FORMAT", "json")],
    );
    let line = log_line(&g, &["listening"]);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["listener"], "relay", "{line}");
    drop(g);
    let out = std::process::Command::new(crate::common::bin())
        .args(["gateway", "--config"])
        .arg(&path)
        .env("MAILSEAL_LOG_FORMAT", "xml\u{1b}[2J")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MAILSEAL_LOG_FORMAT: xml\\u{001b}[2J: text or json"),
        "{err}"
    );
}

/// A From and Message-ID carrying ESC, a Unicode line separator and NEL (a C1 line
/// break) reach the log escaped, on the message's own line: every line of the log is
/// one the gateway began (with its time stamp), none the message forged. (A bare LF
/// ends a header line, so it cannot be inside a field; these are the line breaks that
/// can.)
#[test]
fn fail_header_text_cannot_forge_a_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start();
    let (g, relay, inbound, _) = relay_and_inbound(dir.path(), &sink, "");
    let forged = "\u{1b}[2J\u{2028}2030-01-01T00:00:00Z INFO message verdict=\"opened\"\u{85}";
    // Two From fields: the header does not parse, and the line shows the first as
    // written.
    let data = format!(
        "From: evil{forged}@evil.test\r\nFrom: second@evil.test\r\nMessage-ID: <m{forged}@evil.test>\r\n\r\nbody\r\n"
    );
    for port in [relay, inbound] {
        let r = kit::submit(
            addr(port),
            "evil@evil.test",
            &["bob@smime.example"],
            data.as_bytes(),
        );
        assert!(r.starts_with("250"), "{r}");
    }
    sink.wait_for(2, Duration::from_secs(30));
    log_line(&g, &["status=\"delivered\"", "listener=\"in\""]);
    log_line(&g, &["status=\"delivered\"", "listener=\"relay\""]);
    let log = g.log_text();
    for c in ['\u{1b}', '\u{2028}', '\u{85}', '\r'] {
        assert!(!log.contains(c), "{c:?} in the log:\n{log}");
    }
    for l in log.lines() {
        assert!(
            l.starts_with(|c: char| c.is_ascii_digit()) && !l.starts_with("2030"),
            "a line the gateway did not begin: {l}"
        );
    }
    // Each of the two messages has its message line and its delivery line, escaped.
    let escaped: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("from=\"evil\\\\u{001b}[2J\\\\u{2028}2030-01-01"))
        .collect();
    assert_eq!(escaped.len(), 4, "{log}");
    assert!(
        escaped
            .iter()
            .all(|l| l.contains("message_id=\"m\\\\u{001b}[2J\\\\u{2028}")),
        "{log}"
    );
}

/// A TCP relay to PostgreSQL that can be cut and mended (a database that goes away
/// for this gateway alone, not for the tests beside it on the same server).
struct Cut {
    port: u16,
    open: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Cut {
    fn start(target: SocketAddr) -> Cut {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (o, s) = (open.clone(), streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !o.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let mut all = s.lock().unwrap();
                all.push(client.try_clone().unwrap());
                all.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Cut {
            port,
            open,
            streams,
        }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn mend(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// With the spool in PostgreSQL: the oldest message's age comes from the database,
/// and `mailseal_database_up` falls to 0 while the database cannot be reached and
/// comes back to 1 when it can.
#[test]
fn postgres_spool_age_and_database_up_down() {
    let Some(url) = crate::common::postgres_database() else {
        return;
    };
    let (head, rest) = url.split_once('@').unwrap();
    let (host, database) = rest.split_once('/').unwrap();
    use std::net::ToSocketAddrs;
    let target = host.to_socket_addrs().unwrap().next().unwrap();
    let relay = Cut::start(target);
    let through = format!("{head}@127.0.0.1:{}/{database}", relay.port);
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let [port, mport] = [(); 2].map(|_| kit::free_port());
    let conf = format!("metrics = \"127.0.0.1:{mport}\"\n")
        + &one_attempt(kit::config(
            dir.path(),
            "g",
            &a_store,
            &[("relay", port, "relay", sink.addr.port(), "tls = \"none\"")],
            "",
        ))
        .replace(
            &format!("spool = \"{}\"", dir.path().join("g-spool").display()),
            &format!("spool = \"{through}\""),
        );
    assert!(conf.contains(&through));
    let g = Gateway::start(dir.path(), "g", &conf, &[port, mport]);
    let r = kit::submit(
        addr(port),
        "sender@a.test",
        &["defer-me@b.test"],
        b"From: sender@a.test\r\nSubject: wait\r\n\r\nbody\r\n",
    );
    assert!(r.starts_with("250"), "{r}");
    // Its attempt made, it waits (the age is in whole seconds: it may show 1 before
    // the attempt).
    // (Depth and age are read together, at most once a second: a read made just
    // before the put says 0 until the next.)
    let m = scrape_until(mport, "the deferral, the message's age and depth", |m| {
        !series_of(m, "mailseal_deferred_total").is_empty()
            && sample(m, "mailseal_queue_oldest_age_seconds").is_some_and(|a| a > 0.0)
            && sample(m, "mailseal_queue_depth") == Some(1.0)
    });
    assert_eq!(sample(&m, "mailseal_queue_depth"), Some(1.0), "{m}");
    assert_eq!(sample(&m, "mailseal_database_up"), Some(1.0), "{m}");
    assert_eq!(
        series_of(&m, "mailseal_deferred_total"),
        ["mailseal_deferred_total{reason=\"4.2\"} 1"],
        "{m}"
    );
    relay.cut();
    let m = scrape_until(mport, "the database down", |m| {
        sample(m, "mailseal_database_up") == Some(0.0)
    });
    assert!(
        sample(&m, "mailseal_database_down_seconds").is_some_and(|s| s > 0.0),
        "{m}"
    );
    relay.mend();
    let m = scrape_until(mport, "the database back", |m| {
        sample(m, "mailseal_database_up") == Some(1.0)
    });
    assert_eq!(
        sample(&m, "mailseal_database_down_seconds"),
        Some(0.0),
        "{m}"
    );
    assert_eq!(sample(&m, "mailseal_queue_depth"), Some(1.0), "{m}");
    drop(g);
}

/// Issue #57: what the session refuses itself, before any message reaches the
/// pipeline, has its line and its count too: a RCPT for a domain the inbound listener
/// does not serve names the address and the MAIL FROM; a MAIL before a login on a
/// submission listener says so; the client's text in either is escaped.
#[test]
fn fail_refusals_in_the_session_have_a_line_and_a_count() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start();
    let (_, b_store) = kit::two_sides(dir.path());
    let [inbound, outbound, mport] = [(); 3].map(|_| kit::free_port());
    let hop = sink.addr.port();
    let conf = format!("metrics = \"127.0.0.1:{mport}\"\n")
        + &kit::config(
            dir.path(),
            "g",
            &b_store,
            &[
                (
                    "in",
                    inbound,
                    "inbound",
                    hop,
                    "tls = \"none\"\nlocal_domains = [\"smime.example\"]",
                ),
                (
                    "out",
                    outbound,
                    "outbound",
                    hop,
                    "tls = \"none\"\nsubmission = \"auth\"",
                ),
            ],
            &kit::relay_submitter(),
        );
    let g = Gateway::start(dir.path(), "g", &conf, &[inbound, outbound, mport]);

    let mut c = kit::Client::connect(addr(inbound));
    c.cmd("EHLO spammer.example");
    assert!(c.cmd("MAIL FROM:<spammer@x.example>").starts_with("250"));
    let r = c.cmd("RCPT TO:<victim\u{1b}[2J@elsewhere.example>");
    assert!(r.starts_with('5'), "{r}");
    let r = c.cmd("RCPT TO:<victim@elsewhere.example>");
    assert!(r.starts_with("550 5.7.1"), "{r}");
    let relay = log_line(
        &g,
        &[
            "refused in the session",
            "recipients=\"victim@elsewhere.example\"",
        ],
    );
    for part in [
        "listener=\"in\"",
        "direction=\"inbound\"",
        "mail_from=\"spammer@x.example\"",
        "code=550",
        "dsn=\"5.7.1\"",
        "relay access denied",
    ] {
        assert!(relay.contains(part), "{part}: {relay}");
    }
    let log = g.log_text();
    assert!(
        !log.contains('\u{1b}'),
        "the escape reached the log:\n{log}"
    );

    let mut c = kit::Client::connect(addr(outbound));
    c.cmd("EHLO agent");
    let r = c.cmd("MAIL FROM:<treasury@smime.example>");
    assert!(r.starts_with("530 5.7.0"), "{r}");
    let unauthenticated = log_line(&g, &["refused in the session", "listener=\"out\""]);
    for part in ["code=530", "dsn=\"5.7.0\"", "authentication required"] {
        assert!(unauthenticated.contains(part), "{part}: {unauthenticated}");
    }

    let m = scrape_until(mport, "the session's refusals counted", |m| {
        sample(
            m,
            "mailseal_refused_total{direction=\"inbound\",status=\"5.7.1\"}",
        ) == Some(1.0)
            && sample(
                m,
                "mailseal_refused_total{direction=\"outbound\",status=\"5.7.0\"}",
            ) == Some(1.0)
    });
    assert!(
        sample(
            &m,
            "mailseal_messages_total{direction=\"inbound\",verdict=\"refused\"}"
        )
        .is_none(),
        "no message was refused, only commands: {m}"
    );
}
