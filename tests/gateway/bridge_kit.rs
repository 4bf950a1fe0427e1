//! What the bridge tests build on: organisations (a key store, a `mailseal bridge`
//! process with its SMTP listeners and A2A side, an agent written on the official A2A
//! SDK behind it), an SMTP router between them, and the SDK's client.

use std::collections::HashMap;
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::kit::{self, Gateway, Sink};

/// Where `.ci/peers-venv` puts the SDK's environment unless told otherwise.
const DEFAULT_PYTHON: &str = "/var/lib/mailseal-peers/venv/bin/python3";

/// The python of the SDK's environment, when it has the SDK with its server (skips,
/// or fails under `MAILSEAL_REQUIRE_PEERS=1`, when not).
pub fn sdk_python() -> Option<PathBuf> {
    let python = std::env::var_os("MAILSEAL_PEER_PYTHON")
        .map_or_else(|| PathBuf::from(DEFAULT_PYTHON), PathBuf::from);
    crate::common::peer_available(
        "the official A2A SDK with its HTTP server (a2a-sdk[http-server], uvicorn: .ci/peers-venv; MAILSEAL_PEER_PYTHON)",
        Command::new(&python).args(["-c", "import a2a.client, a2a.server, starlette, uvicorn"]),
    )
    .then_some(python)
}

fn peer_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// An SMTP hop between the organisations: takes every message and hands it, for each
/// recipient, to the inbound listener of the organisation the address is at.
pub struct Router {
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, u16>>>,
    _sink: Arc<Sink>,
}

impl Router {
    pub fn start() -> Router {
        let sink = Arc::new(Sink::start());
        let routes: Arc<Mutex<HashMap<String, u16>>> = Default::default();
        let (s, r) = (sink.clone(), routes.clone());
        std::thread::spawn(move || {
            let mut done = 0;
            loop {
                let got = s.messages();
                for m in &got[done..] {
                    for rcpt in &m.recipients {
                        let port = r.lock().unwrap().get(&rcpt.to_lowercase()).copied();
                        let Some(port) = port else { continue };
                        // A hop down (a bridge killed by the test) is tried again.
                        for _ in 0..600 {
                            match kit::try_submit(
                                SocketAddr::from(([127, 0, 0, 1], port)),
                                &m.mail_from,
                                &[rcpt.as_str()],
                                &m.data,
                            ) {
                                Ok(reply) if reply.starts_with('2') || reply.starts_with('5') => {
                                    break
                                }
                                _ => std::thread::sleep(Duration::from_millis(200)),
                            }
                        }
                    }
                }
                done = got.len();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Router {
            addr: sink.addr,
            routes,
            _sink: sink,
        }
    }

    pub fn route(&self, address: &str, port: u16) {
        self.routes
            .lock()
            .unwrap()
            .insert(address.to_lowercase(), port);
    }
}

/// An agent on the official A2A SDK (`tests/peers/a2a_bridge_agent.py`).
pub struct Agent {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Agent {
    pub fn start(python: &Path, dir: &Path, name: &str, binding: &str) -> Agent {
        let port = kit::free_port();
        let log = dir.join(format!("{name}-agent.jsonl"));
        let mut child = Command::new(python)
            .arg(peer_script("a2a_bridge_agent.py"))
            .args([
                "--port",
                &port.to_string(),
                "--binding",
                binding,
                "--name",
                name,
            ])
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the SDK agent starts");
        let mut line = String::new();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "the SDK agent: {line}");
        Agent { child, port, log }
    }

    /// The executor's calls so far (`{"method", "messageId", "text", "metadata", ...}`).
    pub fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One organisation: an agent's store, its bridge, and the SDK agent behind it.
pub struct Org {
    pub name: String,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub smtp_in: u16,
    pub smtp_out: u16,
    pub http: u16,
    pub token: String,
    pub bridge: Option<Gateway>,
    pub agent: Option<Agent>,
}

/// A peer the org's agent may call: its address and, for MLS, its group.
pub struct Peer<'a> {
    pub address: &'a str,
    pub group: Option<&'a str>,
    pub profile: Option<&'a str>,
}

impl Org {
    /// Writes the configuration of `address`'s organisation (bridge over `store`,
    /// mail out through `router`, the SDK agent on `binding` when `python` is given)
    /// and starts it.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        dir: &Path,
        name: &str,
        address: &str,
        store: &Path,
        router: &Router,
        peers: &[Peer<'_>],
        python: Option<&Path>,
        binding: &str,
        extra: &str,
    ) -> Org {
        let mut org = Org::configure(
            dir, name, address, store, router, peers, python, binding, extra,
        );
        org.start_bridge();
        org
    }

    /// [`Org::start`] without starting the bridge: its configuration written (to
    /// change before [`Org::start_bridge`]).
    #[allow(clippy::too_many_arguments)]
    pub fn configure(
        dir: &Path,
        name: &str,
        address: &str,
        store: &Path,
        router: &Router,
        peers: &[Peer<'_>],
        python: Option<&Path>,
        binding: &str,
        extra: &str,
    ) -> Org {
        let [smtp_in, smtp_out, http] = [(); 3].map(|_| kit::free_port());
        router.route(address, smtp_in);
        let token = format!("token-{name}-{}", uuid::Uuid::new_v4());
        let token_file = dir.join(format!("{name}.token"));
        std::fs::write(&token_file, &token).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let agent = python.map(|py| Agent::start(py, dir, name, binding));
        let card = agent
            .as_ref()
            .map(|a| {
                format!(
                    "card = \"http://127.0.0.1:{}/.well-known/agent-card.json\"\n",
                    a.port
                )
            })
            .unwrap_or_default();
        let config = config_text(
            dir,
            name,
            address,
            store,
            [smtp_in, smtp_out, http],
            router.addr.port(),
            &token_file,
            &card,
            peers,
            extra,
        );
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, &config).unwrap();
        Org {
            name: name.into(),
            dir: dir.to_path_buf(),
            config: path,
            smtp_in,
            smtp_out,
            http,
            token,
            bridge: None,
            agent,
        }
    }

    /// Puts the spool, the replay state and the bridge's state of this org in the
    /// PostgreSQL database `url` (shared with the other instances given it), and has
    /// it use `token` (another instance's) for its agent.
    pub fn share(&mut self, url: &str, token: &str) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        let mut out = String::new();
        for line in text.lines() {
            if line.starts_with("spool = ") {
                out.push_str(&format!("spool = \"{url}\"\nstate = \"{url}\"\n"));
            } else if line.starts_with("state = ") && line.ends_with("-bridge.db\"") {
                out.push_str(&format!("state = \"{url}\"\n"));
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        std::fs::write(&self.config, out).unwrap();
        let token_file = self.dir.join(format!("{}.token", self.name));
        std::fs::write(&token_file, token).unwrap();
        self.token = token.to_string();
    }

    /// Starts (again) the bridge process.
    pub fn start_bridge(&mut self) {
        self.bridge = Some(Gateway::spawn(
            "bridge",
            &self.dir,
            &self.name,
            &self.config,
            &[self.smtp_in, self.smtp_out, self.http],
            &[],
        ));
    }

    /// Kills the bridge process (SIGKILL: nothing is flushed).
    pub fn kill_bridge(&mut self) {
        if let Some(mut b) = self.bridge.take() {
            b.kill();
        }
    }

    pub fn log_text(&self) -> String {
        self.bridge
            .as_ref()
            .map(|b| b.log_text())
            .unwrap_or_default()
    }

    /// The card URL of `peer` at this org's bridge.
    pub fn card_of(&self, peer: &str) -> String {
        format!(
            "http://127.0.0.1:{}/peers/{peer}/.well-known/agent-card.json",
            self.http
        )
    }

    /// The SDK's client at this org calling `peer` over `transport`: its JSON output
    /// and exit code.
    pub fn client(
        &self,
        python: &Path,
        peer: &str,
        transport: &str,
        args: &[&str],
    ) -> (Value, i32) {
        let out = Command::new(python)
            .arg(peer_script("a2a_bridge_client.py"))
            .args([
                "--card",
                &self.card_of(peer),
                "--transport",
                transport,
                "--token",
                &self.token,
            ])
            .args(args)
            .output()
            .expect("the SDK client runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let value = serde_json::from_str(text.trim()).unwrap_or_else(|_| {
            panic!(
                "the SDK client printed no JSON: {text}\n{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.log_text()
            )
        });
        (value, out.status.code().unwrap_or(-1))
    }

    /// A raw HTTP request to this org's bridge: status and body.
    pub fn http(
        &self,
        verb: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.http)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut req = format!(
            "{verb} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let _ = s.write_all(body);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).to_string();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = match text.find("\r\n\r\n") {
            Some(i) => out[i + 4..].to_vec(),
            None => Vec::new(),
        };
        (status, body)
    }
}

/// Waits until `f` holds (panics with `what` after `timeout`).
pub fn eventually(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Alice's organisation (no agent: she only calls) and Bob's (his SDK agent on
/// JSON-RPC when `python` is given), S/MIME, each the other's peer; `extra` goes to
/// Alice's `[bridge]`.
pub fn alice_and_bob(
    dir: &Path,
    python: Option<&Path>,
    router: &Router,
    extra: &str,
) -> (Org, Org) {
    let (alice, bob) = ("alice@a.example", "bob@b.example");
    let (sa, sb) = two_stores(dir, mailseal::IdentityKind::Smime, alice, bob);
    let peer = |address| Peer {
        address,
        group: None,
        profile: Some("smime"),
    };
    let a = Org::start(
        dir,
        "a",
        alice,
        &sa,
        router,
        &[peer(bob)],
        None,
        "JSONRPC",
        extra,
    );
    let b = Org::start(
        dir,
        "b",
        bob,
        &sb,
        router,
        &[peer(alice)],
        python,
        "JSONRPC",
        "",
    );
    (a, b)
}

/// Two stores, each with its own identity of `kind` and the other's public one.
pub fn two_stores(
    root: &Path,
    kind: mailseal::IdentityKind,
    a: &str,
    b: &str,
) -> (PathBuf, PathBuf) {
    use mailseal::Identities;
    let (pa, pb) = (root.join("a-store"), root.join("b-store"));
    let (sa, sb) = (
        mailseal::keystore::DirectoryStore::open(&pa).unwrap(),
        mailseal::keystore::DirectoryStore::open(&pb).unwrap(),
    );
    sa.generate_identity(kind, a).unwrap();
    sb.generate_identity(kind, b).unwrap();
    sb.import_as(
        &sa.export_public(kind, a).unwrap(),
        mailseal::ImportAs::Peer,
    )
    .unwrap();
    sa.import_as(
        &sb.export_public(kind, b).unwrap(),
        mailseal::ImportAs::Peer,
    )
    .unwrap();
    (pa, pb)
}

/// The configuration of `address`'s bridge: its inbound listener on `ports[0]`
/// handing mail to the bridge, its outbound listener on `ports[1]` (taking no mail
/// itself) with `hop` as next hop, the A2A side on `ports[2]`, the agent's token in
/// `token_file` and its `card` line, its `peers`; `extra` goes to `[bridge]`.
#[allow(clippy::too_many_arguments)]
pub fn config_text(
    dir: &Path,
    name: &str,
    address: &str,
    store: &Path,
    ports: [u16; 3],
    hop: u16,
    token_file: &Path,
    card: &str,
    peers: &[Peer<'_>],
    extra: &str,
) -> String {
    let [smtp_in, smtp_out, http] = ports;
    let mut config = kit::config(
        dir,
        name,
        store,
        &[
            (
                "in",
                smtp_in,
                "inbound",
                0,
                "tls = \"none\"\n@hop\nprotocol = \"local\"",
            ),
            (
                "out",
                smtp_out,
                "outbound",
                hop,
                "submission = \"none\"\ntls = \"none\"",
            ),
        ],
        "",
    );
    config.push_str(&format!(
            "\n[bridge]\nlisten = \"127.0.0.1:{http}\"\nstate = \"{}\"\nwait_secs = 30\n{extra}\n[[bridge.agent]]\naddress = \"{address}\"\ntoken_file = \"{}\"\n{card}",
            dir.join(format!("{name}-bridge.db")).display(),
            token_file.display(),
        ));
    for p in peers {
        config.push_str(&format!("\n[[bridge.peer]]\naddress = \"{}\"\n", p.address));
        if let Some(g) = p.group {
            config.push_str(&format!("group = \"{g}\"\n"));
        }
        if let Some(pr) = p.profile {
            config.push_str(&format!("profile = \"{pr}\"\n"));
        }
    }
    config
}
