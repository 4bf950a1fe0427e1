//! `mailseal sop` against Sequoia's `sqop` (Debian's package, the SOP of `sq`), both
//! ways: sign with one and verify with the other, encrypt with one and decrypt with the
//! other, inline-sign and inline-verify, for keys each generates; and SOP's exit codes
//! for the failures an interoperability suite checks.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{peer_available, run};

/// Runs a SOP implementation (`mailseal sop` or `sqop`) in `dir`.
pub(super) fn sop(which: &str, dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut cmd = if which == "mailseal" {
        let mut c = Command::new(common::bin());
        c.arg("sop");
        c
    } else {
        Command::new(which)
    };
    let mut child = cmd
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let w = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    let _ = w.join();
    out
}

pub(super) fn ok(which: &str, dir: &Path, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = sop(which, dir, args, stdin);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{which} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A key made by `which` for `uid`, and its certificate, written to `NAME.key` and
/// `NAME.cert` in `dir`.
pub(super) fn key(which: &str, dir: &Path, name: &str, uid: &str) {
    let key = ok(which, dir, &["generate-key", uid], b"");
    std::fs::write(dir.join(format!("{name}.key")), &key).unwrap();
    let cert = ok(which, dir, &["extract-cert"], &key);
    std::fs::write(dir.join(format!("{name}.cert")), cert).unwrap();
}

pub(super) fn sqop() -> bool {
    peer_available("sqop", Command::new("sqop").arg("version"))
}

const MESSAGE: &[u8] =
    b"{\"kind\":\"request\",\"operation\":\"message/send\"}\r\nGr\xc3\xbc\xc3\x9fe\n";

#[test]
fn sign_with_one_verify_with_the_other() {
    if !sqop() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    key("mailseal", d, "ours", "Ours <ours@sop.example>");
    key("sqop", d, "theirs", "Theirs <theirs@sop.example>");
    for (signer, key_name, verifier, cert) in [
        ("mailseal", "ours.key", "sqop", "ours.cert"),
        ("sqop", "theirs.key", "mailseal", "theirs.cert"),
    ] {
        for mode in ["binary", "text"] {
            let sig = ok(signer, d, &["sign", "--as", mode, key_name], MESSAGE);
            std::fs::write(d.join("msg.sig"), &sig).unwrap();
            let v = ok(verifier, d, &["verify", "msg.sig", cert], MESSAGE);
            let line = String::from_utf8_lossy(&v);
            assert_eq!(line.lines().count(), 1, "{signer}->{verifier}: {line}");
            // Changed data: no valid signature, exit 3, for both.
            let out = sop(verifier, d, &["verify", "msg.sig", cert], b"other data");
            assert_eq!(out.status.code(), Some(3), "{signer}->{verifier} {mode}");
        }
    }
}

#[test]
fn encrypt_with_one_decrypt_with_the_other() {
    if !sqop() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    key("mailseal", d, "ours", "Ours <ours@sop.example>");
    key("sqop", d, "theirs", "Theirs <theirs@sop.example>");
    // mailseal encrypts to sqop's key (signed by ours); sqop decrypts and verifies.
    let enc = ok(
        "mailseal",
        d,
        &["encrypt", "--sign-with", "ours.key", "theirs.cert"],
        MESSAGE,
    );
    std::fs::write(d.join("a.asc"), &enc).unwrap();
    let plain = ok(
        "sqop",
        d,
        &[
            "decrypt",
            "--verify-out",
            "v1",
            "--verify-with",
            "ours.cert",
            "theirs.key",
        ],
        &enc,
    );
    assert_eq!(plain, MESSAGE);
    assert_eq!(
        std::fs::read_to_string(d.join("v1"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    // sqop encrypts to ours (signed by theirs); mailseal decrypts and verifies.
    let enc = ok(
        "sqop",
        d,
        &["encrypt", "--sign-with", "theirs.key", "ours.cert"],
        MESSAGE,
    );
    let plain = ok(
        "mailseal",
        d,
        &[
            "decrypt",
            "--verifications-out",
            "v2",
            "--verify-with",
            "theirs.cert",
            "ours.key",
        ],
        &enc,
    );
    assert_eq!(plain, MESSAGE);
    let v = std::fs::read_to_string(d.join("v2")).unwrap();
    assert_eq!(v.lines().count(), 1, "{v}");
    // Our decrypt with the wrong key: exit 29 and nothing on stdout.
    key("mailseal", d, "other", "Other <other@sop.example>");
    let out = sop("mailseal", d, &["decrypt", "other.key"], &enc);
    assert_eq!(out.status.code(), Some(29));
    assert!(out.stdout.is_empty());
    // A changed byte of the ciphertext: refused, nothing released.
    let mut changed = ok("mailseal", d, &["dearmor"], &enc);
    let at = changed.len() - 30;
    changed[at] ^= 0x20;
    let out = sop("mailseal", d, &["decrypt", "ours.key"], &changed);
    assert_ne!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

#[test]
fn inline_sign_with_one_inline_verify_with_the_other() {
    if !sqop() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    key("mailseal", d, "ours", "Ours <ours@sop.example>");
    key("sqop", d, "theirs", "Theirs <theirs@sop.example>");
    let text = b"A2A over mail\nsecond line\n";
    for (signer, key_name, verifier, cert) in [
        ("mailseal", "ours.key", "sqop", "ours.cert"),
        ("sqop", "theirs.key", "mailseal", "theirs.cert"),
    ] {
        for mode in ["binary", "text", "clearsigned"] {
            let signed = ok(signer, d, &["inline-sign", "--as", mode, key_name], text);
            let content = ok(verifier, d, &["inline-verify", cert], &signed);
            let normalized = String::from_utf8_lossy(&content).replace("\r\n", "\n");
            assert_eq!(
                normalized.trim_end(),
                String::from_utf8_lossy(text).trim_end(),
                "{signer}->{verifier} {mode}"
            );
        }
    }
}

#[test]
fn passwords_and_session_keys_with_sqop_both_ways() {
    if !sqop() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("pw"), b"sesame street\n").unwrap();
    key("mailseal", d, "ours", "Ours <ours@sop.example>");
    key("sqop", d, "theirs", "Theirs <theirs@sop.example>");
    for (writer, reader) in [("mailseal", "sqop"), ("sqop", "mailseal")] {
        // A password-only message.
        let m = ok(writer, d, &["encrypt", "--with-password", "pw"], MESSAGE);
        assert_eq!(
            ok(reader, d, &["decrypt", "--with-password", "pw"], &m),
            MESSAGE,
            "{writer} -> {reader}"
        );
        // A message to a key: the session key the writer's side learns by decrypting
        // opens it on the reader's side without the key.
        let (cert, key) = if writer == "mailseal" {
            ("theirs.cert", "theirs.key")
        } else {
            ("ours.cert", "ours.key")
        };
        let m = ok(writer, d, &["encrypt", cert], MESSAGE);
        let sk = format!("sk-{writer}");
        let holder = if writer == "mailseal" {
            "sqop"
        } else {
            "mailseal"
        };
        ok(holder, d, &["decrypt", "--session-key-out", &sk, key], &m);
        let text = std::fs::read_to_string(d.join(&sk)).unwrap();
        assert!(text.trim().starts_with("9:"), "AES-256, {text}");
        let other = if holder == "mailseal" {
            "sqop"
        } else {
            "mailseal"
        };
        assert_eq!(
            ok(other, d, &["decrypt", "--with-session-key", &sk], &m),
            MESSAGE,
            "{holder}'s session key in {other}"
        );
    }
}

#[test]
fn sop_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    key("mailseal", d, "ours", "Ours <ours@sop.example>");
    let code = |args: &[&str], stdin: &[u8]| sop("mailseal", d, args, stdin).status.code();
    assert_eq!(code(&["no-such-subcommand"], b""), Some(69));
    assert_eq!(
        code(&["sign", "--no-such-option", "ours.key"], b"x"),
        Some(37)
    );
    assert_eq!(code(&["sign"], b"x"), Some(19), "no KEYS");
    assert_eq!(code(&["sign", "missing.key"], b"x"), Some(61));
    assert_eq!(
        code(&["sign", "ours.cert"], b"x"),
        Some(79),
        "a certificate cannot sign"
    );
    assert_eq!(code(&["decrypt", "ours.key"], b"not openpgp"), Some(41));
    assert_eq!(
        code(&["generate-key", "--profile", "nonesuch", "x"], b""),
        Some(89)
    );
    assert_eq!(code(&["sign", "@NOPE:x"], b"x"), Some(71));
    // An output that exists is not overwritten.
    std::fs::write(d.join("exists"), b"keep").unwrap();
    let sig = ok("mailseal", d, &["sign", "ours.key"], b"data");
    std::fs::write(d.join("s.sig"), sig).unwrap();
    let enc = ok(
        "mailseal",
        d,
        &["encrypt", "--sign-with", "ours.key", "ours.cert"],
        b"data",
    );
    assert_eq!(
        code(
            &[
                "decrypt",
                "--verifications-out",
                "exists",
                "--verify-with",
                "ours.cert",
                "ours.key"
            ],
            &enc
        ),
        Some(59)
    );
    assert_eq!(std::fs::read(d.join("exists")).unwrap(), b"keep");
    // A locked key without its password: 67; with it (via @ENV:), it signs.
    std::fs::write(d.join("pw"), b"sesame\n").unwrap();
    let locked = ok(
        "mailseal",
        d,
        &[
            "generate-key",
            "--with-key-password",
            "pw",
            "L <l@sop.example>",
        ],
        b"",
    );
    std::fs::write(d.join("locked.key"), &locked).unwrap();
    assert_eq!(code(&["sign", "locked.key"], b"x"), Some(67));
    let out = Command::new(common::bin())
        .args([
            "sop",
            "sign",
            "--with-key-password",
            "@ENV:SOP_PW",
            "locked.key",
        ])
        .env("SOP_PW", "sesame")
        .current_dir(d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `--verify-out` is accepted beside `--verifications-out` (older suites send it).
    let plain = ok(
        "mailseal",
        d,
        &[
            "decrypt",
            "--verify-out",
            "v.txt",
            "--verify-with",
            "ours.cert",
            "ours.key",
        ],
        &enc,
    );
    assert_eq!(plain, b"data");
    assert!(std::fs::read_to_string(d.join("v.txt"))
        .unwrap()
        .contains(" mode:binary"));
    // The rest of the draft's table, one refusal each.
    std::fs::write(d.join("pw"), b"sesame\n").unwrap();
    std::fs::write(d.join("notutf8"), b"\xff\xfe").unwrap();
    std::fs::write(d.join("@ENV:SOP_X"), b"a file").unwrap();
    let stranger = {
        key("mailseal", d, "stranger", "Stranger <s@sop.example>");
        "stranger.cert"
    };
    let table: &[(&[&str], &[u8], i32, &str)] = &[
        (
            &[
                "decrypt",
                "--verify-with",
                stranger,
                "--verifications-out",
                "v3",
                "ours.key",
            ],
            &enc,
            3,
            "verification asked, none holds",
        ),
        (
            &["decrypt", "--verifications-out", "v4", "ours.key"],
            &enc,
            23,
            "a report without certificates",
        ),
        (
            &["decrypt", "--verify-with", "ours.cert", "ours.key"],
            &enc,
            23,
            "certificates without a report",
        ),
        (&["decrypt"], &enc, 19, "nothing to decrypt with"),
        (
            &["decrypt", "--with-session-key", "pw"],
            &enc,
            41,
            "not a session key",
        ),
        (&["decrypt", "stranger.key"], &enc, 29, "not for this key"),
        (
            &["encrypt", "--with-password", "notutf8"],
            b"x",
            31,
            "a password that is not UTF-8",
        ),
        (
            &[
                "generate-key",
                "--with-key-password",
                "notutf8",
                "N <n@sop.example>",
            ],
            b"",
            31,
            "a password that is not UTF-8",
        ),
        (
            &["encrypt", "--as", "text", "ours.cert"],
            b"\xff\xfe",
            53,
            "text that is not UTF-8",
        ),
        (
            &["sign", "--as", "text", "ours.key"],
            b"\xff",
            53,
            "text that is not UTF-8",
        ),
        (
            &["encrypt", "--as", "clearsigned", "ours.cert"],
            b"x",
            37,
            "no cleartext form",
        ),
        (
            &["sign", "@ENV:SOP_X"],
            b"x",
            73,
            "a designator that is a file",
        ),
        (
            &["encrypt", "--session-key-out", "exists", "ours.cert"],
            b"x",
            59,
            "output exists",
        ),
        (
            &[
                "inline-sign",
                "--as",
                "clearsigned",
                "--no-armor",
                "ours.key",
            ],
            b"x",
            83,
            "incompatible",
        ),
        (
            &["version", "--backend", "--extended"],
            b"",
            83,
            "incompatible",
        ),
        (
            &["verify", "s.sig", "stranger.cert"],
            b"data",
            3,
            "not by this certificate",
        ),
        (
            &["inline-verify", "ours.cert"],
            b"not signed",
            41,
            "not OpenPGP",
        ),
        (&["encrypt"], b"x", 19, "no recipient"),
        (&["list-profiles", "armor"], b"", 89, "no profiles"),
    ];
    for (args, stdin, want, why) in table {
        let out = sop("mailseal", d, args, stdin);
        assert_eq!(
            out.status.code(),
            Some(*want),
            "{args:?} ({why}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing on stdout on a refusal"
        );
    }
    assert_eq!(std::fs::read(d.join("exists")).unwrap(), b"keep");
    for f in ["v3", "v4"] {
        assert!(!d.join(f).exists(), "{f}: no report on a refusal");
    }
    // Version and the top-level `mailseal` help still work.
    assert!(
        String::from_utf8_lossy(&ok("mailseal", d, &["version"], b"")).starts_with("mailseal ")
    );
    assert_eq!(run(&["--help"], b"").status.code(), Some(0));
}

/// Sequoia releases what it verifies in steps of a small buffer (issue #58, memory);
/// nothing of a message larger than that buffer is given out unless its signature
/// verifies at the end: 3 MiB signed by one key, verified against another, gives
/// nothing (exit 3); against its own, all of it.
#[test]
fn fail_cost_a_large_message_is_released_only_after_its_signature() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    key("mailseal", d, "alice", "Alice <alice@sop.example>");
    key("mailseal", d, "mallory", "Mallory <mallory@sop.example>");
    let text: Vec<u8> = (0..3 << 20).map(|i| b'a' + (i % 26) as u8).collect();
    let signed = ok(
        "mailseal",
        d,
        &["inline-sign", "--no-armor", "--as", "binary", "alice.key"],
        &text,
    );
    let out = sop("mailseal", d, &["inline-verify", "mallory.cert"], &signed);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty(), "{} bytes released", out.stdout.len());
    assert_eq!(
        ok("mailseal", d, &["inline-verify", "alice.cert"], &signed),
        text
    );
    // Her signature with a byte of its value changed (the packet's last byte).
    let mut bad = signed.clone();
    *bad.last_mut().unwrap() ^= 0x01;
    let out = sop("mailseal", d, &["inline-verify", "alice.cert"], &bad);
    assert_ne!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty(), "{} bytes released", out.stdout.len());
}
