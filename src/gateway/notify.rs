//! The systemd service protocol (`sd_notify`): `READY=1` once every listener is bound,
//! `WATCHDOG=1` while the runtime answers, `STOPPING=1` on shutdown. With `Type=notify`
//! and `WatchdogSec=` in the unit (`dist/mailseal-gateway.service`), systemd starts what
//! depends on the gateway only once it listens, and restarts a gateway that stopped
//! answering. Without `NOTIFY_SOCKET` (not under systemd) every call does nothing.
//!
//! Written here rather than taken from a crate: it is one datagram to a Unix socket
//! whose path the environment names (the protocol's whole wire format), and the crates
//! that do it reach for `libc` where `std` suffices.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Sends `state` (`READY=1`, ...) to the service manager, if there is one.
pub(crate) fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(socket) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let sent = match bytes.strip_prefix(b"@") {
        // An abstract socket (Linux).
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|addr| socket.send_to_addr(state.as_bytes(), &addr))
        }
        None => socket.send_to(state.as_bytes(), &path),
    };
    if let Err(e) = sent {
        tracing::warn!(error = %e, "cannot tell systemd {state}");
    }
}

/// How often to say `WATCHDOG=1`: half the interval systemd asked for
/// (`WATCHDOG_USEC`), if it asked this process (`WATCHDOG_PID`, when set, is ours).
pub(crate) fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}
