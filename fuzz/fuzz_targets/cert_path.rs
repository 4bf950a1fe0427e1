//! Structure-aware: certificate chains that verify, then broken one rule at a time,
//! through the S/MIME trust rules (`src/smime/path.rs`, `certificate.rs`: extensions,
//! pinning, RFC 5280 path validation, CRLs).
//!
//! A byte-level input through a whole message (`smime_open`) rarely carries a chain
//! whose signatures verify, so path validation was 20% covered. Here the fuzzer's
//! bytes, read through `arbitrary::Unstructured`, choose a chain of an anchor, up to
//! three intermediates and a signer, each certificate's names (from small pools, so
//! that they collide), validity around the validation time, basicConstraints and
//! pathLenConstraint, key usages, extended key usages, subject alternative names,
//! nameConstraints (rfc822Name in its three forms, dNSName, directoryName), extra or
//! duplicated extensions (critical or not, well-formed or not), and which key signs
//! it (the issuer's, or another: a broken link); then the CRLs (by which certificate,
//! when current, which serials), which intermediates the message carries (in any
//! order, some twice, look-alikes), which anchors the store holds, and whether the
//! signer is pinned. Every certificate is signed by rcgen with keys from a fixed pool
//! of P-256 keys, so the signatures are real and the rules are reached.
//!
//! Invariants, beyond no panic: with no anchor and no pin the signer is never trusted;
//! a signer outside its validity at the validation time is never trusted; a signer
//! listed by a current CRL its issuer signed is never trusted.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{Result as ArbitraryResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, CertificateRevocationListParams,
    CustomExtension, DistinguishedName, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    KeyIdMethod, KeyPair, KeyUsagePurpose, NameConstraints, RevokedCertParams, SanType,
    SerialNumber,
};
use time::OffsetDateTime;

/// The validation time: 2026-06-01T00:00:00Z.
const NOW: i64 = 1_780_272_000;
const KEYS: usize = 5;

/// The fixed key pool (generated once per process; the rules do not depend on the
/// key values, only on which key signs what).
fn keys() -> &'static [KeyPair] {
    static KEYS_: OnceLock<Vec<KeyPair>> = OnceLock::new();
    KEYS_.get_or_init(|| {
        (0..KEYS)
            .map(|_| KeyPair::generate().expect("P-256 key"))
            .collect()
    })
}

/// Subject names: the chain's own by position (anchor, intermediates, signer), and a
/// look-alike anchor.
const NAMES: [&str; 6] = ["Root CA", "CA 1", "CA 2", "CA 3", "alice", "Root CA 2"];
const MAILBOXES: [&str; 6] = [
    "alice@example.com",
    "ALICE@Example.COM",
    "alice@sub.example.com",
    "mallory@evil.example",
    "alice@example.com.evil.example",
    "not a mailbox",
];
const DOMAINS: [&str; 4] = [
    "example.com",
    ".example.com",
    "alice@example.com",
    "evil.example",
];
const SERIALS: [u8; 4] = [1, 2, 3, 0x80];

/// Extension OIDs an extra extension may carry: the processed ones (so that one is
/// duplicated, or replaced by bytes that do not decode), and ones nobody processes.
const EXTRA_OIDS: [&[u64]; 8] = [
    &[2, 5, 29, 19],               // basicConstraints
    &[2, 5, 29, 15],               // keyUsage
    &[2, 5, 29, 30],               // nameConstraints
    &[2, 5, 29, 17],               // subjectAltName
    &[2, 5, 29, 37],               // extKeyUsage
    &[2, 5, 29, 36],               // policyConstraints
    &[2, 5, 29, 32],               // certificatePolicies
    &[1, 3, 6, 1, 4, 1, 99999, 1], // private, unknown
];
/// Extension contents: valid DER of the shapes above, and broken ones.
const EXTRA_CONTENTS: [&[u8]; 8] = [
    &[0x30, 0x03, 0x01, 0x01, 0xff], // basicConstraints cA TRUE
    &[0x30, 0x00],                   // an empty SEQUENCE
    &[0x03, 0x02, 0x01, 0x06],       // keyUsage keyCertSign, cRLSign
    &[
        0x30, 0x0b, 0x81, 0x09, b'e', b'x', b'a', b'm', b'p', b'l', b'e', b'.', b'c',
    ], // a SAN cut short
    &[0x30, 0x06, 0x80, 0x01, 0x00, 0x81, 0x01, 0x00], // policyConstraints 0, 0
    &[0x05, 0x00],                   // NULL
    &[0xff, 0xff, 0xff],             // not DER
    &[],                             // nothing
];

fn pick<'a, T>(u: &mut Unstructured<'_>, pool: &'a [T]) -> ArbitraryResult<&'a T> {
    Ok(&pool[u.choose_index(pool.len())?])
}

fn time_around(u: &mut Unstructured<'_>, choices: &[i64]) -> ArbitraryResult<OffsetDateTime> {
    let offset = *pick(u, choices)?;
    Ok(OffsetDateTime::from_unix_timestamp(NOW + offset).expect("time"))
}

const DAY: i64 = 86_400;

fn dn(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

fn subtree(u: &mut Unstructured<'_>) -> ArbitraryResult<GeneralSubtree> {
    Ok(match u.int_in_range(0..=2)? {
        0 => GeneralSubtree::Rfc822Name(pick(u, &DOMAINS)?.to_string()),
        1 => GeneralSubtree::DnsName(pick(u, &DOMAINS)?.trim_start_matches('.').to_string()),
        _ => GeneralSubtree::DirectoryName(dn(pick(u, &NAMES)?)),
    })
}

/// One certificate's parameters and the key that signs it.
struct Spec {
    params: CertificateParams,
    key: usize,
    signer: Option<usize>,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    serial: u8,
}

fn spec(u: &mut Unstructured<'_>, position: usize, is_leaf: bool) -> ArbitraryResult<Spec> {
    let mut params = CertificateParams::default();
    // Names follow the chain by default; the fuzzer may pick any (self-issued, look-alikes).
    let name = if u.ratio(1, 4)? {
        pick(u, &NAMES)?
    } else if is_leaf {
        "alice"
    } else {
        NAMES[position]
    };
    params.distinguished_name = dn(name);
    let not_before = time_around(u, &[-400 * DAY, -DAY, DAY, -400 * DAY])?;
    let not_after = time_around(u, &[400 * DAY, -DAY, 1, 400 * DAY])?;
    params.not_before = not_before;
    params.not_after = not_after;
    let serial = *pick(u, &SERIALS)?;
    params.serial_number = Some(SerialNumber::from_slice(&[serial]));
    params.is_ca = match u.int_in_range(0..=5)? {
        0 if is_leaf => IsCa::NoCa,
        1 => IsCa::ExplicitNoCa,
        2 => IsCa::NoCa,
        3 => IsCa::Ca(BasicConstraints::Constrained(u.int_in_range(0..=2)?)),
        _ if is_leaf => IsCa::NoCa,
        _ => IsCa::Ca(BasicConstraints::Unconstrained),
    };
    let usages = [
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::ContentCommitment,
    ];
    let mask: u8 = u.arbitrary()?;
    if mask & 0x80 == 0 {
        params.key_usages = usages
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, k)| *k)
            .collect();
    }
    let eku = [
        ExtendedKeyUsagePurpose::EmailProtection,
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::Any,
    ];
    for _ in 0..u.int_in_range(0..=2)? {
        params.extended_key_usages.push(pick(u, &eku)?.clone());
    }
    for _ in 0..u.int_in_range(0..=2)? {
        let name = match u.int_in_range(0..=2)? {
            0 | 1 => SanType::Rfc822Name(pick(u, &MAILBOXES)?.to_string().try_into().expect("IA5")),
            _ => SanType::DnsName(
                pick(u, &DOMAINS)?
                    .trim_start_matches('.')
                    .replace('@', ".")
                    .try_into()
                    .expect("IA5"),
            ),
        };
        params.subject_alt_names.push(name);
    }
    if !is_leaf && u.ratio(1, 3)? {
        let mut nc = NameConstraints {
            permitted_subtrees: vec![],
            excluded_subtrees: vec![],
        };
        for _ in 0..u.int_in_range(0..=2)? {
            nc.permitted_subtrees.push(subtree(u)?);
        }
        for _ in 0..u.int_in_range(0..=1)? {
            nc.excluded_subtrees.push(subtree(u)?);
        }
        params.name_constraints = Some(nc);
    }
    for _ in 0..u.int_in_range(0..=2)? {
        let mut ext = CustomExtension::from_oid_content(
            pick(u, &EXTRA_OIDS)?,
            pick(u, &EXTRA_CONTENTS)?.to_vec(),
        );
        ext.set_criticality(u.arbitrary()?);
        params.custom_extensions.push(ext);
    }
    params.use_authority_key_identifier_extension = u.arbitrary()?;
    params.key_identifier_method = KeyIdMethod::Sha256;
    let key = u.choose_index(KEYS)?;
    // Another key than the issuer's signs it in one case of eight: a broken link.
    let signer = if u.ratio(1, 8)? {
        Some(u.choose_index(KEYS)?)
    } else {
        None
    };
    Ok(Spec {
        params,
        key,
        signer,
        not_before,
        not_after,
        serial,
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});

fn run(data: &[u8]) -> ArbitraryResult<()> {
    let mut u = Unstructured::new(data);
    let keys = keys();
    let intermediates = u.int_in_range(0..=3usize)?;
    // The anchor, the intermediates, the signer: each issued by the one before.
    let mut chain: Vec<(Certificate, usize, Spec)> = Vec::new();
    for position in 0..intermediates + 2 {
        let is_leaf = position == intermediates + 1;
        let mut s = spec(&mut u, position, is_leaf)?;
        let params = std::mem::take(&mut s.params);
        let subject_key = &keys[s.key];
        let cert = match chain.last() {
            None => params.self_signed(subject_key),
            Some((issuer, issuer_key, _)) => {
                params.signed_by(subject_key, issuer, &keys[s.signer.unwrap_or(*issuer_key)])
            }
        };
        let Ok(cert) = cert else {
            return Ok(());
        };
        let key = s.key;
        chain.push((cert, key, s));
    }
    let ders: Vec<Vec<u8>> = chain.iter().map(|(c, _, _)| c.der().to_vec()).collect();
    let (leaf_der, rest) = ders.split_last().expect("a signer");

    // What the message carries: any of the intermediates, in any order, some twice,
    // and now and then the anchor itself.
    let mut carried = Vec::new();
    for _ in 0..u.int_in_range(0..=5)? {
        carried.push(rest[u.choose_index(rest.len())?].clone());
    }
    // What the store trusts: the anchor, another certificate of the chain, or nothing.
    let mut anchors = Vec::new();
    match u.int_in_range(0..=4)? {
        0 => {}
        1 => anchors.push(rest[u.choose_index(rest.len())?].clone()),
        _ => anchors.push(rest[0].clone()),
    }
    let pinned = u.ratio(1, 6)?;
    let require_crl = u.ratio(1, 4)?;

    // CRLs: each signed by a certificate of the chain (or another key), current or
    // not, listing serials from the pool.
    let mut crls = Vec::new();
    let mut revokes_leaf = false;
    for _ in 0..u.int_in_range(0..=2)? {
        let by = u.choose_index(chain.len())?;
        let key = if u.ratio(1, 8)? {
            u.choose_index(KEYS)?
        } else {
            chain[by].1
        };
        let this_update = time_around(&mut u, &[-DAY, DAY, -30 * DAY])?;
        let next_update = time_around(&mut u, &[7 * DAY, -2 * DAY, 30 * DAY])?;
        let mut revoked = Vec::new();
        for _ in 0..u.int_in_range(0..=2)? {
            revoked.push(RevokedCertParams {
                serial_number: SerialNumber::from_slice(&[*pick(&mut u, &SERIALS)?]),
                revocation_time: OffsetDateTime::from_unix_timestamp(NOW - DAY).expect("time"),
                reason_code: None,
                invalidity_date: None,
            });
        }
        let serials: Vec<Vec<u8>> = revoked.iter().map(|r| r.serial_number.to_bytes()).collect();
        let params = CertificateRevocationListParams {
            this_update,
            next_update,
            crl_number: SerialNumber::from_slice(&[1]),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: KeyIdMethod::Sha256,
        };
        let Ok(crl) = params.signed_by(&chain[by].0, &keys[key]) else {
            continue;
        };
        // A CRL that the signer's issuer signed with its own key, current now, naming
        // the signer's serial, revokes the signer on any path, provided every
        // certificate of the issuer's name has that key and may sign CRLs (so that
        // no look-alike issuer can stand in for it).
        let leaf = &chain[chain.len() - 1].2;
        let issuer_name = chain[chain.len() - 2].0.params().distinguished_name.clone();
        let sole_issuer = chain.iter().all(|(c, k, _)| {
            c.params().distinguished_name != issuer_name
                || (*k == key
                    && (c.params().key_usages.is_empty()
                        || c.params().key_usages.contains(&KeyUsagePurpose::CrlSign)))
        });
        if by + 2 == chain.len()
            && key == chain[by].1
            && sole_issuer
            && leaf.signer.is_none()
            && this_update.unix_timestamp() <= NOW
            && next_update.unix_timestamp() > NOW
            && serials.iter().any(|s| s.as_slice() == [leaf.serial])
        {
            revokes_leaf = true;
        }
        crls.push(crl.der().to_vec());
    }

    let at = OffsetDateTime::from_unix_timestamp(NOW).expect("time");
    let Some(verdict) =
        mailseal::smime::fuzz_trust(leaf_der, &carried, &anchors, &crls, pinned, require_crl, at)
    else {
        panic!("rcgen wrote a signer certificate that does not decode");
    };
    let trusted = verdict == "Pinned" || verdict == "Anchored";
    if anchors.is_empty() && !pinned {
        assert!(!trusted, "trusted with no anchor and no pin: {verdict}");
    }
    let leaf = &chain[chain.len() - 1].2;
    let in_validity =
        leaf.not_before.unix_timestamp() <= NOW && NOW <= leaf.not_after.unix_timestamp();
    if !in_validity {
        assert!(
            !trusted,
            "a signer outside its validity is trusted: {verdict}"
        );
    }
    if revokes_leaf && !pinned {
        assert!(
            verdict != "Anchored",
            "a revoked signer is trusted: {verdict}"
        );
    }
    Ok(())
}
