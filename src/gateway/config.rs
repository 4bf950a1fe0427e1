//! The gateway's TOML configuration: listeners (each with its mode and next hop), the
//! spool, the TLS files, the policies and the limits. Unknown keys are refused, so a
//! misspelt setting is an error rather than a silent default.
//!
//! ```toml
//! hostname = "gw.example.org"
//! store = "/var/lib/mailseal/store"
//! spool = "/var/spool/mailseal"          # or postgres://...
//! quarantine = "/var/spool/mailseal/quarantine"
//!
//! [tls]
//! certificate = "/etc/mailseal/tls.crt"
//! key = "/etc/mailseal/tls.key"
//!
//! [[listener]]
//! name = "outbound"
//! address = "127.0.0.1:10025"
//! mode = "outbound"
//! submission = "auth"                   # SMTP AUTH against [[submitter]]
//! tls = "starttls"
//! next_hop = { address = "127.0.0.1:10026" }
//!
//! [[submitter]]
//! login = "treasury"
//! password_hash = "$argon2id$v=19$..."   # mailseal gateway hash-password
//! addresses = ["treasury@example.org"]
//!
//! [[listener]]
//! name = "inbound"
//! address = "0.0.0.0:25"
//! mode = "inbound"
//! tls = "starttls"
//! next_hop = { address = "mailstore.internal:24", protocol = "lmtp", tls = "required", roots = "/etc/mailseal/internal-ca.pem" }
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::profile::Profile;

pub use super::submission::{Submission, Submitter};

/// Why a configuration is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown or missing keys.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The error, with its line.
        source: toml::de::Error,
    },
    /// A value is out of range or inconsistent.
    #[error("{0}")]
    Invalid(String),
    /// The TLS certificate or key cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
}

/// The whole configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The name the gateway greets with and says EHLO as.
    pub hostname: String,
    /// The key store (as `mailseal --store`).
    pub store: String,
    /// The replay state (as `mailseal --state`); default: beside the store. A
    /// PostgreSQL URL also holds the MLS group state and the peer policies, so every
    /// instance on it is one receiver, one group member and one policy.
    #[serde(default)]
    pub state: Option<String>,
    /// The spool: a directory, or `postgres://...` shared by several gateways.
    pub spool: String,
    /// Where refused messages that were already accepted are copied.
    pub quarantine: PathBuf,
    /// Threads that seal and open (default: [`default_workers`]).
    #[serde(default)]
    pub workers: Option<usize>,
    /// The TLS certificate chain and key (PEM), for STARTTLS and implicit TLS.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// The listeners.
    #[serde(rename = "listener")]
    pub listeners: Vec<Listener>,
    /// Who may submit to an outbound listener with `submission = "auth"`, and as
    /// which addresses.
    #[serde(default, rename = "submitter")]
    pub submitters: Vec<Submitter>,
    /// How mail from inside is sealed.
    #[serde(default)]
    pub outbound: OutboundPolicy,
    /// How mail from outside is opened.
    #[serde(default)]
    pub inbound: InboundPolicy,
    /// Limits on clients.
    #[serde(default)]
    pub limits: Limits,
    /// Retries and bounces.
    #[serde(default)]
    pub delivery: DeliveryPolicy,
    /// Prometheus metrics on this address (`GET /metrics`), loopback recommended.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// How log lines are written.
    #[serde(default)]
    pub log: LogSettings,
    /// The `[bridge]` section: the A2A bridge's (`mailseal bridge`), which reads and
    /// checks it; kept here as TOML so the gateway does not depend on what runs
    /// inside it, and so `mailseal gateway` can refuse a bridge's configuration by name.
    #[serde(default)]
    pub bridge: Option<toml::Table>,
}

/// How the gateway writes its log lines (on standard error, which journald takes).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// `text` (the default) or `json`; the environment's `MAILSEAL_LOG_FORMAT`, when
    /// set, says instead.
    pub format: LogFormat,
}

/// How a log line is written.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `key=value` pairs after the time, level and message: for people.
    #[default]
    Text,
    /// One JSON object a line, its fields at the top level: for log collectors.
    Json,
}

/// The TLS certificate chain and key, PEM files (reloaded on SIGHUP).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The certificate chain.
    pub certificate: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// What a listener does with what it accepts.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Mail from internal agents: sealed.
    Outbound,
    /// Mail from outside: opened.
    Inbound,
    /// Passed through untouched (the SMTP and spool floor, for measurements and
    /// re-injection).
    Relay,
}

impl Mode {
    /// Its name, as written in the configuration (and as the log and metrics say it).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Outbound => "outbound",
            Mode::Inbound => "inbound",
            Mode::Relay => "relay",
        }
    }
}

/// The workers a gateway runs when the configuration does not say: twice the
/// machine's `cores` with a directory spool, since a worker waits on the spool's
/// fsync about as long as it computes; four times, from 8 to 32, with a database
/// spool, whose every put waits on a round trip to the server and its commit (with
/// twice the cores, a PostgreSQL spool accepted 0.73x what Postfix did on two cores;
/// with 8 workers, as much: BENCHMARKS.md). Each worker holds its own pipeline, so
/// with the replay state in PostgreSQL each is one more connection beside the
/// spool's pool of 8: size `max_connections` for instances x (workers + 8). At most
/// 32, so one instance on a large machine still fits PostgreSQL's default of 100
/// connections beside another (2 x 40).
pub fn default_workers(spool: &str, cores: usize) -> usize {
    if super::spool::is_database(spool) {
        (4 * cores).clamp(8, 32)
    } else {
        2 * cores
    }
}

/// TLS on a listener.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ListenerTls {
    /// No TLS.
    None,
    /// STARTTLS offered (when `[tls]` is configured).
    #[default]
    Starttls,
    /// TLS from the first byte (port 465 style).
    Implicit,
}

/// One listener.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listener {
    /// Its name, recorded with each message it queues.
    pub name: String,
    /// Where it listens.
    pub address: SocketAddr,
    /// Outbound, inbound or relay.
    pub mode: Mode,
    /// STARTTLS (default), implicit TLS, or none.
    #[serde(default)]
    pub tls: ListenerTls,
    /// Refuse MAIL before STARTTLS.
    #[serde(default)]
    pub require_tls: bool,
    /// Who may submit (an outbound listener must say: it signs as our agents):
    /// `auth` (SMTP AUTH against `[[submitter]]`: an agent's login and the addresses it
    /// may send as, or an MTA's relay login whose MAIL FROM the From must be), or
    /// `open` (anyone it serves, as any agent).
    #[serde(default)]
    pub submission: Option<Submission>,
    /// The domains an inbound listener takes mail for (`example.org`,
    /// `*.example.org` for its subdomains, `*` for any): RCPT for any other is refused
    /// (550 5.7.1), so the listener relays for no one. An inbound listener must say.
    #[serde(default)]
    pub local_domains: Option<Vec<String>>,
    /// The client addresses served, as `ADDRESS/PREFIX` (or a bare address); others
    /// are told 554 and closed. Default: loopback only for an outbound listener (it
    /// signs as our agents for whoever reaches it, so only the submission path may),
    /// anyone for the others.
    #[serde(default)]
    pub clients: Option<Vec<String>>,
    /// Takes XFORWARD (Postfix's `smtp_send_xforward_command`, and its before-queue
    /// proxy): the client it names goes into the `Received:` field and the log lines
    /// instead of the MTA's own address. Whoever may send it writes the trace of the
    /// mail it hands over, so it needs `clients` naming only the MTAs in front
    /// (loopback, or single addresses); default: off (550 5.7.0 to XFORWARD).
    #[serde(default)]
    pub xforward: bool,
    /// Where accepted mail goes.
    pub next_hop: NextHop,
}

impl Listener {
    /// Whether a client at `ip` is served.
    pub fn serves(&self, ip: std::net::IpAddr) -> bool {
        match &self.clients {
            Some(nets) => nets
                .iter()
                .any(|n| parse_net(n).is_some_and(|(net, bits)| in_net(ip, net, bits))),
            None => self.mode != Mode::Outbound || ip.is_loopback(),
        }
    }
}

/// `ADDRESS/PREFIX` or `ADDRESS` (a single host).
fn parse_net(text: &str) -> Option<(std::net::IpAddr, u8)> {
    let (addr, bits) = match text.trim().split_once('/') {
        Some((a, b)) => (a.parse::<std::net::IpAddr>().ok()?, b.parse::<u8>().ok()?),
        None => {
            let a: std::net::IpAddr = text.trim().parse().ok()?;
            (a, if a.is_ipv4() { 32 } else { 128 })
        }
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((addr, bits))
}

fn in_net(ip: std::net::IpAddr, net: std::net::IpAddr, bits: u8) -> bool {
    use std::net::IpAddr;
    let ip = match (ip, net) {
        (IpAddr::V6(v6), IpAddr::V4(_)) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        _ => ip,
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The protocol to the next hop.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// SMTP (an MTA).
    #[default]
    Smtp,
    /// LMTP (a mailbox server).
    Lmtp,
    /// Handed, in this process, to what runs inside the gateway (the A2A bridge:
    /// `mailseal bridge`); `address` is not used. Only an inbound listener's opened
    /// mail goes this way.
    Local,
}

/// TLS to the next hop.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HopTls {
    /// Never (a loopback re-injection port).
    None,
    /// STARTTLS when offered, verified when used; clear otherwise.
    #[default]
    Opportunistic,
    /// STARTTLS, verified, or no delivery (the message waits).
    Required,
    /// TLS from the first byte, verified.
    Implicit,
}

/// The next hop of a listener.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextHop {
    /// `host:port`.
    pub address: String,
    /// SMTP (default) or LMTP.
    #[serde(default)]
    pub protocol: Protocol,
    /// Opportunistic (default), required, implicit or none.
    #[serde(default)]
    pub tls: HopTls,
    /// The roots its certificate is verified against (PEM); default: the system's.
    #[serde(default)]
    pub roots: Option<PathBuf>,
    /// The name its certificate must carry; default: the host of `address`.
    #[serde(default)]
    pub server_name: Option<String>,
    /// The login the gateway authenticates with (SMTP AUTH PLAIN or LOGIN), so that a
    /// next hop that delivers to the agents (Postfix's re-injection port) takes mail
    /// from the gateway only, not from any process on its host.
    #[serde(default)]
    pub login: Option<String>,
    /// The file whose first line is that login's password (owner-only).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

impl NextHop {
    /// The host part of `address`.
    pub fn host(&self) -> &str {
        match self.address.rsplit_once(':') {
            Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
            None => &self.address,
        }
    }
}

/// What to do when a recipient has no usable key.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NoKey {
    /// 550 for the whole message: the agent learns at once.
    Refuse,
    /// 451 for the whole message: the sending MTA retries (a key may be imported
    /// meanwhile).
    Defer,
    /// Sealed for the recipients that have a usable key and sent to them; each one
    /// without is left out and the agent gets a delivery status notification naming
    /// it (refused whole, 550, when none of the message's SMTP recipients has a key,
    /// or when the reverse path is null and nobody could be told). The default: one
    /// partner without a key does not keep a message from the others.
    #[default]
    Split,
}

/// What to do with mail that is not MailA2A.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Plain {
    /// Passed through untouched (the verdict header says so, inbound).
    #[default]
    Pass,
    /// Refused with 550.
    Refuse,
}

/// How mail from inside is sealed.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundPolicy {
    /// The profile when no recipient's Agent Card names one (`smime` or `openpgp`).
    #[serde(default = "default_profile")]
    pub default_profile: String,
    /// Sign without encrypting (only where every recipient's minimum allows it).
    #[serde(default)]
    pub sign_only: bool,
    /// A recipient without a usable key.
    #[serde(default)]
    pub no_key: NoKey,
    /// Mail that is not MailA2A.
    #[serde(default)]
    pub non_maila2a: Plain,
}

fn default_profile() -> String {
    "smime".into()
}

impl Default for OutboundPolicy {
    fn default() -> Self {
        OutboundPolicy {
            default_profile: default_profile(),
            sign_only: false,
            no_key: NoKey::Split,
            non_maila2a: Plain::Pass,
        }
    }
}

/// How mail from outside is opened (the receiver rules are the library's; these
/// are the choices `mailseal open` offers too).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboundPolicy {
    /// Mail that is not MailA2A.
    #[serde(default)]
    pub non_maila2a: Plain,
    /// Addresses we are also reached through (lists, aliases).
    #[serde(default)]
    pub also_addressed_to: Vec<String>,
    /// Senders whose unsigned MailA2A mail is accepted.
    #[serde(default)]
    pub allow_unsigned_from: Vec<String>,
    /// Refuse signed mail without header protection, even from `allow_legacy_from`.
    #[serde(default)]
    pub require_header_protection: bool,
    /// Peers (addresses, or `@domain`) whose signed mail may come without header
    /// protection (a legacy signer: its To, Cc and Date are unsigned). Default: none.
    #[serde(default)]
    pub allow_legacy_from: Vec<String>,
    /// Refuse an S/MIME signer without a current CRL for every certificate on its path.
    #[serde(default)]
    pub require_crl: bool,
    /// Responses, errors and stream events that answer no request this gateway's
    /// outbound side (or `mailseal seal` on the same state) recorded: `refuse` (the
    /// default) or `accept` (a gateway that only receives, whose agents' requests
    /// leave by another path).
    #[serde(default)]
    pub unsolicited: UnsolicitedChoice,
}

/// `inbound.unsolicited`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UnsolicitedChoice {
    /// Refused as `rules.unsolicited`.
    #[default]
    Refuse,
    /// Judged by the stream rules alone.
    Accept,
}

impl InboundPolicy {
    /// The receiver rules these choices make (the library's defaults otherwise).
    pub fn rules(&self) -> crate::replay::ReceiverPolicy {
        crate::replay::ReceiverPolicy {
            unsolicited: match self.unsolicited {
                UnsolicitedChoice::Refuse => crate::replay::Unsolicited::Refuse,
                UnsolicitedChoice::Accept => crate::replay::Unsolicited::Accept,
            },
            ..Default::default()
        }
    }

    /// The open policy these choices make (the library's defaults otherwise).
    pub fn open_policy(&self) -> crate::seal::OpenPolicy {
        let mut policy = crate::seal::OpenPolicy {
            our_addresses: self.also_addressed_to.clone(),
            require_header_protection: self.require_header_protection,
            require_crl: self.require_crl,
            ..Default::default()
        };
        policy.allow_unsigned_from(&self.allow_unsigned_from);
        for mark in &self.allow_legacy_from {
            // Checked when the configuration was loaded (`Config::check`).
            let _ = policy.legacy_peers.add(mark);
        }
        policy
    }
}

/// Limits on clients.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The largest message (SIZE), bytes.
    pub max_message_bytes: usize,
    /// Recipients per message.
    pub max_recipients: usize,
    /// Bad commands before a session is closed.
    pub max_errors: usize,
    /// Seconds for a client to complete a command (not reset by each byte).
    pub command_timeout_secs: u64,
    /// Seconds for a client to send a whole message after 354.
    pub data_timeout_secs: u64,
    /// Seconds for a TLS handshake.
    pub tls_timeout_secs: u64,
    /// Connections at once, in all.
    pub max_connections: usize,
    /// Connections at once from one IP address.
    pub max_connections_per_ip: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 25 * 1024 * 1024,
            max_recipients: 100,
            max_errors: 20,
            command_timeout_secs: 300,
            data_timeout_secs: 600,
            tls_timeout_secs: 30,
            max_connections: 1000,
            max_connections_per_ip: 50,
        }
    }
}

/// Retries and bounces.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveryPolicy {
    /// The first retry after this many seconds; doubled each time.
    pub retry_initial_secs: u64,
    /// The longest wait between attempts.
    pub retry_max_secs: u64,
    /// After this long in the queue, a message bounces.
    pub max_age_secs: u64,
    /// Seconds for each exchange with the next hop.
    pub timeout_secs: u64,
    /// Deliveries at once.
    pub concurrency: usize,
    /// Seconds a claimed entry is ours before another instance may take it.
    pub lease_secs: u64,
    /// A PostgreSQL spool: an instance that has given no sign of life for this many
    /// seconds (it beats every sixth of it, whatever it is doing) is dead, and the
    /// others take its leased entries at once instead of after `lease_secs`. More
    /// than three exchanges (`3 x timeout_secs`), so that a delivery under way when its
    /// instance lost the database has ended first (a copy it delivered and could not
    /// mark done is delivered again, as after a lease runs out: the receiver's replay
    /// state drops it).
    pub instance_dead_secs: u64,
    /// How often the queue is polled for due entries, milliseconds: retries, and what
    /// other instances on a shared spool queued. What this instance queues is
    /// delivered at once ([`super::spool::Waking`]).
    pub poll_ms: u64,
    /// How long the spool's database may be unreachable before the gateway exits
    /// (non-zero, so systemd starts it again); 0: never. Meanwhile clients are told
    /// 4xx and the connection is tried again every second.
    pub database_down_secs: u64,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        DeliveryPolicy {
            retry_initial_secs: 60,
            retry_max_secs: 3600,
            max_age_secs: 5 * 24 * 3600,
            timeout_secs: 60,
            concurrency: 16,
            lease_secs: 600,
            instance_dead_secs: 240,
            poll_ms: 500,
            database_down_secs: 120,
        }
    }
}

impl Config {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let config = Config::parse(&text).map_err(|e| match e {
            ConfigError::Parse { source, .. } => ConfigError::Parse {
                path: path.display().to_string(),
                source,
            },
            other => other,
        })?;
        Ok(config)
    }

    /// Parses and checks TOML text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: "configuration".into(),
            source,
        })?;
        config.check()?;
        Ok(config)
    }

    /// The outbound default profile.
    pub fn default_profile(&self) -> Result<Profile, ConfigError> {
        let p: Profile =
            self.outbound.default_profile.parse().map_err(|e: String| {
                ConfigError::Invalid(format!("outbound.default_profile: {e}"))
            })?;
        if p == Profile::Mls {
            return Err(ConfigError::Invalid(
                "outbound.default_profile: mls is chosen per message (its envelope's group), not as a default".into(),
            ));
        }
        Ok(p)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let invalid = |s: String| Err(ConfigError::Invalid(s));
        if self.hostname.trim().is_empty() || self.hostname.bytes().any(|b| b <= b' ') {
            return invalid("hostname: a host name without spaces".into());
        }
        if self.listeners.is_empty() {
            return invalid("at least one [[listener]]".into());
        }
        let mut names = std::collections::HashSet::new();
        let mut addresses = std::collections::HashSet::new();
        for l in &self.listeners {
            if !names.insert(&l.name) {
                return invalid(format!("listener {}: the name is used twice", l.name));
            }
            if !addresses.insert(l.address) {
                return invalid(format!(
                    "listener {}: another listener already has the address {}",
                    l.name, l.address
                ));
            }
            if l.name.is_empty()
                || l.name
                    .bytes()
                    .any(|b| !b.is_ascii_alphanumeric() && b != b'-' && b != b'_')
            {
                return invalid(format!(
                    "listener {:?}: a name of letters, digits, - and _",
                    l.name
                ));
            }
            if l.tls != ListenerTls::None
                && self.tls.is_none()
                && (l.tls == ListenerTls::Implicit || l.require_tls)
            {
                return invalid(format!(
                    "listener {}: TLS needs a [tls] certificate and key",
                    l.name
                ));
            }
            if let Some(bad) = l.clients.iter().flatten().find(|n| parse_net(n).is_none()) {
                return invalid(format!(
                    "listener {}: clients: {bad:?} is not ADDRESS/PREFIX",
                    l.name
                ));
            }
            if l.xforward {
                // Loopback (an outbound listener serves only it by default), or a list
                // of loopback nets and single hosts: never a network of clients.
                let named = match &l.clients {
                    None => l.mode == Mode::Outbound,
                    Some(nets) => {
                        !nets.is_empty()
                            && nets.iter().all(|n| {
                                parse_net(n).is_some_and(|(ip, bits)| {
                                    let host = if ip.is_ipv4() { 32 } else { 128 };
                                    bits == host || (ip.is_loopback() && bits >= 8)
                                })
                            })
                    }
                };
                if !named {
                    return invalid(format!(
                        "listener {}: xforward = true lets its clients write the Received field and log lines of the mail they hand over: it needs clients = [...] naming only the MTAs in front (loopback, or single addresses such as \"192.0.2.25\"), not a network or anyone",
                        l.name
                    ));
                }
            }
            match (l.mode, l.submission) {
                (Mode::Outbound, None) => {
                    return invalid(format!(
                        "listener {}: an outbound listener signs as our agents, so it must say who may submit: submission = \"auth\" (SMTP AUTH against [[submitter]]: agents' logins, or an MTA's relay login) or \"open\" (anyone it serves, as any agent)",
                        l.name
                    ))
                }
                (Mode::Outbound, Some(Submission::Auth)) => {
                    let loopback_only = match &l.clients {
                        None => true,
                        // Every net inside loopback: 127.0.0.0/8 or narrower, ::1/128.
                        Some(nets) => nets.iter().all(|n| {
                            parse_net(n).is_some_and(|(ip, bits)| {
                                ip.is_loopback() && bits >= if ip.is_ipv4() { 8 } else { 128 }
                            })
                        }),
                    };
                    let tls = self.tls.is_some() && l.tls != ListenerTls::None;
                    if l.tls != ListenerTls::None && self.tls.is_none() {
                        return invalid(format!(
                            "listener {}: tls = \"starttls\" needs a [tls] certificate (or tls = \"none\" on a loopback-only listener)",
                            l.name
                        ));
                    }
                    if !tls && !loopback_only {
                        return invalid(format!(
                            "listener {}: submission = \"auth\" from clients beyond loopback needs TLS (a [tls] certificate, and tls = \"starttls\" or \"implicit\"): passwords are never taken in clear over a network",
                            l.name
                        ));
                    }
                    if self.submitters.is_empty() {
                        return invalid(format!(
                            "listener {}: submission = \"auth\" needs at least one [[submitter]]",
                            l.name
                        ));
                    }
                }
                (Mode::Outbound, Some(_)) => {}
                (_, Some(_)) => {
                    return invalid(format!(
                        "listener {}: submission applies to outbound listeners only",
                        l.name
                    ))
                }
                (_, None) => {}
            }
            if l.next_hop.login.is_some() != l.next_hop.password_file.is_some() {
                return invalid(format!(
                    "listener {}: next_hop.login and next_hop.password_file go together",
                    l.name
                ));
            }
            // A password goes out in clear only to this host: to any other, TLS is
            // required (opportunistic TLS is one stripped STARTTLS from clear).
            let loopback = {
                let host = l.next_hop.host();
                host == "localhost"
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            };
            if l.next_hop.login.is_some()
                && !loopback
                && !matches!(l.next_hop.tls, HopTls::Required | HopTls::Implicit)
            {
                return invalid(format!(
                    "listener {}: next_hop.login to a host other than this one needs tls = \"required\" or \"implicit\"",
                    l.name
                ));
            }
            match (l.mode, &l.local_domains) {
                (Mode::Inbound, None) => {
                    return invalid(format!(
                        "listener {}: an inbound listener must say which domains it takes mail for: local_domains = [\"example.org\"] (\"*.example.org\" for subdomains, \"*\" for any: a relay for everyone)",
                        l.name
                    ))
                }
                (Mode::Inbound, Some(d)) if d.is_empty() => {
                    return invalid(format!("listener {}: local_domains is empty", l.name))
                }
                (Mode::Inbound, Some(_)) | (_, None) => {}
                (_, Some(_)) => {
                    return invalid(format!(
                        "listener {}: local_domains applies to inbound listeners only",
                        l.name
                    ))
                }
            }
            if l.next_hop.protocol == Protocol::Local {
                // Handed over in this process: only opened mail goes that way.
                if l.mode != Mode::Inbound {
                    return invalid(format!(
                        "listener {}: next_hop protocol \"local\" (the A2A bridge) takes an inbound listener's opened mail only",
                        l.name
                    ));
                }
            } else if !l.next_hop.address.contains(':') {
                return invalid(format!(
                    "listener {}: next_hop.address is host:port",
                    l.name
                ));
            }
        }
        if let Err(e) = super::submission::Submitters::new(&self.submitters) {
            return invalid(format!("[[submitter]]: {e}"));
        }
        self.default_profile()?;
        let lim = &self.limits;
        if lim.max_message_bytes == 0
            || lim.max_recipients == 0
            || lim.max_connections == 0
            || lim.max_connections_per_ip == 0
            || lim.max_errors == 0
        {
            return invalid("limits: every limit is at least 1".into());
        }
        let d = &self.delivery;
        if d.concurrency == 0 || d.retry_initial_secs == 0 || d.lease_secs == 0 || d.poll_ms == 0 {
            return invalid(
                "delivery: concurrency, retry_initial_secs, lease_secs and poll_ms are at least 1"
                    .into(),
            );
        }
        if d.instance_dead_secs <= d.timeout_secs * 3 {
            return invalid("delivery.instance_dead_secs must exceed three exchanges (3 x timeout_secs): a delivery under way when its instance lost the database must end before another instance takes it".into());
        }
        if d.lease_secs <= d.timeout_secs * 3 {
            return invalid("delivery.lease_secs must exceed three exchanges (3 x timeout_secs): a delivery in progress must not be taken by another instance".into());
        }
        if self.workers == Some(0) {
            return invalid("workers: at least 1".into());
        }
        let mut legacy = crate::identity::recipients::LegacyPeers::none();
        for mark in &self.inbound.allow_legacy_from {
            if let Err(e) = legacy.add(mark) {
                return invalid(format!("inbound.allow_legacy_from: {e}"));
            }
        }
        Ok(())
    }

    /// The listener named `name`.
    pub fn listener(&self, name: &str) -> Option<&Listener> {
        self.listeners.iter().find(|l| l.name == name)
    }

    /// The route a delivery status notification about mail on `route` takes back to
    /// that mail's sender: the other direction's listener, whose next hop reaches the
    /// sender (a bounce of inbound mail goes out to the world, one of outbound mail in
    /// to the agent; an inbound next hop may be an agent's LMTP mailbox that reaches
    /// nobody outside), else `route` itself.
    pub fn return_route<'a>(&'a self, route: &'a str) -> &'a str {
        let back = match self.listener(route).map(|l| l.mode) {
            Some(Mode::Inbound) => Mode::Outbound,
            Some(Mode::Outbound) => Mode::Inbound,
            _ => return route,
        };
        self.listeners
            .iter()
            .find(|l| l.mode == back)
            .map_or(route, |l| l.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
hostname = "gw.test"
store = "/tmp/s"
spool = "/tmp/q"
quarantine = "/tmp/qq"
[[listener]]
name = "out"
address = "127.0.0.1:2525"
mode = "outbound"
tls = "none"
submission = "open"
next_hop = { address = "127.0.0.1:2526" }
"#;

    #[test]
    fn log_format_is_text_unless_json_is_asked_for() {
        assert_eq!(Config::parse(MINIMAL).unwrap().log.format, LogFormat::Text);
        let json = format!("{MINIMAL}\n[log]\nformat = \"json\"\n");
        assert_eq!(Config::parse(&json).unwrap().log.format, LogFormat::Json);
        let bad = format!("{MINIMAL}\n[log]\nformat = \"xml\"\n");
        assert!(Config::parse(&bad).is_err());
        let unknown = format!("{MINIMAL}\n[log]\nfile = \"/var/log/x\"\n");
        assert!(Config::parse(&unknown)
            .unwrap_err()
            .to_string()
            .contains("unknown field `file`"));
    }

    /// Issue #57: an outbound listener signs as our agents, so the operator says who
    /// may submit; passwords only under TLS; submitters well formed.
    #[test]
    fn fail_config_outbound_listener_must_say_who_may_submit() {
        let err = |text: &str| Config::parse(text).unwrap_err().to_string();
        let none = MINIMAL.replace("submission = \"open\"\n", "");
        assert!(
            err(&none).contains("must say who may submit"),
            "{}",
            err(&none)
        );
        let auth_clear = MINIMAL
            .replace("submission = \"open\"", "submission = \"auth\"")
            .replace(
                "mode = \"outbound\"",
                "mode = \"outbound\"\nclients = [\"10.0.0.0/8\"]",
            );
        assert!(
            err(&auth_clear).contains("needs TLS"),
            "{}",
            err(&auth_clear)
        );
        // A login to a hop elsewhere only over TLS it requires.
        let remote = MINIMAL.replace(
            "next_hop = { address = \"127.0.0.1:2526\" }",
            "next_hop = { address = \"mx.example.org:25\", login = \"g\", password_file = \"/p\" }",
        );
        assert!(
            err(&remote).contains("needs tls = \"required\""),
            "{}",
            err(&remote)
        );
        // A prefix wider than loopback is not loopback (found by review).
        let wide = MINIMAL
            .replace("submission = \"open\"", "submission = \"auth\"")
            .replace(
                "mode = \"outbound\"",
                "mode = \"outbound\"\nclients = [\"127.0.0.1/0\"]",
            );
        assert!(err(&wide).contains("needs TLS"), "{}", err(&wide));
        // From loopback only, AUTH may come in clear (an MTA on the same host).
        let auth_loopback = MINIMAL.replace("submission = \"open\"", "submission = \"auth\"");
        assert!(
            err(&auth_loopback).contains("at least one [[submitter]]"),
            "{}",
            err(&auth_loopback)
        );
        let tls = "[tls]\ncertificate = \"/c\"\nkey = \"/k\"\n";
        let auth_tls = MINIMAL
            .replace("submission = \"open\"", "submission = \"auth\"")
            .replace("tls = \"none\"", "tls = \"starttls\"")
            .replace("[[listener]]", &format!("{tls}[[listener]]"));
        assert!(
            err(&auth_tls).contains("at least one [[submitter]]"),
            "{}",
            err(&auth_tls)
        );
        let hash = super::super::submission::hash_password("pw").unwrap();
        let with = format!(
            "{auth_tls}\n[[submitter]]\nlogin = \"a\"\npassword_hash = \"{hash}\"\naddresses = [\"a@x.example\"]\n"
        );
        let c = Config::parse(&with).unwrap();
        assert_eq!(c.listeners[0].submission, Some(Submission::Auth));
        let plain = with.replace(&hash, "hunter2");
        assert!(err(&plain).contains("PHC"), "{}", err(&plain));
        let inbound = MINIMAL.replace("mode = \"outbound\"", "mode = \"inbound\"");
        assert!(err(&inbound).contains("outbound listeners only"));
        let inbound = MINIMAL
            .replace("mode = \"outbound\"", "mode = \"inbound\"")
            .replace("submission = \"open\"\n", "");
        assert!(err(&inbound).contains("which domains"), "{}", err(&inbound));
    }

    /// Issue #57: XFORWARD lets a client write the trace of what it hands over, so a
    /// listener takes it only from named MTAs: loopback or single addresses.
    #[test]
    fn fail_config_xforward_only_from_named_clients() {
        let with = |mode: &str, clients: &str| {
            let extra = match mode {
                "inbound" => "local_domains = [\"*\"]",
                "outbound" => "submission = \"open\"",
                _ => "",
            };
            MINIMAL
                .replace(
                    "mode = \"outbound\"",
                    &format!("mode = \"{mode}\"\nxforward = true\n{clients}"),
                )
                .replace("submission = \"open\"", extra)
        };
        for (mode, clients) in [
            ("outbound", ""),
            ("inbound", "clients = [\"127.0.0.1\"]"),
            ("inbound", "clients = [\"127.0.0.0/8\", \"::1\"]"),
            ("relay", "clients = [\"192.0.2.25\", \"2001:db8::25/128\"]"),
        ] {
            let c = Config::parse(&with(mode, clients));
            assert!(
                c.as_ref().is_ok_and(|c| c.listeners[0].xforward),
                "{mode} {clients}: {:?}",
                c.err()
            );
        }
        for (mode, clients) in [
            ("inbound", ""),
            ("relay", ""),
            ("inbound", "clients = []"),
            ("inbound", "clients = [\"192.0.2.0/24\"]"),
            ("outbound", "clients = [\"127.0.0.1\", \"0.0.0.0/0\"]"),
            ("inbound", "clients = [\"::/0\"]"),
        ] {
            let e = Config::parse(&with(mode, clients)).unwrap_err().to_string();
            assert!(e.contains("xforward = true"), "{mode} {clients}: {e}");
        }
        assert!(
            !Config::parse(MINIMAL).unwrap().listeners[0].xforward,
            "off by default"
        );
    }

    #[test]
    fn minimal_config_takes_defaults() {
        let c = Config::parse(MINIMAL).unwrap();
        assert_eq!(c.listeners[0].next_hop.tls, HopTls::Opportunistic);
        assert_eq!(c.default_profile().unwrap(), Profile::Smime);
        assert_eq!(c.limits.max_recipients, 100);
    }

    #[test]
    fn clients_by_prefix_and_loopback_default_for_outbound() {
        let c = Config::parse(MINIMAL).unwrap();
        let out = &c.listeners[0];
        assert!(out.serves("127.0.0.1".parse().unwrap()));
        assert!(out.serves("::1".parse().unwrap()));
        assert!(
            !out.serves("192.0.2.7".parse().unwrap()),
            "outbound: loopback by default"
        );
        let wide = MINIMAL.replace(
            "mode = \"outbound\"",
            "mode = \"outbound\"\nclients = [\"10.1.0.0/16\", \"2001:db8::/32\", \"192.0.2.7\"]",
        );
        let c = Config::parse(&wide).unwrap();
        let l = &c.listeners[0];
        assert!(l.serves("10.1.200.3".parse().unwrap()));
        assert!(l.serves("::ffff:10.1.0.9".parse().unwrap()));
        assert!(!l.serves("10.2.0.1".parse().unwrap()));
        assert!(l.serves("2001:db8:1::5".parse().unwrap()));
        assert!(l.serves("192.0.2.7".parse().unwrap()));
        assert!(
            !l.serves("127.0.0.1".parse().unwrap()),
            "the list replaces the default"
        );
        let bad = MINIMAL.replace(
            "mode = \"outbound\"",
            "mode = \"outbound\"\nclients = [\"10.0.0.0/33\"]",
        );
        assert!(Config::parse(&bad).is_err());
        let inbound = MINIMAL
            .replace("mode = \"outbound\"", "mode = \"inbound\"")
            .replace("submission = \"open\"", "local_domains = [\"*\"]");
        assert!(Config::parse(&inbound).unwrap().listeners[0].serves("192.0.2.7".parse().unwrap()));
    }

    #[test]
    fn the_shipped_example_parses() {
        let c = Config::parse(include_str!("../../dist/gateway.toml")).unwrap();
        assert_eq!(c.listeners.len(), 2);
        assert_eq!(c.listener("inbound").unwrap().mode, Mode::Inbound);
        // Postfix's re-injection port (dist/postfix/master.cf.append) takes mail from
        // the gateway's login only: every listener handing mail back there logs in.
        for l in &c.listeners {
            assert!(l.next_hop.address.ends_with(":10026"), "{}", l.name);
            assert_eq!(l.next_hop.login.as_deref(), Some("gateway"), "{}", l.name);
            // Postfix forwards its client (smtp_send_xforward_command, and its
            // before-queue proxy): every listener it talks to reads it.
            assert!(l.xforward, "{}", l.name);
        }
        assert!(include_str!("../../dist/postfix/master.cf.append")
            .contains("-o smtp_send_xforward_command=yes\n"));
        assert!(include_str!("../../dist/postfix/master.cf.append")
            .contains("127.0.0.1:10026 inet  n       -       n       -       -       smtpd\n    -o content_filter=\n"));
    }

    /// Every setting the shipped file shows commented out (a default or an example)
    /// is one the gateway reads, spelled as it reads it: uncommented, the file still
    /// parses (the agent submitter's example aside: its hash is a placeholder).
    #[test]
    fn the_shipped_example_documents_only_real_settings() {
        let shipped = include_str!("../../dist/gateway.toml");
        let mut out = String::new();
        let mut set: Vec<String> = Vec::new();
        let mut skipping = false;
        let mut uncommented = 0;
        for line in shipped.lines() {
            let header = |l: &str| l.starts_with('[');
            if header(line) {
                set.clear();
                skipping = false;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                if rest == "[[submitter]]" {
                    skipping = true;
                }
                let key = rest.split_once(" = ").map(|(k, _)| k);
                if rest == "[tls]" {
                    set.clear();
                    out.push_str(rest);
                    out.push('\n');
                    uncommented += 1;
                    continue;
                }
                if let Some(k) =
                    key.filter(|k| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                {
                    if !skipping && !set.iter().any(|s| s == k) {
                        set.push(k.to_string());
                        out.push_str(rest);
                        out.push('\n');
                        uncommented += 1;
                        continue;
                    }
                }
            } else if let Some((k, _)) = line.split_once(" = ") {
                set.push(k.to_string());
            }
            out.push_str(line);
            out.push('\n');
        }
        assert!(uncommented >= 12, "{uncommented}");
        let c = Config::parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
        assert!(c.tls.is_some());
        assert_eq!(c.workers, Some(4));
        assert_eq!(default_workers("/var/spool/mailseal", 2), 4);
        assert_eq!(default_workers("postgres://gw@db/mailseal", 2), 8);
        assert_eq!(default_workers("postgresql://gw@db/mailseal", 1), 8);
        assert_eq!(default_workers("postgres://gw@db/mailseal", 4), 16);
        assert_eq!(default_workers("postgres://gw@db/mailseal", 24), 32);
        assert_eq!(c.inbound.also_addressed_to, ["team@example.org"]);
        // And the values written as defaults are the defaults.
        let d = DeliveryPolicy::default();
        assert_eq!(
            (
                c.delivery.lease_secs,
                c.delivery.instance_dead_secs,
                c.delivery.max_age_secs
            ),
            (d.lease_secs, d.instance_dead_secs, d.max_age_secs)
        );
        let l = Limits::default();
        assert_eq!(
            (c.limits.max_message_bytes, c.limits.max_connections_per_ip),
            (l.max_message_bytes, l.max_connections_per_ip)
        );
    }

    /// A notice about inbound mail goes back out through the outbound listener's hop,
    /// one about outbound mail in through the inbound one's; a relay keeps its own.
    #[test]
    fn notices_return_through_the_other_direction() {
        let c = Config::parse(include_str!("../../dist/gateway.toml")).unwrap();
        let name = |m: Mode| {
            c.listeners
                .iter()
                .find(|l| l.mode == m)
                .unwrap()
                .name
                .clone()
        };
        let (inbound, outbound) = (name(Mode::Inbound), name(Mode::Outbound));
        assert_eq!(c.return_route(&inbound), outbound);
        assert_eq!(c.return_route(&outbound), inbound);
        assert_eq!(c.return_route("no-such-listener"), "no-such-listener");
        let one = Config::parse(MINIMAL).unwrap();
        let only = one.listeners[0].name.clone();
        assert_eq!(one.return_route(&only), only);
    }

    /// The before-queue Postfix files are the after-queue ones but for the MX path:
    /// the submission service, the filter client and the re-injection port are the
    /// same lines in both, so the two cannot drift apart.
    #[test]
    fn the_postfix_files_differ_only_in_the_mx_path() {
        let after = include_str!("../../dist/postfix/master.cf.append");
        let before = include_str!("../../dist/postfix/master.cf.before-queue.append");
        // A service: its line and the `-o` lines under it.
        let service = |text: &str, name: &str| -> String {
            let start = text.find(name).unwrap_or_else(|| panic!("{name}"));
            text[start..]
                .lines()
                .enumerate()
                .take_while(|(i, l)| *i == 0 || l.starts_with("    -o "))
                .map(|(_, l)| format!("{l}\n"))
                .collect()
        };
        for name in [
            "127.0.0.1:10587 inet",
            "mailseal  unix",
            "127.0.0.1:10026 inet",
        ] {
            assert_eq!(service(after, name), service(before, name), "{name}");
        }
        let mx = service(before, "127.0.0.1:10024 inet");
        assert!(
            mx.contains("-o smtpd_proxy_filter=127.0.0.1:10027\n"),
            "{mx}"
        );
        assert!(!mx.contains("content_filter"), "{mx}");
        assert!(service(after, "127.0.0.1:10024 inet")
            .contains("content_filter=mailseal:[127.0.0.1]:10027"));
    }

    #[test]
    fn fail_unknown_key_and_bad_values() {
        let typo = MINIMAL.replace("quarantine", "quarantaine");
        assert!(matches!(
            Config::parse(&typo),
            Err(ConfigError::Parse { .. })
        ));
        let mls = format!("{MINIMAL}\n[outbound]\ndefault_profile = \"mls\"\n");
        assert!(matches!(Config::parse(&mls), Err(ConfigError::Invalid(_))));
        let twice = format!(
            "{MINIMAL}{}",
            &MINIMAL[MINIMAL.find("[[listener]]").unwrap()..]
        );
        assert!(Config::parse(&twice)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let implicit = MINIMAL.replace("tls = \"none\"", "tls = \"implicit\"");
        assert!(Config::parse(&implicit)
            .unwrap_err()
            .to_string()
            .contains("[tls]"));
        let legacy = format!("{MINIMAL}\n[inbound]\nallow_legacy_from = [\"example.com\"]\n");
        assert!(Config::parse(&legacy)
            .unwrap_err()
            .to_string()
            .contains("allow_legacy_from"));
    }

    #[test]
    fn legacy_peers_are_none_unless_listed() {
        let c = Config::parse(MINIMAL).unwrap();
        assert!(c.inbound.open_policy().legacy_peers.is_empty());
        let legacy = format!(
            "{MINIMAL}\n[inbound]\nallow_legacy_from = [\"old@example.com\", \"@legacy.example\"]\n"
        );
        let p = Config::parse(&legacy).unwrap().inbound.open_policy();
        assert!(p.legacy_peers.allows("old@example.com"));
        assert!(p.legacy_peers.allows("any@legacy.example"));
        assert!(!p.legacy_peers.allows("new@example.com"));
        assert!(!p.own_copy);
    }

    #[test]
    fn unsolicited_replies_are_refused_unless_accepted_by_name() {
        use crate::replay::Unsolicited;
        let c = Config::parse(MINIMAL).unwrap();
        assert_eq!(c.inbound.rules().unsolicited, Unsolicited::Refuse);
        let accept = format!("{MINIMAL}\n[inbound]\nunsolicited = \"accept\"\n");
        let c = Config::parse(&accept).unwrap();
        assert_eq!(c.inbound.rules().unsolicited, Unsolicited::Accept);
        let typo = format!("{MINIMAL}\n[inbound]\nunsolicited = \"sure\"\n");
        assert!(Config::parse(&typo).is_err());
    }
}
