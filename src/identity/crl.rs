//! Revocation by the CRLs imported into the key store (RFC 5280 sections 5 and 6.3,
//! offline: nothing is fetched).
//!
//! The rules, and why:
//! - **A CRL counts for the issuer whose key signed it.** A certificate is checked
//!   against every CRL the store holds under its issuer's name (and, when both carry
//!   one, its authority key identifier) whose signature verifies under the key of an
//!   issuer the store validated ([`super::x509`]): an anchor, or a certificate that
//!   chains to one. The issuer's keyUsage does not decide: a look-alike copy of an
//!   issuer (same name, same key, no cRLSign) would otherwise make its own CRL
//!   "unusable" and un-revoke what it revoked. A CRL whose signature fails under the
//!   validated issuer's key is not that issuer's, and is ignored (a CRL under the
//!   root's name signed by someone else's key revokes nothing).
//! - **Held but uncheckable fails closed.** When the store holds a CRL for the
//!   certificate's issuer and no validated issuer key is at hand to check it (the
//!   issuer is neither an anchor nor chains to one), or the CRL is of a form this
//!   module does not implement, the certificate is refused: "we could not read the
//!   CRL" never means "not revoked".
//! - **Forms we do not implement are refused at import** (`unsupported_form`, called
//!   by `keystore::material`): an issuingDistributionPoint (which scopes a CRL to
//!   some certificates or reasons, or makes it indirect), a delta CRL, an entry for
//!   another issuer (certificateIssuer), and any critical extension not listed here.
//!   Each refusal names the extension, so the operator knows to import the issuer's
//!   complete, direct CRL instead.

use der::asn1::ObjectIdentifier;
use der::{Decode, Encode};
use time::OffsetDateTime;
use x509_cert::ext::pkix::AuthorityKeyIdentifier;
use x509_cert::Certificate;

pub(crate) use crate::keystore::CertificateList;

const AUTHORITY_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");

/// Why a CRL is of a form this module does not implement, naming the extension; `None`
/// when it is a complete, direct CRL read whole. The rule lives with the key store's
/// import, which refuses such a CRL; one already held fails its issuer's certificates
/// closed here.
pub(crate) use crate::keystore::unsupported_crl_form as unsupported_form;

/// The key identifier of an authorityKeyIdentifier extension's value, if it has one.
fn key_id_of(value: &[u8]) -> Option<Vec<u8>> {
    AuthorityKeyIdentifier::from_der(value)
        .ok()?
        .key_identifier
        .map(|k| k.as_bytes().to_vec())
}

/// The authority key identifier a certificate names for its issuer.
fn cert_aki(cert: &Certificate) -> Option<Vec<u8>> {
    match cert
        .tbs_certificate()
        .get_extension::<AuthorityKeyIdentifier>()
    {
        Ok(Some((_, aki))) => aki.key_identifier.map(|k| k.as_bytes().to_vec()),
        _ => None,
    }
}

fn crl_aki(crl: &CertificateList) -> Option<Vec<u8>> {
    crl.tbs_cert_list
        .crl_extensions
        .iter()
        .flatten()
        .find(|e| e.extn_id == AUTHORITY_KEY_ID)
        .and_then(|e| key_id_of(e.extn_value.as_bytes()))
}

/// The store holds `crl` for `cert`'s issuer: the same issuer name (RFC 5280 7.1,
/// [`super::x509::same_name`]: a CRL written with a renewed issuer certificate whose
/// name is encoded otherwise is still that issuer's, and must not go unread) and, when
/// both name one, the same authority key identifier (a CRL of another key under the
/// same name, such as a re-keyed CA's, is not this issuer's).
fn held_for(crl: &CertificateList, cert: &Certificate) -> bool {
    if !super::x509::same_name(&crl.tbs_cert_list.issuer, cert.tbs_certificate().issuer()) {
        return false;
    }
    match (crl_aki(crl), cert_aki(cert)) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// `issuer`'s key signed `crl`, with the outer algorithm the signed part names.
fn signed_by(crl: &CertificateList, issuer: &Certificate) -> bool {
    let list = &crl.tbs_cert_list;
    if list.signature != crl.signature_algorithm || crl.signature.unused_bits() != 0 {
        return false;
    }
    let Ok(tbs) = list.to_der() else {
        return false;
    };
    super::x509::verify_signature(
        issuer.tbs_certificate().subject_public_key_info(),
        &crl.signature_algorithm,
        crate::asn1::oids::SHA256,
        &tbs,
        crl.signature.raw_bytes(),
    )
    .is_ok()
}

/// A short name for errors: the subject, else "a certificate". Quoted
/// ([`crate::error::quoted`]): the subject is whatever the certificate's maker wrote,
/// the attacker's own for a self-signed signer (issue #58).
pub(crate) fn name(cert: &Certificate) -> String {
    let s = cert.tbs_certificate().subject().to_string();
    if s.is_empty() {
        "a certificate".into()
    } else {
        format!("certificate {}", crate::error::quoted(s))
    }
}

/// The CRLs a certificate is checked against.
pub(crate) struct Revocation<'a> {
    /// The store's CRLs, decoded.
    pub(crate) crls: &'a [CertificateList],
    /// Refuse a certificate whose issuer has no current CRL here.
    pub(crate) require: bool,
}

impl Revocation<'_> {
    /// `cert` is not revoked at `at` by a CRL the store holds for its issuer, checked
    /// under the keys of `issuers` (the issuers of `cert` the store validated: those
    /// whose key verifies `cert`; empty when none could be). With
    /// [`Revocation::require`], a CRL of the issuer current at `at` must be held.
    pub(crate) fn check(
        &self,
        cert: &Certificate,
        issuers: &[&Certificate],
        at: OffsetDateTime,
    ) -> Result<(), String> {
        if self.crls.is_empty() && !self.require {
            return Ok(());
        }
        let tbs = cert.tbs_certificate();
        let t = at.unix_timestamp();
        let secs = |time: &x509_cert::time::Time| time.to_unix_duration().as_secs() as i64;
        let mut current = false;
        for crl in self.crls.iter().filter(|c| held_for(c, cert)) {
            if let Some(why) = unsupported_form(crl) {
                return Err(format!(
                    "the revocation of {} cannot be checked: the store holds a CRL of {} and {why} \
                     (delete it with `mailseal key delete`, and import the issuer's complete CRL)",
                    name(cert),
                    tbs.issuer()
                ));
            }
            if issuers.is_empty() {
                return Err(format!(
                    "the revocation of {} cannot be checked: the store holds a CRL of {} but no \
                     issuer certificate of it that chains to a trust anchor (import the issuer's \
                     CA certificate, `mailseal key import`, or its root with --trusted)",
                    name(cert),
                    tbs.issuer()
                ));
            }
            if !issuers.iter().any(|i| signed_by(crl, i)) {
                // Not this issuer's CRL: someone else's key under its name.
                continue;
            }
            if secs(&crl.tbs_cert_list.this_update) > t {
                continue;
            }
            let revoked = crl
                .tbs_cert_list
                .revoked_certificates
                .iter()
                .flatten()
                .any(|r| r.serial_number == *tbs.serial_number() && secs(&r.revocation_date) <= t);
            if revoked {
                return Err(format!("{} is revoked (CRL of its issuer)", name(cert)));
            }
            if crl
                .tbs_cert_list
                .next_update
                .as_ref()
                .is_none_or(|n| secs(n) >= t)
            {
                current = true;
            }
        }
        if self.require && !current {
            return Err(format!(
                "no current CRL of {} is held for {} (key import a CRL file)",
                tbs.issuer(),
                name(cert)
            ));
        }
        Ok(())
    }
}

/// The store's CRLs, decoded (one that does not decode was refused at import; a
/// damaged one is skipped, as if absent).
pub(crate) fn decode_crls(ders: Vec<Vec<u8>>) -> Vec<CertificateList> {
    ders.iter()
        .filter_map(|d| CertificateList::from_der(d).ok())
        .collect()
}
