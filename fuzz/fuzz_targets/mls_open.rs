//! Untrusted bytes as a `message/mls` mail: MIME, transfer decoding, MLSMessage
//! decoding, framing checks, and the whole receive path of a group member (Bob, whose
//! state `fixtures/mls/bob-mls.db` is a member of the group the seeds were sealed in):
//! duplicate and fork checks, holding, openmls' processing, sender binding and the
//! envelope's group coordinates. An input whose first byte is odd is the MLSMessage
//! itself, wrapped in a binary `message/mls` mail, so the fuzzer mutates TLS
//! structures directly. Invariants: no panic; an MLSMessage that decodes encodes back
//! to the same bytes; our own PrivateMessage framing reader (`mls::sender_data`, for
//! the real generation) reads what openmls' decoder reads; an opened application message carries the group's coordinates;
//! a refused or unprocessed message leaves the state as it was (each receipt is
//! dropped, so rolled back). The fixture group predates credential bindings, so its
//! members' MLS keys are pinned (`fixtures/mls/pinned.txt`): an input's leaf that is
//! not one of them is refused by the authentication service, as it would be in use.
//! Bob takes invitations from anyone, so that a Welcome is read by openmls.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::mls::{sender_data, wire, Mls, PinnedKeys, Received};
use openmls::prelude::{MlsMessageBodyIn, ProtocolMessage};
use mailseal::seal::OpenPolicy;

thread_local! {
    static BOB: (tempfile::TempDir, Mls, String, PinnedKeys) = {
        let dir = tempfile::tempdir().expect("temp dir");
        let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/mls/");
        std::fs::copy(format!("{fx}bob-mls.db"), dir.path().join("mls.db")).expect("fixture");
        let group = std::fs::read_to_string(format!("{fx}group.txt")).expect("fixture");
        let mls = Mls::open(dir.path()).expect("Bob's state");
        // Welcomes from anyone reach openmls: with nobody allowed to invite (the
        // fixture's default) they are refused before it reads them.
        mls.allow_inviter("*", true).expect("inviter policy");
        let pinned = std::fs::read_to_string(format!("{fx}pinned.txt")).expect("fixture");
        let pinned = PinnedKeys::parse(&pinned).expect("pinned keys");
        (dir, mls, group.trim().to_string(), pinned)
    };
}

fn binary_mail(message: &[u8]) -> Vec<u8> {
    let mut m = b"From: <alice@fuzz.example>\r\nTo: <bob@fuzz.example>\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000\r\nMessage-ID: <f@fuzz.example>\r\nMIME-Version: 1.0\r\nContent-Type: message/mls; version=1.0\r\nContent-Transfer-Encoding: binary\r\n\r\n".to_vec();
    m.extend_from_slice(message);
    m
}

fuzz_target!(|data: &[u8]| {
    let mail = match data.first() {
        Some(b) if b & 1 == 1 => binary_mail(&data[1..]),
        _ => data.to_vec(),
    };
    if let Ok(m) = wire::read_mail(&mail, &mailseal::Limits::default()) {
        let ours = sender_data::private_framing(&m.message);
        if let Ok(decoded) = wire::decode(&m.message) {
            let again = wire::encode(&decoded).expect("a decoded MLSMessage encodes");
            assert_eq!(again, m.message, "re-encoding changed the MLSMessage");
            // Our PrivateMessage framing reader against openmls' decoder: whatever
            // openmls reads as a PrivateMessage, ours reads the same.
            if let MlsMessageBodyIn::PrivateMessage(p) = decoded.extract() {
                let f = ours.expect("a PrivateMessage openmls decodes, ours does not");
                assert_eq!(f.authenticated_data, p.aad());
                let p = ProtocolMessage::from(p);
                assert_eq!(f.group_id, p.group_id().as_slice());
                assert_eq!(f.epoch, p.epoch().as_u64());
                assert_eq!(f.content_type, p.content_type() as u8);
            }
        }
        let _ = wire::framing_of(&m.message);
    }
    BOB.with(|(_, mls, group, pinned)| {
        if let Ok(receipt) = mls.receive(&mail, &OpenPolicy::default(), "fuzz", pinned) {
            if let Received::Application(opened) = &receipt.received {
                let c = opened.envelope().group().expect("coordinates were checked");
                assert_eq!(&c.id, group);
            }
            drop(receipt); // rolled back: the next input sees the same state
        }
    });
});
