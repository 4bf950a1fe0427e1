//! `sign --batch` on 1,000 signing requests (S/MIME, P-256, 2 KiB messages) against
//! the raw signature primitive over the same bytes: one ECDSA P-256 signature of each
//! request's signed attributes with aws-lc-rs. What lies between the two is reading
//! each request, recomputing everything it states from its entity (parsing the
//! message, the binding rules, the boundary, the signed attributes with the content
//! digest), and writing the response; the `+log` row adds the signing log's append,
//! synced to disk per entry, as `sign` does.

mod common;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair};
use criterion::{BenchmarkId, Criterion};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::offline::{self, SigningLog, SigningRequest};
use mailseal::{Profile, SealOptions};
use std::hint::black_box;

const BATCH: usize = 1000;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("offline")).unwrap();
    let request = mailseal::smime::IdentityRequest {
        email: Some("alice@example.org".into()),
        common_name: None,
        kind: mailseal::smime::KeyKind::P256,
        days: 30,
        ca: false,
    };
    let id = mailseal::smime::generate(&request, None).unwrap().remove(0);
    let pem = mailseal::keystore::identity_pem(&id.certificate, &id.private_key).unwrap();
    store.import(pem.as_bytes(), "alice", false).unwrap();
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let texts: Vec<String> = (0..BATCH)
        .map(|i| {
            let mut plain = common::message("alice@example.org", "bob@example.org", 1500);
            plain.headers.message_id = Some(format!("batch-{i}@example.org"));
            offline::prepare(&store, &plain, &opts).unwrap().to_text()
        })
        .collect();
    let tbs: Vec<Vec<u8>> = texts
        .iter()
        .map(|t| SigningRequest::parse(t.as_bytes()).unwrap().to_be_signed)
        .collect();
    let pair =
        EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &id.private_key)
            .unwrap();
    let rng = SystemRandom::new();
    let now = time::OffsetDateTime::now_utc();
    let host = offline::Offline::new(&store);
    let sign_all = |log: Option<&SigningLog>| {
        for t in &texts {
            let request = SigningRequest::parse(black_box(t.as_bytes())).unwrap();
            let review = host.review(request).unwrap();
            let response = review.sign(now).unwrap();
            if let Some(log) = log {
                log.append(review.request(), &response).unwrap();
            }
            black_box(response.to_text());
        }
    };
    let mut g = c.benchmark_group("offline_sign_batch_1000_p256_2KiB");
    g.sample_size(10);
    g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
        b.iter(|| sign_all(None))
    });
    let mut round = 0;
    g.bench_function(BenchmarkId::from_parameter("mailseal+log"), |b| {
        b.iter(|| {
            round += 1;
            let log = SigningLog::new(dir.path().join(format!("log-{round}")));
            sign_all(Some(&log))
        })
    });
    g.bench_function(BenchmarkId::from_parameter("raw-primitive"), |b| {
        b.iter(|| {
            for m in &tbs {
                black_box(pair.sign(&rng, black_box(m)).unwrap());
            }
        })
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    common::print_ratios(&[
        (
            "offline_sign_batch_1000_p256_2KiB",
            "mailseal",
            "raw-primitive",
        ),
        (
            "offline_sign_batch_1000_p256_2KiB",
            "mailseal+log",
            "raw-primitive",
        ),
    ]);
}
