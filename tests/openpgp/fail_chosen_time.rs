//! Chosen time (THREATS.md): Mallory sets her signatures' and self-signatures' times.
//! A User ID speaks for its address only if its binding is valid at receipt and was
//! valid when the signature says it was made; a signature dated past receipt plus the
//! skew is refused; a certificate with a User ID bound after the import time is
//! refused at import (src/identity/openpgp.rs). Mallory holds her own keys and
//! certificates, made with Sequoia at times she chooses; Bob's store, into which only
//! the product's import path puts what she publishes, is the only thing she does not
//! control.

use std::io::Write;
use std::time::{Duration, SystemTime};

use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::openpgp::{generate, KeyProfile, OpenPgp};
use mailseal::seal::{OpenError, OpenPolicy, Opened, Opener};
use mailseal::{Classify, ErrorKind};
use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::packet::signature::SignatureBuilder;
use openpgp::packet::UserID;
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::stream::{Encryptor, LiteralWriter, Message, Recipient, Signer};
use openpgp::serialize::SerializeInto;
use openpgp::types::{ReasonForRevocation, SignatureType};

use super::signers::primary_pair;

const BOB: &str = "bob@time.example";
const MALLORY: &str = "mallory@time.example";
/// The address Mallory held once (a role she left) or wants to hold.
const OPS: &str = "ops@time.example";
const DAY: Duration = Duration::from_secs(86_400);

/// Bob's store with his own new key, and his certificate.
fn bob(dir: &std::path::Path) -> (DirectoryStore, Cert) {
    let store = DirectoryStore::open(dir.join("bob")).unwrap();
    let tsk = generate(BOB, None, KeyProfile::Rfc4880).unwrap();
    store.import(&tsk, "generated", false).unwrap();
    (store, Cert::from_bytes(&tsk[..]).unwrap())
}

/// Mallory's key, made ten days before `now` with `<mallory@>` bound then.
fn mallory(now: SystemTime) -> Cert {
    CertBuilder::new()
        .add_userid(format!("<{MALLORY}>"))
        .add_signing_subkey()
        .set_creation_time(now - 10 * DAY)
        .generate()
        .unwrap()
        .0
}

/// `cert` with a self-signature of type `typ` over `<address>` made at `at`.
fn self_sign(cert: Cert, address: &str, typ: SignatureType, at: SystemTime) -> Cert {
    let mut pair = primary_pair(&cert);
    let uid = UserID::from(format!("<{address}>"));
    let mut builder = SignatureBuilder::new(typ)
        .set_signature_creation_time(at)
        .unwrap();
    if typ == SignatureType::CertificationRevocation {
        builder = builder
            .set_reason_for_revocation(ReasonForRevocation::UIDRetired, b"left the team")
            .unwrap();
    }
    let sig = builder
        .sign_userid_binding(&mut pair, cert.primary_key().key(), &uid)
        .unwrap();
    cert.insert_packets(vec![openpgp::Packet::from(uid), sig.into()])
        .unwrap()
        .0
}

fn public(cert: &Cert) -> Vec<u8> {
    cert.clone().strip_secret_key_material().to_vec().unwrap()
}

/// Mallory's certificate with `<ops@>` bound ten days ago and revoked two days ago,
/// imported by Bob after the revocation.
fn mallory_who_left_ops(store: &DirectoryStore, now: SystemTime) -> Cert {
    let cert = mallory(now);
    let cert = self_sign(
        cert,
        OPS,
        SignatureType::PositiveCertification,
        now - 10 * DAY,
    );
    let cert = self_sign(
        cert,
        OPS,
        SignatureType::CertificationRevocation,
        now - 2 * DAY,
    );
    store.import(&public(&cert), "mallory", false).unwrap();
    cert
}

fn request(from: &str) -> Vec<u8> {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "urn:uuid:time-1");
    env.set("correlationId", "corr-t");
    env.set("idempotencyKey", "idem-t");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-t", "role": "ROLE_USER", "parts": [{"text": "rotate the deploy keys"}]}}),
    );
    MailA2aMessage::new(from, &[BOB], env)
        .to_inner_entity(true)
        .unwrap()
}

/// `content` signed by `signer`'s signing subkey with the creation time `signed_at`
/// and encrypted to `to`, in RFC 3156 PGP/MIME from `from`: what Mallory's own tool
/// writes with her clock set as she likes.
fn forge(content: &[u8], to: &Cert, signer: &Cert, signed_at: SystemTime, from: &str) -> Vec<u8> {
    let p = StandardPolicy::new();
    let recipients: Vec<_> = to
        .keys()
        .with_policy(&p, None)
        .supported()
        .for_transport_encryption()
        .map(|ka| Recipient::new(ka.valid_cert().features(), ka.key().key_handle(), ka.key()))
        .collect();
    let pair = signer
        .keys()
        .with_policy(&p, signed_at)
        .secret()
        .for_signing()
        .find(|k| !k.primary())
        .unwrap()
        .key()
        .clone()
        .into_keypair()
        .unwrap();
    let mut binary = Vec::new();
    let message = Message::new(&mut binary);
    let message = Encryptor::for_recipients(message, recipients)
        .build()
        .unwrap();
    let message = Signer::new(message, pair)
        .unwrap()
        .creation_time(signed_at)
        .add_intended_recipient(to)
        .build()
        .unwrap();
    let mut w = LiteralWriter::new(message).build().unwrap();
    w.write_all(content).unwrap();
    w.finalize().unwrap();

    let mut armored =
        openpgp::armor::Writer::new(Vec::new(), openpgp::armor::Kind::Message).unwrap();
    armored.write_all(&binary).unwrap();
    let armored = armored.finalize().unwrap();
    let mut m = format!(
        "From: <{from}>\r\nTo: <{BOB}>\r\nSubject: [...]\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"b\"\r\n\r\n\
--b\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n\
--b\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    for line in String::from_utf8(armored).unwrap().lines() {
        m.extend_from_slice(line.as_bytes());
        m.extend_from_slice(b"\r\n");
    }
    m.extend_from_slice(b"--b--\r\n");
    m
}

/// Bob opens `raw` with his store at his clock, or at `at` (`open --at`).
fn open(store: &DirectoryStore, raw: &[u8], at: Option<SystemTime>) -> Result<Opened, OpenError> {
    let mut policy = OpenPolicy::default();
    policy.validation_time = at.map(time::OffsetDateTime::from);
    OpenPgp::new(store).open(raw, &policy)
}

/// The From of an opened message.
fn from(opened: &Opened) -> &str {
    &opened.message.headers.from.as_ref().unwrap().address
}

/// Bob's listing of his store, as `key list` shows it.
fn listed(store: &DirectoryStore) -> String {
    format!("{:?}", store.list().unwrap())
}

/// Mallory's User ID for ops@ was revoked two days ago, and Bob holds the revocation.
/// She signs as ops@ with a signature dated three days ago, when ops@ was still hers:
/// Sequoia, judging at the signature's time, would give the signature ops@; judged at
/// receipt too, it speaks only for mallory@, and the message from ops@ is refused.
#[test]
fn fail_chosen_time_backdated_signature_after_uid_revocation() {
    let dir = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    let (store, bob_cert) = bob(dir.path());
    let mallory = mallory_who_left_ops(&store, now);

    let mail = forge(&request(OPS), &bob_cert, &mallory, now - 3 * DAY, OPS);
    let err = open(&store, &mail, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Policy, "{err}");
    assert!(err.to_string().contains(OPS), "{err}");

    // The same signature dated now is refused too (the binding is revoked at both).
    let mail = forge(&request(OPS), &bob_cert, &mallory, now, OPS);
    let err = open(&store, &mail, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Policy, "{err}");
    assert!(err.to_string().contains(OPS), "{err}");
}

/// Control: what Mallory may say still opens. Her own address, signed now; and ops@,
/// judged with `--at` four days ago (before the revocation) for a signature made five
/// days ago, when the User ID was live at both times. The same profile object (and
/// its parsed certificates) then judges at the clock again and refuses it.
#[test]
fn chosen_time_controls_own_address_now_and_a_fixed_validation_time() {
    let dir = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    let (store, bob_cert) = bob(dir.path());
    let mallory = mallory_who_left_ops(&store, now);

    let mail = forge(&request(MALLORY), &bob_cert, &mallory, now, MALLORY);
    let opened = open(&store, &mail, None).unwrap();
    assert_eq!(from(&opened), MALLORY);

    let mail = forge(&request(OPS), &bob_cert, &mallory, now - 5 * DAY, OPS);
    let profile = OpenPgp::new(&store);
    let mut then = OpenPolicy::default();
    then.validation_time = Some((now - 4 * DAY).into());
    let opened = profile.open(&mail, &then).unwrap();
    assert_eq!(from(&opened), OPS);
    let err = profile.open(&mail, &OpenPolicy::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Policy, "{err}");
    assert!(err.to_string().contains(OPS), "{err}");
}

/// Mallory dates her signature ten minutes ahead (past the five-minute skew; Sequoia's
/// own tolerance would accept it): refused, saying why. And with a validation time
/// fixed an hour before an honest signature (`open --at`), that signature is dated
/// after receipt: refused the same way.
#[test]
fn fail_chosen_time_signature_dated_past_receipt_and_skew() {
    let dir = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    let (store, bob_cert) = bob(dir.path());
    let mallory = mallory_who_left_ops(&store, now);

    let mail = forge(
        &request(MALLORY),
        &bob_cert,
        &mallory,
        now + Duration::from_secs(600),
        MALLORY,
    );
    let err = open(&store, &mail, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authentication, "{err}");
    assert!(
        err.to_string().contains("after the time of receipt")
            && err.to_string().contains("clock skew"),
        "{err}"
    );

    let mail = forge(&request(MALLORY), &bob_cert, &mallory, now, MALLORY);
    let err = open(&store, &mail, Some(now - Duration::from_secs(3600))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authentication, "{err}");
    assert!(
        err.to_string().contains("after the time of receipt"),
        "{err}"
    );
    // Within the skew, it opens.
    let opened = open(&store, &mail, Some(now - Duration::from_secs(120))).unwrap();
    assert_eq!(from(&opened), MALLORY);
}

/// Mallory's certificate binds ops@ a minute (or a day) in the future: at import,
/// Bob's listing would show only mallory@, and a minute later the certificate would
/// sign as ops@. The import is refused, naming the User ID; Bob's store stays empty
/// of it. The same certificate without the future binding imports.
#[test]
fn fail_chosen_time_future_dated_user_id_through_plain_import() {
    let dir = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    let (store, _) = bob(dir.path());
    for ahead in [Duration::from_secs(60), DAY] {
        let cert = self_sign(
            mallory(now),
            OPS,
            SignatureType::PositiveCertification,
            now + ahead,
        );
        let err = store.import(&public(&cert), "mallory", false).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Policy, "{err}");
        let text = err.to_string();
        assert!(text.contains(OPS), "{text}");
        assert!(text.contains("after the time of import"), "{text}");
        assert!(!listed(&store).contains(MALLORY), "{}", listed(&store));
    }
    let honest = mallory(now);
    store.import(&public(&honest), "mallory", false).unwrap();
    assert!(listed(&store).contains(MALLORY));
    assert!(!listed(&store).contains(OPS));
}
