//! Issue #57: `mailseal queue` beside a running gateway, on a directory spool and on a
//! PostgreSQL one. The gateway's next hop is down (every attempt defers, the next one
//! ten minutes later) and comes up midway: a held entry stays undelivered, across a
//! restart, until released; a flushed one is delivered at once, not ten minutes later;
//! a requeued one has its attempts and last error reset; a deleted one is gone, and
//! the same message submitted again is accepted and not queued. Unknown and ambiguous
//! ids change nothing and exit 2; a wrong spool location exits 2 and creates nothing.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::kit::{self, Gateway, Sink};

/// `mailseal queue ARGS` (its own log level: what it logs by default).
fn queue(args: &[&str]) -> Output {
    Command::new(common::bin())
        .arg("queue")
        .args(args)
        .env_remove("MAILSEAL_LOG")
        .env_remove("MAILSEAL_STATE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `queue ARGS`, which must succeed: its standard output.
fn ok(args: &[&str]) -> String {
    let o = queue(args);
    assert!(o.status.success(), "queue {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The entries `queue list --json` shows.
fn listed(spool: &[&str]) -> Vec<serde_json::Value> {
    let out = ok(&[&["list", "--json"], spool].concat());
    serde_json::from_str::<Vec<serde_json::Value>>(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn message(name: &str) -> Vec<u8> {
    format!("From: alice@a.test\r\nTo: bob@b.test\r\nMessage-ID: <{name}@a.test>\r\nSubject: {name}\r\n\r\nbody of {name}\r\n")
        .into_bytes()
}

/// The Subject names of what the sink received.
fn subjects(sink: &Sink) -> Vec<String> {
    let mut s: Vec<String> = sink
        .messages()
        .iter()
        .filter_map(|m| {
            String::from_utf8_lossy(&m.data)
                .lines()
                .find_map(|l| l.strip_prefix("Subject: ").map(str::to_string))
        })
        .collect();
    s.sort();
    s
}

/// A relay gateway in `dir` whose spool is `spool` (a directory when `None`), its next
/// hop on `hop` and retries ten minutes apart; its configuration file.
fn gateway_config(dir: &Path, port: u16, hop: u16, spool: Option<&str>) -> String {
    let (_, store) = kit::two_sides(dir);
    let conf = kit::config(
        dir,
        "g",
        &store,
        &[("relay", port, "relay", hop, "tls = \"none\"")],
        "",
    )
    .replace(
        "retry_initial_secs = 1\nretry_max_secs = 2",
        "retry_initial_secs = 600\nretry_max_secs = 600",
    );
    let conf = match spool {
        Some(url) => conf.replace(
            &format!("spool = \"{}\"", dir.join("g-spool").display()),
            &format!("spool = \"{url}\""),
        ),
        None => conf,
    };
    assert!(conf.contains("retry_initial_secs = 600"), "{conf}");
    conf
}

/// Waits until the queue holds `n` entries, each tried (and deferred) at least once.
fn wait_deferred(spool: &[&str], n: usize) -> Vec<serde_json::Value> {
    let start = Instant::now();
    loop {
        let entries = listed(spool);
        let deferred = entries
            .iter()
            .filter(|e| e["attempts"].as_u64() >= Some(1) && e["state"] == "queued")
            .count();
        if entries.len() == n && deferred == n {
            return entries;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not {n} deferred entries: {entries:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The id of the entry whose message's Subject is `name`, found through `show`.
fn id_of(spool: &[&str], entries: &[serde_json::Value], name: &str) -> String {
    for e in entries {
        let id = e["id"].as_str().unwrap();
        let out = ok(&[&["show", id, "--json"], spool].concat());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        if v["headers"]
            .as_str()
            .unwrap()
            .contains(&format!("Subject: {name}\r\n"))
            || v["headers"]
                .as_str()
                .unwrap()
                .ends_with(&format!("Subject: {name}"))
        {
            return id.to_string();
        }
    }
    panic!("no entry for {name}: {entries:#?}")
}

fn entry<'a>(entries: &'a [serde_json::Value], id: &str) -> Option<&'a serde_json::Value> {
    entries.iter().find(|e| e["id"] == id)
}

#[test]
fn queue_tools_beside_a_gateway_on_a_directory_spool() {
    let dir = tempfile::tempdir().unwrap();
    tools_beside_a_running_gateway(dir.path(), None);
}

#[test]
fn queue_tools_beside_a_gateway_on_a_postgres_spool() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    tools_beside_a_running_gateway(dir.path(), Some(&db));
}

fn tools_beside_a_running_gateway(dir: &Path, db: Option<&str>) {
    let [port, hop] = [(); 2].map(|_| kit::free_port());
    let conf = gateway_config(dir, port, hop, db);
    let mut g = Gateway::start(dir, "g", &conf, &[port]);
    let config = g.config.display().to_string();
    // The tools find the spool through the gateway's configuration, or are told it.
    let by_config = ["--config", config.as_str()];
    let spool_location =
        db.map_or_else(|| dir.join("g-spool").display().to_string(), str::to_string);
    let by_spool = ["--spool", spool_location.as_str()];
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let send = |name: &str| {
        let r = kit::submit(addr, "alice@a.test", &["bob@b.test"], &message(name));
        assert!(r.starts_with("250"), "{name}: {r}\n{}", g.log_text());
    };

    for name in ["held", "requeued", "deleted", "flushed"] {
        send(name);
    }
    let mut n = 4;
    let mut entries = wait_deferred(&by_config, n);
    // Two ids that share their first digit, for an ambiguous prefix (at most 16 more
    // messages make sure of one).
    let shared = loop {
        let firsts: Vec<char> = entries
            .iter()
            .map(|e| e["id"].as_str().unwrap().chars().next().unwrap())
            .collect();
        if let Some(c) = firsts
            .iter()
            .find(|c| firsts.iter().filter(|d| d == c).count() > 1)
        {
            break *c;
        }
        send(&format!("extra-{n}"));
        n += 1;
        entries = wait_deferred(&by_config, n);
    };

    // Times in the JSON are RFC 3339, not Unix seconds: when it was accepted (to the
    // millisecond), its next attempt (ten minutes later at most), and no lease.
    let rfc3339 = |v: &serde_json::Value| {
        let t = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
        time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|e| panic!("{t}: {e}"))
    };
    for e in &entries {
        let created = rfc3339(&e["created"]);
        let next = rfc3339(&e["next_attempt"]);
        assert!(next > created, "{e:#}");
        assert!(next - created <= time::Duration::seconds(601), "{e:#}");
        assert!(e.get("created_ms").is_none(), "{e:#}");
        assert!(e["leased_until"].is_null(), "{e:#}");
    }

    // list: one line per entry, with its state, sender, recipients and last error.
    let table = ok(&[&["list"], &by_spool[..]].concat());
    assert_eq!(table.lines().count(), n + 2, "{table}");
    assert!(table.lines().next().unwrap().starts_with("ID "), "{table}");
    for e in &entries {
        let line = table
            .lines()
            .find(|l| l.starts_with(e["id"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(line.contains(" relay "), "{line}");
        assert!(line.contains(" queued "), "{line}");
        assert!(line.contains("<alice@a.test> -> <bob@b.test>"), "{line}");
        assert!(!e["last_error"].as_str().unwrap().is_empty(), "{e}");
        assert!(
            line.contains(&format!(
                "\"{}",
                e["last_error"]
                    .as_str()
                    .unwrap()
                    .chars()
                    .take(20)
                    .collect::<String>()
            )),
            "{line}"
        );
    }
    assert!(
        table.contains(&format!("{n} entries: {n} queued, 0 held")),
        "{table}"
    );

    let held = id_of(&by_spool, &entries, "held");
    let requeued = id_of(&by_spool, &entries, "requeued");
    let deleted = id_of(&by_spool, &entries, "deleted");
    let flushed = id_of(&by_spool, &entries, "flushed");

    // show: the envelope and the header; the body only when asked.
    let shown = ok(&[&["show", &held[..10]], &by_config[..]].concat());
    assert!(shown.contains(&format!("id: {held}")), "{shown}");
    assert!(shown.contains("Subject: held"), "{shown}");
    assert!(!shown.contains("body of held"), "{shown}");
    let shown = ok(&[&["show", &held[..10], "--body"], &by_config[..]].concat());
    assert!(shown.contains("body of held"), "{shown}");

    // Unknown and ambiguous ids: exit 2, a clear message, nothing changed.
    let unused = "0123456789abcdef"
        .chars()
        .find(|c| {
            entries
                .iter()
                .all(|e| !e["id"].as_str().unwrap().starts_with(*c))
        })
        .unwrap()
        .to_string();
    let o = queue(&[&["delete", &flushed[..12], &unused], &by_config[..]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("no queued entry {unused}")),
        "{}",
        text(&o)
    );
    let o = queue(&[&["hold", &shared.to_string()], &by_config[..]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("queued entries: give more of the id"),
        "{}",
        text(&o)
    );
    let o = queue(&[&["show", "zz"], &by_config[..]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let now = listed(&by_config);
    assert_eq!(now.len(), n, "nothing deleted");
    assert!(now.iter().all(|e| e["held"] == false), "nothing held");

    // hold; requeue while held (so no attempt runs before we look): attempts reset.
    let out = ok(&[&["hold", &held[..8], &requeued[..8]], &by_config[..]].concat());
    assert!(out.contains(&format!("{held} held")), "{out}");
    let o = queue(&[&["requeue", &requeued[..8]], &by_config[..]].concat());
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("due now, but held"),
        "{}",
        text(&o)
    );
    // Each change is logged, with the message's own From and Message-ID.
    let line = String::from_utf8_lossy(&o.stderr);
    assert!(
        line.contains("requeued by the operator")
            && line.contains("from=\"alice@a.test\"")
            && line.contains("message_id=\"")
            && !line.contains("message_id=\"-\""),
        "{}",
        text(&o)
    );
    let now = listed(&by_config);
    let r = entry(&now, &requeued).unwrap();
    assert_eq!(r["attempts"], 0, "{r}");
    assert_eq!(r["last_error"], "", "{r}");
    assert_eq!(r["state"], "held", "{r}");
    assert_eq!(entry(&now, &held).unwrap()["state"], "held");

    // delete: gone; the same message again is accepted and not queued.
    let o = queue(&[&["delete", &deleted[..8]], &by_config[..]].concat());
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("deleted, not delivered"),
        "{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("deleted by the operator"),
        "{}",
        text(&o)
    );
    assert!(entry(&listed(&by_config), &deleted).is_none());
    send("deleted");
    let now = listed(&by_config);
    assert!(entry(&now, &deleted).is_none(), "queued again: {now:#?}");
    assert_eq!(now.len(), n - 1);

    // The hop comes up. flush: that entry goes at once (its next attempt was ten
    // minutes away); held ones and the rest stay.
    let sink = Sink::start_on(hop);
    let out = ok(&[&["flush", &flushed[..8]], &by_config[..]].concat());
    assert!(out.contains(&format!("{flushed} due now")), "{out}");
    sink.wait_for(1, Duration::from_secs(30));
    assert_eq!(subjects(&sink), ["flushed"]);
    let now = listed(&by_config);
    assert!(entry(&now, &flushed).is_none());
    assert_eq!(now.len(), n - 2);

    // Held across a restart: still held, still undelivered.
    let status = g.terminate();
    assert!(status.success(), "{status}: {}", g.log_text());
    let g = Gateway::start_file(dir, "g", &g.config.clone(), &[port]);
    let now = listed(&by_config);
    assert_eq!(entry(&now, &held).unwrap()["state"], "held", "{now:#?}");
    assert_eq!(entry(&now, &requeued).unwrap()["state"], "held", "{now:#?}");

    // release: the requeued one (due) goes at once; the other waits for its next
    // attempt, until flushed.
    let out = ok(&[&["release", &held[..8], &requeued[..8]], &by_config[..]].concat());
    assert!(out.contains(&format!("{requeued} released")), "{out}");
    sink.wait_for(2, Duration::from_secs(30));
    assert_eq!(subjects(&sink), ["flushed", "requeued"]);
    assert_eq!(
        entry(&listed(&by_config), &held).unwrap()["state"],
        "queued"
    );
    ok(&[&["flush", &held[..8]], &by_config[..]].concat());
    sink.wait_for(3, Duration::from_secs(30));
    assert_eq!(subjects(&sink), ["flushed", "held", "requeued"]);

    // flush with no id: everything left, at once; the deleted one never comes.
    let out = ok(&[&["flush"], &by_spool[..]].concat());
    assert!(
        out.contains(&format!(
            "{} of {} queued entries made due now",
            n - 4,
            n - 4
        )),
        "{out}"
    );
    sink.wait_for(n - 1, Duration::from_secs(30));
    let start = Instant::now();
    while !listed(&by_config).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the queue does not empty"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        ok(&[&["list"], &by_config[..]].concat()),
        "the queue is empty\n"
    );
    let got = subjects(&sink);
    assert_eq!(got.len(), n - 1, "{got:?}");
    assert!(!got.contains(&"deleted".to_string()), "{got:?}");
    drop(g);
}

#[test]
fn fail_queue_tools_on_a_wrong_spool_exit_2_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-spool");
    let o = queue(&["list", "--spool", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a gateway spool: no such directory"),
        "{}",
        text(&o)
    );
    assert!(!missing.exists(), "created");

    // A directory that is no spool (a typo for its parent, say): left as it was.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("file"), b"x").unwrap();
    let o = queue(&["flush", "--spool", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("it has no queue/ and done/"),
        "{}",
        text(&o)
    );
    let names: Vec<_> = std::fs::read_dir(&other)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["file"]);

    // Through a configuration whose spool is not there, and a configuration that is
    // not there.
    let [port, hop] = [(); 2].map(|_| kit::free_port());
    let conf = gateway_config(dir.path(), port, hop, None);
    let file = dir.path().join("g.toml");
    std::fs::write(&file, conf).unwrap();
    let o = queue(&["list", "--config", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!dir.path().join("g-spool").exists(), "created");
    let o = queue(&["list", "--config", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no-spool"),
        "{}",
        text(&o)
    );

    // A database that holds no spool: no table is made there, its URL not repeated.
    let Some(db) = common::postgres_database() else {
        return;
    };
    let o = queue(&["hold", "ab", "--spool", &db]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("holds no mailseal spool"), "{}", text(&o));
    assert!(!stderr.contains(&db), "{}", text(&o));
    let mut c = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "tables created");
}
