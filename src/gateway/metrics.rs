//! Prometheus metrics: messages by direction and verdict, the queue depth, delivery
//! latency, bounces and connections, served as the text exposition format on
//! `GET /metrics`.
//!
//! Written by hand rather than with a metrics crate: a handful of atomic counters and
//! one fixed-bucket histogram, and an HTTP responder that answers one request per
//! connection on a loopback port, is less than a registry's setup, and keeps the
//! gateway's dependencies to those that carry mail.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Delivery latency buckets, seconds (from acceptance to the next hop's 250).
const BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 300.0, 3600.0];

/// The gateway's counters.
#[derive(Default)]
pub struct Metrics {
    messages: Mutex<BTreeMap<(String, String), u64>>,
    queue_depth: AtomicU64,
    bounced: AtomicU64,
    connections: AtomicU64,
    refused_connections: AtomicU64,
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_ms: AtomicU64,
}

impl Metrics {
    /// A message decided: `direction` is the listener's mode, `verdict` the decision.
    pub fn message(&self, direction: &str, verdict: &str) {
        let mut m = self.messages.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((direction.to_string(), verdict.to_string()))
            .or_default() += 1;
    }

    /// A recipient delivered, `created` (Unix seconds) being when it was queued.
    pub fn delivered(&self, _attempt: Duration, created: i64) {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let secs = (now - created).max(0) as f64;
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.latency_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_ms
            .fetch_add((secs * 1000.0) as u64, Ordering::Relaxed);
    }

    /// Recipients bounced.
    pub fn bounced(&self, n: u64) {
        self.bounced.fetch_add(n, Ordering::Relaxed);
    }

    /// The spool's depth, as last read.
    pub fn set_queue_depth(&self, depth: u64) {
        self.queue_depth.store(depth, Ordering::Relaxed);
    }

    /// A connection accepted (`true`) or refused over a cap.
    pub fn connection(&self, accepted: bool) {
        if accepted {
            &self.connections
        } else {
            &self.refused_connections
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP mailseal_messages_total Messages decided, by direction and verdict.\n# TYPE mailseal_messages_total counter\n");
        for ((d, v), n) in self
            .messages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            out.push_str(&format!(
                "mailseal_messages_total{{direction=\"{d}\",verdict=\"{v}\"}} {n}\n"
            ));
        }
        let gauge = |out: &mut String, name: &str, help: &str, kind: &str, v: u64| {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
            ));
        };
        gauge(
            &mut out,
            "mailseal_queue_depth",
            "Messages in the spool.",
            "gauge",
            self.queue_depth.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "mailseal_bounced_total",
            "Recipients bounced.",
            "counter",
            self.bounced.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "mailseal_connections_total",
            "SMTP connections accepted.",
            "counter",
            self.connections.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "mailseal_connections_refused_total",
            "SMTP connections refused over a cap.",
            "counter",
            self.refused_connections.load(Ordering::Relaxed),
        );
        out.push_str("# HELP mailseal_delivery_seconds From acceptance to the next hop's acceptance.\n# TYPE mailseal_delivery_seconds histogram\n");
        for (i, b) in BUCKETS.iter().enumerate() {
            out.push_str(&format!(
                "mailseal_delivery_seconds_bucket{{le=\"{b}\"}} {}\n",
                self.latency_buckets[i].load(Ordering::Relaxed)
            ));
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        out.push_str(&format!(
            "mailseal_delivery_seconds_bucket{{le=\"+Inf\"}} {count}\nmailseal_delivery_seconds_sum {}\nmailseal_delivery_seconds_count {count}\n",
            self.latency_sum_ms.load(Ordering::Relaxed) as f64 / 1000.0
        ));
        out
    }
}

/// Serves `GET /metrics` on `listener` until the task is dropped.
pub(crate) async fn serve(listener: tokio::net::TcpListener, metrics: std::sync::Arc<Metrics>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n = match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await
            {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let ok = buf[..n].starts_with(b"GET /metrics ");
            let (status, body) = if ok {
                ("200 OK", metrics.render())
            } else {
                ("404 Not Found", "GET /metrics\n".to_string())
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
        });
    }
}
