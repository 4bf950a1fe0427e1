//! An independent MLS implementation in our groups: AWS's `mls-rs` (RustCrypto
//! provider, cipher suite 1) as a member, through mail bytes only. The mls-rs side
//! reads and writes its `message/mls` mails with this file's own few lines (headers,
//! base64), not with mailseal's writer, and mailseal is used there only as the
//! authentication service both sides share and to compose the A2A inner entity.
//!
//! The mls-rs settings a member of a mailseal group needs (docs/mls.md, "The MLS mail
//! profile"), each set in [`rs_client`] and each refused with a named cause when
//! missing ([`fail_mls_rs_defaults_are_refused_with_the_setting_named`]):
//! - `EncryptionOptions::new(true, ..)`: Commits and proposals as PrivateMessage;
//! - `key_package_lifetime` at most 84 days (mls-rs' default is 365);
//! - the binding extension type `0xF2A2` among its capabilities and its binding in its
//!   leaf (the authentication service);
//! - the ratchet tree in Welcomes (mls-rs' default already).

use base64::Engine;
use mailseal::envelope::Envelope;
use mailseal::mls::Authenticator as _;
use mailseal::mls::{authentication, Handshake, Mls, MlsError, Received, StoreAuthenticator};
use mailseal::seal::OpenPolicy;
use mailseal::{Limits, MailA2aMessage};
use mls_rs::client_builder::{MlsConfig, PaddingMode};
use mls_rs::group::{CommitEffect, CommitOutput, ReceivedMessage};
use mls_rs::identity::basic::{BasicCredential, BasicIdentityProvider};
use mls_rs::identity::SigningIdentity;
use mls_rs::mls_rules::{CommitOptions, DefaultMlsRules, EncryptionOptions};
use mls_rs::{
    CipherSuite, CipherSuiteProvider, Client, CryptoProvider, Extension, ExtensionList, Group,
    MlsMessage,
};

use crate::common;

const ANN: &str = "ann@a.example";
const BOB: &str = "bob@b.example";
const CAT: &str = "cat@c.example";
const RUSTY: &str = "rusty@rs.example";

/// The binding extension type (private use), as an mls-rs extension type.
const BINDING: mls_rs::extension::ExtensionType =
    mls_rs::extension::ExtensionType::new(authentication::BINDING_EXTENSION);

/// One store holding an S/MIME identity for each member: it certifies each member's
/// MLS key, mls-rs' included, and every member checks every leaf against it.
fn auth() -> &'static StoreAuthenticator<'static> {
    common::mls::thread_authority(&[ANN, BOB, CAT, RUSTY])
}

fn member(email: &str) -> Mls {
    let m = Mls::in_memory().unwrap();
    m.generate_identity(email, auth()).unwrap();
    m.allow_inviter("*", true).unwrap();
    m
}

/// What the mls-rs member is configured with; [`Settings::ours`] is what a mailseal
/// group needs, the others are mls-rs' own defaults, one at a time.
#[derive(Clone, Copy)]
struct Settings {
    encrypt_control_messages: bool,
    key_package_days: u64,
    tree_in_welcome: bool,
    binding: bool,
    suite: CipherSuite,
}

impl Settings {
    fn ours() -> Settings {
        Settings {
            encrypt_control_messages: true,
            key_package_days: 84,
            tree_in_welcome: true,
            binding: true,
            suite: CipherSuite::CURVE25519_AES128,
        }
    }
}

/// An mls-rs client for `RUSTY` and its leaf extensions.
fn rs_client(s: Settings) -> (Client<impl MlsConfig>, ExtensionList) {
    let crypto = mls_rs_crypto_rustcrypto::RustCryptoProvider::default();
    let suite = crypto.cipher_suite_provider(s.suite).unwrap();
    let (secret, public) = suite.signature_key_generate().unwrap();
    let mut leaf = ExtensionList::new();
    if s.binding {
        let binding = auth()
            .certify(RUSTY, &authentication::statement(RUSTY, public.as_bytes()))
            .unwrap();
        leaf.set(Extension::new(BINDING, binding.to_bytes()));
    }
    let identity = SigningIdentity::new(
        BasicCredential::new(RUSTY.as_bytes().to_vec()).into_credential(),
        public,
    );
    let rules = DefaultMlsRules::new()
        .with_encryption_options(EncryptionOptions::new(
            s.encrypt_control_messages,
            PaddingMode::StepFunction,
        ))
        .with_commit_options(CommitOptions::new().with_ratchet_tree_extension(s.tree_in_welcome));
    let client = Client::builder()
        .crypto_provider(crypto)
        .identity_provider(BasicIdentityProvider)
        .mls_rules(rules)
        .extension_type(BINDING)
        .key_package_lifetime(std::time::Duration::from_secs(s.key_package_days * 86_400))
        .signing_identity(identity, secret, s.suite)
        .build();
    (client, leaf)
}

/// The mls-rs side's writer: a `message/mls` mail around `message`.
fn rs_mail(to: &[&str], message: &MlsMessage) -> Vec<u8> {
    let id = format!("{}@rs.example", uuid::Uuid::new_v4());
    rs_mail_as(to, message, &id, time::OffsetDateTime::now_utc())
}

/// [`rs_mail`] with the Message-ID and Date given: an application message's must be
/// its protected ones.
fn rs_mail_as(
    to: &[&str],
    message: &MlsMessage,
    message_id: &str,
    date: time::OffsetDateTime,
) -> Vec<u8> {
    let date = date
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap();
    let mut m = format!(
        "From: <{RUSTY}>\r\nTo: {}\r\nDate: {date}\r\nMessage-ID: <{message_id}>\r\nMIME-Version: 1.0\r\nContent-Type: message/mls; version=1.0\r\nContent-Transfer-Encoding: base64\r\n\r\n",
        to.iter().map(|a| format!("<{a}>")).collect::<Vec<_>>().join(", "),
    )
    .into_bytes();
    let text = base64::engine::general_purpose::STANDARD.encode(message.to_bytes().unwrap());
    for line in text.as_bytes().chunks(76) {
        m.extend_from_slice(line);
        m.extend_from_slice(b"\r\n");
    }
    m
}

/// The mls-rs side's reader: the MLSMessage of a `message/mls` mail.
fn rs_read(mail: &[u8]) -> MlsMessage {
    let start = mail.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(String::from_utf8_lossy(&mail[..start])
        .to_ascii_lowercase()
        .contains("content-type: message/mls; version=1.0"));
    let b64: Vec<u8> = mail[start..]
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    MlsMessage::from_bytes(&bytes).unwrap()
}

/// The mls-rs member as its own authentication service: every other leaf of its
/// group carries a binding that verifies for the address its credential names.
fn rs_check_roster<C: MlsConfig>(group: &Group<C>) -> Vec<String> {
    let own = group.current_member_index();
    let mut seen = Vec::new();
    for m in group.roster().members() {
        if m.index == own {
            continue;
        }
        let identity = String::from_utf8(
            m.signing_identity
                .credential
                .as_basic()
                .unwrap()
                .identifier()
                .to_vec(),
        )
        .unwrap();
        let ext = m
            .extensions
            .get(BINDING)
            .unwrap_or_else(|| panic!("{identity}: no binding"));
        let binding = authentication::Binding::from_bytes(ext.extension_data()).unwrap();
        auth()
            .verify(
                &identity,
                m.signing_identity.signature_key.as_bytes(),
                Some(&binding),
            )
            .unwrap_or_else(|e| panic!("{identity}: {e}"));
        seen.push(identity);
    }
    seen.sort();
    seen
}

/// An application message from the mls-rs member: a MailA2A request whose `group`
/// coordinates are the framing's, in a PrivateMessage with no authenticated data (a
/// generic client's), as a mail.
fn rs_send<C: MlsConfig>(group: &mut Group<C>, generation: u64, to: &[&str], n: usize) -> Vec<u8> {
    let mut env: serde_json::Value = serde_json::from_str(&common::mls::envelope(n)).unwrap();
    env["group"] = serde_json::json!({
        "id": mailseal::mls::group_id_text(group.group_id()),
        "epoch": group.current_epoch(),
        "generation": generation,
    });
    let env = Envelope::from_json(env.to_string().as_bytes()).unwrap();
    let plain = MailA2aMessage::new(RUSTY, to, env);
    let entity = plain.to_inner_entity(true).unwrap();
    let message = group.encrypt_application_message(&entity, vec![]).unwrap();
    rs_mail_as(
        to,
        &message,
        plain.headers.message_id.as_deref().unwrap(),
        plain.headers.date.unwrap(),
    )
}

/// The A2A message the mls-rs member reads from `mail`.
fn rs_open<C: MlsConfig>(group: &mut Group<C>, mail: &[u8]) -> MailA2aMessage {
    match group.process_incoming_message(rs_read(mail)).unwrap() {
        ReceivedMessage::ApplicationMessage(app) => {
            MailA2aMessage::parse(app.data(), &Limits::default()).unwrap()
        }
        other => panic!("not an application message: {other:?}"),
    }
}

/// mls-rs commits the add of the member whose KeyPackage mail is `key_package`
/// (not yet applied on its side).
fn rs_add<C: MlsConfig>(group: &mut Group<C>, key_package: &[u8]) -> CommitOutput {
    group
        .commit_builder()
        .add_member(rs_read(key_package))
        .unwrap()
        .build()
        .unwrap()
}

/// A Commit the mls-rs member receives: whether it removed the mls-rs member.
fn rs_commit<C: MlsConfig>(group: &mut Group<C>, mail: &[u8]) -> bool {
    match group.process_incoming_message(rs_read(mail)).unwrap() {
        ReceivedMessage::Commit(c) => matches!(c.effect, CommitEffect::Removed { .. }),
        other => panic!("not a Commit: {other:?}"),
    }
}

fn receive(m: &Mls, raw: &[u8]) -> Result<Received, MlsError> {
    m.receive(raw, &OpenPolicy::default(), "x", auth())?
        .commit()
}

/// The message id and the group coordinates of an application message.
fn delivered(r: Result<Received, MlsError>) -> (String, (u64, u64), String) {
    match r.unwrap() {
        Received::Application(o) => {
            let c = o.envelope().group().unwrap();
            (
                o.envelope().message_id().unwrap_or_default().to_string(),
                (c.epoch, c.generation),
                o.envelope().value("payload").unwrap()["message"]["parts"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        }
        other => panic!("not an application message: {other:?}"),
    }
}

fn committed(r: Result<Received, MlsError>) -> (u64, String, bool) {
    match r.unwrap() {
        Received::Handshake(Handshake::Committed {
            epoch,
            by,
            removed_us,
            ..
        }) => (epoch, by, removed_us),
        other => panic!("not a Commit: {other:?}"),
    }
}

fn joined(r: Result<Received, MlsError>) -> (String, u64, String) {
    match r.unwrap() {
        Received::Handshake(Handshake::Joined { group, epoch, by }) => (group, epoch, by),
        other => panic!("not a Welcome: {other:?}"),
    }
}

fn request(from: &str, to: &[&str], n: usize) -> MailA2aMessage {
    let env = Envelope::from_json(common::mls::envelope(n).as_bytes()).unwrap();
    MailA2aMessage::new(from, to, env)
}

/// The mls-rs KeyPackage mail.
fn rs_key_package<C: MlsConfig>(client: &Client<C>, leaf: &ExtensionList) -> Vec<u8> {
    let kp = client
        .generate_key_package_message(ExtensionList::new(), leaf.clone(), None)
        .unwrap();
    rs_mail(&[RUSTY], &kp)
}

/// mls-rs joins a mailseal group from our Welcome, reads and writes application
/// messages, commits an add and a remove that our members apply, applies our
/// Commits; once removed, what it still sends is refused.
#[test]
fn mls_rs_member_in_a_mailseal_group() {
    let (ann, bob, cat) = (member(ANN), member(BOB), member(CAT));
    let (rusty, leaf) = rs_client(Settings::ours());
    let g = ann.create_group(ANN).unwrap();
    let added = ann
        .add(
            &g,
            &[bob.key_package(BOB).unwrap(), rs_key_package(&rusty, &leaf)],
            auth(),
        )
        .unwrap();
    assert_eq!(
        joined(receive(&bob, &added.welcome)),
        (g.clone(), 1, ANN.into())
    );
    let (mut rg, _) = rusty
        .join_group(None, &rs_read(&added.welcome), None)
        .unwrap();
    assert_eq!(mailseal::mls::group_id_text(rg.group_id()), g);
    assert_eq!(rg.current_epoch(), 1);
    assert_eq!(rs_check_roster(&rg), [ANN, BOB]);

    // Ours to mls-rs: the A2A request and its coordinates as we sealed them.
    let sealed = ann
        .seal(&request(ANN, &[BOB, RUSTY], 1), &g, false)
        .unwrap();
    let read = rs_open(&mut rg, &sealed);
    assert_eq!(
        read.envelope().message_id(),
        Some("urn:uuid:group-1".into())
    );
    let c = read.envelope().group().unwrap();
    assert_eq!((c.id.as_str(), c.epoch, c.generation), (g.as_str(), 1, 0));
    assert_eq!(delivered(receive(&bob, &sealed)).0, "urn:uuid:group-1");

    // mls-rs to ours, twice: generations 0 and 1 of its ratchet.
    for (n, generation) in [(2, 0), (3, 1)] {
        let mail = rs_send(&mut rg, generation, &[ANN, BOB], n);
        for m in [&ann, &bob] {
            let (id, coords, text) = delivered(receive(m, &mail));
            assert_eq!(id, format!("urn:uuid:group-{n}"));
            assert_eq!(coords, (1, generation));
            assert_eq!(text, format!("message {n}"));
        }
    }

    // Its third message (generation 2) saying generation 0: refused, bound to the
    // generation of the real framing, not to what the sender states.
    let lying = rs_send(&mut rg, 0, &[ANN, BOB], 30);
    match receive(&ann, &lying) {
        Err(MlsError::Binding(why)) => assert!(why.contains("sent at (2)"), "{why}"),
        other => panic!("{other:?}"),
    }

    // mls-rs commits an add (cat, from cat's KeyPackage mail): our members apply it,
    // cat joins from mls-rs' Welcome.
    let out = rs_add(&mut rg, &cat.key_package(CAT).unwrap());
    rg.apply_pending_commit().unwrap();
    let commit = rs_mail(&[ANN, BOB], &out.commit_message);
    for m in [&ann, &bob] {
        assert_eq!(committed(receive(m, &commit)), (2, RUSTY.into(), false));
    }
    let welcome = rs_mail(&[CAT], &out.welcome_messages[0]);
    assert_eq!(
        joined(receive(&cat, &welcome)),
        (g.clone(), 2, RUSTY.into())
    );
    let mail = rs_send(&mut rg, 0, &[ANN, BOB, CAT], 4);
    for m in [&ann, &bob, &cat] {
        assert_eq!(delivered(receive(m, &mail)).1, (2, 0));
    }

    // mls-rs commits a remove (bob).
    let bob_index = rg
        .roster()
        .members()
        .into_iter()
        .find(|m| {
            m.signing_identity
                .credential
                .as_basic()
                .unwrap()
                .identifier()
                == BOB.as_bytes()
        })
        .unwrap()
        .index;
    let out = rg
        .commit_builder()
        .remove_member(bob_index)
        .unwrap()
        .build()
        .unwrap();
    rg.apply_pending_commit().unwrap();
    let commit = rs_mail(&[ANN, BOB, CAT], &out.commit_message);
    for m in [&ann, &cat] {
        assert_eq!(committed(receive(m, &commit)), (3, RUSTY.into(), false));
    }
    assert_eq!(committed(receive(&bob, &commit)), (3, RUSTY.into(), true));
    assert_eq!(rs_check_roster(&rg), [ANN, CAT]);

    // Our Commit (ann updates her leaf): mls-rs applies it and reads what follows.
    let update = ann.update(&g).unwrap();
    assert!(!rs_commit(&mut rg, &update));
    assert_eq!(committed(receive(&cat, &update)).0, 4);
    assert_eq!(rs_check_roster(&rg), [ANN, CAT]);
    let sealed = ann
        .seal(&request(ANN, &[CAT, RUSTY], 5), &g, false)
        .unwrap();
    assert_eq!(
        rs_open(&mut rg, &sealed).envelope().group().unwrap().epoch,
        4
    );
    assert_eq!(delivered(receive(&cat, &sealed)).1, (4, 0));

    // ann removes mls-rs; before it reads that Commit, it sends once more (epoch 4):
    // refused by every member that applied the removal.
    let removal = ann.remove(&g, RUSTY).unwrap();
    assert_eq!(committed(receive(&cat, &removal)), (5, ANN.into(), false));
    let late = rs_send(&mut rg, 0, &[ANN, CAT], 6);
    for m in [&ann, &cat] {
        match receive(m, &late) {
            Err(MlsError::SenderRemoved { sender, .. }) => assert_eq!(sender, RUSTY),
            other => panic!("a removed member's message: {other:?}"),
        }
    }
    // mls-rs reads its removal; what it writes after is refused as well.
    assert!(rs_commit(&mut rg, &removal));
    let after = rs_send(&mut rg, 1, &[ANN, CAT], 7);
    for m in [&ann, &cat] {
        let e = receive(m, &after).unwrap_err();
        assert!(matches!(e, MlsError::SenderRemoved { .. }), "{e}");
    }
}

/// mailseal members join an mls-rs group from its Welcome, exchange application
/// messages with it, and commit into it (an add whose Welcome another mailseal member
/// joins from); mls-rs applies our Commit.
#[test]
fn mailseal_members_join_an_mls_rs_group() {
    let (ann, bob) = (member(ANN), member(BOB));
    let (rusty, leaf) = rs_client(Settings::ours());
    let mut rg = rusty
        .create_group(ExtensionList::new(), leaf.clone(), None)
        .unwrap();
    let g = mailseal::mls::group_id_text(rg.group_id());
    let out = rs_add(&mut rg, &ann.key_package(ANN).unwrap());
    rg.apply_pending_commit().unwrap();
    let welcome = rs_mail(&[ANN], &out.welcome_messages[0]);
    assert_eq!(
        joined(receive(&ann, &welcome)),
        (g.clone(), 1, RUSTY.into())
    );
    // The same Welcome again: a duplicate.
    assert!(matches!(
        receive(&ann, &welcome).unwrap(),
        Received::Duplicate { .. }
    ));

    let mail = rs_send(&mut rg, 0, &[ANN], 1);
    assert_eq!(delivered(receive(&ann, &mail)).1, (1, 0));
    let sealed = ann.seal(&request(ANN, &[RUSTY], 2), &g, false).unwrap();
    assert_eq!(
        rs_open(&mut rg, &sealed).envelope().message_id(),
        Some("urn:uuid:group-2".into())
    );

    // ann adds bob: mls-rs applies the Commit, bob joins from ann's Welcome.
    let added = ann
        .add(&g, &[bob.key_package(BOB).unwrap()], auth())
        .unwrap();
    assert!(!rs_commit(&mut rg, &added.commit));
    assert_eq!(rg.current_epoch(), 2);
    assert_eq!(rs_check_roster(&rg), [ANN, BOB]);
    assert_eq!(
        joined(receive(&bob, &added.welcome)),
        (g.clone(), 2, ANN.into())
    );
    let mail = rs_send(&mut rg, 0, &[ANN, BOB], 3);
    for m in [&ann, &bob] {
        assert_eq!(delivered(receive(m, &mail)).1, (2, 0));
    }
    let sealed = bob
        .seal(&request(BOB, &[ANN, RUSTY], 4), &g, false)
        .unwrap();
    assert_eq!(
        rs_open(&mut rg, &sealed)
            .envelope()
            .group()
            .unwrap()
            .generation,
        0
    );
    assert_eq!(delivered(receive(&ann, &sealed)).0, "urn:uuid:group-4");
}

/// An mls-rs KeyPackage of another cipher suite (ChaCha20-Poly1305, and P-256),
/// validly signed and certified, is refused where it arrives, as a KeyPackage mail
/// and at an add, under its own code and as a policy refusal: no group of ours could
/// ever add it. Nothing is applied.
#[test]
fn fail_a_key_package_of_another_cipher_suite() {
    use mailseal::error::Classify;
    let ann = member(ANN);
    let g = ann.create_group(ANN).unwrap();
    for (suite, number) in [
        (CipherSuite::CURVE25519_CHACHA, 3u16),
        (CipherSuite::P256_AES128, 2),
    ] {
        let (rusty, leaf) = rs_client(Settings {
            suite,
            ..Settings::ours()
        });
        let kp = rs_key_package(&rusty, &leaf);
        for result in [
            receive(&ann, &kp).map(|_| ()),
            ann.add(&g, std::slice::from_ref(&kp), auth()).map(|_| ()),
        ] {
            match result {
                Err(e @ MlsError::CipherSuite { .. }) => {
                    assert_eq!(e.code(), "mls.cipher-suite");
                    assert_eq!(e.kind(), mailseal::error::ErrorKind::Policy);
                    let text = e.to_string();
                    assert!(text.contains(RUSTY), "{text}");
                    assert!(text.contains(&format!("0x{number:04x}")), "{text}");
                }
                other => panic!("suite {number}: {other:?}"),
            }
        }
    }
    assert_eq!(ann.members(&g).unwrap().members.len(), 1);
    assert_eq!(ann.members(&g).unwrap().epoch, 0);
    // Of our suite, the same client's KeyPackage is taken.
    let (rusty, leaf) = rs_client(Settings::ours());
    ann.add(&g, &[rs_key_package(&rusty, &leaf)], auth())
        .unwrap();
    assert_eq!(ann.members(&g).unwrap().members.len(), 2);
}

/// Each mls-rs default that a mailseal group does not take is refused with the
/// cause and the setting named, and nothing is applied.
#[test]
fn fail_mls_rs_defaults_are_refused_with_the_setting_named() {
    // A KeyPackage valid for mls-rs' default 365 days.
    let ann = member(ANN);
    let g = ann.create_group(ANN).unwrap();
    let (rusty, leaf) = rs_client(Settings {
        key_package_days: 365,
        ..Settings::ours()
    });
    let kp = rs_key_package(&rusty, &leaf);
    match ann.add(&g, std::slice::from_ref(&kp), auth()) {
        Err(e @ MlsError::KeyPackageLifetime { .. }) => {
            let text = e.to_string();
            assert!(text.contains("365 days"), "{text}");
            assert!(text.contains("key_package_lifetime"), "{text}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(matches!(
        receive(&ann, &kp),
        Err(MlsError::KeyPackageLifetime { days: 365, .. })
    ));
    assert_eq!(ann.members(&g).unwrap().members.len(), 1);

    // No binding in the leaf: the KeyPackage does not authenticate.
    let (rusty, leaf) = rs_client(Settings {
        binding: false,
        ..Settings::ours()
    });
    assert!(matches!(
        ann.add(&g, &[rs_key_package(&rusty, &leaf)], auth()),
        Err(MlsError::Unbound(_))
    ));

    // A Welcome without the ratchet tree.
    let (rusty, leaf) = rs_client(Settings {
        tree_in_welcome: false,
        ..Settings::ours()
    });
    let mut rg = rusty
        .create_group(ExtensionList::new(), leaf, None)
        .unwrap();
    let out = rs_add(&mut rg, &ann.key_package(ANN).unwrap());
    match receive(&ann, &rs_mail(&[ANN], &out.welcome_messages[0])) {
        Err(e @ MlsError::NoRatchetTree) => {
            assert!(e.to_string().contains("with_ratchet_tree_extension"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ann.groups().unwrap(), std::slice::from_ref(&g));

    // Handshake messages in the clear (mls-rs' default): a member that joined our
    // group, then commits as a PublicMessage.
    let (rusty, leaf) = rs_client(Settings {
        encrypt_control_messages: false,
        ..Settings::ours()
    });
    let added = ann
        .add(&g, &[rs_key_package(&rusty, &leaf)], auth())
        .unwrap();
    let (mut rg, _) = rusty
        .join_group(None, &rs_read(&added.welcome), None)
        .unwrap();
    let out = rg.commit_builder().build().unwrap();
    assert_eq!(
        out.commit_message.wire_format(),
        mls_rs::WireFormat::PublicMessage
    );
    match receive(&ann, &rs_mail(&[ANN], &out.commit_message)) {
        Err(e @ MlsError::PlaintextHandshake { .. }) => {
            assert!(e.to_string().contains("encrypt_control_messages"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ann.members(&g).unwrap().epoch, 1);
    rg.clear_pending_commit();
    // Its application messages are encrypted whatever the setting, and still read.
    let mail = rs_send(&mut rg, 0, &[ANN], 9);
    assert_eq!(delivered(receive(&ann, &mail)).1, (1, 0));
}
