//! Shared by the benches: after criterion has run, read its estimates and print each
//! comparison as a ratio (ours / peer), so every bench reports against its peer.
#![allow(dead_code)]

use std::path::PathBuf;

fn estimate_ns(group: &str, id: &str) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")));
    let path = dir
        .join("criterion")
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.2} µs", ns / 1e3)
    }
}

/// Prints `group: ours X, peer Y, ratio R` for each (group, ours, peer).
pub fn print_ratios(rows: &[(&str, &str, &str)]) {
    println!("\nratios (median, ours / peer):");
    for (group, ours, peer) in rows {
        match (estimate_ns(group, ours), estimate_ns(group, peer)) {
            (Some(a), Some(b)) => println!(
                "  {group}: {ours} {} vs {peer} {} -> {:.2}x",
                human(a),
                human(b),
                a / b
            ),
            _ => println!("  {group}: not measured in this run"),
        }
    }
}

/// A `message/send` request from `from` to `to` whose text part is `text_len` bytes of
/// lorem ipsum.
pub fn message(from: &str, to: &str, text_len: usize) -> mailseal::message::MailA2aMessage {
    use mailseal::envelope::{Envelope, Kind, Operation};
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "bench-1");
    env.set("correlationId", "corr-1");
    env.set("idempotencyKey", "idem-1");
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(text_len)
        .collect();
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}),
    );
    mailseal::message::MailA2aMessage::new(from, &[to], env)
}

/// The MLS authentication service the benches use: one SQLite key store with a test
/// CA as its trust anchor; certifying an address first issues it an S/MIME identity
/// under that CA, so every member's leaf carries a real certification, checked as a
/// receiver checks it (a path to the anchor, the signature on the statement).
pub struct BenchAuthority {
    _dir: tempfile::TempDir,
    store: mailseal::keystore::SqliteStore,
    ca: (x509_cert::Certificate, mailseal::keystore::SecretKey),
}

impl BenchAuthority {
    pub fn new() -> Self {
        use mailseal::keystore::KeyStore;
        let dir = tempfile::tempdir().unwrap();
        let store =
            mailseal::keystore::SqliteStore::open(&dir.path().join("keys.db"), None).unwrap();
        let ca = mailseal::smime::generate(&request(None), None).unwrap();
        let pem = mailseal::keystore::identity_pem(&ca[0].certificate, &ca[0].private_key).unwrap();
        let entry = store.import(pem.as_bytes(), "bench-ca", true).unwrap();
        let ca = mailseal::keystore::issuer(&store, Some(&entry[0].fingerprint), None, None)
            .unwrap()
            .unwrap();
        BenchAuthority {
            _dir: dir,
            store,
            ca,
        }
    }

    /// The checking side, with a receiver's cache when `cache` is given.
    pub fn checker<'s>(
        &'s self,
        cache: Option<&'s mailseal::mls::VerifiedBindings>,
    ) -> mailseal::mls::StoreAuthenticator<'s> {
        let a = mailseal::mls::StoreAuthenticator::new(&self.store);
        match cache {
            Some(c) => a.cached(c),
            None => a,
        }
    }
}

fn request(email: Option<&str>) -> mailseal::smime::IdentityRequest {
    mailseal::smime::IdentityRequest {
        email: email.map(str::to_string),
        common_name: Some(email.unwrap_or("bench CA").to_string()),
        kind: mailseal::smime::KeyKind::P256,
        days: 30,
        ca: email.is_none(),
    }
}

impl mailseal::mls::Authenticator for BenchAuthority {
    fn certify(
        &self,
        address: &str,
        statement: &[u8],
    ) -> Result<mailseal::mls::Binding, mailseal::mls::MlsError> {
        use mailseal::keystore::KeyStore;
        let issuer = mailseal::smime::Issuer {
            certificate: &self.ca.0,
            key: &self.ca.1,
        };
        for id in mailseal::smime::generate(&request(Some(address)), Some(&issuer)).unwrap() {
            let pem = mailseal::keystore::identity_pem(&id.certificate, &id.private_key).unwrap();
            self.store.import(pem.as_bytes(), "bench", false).unwrap();
        }
        self.checker(None).certify(address, statement)
    }

    fn verify(
        &self,
        address: &str,
        signature_key: &[u8],
        binding: Option<&mailseal::mls::Binding>,
    ) -> Result<(), String> {
        self.checker(None).verify(address, signature_key, binding)
    }
}
