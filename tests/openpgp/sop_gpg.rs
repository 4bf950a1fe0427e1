//! `mailseal sop` against GnuPG 2.2, both ways, where the SOP suite found gaps: a legacy
//! DSA/ElGamal key (GnuPG's "Carol"), password-encrypted messages and session keys.
//! gpg is on every machine: these tests never skip.

use crate::common;
use crate::sop_roundtrip::{ok, sop};

use common::Gpg;

const TEXT: &[u8] = b"A2A over mail, for a legacy key\n";

/// Writes `bytes` to `dir/name`.
fn put(dir: &std::path::Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
fn a_legacy_dsa_elgamal_key_from_gpg_decrypts_verifies_and_signs() {
    let gpg = Gpg::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Carol: a DSA-2048 primary key that signs, an ElGamal-2048 subkey that encrypts.
    gpg.run(
        &[
            "--passphrase",
            "",
            "--quick-gen-key",
            "Carol <carol@sop.example>",
            "dsa2048",
            "sign",
            "never",
        ],
        b"",
    );
    let listing = gpg.run(&["--with-colons", "--list-keys", "carol@sop.example"], b"");
    let fpr = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("fpr:::::::::"))
        .and_then(|l| l.split(':').next())
        .expect("a fingerprint")
        .to_string();
    gpg.run(
        &[
            "--passphrase",
            "",
            "--quick-add-key",
            &fpr,
            "elg2048",
            "encr",
            "never",
        ],
        b"",
    );
    let cert = gpg.run(&["--armor", "--export", &fpr], b"").stdout;
    let key = gpg
        .run(
            &["--passphrase", "", "--armor", "--export-secret-keys", &fpr],
            b"",
        )
        .stdout;
    put(d, "carol.cert", &cert);
    put(d, "carol.key", &key);

    // gpg signs and encrypts to Carol; mailseal decrypts (ElGamal) and verifies (DSA).
    let encrypted = gpg
        .run(
            &["--armor", "--sign", "--encrypt", "-r", &fpr, "-u", &fpr],
            TEXT,
        )
        .stdout;
    let plain = ok(
        "mailseal",
        d,
        &[
            "decrypt",
            "--verify-with",
            "carol.cert",
            "--verifications-out",
            "v",
            "carol.key",
        ],
        &encrypted,
    );
    assert_eq!(plain, TEXT);
    let v = std::fs::read_to_string(d.join("v")).unwrap();
    assert_eq!(v.lines().count(), 1, "{v}");
    assert!(v.contains(&fpr), "{v}");
    // A changed byte of the ElGamal ciphertext: refused, nothing released.
    let mut changed = ok("mailseal", d, &["dearmor"], &encrypted);
    changed[20] ^= 0x01;
    let out = sop("mailseal", d, &["decrypt", "carol.key"], &changed);
    assert_ne!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());

    // gpg's detached DSA signature verifies; mailseal's DSA signature verifies in gpg.
    let sig = gpg
        .run(&["--armor", "--detach-sign", "-u", &fpr], TEXT)
        .stdout;
    put(d, "gpg.sig", &sig);
    let v = ok("mailseal", d, &["verify", "gpg.sig", "carol.cert"], TEXT);
    assert_eq!(String::from_utf8_lossy(&v).lines().count(), 1);
    let ours = ok("mailseal", d, &["sign", "carol.key"], TEXT);
    put(d, "ours.sig", &ours);
    put(d, "data", TEXT);
    let sig_path = d.join("ours.sig");
    let data_path = d.join("data");
    gpg.run(
        &[
            "--verify",
            sig_path.to_str().unwrap(),
            data_path.to_str().unwrap(),
        ],
        b"",
    );

    // Encrypting to ElGamal is refused by policy, with SOP's "unsupported asymmetric
    // algorithm", not "cannot encrypt".
    let out = sop("mailseal", d, &["encrypt", "carol.cert"], TEXT);
    assert_eq!(out.status.code(), Some(13));
    assert!(out.stdout.is_empty());
}

#[test]
fn passwords_and_session_keys_with_gpg_both_ways() {
    let gpg = Gpg::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, "pw", b"sesame street\n");

    // mailseal encrypts with a password; gpg decrypts with it.
    let ours = ok("mailseal", d, &["encrypt", "--with-password", "pw"], TEXT);
    let out = gpg.run(&["--passphrase", "sesame street", "--decrypt"], &ours);
    assert_eq!(out.stdout, TEXT);
    // gpg encrypts with a password; mailseal decrypts with the password file.
    let theirs = gpg
        .run(
            &["--passphrase", "sesame street", "--armor", "--symmetric"],
            TEXT,
        )
        .stdout;
    assert_eq!(
        ok(
            "mailseal",
            d,
            &["decrypt", "--with-password", "pw"],
            &theirs
        ),
        TEXT
    );
    // The wrong password: CANNOT_DECRYPT, nothing released.
    put(d, "wrong", b"open sesame\n");
    let out = sop(
        "mailseal",
        d,
        &["decrypt", "--with-password", "wrong"],
        &theirs,
    );
    assert_eq!(out.status.code(), Some(29));
    assert!(out.stdout.is_empty());

    // Session keys: ours (from encrypt and from decrypt) open in gpg, gpg's in ours.
    ok(
        "mailseal",
        d,
        &[
            "encrypt",
            "--with-password",
            "pw",
            "--session-key-out",
            "sk1",
        ],
        TEXT,
    );
    let sealed = ok(
        "mailseal",
        d,
        &[
            "encrypt",
            "--with-password",
            "pw",
            "--session-key-out",
            "sk2",
        ],
        TEXT,
    );
    let sk2 = std::fs::read_to_string(d.join("sk2")).unwrap();
    let out = gpg.run(
        &["--override-session-key", sk2.trim(), "--decrypt"],
        &sealed,
    );
    assert_eq!(out.stdout, TEXT);
    ok(
        "mailseal",
        d,
        &[
            "decrypt",
            "--with-password",
            "pw",
            "--session-key-out",
            "sk3",
        ],
        &theirs,
    );
    let sk3 = std::fs::read_to_string(d.join("sk3")).unwrap();
    let shown = gpg.run(
        &[
            "--passphrase",
            "sesame street",
            "--show-session-key",
            "--decrypt",
        ],
        &theirs,
    );
    let stderr = String::from_utf8_lossy(&shown.stderr);
    let gpg_key = stderr
        .lines()
        .find_map(|l| l.split("session key: '").nth(1))
        .and_then(|l| l.strip_suffix('\''))
        .expect("gpg shows the session key");
    assert_eq!(
        sk3.trim(),
        gpg_key,
        "the same session key, in the same form"
    );
    assert_eq!(
        ok(
            "mailseal",
            d,
            &["decrypt", "--with-session-key", "sk3"],
            &theirs
        ),
        TEXT
    );
    // An output that exists is not overwritten, and nothing is decrypted.
    let out = sop(
        "mailseal",
        d,
        &[
            "decrypt",
            "--with-password",
            "pw",
            "--session-key-out",
            "sk3",
        ],
        &theirs,
    );
    assert_eq!(out.status.code(), Some(59));
    assert!(out.stdout.is_empty());
}
