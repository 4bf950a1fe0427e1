//! Messages per second through the one receive path, `Receiver::receive` then
//! `Incoming::commit`, for signed-and-encrypted S/MIME of 2 KiB (RSA-2048, the RFC 9216
//! identities), next to the same opens without the receiver rules (`Dispatcher::open`
//! alone): the ratio is what the rules and the two phases cost. With in-memory state,
//! and with SQLite state where each commit is durable (WAL, synchronous=FULL).

mod common;

use criterion::{BenchmarkId, Criterion, Throughput};
use mailseal::dispatch::Dispatcher;
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::replay::SqliteReplayStore;
use mailseal::seal::{OpenPolicy, Opener, SealOptions, Sealer};
use mailseal::smime::Smime;
use mailseal::{Outcome, Profile, Receiver};
use std::cell::Cell;

const FX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/keys-fixtures/rfc9216/");

fn store(dir: &std::path::Path, files: &[(&str, bool)]) -> DirectoryStore {
    let s = DirectoryStore::open(dir).unwrap();
    for (f, trusted) in files {
        let bytes = std::fs::read(format!("{FX}{f}")).unwrap();
        s.import(&bytes, f, *trusted).unwrap();
    }
    s
}

/// A fresh 2 KiB request numbered `i`, sealed by Alice for Bob.
fn sealed(alice: &Smime<'_>, i: u64) -> Vec<u8> {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, &format!("bench-{i}"));
    env.set("correlationId", &format!("corr-{i}"));
    env.set("idempotencyKey", &format!("idem-{i}"));
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(2048)
        .collect();
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}),
    );
    let msg = MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
    alice.seal(&msg, &SealOptions::new(Profile::Smime)).unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let alice_store = store(
        &dir.path().join("alice"),
        &[
            ("alice.sign.crt", false),
            ("alice.sign.key", false),
            ("alice.encrypt.crt", false),
            ("bob.encrypt.crt", false),
        ],
    );
    let bob_store = store(
        &dir.path().join("bob"),
        &[
            ("bob.encrypt.crt", false),
            ("bob.encrypt.key", false),
            ("alice.sign.crt", false),
            ("ca.rsa.crt", true),
        ],
    );
    // The directory store trusts its caches only for files older than 2 s.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let alice = Smime::new(&alice_store);
    let next = Cell::new(0u64);
    let fresh = || {
        let i = next.get();
        next.set(i + 1);
        sealed(&alice, i)
    };

    let mut g = c.benchmark_group("pipeline_receive_2KiB");
    g.throughput(Throughput::Elements(1));
    let policy = OpenPolicy::default();
    g.bench_function(BenchmarkId::from_parameter("open-only"), |b| {
        let d = Dispatcher::with_store(&bob_store);
        b.iter_batched(
            fresh,
            |raw| d.open(&raw, &policy).unwrap(),
            criterion::BatchSize::SmallInput,
        )
    });
    let mut memory = Receiver::builder(&bob_store).replay_in_memory().build();
    g.bench_function(BenchmarkId::from_parameter("receiver-memory"), |b| {
        b.iter_batched(
            fresh,
            |raw| {
                let o = memory.receive(&raw).unwrap().commit().unwrap();
                assert!(matches!(o, Outcome::Deliver { .. }));
            },
            criterion::BatchSize::SmallInput,
        )
    });
    let mut sqlite = Receiver::builder(&bob_store)
        .replay(SqliteReplayStore::open(&dir.path().join("state.db")).unwrap())
        .build();
    g.bench_function(BenchmarkId::from_parameter("receiver-sqlite"), |b| {
        b.iter_batched(
            fresh,
            |raw| {
                let o = sqlite.receive(&raw).unwrap().commit().unwrap();
                assert!(matches!(o, Outcome::Deliver { .. }));
            },
            criterion::BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    common::print_ratios(&[
        ("pipeline_receive_2KiB", "receiver-memory", "open-only"),
        ("pipeline_receive_2KiB", "receiver-sqlite", "open-only"),
    ]);
}
