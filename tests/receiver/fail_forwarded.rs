//! Surreptitious forwarding (MailA2A section 9, issue #17): a message Alice signed for
//! Mallory, forwarded by Mallory to Bob, is refused by Bob (exit 6, nothing on stdout,
//! nothing recorded), by default, for S/MIME and OpenPGP alike. Bob knows his own
//! addresses from the identities in his key store; nobody has to configure them.
//!
//! The attacker controls everything except the victim's store: Mallory has her own
//! keys and CA (the RFC 9216 Carlos identity, under the Ed25519 sample CA), a genuine
//! message Alice signed for her, and the mail she sends Bob. Alice is an honest third
//! party whose certificate Bob has pinned.

use crate::common;

use std::path::{Path, PathBuf};

use common::{fixture, run};
use mailseal::message::MailA2aMessage;
use mailseal::replay::MemoryReplayStore;
use mailseal::{Outcome, Profile, Receiver, SealOptions, Sender};

fn fx(rel: &str) -> String {
    fixture(rel).display().to_string()
}

fn import(store: &Path, files: &[&str], trusted: bool) {
    let mut args = vec!["key", "import", "--store", store.to_str().unwrap()];
    if trusted {
        args.push("--trusted");
    }
    args.extend_from_slice(files);
    let out = run(&args, b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Alice's, Mallory's and Bob's stores, each its own directory.
pub(crate) struct World {
    _dir: tempfile::TempDir,
    pub(crate) alice: PathBuf,
    mallory: PathBuf,
    pub(crate) bob: PathBuf,
}

pub(crate) fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let alice = dir.path().join("alice");
    let mallory = dir.path().join("mallory");
    let bob = dir.path().join("bob");
    import(
        &alice,
        &[
            &fx("rfc9216/alice.sign.crt"),
            &fx("rfc9216/alice.sign.key"),
            &fx("openpgp/alice@openpgp.example.sec.asc"),
        ],
        false,
    );
    import(
        &mallory,
        &[
            &fx("rfc9216/carlos.sign.crt"),
            &fx("rfc9216/carlos.sign.key"),
            &fx("rfc9216/alice.sign.crt"),
        ],
        false,
    );
    import(&mallory, &[&fx("rfc9216/ca.25519.crt")], true);
    // The victim: Alice pinned (S/MIME and OpenPGP), Bob's own identities.
    import(
        &bob,
        &[
            &fx("rfc9216/alice.sign.crt"),
            &fx("rfc9216/bob.sign.crt"),
            &fx("rfc9216/bob.sign.key"),
            &fx("openpgp/alice@openpgp.example.pub.asc"),
            &fx("openpgp/bob@openpgp.example.sec.asc"),
        ],
        false,
    );
    World {
        _dir: dir,
        alice,
        mallory,
        bob,
    }
}

pub(crate) fn plain(from: &str, to: &str, id: &str) -> MailA2aMessage {
    let env = common::with(
        common::request(),
        serde_json::json!({"messageId": id, "idempotencyKey": format!("effect-{id}")}),
    );
    MailA2aMessage::new(from, &[to], common::env(env))
}

/// `mailseal seal --sign-only` of `msg` with `store`'s key, under `profile`.
pub(crate) fn sign(store: &Path, msg: &MailA2aMessage, profile: &str) -> Vec<u8> {
    let out = run(
        &[
            "seal",
            "--store",
            store.to_str().unwrap(),
            "--profile",
            profile,
            "--sign-only",
        ],
        &msg.to_rfc5322().unwrap(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn open(store: &Path, raw: &[u8]) -> std::process::Output {
    run(&["open", "--store", store.to_str().unwrap()], raw)
}

fn assert_opens(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assert_refused_as_forwarded(out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    assert!(stderr.contains("forwarded"), "{stderr}");
}

#[test]
fn fail_smime_signed_for_mallory_and_forwarded_to_bob() {
    let w = world();
    let for_mallory = sign(
        &w.alice,
        &plain("alice@smime.example", "carlos@smime.example", "fwd-1"),
        "smime",
    );
    // Mallory herself opens it: it is hers.
    let out = open(&w.mallory, &for_mallory);
    assert_opens(&out);
    // Forwarded byte for byte to Bob: refused.
    assert_refused_as_forwarded(&open(&w.bob, &for_mallory));
    // Nothing was recorded: a genuine message to Bob with the same idempotency key
    // and message id still opens as new.
    let for_bob = sign(
        &w.alice,
        &plain("alice@smime.example", "bob@smime.example", "fwd-1"),
        "smime",
    );
    let out = open(&w.bob, &for_bob);
    assert_opens(&out);
    assert!(out.stdout.starts_with(b"{"));
}

#[test]
fn fail_openpgp_signed_for_mallory_and_forwarded_to_bob() {
    let w = world();
    let for_mallory = sign(
        &w.alice,
        &plain("alice@openpgp.example", "mallory@evil.example", "fwd-2"),
        "openpgp",
    );
    assert_refused_as_forwarded(&open(&w.bob, &for_mallory));
    let for_bob = sign(
        &w.alice,
        &plain("alice@openpgp.example", "bob@openpgp.example", "fwd-3"),
        "openpgp",
    );
    let out = open(&w.bob, &for_bob);
    assert_opens(&out);
}

#[test]
fn fail_wrong_audience_our_own_message_mailed_back_and_an_alias_needs_explicit_policy() {
    let w = world();
    // Alice's own message to Bob, mailed back to her (by Bob, or anyone who saw it):
    // it does not name her, so it is a reflection, refused; she reads her own sent
    // message only by asking for her own copy.
    let to_bob = sign(
        &w.alice,
        &plain("alice@smime.example", "bob@smime.example", "fwd-4"),
        "smime",
    );
    let out = open(&w.alice, &to_bob);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.contains("reflection"), "{stderr}");
    assert!(stderr.contains("--own-copy"), "{stderr}");
    let out = run(
        &["open", "--store", w.alice.to_str().unwrap(), "--own-copy"],
        &to_bob,
    );
    assert_opens(&out);

    // A message to a list Bob is on: refused by default, accepted once the list is
    // one of Bob's addresses by policy.
    let to_list = sign(
        &w.alice,
        &plain("alice@smime.example", "agents@smime.example", "fwd-5"),
        "smime",
    );
    let bob = common::cli_store(&w.bob);
    let mut receiver = Receiver::builder(bob.as_ref())
        .replay(MemoryReplayStore::default())
        .build();
    let err = receiver.receive(&to_list).unwrap_err();
    assert_eq!(mailseal::Classify::kind(&err), mailseal::ErrorKind::Policy);
    assert_refused_as_forwarded(&open(&w.bob, &to_list));
    let out = run(
        &[
            "open",
            "--store",
            w.bob.to_str().unwrap(),
            "--also-addressed-to",
            "Agents@smime.example",
        ],
        &to_list,
    );
    assert_opens(&out);
    // `open` above accepted it into Bob's state: in memory, by name, to receive it
    // afresh.
    let mut receiver = Receiver::builder(bob.as_ref())
        .replay_in_memory()
        .our_addresses(["agents@smime.example"])
        .build();
    let incoming = receiver.receive(&to_list).unwrap();
    assert!(matches!(incoming.outcome(), Outcome::Deliver { .. }));
    drop(incoming);
    // Bob's own identity is still his with the alias added.
    let incoming = receiver.receive(&to_bob).unwrap();
    assert!(matches!(incoming.outcome(), Outcome::Deliver { .. }));
}

#[test]
fn a_library_sender_and_receiver_apply_the_same_binding() {
    // Through `Sender` and `Receiver` (no command line): the same refusal.
    let w = world();
    let alice = common::cli_store(&w.alice);
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let for_mallory = Sender::builder(alice.as_ref())
        .replay(MemoryReplayStore::default())
        .build()
        .seal(
            &plain("alice@smime.example", "carlos@smime.example", "fwd-6"),
            &opts,
        )
        .unwrap();
    let bob = common::cli_store(&w.bob);
    let mut receiver = Receiver::builder(bob.as_ref()).build();
    let err = receiver.receive(&for_mallory).unwrap_err();
    assert_eq!(mailseal::Classify::kind(&err), mailseal::ErrorKind::Policy);
    assert!(err.to_string().contains("forwarded"), "{err}");
}

/// The re-encryption attack (MailA2A section 9): Alice signs and encrypts a request to
/// Mallory; Mallory decrypts it (here with an independent CMS implementation, as she
/// would with any tool), re-encrypts Alice's signed entity to Bob with OpenSSL and
/// sends it under Alice's From. The signature is Alice's and verifies; the protected
/// To names Mallory, so Bob refuses it as forwarded (exit 6, nothing on stdout).
#[test]
fn fail_smime_signed_and_encrypted_for_mallory_then_reencrypted_to_bob() {
    let python = common::peer_available(
        "python3 with pyca/cryptography",
        std::process::Command::new("python3").args(["-c", "import cryptography"]),
    );
    if !python {
        return;
    }
    let w = world();
    // Her own encryption certificate without its key: a new key for her own address,
    // which she accepts (the pins ask it of any import).
    let alice_store = w.alice.to_str().unwrap().to_string();
    let (alice_crt, carlos_crt) = (
        fx("rfc9216/alice.encrypt.crt"),
        fx("rfc9216/carlos.encrypt.crt"),
    );
    let out = run(
        &[
            "key",
            "import",
            "--accept-changed",
            "--store",
            &alice_store,
            &alice_crt,
            &carlos_crt,
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    import(
        &w.bob,
        &[
            &fx("rfc9216/bob.encrypt.crt"),
            &fx("rfc9216/bob.encrypt.key"),
        ],
        false,
    );
    let dir = tempfile::tempdir().unwrap();
    let msg = plain("alice@smime.example", "carlos@smime.example", "reenc-1");
    let sealed = common::seal_smime_cli(&w.alice, &msg, dir.path(), false);
    std::fs::write(dir.path().join("for-mallory.der"), common::der_of(&sealed)).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/cms_peer.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args([
            "decrypt",
            "--cert",
            &fx("rfc9216/carlos.encrypt.crt"),
            "--key",
            &fx("rfc9216/carlos.encrypt.key"),
        ])
        .arg(dir.path().join("for-mallory.der"))
        .arg(dir.path().join("signed.eml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Under an outer To of Bob the outer header contradicts the protected one (exit
    // 3); the careful attacker keeps Mallory's address outside too, and the recipient
    // binding refuses it (exit 6).
    for (outer_to, code) in [("bob@smime.example", 3), ("carlos@smime.example", 6)] {
        common::openssl(
            &[
                "cms",
                "-encrypt",
                "-aes-256-gcm",
                "-binary",
                "-in",
                "signed.eml",
                "-recip",
                &fx("rfc9216/bob.encrypt.crt"),
                "-from",
                "alice@smime.example",
                "-to",
                outer_to,
                "-subject",
                "[...]",
                "-out",
                "to-bob.eml",
            ],
            dir.path(),
        );
        let text = std::fs::read_to_string(dir.path().join("to-bob.eml")).unwrap();
        let mut mail = b"Mail-A2A-Binding: 1.0\r\n".to_vec();
        for line in text.lines() {
            mail.extend_from_slice(line.as_bytes());
            mail.extend_from_slice(b"\r\n");
        }
        let out = open(&w.bob, &mail);
        if code == 6 {
            assert_refused_as_forwarded(&out);
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "{stderr}");
            assert!(out.stdout.is_empty());
        }
    }
}
