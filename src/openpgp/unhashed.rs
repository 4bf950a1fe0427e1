//! Issuer Fingerprint subpackets of the wrong length, dropped from the unhashed area of
//! top-level signature packets before Sequoia reads them.
//!
//! Why: an Issuer Fingerprint's length is fixed by its version (RFC 9580 5.2.3.35: 20
//! octets for version 4, 32 for version 6), and Sequoia refuses the whole signature
//! packet when it is not, so one malformed hint that nothing signed (the unhashed area
//! is not covered by the signature, and an issuer is only a hint of which key to try)
//! spoils a good signature or a subkey's binding. The OpenPGP interoperability suite
//! sends one (a fictitious version 6 fingerprint of 34 octets) and expects the
//! signature to verify. Dropping it cannot make a bad signature good: the signature
//! is still checked over the same hashed data, against the keys the caller gave.
//!
//! Only top-level signature packets change: inside an embedded signature the unhashed
//! area is part of the outer signature's hashed data, where a change would break it.
//! A non-critical subpacket only; anything this cannot frame is passed on unchanged
//! for Sequoia to judge.

use super::framing::new_length;

/// Issuer Fingerprint (RFC 9580 5.2.3.35).
const ISSUER_FINGERPRINT: u8 = 33;
/// The signature packet's tag.
const SIGNATURE: u8 = 2;

/// `binary` OpenPGP packets with every malformed non-critical Issuer Fingerprint
/// dropped from the unhashed area of each top-level v4 or v6 signature packet; the
/// other packets byte for byte. `None` when nothing changed (or the framing is not
/// understood: then nothing is changed).
pub(crate) fn drop_malformed_issuer_fingerprints(binary: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(binary.len());
    let mut changed = false;
    let mut at = 0;
    while at < binary.len() {
        let (tag, header, len) = packet_header(binary.get(at..)?)?;
        let body = binary.get(at + header..at + header + len)?;
        match (tag == SIGNATURE)
            .then(|| cleaned_signature(body))
            .flatten()
        {
            Some(clean) => {
                changed = true;
                out.push(0xc0 | SIGNATURE);
                push_new_length(&mut out, clean.len());
                out.extend_from_slice(&clean);
            }
            None => out.extend_from_slice(&binary[at..at + header + len]),
        }
        at += header + len;
    }
    changed.then_some(out)
}

/// The tag, header size and body length of the packet at the start of `d`; `None` for
/// partial or indeterminate lengths (no signature packet here has one).
fn packet_header(d: &[u8]) -> Option<(u8, usize, usize)> {
    let first = *d.first()?;
    if first & 0x80 == 0 {
        return None;
    }
    if first & 0x40 != 0 {
        let (len, size, partial) = new_length(d.get(1..)?)?;
        return (!partial).then_some((first & 0x3f, 1 + size, len));
    }
    let tag = (first >> 2) & 0x0f;
    let (len, size) = match first & 0x03 {
        0 => (usize::from(*d.get(1)?), 1),
        1 => (usize::from(u16::from_be_bytes([*d.get(1)?, *d.get(2)?])), 2),
        2 => {
            let b = d.get(1..5)?;
            (u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize, 4)
        }
        _ => return None,
    };
    Some((tag, 1 + size, len))
}

/// Appends a new-format body length (RFC 9580 4.2.1.1).
fn push_new_length(out: &mut Vec<u8>, len: usize) {
    match len {
        0..=191 => out.push(len as u8),
        192..=8383 => {
            let l = len - 192;
            out.push(((l >> 8) as u8) + 192);
            out.push(l as u8);
        }
        _ => {
            out.push(255);
            out.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }
}

/// The signature packet body `sig` without its malformed unhashed Issuer
/// Fingerprints; `None` when it has none (or is not a v4 or v6 signature).
fn cleaned_signature(sig: &[u8]) -> Option<Vec<u8>> {
    // Version, type, public-key and hash algorithms, then the hashed area's length:
    // two octets for v4, four for v6 (RFC 9580 5.2.3).
    let width = match *sig.first()? {
        4 => 2,
        6 => 4,
        _ => return None,
    };
    let area_len = |at: usize| -> Option<usize> {
        let b = sig.get(at..at + width)?;
        Some(b.iter().fold(0usize, |n, &o| (n << 8) | usize::from(o)))
    };
    let hashed_end = 4 + width + area_len(4)?;
    let unhashed_start = hashed_end + width;
    let unhashed_end = unhashed_start + area_len(hashed_end)?;
    let unhashed = sig.get(unhashed_start..unhashed_end)?;
    let mut kept = Vec::with_capacity(unhashed.len());
    let mut dropped = false;
    let mut at = 0;
    while at < unhashed.len() {
        let (len, size, partial) = new_length(&unhashed[at..])?;
        if partial || len == 0 {
            // Not a subpacket length (RFC 9580 5.2.3.7 has no partial lengths).
            return None;
        }
        let whole = unhashed.get(at..at + size + len)?;
        let (tag, body) = (whole[size], &whole[size + 1..]);
        if tag == ISSUER_FINGERPRINT && malformed_fingerprint(body) {
            dropped = true;
        } else {
            kept.extend_from_slice(whole);
        }
        at += size + len;
    }
    if !dropped {
        return None;
    }
    let mut out = Vec::with_capacity(sig.len());
    out.extend_from_slice(&sig[..hashed_end]);
    let n = kept.len().to_be_bytes();
    out.extend_from_slice(&n[n.len() - width..]);
    out.extend_from_slice(&kept);
    out.extend_from_slice(&sig[unhashed_end..]);
    Some(out)
}

/// Whether an Issuer Fingerprint body (the version octet, then the fingerprint) has
/// a length its version does not allow.
fn malformed_fingerprint(body: &[u8]) -> bool {
    match body.first() {
        Some(4) => body.len() != 21,
        Some(6) => body.len() != 33,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v4 signature body with the hashed `hashed` and unhashed `unhashed` areas.
    fn v4(hashed: &[u8], unhashed: &[u8]) -> Vec<u8> {
        let mut s = vec![4, 0, 1, 8];
        s.extend_from_slice(&(hashed.len() as u16).to_be_bytes());
        s.extend_from_slice(hashed);
        s.extend_from_slice(&(unhashed.len() as u16).to_be_bytes());
        s.extend_from_slice(unhashed);
        s.extend_from_slice(&[0xab, 0xcd, 0, 8, 0xff]);
        s
    }

    fn subpacket(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut s = vec![(body.len() + 1) as u8, tag];
        s.extend_from_slice(body);
        s
    }

    fn packet(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc0 | tag];
        push_new_length(&mut p, body.len());
        p.extend_from_slice(body);
        p
    }

    #[test]
    fn only_the_malformed_unhashed_fingerprint_goes() {
        let mut bad_v6 = vec![6];
        bad_v6.extend([0xaa; 34]);
        let mut good_v4 = vec![4];
        good_v4.extend([0x11; 20]);
        let issuer = subpacket(16, &[0x22; 8]);
        let hashed = subpacket(33, &bad_v6);
        let unhashed = [
            issuer.clone(),
            subpacket(33, &bad_v6),
            subpacket(33, &good_v4),
        ]
        .concat();
        let other = packet(13, b"Bob <bob@example.org>");
        let input = [other.clone(), packet(2, &v4(&hashed, &unhashed))].concat();
        let out = drop_malformed_issuer_fingerprints(&input).unwrap();
        let expected_sig = v4(&hashed, &[issuer, subpacket(33, &good_v4)].concat());
        assert_eq!(out, [other, packet(2, &expected_sig)].concat());
        // Nothing malformed: nothing changes.
        assert_eq!(drop_malformed_issuer_fingerprints(&out), None);
    }

    #[test]
    fn fail_what_it_cannot_frame_is_left_to_sequoia() {
        let mut bad_v6 = vec![6];
        bad_v6.extend([0xaa; 34]);
        let sig = v4(&[], &subpacket(33, &bad_v6));
        // A truncated packet, a critical bit, a partial length: unchanged.
        let whole = packet(2, &sig);
        assert_eq!(
            drop_malformed_issuer_fingerprints(&whole[..whole.len() - 1]),
            None
        );
        let critical = v4(&[], &subpacket(33 | 0x80, &bad_v6));
        assert_eq!(
            drop_malformed_issuer_fingerprints(&packet(2, &critical)),
            None
        );
        assert_eq!(
            drop_malformed_issuer_fingerprints(&[0xc2, 0xe1, 0, 0]),
            None
        );
        assert_eq!(drop_malformed_issuer_fingerprints(b"not openpgp"), None);
    }
}
