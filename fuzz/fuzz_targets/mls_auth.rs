//! Structure-aware: MLS leaves whose credential bindings an attacker chooses, through
//! a victim's authentication service (`src/mls/authentication.rs`: the binding's
//! format, its S/MIME or OpenPGP certification, pinned keys, and the leaf, tree and
//! Commit checks that call them).
//!
//! A byte-level input (`mls_open`) never carries a validly signed leaf, so
//! `authentication.rs` was 26% covered. Here Mallory, who controls everything but
//! Bob's store, makes real MLS leaves: her own signature key, a credential naming
//! whom she likes (Alice, whose S/MIME certificate Bob pins; Carol, whose OpenPGP
//! certificate Bob holds; herself; Bob), and as its binding whatever the fuzzer picks
//! from real certifications (Alice's and Carol's of their own MLS keys, Mallory's
//! self-made S/MIME and OpenPGP keys claiming their addresses) mutated at the byte
//! level (a byte set, the tail cut, bytes appended, the format byte swapped). The
//! leaf then reaches Bob as a KeyPackage mail, inside the tree of a Welcome from
//! Mallory, as a member Alice adds by a Commit (Alice checks nothing: her
//! authentication service is Mallory's), or as the joiner of an external Commit into
//! Alice's group, which Bob lets anyone join by GroupInfo. Bob's service may also pin
//! keys from text the fuzzer writes.
//!
//! Invariant, beyond no panic: Bob never accepts a leaf of Mallory's, whatever it
//! claims and carries. Only Alice and Carol can certify for their addresses, and they
//! never certified Mallory's key.
//!
//! A fifth way reaches the committer's new leaf of an update path, which Mallory, never
//! a member, cannot: Alice, a member, certifies her key again with a binding the fuzzer
//! picks (her own genuine one among the others, mutated as above) and commits an update
//! that carries it. There the invariant is weaker but exact: Bob applies the Commit if
//! and only if his authentication service, asked directly, verifies that binding for
//! Alice's key (a check of the old leaf, or a verdict cached for another binding, would
//! break it).
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::arbitrary::{Result as ArbitraryResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::mls::authentication::{statement, Authenticator, Binding, PinnedKeys};
use mailseal::mls::{Mls, MlsError, StoreAuthenticator};
use mailseal::seal::OpenPolicy;
use openpgp::parse::Parse;
use openpgp::serialize::Serialize;
use sequoia_openpgp as openpgp;

const ALICE: &str = "alice@a.example";
const BOB: &str = "bob@b.example";
const CAROL: &str = "carol@c.example";
const MALLORY: &str = "mallory@m.example";
const CLAIMS: [&str; 5] = [ALICE, CAROL, MALLORY, BOB, "ALICE@A.EXAMPLE"];

/// An authentication service that certifies with a binding given in advance and
/// accepts every leaf: Mallory's, and Alice's when she adds whomever she is told to.
struct Gullible(RefCell<Option<Binding>>);

impl Authenticator for Gullible {
    fn certify(&self, _: &str, _: &[u8]) -> Result<Binding, MlsError> {
        self.0
            .borrow()
            .clone()
            .ok_or_else(|| MlsError::Usage("no binding".into()))
    }
    fn verify(&self, _: &str, _: &[u8], _: Option<&Binding>) -> Result<(), String> {
        Ok(())
    }
}

fn smime_identity(store: &DirectoryStore, email: &str) {
    let request = mailseal::smime::IdentityRequest {
        email: Some(email.to_string()),
        common_name: None,
        kind: mailseal::smime::KeyKind::P256,
        days: 30,
        ca: false,
    };
    for id in mailseal::smime::generate(&request, None).expect("S/MIME identity") {
        let pem = mailseal::keystore::identity_pem(&id.certificate, &id.private_key).expect("PEM");
        store.import(pem.as_bytes(), "fuzz", false).expect("import");
    }
}

/// An OpenPGP key for `email` in `store`; its certificate without secrets.
fn openpgp_identity(store: &DirectoryStore, email: &str) -> Vec<u8> {
    let tsk = mailseal::keystore::openpgp::generate(
        email,
        None,
        mailseal::keystore::openpgp::KeyProfile::default(),
    )
    .expect("OpenPGP key");
    store.import(&tsk, "fuzz", false).expect("import");
    let cert = openpgp::Cert::from_bytes(&tsk[..]).expect("cert");
    let mut public = Vec::new();
    cert.serialize(&mut public).expect("serialize");
    public
}

/// Everyone's keys, made once per process.
struct World {
    bob_store: &'static DirectoryStore,
    /// Alice's own authentication service (her S/MIME key certifies her MLS key).
    alice_auth: StoreAuthenticator<'static>,
    /// Real certifications, which Mallory reuses: by Alice and Carol (of their own
    /// statements), by Mallory's keys that claim their addresses.
    bindings: Vec<Vec<u8>>,
}

/// A store in a directory of its own, kept for the life of the process (and named
/// in a global, so that LeakSanitizer sees it is still held at exit).
fn store(name: &str) -> &'static DirectoryStore {
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    static HELD: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
    let root = ROOT.get_or_init(|| tempfile::tempdir().expect("temp dir").keep());
    let store: &'static DirectoryStore = Box::leak(Box::new(
        DirectoryStore::open(root.join(name)).expect("store"),
    ));
    HELD.lock()
        .expect("lock")
        .push(store as *const DirectoryStore as usize);
    store
}

fn world() -> World {
    let alice = store("alice");
    smime_identity(alice, ALICE);
    let carol = store("carol");
    let carol_public = openpgp_identity(carol, CAROL);
    let mallory = store("mallory");
    smime_identity(mallory, ALICE);
    openpgp_identity(mallory, CAROL);
    let bob = store("bob");
    smime_identity(bob, BOB);
    for cert in alice.certificates_for(ALICE).expect("Alice's certificate") {
        bob.import(&cert.der, "alice", false).expect("pin Alice");
    }
    bob.import(&carol_public, "carol", false)
        .expect("Carol's certificate");
    for cert in bob.certificates_for(BOB).expect("Bob's certificate") {
        alice.import(&cert.der, "bob", false).expect("pin Bob");
    }

    let key = [7u8; 32];
    let mut bindings = Vec::new();
    for (store, address) in [
        (alice, ALICE),
        (carol, CAROL),
        (mallory, ALICE),
        (mallory, CAROL),
    ] {
        let b = StoreAuthenticator::new(store)
            .certify(address, &statement(address, &key))
            .expect("certify");
        bindings.push(b.to_bytes());
    }
    World {
        bob_store: bob,
        alice_auth: StoreAuthenticator::new(alice),
        bindings,
    }
}

thread_local! {
    static WORLD: World = world();
}

fn binding(u: &mut Unstructured<'_>, w: &World) -> ArbitraryResult<Option<Binding>> {
    let chosen = w.bindings[u.choose_index(w.bindings.len())?].clone();
    mutated(u, chosen)
}

/// `bytes`, a binding's encoding, with up to three byte-level changes.
fn mutated(u: &mut Unstructured<'_>, mut bytes: Vec<u8>) -> ArbitraryResult<Option<Binding>> {
    for _ in 0..u.int_in_range(0..=3)? {
        match u.int_in_range(0..=3)? {
            0 => {
                let at = u.choose_index(bytes.len())?;
                bytes[at] = u.arbitrary()?;
            }
            1 => {
                let keep = u.int_in_range(1..=bytes.len())?;
                bytes.truncate(keep);
            }
            2 => {
                let more: Vec<u8> = u.arbitrary()?;
                bytes.extend(more);
            }
            _ => bytes[0] = if bytes[0] == 1 { 2 } else { 1 },
        }
    }
    Ok(Binding::from_bytes(&bytes).ok())
}

fuzz_target!(|data: &[u8]| {
    WORLD.with(|w| {
        let _ = run(data, w);
    });
});

fn run(data: &[u8], w: &World) -> ArbitraryResult<()> {
    let mut u = Unstructured::new(data);
    let claim = *u.choose(&CLAIMS)?;
    let mallory_auth = Gullible(RefCell::new(binding(&mut u, w)?));
    let mallory = Mls::in_memory().expect("state");
    if mallory.generate_identity(claim, &mallory_auth).is_err() {
        return Ok(());
    }
    let pin_len = u.int_in_range(0..=96)?;
    let pins = PinnedKeys::parse(&String::from_utf8_lossy(u.bytes(pin_len)?)).unwrap_or_default();
    let policy = OpenPolicy::default();
    let bob_auth = StoreAuthenticator::with_policy(w.bob_store, &policy).with_pinned(&pins);
    let bob = Mls::in_memory().expect("state");
    let bob_own = StoreAuthenticator::new(w.bob_store);
    bob.generate_identity(BOB, &bob_own)
        .expect("Bob's MLS identity");
    bob.allow_inviter("*", true).expect("inviters");

    let refused = |what: &str, r: Result<mailseal::mls::Receipt<'_>, MlsError>| {
        if let Ok(receipt) = r {
            panic!(
                "Bob accepted Mallory's leaf ({what}, claiming {claim}): {:?}",
                receipt.commit()
            );
        }
    };
    match u.int_in_range(0..=4)? {
        // Her KeyPackage, by mail.
        0 => {
            let Ok(mail) = mallory.key_package(claim) else {
                return Ok(());
            };
            refused("KeyPackage", bob.receive(&mail, &policy, "kp", &bob_auth));
        }
        // Her group: Bob is invited, her leaf in the Welcome's tree.
        1 => {
            let Ok(g) = mallory.create_group(claim) else {
                return Ok(());
            };
            let kp = bob.key_package(BOB).expect("Bob's KeyPackage");
            let Ok(added) = mallory.add(&g, &[kp], &mallory_auth) else {
                return Ok(());
            };
            refused(
                "Welcome",
                bob.receive(&added.welcome, &policy, "welcome", &bob_auth),
            );
        }
        // Alice's group with Bob in it: Alice adds Mallory without checking, or
        // Mallory joins it by its GroupInfo (an external Commit, which the group
        // allows), her leaf the joiner's.
        step => {
            let alice = Mls::in_memory().expect("state");
            alice
                .generate_identity(ALICE, &w.alice_auth)
                .expect("Alice's MLS identity");
            let g = alice.create_group(ALICE).expect("group");
            let kp = bob.key_package(BOB).expect("Bob's KeyPackage");
            let first = alice.add(&g, &[kp], &w.alice_auth).expect("Alice adds Bob");
            bob.receive(&first.welcome, &policy, "welcome", &bob_auth)
                .expect("Bob joins Alice's group")
                .commit()
                .expect("commit");
            let gullible = Gullible(RefCell::new(None));
            if step == 4 {
                // Alice certifies her key again: her genuine binding of it, or another,
                // then mutated; the update carries it.
                let public = hex(&alice.identities().expect("identities")[0].1);
                let new = if u.arbitrary()? {
                    let genuine = w
                        .alice_auth
                        .certify(ALICE, &statement(ALICE, &public))
                        .expect("certify");
                    mutated(&mut u, genuine.to_bytes())?
                } else {
                    binding(&mut u, w)?
                };
                let Some(new) = new else {
                    return Ok(());
                };
                *gullible.0.borrow_mut() = Some(new.clone());
                alice
                    .generate_identity(ALICE, &gullible)
                    .expect("Alice certifies again");
                let commit = alice.update(&g).expect("Alice's update");
                let verifies = bob_auth.verify(ALICE, &public, Some(&new)).is_ok();
                let applied = bob
                    .receive(&commit, &policy, "update", &bob_auth)
                    .is_ok_and(|r| r.commit().is_ok());
                assert_eq!(
                    applied, verifies,
                    "Bob's verdict on Alice's updated leaf is not his service's on its binding"
                );
            } else if step == 2 {
                let Ok(kp) = mallory.key_package(claim) else {
                    return Ok(());
                };
                let Ok(second) = alice.add(&g, &[kp], &gullible) else {
                    return Ok(());
                };
                refused(
                    "Commit",
                    bob.receive(&second.commit, &policy, "commit", &bob_auth),
                );
            } else {
                bob.allow_external_joins(&g, true).expect("external joins");
                let info = alice.group_info(&g).expect("GroupInfo");
                let Ok((_, commit)) = mallory.join_external(&info, claim, &gullible) else {
                    return Ok(());
                };
                refused(
                    "external Commit",
                    bob.receive(&commit, &policy, "external", &bob_auth),
                );
            }
        }
    }
    Ok(())
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}
