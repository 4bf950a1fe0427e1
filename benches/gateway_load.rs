//! Load through the SMTP gateway on loopback (a load run, not a criterion sample): 8
//! concurrent SMTP clients, each sending its share of 2,000 MailA2A messages of 2 KiB
//! on one connection, through
//!
//! 1. one gateway sealing them (S/MIME sign + encrypt, RSA-2048, the RFC 9216
//!    identities) and delivering to a sink;
//! 2. the same gateway as a relay (no sealing): the SMTP and spool floor;
//! 3. a second gateway sealing with P-256 identities (made by `smime::generate`), the
//!    keys a new deployment would choose: an RSA-2048 signature alone is about half
//!    a millisecond of CPU, a P-256 one a few tens of microseconds;
//! 4. with `MAILSEAL_TEST_POSTGRES` (a fresh database for each set-up, made as the
//!    tests make theirs, dropped at the end): one gateway whose spool is PostgreSQL,
//!    as a relay and sealing with the P-256 identities; then two instances sharing
//!    one PostgreSQL spool (each its own listener ports, the 8 clients split between
//!    them, both delivering to the same sink), the same two ways. Without the
//!    variable these rows are not run and the run says why;
//! 5. Debian's Postfix relaying the same load to the same sink (when it can run here:
//!    root and the package; otherwise its row says why).
//!
//! For each: messages accepted per second (the clients' view), p50 and p99 of the time
//! from the end of DATA to the 250, and the time until the sink has them all (what
//! the spool and delivery sustain). Each gateway has its default workers (twice the
//! cores with a directory spool, four times, from 8 to 32, with PostgreSQL). Then
//! the ratios. Run:
//! `cargo bench --bench gateway_load` (release build; figures in BENCHMARKS.md).

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;
#[path = "../tests/gateway/kit.rs"]
#[allow(dead_code)]
mod kit;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

const CLIENTS: usize = 8;
const MESSAGES: usize = 2000;

struct Row {
    name: &'static str,
    accepted_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    delivered_secs: f64,
}

/// Who sends to whom: the RFC 9216 (RSA) identities, or the P-256 ones.
#[derive(Clone, Copy)]
struct Pair {
    from: &'static str,
    to: &'static str,
}

const RSA: Pair = Pair {
    from: "alice@smime.example",
    to: "bob@smime.example",
};
const P256: Pair = Pair {
    from: "alice@p256.example",
    to: "bob@p256.example",
};

/// A store at `dir` holding alice@p256.example's new P-256 identity and the
/// certificate of a new bob@p256.example.
fn p256_store(dir: &std::path::Path) -> std::path::PathBuf {
    use der::EncodePem;
    use mailseal::keystore::{DirectoryStore, KeyStore};
    use mailseal::smime::{generate, IdentityRequest, KeyKind};
    let identity = |email: &str| {
        generate(
            &IdentityRequest {
                email: Some(email.into()),
                common_name: None,
                kind: KeyKind::P256,
                days: 30,
                ca: false,
            },
            None,
        )
        .unwrap()
        .remove(0)
    };
    let (alice, bob) = (identity(P256.from), identity(P256.to));
    let pem = |c: &x509_cert::Certificate| c.to_pem(der::pem::LineEnding::LF).unwrap();
    let store = DirectoryStore::open(dir).unwrap();
    store
        .import(pem(&alice.certificate).as_bytes(), "alice.crt", false)
        .unwrap();
    let key = der::pem::encode_string("PRIVATE KEY", der::pem::LineEnding::LF, &alice.private_key)
        .unwrap();
    store.import(key.as_bytes(), "alice.key", false).unwrap();
    store
        .import(pem(&bob.certificate).as_bytes(), "bob.crt", false)
        .unwrap();
    dir.to_path_buf()
}

fn message(pair: Pair, i: usize) -> Vec<u8> {
    let text = "lorem ipsum dolor sit amet ".repeat(60);
    let env = common::env(common::with(
        common::request(),
        serde_json::json!({
            "messageId": format!("urn:uuid:load-{i}"),
            "idempotencyKey": format!("k-{i}"),
            "payload": {"message": {"messageId": format!("m-{i}"), "role": "ROLE_USER", "parts": [{"text": text}]}}
        }),
    ));
    mailseal::MailA2aMessage::new(pair.from, &[pair.to], env)
        .to_rfc5322()
        .unwrap()
}

/// Runs the load against `addrs` (client `c` connects to `addrs[c % len]`); the sink
/// must end with `MESSAGES` more.
fn load(name: &'static str, pair: Pair, addrs: &[SocketAddr], sink: &kit::Sink) -> Row {
    let before = sink.messages().len();
    let start = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let addr = addrs[c % addrs.len()];
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                let mut client = kit::Client::connect(addr);
                client.cmd("EHLO load.test");
                for i in (c..MESSAGES).step_by(CLIENTS) {
                    let m = message(pair, i);
                    let t = Instant::now();
                    let r = client.submit(pair.from, &[pair.to], &m);
                    latencies.push(t.elapsed());
                    assert!(r.starts_with("250"), "{name}: {r}");
                }
                let _ = client.cmd("QUIT");
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let accepted = start.elapsed();
    sink.wait_for(before + MESSAGES, Duration::from_secs(600));
    let delivered = start.elapsed();
    latencies.sort();
    let pct = |p: f64| {
        latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)].as_secs_f64()
            * 1000.0
    };
    Row {
        name,
        accepted_per_sec: MESSAGES as f64 / accepted.as_secs_f64(),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        delivered_secs: delivered.as_secs_f64(),
    }
}

impl Row {
    fn delivered_per_sec(&self) -> f64 {
        MESSAGES as f64 / self.delivered_secs
    }
}

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

/// A gateway `name` with a sealing (`seal`) and a relaying (`relay`) listener on
/// `ports`, both delivering to `sink`; its spool `spool` when given (a database), a
/// directory of its own otherwise. Delivery polls every 10 ms; default workers.
fn gateway_config(
    dir: &std::path::Path,
    name: &str,
    store: &std::path::Path,
    ports: [u16; 2],
    sink: &kit::Sink,
    spool: Option<&str>,
) -> String {
    let conf = kit::config(
        dir,
        name,
        store,
        &[
            (
                "seal",
                ports[0],
                "outbound",
                sink.addr.port(),
                "tls = \"none\"",
            ),
            (
                "relay",
                ports[1],
                "relay",
                sink.addr.port(),
                "tls = \"none\"",
            ),
        ],
        "",
    )
    .replace("poll_ms = 50", "poll_ms = 10")
    .replace("workers = 2\n", "");
    match spool {
        Some(url) => conf.replace(
            &format!(
                "spool = \"{}\"",
                dir.join(format!("{name}-spool")).display()
            ),
            &format!("spool = \"{url}\""),
        ),
        None => conf,
    }
}

/// The PostgreSQL rows: one gateway on a spool in a fresh database, then two on
/// another, each as a relay and sealing with P-256. Empty (and says why) without
/// `MAILSEAL_TEST_POSTGRES`.
fn postgres_rows(dir: &std::path::Path, store: &std::path::Path, sink: &kit::Sink) -> Vec<Row> {
    let Some(one) = common::postgres_database() else {
        println!("PostgreSQL spool: not run (MAILSEAL_TEST_POSTGRES is not set; .ci/postgres-up starts a server)");
        return Vec::new();
    };
    let two = common::postgres_database().expect("the same server again");
    let mut rows = Vec::new();
    let ports = [(); 2].map(|_| kit::free_port());
    let conf = gateway_config(dir, "load-pg", store, ports, sink, Some(&one));
    let gateway = kit::Gateway::start(dir, "load-pg", &conf, &ports);
    rows.push(load(
        "gateway, PostgreSQL spool, pass-through",
        RSA,
        &[addr(ports[1])],
        sink,
    ));
    rows.push(load(
        "gateway, PostgreSQL spool, S/MIME sign+encrypt (P-256)",
        P256,
        &[addr(ports[0])],
        sink,
    ));
    drop(gateway);
    let (a, b) = (
        [(); 2].map(|_| kit::free_port()),
        [(); 2].map(|_| kit::free_port()),
    );
    let conf_a = gateway_config(dir, "load-pg-a", store, a, sink, Some(&two));
    let conf_b = gateway_config(dir, "load-pg-b", store, b, sink, Some(&two));
    let ga = kit::Gateway::start(dir, "load-pg-a", &conf_a, &a);
    let gb = kit::Gateway::start(dir, "load-pg-b", &conf_b, &b);
    rows.push(load(
        "two gateways, one PostgreSQL spool, pass-through",
        RSA,
        &[addr(a[1]), addr(b[1])],
        sink,
    ));
    rows.push(load(
        "two gateways, one PostgreSQL spool, S/MIME sign+encrypt (P-256)",
        P256,
        &[addr(a[0]), addr(b[0])],
        sink,
    ));
    drop((ga, gb));
    drop_databases(&[&one, &two]);
    rows
}

/// Drops the bench's databases (their gateways have exited).
fn drop_databases(urls: &[&str]) {
    let Ok(admin) = std::env::var("MAILSEAL_TEST_POSTGRES") else {
        return;
    };
    let Ok(mut client) = postgres::Client::connect(&admin, postgres::NoTls) else {
        return;
    };
    for url in urls {
        if let Some((_, name)) = url.rsplit_once('/') {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        }
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass nothing: run only
    // when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = kit::two_sides(dir.path());
    let p_store = p256_store(&dir.path().join("p256-store"));
    // A store as it is in service: its files older than the directory store's
    // two-second window for trusting cached reads.
    std::thread::sleep(Duration::from_secs(3));
    let sink = kit::Sink::start();
    let ports = [(); 2].map(|_| kit::free_port());
    let conf = gateway_config(dir.path(), "load", &a_store, ports, &sink, None);
    let gateway = kit::Gateway::start(dir.path(), "load", &conf, &ports);

    let mut rows = vec![
        load(
            "gateway, S/MIME sign+encrypt (RSA-2048)",
            RSA,
            &[addr(ports[0])],
            &sink,
        ),
        load(
            "gateway, pass-through (floor)",
            RSA,
            &[addr(ports[1])],
            &sink,
        ),
    ];
    drop(gateway);
    let ports = [(); 2].map(|_| kit::free_port());
    let conf = gateway_config(dir.path(), "load-p256", &p_store, ports, &sink, None);
    let gateway = kit::Gateway::start(dir.path(), "load-p256", &conf, &ports);
    rows.push(load(
        "gateway, S/MIME sign+encrypt (P-256)",
        P256,
        &[addr(ports[0])],
        &sink,
    ));
    drop(gateway);
    let pg = postgres_rows(dir.path(), &p_store, &sink);
    let pf_port = kit::free_port();
    let postfix = if kit::postfix_usable() {
        let _pf = kit::postfix(
            &dir.path().join("postfix"),
            false,
            &[(0, pf_port)],
            &[(RSA.to.into(), sink.addr.port())],
            &[],
        );
        let start = Instant::now();
        while std::net::TcpStream::connect(addr(pf_port)).is_err()
            && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(load("Postfix 3.7 relay", RSA, &[addr(pf_port)], &sink))
    } else {
        println!("Postfix: not run (needs root and the postfix package)");
        None
    };
    println!(
        "\n{CLIENTS} clients, {MESSAGES} messages of {} bytes, loopback",
        message(RSA, 0).len()
    );
    println!(
        "| path | accepted msg/s | p50 ms | p99 ms | all delivered after s | delivered msg/s |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for r in rows.iter().chain(&pg).chain(&postfix) {
        println!(
            "| {} | {:.0} | {:.1} | {:.1} | {:.2} | {:.0} |",
            r.name,
            r.accepted_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.delivered_secs,
            r.delivered_per_sec()
        );
    }
    let floor = &rows[1];
    for seal in [&rows[0], &rows[2]] {
        println!(
            "{} / pass-through: {:.2}x the time per accepted message, {:.2}x the time to deliver all",
            seal.name,
            floor.accepted_per_sec / seal.accepted_per_sec,
            seal.delivered_secs / floor.delivered_secs
        );
    }
    let against = |row: &Row, base: &Row| {
        println!(
            "{} / {}: {:.2}x the accepted rate, {:.2}x the delivered rate",
            row.name,
            base.name,
            row.accepted_per_sec / base.accepted_per_sec,
            row.delivered_per_sec() / base.delivered_per_sec()
        );
    };
    if let Some(pf) = &postfix {
        for row in rows
            .iter()
            .chain(&pg)
            .filter(|r| !r.name.starts_with("two"))
        {
            against(row, pf);
        }
    }
    if let [one_relay, one_seal, two_relay, two_seal] = &pg[..] {
        against(two_relay, one_relay);
        against(two_seal, one_seal);
    }
}
