//! Crash safety: 1,000 messages from four concurrent clients through Alice's outbound
//! gateway (S/MIME sealing) to Bob's inbound one and his sink, while Alice's gateway
//! is SIGKILLed at random moments and restarted on the same spool. Clients behave as
//! MTAs do: a message without a 250 is sent again. Afterwards every message a client
//! saw accepted has reached the sink, and none twice: a copy Alice's gateway delivered
//! again after a crash is dropped by Bob's replay state.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kit::{self, Gateway, Sink};

const CLIENTS: usize = 4;
const PER_CLIENT: usize = 250;

/// Sends `data` until a 250, reconnecting as needed.
fn submit_until_accepted(addr: SocketAddr, data: &[u8], stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let sent = kit::try_submit(addr, "alice@smime.example", &["bob@smime.example"], data);
        if matches!(&sent, Ok(r) if r.starts_with("250")) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigkill_at_random_moments_loses_and_doubles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let [a_out, b_in] = [(); 2].map(|_| kit::free_port());
    let b_conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[("in", b_in, "inbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let a_conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[("out", a_out, "outbound", b_in, "tls = \"none\"")],
        "",
    );
    let _b = Gateway::start(dir.path(), "b", &b_conf, &[b_in]);
    let mut a = Gateway::start(dir.path(), "a", &a_conf, &[a_out]);
    let addr: SocketAddr = ([127, 0, 0, 1], a_out).into();

    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (stop, accepted) = (stop.clone(), accepted.clone());
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for i in 0..PER_CLIENT {
                    let id = format!("urn:uuid:crash-{c}-{i}");
                    let data = kit::plain("alice@smime.example", "bob@smime.example", &id);
                    if submit_until_accepted(addr, &data, &stop) {
                        accepted.fetch_add(1, Ordering::Relaxed);
                        ids.push(id);
                    }
                }
                ids
            })
        })
        .collect();

    // The killer: SIGKILL at a random moment, restart, again, while clients send.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}");
    let mut kills = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while accepted.load(Ordering::Relaxed) < CLIENTS * PER_CLIENT {
        assert!(
            Instant::now() < deadline,
            "clients stuck at {}",
            accepted.load(Ordering::Relaxed)
        );
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(100 + seed % 900));
        a.kill();
        kills += 1;
        a = Gateway::start_file(dir.path(), "a", &a.config.clone(), &[a_out]);
    }
    stop.store(true, Ordering::Relaxed);
    let ids: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert_eq!(ids.len(), CLIENTS * PER_CLIENT);
    eprintln!("{kills} kills");
    assert!(kills >= 3, "the gateway was killed {kills} times only");

    let got = sink.wait_for(ids.len(), Duration::from_secs(300));
    // Anything delivered late would show now.
    std::thread::sleep(Duration::from_secs(3));
    let got = if sink.messages().len() > got.len() {
        sink.messages()
    } else {
        got
    };
    let mut count: HashMap<String, usize> = HashMap::new();
    for m in &got {
        let env = kit::envelope_of(&m.data);
        let v: serde_json::Value = serde_json::from_slice(&env).unwrap();
        *count
            .entry(v["messageId"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    for id in &ids {
        assert_eq!(
            count.get(id).copied().unwrap_or(0),
            1,
            "{id} delivered {:?} times",
            count.get(id)
        );
    }
    assert_eq!(got.len(), ids.len(), "nothing else, nothing twice");
}
