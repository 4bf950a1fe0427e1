//! Cost (THREATS.md): a certificate's author chooses what Sequoia's canonicalisation
//! costs. Junk signatures that fit nowhere are each hashed against every User ID, and
//! every User ID makes finding the primary one longer: a 1 MB certificate took 28 s to
//! read. Here Mallory controls everything but Bob's store: her own keys, and what she
//! appends to Bob's certificate before it reaches a SOP command or an import (as a
//! keyserver once let anyone do). Bob's certificate still works, the junk is not
//! stored, and a certificate with more User IDs than one may have is refused.

use std::path::Path;

use sequoia_openpgp as openpgp;

use openpgp::cert::{Cert, CertBuilder};
use openpgp::packet::signature::SignatureBuilder;
use openpgp::packet::{Packet, UserID};
use openpgp::parse::Parse;
use openpgp::serialize::SerializeInto;
use openpgp::types::SignatureType;

use crate::common::run;
use crate::signers::primary_pair;
use crate::sop_roundtrip::{key, ok, sop};

const TEXT: &[u8] = b"for Bob only\n";

/// Bob's certificate (`bob.cert` in `dir`) with one real certification of his User ID
/// by Mallory, which fits where it stands, then flooded as [`flood`] says with
/// certifications by Mallory's own key.
fn flooded(dir: &Path, uids: usize, junk: usize) -> (Cert, Vec<u8>) {
    let bob = Cert::from_bytes(&std::fs::read(dir.join("bob.cert")).unwrap()).unwrap();
    let (mallory, _) = CertBuilder::new()
        .add_userid("mallory@example.net")
        .generate()
        .unwrap();
    let mut signer = primary_pair(&mallory);
    let bob_uid = bob.userids().next().unwrap().userid().clone();
    let vouch = SignatureBuilder::new(SignatureType::GenericCertification)
        .sign_userid_binding(&mut signer, bob.primary_key().key(), &bob_uid)
        .unwrap();
    let bob = bob.insert_packets(vouch).unwrap().0;
    let bytes = flood(&bob, &mallory, uids, junk);
    (bob, bytes)
}

/// `cert` with `uids` bare User IDs appended, a copy of its first subkey and `junk`
/// certifications by `signer`'s primary key of User IDs no certificate has.
fn flood(cert: &Cert, signer: &Cert, uids: usize, junk: usize) -> Vec<u8> {
    let mut signer = primary_pair(signer);
    let mut bytes = cert.to_vec().unwrap();
    for i in 0..uids {
        let uid = UserID::from(format!("flood{i}@example.net"));
        bytes.extend(Packet::from(uid).to_vec().unwrap());
    }
    // After a subkey no certification fits, not even by a chance match of its
    // two-octet digest prefix.
    let subkey = cert.keys().subkeys().next().unwrap().key().clone();
    bytes.extend(Packet::from(subkey).to_vec().unwrap());
    for i in 0..junk {
        let ghost = UserID::from(format!("ghost{i}@example.net"));
        let sig = SignatureBuilder::new(SignatureType::GenericCertification)
            .sign_userid_binding(&mut signer, cert.primary_key().key(), &ghost)
            .unwrap();
        bytes.extend(Packet::from(sig).to_vec().unwrap());
    }
    bytes
}

/// A certificate of Mallory's own with `n` User IDs, each bound by her.
fn many_user_ids(n: usize, tag: &str) -> Vec<u8> {
    let mut builder = CertBuilder::general_purpose(None::<UserID>);
    for i in 0..n {
        builder = builder.add_userid(format!("m{i}.{tag}@example.net"));
    }
    builder.generate().unwrap().0.to_vec().unwrap()
}

#[test]
fn fail_cost_a_flooded_certificate_is_read_without_its_junk() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    key("mailseal", d, "bob", "bob@example.org");
    let (bob, flood) = flooded(d, 200, 2_000);
    std::fs::write(d.join("flooded.cert"), &flood).unwrap();
    // Sequoia, unbounded, searches for a place for each (and finds one for the few
    // whose two-octet digest prefix happens to match some User ID's).
    assert!(Cert::from_bytes(&flood).unwrap().bad_signatures().count() > 1_950);

    // Encrypting to it and verifying with it still work, for Bob.
    let sealed = ok("mailseal", d, &["encrypt", "flooded.cert"], TEXT);
    assert_eq!(ok("mailseal", d, &["decrypt", "bob.key"], &sealed), TEXT);
    let sig = ok("mailseal", d, &["sign", "bob.key"], TEXT);
    std::fs::write(d.join("text.sig"), &sig).unwrap();
    let verified = ok("mailseal", d, &["verify", "text.sig", "flooded.cert"], TEXT);
    let fingerprint = bob.fingerprint().to_hex();
    assert!(
        String::from_utf8_lossy(&verified).contains(&fingerprint),
        "{}",
        String::from_utf8_lossy(&verified)
    );

    // Imported, Bob's address and Mallory's real certification stay; the junk is not
    // stored, so no later reading searches for it.
    let store = d.join("store");
    import(&store, &d.join("flooded.cert"));
    let out = run(
        &["key", "list", "--json", "--store", store.to_str().unwrap()],
        b"",
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["emails"], serde_json::json!(["bob@example.org"]));
    let stored: Vec<Cert> = crate::common::cli_store(&store)
        .openpgp_certificates()
        .unwrap()
        .iter()
        .map(|bytes| Cert::from_bytes(bytes).unwrap())
        .collect();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].fingerprint(), bob.fingerprint());
    assert_eq!(stored[0].bad_signatures().count(), 0);
    // Mallory's real certification of Bob stays on his User ID (a junk one may stand
    // on a bare User ID too, where a chance match of its two-octet digest prefix puts
    // it, as Sequoia would).
    let bob_uid = bob.userids().next().unwrap();
    let vouch = bob_uid.certifications().next().unwrap();
    let stored_uid = stored[0]
        .userids()
        .find(|u| u.userid() == bob_uid.userid())
        .unwrap();
    assert!(
        stored_uid.certifications().any(|c| c == vouch),
        "Mallory's real certification of Bob"
    );
    let certifications: usize = stored[0]
        .userids()
        .map(|u| u.certifications().count())
        .sum();
    assert!(certifications < 20, "{certifications} certifications kept");
}

#[test]
fn fail_cost_more_user_ids_than_a_certificate_may_have_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("many.cert"), many_user_ids(300, "a")).unwrap();
    let out = sop("mailseal", d, &["encrypt", "many.cert"], TEXT);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("300 User IDs"), "{err}");
    assert!(out.stdout.is_empty());
    let out = run(
        &[
            "key",
            "import",
            "--store",
            d.join("store").to_str().unwrap(),
            d.join("many.cert").to_str().unwrap(),
        ],
        b"",
    );
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not imported") && err.contains("User IDs"),
        "{err}"
    );

    // Under the bound in each input, over it once they are merged.
    let (mallory, _) = CertBuilder::general_purpose(Some("mallory@example.net"))
        .generate()
        .unwrap();
    let mut signer = primary_pair(&mallory);
    for half in ["one", "two"] {
        let mut copy = mallory.clone();
        for i in 0..150 {
            let uid = UserID::from(format!("{half}{i}@example.net"));
            let binding = uid
                .bind(
                    &mut signer,
                    &mallory,
                    SignatureBuilder::new(SignatureType::PositiveCertification),
                )
                .unwrap();
            copy = copy
                .insert_packets(vec![Packet::from(uid), binding.into()])
                .unwrap()
                .0;
        }
        std::fs::write(d.join(format!("{half}.cert")), copy.to_vec().unwrap()).unwrap();
        ok("mailseal", d, &["encrypt", &format!("{half}.cert")], TEXT);
    }
    let out = sop("mailseal", d, &["encrypt", "one.cert", "two.cert"], TEXT);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("across the inputs"), "{err}");
}

/// The attacker review's finding: signatures were dropped by what they sign, so a copy
/// of Alice's subkey revocation inside Mallory's flooded certificate took Alice's own
/// off, and `sop encrypt` to the keyring encrypted to the revoked subkey.
#[test]
fn fail_cost_a_flooded_certificate_cannot_take_a_revocation_off_another() {
    use openpgp::cert::amalgamation::ValidAmalgamation;
    use openpgp::cert::SubkeyRevocationBuilder;
    use openpgp::types::ReasonForRevocation;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (alice, _) = CertBuilder::general_purpose(Some("alice@example.org"))
        .generate()
        .unwrap();
    let subkey = alice
        .keys()
        .subkeys()
        .find(|k| {
            k.self_signatures()
                .next()
                .unwrap()
                .key_flags()
                .unwrap()
                .for_transport_encryption()
        })
        .unwrap()
        .key()
        .clone();
    let revocation = SubkeyRevocationBuilder::new()
        .set_reason_for_revocation(ReasonForRevocation::KeyCompromised, b"lost")
        .unwrap()
        .build(&mut primary_pair(&alice), &alice, &subkey, None)
        .unwrap();
    let alice = alice.insert_packets(revocation.clone()).unwrap().0;
    let (mallory, _) = CertBuilder::general_purpose(Some("mallory@example.net"))
        .generate()
        .unwrap();
    let mut keyring = alice.to_vec().unwrap();
    keyring.extend(flood(&mallory, &mallory, 200, 2_000));
    keyring.extend(Packet::from(revocation).to_vec().unwrap());
    std::fs::write(d.join("keyring.pgp"), &keyring).unwrap();
    std::fs::write(d.join("alice.pgp"), alice.to_vec().unwrap()).unwrap();

    // Alice alone cannot be encrypted to, nor with the keyring.
    for certs in ["alice.pgp", "keyring.pgp"] {
        let out = sop("mailseal", d, &["encrypt", certs], TEXT);
        assert_eq!(
            out.status.code(),
            Some(17),
            "{certs}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    // Imported, Alice's subkey stays revoked.
    let store = d.join("store");
    import(&store, &d.join("keyring.pgp"));
    let policy = openpgp::policy::StandardPolicy::new();
    let stored = crate::common::cli_store(&store)
        .openpgp_certificates()
        .unwrap()
        .iter()
        .map(|bytes| Cert::from_bytes(bytes).unwrap())
        .find(|c| c.fingerprint() == alice.fingerprint())
        .unwrap();
    let valid = stored.with_policy(&policy, None).unwrap();
    let key = valid
        .keys()
        .subkeys()
        .key_handle(subkey.key_handle())
        .next()
        .unwrap();
    assert!(matches!(
        key.revocation_status(),
        openpgp::types::RevocationStatus::Revoked(_)
    ));
}

/// `file` imported into the store at `store`, which must succeed.
fn import(store: &Path, file: &Path) {
    let out = run(
        &[
            "key",
            "import",
            "--store",
            store.to_str().unwrap(),
            file.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
