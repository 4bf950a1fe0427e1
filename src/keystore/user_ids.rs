//! How OpenPGP User IDs are read at a time: the functions the identity rules of
//! [`crate::identity::openpgp`] (whose doc states those rules) are made of. They live
//! below the key store, which lists each certificate's addresses with them, so that the
//! key store never imports `identity` (dependencies run one way: identity reads the
//! store, not the reverse). Nothing else should call them: use `identity::openpgp`.

use std::time::SystemTime;

use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::packet::UserID;
use openpgp::policy::Policy;
use openpgp::types::RevocationStatus;
use openpgp::Cert;
use time::OffsetDateTime;

/// The address of a User ID, lower case; `None` when it has none.
pub(crate) fn email(u: &UserID) -> Option<String> {
    u.email()
        .ok()
        .flatten()
        .map(|e| e.trim().to_ascii_lowercase())
}

/// The User IDs of `cert` whose binding is valid under `policy` at `at`: a live
/// self-signature made at or before `at`, and no self-revocation in effect at `at`
/// (as before this module: a designated revoker's revocation, which Sequoia cannot
/// verify without the revoker's certificate, does not silence a User ID).
pub(crate) fn valid_userids(cert: &Cert, policy: &dyn Policy, at: SystemTime) -> Vec<UserID> {
    let Ok(valid) = cert.with_policy(policy, at) else {
        return Vec::new();
    };
    valid
        .userids()
        .filter(|u| !matches!(u.revocation_status(), RevocationStatus::Revoked(_)))
        .map(|u| u.userid().clone())
        .collect()
}

pub(crate) fn sorted(mut out: Vec<String>) -> Vec<String> {
    out.sort();
    out.dedup();
    out
}

/// The addresses `cert` speaks for at `at`: those of its User IDs valid then, lower
/// case, sorted.
pub(crate) fn addresses_at(cert: &Cert, policy: &dyn Policy, at: SystemTime) -> Vec<String> {
    sorted(
        valid_userids(cert, policy, at)
            .iter()
            .filter_map(email)
            .collect(),
    )
}

/// The addresses a signature by `cert` speaks for when received at `at` and made (as
/// it says) at `signed_at`: those of the User IDs valid at both times. Without a
/// creation time (which Sequoia does not verify) only receipt is judged.
pub(crate) fn signer_addresses(
    cert: &Cert,
    policy: &dyn Policy,
    at: SystemTime,
    signed_at: Option<SystemTime>,
) -> Vec<String> {
    let now = valid_userids(cert, policy, at);
    let then = match signed_at {
        Some(t) => valid_userids(cert, policy, t),
        None => now.clone(),
    };
    sorted(
        now.iter()
            .filter(|u| then.contains(u))
            .filter_map(email)
            .collect(),
    )
}

/// Every address `cert`'s User IDs name, whether their bindings are valid, revoked,
/// expired, dated in the future or missing: what an Agent Card's key is judged on.
pub(crate) fn every_address(cert: &Cert) -> Vec<String> {
    sorted(cert.userids().filter_map(|u| email(u.userid())).collect())
}

pub(crate) fn rfc3339(t: SystemTime) -> String {
    let t = OffsetDateTime::from(t);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

/// A certificate refused at import.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportError {
    /// A User ID carries a binding self-signature dated after the import time.
    #[error("User ID {userid:?} of certificate {fingerprint} has a self-signature dated {signed_at}, after the time of import {at}: a binding dated in the future would later make the certificate speak for an address not shown at import; ask its owner for a certificate without it, or import it again once that time has passed")]
    FutureBinding {
        /// The User ID, as text (lossy).
        userid: String,
        /// The certificate's fingerprint, lower-case hex.
        fingerprint: String,
        /// The self-signature's creation time (RFC 3339).
        signed_at: String,
        /// The import time (RFC 3339).
        at: String,
    },
}

/// Refuses `cert` at import time `at` when one of its User IDs carries a binding
/// self-signature dated after `at`: see the module doc for why refusing, not
/// stripping, and why without skew.
pub(crate) fn check_import(cert: &Cert, at: SystemTime) -> Result<(), ImportError> {
    let limit = OffsetDateTime::from(at);
    for u in cert.userids() {
        let future = u
            .self_signatures()
            .filter_map(|s| s.signature_creation_time())
            .find(|t| OffsetDateTime::from(*t) > limit);
        if let Some(t) = future {
            return Err(ImportError::FutureBinding {
                userid: String::from_utf8_lossy(u.userid().value()).into_owned(),
                fingerprint: cert.fingerprint().to_hex().to_ascii_lowercase(),
                signed_at: rfc3339(t),
                at: rfc3339(at),
            });
        }
    }
    Ok(())
}
