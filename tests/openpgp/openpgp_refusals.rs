//! The OpenPGP profile's refusals, each a case: changed bytes anywhere (exit 4, nothing
//! released), a signer whose User ID is not the From or a message re-encrypted to a
//! third party (exit 6), SED without integrity and unsigned content (exit 4), an
//! a message not for us (exit 5), an unknown signer or a revoked signing key (exit 4).
//! Messages the tests forge are made with Sequoia directly, as an attacker would.

use crate::common;

use std::io::Write;

use common::{armored_block, Gpg};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::openpgp::{generate, KeyProfile, OpenPgp};
use mailseal::seal::{OpenError, OpenPolicy, Opened, Opener, SealOptions, Sealer};
use mailseal::{Classify, Profile};
use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::stream::{Encryptor, LiteralWriter, Message, Recipient, Signer};
use openpgp::serialize::SerializeInto;

/// A store in `dir/name` holding a new key for `email` (v4 or v6).
fn identity(
    dir: &std::path::Path,
    name: &str,
    email: &str,
    profile: KeyProfile,
) -> (DirectoryStore, Cert) {
    let store = DirectoryStore::open(dir.join(name)).unwrap();
    let tsk = generate(email, None, profile).unwrap();
    store.import(&tsk, "generated", false).unwrap();
    (store, Cert::from_bytes(&tsk[..]).unwrap())
}

fn give(store: &DirectoryStore, cert: &Cert) {
    let public = cert.clone().strip_secret_key_material().to_vec().unwrap();
    store.import(&public, "peer", false).unwrap();
}

fn request(from: &str, to: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "urn:uuid:refuse-1");
    env.set("correlationId", "corr-r");
    env.set("idempotencyKey", "idem-r");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-r", "role": "ROLE_USER", "parts": [{"text": "transfer 100 credits"}]}}),
    );
    MailA2aMessage::new(from, &[to], env)
}

struct World {
    _dir: tempfile::TempDir,
    alice: DirectoryStore,
    bob: DirectoryStore,
    carol: DirectoryStore,
    bob_cert: Cert,
    carol_cert: Cert,
}

/// Alice, Bob and Carol, each knowing the others' certificates.
fn world(profile: KeyProfile) -> World {
    let dir = tempfile::tempdir().unwrap();
    let (alice, alice_cert) = identity(dir.path(), "alice", "alice@pgp.example", profile);
    let (bob, bob_cert) = identity(dir.path(), "bob", "bob@pgp.example", profile);
    let (carol, carol_cert) = identity(dir.path(), "carol", "carol@pgp.example", profile);
    for (s, certs) in [
        (&alice, [&bob_cert, &carol_cert]),
        (&bob, [&alice_cert, &carol_cert]),
        (&carol, [&alice_cert, &bob_cert]),
    ] {
        for c in certs {
            give(s, c);
        }
    }
    World {
        _dir: dir,
        alice,
        bob,
        carol,
        bob_cert,
        carol_cert,
    }
}

fn seal(store: &DirectoryStore, msg: &MailA2aMessage, sign_only: bool) -> Vec<u8> {
    let mut opts = SealOptions::new(Profile::OpenPgp);
    opts.sign_only = sign_only;
    OpenPgp::new(store).seal(msg, &opts).unwrap()
}

fn open(store: &DirectoryStore, raw: &[u8]) -> Result<Opened, OpenError> {
    OpenPgp::new(store).open(raw, &OpenPolicy::default())
}

/// [`open`] by the sender of `raw`, reading its own copy (by default a reflection).
fn open_own_copy(store: &DirectoryStore, raw: &[u8]) -> Result<Opened, OpenError> {
    let mut policy = OpenPolicy::default();
    policy.own_copy = true;
    OpenPgp::new(store).open(raw, &policy)
}

fn kind(r: Result<Opened, OpenError>) -> Option<mailseal::ErrorKind> {
    r.err().map(|e| e.kind())
}

/// The binary OpenPGP message inside a sealed PGP/MIME message.
fn binary_message(sealed: &[u8]) -> Vec<u8> {
    let armored = armored_block(sealed, "MESSAGE");
    let mut reader = openpgp::armor::Reader::from_bytes(&armored, None);
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut reader, &mut out).unwrap();
    out
}

fn armor(binary: &[u8]) -> Vec<u8> {
    let mut w = openpgp::armor::Writer::new(Vec::new(), openpgp::armor::Kind::Message).unwrap();
    w.write_all(binary).unwrap();
    w.finalize().unwrap()
}

/// An RFC 3156 encrypted message from `from` to `to` around `binary`.
fn pgp_mime(from: &str, to: &str, binary: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "From: <{from}>\r\nTo: <{to}>\r\nSubject: [...]\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"b\"\r\n\r\n\
--b\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n\
--b\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    for line in String::from_utf8(armor(binary)).unwrap().lines() {
        m.extend_from_slice(line.as_bytes());
        m.extend_from_slice(b"\r\n");
    }
    m.extend_from_slice(b"--b--\r\n");
    m
}

/// `content` encrypted to `to` (and signed by `signer` with intended recipients when
/// given), binary: what an attacker's own OpenPGP tool writes.
fn forge(content: &[u8], to: &[&Cert], signer: Option<&Cert>, literal: bool) -> Vec<u8> {
    let p = StandardPolicy::new();
    let mut out = Vec::new();
    let recipients: Vec<_> = to
        .iter()
        .flat_map(|c| {
            c.keys()
                .with_policy(&p, None)
                .supported()
                .for_transport_encryption()
                .map(|ka| {
                    Recipient::new(ka.valid_cert().features(), ka.key().key_handle(), ka.key())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let message = Message::new(&mut out);
    let mut message = Encryptor::for_recipients(message, recipients)
        .build()
        .unwrap();
    if let Some(s) = signer {
        let pair = s
            .keys()
            .with_policy(&p, None)
            .secret()
            .for_signing()
            .next()
            .unwrap()
            .key()
            .clone()
            .into_keypair()
            .unwrap();
        let mut signing = Signer::new(message, pair).unwrap();
        for c in to {
            signing = signing.add_intended_recipient(c);
        }
        message = signing.build().unwrap();
    }
    if literal {
        let mut w = LiteralWriter::new(message).build().unwrap();
        w.write_all(content).unwrap();
        w.finalize().unwrap();
    } else {
        message.write_all(content).unwrap();
        message.finalize().unwrap();
    }
    out
}

#[test]
fn ok_alice_to_bob_v4_and_v6_and_the_sender_reads_her_copy() {
    for profile in [KeyProfile::Rfc4880, KeyProfile::Rfc9580] {
        let w = world(profile);
        let msg = request("alice@pgp.example", "bob@pgp.example");
        let sealed = seal(&w.alice, &msg, false);
        // Alice reads her copy by asking for it (by default her own message to Bob,
        // back in her hands, is a reflection).
        assert!(open(&w.alice, &sealed).is_err());
        for opened in [open(&w.bob, &sealed), open_own_copy(&w.alice, &sealed)] {
            let opened = opened.unwrap();
            assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());
            assert_eq!(
                opened.verdict.protection,
                mailseal::Protection::SignedEncrypted
            );
        }
        // v6 keys advertise SEIPDv2: the message is AEAD (packet tag 20), v4 is SEIPDv1.
        let binary = binary_message(&sealed);
        let tags: Vec<u8> = openpgp::PacketPile::from_bytes(&binary)
            .unwrap()
            .children()
            .map(|p| u8::from(p.tag()))
            .collect();
        assert!(tags.contains(&18), "{profile:?}: {tags:?}");
        let version = openpgp::PacketPile::from_bytes(&binary)
            .unwrap()
            .children()
            .find_map(|p| match p {
                openpgp::Packet::SEIP(s) => Some(s.version()),
                _ => None,
            })
            .unwrap();
        assert_eq!(version, if profile == KeyProfile::Rfc9580 { 2 } else { 1 });
        // Carol is not a recipient.
        assert_eq!(
            kind(open(&w.carol, &sealed)),
            Some(mailseal::ErrorKind::NoUsableKey)
        );
    }
}

#[test]
fn fail_every_flipped_byte_of_the_openpgp_message_is_refused() {
    for profile in [KeyProfile::Rfc4880, KeyProfile::Rfc9580] {
        let w = world(profile);
        let msg = request("alice@pgp.example", "bob@pgp.example");
        let sealed = seal(&w.alice, &msg, false);
        let binary = binary_message(&sealed);
        let mut unnoticed = Vec::new();
        let mut wrong_code = Vec::new();
        let mut i = 0;
        while i < binary.len() {
            let mut b = binary.clone();
            b[i] ^= 0x01;
            let m = pgp_mime("alice@pgp.example", "bob@pgp.example", &b);
            let results = [open(&w.bob, &m), open_own_copy(&w.alice, &m)];
            if results.iter().all(Result::is_ok) {
                unnoticed.push(i);
            }
            for r in results {
                match r {
                    Ok(o) => assert_eq!(o.message.envelope_bytes(), msg.envelope_bytes()),
                    Err(e)
                        if !matches!(
                            e.kind(),
                            mailseal::ErrorKind::Authentication
                                | mailseal::ErrorKind::NoUsableKey
                                | mailseal::ErrorKind::Malformed
                        ) =>
                    {
                        wrong_code.push(format!("{i}: {e}"))
                    }
                    Err(_) => {}
                }
            }
            // Every byte of the session-key packets and the first chunk, then a sample.
            i += if i < 400 || i + 64 > binary.len() {
                1
            } else {
                37
            };
        }
        assert!(
            unnoticed.is_empty(),
            "{profile:?}: flips nobody noticed: {unnoticed:?}"
        );
        assert!(wrong_code.is_empty(), "{profile:?}: {wrong_code:?}");
    }
}

#[test]
fn fail_a_changed_armor_character_or_signed_part_gives_exit_4_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let w = world(KeyProfile::Rfc4880);
    let msg = request("alice@pgp.example", "bob@pgp.example");
    let bob_store = w.bob.root().display().to_string();
    for sign_only in [false, true] {
        let sealed = seal(&w.alice, &msg, sign_only);
        let marker = if sign_only { "SIGNATURE" } else { "MESSAGE" };
        let start =
            memchr::memmem::find(&sealed, format!("-----BEGIN PGP {marker}").as_bytes()).unwrap();
        // Sampled positions in the signed entity (signed only), or in the armor past
        // the session-key packets (a change to Alice's own PKESK is Alice's to notice:
        // see the flip test above, which opens as every recipient).
        let from = if sign_only { 600 } else { start + 400 };
        // Signed only: the signed entity ends before the signature part's delimiter
        // (that part's own headers are not signed, and need not be).
        let until = if sign_only {
            memchr::memmem::find(&sealed, b"Content-Type: application/pgp-signature").unwrap() - 80
        } else {
            sealed.len() - 40
        };
        let mut at = from;
        let mut n = 0;
        while at < until && n < 25 {
            let mut m = sealed.clone();
            m[at] = match m[at] {
                b'A' => b'B',
                b'\r' | b'\n' | b'-' | b'=' => {
                    at += 1;
                    continue;
                }
                _ => b'A',
            };
            let file = dir.path().join("m.eml");
            std::fs::write(&file, &m).unwrap();
            let out = common::run(
                &[
                    "open",
                    "--store",
                    &bob_store,
                    "--in",
                    file.to_str().unwrap(),
                ],
                b"",
            );
            assert_eq!(
                out.status.code(),
                Some(4),
                "sign_only={sign_only} at {at} ({:?}): {}",
                String::from_utf8_lossy(&sealed[at.saturating_sub(20)..at + 5]),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.stdout.is_empty());
            at += 97;
            n += 1;
        }
        assert!(n >= 5);
    }
}

#[test]
fn fail_signer_whose_user_id_is_not_the_from_gives_exit_6() {
    let w = world(KeyProfile::Rfc4880);
    // Carol signs (a good signature, her key) a message that claims to be from Alice.
    let msg = request("alice@pgp.example", "bob@pgp.example");
    let entity = msg.to_inner_entity(true).unwrap();
    let forged = forge(&entity, &[&w.bob_cert], Some(&w.carol_cert), true);
    let mail = pgp_mime("alice@pgp.example", "bob@pgp.example", &forged);
    let err = open(&w.bob, &mail).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Policy, "{err}");
    assert!(err.to_string().contains("alice@pgp.example"), "{err}");
}

#[test]
fn fail_signed_message_re_encrypted_to_a_third_party_gives_exit_6() {
    let w = world(KeyProfile::Rfc4880);
    let msg = request("alice@pgp.example", "bob@pgp.example");
    let sealed = seal(&w.alice, &msg, false);
    // Bob strips the encryption (gpg --unwrap keeps the signed message) and
    // re-encrypts Alice's signed message to Carol.
    let gpg = Gpg::new();
    let bob_secret = std::fs::read_dir(w.bob.root().join("openpgp-keys"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .next()
        .unwrap();
    gpg.run(&["--import"], &bob_secret);
    let signed = gpg
        .run(
            &["--decrypt", "--unwrap"],
            &armored_block(&sealed, "MESSAGE"),
        )
        .stdout;
    assert!(!signed.is_empty());
    let forwarded = forge(&signed, &[&w.carol_cert], None, false);
    let mail = pgp_mime("alice@pgp.example", "bob@pgp.example", &forwarded);
    let err = open(&w.carol, &mail).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Policy, "{err}");
    assert!(err.to_string().contains("intended recipient"), "{err}");
    // The same bytes re-encrypted to Bob himself are fine: he is an intended recipient.
    let back = forge(&signed, &[&w.bob_cert], None, false);
    let opened = open(
        &w.bob,
        &pgp_mime("alice@pgp.example", "bob@pgp.example", &back),
    )
    .unwrap();
    assert_eq!(opened.message.envelope_bytes(), msg.envelope_bytes());
}

#[test]
fn fail_sed_without_integrity_protection_is_refused() {
    let w = world(KeyProfile::Rfc4880);
    let msg = request("alice@pgp.example", "bob@pgp.example");
    let mut binary = binary_message(&seal(&w.alice, &msg, false));
    // Walk the packets to the SEIPD (new-format tag 18, header 0xD2) and relabel it
    // SED (tag 9, 0xC9): the encrypted bytes without their integrity protection.
    let mut at = 0;
    loop {
        let header = binary[at];
        assert_eq!(header & 0xC0, 0xC0, "new-format packets");
        if header == 0xD2 {
            break;
        }
        let (len, skip) = match binary[at + 1] {
            l @ 0..=191 => (l as usize, 1),
            l @ 192..=223 => (
                (((l as usize) - 192) << 8) + binary[at + 2] as usize + 192,
                2,
            ),
            255 => (
                u32::from_be_bytes(binary[at + 2..at + 6].try_into().unwrap()) as usize,
                5,
            ),
            _ => panic!("partial length before the encrypted data"),
        };
        at += 1 + skip + len;
    }
    binary[at] = 0xC9;
    let mail = pgp_mime("alice@pgp.example", "bob@pgp.example", &binary);
    let err = open(&w.bob, &mail).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
    let text = err.to_string();
    assert!(text.contains("SED") || text.contains("integrity"), "{text}");
}

#[test]
fn fail_encrypted_but_unsigned_content_is_refused() {
    let w = world(KeyProfile::Rfc4880);
    let msg = request("alice@pgp.example", "bob@pgp.example");
    let entity = msg.to_inner_entity(true).unwrap();
    let unsigned = forge(&entity, &[&w.bob_cert], None, true);
    let err = open(
        &w.bob,
        &pgp_mime("alice@pgp.example", "bob@pgp.example", &unsigned),
    )
    .unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
    assert!(err.to_string().contains("not signed"), "{err}");
}

#[test]
fn fail_unknown_signer_gives_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let w = world(KeyProfile::Rfc4880);
    // Dave knows no certificate but his own; Alice knows Dave's.
    let (dave, dave_cert) = identity(dir.path(), "dave", "dave@pgp.example", KeyProfile::Rfc4880);
    give(&w.alice, &dave_cert);
    let msg = request("alice@pgp.example", "dave@pgp.example");
    let sealed = seal(&w.alice, &msg, false);
    let err = open(&dave, &sealed).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
    // Signed only, the same.
    let err = open(&dave, &seal(&w.alice, &msg, true)).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
}

#[test]
fn fail_signature_by_a_revoked_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (erin, erin_cert) = identity(dir.path(), "erin", "erin@pgp.example", KeyProfile::Rfc4880);
    let (frank, frank_cert) = identity(
        dir.path(),
        "frank",
        "frank@pgp.example",
        KeyProfile::Rfc4880,
    );
    give(&frank, &erin_cert);
    give(&erin, &frank_cert);
    let msg = request("erin@pgp.example", "frank@pgp.example");
    let sealed = seal(&erin, &msg, false);
    assert!(open(&frank, &sealed).is_ok());
    // Erin's key is compromised: she revokes it, and Frank learns the revocation.
    let fpr = erin_cert.fingerprint().to_hex().to_ascii_lowercase();
    let tsk = Cert::from_bytes(&erin.openpgp_secret_key(&fpr).unwrap().unwrap()[..]).unwrap();
    let mut signer = tsk
        .primary_key()
        .key()
        .clone()
        .parts_into_secret()
        .unwrap()
        .into_keypair()
        .unwrap();
    let revocation = tsk
        .revoke(
            &mut signer,
            openpgp::types::ReasonForRevocation::KeyCompromised,
            b"key leaked",
        )
        .unwrap();
    let (revoked, _) = tsk.insert_packets(revocation).unwrap();
    give(&frank, &revoked);
    let err = open(&frank, &sealed).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Authentication, "{err}");
}

#[test]
fn fail_fuzz_crash_reproducers_are_refused_without_a_panic() {
    // The openpgp_open target's store: Alice's draft-bre secret key, Bob's certificate.
    let dir = tempfile::tempdir().unwrap();
    let store = DirectoryStore::open(dir.path().join("s")).unwrap();
    let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/keys-fixtures/openpgp/");
    for f in [
        "alice@openpgp.example.sec.asc",
        "bob@openpgp.example.pub.asc",
    ] {
        store
            .import(&std::fs::read(format!("{fx}{f}")).unwrap(), f, false)
            .unwrap();
    }
    let pgp = OpenPgp::new(&store);
    let policy = OpenPolicy::default();
    let crashes = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cases/crashes/");
    let mut n = 0;
    for e in std::fs::read_dir(crashes).unwrap() {
        let path = e.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("openpgp_")
        {
            continue;
        }
        let raw = std::fs::read(&path).unwrap();
        // Each is refused (the Sequoia panic becomes an error), and nothing is released.
        let err = pgp.open(&raw, &policy).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                mailseal::ErrorKind::Malformed
                    | mailseal::ErrorKind::Authentication
                    | mailseal::ErrorKind::NoUsableKey
            ),
            "{path:?}: {err}"
        );
        assert!(pgp.decrypt_message(&raw, &policy).is_err());
        assert!(pgp.verify_inline(&raw, &policy).is_err());
        n += 1;
    }
    assert!(n >= 1);
}

/// `content` as literal data in a compressed data packet (deflate), signed by Alice
/// (her real key, which Bob holds) and encrypted to Bob, as GnuPG writes it.
fn compressed_from_alice(w: &World, content: &[u8]) -> Vec<u8> {
    let p = StandardPolicy::new();
    let alice_tsk = {
        let view = w.alice.list().unwrap();
        let own = view.iter().find(|e| e.has_private_key).unwrap();
        Cert::from_bytes(
            &w.alice
                .openpgp_secret_key(&own.fingerprint)
                .unwrap()
                .unwrap()[..],
        )
        .unwrap()
    };
    let pair = alice_tsk
        .keys()
        .with_policy(&p, None)
        .secret()
        .for_signing()
        .next()
        .unwrap()
        .key()
        .clone()
        .into_keypair()
        .unwrap();
    let keys: Vec<_> = w
        .bob_cert
        .keys()
        .with_policy(&p, None)
        .for_transport_encryption()
        .map(|ka| Recipient::new(ka.valid_cert().features(), ka.key().key_handle(), ka.key()))
        .collect();
    let mut out = Vec::new();
    let m = Message::new(&mut out);
    let m = Encryptor::for_recipients(m, keys).build().unwrap();
    let m = Signer::new(m, pair)
        .unwrap()
        .add_intended_recipient(&w.bob_cert)
        .build()
        .unwrap();
    let m = openpgp::serialize::stream::Compressor::new(m)
        .algo(openpgp::types::CompressionAlgorithm::Zip)
        .build()
        .unwrap();
    let mut lit = LiteralWriter::new(m).build().unwrap();
    lit.write_all(content).unwrap();
    lit.finalize().unwrap();
    out
}

#[test]
fn fail_content_inflating_past_the_limit_is_refused_not_truncated() {
    let w = world(KeyProfile::Rfc4880);
    // Alice's real signature over 3 MiB of zeros, deflated to a few KiB, encrypted to Bob:
    // with a 1 MiB decoded limit the content must be refused, whole.
    let out = compressed_from_alice(&w, &vec![0u8; 3 << 20]);
    assert!(out.len() < 64 * 1024, "{} bytes", out.len());
    let mail = pgp_mime("alice@pgp.example", "bob@pgp.example", &out);
    let policy = {
        let mut p = OpenPolicy::default();
        p.limits = mailseal::Limits {
            max_decoded_bytes: 1 << 20,
            ..Default::default()
        };
        p
    };
    let err = OpenPgp::new(&w.bob).open(&mail, &policy).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Malformed, "{err}");
    assert!(err.to_string().contains("exceed"), "{err}");
}

/// Issue #58: compressed content may inflate to `Limits::inflation_ratio` times the
/// OpenPGP message, or `inflation_floor` whatever its ratio (here 256 KiB, to keep
/// the messages small; 8 MiB by default). Alice's genuine messages: one that
/// compresses a hundred times opens under the floor, one a little past it is refused
/// with its reason (the signature, at the end, is not reached), and one above the
/// floor that compresses twofold opens.
#[test]
fn ok_and_fail_compressed_content_opens_within_its_inflation_budget() {
    let w = world(KeyProfile::Rfc4880);
    let mut policy = OpenPolicy::default();
    policy.limits = mailseal::Limits {
        inflation_floor: 256 << 10,
        ..Default::default()
    };
    // An inner entity of about `bytes`, its text part `text` repeated.
    let entity = |text: &str, bytes: usize| -> Vec<u8> {
        let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "urn:uuid:deflated");
        env.set("correlationId", "corr-d");
        env.set("idempotencyKey", "idem-d");
        env.set(
            "payload",
            &serde_json::json!({"message": {"messageId": "m-d", "role": "ROLE_USER",
                "parts": [{"text": text.repeat(bytes / text.len())}]}}),
        );
        MailA2aMessage::new("alice@pgp.example", &["bob@pgp.example"], env)
            .to_inner_entity(true)
            .unwrap()
    };
    let open = |content: &[u8]| {
        let binary = compressed_from_alice(&w, content);
        let mail = pgp_mime("alice@pgp.example", "bob@pgp.example", &binary);
        (binary.len(), OpenPgp::new(&w.bob).open(&mail, &policy))
    };
    // Under the floor, a hundredfold: opens.
    let small = entity("transfer 100 credits. ", 200 << 10);
    let (size, opened) = open(&small);
    assert!(small.len() > 100 * size, "{} from {size}", small.len());
    opened.unwrap();
    // Past the floor, and past four times its size: refused, with its reason.
    let (_, refused) = open(&entity("transfer 100 credits. ", 300 << 10));
    let err = refused.unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Malformed, "{err}");
    assert_eq!(err.code(), "message.decoded-too-large", "{err}");
    assert!(
        err.to_string().contains(&format!(
            "compressed content inflates past {} bytes: at most 4 times its own size",
            256 << 10
        )),
        "{err}"
    );
    // Hexadecimal digits (four bits a byte) compress about twofold: past the floor,
    // within four times the message, opens.
    let mut digits = String::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while digits.len() < 600 << 10 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        digits.push_str(&format!("{x:016x}"));
    }
    let large = entity(&digits, digits.len());
    let (size, opened) = open(&large);
    assert!(
        large.len() > (256 << 10) && large.len() < 4 * size,
        "{} from {size}",
        large.len()
    );
    opened.unwrap();
}

/// Issue #17 (bounded work before authentication): anyone can encrypt to Bob, and
/// inside the encryption Sequoia's grammar check costs the square of the number of
/// packets. Mallory's message of five thousand marker packets inside the encryption
/// is refused by its count, before any signature is looked at.
#[test]
fn fail_thousands_of_packets_inside_the_encryption() {
    let w = world(KeyProfile::Rfc4880);
    let mut content: Vec<u8> = std::iter::repeat_n([0xCAu8, 3, b'P', b'G', b'P'], 5000)
        .flatten()
        .collect();
    // Then a literal data packet (tag 11) with a few bytes.
    content.extend([0xCB, 8, b'b', 0, 0, 0, 0, 0, b'h', b'i']);
    let binary = forge(&content, &[&w.bob_cert], None, false);
    let raw = pgp_mime("alice@pgp.example", "bob@pgp.example", &binary);
    let err = open(&w.bob, &raw).unwrap_err();
    assert_eq!(err.kind(), mailseal::ErrorKind::Malformed, "{err}");
    assert!(err.to_string().contains("more than 1024 packets"), "{err}");
}
