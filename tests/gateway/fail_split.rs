//! Issue #57, `outbound.no_key = "split"` as an attacker with a submitter login sees
//! it: a message sealed only for the recipients that have a key, each other one left
//! out and reported. What must hold: a message the gateway refuses records nothing (no
//! request whose answers would then be taken), the work to split grows with the
//! recipients, not with their square, and every left-out recipient is reported, however
//! the client cuts the message's recipients into transactions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::kit::{self, Client, Gateway, Sink};
use mailseal::error::Classify;
use mailseal::keystore::{
    DirectoryStore, KeyEntry, KeyStore, KeyStoreError, SecretKey, StoredCertificate, StoredJwk,
};
use mailseal::{ErrorKind, MailA2aMessage, Profile, SealOptions, Sender};

const ALICE: &str = "alice@smime.example";
const BOB: &str = "bob@smime.example";
const CARLOS: &str = "carlos@smime.example";

/// Alice's store (her keys; Bob's and Carlos's certificates), and Bob's (his keys,
/// Alice's certificates).
fn sides(root: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let a = kit::store(
        &root.join("a-store"),
        &[
            ("ca.rsa.crt", true),
            ("alice.sign.crt", false),
            ("alice.sign.key", false),
            ("alice.encrypt.crt", false),
            ("alice.encrypt.key", false),
            ("bob.sign.crt", false),
            ("bob.encrypt.crt", false),
            ("carlos.sign.crt", false),
            ("carlos.encrypt.crt", false),
        ],
        &[],
    );
    let b = kit::store(
        &root.join("b-store"),
        &[
            ("ca.rsa.crt", true),
            ("bob.sign.crt", false),
            ("bob.sign.key", false),
            ("bob.encrypt.crt", false),
            ("bob.encrypt.key", false),
            ("alice.sign.crt", false),
            ("alice.encrypt.crt", false),
        ],
        &[],
    );
    (a, b)
}

/// Alice's request in exchange `corr` to `to`, its Message-ID `<corr@smime.example>`.
fn request(corr: &str, to: &[&str]) -> Vec<u8> {
    let env = crate::common::env(crate::common::with(
        crate::common::request(),
        serde_json::json!({"messageId": format!("urn:uuid:{corr}"), "correlationId": corr,
            "idempotencyKey": format!("k-{corr}")}),
    ));
    let mut m = MailA2aMessage::new(ALICE, to, env);
    m.headers.message_id = Some(format!("{corr}@smime.example"));
    m.to_rfc5322().unwrap()
}

/// Bob's answer to Alice's request in exchange `corr`, sealed in Bob's store.
fn answer(b_store: &std::path::Path, corr: &str) -> Vec<u8> {
    let env = crate::common::env(serde_json::json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "response",
        "operation": "message/send", "messageId": format!("urn:uuid:{corr}-answer"),
        "correlationId": corr, "sequence": 1, "final": true,
        "payload": {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
    }));
    let mut m = MailA2aMessage::new(BOB, &[ALICE], env);
    m.headers.in_reply_to = Some(format!("{corr}@smime.example"));
    Sender::builder_boxed(crate::common::cli_store(b_store))
        .replay(mailseal::replay::MemoryReplayStore::default())
        .build()
        .seal(&m, &SealOptions::new(Profile::Smime))
        .unwrap()
}

/// THREATS "Unsolicited answers" and "Stale members and state": a request the split
/// leaves nobody to send to (its only SMTP recipient has no key), or nobody to tell
/// of the one left out (a null reverse path), is refused, and nothing of it is
/// recorded: an answer to it is unsolicited, as for any request never sent. The same
/// request sent to Bob is recorded, and Bob's answer is then taken.
#[test]
fn unsolicited_answers_a_request_the_split_refused_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = sides(dir.path());
    let sink = Sink::start();
    let (out, inb) = (kit::free_port(), kit::free_port());
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[
            ("out", out, "outbound", sink.addr.port(), "tls = \"none\""),
            ("in", inb, "inbound", sink.addr.port(), "tls = \"none\""),
        ],
        "",
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[out, inb]);
    let out = ([127, 0, 0, 1], out).into();
    let inb = ([127, 0, 0, 1], inb).into();
    let carol = "carol@nowhere.example";

    // Only the keyless recipient asked for: refused whole.
    let r = kit::submit(out, ALICE, &[carol], &request("split-none", &[BOB, carol]));
    assert!(r.starts_with("550 5.7.1"), "{r}");
    // A null reverse path: nobody to tell of Carol, refused whole.
    let r = kit::submit(
        out,
        "",
        &[BOB, carol],
        &request("split-null", &[BOB, carol]),
    );
    assert!(
        r.starts_with("550 5.7.1") && r.contains("nobody to report"),
        "{r}"
    );
    for corr in ["split-none", "split-null"] {
        let r = kit::submit(inb, BOB, &[ALICE], &answer(&b_store, corr));
        assert!(
            r.starts_with("550 5.7.1") && r.contains("unsolicited"),
            "an answer to {corr}, which was refused, is taken: {r}\n{}",
            g.log_text()
        );
    }
    // Sent to Bob (Carol left out and reported): recorded, and his answer taken.
    let r = kit::submit(
        out,
        ALICE,
        &[BOB, carol],
        &request("split-sent", &[BOB, carol]),
    );
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    let r = kit::submit(inb, BOB, &[ALICE], &answer(&b_store, "split-sent"));
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    assert!(
        sink.wait_for(3, Duration::from_secs(30))
            .iter()
            .any(|m| m.recipients == [ALICE] && !m.mail_from.is_empty()),
        "Bob's answer delivered to Alice"
    );
}

/// THREATS "Shared state": one message whose recipients the client sends in two
/// transactions (the gateway took two recipients, `452 4.5.3` for the third, as RFC
/// 5321 lets a client go on with the rest): each transaction's left-out recipient is
/// reported. A notice named by the message alone would make the second notice the
/// first one's duplicate, and Dave's would be lost.
#[test]
fn shared_state_each_transaction_reports_its_own_left_out_recipients() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[("out", port, "outbound", sink.addr.port(), "tls = \"none\"")],
        "\n[limits]\nmax_recipients = 2\n",
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let (carol, dave) = ("carol@nowhere.example", "dave@nowhere.example");
    let data = request("split-twice", &[BOB, CARLOS, carol, dave]);
    let mut c = Client::connect(([127, 0, 0, 1], port).into());
    c.cmd("EHLO client.test");
    assert!(c.cmd(&format!("MAIL FROM:<{ALICE}>")).starts_with("250"));
    assert!(c.cmd(&format!("RCPT TO:<{BOB}>")).starts_with("250"));
    assert!(c.cmd(&format!("RCPT TO:<{carol}>")).starts_with("250"));
    let r = c.cmd(&format!("RCPT TO:<{CARLOS}>"));
    assert!(r.starts_with("452 4.5.3"), "{r}");
    assert!(c.cmd("DATA").starts_with("354"));
    let mut body = Vec::new();
    for line in data.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b".") {
            body.push(b'.');
        }
        body.extend_from_slice(line);
    }
    if !body.ends_with(b"\r\n") {
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b".\r\n");
    c.send(&body);
    let r = c.reply();
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    // The rest of the recipients, in a second transaction.
    let r = c.submit(ALICE, &[CARLOS, dave], &data);
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    // Two sealed messages and a notice at least; the second notice, if it comes,
    // within the same time.
    let mut got = sink.wait_for(3, Duration::from_secs(30));
    for _ in 0..100 {
        if got.len() >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        got = sink.messages();
    }
    let notices: Vec<String> = got
        .iter()
        .filter(|m| m.mail_from.is_empty())
        .map(|m| String::from_utf8_lossy(&m.data).into_owned())
        .collect();
    for who in [carol, dave] {
        assert!(
            notices
                .iter()
                .any(|n| n.contains(&format!("Final-Recipient: rfc822; {who}"))),
            "{who} left out and never reported: {notices:?}\n{}",
            g.log_text()
        );
    }
    let sealed: Vec<&Vec<String>> = got
        .iter()
        .filter(|m| !m.mail_from.is_empty())
        .map(|m| &m.recipients)
        .collect();
    assert_eq!(sealed.len(), 2, "{sealed:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sink.messages().len(), 4, "one notice each, nothing more");
}

/// A key store that counts the lookups made of it: each seal looks up its signer's
/// private key once, and each recipient's certificates.
struct Counting<'a> {
    inner: &'a DirectoryStore,
    lookups: AtomicUsize,
    private_keys: AtomicUsize,
}

impl KeyStore for Counting<'_> {
    fn import_with_passphrase(
        &self,
        input: &[u8],
        what: &str,
        trusted: bool,
        passphrase: Option<&[u8]>,
    ) -> Result<Vec<KeyEntry>, KeyStoreError> {
        self.inner
            .import_with_passphrase(input, what, trusted, passphrase)
    }
    fn list(&self) -> Result<Vec<KeyEntry>, KeyStoreError> {
        self.inner.list()
    }
    fn certificates_for(&self, email: &str) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        self.inner.certificates_for(email)
    }
    fn trust_anchors(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.inner.trust_anchors()
    }
    fn own_certificates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.inner.own_certificates()
    }
    fn private_key(&self, fingerprint: &str) -> Result<Option<SecretKey>, KeyStoreError> {
        self.private_keys.fetch_add(1, Ordering::Relaxed);
        self.inner.private_key(fingerprint)
    }
    fn openpgp_certificates(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        self.inner.openpgp_certificates()
    }
    fn openpgp_secret_key(
        &self,
        fingerprint: &str,
    ) -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, KeyStoreError> {
        self.inner.openpgp_secret_key(fingerprint)
    }
    fn crls(&self) -> Result<Vec<Vec<u8>>, KeyStoreError> {
        self.inner.crls()
    }
    fn intermediates(&self) -> Result<Vec<StoredCertificate>, KeyStoreError> {
        self.inner.intermediates()
    }
    fn jwk_identities(&self) -> Result<Vec<StoredJwk>, KeyStoreError> {
        self.inner.jwk_identities()
    }
    fn put_jwk_identity(&self, record: &StoredJwk) -> Result<(), KeyStoreError> {
        self.inner.put_jwk_identity(record)
    }
}

/// (seals, certificate lookups) for sealing, split, Alice's request to `to`, `cc`.
fn work(store: &DirectoryStore, to: &[String], cc: &[String]) -> (usize, usize) {
    let counting = Counting {
        inner: store,
        lookups: AtomicUsize::new(0),
        private_keys: AtomicUsize::new(0),
    };
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    let env = crate::common::env(crate::common::request());
    let mut m = MailA2aMessage::new(ALICE, &to, env);
    m.headers.cc = cc
        .iter()
        .map(|a| mailseal::message::Mailbox::new(a))
        .collect();
    let sender = Sender::builder(&counting)
        .replay(mailseal::replay::MemoryReplayStore::default())
        .build();
    let (_, left) = sender
        .seal_for_keyed(&m, &SealOptions::new(Profile::Smime))
        .unwrap();
    assert_eq!(left.len(), cc.len());
    (
        counting.private_keys.load(Ordering::Relaxed),
        counting.lookups.load(Ordering::Relaxed),
    )
}

/// THREATS "Cost": a submitter names Bob many times and many addresses without a key
/// (they need not be SMTP recipients, and nobody is told of them). The split seals
/// once, whatever it leaves out, and looks up each left-out address a bounded number
/// of times: the work grows with the addresses, not with their square (sealing again
/// for each one left out made a 41 KB message with 1600 such addresses hold a worker
/// for a minute).
#[test]
fn cost_the_split_seals_once_and_looks_up_each_address_a_bounded_number_of_times() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = sides(dir.path());
    let store = DirectoryStore::open(&a_store).unwrap();
    let n = 60;
    let bobs: Vec<String> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                BOB.into()
            } else {
                BOB.to_uppercase()
            }
        })
        .collect();
    let keyless: Vec<String> = (0..n).map(|i| format!("k{i}@nowhere.example")).collect();
    let (base_seals, base_lookups) = work(&store, &bobs, &[]);
    let (seals, lookups) = work(&store, &bobs, &keyless);
    assert_eq!(
        seals, base_seals,
        "sealed once however many are left out (the message alone: {base_seals})"
    );
    assert!(
        lookups <= base_lookups + 2 * n,
        "{lookups} certificate lookups for {n} left out (none left out: {base_lookups})"
    );

    // Two spellings of one keyless address, and nobody with a key: refused as a
    // missing key (that recipient's), not as a caller's bad argument.
    let env = crate::common::env(crate::common::request());
    let m = MailA2aMessage::new(
        ALICE,
        &["carol@nowhere.example", "Carol@Nowhere.example"],
        env,
    );
    let sender = Sender::builder(&store)
        .replay(mailseal::replay::MemoryReplayStore::default())
        .build();
    let e = sender
        .seal_for_keyed(&m, &SealOptions::new(Profile::Smime))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoUsableKey, "{e}");
    assert_eq!(e.recipient_without_key(), Some("carol@nowhere.example"));
}

/// THREATS "Chosen time" and "Respelled keys": a recipient whose only certificate the
/// store's CRL revokes (Eve) or whose certificate has expired (Frank) is left out and
/// reported, whatever the case of its RCPT; the message is sealed for Bob alone,
/// and Eve's own key cannot open it.
#[test]
fn chosen_time_a_revoked_or_expired_recipient_is_left_out_and_cannot_read() {
    use crate::common::pki::{Pki, NOW_END, NOW_START};
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = sides(dir.path());
    let pki_dir = dir.path().join("pki");
    std::fs::create_dir(&pki_dir).unwrap();
    let pki = Pki::new(&pki_dir);
    let root = pki.root("", NOW_START, NOW_END);
    let encryption = |email: &str| {
        format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,keyAgreement\n\
             extendedKeyUsage=emailProtection\nsubjectAltName=email:{email}\n"
        )
    };
    let (eve, frank) = ("eve@pki.example", "frank@pki.example");
    let eve_crt = pki.issue("eve", Some("root"), &encryption(eve), NOW_START, NOW_END);
    let frank_crt = pki.issue(
        "frank",
        Some("root"),
        &encryption(frank),
        "20200101000000Z",
        "20210101000000Z",
    );
    let store = DirectoryStore::open(&a_store).unwrap();
    let import = |path: &std::path::Path, trusted: bool| {
        store
            .import(&std::fs::read(path).unwrap(), "pki", trusted)
            .unwrap();
    };
    import(&root, true);
    import(&eve_crt, false);
    import(&frank_crt, false);
    pki.revoke("eve", "root");
    import(&pki.crl("root"), false);

    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[("out", port, "outbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let data = request("split-time", &[BOB, eve, frank]);
    let r = kit::submit(
        ([127, 0, 0, 1], port).into(),
        ALICE,
        &[BOB, "EVE@pki.example", "Frank@PKI.example"],
        &data,
    );
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    let got = sink.wait_for(2, Duration::from_secs(30));
    let sealed = got
        .iter()
        .find(|m| !m.mail_from.is_empty())
        .expect("the sealed message");
    assert_eq!(sealed.recipients, [BOB]);
    let notice = got
        .iter()
        .find(|m| m.mail_from.is_empty())
        .map(|m| String::from_utf8_lossy(&m.data).into_owned())
        .expect("a notice");
    for who in ["EVE@pki.example", "Frank@PKI.example"] {
        assert!(
            notice.contains(&format!("Final-Recipient: rfc822; {who}")),
            "{who}: {notice}"
        );
    }
    assert!(notice.contains("revoked"), "{notice}");
    // Eve, with her own key and Alice's certificates, cannot open it.
    let eve_store = dir.path().join("eve-store");
    let s = DirectoryStore::open(&eve_store).unwrap();
    for f in [eve_crt, pki_dir.join("eve.key")] {
        s.import(&std::fs::read(&f).unwrap(), "eve", false).unwrap();
    }
    for f in ["ca.rsa.crt", "alice.sign.crt", "alice.encrypt.crt"] {
        s.import(&kit::fixture(&format!("rfc9216/{f}")), f, f == "ca.rsa.crt")
            .unwrap();
    }
    let (_, rest) = kit::trace_fields(&sealed.data);
    let opened = crate::common::run(&["open", "--store", eve_store.to_str().unwrap()], rest);
    let err = String::from_utf8_lossy(&opened.stderr);
    assert!(!opened.status.success(), "Eve opened it");
    assert!(err.contains("no key of ours is a recipient"), "{err}");
    assert!(
        !String::from_utf8_lossy(&opened.stdout).contains("split-time"),
        "{err}"
    );
    assert_eq!(sink.messages().len(), 2, "nothing more went out");
}
