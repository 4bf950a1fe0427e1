//! OpenPGP sealing (sign-then-encrypt) and opening (decrypt-then-verify) of 2 KiB and
//! 1 MiB envelopes, against Sequoia alone doing the same encrypt+sign / decrypt+verify
//! on the same keys and bytes in the same process (so the ratio is mailseal's MIME,
//! key store and policy overhead), and, at 1 MiB, `mailseal` against `gpg` as whole
//! processes.
//!
//! Keys: v4 Ed25519/Cv25519 for Alice (sender, and recipient of her own copy) and Bob.
//! The backend is the one the bench is built with (`--no-default-features --features
//! crypto-nettle` for Nettle).

mod common;

use std::hint::black_box;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use criterion::{BenchmarkId, Criterion, Throughput};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::openpgp::{generate, KeyProfile, OpenPgp};
use mailseal::seal::{OpenPolicy, Opener, SealOptions, Sealer};
use mailseal::Profile;
use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::crypto::{KeyPair, SessionKey};
use openpgp::packet::{PKESK, SKESK};
use openpgp::parse::stream::{
    DecryptionHelper, DecryptorBuilder, MessageStructure, VerificationHelper,
};
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::stream::{Armorer, Encryptor, LiteralWriter, Message, Recipient, Signer};
use openpgp::serialize::SerializeInto;
use openpgp::types::{DataFormat, HashAlgorithm, SymmetricAlgorithm};

fn message(text_len: usize) -> MailA2aMessage {
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
    MailA2aMessage::new("alice@pgp.example", &["bob@pgp.example"], env)
}

/// Sequoia alone: the armored sign-then-encrypt of `data`.
fn sequoia_seal(data: &[u8], signer: &KeyPair, recipients: &[Cert]) -> Vec<u8> {
    let p = StandardPolicy::new();
    let keys: Vec<_> = recipients
        .iter()
        .flat_map(|c| {
            c.keys()
                .with_policy(&p, None)
                .supported()
                .alive()
                .revoked(false)
                .for_transport_encryption()
                .map(|ka| {
                    Recipient::new(ka.valid_cert().features(), ka.key().key_handle(), ka.key())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut out = Vec::with_capacity(data.len() * 4 / 3 + 4096);
    let m = Message::new(&mut out);
    let m = Armorer::new(m).build().unwrap();
    let m = Encryptor::for_recipients(m, keys).build().unwrap();
    let mut s = Signer::new(m, signer.clone())
        .unwrap()
        .hash_algo(HashAlgorithm::SHA256)
        .unwrap();
    for r in recipients {
        s = s.add_intended_recipient(r);
    }
    let m = s.build().unwrap();
    let mut w = LiteralWriter::new(m)
        .format(DataFormat::Binary)
        .build()
        .unwrap();
    w.write_all(data).unwrap();
    w.finalize().unwrap();
    out
}

struct Helper<'a> {
    certs: &'a [Cert],
    key: &'a KeyPair,
}

impl VerificationHelper for Helper<'_> {
    fn get_certs(&mut self, _: &[openpgp::KeyHandle]) -> openpgp::Result<Vec<Cert>> {
        Ok(self.certs.to_vec())
    }
    fn check(&mut self, structure: MessageStructure) -> openpgp::Result<()> {
        for layer in structure {
            if let openpgp::parse::stream::MessageLayer::SignatureGroup { results } = layer {
                if results.iter().any(|r| r.is_ok()) {
                    return Ok(());
                }
            }
        }
        Err(anyhow::anyhow!("no good signature"))
    }
}

impl DecryptionHelper for Helper<'_> {
    fn decrypt(
        &mut self,
        pkesks: &[PKESK],
        _: &[SKESK],
        sym_algo: Option<SymmetricAlgorithm>,
        decrypt: &mut dyn FnMut(Option<SymmetricAlgorithm>, &SessionKey) -> bool,
    ) -> openpgp::Result<Option<Cert>> {
        let mut pair = self.key.clone();
        for p in pkesks {
            if p.recipient()
                .is_some_and(|r| r.aliases(pair.public().key_handle()))
            {
                if let Some((algo, sk)) = p.decrypt(&mut pair, sym_algo) {
                    if decrypt(algo, &sk) {
                        return Ok(None);
                    }
                }
            }
        }
        Err(anyhow::anyhow!("not for us"))
    }
}

/// Sequoia alone: decrypt and verify an armored message.
fn sequoia_open(armored: &[u8], key: &KeyPair, certs: &[Cert]) -> Vec<u8> {
    let p = StandardPolicy::new();
    let mut d = DecryptorBuilder::from_bytes(armored)
        .unwrap()
        .with_policy(&p, None, Helper { certs, key })
        .unwrap();
    let mut out = Vec::new();
    d.read_to_end(&mut out).unwrap();
    out
}

fn transport_keypair(tsk: &Cert) -> KeyPair {
    let p = StandardPolicy::new();
    tsk.keys()
        .with_policy(&p, None)
        .secret()
        .for_transport_encryption()
        .next()
        .unwrap()
        .key()
        .clone()
        .into_keypair()
        .unwrap()
}

fn signing_keypair(tsk: &Cert) -> KeyPair {
    let p = StandardPolicy::new();
    tsk.keys()
        .with_policy(&p, None)
        .secret()
        .for_signing()
        .next()
        .unwrap()
        .key()
        .clone()
        .into_keypair()
        .unwrap()
}

fn armored_block(text: &[u8]) -> Vec<u8> {
    let s = memchr::memmem::find(text, b"-----BEGIN PGP MESSAGE-----").unwrap();
    let e = memchr::memmem::find(text, b"-----END PGP MESSAGE-----").unwrap() + 25;
    text[s..e].to_vec()
}

fn run_process(cmd: &mut Command, stdin: &[u8]) -> Vec<u8> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let w = std::thread::spawn(move || input.write_all(&data));
    let out = child.wait_with_output().unwrap();
    let _ = w.join();
    assert!(out.status.success(), "{cmd:?}");
    out.stdout
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let alice_tsk = generate("alice@pgp.example", None, KeyProfile::Rfc4880).unwrap();
    let bob_tsk = generate("bob@pgp.example", None, KeyProfile::Rfc4880).unwrap();
    let alice_cert = Cert::from_bytes(&alice_tsk[..]).unwrap();
    let bob_cert = Cert::from_bytes(&bob_tsk[..]).unwrap();
    let public = |c: &Cert| c.clone().strip_secret_key_material().to_vec().unwrap();
    let alice_store = DirectoryStore::open(dir.path().join("alice")).unwrap();
    alice_store.import(&alice_tsk, "alice", false).unwrap();
    alice_store
        .import(&public(&bob_cert), "bob", false)
        .unwrap();
    let bob_store = DirectoryStore::open(dir.path().join("bob")).unwrap();
    bob_store.import(&bob_tsk, "bob", false).unwrap();
    bob_store
        .import(&public(&alice_cert), "alice", false)
        .unwrap();
    // The directory store trusts its caches only for files and listings that changed
    // more than 2 s before they were read (coarse timestamps): a gateway's store is
    // older than that, so the bench lets the new one settle first.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let alice = OpenPgp::new(&alice_store);
    let bob = OpenPgp::new(&bob_store);
    let opts = SealOptions::new(Profile::OpenPgp);
    let policy = OpenPolicy::default();

    let signer = signing_keypair(&alice_cert);
    let bob_key = transport_keypair(&bob_cert);
    let recipients = [
        bob_cert.clone().strip_secret_key_material(),
        alice_cert.clone().strip_secret_key_material(),
    ];
    let alice_public = [alice_cert.clone().strip_secret_key_material()];

    // gpg, for the whole-process comparison: Bob's key and Alice's certificate.
    let gnupg = dir.path().join("gnupg");
    std::fs::create_dir_all(&gnupg).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&gnupg, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let gpg = |args: &[&str]| {
        let mut c = Command::new("gpg");
        c.env("GNUPGHOME", &gnupg)
            .args([
                "--batch",
                "--yes",
                "--no-tty",
                "--trust-model",
                "always",
                "--quiet",
            ])
            .args(args);
        c
    };
    run_process(
        &mut gpg(&["--import"]),
        &bob_cert.as_tsk().to_vec().unwrap(),
    );
    run_process(
        &mut gpg(&["--import"]),
        &alice_cert.as_tsk().to_vec().unwrap(),
    );

    for (name, len) in [("2KiB", 2 * 1024), ("1MiB", 1024 * 1024)] {
        let msg = message(len);
        let entity = msg.to_inner_entity(true).unwrap();
        let sealed = alice.seal(&msg, &opts).unwrap();
        let armored = armored_block(&sealed);
        assert!(bob.open(&sealed, &policy).is_ok());
        let opened = sequoia_open(&armored, &bob_key, &alice_public);
        assert!(
            opened.len().abs_diff(entity.len()) < 64,
            "{} {}",
            opened.len(),
            entity.len()
        );

        let mut g = c.benchmark_group(format!("openpgp_seal_{name}"));
        g.throughput(Throughput::Bytes(entity.len() as u64));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| black_box(alice.seal(black_box(&msg), &opts).unwrap()))
        });
        g.bench_function(BenchmarkId::from_parameter("sequoia"), |b| {
            b.iter(|| black_box(sequoia_seal(black_box(&entity), &signer, &recipients)))
        });
        g.finish();

        let mut g = c.benchmark_group(format!("openpgp_open_{name}"));
        g.throughput(Throughput::Bytes(entity.len() as u64));
        g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
            b.iter(|| black_box(bob.open(black_box(&sealed), &policy).unwrap()))
        });
        g.bench_function(BenchmarkId::from_parameter("sequoia"), |b| {
            b.iter(|| black_box(sequoia_open(black_box(&armored), &bob_key, &alice_public)))
        });
        g.finish();

        if len >= 1024 * 1024 {
            // Whole processes: `mailseal seal`/`open` against `gpg --encrypt --sign` /
            // `gpg --decrypt`, same keys, same bytes.
            let plain = dir.path().join("plain.eml");
            std::fs::write(&plain, msg.to_rfc5322().unwrap()).unwrap();
            let bin = env!("CARGO_BIN_EXE_mailseal");
            let store_arg = |s: &Path| s.to_str().unwrap().to_string();
            let mut g = c.benchmark_group(format!("openpgp_process_seal_{name}"));
            g.sample_size(10);
            g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
                b.iter(|| {
                    run_process(
                        Command::new(bin).args([
                            "seal",
                            "--store",
                            &store_arg(alice_store.root()),
                            "--profile",
                            "openpgp",
                            "--in",
                            plain.to_str().unwrap(),
                        ]),
                        b"",
                    )
                })
            });
            g.bench_function(BenchmarkId::from_parameter("gpg"), |b| {
                b.iter(|| {
                    run_process(
                        &mut gpg(&[
                            "--armor",
                            "--encrypt",
                            "--sign",
                            "--local-user",
                            "alice@pgp.example",
                            "--recipient",
                            "bob@pgp.example",
                            "--recipient",
                            "alice@pgp.example",
                        ]),
                        &entity,
                    )
                })
            });
            g.finish();
            let mut g = c.benchmark_group(format!("openpgp_process_open_{name}"));
            g.sample_size(10);
            g.bench_function(BenchmarkId::from_parameter("mailseal"), |b| {
                b.iter(|| {
                    run_process(
                        Command::new(bin).args(["open", "--store", &store_arg(bob_store.root())]),
                        &sealed,
                    )
                })
            });
            g.bench_function(BenchmarkId::from_parameter("gpg"), |b| {
                b.iter(|| run_process(&mut gpg(&["--decrypt"]), &armored))
            });
            g.finish();
        }
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    let mut rows = Vec::new();
    for op in ["seal", "open"] {
        for size in ["2KiB", "1MiB"] {
            let group: &'static str = Box::leak(format!("openpgp_{op}_{size}").into_boxed_str());
            rows.push((group, "mailseal", "sequoia"));
        }
        let group: &'static str = Box::leak(format!("openpgp_process_{op}_1MiB").into_boxed_str());
        rows.push((group, "mailseal", "gpg"));
    }
    common::print_ratios(&rows);
}
