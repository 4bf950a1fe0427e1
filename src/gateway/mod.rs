//! `mailseal gateway`: an SMTP gateway at an organisation's edge that seals what
//! internal agents send and opens what arrives, so that agents behind it never handle
//! keys. It adds no protocol logic of its own: outbound mail goes through the
//! library's [`crate::Sender`], inbound through its [`crate::Receiver`], and the
//! gateway maps their outcomes to SMTP replies, a durable spool and deliveries.
//!
//! ```text
//!  agents ─SMTP─▶ [outbound listener] ─seal─▶ spool ─SMTP─▶ next hop (the MTA)
//!  world  ─SMTP─▶ [inbound listener]  ─open─▶ spool ─SMTP/LMTP─▶ internal hop
//! ```
//!
//! - `session`: the SMTP server session as a state machine (no I/O; fuzzed);
//!   `xforward`: what a trusted MTA in front says of its client.
//! - `submission`: who may have the outbound listener sign as which agent.
//! - [`server`]: listeners, TLS (rustls; reloaded on SIGHUP), caps and timeouts.
//! - `process`: the worker threads that run the library's pipeline.
//! - `trace`: the `Received:` field put on every message queued.
//! - `spool`: the durable queue (a directory, or PostgreSQL for several instances).
//! - `delivery`: the SMTP/LMTP client side, retries and bounces (`dsn`).
//! - `logline`: what a log line says of a message (From, Message-ID, replies: escaped).
//! - `metrics`: Prometheus counters.
//!
//! The modules above are the gateway's internals (hidden from these pages, not a
//! stable API); what a program builds on is [`Config`], [`server`] and the
//! [`Pipeline`] the workers run.
//!
//! A 250 is sent only once the message is in the spool (synced, or committed); a
//! message is taken out only once the next hop accepted it or it bounced. Between
//! them, any crash leaves it queued; the spool's content-derived names make a client's
//! retry of a message it never heard accepted a no-op, and the receiving side's
//! replay state drops a copy delivered twice.

pub mod config;
mod delivery;
#[doc(hidden)]
pub mod dsn;
mod logline;
#[doc(hidden)]
pub mod metrics;
mod notify;
#[doc(hidden)]
pub mod process;
pub mod server;
#[doc(hidden)]
pub mod session;
#[doc(hidden)]
pub mod spool;
#[doc(hidden)]
pub mod submission;
#[doc(hidden)]
pub mod trace;
#[doc(hidden)]
pub mod xforward;

use std::sync::{Arc, Mutex, RwLock};

pub use config::{Config, ConfigError};
pub use process::{Decision, Logged, Pipeline, PipelineFactory, GROUP_HEADER, VERDICT_HEADER};

/// Why the gateway did not start (or stopped).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The TLS certificate or key.
    #[error("TLS: {0}")]
    Tls(String),
    /// The spool.
    #[error(transparent)]
    Spool(#[from] spool::SpoolError),
    /// A listener's address.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: String,
        /// The error.
        source: std::io::Error,
    },
    /// A next hop's TLS roots.
    #[error("next hop of {listener}: {reason}")]
    Hop {
        /// The listener.
        listener: String,
        /// Why.
        reason: String,
    },
    /// The stores the pipeline needs.
    #[error("the key store or state: {0}")]
    Pipeline(String),
    /// The runtime.
    #[error("runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// What the gateway needs went away for too long (the spool's database).
    #[error("{0}")]
    Unavailable(String),
}

/// Whether a spool directory can be written: a file made and removed in it, or, when it
/// does not exist yet (the gateway makes it), a directory made and removed in the
/// nearest existing one above it.
fn writable(dir: &std::path::Path) -> Result<(), spool::SpoolError> {
    let io = |path: &std::path::Path, source| spool::SpoolError::Io {
        path: path.display().to_string(),
        source,
    };
    if dir.is_dir() {
        // A new file only (O_EXCL): never one a link there points to.
        let probe = dir.join(format!(".check-config-{}", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map_err(|e| io(dir, e))?;
        return std::fs::remove_file(&probe).map_err(|e| io(dir, e));
    }
    let mut above = dir.parent();
    while let Some(p) = above.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        above = p.parent();
    }
    let base = above
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let probe = base.join(format!(".check-config-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| io(base, e))?;
    std::fs::remove_dir(&probe).map_err(|e| io(base, e))
}

/// What [`Gateway::check`] found besides errors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// The addresses the key store holds private keys for.
    pub agents: Vec<String>,
    /// What deserves a look but stops nothing.
    pub notes: Vec<String>,
}

/// What runs inside the gateway beside its listeners (the A2A bridge): it takes the
/// opened mail of the listeners whose next hop is `protocol = "local"`, and it queues
/// mail of its own in the gateway's spool.
pub trait Attachment: Send + Sync + 'static {
    /// Takes one opened message (a spool entry of a `local` hop, with the gateway's
    /// `Mailseal-Verdict` on top). Blocking: it runs on a blocking thread. `Ok` only
    /// once what it took is durable: the entry is then done.
    fn deliver(&self, entry: &spool::Entry) -> Result<(), LocalRefusal>;
    /// Starts its own tasks on the gateway's runtime, once the spool is open; they end
    /// when `shutdown` turns true.
    fn start(
        self: Arc<Self>,
        spool: Arc<dyn spool::Spool>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), String>;
}

/// Why an [`Attachment`] did not take a message.
#[derive(Debug)]
pub enum LocalRefusal {
    /// Try again later (its state is away).
    Temporary(String),
    /// Never: the message bounces.
    Permanent(String),
}

/// A configured gateway.
pub struct Gateway {
    config: Arc<Config>,
    factory: Arc<PipelineFactory>,
    attachment: Option<Arc<dyn Attachment>>,
}

impl Gateway {
    /// A gateway with `config`, whose workers build their pipelines with `factory`.
    pub fn new(config: Config, factory: Arc<PipelineFactory>) -> Gateway {
        Gateway {
            config: Arc::new(config),
            factory,
            attachment: None,
        }
    }

    /// The same gateway with `attachment` running inside it (see [`Attachment`]).
    pub fn with_attachment(mut self, attachment: Arc<dyn Attachment>) -> Gateway {
        self.attachment = Some(attachment);
        self
    }

    /// Checks what the gateway needs without starting it, as startup would: the TLS
    /// files, each listener's address (bound and let go: a port another process holds
    /// or the service may not bind is an error), the next hops' roots, the spool
    /// (written to), the key store (which must exist: nothing is created) and its
    /// agents. A port already in use is a note, not an error (it may be this gateway,
    /// running). The store must hold some private key (else the gateway could open and
    /// sign nothing).
    pub fn check(&self) -> Result<CheckReport, GatewayError> {
        let mut report = CheckReport::default();
        if let Some(files) = &self.config.tls {
            server::load_tls(files).map_err(GatewayError::Tls)?;
        }
        for l in &self.config.listeners {
            match std::net::TcpListener::bind(l.address) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => report.notes.push(format!(
                    "listener {}: {} is in use (by this gateway, running?)",
                    l.name, l.address
                )),
                Err(source) => {
                    return Err(GatewayError::Bind {
                        address: format!("{} (listener {})", l.address, l.name),
                        source,
                    })
                }
            }
            delivery::Hop::new(&l.next_hop).map_err(|reason| GatewayError::Hop {
                listener: l.name.clone(),
                reason,
            })?;
        }
        let spool = &self.config.spool;
        if spool.starts_with("postgres://") || spool.starts_with("postgresql://") {
            spool::PostgresSpool::connect(spool)?;
        } else {
            // Not opened (a running gateway holds its lock): written to.
            writable(std::path::Path::new(spool))?;
        }
        // A store directory must exist (nothing is created here); other stores
        // (`sqlite:`, `postgres://`, `pkcs11:`) are opened below, and their locations,
        // which may hold a password or PIN, are never repeated.
        let store = &self.config.store;
        let scheme = ["sqlite:", "postgres://", "postgresql://", "pkcs11:"]
            .iter()
            .any(|s| store.starts_with(s));
        if !scheme && !std::path::Path::new(store).is_dir() {
            return Err(GatewayError::Pipeline(format!(
                "the key store {store} does not exist: make it with `mailseal key import` or `key generate --store {store}`"
            )));
        }
        let pipeline = (self.factory)().map_err(GatewayError::Pipeline)?;
        report.agents = pipeline.receiver.own_addresses();
        if report.agents.is_empty() {
            return Err(GatewayError::Pipeline(
                "the key store holds no private key: the gateway could open and sign nothing"
                    .into(),
            ));
        }
        Ok(report)
    }

    /// Runs until SIGTERM or SIGINT (then stops accepting, lets sessions and
    /// deliveries in flight finish, and returns); SIGHUP reloads the TLS files.
    pub fn run(self) -> Result<(), GatewayError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("mailseal-io")
            .build()?;
        runtime.block_on(async move {
            let (stop, stopped) = tokio::sync::watch::channel(false);
            // The handlers are in place before anything is served (and systemd told
            // READY=1): a SIGTERM right after is a shutdown, not the default death.
            use tokio::signal::unix::{signal, SignalKind};
            let (mut term, mut int) = (
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            );
            let signals = tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                    _ = int.recv() => tracing::info!("SIGINT: shutting down"),
                }
                let _ = stop.send(true);
            });
            let r = self.serve(stopped).await;
            signals.abort();
            r
        })
    }

    /// Serves until `shutdown` turns true.
    pub async fn serve(
        self,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), GatewayError> {
        let config = self.config.clone();
        let location = config.spool.clone();
        let instance = spool::instance_id(
            &config
                .listeners
                .iter()
                .map(|l| l.address)
                .collect::<Vec<_>>(),
        );
        let dead = config.delivery.instance_dead_secs as i64;
        let spool = tokio::task::spawn_blocking(move || {
            spool::open_as(&location, &instance).map(|mut s| {
                s.claim_from_dead(dead);
                spool::Waking::new(s)
            })
        })
        .await
        .map_err(|e| GatewayError::Runtime(std::io::Error::other(e)))??;
        let wake = spool.wake();
        let spool: Arc<dyn spool::Spool> = Arc::new(spool);
        let tls: server::TlsSlot = Arc::new(RwLock::new(match &config.tls {
            Some(files) => Some(server::load_tls(files).map_err(GatewayError::Tls)?),
            None => None,
        }));
        let mut hops = std::collections::HashMap::new();
        for l in &config.listeners {
            if l.next_hop.protocol == config::Protocol::Local && self.attachment.is_none() {
                return Err(GatewayError::Hop {
                    listener: l.name.clone(),
                    reason:
                        "protocol \"local\" hands mail to the A2A bridge: run `mailseal bridge`"
                            .into(),
                });
            }
            let hop = delivery::Hop::new(&l.next_hop).map_err(|reason| GatewayError::Hop {
                listener: l.name.clone(),
                reason,
            })?;
            hops.insert(l.name.clone(), hop);
        }
        let metrics = Arc::new(metrics::Metrics::default());
        let workers = config.workers.unwrap_or_else(|| {
            config::default_workers(
                &config.spool,
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            )
        });
        // Checked when the configuration was read.
        let submitters =
            Arc::new(submission::Submitters::new(&config.submitters).unwrap_or_default());
        let shared = Arc::new(server::Shared {
            config: config.clone(),
            workers: process::Workers::start(
                workers,
                self.factory.clone(),
                spool.clone(),
                config.clone(),
                submitters.clone(),
            )?,
            metrics: metrics.clone(),
            tls: tls.clone(),
            connections: Arc::new(tokio::sync::Semaphore::new(config.limits.max_connections)),
            per_ip: Mutex::new(Default::default()),
            verifier: server::Verifier::start(submitters)?,
        });
        // Stops the listeners and the deliverer: on shutdown, or when delivery gives up.
        let (stop, stopping) = tokio::sync::watch::channel(false);
        {
            let mut shutdown = shutdown.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                if shutdown.wait_for(|s| *s).await.is_ok() {
                    let _ = stop.send(true);
                }
            });
        }
        let mut tasks = tokio::task::JoinSet::new();
        for l in &config.listeners {
            let socket = tokio::net::TcpListener::bind(l.address)
                .await
                .map_err(|source| GatewayError::Bind {
                    address: l.address.to_string(),
                    source,
                })?;
            tracing::info!(listener = %l.name, address = %l.address, mode = ?l.mode, "listening");
            tasks.spawn(server::listen(
                socket,
                l.clone(),
                shared.clone(),
                stopping.clone(),
            ));
        }
        let metrics_task = match config.metrics {
            Some(addr) => {
                let socket = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| GatewayError::Bind {
                        address: addr.to_string(),
                        source,
                    })?;
                Some(tokio::spawn(metrics::serve(socket, metrics.clone())))
            }
            None => None,
        };
        let reload = {
            let files = config.tls.clone();
            let tls = tls.clone();
            let shared = shared.clone();
            tokio::spawn(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let Ok(mut hup) = signal(SignalKind::hangup()) else {
                    return;
                };
                while hup.recv().await.is_some() {
                    shared.workers.reload();
                    tracing::info!("SIGHUP: stores, cards and peer policies are read again");
                    let Some(files) = &files else { continue };
                    match server::load_tls(files) {
                        Ok(c) => {
                            *tls.write().unwrap_or_else(|p| p.into_inner()) = Some(c);
                            tracing::info!("SIGHUP: TLS certificate and key reloaded");
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "SIGHUP: TLS not reloaded, the old certificate stays")
                        }
                    }
                }
            })
        };
        if let Some(a) = &self.attachment {
            a.clone()
                .start(spool.clone(), stopping.clone())
                .map_err(GatewayError::Pipeline)?;
        }
        let deliverer = Arc::new(delivery::Deliverer {
            spool,
            config: config.clone(),
            hops,
            metrics,
            stopping: Default::default(),
            local: self.attachment.clone(),
            wake,
        });
        // Every listener is bound: no other instance with these addresses runs on this
        // machine, so the leases under this instance's name are its last run's.
        {
            let spool = deliverer.spool.clone();
            let _ = tokio::task::spawn_blocking(move || spool.reclaim_own()).await;
        }
        let delivering = tokio::spawn(deliverer.run(stopping.clone()));
        notify::notify("READY=1");
        let watchdog = notify::watchdog_interval().map(|every| {
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    notify::notify("WATCHDOG=1");
                }
            })
        });
        // Said as soon as shutdown begins, while sessions and deliveries finish; awaited
        // before returning, or a quick shutdown drops the runtime before it is said.
        let said_stopping = {
            let mut stopping = stopping.clone();
            tokio::spawn(async move {
                if stopping.wait_for(|stop| *stop).await.is_ok() {
                    notify::notify("STOPPING=1");
                }
            })
        };
        // The deliverer ends at shutdown, or gives up (the database is gone too long).
        let gave_up = match delivering.await {
            Ok(Err(why)) => Some(why),
            _ => None,
        };
        let _ = stop.send(true);
        let _ = said_stopping.await;
        while tasks.join_next().await.is_some() {}
        if let Some(w) = watchdog {
            w.abort();
        }
        if let Some(t) = metrics_task {
            t.abort();
        }
        reload.abort();
        if let Some(why) = gave_up {
            tracing::error!("{why}");
            return Err(GatewayError::Unavailable(why));
        }
        tracing::info!("stopped");
        Ok(())
    }
}
