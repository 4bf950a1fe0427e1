//! X.509 certificate paths (RFC 5280 section 6) for what S/MIME, MLS certifications
//! and Agent Card signers use: from a certificate through intermediates to a trust
//! anchor of the key store, and the trust verdict on a signer (`trust`).
//!
//! Where the path comes from, and why: the issuers are the store's trust anchors, the
//! CA certificates imported into the store (`mailseal key import` of a sub-CA: an
//! intermediate the operator holds, so a sender cannot trim the path by leaving it out
//! of the message) and the certificates the message carries (any number of look-alikes:
//! each is only a candidate, believed once its own path reaches an anchor). Revocation
//! ([`super::crl`]) is decided on that validated path, never on a carried certificate
//! alone; a pinned certificate is checked against the CRLs of every issuer the store
//! validates for it, and fails closed when it holds a CRL it cannot check; it is
//! refused when the issuer the store validates for it is itself revoked on its own
//! path (a pin skips path validation, not revocation).
//!
//! Hand-written because no maintained pure-Rust crate validates X.509 paths for email
//! (`webpki` and `rustls-webpki` validate server names only). What it checks, for
//! every certificate on the path:
//! - validity at the validation time (the time of receipt, never a signer-chosen
//!   `signingTime`), the anchor's own validity included; a `signingTime` only narrows
//!   this: the signer's certificate and its path must also have been valid then
//!   (`check_valid_when_signed`);
//! - no extension twice, no critical extension it does not process;
//! - names: issuer and subject compared as RFC 5280 7.1 says (`same_name`), for
//!   path building and for matching a CRL to its issuer alike;
//! - issuers: basicConstraints with cA, keyCertSign when keyUsage is present, and the
//!   pathLenConstraint of the anchor and every intermediate;
//! - nameConstraints of the anchor and every intermediate on rfc822Name (mailbox, host
//!   and `.domain` forms) and directoryName; a constraint on any other name form
//!   refuses a certificate that carries a name of that form (fail closed).
//! - revocation by the CRLs imported into the key store (`Revocation`): a
//!   certificate its issuer's CRL lists is refused; a policy can refuse a certificate
//!   whose issuer has no current CRL here.
//!
//! What it does not do: certificate policy processing (a critical policyConstraints,
//! policyMappings or inhibitAnyPolicy is refused as unprocessed), or fetching anything
//! (no OCSP, no distribution points). Anchors' constraints are enforced (RFC 5937
//! style) although RFC 5280 leaves that to the implementation: an operator who
//! configures a constrained anchor means it.
//!
//! The search is bounded: at most `MAX_CHAIN` certificates deep and
//! `MAX_SIGNATURE_CHECKS` signature verifications per message, whatever the message
//! carries, so a CMS full of look-alike intermediates costs a fixed amount of work.

use aws_lc_rs::digest;
use aws_lc_rs::signature::{self, UnparsedPublicKey};
use der::asn1::ObjectIdentifier;
use der::{Decode, Encode, Tagged};
use spki::AlgorithmIdentifierOwned;

use crate::asn1::oids::{
    ECDSA_WITH_SHA256, ECDSA_WITH_SHA384, ECDSA_WITH_SHA512, ED25519, ID_EC_PUBLIC_KEY, MGF1,
    RSASSA_PSS, RSA_ENCRYPTION, SECP256R1, SECP384R1, SECP521R1, SHA256, SHA256_WITH_RSA, SHA384,
    SHA384_WITH_RSA, SHA512, SHA512_WITH_RSA,
};
use time::OffsetDateTime;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, NameConstraints, SubjectAltName,
};
use x509_cert::name::{Name, RelativeDistinguishedName};
use x509_cert::Certificate;

use super::crl::{name, Revocation};

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

/// The most extensions a certificate may carry: real ones carry about a dozen, and
/// every check that reads one extension walks them all (issue #58: a signer
/// certificate of 200,000 extensions, the attacker's own, cost a minute before it was
/// refused as untrusted).
pub(crate) const MAX_EXTENSIONS: usize = 64;

/// A certificate's extensions are each present once (at most [`MAX_EXTENSIONS`]), the
/// critical ones are processed here, and the processed ones decode.
pub(crate) fn check_extensions(cert: &Certificate) -> Result<(), String> {
    let tbs = cert.tbs_certificate();
    let Some(exts) = tbs.extensions() else {
        return Ok(());
    };
    if exts.len() > MAX_EXTENSIONS {
        return Err(format!(
            "{} has {} extensions, more than the {MAX_EXTENSIONS} read",
            name(cert),
            exts.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for e in exts.iter() {
        if !seen.insert(e.extn_id) {
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

/// Valid at `at` (RFC 5280 4.1.2.5, inclusive bounds).
pub(crate) fn valid_at(cert: &Certificate, at: OffsetDateTime) -> bool {
    let v = cert.tbs_certificate().validity();
    let t = at.unix_timestamp();
    let unix = |t: &x509_cert::time::Time| t.to_unix_duration().as_secs() as i64;
    unix(&v.not_before) <= t && t <= unix(&v.not_after)
}

/// `child` is signed by `issuer`'s key and names it as its issuer.
pub(crate) fn issued_by(child: &Certificate, issuer: &Certificate) -> bool {
    if !same_name(
        child.tbs_certificate().issuer(),
        issuer.tbs_certificate().subject(),
    ) {
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
        crate::asn1::oids::SHA256,
        &tbs,
        child.signature().raw_bytes(),
    )
    .is_ok()
}

/// The signer's certificate and the certificates of the path its trust was decided on
/// (`evidence`, [`trust_evidence`]) were valid at `signed_at`, the time the signature
/// says it was made (CMS signingTime): an address binding counts only if it held at
/// receipt *and* then. Without this, a signature made before the certificate existed
/// (or after it expired, dated back) would open once read within its validity.
pub(crate) fn check_valid_when_signed(
    cert: &Certificate,
    evidence: &[Edge],
    signed_at: OffsetDateTime,
) -> Result<(), String> {
    let when = signed_at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| signed_at.unix_timestamp().to_string());
    let first_invalid = std::iter::once(cert)
        .chain(evidence.iter().map(|e| &e.cert))
        .find(|c| !valid_at(c, signed_at));
    match first_invalid {
        None => Ok(()),
        Some(c) => {
            let v = c.tbs_certificate().validity();
            Err(format!(
                "the signature says it was made at {when} (signingTime), when {} was not valid \
                 (valid from {} to {}): a binding must hold when the signature was made",
                name(c),
                v.not_before,
                v.not_after
            ))
        }
    }
}

/// How a signer's certificate is trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Trust {
    /// The exact certificate was imported into the key store for this address.
    Pinned,
    /// It chains to a trust anchor (through the store's intermediates and those the
    /// message carries) along a path that RFC 5280 section 6 validates.
    Anchored,
    /// Neither: a self-signed or unknown signer.
    Unknown,
    /// An issuer it names is known but did not sign it: the certificate was altered.
    Broken,
    /// Every path to an anchor breaks a rule of RFC 5280 section 6, or the certificate
    /// is revoked, or its revocation cannot be checked (the first reason).
    Invalid(String),
}

/// One step of the evidence revocation was decided on: a certificate and the issuers
/// the store validated for it (whose keys check its issuer's CRLs). Kept by callers
/// that cache a verdict ([`crate::mls::authentication`]) so that revocation is decided
/// again, on the same validated path, against the CRLs held at each message.
#[derive(Clone, Debug)]
pub(crate) struct Edge {
    pub(crate) cert: Certificate,
    pub(crate) issuers: Vec<Certificate>,
}

/// The revocation of every certificate of `evidence` (see [`Edge`]) at `at`: what a
/// cached verdict asks again at each message, since a CRL may have been imported
/// since.
pub(crate) fn recheck(
    evidence: &[Edge],
    at: OffsetDateTime,
    revocation: &Revocation<'_>,
) -> Result<(), String> {
    for e in evidence {
        let issuers: Vec<&Certificate> = e.issuers.iter().collect();
        revocation.check(&e.cert, &issuers, at)?;
    }
    Ok(())
}

/// The store's evidence for a trust decision: its anchors, the CA certificates it
/// holds (intermediates), its CRLs.
pub(crate) struct Held<'a> {
    pub(crate) anchors: &'a [Certificate],
    pub(crate) intermediates: &'a [Certificate],
    pub(crate) revocation: Revocation<'a>,
}

/// Whether `cert` is pinned (`pinned`: its exact encoding is in the key store for the
/// address it speaks for; the caller compares the bytes it received, so nothing is
/// encoded again here), or chains through the store's intermediates and `carried` to
/// one of the store's anchors on a path valid at `at`; not revoked on that path.
pub(crate) fn trust(
    cert: &Certificate,
    carried: &[Certificate],
    held: &Held<'_>,
    pinned: bool,
    at: OffsetDateTime,
) -> Trust {
    trust_evidence(cert, carried, held, pinned, at).0
}

/// [`trust`], with the evidence revocation was decided on when trusted.
pub(crate) fn trust_evidence(
    cert: &Certificate,
    carried: &[Certificate],
    held: &Held<'_>,
    pinned: bool,
    at: OffsetDateTime,
) -> (Trust, Vec<Edge>) {
    if let Err(e) = check_extensions(cert) {
        return (Trust::Invalid(e), Vec::new());
    }
    if pinned {
        return match pinned_revocation(cert, carried, held, at) {
            Ok(evidence) => (Trust::Pinned, evidence),
            Err(e) => (Trust::Invalid(e), Vec::new()),
        };
    }
    validate(cert, carried, held, at)
}

/// Issuer candidates tried for a pinned certificate.
const MAX_PINNED_ISSUERS: usize = 4;

/// A pinned certificate is not checked for a path, but the CRLs the store holds for
/// its issuer still revoke it: checked under the key of every issuer of it that the
/// store validates (an anchor, or a certificate among the store's intermediates and
/// the carried ones whose own path reaches an anchor). A carried certificate is only
/// a candidate: leaving the sub-CA out of the message does not hide the store's CRL
/// (the store's copy is used, or the CRL cannot be checked and the pin is refused),
/// and a carried look-alike of an issuer changes nothing, since CRLs are checked under
/// keys, not under what a certificate claims to be allowed. A self-issued pin has no
/// issuer to revoke it: removing it from the store does.
fn pinned_revocation(
    cert: &Certificate,
    carried: &[Certificate],
    held: &Held<'_>,
    at: OffsetDateTime,
) -> Result<Vec<Edge>, String> {
    let tbs = cert.tbs_certificate();
    if self_issued(cert) {
        return Ok(Vec::new());
    }
    let mut evidence = Vec::new();
    let mut issuers: Vec<&Certificate> = Vec::new();
    for a in held.anchors.iter().filter(|a| issued_by(cert, a)) {
        if issuers.len() >= MAX_PINNED_ISSUERS {
            break;
        }
        if valid_at(a, at) && check_extensions(a).is_ok() {
            issuers.push(a);
        }
    }
    let others = held
        .intermediates
        .iter()
        .chain(carried.iter().take(MAX_INTERMEDIATES))
        .filter(|i| same_name(i.tbs_certificate().subject(), tbs.issuer()));
    // Signature checks spent on candidates: a message full of look-alikes of the
    // issuer costs a fixed amount.
    let mut budget = MAX_SIGNATURE_CHECKS;
    for i in others {
        if issuers.len() >= MAX_PINNED_ISSUERS || budget == 0 {
            break;
        }
        if issuers.contains(&i) {
            continue;
        }
        budget -= 1;
        if !issued_by(cert, i) {
            continue;
        }
        match validate(i, carried, held, at) {
            (Trust::Anchored, path) => {
                issuers.push(i);
                evidence.extend(path);
            }
            (Trust::Invalid(reason), _) if revoked_issuer(i, carried, held, at) => {
                // The issuer the store validates for the pin is revoked on its own
                // path: the pin skips path validation, not revocation, so what the
                // issuer signed is not believed either.
                return Err(format!(
                    "{} is pinned, but its issuer is refused: {reason}",
                    name(cert)
                ));
            }
            _ => {}
        }
    }
    held.revocation.check(cert, &issuers, at)?;
    evidence.insert(
        0,
        Edge {
            cert: cert.clone(),
            issuers: issuers.into_iter().cloned().collect(),
        },
    );
    Ok(evidence)
}

/// `issuer` chains to an anchor on a path RFC 5280 validates when revocation is left
/// out: it was refused with revocation only because a CRL the store holds revokes it
/// (or one it holds on its path cannot be checked, or a required one is missing), so
/// it is a validated issuer that is revoked, not an unknown one.
fn revoked_issuer(
    issuer: &Certificate,
    carried: &[Certificate],
    held: &Held<'_>,
    at: OffsetDateTime,
) -> bool {
    let unrevoked = Held {
        anchors: held.anchors,
        intermediates: held.intermediates,
        revocation: Revocation {
            crls: &[],
            require: false,
        },
    };
    matches!(validate(issuer, carried, &unrevoked, at).0, Trust::Anchored)
}

/// The search for a valid path from a signer to an anchor.
struct Search<'a> {
    anchors: &'a [Certificate],
    intermediates: Vec<&'a Certificate>,
    at: OffsetDateTime,
    revocation: &'a Revocation<'a>,
    budget: usize,
    /// The first reason an anchored path was invalid.
    invalid: Option<String>,
    /// An anchor's name matched but its key did not verify the certificate.
    broken: bool,
    /// The path found, anchor last.
    found: Vec<&'a Certificate>,
}

/// Whether `leaf` chains through the store's intermediates and `carried` to one of the
/// store's anchors on a path valid at `at`; the path's edges when it does.
pub(crate) fn validate(
    leaf: &Certificate,
    carried: &[Certificate],
    held: &Held<'_>,
    at: OffsetDateTime,
) -> (Trust, Vec<Edge>) {
    // The store's own first: a message cannot crowd them out.
    let intermediates = held
        .intermediates
        .iter()
        .chain(carried.iter().take(MAX_INTERMEDIATES))
        .collect();
    let mut search = Search {
        anchors: held.anchors,
        intermediates,
        at,
        revocation: &held.revocation,
        budget: MAX_SIGNATURE_CHECKS,
        invalid: None,
        broken: false,
        found: Vec::new(),
    };
    let mut path = vec![leaf];
    if search.extend(&mut path) {
        let edges = search
            .found
            .windows(2)
            .map(|w| Edge {
                cert: w[0].clone(),
                issuers: vec![w[1].clone()],
            })
            .collect();
        (Trust::Anchored, edges)
    } else if let Some(reason) = search.invalid {
        (Trust::Invalid(reason), Vec::new())
    } else if search.broken {
        (Trust::Broken, Vec::new())
    } else {
        (Trust::Unknown, Vec::new())
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
            if !same_name(anchor.tbs_certificate().subject(), issuer) || self.budget == 0 {
                continue;
            }
            self.budget -= 1;
            if !issued_by(current, anchor) {
                self.broken = true;
                continue;
            }
            match check_path(anchor, path, self.at, self.revocation) {
                Ok(()) => {
                    self.found = path.clone();
                    self.found.push(anchor);
                    return true;
                }
                Err(e) => {
                    self.invalid.get_or_insert(e);
                }
            }
        }
        if path.len() + 1 >= MAX_CHAIN {
            return false;
        }
        for i in 0..self.intermediates.len() {
            let ca = self.intermediates[i];
            if !same_name(ca.tbs_certificate().subject(), issuer)
                || path.contains(&ca)
                || self.budget == 0
            {
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
        // The issuer was validated above (the anchor, or the previous step).
        revocation.check(cert, &[issuer], at)?;
        issuer = cert;
        if !valid_at(cert, at) {
            return Err(format!(
                "{} is not valid at the validation time",
                name(cert)
            ));
        }
        let self_issued = self_issued(cert);
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
    let is_v1_root =
        bc.is_none() && tbs.extensions().is_none() && self_issued(cert) && issued_by(cert, cert);
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

// Signature verification, shared by certificate paths, CRLs and the profiles' CMS
// (moved here from `smime::signed_data` so that smime depends on identity, not the
// reverse).

/// Why a signature did not verify.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// An algorithm (or key and algorithm pair) not accepted.
    #[error("unsupported algorithm: {0}")]
    UnsupportedAlgorithm(String),
    /// The signature does not verify under the key.
    #[error("the signature does not verify")]
    Bad,
    /// The key or the algorithm's parameters do not decode.
    #[error("{0}")]
    Malformed(String),
}

/// Verifies a signature made over `message` with the key of `spki`.
pub(crate) fn verify_signature(
    spki: &spki::SubjectPublicKeyInfoOwned,
    sig_alg: &AlgorithmIdentifierOwned,
    digest_oid: ObjectIdentifier,
    message: &[u8],
    signature: &[u8],
) -> Result<&'static str, SignatureError> {
    let key_oid = spki.algorithm.oid;
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.decode_as::<ObjectIdentifier>().ok());
    let (verifier, name): (&'static dyn signature::VerificationAlgorithm, &'static str) =
        match (sig_alg.oid, key_oid, digest_oid, curve) {
            (ECDSA_WITH_SHA256, ID_EC_PUBLIC_KEY, _, Some(SECP256R1)) => {
                (&signature::ECDSA_P256_SHA256_ASN1, "ecdsa-p256-sha256")
            }
            (ECDSA_WITH_SHA384, ID_EC_PUBLIC_KEY, _, Some(SECP256R1)) => {
                (&signature::ECDSA_P256_SHA384_ASN1, "ecdsa-p256-sha384")
            }
            (ECDSA_WITH_SHA256, ID_EC_PUBLIC_KEY, _, Some(SECP384R1)) => {
                (&signature::ECDSA_P384_SHA256_ASN1, "ecdsa-p384-sha256")
            }
            (ECDSA_WITH_SHA384, ID_EC_PUBLIC_KEY, _, Some(SECP384R1)) => {
                (&signature::ECDSA_P384_SHA384_ASN1, "ecdsa-p384-sha384")
            }
            // RFC 5753/5758: every SHA-2 size with every curve (gpgsm and `openssl
            // cms -md sha512` sign P-256 with SHA-512).
            (ECDSA_WITH_SHA512, ID_EC_PUBLIC_KEY, _, Some(SECP256R1)) => {
                (&signature::ECDSA_P256_SHA512_ASN1, "ecdsa-p256-sha512")
            }
            (ECDSA_WITH_SHA512, ID_EC_PUBLIC_KEY, _, Some(SECP384R1)) => {
                (&signature::ECDSA_P384_SHA512_ASN1, "ecdsa-p384-sha512")
            }
            (ECDSA_WITH_SHA256, ID_EC_PUBLIC_KEY, _, Some(SECP521R1)) => {
                (&signature::ECDSA_P521_SHA256_ASN1, "ecdsa-p521-sha256")
            }
            (ECDSA_WITH_SHA384, ID_EC_PUBLIC_KEY, _, Some(SECP521R1)) => {
                (&signature::ECDSA_P521_SHA384_ASN1, "ecdsa-p521-sha384")
            }
            (ECDSA_WITH_SHA512, ID_EC_PUBLIC_KEY, _, Some(SECP521R1)) => {
                (&signature::ECDSA_P521_SHA512_ASN1, "ecdsa-p521-sha512")
            }
            (SHA256_WITH_RSA, RSA_ENCRYPTION, _, _)
            | (RSA_ENCRYPTION, RSA_ENCRYPTION, SHA256, _) => {
                (&signature::RSA_PKCS1_2048_8192_SHA256, "rsa-pkcs1-sha256")
            }
            (SHA384_WITH_RSA, RSA_ENCRYPTION, _, _)
            | (RSA_ENCRYPTION, RSA_ENCRYPTION, SHA384, _) => {
                (&signature::RSA_PKCS1_2048_8192_SHA384, "rsa-pkcs1-sha384")
            }
            (SHA512_WITH_RSA, RSA_ENCRYPTION, _, _)
            | (RSA_ENCRYPTION, RSA_ENCRYPTION, SHA512, _) => {
                (&signature::RSA_PKCS1_2048_8192_SHA512, "rsa-pkcs1-sha512")
            }
            (RSASSA_PSS, RSA_ENCRYPTION | RSASSA_PSS, _, _) => {
                return verify_pss(spki, sig_alg, message, signature)
            }
            (ED25519, ED25519, _, _) => (&signature::ED25519, "ed25519"),
            (s, k, _, _) => {
                return Err(SignatureError::UnsupportedAlgorithm(format!(
                    "signature {s} with key {k}"
                )));
            }
        };
    let key = spki.subject_public_key.raw_bytes();
    if name.starts_with("ecdsa") {
        // SEC 1 2.3.3: 0x04 uncompressed, 0x02/0x03 compressed. The hybrid forms
        // (0x06/0x07) repeat y's parity beside y; RFC 5480 does not allow them, and a
        // point read in a form no other reader takes is a key read two ways (issue #58).
        if matches!(key.first(), Some(0x06 | 0x07)) {
            return Err(SignatureError::Malformed(
                "an EC public key in the hybrid point form, which RFC 5480 does not allow".into(),
            ));
        }
        if !strict_ecdsa_der(signature) {
            return Err(SignatureError::Bad);
        }
    }
    if name.starts_with("rsa") {
        check_rsa_size(key)?;
    }
    UnparsedPublicKey::new(verifier, key)
        .verify(message, signature)
        .map_err(|_| SignatureError::Bad)?;
    Ok(name)
}

/// The largest RSA modulus read, in bits (what the verifiers take: 2048 to 8192).
const MAX_RSA_BITS: usize = 8192;

/// An RSA key above [`MAX_RSA_BITS`] is refused as such, not as a signature that
/// "does not verify" (issue #58: a valid RSA-16384 signature was reported as bad).
fn check_rsa_size(key: &[u8]) -> Result<(), SignatureError> {
    #[derive(der::Sequence)]
    struct RsaPublicKey<'a> {
        n: der::asn1::UintRef<'a>,
        e: der::asn1::UintRef<'a>,
    }
    let Ok(k) = RsaPublicKey::from_der(key) else {
        return Ok(()); // the verifier refuses what does not decode
    };
    let n = k.n.as_bytes();
    let bits = n.len() * 8 - n.first().map_or(0, |b| b.leading_zeros() as usize);
    if bits > MAX_RSA_BITS {
        return Err(SignatureError::UnsupportedAlgorithm(format!(
            "an RSA key of {bits} bits: at most {MAX_RSA_BITS} are read"
        )));
    }
    Ok(())
}

/// An ECDSA signature is `SEQUENCE { r INTEGER, s INTEGER }` in DER and nothing else:
/// AWS-LC accepts some non-DER encodings (a SET tag, for one), which would make
/// signatures malleable and let a flipped byte go unnoticed.
fn strict_ecdsa_der(signature: &[u8]) -> bool {
    #[derive(der::Sequence)]
    struct EcdsaSig<'a> {
        r: der::asn1::UintRef<'a>,
        s: der::asn1::UintRef<'a>,
    }
    EcdsaSig::from_der(signature)
        .and_then(|sig| sig.to_der())
        .is_ok_and(|again| again == signature)
}

/// RFC 4055 RSASSA-PSS-params.
#[derive(der::Sequence)]
pub(crate) struct PssParams {
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    pub(crate) hash: Option<AlgorithmIdentifierOwned>,
    #[asn1(context_specific = "1", tag_mode = "EXPLICIT", optional = "true")]
    pub(crate) mgf: Option<AlgorithmIdentifierOwned>,
    #[asn1(context_specific = "2", tag_mode = "EXPLICIT", optional = "true")]
    pub(crate) salt: Option<u32>,
}

/// RSASSA-PSS with SHA-2 and MGF1 over the same hash, at the salt length the
/// parameters state (OpenSSL 3 signs with the largest salt, not the hash length, and
/// aws-lc-rs only verifies the latter). Verification handles only public values, so a
/// variable-time implementation is fine here.
fn verify_pss(
    spki: &spki::SubjectPublicKeyInfoOwned,
    sig_alg: &AlgorithmIdentifierOwned,
    message: &[u8],
    signature: &[u8],
) -> Result<&'static str, SignatureError> {
    use rsa::pkcs1::DecodeRsaPublicKey;
    use rsa::traits::PublicKeyParts;
    let params: PssParams = sig_alg
        .parameters
        .as_ref()
        .ok_or_else(|| {
            SignatureError::UnsupportedAlgorithm("RSASSA-PSS without parameters (SHA-1)".into())
        })?
        .decode_as()
        .map_err(|e| SignatureError::Malformed(format!("RSASSA-PSS parameters: {e}")))?;
    let hash = params.hash.map(|h| h.oid);
    let mgf_hash = params
        .mgf
        .filter(|m| m.oid == MGF1)
        .and_then(|m| {
            m.parameters
                .and_then(|p| p.decode_as::<AlgorithmIdentifierOwned>().ok())
        })
        .map(|a| a.oid);
    if hash != mgf_hash {
        return Err(SignatureError::UnsupportedAlgorithm(
            "RSASSA-PSS with MGF1 over another hash".into(),
        ));
    }
    let salt = params.salt.unwrap_or(20) as usize;
    let key = rsa::RsaPublicKey::from_pkcs1_der(spki.subject_public_key.raw_bytes())
        .map_err(|_| SignatureError::Malformed("RSA public key".into()))?;
    if key.size() < 256 {
        return Err(SignatureError::UnsupportedAlgorithm(
            "RSA keys under 2048 bits".into(),
        ));
    }
    let (scheme, digest, name) = match hash {
        Some(SHA256) => (
            rsa::Pss::new_with_salt::<sha2::Sha256>(salt),
            digest::digest(&digest::SHA256, message),
            "rsa-pss-sha256",
        ),
        Some(SHA384) => (
            rsa::Pss::new_with_salt::<sha2::Sha384>(salt),
            digest::digest(&digest::SHA384, message),
            "rsa-pss-sha384",
        ),
        Some(SHA512) => (
            rsa::Pss::new_with_salt::<sha2::Sha512>(salt),
            digest::digest(&digest::SHA512, message),
            "rsa-pss-sha512",
        ),
        _ => {
            return Err(SignatureError::UnsupportedAlgorithm(
                "RSASSA-PSS with a hash other than SHA-2".into(),
            ))
        }
    };
    key.verify(scheme, digest.as_ref(), signature)
        .map_err(|_| SignatureError::Bad)?;
    Ok(name)
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

/// Two names are the same name (RFC 5280 7.1, the comparison every issuer and subject
/// match uses: path building, self-issued checks, a CRL's issuer): the same RDNs in
/// the same order, each with the same attribute types, whose string values are equal
/// after case folding and whitespace folding whatever their string type (a CA renewed
/// with its name in PrintableString instead of UTF8String is the same CA, and its CRL
/// still applies). Byte-exact comparison would let a respelling of a name step
/// around a CRL or a constraint; a looser one is still safe for paths because every
/// issuer match is followed by a signature check under the issuer's key.
///
/// A name of more than [`MAX_NAME_ATTRIBUTES`] attributes matches none: no issuer has
/// one, and every match is paid per attribute, for names the attacker writes (the
/// issuer of their own certificate, the subjects of the certificates they carry).
pub(crate) fn same_name(a: &Name, b: &Name) -> bool {
    let attributes = |n: &Name| n.iter_rdn().map(|r| r.len()).sum::<usize>();
    if attributes(a) > MAX_NAME_ATTRIBUTES || attributes(b) > MAX_NAME_ATTRIBUTES {
        return false;
    }
    a.iter_rdn().count() == b.iter_rdn().count()
        && a.iter_rdn().zip(b.iter_rdn()).all(|(x, y)| rdn_equal(x, y))
}

/// The most attributes a name may have and still match another ([`same_name`]): real
/// names have a handful. Issue #58: each attribute of a multi-valued RDN was compared
/// with each of the other's, and a self-signed certificate whose issuer was one RDN of
/// 4,000 attributes, carried beside four look-alike issuers, cost 23 s to refuse.
pub(crate) const MAX_NAME_ATTRIBUTES: usize = 64;

/// A certificate is self-issued: its subject and issuer are the same name.
pub(crate) fn self_issued(cert: &Certificate) -> bool {
    let tbs = cert.tbs_certificate();
    same_name(tbs.subject(), tbs.issuer())
}

/// The same set of attributes: the attribute types and compared values of each, as
/// sorted lists, are equal (so that two values of one RDN that fold to the same text
/// cannot stand for a different second one). Each value is folded once and the lists
/// sorted: linear but for the sort, where matching each attribute against every other
/// was quadratic in the RDN's size.
fn rdn_equal(a: &RelativeDistinguishedName, b: &RelativeDistinguishedName) -> bool {
    let compared = |r: &RelativeDistinguishedName| {
        let mut all: Vec<(ObjectIdentifier, Vec<u8>)> =
            r.iter().map(|x| (x.oid, value_text(&x.value))).collect();
        all.sort_unstable();
        all
    };
    a.len() == b.len() && compared(a) == compared(b)
}

/// An attribute value as compared: the text of a directory string (Printable, UTF8,
/// IA5, Teletex, Visible), case-folded with its whitespace folded; any other value
/// (BMPString, UniversalString, non-strings) by its exact encoding, tag included.
fn value_text(v: &der::Any) -> Vec<u8> {
    use der::Tag;
    let string = matches!(
        v.tag(),
        Tag::PrintableString
            | Tag::Utf8String
            | Tag::Ia5String
            | Tag::TeletexString
            | Tag::VisibleString
    );
    match std::str::from_utf8(v.value()) {
        Ok(s) if string => {
            let mut out = vec![0u8];
            out.extend(
                s.split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_lowercase()
                    .into_bytes(),
            );
            out
        }
        _ => {
            let mut out = vec![1u8];
            out.extend(v.to_der().unwrap_or_default());
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_extensions, mailbox_within, same_name, MAX_EXTENSIONS, MAX_NAME_ATTRIBUTES};

    /// A self-signed certificate with `n` extra non-critical extensions under the OIDs
    /// `arc.i` (`same`: all under one OID).
    fn with_extensions(n: usize, same: bool) -> x509_cert::Certificate {
        use der::Decode;
        let mut params = rcgen::CertificateParams::new(vec!["x.example".into()]).unwrap();
        for i in 0..n {
            let last = if same { 1 } else { i as u64 + 1 };
            let mut e = rcgen::CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 4, 1, 99999, last],
                vec![0x05, 0x00],
            );
            e.set_criticality(false);
            params.custom_extensions.push(e);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        x509_cert::Certificate::from_der(cert.der()).unwrap()
    }

    /// Issue #58: a hybrid-form EC point is refused as malformed, and an RSA key above
    /// 8192 bits as such (not as a signature that does not verify).
    #[test]
    fn fail_unread_forms_hybrid_points_and_oversized_rsa_keys() {
        use super::{verify_signature, SignatureError, ECDSA_WITH_SHA256, SHA256_WITH_RSA};
        use der::asn1::{BitString, ObjectIdentifier};
        use der::Encode;
        use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
        let ec = |first: u8| {
            let mut point = vec![first];
            point.extend_from_slice(&[0x11; 64]);
            SubjectPublicKeyInfoOwned {
                algorithm: AlgorithmIdentifierOwned {
                    oid: ObjectIdentifier::new_unwrap("1.2.840.10045.2.1"),
                    parameters: Some(
                        der::Any::encode_from(&ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7"))
                            .unwrap(),
                    ),
                },
                subject_public_key: BitString::from_bytes(&point).unwrap(),
            }
        };
        let alg = |oid| AlgorithmIdentifierOwned {
            oid,
            parameters: None,
        };
        let sha256 = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
        for first in [0x06, 0x07] {
            let err = verify_signature(&ec(first), &alg(ECDSA_WITH_SHA256), sha256, b"m", b"s")
                .unwrap_err();
            assert!(matches!(err, SignatureError::Malformed(ref m) if m.contains("hybrid")));
        }
        // An uncompressed point of garbage is an ordinary bad signature.
        let err =
            verify_signature(&ec(0x04), &alg(ECDSA_WITH_SHA256), sha256, b"m", b"s").unwrap_err();
        assert_eq!(err, SignatureError::Bad);

        // RSAPublicKey { n: 16384 bits, e: 65537 }, no key needed to refuse it.
        #[derive(der::Sequence)]
        struct RsaPublicKey<'a> {
            n: der::asn1::UintRef<'a>,
            e: der::asn1::UintRef<'a>,
        }
        let n = vec![0xc5u8; 2048];
        let key = RsaPublicKey {
            n: der::asn1::UintRef::new(&n).unwrap(),
            e: der::asn1::UintRef::new(&[1, 0, 1]).unwrap(),
        }
        .to_der()
        .unwrap();
        let spki = SubjectPublicKeyInfoOwned {
            algorithm: AlgorithmIdentifierOwned {
                oid: ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1"),
                parameters: Some(der::asn1::Null.into()),
            },
            subject_public_key: BitString::from_bytes(&key).unwrap(),
        };
        let err =
            verify_signature(&spki, &alg(SHA256_WITH_RSA), sha256, b"m", &[0; 2048]).unwrap_err();
        assert!(
            matches!(err, SignatureError::UnsupportedAlgorithm(ref m) if m.contains("16384 bits")),
            "{err}"
        );
    }

    /// Issue #58: the extensions are counted before any is looked at, and a repeat is
    /// found by one pass over a set, not a search per extension.
    #[test]
    fn fail_cost_extensions_capped_and_repeats_found_in_one_pass() {
        assert!(check_extensions(&with_extensions(MAX_EXTENSIONS - 8, false)).is_ok());
        let err = check_extensions(&with_extensions(MAX_EXTENSIONS + 1, false)).unwrap_err();
        assert!(err.contains("more than the 64"), "{err}");
        let err = check_extensions(&with_extensions(2, true)).unwrap_err();
        assert!(err.contains("twice"), "{err}");
    }
    use std::str::FromStr;
    use x509_cert::attr::AttributeTypeAndValue;
    use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};

    const CN: der::asn1::ObjectIdentifier = der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3");
    const O: der::asn1::ObjectIdentifier = der::asn1::ObjectIdentifier::new_unwrap("2.5.4.10");

    fn rdn(values: &[(der::asn1::ObjectIdentifier, der::Tag, &str)]) -> RelativeDistinguishedName {
        let set = values
            .iter()
            .map(|(oid, tag, v)| AttributeTypeAndValue {
                oid: *oid,
                value: der::Any::new(*tag, v.as_bytes()).unwrap(),
            })
            .collect::<Vec<_>>();
        RelativeDistinguishedName::try_from(set).unwrap()
    }

    fn named(rdns: Vec<RelativeDistinguishedName>) -> Name {
        use der::{Decode, Encode};
        let mut seq = RdnSequence::default();
        for r in rdns {
            seq.push(r);
        }
        Name::from_der(&seq.to_der().unwrap()).unwrap()
    }

    #[test]
    fn names_compare_as_rfc5280_says() {
        use der::Tag::{OctetString, PrintableString, Utf8String};
        let utf8 = Name::from_str("CN=corp-ca").unwrap();
        // Another string type, case and whitespace: the same name.
        let printable = named(vec![rdn(&[(CN, PrintableString, "  Corp-CA ")])]);
        assert!(same_name(&utf8, &printable));
        assert!(same_name(&printable, &utf8));
        // Another value, another attribute type, another order, more RDNs: not.
        assert!(!same_name(&utf8, &Name::from_str("CN=corp-cb").unwrap()));
        assert!(!same_name(
            &utf8,
            &named(vec![rdn(&[(O, Utf8String, "corp-ca")])])
        ));
        let two = Name::from_str("CN=a,O=b").unwrap();
        assert!(!same_name(&two, &Name::from_str("O=b,CN=a").unwrap()));
        assert!(!same_name(
            &utf8,
            &Name::from_str("CN=corp-ca,O=x").unwrap()
        ));
        // A value that is not a string is compared by its encoding.
        let octets = named(vec![rdn(&[(CN, OctetString, "corp-ca")])]);
        assert!(!same_name(&utf8, &octets));
        // A multi-valued RDN matches as a set, in both directions.
        let ab = named(vec![rdn(&[(CN, Utf8String, "a"), (O, Utf8String, "b")])]);
        let ba = named(vec![rdn(&[
            (O, PrintableString, "B"),
            (CN, Utf8String, "a"),
        ])]);
        assert!(same_name(&ab, &ba));
        let aa = named(vec![rdn(&[
            (CN, Utf8String, "a"),
            (CN, PrintableString, "A"),
        ])]);
        let a_other = named(vec![rdn(&[(CN, Utf8String, "a"), (CN, Utf8String, "z")])]);
        assert!(!same_name(&aa, &a_other));
        assert!(!same_name(&a_other, &aa));
    }

    /// Issue #58: a name of more attributes than [`MAX_NAME_ATTRIBUTES`] matches none,
    /// itself included (its certificate is then not self-issued), and one at the cap
    /// still matches its respelling.
    #[test]
    fn fail_cost_names_past_the_attribute_cap_match_none() {
        use der::Tag::{PrintableString, Utf8String};
        let values: Vec<String> = (0..=MAX_NAME_ATTRIBUTES)
            .map(|i| format!("unit {i}"))
            .collect();
        let one_rdn = |n: usize, tag: der::Tag, upper: bool| {
            let avas: Vec<(der::asn1::ObjectIdentifier, der::Tag, String)> = values[..n]
                .iter()
                .map(|v| (O, tag, if upper { v.to_uppercase() } else { v.clone() }))
                .collect();
            let refs: Vec<(der::asn1::ObjectIdentifier, der::Tag, &str)> =
                avas.iter().map(|(o, t, v)| (*o, *t, v.as_str())).collect();
            named(vec![rdn(&refs)])
        };
        let at_cap = one_rdn(MAX_NAME_ATTRIBUTES, Utf8String, false);
        assert!(same_name(
            &at_cap,
            &one_rdn(MAX_NAME_ATTRIBUTES, PrintableString, true)
        ));
        let past = one_rdn(MAX_NAME_ATTRIBUTES + 1, Utf8String, false);
        assert!(!same_name(&past, &past));
        assert!(!same_name(&past, &at_cap) && !same_name(&at_cap, &past));
    }

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

/// The trust decision over DER, for the structure-aware `crl_path` fuzz target (feature
/// `fuzz-api`, which only the fuzz crate turns on; not a stable API): `leaf` with the
/// certificates a message carries, and a store of `anchors`, `intermediates` and
/// `crls`. Returns `None` when the leaf does not decode, else `Pinned`, `Anchored`,
/// or `refused: reason`. Panics when a trusted verdict's evidence, checked again
/// against the same CRLs, does not hold (what a cache relies on).
#[cfg(feature = "fuzz-api")]
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn fuzz_crl_path(
    leaf: &[u8],
    carried: &[Vec<u8>],
    intermediates: &[Vec<u8>],
    anchors: &[Vec<u8>],
    crls: &[Vec<u8>],
    pinned: bool,
    require_crl: bool,
    at: OffsetDateTime,
) -> Option<String> {
    let leaf = Certificate::from_der(leaf).ok()?;
    let decode = |all: &[Vec<u8>]| -> Vec<Certificate> {
        all.iter()
            .filter_map(|d| Certificate::from_der(d).ok())
            .collect()
    };
    let (carried, intermediates, anchors) =
        (decode(carried), decode(intermediates), decode(anchors));
    let crls = super::crl::decode_crls(crls.to_vec());
    let held = Held {
        anchors: &anchors,
        intermediates: &intermediates,
        revocation: Revocation {
            crls: &crls,
            require: require_crl,
        },
    };
    let (trust, evidence) = trust_evidence(&leaf, &carried, &held, pinned, at);
    Some(match trust {
        Trust::Pinned | Trust::Anchored => {
            if let Err(e) = recheck(&evidence, at, &held.revocation) {
                panic!("a trusted verdict's evidence does not hold again: {e}");
            }
            format!("{trust:?}")
        }
        Trust::Invalid(reason) => format!("refused: {reason}"),
        other => format!("refused: {other:?}"),
    })
}
