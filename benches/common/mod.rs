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

/// Whether criterion's command line selects `name` for measuring: not listing,
/// testing or profiling, and no filter or a filter (a regular expression, as
/// criterion reads it) that matches `name`.
pub fn selected(name: &str) -> bool {
    // criterion's options that take a value; the rest are flags.
    const VALUED: &[&str] = &[
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--color",
        "--format",
        "--output-format",
        "--plotting-backend",
        "--sampling-mode",
        "--profile-time",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args
        .iter()
        .any(|a| ["--list", "--test", "--profile-time"].contains(&a.as_str()))
    {
        return false;
    }
    let mut filters = Vec::new();
    let mut skip = false;
    for a in &args {
        if std::mem::take(&mut skip) {
            continue;
        }
        if a.starts_with('-') {
            skip = VALUED.contains(&a.as_str());
        } else {
            filters.push(a);
        }
    }
    filters.is_empty()
        || filters
            .iter()
            .any(|f| regex::Regex::new(f).is_ok_and(|r| r.is_match(name)))
}

/// Ours against a peer timed in alternation, the ratio that criterion's separate groups
/// cannot give on a machine whose speed drifts (this VM's moved by up to 40% between
/// runs minutes apart): `rounds` rounds, each one timed batch of ours and one of the
/// peer's, the order swapped every round. Each closure runs its batch (whatever setup
/// it needs outside its own timing) and returns the time of the batch's operations;
/// both must run the same number of operations. Prints the medians and the median of
/// the per-round ratios with its interquartile range.
pub fn paired_ratio(
    label: &str,
    rounds: usize,
    ops: usize,
    mut ours: impl FnMut() -> std::time::Duration,
    mut peer: impl FnMut() -> std::time::Duration,
) {
    if !selected(label) {
        return;
    }
    // One unmeasured round each: caches, allocator and page faults settled.
    ours();
    peer();
    let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let (x, y) = if i % 2 == 0 {
            let x = ours();
            (x, peer())
        } else {
            let y = peer();
            (ours(), y)
        };
        let (x, y) = (x.as_secs_f64(), y.as_secs_f64());
        a.push(x / ops as f64);
        b.push(y / ops as f64);
        r.push(x / y);
    }
    let median = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    println!(
        "paired {label}: ours {}, peer {}, ratio {:.2}x (interquartile {:.2}x to {:.2}x; {rounds} alternating rounds of {ops})",
        human(median(&mut a, 0.5) * 1e9),
        human(median(&mut b, 0.5) * 1e9),
        median(&mut r, 0.5),
        median(&mut r, 0.25),
        median(&mut r, 0.75),
    );
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
