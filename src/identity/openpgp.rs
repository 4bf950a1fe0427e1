//! OpenPGP certificates, keys and User IDs valid at receipt and at the signature's time.
//!
//! An OpenPGP certificate names its addresses in User IDs, each bound by a
//! self-signature whose creation time its holder chooses. Sequoia, asked about a
//! signature, validates the certificate at the signature's creation time, which the
//! signer also chooses: judged there alone, a back-dated signature revives a User ID
//! revoked since, and a binding dated in the future (invisible at import, on the card,
//! in `key list`) starts speaking for its address later. The rules here close both:
//!
//! - **Which addresses a signature speaks for** (`signer_addresses`): a User ID counts
//!   only if its binding is valid (self-signed under the policy, not expired, not
//!   revoked) at the time of receipt *and* was valid at the signature's creation time.
//!   One revoked at receipt, or bound only after receipt, never does, whatever the
//!   signature's date; one bound only after the signature was made does not either.
//!   A signature dated more than the skew after receipt is refused before this
//!   ([`super::check_signed_at`]). SOP (`Signatures::Collect`) keeps Sequoia's
//!   signature-time reading, which the SOP suites expect: these rules are for mail.
//! - **Which addresses a held certificate speaks for at a time** (`addresses_at`):
//!   the User IDs valid at that time; the store's parsed view computes them for the
//!   time asked (`open --at`, the receipt time), never from a wall-clock cache.
//! - **What an Agent Card's OpenPGP certificate names** (`every_address`): every User
//!   ID the certificate carries, valid or not, revoked, expired or bound in the future.
//!   "A card key names only the card's address" is judged on that list, so a User ID
//!   that is not valid at import (and would not show) cannot speak for another address
//!   later, and a revoked one cannot be revived by a back-dated signature.
//! - **Plain import** (`check_import`): a certificate whose User ID carries a
//!   binding self-signature dated after the import time is refused, naming the User
//!   ID. Such a binding is one the operator cannot see at import (`key list` and the
//!   import's listing show User IDs valid now) and that would later make the
//!   certificate speak for an address (or revive one revoked or expired now) without
//!   another import. No clock skew is allowed here, unlike for a message's signature:
//!   a binding even one minute ahead would become valid a minute after an import that
//!   did not show it, and the operator, unlike a receiver, can simply import again
//!   once that time has passed. Refusing, rather than stripping the signature, keeps
//!   the stored bytes exactly what the peer published and tells the operator why.
//!   With the first rule, a held certificate speaks at receipt only for User IDs
//!   whose bindings the operator could see when it was imported, and that are valid
//!   both at receipt and when the signature was made. A revocation dated in the
//!   future only narrows what the certificate says, so it is not refused.

pub use crate::keystore::user_ids::ImportError;
pub(crate) use crate::keystore::user_ids::{addresses_at, every_address, signer_addresses};
// The key store applies the import rule when it reads a certificate; named here, with
// the other rules, for the doc above.
#[allow(unused_imports)]
pub(crate) use crate::keystore::user_ids::check_import;

#[cfg(test)]
mod tests {
    use super::*;
    use openpgp::cert::prelude::*;
    use openpgp::packet::signature::SignatureBuilder;
    use openpgp::packet::UserID;
    use openpgp::policy::StandardPolicy;
    use openpgp::types::{ReasonForRevocation, SignatureType};
    use openpgp::Cert;
    use sequoia_openpgp as openpgp;
    use std::time::Duration as StdDuration;
    use std::time::SystemTime;

    const DAY: StdDuration = StdDuration::from_secs(86_400);

    /// Mallory's certificate made 10 days before `t0`, with `<mallory@x>` bound then.
    fn mallory(t0: SystemTime) -> (Cert, openpgp::crypto::KeyPair) {
        let (cert, _) = CertBuilder::new()
            .add_userid("<mallory@x.example>")
            .add_signing_subkey()
            .set_creation_time(t0 - 10 * DAY)
            .generate()
            .unwrap();
        let pair = cert
            .primary_key()
            .key()
            .clone()
            .parts_into_secret()
            .unwrap()
            .into_keypair()
            .unwrap();
        (cert, pair)
    }

    fn bind(cert: Cert, pair: &mut openpgp::crypto::KeyPair, uid: &str, t: SystemTime) -> Cert {
        let uid = UserID::from(uid);
        let sig = SignatureBuilder::new(SignatureType::PositiveCertification)
            .set_signature_creation_time(t)
            .unwrap()
            .sign_userid_binding(pair, cert.primary_key().key(), &uid)
            .unwrap();
        cert.insert_packets(vec![openpgp::Packet::from(uid), sig.into()])
            .unwrap()
            .0
    }

    fn revoke(cert: Cert, pair: &mut openpgp::crypto::KeyPair, uid: &str, t: SystemTime) -> Cert {
        let uid = UserID::from(uid);
        let sig = SignatureBuilder::new(SignatureType::CertificationRevocation)
            .set_signature_creation_time(t)
            .unwrap()
            .set_reason_for_revocation(ReasonForRevocation::UIDRetired, b"")
            .unwrap()
            .sign_userid_binding(pair, cert.primary_key().key(), &uid)
            .unwrap();
        cert.insert_packets(vec![openpgp::Packet::from(uid), sig.into()])
            .unwrap()
            .0
    }

    #[test]
    fn a_user_id_revoked_before_receipt_does_not_speak_for_a_back_dated_signature() {
        let p = StandardPolicy::new();
        let t0 = SystemTime::UNIX_EPOCH + StdDuration::from_secs(1_800_000_000);
        let (cert, mut pair) = mallory(t0);
        let cert = bind(cert, &mut pair, "<alice@x.example>", t0 - 9 * DAY);
        let cert = revoke(cert, &mut pair, "<alice@x.example>", t0 - 2 * DAY);
        // Sequoia at the signature's time (three days ago) still sees alice@.
        assert!(addresses_at(&cert, &p, t0 - 3 * DAY).contains(&"alice@x.example".into()));
        let got = signer_addresses(&cert, &p, t0, Some(t0 - 3 * DAY));
        assert_eq!(got, vec!["mallory@x.example".to_string()]);
        assert_eq!(
            every_address(&cert),
            vec!["alice@x.example".to_string(), "mallory@x.example".into()]
        );
    }

    #[test]
    fn a_user_id_whose_binding_expired_before_receipt_does_not_speak_for_an_older_signature() {
        let p = StandardPolicy::new();
        let t0 = SystemTime::UNIX_EPOCH + StdDuration::from_secs(1_800_000_000);
        let (cert, mut pair) = mallory(t0);
        let uid = UserID::from("<alice@x.example>");
        let sig = SignatureBuilder::new(SignatureType::PositiveCertification)
            .set_signature_creation_time(t0 - 9 * DAY)
            .unwrap()
            .set_signature_validity_period(6 * DAY)
            .unwrap()
            .sign_userid_binding(&mut pair, cert.primary_key().key(), &uid)
            .unwrap();
        let cert = cert
            .insert_packets(vec![openpgp::Packet::from(uid), sig.into()])
            .unwrap()
            .0;
        let mallory = vec!["mallory@x.example".to_string()];
        assert_eq!(signer_addresses(&cert, &p, t0, Some(t0 - 5 * DAY)), mallory);
        // Judged at a time when the binding was live, it speaks.
        assert_eq!(
            signer_addresses(&cert, &p, t0 - 4 * DAY, Some(t0 - 5 * DAY)).len(),
            2
        );
    }

    #[test]
    fn a_user_id_bound_after_receipt_or_after_the_signature_does_not_speak() {
        let p = StandardPolicy::new();
        let t0 = SystemTime::UNIX_EPOCH + StdDuration::from_secs(1_800_000_000);
        let (cert, mut pair) = mallory(t0);
        let cert = bind(
            cert,
            &mut pair,
            "<alice@x.example>",
            t0 + 60 * StdDuration::from_secs(1),
        );
        let mallory = vec!["mallory@x.example".to_string()];
        assert_eq!(addresses_at(&cert, &p, t0), mallory);
        assert_eq!(signer_addresses(&cert, &p, t0, Some(t0)), mallory);
        // Received later, a signature made before the binding still names only mallory@.
        assert_eq!(signer_addresses(&cert, &p, t0 + DAY, Some(t0)), mallory);
        assert_eq!(
            signer_addresses(&cert, &p, t0 + DAY, Some(t0 + DAY)).len(),
            2,
            "both bindings live at both times"
        );
        let e = check_import(&cert, t0).unwrap_err();
        assert!(e.to_string().contains("alice@x.example"), "{e}");
        assert!(check_import(&cert, t0 + DAY).is_ok());
    }
}
