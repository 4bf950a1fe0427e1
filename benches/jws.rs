//! detached-jws seal and open of a 2 KiB envelope against the raw primitive: one
//! Ed25519 or ES256 signature (and its verification) over the same signing input,
//! with aws-lc-rs. What lies between the two is composing the inner entity, base64url
//! of it, reading the message back, the key lookup in the store and the binding checks.

mod common;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use criterion::{BenchmarkId, Criterion};
use mailseal::jws::{Jws, JwsAlgorithm};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::{OpenPolicy, Opener, SealOptions, Sealer};
use mailseal::Profile;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let rng = SystemRandom::new();
    for alg in [JwsAlgorithm::EdDsa, JwsAlgorithm::Es256] {
        let store = DirectoryStore::open(dir.path().join(alg.name())).unwrap();
        mailseal::jws::jwk::generate(&store, "alice@jws.example", alg).unwrap();
        let jws = Jws::new(&store);
        let plain = common::message("alice@jws.example", "bob@jws.example", 1500);
        let opts = SealOptions::new(Profile::Jws);
        let mut policy = OpenPolicy::default();
        policy.our_addresses = vec!["bob@jws.example".into()];
        let sealed = jws.seal(&plain, &opts).unwrap();
        assert!(jws.open(&sealed, &policy).is_ok());
        // The raw primitive over a signing input of the same length.
        let fpr = store.jwk_identities().unwrap()[0].fingerprint.clone();
        let secret = store.private_key(&fpr).unwrap().unwrap();
        let input = {
            let text = String::from_utf8_lossy(&sealed);
            let start = text.find("\r\n\r\n--").unwrap();
            let end = text.rfind("Content-Type: application/jose").unwrap();
            let entity = &sealed[start..end];
            let b64 =
                base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, entity);
            format!("eyJhbGciOiJFZERTQSJ9.{b64}").into_bytes()
        };
        type Sign = Box<dyn Fn(&[u8]) -> Vec<u8>>;
        let (sign, public, verify_alg): (
            Sign,
            Vec<u8>,
            &'static dyn signature::VerificationAlgorithm,
        ) = match alg {
            JwsAlgorithm::EdDsa => {
                let k = Ed25519KeyPair::from_pkcs8_maybe_unchecked(secret.pkcs8_der()).unwrap();
                let public = k.public_key().as_ref().to_vec();
                (
                    Box::new(move |m| k.sign(m).as_ref().to_vec()),
                    public,
                    &signature::ED25519,
                )
            }
            _ => {
                let k = EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    secret.pkcs8_der(),
                )
                .unwrap();
                let public = k.public_key().as_ref().to_vec();
                let rng = rng.clone();
                (
                    Box::new(move |m| k.sign(&rng, m).unwrap().as_ref().to_vec()),
                    public,
                    &signature::ECDSA_P256_SHA256_FIXED,
                )
            }
        };
        let sig = sign(&input);
        let name = alg.name().to_ascii_lowercase();
        let mut g = c.benchmark_group(format!("jws_seal_open_{name}_2KiB"));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| {
                let sealed = jws.seal(black_box(&plain), &opts).unwrap();
                jws.open(&sealed, &policy).unwrap()
            })
        });
        g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
            b.iter(|| {
                let s = sign(black_box(&input));
                UnparsedPublicKey::new(verify_alg, &public)
                    .verify(&input, &s)
                    .unwrap()
            })
        });
        g.finish();
        let mut g = c.benchmark_group(format!("jws_open_{name}_2KiB"));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| jws.open(black_box(&sealed), &policy).unwrap())
        });
        g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
            b.iter(|| {
                UnparsedPublicKey::new(verify_alg, &public)
                    .verify(black_box(&input), &sig)
                    .unwrap()
            })
        });
        g.finish();
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    let mut rows = Vec::new();
    for name in ["eddsa", "es256"] {
        for op in ["seal_open", "open"] {
            let group: &'static str = Box::leak(format!("jws_{op}_{name}_2KiB").into_boxed_str());
            rows.push((group, "mailseal", "raw-primitives"));
        }
    }
    common::print_ratios(&rows);
}
