//! Which of an address's certificates a sender uses (issue #17): the newest usable one
//! (latest notBefore), never the store's fingerprint order, which a party who can get
//! a certificate into the store could win by grinding keys.

use crate::common;

use std::path::Path;

use common::{openssl, run};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;

use super::fail_path::{import, Pki, NOW_END};

const ALICE: &str = "alice@corp.example";
const BOB: &str = "bob@corp.example";

/// The key store's fingerprint of a certificate file.
fn fingerprint(dir: &Path, cert: &Path) -> String {
    let scratch = tempfile::tempdir_in(dir).unwrap();
    let store = scratch.path().join("store");
    import(&store, &[cert], false);
    let out = run(
        &["key", "list", "--json", "--store", store.to_str().unwrap()],
        b"",
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list[0]["fingerprint"].as_str().unwrap().to_string()
}

/// An encryption-capable leaf for Bob, valid from `start`, with its key as PKCS#8.
fn bob_cert(pki: &Pki, name: &str, start: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    identity(pki, name, BOB, start)
}

/// An encryption-capable leaf for `email` under the root, valid from `start`, with its
/// key as PKCS#8.
fn identity(
    pki: &Pki,
    name: &str,
    email: &str,
    start: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let crt = pki.issue(
        name,
        Some("root"),
        &format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyAgreement\n\
             extendedKeyUsage=emailProtection\nsubjectAltName=email:{email}\n"
        ),
        start,
        NOW_END,
    );
    let p8 = pki.dir.join(format!("{name}.p8"));
    openssl(
        &[
            "pkey",
            "-in",
            &format!("{name}.key"),
            "-out",
            p8.to_str().unwrap(),
        ],
        &pki.dir,
    );
    (crt, p8)
}

#[test]
fn the_newest_certificate_of_a_recipient_is_used_not_the_first_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", "20240101000000Z", NOW_END);
    // A newer certificate, and an older one whose fingerprint sorts first, so that
    // fingerprint order would choose it. Fingerprints are random: for a newer one
    // that sorts near the start, 64 older tries could all sort after it (about one
    // run in 65 failed so), so such a newer one is issued again.
    let ((new_crt, new_key), (old_crt, old_key)) = (0..8)
        .find_map(|n| {
            let new = bob_cert(&pki, &format!("bob-new-{n}"), "20250601000000Z");
            let new_fpr = fingerprint(dir.path(), &new.0);
            (0..64)
                .map(|i| bob_cert(&pki, &format!("bob-old-{n}-{i}"), "20250101000000Z"))
                .find(|(crt, _)| fingerprint(dir.path(), crt) < new_fpr)
                .map(|old| (new, old))
        })
        .expect("an older key whose fingerprint sorts first");
    let (alice_crt, alice_key) = identity(&pki, "alice", ALICE, "20250101000000Z");
    let alice = dir.path().join("alice-store");
    import(&alice, &[&alice_crt, &alice_key, &old_crt, &new_crt], false);

    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "choice-1");
    env.set("correlationId", "choice-1");
    env.set("payload", &serde_json::json!({"id": "task-1"}));
    let msg = MailA2aMessage::new(ALICE, &[BOB], env);
    let sealed = common::seal_smime_cli(&alice, &msg, dir.path(), false);

    // Bob with only the new key opens it; Bob with only the old one cannot.
    for (name, crt, key, opens) in [
        ("bob-with-new", &new_crt, &new_key, true),
        ("bob-with-old", &old_crt, &old_key, false),
    ] {
        let store = dir.path().join(name);
        import(&store, &[crt, key], false);
        import(&store, &[&root], true);
        let out = run(&["open", "--store", store.to_str().unwrap()], &sealed);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if opens {
            assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        } else {
            assert_eq!(out.status.code(), Some(5), "{name}: {stderr}");
            assert!(out.stdout.is_empty());
        }
    }
}

/// Issue #17: the key a recipient's Agent Card publishes is chosen first, even over a
/// newer certificate the store holds for the address.
#[test]
fn the_certificate_a_recipients_card_publishes_wins_over_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", "20240101000000Z", NOW_END);
    let (old_crt, old_key) = bob_cert(&pki, "bob-old", "20250101000000Z");
    let (new_crt, new_key) = bob_cert(&pki, "bob-new", "20250601000000Z");
    // Bob publishes his card from the store with the older identity.
    let bob_old = dir.path().join("bob-old-store");
    import(&bob_old, &[&old_crt, &old_key], false);
    import(&bob_old, &[&root], true);
    let card = dir.path().join("bob-card.json");
    let out = run(
        &[
            "card",
            "--store",
            bob_old.to_str().unwrap(),
            "--email",
            BOB,
            "--no-mls",
            "--out",
            card.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (alice_crt, alice_key) = identity(&pki, "alice", ALICE, "20250101000000Z");
    let alice = dir.path().join("alice-store");
    import(&alice, &[&alice_crt, &alice_key, &new_crt], false);
    // Alice's store already holds a certificate for bob@ (the newer one), so a card
    // publishing another key for him is a change she accepts (issue 55: an address
    // the store holds a key for is no first use).
    let out = run(
        &[
            "key",
            "import",
            "--store",
            alice.to_str().unwrap(),
            "--agent-card",
            card.to_str().unwrap(),
            "--accept-changed",
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "choice-2");
    env.set("correlationId", "choice-2");
    env.set("payload", &serde_json::json!({"id": "task-2"}));
    let msg = MailA2aMessage::new(ALICE, &[BOB], env);
    let sealed = common::seal_smime_cli(&alice, &msg, dir.path(), false);
    let bob_new = dir.path().join("bob-new-store");
    import(&bob_new, &[&new_crt, &new_key], false);
    import(&bob_new, &[&root], true);
    let open = |store: &Path| run(&["open", "--store", store.to_str().unwrap()], &sealed);
    let out = open(&bob_old);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = open(&bob_new);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
