//! Untrusted bytes as the certificate or the signature of `sop verify`: the readings of
//! malformed Issuer Fingerprints (`src/openpgp/unhashed.rs`, hand-written framing),
//! certificate loading, Sequoia's canonicalisation of the bindings read with a back
//! signature's malformed hint kept, and signature checking. The first byte picks the
//! mode: even, the rest is a certificate against which a signature by the OpenPGP
//! interoperability suite's Bob (his subkey, over the suite's data) is checked; odd,
//! the rest is a signature checked against Bob's certificate. No panic escapes, and the
//! hand-written readings are held to Sequoia's: dropping the malformed fingerprints
//! keeps every packet Sequoia frames and is done in one pass; every binding read with
//! a hint kept writes back to a signature packet body of the input, octet for octet.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "sequoia_panics.rs"]
mod sequoia_panics;
use mailseal::openpgp::sop::{self, Window};
use mailseal::openpgp::{
    drop_malformed_issuer_fingerprints, signatures_with_embedded_fingerprints_kept,
};
use sequoia_openpgp::parse::Parse;
use sequoia_openpgp::serialize::MarshalInto;
use sequoia_openpgp::PacketPile;

/// The suite's data (`tests/openpgp/sop_conformance.rs`).
const DATA: &[u8] = b"Hello World :)";

struct Fixture {
    /// Bob's certificate (draft-bre-openpgp-samples).
    cert: Vec<u8>,
    /// A detached signature by Bob's subkey over `DATA`, which the suite's binding cases
    /// bind as a signing subkey.
    signature: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        sequoia_panics::let_through(); // Sequoia-internal panics are caught and refused
        let read = |path: &str| std::fs::read(path).expect("fixture");
        Fixture {
            cert: read(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../keys-fixtures/openpgp/bob@openpgp.example.pub.asc"
            )),
            signature: read(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/fixtures/sop/bob-subkey-signature.sig"
            )),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let _ = sop::verify(&f.signature, &[rest.to_vec()], DATA, Window::default());
    } else {
        let _ = sop::verify(rest, std::slice::from_ref(&f.cert), DATA, Window::default());
    }

    // The top-level drop: one pass leaves nothing to drop, and Sequoia sees as many
    // packets before as after.
    if let Some(dropped) = drop_malformed_issuer_fingerprints(rest) {
        assert_eq!(
            drop_malformed_issuer_fingerprints(&dropped),
            None,
            "a second pass dropped more"
        );
        if let (Ok(before), Ok(after)) = (
            PacketPile::from_bytes(rest),
            PacketPile::from_bytes(&dropped),
        ) {
            assert_eq!(
                before.descendants().count(),
                after.descendants().count(),
                "the drop changed the packets Sequoia frames"
            );
        }
    }
    // The bindings read with a hint kept write back to what the input holds.
    for kept in signatures_with_embedded_fingerprints_kept(rest) {
        let body = kept.signature.to_vec().expect("a kept binding writes back");
        assert!(
            rest.windows(body.len()).any(|w| w == body.as_slice()),
            "a kept binding is not a packet body of the input"
        );
    }
});
