//! S/MIME signing and opening, signed-only and signed-then-encrypted, against
//! OpenSSL's own CMS in the same process over the same inner entity (`CMS_sign` /
//! `CMS_verify`, binary, detached; for signed-then-encrypted, the entity and its
//! signature then go through `CMS_encrypt` / `CMS_decrypt` with AES-256-GCM) and
//! against the raw primitives (SHA-256 over the entity plus one RSA-2048 PKCS#1
//! signature or verification, and AES-256-GCM and one RSA-OAEP wrap when encrypted,
//! with aws-lc-rs).
//!
//! Signer: the RFC 9216 Alice identity (RSA-2048) from `keys-fixtures/`.

mod common;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, KeyPair, RsaKeyPair, UnparsedPublicKey};
use criterion::{BenchmarkId, Criterion, Throughput};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::seal::{OpenPolicy, Opener, SealOptions, Sealer};
use mailseal::smime::Smime;
use mailseal::Profile;
use openssl::cms::{CMSOptions, CmsContentInfo};
use openssl::pkey::PKey;
use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;
use std::hint::black_box;

const FX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/keys-fixtures/rfc9216/");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FX}{name}")).unwrap()
}

fn message(text_len: usize) -> MailA2aMessage {
    common::message("alice@smime.example", "bob@smime.example", text_len)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    store
        .import(&fixture("alice.sign.crt"), "crt", false)
        .unwrap();
    store
        .import(&fixture("alice.sign.key"), "key", false)
        .unwrap();
    store.import(&fixture("ca.rsa.crt"), "ca", true).unwrap();
    let smime = Smime::new(&store);
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let policy = OpenPolicy::default();

    let cert = X509::from_pem(&fixture("alice.sign.crt")).unwrap();
    let ca = X509::from_pem(&fixture("ca.rsa.crt")).unwrap();
    let pkey = PKey::private_key_from_pem(&fixture("alice.sign.key")).unwrap();
    let mut sb = X509StoreBuilder::new().unwrap();
    sb.add_cert(ca).unwrap();
    let trust = sb.build();
    let no_certs: Stack<X509> = Stack::new().unwrap();
    let flags = CMSOptions::DETACHED | CMSOptions::BINARY;

    let pkcs8 = {
        let pem = String::from_utf8(fixture("alice.sign.key")).unwrap();
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap()
    };
    let raw_key = RsaKeyPair::from_pkcs8(&pkcs8).unwrap();
    let rng = SystemRandom::new();

    // Sign-then-encrypt: Alice to Bob (and her own copy), Bob opens.
    for f in ["alice.encrypt.crt", "alice.encrypt.key", "bob.encrypt.crt"] {
        store.import(&fixture(f), f, false).unwrap();
    }
    let bob_dir = tempfile::tempdir().unwrap();
    let bob_store = DirectoryStore::open(bob_dir.path().join("s")).unwrap();
    for (f, trusted) in [
        ("bob.encrypt.crt", false),
        ("bob.encrypt.key", false),
        ("alice.sign.crt", false),
        ("ca.rsa.crt", true),
    ] {
        bob_store.import(&fixture(f), f, trusted).unwrap();
    }
    // The directory store trusts its caches only for files and listings that changed
    // more than 2 s before they were read (coarse timestamps): a gateway's store is
    // older than that, so the bench lets the new ones settle first.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let bob = Smime::new(&bob_store);
    let enc_opts = SealOptions::new(Profile::Smime);
    let bob_cert = X509::from_pem(&fixture("bob.encrypt.crt")).unwrap();
    let alice_enc = X509::from_pem(&fixture("alice.encrypt.crt")).unwrap();
    let bob_key = PKey::private_key_from_pem(&fixture("bob.encrypt.key")).unwrap();
    let mut recipients: Stack<X509> = Stack::new().unwrap();
    recipients.push(bob_cert.clone()).unwrap();
    recipients.push(alice_enc).unwrap();
    let bob_pkcs8 = {
        let pem = String::from_utf8(fixture("bob.encrypt.key")).unwrap();
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap()
    };
    let oaep_public = {
        let der = openssl::x509::X509::from_pem(&fixture("bob.encrypt.crt"))
            .unwrap()
            .public_key()
            .unwrap()
            .public_key_to_der()
            .unwrap();
        aws_lc_rs::rsa::OaepPublicEncryptingKey::new(
            aws_lc_rs::rsa::PublicEncryptingKey::from_der(&der).unwrap(),
        )
        .unwrap()
    };
    let oaep_private = aws_lc_rs::rsa::OaepPrivateDecryptingKey::new(
        aws_lc_rs::rsa::PrivateDecryptingKey::from_pkcs8(&bob_pkcs8).unwrap(),
    )
    .unwrap();

    // OpenSSL's detached signature (DER) over `data`, and `CMS_encrypt` of `data` with
    // AES-256-GCM to Bob and Alice.
    let ossl_sign = |data: &[u8]| {
        CmsContentInfo::sign(Some(&cert), Some(&pkey), None, Some(data), flags)
            .unwrap()
            .to_der()
            .unwrap()
    };
    let ossl_encrypt = |data: &[u8]| {
        CmsContentInfo::encrypt(
            &recipients,
            data,
            openssl::symm::Cipher::aes_256_gcm(),
            CMSOptions::BINARY,
        )
        .unwrap()
        .to_der()
        .unwrap()
    };

    for (name, len) in [("2KiB", 1500usize), ("1MiB", 1 << 20)] {
        let msg = message(len);
        let entity = msg.to_inner_entity(false).unwrap();
        let sealed = smime.seal(&msg, &opts).unwrap();
        let ossl_sig = ossl_sign(&entity);
        let mut raw_sig = vec![0u8; raw_key.public_modulus_len()];
        raw_key
            .sign(&signature::RSA_PKCS1_SHA256, &rng, &entity, &mut raw_sig)
            .unwrap();
        let public = raw_key.public_key().as_ref().to_vec();

        let mut g = c.benchmark_group(format!("smime_sign_{name}"));
        g.throughput(Throughput::Bytes(entity.len() as u64));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| smime.seal(black_box(&msg), &opts).unwrap())
        });
        g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
            b.iter(|| ossl_sign(black_box(&entity)))
        });
        g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
            b.iter(|| {
                let mut sig = vec![0u8; raw_key.public_modulus_len()];
                raw_key
                    .sign(
                        &signature::RSA_PKCS1_SHA256,
                        &rng,
                        black_box(&entity),
                        &mut sig,
                    )
                    .unwrap();
                sig
            })
        });
        g.finish();

        let mut g = c.benchmark_group(format!("smime_open_{name}"));
        g.throughput(Throughput::Bytes(entity.len() as u64));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| smime.open(black_box(&sealed), &policy).unwrap())
        });
        g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
            b.iter(|| {
                let mut cms = CmsContentInfo::from_der(black_box(&ossl_sig)).unwrap();
                cms.verify(
                    Some(&no_certs),
                    Some(&trust),
                    Some(&entity),
                    None,
                    CMSOptions::BINARY,
                )
                .unwrap();
            })
        });
        g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
            b.iter(|| {
                UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, &public)
                    .verify(black_box(&entity), &raw_sig)
                    .unwrap()
            })
        });
        g.finish();

        // Sign then encrypt, and decrypt then verify.
        // OpenSSL signs detached and encrypts the entity followed by the signature, so
        // the content is encrypted and decrypted as in mailseal's message (which
        // encrypts the multipart/signed entity). Until the fifth session only the
        // signature was encrypted, leaving OpenSSL no AES-GCM pass over the content.
        // (Signing with the content inside the signed-data instead makes OpenSSL's
        // side about 3x slower at 1 MiB, in its own copying: not the fair comparison.)
        let sealed_enc = smime.seal(&msg, &enc_opts).unwrap();
        let ossl_signed = [entity.as_slice(), &ossl_sign(&entity)].concat();
        let ossl_enc = ossl_encrypt(&ossl_signed);
        let raw_seal = |data: &[u8]| {
            let mut sig = vec![0u8; raw_key.public_modulus_len()];
            raw_key
                .sign(&signature::RSA_PKCS1_SHA256, &rng, data, &mut sig)
                .unwrap();
            let key = aws_lc_rs::aead::LessSafeKey::new(
                aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::AES_256_GCM, &[7u8; 32])
                    .unwrap(),
            );
            let mut buf = data.to_vec();
            let tag = key
                .seal_in_place_separate_tag(
                    aws_lc_rs::aead::Nonce::assume_unique_for_key([1u8; 12]),
                    aws_lc_rs::aead::Aad::empty(),
                    &mut buf,
                )
                .unwrap();
            let mut wrapped = vec![0u8; oaep_public.ciphertext_size()];
            oaep_public
                .encrypt(
                    &aws_lc_rs::rsa::OAEP_SHA256_MGF1SHA256,
                    &[7u8; 32],
                    &mut wrapped,
                    None,
                )
                .unwrap();
            (buf, tag, wrapped, sig)
        };
        let (ct, tag, wrapped, sig) = raw_seal(&entity);
        let mut g = c.benchmark_group(format!("smime_seal_encrypted_{name}"));
        g.throughput(Throughput::Bytes(entity.len() as u64));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| smime.seal(black_box(&msg), &enc_opts).unwrap())
        });
        g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
            b.iter(|| {
                let entity = black_box(&entity);
                ossl_encrypt(&[entity.as_slice(), &ossl_sign(entity)].concat())
            })
        });
        // The previous sessions' row: only the detached signature goes through
        // CMS_encrypt, so OpenSSL does less than the job (no pass over the content).
        // Kept to show what that lighter work costs.
        g.bench_function(BenchmarkId::from_parameter("openssl-cms-sig-only"), |b| {
            b.iter(|| ossl_encrypt(&ossl_sign(black_box(&entity))))
        });
        g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
            b.iter(|| raw_seal(black_box(&entity)))
        });
        g.finish();

        let mut g = c.benchmark_group(format!("smime_open_encrypted_{name}"));
        g.throughput(Throughput::Bytes(entity.len() as u64));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| bob.open(black_box(&sealed_enc), &policy).unwrap())
        });
        // OpenSSL's decrypt, then verify of the signed-data inside.
        let ossl_open = |cms: CmsContentInfo| {
            let body = cms.decrypt(&bob_key, &bob_cert).unwrap();
            let (content, signature) = body.split_at(entity.len());
            let mut inner = CmsContentInfo::from_der(signature).unwrap();
            inner
                .verify(
                    Some(&no_certs),
                    Some(&trust),
                    Some(content),
                    None,
                    CMSOptions::BINARY,
                )
                .unwrap();
        };
        g.bench_function(BenchmarkId::from_parameter("openssl-cms"), |b| {
            b.iter(|| ossl_open(CmsContentInfo::from_der(black_box(&ossl_enc)).unwrap()))
        });
        // The same with OpenSSL reading the S/MIME message (MIME and base64 of the outer
        // layer, SMIME_read_CMS), which mailseal does and the DER-in row above does not.
        let ossl_smime = {
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD.encode(&ossl_enc);
            let mut m =
                b"MIME-Version: 1.0\r\nContent-Disposition: attachment; filename=\"smime.p7m\"\r\n\
Content-Type: application/pkcs7-mime; smime-type=authEnveloped-data; name=\"smime.p7m\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\n"
                    .to_vec();
            for line in b64.as_bytes().chunks(64) {
                m.extend_from_slice(line);
                m.extend_from_slice(b"\r\n");
            }
            m
        };
        // The previous sessions' row: only the signature was encrypted (see seal).
        let sig_only = ossl_encrypt(&ossl_signed[entity.len()..]);
        g.bench_function(BenchmarkId::from_parameter("openssl-cms-sig-only"), |b| {
            b.iter(|| {
                let signature = CmsContentInfo::from_der(black_box(&sig_only))
                    .unwrap()
                    .decrypt(&bob_key, &bob_cert)
                    .unwrap();
                CmsContentInfo::from_der(&signature)
                    .unwrap()
                    .verify(
                        Some(&no_certs),
                        Some(&trust),
                        Some(&entity),
                        None,
                        CMSOptions::BINARY,
                    )
                    .unwrap();
            })
        });
        g.bench_function(BenchmarkId::from_parameter("openssl-smime"), |b| {
            b.iter(|| ossl_open(CmsContentInfo::smime_read_cms(black_box(&ossl_smime)).unwrap()))
        });
        g.bench_function(BenchmarkId::from_parameter("raw-primitives"), |b| {
            b.iter(|| {
                let mut cek = vec![0u8; oaep_private.min_output_size()];
                oaep_private
                    .decrypt(
                        &aws_lc_rs::rsa::OAEP_SHA256_MGF1SHA256,
                        &wrapped,
                        &mut cek,
                        None,
                    )
                    .unwrap();
                let key = aws_lc_rs::aead::LessSafeKey::new(
                    aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::AES_256_GCM, &[7u8; 32])
                        .unwrap(),
                );
                let mut buf = ct.clone();
                buf.extend_from_slice(tag.as_ref());
                let plain = key
                    .open_in_place(
                        aws_lc_rs::aead::Nonce::assume_unique_for_key([1u8; 12]),
                        aws_lc_rs::aead::Aad::empty(),
                        &mut buf,
                    )
                    .unwrap()
                    .to_vec();
                UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, &public)
                    .verify(&plain, &sig)
                    .unwrap();
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
    for op in ["sign", "open", "seal_encrypted", "open_encrypted"] {
        for size in ["2KiB", "1MiB"] {
            let group: &'static str = Box::leak(format!("smime_{op}_{size}").into_boxed_str());
            rows.push((group, "mailseal", "openssl-cms"));
            if op.ends_with("encrypted") {
                rows.push((group, "mailseal", "openssl-cms-sig-only"));
            }
            if op == "open_encrypted" {
                rows.push((group, "mailseal", "openssl-smime"));
            }
            rows.push((group, "mailseal", "raw-primitives"));
        }
    }
    common::print_ratios(&rows);
}
