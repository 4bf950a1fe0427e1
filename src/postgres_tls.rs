//! TLS for PostgreSQL on rustls (issue #17): a store or state URL with
//! `sslmode=verify-full` connects over TLS and verifies the server's certificate and
//! name against the CA certificates of `sslrootcert=FILE` (PEM). The `postgres` crate
//! reads neither parameter and has no rustls connector of its own; this module is
//! that connector (the `tokio-postgres` TLS traits over `tokio-rustls`).
//!
//! Other modes keep their meaning in the `postgres` crate: `disable` (the default
//! here) never uses TLS; `prefer` and `require` cannot be had without verification,
//! which rustls does not do, so they are refused with a pointer to `verify-full`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a URL asks for.
pub(crate) enum Mode {
    /// No TLS parameter (or `sslmode=disable`): the URL as given.
    Plain(String),
    /// `sslmode=verify-full`: the URL without the TLS parameters, and the connector.
    VerifyFull(String, Rustls),
}

/// Reads `sslmode` and `sslrootcert` from the URL's query.
pub(crate) fn mode(url: &str) -> Result<Mode, String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(Mode::Plain(url.to_string()));
    };
    let mut sslmode = None;
    let mut rootcert = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sslmode", v)) => sslmode = Some(v.to_string()),
            Some(("sslrootcert", v)) => rootcert = Some(v.to_string()),
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    match sslmode.as_deref() {
        None | Some("disable") => Ok(Mode::Plain(url)),
        Some("verify-full") => {
            let file =
                rootcert.ok_or("sslmode=verify-full needs sslrootcert=FILE (the CA's PEM)")?;
            Ok(Mode::VerifyFull(url, Rustls::with_roots(&file)?))
        }
        Some(other) => Err(format!(
            "sslmode={other} would not verify the server: use sslmode=verify-full&sslrootcert=FILE"
        )),
    }
}

/// A connector verifying the server against fixed roots.
#[derive(Clone)]
pub(crate) struct Rustls(Arc<rustls::ClientConfig>);

impl Rustls {
    fn with_roots(file: &str) -> Result<Rustls, String> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(file)
            .map_err(|e| format!("sslrootcert {file}: {e}"))?;
        for cert in certs {
            let cert = cert.map_err(|e| format!("sslrootcert {file}: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("sslrootcert {file}: {e}"))?;
        }
        if roots.is_empty() {
            return Err(format!("sslrootcert {file}: no certificate in it"));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Rustls(Arc::new(config)))
    }
}

impl<S> MakeTlsConnect<S> for Rustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type TlsConnect = Connect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<Connect> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Connect {
            config: self.0.clone(),
            name,
        })
    }
}

/// One handshake's connector.
pub(crate) struct Connect {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Stream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let tls = tokio_rustls::TlsConnector::from(self.config)
                .connect(self.name, stream)
                .await?;
            Ok(Stream(tls))
        })
    }
}

/// The TLS stream.
pub(crate) struct Stream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Stream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Stream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for Stream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM channel binding is not offered: the certificate check above is what
        // binds the server.
        ChannelBinding::none()
    }
}
