//! The receiver rules' cost per accepted message (`ReplayStore::admit`) against the
//! floor any durable replay check pays: one INSERT of the same row committed on the
//! same database with the same durability (SQLite WAL with synchronous=FULL; PostgreSQL
//! SERIALIZABLE when `MAILSEAL_TEST_POSTGRES` names a server).
//!
//! Cases: a new request (replay tuple, idempotency lookup, prune), and an in-order
//! stream event (the stream row and its pending events too).

mod common;

use std::cell::Cell;

use criterion::{BenchmarkId, Criterion};
use mailseal::envelope::Envelope;
use mailseal::replay::{
    Candidate, PostgresReplayStore, ReceiverPolicy, ReplayStore, SqliteReplayStore,
};

const NOW: i64 = 1_796_000_000;

fn candidate(i: u64, event: bool) -> Candidate {
    let v = if event {
        serde_json::json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "event",
            "operation": "message/stream", "messageId": format!("ev-{i}"),
            "correlationId": "bench-stream", "sequence": i, "final": false,
            "payload": {"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_WORKING"}}}})
    } else {
        serde_json::json!({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
            "operation": "message/send", "messageId": format!("req-{i}"),
            "correlationId": format!("corr-{i}"), "sequence": 0, "final": false,
            "idempotencyKey": format!("effect-{i}"),
            "createdAt": "2026-11-30T00:00:00Z", "expiresAt": "2026-12-01T00:00:00Z",
            "payload": {"message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"text": "hello"}]}}})
    };
    let bytes = serde_json::to_vec(&v).unwrap();
    let env = Envelope::from_json(&bytes).unwrap();
    Candidate::new("x509:bench-signer".into(), &env, &bytes).unwrap()
}

fn ours(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    store: &dyn ReplayStore,
    event: bool,
) {
    let policy = ReceiverPolicy::default();
    let next = Cell::new(1u64);
    g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
        b.iter_batched(
            || {
                let i = next.get();
                next.set(i + 1);
                candidate(i, event)
            },
            |c| store.admit(&c, NOW, &policy).unwrap(),
            criterion::BatchSize::SmallInput,
        )
    });
}

fn sqlite(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    for (name, event) in [("request", false), ("event", true)] {
        let store = SqliteReplayStore::open(&dir.path().join(format!("{name}.db"))).unwrap();
        let mut g = c.benchmark_group(format!("replay_sqlite_{name}"));
        ours(&mut g, &store, event);
        let raw = rusqlite::Connection::open(dir.path().join(format!("raw-{name}.db"))).unwrap();
        raw.pragma_update(None, "journal_mode", "WAL").unwrap();
        raw.pragma_update(None, "synchronous", "FULL").unwrap();
        raw.execute_batch(
            "CREATE TABLE t (signer TEXT, message_id TEXT, idempotency_key TEXT, operation TEXT,
             digest BLOB, accepted_at INTEGER, keep_until INTEGER,
             PRIMARY KEY (signer, message_id)) WITHOUT ROWID",
        )
        .unwrap();
        let next = Cell::new(1u64);
        g.bench_function(BenchmarkId::from_parameter("sqlite-insert"), |b| {
            b.iter(|| {
                let i = next.get();
                next.set(i + 1);
                raw.execute_batch("BEGIN IMMEDIATE").unwrap();
                raw.execute(
                    "INSERT INTO t VALUES ('x509:bench-signer', ?1, ?2, 'message/send', ?3, ?4, ?5)",
                    rusqlite::params![format!("req-{i}"), format!("effect-{i}"), &[7u8; 32][..], NOW, NOW + 86400],
                )
                .unwrap();
                raw.execute_batch("COMMIT").unwrap();
            })
        });
        g.finish();
    }
}

fn postgres(c: &mut Criterion) -> bool {
    let Some(admin) = std::env::var("MAILSEAL_TEST_POSTGRES")
        .ok()
        .filter(|s| !s.is_empty())
    else {
        eprintln!("replay_postgres: skipped (MAILSEAL_TEST_POSTGRES is not set)");
        return false;
    };
    let db = format!("mailseal_bench_{}", std::process::id());
    let mut admin_client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    admin_client
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .unwrap();
    let url = format!("{}/{db}", &admin[..admin.rfind('/').unwrap()]);
    let store = PostgresReplayStore::connect(&url).unwrap();
    let mut g = c.benchmark_group("replay_postgres_request");
    ours(&mut g, &store, false);
    let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    raw.batch_execute(
        "CREATE TABLE t (signer TEXT, message_id TEXT, idempotency_key TEXT, operation TEXT,
         digest BYTEA, accepted_at BIGINT, keep_until BIGINT, PRIMARY KEY (signer, message_id))",
    )
    .unwrap();
    let next = Cell::new(1u64);
    g.bench_function(BenchmarkId::from_parameter("postgres-insert"), |b| {
        b.iter(|| {
            let i = next.get();
            next.set(i + 1);
            let mut tx = raw
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::Serializable)
                .start()
                .unwrap();
            tx.execute(
                "INSERT INTO t VALUES ('x509:bench-signer', $1, $2, 'message/send', $3, $4, $5)",
                &[
                    &format!("req-{i}"),
                    &format!("effect-{i}"),
                    &&[7u8; 32][..],
                    &NOW,
                    &(NOW + 86400),
                ],
            )
            .unwrap();
            tx.commit().unwrap();
        })
    });
    g.finish();
    drop(store);
    drop(raw);
    let _ = admin_client.batch_execute(&format!("DROP DATABASE {db}"));
    true
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    sqlite(&mut c);
    let pg = postgres(&mut c);
    c.final_summary();
    let mut rows = vec![
        ("replay_sqlite_request", "mailseal", "sqlite-insert"),
        ("replay_sqlite_event", "mailseal", "sqlite-insert"),
    ];
    if pg {
        rows.push(("replay_postgres_request", "mailseal", "postgres-insert"));
    }
    common::print_ratios(&rows);
}
