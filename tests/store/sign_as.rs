//! Choosing the signing identity in a store that holds several (issue #61):
//! `--signer FINGERPRINT` picks one of the From address's keys under OpenPGP and
//! detached-jws as under S/MIME, and `--as ADDR` says whom the store signs as: an
//! address it holds no key of is refused, and so is a message whose From is another
//! (a store never signs a From it was not asked to).

use std::path::Path;
use std::process::Output;

use crate::common;

fn mailseal(store: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut all = vec!["--store", store.to_str().unwrap()];
    all.extend_from_slice(args);
    common::run(&all, stdin)
}

fn ok(store: &Path, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = mailseal(store, args, stdin);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A store holding two OpenPGP keys and two JWKs of a@x.example, an OpenPGP key of
/// b@x.example, and a plain message from a to b; the fingerprints by kind.
fn store(dir: &Path) -> (std::path::PathBuf, Vec<u8>, Vec<String>, Vec<String>) {
    let store = dir.join("store");
    for (kind, email) in [
        ("openpgp", "a@x.example"),
        ("openpgp", "a@x.example"),
        ("openpgp", "b@x.example"),
        ("jws", "a@x.example"),
        ("jws", "a@x.example"),
    ] {
        ok(
            &store,
            &["key", "generate", "--kind", kind, "--email", email],
            b"",
        );
    }
    let listed: Vec<serde_json::Value> =
        serde_json::from_slice(&ok(&store, &["key", "list", "--json"], b"")).unwrap();
    let of = |kind: &str| -> Vec<String> {
        listed
            .iter()
            .filter(|e| e["kind"] == kind && e["emails"][0] == "a@x.example")
            .map(|e| e["fingerprint"].as_str().unwrap().to_string())
            .collect()
    };
    let (pgp, jwk) = (of("openpgp"), of("jwk"));
    assert_eq!((pgp.len(), jwk.len()), (2, 2), "{listed:?}");
    let plain = mailseal::message::MailA2aMessage::new(
        "a@x.example",
        &["b@x.example"],
        common::env(common::request()),
    )
    .to_rfc5322()
    .unwrap();
    (store, plain, pgp, jwk)
}

/// Who signed `sealed`, as the store's own copy opened without the rules reports it.
fn signer_of(store: &Path, dir: &Path, sealed: &[u8]) -> String {
    let report = dir.join("report.json");
    ok(
        store,
        &[
            "open",
            "--stateless",
            "--own-copy",
            "--also-addressed-to",
            "b@x.example",
            "--report",
            report.to_str().unwrap(),
        ],
        sealed,
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    v["signer"].as_str().unwrap().to_string()
}

#[test]
fn signer_chooses_among_openpgp_and_jws_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (store, plain, pgp, jwk) = store(dir.path());
    // OpenPGP: each key signs when named (by a unique prefix), sealed or requested.
    for f in &pgp {
        let sealed = ok(
            &store,
            &[
                "seal",
                "--profile",
                "openpgp",
                "--sign-only",
                "--signer",
                &f[..12],
            ],
            &plain,
        );
        assert_eq!(
            signer_of(&store, dir.path(), &sealed),
            format!("openpgp:{f}")
        );
        let request = ok(
            &store,
            &["sign-request", "--profile", "openpgp", "--signer", f],
            &plain,
        );
        let text = String::from_utf8_lossy(&request);
        assert!(text.contains(&format!("\"signer\": \"{f}\"")), "{text}");
    }
    // detached-jws: each JWK signs when named; the two signatures are two signers.
    let mut signers = Vec::new();
    for f in &jwk {
        let sealed = ok(&store, &["seal", "--profile", "jws", "--signer", f], &plain);
        signers.push(signer_of(&store, dir.path(), &sealed));
        let again = ok(&store, &["seal", "--profile", "jws", "--signer", f], &plain);
        assert_eq!(
            signer_of(&store, dir.path(), &again),
            signers[signers.len() - 1]
        );
        let request = ok(
            &store,
            &["sign-request", "--profile", "jws", "--signer", f],
            &plain,
        );
        let text = String::from_utf8_lossy(&request);
        assert!(text.contains(&format!("\"signer\": \"{f}\"")), "{text}");
    }
    assert_ne!(signers[0], signers[1]);
}

/// `--signer` naming a key that is not one of the From's of that profile signs
/// nothing (exit 5); under MLS it is a usage error.
#[test]
fn fail_signer_of_another_kind_or_address() {
    let dir = tempfile::tempdir().unwrap();
    let (store, plain, pgp, jwk) = store(dir.path());
    for (profile, other) in [("openpgp", &jwk[0]), ("jws", &pgp[0])] {
        let out = mailseal(
            &store,
            &[
                "seal",
                "--profile",
                profile,
                "--sign-only",
                "--signer",
                other,
            ],
            &plain,
        );
        assert_eq!(out.status.code(), Some(5), "{profile}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no usable signing key"), "{profile}: {err}");
    }
    let out = mailseal(
        &store,
        &[
            "seal",
            "--profile",
            "mls",
            "--group",
            "g",
            "--signer",
            &pgp[0],
        ],
        &plain,
    );
    assert_eq!(out.status.code(), Some(2));
}

/// `--as` an address whose key the store lacks: nothing is signed, and the address
/// is named (exit 5), by seal and sign-request, whatever the profile.
#[test]
fn fail_sign_as_an_address_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let (store, plain, _, _) = store(dir.path());
    for args in [
        &["seal", "--profile", "openpgp"][..],
        &["seal", "--profile", "jws"],
        &["seal", "--profile", "smime", "--sign-only"],
        &["sign-request", "--profile", "openpgp"],
    ] {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--as", "c@x.example"]);
        let out = mailseal(&store, &args, &plain);
        assert_eq!(out.status.code(), Some(5), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("c@x.example"), "{args:?}: {err}");
    }
}

/// `--as` an address of the store that is not the message's From: refused (exit 2),
/// nothing signed; `--as` the From itself (in any case) signs.
#[test]
fn fail_sign_as_another_address_than_from() {
    let dir = tempfile::tempdir().unwrap();
    let (store, plain, pgp, _) = store(dir.path());
    for args in [
        &["seal", "--profile", "openpgp", "--sign-only"][..],
        &["seal", "--profile", "openpgp"],
        &["sign-request", "--profile", "openpgp"],
    ] {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--as", "b@x.example"]);
        let out = mailseal(&store, &args, &plain);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("a@x.example") && err.contains("b@x.example") && err.contains("--as"),
            "{args:?}: {err}"
        );
    }
    let sealed = ok(
        &store,
        &[
            "seal",
            "--profile",
            "openpgp",
            "--sign-only",
            "--as",
            "A@X.example",
            "--signer",
            &pgp[1],
        ],
        &plain,
    );
    assert_eq!(
        signer_of(&store, dir.path(), &sealed),
        format!("openpgp:{}", pgp[1])
    );
}
