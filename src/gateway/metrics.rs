//! Prometheus metrics: messages by direction and verdict, refusals by status, the
//! queue (depth, oldest entry's age), deliveries (latency), deferrals and bounces by
//! reason class, the spool's database and connections, served as the text exposition
//! format on `GET /metrics`.
//!
//! Written by hand rather than with a metrics crate: a handful of atomic counters and
//! one fixed-bucket histogram, and an HTTP responder that answers one request per
//! connection on a loopback port, is less than a registry's setup, and keeps the
//! gateway's dependencies to those that carry mail.
//!
//! Every label value is a `&'static str` of the gateway's own: a reply's text, an
//! address or anything else a client or a next hop wrote never becomes a label, so the
//! number of series stays fixed whatever they send.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Delivery latency buckets, seconds (from acceptance to the next hop's 250): a next
/// hop on the same machine answers in milliseconds, a retried message in minutes.
const BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
    3600.0,
];

/// The reason classes of deferrals and bounces: the class and subject of an enhanced
/// status code (RFC 3463 section 3.1: `x.1` addressing, `x.2` mailbox, `x.3` mail
/// system, `x.4` network and routing, `x.5` protocol, `x.6` content, `x.7` security
/// or policy, `x.0` other), for temporary (4) and permanent (5) failures.
const CLASSES: [[&str; 8]; 2] = [
    ["4.0", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7"],
    ["5.0", "5.1", "5.2", "5.3", "5.4", "5.5", "5.6", "5.7"],
];

/// The reason class of a failure no reply stated: the next hop could not be reached,
/// TLS or its login failed, or time ran out.
pub const NO_REPLY: &str = "connection";

/// The class of an enhanced status code (`5.1.1` is `5.1`), if it is one of
/// `CLASSES`.
pub fn status_class(status: &str) -> Option<&'static str> {
    let mut parts = status.split('.');
    let (class, subject, detail) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || detail.is_empty()
        || detail.len() > 3
        || !detail.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let row = match class {
        "4" => &CLASSES[0],
        "5" => &CLASSES[1],
        _ => return None,
    };
    let subject: usize = subject.parse().ok().filter(|s: &usize| *s < 8)?;
    Some(row[subject])
}

/// The reason class of a delivery failure from its text: a reply (`450 4.2.1 ...`)
/// counts under its enhanced status code's class, or under `4.0` or `5.0` when it
/// states none (or another class than its code's); anything else under [`NO_REPLY`].
pub fn reason_class(failure: &str) -> &'static str {
    let mut words = failure.split_whitespace();
    let code = words.next().unwrap_or_default();
    let row = match code.as_bytes() {
        [b'4', b'0'..=b'9', b'0'..=b'9'] => 0,
        [b'5', b'0'..=b'9', b'0'..=b'9'] => 1,
        _ => return NO_REPLY,
    };
    match words.next().and_then(status_class) {
        Some(c) if c.as_bytes()[0] == code.as_bytes()[0] => c,
        _ => CLASSES[row][0],
    }
}

/// The gateway's counters.
#[derive(Default)]
pub struct Metrics {
    messages: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    refused: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    deferred: Mutex<BTreeMap<&'static str, u64>>,
    bounced: Mutex<BTreeMap<&'static str, u64>>,
    queue_depth: AtomicU64,
    /// The oldest queued entry's acceptance, Unix seconds (0: none, or not read yet).
    oldest: AtomicI64,
    /// Milliseconds the spool's database has been unreachable (0: it answers).
    database_down_ms: AtomicU64,
    connections: AtomicU64,
    refused_connections: AtomicU64,
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_us: AtomicU64,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    let mut m = map.lock().unwrap_or_else(|p| p.into_inner());
    *m.entry(key).or_default() += 1;
}

impl Metrics {
    /// A message decided: `direction` is the listener's mode, `verdict` the decision.
    pub fn message(&self, direction: &'static str, verdict: &'static str) {
        bump(&self.messages, (direction, verdict));
    }

    /// A message refused (5xx) or deferred (4xx) to its client, with the enhanced
    /// status code the client was given.
    pub fn refused(&self, direction: &'static str, status: &'static str) {
        bump(&self.refused, (direction, status));
    }

    /// A recipient delivered, `latency` after the message was accepted.
    pub fn delivered(&self, latency: Duration) {
        let secs = latency.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.latency_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// A recipient's delivery attempt deferred, for a reason of `class`
    /// ([`reason_class`]).
    pub fn deferred(&self, class: &'static str) {
        bump(&self.deferred, class);
    }

    /// A recipient bounced, for a reason of `class` ([`status_class`], [`reason_class`]).
    pub fn bounced(&self, class: &'static str) {
        bump(&self.bounced, class);
    }

    /// The spool as last read: its depth and when its oldest entry was accepted (Unix
    /// seconds), each `None` when it could not be read (the last value stays).
    pub fn set_queue(&self, depth: Option<u64>, oldest: Option<Option<i64>>) {
        if let Some(d) = depth {
            self.queue_depth.store(d, Ordering::Relaxed);
        }
        if let Some(o) = oldest {
            self.oldest.store(o.unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// How long the spool's database has been unreachable (`None`: it answers).
    pub fn set_database_down(&self, down: Option<Duration>) {
        let ms = down.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.database_down_ms.store(ms, Ordering::Relaxed);
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

    /// The exposition text, the oldest entry's age taken at `now` (Unix seconds).
    pub fn render_at(&self, now: i64) -> String {
        let mut out = String::new();
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        let lock = |m: &Mutex<BTreeMap<&'static str, u64>>| {
            m.lock().unwrap_or_else(|p| p.into_inner()).clone()
        };
        head(
            &mut out,
            "mailseal_messages_total",
            "counter",
            "Messages decided, by direction and verdict.",
        );
        for ((d, v), n) in self
            .messages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "mailseal_messages_total{{direction=\"{d}\",verdict=\"{v}\"}} {n}"
            );
        }
        head(
            &mut out,
            "mailseal_refused_total",
            "counter",
            "Messages refused (5xx) or deferred (4xx) to their client, by direction and the enhanced status code it was given.",
        );
        for ((d, s), n) in self
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "mailseal_refused_total{{direction=\"{d}\",status=\"{s}\"}} {n}"
            );
        }
        head(
            &mut out,
            "mailseal_deferred_total",
            "counter",
            "Recipients whose delivery attempt failed for now (retried later), by reason class: the enhanced status code's class and subject, or connection when no reply said.",
        );
        for (r, n) in lock(&self.deferred) {
            let _ = writeln!(out, "mailseal_deferred_total{{reason=\"{r}\"}} {n}");
        }
        head(
            &mut out,
            "mailseal_bounced_total",
            "counter",
            "Recipients bounced (refused by the next hop, or given up on), by reason class.",
        );
        for (r, n) in lock(&self.bounced) {
            let _ = writeln!(out, "mailseal_bounced_total{{reason=\"{r}\"}} {n}");
        }
        let single = |out: &mut String, name: &str, kind: &str, help: &str, v: &str| {
            head(out, name, kind, help);
            let _ = writeln!(out, "{name} {v}");
        };
        single(
            &mut out,
            "mailseal_queue_depth",
            "gauge",
            "Messages in the spool.",
            &self.queue_depth.load(Ordering::Relaxed).to_string(),
        );
        let oldest = self.oldest.load(Ordering::Relaxed);
        let age = if oldest > 0 {
            now.saturating_sub(oldest).max(0)
        } else {
            0
        };
        single(
            &mut out,
            "mailseal_queue_oldest_age_seconds",
            "gauge",
            "How long the oldest message in the spool has been there (0: none).",
            &age.to_string(),
        );
        let down_ms = self.database_down_ms.load(Ordering::Relaxed);
        single(
            &mut out,
            "mailseal_database_up",
            "gauge",
            "Whether the spool's database answers (1; always for a directory spool) or not (0).",
            if down_ms == 0 { "1" } else { "0" },
        );
        single(
            &mut out,
            "mailseal_database_down_seconds",
            "gauge",
            "How long the spool's database has been unreachable (0: it answers).",
            &(down_ms as f64 / 1000.0).to_string(),
        );
        single(
            &mut out,
            "mailseal_connections_total",
            "counter",
            "SMTP connections accepted.",
            &self.connections.load(Ordering::Relaxed).to_string(),
        );
        single(
            &mut out,
            "mailseal_connections_refused_total",
            "counter",
            "SMTP connections refused over a cap.",
            &self.refused_connections.load(Ordering::Relaxed).to_string(),
        );
        head(
            &mut out,
            "mailseal_delivery_seconds",
            "histogram",
            "From acceptance to the next hop's acceptance, per recipient.",
        );
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "mailseal_delivery_seconds_bucket{{le=\"{b}\"}} {}",
                self.latency_buckets[i].load(Ordering::Relaxed)
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "mailseal_delivery_seconds_bucket{{le=\"+Inf\"}} {count}\nmailseal_delivery_seconds_sum {}\nmailseal_delivery_seconds_count {count}",
            self.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        out
    }

    /// The exposition text now.
    pub fn render(&self) -> String {
        self.render_at(time::OffsetDateTime::now_utc().unix_timestamp())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The samples of `text`: each line that is not a comment, as (series, value).
    fn samples(text: &str) -> Vec<(String, String)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').unwrap();
                (series.to_string(), value.to_string())
            })
            .collect()
    }

    fn value(text: &str, series: &str) -> String {
        samples(text)
            .into_iter()
            .find(|(s, _)| s == series)
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .1
    }

    #[test]
    fn exposition_has_help_and_type_for_every_metric_and_well_formed_samples() {
        let m = Metrics::default();
        m.message("inbound", "refused");
        m.refused("inbound", "5.7.1");
        m.deferred("4.2");
        m.bounced("5.1");
        let text = m.render_at(1000);
        let mut families = Vec::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# HELP ") {
                families.push(rest.split(' ').next().unwrap().to_string());
            }
        }
        for f in &families {
            assert!(
                text.contains(&format!("# TYPE {f} ")),
                "{f} has no TYPE: {text}"
            );
        }
        for (series, v) in samples(&text) {
            let name = series.split('{').next().unwrap();
            let family = name
                .strip_suffix("_bucket")
                .or_else(|| name.strip_suffix("_sum"))
                .or_else(|| name.strip_suffix("_count"))
                .filter(|f| families.iter().any(|x| x == f))
                .unwrap_or(name);
            assert!(families.iter().any(|f| f == family), "{series} undeclared");
            assert!(v.parse::<f64>().is_ok(), "{series} {v}");
            // Counters end in _total (Prometheus' naming).
            if text.contains(&format!("# TYPE {family} counter")) {
                assert!(family.ends_with("_total"), "{family}");
            }
        }
        assert_eq!(
            value(
                &text,
                "mailseal_messages_total{direction=\"inbound\",verdict=\"refused\"}"
            ),
            "1"
        );
        assert_eq!(
            value(
                &text,
                "mailseal_refused_total{direction=\"inbound\",status=\"5.7.1\"}"
            ),
            "1"
        );
        assert_eq!(value(&text, "mailseal_deferred_total{reason=\"4.2\"}"), "1");
        assert_eq!(value(&text, "mailseal_bounced_total{reason=\"5.1\"}"), "1");
    }

    /// Latencies keep their milliseconds: 120 ms lands in the 0.25 s bucket and
    /// not the 0.1 s one, and the sum is 0.12 + 3 s, not 3.
    #[test]
    fn delivery_histogram_is_cumulative_with_sub_second_precision() {
        let m = Metrics::default();
        m.delivered(Duration::from_millis(120));
        m.delivered(Duration::from_secs(3));
        let text = m.render_at(0);
        let bucket = |le: &str| {
            value(
                &text,
                &format!("mailseal_delivery_seconds_bucket{{le=\"{le}\"}}"),
            )
        };
        assert_eq!(bucket("0.1"), "0");
        assert_eq!(bucket("0.25"), "1");
        assert_eq!(bucket("1"), "1");
        assert_eq!(bucket("2.5"), "1");
        assert_eq!(bucket("5"), "2");
        assert_eq!(bucket("+Inf"), "2");
        assert_eq!(value(&text, "mailseal_delivery_seconds_count"), "2");
        assert_eq!(value(&text, "mailseal_delivery_seconds_sum"), "3.12");
        // Cumulative: never decreasing, bucket by bucket.
        let counts: Vec<u64> = samples(&text)
            .into_iter()
            .filter(|(s, _)| s.starts_with("mailseal_delivery_seconds_bucket"))
            .map(|(_, v)| v.parse().unwrap())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    }

    #[test]
    fn queue_age_and_database_state() {
        let m = Metrics::default();
        let text = m.render_at(1000);
        assert_eq!(value(&text, "mailseal_queue_oldest_age_seconds"), "0");
        assert_eq!(value(&text, "mailseal_database_up"), "1");
        m.set_queue(Some(3), Some(Some(940)));
        m.set_database_down(Some(Duration::from_millis(2500)));
        let text = m.render_at(1000);
        assert_eq!(value(&text, "mailseal_queue_depth"), "3");
        assert_eq!(value(&text, "mailseal_queue_oldest_age_seconds"), "60");
        assert_eq!(value(&text, "mailseal_database_up"), "0");
        assert_eq!(value(&text, "mailseal_database_down_seconds"), "2.5");
        // A read that failed keeps the last values; an empty queue has no age.
        m.set_queue(None, None);
        assert_eq!(value(&m.render_at(1000), "mailseal_queue_depth"), "3");
        m.set_queue(Some(0), Some(None));
        m.set_database_down(None);
        let text = m.render_at(1000);
        assert_eq!(value(&text, "mailseal_queue_oldest_age_seconds"), "0");
        assert_eq!(value(&text, "mailseal_database_up"), "1");
    }

    /// Whatever a next hop answers, the label is one of a fixed set.
    #[test]
    fn fail_reason_labels_are_a_fixed_set_whatever_the_reply() {
        assert_eq!(reason_class("450 4.2.1 mailbox busy"), "4.2");
        assert_eq!(reason_class("550 5.1.1 no such user"), "5.1");
        assert_eq!(reason_class("421 0.0.0 closing"), "4.0");
        assert_eq!(reason_class("451 5.7.1 mismatched class"), "4.0");
        assert_eq!(reason_class("554 5.99.1 x"), "5.0");
        assert_eq!(reason_class("550 5.1.1\"} 1\nforged_total 9"), "5.0");
        assert_eq!(reason_class("Connection refused (os error 111)"), NO_REPLY);
        assert_eq!(reason_class("no greeting"), NO_REPLY);
        assert_eq!(reason_class(""), NO_REPLY);
        assert_eq!(status_class("4.4.7"), Some("4.4"));
        assert_eq!(status_class("5.7.1.1"), None);
        assert_eq!(status_class("2.0.0"), None);
        let all: Vec<&str> = CLASSES.iter().flatten().copied().collect();
        for reply in [
            "550 5.1.1 ok",
            "499 4.7.999 x",
            "599 5.9.9 x",
            "5xx",
            "550 \u{1b}[2J",
            "\u{2028}",
        ] {
            let c = reason_class(reply);
            assert!(c == NO_REPLY || all.contains(&c), "{reply:?}: {c}");
        }
    }
}
