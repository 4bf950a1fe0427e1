//! Sealing writes its output as it encodes it (`Sealer::seal_to`, the CLI's `seal`):
//! what is written opens like what `seal` returns, a file output appears whole or not
//! at all, and a refused message writes nothing.

use crate::common;

use common::{fixture, run};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::smime::Smime;
use mailseal::{OpenPolicy, Opener, Profile, SealOptions, Sealer};

fn store(dir: &std::path::Path, name: &str, files: &[(&str, bool)]) -> std::path::PathBuf {
    let root = dir.join(name);
    let s = DirectoryStore::open(&root).unwrap();
    for (f, trusted) in files {
        let bytes = std::fs::read(fixture(&format!("rfc9216/{f}"))).unwrap();
        s.import(&bytes, f, *trusted).unwrap();
    }
    root
}

fn message(text_len: usize) -> MailA2aMessage {
    let mut env = common::env(common::request());
    let text: String = "seal output ".chars().cycle().take(text_len).collect();
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": text}]}}),
    );
    MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env)
}

#[test]
fn smime_seal_to_writes_what_opens_like_seal() {
    let dir = tempfile::tempdir().unwrap();
    let alice = store(
        dir.path(),
        "alice",
        &[
            ("alice.sign.crt", false),
            ("alice.sign.key", false),
            ("alice.encrypt.crt", false),
            ("alice.encrypt.key", false),
            ("bob.encrypt.crt", false),
        ],
    );
    let bob = store(
        dir.path(),
        "bob",
        &[
            ("bob.encrypt.crt", false),
            ("bob.encrypt.key", false),
            ("alice.sign.crt", false),
            ("ca.rsa.crt", true),
        ],
    );
    let (alice, bob) = (
        DirectoryStore::open(alice).unwrap(),
        DirectoryStore::open(bob).unwrap(),
    );
    // Larger than one piece of the streamed base64 (57 KiB of DER), and small.
    for len in [100, 300_000] {
        let msg = message(len);
        for sign_only in [false, true] {
            let mut opts = SealOptions::new(Profile::Smime);
            opts.sign_only = sign_only;
            let whole = Smime::new(&alice).seal(&msg, &opts).unwrap();
            let mut streamed = Vec::new();
            Smime::new(&alice)
                .seal_to(&msg, &opts, &mut streamed)
                .unwrap();
            // Same layout: the headers are the same, the lengths nearly (the random
            // parts and the DER lengths around them vary by a few bytes).
            let head = |m: &[u8]| m[..memchr::memmem::find(m, b"\r\n\r\n").unwrap()].to_vec();
            if !sign_only {
                assert_eq!(head(&streamed), head(&whole));
            }
            assert!(
                streamed.len().abs_diff(whole.len()) < 64,
                "{len} {sign_only}"
            );
            assert!(streamed.ends_with(b"\r\n"));
            for sealed in [&whole, &streamed] {
                let opened = Smime::new(&bob)
                    .open(sealed, &OpenPolicy::default())
                    .unwrap();
                assert_eq!(opened.message.envelope(), msg.envelope());
            }
        }
    }
}

/// `mailseal seal --profile smime` with the store at `store`, to `out` or stdout.
fn seal_cli(
    store: &std::path::Path,
    plain: &std::path::Path,
    out: Option<&std::path::Path>,
) -> std::process::Output {
    let mut args = vec![
        "seal",
        "--store",
        store.to_str().unwrap(),
        "--profile",
        "smime",
        "--in",
        plain.to_str().unwrap(),
    ];
    if let Some(o) = out {
        args.extend(["--out", o.to_str().unwrap()]);
    }
    run(&args, b"")
}

#[test]
fn fail_cli_seal_refused_leaves_no_file_and_no_partial() {
    let dir = tempfile::tempdir().unwrap();
    // A store without Alice's signing key: sealing is refused (exit 5).
    let s = store(dir.path(), "s", &[("bob.encrypt.crt", false)]);
    let plain = dir.path().join("plain.eml");
    std::fs::write(&plain, message(100).to_rfc5322().unwrap()).unwrap();
    let out_path = dir.path().join("sealed.eml");
    let out = seal_cli(&s, &plain, Some(&out_path));
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out_path.exists());
    assert!(!dir.path().join("sealed.partial").exists());
    // To stdout: nothing written.
    let out = seal_cli(&s, &plain, None);
    assert_eq!(out.status.code(), Some(5));
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_seal_to_a_file_writes_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        "s",
        &[
            ("alice.sign.crt", false),
            ("alice.sign.key", false),
            ("alice.encrypt.crt", false),
            ("alice.encrypt.key", false),
            ("bob.encrypt.crt", false),
            ("ca.rsa.crt", true),
        ],
    );
    let plain = dir.path().join("plain.eml");
    std::fs::write(&plain, message(200_000).to_rfc5322().unwrap()).unwrap();
    let out_path = dir.path().join("sealed.eml");
    let out = seal_cli(&s, &plain, Some(&out_path));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join("sealed.partial").exists());
    let to_stdout = seal_cli(&s, &plain, None);
    let written = std::fs::read(&out_path).unwrap();
    assert_eq!(to_stdout.status.code(), Some(0));
    assert!(written.len().abs_diff(to_stdout.stdout.len()) < 64);
    assert!(written.ends_with(b"\r\n") && to_stdout.stdout.ends_with(b"\r\n"));
    // Alice opens her own copy, from the file.
    let opened = run(
        &[
            "open",
            "--own-copy",
            "--store",
            s.to_str().unwrap(),
            "--in",
            out_path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        opened.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&opened.stderr)
    );
}
