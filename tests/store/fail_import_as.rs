//! Attacks on issue #61's library and command-line changes (attacker role: Mallory
//! holds her own stores, keys and mail; never Bob's store).
//!
//! Respelled keys: `import_as` is another import path next to `key import`; it must
//! not undo the refusal `key import` makes for an address the store already
//! identifies (a pin), or bind an attacker's key to another party's address.

use crate::common;

use mailseal::keystore::{KeyStore, MemoryStore};
use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Profile, Receiver, SealOptions, Sender};
use mailseal::{Identities, IdentityKind, ImportAs};

const A: &str = "alice@example.org";
const B: &str = "bob@example.org";

fn plain(from: &str, to: &str, id: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, id);
    env.set("payload", &serde_json::json!({"id": "task-1"}));
    MailA2aMessage::new(from, &[to], env)
}

/// Alice and Bob with identities of `kind`, each holding the other's public part.
fn pair(kind: IdentityKind) -> (MemoryStore, MemoryStore) {
    let (alice, bob) = (MemoryStore::new(), MemoryStore::new());
    alice.generate_identity(kind, A).unwrap();
    bob.generate_identity(kind, B).unwrap();
    let what = |addr: &str| match kind {
        IdentityKind::Jws => ImportAs::PeerJwk(addr.into()),
        _ => ImportAs::Peer,
    };
    bob.import_as(&alice.export_public(kind, A).unwrap(), what(A))
        .unwrap();
    alice
        .import_as(&bob.export_public(kind, B).unwrap(), what(B))
        .unwrap();
    (alice, bob)
}

/// Respelled keys / padded evidence: Mallory's "peer bundle" names Alice's address
/// (her own key, her own store). `key import` refuses it (exit 6, "what this store
/// holds for alice@... would change ... --accept-changed"); `import_as(Peer)` must
/// too, or Mallory signs as Alice to Bob, and Bob's mail to Alice is encrypted to
/// Mallory.
#[test]
fn fail_respelled_keys_import_as_peer_does_not_rebind_a_pinned_address() {
    let mut bound = Vec::new();
    for kind in [
        IdentityKind::Smime,
        IdentityKind::OpenPgp,
        IdentityKind::Jws,
    ] {
        let (_alice, bob) = pair(kind);
        let mallory = MemoryStore::new();
        mallory.generate_identity(kind, A).unwrap();
        let bundle = mallory.export_public(kind, A).unwrap();
        let what = match kind {
            IdentityKind::Jws => ImportAs::PeerJwk(A.into()),
            _ => ImportAs::Peer,
        };
        let imported = bob.import_as(&bundle, what);
        if imported.is_err() {
            continue;
        }
        let _ = &mut bound;
        // It went in: does a message Mallory signs as Alice reach Bob's agent?
        let profile = match kind {
            IdentityKind::Smime => Profile::Smime,
            IdentityKind::OpenPgp => Profile::OpenPgp,
            _ => Profile::Jws,
        };
        let opts = SealOptions::new(profile).sign_only(true);
        let forged = Sender::builder(&mallory)
            .build()
            .seal(&plain(A, B, &format!("forged-{kind}")), &opts)
            .unwrap();
        let outcome = Receiver::builder(&bob)
            .build()
            .receive(&forged)
            .map(|r| r.commit());
        let delivered = matches!(outcome, Ok(Ok(mailseal::Outcome::Deliver { .. })));
        bound.push(format!("{kind} (forgery as Alice delivered: {delivered})"));
    }
    assert!(
        bound.is_empty(),
        "import_as bound Mallory's key to {A}, already pinned to Alice's key \
         (`key import` refuses this, exit 6): {bound:?}"
    );
}

/// The same, for the victim's own address: Mallory's bundle names Bob himself.
#[test]
fn fail_respelled_keys_import_as_peer_does_not_bind_our_own_address() {
    let (_alice, bob) = pair(IdentityKind::Smime);
    let mallory = MemoryStore::new();
    mallory.generate_identity(IdentityKind::Smime, B).unwrap();
    let bundle = mallory.export_public(IdentityKind::Smime, B).unwrap();
    let imported = bob.import_as(&bundle, ImportAs::Peer);
    assert!(
        imported.is_err(),
        "a peer's bundle naming our own address {B} was imported: {imported:?}; {:?}",
        bob.certificates_for(B).unwrap().len()
    );
}

/// Is a store's second certificate for an address (imported by `import_as`) used to
/// encrypt Bob's mail to Alice? (Wrong audience.)
#[test]
fn fail_respelled_keys_bob_does_not_encrypt_to_mallory_after_import_as() {
    let (_alice, bob) = pair(IdentityKind::Smime);
    let mallory = MemoryStore::new();
    mallory.generate_identity(IdentityKind::Smime, A).unwrap();
    let bundle = mallory.export_public(IdentityKind::Smime, A).unwrap();
    if bob.import_as(&bundle, ImportAs::Peer).is_err() {
        return;
    }
    let sealed = Sender::builder(&bob)
        .build()
        .seal(&plain(B, A, "to-alice"), &SealOptions::new(Profile::Smime))
        .unwrap();
    // Mallory (who holds Bob's certificate, public) opens it?
    mallory
        .import_as(
            &{
                let s = MemoryStore::new();
                let _ = &s;
                bob.export_public(IdentityKind::Smime, B).unwrap()
            },
            ImportAs::Peer,
        )
        .unwrap();
    let opened = Receiver::builder(&mallory)
        .build()
        .receive(&sealed)
        .map(|r| r.commit());
    assert!(
        opened.is_err() || !matches!(opened, Ok(Ok(mailseal::Outcome::Deliver { .. }))),
        "Mallory read Bob's mail to Alice: {opened:?}"
    );
    let _ = common::request();
}

/// Trimmed or padded evidence: a peer bundle whose private key `describe` cannot read
/// without a passphrase (a locked OpenPGP secret key, an encrypted PKCS#8 key beside
/// its certificate, PKCS#12 with an empty or a real password) is refused, and no
/// secret of any kind is stored.
#[test]
fn fail_trimmed_evidence_a_locked_private_key_in_a_peer_bundle_is_refused() {
    let mut stored = Vec::new();
    for f in ["locked.sec.asc", "c_kenc.pem", "empty.p12", "pw.p12"] {
        let bytes = std::fs::read(common::data(&format!("peer-bundles/{f}"))).unwrap();
        let bob = MemoryStore::new();
        // "A private key in it is refused" (ImportAs::Peer): locked or not.
        if let Ok(entries) = bob.import_as(&bytes, ImportAs::Peer) {
            let held: Vec<_> = bob
                .list()
                .unwrap()
                .into_iter()
                .map(|e| (e.kind, e.has_private_key))
                .collect();
            let secret = entries
                .iter()
                .map(|e| bob.openpgp_secret_key(&e.fingerprint).map(|s| s.is_some()))
                .collect::<Vec<_>>();
            stored.push(format!(
                "{f}: imported {entries:?}; list {held:?}; secret {secret:?}"
            ));
        }
    }
    assert!(
        stored.is_empty(),
        "a peer bundle holding a private key was imported: {stored:#?}"
    );
}

/// A store is created only by the commands that write keys: `stream status` and
/// `stream next` over a missing `sqlite:PATH` create a database there (exit 0), which
/// every later command then takes for a store; `sign-log verify` over one says
/// "ok: 0 entries" (src/cli/store.rs `require_existing` lets every `sqlite:` through).
#[test]
fn fail_store_path_a_missing_sqlite_store_is_refused_by_stream_and_sign_log() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("typo.db");
    let store = format!("sqlite:{}", db.display());
    let mut wrong = Vec::new();
    for args in [
        vec!["stream", "status", "--store", &store],
        vec!["stream", "next", "--store", &store, "--correlation", "x"],
        vec!["sign-log", "verify", "--store", &store],
    ] {
        let out = common::run(&args, b"");
        if out.status.code() != Some(2) || db.exists() {
            wrong.push(format!(
                "{args:?}: exit {:?}, created {}: {}{}",
                out.status.code(),
                db.exists(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let _ = std::fs::remove_file(&db);
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Shared state: the command line takes its replay state from `--state` or
/// `MAILSEAL_STATE` (a gateway's shared PostgreSQL), a library receiver over the same
/// store from the store's own database unless told. The library reads no environment:
/// a program that shares the command line's state names it (as the receiver's
/// documentation says), and then a message `mailseal open` accepted is a duplicate.
#[test]
fn fail_shared_state_cli_state_elsewhere_is_a_replay_to_a_library_receiver_given_it() {
    use mailseal::keystore::DirectoryStore;
    use mailseal::smime::Smime;
    use mailseal::Sealer;
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob_dir) = common::alice_signs_for_bob(dir.path());
    let v = common::with(
        common::request(),
        serde_json::json!({"messageId": "state-elsewhere-1", "idempotencyKey": "effect-x"}),
    );
    let msg = MailA2aMessage::new(
        "alice@smime.example",
        &["bob@smime.example"],
        common::env(v),
    );
    let raw = Smime::new(&alice)
        .seal(&msg, &SealOptions::new(Profile::Smime).sign_only(true))
        .unwrap();
    let state = dir.path().join("shared-state");
    std::fs::create_dir(&state).unwrap();
    let out = std::process::Command::new(common::bin())
        .args(["open", "--store", bob_dir.to_str().unwrap(), "-"])
        .env("MAILSEAL_STATE", &state)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&raw)?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bob = DirectoryStore::open(&bob_dir).unwrap();
    let shared = mailseal::replay::open_store(state.to_str().unwrap()).unwrap();
    let outcome = Receiver::builder(&bob)
        .replay_boxed(shared)
        .build()
        .receive(&raw)
        .unwrap()
        .commit()
        .unwrap();
    assert!(
        matches!(outcome, mailseal::Outcome::Duplicate { .. }),
        "`MAILSEAL_STATE=... mailseal open` accepted it, then a library receiver given \
         that state did not take it for a replay"
    );
}
