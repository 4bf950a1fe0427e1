//! Opening in the input's own buffer (`Opener::open_owned`, `Receiver::receive_owned`,
//! what `mailseal open` does): the base64 body is decoded and the CMS decrypted where
//! the message lies, and the JSON becomes the envelope's text. It must decide exactly as
//! opening the borrowed message does, on good mail and on damaged mail.

use crate::common;

use common::fixture;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::smime::Smime;
use mailseal::{OpenPolicy, Opener, Profile, Receiver, SealOptions, Sealer};

fn store(dir: &std::path::Path, name: &str, files: &[&str]) -> DirectoryStore {
    let s = DirectoryStore::open(dir.join(name)).unwrap();
    for f in files {
        let bytes = std::fs::read(fixture(&format!("rfc9216/{f}"))).unwrap();
        s.import(&bytes, f, *f == "ca.rsa.crt").unwrap();
    }
    s
}

fn message(text_len: usize, id: &str) -> MailA2aMessage {
    let mut env = common::env(common::request());
    env.set("messageId", &id);
    let text: String = "in place \u{e9} ".chars().cycle().take(text_len).collect();
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": text}]}}),
    );
    MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env)
}

fn parties(dir: &std::path::Path) -> (DirectoryStore, DirectoryStore) {
    let alice = store(
        dir,
        "alice",
        &[
            "alice.sign.crt",
            "alice.sign.key",
            "alice.encrypt.crt",
            "alice.encrypt.key",
            "bob.encrypt.crt",
        ],
    );
    let bob = store(
        dir,
        "bob",
        &[
            "bob.encrypt.crt",
            "bob.encrypt.key",
            "alice.sign.crt",
            "ca.rsa.crt",
        ],
    );
    (alice, bob)
}

#[test]
fn open_owned_reads_what_open_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = parties(dir.path());
    let policy = OpenPolicy::default();
    for (len, binary_inside, sign_only) in [
        (100, true, false),
        (300_000, true, false),
        // A recipient that cannot read binary inner parts: the JSON is base64 inside.
        (300_000, false, false),
        // Signed only: nothing to decode in place, the borrowed path is taken.
        (300_000, true, true),
    ] {
        let msg = message(len, "in-place-1");
        let mut opts = SealOptions::new(Profile::Smime);
        opts.binary_inside = binary_inside;
        opts.sign_only = sign_only;
        let sealed = Smime::new(&alice).seal(&msg, &opts).unwrap();
        let borrowed = Smime::new(&bob).open(&sealed, &policy).unwrap();
        let owned = Smime::new(&bob)
            .open_owned(sealed.clone(), &policy)
            .unwrap();
        assert_eq!(
            owned.message, borrowed.message,
            "{len} {binary_inside} {sign_only}"
        );
        assert_eq!(owned.verdict, borrowed.verdict);
        assert_eq!(owned.message.envelope(), msg.envelope());
        assert_eq!(owned.message.envelope_bytes(), msg.envelope_bytes());
    }
}

#[test]
fn fail_damaged_mail_is_refused_alike_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = parties(dir.path());
    let policy = OpenPolicy::default();
    let sealed = Smime::new(&alice)
        .seal(
            &message(5_000, "in-place-2"),
            &SealOptions::new(Profile::Smime),
        )
        .unwrap();
    let body = memchr::memmem::find(&sealed, b"\r\n\r\n").unwrap() + 4;
    let mut damaged: Vec<(String, Vec<u8>)> = Vec::new();
    // A base64 character that is not one, at the start, middle and end of the body.
    for at in [body, (body + sealed.len()) / 2, sealed.len() - 5] {
        let mut m = sealed.clone();
        m[at] = b'!';
        damaged.push((format!("'!' at {at}"), m));
    }
    // One ciphertext bit flipped (a valid base64 letter for another).
    let mut m = sealed.clone();
    let mid = (body + sealed.len()) / 2;
    m[mid] = if m[mid] == b'A' { b'B' } else { b'A' };
    damaged.push(("a flipped letter".into(), m));
    // Cut short, padding in the middle, white space inside a line (allowed).
    damaged.push(("cut".into(), sealed[..sealed.len() - 200].to_vec()));
    let mut m = sealed.clone();
    m[body + 8] = b'=';
    damaged.push(("padding inside".into(), m));
    for (what, m) in &damaged {
        let borrowed = Smime::new(&bob).open(m, &policy);
        let owned = Smime::new(&bob).open_owned(m.clone(), &policy);
        assert!(borrowed.is_err(), "{what}: opened");
        assert!(owned.is_err(), "{what}: opened in place");
        assert_eq!(
            borrowed.unwrap_err().to_string(),
            owned.unwrap_err().to_string(),
            "{what}"
        );
    }
    // White space inside the base64 is allowed, in both.
    let mut spaced = sealed[..body + 10].to_vec();
    spaced.extend_from_slice(b" \t");
    spaced.extend_from_slice(&sealed[body + 10..]);
    let borrowed = Smime::new(&bob).open(&spaced, &policy).unwrap();
    let owned = Smime::new(&bob).open_owned(spaced, &policy).unwrap();
    assert_eq!(owned.message, borrowed.message);
}

#[test]
fn receiver_receive_owned_delivers_once() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = parties(dir.path());
    let sealed = Smime::new(&alice)
        .seal(
            &message(2_000, "in-place-3"),
            &SealOptions::new(Profile::Smime),
        )
        .unwrap();
    let mut receiver = Receiver::builder(&bob).build();
    let incoming = receiver.receive_owned(sealed.clone(), "a").unwrap();
    assert_eq!(incoming.outcome().word(), "deliver");
    incoming.commit().unwrap();
    // The same message again, borrowed or owned: a duplicate.
    let again = receiver.receive(&sealed).unwrap();
    assert_eq!(again.outcome().word(), "duplicate");
    drop(again);
    let again = receiver.receive_owned(sealed, "b").unwrap();
    assert_eq!(again.outcome().word(), "duplicate");
    // verify_owned checks without recording.
    let fresh = Smime::new(&alice)
        .seal(
            &message(2_000, "in-place-4"),
            &SealOptions::new(Profile::Smime),
        )
        .unwrap();
    drop(again);
    assert_eq!(
        receiver.verify_owned(fresh.clone()).unwrap().word(),
        "deliver"
    );
    assert_eq!(
        receiver.receive(&fresh).unwrap().outcome().word(),
        "deliver"
    );
}

/// The `smime_open` fuzzer's finding (`tests/cases/crashes/smime_open-*`), against the
/// fuzz target's store: opening in place decides as opening borrowed does.
#[test]
fn fuzz_findings_open_in_place_as_borrowed() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        "alice.sign.crt",
        "carlos.sign.crt",
        "bob.encrypt.crt",
        "bob.encrypt.key",
        "dana.encrypt.crt",
        "dana.encrypt.key",
    ];
    let s = store(dir.path(), "fuzz", &files);
    for ca in ["ca.rsa.crt", "ca.25519.crt"] {
        let bytes = std::fs::read(fixture(&format!("rfc9216/{ca}"))).unwrap();
        s.import(&bytes, ca, true).unwrap();
    }
    let cases = common::data("../cases/crashes");
    let mut seen = 0;
    for entry in std::fs::read_dir(&cases).unwrap() {
        let path = entry.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("smime_open-")
        {
            continue;
        }
        seen += 1;
        let data = std::fs::read(&path).unwrap();
        let mut policy = mailseal::OpenPolicy::default();
        policy.allow_legacy_cbc = data.len() % 2 == 1;
        let borrowed = Smime::new(&s).open(&data, &policy);
        let owned = Smime::new(&s).open_owned(data.clone(), &policy);
        match (&borrowed, &owned) {
            (Ok(a), Ok(b)) => assert_eq!(a.message, b.message, "{path:?}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{path:?}"),
            (a, b) => panic!(
                "{path:?}: open {:?}, open_owned {:?}",
                a.as_ref().map(|_| ()),
                b.as_ref().map(|_| ())
            ),
        }
    }
    assert!(seen >= 1);
}
