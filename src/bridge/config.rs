//! The `[bridge]` section of a gateway configuration: where the A2A side listens,
//! the local agents it fronts (with the bearer token each authenticates with and its
//! own A2A endpoint) and the remote peers they may reach.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// The `[bridge]` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    /// Where the A2A HTTP side listens: loopback, or an internal address with `tls`.
    pub listen: SocketAddr,
    /// The URL the Agent Cards it serves advertise (default: `http://LISTEN` or
    /// `https://LISTEN`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The TLS certificate chain and key (PEM) of the HTTP side; required unless it
    /// listens on loopback.
    #[serde(default)]
    pub tls: Option<crate::gateway::config::TlsFiles>,
    /// The bridge's state: pending calls, tasks, stream positions, calls taken for the
    /// local agents: a SQLite file, or `postgres://…` shared by several instances
    /// (each then with its own listeners, over a shared spool and replay state).
    pub state: String,
    /// The listener whose next hop carries the bridge's sealed mail (default: the
    /// first outbound listener).
    #[serde(default)]
    pub route: Option<String>,
    /// How long a `SendMessage` waits for its answer before it returns the Task as
    /// submitted (the caller then polls `GetTask` or subscribes).
    #[serde(default = "default_wait_secs")]
    pub wait_secs: u64,
    /// How long a request may take to be answered (its `expiresAt`).
    #[serde(default = "default_expiry_secs")]
    pub expiry_secs: u64,
    /// The largest request body taken, bytes.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Streams (SSE) open at once at most; more are refused with an A2A error.
    #[serde(default = "default_max_streams")]
    pub max_streams: usize,
    /// How long a call to a local agent may take before it is given up on (its
    /// caller gets an A2A error), seconds.
    #[serde(default = "default_agent_timeout")]
    pub agent_timeout_secs: u64,
    /// The local agents.
    #[serde(default, rename = "agent")]
    pub agents: Vec<LocalAgent>,
    /// The remote peers the local agents may call.
    #[serde(default, rename = "peer")]
    pub peers: Vec<RemotePeer>,
}

fn default_wait_secs() -> u64 {
    30
}
fn default_expiry_secs() -> u64 {
    24 * 3600
}
fn default_max_body() -> usize {
    4 << 20
}
fn default_max_streams() -> usize {
    256
}
fn default_agent_timeout() -> u64 {
    300
}

/// A local agent: its address, how it authenticates, and its own A2A endpoint.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalAgent {
    /// Its mail address: the only address it may act as.
    pub address: String,
    /// A file whose first line is its bearer token (owner-only).
    pub token_file: PathBuf,
    /// Its Agent Card's URL (`http://host:port/.well-known/agent-card.json`): requests
    /// mailed to it are called on the interface the card declares (JSON-RPC or
    /// HTTP+JSON). None: it only calls out.
    #[serde(default)]
    pub card: Option<String>,
}

/// A remote peer a local agent may call.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemotePeer {
    /// Its mail address (the name in its local URL `/peers/ADDRESS/`).
    pub address: String,
    /// The profile to seal with (`smime`, `openpgp`, `jws`); default: the one its card
    /// names, else the gateway's `outbound.default_profile`.
    #[serde(default)]
    pub profile: Option<String>,
    /// An MLS group (its id, as `mailseal mls create` printed it): calls to this peer
    /// go to the group, sealed as MLS application messages.
    #[serde(default)]
    pub group: Option<String>,
    /// A name for its Agent Card.
    #[serde(default)]
    pub name: Option<String>,
}

impl BridgeConfig {
    /// The `[bridge]` section of a gateway configuration, read and checked.
    pub fn of(gateway: &crate::gateway::Config) -> Result<BridgeConfig, String> {
        let section = gateway
            .bridge
            .clone()
            .ok_or("the configuration has no [bridge] section")?;
        let config: BridgeConfig = toml::Value::Table(section)
            .try_into()
            .map_err(|e: toml::de::Error| format!("[bridge]: {}", e.message()))?;
        config.check()?;
        Ok(config)
    }

    /// Checks what serde cannot: TLS off loopback, unique agents and peers, tokens
    /// readable, owner-only and long enough.
    pub fn check(&self) -> Result<(), String> {
        if self.tls.is_none() && !self.listen.ip().is_loopback() {
            return Err(format!(
                "bridge.listen {}: off loopback the A2A side needs bridge.tls (cert, key)",
                self.listen
            ));
        }
        if self.agents.is_empty() {
            return Err("bridge: at least one [[bridge.agent]]".into());
        }
        let mut seen = std::collections::HashSet::new();
        for a in &self.agents {
            let addr = crate::message::Mailbox::new(&a.address);
            if !addr.is_valid_addr_spec() {
                return Err(format!("bridge.agent {}: not an address", a.address));
            }
            if !seen.insert(addr.normalized()) {
                return Err(format!("bridge.agent {}: named twice", a.address));
            }
            if let Some(card) = &a.card {
                // Agents are called on loopback or an internal network, in clear.
                if !card.starts_with("http://") {
                    return Err(format!(
                        "bridge.agent {}: card must be an http:// URL (https:// agent endpoints are not called yet)",
                        a.address
                    ));
                }
            }
        }
        let mut peers = std::collections::HashSet::new();
        for p in &self.peers {
            let addr = crate::message::Mailbox::new(&p.address);
            if !addr.is_valid_addr_spec() {
                return Err(format!("bridge.peer {}: not an address", p.address));
            }
            if !peers.insert(addr.normalized()) {
                return Err(format!("bridge.peer {}: named twice", p.address));
            }
            if let Some(profile) = &p.profile {
                profile
                    .parse::<crate::Profile>()
                    .map_err(|e| format!("bridge.peer {}: profile: {e}", p.address))?;
            }
        }
        if self.wait_secs == 0 || self.max_streams == 0 || self.max_body_bytes < 1024 {
            return Err(
                "bridge: wait_secs and max_streams at least 1, max_body_bytes at least 1024".into(),
            );
        }
        Ok(())
    }

    /// The URL the cards advertise, without a trailing slash.
    pub fn base_url(&self) -> String {
        match &self.base_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!(
                "{}://{}",
                if self.tls.is_some() { "https" } else { "http" },
                self.listen
            ),
        }
    }
}

/// Reads a token file: its first line, which must be at least 16 characters, from a
/// file no other user may read.
pub fn read_token(path: &std::path::Path) -> Result<zeroize::Zeroizing<String>, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{}: a token file must be owner-only (chmod 600)",
            path.display()
        ));
    }
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?,
    );
    let token = zeroize::Zeroizing::new(text.lines().next().unwrap_or_default().trim().to_string());
    if token.len() < 16 {
        return Err(format!(
            "{}: a bearer token of at least 16 characters",
            path.display()
        ));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str, agents: &str) -> Result<BridgeConfig, String> {
        let text = format!("listen = \"127.0.0.1:8080\"\nstate = \"s.db\"\n{extra}\n{agents}");
        let c: BridgeConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
        c.check().map(|()| c)
    }

    const ONE: &str = "[[agent]]\naddress = \"a@x.example\"\ntoken_file = \"t\"\n";

    #[test]
    fn a_loopback_bridge_with_one_agent_is_valid() {
        let c = config("", ONE).unwrap();
        assert_eq!(c.base_url(), "http://127.0.0.1:8080");
        assert_eq!(c.wait_secs, 30);
    }

    #[test]
    fn fail_off_loopback_without_tls() {
        let text = format!("listen = \"0.0.0.0:8080\"\nstate = \"s.db\"\n{ONE}");
        let c: BridgeConfig = toml::from_str(&text).unwrap();
        assert!(c.check().unwrap_err().contains("needs bridge.tls"));
    }

    #[test]
    fn fail_agents_twice_https_cards_and_unknown_keys() {
        let twice = format!("{ONE}[[agent]]\naddress = \"A@x.example\"\ntoken_file = \"u\"\n");
        assert!(config("", &twice).unwrap_err().contains("named twice"));
        let https =
            "[[agent]]\naddress = \"a@x.example\"\ntoken_file = \"t\"\ncard = \"https://x/card\"\n";
        assert!(config("", https).unwrap_err().contains("http:// URL"));
        assert!(
            config("wait = 3", ONE).is_err(),
            "an unknown key is refused"
        );
        assert!(config("", "").unwrap_err().contains("at least one"));
    }

    #[test]
    fn fail_token_files_others_can_read_or_too_short() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t");
        std::fs::write(&f, "a-long-enough-token-value\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_token(&f).unwrap_err().contains("owner-only"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            read_token(&f).unwrap().as_str(),
            "a-long-enough-token-value"
        );
        std::fs::write(&f, "short\n").unwrap();
        assert!(read_token(&f).unwrap_err().contains("at least 16"));
    }
}
