//! Untrusted bytes as a peer's A2A Agent Card, as `key import --agent-card` reads it:
//! JSON and the A2A v1.0 schema, the MailA2A interface's mailto: URL, the #protection
//! extension's certificates (X.509 PEM, OpenPGP armor), MLS KeyPackages and JWKs, and JWS
//! signatures (headers, x5c chains, jwk keys, JCS of the card). Judged against a store
//! that holds a certificate of the seeds' address, so the pinned path runs too.
//! Invariants: no panic; a card that reads has only keys for its own address; written
//! again with those keys (`mailseal card --in`) it reads back to the same keys and
//! minimum; its certificates import, compared with the pin of its address, and the
//! same card again is no change of that pin; the policy it records is its minimum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::ext::agent_card::{self, CardError, CardFields, ImportOptions, Published};
use mailseal::ext::peers::PeerPolicies;
use mailseal::keystore::{KeyStore, SqliteStore};

/// Two stores for the whole run, in a temporary directory: the one judging trust,
/// which holds Bob's fixture certificate, and the one cards are imported into.
struct Stores {
    _dir: tempfile::TempDir,
    trust: SqliteStore,
    target: SqliteStore,
}

fn stores() -> &'static Stores {
    static STORES: std::sync::OnceLock<Stores> = std::sync::OnceLock::new();
    STORES.get_or_init(|| {
        // On tmpfs when there is one: every import commits, and an fsync to disk per
        // input would leave the fuzzer at tens of inputs a second.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .expect("a temporary directory");
        let trust = SqliteStore::open(&dir.path().join("trust.db"), None).expect("store");
        let target = SqliteStore::open(&dir.path().join("target.db"), None).expect("store");
        let pinned = include_bytes!("../fixtures/agent_card/bob-cert.pem");
        trust
            .import(pinned, "fixture", false)
            .expect("the fixture certificate imports");
        Stores {
            _dir: dir,
            trust,
            target,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    // A fixed time (2027-01-15, within the seeds' certificates' validity): the same
    // input always takes the same path.
    let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let keys = &stores().trust;
    let Ok(card) = agent_card::read_card(data, keys, now) else {
        return;
    };
    for der in &card.smime_certificates {
        let cert = <x509_cert::Certificate as der::Decode>::from_der(der).unwrap();
        assert!(mailseal::keystore::emails_of(&cert).contains(&card.address));
    }
    let published = Published {
        smime_certificates: card.smime_certificates.clone(),
        openpgp_certificates: card.openpgp_certificates.clone(),
        mls_key_packages: card.mls_key_packages.iter().map(|(k, _)| k.clone()).collect(),
        jwks: card.jwks.clone(),
        minimum: card.minimum,
        limits: card.limits.clone(),
    };
    let (rewritten, _) =
        agent_card::write_card(Some(data), &card.address, &CardFields::default(), &published)
            .expect("a card that reads can be written again");
    let bytes = agent_card::to_pretty_json(&rewritten);
    let again = agent_card::read_card(&bytes, keys, now).expect("the rewritten card reads");
    assert_eq!(again.address, card.address);
    assert_eq!(again.minimum, card.minimum);
    assert_eq!(again.smime_certificates, card.smime_certificates);
    assert_eq!(again.openpgp_certificates, card.openpgp_certificates);
    assert_eq!(again.mls_key_packages, card.mls_key_packages);
    assert_eq!(again.limits, card.limits);
    assert_eq!(again.jwks, card.jwks);
    assert!(again.signatures.is_empty(), "a changed card keeps no signature");
    // Imported as every card path imports (`agent_card::import_card`): compared with
    // the pin of its address. An earlier input may have bound JWKs to the address (a
    // change of its pin, taken when accepted) or bound one of its JWKs to another
    // address (never moved by a card).
    let target = &stores().target;
    let mut policies = PeerPolicies::default();
    let import = |policies: &mut PeerPolicies, accept: bool| {
        agent_card::import_card(
            &card,
            target,
            policies,
            &ImportOptions::new().accept_changed(accept),
            now,
        )
    };
    let imported = match import(&mut policies, false) {
        Ok(_) => true,
        Err(CardError::Pin(_)) => match import(&mut policies, true) {
            Ok(_) => true,
            Err(CardError::ForeignKey { .. }) if !card.jwks.is_empty() => false,
            Err(e) => panic!("a checked card whose change is accepted imports: {e}"),
        },
        Err(CardError::ForeignKey { .. }) if !card.jwks.is_empty() => false,
        Err(e) => panic!("a checked card's keys import: {e}"),
    };
    if imported {
        // The same card again changes nothing: its address's pin holds it.
        let again = import(&mut policies, false).expect("the same card imports again");
        assert!(!again.changes.needs_acceptance(), "{:?}", again.changes);
        assert_eq!(policies.minimum_for(&card.address), Some(card.minimum));
    }
});
