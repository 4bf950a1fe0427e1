//! The signer's certificate: usable for email signatures at the signing time, and
//! trusted (pinned in the key store, or chaining to a trust anchor: decided by
//! [`crate::identity::x509`], re-exported here).

use der::asn1::ObjectIdentifier;
use time::OffsetDateTime;
use x509_cert::ext::pkix::{ExtendedKeyUsage, KeyUsage, KeyUsages};
use x509_cert::Certificate;

use super::SmimeError;
pub(crate) use crate::identity::x509::{valid_at, Trust};

const EMAIL_PROTECTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.4");
const ANY_EKU: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37.0");

fn unix(t: &x509_cert::time::Time) -> i64 {
    t.to_unix_duration().as_secs() as i64
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
