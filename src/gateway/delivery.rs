//! Delivery from the spool to each listener's next hop, by SMTP or LMTP over
//! `mail-send`'s client: STARTTLS required or opportunistic (verified against the
//! configured roots, or the system's), retries with doubling backoff up to a maximum
//! age, then a DSN to the sender and a copy in the quarantine directory.
//!
//! Each recipient's reply counts on its own: the accepted ones are done, the
//! permanently refused ones bounce, the rest wait for the next attempt (the entry
//! keeps only them). On shutdown, deliveries in flight finish; what has not started
//! stays queued.
//!
//! A session that ended its transaction cleanly goes back to its hop's idle list and
//! carries the next message (one TCP and TLS handshake for many, as Postfix's
//! connection cache does). Before reuse it must answer `RSET`; one that does not (the
//! hop closed it) is dropped and a new one opened, so nothing was sent on it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mail_send::SmtpClient;
use smtp_proto::Response;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::config::{Config, HopTls, NextHop, Protocol};
use super::dsn;
use super::logline::{self, Seen};
use super::metrics::{self, Metrics};
use super::spool::{now_ms, Entry, Spool};

/// A next hop, ready to connect to.
pub(crate) struct Hop {
    pub(crate) config: NextHop,
    tls: Option<TlsConnector>,
    /// The login and password the gateway authenticates with, if the hop asks.
    credentials: Option<mail_send::Credentials<String>>,
    server_name: String,
    /// Sessions between messages, with when they went idle.
    idle: std::sync::Mutex<Vec<(Instant, Session)>>,
}

/// Sessions kept idle per hop at most; older than [`IDLE_FOR`], one is dropped.
const MAX_IDLE: usize = 16;
const IDLE_FOR: Duration = Duration::from_secs(30);

/// An open session with a next hop, past its greeting, EHLO and STARTTLS.
enum Session {
    Plain(SmtpClient<TcpStream>),
    Tls(Box<SmtpClient<TlsStream<TcpStream>>>),
}

impl Session {
    async fn rset(&mut self) -> bool {
        match self {
            Session::Plain(c) => c.rset().await.is_ok(),
            Session::Tls(c) => c.rset().await.is_ok(),
        }
    }

    /// One transaction; `Ok` also says the session may carry another.
    async fn transaction(
        &mut self,
        entry: &Entry,
        lmtp: bool,
    ) -> Result<Vec<RcptResult>, RcptResult> {
        match self {
            Session::Plain(c) => transaction(c, entry, lmtp).await,
            Session::Tls(c) => transaction(c, entry, lmtp).await,
        }
    }
}

impl Hop {
    /// The hop of `config`, with its TLS roots loaded.
    pub(crate) fn new(config: &NextHop) -> Result<Hop, String> {
        let tls = match config.tls {
            HopTls::None => None,
            _ => Some(connector(config.roots.as_deref())?),
        };
        let credentials = match (&config.login, &config.password_file) {
            (Some(login), Some(file)) => {
                let text = zeroize::Zeroizing::new(
                    std::fs::read_to_string(file)
                        .map_err(|e| format!("password_file {}: {e}", file.display()))?,
                );
                let password = text.lines().next().unwrap_or_default().to_string();
                Some(mail_send::Credentials::new(login.clone(), password))
            }
            _ => None,
        };
        Ok(Hop {
            credentials,
            server_name: config
                .server_name
                .clone()
                .unwrap_or_else(|| config.host().to_string()),
            config: config.clone(),
            tls,
            idle: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// An idle session that has not been idle too long.
    fn take_idle(&self) -> Option<Session> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((since, s)) = idle.pop() {
            if since.elapsed() < IDLE_FOR {
                return Some(s);
            }
        }
        None
    }

    fn put_idle(&self, s: Session) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push((Instant::now(), s));
        }
    }
}

/// A rustls client on AWS-LC that verifies against `roots` (PEM), or the system's.
fn connector(roots: Option<&std::path::Path>) -> Result<TlsConnector, String> {
    let Some(path) = roots else {
        return mail_send::smtp::tls::build_tls_connector(false);
    };
    use rustls_pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    let certs = rustls_pki_types::CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
        store
            .add(cert)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if store.is_empty() {
        return Err(format!("{}: no certificate", path.display()));
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(store)
    .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// What a recipient's delivery came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RcptResult {
    /// Accepted, with the hop's reply (its queue id, as `250 2.0.0 Ok: queued as
    /// 4Xyz`: where to look for it next).
    Delivered(String),
    /// 4xx, or no answer: try again later.
    Temporary(String),
    /// 5xx: bounce.
    Permanent(String),
}

impl RcptResult {
    fn delivered(&self) -> bool {
        matches!(self, RcptResult::Delivered(_))
    }
}

fn reply_text(r: &Response<String>) -> String {
    let e = r.esc;
    format!("{} {}.{}.{} {}", r.code, e[0], e[1], e[2], r.message)
}

fn classify(r: &Response<String>) -> RcptResult {
    match r.code {
        200..=299 => RcptResult::Delivered(reply_text(r)),
        500..=599 => RcptResult::Permanent(reply_text(r)),
        _ => RcptResult::Temporary(reply_text(r)),
    }
}

fn client_error(e: mail_send::Error) -> RcptResult {
    match e {
        mail_send::Error::UnexpectedReply(r) => classify(&r),
        other => RcptResult::Temporary(other.to_string()),
    }
}

/// Delivers `entry` to `hop`: one result per recipient, in order.
pub(crate) async fn attempt(
    entry: &Entry,
    hop: &Hop,
    helo: &str,
    timeout: Duration,
) -> Vec<RcptResult> {
    match exchange(entry, hop, helo, timeout).await {
        Ok(r) => r,
        Err(e) => vec![e; entry.recipients.len()],
    }
}

async fn resolve(address: &str) -> Result<SocketAddr, RcptResult> {
    tokio::net::lookup_host(address)
        .await
        .map_err(|e| RcptResult::Temporary(format!("{address}: {e}")))?
        .next()
        .ok_or_else(|| RcptResult::Temporary(format!("{address}: no address")))
}

async fn exchange(
    entry: &Entry,
    hop: &Hop,
    helo: &str,
    timeout: Duration,
) -> Result<Vec<RcptResult>, RcptResult> {
    let lmtp = hop.config.protocol == Protocol::Lmtp;
    let mut session = loop {
        match hop.take_idle() {
            Some(mut s) => {
                if s.rset().await {
                    break s;
                }
            }
            None => break open(hop, helo, timeout).await?,
        }
    };
    let results = session.transaction(entry, lmtp).await?;
    hop.put_idle(session);
    Ok(results)
}

/// A new session with `hop`: connected, greeted, past EHLO (or LHLO) and the TLS the
/// hop asks for.
async fn open(hop: &Hop, helo: &str, timeout: Duration) -> Result<Session, RcptResult> {
    let addr = resolve(&hop.config.address).await?;
    let mut client = SmtpClient::connect(addr, timeout)
        .await
        .map_err(client_error)?;
    // Commands and replies are small and answered one by one: no Nagle delay.
    let _ = client.stream.set_nodelay(true);
    let lmtp = hop.config.protocol == Protocol::Lmtp;
    if hop.config.tls == HopTls::Implicit {
        let tls = hop
            .tls
            .as_ref()
            .ok_or_else(|| RcptResult::Temporary("no TLS".into()))?;
        let mut client = client
            .into_tls(tls, &hop.server_name)
            .await
            .map_err(client_error)?;
        greeting(&mut client).await?;
        let caps = hello(&mut client, helo, lmtp).await?;
        login(hop, &mut client, &caps).await?;
        return Ok(Session::Tls(Box::new(client)));
    }
    greeting(&mut client).await?;
    let caps = hello(&mut client, helo, lmtp).await?;
    let offers_tls = caps.has_capability(smtp_proto::EXT_START_TLS);
    match (&hop.tls, hop.config.tls) {
        (Some(tls), HopTls::Required | HopTls::Opportunistic) if offers_tls => {
            let mut client = client
                .start_tls(tls, &hop.server_name)
                .await
                .map_err(client_error)?;
            let caps = hello(&mut client, helo, lmtp).await?;
            login(hop, &mut client, &caps).await?;
            Ok(Session::Tls(Box::new(client)))
        }
        (_, HopTls::Required) => Err(RcptResult::Temporary(format!(
            "{} does not offer STARTTLS, which this hop requires",
            hop.config.address
        ))),
        _ => {
            login(hop, &mut client, &caps).await?;
            Ok(Session::Plain(client))
        }
    }
}

/// SMTP AUTH with the hop's login, when it has one (a failure defers the message).
async fn login<T: AsyncRead + AsyncWrite + Unpin>(
    hop: &Hop,
    client: &mut SmtpClient<T>,
    caps: &smtp_proto::EhloResponse<String>,
) -> Result<(), RcptResult> {
    let Some(credentials) = &hop.credentials else {
        return Ok(());
    };
    client
        .authenticate(credentials, caps)
        .await
        .map(|_| ())
        .map_err(|e| {
            RcptResult::Temporary(format!(
                "{}: cannot log in as the gateway: {e}",
                hop.config.address
            ))
        })
}

async fn greeting<T: AsyncRead + AsyncWrite + Unpin>(
    client: &mut SmtpClient<T>,
) -> Result<(), RcptResult> {
    let r = tokio::time::timeout(client.timeout, client.read())
        .await
        .map_err(|_| RcptResult::Temporary("no greeting".into()))?
        .map_err(client_error)?;
    match classify(&r) {
        RcptResult::Delivered(_) => Ok(()),
        other => Err(other),
    }
}

async fn hello<T: AsyncRead + AsyncWrite + Unpin>(
    client: &mut SmtpClient<T>,
    helo: &str,
    lmtp: bool,
) -> Result<smtp_proto::EhloResponse<String>, RcptResult> {
    if lmtp {
        client.lhlo(helo).await
    } else {
        client.ehlo(helo).await
    }
    .map_err(client_error)
}

async fn transaction<T: AsyncRead + AsyncWrite + Unpin>(
    client: &mut SmtpClient<T>,
    entry: &Entry,
    lmtp: bool,
) -> Result<Vec<RcptResult>, RcptResult> {
    let r = client
        .cmd(format!("MAIL FROM:<{}>\r\n", entry.mail_from).as_bytes())
        .await
        .map_err(client_error)?;
    if let e @ (RcptResult::Temporary(_) | RcptResult::Permanent(_)) = classify(&r) {
        return Err(e);
    }
    let mut results = Vec::with_capacity(entry.recipients.len());
    for rcpt in &entry.recipients {
        let r = client
            .cmd(format!("RCPT TO:<{rcpt}>\r\n").as_bytes())
            .await
            .map_err(client_error)?;
        results.push(classify(&r));
    }
    let accepted = results.iter().filter(|r| r.delivered()).count();
    if accepted == 0 {
        let _ = client.rset().await;
        return Ok(results);
    }
    let r = client.cmd(b"DATA\r\n").await.map_err(client_error)?;
    if r.code != 354 {
        let e = classify(&r);
        return Ok(results
            .into_iter()
            .map(|x| if x.delivered() { e.clone() } else { x })
            .collect());
    }
    tokio::time::timeout(client.timeout, write_data(&mut client.stream, &entry.data))
        .await
        .map_err(|_| RcptResult::Temporary("timeout sending the message".into()))?
        .map_err(|e| RcptResult::Temporary(e.to_string()))?;
    // SMTP answers once for all; LMTP once for each accepted recipient.
    let replies = if lmtp {
        client.read_many(accepted).await.map_err(client_error)?
    } else {
        vec![client.read().await.map_err(client_error)?]
    };
    let mut replies = replies.iter();
    let mut last = None;
    for r in results.iter_mut().filter(|r| r.delivered()) {
        let reply = if lmtp {
            replies.next()
        } else {
            last.or_else(|| replies.next())
        };
        last = reply;
        *r = reply.map_or(RcptResult::Temporary("no reply to DATA".into()), classify);
    }
    Ok(results)
}

/// Writes `data` as DATA content: dot-stuffed, then the terminator. Unlike
/// `mail-send`'s writer, a message that ends in CRLF gets no second one: what the
/// next hop stores is byte for byte what was queued.
///
/// Buffered, so that the message and its terminator leave in as few segments as
/// possible: written piece by piece, the terminator waited on the hop's delayed ACK
/// (Nagle), some 40 ms per message.
async fn write_data<T: AsyncWrite + Unpin>(stream: &mut T, data: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::io::BufWriter::with_capacity(64 * 1024, stream);
    let mut line_start = true;
    let mut from = 0;
    for (i, &b) in data.iter().enumerate() {
        if line_start && b == b'.' {
            stream.write_all(&data[from..i]).await?;
            stream.write_all(b".").await?;
            from = i;
        }
        line_start = b == b'\n';
    }
    stream.write_all(&data[from..]).await?;
    let end: &[u8] = if data.ends_with(b"\r\n") {
        b".\r\n"
    } else {
        b"\r\n.\r\n"
    };
    stream.write_all(end).await?;
    stream.flush().await
}

/// The delivery loop's shared parts.
pub(crate) struct Deliverer {
    pub(crate) spool: Arc<dyn Spool>,
    pub(crate) config: Arc<Config>,
    pub(crate) hops: HashMap<String, Hop>,
    pub(crate) metrics: Arc<Metrics>,
    /// Set when the deliverer stops (shutdown, or the database gone too long): a done
    /// the spool refuses is then not waited for (see [`Deliverer::mark_done`]).
    pub(crate) stopping: std::sync::atomic::AtomicBool,
    /// What takes the entries of hops of protocol `local` (the bridge).
    pub(crate) local: Option<Arc<dyn super::Attachment>>,
    /// Notified when this process queues an entry ([`super::spool::Waking`]): it is
    /// claimed at once, not at the next poll.
    pub(crate) wake: Arc<tokio::sync::Notify>,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// How often the queue's depth and oldest entry are read for the metrics.
const QUEUE_READ_EVERY: Duration = Duration::from_secs(1);

impl Deliverer {
    /// Claims due entries and delivers them, at most `concurrency` at once, until
    /// `shutdown` turns true; then lets the deliveries in flight finish.
    /// Delivers until `shutdown`; gives up (an error, so the process exits non-zero
    /// and its service manager starts it again) when the spool's database has been
    /// unreachable for `delivery.database_down_secs`.
    pub(crate) async fn run(
        self: Arc<Self>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), String> {
        let mut inflight = tokio::task::JoinSet::new();
        let give_up = self.config.delivery.database_down_secs;
        let poll = Duration::from_millis(self.config.delivery.poll_ms);
        let mut last_expire = Instant::now();
        // A sign of life every sixth of `instance_dead_secs`, from a task of its own:
        // deliveries that take long (a hop that hangs) never keep it from beating.
        let beat = Duration::from_secs((self.config.delivery.instance_dead_secs / 6).max(1));
        let heart = {
            let me = self.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(beat);
                loop {
                    tick.tick().await;
                    let me = me.clone();
                    let _ = tokio::task::spawn_blocking(move || me.spool.heartbeat()).await;
                }
            })
        };
        let mut last_queue_read: Option<Instant> = None;
        loop {
            if *shutdown.borrow() {
                break;
            }
            // Every delivery that has finished frees its place, not only the one that
            // woke the loop: the claim below then takes them all in one statement
            // rather than one a statement.
            while inflight.try_join_next().is_some() {}
            let free = self
                .config
                .delivery
                .concurrency
                .saturating_sub(inflight.len());
            if free > 0 {
                let me = self.clone();
                let lease = self.config.delivery.lease_secs as i64;
                let claimed =
                    tokio::task::spawn_blocking(move || me.spool.claim(now(), free, lease)).await;
                match claimed {
                    Ok(Ok(entries)) => {
                        for entry in entries {
                            let me = self.clone();
                            inflight.spawn(async move { me.deliver(entry).await });
                        }
                    }
                    // Said once when it starts failing, not at every poll.
                    Ok(Err(e)) if self.spool.down_for().is_some_and(|d| d > poll) => {
                        tracing::debug!(error = %e, "spool: cannot claim")
                    }
                    Ok(Err(e)) => tracing::error!(error = %e, "spool: cannot claim"),
                    Err(e) => tracing::error!(error = %e, "spool: claim failed"),
                }
            }
            if let Some(down) = self.spool.down_for() {
                if give_up > 0 && down > Duration::from_secs(give_up) {
                    self.stopping
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    while inflight.join_next().await.is_some() {}
                    heart.abort();
                    return Err(format!(
                        "the spool's database has been unreachable for {} s (delivery.database_down_secs): exiting so the service manager starts the gateway again",
                        down.as_secs()
                    ));
                }
            }
            if last_expire.elapsed() > Duration::from_secs(3600) {
                last_expire = Instant::now();
                let me = self.clone();
                let _ = tokio::task::spawn_blocking(move || me.spool.expire(now())).await;
            }
            self.metrics.set_database_down(self.spool.down_for());
            // The queue's depth and oldest entry, for the metrics: once a second at
            // most (a database spool counts its queued rows for each).
            if last_queue_read.is_none_or(|t| t.elapsed() >= QUEUE_READ_EVERY) {
                last_queue_read = Some(Instant::now());
                let me = self.clone();
                if let Ok((depth, oldest)) = tokio::task::spawn_blocking(move || {
                    (me.spool.depth().ok(), me.spool.oldest().ok())
                })
                .await
                {
                    self.metrics.set_queue(depth, oldest);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(poll) => {}
                _ = self.wake.notified(), if free > 0 => {}
                Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
                _ = shutdown.changed() => {}
            }
        }
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        while inflight.join_next().await.is_some() {}
        heart.abort();
        Ok(())
    }

    async fn deliver(&self, mut entry: Entry) {
        let Some(hop) = self.hops.get(&entry.route) else {
            tracing::error!(id = %entry.id, route = %entry.route, "no listener of this name: the message waits");
            entry.next_attempt = now() + self.config.delivery.retry_max_secs as i64;
            entry.last_error = format!("no route {}", entry.route);
            self.put_back(entry).await;
            return;
        };
        let timeout = Duration::from_secs(self.config.delivery.timeout_secs);
        let results = if hop.config.protocol == Protocol::Local {
            self.hand_over(&entry).await
        } else {
            attempt(&entry, hop, &self.config.hostname, timeout).await
        };
        // Each line says what the message claimed to be, as its message line did.
        let seen = Seen::of(&entry.data, self.config.limits.max_message_bytes);
        let (id, listener) = (entry.id.as_str(), entry.route.as_str());
        let (from, message_id) = (seen.from.as_str(), seen.message_id.as_str());
        let attempts = entry.attempts + 1;
        let mut waiting = Vec::new();
        let mut failures = Vec::new();
        let mut last_error = String::new();
        for (rcpt, result) in entry.recipients.iter().zip(results) {
            let to = logline::recipients(std::slice::from_ref(rcpt));
            let to = to.as_str();
            match result {
                RcptResult::Delivered(reply) => {
                    let latency = now_ms().saturating_sub(entry.accepted_ms()).max(0);
                    self.metrics
                        .delivered(Duration::from_millis(latency.unsigned_abs()));
                    tracing::info!(
                        id, listener, from, message_id, to,
                        hop = %hop.config.address,
                        status = "delivered",
                        dsn = status_of(&reply, "2.0.0").as_str(),
                        reply = logline::reply(&reply).as_str(),
                        attempts,
                        delay_ms = latency,
                        "delivery"
                    );
                }
                RcptResult::Permanent(why) => {
                    let status = status_of(&why, "5.0.0");
                    tracing::warn!(
                        id, listener, from, message_id, to,
                        hop = %hop.config.address,
                        status = "bounced",
                        dsn = status.as_str(),
                        reply = logline::reply(&why).as_str(),
                        attempts,
                        "delivery"
                    );
                    failures.push(dsn::Failure {
                        recipient: rcpt.clone(),
                        status,
                        diagnostic: why,
                    });
                }
                RcptResult::Temporary(why) => {
                    tracing::info!(
                        id, listener, from, message_id, to,
                        hop = %hop.config.address,
                        status = "deferred",
                        dsn = status_of(&why, "4.0.0").as_str(),
                        reply = logline::reply(&why).as_str(),
                        attempts,
                        "delivery"
                    );
                    last_error = why.clone();
                    waiting.push((rcpt.clone(), why));
                }
            }
        }
        let expired = now() - entry.created > self.config.delivery.max_age_secs as i64;
        if expired {
            for (rcpt, why) in waiting.drain(..) {
                let diagnostic = format!("gave up after {attempts} attempts: {why}");
                tracing::warn!(
                    id,
                    listener,
                    from,
                    message_id,
                    to = logline::recipients(std::slice::from_ref(&rcpt)).as_str(),
                    status = "bounced",
                    dsn = "4.4.7",
                    reply = logline::reply(&diagnostic).as_str(),
                    attempts,
                    "delivery"
                );
                failures.push(dsn::Failure {
                    recipient: rcpt,
                    status: "4.4.7".into(),
                    diagnostic,
                });
            }
        }
        // A deferral given up on counts as a bounce only.
        for (_, why) in &waiting {
            self.metrics.deferred(metrics::reason_class(why));
        }
        if !failures.is_empty() {
            self.bounce(&entry, &failures).await;
        }
        if waiting.is_empty() {
            self.mark_done(&entry.id).await;
            return;
        }
        entry.attempts += 1;
        entry.recipients = waiting.into_iter().map(|(r, _)| r).collect();
        let backoff = self
            .config
            .delivery
            .retry_initial_secs
            .saturating_mul(1u64 << entry.attempts.saturating_sub(1).min(20))
            .min(self.config.delivery.retry_max_secs);
        entry.next_attempt = now() + backoff as i64;
        entry.last_error = last_error;
        self.put_back(entry).await;
    }

    /// Marks a delivered entry done. A delivered entry left unmarked is delivered
    /// again by whoever takes it once its lease runs out, so a done the spool refuses
    /// (its database away for a moment) is tried again, a quarter second later, then
    /// doubling to 5 s, for as long as half the lease: the database back within that,
    /// the copy is saved. Past it, another instance may be taking the entry, and the
    /// receiver's replay state is what drops the second copy. Never longer than
    /// `database_down_secs` (after which the gateway exits), nor once it is stopping
    /// (systemd waits 60 s for it to stop).
    /// Hands `entry` to the attachment in this process (a hop of protocol `local`):
    /// one result for all its recipients.
    async fn hand_over(&self, entry: &Entry) -> Vec<RcptResult> {
        let n = entry.recipients.len();
        let result = match self.local.clone() {
            None => RcptResult::Temporary(
                "4.3.0 nothing in this process takes local deliveries (mailseal bridge does)"
                    .into(),
            ),
            Some(local) => {
                let e = entry.clone();
                match tokio::task::spawn_blocking(move || local.deliver(&e)).await {
                    Ok(Ok(())) => RcptResult::Delivered("250 2.0.0 handed to the bridge".into()),
                    Ok(Err(super::LocalRefusal::Temporary(why))) => {
                        RcptResult::Temporary(format!("451 4.3.0 {why}"))
                    }
                    Ok(Err(super::LocalRefusal::Permanent(why))) => {
                        RcptResult::Permanent(format!("550 5.7.1 {why}"))
                    }
                    Err(e) => RcptResult::Temporary(format!("451 4.3.0 {e}")),
                }
            }
        };
        vec![result; n]
    }

    async fn mark_done(&self, id: &str) {
        let d = &self.config.delivery;
        let mut patience = Duration::from_secs(d.lease_secs / 2);
        if d.database_down_secs > 0 {
            patience = patience.min(Duration::from_secs(d.database_down_secs));
        }
        let started = Instant::now();
        let mut wait = Duration::from_millis(250);
        let mut tries = 0u32;
        loop {
            tries += 1;
            let spool = self.spool.clone();
            let owned = id.to_string();
            match tokio::task::spawn_blocking(move || spool.done(&owned, now())).await {
                Ok(Ok(())) => {
                    if tries > 1 {
                        tracing::info!(
                            id,
                            tries,
                            "spool: delivered entry marked done once the spool answered again"
                        );
                    }
                    return;
                }
                Ok(Err(e))
                    if started.elapsed() + wait < patience
                        && !self.stopping.load(std::sync::atomic::Ordering::SeqCst) =>
                {
                    if tries == 1 {
                        tracing::warn!(id, error = %e, "spool: delivered but not yet marked done; trying again");
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                Ok(Err(e)) => {
                    tracing::error!(id, tries, error = %e, "spool: delivered but not marked done (it will be delivered again)");
                    return;
                }
                Err(e) => {
                    tracing::error!(id, error = %e, "spool: done failed");
                    return;
                }
            }
        }
    }

    async fn put_back(&self, entry: Entry) {
        let spool = self.spool.clone();
        let id = entry.id.clone();
        if let Ok(Err(e)) | Err(e) = tokio::task::spawn_blocking(move || spool.retry(&entry))
            .await
            .map_err(|e| super::spool::SpoolError::Database(e.to_string()))
        {
            tracing::error!(id = %id, error = %e, "spool: cannot reschedule");
        }
    }

    /// A DSN to the sender (never for a bounce), and the message into quarantine.
    async fn bounce(&self, entry: &Entry, failures: &[dsn::Failure]) {
        for f in failures {
            self.metrics.bounced(
                metrics::status_class(&f.status)
                    .unwrap_or_else(|| metrics::reason_class(&f.diagnostic)),
            );
        }
        self.quarantine(&entry.id, &entry.data);
        if entry.mail_from.is_empty() {
            return;
        }
        // An inbound entry is the opened message: its header fields were protected
        // (sealed), and MAIL FROM, whom the notice goes to, is anyone's to write. The
        // notice carries none of them.
        let inbound = self.config.listener(&entry.route).map(|l| l.mode)
            == Some(super::config::Mode::Inbound);
        let quoted: &[u8] = if inbound { b"\r\n" } else { &entry.data };
        let report = dsn::compose(
            &self.config.hostname,
            &entry.mail_from,
            quoted,
            entry.created,
            failures,
        );
        let bounce = Entry::new(
            self.config.return_route(&entry.route),
            "",
            std::slice::from_ref(&entry.mail_from),
            report,
            now(),
        )
        .accepted_at(now_ms());
        let dsn_id = bounce.id.clone();
        let spool = self.spool.clone();
        match tokio::task::spawn_blocking(move || spool.put(&bounce)).await {
            Ok(Ok(_)) => {
                tracing::info!(id = %entry.id, dsn_id = %dsn_id, "delivery status notification queued")
            }
            _ => tracing::error!(id = %entry.id, "spool: the DSN was not queued"),
        }
    }

    /// A copy of a message the gateway accepted and could not deliver.
    pub(crate) fn quarantine(&self, id: &str, data: &[u8]) {
        let dir: PathBuf = self.config.quarantine.clone();
        let write = std::fs::create_dir_all(&dir).and_then(|()| {
            let mut options = std::fs::File::options();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            use std::io::Write;
            let mut f = options.open(dir.join(format!("{id}.eml")))?;
            f.write_all(data)?;
            f.sync_all()
        });
        if let Err(e) = write {
            tracing::error!(id = %id, error = %e, "quarantine: cannot write");
        }
    }
}

/// The enhanced status in a reply text (`550 5.1.1 ...`), or `default`.
fn status_of(reply: &str, default: &str) -> String {
    reply
        .split_whitespace()
        .nth(1)
        .filter(|s| s.split('.').count() == 3 && s.split('.').all(|p| p.parse::<u16>().is_ok()))
        .unwrap_or(default)
        .to_string()
}
