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
