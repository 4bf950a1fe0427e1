//! Untrusted bytes through the offline-signing parsers. The first byte picks one:
//! 0, a signing request, parsed and, if it parses, reviewed against a store holding
//! the RFC 9216 Alice signing identity (the checks an offline host makes: the entity,
//! the values stated, the boundary, the signed attributes); 1, a signing response,
//! parsed and assembled against the seed request; 2, a PNG read for QR codes; 3, a
//! MailA2A message, summarised as the operator would read it before signing (the
//! summary code without the review's checks, which byte-level inputs rarely pass);
//! anything else, a line of the signing log.
//! Invariants: no panic; a request that parses writes itself as text that parses to
//! the same request; a review that passes names the store's key and the entity's
//! From; a response that assembles came from Alice's key; a summary holds no hidden
//! character but its line ends, no line longer than a bound (long values wrap), says
//! how many lines it has, is refused for the default view exactly when it is longer,
//! and is the same made twice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::offline::{self, SigningRequest, SigningResponse};

struct Fixture {
    _dir: tempfile::TempDir,
    store: DirectoryStore,
    request: SigningRequest,
}

fn fixture() -> &'static Fixture {
    static F: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = DirectoryStore::open(dir.path().join("store")).expect("store");
        let mut identity = include_bytes!("../../keys-fixtures/rfc9216/alice.sign.crt").to_vec();
        identity.extend_from_slice(include_bytes!("../../keys-fixtures/rfc9216/alice.sign.key"));
        store.import(&identity, "alice", false).expect("import");
        let request = SigningRequest::parse(include_bytes!("../seeds/offline/smime.req.bin").get(1..).expect("seed"))
            .expect("seed request");
        Fixture {
            _dir: dir,
            store,
            request,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    match mode {
        0 => {
            let Ok(request) = SigningRequest::parse(rest) else {
                return;
            };
            let again = SigningRequest::parse(request.to_text().as_bytes()).expect("reparses");
            assert_eq!(again, request);
            if let Ok(review) = offline::review(&f.store, request) {
                let r = review.request();
                assert_eq!(r.signer_address, r.covers.from);
                assert!(r.signer_address.eq_ignore_ascii_case("alice@smime.example"));
            }
        }
        1 => {
            let Ok(response) = SigningResponse::parse(rest) else {
                return;
            };
            let again = SigningResponse::parse(response.to_text().as_bytes()).expect("reparses");
            assert_eq!(again, response);
            if let Ok(a) = offline::assemble(&f.store, &f.request, &response) {
                assert_eq!(response.request, f.request.fingerprint());
                assert!(!a.message.is_empty());
            }
        }
        2 => {
            let _ = offline::qr::decode_png(rest);
        }
        3 => {
            let Ok(msg) = mailseal::MailA2aMessage::parse(rest, &mailseal::message::Limits::default())
            else {
                return;
            };
            let summary = offline::Summary::fuzz_of(&f.request, &msg);
            let text = summary.text();
            assert!(
                !text.chars().any(|c| c != '\n' && mailseal::error::is_hidden(c)),
                "a hidden character in the summary"
            );
            assert!(text.lines().all(|l| l.chars().count() <= 600), "a line not wrapped");
            assert_eq!(text.lines().count(), summary.line_count());
            assert!(text.ends_with(&format!("end of summary ({} lines)\n", summary.line_count())));
            assert_eq!(summary.shown(false).is_ok(), summary.fits_view());
            assert_eq!(summary.fits_view(), summary.line_count() <= offline::Summary::VIEW_LINES);
            assert!(text.starts_with(summary.head()));
            assert_eq!(offline::Summary::fuzz_of(&f.request, &msg), summary);
        }
        _ => {
            let _ = serde_json::from_slice::<offline::LogEntry>(rest);
        }
    }
});
