//! Structure-aware: CRLs and certification paths through the identity module's trust
//! and revocation rules (`src/identity/x509.rs`, `crl.rs`), and CRL forms through the
//! key store's import (`keystore::describe`, which reads as `key import` does).
//!
//! The fuzzer's bytes choose a chain (a root, an optional sub-CA, a leaf) signed with
//! keys of a fixed pool, a look-alike of the root (same name and key, another key
//! usage and serial), which of them the victim's store holds as anchors or as imported
//! intermediates, which the message carries (trimmed or padded), whether the leaf is
//! pinned, and CRLs: by which certificate and key, when, listing which serials, and of
//! which form (complete; with an issuingDistributionPoint; a delta CRL; a critical
//! extension nobody knows; an indirect entry; a harmless non-critical extension),
//! the forms rcgen cannot write made by re-signing its CRL with the same key.
//!
//! Invariants, beyond no panic:
//! - a CRL of a form the module does not read is refused at import, and one of the
//!   supported forms is not;
//! - a leaf that a current, complete CRL signed by its issuer's key lists is never
//!   trusted, pinned or not, whatever the message carries (a self-issued pin aside);
//! - a leaf whose issuer has a CRL of an unsupported form in the store is never
//!   trusted (held but unreadable fails closed);
//! - a trusted verdict's evidence holds when checked again (`fuzz_crl_path` asserts).
#![no_main]

use std::sync::OnceLock;

use der::{Decode, Encode};
use libfuzzer_sys::arbitrary::{Result as ArbitraryResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, CertificateRevocationListParams,
    CrlDistributionPoint, CrlIssuingDistributionPoint, CrlScope, DistinguishedName, DnType,
    IsCa, KeyIdMethod, KeyPair, KeyUsagePurpose, RevokedCertParams, SerialNumber,
};
use time::OffsetDateTime;
use x509_cert::ext::Extension;

/// The validation time: 2026-06-01T00:00:00Z.
const NOW: i64 = 1_780_272_000;
const DAY: i64 = 86_400;
const KEYS: usize = 4;
const SERIALS: [u8; 4] = [1, 2, 3, 4];

type Crl = x509_cert::crl::CertificateList<x509_cert::certificate::Rfc5280>;

fn keys() -> &'static [KeyPair] {
    static KEYS_: OnceLock<Vec<KeyPair>> = OnceLock::new();
    KEYS_.get_or_init(|| {
        (0..KEYS)
            .map(|_| KeyPair::generate().expect("P-256 key"))
            .collect()
    })
}

fn dn(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

fn at(offset: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(NOW + offset).expect("time")
}

/// One chain certificate: its name, key, serial and whether it is a CA.
struct Spec {
    name: &'static str,
    key: usize,
    serial: u8,
    ca: bool,
    crl_sign: bool,
}

fn params(s: &Spec, aki: bool) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(s.name);
    p.not_before = at(-400 * DAY);
    p.not_after = at(400 * DAY);
    p.serial_number = Some(SerialNumber::from_slice(&[s.serial]));
    if s.ca {
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        if s.crl_sign {
            p.key_usages.push(KeyUsagePurpose::CrlSign);
        }
    } else {
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.subject_alt_names = vec![rcgen::SanType::Rfc822Name(
            "alice@example.com".try_into().expect("IA5"),
        )];
    }
    p.use_authority_key_identifier_extension = aki;
    p.key_identifier_method = KeyIdMethod::Sha256;
    p
}

/// The forms a CRL takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    Complete,
    Idp,
    Delta,
    CriticalUnknown,
    IndirectEntry,
    HarmlessExtension,
}

const FORMS: [Form; 6] = [
    Form::Complete,
    Form::Idp,
    Form::Delta,
    Form::CriticalUnknown,
    Form::IndirectEntry,
    Form::HarmlessExtension,
];

fn ext(oid: &str, critical: bool, value: &[u8]) -> Extension {
    Extension {
        extn_id: oid.parse().expect("oid"),
        critical,
        extn_value: der::asn1::OctetString::new(value.to_vec()).expect("octets"),
    }
}

/// `crl` with the extensions of `form` added, signed again by `key` (ECDSA P-256 with
/// SHA-256, as rcgen signs).
fn reform(crl: &[u8], form: Form, key: &KeyPair) -> Option<Vec<u8>> {
    let mut list = Crl::from_der(crl).ok()?;
    let tbs = &mut list.tbs_cert_list;
    match form {
        Form::Complete | Form::Idp => return Some(crl.to_vec()),
        Form::Delta => tbs
            .crl_extensions
            .get_or_insert_with(Vec::new)
            .push(ext("2.5.29.27", true, &[0x02, 0x01, 0x01])),
        Form::CriticalUnknown => tbs
            .crl_extensions
            .get_or_insert_with(Vec::new)
            .push(ext("1.3.6.1.4.1.99999.7", true, &[0x05, 0x00])),
        Form::HarmlessExtension => tbs
            .crl_extensions
            .get_or_insert_with(Vec::new)
            .push(ext("1.3.6.1.4.1.99999.8", false, &[0x05, 0x00])),
        Form::IndirectEntry => {
            let entry = tbs.revoked_certificates.as_mut()?.first_mut()?;
            // certificateIssuer: GeneralNames with a directoryName.
            let name = x509_cert::name::Name::from_der(&tbs.issuer.to_der().ok()?).ok()?;
            let gn = vec![x509_cert::ext::pkix::name::GeneralName::DirectoryName(name)];
            entry
                .crl_entry_extensions
                .get_or_insert_with(Vec::new)
                .push(ext("2.5.29.29", true, &gn.to_der().ok()?));
        }
    }
    let tbs_der = list.tbs_cert_list.to_der().ok()?;
    let pkey = openssl::pkey::PKey::private_key_from_pkcs8(&key.serialize_der()).ok()?;
    let mut signer =
        openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &pkey).ok()?;
    let sig = signer.sign_oneshot_to_vec(&tbs_der).ok()?;
    list.signature = der::asn1::BitString::from_bytes(&sig).ok()?;
    list.to_der().ok()
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});

fn run(data: &[u8]) -> ArbitraryResult<()> {
    let mut u = Unstructured::new(data);
    let keys = keys();
    let with_sub = u.arbitrary::<bool>()?;
    let aki = u.arbitrary::<bool>()?;
    let mut specs = vec![Spec {
        name: "Root CA",
        key: 0,
        serial: 1,
        ca: true,
        crl_sign: true,
    }];
    if with_sub {
        specs.push(Spec {
            name: "Sub CA",
            key: 1,
            serial: 2,
            ca: true,
            crl_sign: u.ratio(3, 4)?,
        });
    }
    specs.push(Spec {
        name: if u.ratio(1, 8)? { "Root CA" } else { "alice" },
        key: 2,
        serial: *u.choose(&SERIALS)?,
        ca: false,
        crl_sign: false,
    });
    // The leaf's issuer may sign it with another key (a broken link) now and then.
    let broken = u.ratio(1, 10)?;
    let mut chain: Vec<Certificate> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let p = params(s, aki);
        let cert = match chain.last() {
            None => p.self_signed(&keys[s.key]),
            Some(issuer) => {
                let by = if broken && i + 1 == specs.len() {
                    3
                } else {
                    specs[i - 1].key
                };
                p.signed_by(&keys[s.key], issuer, &keys[by])
            }
        };
        let Ok(cert) = cert else { return Ok(()) };
        chain.push(cert);
    }
    // A look-alike of the root: same name and key, no cRLSign, another serial.
    let lookalike = params(
        &Spec {
            name: "Root CA",
            key: 0,
            serial: 9,
            ca: true,
            crl_sign: false,
        },
        aki,
    )
    .self_signed(&keys[0]);
    let Ok(lookalike) = lookalike else {
        return Ok(());
    };
    let ders: Vec<Vec<u8>> = chain.iter().map(|c| c.der().to_vec()).collect();
    let leaf_der = ders.last().expect("leaf").clone();
    let cas = &ders[..ders.len() - 1];
    let lookalike_der = lookalike.der().to_vec();

    let mut anchors = Vec::new();
    match u.int_in_range(0..=5)? {
        0 => {}
        1 => anchors.push(lookalike_der.clone()),
        2 => anchors.push(cas[cas.len() - 1].clone()),
        _ => anchors.push(cas[0].clone()),
    }
    let mut intermediates = Vec::new();
    for c in cas.iter().chain([&lookalike_der]) {
        if u.ratio(1, 3)? {
            intermediates.push(c.clone());
        }
    }
    let mut carried = Vec::new();
    for _ in 0..u.int_in_range(0..=4)? {
        carried.push(match u.int_in_range(0..=3)? {
            0 => lookalike_der.clone(),
            1 => leaf_der.clone(),
            _ => cas[u.choose_index(cas.len())?].clone(),
        });
    }
    let pinned = u.ratio(1, 3)?;
    let require_crl = u.ratio(1, 6)?;

    // CRLs, by a CA of the chain or the look-alike, signed with its key or another.
    let leaf_issuer = chain.len() - 2;
    let leaf_serial = specs[specs.len() - 1].serial;
    let self_issued = specs[specs.len() - 1].name == specs[leaf_issuer].name;
    let mut crls = Vec::new();
    let mut revokes_leaf = false;
    let mut unreadable_for_leaf = false;
    for _ in 0..u.int_in_range(0..=3)? {
        let by_lookalike = u.ratio(1, 5)?;
        let by = u.choose_index(cas.len())?;
        let (issuer, issuer_spec) = if by_lookalike {
            (&lookalike, &specs[0])
        } else {
            (&chain[by], &specs[by])
        };
        let key = if u.ratio(1, 6)? {
            u.choose_index(KEYS)?
        } else {
            issuer_spec.key
        };
        let form = *u.choose(&FORMS)?;
        let this_update = at(*u.choose(&[-DAY, DAY, -30 * DAY])?);
        let next_update = at(*u.choose(&[7 * DAY, -2 * DAY, 30 * DAY])?);
        let mut revoked = Vec::new();
        for _ in 0..u.int_in_range(0..=2)? {
            revoked.push(RevokedCertParams {
                serial_number: SerialNumber::from_slice(&[*u.choose(&SERIALS)?]),
                revocation_time: at(-DAY),
                reason_code: None,
                invalidity_date: None,
            });
        }
        let lists_leaf = revoked
            .iter()
            .any(|r| r.serial_number.to_bytes() == [leaf_serial]);
        let idp = (form == Form::Idp).then(|| CrlIssuingDistributionPoint {
            distribution_point: CrlDistributionPoint {
                uris: vec!["http://crl.example/root.crl".into()],
            },
            scope: Some(CrlScope::UserCertsOnly),
        });
        let params = CertificateRevocationListParams {
            this_update,
            next_update,
            crl_number: SerialNumber::from_slice(&[1]),
            issuing_distribution_point: idp,
            revoked_certs: revoked,
            key_identifier_method: KeyIdMethod::Sha256,
        };
        let Ok(crl) = params.signed_by(issuer, &keys[key]) else {
            continue;
        };
        let Some(der) = reform(crl.der(), form, &keys[key]) else {
            continue;
        };
        // The import reads the forms it implements and refuses the others by name.
        let imported = mailseal::keystore::describe(&der, "crl");
        let supported = matches!(form, Form::Complete | Form::HarmlessExtension);
        let indirect_without_entries = form == Form::IndirectEntry && !der_has_entries(&der);
        if supported || indirect_without_entries {
            assert!(imported.is_ok(), "{form:?} refused: {imported:?}");
        } else {
            let e = imported.expect_err("an unsupported CRL form was imported");
            assert!(e.to_string().contains("not supported"), "{form:?}: {e}");
        }
        // The CRL is of the leaf's issuer: its name, and the key that issued the leaf
        // (so the authority key identifiers agree when present).
        let of_leaf_issuer = specs[leaf_issuer].name == issuer_spec.name
            && key == specs[leaf_issuer].key
            && !broken;
        if of_leaf_issuer && !supported && !indirect_without_entries {
            unreadable_for_leaf = true;
        }
        if of_leaf_issuer
            && supported
            && lists_leaf
            && this_update.unix_timestamp() <= NOW
        {
            revokes_leaf = true;
        }
        crls.push(der);
    }

    let verdict = mailseal::identity::x509::fuzz_crl_path(
        &leaf_der,
        &carried,
        &intermediates,
        &anchors,
        &crls,
        pinned,
        require_crl,
        at(0),
    )
    .expect("rcgen wrote a leaf that does not decode");
    let trusted = verdict == "Pinned" || verdict == "Anchored";
    if anchors.is_empty() && !pinned {
        assert!(!trusted, "trusted with no anchor and no pin: {verdict}");
    }
    if !(pinned && self_issued) {
        assert!(
            !(revokes_leaf && trusted),
            "a leaf its issuer's CRL lists is trusted: {verdict}"
        );
        assert!(
            !(unreadable_for_leaf && trusted),
            "a leaf whose issuer's CRL is of an unsupported form is trusted: {verdict}"
        );
    }
    Ok(())
}

fn der_has_entries(der: &[u8]) -> bool {
    Crl::from_der(der).is_ok_and(|c| {
        c.tbs_cert_list
            .revoked_certificates
            .as_ref()
            .is_some_and(|r| !r.is_empty())
    })
}
