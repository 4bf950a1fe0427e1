//! One HTTPS client for what the crate fetches (Agent Cards, did:web documents), on
//! rustls: a GET with the limits a fetch of attacker-chosen URLs needs.
//!
//! - TLS 1.2 and 1.3 only (rustls has nothing older), certificates checked against the
//!   system's roots plus any given (`--ca`), the host name always checked.
//! - No connection to loopback, private, link-local, shared, multicast or unspecified
//!   addresses unless [`FetchOptions::allow_private`]: the host's addresses are checked
//!   after resolution and the connection goes to the address checked, so a name that
//!   resolves to an internal service cannot be used to reach it.
//! - A size cap on the body (checked against `Content-Length` before reading, and while
//!   reading), one deadline for the whole fetch, at most three redirects and only to
//!   the same host over HTTPS.
//! - A body without a length must end with TLS close_notify: a truncated one is an
//!   error, not a shorter document.
//!
//! Hand-written above httparse (the response head) because every general client
//! (reqwest, ureq) resolves names itself, where the address check must sit between
//! resolution and connection, and brings an async runtime or a second TLS stack along.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The URL is not an `https://` URL we fetch.
    #[error("{url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// Every address of the host is one we do not connect to.
    #[error("{host} resolves to {address}, a loopback, private or link-local address (allowed only with --allow-private)")]
    PrivateAddress {
        /// The host.
        host: String,
        /// The first address refused.
        address: IpAddr,
    },
    /// Resolution, connection or I/O failed.
    #[error("{host}: {source}")]
    Io {
        /// The host.
        host: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake or record layer failed (certificate, host name, protocol).
    #[error("{host}: TLS: {source}")]
    Tls {
        /// The host.
        host: String,
        /// The rustls error.
        #[source]
        source: rustls::Error,
    },
    /// The server's answer is not a usable HTTP response.
    #[error("{host}: {reason}")]
    Http {
        /// The host.
        host: String,
        /// Why.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{url}: HTTP status {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// A redirect to another host or scheme, or too many.
    #[error("{url}: redirect to {location} refused ({reason})")]
    Redirect {
        /// The URL redirected from.
        url: String,
        /// Where to.
        location: String,
        /// Why refused.
        reason: &'static str,
    },
    /// The body is larger than the cap.
    #[error("{url}: the response is larger than {limit} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The cap.
        limit: usize,
    },
    /// The deadline passed.
    #[error("{url}: no complete answer within {seconds} s")]
    Timeout {
        /// The URL.
        url: String,
        /// The deadline.
        seconds: u64,
    },
    /// A `--ca` file holds no certificate.
    #[error("no PEM certificate in the CA file")]
    NoRoots,
}

impl crate::error::Classify for FetchError {
    fn a2a_error(&self) -> crate::error::A2aErrorType {
        crate::error::A2aErrorType::InternalError
    }
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            Self::Url { .. } | Self::NoRoots => crate::error::ErrorKind::InvalidArgument,
            Self::PrivateAddress { .. } | Self::Redirect { .. } | Self::TooLarge { .. } => {
                crate::error::ErrorKind::Policy
            }
            Self::Tls { .. } => crate::error::ErrorKind::Authentication,
            _ => crate::error::ErrorKind::Other,
        }
    }
}

/// How to fetch.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FetchOptions {
    /// Trust the system's roots (default: yes).
    pub system_roots: bool,
    /// More trusted roots (DER), for a private CA (`--ca`).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Connect to loopback, private and link-local addresses (default: no; tests).
    pub allow_private: bool,
    /// Largest body, bytes (default 1 MiB).
    pub max_bytes: usize,
    /// The whole fetch, redirects included (default 10 s).
    pub timeout: Duration,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            system_roots: true,
            extra_roots: Vec::new(),
            allow_private: false,
            max_bytes: 1024 * 1024,
            timeout: Duration::from_secs(10),
        }
    }
}

impl FetchOptions {
    /// Adds the certificates of a PEM file as trusted roots.
    pub fn add_roots_pem(&mut self, pem: &[u8]) -> Result<(), FetchError> {
        use rustls::pki_types::pem::PemObject;
        let before = self.extra_roots.len();
        for cert in CertificateDer::pem_slice_iter(pem).flatten() {
            self.extra_roots.push(cert.into_owned());
        }
        if self.extra_roots.len() == before {
            return Err(FetchError::NoRoots);
        }
        Ok(())
    }
}

/// A fetched body and what the server said about caching it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Fetched {
    /// The URL the body came from (after same-host redirects).
    pub url: String,
    /// The body.
    pub body: Vec<u8>,
    /// `Cache-Control: max-age`, seconds (`no-store`/`no-cache`: 0).
    pub max_age: Option<u64>,
}

/// Whether `ip` is an address a fetch of a public URL must not reach.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64/10, shared
                || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18/15, benchmarking
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] == 0x64 && s[1] == 0xff9b) // NAT64 to anything
                || s[0] == 0x2001 && s[1] == 0x0db8 // documentation
        }
    }
}

/// GETs `url` under `opts`.
pub fn get(url: &str, opts: &FetchOptions) -> Result<Fetched, FetchError> {
    let started = Instant::now();
    let config = Arc::new(client_config(opts)?);
    let mut current = parse(url)?;
    for _ in 0..=3 {
        match get_once(&current, opts, &config, started)? {
            Answer::Body(body, max_age) => {
                return Ok(Fetched {
                    url: current.to_string(),
                    body,
                    max_age,
                })
            }
            Answer::Redirect(location) => {
                let refuse = |reason| FetchError::Redirect {
                    url: current.to_string(),
                    location: location.chars().take(200).collect(),
                    reason,
                };
                let next = current.join(&location).map_err(|_| refuse("not a URL"))?;
                if next.scheme() != "https" {
                    return Err(refuse("not https"));
                }
                if next.host_str() != current.host_str()
                    || next.port_or_known_default() != current.port_or_known_default()
                {
                    return Err(refuse("another host"));
                }
                current = next;
            }
        }
    }
    Err(FetchError::Redirect {
        url: url.to_string(),
        location: current.to_string(),
        reason: "more than three redirects",
    })
}

fn parse(url: &str) -> Result<url::Url, FetchError> {
    let bad = |reason: &str| FetchError::Url {
        url: url.chars().take(200).collect(),
        reason: reason.into(),
    };
    let u = url::Url::parse(url).map_err(|_| bad("not a URL"))?;
    if u.scheme() != "https" {
        return Err(bad("only https:// URLs are fetched"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad("a URL with credentials"));
    }
    if u.host_str().is_none() {
        return Err(bad("no host"));
    }
    Ok(u)
}

fn client_config(opts: &FetchOptions) -> Result<rustls::ClientConfig, FetchError> {
    let mut roots = rustls::RootCertStore::empty();
    if opts.system_roots {
        // Unreadable system certificates are skipped: the handshake then fails on an
        // unknown issuer, which names the problem.
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
    }
    for cert in &opts.extra_roots {
        roots.add(cert.clone()).map_err(|source| FetchError::Tls {
            host: "(--ca)".into(),
            source,
        })?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|source| FetchError::Tls {
            host: "(config)".into(),
            source,
        })?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

enum Answer {
    Body(Vec<u8>, Option<u64>),
    Redirect(String),
}

fn remaining(
    started: Instant,
    opts: &FetchOptions,
    url: &url::Url,
) -> Result<Duration, FetchError> {
    opts.timeout
        .checked_sub(started.elapsed())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| FetchError::Timeout {
            url: url.to_string(),
            seconds: opts.timeout.as_secs(),
        })
}

/// The addresses to connect to: those of the host's that the options allow, in the
/// resolver's order (an error naming the first refused when none is allowed).
fn addresses(url: &url::Url, opts: &FetchOptions) -> Result<Vec<SocketAddr>, FetchError> {
    let host = url.host_str().unwrap_or_default().to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (bare, port)
        .to_socket_addrs()
        .map_err(|source| FetchError::Io {
            host: host.clone(),
            source,
        })?
        .collect();
    let allowed: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| opts.allow_private || !is_internal(a.ip()))
        .collect();
    if !allowed.is_empty() {
        return Ok(allowed);
    }
    match addrs.first() {
        Some(a) => Err(FetchError::PrivateAddress {
            host,
            address: a.ip(),
        }),
        None => Err(FetchError::Io {
            host,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
        }),
    }
}

/// A TCP connection to the first of `addrs` that answers before the deadline.
fn connect(
    addrs: &[SocketAddr],
    url: &url::Url,
    opts: &FetchOptions,
    started: Instant,
) -> Result<TcpStream, FetchError> {
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(a, remaining(started, opts, url)?) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(FetchError::Io {
        host: url.host_str().unwrap_or_default().to_string(),
        source: last.unwrap_or_else(|| std::io::Error::other("no address")),
    })
}

fn get_once(
    url: &url::Url,
    opts: &FetchOptions,
    config: &Arc<rustls::ClientConfig>,
    started: Instant,
) -> Result<Answer, FetchError> {
    let host = url.host_str().unwrap_or_default().to_string();
    let io = |source: std::io::Error| FetchError::Io {
        host: host.clone(),
        source,
    };
    let tcp = connect(&addresses(url, opts)?, url, opts, started)?;
    let name = ServerName::try_from(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    )
    .map_err(|_| FetchError::Url {
        url: url.to_string(),
        reason: "not a valid server name".into(),
    })?;
    let conn =
        rustls::ClientConnection::new(config.clone(), name).map_err(|source| FetchError::Tls {
            host: host.clone(),
            source,
        })?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: mailseal/{}\r\nAccept: application/json\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    let classify = |e: std::io::Error, url: &url::Url| -> FetchError {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            return FetchError::Timeout {
                url: url.to_string(),
                seconds: opts.timeout.as_secs(),
            };
        }
        match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            Some(t) => FetchError::Tls {
                host: host.clone(),
                source: t.clone(),
            },
            None => FetchError::Io {
                host: host.clone(),
                source: e,
            },
        }
    };
    let set_deadline = |tls: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>| {
        let left = remaining(started, opts, url)?;
        tls.sock.set_read_timeout(Some(left)).map_err(io)?;
        tls.sock.set_write_timeout(Some(left)).map_err(io)
    };
    set_deadline(&mut tls)?;
    tls.write_all(request.as_bytes())
        .and_then(|()| tls.flush())
        .map_err(|e| classify(e, url))?;
    // The head, up to 64 KiB.
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = [0u8; 16 * 1024];
    let (status, head_len, headers) = loop {
        set_deadline(&mut tls)?;
        let n = tls.read(&mut chunk).map_err(|e| classify(e, url))?;
        if n == 0 {
            return Err(FetchError::Http {
                host: host.clone(),
                reason: "the connection closed before the response head ended".into(),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut slots = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut slots);
        match response.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let headers: Vec<(String, String)> = response
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).trim().to_string(),
                        )
                    })
                    .collect();
                break (response.code.unwrap_or(0), len, headers);
            }
            Ok(httparse::Status::Partial) if buf.len() < 64 * 1024 => continue,
            Ok(httparse::Status::Partial) => {
                return Err(FetchError::Http {
                    host: host.clone(),
                    reason: "a response head larger than 64 KiB".into(),
                })
            }
            Err(e) => {
                return Err(FetchError::Http {
                    host: host.clone(),
                    reason: format!("not an HTTP/1.1 response: {e}"),
                })
            }
        }
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    if matches!(status, 301 | 302 | 303 | 307 | 308) {
        let location = header("location").ok_or_else(|| FetchError::Http {
            host: host.clone(),
            reason: format!("redirect {status} without Location"),
        })?;
        return Ok(Answer::Redirect(location.to_string()));
    }
    if status != 200 {
        return Err(FetchError::Status {
            url: url.to_string(),
            status,
        });
    }
    let too_large = || FetchError::TooLarge {
        url: url.to_string(),
        limit: opts.max_bytes,
    };
    let mut body = buf.split_off(head_len);
    let chunked = header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    let length = match header("content-length") {
        Some(v) if !chunked => Some(v.parse::<usize>().map_err(|_| FetchError::Http {
            host: host.clone(),
            reason: "an unreadable Content-Length".into(),
        })?),
        _ => None,
    };
    if length.is_some_and(|l| l > opts.max_bytes) {
        return Err(too_large());
    }
    // Chunked framing adds a little; the decoded body is capped below.
    let raw_cap = if chunked {
        opts.max_bytes + opts.max_bytes / 8 + 4096
    } else {
        opts.max_bytes
    };
    loop {
        if let Some(l) = length {
            if body.len() >= l {
                body.truncate(l);
                break;
            }
        }
        if chunked && chunked_complete(&body) {
            break;
        }
        if body.len() > raw_cap {
            return Err(too_large());
        }
        set_deadline(&mut tls)?;
        let n = match tls.read(&mut chunk) {
            Ok(n) => n,
            Err(e) => return Err(classify(e, url)),
        };
        if n == 0 {
            // A clean close (close_notify): the end of a body without a length.
            if length.is_some() || chunked {
                return Err(FetchError::Http {
                    host: host.clone(),
                    reason: "the connection closed before the body ended".into(),
                });
            }
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    if chunked {
        body = dechunk(&body).ok_or_else(|| FetchError::Http {
            host: host.clone(),
            reason: "a broken chunked body".into(),
        })?;
    }
    if body.len() > opts.max_bytes {
        return Err(too_large());
    }
    Ok(Answer::Body(body, max_age(header("cache-control"))))
}

/// `max-age` of a Cache-Control value (`no-store` and `no-cache`: 0).
fn max_age(value: Option<&str>) -> Option<u64> {
    let value = value?;
    let mut age = None;
    for d in value.split(',').map(str::trim) {
        let lower = d.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(0);
        }
        if let Some(n) = lower.strip_prefix("max-age=") {
            age = n.trim_matches('"').parse().ok();
        }
    }
    age
}

/// Whether a chunked body's last chunk (and trailer end) has arrived.
fn chunked_complete(body: &[u8]) -> bool {
    // A complete body ends with the empty line after the last chunk: only then is it
    // worth decoding (not after every read).
    body.ends_with(b"\r\n\r\n") && dechunk(body).is_some()
}

/// The decoded body of a complete chunked encoding, or `None`.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            // Trailers end with an empty line.
            let mut rest = body;
            loop {
                let end = rest.windows(2).position(|w| w == b"\r\n")?;
                if end == 0 {
                    return Some(out);
                }
                rest = &rest[end + 2..];
            }
        }
        if body.len() < size.checked_add(2)? {
            return None;
        }
        out.extend_from_slice(&body[..size]);
        if &body[size..size + 2] != b"\r\n" {
            return None;
        }
        body = &body[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fc00::1",
            "::ffff:127.0.0.1",
            "::",
        ] {
            assert!(is_internal(a.parse().unwrap()), "{a}");
        }
        for a in ["93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"] {
            assert!(!is_internal(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn chunked_and_cache_control() {
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
        assert!(dechunk(b"3\r\nabc\r\n").is_none());
        assert!(dechunk(b"zz\r\n").is_none());
        assert!(dechunk(b"ffffffffffffffffff\r\n").is_none());
        assert_eq!(max_age(Some("public, max-age=600")), Some(600));
        assert_eq!(max_age(Some("no-store")), Some(0));
        assert_eq!(max_age(None), None);
    }

    #[test]
    fn only_https_urls() {
        for bad in [
            "http://example.com/",
            "file:///etc/passwd",
            "https://user:pw@example.com/",
            "not a url",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
