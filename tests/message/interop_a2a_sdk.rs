//! The official A2A Python SDK (`a2a-sdk`, pinned in `.ci/peers-venv`) as a peer
//! (`tests/peers/a2a_sdk_peer.py`): it makes A2A v1.0 objects with its own types (a
//! Message sent and answered, a Task whose history repeats a `cid:` file part, a status
//! and an artifact update event, a list response and its standard JSON-RPC error object
//! `{code, message, data}`) and serialises them as its server and client do. Each is
//! the payload (or error) of a MailA2A message, sealed and opened under every profile;
//! what opened must be the SDK's text byte for byte, and the SDK must parse it back
//! into the object it made.
//!
//! The SDK lives in a virtual environment (`.ci/peers-venv` makes it; the tests read
//! its python from `MAILSEAL_PEER_PYTHON`, else its default place): without it the
//! test skips, saying why, and fails under `MAILSEAL_REQUIRE_PEERS=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::{Attachment, MailA2aMessage};
use mailseal::mls::{Mls, Received};
use mailseal::openpgp::OpenPgp;
use mailseal::seal::{OpenPolicy, Opened, Opener, SealOptions, Sealer};
use mailseal::smime::Smime;
use mailseal::Profile;
use serde_json::Value;

use crate::common;

/// Where `.ci/peers-venv` puts the environment unless told otherwise.
const DEFAULT_PYTHON: &str = "/var/lib/mailseal-peers/venv/bin/python3";

/// The python of the SDK's environment, when it imports the SDK.
fn sdk_python() -> Option<PathBuf> {
    let python = std::env::var_os("MAILSEAL_PEER_PYTHON")
        .map_or_else(|| PathBuf::from(DEFAULT_PYTHON), PathBuf::from);
    common::peer_available(
        "the official A2A SDK (a2a-sdk, made by .ci/peers-venv; MAILSEAL_PEER_PYTHON)",
        Command::new(&python).args(["-c", "import a2a.types, a2a.server.jsonrpc_models"]),
    )
    .then_some(python)
}

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/a2a_sdk_peer.py")
}

/// Runs the peer's `check` over `opened` ({name, json} items): its output lines and
/// whether it exited 0.
fn sdk_check(python: &Path, opened: &[Value]) -> (Vec<String>, bool) {
    use std::io::Write;
    let mut child = Command::new(python)
        .arg(peer_script())
        .arg("check")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the SDK's python runs");
    let input = serde_json::to_vec(opened).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(
        out.stderr.is_empty() || out.status.success(),
        "the peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (lines, out.status.success())
}

/// The MailA2A message each SDK object travels in: kind, operation, sequence, final.
fn binding(name: &str) -> (Kind, Operation, u64, bool) {
    use Operation as Op;
    match name {
        "message/send request (Message)" => (Kind::Request, Op::MessageSend, 0, false),
        "message/send response (Message)" => (Kind::Response, Op::MessageSend, 1, true),
        "tasks/get response (Task with history)" => (Kind::Response, Op::TasksGet, 1, true),
        "status update event" => (Kind::Event, Op::MessageStream, 1, false),
        "artifact update event" => (Kind::Event, Op::MessageStream, 2, true),
        "tasks/list response" => (Kind::Response, Op::TasksList, 1, true),
        "JSON-RPC error object" => (Kind::Error, Op::TasksGet, 1, true),
        other => panic!("the peer made an object this test does not know: {other}"),
    }
}

/// What the peer made.
struct Made {
    objects: Vec<Value>,
    attachment: Attachment,
}

fn sdk_make(python: &Path) -> Made {
    let out = Command::new(python)
        .arg(peer_script())
        .arg("make")
        .output()
        .expect("the SDK's python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("the peer prints JSON");
    let a = &v["attachment"];
    Made {
        objects: v["objects"].as_array().expect("objects").clone(),
        attachment: Attachment {
            content_id: a["contentId"].as_str().unwrap().into(),
            content_type: a["contentType"].as_str().unwrap().into(),
            filename: a["filename"].as_str().map(str::to_string),
            data: base64::engine::general_purpose::STANDARD
                .decode(a["base64"].as_str().unwrap())
                .unwrap(),
        },
    }
}

/// The plain message from `from` to `to` carrying the SDK object `object` (its JSON
/// text kept byte for byte); an answer is a reply to a request of `to`'s.
fn plain(from: &str, to: &str, object: &Value, made: &Made) -> MailA2aMessage {
    let name = object["name"].as_str().unwrap();
    let (kind, operation, sequence, last) = binding(name);
    let mut env = Envelope::new(kind, operation, &format!("urn:uuid:sdk-{sequence}-{name}"));
    env.set("correlationId", "exchange-sdk");
    env.set("sequence", &sequence);
    env.set("final", &last);
    if kind == Kind::Request {
        env.set("idempotencyKey", "effect-sdk");
    }
    let field = object["field"].as_str().unwrap();
    env.set_raw(field, object["json"].as_str().unwrap())
        .expect("the SDK writes strict JSON");
    let mut m = MailA2aMessage::new(from, &[to], env);
    if kind == Kind::Request {
        m.attachments.push(made.attachment.clone());
    } else {
        let asked = MailA2aMessage::new(to, &[from], Envelope::new(Kind::Request, operation, "q"));
        m.in_reply_to(&asked.headers);
    }
    m
}

fn fixture(store: &DirectoryStore, file: &str, trusted: bool) {
    let bytes = std::fs::read(common::fixture(file)).unwrap();
    store.import(&bytes, file, trusted).unwrap();
}

/// One profile's two parties: seals as the first, opens as the second.
trait Pair {
    fn addresses(&self) -> (&'static str, &'static str);
    fn round_trip(&self, plain: &MailA2aMessage) -> Opened;
}

/// S/MIME, signed and encrypted (the RFC 9216 identities).
struct SmimePair(DirectoryStore, DirectoryStore);

impl SmimePair {
    fn new(dir: &Path) -> Self {
        let alice = DirectoryStore::open(dir.join("smime-alice")).unwrap();
        let bob = DirectoryStore::open(dir.join("smime-bob")).unwrap();
        for (store, own, peer) in [(&alice, "alice", "bob"), (&bob, "bob", "alice")] {
            fixture(store, "rfc9216/ca.rsa.crt", true);
            for f in [
                format!("{own}.sign.crt"),
                format!("{own}.sign.key"),
                format!("{own}.encrypt.crt"),
                format!("{own}.encrypt.key"),
                format!("{peer}.encrypt.crt"),
                format!("{peer}.sign.crt"),
            ] {
                fixture(store, &format!("rfc9216/{f}"), false);
            }
        }
        SmimePair(alice, bob)
    }
}

impl Pair for SmimePair {
    fn addresses(&self) -> (&'static str, &'static str) {
        ("alice@smime.example", "bob@smime.example")
    }
    fn round_trip(&self, plain: &MailA2aMessage) -> Opened {
        let sealed = Smime::new(&self.0)
            .seal(plain, &SealOptions::new(Profile::Smime))
            .expect("seals");
        Smime::new(&self.1)
            .open(&sealed, &OpenPolicy::default())
            .expect("opens")
    }
}

/// OpenPGP, signed and encrypted (the RFC 9580 sample keys).
struct OpenPgpPair(DirectoryStore, DirectoryStore);

impl OpenPgpPair {
    fn new(dir: &Path) -> Self {
        let alice = DirectoryStore::open(dir.join("pgp-alice")).unwrap();
        let bob = DirectoryStore::open(dir.join("pgp-bob")).unwrap();
        fixture(&alice, "openpgp/alice@openpgp.example.sec.asc", false);
        fixture(&alice, "openpgp/bob@openpgp.example.pub.asc", false);
        fixture(&bob, "openpgp/bob@openpgp.example.sec.asc", false);
        fixture(&bob, "openpgp/alice@openpgp.example.pub.asc", false);
        OpenPgpPair(alice, bob)
    }
}

impl Pair for OpenPgpPair {
    fn addresses(&self) -> (&'static str, &'static str) {
        ("alice@openpgp.example", "bob@openpgp.example")
    }
    fn round_trip(&self, plain: &MailA2aMessage) -> Opened {
        let sealed = OpenPgp::new(&self.0)
            .seal(plain, &SealOptions::new(Profile::OpenPgp))
            .expect("seals");
        OpenPgp::new(&self.1)
            .open(&sealed, &OpenPolicy::default())
            .expect("opens")
    }
}

/// detached-jws (signed only), each party with the other's JWK.
struct JwsPair(DirectoryStore, DirectoryStore);

impl JwsPair {
    fn new(dir: &Path) -> Self {
        use mailseal::jws::{jwk, Jwk, JwsAlgorithm};
        let alice = DirectoryStore::open(dir.join("jws-alice")).unwrap();
        let bob = DirectoryStore::open(dir.join("jws-bob")).unwrap();
        for (store, email) in [(&alice, "alice@jws.example"), (&bob, "bob@jws.example")] {
            jwk::generate(store, email, JwsAlgorithm::Es256).unwrap();
        }
        for (from, email, to) in [
            (&alice, "alice@jws.example", &bob),
            (&bob, "bob@jws.example", &alice),
        ] {
            let public = jwk::public_jwks(from, email).unwrap();
            let key = Jwk::parse(public[0].to_string().as_bytes()).unwrap();
            jwk::bind(to, &key, &[email.to_string()], "jwk").unwrap();
        }
        JwsPair(alice, bob)
    }
}

impl Pair for JwsPair {
    fn addresses(&self) -> (&'static str, &'static str) {
        ("alice@jws.example", "bob@jws.example")
    }
    fn round_trip(&self, plain: &MailA2aMessage) -> Opened {
        let sealed = mailseal::jws::Jws::new(&self.0)
            .seal(plain, &SealOptions::new(Profile::Jws))
            .expect("seals");
        mailseal::jws::Jws::new(&self.1)
            .open(&sealed, &OpenPolicy::default())
            .expect("opens")
    }
}

/// MLS: Alice's group, which Bob joined by her Welcome.
struct MlsPair {
    alice: Mls,
    bob: Mls,
    group: String,
}

const MLS_MEMBERS: [&str; 2] = ["alice@a.example", "bob@b.example"];

impl MlsPair {
    fn new() -> Self {
        let auth = common::mls::thread_authority(&MLS_MEMBERS);
        let member = |email: &str| {
            let m = Mls::in_memory().unwrap();
            m.generate_identity(email, auth).unwrap();
            m.allow_inviter("*", true).unwrap();
            m
        };
        let (alice, bob) = (member(MLS_MEMBERS[0]), member(MLS_MEMBERS[1]));
        let group = alice.create_group(MLS_MEMBERS[0]).unwrap();
        let added = alice
            .add(&group, &[bob.key_package(MLS_MEMBERS[1]).unwrap()], auth)
            .unwrap();
        bob.receive(&added.welcome, &OpenPolicy::default(), "welcome", auth)
            .and_then(|r| r.commit())
            .unwrap();
        MlsPair { alice, bob, group }
    }
}

impl Pair for MlsPair {
    fn addresses(&self) -> (&'static str, &'static str) {
        (MLS_MEMBERS[0], MLS_MEMBERS[1])
    }
    fn round_trip(&self, plain: &MailA2aMessage) -> Opened {
        let auth = common::mls::thread_authority(&MLS_MEMBERS);
        let sealed = self.alice.seal(plain, &self.group, false).expect("seals");
        match self
            .bob
            .receive(&sealed, &OpenPolicy::default(), "sdk", auth)
            .and_then(|r| r.commit())
            .expect("opens")
        {
            Received::Application(opened) => *opened,
            other => panic!("not an application message: {other:?}"),
        }
    }
}

/// Every object the SDK makes, through every profile: what opens is the SDK's text
/// byte for byte, the request's `cid:` file part opens with its attachment, and the
/// SDK parses each opened text back into the object it made.
#[test]
fn the_sdks_objects_round_trip_through_every_profile() {
    let Some(python) = sdk_python() else { return };
    let made = sdk_make(&python);
    let names: Vec<&str> = made
        .objects
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    let dir = tempfile::tempdir().unwrap();
    let pairs: Vec<(Profile, Box<dyn Pair>)> = vec![
        (Profile::Smime, Box::new(SmimePair::new(dir.path()))),
        (Profile::OpenPgp, Box::new(OpenPgpPair::new(dir.path()))),
        (Profile::Jws, Box::new(JwsPair::new(dir.path()))),
        (Profile::Mls, Box::new(MlsPair::new())),
    ];
    let mut opened_items = Vec::new();
    for (profile, pair) in &pairs {
        let (from, to) = pair.addresses();
        for object in &made.objects {
            let name = object["name"].as_str().unwrap();
            let field = object["field"].as_str().unwrap();
            let msg = plain(from, to, object, &made);
            let opened = pair.round_trip(&msg);
            assert_eq!(opened.verdict.profile, Some(*profile), "{name}");
            assert!(
                opened.verdict.warnings.is_empty(),
                "{profile} {name}: {:?}",
                opened.verdict.warnings
            );
            let text = opened
                .envelope()
                .raw(field)
                .unwrap_or_else(|| panic!("{profile} {name}: no {field}"));
            assert_eq!(
                text,
                object["json"].as_str().unwrap(),
                "{profile} {name}: the opened {field} is not the SDK's text"
            );
            assert_eq!(
                opened.message.attachments, msg.attachments,
                "{profile} {name}"
            );
            opened_items.push(serde_json::json!({"name": name, "json": text}));
        }
    }
    let (lines, ok) = sdk_check(&python, &opened_items);
    assert!(ok, "{lines:#?}");
    assert_eq!(lines.len(), names.len() * pairs.len(), "{lines:#?}");
    assert!(lines.iter().all(|l| l.starts_with("ok ")), "{lines:#?}");
}

/// The SDK's check is not a formality: a task whose state changed on the way, an
/// error object of another code, and a part whose bytes differ are each not what it
/// made.
#[test]
fn fail_the_sdk_tells_a_changed_object_from_what_it_made() {
    let Some(python) = sdk_python() else { return };
    let made = sdk_make(&python);
    let text = |name: &str| {
        made.objects
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))["json"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let changed = [
        (
            "tasks/get response (Task with history)",
            text("tasks/get response (Task with history)").replacen(
                "TASK_STATE_COMPLETED",
                "TASK_STATE_FAILED",
                1,
            ),
        ),
        (
            "JSON-RPC error object",
            text("JSON-RPC error object").replacen("-32001", "-32002", 1),
        ),
        (
            "artifact update event",
            text("artifact update event").replacen("cmVnaW9u", "cmVnaW9v", 1),
        ),
    ];
    for (name, json) in changed {
        assert_ne!(json, text(name), "{name}: the change applies");
        let (lines, ok) = sdk_check(&python, &[serde_json::json!({"name": name, "json": json})]);
        assert!(!ok, "{name}: {lines:?}");
        assert!(
            lines.len() == 1 && lines[0].starts_with(&format!("FAIL {name}:")),
            "{lines:?}"
        );
    }
}
