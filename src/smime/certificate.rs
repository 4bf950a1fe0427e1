//! The signer's certificate: usable for email signatures at the signing time, and
//! trusted (pinned in the key store, or chaining to a trust anchor).

use der::asn1::ObjectIdentifier;
use der::Encode;
use time::OffsetDateTime;
use x509_cert::ext::pkix::{ExtendedKeyUsage, KeyUsage, KeyUsages};
use x509_cert::Certificate;

use super::path::Revocation;
use super::signed_data::verify_signature;
use super::SmimeError;
use crate::asn1::oids::SHA256;

const EMAIL_PROTECTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.4");
const ANY_EKU: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37.0");

fn unix(t: &x509_cert::time::Time) -> i64 {
    t.to_unix_duration().as_secs() as i64
}

/// Valid at `at` (RFC 5280 4.1.2.5, inclusive bounds).
pub(super) fn valid_at(cert: &Certificate, at: OffsetDateTime) -> bool {
    let v = cert.tbs_certificate().validity();
    let t = at.unix_timestamp();
    unix(&v.not_before) <= t && t <= unix(&v.not_after)
}

/// The signer's certificate may sign email at `at`: validity, key usage
/// (digitalSignature or nonRepudiation) and extended key usage (emailProtection) when
/// those extensions are present.
pub(crate) fn check_signer_usage(cert: &Certificate, at: OffsetDateTime) -> Result<(), SmimeError> {
    if !valid_at(cert, at) {
        // `at` is the time of receipt when a receiver judges a signer, the signing
        // time when we choose our own key: the message names the moment and the
        // certificate's window rather than guessing which.
        let v = cert.tbs_certificate().validity();
        let date = |t: i64| {
            OffsetDateTime::from_unix_timestamp(t)
                .ok()
                .and_then(|d| {
                    d.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .unwrap_or_else(|| t.to_string())
        };
        return Err(SmimeError::Certificate(format!(
            "the signer certificate is not valid at {} (valid from {} to {})",
            date(at.unix_timestamp()),
            date(unix(&v.not_before)),
            date(unix(&v.not_after)),
        )));
    }
    let tbs = cert.tbs_certificate();
    if let Ok(Some((_, ku))) = tbs.get_extension::<KeyUsage>() {
        if !(ku.0.contains(KeyUsages::DigitalSignature) || ku.0.contains(KeyUsages::NonRepudiation))
        {
            return Err(SmimeError::Certificate(
                "the signer certificate's key usage excludes signatures".into(),
            ));
        }
    }
    if let Ok(Some((_, eku))) = tbs.get_extension::<ExtendedKeyUsage>() {
        if !eku
            .0
            .iter()
            .any(|o| *o == EMAIL_PROTECTION || *o == ANY_EKU)
        {
            return Err(SmimeError::Certificate(
                "the signer certificate is not for email protection".into(),
            ));
        }
    }
    Ok(())
}

/// A recipient certificate may receive encrypted email at `at`: validity, key usage
/// (keyEncipherment) and extended key usage (emailProtection) when present.
pub(crate) fn usable_for_encryption(cert: &Certificate, at: OffsetDateTime) -> bool {
    if !valid_at(cert, at) {
        return false;
    }
    let tbs = cert.tbs_certificate();
    if let Ok(Some((_, ku))) = tbs.get_extension::<KeyUsage>() {
        // RSA keys transport the content key; EC keys agree on one.
        let needed =
            if tbs.subject_public_key_info().algorithm.oid == crate::asn1::oids::RSA_ENCRYPTION {
                KeyUsages::KeyEncipherment
            } else {
                KeyUsages::KeyAgreement
            };
        if !ku.0.contains(needed) {
            return false;
        }
    }
    if let Ok(Some((_, eku))) = tbs.get_extension::<ExtendedKeyUsage>() {
        if !eku
            .0
            .iter()
            .any(|o| *o == EMAIL_PROTECTION || *o == ANY_EKU)
        {
            return false;
        }
    }
    true
}

/// `child` is signed by `issuer`'s key and names it as its issuer.
pub(super) fn issued_by(child: &Certificate, issuer: &Certificate) -> bool {
    if child.tbs_certificate().issuer() != issuer.tbs_certificate().subject() {
        return false;
    }
    // RFC 5280 4.1.1.2: the outer algorithm, which the signature does not cover, must
    // be the one inside the signed part.
    if child.signature_algorithm() != child.tbs_certificate().signature() {
        return false;
    }
    // Signatures are whole octets: an unused-bits count is unsigned and must be zero.
    if child.signature().unused_bits() != 0 {
        return false;
    }
    let Ok(tbs) = child.tbs_certificate().to_der() else {
        return false;
    };
    verify_signature(
        issuer.tbs_certificate().subject_public_key_info(),
        child.signature_algorithm(),
        SHA256,
        &tbs,
        child.signature().raw_bytes(),
    )
    .is_ok()
}

/// How the signer's certificate is trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Trust {
    /// The exact certificate was imported into the key store for this address.
    Pinned,
    /// It chains to a trust anchor (intermediates from the message) along a path that
    /// RFC 5280 section 6 validates.
    Anchored,
    /// Neither: a self-signed or unknown signer.
    Unknown,
    /// An issuer it names is known but did not sign it: the certificate was altered.
    Broken,
    /// Every path to an anchor breaks a rule of RFC 5280 section 6 (the first reason).
    Invalid(String),
}

/// Whether `cert` is pinned (`pinned`: its exact encoding is in the key store for the
/// address it speaks for; the caller compares the bytes it received, so nothing is
/// encoded again here), or chains through `intermediates` to one of `anchors` on a
/// path valid at `at` (see [`super::path`]).
pub(crate) fn trust(
    cert: &Certificate,
    intermediates: &[Certificate],
    anchors: &[Certificate],
    pinned: bool,
    at: OffsetDateTime,
    revocation: &Revocation<'_>,
) -> Trust {
    if let Err(e) = super::path::check_extensions(cert) {
        return Trust::Invalid(e);
    }
    if pinned {
        return match pinned_revocation(cert, intermediates, anchors, at, revocation) {
            Ok(()) => Trust::Pinned,
            Err(e) => Trust::Invalid(e),
        };
    }
    super::path::validate(cert, intermediates, anchors, at, revocation)
}

/// A pinned certificate is not checked for a path, but a CRL of its issuer (an anchor
/// or a certificate the message carries, whose key verifies it) still revokes it. A
/// self-issued one has no issuer to revoke it: removing it from the store does.
fn pinned_revocation(
    cert: &Certificate,
    intermediates: &[Certificate],
    anchors: &[Certificate],
    at: OffsetDateTime,
    revocation: &Revocation<'_>,
) -> Result<(), String> {
    let tbs = cert.tbs_certificate();
    if tbs.subject() == tbs.issuer() {
        return Ok(());
    }
    let issuers: Vec<&Certificate> = anchors
        .iter()
        .chain(intermediates)
        .filter(|i| issued_by(cert, i))
        .take(4)
        .collect();
    if issuers.is_empty() {
        return Revocation {
            crls: &[],
            require: revocation.require,
        }
        .check(cert, cert, at);
    }
    let mut first_err = None;
    for i in issuers {
        match revocation.check(cert, i, at) {
            Ok(()) => return Ok(()),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Err(first_err.unwrap_or_default())
}
