//! S/MIME with P-256 identities and with large messages, each against what bounds it
//! from below, in one run:
//!
//! - `p256_seal_2KiB` / `p256_open_2KiB`: sign + encrypt (to the recipient and the
//!   sender's own copy) and decrypt + verify of a 2 KiB request with P-256 keys, next to
//!   OpenSSL's CMS doing the same job in process, and to the raw primitives (ECDSA
//!   P-256, ephemeral ECDH P-256 with the X9.63 SHA-256 KDF and AES key wrap per
//!   recipient, AES-256-GCM over the entity and its signature).
//! - `large_seal_12MiB` / `large_open_12MiB`: a 12 MiB text payload through `Sealer` and
//!   `Opener`, next to its floor: SHA-256, AES-256-GCM and base64 over the same bytes
//!   (the work no implementation of the format can skip), and to OpenSSL's CMS.
//!
//! `cargo bench --bench large`; figures in BENCHMARKS.md.

#[path = "common/mod.rs"]
mod common;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use aws_lc_rs::agreement::{self, EphemeralPrivateKey, PrivateKey, UnparsedPublicKey, ECDH_P256};
use aws_lc_rs::digest;
use aws_lc_rs::key_wrap::{KeyEncryptionKey, KeyWrap, AES_256};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair};
use base64::Engine;
use criterion::{BenchmarkId, Criterion, Throughput};
use der::EncodePem;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::seal::{OpenPolicy, Opener, SealOptions, Sealer};
use mailseal::smime::{generate, IdentityRequest, KeyKind, Smime};
use mailseal::Profile;
use openssl::cms::{CMSOptions, CmsContentInfo};
use openssl::pkey::PKey;
use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;
use std::hint::black_box;

/// A P-256 identity: certificate PEM and PKCS#8 DER.
struct Party {
    cert_pem: String,
    key_der: Vec<u8>,
}

fn party(email: &str) -> Party {
    let id = generate(
        &IdentityRequest {
            email: Some(email.into()),
            common_name: None,
            kind: KeyKind::P256,
            days: 30,
            ca: false,
        },
        None,
    )
    .unwrap()
    .remove(0);
    Party {
        cert_pem: id.certificate.to_pem(der::pem::LineEnding::LF).unwrap(),
        key_der: id.private_key.to_vec(),
    }
}

fn key_pem(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap());
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    pem
}

/// A store holding `own` (certificate and key) and the certificates of `peers`.
fn store(dir: &std::path::Path, own: &Party, peers: &[&Party]) -> DirectoryStore {
    let s = DirectoryStore::open(dir).unwrap();
    s.import(own.cert_pem.as_bytes(), "own.crt", false).unwrap();
    s.import(key_pem(&own.key_der).as_bytes(), "own.key", false)
        .unwrap();
    for p in peers {
        s.import(p.cert_pem.as_bytes(), "peer.crt", false).unwrap();
    }
    s
}

/// The public point of a P-256 certificate (uncompressed SEC1).
fn ec_point(cert_pem: &str) -> Vec<u8> {
    use der::DecodePem;
    let cert = x509_cert::Certificate::from_pem(cert_pem).unwrap();
    cert.tbs_certificate()
        .subject_public_key_info()
        .subject_public_key
        .raw_bytes()
        .to_vec()
}

/// ANSI X9.63 KDF with SHA-256 for a 32-byte key (one block).
fn x963(z: &[u8], info: &[u8]) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(z);
    ctx.update(&1u32.to_be_bytes());
    ctx.update(info);
    ctx.finish().as_ref().try_into().unwrap()
}

/// Rounds and operations per round of the alternating (paired) measurements.
const PAIRED_ROUNDS: usize = 40;
const PAIRED_OPS: usize = 100;

fn bench_p256(c: &mut Criterion) {
    let alice = party("alice@p256.example");
    let bob = party("bob@p256.example");
    let dir = tempfile::tempdir().unwrap();
    let alice_store = store(&dir.path().join("a"), &alice, &[&bob]);
    let bob_store = store(&dir.path().join("b"), &bob, &[&alice]);
    // The directory store trusts its caches for files older than 2 s (see smime.rs).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let sealer = Smime::new(&alice_store);
    let opener = Smime::new(&bob_store);
    let opts = SealOptions::new(Profile::Smime);
    let policy = OpenPolicy::default();
    let msg = common::message("alice@p256.example", "bob@p256.example", 1500);
    let sealed = sealer.seal(&msg, &opts).unwrap();
    assert!(opener.open(&sealed, &policy).is_ok());
    let entity = msg.to_inner_entity(true).unwrap();

    // OpenSSL, the same job: a detached P-256 signature over the entity, then the entity
    // and that signature encrypted with AES-256-GCM to Bob and Alice (ECDH kari).
    let a_cert = X509::from_pem(alice.cert_pem.as_bytes()).unwrap();
    let b_cert = X509::from_pem(bob.cert_pem.as_bytes()).unwrap();
    let a_key = PKey::private_key_from_der(&alice.key_der).unwrap();
    let b_key = PKey::private_key_from_der(&bob.key_der).unwrap();
    let mut recipients: Stack<X509> = Stack::new().unwrap();
    recipients.push(b_cert.clone()).unwrap();
    recipients.push(a_cert.clone()).unwrap();
    let mut sb = X509StoreBuilder::new().unwrap();
    sb.add_cert(a_cert.clone()).unwrap();
    let trust = sb.build();
    let no_certs: Stack<X509> = Stack::new().unwrap();
    let ossl_seal = |entity: &[u8]| {
        let sig = CmsContentInfo::sign(
            Some(&a_cert),
            Some(&a_key),
            None,
            Some(entity),
            CMSOptions::DETACHED | CMSOptions::BINARY,
        )
        .unwrap()
        .to_der()
        .unwrap();
        let body = [entity, &sig].concat();
        CmsContentInfo::encrypt(
            &recipients,
            &body,
            openssl::symm::Cipher::aes_256_gcm(),
            CMSOptions::BINARY,
        )
        .unwrap()
        .to_der()
        .unwrap()
    };
    let ossl_sealed = ossl_seal(&entity);
    let ossl_open = |der: &[u8]| {
        let body = CmsContentInfo::from_der(der)
            .unwrap()
            .decrypt(&b_key, &b_cert)
            .unwrap();
        let (content, sig) = body.split_at(entity.len());
        CmsContentInfo::from_der(sig)
            .unwrap()
            .verify(
                Some(&no_certs),
                Some(&trust),
                Some(content),
                None,
                CMSOptions::BINARY | CMSOptions::NO_SIGNER_CERT_VERIFY,
            )
            .unwrap();
    };
    ossl_open(&ossl_sealed);

    // The raw primitives.
    let rng = SystemRandom::new();
    let signer =
        EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &alice.key_der)
            .unwrap();
    let alice_point = signer.public_key().as_ref().to_vec();
    let bob_point = ec_point(&bob.cert_pem);
    let bob_private = PrivateKey::from_private_key_der(&ECDH_P256, &bob.key_der).unwrap();
    let info = b"ecc-cms-shared-info: AES-256 wrap, 256 bits";
    let raw_seal = |entity: &[u8]| {
        let sig = signer.sign(&rng, entity).unwrap();
        let cek = [7u8; 32];
        let mut wrapped = Vec::new();
        for point in [&bob_point, &alice_point] {
            let eph = EphemeralPrivateKey::generate(&ECDH_P256, &rng).unwrap();
            let kek = agreement::agree_ephemeral(
                eph,
                UnparsedPublicKey::new(&ECDH_P256, point),
                aws_lc_rs::error::Unspecified,
                |z| Ok(x963(z, info)),
            )
            .unwrap();
            let mut out = [0u8; 40];
            KeyEncryptionKey::new(&AES_256, &kek)
                .unwrap()
                .wrap(&cek, &mut out)
                .unwrap();
            wrapped.push(out);
        }
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &cek).unwrap());
        let mut body = [entity, sig.as_ref()].concat();
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key([1u8; 12]),
                Aad::empty(),
                &mut body,
            )
            .unwrap();
        (body, tag, wrapped)
    };
    let (raw_ct, raw_tag, raw_wrapped) = raw_seal(&entity);
    let eph_for_open = EphemeralPrivateKey::generate(&ECDH_P256, &rng).unwrap();
    let eph_point = eph_for_open.compute_public_key().unwrap().as_ref().to_vec();
    let sig_len = raw_ct.len() - entity.len();
    let verify_key =
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, alice_point.clone());
    let raw_open = || {
        let kek = agreement::agree(
            &bob_private,
            UnparsedPublicKey::new(&ECDH_P256, &eph_point),
            aws_lc_rs::error::Unspecified,
            |z| Ok(x963(z, info)),
        )
        .unwrap();
        let mut cek = [0u8; 40];
        // The wrapped key was made for another ephemeral key: unwrapping fails its
        // integrity check, which costs what a successful unwrap costs.
        let _ = KeyEncryptionKey::new(&AES_256, &kek)
            .unwrap()
            .unwrap(&raw_wrapped[0], &mut cek);
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[7u8; 32]).unwrap());
        let mut buf = raw_ct.clone();
        buf.extend_from_slice(raw_tag.as_ref());
        let plain = key
            .open_in_place(
                Nonce::assume_unique_for_key([1u8; 12]),
                Aad::empty(),
                &mut buf,
            )
            .unwrap();
        let (content, sig) = plain.split_at(plain.len() - sig_len);
        verify_key.verify(content, sig).unwrap();
    };
    raw_open();

    let mut g = c.benchmark_group("p256_seal_2KiB");
    g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
        b.iter(|| sealer.seal(black_box(&msg), &opts).unwrap())
    });
    g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
        b.iter(|| ossl_seal(black_box(&entity)))
    });
    g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
        b.iter(|| raw_seal(black_box(&entity)))
    });
    g.finish();

    let mut g = c.benchmark_group("p256_open_2KiB");
    g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
        b.iter(|| opener.open(black_box(&sealed), &policy).unwrap())
    });
    g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
        b.iter(|| ossl_open(black_box(&ossl_sealed)))
    });
    g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
        b.iter(raw_open)
    });
    g.finish();

    // The two ratios issue #16 sets a bound on, ours and the primitives alternated.
    let timed = |f: &mut dyn FnMut()| {
        let t = std::time::Instant::now();
        for _ in 0..PAIRED_OPS {
            f();
        }
        t.elapsed()
    };
    common::paired_ratio(
        "p256_seal_2KiB/mailseal vs raw-primitives",
        PAIRED_ROUNDS,
        PAIRED_OPS,
        || {
            timed(&mut || {
                black_box(sealer.seal(black_box(&msg), &opts).unwrap());
            })
        },
        || {
            timed(&mut || {
                let _ = black_box(raw_seal(black_box(&entity)));
            })
        },
    );
    common::paired_ratio(
        "p256_open_2KiB/mailseal vs raw-primitives",
        PAIRED_ROUNDS,
        PAIRED_OPS,
        || {
            timed(&mut || {
                black_box(opener.open(black_box(&sealed), &policy).unwrap());
            })
        },
        || timed(&mut || raw_open()),
    );

    // 12 MiB: the same identities, the floor instead of the asymmetric primitives.
    let big = common::message("alice@p256.example", "bob@p256.example", 12 << 20);
    let big_sealed = sealer.seal(&big, &opts).unwrap();
    assert!(opener.open(&big_sealed, &policy).is_ok());
    let big_entity = big.to_inner_entity(true).unwrap();
    let floor_key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[7u8; 32]).unwrap());
    let floor_seal = |entity: &[u8]| {
        let digest = digest::digest(&digest::SHA256, entity);
        let mut body = entity.to_vec();
        let tag = floor_key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key([1u8; 12]),
                Aad::empty(),
                &mut body,
            )
            .unwrap();
        body.extend_from_slice(tag.as_ref());
        (
            digest,
            base64::engine::general_purpose::STANDARD.encode(&body),
        )
    };
    let (_, floor_b64) = floor_seal(&big_entity);
    let floor_open = |b64: &str| {
        let mut body = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let plain = floor_key
            .open_in_place(
                Nonce::assume_unique_for_key([1u8; 12]),
                Aad::empty(),
                &mut body,
            )
            .unwrap();
        digest::digest(&digest::SHA256, plain)
    };
    let big_ossl = ossl_seal(&big_entity);

    let mut g = c.benchmark_group("large_seal_12MiB");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(big_entity.len() as u64));
    g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
        b.iter(|| sealer.seal(black_box(&big), &opts).unwrap())
    });
    g.bench_function(BenchmarkId::from_parameter("floor"), |b| {
        b.iter(|| floor_seal(black_box(&big_entity)))
    });
    g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
        b.iter(|| ossl_seal(black_box(&big_entity)))
    });
    g.finish();

    let mut g = c.benchmark_group("large_open_12MiB");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(big_entity.len() as u64));
    g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
        b.iter(|| opener.open(black_box(&big_sealed), &policy).unwrap())
    });
    g.bench_function(BenchmarkId::from_parameter("floor"), |b| {
        b.iter(|| floor_open(black_box(&floor_b64)))
    });
    g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
        b.iter(|| {
            ossl_open_big(
                &b_key,
                &b_cert,
                &trust,
                black_box(&big_ossl),
                big_entity.len(),
            )
        })
    });
    g.finish();
}

fn ossl_open_big(
    key: &PKey<openssl::pkey::Private>,
    cert: &X509,
    trust: &openssl::x509::store::X509Store,
    der: &[u8],
    entity_len: usize,
) {
    let body = CmsContentInfo::from_der(der)
        .unwrap()
        .decrypt(key, cert)
        .unwrap();
    let (content, sig) = body.split_at(entity_len);
    let no_certs: Stack<X509> = Stack::new().unwrap();
    CmsContentInfo::from_der(sig)
        .unwrap()
        .verify(
            Some(&no_certs),
            Some(trust),
            Some(content),
            None,
            CMSOptions::BINARY | CMSOptions::NO_SIGNER_CERT_VERIFY,
        )
        .unwrap();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_p256(&mut c);
    c.final_summary();
    common::print_ratios(&[
        ("p256_seal_2KiB", "mailseal", "raw-primitives"),
        ("p256_seal_2KiB", "mailseal", "openssl-cms"),
        ("p256_open_2KiB", "mailseal", "raw-primitives"),
        ("p256_open_2KiB", "mailseal", "openssl-cms"),
        ("large_seal_12MiB", "mailseal", "floor"),
        ("large_seal_12MiB", "mailseal", "openssl-cms"),
        ("large_open_12MiB", "mailseal", "floor"),
        ("large_open_12MiB", "mailseal", "openssl-cms"),
    ]);
}
