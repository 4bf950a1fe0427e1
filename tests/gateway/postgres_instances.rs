//! Two outbound gateway instances on one PostgreSQL spool and replay state: clients
//! send to both; one is SIGKILLed midway and never comes back; the other delivers
//! everything, including what the dead one had accepted and what it had claimed (its
//! leases run out). The first instance's own next hop hangs, so that nothing it
//! accepted reaches the sink except through the second.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common;
use crate::kit::{self, Gateway, Sink};

const MESSAGES: usize = 200;

#[test]
fn one_instance_dies_the_other_delivers_everything() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let [a1_out, a2_out, b_in] = [(); 3].map(|_| kit::free_port());
    let b_conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[("in", b_in, "inbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let _b = Gateway::start(dir.path(), "b", &b_conf, &[b_in]);
    let shared = |name: &str, port: u16| {
        kit::config(
            dir.path(),
            name,
            &a_store,
            &[("out", port, "outbound", b_in, "tls = \"none\"")],
            "",
        )
        .replace(
            &format!(
                "spool = \"{}\"",
                dir.path().join(format!("{name}-spool")).display()
            ),
            &format!("spool = \"{db}\"\nstate = \"{db}\""),
        )
        .replace(
            "timeout_secs = 10\nlease_secs = 60",
            "timeout_secs = 3\nlease_secs = 10",
        )
    };
    let tarpit = kit::tarpit();
    let c1 = shared("a1", a1_out).replace(
        &format!("address = \"127.0.0.1:{b_in}\""),
        &format!("address = \"{tarpit}\""),
    );
    let c2 = shared("a2", a2_out);
    assert!(
        c1.contains("postgres")
            && c1.contains("lease_secs = 10")
            && c1.contains(&tarpit.to_string()),
        "{c1}"
    );
    let mut a1 = Gateway::start(dir.path(), "a1", &c1, &[a1_out]);
    let a2 = Gateway::start(dir.path(), "a2", &c2, &[a2_out]);
    let addr = |p: u16| -> SocketAddr { ([127, 0, 0, 1], p).into() };

    let mut ids = Vec::new();
    for i in 0..MESSAGES {
        let id = format!("urn:uuid:pg-{i}");
        let data = kit::plain("alice@smime.example", "bob@smime.example", &id);
        let port = if i % 2 == 0 || i >= MESSAGES / 2 {
            a2_out
        } else {
            a1_out
        };
        if port == a1_out && i == MESSAGES / 2 - 1 {
            // The last message A1 takes; then it dies with whatever it holds.
            let r = kit::submit(
                addr(port),
                "alice@smime.example",
                &["bob@smime.example"],
                &data,
            );
            assert!(r.starts_with("250"), "{r}");
            a1.kill();
            ids.push(id);
            continue;
        }
        let r = kit::submit(
            addr(port),
            "alice@smime.example",
            &["bob@smime.example"],
            &data,
        );
        assert!(r.starts_with("250"), "{r}\n{}", a2.log_text());
        ids.push(id);
    }
    let got = sink.wait_for(MESSAGES, Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(2));
    let got = sink.messages().len().max(got.len());
    assert_eq!(got, MESSAGES, "every message once");
    let mut seen = std::collections::HashSet::new();
    for m in sink.messages() {
        let v: serde_json::Value = serde_json::from_slice(&kit::envelope_of(&m.data)).unwrap();
        assert!(
            seen.insert(v["messageId"].as_str().unwrap().to_string()),
            "twice"
        );
    }
    for id in &ids {
        assert!(seen.contains(id), "{id} missing");
    }
}

/// Two gateway instances for one agent whose MLS state and peer policies are in
/// PostgreSQL (`state = postgres://...`) act as one group member: a message opened by
/// one is a duplicate at the other; a Commit applied by one moves both to the new
/// epoch; messages both seal for the group take distinct generations, and the other
/// member opens every one. Nothing of the MLS state is in the store directory.
#[test]
fn mls_two_instances_act_as_one_member() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Agent two's commands (identity, inviters, KeyPackage, join) use the database.
    common::mls::use_state(&root.join("store2"), &db);
    let (agents, group) = common::mls::group(root, 2);
    let (one, two) = (&agents[0], &agents[1]);
    assert!(
        !two.store.join("mls.db").exists(),
        "agent two's MLS state is in PostgreSQL, not beside its store"
    );
    let (sink_a, sink_b) = (Sink::start(), Sink::start());
    let [b1_in, b1_out, b2_in, b2_out] = [(); 4].map(|_| kit::free_port());
    let instance = |name: &str, inp: u16, out: u16| {
        let c = kit::config(
            root,
            name,
            &two.store,
            &[
                ("in", inp, "inbound", sink_b.addr.port(), "tls = \"none\""),
                ("out", out, "outbound", sink_a.addr.port(), "tls = \"none\""),
            ],
            "",
        )
        .replace("workers = 2\n", &format!("workers = 2\nstate = \"{db}\"\n"));
        assert!(c.contains("state = \"postgres"));
        Gateway::start(root, name, &c, &[inp, out])
    };
    let b1 = instance("b1", b1_in, b1_out);
    let b2 = instance("b2", b2_in, b2_out);
    let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let mail = root.join("mail-out");
    let sealed =
        |n: usize| std::fs::read(common::mls::send(&mail, one, &[two], &group, n)).unwrap();

    let m1 = sealed(1);
    let r = kit::submit(at(b1_in), &one.email, &[&two.email], &m1);
    assert!(r.starts_with("250"), "{r}\n{}", b1.log_text());
    sink_b.wait_for(1, Duration::from_secs(60));
    // The same mail at the other instance: accepted, recognised, dropped.
    let r = kit::submit(at(b2_in), &one.email, &[&two.email], &m1);
    assert!(r.starts_with("250"), "{r}\n{}", b2.log_text());
    let m2 = sealed(2);
    let r = kit::submit(at(b2_in), &one.email, &[&two.email], &m2);
    assert!(r.starts_with("250"), "{r}\n{}", b2.log_text());
    sink_b.wait_for(2, Duration::from_secs(60));

    // One's self-update, applied by b1; the next message, of the new epoch, at b2.
    let commit = common::mls::update(one, &group, &root.join("update"));
    let r = kit::submit(
        at(b1_in),
        &one.email,
        &[&two.email],
        &std::fs::read(commit).unwrap(),
    );
    assert!(r.starts_with("250"), "{r}\n{}", b1.log_text());
    let m3 = sealed(3);
    let r = kit::submit(at(b2_in), &one.email, &[&two.email], &m3);
    assert!(r.starts_with("250"), "{r}\n{}", b2.log_text());
    let got = sink_b.wait_for(3, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        sink_b.messages().len(),
        3,
        "one copy of m1, the Commit not delivered: {}\n{}",
        b1.log_text(),
        b2.log_text()
    );
    let epochs: Vec<u64> = got
        .iter()
        .map(|m| {
            let env: serde_json::Value =
                serde_json::from_slice(&kit::envelope_of(&m.data)).unwrap();
            env["group"]["epoch"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(epochs, vec![1, 1, 2], "{}", b2.log_text());

    // A message of the next epoch reaches b2 before its Commit: held, in the shared
    // state. The Commit reaches b1, which applies it and releases what b2 held.
    let commit = common::mls::update(one, &group, &root.join("update2"));
    let m4 = sealed(4);
    let r = kit::submit(at(b2_in), &one.email, &[&two.email], &m4);
    assert!(r.starts_with("250"), "{r}\n{}", b2.log_text());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sink_b.messages().len(), 3, "held, not delivered");
    let r = kit::submit(
        at(b1_in),
        &one.email,
        &[&two.email],
        &std::fs::read(commit).unwrap(),
    );
    assert!(r.starts_with("250"), "{r}\n{}", b1.log_text());
    let got = sink_b.wait_for(4, Duration::from_secs(60));
    let env: serde_json::Value = serde_json::from_slice(&kit::envelope_of(&got[3].data)).unwrap();
    assert_eq!(env["group"]["epoch"], 3, "{}", b1.log_text());
    assert_eq!(got[3].recipients, vec![two.email.clone()]);
    // The release line names the message as its held line did: From and Message-ID.
    let log = b1.log_text();
    let released = log
        .lines()
        .find(|l| l.contains("released") && l.contains("held="))
        .unwrap_or_else(|| panic!("no released line:\n{log}"));
    assert!(
        released.contains(&format!("from=\"{}\"", one.email))
            && released.contains("message_id=\"")
            && !released.contains("message_id=\"-\""),
        "{released}"
    );

    // Agent two sends through both instances: one sender ratchet between them.
    for i in 0..6 {
        let mut m = format!("Mailseal-Group: {group}\r\n").into_bytes();
        m.extend(kit::plain(
            &two.email,
            &one.email,
            &format!("urn:uuid:out-{i}"),
        ));
        let port = if i % 2 == 0 { b1_out } else { b2_out };
        let r = kit::submit(at(port), &two.email, &[&one.email], &m);
        assert!(r.starts_with("250"), "{r}");
    }
    let out = sink_a.wait_for(6, Duration::from_secs(60));
    let mut generations = Vec::new();
    for (i, m) in out.iter().enumerate() {
        let f = root.join(format!("to-one-{i}.eml"));
        std::fs::write(&f, &m.data).unwrap();
        let opened = common::mls::ok(&one.store, &["open", "--in", f.to_str().unwrap()]);
        let env: serde_json::Value = serde_json::from_slice(&opened).unwrap();
        assert_eq!(env["group"]["epoch"], 3);
        generations.push(env["group"]["generation"].as_u64().unwrap());
    }
    generations.sort();
    assert_eq!(generations, vec![0, 1, 2, 3, 4, 5]);
}

/// The peer policies live in PostgreSQL with the state: a card imported there by the
/// command line (on any machine) reaches a running gateway's workers at SIGHUP. The
/// outbound default is OpenPGP, for which the recipient has no key: refused; bob's
/// card lists S/MIME only, and once the workers read it, the message is sealed
/// under S/MIME.
#[test]
fn card_imported_into_the_shared_policies_applies_after_sighup() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[("out", port, "outbound", sink.addr.port(), "tls = \"none\"")],
        "\n[outbound]\ndefault_profile = \"openpgp\"\n",
    )
    .replace("workers = 2\n", &format!("workers = 2\nstate = \"{db}\"\n"));
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let at = SocketAddr::from(([127, 0, 0, 1], port));
    let (from, to) = ("alice@smime.example", "bob@smime.example");
    let r = kit::submit(at, from, &[to], &kit::plain(from, to, "urn:uuid:card-1"));
    assert!(r.starts_with('5'), "no OpenPGP key for bob: {r}");

    let card = dir.path().join("bob-card.json");
    let out = common::run(
        &[
            "--store",
            b_store.to_str().unwrap(),
            "card",
            "--email",
            to,
            "--out",
            card.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::run(
        &[
            "--store",
            a_store.to_str().unwrap(),
            "--state",
            &db,
            "key",
            "import",
            "--agent-card",
            card.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !a_store.join("peers.json").exists(),
        "the policy went to PostgreSQL"
    );
    // Running workers keep the policies they read until SIGHUP.
    let r = kit::submit(at, from, &[to], &kit::plain(from, to, "urn:uuid:card-2"));
    assert!(r.starts_with('5'), "{r}");
    std::process::Command::new("kill")
        .args(["-HUP", &g.child.id().to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !g.log_text().contains("read again") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = kit::submit(at, from, &[to], &kit::plain(from, to, "urn:uuid:card-3"));
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    let got = sink.wait_for(1, Duration::from_secs(30));
    let text = String::from_utf8_lossy(&got[0].data);
    assert!(
        text.contains("application/pkcs7-mime"),
        "sealed under the card's profile: {text}"
    );
}

/// Issue #57: a wrong database password is said as PostgreSQL says it, not as "db
/// error".
#[test]
fn check_config_says_why_the_database_refused() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    // postgres://user:password@host/db with the password changed.
    let (scheme_user, rest) = db.split_once("://").unwrap();
    let (credentials, host) = rest.split_once('@').unwrap();
    let user = credentials.split(':').next().unwrap();
    let wrong = format!("{scheme_user}://{user}:not-the-password@{host}");
    let dir = tempfile::tempdir().unwrap();
    let (_, store) = kit::two_sides(dir.path());
    let conf = kit::config(
        dir.path(),
        "g",
        &store,
        &[("relay", kit::free_port(), "relay", 1, "tls = \"none\"")],
        "",
    );
    let spool_line = conf
        .lines()
        .find(|l| l.starts_with("spool = "))
        .unwrap()
        .to_string();
    let path = dir.path().join("g.toml");
    std::fs::write(
        &path,
        conf.replace(&spool_line, &format!("spool = \"{wrong}\"")),
    )
    .unwrap();
    let out = common::run(&["gateway", "check-config", path.to_str().unwrap()], b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not-the-password"),
        "the password is not shown: {stderr}"
    );
}
