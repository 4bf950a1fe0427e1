//! `mailseal bridge`: any A2A agent, unchanged, reaches agents in other
//! organisations by sealed mail.
//!
//! ```text
//!  local SDK client ─A2A/HTTP─▶ [bridge] ─Sender─▶ spool ─SMTP─▶ … ─▶ partner gateway
//!  local SDK agent  ◀─A2A/HTTP─ [bridge] ◀─Receiver── [inbound listener] ◀─SMTP─ …
//! ```
//!
//! The bridge runs inside the gateway ([`crate::gateway::Attachment`]): the
//! gateway's inbound listener opens mail with every receiver rule and hands what it
//! delivers for a local agent to the bridge (a next hop of `protocol = "local"`), and
//! the bridge queues what it seals in the gateway's spool, whose deliverer carries it
//! with retries. What the bridge adds is the A2A side:
//!
//! - `http`: A2A v1.0 over HTTP for each remote peer a local agent may call (a URL
//!   and an Agent Card per peer address): JSON-RPC 2.0 and HTTP+JSON, SSE for
//!   streams; bearer tokens, one per local agent, which may act only as its own
//!   address.
//! - `outbound`: a call becomes a MailA2A request sealed by the library's
//!   [`crate::Sender`]; the answers mail brings resolve it, feed its stream in order,
//!   or update the task its agent polls.
//! - `inbound`: a request mail brings for a local agent becomes a call to that
//!   agent's own A2A endpoint (`agent`: the binding its card declares), and what the
//!   agent answers is sealed and mailed back, numbered, with one final message.
//! - `rpc`: the JSON-RPC and HTTP+JSON request parsing and error bodies (fuzzed).
//! - `state`: what survives a restart.
//!
//! Every delivery to a local agent carries the gateway's verdict in the A2A message's
//! metadata under [`VERDICT_KEY`]; whatever a sender put under that key is replaced.

pub mod agent;
pub mod config;
pub mod http;
mod inbound;
mod outbound;
pub mod rpc;
pub mod state;

use std::sync::{mpsc, Arc, OnceLock};

pub use config::BridgeConfig;

use crate::gateway::spool::{Entry, Spool};
use crate::gateway::{Config, LocalRefusal, PipelineFactory};
use crate::message::{Limits, MailA2aMessage, Mailbox};
use crate::{Kind, Profile, SealOptions};

/// The key of an A2A message's `metadata` under which the bridge tells a local agent
/// what the gateway verified of the mail that carried it: `{"profile", "protection",
/// "headerProtection", "from", "signer"}`.
pub const VERDICT_KEY: &str = "mailseal.verdict";

/// A job for the sealing thread.
type SealJob = Box<dyn FnOnce(&crate::Sender<'static>) + Send>;

/// The bridge: its configuration, state and the gateway's spool it queues mail in.
pub struct Bridge {
    pub(crate) config: BridgeConfig,
    pub(crate) gateway: Arc<Config>,
    pub(crate) state: state::State,
    pub(crate) spool: OnceLock<Arc<dyn Spool>>,
    /// Woken whenever an answer is recorded: the calls waiting look at the state.
    pub(crate) answers: tokio::sync::Notify,
    /// Woken whenever a call for a local agent is recorded.
    pub(crate) calls: tokio::sync::Notify,
    seal_jobs: std::sync::Mutex<mpsc::Sender<SealJob>>,
    /// The local agents' tokens, with their addresses.
    tokens: Vec<(zeroize::Zeroizing<String>, String)>,
    pub(crate) route: String,
    pub(crate) default_profile: Profile,
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    pub(crate) agents: agent::Agents,
    /// This instance's name on the calls for local agents it leases.
    pub(crate) instance: String,
}

/// Why the bridge did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BridgeError {
    /// The configuration.
    #[error("bridge: {0}")]
    Config(String),
    /// The state.
    #[error(transparent)]
    State(#[from] state::StateError),
}

impl Bridge {
    /// A bridge for `gateway`'s configuration (its `[bridge]` section), sealing with
    /// pipelines `factory` builds.
    pub fn new(gateway: Config, factory: Arc<PipelineFactory>) -> Result<Arc<Bridge>, BridgeError> {
        let config = BridgeConfig::of(&gateway).map_err(BridgeError::Config)?;
        let route = match &config.route {
            Some(r) => {
                if gateway.listener(r).is_none() {
                    return Err(BridgeError::Config(format!("bridge.route: no listener {r}")));
                }
                r.clone()
            }
            None => gateway
                .listeners
                .iter()
                .find(|l| l.mode == crate::gateway::config::Mode::Outbound)
                .map(|l| l.name.clone())
                .ok_or_else(|| {
                    BridgeError::Config(
                        "bridge.route: no outbound listener whose next hop would carry the bridge's mail".into(),
                    )
                })?,
        };
        let mut tokens = Vec::new();
        for a in &config.agents {
            let t = config::read_token(&a.token_file)
                .map_err(|e| BridgeError::Config(format!("bridge.agent {}: {e}", a.address)))?;
            if tokens
                .iter()
                .any(|(o, _): &(zeroize::Zeroizing<String>, String)| **o == *t)
            {
                return Err(BridgeError::Config(format!(
                    "bridge.agent {}: its token is another agent's",
                    a.address
                )));
            }
            tokens.push((t, Mailbox::new(&a.address).normalized()));
        }
        let state = state::State::open(&config.state)?;
        let instance = crate::gateway::spool::instance_id(&[config.listen]);
        let (tx, rx) = mpsc::channel::<SealJob>();
        std::thread::Builder::new()
            .name("mailseal-bridge-seal".into())
            .spawn(move || {
                let mut pipeline = None;
                while let Ok(job) = rx.recv() {
                    if pipeline.is_none() {
                        match factory() {
                            Ok(p) => pipeline = Some(p),
                            Err(e) => {
                                tracing::error!(error = %e, "bridge: cannot open the stores");
                                // The job is dropped: its caller hears the store is away.
                                continue;
                            }
                        }
                    }
                    if let Some(p) = &pipeline {
                        job(&p.sender);
                    }
                }
            })
            .map_err(|e| BridgeError::Config(format!("cannot start the sealing thread: {e}")))?;
        let default_profile = gateway.default_profile().unwrap_or(Profile::Smime);
        let streams = Arc::new(tokio::sync::Semaphore::new(config.max_streams));
        let agents = agent::Agents::new(&config);
        Ok(Arc::new(Bridge {
            config,
            gateway: Arc::new(gateway),
            state,
            spool: OnceLock::new(),
            answers: tokio::sync::Notify::new(),
            calls: tokio::sync::Notify::new(),
            seal_jobs: std::sync::Mutex::new(tx),
            tokens,
            route,
            default_profile,
            streams,
            agents,
            instance,
        }))
    }

    /// The local agent a bearer token is (compared in constant time with each).
    pub(crate) fn agent_of(&self, token: &str) -> Option<&str> {
        let mut found = None;
        for (t, addr) in &self.tokens {
            if constant_eq(t.as_bytes(), token.as_bytes()) {
                found = Some(addr.as_str());
            }
        }
        found
    }

    /// The configured peer named `address`, normalized.
    pub(crate) fn peer(&self, address: &str) -> Option<&config::RemotePeer> {
        let want = Mailbox::new(address).normalized();
        self.config
            .peers
            .iter()
            .find(|p| Mailbox::new(&p.address).normalized() == want)
    }

    /// Seals `plain` on the sealing thread, with the profile `peer` asks for (its own,
    /// its group's, its card's, or the gateway's default).
    pub(crate) async fn seal(
        &self,
        plain: MailA2aMessage,
        profile: Option<Profile>,
        group: Option<String>,
    ) -> Result<Vec<u8>, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let default = self.default_profile;
        let sign_only = self.gateway.outbound.sign_only;
        let job: SealJob = Box::new(move |sender| {
            let profile = match (&group, profile) {
                (Some(_), _) => Profile::Mls,
                (None, Some(p)) => p,
                (None, None) => sender.choose_profile(&plain, default),
            };
            let mut opts = SealOptions::new(profile);
            opts.sign_only = sign_only && profile != Profile::Mls;
            opts.group = group;
            let _ = tx.send(sender.seal(&plain, &opts).map_err(|e| e.to_string()));
        });
        self.seal_jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| "the sealing thread is gone".to_string())?;
        rx.await
            .map_err(|_| "the key store cannot be opened".to_string())?
    }

    /// Queues sealed mail from `from` to `to` in the spool, named by `key` (so that
    /// queueing it again after a crash is a no-op).
    pub(crate) async fn queue(
        &self,
        from: &str,
        to: &[String],
        key: &str,
        sealed: Vec<u8>,
    ) -> Result<(), String> {
        let spool = self
            .spool
            .get()
            .cloned()
            .ok_or_else(|| "the spool is not open yet".to_string())?;
        let entry = Entry::keyed(
            &self.route,
            from,
            to,
            format!("bridge:{key}").as_bytes(),
            sealed,
            crate::gateway::spool::now_ms() / 1000,
        );
        tokio::task::spawn_blocking(move || spool.put(&entry).map(drop).map_err(|e| e.to_string()))
            .await
            .map_err(|e| e.to_string())?
    }
}

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    // Equal-length digests compared without an early exit: neither the length nor a
    // prefix of a token shows in the time taken.
    let (x, y) = (Sha256::digest(a), Sha256::digest(b));
    x.iter()
        .zip(y.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q))
        == 0
}

/// What the gateway's verdict header says, as the metadata object a local agent gets.
pub(crate) fn verdict_object(verdict: &str) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    let mut parts = verdict.split(';').map(str::trim);
    if let Some(result) = parts.next() {
        o.insert("result".into(), result.into());
    }
    for p in parts {
        if let Some((k, v)) = p.split_once('=') {
            let key = match k {
                "header-protection" => "headerProtection",
                other => other,
            };
            let value: serde_json::Value = match (key, v) {
                ("headerProtection", "yes") => true.into(),
                ("headerProtection", _) => false.into(),
                _ => v.into(),
            };
            o.insert(key.to_string(), value);
        }
    }
    serde_json::Value::Object(o)
}

impl crate::gateway::Attachment for Bridge {
    fn deliver(&self, entry: &Entry) -> Result<(), LocalRefusal> {
        let (raw, verdicts) =
            crate::gateway::process::take_header(&entry.data, crate::gateway::VERDICT_HEADER);
        let verdict = verdicts.into_iter().next().unwrap_or_default();
        if !verdict.starts_with("pass") {
            return Err(LocalRefusal::Permanent(
                "the bridge takes only MailA2A mail the gateway opened".into(),
            ));
        }
        let message = MailA2aMessage::parse(&raw, &Limits::default())
            .map_err(|e| LocalRefusal::Permanent(format!("not a MailA2A message: {e}")))?;
        let sender = Mailbox::new(&message.sender().unwrap_or_default()).normalized();
        let env = message.envelope();
        let temporary = |e: state::StateError| LocalRefusal::Temporary(e.to_string());
        for rcpt in &entry.recipients {
            let agent = Mailbox::new(rcpt).normalized();
            if !self
                .config
                .agents
                .iter()
                .any(|a| Mailbox::new(&a.address).normalized() == agent)
            {
                return Err(LocalRefusal::Permanent(format!(
                    "{rcpt} is no agent of this bridge"
                )));
            }
            match env.kind() {
                // Requests only from the peers this bridge fronts: whoever else the
                // gateway verified is no one its agents talk to.
                Some(Kind::Request) if self.peer(&sender).is_none() => {
                    return Err(LocalRefusal::Permanent(
                        "requests are taken only from this bridge's peers".into(),
                    ));
                }
                Some(Kind::Request) => {
                    let op = env.raw("operation").unwrap_or_default();
                    let op = op.trim_matches('"').to_string();
                    let correlation = env.correlation_id().unwrap_or_default();
                    let idem = env
                        .idempotency_key()
                        .or_else(|| env.message_id())
                        .unwrap_or_default();
                    let with_verdict = crate::gateway::process::with_verdict(&raw, &verdict);
                    // Retried until its expiry, never longer than a request lifetime
                    // of this bridge's: a request without expiresAt, or one far off,
                    // does not keep it calling the agent.
                    let horizon =
                        crate::gateway::spool::now_ms() / 1000 + self.config.expiry_secs as i64;
                    let expires = env
                        .expires_at()
                        .map_or(horizon, |t| t.unix_timestamp().min(horizon));
                    let new = self
                        .state
                        .take_inbound(
                            &agent,
                            &sender,
                            &correlation,
                            &idem,
                            &op,
                            &with_verdict,
                            &verdict,
                            expires,
                        )
                        .map_err(temporary)?;
                    if new {
                        self.calls.notify_one();
                    }
                }
                Some(kind) => {
                    let Some(correlation) = env.correlation_id() else {
                        return Err(LocalRefusal::Permanent(
                            "an answer without a correlationId".into(),
                        ));
                    };
                    let call = self.state.call(&correlation).map_err(temporary)?;
                    let ours = call.as_ref().is_some_and(|c| {
                        c.agent == agent && Mailbox::new(&c.peer).normalized() == sender
                    });
                    if !ours {
                        return Err(LocalRefusal::Permanent(
                            "an answer to no call this agent made of its author".into(),
                        ));
                    }
                    let body = match kind {
                        Kind::Error => env.value("error").unwrap_or_default(),
                        _ => env.value("payload").unwrap_or_default(),
                    };
                    let answer = state::Answer {
                        sequence: env.sequence().unwrap_or(1),
                        kind: kind.as_str().to_string(),
                        is_final: env.is_final().unwrap_or(true),
                        body: body.to_string(),
                    };
                    self.state
                        .answer(&correlation, &answer, outbound::task_from)
                        .map_err(temporary)?;
                    self.answers.notify_waiters();
                }
                None => return Err(LocalRefusal::Permanent("a message without a kind".into())),
            }
        }
        Ok(())
    }

    fn start(
        self: Arc<Self>,
        spool: Arc<dyn Spool>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), String> {
        let _ = self.spool.set(spool);
        // Calls sealed but not queued when the bridge last stopped.
        let me = self.clone();
        tokio::spawn(async move { outbound::requeue(&me).await });
        let listener = std::net::TcpListener::bind(self.config.listen)
            .map_err(|e| format!("bridge.listen {}: {e}", self.config.listen))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        tracing::info!(address = %self.config.listen, "bridge: A2A listening");
        tokio::spawn(http::serve(self.clone(), listener, shutdown.clone()));
        tokio::spawn(inbound::run(self, shutdown));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_header_becomes_the_metadata_object() {
        let v = verdict_object(
            "pass; profile=smime; protection=signed-encrypted; header-protection=yes; from=a@x.example; signer=x509:ab",
        );
        assert_eq!(
            v,
            serde_json::json!({"result": "pass", "profile": "smime", "protection": "signed-encrypted",
                "headerProtection": true, "from": "a@x.example", "signer": "x509:ab"})
        );
    }

    #[test]
    fn tokens_are_equal_only_when_equal() {
        assert!(constant_eq(b"token-one-1234567", b"token-one-1234567"));
        assert!(!constant_eq(b"token-one-1234567", b"token-one-123456"));
        assert!(!constant_eq(b"", b"x"));
    }
}
