//! `corpus mutate`: 1,000 mutants of each kind, fed to OpenSSL's `cms -decrypt` and
//! `-verify` (S/MIME) and to GnuPG's `--decrypt` (OpenPGP), pass their cryptographic
//! checks (at least 99% required: every one passes today), and are mutated: the
//! signed content OpenSSL hands back differs from the seed's.

use std::path::Path;
use std::process::Command;

use mailseal::corpus::{self, Layer, MutateOptions};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::Profile;

use crate::common;

pub(super) fn seed(from: &str, to: &str, id: &str, text: &str) -> Vec<u8> {
    let v = common::with(
        common::request(),
        serde_json::json!({"messageId": id, "payload": {"message": {"messageId": "p", "role": "ROLE_USER", "parts": [{"text": text}]}}}),
    );
    MailA2aMessage::new(from, &[to], common::env(v))
        .to_rfc5322()
        .unwrap()
}

pub(super) fn store(dir: &Path, files: &[&str]) -> DirectoryStore {
    let s = DirectoryStore::open(dir).unwrap();
    for f in files {
        s.import(&std::fs::read(common::fixture(f)).unwrap(), f, false)
            .unwrap();
    }
    s
}

/// Alice's S/MIME store (her keys, Bob's certificate) under `dir`, and two seeds from
/// her to Bob.
pub(super) fn smime_sender(dir: &Path) -> (DirectoryStore, Vec<Vec<u8>>) {
    let alice = store(
        &dir.join("alice"),
        &[
            "rfc9216/alice.sign.crt",
            "rfc9216/alice.sign.key",
            "rfc9216/alice.encrypt.crt",
            "rfc9216/alice.encrypt.key",
            "rfc9216/bob.encrypt.crt",
        ],
    );
    let from = "alice@smime.example";
    let seeds = vec![
        seed(from, "bob@smime.example", "m-1", "Summarize the report."),
        seed(from, "bob@smime.example", "m-2", "Cancel the task."),
    ];
    (alice, seeds)
}

/// Alice's OpenPGP store (her key, Bob's certificate) under `dir`, and a seed from her
/// to Bob.
pub(super) fn openpgp_sender(dir: &Path) -> (DirectoryStore, Vec<Vec<u8>>) {
    let alice = store(
        &dir.join("alice"),
        &[
            "openpgp/alice@openpgp.example.sec.asc",
            "openpgp/bob@openpgp.example.pub.asc",
        ],
    );
    let seeds = vec![seed(
        "alice@openpgp.example",
        "bob@openpgp.example",
        "m-1",
        "Summarize the report.",
    )];
    (alice, seeds)
}

/// 1,000 mutants over the three layers (334, 333, 333).
fn mutants(store: &DirectoryStore, seeds: &[Vec<u8>], profile: Profile) -> Vec<(Layer, Vec<u8>)> {
    let mut out = Vec::new();
    for (layer, count) in [(Layer::Inner, 334), (Layer::Json, 333), (Layer::Outer, 333)] {
        let mut opts = MutateOptions::new(layer, count);
        opts.seed = 21;
        opts.profile = profile;
        let made = corpus::mutate(store, seeds, &opts).unwrap();
        assert_eq!(made.len(), count);
        out.extend(made.into_iter().map(|m| (layer, m)));
    }
    out
}

/// The number of lines of the header section of `m`.
fn header_lines(m: &[u8]) -> usize {
    let end = m
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(m.len());
    m[..end].split(|&c| c == b'\n').count()
}

#[test]
fn smime_mutants_pass_openssl_cms_decrypt_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, seeds) = smime_sender(dir.path());
    let all = mutants(&alice, &seeds, Profile::Smime);
    let (mut passed, mut changed) = (0, 0);
    let seed_lines = header_lines(&seeds[0]);
    for (i, (layer, m)) in all.iter().enumerate() {
        let msg = dir.path().join(format!("m{i}.eml"));
        let inner = dir.path().join(format!("i{i}.eml"));
        let content = dir.path().join(format!("c{i}.eml"));
        std::fs::write(&msg, m).unwrap();
        let decrypt = Command::new("openssl")
            .args(["cms", "-decrypt", "-in"])
            .arg(&msg)
            .arg("-recip")
            .arg(common::fixture("rfc9216/bob.encrypt.crt"))
            .arg("-inkey")
            .arg(common::fixture("rfc9216/bob.encrypt.key"))
            .arg("-out")
            .arg(&inner)
            .output()
            .unwrap();
        let verify = decrypt.status.success()
            && Command::new("openssl")
                .args(["cms", "-verify", "-purpose", "any", "-in"])
                .arg(&inner)
                .arg("-CAfile")
                .arg(common::fixture("rfc9216/ca.rsa.crt"))
                .arg("-out")
                .arg(&content)
                .output()
                .unwrap()
                .status
                .success();
        passed += usize::from(verify);
        let mutated = match layer {
            Layer::Outer => header_lines(m) > seed_lines + 2,
            _ => verify && !seeds.contains(&std::fs::read(&content).unwrap()),
        };
        changed += usize::from(mutated);
    }
    println!(
        "S/MIME: {passed} of {} pass OpenSSL, {changed} mutated",
        all.len()
    );
    assert!(passed * 100 >= all.len() * 99, "{passed} of {}", all.len());
    assert!(
        changed * 100 >= all.len() * 95,
        "{changed} of {} mutated",
        all.len()
    );
}

#[test]
fn openpgp_mutants_pass_gpg_decrypt_with_a_good_signature() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, seeds) = openpgp_sender(dir.path());
    let all = mutants(&alice, &seeds, Profile::OpenPgp);
    let home = dir.path().join("gnupg");
    std::fs::create_dir(&home).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let import = Command::new("gpg")
        .arg("--homedir")
        .arg(&home)
        .args(["--batch", "--import"])
        .arg(common::fixture("openpgp/bob@openpgp.example.sec.asc"))
        .arg(common::fixture("openpgp/alice@openpgp.example.pub.asc"))
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    // Four at a time: each decryption is an RSA-3072 private-key operation in gpg.
    let passed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for chunk in all.chunks(all.len().div_ceil(4)) {
            let (home, passed) = (&home, &passed);
            s.spawn(move || {
                for (_, m) in chunk {
                    let begin = m
                        .windows(27)
                        .position(|w| w == b"-----BEGIN PGP MESSAGE-----")
                        .unwrap();
                    let end = m
                        .windows(25)
                        .position(|w| w == b"-----END PGP MESSAGE-----")
                        .unwrap()
                        + 25;
                    let mut child = Command::new("gpg")
                        .arg("--homedir")
                        .arg(home)
                        .args(["--batch", "--status-fd", "1", "--decrypt"])
                        .stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .unwrap();
                    use std::io::Write;
                    child
                        .stdin
                        .take()
                        .unwrap()
                        .write_all(&m[begin..end])
                        .unwrap();
                    let out = child.wait_with_output().unwrap();
                    let status = String::from_utf8_lossy(&out.stdout);
                    if out.status.success() && status.contains("[GNUPG:] GOODSIG") {
                        passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let passed = passed.into_inner();
    println!(
        "OpenPGP: {passed} of {} pass gpg --decrypt with a good signature",
        all.len()
    );
    assert!(passed * 100 >= all.len() * 99, "{passed} of {}", all.len());
}

#[test]
fn the_same_seed_makes_the_same_mutations() {
    let dir = tempfile::tempdir().unwrap();
    let alice = store(
        &dir.path().join("alice"),
        &["rfc9216/alice.sign.crt", "rfc9216/alice.sign.key"],
    );
    let seeds = vec![seed(
        "alice@smime.example",
        "bob@smime.example",
        "m-1",
        "hi",
    )];
    // Without a signing time, the time of the run is signed (and makes the boundary
    // of a signed-only message): the signed entities are compared.
    let entity = |m: &[u8]| -> Vec<u8> {
        let text = String::from_utf8_lossy(m).into_owned();
        let boundary = text
            .split("boundary=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string();
        let body = text.split(&format!("--{boundary}\r\n")).nth(1).unwrap();
        body.as_bytes().to_vec()
    };
    let make = |seed: u64| {
        let mut opts = MutateOptions::new(Layer::Inner, 20);
        opts.seed = seed;
        opts.encrypt = false;
        corpus::mutate(&alice, &seeds, &opts).unwrap()
    };
    let (a, b, c) = (make(4), make(4), make(5));
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(entity(x), entity(y));
    }
    assert!(a.iter().zip(&c).any(|(x, y)| entity(x) != entity(y)));
    // With one: the same bytes, signed and encrypted too (content keys, nonces and
    // OAEP seeds come from the seed).
    let at = time::OffsetDateTime::from_unix_timestamp(1_780_272_000).unwrap();
    let (sender, to_bob) = smime_sender(&dir.path().join("to-bob"));
    for encrypt in [false, true] {
        let make = |seed: u64| {
            let mut opts = MutateOptions::new(Layer::Json, 5);
            opts.seed = seed;
            opts.encrypt = encrypt;
            opts.at = Some(at);
            corpus::mutate(&sender, &to_bob, &opts).unwrap()
        };
        let (x, y, z) = (make(4), make(4), make(5));
        assert_eq!(
            x, y,
            "encrypt {encrypt}: the same seed and time, the same bytes"
        );
        assert_ne!(x, z);
    }
    // No seed: refused, not an empty output.
    assert!(corpus::mutate(&alice, &[], &MutateOptions::new(Layer::Json, 1)).is_err());
}
