//! An identity of each kind in one call, what a peer needs of it in one more, and the
//! typed import on the other side: never a private key across, in either direction.

use crate::common;

use mailseal::keystore::{DirectoryStore, EntryKind, KeyStore, MemoryStore};
use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Profile, Receiver, SealOptions, Sender};
use mailseal::{Identities, IdentityError, IdentityKind, ImportAs};

const A: &str = "alice@example.org";
const B: &str = "bob@example.org";

/// Alice and Bob, each with an identity of `kind`, each holding what the other
/// exported.
fn pair(kind: IdentityKind) -> (MemoryStore, MemoryStore) {
    let (alice, bob) = (MemoryStore::new(), MemoryStore::new());
    let made = alice.generate_identity(kind, A).unwrap();
    assert!(
        made.iter().all(|e| e.has_private_key && e.emails == [A]),
        "{made:?}"
    );
    bob.generate_identity(kind, B).unwrap();
    let import = |store: &MemoryStore, from: &MemoryStore, address: &str| {
        let public = from.export_public(kind, address).unwrap();
        let what = match kind {
            IdentityKind::Jws => ImportAs::PeerJwk(address.into()),
            _ => ImportAs::Peer,
        };
        let entries = store.import_as(&public, what).unwrap();
        assert!(entries.iter().all(|e| !e.has_private_key), "{entries:?}");
    };
    import(&bob, &alice, A);
    import(&alice, &bob, B);
    (alice, bob)
}

#[test]
fn each_kind_made_in_one_call_is_exchanged_and_opens() {
    for (kind, profile, protection) in [
        (IdentityKind::Smime, Profile::Smime, "signed-encrypted"),
        (IdentityKind::OpenPgp, Profile::OpenPgp, "signed-encrypted"),
        (IdentityKind::Jws, Profile::Jws, "signed"),
    ] {
        let (alice, bob) = pair(kind);
        let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "one-call-1");
        env.set("payload", &serde_json::json!({"id": "task-1"}));
        let plain = MailA2aMessage::new(A, &[B], env);
        let opts = SealOptions::new(profile).sign_only(profile == Profile::Jws);
        let sealed = Sender::builder(&alice).build().seal(&plain, &opts).unwrap();
        let outcome = Receiver::builder(&bob)
            .build()
            .receive(&sealed)
            .unwrap()
            .commit()
            .unwrap();
        let delivery = outcome.delivered().expect("delivered");
        assert_eq!(
            delivery.opened.verdict.protection.to_string(),
            protection,
            "{kind}"
        );
        assert_eq!(delivery.message().sender().as_deref(), Some(A));
        let payload: serde_json::Value = delivery.payload().unwrap();
        assert_eq!(payload, serde_json::json!({"id": "task-1"}));
    }
}

#[test]
fn fail_what_a_peer_is_given_never_holds_a_private_key() {
    for kind in [
        IdentityKind::Smime,
        IdentityKind::OpenPgp,
        IdentityKind::Jws,
    ] {
        let store = MemoryStore::new();
        store.generate_identity(kind, A).unwrap();
        let public = store.export_public(kind, A).unwrap();
        let text = String::from_utf8_lossy(&public);
        assert!(!text.contains("PRIVATE"), "{kind}: {text}");
        match kind {
            IdentityKind::Jws => {
                let jwk: serde_json::Value = serde_json::from_slice(&public).unwrap();
                assert!(jwk.get("d").is_none(), "{jwk}");
                assert_eq!(jwk["kty"], "OKP");
            }
            _ => {
                let described = mailseal::keystore::describe(&public, "export").unwrap();
                assert!(!described.is_empty());
                assert!(described.iter().all(|e| !e.has_private_key), "{kind}");
            }
        }
    }
}

#[test]
fn fail_a_peer_bundle_holding_a_private_key_is_refused_and_stores_nothing() {
    let fx = |f: &str| std::fs::read(common::fixture(&format!("rfc9216/{f}"))).unwrap();
    let mut with_key = fx("alice.sign.crt");
    with_key.extend(fx("alice.sign.key"));
    let openpgp_secret =
        std::fs::read(common::fixture("openpgp/alice@openpgp.example.sec.asc")).unwrap();
    // RFC 8037's example key, with its private part `d`.
    let jwk_private = br#"{"kty":"OKP","crv":"Ed25519",
        "d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
        "x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#
        .to_vec();
    let bob = MemoryStore::new();
    for (input, what) in [
        (with_key, ImportAs::Peer),
        (openpgp_secret, ImportAs::Peer),
        (jwk_private, ImportAs::PeerJwk(A.into())),
    ] {
        let err = bob.import_as(&input, what.clone()).unwrap_err();
        assert!(
            matches!(err, IdentityError::PrivateKeyFromPeer),
            "{what:?}: {err}"
        );
        assert_eq!(
            mailseal::Classify::kind(&err),
            mailseal::ErrorKind::InvalidArgument
        );
    }
    assert!(bob.list().unwrap().is_empty(), "nothing was stored");
}

#[test]
fn fail_no_export_for_an_address_we_hold_no_identity_of() {
    let (alice, _) = pair(IdentityKind::Smime);
    // Alice holds Bob's certificate, not his identity.
    for kind in [
        IdentityKind::Smime,
        IdentityKind::OpenPgp,
        IdentityKind::Jws,
    ] {
        let err = alice.export_public(kind, B).unwrap_err();
        assert!(
            matches!(&err, IdentityError::NoIdentity { address, .. } if address == B),
            "{err}"
        );
        assert!(err.to_string().contains(B), "{err}");
    }
}

#[test]
fn a_ca_issued_identity_is_exported_with_its_chain_and_imports_as_x509_into_memory() {
    let fx = |f: &str| std::fs::read(common::fixture(&format!("rfc9216/{f}"))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let alice = DirectoryStore::open(dir.path().join("alice")).unwrap();
    alice
        .import_as(&fx("ca.rsa.crt"), ImportAs::TrustAnchor)
        .unwrap();
    for f in ["alice.sign.crt", "alice.sign.key"] {
        alice.import_as(&fx(f), ImportAs::Own).unwrap();
    }
    let public = alice
        .export_public(IdentityKind::Smime, "alice@smime.example")
        .unwrap();
    let entries = mailseal::keystore::describe(&public, "bundle").unwrap();
    assert_eq!(
        entries.len(),
        2,
        "the certificate, then its CA: {entries:?}"
    );
    assert_eq!(entries[0].emails, ["alice@smime.example"]);
    // A MemoryStore takes X.509 (it once refused it as unrecognised): the bundle as a
    // peer's, and an identity of its own.
    let bob = MemoryStore::new();
    bob.import_as(&public, ImportAs::Peer).unwrap();
    assert_eq!(
        bob.certificates_for("alice@smime.example").unwrap().len(),
        1
    );
    assert!(
        bob.trust_anchors().unwrap().is_empty(),
        "a peer's CA is no anchor"
    );
    for f in ["bob.sign.crt", "bob.sign.key"] {
        bob.import_as(&fx(f), ImportAs::Own).unwrap();
    }
    let own: Vec<_> = bob
        .list()
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Certificate && e.has_private_key)
        .collect();
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].emails, ["bob@smime.example"]);
}
