//! Chosen time (THREATS.md) through an Agent Card: "a card key names only the card's
//! address" is judged on every User ID the OpenPGP certificate carries, not only those
//! valid at import (src/identity/openpgp.rs). Mallory publishes her own unsigned card
//! for her own address, with a certificate she made with Sequoia at times she chose;
//! the victim runs only `key import --agent-card` on its own store.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::mls::{mailseal, ok};
use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::packet::signature::SignatureBuilder;
use openpgp::packet::UserID;
use openpgp::serialize::SerializeInto;
use openpgp::types::{ReasonForRevocation, SignatureType};
use serde_json::{json, Value};

const MALLORY: &str = "mallory@card-time.example";
const CEO: &str = "ceo@corp-time.example";
const DAY: Duration = Duration::from_secs(86_400);

/// Mallory's key, made ten days ago with `<mallory@>` bound then.
fn mallory_cert(now: SystemTime) -> Cert {
    CertBuilder::new()
        .add_userid(format!("<{MALLORY}>"))
        .add_signing_subkey()
        .add_transport_encryption_subkey()
        .set_creation_time(now - 10 * DAY)
        .generate()
        .unwrap()
        .0
}

/// `cert` with a self-signature of type `typ` over `<address>` made at `at`.
fn self_sign(cert: Cert, address: &str, typ: SignatureType, at: SystemTime) -> Cert {
    let mut pair = cert
        .primary_key()
        .key()
        .clone()
        .parts_into_secret()
        .unwrap()
        .into_keypair()
        .unwrap();
    let uid = UserID::from(format!("<{address}>"));
    let mut builder = SignatureBuilder::new(typ)
        .set_signature_creation_time(at)
        .unwrap();
    if typ == SignatureType::CertificationRevocation {
        builder = builder
            .set_reason_for_revocation(ReasonForRevocation::UIDRetired, b"")
            .unwrap();
    }
    let sig = builder
        .sign_userid_binding(&mut pair, cert.primary_key().key(), &uid)
        .unwrap();
    cert.insert_packets(vec![openpgp::Packet::from(uid), sig.into()])
        .unwrap()
        .0
}

/// Mallory's own card for her own address (`mailseal card`, unsigned, no MLS), its
/// OpenPGP certificate replaced by `cert`; the file.
fn card_with(dir: &Path, name: &str, cert: &Cert) -> PathBuf {
    let store = dir.join("mallory");
    if !store.exists() {
        ok(
            &store,
            &["key", "generate", "--kind", "openpgp", "--email", MALLORY],
        );
    }
    let out = dir.join(format!("{name}.json"));
    ok(
        &store,
        &[
            "card",
            "--email",
            MALLORY,
            "--no-mls",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let mut card: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let armored = String::from_utf8(
        cert.clone()
            .strip_secret_key_material()
            .armored()
            .to_vec()
            .unwrap(),
    )
    .unwrap();
    let params = card["capabilities"]["extensions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["uri"] == "https://kotoba-lang.github.io/mail-a2a/spec/v1/#protection")
        .map(|e| &mut e["params"])
        .expect("#protection extension");
    params["openpgpCertificates"] = json!([armored]);
    std::fs::write(&out, serde_json::to_vec_pretty(&card).unwrap()).unwrap();
    out
}

/// `key import --agent-card FILE` on `store`: (exit code, stderr).
fn import(store: &Path, file: &Path) -> (i32, String) {
    let out = mailseal(
        store,
        &["key", "import", "--agent-card", file.to_str().unwrap()],
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the victim's store lists (`key list --json`).
fn listed(store: &Path) -> String {
    String::from_utf8_lossy(&mailseal(store, &["key", "list", "--json"]).stdout).into_owned()
}

/// Mallory's card certificate carries a second User ID for the CEO, bound a minute
/// (or a day) in the future: at import it is not valid, so the check that read User
/// IDs valid now passed it, and a minute later her key signed as the CEO. Refused at
/// import, naming the User ID; nothing of hers is installed.
#[test]
fn fail_chosen_time_card_user_id_bound_in_the_future() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let now = SystemTime::now();
    let victim = dir.join("victim");
    for ahead in [Duration::from_secs(60), DAY] {
        let cert = self_sign(
            mallory_cert(now),
            CEO,
            SignatureType::PositiveCertification,
            now + ahead,
        );
        let f = card_with(dir, &format!("future-{}", ahead.as_secs()), &cert);
        let (code, err) = import(&victim, &f);
        assert_eq!(code, 6, "{err}");
        assert!(err.contains(CEO), "{err}");
        assert!(err.contains("after the time of import"), "{err}");
        let list = listed(&victim);
        assert!(!list.contains(CEO) && !list.contains(MALLORY), "{list}");
        assert!(!victim.join("peers.json").exists());
    }
}

/// Mallory's card certificate carries a User ID for the CEO that she revoked two days
/// ago: valid now it names only her, but a signature dated before the revocation would
/// have been read with the CEO's address. A card key naming another address in any
/// User ID, valid or not, is refused whole.
#[test]
fn fail_chosen_time_card_user_id_revoked_names_another_address() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let now = SystemTime::now();
    let victim = dir.join("victim");
    let cert = self_sign(
        mallory_cert(now),
        CEO,
        SignatureType::PositiveCertification,
        now - 9 * DAY,
    );
    let cert = self_sign(
        cert,
        CEO,
        SignatureType::CertificationRevocation,
        now - 2 * DAY,
    );
    let f = card_with(dir, "revoked", &cert);
    let (code, err) = import(&victim, &f);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("not for the card's address alone"), "{err}");
    assert!(err.contains(CEO), "{err}");
    let list = listed(&victim);
    assert!(!list.contains(CEO) && !list.contains(MALLORY), "{list}");
}

/// Control: the same crafted certificate with Mallory's User ID alone, and her store's
/// own card, import.
#[test]
fn chosen_time_card_control_own_user_id_imports() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let victim = dir.join("victim");
    let f = card_with(dir, "honest", &mallory_cert(SystemTime::now()));
    let (code, err) = import(&victim, &f);
    assert_eq!(code, 0, "{err}");
    assert!(listed(&victim).contains(MALLORY));
}
