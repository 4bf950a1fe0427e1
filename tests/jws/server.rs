//! An HTTPS test server on 127.0.0.1 (rustls), with a CA the test makes (rcgen): what
//! `card fetch` and did:web resolution talk to, including the hostile answers.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// What the server answers for a path.
#[derive(Clone)]
pub enum Answer {
    /// 200 with this body and `Cache-Control: max-age=N` when given.
    Body(Vec<u8>, Option<u64>),
    /// A redirect to this location.
    Redirect(String),
    /// 200 with `Content-Length: N` and N bytes of JSON-ish filler, or (chunked) the
    /// same without a length.
    Huge(usize, bool),
    /// 404.
    NotFound,
    /// The head, then nothing for this many seconds (a server that stalls).
    Stall(u64),
}

/// The routes: path -> answer, changeable while the server runs.
pub type Routes = Arc<Mutex<Vec<(String, Answer)>>>;

/// A running server.
pub struct Server {
    pub port: u16,
    /// The CA certificate (PEM) that issued its certificate.
    pub ca_pem: String,
    pub routes: Routes,
}

/// How the server's certificate is made.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cert {
    /// For `localhost`, valid now.
    Good,
    /// For `localhost`, expired in 2020.
    Expired,
    /// For `other.example` (the wrong name).
    WrongName,
}

pub fn start(cert: Cert) -> Server {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "mailseal test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let name = if cert == Cert::WrongName {
        "other.example"
    } else {
        "localhost"
    };
    let mut leaf_params = CertificateParams::new(vec![name.to_string()]).unwrap();
    if cert == Cert::Expired {
        leaf_params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        leaf_params.not_after = rcgen::date_time_ymd(2020, 1, 1);
    }
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
    let chain = vec![CertificateDer::from(leaf.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes: Routes = Arc::default();
    let served = routes.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let config = config.clone();
            let routes = served.clone();
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match tls.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                let answer = routes
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, a)| a.clone())
                    .unwrap_or(Answer::NotFound);
                let _ = respond(&mut tls, answer);
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    Server {
        port,
        ca_pem: ca.pem(),
        routes,
    }
}

fn respond(tls: &mut impl Write, answer: Answer) -> std::io::Result<()> {
    match answer {
        Answer::Body(body, max_age) => {
            let cache = max_age
                .map(|a| format!("Cache-Control: max-age={a}\r\n"))
                .unwrap_or_default();
            write!(
                tls,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{cache}Connection: close\r\n\r\n",
                body.len()
            )?;
            tls.write_all(&body)
        }
        Answer::Redirect(to) => write!(
            tls,
            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        Answer::Huge(n, chunked) => {
            let block = vec![b' '; 64 * 1024];
            if chunked {
                write!(
                    tls,
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                )?;
                let mut sent = 0;
                while sent < n {
                    write!(tls, "{:x}\r\n", block.len())?;
                    tls.write_all(&block)?;
                    tls.write_all(b"\r\n")?;
                    sent += block.len();
                }
                tls.write_all(b"0\r\n\r\n")
            } else {
                write!(
                    tls,
                    "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"
                )?;
                let mut sent = 0;
                while sent < n {
                    tls.write_all(&block)?;
                    sent += block.len();
                }
                Ok(())
            }
        }
        Answer::Stall(seconds) => {
            write!(tls, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{{")?;
            tls.flush()?;
            std::thread::sleep(std::time::Duration::from_secs(seconds));
            Ok(())
        }
        Answer::NotFound => write!(
            tls,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    }
}

impl Server {
    pub fn route(&self, path: &str, answer: Answer) {
        let mut r = self.routes.lock().unwrap();
        r.retain(|(p, _)| p != path);
        r.push((path.to_string(), answer));
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    /// Fetch options that trust this server's CA and allow loopback.
    pub fn options(&self) -> mailseal::https::FetchOptions {
        let mut o = mailseal::https::FetchOptions::default();
        o.system_roots = false;
        o.allow_private = true;
        o.add_roots_pem(self.ca_pem.as_bytes()).unwrap();
        o
    }
}
