//! Cost (THREATS.md, issue #58): a signed S/MIME message from anyone carries the
//! attacker's own certificates, read before the signer is known to be no one we
//! trust. Every structure in them that repeats is read in linear time (a certificate's
//! extensions, capped at 64; the attributes of a name, which match nothing past 64; its
//! subjectAltName addresses) and so are the SignerInfos, at most 8: the CPU time of
//! `mailseal open` on four times the repetitions is under eight times the time, and its
//! peak memory within the bound docs/security.md states (`fail_cost.rs`'s measure).
//!
//! The certificates are written here field by field (no tool writes 40,000
//! extensions or a relative distinguished name of thousands of attributes) and signed
//! with OpenSSL, which also signs the message: the signature verifies, so everything
//! after it is reached.

use openssl::cms::{CMSOptions, CmsContentInfo};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::stack::Stack;
use openssl::x509::X509;

use super::fail_cost::{gnu_time, measure, BASE_BYTES, MEMORY_MULTIPLE};

pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

pub(crate) fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

pub(crate) fn oid(dotted: &str) -> Vec<u8> {
    let parts: Vec<u64> = dotted.split('.').map(|p| p.parse().unwrap()).collect();
    let mut body = vec![(40 * parts[0] + parts[1]) as u8];
    for &p in &parts[2..] {
        let mut chunk = vec![(p & 0x7F) as u8];
        let mut rest = p >> 7;
        while rest > 0 {
            chunk.push(0x80 | (rest & 0x7F) as u8);
            rest >>= 7;
        }
        chunk.reverse();
        body.extend(chunk);
    }
    tlv(0x06, &body)
}

const ECDSA_SHA256: &str = "1.2.840.10045.4.3.2";
const COMMON_NAME: &str = "2.5.4.3";
const UNIT: &str = "2.5.4.11";

fn p256() -> PKey<Private> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
}

/// A name of one RDN per `(type, value)` group: `rdns[i]` holds the attributes of the
/// i-th RDN (several make a multi-valued RDN, given in DER order).
fn name(rdns: &[Vec<(&str, String)>]) -> Vec<u8> {
    let rdns: Vec<Vec<u8>> = rdns
        .iter()
        .map(|avas| {
            let avas: Vec<Vec<u8>> = avas
                .iter()
                .map(|(t, v)| seq(&[&oid(t), &tlv(0x0C, v.as_bytes())]))
                .collect();
            tlv(0x31, &avas.concat())
        })
        .collect();
    tlv(0x30, &rdns.concat())
}

fn mallory_name() -> Vec<u8> {
    name(&[vec![(COMMON_NAME, "Mallory".to_string())]])
}

/// A certificate of `key` for `subject`, issued by `issuer` and signed by `signer`
/// (its own key when self-signed), with `extensions` (each an Extension's DER).
fn certificate(
    key: &PKey<Private>,
    subject: &[u8],
    issuer: &[u8],
    signer: &PKey<Private>,
    extensions: &[Vec<u8>],
) -> X509 {
    let algorithm = seq(&[&oid(ECDSA_SHA256)]);
    let validity = seq(&[&tlv(0x17, b"260101000000Z"), &tlv(0x17, b"360101000000Z")]);
    let spki = key.public_key_to_der().unwrap();
    let tbs = seq(&[
        &tlv(0xA0, &tlv(0x02, &[2])),
        &tlv(0x02, &[0x01, 0x58]),
        &algorithm,
        issuer,
        &validity,
        subject,
        &spki,
        &tlv(0xA3, &tlv(0x30, &extensions.concat())),
    ]);
    let mut s = openssl::sign::Signer::new(MessageDigest::sha256(), signer).unwrap();
    s.update(&tbs).unwrap();
    let signature = [&[0u8][..], &s.sign_to_vec().unwrap()].concat();
    X509::from_der(&seq(&[&tbs, &algorithm, &tlv(0x03, &signature)])).unwrap()
}

/// A subjectAltName extension of these rfc822Names.
fn san(addresses: &[String]) -> Vec<u8> {
    let names: Vec<Vec<u8>> = addresses.iter().map(|a| tlv(0x81, a.as_bytes())).collect();
    seq(&[&oid("2.5.29.17"), &tlv(0x04, &tlv(0x30, &names.concat()))])
}

fn mallory_san() -> Vec<u8> {
    san(&["mallory@x.example".to_string()])
}

/// The entity Mallory signs (refused before it is read as MailA2A).
const ENTITY: &[u8] = b"Content-Type: text/plain\r\n\r\nhello\r\n";

/// `signer` signs [`ENTITY`] (detached, carrying `carried` too); the message from
/// Mallory to Bob, with `edit` applied to the SignedData's DER first.
fn signed_mail(
    signer: &X509,
    key: &PKey<Private>,
    carried: &[X509],
    edit: impl Fn(Vec<u8>) -> Vec<u8>,
) -> Vec<u8> {
    let mut certs = Stack::new().unwrap();
    for c in carried {
        certs.push(c.clone()).unwrap();
    }
    let cms = CmsContentInfo::sign(
        Some(signer),
        Some(key),
        Some(&certs),
        Some(ENTITY),
        CMSOptions::DETACHED | CMSOptions::BINARY,
    )
    .unwrap();
    let der = edit(cms.to_der().unwrap());
    let mut mail = b"From: <mallory@x.example>\r\nTo: <bob@smime.example>\r\n\
Date: Sun, 06 Dec 2026 09:00:00 +0000\r\nMessage-ID: <cost@x.example>\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/signed; protocol=\"application/pkcs7-signature\"; micalg=sha-256; boundary=\"s\"\r\n\r\n\
--s\r\n"
        .to_vec();
    mail.extend_from_slice(ENTITY);
    mail.extend_from_slice(
        b"\r\n--s\r\nContent-Type: application/pkcs7-signature\r\nContent-Transfer-Encoding: base64\r\n\r\n",
    );
    mail.extend(crate::common::base64_lines(&der));
    mail.extend_from_slice(b"\r\n--s--\r\n");
    mail
}

/// The TLV at `at` in `der`: (tag, start of its content, its length).
fn header(der: &[u8], at: usize) -> (u8, usize, usize) {
    let first = der[at + 1];
    if first < 0x80 {
        return (der[at], at + 2, first as usize);
    }
    let n = (first & 0x7F) as usize;
    let len = der[at + 2..at + 2 + n]
        .iter()
        .fold(0usize, |l, &b| (l << 8) | b as usize);
    (der[at], at + 2 + n, len)
}

/// The ContentInfo `der` with its SignedData's one SignerInfo there `copies` times
/// (each a valid signature: every one verifies).
fn with_signer_infos(der: Vec<u8>, copies: usize) -> Vec<u8> {
    let (_, info, _) = header(&der, 0);
    let (_, oid_start, oid_len) = header(&der, info);
    let content_type = &der[info..oid_start + oid_len];
    let (_, explicit, _) = header(&der, oid_start + oid_len);
    let (_, fields_start, fields_len) = header(&der, explicit);
    let mut fields = Vec::new();
    let mut at = fields_start;
    while at < fields_start + fields_len {
        let (_, start, len) = header(&der, at);
        fields.push((at, start, start + len));
        at = start + len;
    }
    let (last, si_start, si_end) = *fields.last().unwrap();
    let signer_infos = tlv(0x31, &der[si_start..si_end].repeat(copies));
    let signed_data = tlv(
        0x30,
        &[&der[fields_start..last], &signer_infos[..]].concat(),
    );
    seq(&[content_type, &tlv(0xA0, &signed_data)])
}

/// Bob's empty store (Mallory is no one to it).
fn write(dir: &std::path::Path, name: &str, mail: &[u8]) -> std::path::PathBuf {
    let file = dir.join(format!("{name}.eml"));
    std::fs::write(&file, mail).unwrap();
    file
}

/// One kind of input at `n` and `4n` repetitions: refused with `reason` (exit `exit`)
/// within the memory bound each time, and the CPU time at `4n` under eight times that
/// at `n` (the least of three runs each).
fn slope(what: &str, n: usize, make: impl Fn(usize) -> Vec<u8>, exit: i32, reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut cpu = Vec::new();
    for count in [n, 4 * n] {
        let mail = make(count);
        let file = write(dir.path(), what, &mail);
        let bound = MEMORY_MULTIPLE * mail.len() as u64 + BASE_BYTES;
        let mut least = f64::INFINITY;
        for _ in 0..3 {
            let (peak, seconds, code, stderr) = measure("open", &file);
            println!(
                "{what} x{count}: {} bytes, peak {peak} ({:.1}x), {seconds:.2} s CPU",
                mail.len(),
                peak as f64 / mail.len() as f64
            );
            assert!(
                peak <= bound,
                "{what} x{count}: peak {peak} for {} bytes (bound {bound})",
                mail.len()
            );
            assert_eq!(code, Some(exit), "{what} x{count}: {stderr}");
            assert!(stderr.contains(reason), "{what} x{count}: {stderr}");
            // Whatever the certificate says, an error quotes at most a few dozen
            // characters of it.
            assert!(stderr.len() < 1000, "{what} x{count}: {stderr}");
            least = least.min(seconds);
        }
        cpu.push(least.max(0.01));
    }
    let ratio = cpu[1] / cpu[0];
    println!(
        "{what}: x{n} {:.2} s, x{} {:.2} s CPU, ratio {ratio:.1}",
        cpu[0],
        4 * n,
        cpu[1]
    );
    assert!(
        ratio < 8.0,
        "{what}: four times as many cost {ratio:.1} times the work"
    );
}

/// The attacker's self-signed signer certificate with 10,000 and 40,000 extensions
/// (200,000 took over a minute when a repeat was searched for each): refused by
/// their number, in time linear in them.
#[test]
fn fail_cost_a_signer_certificate_of_many_extensions() {
    if !gnu_time() {
        return;
    }
    let key = p256();
    slope(
        "extensions",
        10_000,
        |n| {
            let mut extensions = vec![mallory_san()];
            extensions.extend(
                (0..n)
                    .map(|i| seq(&[&oid(&format!("1.3.6.1.4.1.55555.{i}")), &tlv(0x04, &[5, 0])])),
            );
            let cert = certificate(&key, &mallory_name(), &mallory_name(), &key, &extensions);
            signed_mail(&cert, &key, &[], |der| der)
        },
        4,
        "extensions, more than the 64 read",
    );
}

/// The signer certificate's issuer one RDN of 1,000 and 4,000 attributes, carried
/// with four certificates whose subject is the same RDN in capitals (the same name
/// as RFC 5280 compares names): each attribute was compared with each of the other's
/// (4,000 took 23 s). A name past 64 attributes matches none, and a certificate
/// carrying one is refused before it is decoded (some fifteen times its encoding).
#[test]
fn fail_cost_names_of_many_attributes_among_carried_issuers() {
    if !gnu_time() {
        return;
    }
    let key = p256();
    let others: Vec<PKey<Private>> = (0..4).map(|_| p256()).collect();
    slope(
        "a multi-valued RDN",
        1_000,
        |n| {
            let rdn = |upper: bool| {
                let avas = (0..n)
                    .map(|i| {
                        let v = format!("unit {i:06}");
                        (UNIT, if upper { v.to_uppercase() } else { v })
                    })
                    .collect();
                name(&[avas])
            };
            let issuers: Vec<X509> = others
                .iter()
                .map(|k| certificate(k, &rdn(true), &rdn(true), k, &[]))
                .collect();
            let cert = certificate(&key, &mallory_name(), &rdn(false), &key, &[mallory_san()]);
            signed_mail(&cert, &key, &issuers, |der| der)
        },
        3,
        "has a name of more than 64 attributes",
    );
}

/// A self-issued signer certificate whose subject and issuer are 10,000 and 40,000
/// RDNs (decoded, 40,000 held 100 MB for a 3.4 MB message: refused unread, as above),
/// and one with as many subjectAltName addresses (the From among them: read once,
/// refused as unknown).
#[test]
fn fail_cost_names_of_many_rdns_and_many_addresses() {
    if !gnu_time() {
        return;
    }
    let key = p256();
    slope(
        "RDNs",
        10_000,
        |n| {
            let rdns: Vec<Vec<(&str, String)>> =
                (0..n).map(|i| vec![(UNIT, format!("unit {i}"))]).collect();
            let long = name(&rdns);
            let cert = certificate(&key, &long, &long, &key, &[mallory_san()]);
            signed_mail(&cert, &key, &[], |der| der)
        },
        3,
        "has a name of more than 64 attributes",
    );
    slope(
        "subjectAltName addresses",
        10_000,
        |n| {
            let mut addresses: Vec<String> = (0..n).map(|i| format!("m{i}@x.example")).collect();
            addresses.push("mallory@x.example".into());
            let cert = certificate(
                &key,
                &mallory_name(),
                &mallory_name(),
                &key,
                &[san(&addresses)],
            );
            signed_mail(&cert, &key, &[], |der| der)
        },
        4,
        "self-signed or unknown",
    );
}

/// One valid SignerInfo there 1,000 and 4,000 times (each verified, and each digested
/// the content: the work was the square of the message): refused by their number.
#[test]
fn fail_cost_a_signed_data_of_many_signer_infos() {
    if !gnu_time() {
        return;
    }
    let key = p256();
    let cert = certificate(
        &key,
        &mallory_name(),
        &mallory_name(),
        &key,
        &[mallory_san()],
    );
    slope(
        "SignerInfos",
        1_000,
        |n| signed_mail(&cert, &key, &[], |der| with_signer_infos(der, n)),
        3,
        "more than 8 SignerInfos",
    );
    // Eight, each verifying, are read (and refused for the signer, no one Bob knows).
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "eight",
        &signed_mail(&cert, &key, &[], |der| with_signer_infos(der, 8)),
    );
    let (_, _, code, stderr) = measure("open", &file);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("self-signed or unknown"), "{stderr}");
}
