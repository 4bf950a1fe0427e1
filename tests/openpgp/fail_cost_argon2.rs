//! Cost (THREATS.md) and issue #58: a password-encrypted message chooses its Argon2
//! parameters, and `sop decrypt --with-password` spends at most a budget on them
//! (256 MiB of memory, 256 MiB four times over the whole message), refusing what asks
//! for more with its own reason instead of allocating gigabytes for a 200-byte file.

use std::io::Write;

use sequoia_openpgp as openpgp;

use openpgp::crypto::{Password, SessionKey, S2K};
use openpgp::packet::skesk::SKESK4;
use openpgp::packet::Packet;
use openpgp::serialize::stream::{Encryptor, LiteralWriter, Message};
use openpgp::serialize::Serialize;
use openpgp::types::SymmetricAlgorithm;

use crate::sop_roundtrip::{ok, sop};

const TEXT: &[u8] = b"what the password protects\n";

/// A message for `password` whose SKESKs use Argon2 with `(t, m)` each. Only the first
/// is real when `derive` (its key derived, so it decrypts); the others, and the first
/// too without `derive`, name parameters no one derived (the reader refuses or fails
/// them before it would know).
fn argon2_message(params: &[(u8, u8)], derive: bool) -> Vec<u8> {
    let algo = SymmetricAlgorithm::AES128;
    let sk = SessionKey::new(algo.key_size().unwrap()).unwrap();
    let password = Password::from("sesame");
    let mut out = Vec::new();
    for (i, &(t, m)) in params.iter().enumerate() {
        let s2k = S2K::Argon2 {
            salt: [i as u8; 16],
            t,
            p: 1,
            m,
        };
        let skesk = if derive && i == 0 {
            SKESK4::with_password(algo, algo, s2k, &sk, &password).unwrap()
        } else {
            // An encrypted session key of the right size under a key never derived.
            SKESK4::new(algo, s2k, Some(vec![7u8; 1 + 16].into())).unwrap()
        };
        Packet::from(skesk).serialize(&mut out).unwrap();
    }
    let mut body = Vec::new();
    {
        let message = Message::new(&mut body);
        let message = Encryptor::with_session_key(message, algo, sk)
            .unwrap()
            .build()
            .unwrap();
        let mut w = LiteralWriter::new(message).build().unwrap();
        w.write_all(TEXT).unwrap();
        w.finalize().unwrap();
    }
    out.extend_from_slice(&body);
    out
}

#[test]
fn fail_cost_argon2_past_the_budget_is_refused_not_derived() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("pw"), b"sesame").unwrap();
    std::fs::write(d.join("pw2"), b"another").unwrap();
    // Control: a small derivation decrypts.
    assert_eq!(
        ok(
            "mailseal",
            d,
            &["decrypt", "--with-password", "pw"],
            &argon2_message(&[(1, 10)], true)
        ),
        TEXT
    );
    for (what, params, passwords) in [
        // 2 GiB of memory asked for.
        ("memory", vec![(1u8, 21u8)], vec!["pw"]),
        // 256 MiB, 255 passes.
        ("passes", vec![(255, 18)], vec!["pw"]),
        // 256 MiB four times, twice (two passwords): past the message's budget.
        ("passwords", vec![(4, 18)], vec!["pw", "pw2"]),
        // Eight SKESKs of 256 MiB twice each: the first two fit, the rest do not.
        ("packets", vec![(2, 18); 8], vec!["pw"]),
    ] {
        let mut args = vec!["decrypt"];
        for p in &passwords {
            args.extend(["--with-password", p]);
        }
        let started = std::time::Instant::now();
        let out = sop("mailseal", d, &args, &argon2_message(&params, false));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.stdout.is_empty(), "{what}");
        assert_eq!(out.status.code(), Some(29), "{what}: {stderr}");
        assert!(stderr.contains("Argon2"), "{what}: {stderr}");
        // Not asserted on (tests never assert on time): printed for the reader.
        eprintln!("{what}: refused in {:?}", started.elapsed());
    }
}
