//! Hostile input never panics: the MIME corpus (mail-parser's RFC and malformed
//! samples), every truncation and single-byte flips of valid messages, each through
//! parse + rules + structure + open.

use crate::common;

use mailseal::dispatch::Dispatcher;
use mailseal::envelope::ValidationContext;
use mailseal::message::{structure, Limits, MailA2aMessage};
use mailseal::seal::{OpenPolicy, Opener};

fn exercise(raw: &[u8]) -> bool {
    let limits = Limits::default();
    let _ = structure(raw, &limits);
    let _ = Dispatcher::new().open(raw, &OpenPolicy::default());
    match MailA2aMessage::parse(raw, &limits) {
        Ok(m) => m.check(&ValidationContext::default()).is_empty(),
        Err(_) => false,
    }
}

#[test]
fn mime_corpus_never_panics() {
    let mut n = 0;
    for dir in ["mime/mail-parser/rfc", "mime/mail-parser/malformed"] {
        for e in std::fs::read_dir(common::data(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "eml") {
                let raw = std::fs::read(&p).unwrap();
                // None of these is a MailA2A message.
                assert!(!exercise(&raw), "{} validated", p.display());
                n += 1;
            }
        }
    }
    assert!(n >= 16);
}

fn valid_messages() -> Vec<Vec<u8>> {
    [
        "ok--published-request.eml",
        "ok--base64-machine-part.eml",
        "ok--cid-attachment.eml",
        "ok--published-payment-required.eml",
    ]
    .iter()
    .map(|f| std::fs::read(common::data(&format!("../cases/{f}"))).unwrap())
    .collect()
}

#[test]
fn every_truncation_is_handled() {
    for raw in valid_messages() {
        assert!(exercise(&raw));
        for cut in 0..raw.len() {
            exercise(&raw[..cut]);
        }
    }
}

#[test]
fn byte_flips_are_handled_and_never_change_a_validated_envelope_silently() {
    for raw in valid_messages() {
        let original = MailA2aMessage::parse(&raw, &Limits::default()).unwrap();
        for i in 0..raw.len() {
            for mask in [0x01u8, 0x20, 0x80, 0xff] {
                let mut m = raw.clone();
                m[i] ^= mask;
                if exercise(&m) {
                    // A flip that still validates must show in what was read, or be in
                    // a part of the message that carries no meaning (case of a header
                    // name, white space, boundary text, the fallback text).
                    let flipped = MailA2aMessage::parse(&m, &Limits::default()).unwrap();
                    if flipped.envelope_bytes() != original.envelope_bytes() {
                        assert_ne!(flipped.content_digest(), original.content_digest());
                    }
                }
            }
        }
    }
}

/// Fuzzer crash reproducers (`tests/cases/crashes/`): each must be handled without a
/// panic, in this (debug-assertion) build as in release.
#[test]
fn fuzz_crash_reproducers_are_handled() {
    let dir = common::data("../cases/crashes");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let raw = std::fs::read(e.unwrap().path()).unwrap();
        exercise(&raw);
        n += 1;
    }
    assert!(n >= 2);
    // The round-trip finding: a From of control characters once passed the rules.
    let raw = std::fs::read(common::data(
        "../cases/crashes/message_parse-control-chars-in-from",
    ))
    .unwrap();
    assert!(
        !exercise(&raw),
        "a From that is not an address must not validate"
    );
}

/// Issue #17, store hygiene: every `--out` is written atomically, owner-only, and
/// never through a symlink planted at the path (here by someone who wants the output
/// written over a file of theirs choosing).
#[cfg(unix)]
#[test]
fn fail_out_never_writes_through_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let out = dir.path().join("plain.eml");
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    let env = dir.path().join("env.json");
    std::fs::write(&env, serde_json::to_vec(&common::request()).unwrap()).unwrap();
    let r = common::run(
        &[
            "compose",
            "--from",
            "a@example.com",
            "--to",
            "b@example.com",
            "--in",
            env.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let meta = std::fs::symlink_metadata(&out).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the link was replaced by a file"
    );
    assert_eq!(meta.permissions().mode() & 0o077, 0, "owner-only");
    assert!(std::fs::read(&out).unwrap().starts_with(b"From:"));
    assert!(!dir.path().join("plain.eml.partial").exists());
}
