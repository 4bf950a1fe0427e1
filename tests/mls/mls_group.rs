//! The MLS profile through the library: membership by mail, application messages,
//! reordering, duplicates, forks and removal, each member with its own state.

use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::mls::{Handshake, Mls, MlsError, Received};
use mailseal::seal::OpenPolicy;
use mailseal::MailA2aMessage;

use crate::common;

/// The authentication service these tests' members share: one store pinning each
/// member's S/MIME certificate (one per test thread).
pub(crate) fn auth() -> &'static mailseal::mls::StoreAuthenticator<'static> {
    common::mls::thread_authority(&[
        "alice@a.example",
        "bob@b.example",
        "carol@c.example",
        "dave@d.example",
    ])
}

/// A member whose MLS key the shared authority certifies, who accepts Welcomes from
/// any member it authenticates.
pub(crate) fn member(email: &str) -> Mls {
    member_of(email, auth())
}

/// [`member`] under the authentication service `auth`.
fn member_of(email: &str, auth: &mailseal::mls::StoreAuthenticator<'static>) -> Mls {
    let m = Mls::in_memory().unwrap();
    m.generate_identity(email, auth).unwrap();
    m.allow_inviter("*", true).unwrap();
    m
}

pub(crate) fn request(from: &str, to: &[&str], id: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, id);
    env.set("payload", &serde_json::json!({"id": "task-7"}));
    MailA2aMessage::new(from, to, env)
}

pub(crate) fn open(m: &Mls, raw: &[u8]) -> Result<Received, MlsError> {
    m.receive(raw, &OpenPolicy::default(), "x", auth())?
        .commit()
}

/// alice creates a group and adds bob and carol.
pub(crate) fn trio() -> (Mls, Mls, Mls, String) {
    trio_under(auth())
}

/// [`trio`] under the authentication service `auth`, every member's.
fn trio_under(
    auth: &'static mailseal::mls::StoreAuthenticator<'static>,
) -> (Mls, Mls, Mls, String) {
    let (a, b, c) = (
        member_of("alice@a.example", auth),
        member_of("bob@b.example", auth),
        member_of("carol@c.example", auth),
    );
    let g = a.create_group("alice@a.example").unwrap();
    let kps = vec![
        b.key_package("bob@b.example").unwrap(),
        c.key_package("carol@c.example").unwrap(),
    ];
    let added = a.add(&g, &kps, auth).unwrap();
    for m in [&b, &c] {
        match m
            .receive(&added.welcome, &OpenPolicy::default(), "x", auth)
            .and_then(|r| r.commit())
            .unwrap()
        {
            Received::Handshake(Handshake::Joined { group, epoch, by }) => {
                assert_eq!(group, g);
                assert_eq!(epoch, 1);
                assert_eq!(by, "alice@a.example");
            }
            other => panic!("{other:?}"),
        }
    }
    (a, b, c, g)
}

/// A request from Alice to Bob and Carol, sealed in group `g`.
pub(crate) fn from_alice_to_all(a: &Mls, g: &str, id: &str) -> Vec<u8> {
    a.seal(
        &request("alice@a.example", &["bob@b.example", "carol@c.example"], id),
        g,
        false,
    )
    .unwrap()
}

pub(crate) fn sender_of(r: &Received) -> String {
    match r {
        Received::Application(o) => o.envelope().message_id().unwrap_or_default().to_string(),
        other => panic!("not an application message: {other:?}"),
    }
}

#[test]
fn group_by_mail_and_application_messages() {
    let (a, b, c, g) = trio();
    let sealed = from_alice_to_all(&a, &g, "m-1");
    for m in [&b, &c] {
        let r = open(m, &sealed).unwrap();
        assert_eq!(sender_of(&r), "m-1");
        let Received::Application(o) = &r else {
            unreachable!()
        };
        let coords = o.envelope().group().unwrap();
        assert_eq!(
            (coords.id.as_str(), coords.epoch, coords.generation),
            (g.as_str(), 1, 0)
        );
        // The same mail again: a duplicate, not a second delivery.
        assert!(matches!(
            open(m, &sealed).unwrap(),
            Received::Duplicate { .. }
        ));
    }
    // Our own copy is recognised.
    assert!(matches!(
        open(&a, &sealed).unwrap(),
        Received::Duplicate { .. }
    ));
    let second = b
        .seal(
            &request(
                "bob@b.example",
                &["alice@a.example", "carol@c.example"],
                "m-2",
            ),
            &g,
            false,
        )
        .unwrap();
    let r = open(&a, &second).unwrap();
    let Received::Application(o) = &r else {
        panic!()
    };
    assert_eq!(o.envelope().group().unwrap().generation, 0);
    assert_eq!(
        o.verdict.signer.as_ref().unwrap().replay_id(),
        "mls:bob@b.example"
    );
}

#[test]
fn future_epoch_held_until_its_commit() {
    let (a, b, c, g) = trio();
    let commit = a.update(&g).unwrap();
    let later = from_alice_to_all(&a, &g, "m-9");
    // bob gets the epoch-2 message before the commit that leads there.
    match open(&b, &later).unwrap() {
        Received::Held {
            epoch: 2,
            current: 1,
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    match open(&b, &commit).unwrap() {
        Received::Handshake(Handshake::Committed {
            epoch: 2, ready: 1, ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let held = b.next_ready(Some(&g)).unwrap().unwrap();
    let r = b
        .receive(&held.raw, &OpenPolicy::default(), &held.name, auth())
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(sender_of(&r), "m-9");
    assert!(b.next_ready(Some(&g)).unwrap().is_none());
    // carol in order.
    assert!(matches!(
        open(&c, &commit).unwrap(),
        Received::Handshake(Handshake::Committed { ready: 0, .. })
    ));
    assert_eq!(sender_of(&open(&c, &later).unwrap()), "m-9");
}

/// A held message that comes again by mail once its epoch has come is delivered from
/// the mail, and leaves the hold with it: the release finds nothing left to replay.
#[test]
fn a_held_message_delivered_by_mail_again_leaves_the_hold() {
    let (a, b, _c, g) = trio();
    let commit = a.update(&g).unwrap();
    let later = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "m-10"),
            &g,
            false,
        )
        .unwrap();
    assert!(matches!(open(&b, &later).unwrap(), Received::Held { .. }));
    assert_eq!(b.held_count(&g).unwrap(), 1);
    assert!(matches!(
        open(&b, &commit).unwrap(),
        Received::Handshake(Handshake::Committed { ready: 1, .. })
    ));
    assert_eq!(sender_of(&open(&b, &later).unwrap()), "m-10");
    assert_eq!(b.held_count(&g).unwrap(), 0);
    assert!(b.next_ready(Some(&g)).unwrap().is_none());
    // And once more it is a duplicate, as any message seen.
    assert!(matches!(
        open(&b, &later).unwrap(),
        Received::Duplicate { .. }
    ));
}

#[test]
fn fail_fork_leaves_state_unchanged() {
    let (a, b, c, g) = trio();
    let from_a = a.update(&g).unwrap();
    let from_b = b.update(&g).unwrap();
    assert!(matches!(
        open(&c, &from_a).unwrap(),
        Received::Handshake(Handshake::Committed { epoch: 2, .. })
    ));
    let err = open(&c, &from_b).unwrap_err();
    assert!(matches!(err, MlsError::Fork { epoch: 1, .. }), "{err}");
    assert_eq!(c.members(&g).unwrap().epoch, 2);
    // c still talks with a.
    let m = a
        .seal(
            &request("alice@a.example", &["carol@c.example"], "m-3"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(sender_of(&open(&c, &m).unwrap()), "m-3");
}

#[test]
fn fail_removed_member_cannot_open_new_messages() {
    let (a, b, c, g) = trio();
    let commit = a.remove(&g, "carol@c.example").unwrap();
    assert!(matches!(
        open(&b, &commit).unwrap(),
        Received::Handshake(Handshake::Committed {
            removed_us: false,
            ..
        })
    ));
    assert!(matches!(
        open(&c, &commit).unwrap(),
        Received::Handshake(Handshake::Committed {
            removed_us: true,
            ..
        })
    ));
    let m = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "m-4"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(sender_of(&open(&b, &m).unwrap()), "m-4");
    assert!(matches!(
        open(&c, &m).unwrap_err(),
        MlsError::Removed { .. }
    ));
    assert!(matches!(
        c.seal(
            &request("carol@c.example", &["bob@b.example"], "m-5"),
            &g,
            false
        )
        .unwrap_err(),
        MlsError::Removed { .. }
    ));
    assert_eq!(b.members(&g).unwrap().members.len(), 2);
}

#[test]
fn external_join_from_group_info() {
    let (a, b, c, g) = trio();
    let info = a.group_info(&g).unwrap();
    // A GroupInfo mail in clear is refused on receipt: it travels sealed.
    assert!(matches!(open(&b, &info), Err(MlsError::Binding(ref why)) if why.contains("in clear")));
    let d = member("dave@d.example");
    let (joined, commit) = d.join_external(&info, "dave@d.example", auth()).unwrap();
    assert_eq!(joined, g);
    // External joins are off unless each member turns them on for the group.
    for m in [&a, &b, &c] {
        m.allow_external_joins(&g, true).unwrap();
    }
    for m in [&a, &b, &c] {
        match open(m, &commit).unwrap() {
            Received::Handshake(Handshake::Committed { epoch: 2, by, .. }) => {
                assert_eq!(by, "dave@d.example")
            }
            other => panic!("{other:?}"),
        }
    }
    let hello = d
        .seal(
            &request("dave@d.example", &["bob@b.example"], "m-d"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(sender_of(&open(&b, &hello).unwrap()), "m-d");
    assert_eq!(a.members(&g).unwrap().members.len(), 4);
}

/// Issue #17: whoever holds a GroupInfo (sent in clear, or leaked) could join by
/// external commit under any name. Members refuse that unless the group allows it,
/// and the group is unchanged.
#[test]
fn fail_an_external_join_where_the_group_does_not_allow_it() {
    let (a, b, _c, g) = trio();
    let info = a.group_info(&g).unwrap();
    // Mallory's own store: the members' keys (public) and one she made for the CEO.
    let mallory_auth = Box::leak(Box::new(common::mls::shared_authority(&[
        "alice@a.example",
        "bob@b.example",
        "carol@c.example",
        "ceo@corp.example",
    ])));
    let mallory = Mls::in_memory().unwrap();
    mallory
        .generate_identity("ceo@corp.example", mallory_auth)
        .unwrap();
    // Her own store does not know the members' real certificates: the tree she
    // would join does not authenticate for her either.
    assert!(matches!(
        mallory.join_external(&info, "ceo@corp.example", mallory_auth),
        Err(MlsError::Unbound(_))
    ));
    let pinned_members = a.members(&g).unwrap();
    // Pinned by hand (as `mls members --json` lists them), she joins.
    let lines: Vec<String> = pinned_members
        .members
        .iter()
        .zip(&pinned_members.signature_keys)
        .map(|((_, who), key)| format!("{who} {key}"))
        .collect();
    let pins = mailseal::mls::PinnedKeys::parse(&lines.join("\n")).unwrap();
    let (_, commit) = mallory
        .join_external(&info, "ceo@corp.example", &pins)
        .unwrap();
    for m in [&a, &b] {
        let before = m.members(&g).unwrap();
        let err = open(m, &commit).unwrap_err();
        assert!(
            matches!(err, MlsError::ExternalJoinRefused { ref joiner, .. } if joiner == "ceo@corp.example"),
            "{err}"
        );
        let after = m.members(&g).unwrap();
        assert_eq!(after.epoch, before.epoch);
        assert_eq!(after.members, before.members);
    }
}

/// A Commit that replaces its committer's leaf is judged by the new leaf: Alice, a
/// member, certifies her MLS key again by Mallory's self-made certificate for Alice's
/// address (Mallory had Alice's MLS state, never her mail key) and commits an update
/// that carries that binding. Bob and Carol refuse it as unbound and stay at their
/// epoch; the same update certified by Alice's own mail key is applied.
#[test]
fn fail_an_update_whose_new_leaf_only_an_impostor_certified() {
    let mallory_auth: &'static _ = Box::leak(Box::new(common::mls::shared_authority(&[
        "alice@a.example",
    ])));
    let (a, b, c, g) = trio();
    a.generate_identity("alice@a.example", mallory_auth)
        .unwrap();
    let forged = a.update(&g).unwrap();
    for m in [&b, &c] {
        let before = m.members(&g).unwrap();
        let err = open(m, &forged).unwrap_err();
        assert!(
            matches!(err, MlsError::Unbound(ref r) if r.contains("alice@a.example")),
            "{err}"
        );
        let after = m.members(&g).unwrap();
        assert_eq!((after.epoch, after.members), (before.epoch, before.members));
    }
    let (a, b, _c, g) = trio();
    a.generate_identity("alice@a.example", auth()).unwrap();
    let genuine = a.update(&g).unwrap();
    assert!(matches!(
        open(&b, &genuine).unwrap(),
        Received::Handshake(Handshake::Committed { .. })
    ));
}

/// The same attack on receivers whose authentication service caches what it verified,
/// as a long-lived `Receiver`'s does: Alice's genuine binding is verified and cached
/// as Bob and Carol join, and her messages open through the cache. The forged update
/// keeps her MLS key (Mallory stole the state) under a binding Mallory's certificate
/// signed: a cache entry is for the binding it verified, so this one is checked, and
/// refused.
#[test]
fn fail_an_impostor_certified_update_with_the_genuine_binding_cached() {
    use mailseal::mls::{StoreAuthenticator, VerifiedBindings};
    let cache: &'static VerifiedBindings = Box::leak(Box::default());
    let cached: &'static StoreAuthenticator<'static> = Box::leak(Box::new(
        common::mls::shared_authority(&["alice@a.example", "bob@b.example", "carol@c.example"])
            .cached(cache),
    ));
    let mallory_auth: &'static _ = Box::leak(Box::new(common::mls::shared_authority(&[
        "alice@a.example",
    ])));
    let receive = |m: &Mls, raw: &[u8]| {
        m.receive(raw, &OpenPolicy::default(), "x", cached)
            .and_then(|r| r.commit())
    };
    let (a, b, c, g) = trio_under(cached);
    let sealed = from_alice_to_all(&a, &g, "m-1");
    for m in [&b, &c] {
        assert_eq!(sender_of(&receive(m, &sealed).unwrap()), "m-1");
    }
    let genuine_key = a.members(&g).unwrap().signature_keys[0].clone();

    a.generate_identity("alice@a.example", mallory_auth)
        .unwrap();
    let forged = a.update(&g).unwrap();
    for m in [&b, &c] {
        let before = m.members(&g).unwrap();
        // The same MLS key as the leaf the cache vouches for.
        assert_eq!(before.signature_keys[0], genuine_key);
        let err = receive(m, &forged).unwrap_err();
        assert!(
            matches!(err, MlsError::Unbound(ref r) if r.contains("alice@a.example")),
            "{err}"
        );
        let after = m.members(&g).unwrap();
        assert_eq!((after.epoch, after.members), (before.epoch, before.members));
    }
}

/// Issue #17: a member removed in epoch E cannot deliver application messages framed
/// in earlier epochs once E is applied (past-epoch secrets are for late mail).
#[test]
fn fail_a_removed_members_old_epoch_message_after_the_removal() {
    let (a, b, c, g) = trio();
    let old = c
        .seal(
            &request("carol@c.example", &["bob@b.example"], "m-carol-old"),
            &g,
            false,
        )
        .unwrap();
    let removal = a.remove(&g, "carol@c.example").unwrap();
    assert!(matches!(
        open(&b, &removal).unwrap(),
        Received::Handshake(Handshake::Committed { .. })
    ));
    let err = open(&b, &old).unwrap_err();
    assert!(
        matches!(err, MlsError::SenderRemoved { ref sender, .. } if sender == "carol@c.example"),
        "{err}"
    );
    // A member still in the group: its message of the old epoch still opens.
    let (a, b, _c, g) = trio();
    let late = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "m-alice-late"),
            &g,
            false,
        )
        .unwrap();
    let update = a.update(&g).unwrap();
    open(&b, &update).unwrap();
    assert_eq!(sender_of(&open(&b, &late).unwrap()), "m-alice-late");
}

#[test]
fn fail_group_info_tampered() {
    let (a, _b, _c, g) = trio();
    let info = a.group_info(&g).unwrap();
    let mut bad = info.clone();
    let at = bad.len() - 12;
    bad[at] = if bad[at] == b'A' { b'B' } else { b'A' };
    let d = member("dave@d.example");
    assert!(d.join_external(&bad, "dave@d.example", auth()).is_err());
    assert!(d.groups().unwrap().is_empty());
}

#[test]
fn past_epochs_kept_three_by_default() {
    let (a, b, _c, g) = trio();
    let old = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "m-old"),
            &g,
            false,
        )
        .unwrap();
    let older = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "m-older"),
            &g,
            false,
        )
        .unwrap();
    for _ in 0..3 {
        let commit = a.update(&g).unwrap();
        assert!(matches!(
            open(&b, &commit).unwrap(),
            Received::Handshake(Handshake::Committed { .. })
        ));
    }
    // Epoch 1 is three epochs back: still kept.
    assert_eq!(sender_of(&open(&b, &old).unwrap()), "m-old");
    let commit = a.update(&g).unwrap();
    open(&b, &commit).unwrap();
    // Four back: gone, and said so.
    match open(&b, &older).unwrap_err() {
        MlsError::EpochGone {
            epoch: 1,
            current: 5,
            ..
        } => {}
        other => panic!("{other}"),
    }
}

#[test]
fn fail_hold_is_bounded() {
    use mailseal::mls::MlsConfig;
    let a = member("alice@a.example");
    // Two a sender (one share each for Alice, Bob and names of no member: 6 in all).
    let b = Mls::in_memory().unwrap().with_config(MlsConfig {
        max_held: 6,
        max_held_per_sender: 2,
        ..MlsConfig::default()
    });
    b.generate_identity("bob@b.example", auth()).unwrap();
    b.allow_inviter("alice@a.example", true).unwrap();
    let g = a.create_group("alice@a.example").unwrap();
    let added = a
        .add(&g, &[b.key_package("bob@b.example").unwrap()], auth())
        .unwrap();
    open(&b, &added.welcome).unwrap();
    let commit = a.update(&g).unwrap();
    let future: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            a.seal(
                &request("alice@a.example", &["bob@b.example"], &format!("f-{i}")),
                &g,
                false,
            )
            .unwrap()
        })
        .collect();
    assert!(matches!(
        open(&b, &future[0]).unwrap(),
        Received::Held { .. }
    ));
    assert!(matches!(
        open(&b, &future[1]).unwrap(),
        Received::Held { .. }
    ));
    assert!(matches!(
        open(&b, &future[2]).unwrap_err(),
        MlsError::BufferFull { held: 2, .. }
    ));
    // The held ones survive and open once their commit is in; the refused one was not
    // kept and opens when delivered again.
    assert!(matches!(
        open(&b, &commit).unwrap(),
        Received::Handshake(Handshake::Committed { ready: 2, .. })
    ));
    let mut ids = Vec::new();
    while let Some(h) = b.next_ready(None).unwrap() {
        ids.push(sender_of(
            &b.receive(&h.raw, &OpenPolicy::default(), &h.name, auth())
                .unwrap()
                .commit()
                .unwrap(),
        ));
    }
    ids.sort();
    assert_eq!(ids, ["f-0", "f-1"]);
    assert_eq!(sender_of(&open(&b, &future[2]).unwrap()), "f-2");
}

#[test]
fn sealer_trait_names_the_group() {
    use mailseal::seal::{SealError, SealOptions, Sealer};
    use mailseal::Profile;
    let (a, b, _c, g) = trio();
    let sealer: &dyn Sealer = &a;
    let mut opts = SealOptions::new(Profile::Mls);
    let msg = request("alice@a.example", &["bob@b.example"], "m-t");
    assert!(matches!(
        sealer.seal(&msg, &opts).unwrap_err(),
        SealError::NoGroup
    ));
    opts.group = Some(g.clone());
    let sealed = sealer.seal(&msg, &opts).unwrap();
    assert_eq!(sender_of(&open(&b, &sealed).unwrap()), "m-t");
    // Not our identity in the group: refused before anything is sealed.
    let bobs = request("bob@b.example", &["alice@a.example"], "m-u");
    let err = sealer.seal(&bobs, &opts).unwrap_err();
    let SealError::Profile {
        profile: Profile::Mls,
        source,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    let mls = source.downcast_ref::<mailseal::mls::MlsError>();
    assert!(
        matches!(mls, Some(mailseal::mls::MlsError::Binding(_))),
        "{err:?}"
    );
}

#[test]
fn two_processes_on_one_store_never_work_on_a_stale_group() {
    // Two handles on one state directory stand for two gateway processes: what one
    // applies, the other sees at its next message, not a cached older group.
    let dir = tempfile::tempdir().unwrap();
    let a = member("alice@a.example");
    let b1 = Mls::open(dir.path()).unwrap();
    b1.generate_identity("bob@b.example", auth()).unwrap();
    b1.allow_inviter("@a.example", true).unwrap();
    let b2 = Mls::open(dir.path()).unwrap();
    let g = a.create_group("alice@a.example").unwrap();
    let added = a
        .add(&g, &[b1.key_package("bob@b.example").unwrap()], auth())
        .unwrap();
    open(&b1, &added.welcome).unwrap();
    let m1 = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "p-1"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(sender_of(&open(&b2, &m1).unwrap()), "p-1"); // b2 caches the group
    let commit = a.update(&g).unwrap();
    assert!(matches!(
        open(&b1, &commit).unwrap(),
        Received::Handshake(Handshake::Committed { epoch: 2, .. })
    ));
    // b2's cached group is at epoch 1; the state is at 2: b2 must not hold this.
    let m2 = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "p-2"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(sender_of(&open(&b2, &m2).unwrap()), "p-2");
    // And b1, whose cache b2 made stale in turn, still sees everything once.
    assert!(matches!(
        open(&b1, &m2).unwrap(),
        Received::Duplicate { .. }
    ));
    let m3 = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "p-3"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(sender_of(&open(&b1, &m3).unwrap()), "p-3");
    assert_eq!(b2.members(&g).unwrap().epoch, 2);
}

/// Issue #17, store hygiene: under a store passphrase an MLS signature key is kept
/// encrypted like the store's other keys; without the passphrase, or with another,
/// the identity cannot sign.
#[test]
fn signature_keys_are_encrypted_under_the_store_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let pass = || Some(zeroize::Zeroizing::new(b"correct horse".to_vec()));
    {
        let m = Mls::open(dir.path()).unwrap().with_passphrase(pass());
        m.generate_identity("alice@a.example", auth()).unwrap();
    }
    let without = Mls::open(dir.path()).unwrap();
    assert!(matches!(
        without.create_group("alice@a.example").unwrap_err(),
        MlsError::Locked(_)
    ));
    let wrong = Mls::open(dir.path())
        .unwrap()
        .with_passphrase(Some(zeroize::Zeroizing::new(b"wrong".to_vec())));
    assert!(matches!(
        wrong.create_group("alice@a.example").unwrap_err(),
        MlsError::Locked(_)
    ));
    let right = Mls::open(dir.path()).unwrap().with_passphrase(pass());
    let g = right.create_group("alice@a.example").unwrap();
    let bob = member("bob@b.example");
    let added = right
        .add(&g, &[bob.key_package("bob@b.example").unwrap()], auth())
        .unwrap();
    assert!(matches!(
        open(&bob, &added.welcome).unwrap(),
        Received::Handshake(Handshake::Joined { .. })
    ));
}

/// A KeyPackage mail is judged at the receiver's clock when it has one of its own
/// (a `Receiver` with a fixed clock, `open --at`, a conformance case's moment), not
/// by the system clock that openmls reads: a corpus generated today must judge its
/// KeyPackage case the same way years later.
#[test]
fn a_key_package_mail_is_judged_at_the_receivers_clock() {
    let (a, b) = (member("alice@a.example"), member("bob@b.example"));
    let kp = b.key_package("bob@b.example").unwrap();
    let at = |days: i64| {
        let mut p = OpenPolicy::default();
        p.validation_time = Some(time::OffsetDateTime::now_utc() + time::Duration::days(days));
        p
    };
    let judged = |days: i64| a.receive(&kp, &at(days), "x", auth()).map(drop);
    // Within its 84 days, by the receiver's clock.
    judged(0).unwrap();
    judged(80).unwrap();
    // Outside them: refused though the system clock is inside.
    for (days, why) in [(90, "in the past"), (-2, "in the future")] {
        match judged(days) {
            Err(MlsError::Invalid(reason)) => assert!(reason.contains(why), "{reason}"),
            other => panic!("{days} days: {other:?}"),
        }
    }
    // The system clock, as before, without one.
    a.receive(&kp, &OpenPolicy::default(), "x", auth()).unwrap();
}

/// A receiver with a clock of its own (a `Receiver` with a fixed clock, `open --at`,
/// a conformance case) records a message as seen, and reports its duplicate, at that
/// moment, not at the system clock's: replaying an archive twice gives the same state.
#[test]
fn a_message_is_recorded_as_seen_at_the_receivers_clock() {
    let (a, b, _c, g) = trio();
    let sealed = from_alice_to_all(&a, &g, "m-clock");
    let mut then = OpenPolicy::default();
    then.validation_time = Some(time::macros::datetime!(2026-06-01 00:00 UTC));
    let first = b
        .receive(&sealed, &then, "x", auth())
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(sender_of(&first), "m-clock");
    // Asked later on the system clock: the moment it was first seen is the fixed one.
    match open(&b, &sealed).unwrap() {
        Received::Duplicate { first_seen, .. } => assert_eq!(first_seen, 1_780_272_000),
        other => panic!("{other:?}"),
    }
}

/// Cost (issue #58): what can be judged of a Welcome before openmls validates its tree
/// (work that grows with the square of its members, for anyone holding one of our
/// KeyPackages) is judged first. With no inviter allowed, or one that is not the mail's
/// From, it is refused whatever it holds: bytes no one can decrypt are refused as
/// such only once the From is an allowed inviter. A group of more members than
/// `max_welcome_members` is refused once its GroupInfo is decrypted; at the limit it
/// joins, the refusals having left the KeyPackage usable.
#[test]
fn fail_cost_a_welcome_is_judged_before_openmls_reads_its_tree() {
    use mailseal::mls::MlsConfig;
    let a = member("alice@a.example");
    let b = Mls::in_memory().unwrap().with_config(MlsConfig {
        max_welcome_members: 3,
        ..MlsConfig::default()
    });
    b.generate_identity("bob@b.example", auth()).unwrap();
    let g = a.create_group("alice@a.example").unwrap();
    let kps = [
        b.key_package("bob@b.example").unwrap(),
        member("carol@c.example")
            .key_package("carol@c.example")
            .unwrap(),
        member("dave@d.example")
            .key_package("dave@d.example")
            .unwrap(),
    ];
    let welcome = a.add(&g, &kps, auth()).unwrap().welcome;
    // The same mail with the last byte of its encrypted GroupInfo changed.
    let garbled = {
        use base64::Engine as _;
        let mut message = mailseal::mls::wire::read_mail(&welcome, &Default::default())
            .unwrap()
            .message;
        *message.last_mut().unwrap() ^= 1;
        let head = welcome.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&message);
        let mut out = welcome[..head].to_vec();
        for line in b64.as_bytes().chunks(76) {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
        out
    };
    let refused_inviter = |raw: &[u8]| match open(&b, raw).unwrap_err() {
        MlsError::InviterRefused { inviter } => assert_eq!(inviter, "alice@a.example"),
        other => panic!("{other}"),
    };
    // Nobody may invite Bob (the default): neither is read.
    refused_inviter(&welcome);
    refused_inviter(&garbled);
    // Carol may, Alice (the From) may not: neither is read.
    b.allow_inviter("carol@c.example", true).unwrap();
    refused_inviter(&welcome);
    refused_inviter(&garbled);
    // Alice may: openmls reads them. The garbled one does not decrypt; the other's
    // group has four members, one more than Bob joins.
    b.allow_inviter("alice@a.example", true).unwrap();
    let err = open(&b, &garbled).unwrap_err();
    assert!(matches!(err, MlsError::Invalid(_)), "{err}");
    let err = open(&b, &welcome).unwrap_err();
    assert!(
        matches!(
            err,
            MlsError::WelcomeTooManyMembers {
                members: 4,
                limit: 3
            }
        ),
        "{err}"
    );
    assert_eq!(err.code(), "mls.welcome-too-large");
    assert!(b.groups().unwrap().is_empty());
    // Four members are within a limit of four: it joins.
    let b = b.with_config(MlsConfig {
        max_welcome_members: 4,
        ..MlsConfig::default()
    });
    assert!(matches!(
        open(&b, &welcome).unwrap(),
        Received::Handshake(Handshake::Joined { .. })
    ));
}

/// Cost (issue #58): a Welcome over `max_welcome_bytes` is refused before openmls
/// reads its ratchet tree, and nothing is joined; under the default it joins.
#[test]
fn fail_cost_a_welcome_over_the_limit() {
    use mailseal::mls::MlsConfig;
    let a = member("alice@a.example");
    let b = Mls::in_memory().unwrap().with_config(MlsConfig {
        max_welcome_bytes: 256,
        ..MlsConfig::default()
    });
    b.generate_identity("bob@b.example", auth()).unwrap();
    b.allow_inviter("*", true).unwrap();
    let g = a.create_group("alice@a.example").unwrap();
    let added = a
        .add(&g, &[b.key_package("bob@b.example").unwrap()], auth())
        .unwrap();
    let err = open(&b, &added.welcome).unwrap_err();
    assert!(
        matches!(err, MlsError::WelcomeTooLarge { limit: 256, size } if size > 256),
        "{err}"
    );
    assert_eq!(err.code(), "mls.welcome-too-large");
    assert!(b.groups().unwrap().is_empty());
    // The same Welcome under the default bound joins.
    let c = member("carol@c.example");
    let added = a
        .add(&g, &[c.key_package("carol@c.example").unwrap()], auth())
        .unwrap();
    assert!(matches!(
        open(&c, &added.welcome).unwrap(),
        Received::Handshake(Handshake::Joined { .. })
    ));
}
