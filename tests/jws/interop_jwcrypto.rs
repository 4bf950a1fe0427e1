//! An independent JOSE implementation, Python's jwcrypto (Debian `python3-jwcrypto`),
//! both ways, for every algorithm both support: it verifies what we sign, and we open
//! messages whose signature it made (its own keys, its RFC 7638 `kid`).

use std::path::PathBuf;
use std::process::Command;

use mailseal::seal::SignerIdentity;
use mailseal::{Outcome, Receiver};

use super::common;
use super::kit;

/// A Python that imports jwcrypto (Debian's, then the one on PATH), or `None` after
/// saying why (a failure under `MAILSEAL_REQUIRE_PEERS=1`).
fn python() -> Option<PathBuf> {
    for p in ["/usr/bin/python3", "python3"] {
        let ok = Command::new(p)
            .args(["-c", "import jwcrypto"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(PathBuf::from(p));
        }
    }
    common::peer_available(
        "jwcrypto (python3-jwcrypto)",
        Command::new("python3").args(["-c", "import jwcrypto"]),
    );
    None
}

fn peer() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/jose_peer.py")
}

#[test]
fn jwcrypto_verifies_what_we_sign() {
    let Some(py) = python() else { return };
    for alg in kit::ALGORITHMS {
        let dir = tempfile::tempdir().unwrap();
        let (alice, _bob) = kit::alice_and_bob(dir.path(), alg);
        let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
        let (entity, jws) = kit::split(&sealed);
        let f = |n: &str| dir.path().join(n);
        std::fs::write(f("alice.jwk"), &alice.jwk).unwrap();
        std::fs::write(f("entity"), &entity).unwrap();
        std::fs::write(f("jws"), &jws).unwrap();
        let verify = || {
            Command::new(&py)
                .arg(peer())
                .arg("verify")
                .args([f("alice.jwk"), f("entity"), f("jws")])
                .output()
                .unwrap()
        };
        let out = verify();
        assert!(
            out.status.success(),
            "{alg:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("verified {}", alg.name())
        );
        // And it refuses the same signature over a changed entity: it really checked.
        let mut changed = entity.clone();
        let i = changed.len() / 2;
        changed[i] ^= 1;
        std::fs::write(f("entity"), &changed).unwrap();
        let out = verify();
        assert!(
            !out.status.success(),
            "{alg:?}: jwcrypto accepted a changed entity"
        );
    }
}

#[test]
fn we_open_what_jwcrypto_signs() {
    let Some(py) = python() else { return };
    for alg in kit::ALGORITHMS {
        let dir = tempfile::tempdir().unwrap();
        let (alice, _) = kit::alice_and_bob(dir.path(), alg);
        // Bob knows Alice only by the key jwcrypto makes.
        let bob = kit::party(
            dir.path(),
            "bob-only",
            "bob@jws.example",
            mailseal::jws::JwsAlgorithm::EdDsa,
        );
        let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
        let (entity, _) = kit::split(&sealed);
        let f = |n: &str| dir.path().join(n);
        std::fs::write(f("entity"), &entity).unwrap();
        let out = Command::new(&py)
            .arg(peer())
            .args(["sign", alg.name()])
            .args([f("entity"), f("theirs.jwk")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{alg:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let jws = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let theirs = std::fs::read(f("theirs.jwk")).unwrap();
        kit::import(&bob.store, &theirs, "alice@jws.example");
        let message = kit::with_jws(&sealed, &jws);
        let outcome = Receiver::builder(&bob.store)
            .build()
            .receive(&message)
            .unwrap()
            .commit()
            .unwrap();
        let Outcome::Deliver { delivery, .. } = outcome else {
            panic!("{alg:?}: not delivered")
        };
        let v = &delivery.opened.verdict;
        assert_eq!(v.algorithm.as_deref(), Some(alg.name()));
        // jwcrypto's kid is its RFC 7638 thumbprint; ours of the same key agrees.
        let header: serde_json::Value = serde_json::from_slice(
            &base64::Engine::decode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                jws.split('.').next().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let Some(SignerIdentity::Jwk { thumbprint, .. }) = &v.signer else {
            panic!()
        };
        assert_eq!(header["kid"].as_str(), Some(thumbprint.as_str()), "{alg:?}");
    }
}

/// Issue #60: a JOSE signer that names its key by the JWK's own `kid` (the usual
/// convention) rather than the RFC 7638 thumbprint is opened once that JWK is
/// imported; the same `kid` on a key the store binds to another address, or a
/// signature by another key under that `kid`, is refused.
#[test]
fn we_open_what_jwcrypto_signs_under_its_own_kid() {
    let Some(py) = python() else { return };
    for alg in kit::ALGORITHMS {
        let dir = tempfile::tempdir().unwrap();
        let (alice, _) = kit::alice_and_bob(dir.path(), alg);
        let bob = kit::party(
            dir.path(),
            "bob-only",
            "bob@jws.example",
            mailseal::jws::JwsAlgorithm::EdDsa,
        );
        let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
        let (entity, _) = kit::split(&sealed);
        let f = |n: &str| dir.path().join(n);
        std::fs::write(f("entity"), &entity).unwrap();
        let sign = |jwk_file: &str| {
            let out = Command::new(&py)
                .arg(peer())
                .args(["sign-kid", alg.name()])
                .args([f("entity"), f(jwk_file)])
                .arg("signing-key-2026")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{alg:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        let jws = sign("theirs.jwk");
        let open = |jws: &str| {
            Receiver::builder(&bob.store)
                .build()
                .receive(&kit::with_jws(&sealed, jws))
                .map(|i| i.outcome().word())
        };
        // Before the JWK is imported, the kid names nothing known.
        let before = open(&jws).unwrap_err().to_string();
        assert!(
            before.contains("unknown key") && before.contains("signing-key-2026"),
            "{alg:?}: {before}"
        );
        let theirs = std::fs::read(f("theirs.jwk")).unwrap();
        assert!(String::from_utf8_lossy(&theirs).contains("signing-key-2026"));
        kit::import(&bob.store, &theirs, "alice@jws.example");
        assert_eq!(open(&jws).unwrap(), "deliver", "{alg:?}");
        // Another key under the same kid (Mallory's, whose JWK is not imported) does
        // not verify: the kid only chooses which keys are tried.
        let mallory = sign("mallory.jwk");
        let refused = open(&mallory).unwrap_err().to_string();
        assert!(refused.contains("does not verify"), "{alg:?}: {refused}");
    }
}
