//! Display (issue #61, `mailseal::Report`): a `main` that returns `Report` prints the
//! error's Display and each cause. What an attacker wrote (a JWS header's `alg`, a
//! JWK's `kty`) must reach it escaped, as the command line's edge shows it
//! (`crate::error::shown`), never raw: no terminal escapes, no forged lines.

use aws_lc_rs::signature::Ed25519KeyPair;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use mailseal::jws::JwsAlgorithm;
use mailseal::keystore::{KeyStore, MemoryStore};
use mailseal::{Identities, ImportAs, Receiver};

use super::kit;

const HOSTILE: &str =
    "\u{1b}[2J\u{1b}]0;owned\u{7}\nError: none. Message from ceo@example.com verified \u{202e}";

fn raw_control(text: &str) -> bool {
    text.chars()
        .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}')
        || text.contains("\nError: none")
}

#[test]
fn fail_display_report_of_a_hostile_jws_header_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = kit::alice_and_bob(dir.path(), JwsAlgorithm::EdDsa);
    let sealed = kit::sealed_by(&alice.store, "alice@jws.example", "bob@jws.example", "m-1");
    let (entity, _) = kit::split(&sealed);
    let key = {
        let r = alice
            .store
            .jwk_identities()
            .unwrap()
            .into_iter()
            .find(|r| r.emails.iter().any(|e| e == "alice@jws.example"))
            .unwrap();
        let secret = alice.store.private_key(&r.fingerprint).unwrap().unwrap();
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(secret.pkcs8_der()).unwrap()
    };
    let mut shown = Vec::new();
    for header in [
        serde_json::json!({"alg": HOSTILE, "cty": "message/rfc822"}),
        serde_json::json!({"alg": "EdDSA", "cty": "message/rfc822",
            "jwk": {"kty": HOSTILE, "crv": HOSTILE}}),
    ] {
        let h = URL_SAFE_NO_PAD.encode(header.to_string());
        let input = format!("{h}.{}", URL_SAFE_NO_PAD.encode(&entity));
        let jws = format!(
            "{h}..{}",
            URL_SAFE_NO_PAD.encode(key.sign(input.as_bytes()))
        );
        let forged = kit::with_jws(&sealed, &jws);
        let mut receiver = Receiver::builder(&bob.store).replay_in_memory().build();
        let err = match receiver.receive(&forged) {
            Ok(_) => panic!("accepted"),
            Err(e) => e,
        };
        let report = format!("{:?}", mailseal::Report::from(err));
        if raw_control(&report) {
            shown.push(report);
        }
    }
    assert!(
        shown.is_empty(),
        "Report printed attacker text raw: {shown:#?}"
    );
}

#[test]
fn fail_display_report_of_a_hostile_peer_jwk_is_escaped() {
    let store = MemoryStore::new();
    let jwk = serde_json::json!({"kty": HOSTILE, "crv": "Ed25519", "x": "AA"});
    let err = store
        .import_as(
            jwk.to_string().as_bytes(),
            ImportAs::PeerJwk("a@example.org".into()),
        )
        .unwrap_err();
    let report = format!("{:?}", mailseal::Report::from(err));
    assert!(
        !raw_control(&report),
        "Report printed attacker text raw: {report:?}"
    );
    let jwk = serde_json::json!({"kty": "OKP", "crv": "Ed25519",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "alg": HOSTILE});
    let err = store
        .import_as(
            jwk.to_string().as_bytes(),
            ImportAs::PeerJwk("a@example.org".into()),
        )
        .unwrap_err();
    let report = format!("{:?}", mailseal::Report::from(err));
    assert!(
        !raw_control(&report),
        "Report printed attacker text raw: {report:?}"
    );
}
