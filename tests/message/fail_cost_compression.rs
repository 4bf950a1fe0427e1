//! Cost (THREATS.md, issue #58): an OpenPGP compressed data packet is inflated before
//! any signature in it can be checked, and anyone can encrypt one to us. What it may
//! inflate to is tied to what it weighs (`Limits::inflation_budget`: four times the
//! OpenPGP message, at least 8 MiB, at most the 64 MiB decoded limit), so a bomb is
//! refused at its budget and the peak memory of `mailseal open` stays within the
//! multiple of the message docs/security.md states, as for every other input
//! (`fail_cost.rs`: GNU time's peak, CPU time at N and 4N).
//!
//! The bombs are deflate streams written here bit by bit (one block of fixed Huffman
//! codes, 258 zeros every 13 bits: about 160 bytes a byte), so that a message of
//! megabytes, inflating to gigabytes, costs the test nothing to make.

use std::io::Write;
use std::path::Path;

use sequoia_openpgp as openpgp;

use openpgp::cert::amalgamation::ValidAmalgamation;
use openpgp::cert::{Cert, Preferences};
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::stream::{Encryptor, Message, Recipient};

use super::fail_cost::{gnu_time, measure, BASE_BYTES, MEMORY_MULTIPLE};
use crate::common;

/// RFC 1951 bits, least significant first.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u32, count: u32) {
        self.acc |= u64::from(value) << self.n;
        self.n += count;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code, most significant bit first (RFC 1951 3.1.1).
    fn code(&mut self, code: u32, len: u32) {
        for i in (0..len).rev() {
            self.put((code >> i) & 1, 1);
        }
    }

    /// A literal byte in the fixed code (RFC 1951 3.2.6).
    fn literal(&mut self, byte: u8) {
        match byte {
            0..=143 => self.code(0x30 + u32::from(byte), 8),
            _ => self.code(0x190 + u32::from(byte) - 144, 9),
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// A raw deflate stream, one final block of fixed Huffman codes, inflating to `prefix`,
/// then `copies` times 258 bytes repeating its last byte, then `suffix`.
fn deflate(prefix: &[u8], copies: usize, suffix: &[u8]) -> Vec<u8> {
    let mut bits = Bits::default();
    bits.put(1, 1); // BFINAL
    bits.put(1, 2); // BTYPE 01: the fixed codes
    for &byte in prefix {
        bits.literal(byte);
    }
    for _ in 0..copies {
        bits.code(0xC5, 8); // length 258 (symbol 285, no extra bits)
        bits.code(0, 5); // distance 1 (code 0)
    }
    for &byte in suffix {
        bits.literal(byte);
    }
    bits.code(0, 7); // end of block (256)
    bits.finish()
}

/// An OpenPGP packet of tag `tag` with a five-octet length.
fn packet(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0xC0 | tag, 0xFF];
    p.extend_from_slice(&(body.len() as u32).to_be_bytes());
    p.extend_from_slice(body);
    p
}

/// A compressed data packet (ZIP) of about `bytes` holding a literal data packet of
/// zeros (old format, its length up to the container's end), after a one-pass
/// signature by a key no one holds when `signed`: the signature that would follow the
/// zeros is never reached.
fn bomb(bytes: usize, signed: bool) -> Vec<u8> {
    let mut inner = Vec::new();
    if signed {
        // Version 3, binary, SHA-256, EdDSA, a key ID, last.
        inner.extend(packet(4, &[3, 0, 8, 22, 1, 2, 3, 4, 5, 6, 7, 8, 1]));
    }
    // Tag 11, indeterminate length; binary, no file name, no date (ends in a zero).
    inner.extend([0xAF, b'b', 0, 0, 0, 0, 0]);
    let mut body = vec![1u8];
    body.extend(deflate(&inner, bytes * 8 / 13, &[]));
    packet(8, &body)
}

/// `data` encrypted to `cert`, as anyone holding Bob's certificate can.
fn encrypted_to(cert: &Cert, data: &[u8]) -> Vec<u8> {
    let p = StandardPolicy::new();
    let recipients: Vec<_> = cert
        .keys()
        .with_policy(&p, None)
        .for_transport_encryption()
        .map(|ka| Recipient::new(ka.valid_cert().features(), ka.key().key_handle(), ka.key()))
        .collect();
    let mut out = Vec::new();
    let mut message = Encryptor::for_recipients(Message::new(&mut out), recipients)
        .build()
        .unwrap();
    message.write_all(data).unwrap();
    message.finalize().unwrap();
    out
}

/// An RFC 3156 encrypted message from Mallory to Bob around `binary`, armored.
fn pgp_mime(binary: &[u8]) -> Vec<u8> {
    let mut w = openpgp::armor::Writer::new(Vec::new(), openpgp::armor::Kind::Message).unwrap();
    w.write_all(binary).unwrap();
    let armored = w.finalize().unwrap();
    let mut m = b"From: <mallory@x.example>\r\nTo: <bob@pgp.example>\r\nSubject: [...]\r\n\
Message-ID: <bomb@x.example>\r\nDate: Sun, 06 Dec 2026 09:00:00 +0000\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"b\"\r\n\r\n\
--b\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n\
--b\r\nContent-Type: application/octet-stream\r\n\r\n"
        .to_vec();
    for line in armored.split(|&c| c == b'\n') {
        m.extend_from_slice(line);
        m.extend_from_slice(b"\r\n");
    }
    m.extend_from_slice(b"--b--\r\n");
    m
}

/// Bob's store in `dir/home` (where [`measure`] points `MAILSEAL_HOME`), with an
/// OpenPGP key; his certificate.
fn bob(dir: &Path) -> Cert {
    let cert = dir.join("bob.asc");
    let out = std::process::Command::new(common::bin())
        .args([
            "key",
            "generate",
            "--kind",
            "openpgp",
            "--email",
            "bob@pgp.example",
        ])
        .arg("--cert-out")
        .arg(&cert)
        .env("MAILSEAL_HOME", dir.join("home"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Cert::from_file(&cert).unwrap()
}

/// Bombs of megabytes inflating to gigabytes, encrypted to Bob or not, with a one-pass
/// signature or without: each is refused at its budget with its reason, within the
/// memory bound, and four times the bomb costs about four times the work (the budget
/// grows with it). At 2 MiB the budget is the 8 MiB floor, at 8 MiB four times the
/// OpenPGP message (the debug binary's own 40 MiB leave no room below 2 MiB; the
/// release binary's 17 MiB do: BENCHMARKS.md).
#[test]
fn fail_cost_a_compression_bomb_costs_what_it_weighs() {
    if !gnu_time() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cert = bob(dir.path());
    let mut cpu = Vec::new();
    for (what, bytes, signed, encrypted) in [
        ("encrypted", 3 << 19, false, true),
        ("encrypted", 6 << 20, false, true),
        ("signed and encrypted", 3 << 19, true, true),
        ("neither signed nor encrypted", 3 << 19, false, false),
    ] {
        let packets = bomb(bytes, signed);
        let binary = match encrypted {
            true => encrypted_to(&cert, &packets),
            false => packets,
        };
        let mail = pgp_mime(&binary);
        let file = dir.path().join("bomb.eml");
        std::fs::write(&file, &mail).unwrap();
        let bound = MEMORY_MULTIPLE * mail.len() as u64 + BASE_BYTES;
        // The least CPU time of three runs: what the work costs, less what else the
        // machine did.
        let mut least = f64::INFINITY;
        for _ in 0..3 {
            let (peak, seconds, code, stderr) = measure("open", &file);
            println!(
                "{what}: {} bytes, peak {peak} ({:.1}x), {seconds:.2} s CPU",
                mail.len(),
                peak as f64 / mail.len() as f64
            );
            assert!(
                peak <= bound,
                "{what}: peak {peak} bytes for a {}-byte message (bound {bound})",
                mail.len()
            );
            assert_eq!(code, Some(3), "{what}: {stderr}");
            assert!(
                stderr.contains("compressed content inflates past")
                    && stderr.contains("at most 4 times its own size"),
                "{what}: {stderr}"
            );
            least = least.min(seconds);
        }
        if what == "encrypted" {
            cpu.push(least.max(0.01));
        }
    }
    let ratio = cpu[1] / cpu[0];
    println!(
        "encrypted bombs: {:.2} s, four times the size {:.2} s CPU, ratio {ratio:.1}",
        cpu[0], cpu[1]
    );
    assert!(
        ratio < 8.0,
        "four times the bomb cost {ratio:.1} times the work: not linear"
    );
}

/// Mallory's detached signature (over other bytes: Bob does not hold her key, so the
/// entity is read to its end before that counts), armored with bare line ends.
fn mallory_signature() -> Vec<u8> {
    use openpgp::cert::CertBuilder;
    use openpgp::serialize::stream::Signer;
    let (cert, _) = CertBuilder::new()
        .add_userid("<mallory@x.example>")
        .add_signing_subkey()
        .generate()
        .unwrap();
    let pair = cert
        .keys()
        .with_policy(&StandardPolicy::new(), None)
        .secret()
        .for_signing()
        .next()
        .unwrap()
        .key()
        .clone()
        .into_keypair()
        .unwrap();
    let mut sig = Vec::new();
    let message = openpgp::serialize::stream::Armorer::new(Message::new(&mut sig))
        .kind(openpgp::armor::Kind::Signature)
        .build()
        .unwrap();
    let mut signer = Signer::new(message, pair)
        .unwrap()
        .detached()
        .build()
        .unwrap();
    signer.write_all(b"something else").unwrap();
    signer.finalize().unwrap();
    sig
}

/// The worst the budget admits: content just within it, an entity `multipart/signed`
/// of nothing but bare line ends (its canonical form is twice its size, and was made
/// before the signature was checked) under a signature by a key Bob does not hold,
/// encrypted and unsigned (RFC 3156 6.1: the signature inside). Refused for its
/// signer, within the bound.
#[test]
fn fail_cost_content_within_the_budget_read_as_signed_mime() {
    if !gnu_time() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cert = bob(dir.path());
    let signature = mallory_signature();
    for bytes in [3 << 19, 6 << 20] {
        // The budget of the encrypted message, which is some 100 bytes larger.
        let budget = (4 * (bytes + 200)).max(8 << 20);
        let head = b"Content-Type: multipart/signed; protocol=\"application/pgp-signature\"; boundary=b\n\n--b\n";
        let tail = [
            &b"\n--b\nContent-Type: application/pgp-signature\n\n"[..],
            &signature,
            b"\n--b--\n",
        ]
        .concat();
        let mut inner = vec![0xAF, b'b', 0, 0, 0, 0, 0];
        inner.extend_from_slice(head);
        let copies = (budget - inner.len() - tail.len() - 1024) / 258;
        // A padding packet before it, so that the message weighs `bytes`.
        let mut body = vec![1u8];
        body.extend(deflate(&inner, copies, &tail));
        let compressed = packet(8, &body);
        let mut packets = packet(21, &vec![0u8; bytes.saturating_sub(compressed.len() + 64)]);
        packets.extend(compressed);
        let mail = pgp_mime(&encrypted_to(&cert, &packets));
        let file = dir.path().join("signed.eml");
        std::fs::write(&file, &mail).unwrap();
        let bound = MEMORY_MULTIPLE * mail.len() as u64 + BASE_BYTES;
        let (peak, seconds, code, stderr) = measure("open", &file);
        println!(
            "{} bytes inflating to {}: peak {peak} ({:.1}x), {seconds:.2} s CPU: {stderr}",
            mail.len(),
            copies * 258,
            peak as f64 / mail.len() as f64
        );
        assert!(
            peak <= bound,
            "peak {peak} bytes for a {}-byte message (bound {bound})",
            mail.len()
        );
        assert_eq!(code, Some(4), "{stderr}");
        assert!(stderr.contains("unknown"), "{stderr}");
    }
}

/// S/MIME compressed-data (RFC 3274) is not read: a zlib stream inflating to
/// gigabytes in `application/pkcs7-mime; smime-type=compressed-data` is refused as not
/// signed, at the process's own size.
#[test]
fn fail_cost_smime_compressed_data_is_not_read() {
    use super::fail_cost_certificate::{oid, seq, tlv};
    if !gnu_time() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // zlib: its header, the deflate stream, an Adler-32 no one checks.
    let zlib = [
        &[0x78, 0x9C][..],
        &deflate(&[0], (3 << 20) * 8 / 13, &[]),
        &[0; 4],
    ]
    .concat();
    let compressed_data = seq(&[
        &tlv(0x02, &[0]),
        &seq(&[&oid("1.2.840.113549.1.9.16.3.8")]),
        &seq(&[&oid("1.2.840.113549.1.7.1"), &tlv(0xA0, &tlv(0x04, &zlib))]),
    ]);
    let info = seq(&[
        &oid("1.2.840.113549.1.9.16.1.9"),
        &tlv(0xA0, &compressed_data),
    ]);
    let mut mail = b"From: <mallory@x.example>\r\nTo: <bob@pgp.example>\r\n\
Message-ID: <z@x.example>\r\nDate: Sun, 06 Dec 2026 09:00:00 +0000\r\nMIME-Version: 1.0\r\n\
Content-Type: application/pkcs7-mime; smime-type=compressed-data; name=smime.p7z\r\n\
Content-Transfer-Encoding: base64\r\n\r\n"
        .to_vec();
    mail.extend(common::base64_lines(&info));
    mail.extend_from_slice(b"\r\n");
    let file = dir.path().join("compressed.eml");
    std::fs::write(&file, &mail).unwrap();
    let (peak, seconds, code, stderr) = measure("open", &file);
    let bound = MEMORY_MULTIPLE * mail.len() as u64 + BASE_BYTES;
    println!(
        "{} bytes: peak {peak}, {seconds:.2} s CPU: {stderr}",
        mail.len()
    );
    assert!(peak <= bound, "peak {peak} for {} bytes", mail.len());
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("not an S/MIME signed message"), "{stderr}");
}
