//! Issue #57: a gateway recovers on its own. PostgreSQL restarts under a running
//! gateway (its spool there): mail submitted during and after is refused only for the
//! moment (4xx, the client retries) and everything arrives once, without restarting
//! the gateway. A gateway killed while its mail was leased to a next hop that hung,
//! started again, delivers that mail within seconds, not when the leases run out.
//!
//! Each test runs a PostgreSQL server of its own (Debian's binaries, as the `postgres`
//! user, trust on loopback), since restarting the shared one would fail the tests
//! beside it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::kit::{self, Gateway, Sink};

/// A PostgreSQL server in a directory of its own, stopped when dropped.
struct Server {
    data: PathBuf,
    bin: PathBuf,
    port: u16,
}

impl Server {
    /// Starts one, or `None` (the test skips, saying why) where it cannot run.
    fn start(dir: &Path) -> Option<Server> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|d| d.flatten().map(|e| e.path().join("bin")).max());
        let usable = root && bin.as_ref().is_some_and(|b| b.join("initdb").exists());
        if !crate::common::peer_available(
            "PostgreSQL server binaries (as root)",
            Command::new("sh").args(["-c", if usable { "true" } else { "false" }]),
        ) {
            return None;
        }
        let bin = bin?;
        std::fs::create_dir_all(dir).unwrap();
        // The postgres user walks to its directory.
        kit::let_others_through(dir);
        let data = dir.join("pgdata");
        std::fs::create_dir_all(&data).unwrap();
        assert!(Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir)
            .status()
            .unwrap()
            .success());
        let as_postgres = |args: &[&str]| {
            let out = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        as_postgres(&[
            bin.join("initdb").to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-A",
            "trust",
            "-U",
            "postgres",
        ]);
        let server = Server {
            data,
            bin,
            port: kit::free_port(),
        };
        server.pg_ctl("start");
        Some(server)
    }

    fn pg_ctl(&self, what: &str) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.data.display()
        );
        let log = self.data.join("log");
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-o", &options, "-l"])
            .arg(&log)
            .args(["-w", "-m", "fast", what])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl {what}: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

/// A gateway configuration in `dir` with one listener (`mode`, next hop `hop`) whose
/// spool (and replay state) is the database at `url`.
fn on_database(dir: &Path, store: &Path, port: u16, mode: &str, hop: u16, url: &str) -> String {
    kit::config(
        dir,
        "a",
        store,
        &[("out", port, mode, hop, "tls = \"none\"")],
        "",
    )
    .replace(
        &format!("spool = \"{}\"", dir.join("a-spool").display()),
        &format!("spool = \"{url}\"\nstate = \"{url}\""),
    )
}

/// Submits as an MTA would: a 4xx is tried again, a second later, for up to a minute.
fn submit_until_taken(addr: SocketAddr, id: &str) -> String {
    let data = kit::plain("alice@smime.example", "bob@smime.example", id);
    let start = Instant::now();
    loop {
        let r = kit::try_submit(addr, "alice@smime.example", &["bob@smime.example"], &data)
            .unwrap_or_else(|e| format!("421 {e}"));
        if !r.starts_with('4') || start.elapsed() > Duration::from_secs(60) {
            return r;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The envelope messageIds the sink got, each once.
fn delivered_ids(sink: &Sink) -> Vec<String> {
    let mut ids: Vec<String> = sink
        .messages()
        .iter()
        .map(|m| String::from_utf8_lossy(&m.data).to_string())
        .map(|text| {
            text.split("urn:uuid:restart-")
                .nth(1)
                .map(|rest| rest.chars().take_while(|c| c.is_ascii_digit()).collect())
                .unwrap_or_default()
        })
        .collect();
    ids.sort();
    ids
}

#[test]
fn postgres_restarts_under_the_gateway_and_nothing_is_lost() {
    restart_under("relay");
}

/// The same with the replay state in the database too (`state = "postgres://..."`):
/// the workers' stores connect again (the pipeline is built again after a failure).
#[test]
fn postgres_restarts_under_a_sealing_gateway_with_its_state_there() {
    restart_under("outbound");
}

fn restart_under(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let Some(pg) = Server::start(&dir.path().join("pg")) else {
        return;
    };
    let (a_store, _) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = on_database(
        dir.path(),
        &a_store,
        port,
        mode,
        sink.addr.port(),
        &pg.url(),
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    for i in 0..10 {
        let r = submit_until_taken(addr, &format!("urn:uuid:restart-{i:02}"));
        assert!(r.starts_with("250"), "{r}");
    }
    sink.wait_for(10, Duration::from_secs(60));
    pg.pg_ctl("restart");
    for i in 10..20 {
        let r = submit_until_taken(addr, &format!("urn:uuid:restart-{i:02}"));
        assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    }
    sink.wait_for(20, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    let ids = delivered_ids(&sink);
    let want: Vec<String> = (0..20).map(|i| format!("{i:02}")).collect();
    if mode == "relay" {
        assert_eq!(ids, want, "each once\n{}", g.log_text());
    } else {
        // Sealed: the envelope is inside the encryption; each message arrived once.
        assert_eq!(ids.len(), 20, "{}", g.log_text());
    }
    assert!(g.log_text().contains("connected again"), "{}", g.log_text());
}

#[test]
fn a_killed_instance_takes_its_own_leases_back_when_it_starts_again() {
    let dir = tempfile::tempdir().unwrap();
    let Some(pg) = Server::start(&dir.path().join("pg")) else {
        return;
    };
    let (a_store, _) = kit::two_sides(dir.path());
    let hung = kit::tarpit();
    let port = kit::free_port();
    let conf = |hop: u16| on_database(dir.path(), &a_store, port, "relay", hop, &pg.url());
    let mut g = Gateway::start(dir.path(), "a", &conf(hung.port()), &[port]);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    for i in 0..3 {
        let r = submit_until_taken(addr, &format!("urn:uuid:restart-{i:02}"));
        assert!(r.starts_with("250"), "{r}");
    }
    // Claimed and stuck at the hop that hangs.
    std::thread::sleep(Duration::from_secs(2));
    let leased = || {
        let mut c = postgres::Client::connect(&pg.url(), postgres::NoTls).unwrap();
        c.query_one(
            "SELECT count(*) FROM mailseal_spool
             WHERE done_at IS NULL AND leased_until > extract(epoch from now())::bigint",
            &[],
        )
        .unwrap()
        .get::<_, i64>(0)
    };
    assert_eq!(leased(), 3);
    // A second process with the same configuration, started while this one runs
    // (by hand, beside the service), cannot bind its ports and leaves the leases
    // alone: taking them back before binding made the live instance deliver twice
    // (found by review).
    let second = std::process::Command::new(crate::common::bin())
        .args(["gateway", "--config"])
        .arg(&g.config)
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert_eq!(leased(), 3, "the live instance's leases were taken");
    // Then the instance dies.
    g.kill();
    // Started again (the same listeners on the same machine: the same instance), with
    // a hop that answers: its leases (60 s in these tests) are taken back at once.
    let sink = Sink::start();
    let started = Instant::now();
    let g = Gateway::start(dir.path(), "a", &conf(sink.addr.port()), &[port]);
    sink.wait_for(3, Duration::from_secs(20));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the leases ran out instead"
    );
    assert!(g.log_text().contains("taken back"), "{}", g.log_text());
}

/// A database that stays away: the gateway answers 4xx meanwhile, then exits non-zero
/// after `delivery.database_down_secs`, so systemd's `Restart=on-failure` starts it
/// again (it had stayed alive and useless, logging twice a second).
#[test]
fn a_database_gone_too_long_makes_the_gateway_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let Some(pg) = Server::start(&dir.path().join("pg")) else {
        return;
    };
    let (a_store, _) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[("out", port, "relay", sink.addr.port(), "tls = \"none\"")],
        "",
    )
    .replace(
        &format!("spool = \"{}\"", dir.path().join("a-spool").display()),
        &format!("spool = \"{}\"", pg.url()),
    )
    .replace(
        "lease_secs = 60\n",
        "lease_secs = 60\ndatabase_down_secs = 3\n",
    );
    let mut g = Gateway::start(dir.path(), "a", &conf, &[port]);
    pg.pg_ctl("stop");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let data = kit::plain("alice@smime.example", "bob@smime.example", "urn:uuid:down");
    let r = kit::try_submit(addr, "alice@smime.example", &["bob@smime.example"], &data)
        .unwrap_or_default();
    assert!(
        r.starts_with('4'),
        "a temporary refusal while it is down: {r}"
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = g.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "still running: {}",
            g.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!status.success(), "{status}");
    assert!(g.log_text().contains("unreachable for"), "{}", g.log_text());
}

/// Issue #57: an instance that dies with mail leased to a next hop that hung is not
/// waited for until its leases run out (600 s here): the other instance sharing the
/// database takes them once the dead one has been silent `delivery.instance_dead_secs`
/// (61 s here: more than three 20 s exchanges, so that a delivery under way has ended
/// first). While the first one lives (and beats, its deliveries hanging), its leases
/// are left alone.
#[test]
fn a_dead_instances_leases_are_taken_by_the_other_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let Some(pg) = Server::start(&dir.path().join("pg")) else {
        return;
    };
    let (a_store, _) = kit::two_sides(dir.path());
    let hung = kit::tarpit();
    let sink = Sink::start();
    let conf = |name: &str, port: u16, hop: u16| {
        kit::config(
            dir.path(),
            name,
            &a_store,
            &[("out", port, "relay", hop, "tls = \"none\"")],
            "",
        )
        .replace(
            &format!(
                "spool = \"{}\"",
                dir.path().join(format!("{name}-spool")).display()
            ),
            &format!("spool = \"{}\"\nstate = \"{}\"", pg.url(), pg.url()),
        )
        .replace(
            "timeout_secs = 10\nlease_secs = 60\n",
            "timeout_secs = 20\nlease_secs = 600\ninstance_dead_secs = 61\n",
        )
    };
    let (pa, pb) = (kit::free_port(), kit::free_port());
    let ca = conf("a", pa, hung.port());
    assert!(ca.contains("instance_dead_secs = 61"), "{ca}");
    let mut a = Gateway::start(dir.path(), "a", &ca, &[pa]);
    for i in 0..3 {
        let r = submit_until_taken(
            ([127, 0, 0, 1], pa).into(),
            &format!("urn:uuid:restart-{i:02}"),
        );
        assert!(r.starts_with("250"), "{r}");
    }
    // Claimed by A and stuck at the hop that hangs; B starts beside it.
    std::thread::sleep(Duration::from_secs(2));
    let b = Gateway::start(dir.path(), "b", &conf("b", pb, sink.addr.port()), &[pb]);
    // A lives and beats: B takes nothing meanwhile.
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        sink.messages().is_empty(),
        "B took a live instance's leases\n{}",
        b.log_text()
    );
    a.kill();
    // Dead: B delivers all three long before the 600 s leases would run out.
    let got = sink.wait_for(3, Duration::from_secs(200));
    assert_eq!(got.len(), 3, "{}", b.log_text());
    assert_eq!(delivered_ids(&sink), ["00", "01", "02"]);
}

/// A next hop that holds its reply to each message until told: it counts each
/// message whose DATA has ended and says so (`arrived`), then answers 250 once `go`
/// says so.
fn held_reply_sink() -> (
    u16,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::Sender<()>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (arrived_tx, arrived) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let delivered = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut w = stream.try_clone().unwrap();
            let mut r = BufReader::new(stream);
            let _ = w.write_all(b"220 held ESMTP\r\n");
            let mut line = String::new();
            let mut in_data = false;
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let reply: &[u8] = if in_data {
                    if line != ".\r\n" {
                        continue;
                    }
                    in_data = false;
                    delivered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = arrived_tx.send(());
                    let _ = go_rx.recv();
                    b"250 2.0.0 Ok: queued as HELD\r\n"
                } else {
                    match line.get(..4).map(str::to_ascii_uppercase).as_deref() {
                        Some("EHLO") => b"250-held\r\n250 PIPELINING\r\n",
                        Some("DATA") => {
                            in_data = true;
                            b"354 go on\r\n"
                        }
                        Some("QUIT") => {
                            let _ = w.write_all(b"221 bye\r\n");
                            break;
                        }
                        _ => b"250 2.0.0 ok\r\n",
                    }
                };
                if w.write_all(reply).is_err() {
                    break;
                }
            }
        }
    });
    (port, arrived, go, count)
}

/// A delivery that completes while the database is away is marked done when it comes
/// back, not left for whoever takes the entry once its lease runs out to deliver
/// again: the next hop gets the message once and the spool knows it was delivered.
#[test]
fn a_done_refused_while_the_database_is_away_is_made_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = Server::start(&dir.path().join("pg")) else {
        return;
    };
    let (a_store, _) = kit::two_sides(dir.path());
    let (hop, arrived, go, delivered) = held_reply_sink();
    let port = kit::free_port();
    let conf = on_database(dir.path(), &a_store, port, "relay", hop, &server.url());
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let r = submit_until_taken(addr, "0");
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    // The message is with the next hop: the database goes, then the hop says 250.
    arrived.recv_timeout(Duration::from_secs(30)).unwrap();
    server.pg_ctl("stop");
    go.send(()).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    server.pg_ctl("start");
    // Marked done once the database answers (within half the 60 s lease).
    let start = Instant::now();
    let done = loop {
        let log = g.log_text();
        if log.contains("marked done once the spool answered again") {
            break log;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "not marked done:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!done.contains("it will be delivered again"), "{done}");
    let mut db = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    let open: i64 = db
        .query_one(
            "SELECT count(*) FROM mailseal_spool WHERE done_at IS NULL",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(open, 0, "the delivered entry is done");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(delivered.load(std::sync::atomic::Ordering::SeqCst), 1);
}
