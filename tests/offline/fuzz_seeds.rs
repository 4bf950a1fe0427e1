//! The `offline` fuzz target's seeds (`fuzz/seeds/offline`, first byte the mode): each
//! reaches the code it seeds (a request that reviews against the RFC 9216 Alice store,
//! a response that assembles, a picture that decodes, a message the summary reads, a
//! log line that reads), so the fuzzer starts past the parsers' front doors.

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::offline::{self, LogEntry, SigningRequest, SigningResponse};

fn seed(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds/offline")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_offline_seeds_reach_review_assemble_qr_and_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = DirectoryStore::open(dir.path().join("s")).expect("store");
    let f =
        |r: &str| std::fs::read(super::common::fixture(&format!("rfc9216/{r}"))).expect("fixture");
    let mut identity = f("alice.sign.crt");
    identity.extend(f("alice.sign.key"));
    store.import(&identity, "alice", false).expect("import");
    let req = seed("smime.req.bin");
    assert_eq!(req[0], 0);
    let request = SigningRequest::parse(&req[1..]).expect("request seed");
    let review = offline::review(&store, request.clone()).expect("reviews");
    let resp = seed("smime.resp.bin");
    assert_eq!(resp[0], 1);
    let response = SigningResponse::parse(&resp[1..]).expect("response seed");
    assert_eq!(response.request, review.request().fingerprint());
    offline::assemble(&store, &request, &response).expect("assembles");
    let png = seed("smime.png.bin");
    assert_eq!(png[0], 2);
    assert_eq!(
        offline::qr::decode_png(&png[1..]).expect("decodes"),
        &req[1..]
    );
    for other in ["openpgp.req.bin", "jws.req.bin"] {
        SigningRequest::parse(&seed(other)[1..]).expect("request seed");
    }
    for message in ["message-push.bin", "message-attachment.bin"] {
        let m = seed(message);
        assert_eq!(m[0], 3);
        let msg = mailseal::MailA2aMessage::parse(&m[1..], &mailseal::message::Limits::default())
            .expect("message seed");
        assert!(msg.envelope().operation().is_some(), "{message}");
    }
    let line = seed("log-line.bin");
    serde_json::from_slice::<LogEntry>(&line[1..]).expect("log line");
}
