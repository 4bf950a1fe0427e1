//! The gateway test kit: a sink SMTP/LMTP server that records what reaches it, a
//! blocking SMTP client, gateway processes started from a configuration, and the
//! RFC 9216 key stores of the two sides.
//!
//! The sink and the client are written by hand for the tests: each is a few dozen
//! lines of the protocol's happy path plus the switches a test needs (refusing a
//! recipient, answering as LMTP), which no packaged test server offers in-process.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mailseal::keystore::{DirectoryStore, KeyStore};

/// A message as the sink received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub mail_from: String,
    pub recipients: Vec<String>,
    pub data: Vec<u8>,
}

/// An SMTP (or LMTP) server on loopback that accepts everything, except recipients
/// whose local part starts with `reject` (550 5.1.1) or `defer` (450 4.2.1), and
/// records it. It answers a message as Postfix does, with its queue id: `250 2.0.0
/// Ok: queued as SINKn`, n counting from 0.
pub struct Sink {
    pub addr: SocketAddr,
    messages: Arc<Mutex<Vec<Received>>>,
    connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl Sink {
    pub fn start() -> Sink {
        Sink::start_as(false)
    }

    pub fn start_lmtp() -> Sink {
        Sink::start_as(true)
    }

    /// A sink that closes each session right after a message's reply, without a
    /// word (a hop that drops idle sessions).
    pub fn start_closing() -> Sink {
        Sink::listen_with(TcpListener::bind("127.0.0.1:0").unwrap(), false, true)
    }

    /// How many sessions were opened to it.
    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A sink on a given port (a next hop that was down and comes up).
    pub fn start_on(port: u16) -> Sink {
        Sink::listen(TcpListener::bind(("127.0.0.1", port)).unwrap(), false)
    }

    fn start_as(lmtp: bool) -> Sink {
        Sink::listen(TcpListener::bind("127.0.0.1:0").unwrap(), lmtp)
    }

    fn listen(listener: TcpListener, lmtp: bool) -> Sink {
        Sink::listen_with(listener, lmtp, false)
    }

    fn listen_with(listener: TcpListener, lmtp: bool, closing: bool) -> Sink {
        let addr = listener.local_addr().unwrap();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (m, n) = (messages.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let m = m.clone();
                std::thread::spawn(move || {
                    let _ = sink_session(stream, &m, lmtp, closing);
                });
            }
        });
        Sink {
            addr,
            messages,
            connections,
        }
    }

    pub fn messages(&self) -> Vec<Received> {
        self.messages.lock().unwrap().clone()
    }

    /// Waits until `n` messages arrived (panics after `timeout`).
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.messages();
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < timeout,
                "the sink has {} of {n} messages after {timeout:?}",
                got.len()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn sink_session(
    stream: TcpStream,
    messages: &Mutex<Vec<Received>>,
    lmtp: bool,
    closing: bool,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    w.write_all(b"220 sink ESMTP\r\n")?;
    let (mut from, mut rcpts) = (String::new(), Vec::<String>::new());
    let mut line = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        let upper = text.to_ascii_uppercase();
        let arg = |p: &str| {
            text[p.len()..]
                .trim()
                .trim_start_matches('<')
                .split('>')
                .next()
                .unwrap_or("")
                .to_string()
        };
        if upper.starts_with("EHLO") || upper.starts_with("LHLO") {
            w.write_all(b"250-sink\r\n250-PIPELINING\r\n250 8BITMIME\r\n")?;
        } else if upper.starts_with("MAIL FROM:") {
            from = arg("MAIL FROM:");
            rcpts.clear();
            w.write_all(b"250 2.1.0 ok\r\n")?;
        } else if upper.starts_with("RCPT TO:") {
            let to = arg("RCPT TO:");
            if to.starts_with("reject") {
                w.write_all(b"550 5.1.1 no such user\r\n")?;
            } else if to.starts_with("defer") {
                w.write_all(b"450 4.2.1 mailbox busy, try later\r\n")?;
            } else {
                rcpts.push(to);
                w.write_all(b"250 2.1.5 ok\r\n")?;
            }
        } else if upper == "DATA" {
            w.write_all(b"354 go\r\n")?;
            let mut data = Vec::new();
            loop {
                line.clear();
                if r.read_until(b'\n', &mut line)? == 0 {
                    return Ok(());
                }
                if line == b".\r\n" {
                    break;
                }
                let l = if line.starts_with(b"..") {
                    &line[1..]
                } else {
                    &line[..]
                };
                data.extend_from_slice(l);
            }
            let queued = {
                let mut m = messages.lock().unwrap();
                m.push(Received {
                    mail_from: from.clone(),
                    recipients: rcpts.clone(),
                    data,
                });
                m.len() - 1
            };
            let replies = if lmtp { rcpts.len() } else { 1 };
            for _ in 0..replies {
                w.write_all(format!("250 2.0.0 Ok: queued as SINK{queued}\r\n").as_bytes())?;
            }
            if closing {
                return Ok(());
            }
        } else if upper == "QUIT" {
            w.write_all(b"221 bye\r\n")?;
            return Ok(());
        } else {
            w.write_all(b"250 ok\r\n")?;
        }
    }
}

/// A blocking SMTP client session. The `try_` methods return I/O errors (a test
/// that kills servers expects them); the others fail the test.
pub struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    pub fn try_connect(addr: SocketAddr) -> std::io::Result<Client> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut c = Client {
            w: s.try_clone()?,
            r: BufReader::new(s),
        };
        let greeting = c.try_reply()?;
        if !greeting.starts_with("220") {
            return Err(std::io::Error::other(greeting));
        }
        Ok(c)
    }

    pub fn connect(addr: SocketAddr) -> Client {
        Client::try_connect(addr).unwrap()
    }

    /// The next reply (all its lines); empty when the server closed.
    pub fn try_reply(&mut self) -> std::io::Result<String> {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                return Ok(all);
            }
            all.push_str(&line);
            if line.len() < 4 || line.as_bytes()[3] != b'-' {
                return Ok(all);
            }
        }
    }

    pub fn reply(&mut self) -> String {
        self.try_reply().unwrap_or_default()
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
    }

    pub fn try_cmd(&mut self, line: &str) -> std::io::Result<String> {
        self.w.write_all(format!("{line}\r\n").as_bytes())?;
        self.try_reply()
    }

    pub fn cmd(&mut self, line: &str) -> String {
        self.try_cmd(line).unwrap()
    }

    /// One transaction; the final reply.
    pub fn try_submit(&mut self, from: &str, to: &[&str], data: &[u8]) -> std::io::Result<String> {
        let r = self.try_cmd(&format!("MAIL FROM:<{from}>"))?;
        if !r.starts_with("250") {
            return Ok(r);
        }
        for t in to {
            let r = self.try_cmd(&format!("RCPT TO:<{t}>"))?;
            if !r.starts_with("250") {
                return Ok(r);
            }
        }
        let r = self.try_cmd("DATA")?;
        if !r.starts_with("354") {
            return Ok(r);
        }
        let mut body = Vec::new();
        for line in data.split_inclusive(|&b| b == b'\n') {
            if line.starts_with(b".") {
                body.push(b'.');
            }
            body.extend_from_slice(line);
        }
        if !body.ends_with(b"\r\n") {
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b".\r\n");
        self.w.write_all(&body)?;
        self.try_reply()
    }

    pub fn submit(&mut self, from: &str, to: &[&str], data: &[u8]) -> String {
        self.try_submit(from, to, data).unwrap()
    }
}

/// Sends one message through a new connection; the final reply.
pub fn try_submit(
    addr: SocketAddr,
    from: &str,
    to: &[&str],
    data: &[u8],
) -> std::io::Result<String> {
    let mut c = Client::try_connect(addr)?;
    c.try_cmd("EHLO client.test")?;
    let r = c.try_submit(from, to, data)?;
    let _ = c.try_cmd("QUIT");
    Ok(r)
}

/// As [`try_submit`], failing the test on an I/O error.
pub fn submit(addr: SocketAddr, from: &str, to: &[&str], data: &[u8]) -> String {
    try_submit(addr, from, to, data).unwrap()
}

/// A port that accepts connections and never says a word (a next hop that hangs).
pub fn tarpit() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    addr
}

/// A loopback port nobody listens on (now), never handed out twice in a run. Taken
/// below Linux's ephemeral range (32768-60999): a port the kernel gave for `:0` and
/// this function then freed could be given again to a sink or client binding `:0` in
/// a test beside it before the gateway that was meant to have it binds it (seen once
/// in ten runs of the end-to-end tests).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let _ = NEXT.compare_exchange(
        0,
        20_000 + std::process::id() % 10_000,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    loop {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let port = (20_000 + (n - 20_000) % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

pub fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(crate::common::fixture(rel)).unwrap()
}

/// A key store at `dir` with these RFC 9216 files (`(file, trusted)`) and OpenPGP keys.
pub fn store(dir: &Path, smime: &[(&str, bool)], openpgp: &[&str]) -> PathBuf {
    let s = DirectoryStore::open(dir).unwrap();
    for (f, trusted) in smime {
        s.import(&fixture(&format!("rfc9216/{f}")), f, *trusted)
            .unwrap();
    }
    for f in openpgp {
        s.import(&fixture(&format!("openpgp/{f}")), f, false)
            .unwrap();
    }
    dir.to_path_buf()
}

/// Alice's side (`a`) and Bob's (`b`): each holds its own keys and the other's
/// certificates, and trusts the RFC 9216 CA.
pub fn two_sides(root: &Path) -> (PathBuf, PathBuf) {
    let a = store(
        &root.join("a-store"),
        &[
            ("ca.rsa.crt", true),
            ("alice.sign.crt", false),
            ("alice.sign.key", false),
            ("alice.encrypt.crt", false),
            ("alice.encrypt.key", false),
            ("bob.sign.crt", false),
            ("bob.encrypt.crt", false),
        ],
        &[
            "alice@openpgp.example.sec.asc",
            "bob@openpgp.example.pub.asc",
        ],
    );
    let b = store(
        &root.join("b-store"),
        &[
            ("ca.rsa.crt", true),
            ("bob.sign.crt", false),
            ("bob.sign.key", false),
            ("bob.encrypt.crt", false),
            ("bob.encrypt.key", false),
            ("alice.sign.crt", false),
            ("alice.encrypt.crt", false),
        ],
        &[
            "bob@openpgp.example.sec.asc",
            "alice@openpgp.example.pub.asc",
        ],
    );
    (a, b)
}

/// JWS identities on both sides: Alice (Ed25519) in `a`, Bob (ES256) in `b`, each
/// with the other's public JWK bound to its address.
pub fn jws_sides(a: &Path, b: &Path) {
    use mailseal::jws::{jwk, Jwk, JwsAlgorithm};
    let a = DirectoryStore::open(a).unwrap();
    let b = DirectoryStore::open(b).unwrap();
    jwk::generate(&a, "alice@jws.example", JwsAlgorithm::EdDsa).unwrap();
    jwk::generate(&b, "bob@jws.example", JwsAlgorithm::Es256).unwrap();
    for (from, to, email) in [(&a, &b, "alice@jws.example"), (&b, &a, "bob@jws.example")] {
        let public = jwk::public_jwks(from, email).unwrap();
        let key = Jwk::parse(public[0].to_string().as_bytes()).unwrap();
        jwk::bind(to, &key, &[email.to_string()], "jwk").unwrap();
    }
}

/// A `[tls]` table naming `cert` and `key`, for the end of a configuration.
pub fn tls_table(cert: &Path, key: &Path) -> String {
    format!(
        "\n[tls]\ncertificate = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    )
}

/// A TLS server certificate for `localhost` under a new CA: (ca.pem, cert.pem, key.pem).
pub fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| crate::common::openssl(args, dir);
    crate::common::openssl_test_ca_files(dir, "gateway test CA", "ca.key", "ca.pem");
    run(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "req.pem",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "req.pem",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "30",
        "-extfile",
        "ext.cnf",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

/// A running `mailseal gateway`; killed when dropped.
pub struct Gateway {
    pub child: Child,
    pub config: PathBuf,
    pub log: PathBuf,
}

impl Gateway {
    /// Writes `config` to `dir/NAME.toml` and starts the gateway on it; returns once
    /// every `port` accepts connections.
    pub fn start(dir: &Path, name: &str, config: &str, ports: &[u16]) -> Gateway {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, config).unwrap();
        Gateway::start_file(dir, name, &path, ports)
    }

    pub fn start_file(dir: &Path, name: &str, path: &Path, ports: &[u16]) -> Gateway {
        Gateway::start_file_env(dir, name, path, ports, &[])
    }

    /// [`Gateway::start_file`] with these environment variables set.
    pub fn start_file_env(
        dir: &Path,
        name: &str,
        path: &Path,
        ports: &[u16],
        env: &[(&str, &str)],
    ) -> Gateway {
        Gateway::spawn("gateway", dir, name, path, ports, env)
    }

    /// `mailseal COMMAND --config PATH` (`gateway`, or `bridge`), its log in
    /// `dir/NAME.log`; returns once every `port` accepts connections.
    pub fn spawn(
        command: &str,
        dir: &Path,
        name: &str,
        path: &Path,
        ports: &[u16],
        env: &[(&str, &str)],
    ) -> Gateway {
        let log = dir.join(format!("{name}.log"));
        let logfile = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(crate::common::bin())
            .args([command, "--config"])
            .arg(path)
            .env("MAILSEAL_LOG", "info")
            .env_remove("MAILSEAL_STATE")
            .env_remove("MAILSEAL_LOG_FORMAT")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logfile)
            .spawn()
            .unwrap();
        let mut g = Gateway {
            child,
            config: path.to_path_buf(),
            log,
        };
        g.wait_ready(ports);
        g
    }

    fn wait_ready(&mut self, ports: &[u16]) {
        let start = Instant::now();
        for p in ports {
            while TcpStream::connect(("127.0.0.1", *p)).is_err() {
                if let Ok(Some(status)) = self.child.try_wait() {
                    panic!("the gateway exited ({status}): {}", self.log_text());
                }
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "the gateway does not listen on {p}: {}",
                    self.log_text()
                );
                std::thread::sleep(Duration::from_millis(25));
            }
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for the exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A gateway configuration: listeners `(name, port, mode, next-hop port, extra)`,
/// where extra is TOML added to the listener's table, and `tail` added at the end. An
/// outbound listener whose extra does not say who may submit is `submission =
/// "open"`, and an inbound one that does not name its domains takes any (`local_domains
/// = ["*"]`): these tests are about what it does with what it is given
/// (`fail_submission.rs` and `fail_inbound.rs` are about who may give it).
pub fn config(
    dir: &Path,
    name: &str,
    store: &Path,
    listeners: &[(&str, u16, &str, u16, &str)],
    tail: &str,
) -> String {
    let mut c = format!(
        "hostname = \"{name}.test\"\nstore = \"{}\"\nspool = \"{}\"\nquarantine = \"{}\"\nworkers = 2\n",
        store.display(),
        dir.join(format!("{name}-spool")).display(),
        dir.join(format!("{name}-quarantine")).display(),
    );
    for (lname, port, mode, hop, extra) in listeners {
        let open = if *mode == "outbound" && !extra.contains("submission") {
            "submission = \"open\"\n"
        } else if *mode == "inbound" && !extra.contains("local_domains") {
            "local_domains = [\"*\"]\n"
        } else {
            ""
        };
        // What follows a line `@hop` goes to the listener's next_hop table.
        let (extra, hop_extra) = extra.split_once("\n@hop\n").unwrap_or((extra, ""));
        let extra = format!("{open}{extra}");
        c.push_str(&format!(
            "\n[[listener]]\nname = \"{lname}\"\naddress = \"127.0.0.1:{port}\"\nmode = \"{mode}\"\n{extra}\n[listener.next_hop]\naddress = \"127.0.0.1:{hop}\"\ntls = \"none\"\n"
        ));
        if !hop_extra.is_empty() {
            c.push_str(hop_extra);
            c.push('\n');
        }
    }
    c.push_str("\n[delivery]\nretry_initial_secs = 1\nretry_max_secs = 2\npoll_ms = 50\ntimeout_secs = 10\nlease_secs = 60\n");
    c.push_str(tail);
    c
}

/// A plain MailA2A message from `from` to `to` whose envelope's messageId is `id`.
pub fn plain(from: &str, to: &str, id: &str) -> Vec<u8> {
    let env = crate::common::env(crate::common::with(
        crate::common::request(),
        serde_json::json!({"messageId": id, "idempotencyKey": format!("k-{id}")}),
    ));
    mailseal::MailA2aMessage::new(from, &[to], env)
        .to_rfc5322()
        .unwrap()
}

/// The `Received:` fields on top of a delivered message, each unfolded onto one line,
/// and the rest of the message.
pub fn trace_fields(data: &[u8]) -> (Vec<String>, &[u8]) {
    let mut fields = Vec::new();
    let mut rest = data;
    while rest.len() >= 9 && rest[..9].eq_ignore_ascii_case(b"Received:") {
        // The field runs to the first line end not followed by a folded line.
        let mut end = 0;
        loop {
            end = rest[end..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| end + i + 1);
            if end >= rest.len() || !matches!(rest[end], b' ' | b'\t') {
                break;
            }
        }
        let field = String::from_utf8_lossy(&rest[..end])
            .replace("\r\n\t", " ")
            .replace("\r\n ", " ");
        fields.push(field.trim_end().to_string());
        rest = &rest[end..];
    }
    (fields, rest)
}

/// The one `Received:` field the gateway `host` added on top of `data` (there must be
/// exactly one), unfolded.
pub fn received_by(data: &[u8], host: &str) -> String {
    let by = format!(" by {host} (mailseal) ");
    let (fields, _) = trace_fields(data);
    let ours: Vec<String> = fields.into_iter().filter(|f| f.contains(&by)).collect();
    assert_eq!(
        ours.len(),
        1,
        "one Received field by {host}: {}",
        String::from_utf8_lossy(data)
    );
    ours[0].clone()
}

/// The envelope JSON of a delivered message.
pub fn envelope_of(data: &[u8]) -> Vec<u8> {
    mailseal::MailA2aMessage::parse(data, &mailseal::Limits::default())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(data)))
        .envelope_bytes()
        .to_vec()
}

/// The README's Postfix services for the gateway, after the queue...
const SNIPPET: &str = include_str!("../../dist/postfix/master.cf.append");
/// ...and with the MX path before it (the recommended set-up).
const BEFORE_QUEUE: &str = include_str!("../../dist/postfix/master.cf.before-queue.append");

/// A Postfix instance of its own in `dir`, stopped when dropped.
pub struct Postfix {
    etc: std::path::PathBuf,
}

impl Drop for Postfix {
    fn drop(&mut self) {
        let _ = Command::new("postfix")
            .arg("-c")
            .arg(&self.etc)
            .arg("stop")
            .status();
    }
}

/// The password the gateway logs in to Postfix's re-injection port with.
pub const REINJECT_PASSWORD: &str = "gateway reinjection password";

/// `@hop` lines for a listener whose next hop is Postfix's re-injection port: the
/// gateway's login there (its password in `dir/reinject.pass`).
pub fn reinject_login(dir: &Path) -> String {
    let file = dir.join("reinject.pass");
    std::fs::write(&file, format!("{REINJECT_PASSWORD}\n")).unwrap();
    format!(
        "\n@hop\nlogin = \"gateway\"\npassword_file = \"{}\"",
        file.display()
    )
}

/// The password Postfix logs in to the gateway with (its relay submitter).
pub const RELAY_PASSWORD: &str = "postfix relay password";

/// The `[[submitter]]` of Postfix's relay login, for the end of a gateway
/// configuration whose outbound listener has `submission = "auth"`.
pub fn relay_submitter() -> String {
    format!(
        "\n[[submitter]]\nlogin = \"postfix\"\npassword_hash = \"{}\"\nrelay = true\n",
        mailseal::gateway::submission::hash_password(RELAY_PASSWORD).unwrap()
    )
}

/// An agent's SASL login at Postfix: (login, password, the sender addresses it owns).
pub type Login<'a> = (&'a str, &'a str, &'a [&'a str]);

/// `filter`: the README's content-filter services (`dist/postfix/master.cf.append`),
/// their ports moved by `ports` (`(snippet's, ours)`), with `logins` as the agents'
/// SASL logins (Cyrus, its own password database, as `dist/postfix/main.cf.append`
/// says); without, a plain relay whose `smtpd` listens on the first port of `ports`.
/// `transports`: where each recipient's mail goes.
pub fn postfix(
    dir: &Path,
    filter: bool,
    ports: &[(u16, u16)],
    transports: &[(String, u16)],
    logins: &[Login<'_>],
) -> Postfix {
    start_postfix(dir, filter.then_some(SNIPPET), ports, transports, logins)
}

/// As [`postfix`] with the filter, from the before-queue files
/// (`dist/postfix/master.cf.before-queue.append`): the MX path through the gateway's
/// inbound listener before Postfix queues anything.
pub fn postfix_before_queue(
    dir: &Path,
    ports: &[(u16, u16)],
    transports: &[(String, u16)],
    logins: &[Login<'_>],
) -> Postfix {
    start_postfix(dir, Some(BEFORE_QUEUE), ports, transports, logins)
}

fn start_postfix(
    dir: &Path,
    services: Option<&str>,
    ports: &[(u16, u16)],
    transports: &[(String, u16)],
    logins: &[Login<'_>],
) -> Postfix {
    let filter = services.is_some();
    let etc = dir.join("etc");
    let (queue, data) = (dir.join("queue"), dir.join("data"));
    for d in [&etc, &queue, &data] {
        std::fs::create_dir_all(d).unwrap();
    }
    // Postfix's own user walks to its queue and data directories.
    let chmod = |p: &Path, mode: &str| {
        assert!(Command::new("chmod")
            .arg(mode)
            .arg(p)
            .status()
            .unwrap()
            .success());
    };
    chmod(dir, "755");
    assert!(Command::new("chown")
        .arg("postfix")
        .arg(&data)
        .status()
        .unwrap()
        .success());
    let map: Vec<String> = transports
        .iter()
        .map(|(rcpt, port)| format!("{rcpt}=smtp:[127.0.0.1]:{port}"))
        .collect();
    let main = format!(
        "compatibility_level = 3.6\nqueue_directory = {q}\ndata_directory = {d}\nmail_owner = postfix\nsetgid_group = postdrop\n\
         inet_interfaces = 127.0.0.1\ninet_protocols = ipv4\nmyhostname = postfix.test\nmydestination =\nmynetworks = 127.0.0.0/8\n\
         smtpd_relay_restrictions = permit_mynetworks, reject\nalias_maps =\nalias_database =\n\
         maillog_file = {dir}/maillog\nmaillog_file_prefixes = {dir}\n\
         transport_maps = inline:{{ {map} }}\nsmtp_tls_security_level = none\n\
         delay_warning_time = 0\nqueue_run_delay = 1s\nminimal_backoff_time = 1s\nmaximal_backoff_time = 2s\n",
        q = queue.display(),
        d = data.display(),
        dir = dir.display(),
        map = map.join(", "),
    );
    let main = if filter {
        format!("{main}{}", sasl(dir, logins))
    } else {
        main
    };
    std::fs::write(etc.join("main.cf"), main).unwrap();
    let system = std::fs::read_to_string("/etc/postfix/master.cf").unwrap();
    let mut master: String = system
        .lines()
        .filter(|l| !l.starts_with("smtp      inet") && !l.starts_with("smtp inet"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut snippet = match services {
        Some(s) => s.to_string(),
        None => format!("127.0.0.1:{} inet n - n - - smtpd\n", ports[0].1),
    };
    for (from, to) in ports.iter().filter(|_| filter) {
        // `127.0.0.1:PORT` and `[127.0.0.1]:PORT`: the snippet's ports are distinct.
        snippet = snippet.replace(&format!(":{from}\n"), &format!(":{to}\n"));
        snippet = snippet.replace(&format!(":{from} "), &format!(":{to} "));
    }
    if filter {
        // Postfix's relay login at the gateway's outbound listener (the snippet's
        // 10025), in the password map the snippet names.
        let outbound = ports
            .iter()
            .find(|(from, _)| *from == 10025)
            .map_or(10025, |p| p.1);
        let relay = dir.join("relay");
        std::fs::write(
            &relay,
            format!("[127.0.0.1]:{outbound} postfix:{RELAY_PASSWORD}\n"),
        )
        .unwrap();
        snippet = snippet.replace("/etc/postfix/mailseal_relay", &relay.display().to_string());
    }
    master.push_str(&snippet);
    std::fs::write(etc.join("master.cf"), master).unwrap();
    let out = Command::new("postfix")
        .arg("-c")
        .arg(&etc)
        .arg("start")
        .output()
        .unwrap();
    let pf = Postfix { etc };
    assert!(
        out.status.success(),
        "postfix start: {}{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("maillog")).unwrap_or_default()
    );
    pf
}

/// Makes `dir` and every directory above it, up to the system's temporary directory,
/// traversable by other users (mode 755): a server that drops root (Postfix's smtpd,
/// PostgreSQL) reads what a test put there, and a test's temporary directory is 0700.
pub fn let_others_through(dir: &Path) {
    let mut up = Some(dir);
    while let Some(d) =
        up.filter(|d| d.starts_with(std::env::temp_dir()) && *d != std::env::temp_dir())
    {
        assert!(Command::new("chmod")
            .arg("755")
            .arg(d)
            .status()
            .unwrap()
            .success());
        up = d.parent();
    }
}

/// Cyrus SASL for the submission service: its configuration, a password database of
/// `logins` and the sender login map, in `dir`; the main.cf lines that name them.
fn sasl(dir: &Path, logins: &[Login<'_>]) -> String {
    // Postfix's smtpd reads these as the postfix user, after it dropped root.
    let_others_through(dir.parent().unwrap());
    // Debian's Postfix reads CONFIG_DIRECTORY/sasl/smtpd.conf (as /etc/postfix/sasl/
    // on a host: dist/postfix/main.cf.append).
    let conf = dir.join("etc").join("sasl");
    std::fs::create_dir_all(&conf).unwrap();
    let db = dir.join("sasldb2");
    std::fs::write(
        conf.join("smtpd.conf"),
        format!(
            "pwcheck_method: auxprop\nauxprop_plugin: sasldb\nmech_list: PLAIN LOGIN\nsasldb_path: {}\n",
            db.display()
        ),
    )
    .unwrap();
    let mut owners = String::new();
    let gateway: Login<'_> = ("gateway", REINJECT_PASSWORD, &[]);
    for (login, password, addresses) in logins.iter().chain([&gateway]) {
        let mut child = Command::new("saslpasswd2")
            .args(["-p", "-c", "-f"])
            .arg(&db)
            .args(["-u", "mailseal.test", login])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("saslpasswd2 (sasl2-bin)");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(password.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "saslpasswd2 {login}");
        for a in *addresses {
            owners.push_str(&format!("{a} {login}, {login}@mailseal.test\n"));
        }
    }
    // Postfix's smtpd runs as the postfix user and reads the database itself.
    assert!(Command::new("chmod")
        .args(["644"])
        .arg(&db)
        .status()
        .unwrap()
        .success());
    std::fs::write(dir.join("senders"), owners).unwrap();
    format!(
        "smtpd_sasl_type = cyrus\nsmtpd_sasl_path = smtpd\n\
         smtpd_sasl_local_domain = mailseal.test\nsmtpd_sasl_security_options = noanonymous\n\
         smtpd_sender_login_maps = texthash:{}\n",
        dir.join("senders").display()
    )
}

/// Whether Postfix can run here (root, the package) and `swaks` is installed; says why
/// not (or fails under MAILSEAL_REQUIRE_PEERS=1).
pub fn postfix_usable() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    crate::common::peer_available(
        "postfix (as root)",
        Command::new("sh").args(["-c", if root { "command -v postfix" } else { "false" }]),
    ) && crate::common::peer_available("swaks", Command::new("swaks").arg("--version"))
        && crate::common::peer_available(
            "saslpasswd2 (sasl2-bin)",
            Command::new("sh").args(["-c", "command -v saslpasswd2"]),
        )
}
