//! The SMTP listeners: accept, cap, TLS, and drive a [`Session`] with timeouts. The
//! session decides; this only moves bytes and waits.
//!
//! Timeouts are deadlines, not idle timers: a client has `command_timeout_secs` to
//! complete each command and `data_timeout_secs` for a whole message, however it
//! trickles the bytes (one byte a minute does not keep a session alive). A TLS
//! handshake has `tls_timeout_secs`. Connections are capped in all and per IP address;
//! one over a cap is told 421 and closed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tokio_rustls::TlsAcceptor;

use super::config::{Config, Listener, ListenerTls, Submission, TlsFiles};
use super::metrics::Metrics;
use super::process::{Decision, Job, Workers};
use super::session::{Action, Session, SessionLimits};

/// The server TLS configuration, replaced on SIGHUP.
pub(crate) type TlsSlot = Arc<RwLock<Option<Arc<rustls::ServerConfig>>>>;

/// Loads the certificate chain and key of `files` into a rustls server configuration
/// (on AWS-LC).
pub fn load_tls(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.certificate)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", files.certificate.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", files.certificate.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("{}: {e}", files.key.display()))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| format!("{}: {e}", files.key.display()))?;
    Ok(Arc::new(config))
}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) config: Arc<Config>,
    pub(crate) workers: Workers,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) tls: TlsSlot,
    pub(crate) connections: Arc<Semaphore>,
    pub(crate) per_ip: Mutex<HashMap<IpAddr, usize>>,
    /// Checks the passwords of `submission = "auth"`.
    pub(crate) verifier: Verifier,
}

/// The threads that check passwords: a few, of their own. Each check is an Argon2id
/// run of 19 MiB that anyone may ask for before authenticating; run on tokio's blocking
/// pool, every one of its threads kept its own 19 MiB arena, and forty connections of
/// wrong passwords grew the gateway by 1.2 GB. Here [`VERIFIER_THREADS`] threads take
/// [`VERIFIER_QUEUE`] waiting checks; past that, the client is told to try later (454).
pub(crate) struct Verifier {
    jobs: std::sync::mpsc::SyncSender<(super::session::Credentials, oneshot::Sender<bool>)>,
}

/// Threads that check passwords.
pub(crate) const VERIFIER_THREADS: usize = 4;
/// Checks that may wait for one of them.
const VERIFIER_QUEUE: usize = 64;

impl Verifier {
    /// Starts the threads, checking against `submitters`.
    pub(crate) fn start(submitters: Arc<super::submission::Submitters>) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(
            super::session::Credentials,
            oneshot::Sender<bool>,
        )>(VERIFIER_QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..VERIFIER_THREADS {
            let rx = rx.clone();
            let submitters = submitters.clone();
            std::thread::Builder::new()
                .name(format!("mailseal-auth-{i}"))
                .spawn(move || {
                    let mut memory = super::submission::Verifying::default();
                    loop {
                        let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok((c, answer)) = job else { return };
                        let _ =
                            answer.send(submitters.verify_in(&c.login, &c.password, &mut memory));
                    }
                })?;
        }
        Ok(Verifier { jobs: tx })
    }

    /// Whether the password is the login's; `None` when every check is taken.
    async fn verify(&self, credentials: super::session::Credentials) -> Option<bool> {
        let (tx, rx) = oneshot::channel();
        self.jobs.try_send((credentials, tx)).ok()?;
        rx.await.ok()
    }
}

/// How long a wrong password waits for its answer.
const AUTH_FAILURE_DELAY: Duration = Duration::from_secs(1);

/// Holds a connection's place under the per-IP cap.
struct IpSlot<'a> {
    shared: &'a Shared,
    ip: IpAddr,
}

impl Drop for IpSlot<'_> {
    fn drop(&mut self) {
        let mut m = self.shared.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

impl Shared {
    fn take_ip(&self, ip: IpAddr) -> Option<IpSlot<'_>> {
        let mut m = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(ip).or_default();
        if *n >= self.config.limits.max_connections_per_ip {
            return None;
        }
        *n += 1;
        Some(IpSlot { shared: self, ip })
    }
}

/// Accepts connections on `listener` until `shutdown` turns true; the sessions in
/// progress get `grace` to finish.
pub(crate) async fn listen(
    socket: TcpListener,
    listener: Listener,
    shared: Arc<Shared>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let listener = Arc::new(listener);
    let mut sessions = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = socket.accept() => a,
            _ = shutdown.changed() => break,
            Some(_) = sessions.join_next(), if !sessions.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let listener = listener.clone();
        sessions.spawn(async move { connection(stream, peer, &listener, &shared).await });
    }
    // Sessions finish what they are doing; a message not yet answered is not accepted
    // (its client sends it again), one answered is in the spool.
    let grace = tokio::time::sleep(Duration::from_secs(10));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            r = sessions.join_next() => if r.is_none() { break },
            _ = &mut grace => { sessions.abort_all(); break }
        }
    }
}

async fn refuse(mut stream: TcpStream, text: &str) {
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        stream.write_all(format!("421 4.7.0 {text}\r\n").as_bytes()),
    )
    .await;
}

async fn connection(stream: TcpStream, peer: SocketAddr, listener: &Listener, shared: &Shared) {
    if !listener.serves(peer.ip()) {
        shared.metrics.connection(false);
        tracing::warn!(peer = %peer, listener = %listener.name, "client not in the listener's clients");
        let mut stream = stream;
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            stream.write_all(b"554 5.7.1 this listener does not serve your address\r\n"),
        )
        .await;
        return;
    }
    let Ok(_permit) = shared.connections.clone().try_acquire_owned() else {
        shared.metrics.connection(false);
        return refuse(stream, "too many connections, try later").await;
    };
    let Some(_slot) = shared.take_ip(peer.ip()) else {
        shared.metrics.connection(false);
        return refuse(stream, "too many connections from your address").await;
    };
    shared.metrics.connection(true);
    let _ = stream.set_nodelay(true);
    let tls = shared.tls.read().unwrap_or_else(|p| p.into_inner()).clone();
    let limits = &shared.config.limits;
    let session_limits = SessionLimits {
        max_message_bytes: limits.max_message_bytes,
        max_recipients: limits.max_recipients,
        max_errors: limits.max_errors,
    };
    let offered = tls.is_some() && listener.tls == ListenerTls::Starttls;
    let handshake = Duration::from_secs(limits.tls_timeout_secs);
    if listener.tls == ListenerTls::Implicit {
        let Some(tls) = tls else { return };
        let Ok(Ok(stream)) =
            tokio::time::timeout(handshake, TlsAcceptor::from(tls).accept(stream)).await
        else {
            return;
        };
        let mut session = Session::new(&shared.config.hostname, session_limits, false, true, false);
        configure(&mut session, listener, peer);
        let _ = drive(stream, &mut session, listener, shared, peer, true).await;
        return;
    }
    let mut session = Session::new(
        &shared.config.hostname,
        session_limits,
        offered,
        false,
        listener.require_tls,
    );
    configure(&mut session, listener, peer);
    let Ok(Some(stream)) = drive(stream, &mut session, listener, shared, peer, true).await else {
        return;
    };
    // STARTTLS: the handshake, then the same session over TLS.
    let Some(tls) = tls else { return };
    let Ok(Ok(stream)) =
        tokio::time::timeout(handshake, TlsAcceptor::from(tls).accept(stream)).await
    else {
        tracing::info!(peer = %peer, "TLS handshake failed or stalled");
        return;
    };
    session.tls_started();
    let _ = drive(stream, &mut session, listener, shared, peer, false).await;
}

/// What a listener asks of its sessions: SMTP AUTH (taken in clear only by a listener
/// without TLS, from loopback), the domains RCPT may name, XFORWARD from its clients.
fn configure(session: &mut Session, listener: &Listener, peer: SocketAddr) {
    session.set_peer(peer.ip());
    if listener.xforward {
        session.allow_xforward();
    }
    if listener.submission == Some(Submission::Auth) {
        session.require_auth();
        // In clear only where the listener has no TLS to offer, and only from loopback
        // (the configuration allows no other client then).
        if listener.tls == ListenerTls::None && peer.ip().is_loopback() {
            session.allow_auth_in_clear();
        }
    }
    if let Some(domains) = &listener.local_domains {
        session.accept_domains(domains.clone());
    }
}

/// Runs `session` over `stream` until it closes (`Ok(None)`) or asks for STARTTLS
/// (`Ok(Some(stream))`, the 220 written).
async fn drive<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    session: &mut Session,
    listener: &Listener,
    shared: &Shared,
    peer: SocketAddr,
    greet: bool,
) -> std::io::Result<Option<S>> {
    let limits = &shared.config.limits;
    let write_timeout = Duration::from_secs(limits.command_timeout_secs);
    let mut out = Vec::new();
    if greet {
        out.extend_from_slice(&session.greeting());
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut deadline = Instant::now() + Duration::from_secs(limits.command_timeout_secs);
    loop {
        while let Some(action) = session.step() {
            note_refusals(session, listener, shared, peer);
            match action {
                Action::Send(b) => out.extend_from_slice(&b),
                Action::Close(b) => {
                    out.extend_from_slice(&b);
                    flush(&mut stream, &mut out, write_timeout).await?;
                    return Ok(None);
                }
                Action::StartTls(b) => {
                    out.extend_from_slice(&b);
                    flush(&mut stream, &mut out, write_timeout).await?;
                    return Ok(Some(stream));
                }
                Action::Authenticate(credentials) => {
                    flush(&mut stream, &mut out, write_timeout).await?;
                    let login = credentials.login.clone();
                    let verdict = shared.verifier.verify(credentials).await;
                    let Some(ok) = verdict else {
                        tracing::warn!(peer = %peer, listener = %listener.name, "password checks all busy");
                        let action = session.auth_unavailable();
                        note_refusals(session, listener, shared, peer);
                        match action {
                            Action::Send(b) => out.extend_from_slice(&b),
                            Action::Close(b) => {
                                out.extend_from_slice(&b);
                                flush(&mut stream, &mut out, write_timeout).await?;
                                return Ok(None);
                            }
                            _ => {}
                        }
                        continue;
                    };
                    if !ok {
                        // A wrong password is answered a second later: guessing goes
                        // at the pace of connections, which are capped per address.
                        tokio::time::sleep(AUTH_FAILURE_DELAY).await;
                    }
                    if ok {
                        tracing::info!(peer = %peer, listener = %listener.name, login = %crate::error::quoted(&login), "authenticated");
                    } else {
                        tracing::warn!(peer = %peer, listener = %listener.name, login = %crate::error::quoted(&login), "authentication failed");
                    }
                    let action = session.authenticated(ok.then_some(login));
                    note_refusals(session, listener, shared, peer);
                    match action {
                        Action::Send(b) => out.extend_from_slice(&b),
                        Action::Close(b) => {
                            out.extend_from_slice(&b);
                            flush(&mut stream, &mut out, write_timeout).await?;
                            return Ok(None);
                        }
                        _ => {}
                    }
                }
                Action::Message(t) => {
                    // Replies so far go out before the (possibly long) processing.
                    flush(&mut stream, &mut out, write_timeout).await?;
                    let decision = process(t, listener, shared, peer).await;
                    if let Action::Send(b) = session.finish(decision.reply()) {
                        out.extend_from_slice(&b);
                    }
                }
            }
            let window = if session.in_data() {
                limits.data_timeout_secs
            } else {
                limits.command_timeout_secs
            };
            deadline = Instant::now() + Duration::from_secs(window);
        }
        flush(&mut stream, &mut out, write_timeout).await?;
        let read = tokio::time::timeout_at(deadline.into(), stream.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(None),
            Ok(Ok(n)) => session.push(&buf[..n]),
            Err(_) => {
                out.extend_from_slice(b"421 4.4.2 timeout, closing\r\n");
                let _ = flush(&mut stream, &mut out, Duration::from_secs(5)).await;
                tracing::info!(peer = %peer, "session timed out");
                return Ok(None);
            }
        }
    }
}

/// One line and one count for each refusal the session made itself (see
/// [`super::session::Refusal`]): with the MAIL FROM and recipients it concerned, so a
/// grep for an address finds a RCPT refused for relaying as it finds a refused
/// message. The client's text is escaped and bounded ([`super::logline`]).
fn note_refusals(session: &mut Session, listener: &Listener, shared: &Shared, peer: SocketAddr) {
    let direction = listener.mode.as_str();
    for r in session.take_refusals() {
        shared.metrics.refused(direction, r.status);
        let from = r
            .mail_from
            .as_deref()
            .map(|f| if f.is_empty() { "<>" } else { f });
        tracing::info!(
            id = super::logline::NONE,
            listener = listener.name.as_str(),
            direction,
            mail_from = super::logline::shown(from).as_str(),
            recipients = if r.recipients.is_empty() {
                super::logline::NONE.to_string()
            } else {
                super::logline::recipients(&r.recipients)
            }
            .as_str(),
            code = r.code,
            dsn = r.status,
            peer = %peer,
            closed = r.closed,
            reason = super::logline::reply(&r.text).as_str(),
            "refused in the session"
        );
    }
}

async fn flush<S: AsyncWrite + Unpin>(
    stream: &mut S,
    out: &mut Vec<u8>,
    timeout: Duration,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let w = async {
        stream.write_all(out).await?;
        stream.flush().await
    };
    let r = tokio::time::timeout(timeout, w)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()));
    out.clear();
    r
}

async fn process(
    transaction: super::session::Transaction,
    listener: &Listener,
    shared: &Shared,
    peer: SocketAddr,
) -> Decision {
    let started = Instant::now();
    let (done, decided) = oneshot::channel();
    let size = transaction.data.len();
    // The client XFORWARD named on a trusted listener, else the peer (as the trace).
    let client = transaction.client.describe();
    let upstream = transaction.client.upstream_id();
    let nrcpt = transaction.recipients.len();
    let recipients = super::logline::recipients(&transaction.recipients);
    shared
        .workers
        .submit(Job {
            listener: listener.name.clone(),
            mode: listener.mode,
            transaction,
            done,
        })
        .await;
    let decision = decided
        .await
        .unwrap_or_else(|_| Decision::local_error("the worker stopped"));
    let direction = listener.mode.as_str();
    shared.metrics.message(direction, decision.verdict);
    if decision.code >= 400 {
        shared.metrics.refused(direction, decision.status);
    }
    let none = super::logline::NONE;
    let logged = decision.logged.as_deref();
    // One line per message, whatever became of it: the queue id (or, when nothing
    // was queued, the name it was received under), and what it claimed to be. Values
    // a client wrote are strings (quoted in text lines), escaped by `logline`.
    tracing::info!(
        id = decision
            .id
            .as_deref()
            .or(logged.and_then(|l| l.name.as_deref()))
            .unwrap_or(none),
        listener = listener.name.as_str(),
        direction,
        from = logged.map_or(none, |l| l.from.as_str()),
        message_id = logged.map_or(none, |l| l.message_id.as_str()),
        recipients = recipients.as_str(),
        nrcpt,
        profile = decision.profile.map_or(none, |p| p.token()),
        verdict = decision.verdict,
        code = decision.code,
        dsn = decision.status,
        size,
        peer = %peer,
        client = client.as_str(),
        upstream_id = upstream.as_deref().unwrap_or("-"),
        delay_ms = started.elapsed().as_millis() as u64,
        reason = if decision.code >= 400 { decision.text.as_str() } else { "" },
        "message"
    );
    decision
}
