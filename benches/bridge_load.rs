//! `mailseal bridge` under load (a load run, not a criterion sample): calls per second
//! and latency of a 2 KiB `SendMessage` made by the official A2A SDK's client
//! (`tests/peers/a2a_bridge_client.py`, its `bench` action, JSON-RPC) through two
//! bridges and sealed mail, next to the same client calling the same SDK agent
//! (`tests/peers/a2a_bridge_agent.py`) directly over HTTP.
//!
//! Two organisations, each with a new S/MIME identity (P-256, from
//! `Identities::generate_identity`) and the other's certificate, each behind a
//! `mailseal bridge` process (the release binary `cargo bench` builds). A's outbound
//! listener hands its mail straight to B's inbound listener over loopback SMTP and B's
//! to A's (no hop between them); B's bridge fronts the SDK agent. A call goes: the
//! client to A's bridge (HTTP), sealed (sign + encrypt) into A's spool, delivered to
//! B's inbound listener, opened into B's spool, handed to B's bridge (the listener's
//! `local` hop, also from the spool), a call of the agent, its answer sealed into B's
//! spool, delivered to A, opened, handed to A's bridge, and the client's HTTP answer:
//! four passes through a spool, each taken up at once (the spool wakes its deliverer
//! when it queues an entry; `gateway::spool::Waking`).
//!
//! Each bridged set-up runs twice: with the default `delivery.poll_ms` (500) and with
//! 10 ms (as `gateway_load`), which shows that the poll no longer adds to a call (it
//! once added about three polls to each). For each:
//! one client making its calls one after the other, then four such clients at once,
//! each bridged row right after a direct row with as many clients (the bridges up and
//! idle), so that the machine's drift between rows minutes apart stays out of their
//! ratios. Each client makes `WARMUP` calls first, not counted; a concurrent row counts
//! only the calls that ended while every client was past its warm-up and none had
//! finished. Printed: calls/s, p50, p90 and p99 latency (the client's time for one
//! SendMessage), the CPU time per call of the two bridges and the agent (from
//! /proc, warm-up included), the added latency (bridged p50 - direct p50) and the
//! ratios of each pair; and, for the one-client rows, where a bridged call's time
//! goes: the medians, and the slowest call's, of the stages between the bridges' JSON
//! log lines (A mailed the call, A delivered it, B handed it to its bridge, B
//! delivered the answer, A handed it to its bridge; a stage's end is a line logged
//! after the 250 of its delivery, so the next stage may read a little below zero),
//! with the time each inbound listener took to accept the message (its own log line).
//!
//! Needs the SDK's Python environment (`.ci/peers-venv`;
//! `MAILSEAL_PEER_PYTHON`, default /var/lib/mailseal-peers/venv/bin/python3); without it
//! the bench says why and does nothing. Run:
//! `cargo bench --bench bridge_load` (release build; figures in BENCHMARKS.md).
//! `MAILSEAL_BENCH_BRIDGE_POLL_MS=500,10` (the default) chooses the bridged set-ups.

#[path = "../tests/gateway/bridge_kit.rs"]
#[allow(dead_code)]
mod bridge_kit;
#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;
#[path = "../tests/gateway/kit.rs"]
#[allow(dead_code)]
mod kit;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mailseal::IdentityKind;

/// Unmeasured calls at the start of each client.
const WARMUP: usize = 10;
/// Measured calls of a client at 10 ms polls, and directly.
const CALLS: usize = 200;
/// Measured calls of a client when the polls are 100 ms or more apart (should a
/// call wait on polls again, 50 keep a run within a few minutes).
const CALLS_SLOW: usize = 50;
/// Clients at once in the concurrent rows.
const CLIENTS: usize = 4;
/// The text of every call: 2 KiB, which the agent echoes back.
const TEXT_BYTES: usize = 2048;

const ALICE: &str = "alice@a.example";
const BOB: &str = "bob@b.example";

fn text() -> String {
    let mut t = String::from("echo: ");
    let filler = "lorem ipsum dolor sit amet ";
    while t.len() < TEXT_BYTES {
        t.push_str(filler);
    }
    t.truncate(TEXT_BYTES);
    t
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/a2a_bridge_client.py")
}

/// One client's run: when each measured call ended, and how long each took.
struct ClientRun {
    ends: Vec<Instant>,
    latencies: Vec<Duration>,
}

/// Starts `a2a_bridge_client.py --card CARD --transport JSONRPC [--token T] bench TEXT
/// --count WARMUP+calls`; `finish` waits for its JSON line.
struct Client {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    what: String,
}

impl Client {
    fn start(python: &Path, card: &str, token: Option<&str>, calls: usize) -> Client {
        let mut cmd = Command::new(python);
        cmd.arg(client_script())
            .args(["--card", card, "--transport", "JSONRPC"]);
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        let mut child = cmd
            .args(["bench", &text(), "--count", &(WARMUP + calls).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the SDK client starts");
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        Client {
            child,
            out,
            what: card.to_string(),
        }
    }

    /// The run, placed in time: the client prints its line right after its last call,
    /// so the calls ended at (arrival - seconds) plus their running sum.
    fn finish(mut self) -> ClientRun {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let arrived = Instant::now();
        let status = self.child.wait().unwrap();
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_else(|_| {
            panic!(
                "the SDK client against {} printed no result ({status}): {line}",
                self.what
            )
        });
        assert!(status.success(), "the SDK client: {status}: {line}");
        let seconds = v["seconds"].as_f64().unwrap();
        let all: Vec<Duration> = v["latencies_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| Duration::from_secs_f64(l.as_f64().unwrap() / 1000.0))
            .collect();
        let start = arrived - Duration::from_secs_f64(seconds);
        let mut at = start;
        let mut ends = Vec::new();
        for l in &all {
            at += *l;
            ends.push(at);
        }
        ClientRun {
            ends,
            latencies: all,
        }
    }
}

struct Row {
    name: String,
    clients: usize,
    calls: usize,
    window: Duration,
    per_sec: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    /// CPU ms per call of A's bridge, B's bridge and the agent.
    cpu: [Option<f64>; 3],
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// `clients` clients at once against `card`, each `calls` measured calls after its
/// warm-up.
fn measure(
    name: String,
    python: &Path,
    card: &str,
    token: Option<&str>,
    clients: usize,
    calls: usize,
    servers: [Option<u32>; 3],
) -> (Row, Vec<ClientRun>) {
    let cpu_before = servers.map(|p| p.map(cpu_secs));
    let started: Vec<Client> = (0..clients)
        .map(|_| Client::start(python, card, token, calls))
        .collect();
    let runs: Vec<ClientRun> = started.into_iter().map(Client::finish).collect();
    // Every call the servers took, the warm-up's too.
    let made = (clients * (WARMUP + calls)) as f64;
    let mut cpu = [None; 3];
    for (i, p) in servers.iter().enumerate() {
        if let (Some(p), Some(before)) = (p, cpu_before[i]) {
            cpu[i] = Some((cpu_secs(*p) - before) * 1000.0 / made);
        }
    }
    // While every client is past its warm-up and none has finished.
    let from = runs.iter().map(|r| r.ends[WARMUP - 1]).max().unwrap();
    let to = runs.iter().map(|r| *r.ends.last().unwrap()).min().unwrap();
    assert!(
        to > from,
        "{name}: the clients did not run at the same time"
    );
    let mut latencies: Vec<Duration> = runs
        .iter()
        .flat_map(|r| {
            r.ends
                .iter()
                .zip(&r.latencies)
                .skip(WARMUP)
                .filter(|(e, _)| **e > from && **e <= to)
                .map(|(_, l)| *l)
        })
        .collect();
    latencies.sort();
    let window = to - from;
    let row = Row {
        name,
        clients,
        calls: latencies.len(),
        window,
        per_sec: latencies.len() as f64 / window.as_secs_f64(),
        p50: pct(&latencies, 0.50),
        p90: pct(&latencies, 0.90),
        p99: pct(&latencies, 0.99),
        cpu,
    };
    (row, runs)
}

/// User + system CPU seconds of process `pid` so far (its threads included).
fn cpu_secs(pid: u32) -> f64 {
    static TICK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let tick = *TICK.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's name (in parentheses): state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / tick
}

/// The lines of `log` after byte `from` that a call leaves, as (what, when, delay_ms):
/// 0 A's bridge mailed a call; 1 a delivery from listener `out`; 2 a delivery from
/// listener `in` (to the bridge); 3 a message listener `in` accepted (its delay_ms:
/// from the end of DATA to the 250, the open and the spool put).
fn events(log: &Path, from: usize) -> Vec<(u8, time::OffsetDateTime, f64)> {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(text.get(from..).unwrap_or_default());
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            let what = match (v["message"].as_str()?, v["listener"].as_str()) {
                ("bridge: call mailed", _) => 0,
                ("delivery", Some("out")) if v["status"] == "delivered" => 1,
                ("delivery", Some("in")) if v["status"] == "delivered" => 2,
                ("message", Some("in")) if v["code"] == 250 => 3,
                _ => return None,
            };
            let at = time::OffsetDateTime::parse(
                v["timestamp"].as_str()?,
                &time::format_description::well_known::Rfc3339,
            )
            .ok()?;
            Some((what, at, v["delay_ms"].as_f64().unwrap_or(0.0)))
        })
        .collect()
}

fn log_len(g: &kit::Gateway) -> usize {
    std::fs::metadata(&g.log).map_or(0, |m| m.len() as usize)
}

/// The stages of a bridged call, ms: A mailed it -> A delivered it to B; of that, B's
/// accepting it; -> B handed it to its bridge; -> B delivered the answer to A; of
/// that, A's accepting it; -> A handed it to its bridge; the rest of the client's time.
type Stages = [f64; 7];

/// Where a bridged call's time went, from the two bridges' logs (one client, so the
/// k-th line of each kind is the k-th call's): the medians of the stages over the
/// measured calls, and the stages of the slowest call with its latency; or why not.
fn stages(
    a: &kit::Gateway,
    b: &kit::Gateway,
    offsets: (usize, usize),
    run: &ClientRun,
) -> Result<(Stages, Stages, f64), String> {
    // The last call's lines may follow its answer by a little.
    std::thread::sleep(Duration::from_millis(500));
    let (ea, eb) = (events(&a.log, offsets.0), events(&b.log, offsets.1));
    let pick = |e: &[(u8, time::OffsetDateTime, f64)], what: u8| {
        let mut t: Vec<_> = e
            .iter()
            .filter(|(w, _, _)| *w == what)
            .map(|(_, t, d)| (*t, *d))
            .collect();
        t.sort_by_key(|(t, _)| *t);
        t
    };
    let marks = [
        pick(&ea, 0), // A mailed the call
        pick(&ea, 1), // A delivered it to B
        pick(&eb, 2), // B handed it to its bridge
        pick(&eb, 1), // B delivered the answer to A
        pick(&ea, 2), // A handed the answer to its bridge
    ];
    let accepted = [pick(&eb, 3), pick(&ea, 3)]; // by B, by A
    let n = run.latencies.len();
    if let Some(m) = marks.iter().chain(&accepted).find(|m| m.len() != n) {
        return Err(format!("{} log lines of a kind for {n} calls", m.len()));
    }
    let mut per: [Vec<f64>; 7] = Default::default();
    let mut slowest = ([0.0; 7], 0.0);
    for (k, latency) in run.latencies.iter().enumerate().skip(WARMUP) {
        let ms = |i: usize| (marks[i + 1][k].0 - marks[i][k].0).as_seconds_f64() * 1000.0;
        let latency = latency.as_secs_f64() * 1000.0;
        let logged = (marks[4][k].0 - marks[0][k].0).as_seconds_f64() * 1000.0;
        let call = [
            ms(0),
            accepted[0][k].1,
            ms(1),
            ms(2),
            accepted[1][k].1,
            ms(3),
            latency - logged,
        ];
        for (p, v) in per.iter_mut().zip(call) {
            p.push(v);
        }
        if latency > slowest.1 {
            slowest = (call, latency);
        }
    }
    let medians = per.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    });
    Ok((medians, slowest.0, slowest.1))
}

/// One organisation's bridge (as `bridge_kit::Org` writes it, but with its outbound
/// listener's next hop the other organisation's inbound listener, default workers and
/// `poll_ms`).
struct Side {
    http: u16,
    token: String,
    bridge: kit::Gateway,
}

/// Ports of one side: inbound SMTP, outbound SMTP, A2A HTTP.
type Ports = [u16; 3];

#[allow(clippy::too_many_arguments)]
fn side(
    dir: &Path,
    name: &str,
    address: &str,
    peer: &str,
    store: &Path,
    ports: Ports,
    hop: u16,
    agent_port: Option<u16>,
    poll_ms: u64,
) -> Side {
    let http = ports[2];
    let token = format!("token-{name}-{}", uuid::Uuid::new_v4());
    let token_file = dir.join(format!("{name}.token"));
    std::fs::write(&token_file, &token).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let card = agent_port
        .map(|p| format!("card = \"http://127.0.0.1:{p}/.well-known/agent-card.json\"\n"))
        .unwrap_or_default();
    let peers = [bridge_kit::Peer {
        address: peer,
        group: None,
        profile: Some("smime"),
    }];
    let config = bridge_kit::config_text(
        dir,
        name,
        address,
        store,
        ports,
        hop,
        &token_file,
        &card,
        &peers,
        "",
    )
    .replace("poll_ms = 50", &format!("poll_ms = {poll_ms}"))
    .replace("workers = 2\n", "");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, &config).unwrap();
    // JSON log lines: their timestamps place each pass through a spool.
    let bridge = kit::Gateway::spawn(
        "bridge",
        dir,
        name,
        &path,
        &ports,
        &[("MAILSEAL_LOG_FORMAT", "json")],
    );
    Side {
        http,
        token,
        bridge,
    }
}

/// A's and B's bridges polling every `poll_ms`, mail straight between them, B's in
/// front of the agent on `agent_port`.
fn bridges(
    root: &Path,
    stores: &(PathBuf, PathBuf),
    agent_port: u16,
    poll_ms: u64,
) -> (Side, Side) {
    let dir = root.join(format!("poll-{poll_ms}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (pa, pb) = (
        [(); 3].map(|_| kit::free_port()),
        [(); 3].map(|_| kit::free_port()),
    );
    let b = side(
        &dir,
        "b",
        BOB,
        ALICE,
        &stores.1,
        pb,
        pa[0],
        Some(agent_port),
        poll_ms,
    );
    let a = side(&dir, "a", ALICE, BOB, &stores.0, pa, pb[0], None, poll_ms);
    (a, b)
}

fn poll_settings() -> Vec<u64> {
    std::env::var("MAILSEAL_BENCH_BRIDGE_POLL_MS")
        .unwrap_or_else(|_| "500,10".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|&p| p > 0)
        .collect()
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass nothing: run only
    // when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let Some(python) = bridge_kit::sdk_python() else {
        println!("bridge_load: not run (the official A2A SDK's Python environment is not usable: .ci/peers-venv, MAILSEAL_PEER_PYTHON)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stores = bridge_kit::two_stores(dir.path(), IdentityKind::Smime, ALICE, BOB);
    // Stores as they are in service: their files older than the directory store's
    // two-second window for trusting cached reads.
    std::thread::sleep(Duration::from_secs(3));
    let agent = bridge_kit::Agent::start(&python, dir.path(), "b", "JSONRPC");
    let direct_card = format!(
        "http://127.0.0.1:{}/.well-known/agent-card.json",
        agent.port
    );

    // (direct, bridged) pairs: each bridged row right after a direct one with as many
    // clients (the bridges up and idle), so that the machine's drift between rows
    // minutes apart stays out of their ratio.
    let mut pairs: Vec<(Row, Row)> = Vec::new();
    let mut where_time = Vec::new();
    for poll in poll_settings() {
        let (a, b) = bridges(dir.path(), &stores, agent.port, poll);
        let card = format!(
            "http://127.0.0.1:{}/peers/{BOB}/.well-known/agent-card.json",
            a.http
        );
        let calls = if poll >= 100 { CALLS_SLOW } else { CALLS };
        for clients in [1, CLIENTS] {
            let (direct, _) = measure(
                format!("direct, next to poll_ms {poll}"),
                &python,
                &direct_card,
                None,
                clients,
                CALLS,
                [None, None, Some(agent.child.id())],
            );
            let offsets = (log_len(&a.bridge), log_len(&b.bridge));
            let (bridged, runs) = measure(
                format!("two bridges, poll_ms {poll}"),
                &python,
                &card,
                Some(&a.token),
                clients,
                calls,
                [
                    Some(a.bridge.child.id()),
                    Some(b.bridge.child.id()),
                    Some(agent.child.id()),
                ],
            );
            if clients == 1 {
                where_time.push((poll, stages(&a.bridge, &b.bridge, offsets, &runs[0])));
            }
            pairs.push((direct, bridged));
        }
    }
    let executes = agent
        .calls()
        .iter()
        .filter(|c| c["method"] == "execute")
        .count();

    println!(
        "\nSendMessage of a {TEXT_BYTES}-byte text (echoed), JSON-RPC, S/MIME sign+encrypt with P-256, loopback; {WARMUP} unmeasured calls per client first; the agent ran {executes} calls"
    );
    println!("| path | clients | calls measured | over s | calls/s | p50 ms | p90 ms | p99 ms | CPU ms per call: A's bridge, B's bridge, the agent |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in pairs.iter().flat_map(|(d, b)| [d, b]) {
        let cpu: Vec<String> = r
            .cpu
            .iter()
            .map(|c| c.map_or("-".into(), |c| format!("{c:.1}")))
            .collect();
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            r.name,
            r.clients,
            r.calls,
            r.window.as_secs_f64(),
            r.per_sec,
            r.p50,
            r.p90,
            r.p99,
            cpu.join(", ")
        );
    }
    println!("\nWhere a bridged call's time goes, one client (medians over its calls, ms; from the bridges' log lines):");
    println!("| poll_ms | mailed -> A delivered it to B (A's deliverer, SMTP, B accepts) | of which B accepts (opens, replay state, spool) | -> B handed it to its bridge (B's deliverer) | -> B delivered the answer to A (the agent, B seals and queues, B's deliverer, SMTP, A accepts) | of which A accepts | -> A handed it to its bridge (A's deliverer) | the rest (HTTP both ways, A seals and queues, the answer to the client) |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let cells = |s: &Stages| {
        s.iter()
            .map(|v| format!("{v:.1}"))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    for (poll, s) in &where_time {
        match s {
            Ok((m, slow, latency)) => {
                println!("| {poll} | {} |", cells(m));
                println!(
                    "| {poll}, the slowest call ({latency:.1} ms) | {} |",
                    cells(slow)
                );
            }
            Err(e) => println!("| {poll} | not read: {e} | | | | | | |"),
        }
    }
    println!();
    for (d, b) in &pairs {
        if b.clients == 1 {
            println!(
                "{}, 1 client: added latency {:.1} ms at p50 ({:.1} at p90, {:.1} at p99); {:.1}x the direct p50; {:.3}x the direct calls/s ({:.1} against {:.1})",
                b.name,
                b.p50 - d.p50,
                b.p90 - d.p90,
                b.p99 - d.p99,
                b.p50 / d.p50,
                b.per_sec / d.per_sec,
                b.per_sec,
                d.per_sec
            );
        } else {
            let one = pairs
                .iter()
                .find(|(_, o)| o.name == b.name && o.clients == 1)
                .map_or(f64::NAN, |(_, o)| o.per_sec);
            println!(
                "{}, {} clients: {:.3}x the direct calls/s ({:.1} against {:.1}); added latency {:.1} ms at p50; {:.2}x its own calls/s with 1 client",
                b.name,
                b.clients,
                b.per_sec / d.per_sec,
                b.per_sec,
                d.per_sec,
                b.p50 - d.p50,
                b.per_sec / one
            );
        }
    }
}
