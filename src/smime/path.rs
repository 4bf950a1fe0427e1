//! Certification path validation (RFC 5280 section 6) for what S/MIME uses: from the
//! signer's certificate through the intermediates a message carries to a trust anchor
//! of the key store.
//!
//! Hand-written because no maintained pure-Rust crate validates X.509 paths for email
//! (`webpki` and `rustls-webpki` validate server names only). What it checks, for
//! every certificate on the path:
//! - validity at the validation time (the time of receipt, never a signer-chosen
//!   `signingTime`), the anchor's own validity included;
//! - no extension twice, no critical extension it does not process;
//! - issuers: basicConstraints with cA, keyCertSign when keyUsage is present, and the
//!   pathLenConstraint of the anchor and every intermediate;
//! - nameConstraints of the anchor and every intermediate on rfc822Name (mailbox, host
//!   and `.domain` forms) and directoryName; a constraint on any other name form
//!   refuses a certificate that carries a name of that form (fail closed).
//!
//! - revocation by the CRLs imported into the key store ([`Revocation`]): a
//!   certificate its issuer's CRL lists is refused; a policy can refuse a certificate
//!   whose issuer has no current CRL here. A CRL counts only when the issuer's key
//!   verifies it, the issuer may sign CRLs, and no critical extension scopes it.
//!
//! What it does not do: certificate policy processing (a critical policyConstraints,
//! policyMappings or inhibitAnyPolicy is refused as unprocessed), delta or indirect
//! CRLs, or fetching anything (no OCSP, no distribution points). Anchors' constraints are enforced
//! (RFC 5937 style) although RFC 5280 leaves that to the implementation: an operator
//! who configures a constrained anchor means it.
//!
//! The search is bounded: at most [`MAX_CHAIN`] certificates deep and
//! [`MAX_SIGNATURE_CHECKS`] signature verifications per message, whatever the message
//! carries, so a CMS full of look-alike intermediates costs a fixed amount of work.

use der::asn1::ObjectIdentifier;
use der::{Encode, Tagged};
use time::OffsetDateTime;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, NameConstraints, SubjectAltName,
};
use x509_cert::name::{Name, RelativeDistinguishedName};
use x509_cert::Certificate;

use super::certificate::{issued_by, valid_at, Trust};
pub(crate) use crate::keystore::CertificateList;

/// Longest chain from the signer to an anchor (signer, intermediates, anchor).
pub(crate) const MAX_CHAIN: usize = 6;
/// Signature verifications spent looking for a path, per signer.
pub(crate) const MAX_SIGNATURE_CHECKS: usize = 16;
/// Carried certificates considered as intermediates (a message may carry more; the
/// rest are ignored).
const MAX_INTERMEDIATES: usize = 32;

const BASIC_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.19");
const KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.15");
const EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
const SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
const NAME_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.30");
const CERTIFICATE_POLICIES: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.32");
const SUBJECT_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.14");
const AUTHORITY_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");

/// Extensions this module (or the signer checks) process, and so may be critical.
/// certificatePolicies is accepted without policy processing: with no explicit policy
/// required (we never require one, and a critical policyConstraints that could is
/// refused) the path's validity does not depend on it.
const PROCESSED: [ObjectIdentifier; 8] = [
    BASIC_CONSTRAINTS,
    KEY_USAGE,
    EXT_KEY_USAGE,
    SUBJECT_ALT_NAME,
    NAME_CONSTRAINTS,
    CERTIFICATE_POLICIES,
    SUBJECT_KEY_ID,
    AUTHORITY_KEY_ID,
];

/// A certificate's extensions are each present once, the critical ones are processed
/// here, and the processed ones decode.
pub(crate) fn check_extensions(cert: &Certificate) -> Result<(), String> {
    let tbs = cert.tbs_certificate();
    let Some(exts) = tbs.extensions() else {
        return Ok(());
    };
    for (i, e) in exts.iter().enumerate() {
        if exts[..i].iter().any(|p| p.extn_id == e.extn_id) {
            return Err(format!("{} has extension {} twice", name(cert), e.extn_id));
        }
        if e.critical && !PROCESSED.contains(&e.extn_id) {
            return Err(format!(
                "{} has a critical extension {} that is not processed",
                name(cert),
                e.extn_id
            ));
        }
    }
    let undecodable = tbs.get_extension::<BasicConstraints>().is_err()
        || tbs.get_extension::<KeyUsage>().is_err()
        || tbs.get_extension::<ExtendedKeyUsage>().is_err()
        || tbs.get_extension::<SubjectAltName>().is_err()
        || tbs.get_extension::<NameConstraints>().is_err();
    if undecodable {
        return Err(format!(
            "{} has an extension that does not decode",
            name(cert)
        ));
    }
    Ok(())
}

/// A short name for errors: the subject, else "a certificate".
fn name(cert: &Certificate) -> String {
    let s = cert.tbs_certificate().subject().to_string();
    if s.is_empty() {
        "a certificate".into()
    } else {
        format!("certificate {s}")
    }
}

/// The search for a valid path from a signer to an anchor.
struct Search<'a> {
    anchors: &'a [Certificate],
    intermediates: &'a [Certificate],
    at: OffsetDateTime,
    revocation: &'a Revocation<'a>,
    budget: usize,
    /// The first reason an anchored path was invalid.
    invalid: Option<String>,
    /// An anchor's name matched but its key did not verify the certificate.
    broken: bool,
}

/// Whether `leaf` chains through `intermediates` to one of `anchors` on a path valid
/// at `at`.
pub(crate) fn validate(
    leaf: &Certificate,
    intermediates: &[Certificate],
    anchors: &[Certificate],
    at: OffsetDateTime,
    revocation: &Revocation<'_>,
) -> Trust {
    let mut search = Search {
        anchors,
        intermediates: &intermediates[..intermediates.len().min(MAX_INTERMEDIATES)],
        at,
        revocation,
        budget: MAX_SIGNATURE_CHECKS,
        invalid: None,
        broken: false,
    };
    let mut path = vec![leaf];
    if search.extend(&mut path) {
        Trust::Anchored
    } else if let Some(reason) = search.invalid {
        Trust::Invalid(reason)
    } else if search.broken {
        Trust::Broken
    } else {
        Trust::Unknown
    }
}

impl<'a> Search<'a> {
    /// Depth first from the top of `path` (leaf first); true when a valid path is found.
    fn extend(&mut self, path: &mut Vec<&'a Certificate>) -> bool {
        let Some(&current) = path.last() else {
            return false;
        };
        let issuer = current.tbs_certificate().issuer();
        for anchor in self.anchors {
            if anchor.tbs_certificate().subject() != issuer || self.budget == 0 {
                continue;
            }
            self.budget -= 1;
            if !issued_by(current, anchor) {
                self.broken = true;
                continue;
            }
            match check_path(anchor, path, self.at, self.revocation) {
                Ok(()) => return true,
                Err(e) => {
                    self.invalid.get_or_insert(e);
                }
            }
        }
        if path.len() + 1 >= MAX_CHAIN {
            return false;
        }
        for ca in self.intermediates {
            if ca.tbs_certificate().subject() != issuer || path.contains(&ca) || self.budget == 0 {
                continue;
            }
            self.budget -= 1;
            if issued_by(current, ca) {
                path.push(ca);
                if self.extend(path) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
}

/// RFC 5280 section 6.1 over `anchor` and `path` (leaf first, the anchor's subject
/// just above its last element), whose signatures were checked while it was built.
fn check_path(
    anchor: &Certificate,
    path: &[&Certificate],
    at: OffsetDateTime,
    revocation: &Revocation<'_>,
) -> Result<(), String> {
    check_extensions(anchor)?;
    if !valid_at(anchor, at) {
        return Err(format!(
            "the trust anchor {} is not valid now",
            name(anchor)
        ));
    }
    let mut max_len = check_issuer(anchor)?.unwrap_or(usize::MAX);
    let mut constraints: Vec<NameConstraints> = name_constraints(anchor).into_iter().collect();
    let mut issuer = anchor;
    for (depth, cert) in path.iter().rev().enumerate() {
        let is_leaf = depth + 1 == path.len();
        check_extensions(cert)?;
        revocation.check(cert, issuer, at)?;
        issuer = cert;
        if !valid_at(cert, at) {
            return Err(format!(
                "{} is not valid at the validation time",
                name(cert)
            ));
        }
        let tbs = cert.tbs_certificate();
        let self_issued = tbs.subject() == tbs.issuer();
        // RFC 5280 6.1.3 (b), (c): a self-issued intermediate is exempt.
        if is_leaf || !self_issued {
            for nc in &constraints {
                check_names(cert, nc)?;
            }
        }
        if is_leaf {
            break;
        }
        let own_len = check_issuer(cert)?;
        if !self_issued {
            if max_len == 0 {
                return Err(format!(
                    "{} exceeds an issuer's path length constraint",
                    name(cert)
                ));
            }
            max_len -= 1;
        }
        if let Some(len) = own_len {
            max_len = max_len.min(len);
        }
        constraints.extend(name_constraints(cert));
    }
    Ok(())
}

/// An issuer is a CA (basicConstraints cA; an anchor without the extension is a
/// version 1 root and allowed) that may sign certificates; returns its
/// pathLenConstraint.
fn check_issuer(cert: &Certificate) -> Result<Option<usize>, String> {
    let tbs = cert.tbs_certificate();
    let bc = tbs
        .get_extension::<BasicConstraints>()
        .map_err(|_| format!("{} has a basicConstraints that does not decode", name(cert)))?;
    let is_v1_root = bc.is_none()
        && tbs.extensions().is_none()
        && tbs.subject() == tbs.issuer()
        && issued_by(cert, cert);
    let path_len = match bc {
        Some((_, bc)) if bc.ca => bc.path_len_constraint.map(usize::from),
        None if is_v1_root => None,
        _ => {
            return Err(format!(
                "{} is not a CA but issued a certificate",
                name(cert)
            ))
        }
    };
    if let Ok(Some((_, ku))) = tbs.get_extension::<KeyUsage>() {
        if !ku.0.contains(KeyUsages::KeyCertSign) {
            return Err(format!(
                "{} issued a certificate but its key usage excludes keyCertSign",
                name(cert)
            ));
        }
    }
    Ok(path_len)
}

/// The CRLs a path is checked against (RFC 5280 section 6.3, offline: imported into
/// the key store, never fetched).
pub(crate) struct Revocation<'a> {
    /// The store's CRLs, decoded.
    pub(crate) crls: &'a [CertificateList],
    /// Refuse a certificate whose issuer has no current CRL here.
    pub(crate) require: bool,
}

/// CRL extensions this module processes: cRLNumber and authorityKeyIdentifier carry
/// nothing that changes the answer. Any other critical one (an issuing distribution
/// point that scopes the CRL, a delta CRL indicator) makes the CRL unusable here.
const CRL_NUMBER: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.20");
/// reasonCode and invalidityDate entry extensions are informational.
const REASON_CODE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.21");
const INVALIDITY_DATE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.24");

impl Revocation<'_> {
    /// `cert`, issued by `issuer`, is not revoked at `at` by a CRL `issuer` signed;
    /// with [`Revocation::require`], such a CRL current at `at` must be held.
    pub(crate) fn check(
        &self,
        cert: &Certificate,
        issuer: &Certificate,
        at: OffsetDateTime,
    ) -> Result<(), String> {
        if self.crls.is_empty() && !self.require {
            return Ok(());
        }
        let tbs = cert.tbs_certificate();
        let t = at.unix_timestamp();
        let secs = |time: &x509_cert::time::Time| time.to_unix_duration().as_secs() as i64;
        let mut current = false;
        for crl in self
            .crls
            .iter()
            .filter(|c| &c.tbs_cert_list.issuer == tbs.issuer())
        {
            if !crl_usable(crl, issuer) || secs(&crl.tbs_cert_list.this_update) > t {
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

/// A CRL may decide about `issuer`'s certificates: `issuer` signed it (and may sign
/// CRLs), and it has no critical extension that scopes or qualifies it.
fn crl_usable(crl: &CertificateList, issuer: &Certificate) -> bool {
    let list = &crl.tbs_cert_list;
    if list.signature != crl.signature_algorithm || crl.signature.unused_bits() != 0 {
        return false;
    }
    let critical_unknown = list
        .crl_extensions
        .iter()
        .flatten()
        .any(|e| e.critical && e.extn_id != CRL_NUMBER && e.extn_id != AUTHORITY_KEY_ID)
        || list.revoked_certificates.iter().flatten().any(|r| {
            r.crl_entry_extensions
                .iter()
                .flatten()
                .any(|e| e.critical && e.extn_id != REASON_CODE && e.extn_id != INVALIDITY_DATE)
        });
    if critical_unknown {
        return false;
    }
    if let Ok(Some((_, ku))) = issuer.tbs_certificate().get_extension::<KeyUsage>() {
        if !ku.0.contains(KeyUsages::CRLSign) {
            return false;
        }
    }
    let Ok(tbs) = list.to_der() else {
        return false;
    };
    super::signed_data::verify_signature(
        issuer.tbs_certificate().subject_public_key_info(),
        &crl.signature_algorithm,
        crate::asn1::oids::SHA256,
        &tbs,
        crl.signature.raw_bytes(),
    )
    .is_ok()
}

fn name_constraints(cert: &Certificate) -> Option<NameConstraints> {
    match cert.tbs_certificate().get_extension::<NameConstraints>() {
        Ok(Some((_, nc))) => Some(nc),
        _ => None,
    }
}

/// The names of a certificate that name constraints apply to.
struct Names {
    emails: Vec<String>,
    subject: Name,
    /// The other subjectAltName forms it carries (their tags), which are not checked.
    other_forms: Vec<u8>,
}

fn names_of(cert: &Certificate) -> Names {
    let tbs = cert.tbs_certificate();
    let mut other_forms = Vec::new();
    if let Ok(Some((_, san))) = tbs.get_extension::<SubjectAltName>() {
        for n in &san.0 {
            match n {
                GeneralName::Rfc822Name(_) | GeneralName::DirectoryName(_) => {}
                other => other_forms.push(form(other)),
            }
        }
    }
    Names {
        emails: crate::keystore::emails_of(cert),
        subject: tbs.subject().clone(),
        other_forms,
    }
}

/// The context tag of a GeneralName form.
fn form(n: &GeneralName) -> u8 {
    match n {
        GeneralName::OtherName(_) => 0,
        GeneralName::Rfc822Name(_) => 1,
        GeneralName::DnsName(_) => 2,
        GeneralName::DirectoryName(_) => 4,
        GeneralName::EdiPartyName(_) => 5,
        GeneralName::UniformResourceIdentifier(_) => 6,
        GeneralName::IpAddress(_) => 7,
        GeneralName::RegisteredId(_) => 8,
    }
}

/// RFC 5280 4.2.1.10 for one issuer's constraints over one certificate's names.
fn check_names(cert: &Certificate, nc: &NameConstraints) -> Result<(), String> {
    let names = names_of(cert);
    let permitted = nc.permitted_subtrees.as_deref().unwrap_or_default();
    let excluded = nc.excluded_subtrees.as_deref().unwrap_or_default();
    let outside = |what: &str| {
        Err(format!(
            "{} {what} an issuer's name constraints",
            name(cert)
        ))
    };

    // Forms we do not match: a certificate carrying such a name under a constraint on
    // that form is refused rather than passed unchecked.
    for sub in permitted.iter().chain(excluded) {
        let f = form(&sub.base);
        if f != 1 && f != 4 && names.other_forms.contains(&f) {
            return outside("carries a name form not checked against");
        }
    }
    let permitted_mail: Vec<String> = permitted.iter().filter_map(|s| rfc822(&s.base)).collect();
    let excluded_mail: Vec<String> = excluded.iter().filter_map(|s| rfc822(&s.base)).collect();
    for email in &names.emails {
        if !permitted_mail.is_empty() && !permitted_mail.iter().any(|c| mailbox_within(email, c)) {
            return outside(&format!("names {email}, outside"));
        }
        if excluded_mail.iter().any(|c| mailbox_within(email, c)) {
            return outside(&format!("names {email}, excluded by"));
        }
    }
    let permitted_dn: Vec<&Name> = permitted.iter().filter_map(|s| dn(&s.base)).collect();
    let excluded_dn: Vec<&Name> = excluded.iter().filter_map(|s| dn(&s.base)).collect();
    if names.subject.iter_rdn().next().is_some() {
        if !permitted_dn.is_empty() && !permitted_dn.iter().any(|b| dn_within(&names.subject, b)) {
            return outside("has a subject outside");
        }
        if excluded_dn.iter().any(|b| dn_within(&names.subject, b)) {
            return outside("has a subject excluded by");
        }
    }
    Ok(())
}

fn rfc822(n: &GeneralName) -> Option<String> {
    match n {
        GeneralName::Rfc822Name(s) => Some(s.to_string().to_ascii_lowercase()),
        _ => None,
    }
}

fn dn(n: &GeneralName) -> Option<&Name> {
    match n {
        GeneralName::DirectoryName(d) => Some(d),
        _ => None,
    }
}

/// An address (lower case) within an rfc822Name constraint: a whole mailbox, a host
/// (every mailbox at exactly that host) or `.domain` (every host below it).
pub(crate) fn mailbox_within(email: &str, constraint: &str) -> bool {
    let Some((_, host)) = email.rsplit_once('@') else {
        return false;
    };
    if constraint.contains('@') {
        email == constraint
    } else if constraint.starts_with('.') {
        host.len() > constraint.len() - 1 && host.ends_with(constraint)
    } else {
        host == constraint
    }
}

/// `subject` starts with the RDNs of `base`, compared attribute by attribute with
/// their string values case-folded and whitespace collapsed (so a different string
/// encoding of the same name cannot step around an exclusion).
fn dn_within(subject: &Name, base: &Name) -> bool {
    base.iter_rdn().count() <= subject.iter_rdn().count()
        && base
            .iter_rdn()
            .zip(subject.iter_rdn())
            .all(|(b, s)| rdn_equal(b, s))
}

fn rdn_equal(a: &RelativeDistinguishedName, b: &RelativeDistinguishedName) -> bool {
    a.len() == b.len()
        && a.iter().all(|x| {
            b.iter()
                .any(|y| x.oid == y.oid && value_text(&x.value) == value_text(&y.value))
        })
}

fn value_text(v: &der::Any) -> Vec<u8> {
    match std::str::from_utf8(v.value()) {
        Ok(s) if v.tag() != der::Tag::BmpString => s
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
            .into_bytes(),
        _ => v.to_der().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::mailbox_within;

    #[test]
    fn rfc822_constraint_forms() {
        assert!(mailbox_within("a@corp.example", "a@corp.example"));
        assert!(!mailbox_within("b@corp.example", "a@corp.example"));
        assert!(mailbox_within("a@corp.example", "corp.example"));
        assert!(!mailbox_within("a@mail.corp.example", "corp.example"));
        assert!(mailbox_within("a@mail.corp.example", ".corp.example"));
        assert!(!mailbox_within("a@corp.example", ".corp.example"));
        assert!(!mailbox_within("a@evilcorp.example", ".corp.example"));
        assert!(!mailbox_within("a@evilcorp.example", "corp.example"));
        assert!(!mailbox_within("not-an-address", "corp.example"));
    }
}
