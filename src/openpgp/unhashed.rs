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
//! Only top-level signature packets change: inside an embedded signature (a subkey
//! binding's back signature) the unhashed area is part of the outer signature's hashed
//! data, where a change would break it. There the malformed subpacket is kept, and the
//! packet is read as Sequoia reads one without it
//! ([`signatures_with_embedded_fingerprints_kept`]). A non-critical subpacket only;
//! anything this cannot frame is passed on unchanged for Sequoia to judge.

use std::ops::Range;

use sequoia_openpgp::packet::signature::subpacket::{
    Subpacket, SubpacketArea, SubpacketTag, SubpacketValue,
};
use sequoia_openpgp::packet::{Packet, Signature};
use sequoia_openpgp::parse::Parse;
use sequoia_openpgp::serialize::MarshalInto;
use sequoia_openpgp::Fingerprint;

use super::framing::new_length;

/// Issuer Fingerprint (RFC 9580 5.2.3.35).
const ISSUER_FINGERPRINT: u8 = 33;
/// Embedded Signature (RFC 9580 5.2.3.34).
const EMBEDDED_SIGNATURE: u8 = 32;
/// The signature packet's tag.
const SIGNATURE: u8 = 2;
/// The key packets' tags (RFC 9580 5.5.1): a certificate starts at a primary key.
const SECRET_KEY: u8 = 5;
const PUBLIC_KEY: u8 = 6;
const SECRET_SUBKEY: u8 = 7;
const PUBLIC_SUBKEY: u8 = 14;
/// The packets that may stand among a component's signatures.
const MARKER: u8 = 10;
const TRUST: u8 = 12;

/// `binary` OpenPGP packets with every malformed non-critical Issuer Fingerprint
/// dropped from the unhashed area of each top-level v4 or v6 signature packet; the
/// other packets byte for byte. `None` when nothing changed (or the framing is not
/// understood: then nothing is changed).
pub fn drop_malformed_issuer_fingerprints(binary: &[u8]) -> Option<Vec<u8>> {
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

/// Where the subpacket areas of a v4 or v6 signature packet body lie.
struct Areas {
    /// The width of an area's length: two octets for v4, four for v6 (RFC 9580 5.2.3).
    width: usize,
    hashed: Range<usize>,
    unhashed: Range<usize>,
}

impl Areas {
    /// The areas of `sig`; `None` when it is not a v4 or v6 signature or is truncated.
    fn of(sig: &[u8]) -> Option<Areas> {
        // Version, type, public-key and hash algorithms, then the hashed area.
        let width = match *sig.first()? {
            4 => 2,
            6 => 4,
            _ => return None,
        };
        let area_len = |at: usize| -> Option<usize> {
            let b = sig.get(at..at + width)?;
            Some(b.iter().fold(0usize, |n, &o| (n << 8) | usize::from(o)))
        };
        let hashed = 4 + width..4 + width + area_len(4)?;
        let start = hashed.end + width;
        let unhashed = start..start + area_len(hashed.end)?;
        sig.get(unhashed.clone())?;
        Some(Areas {
            width,
            hashed,
            unhashed,
        })
    }

    /// `sig` with its hashed area `area` instead; `None` when its length does not fit.
    fn with_hashed(&self, sig: &[u8], area: &[u8]) -> Option<Vec<u8>> {
        self.with(sig, self.hashed.clone(), area)
    }

    /// `sig` with its unhashed area `area` instead.
    fn with_unhashed(&self, sig: &[u8], area: &[u8]) -> Option<Vec<u8>> {
        self.with(sig, self.unhashed.clone(), area)
    }

    fn with(&self, sig: &[u8], replaced: Range<usize>, area: &[u8]) -> Option<Vec<u8>> {
        if u64::try_from(area.len()).ok()? >> (8 * self.width) != 0 {
            return None;
        }
        let mut out = Vec::with_capacity(sig.len());
        out.extend_from_slice(&sig[..replaced.start - self.width]);
        let n = area.len().to_be_bytes();
        out.extend_from_slice(&n[n.len() - self.width..]);
        out.extend_from_slice(area);
        out.extend_from_slice(&sig[replaced.end..]);
        Some(out)
    }
}

/// One subpacket as written: its length, tag octet (with the critical bit) and body.
struct Sub<'a> {
    whole: &'a [u8],
    tag: u8,
    body: &'a [u8],
}

impl Sub<'_> {
    /// A non-critical Issuer Fingerprint whose length its version does not allow.
    fn is_malformed_fingerprint(&self) -> bool {
        self.tag == ISSUER_FINGERPRINT && malformed_fingerprint(self.body)
    }
}

/// The subpackets of `area`; `None` when it does not frame as subpackets.
fn subpackets(area: &[u8]) -> Option<Vec<Sub<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < area.len() {
        let (len, size, partial) = new_length(&area[at..])?;
        if partial || len == 0 {
            // Not a subpacket length (RFC 9580 5.2.3.7 has no partial lengths).
            return None;
        }
        let whole = area.get(at..at + size + len)?;
        out.push(Sub {
            whole,
            tag: whole[size],
            body: &whole[size + 1..],
        });
        at += size + len;
    }
    Some(out)
}

/// The signature packet body `sig` without its malformed unhashed Issuer
/// Fingerprints; `None` when it has none (or is not a v4 or v6 signature).
fn cleaned_signature(sig: &[u8]) -> Option<Vec<u8>> {
    Some(without_malformed_fingerprints(sig)?.0)
}

/// The place in an unhashed area and the body of each fingerprint taken out of it.
type Taken = Vec<(usize, Vec<u8>)>;

/// [`cleaned_signature`], with what was taken out.
fn without_malformed_fingerprints(sig: &[u8]) -> Option<(Vec<u8>, Taken)> {
    let areas = Areas::of(sig)?;
    let unhashed = subpackets(&sig[areas.unhashed.clone()])?;
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for (place, s) in unhashed.iter().enumerate() {
        if s.is_malformed_fingerprint() {
            taken.push((place, s.body.to_vec()));
        } else {
            kept.extend_from_slice(s.whole);
        }
    }
    if taken.is_empty() {
        return None;
    }
    Some((areas.with_unhashed(sig, &kept)?, taken))
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

/// A subkey binding read with its back signature's malformed hint kept
/// ([`with_embedded_fingerprints_kept`]), and where it stood.
#[derive(Clone, Debug)]
pub struct KeptBinding {
    /// The primary key of the certificate it is part of.
    pub primary: Fingerprint,
    /// The subkey packet it follows, which it binds if it verifies.
    pub subkey: Fingerprint,
    /// The binding, which writes back to the packet's body byte for byte.
    pub signature: Signature,
}

/// The top-level signature packets of `binary` that Sequoia refuses only because a
/// signature embedded in their hashed area (a subkey binding's back signature) has a
/// malformed Issuer Fingerprint in its unhashed area, each read with that subpacket
/// kept, where they follow a subkey of a certificate; in order.
pub fn signatures_with_embedded_fingerprints_kept(binary: &[u8]) -> Vec<KeptBinding> {
    let mut out = Vec::new();
    let mut primary = None;
    let mut subkey = None;
    let mut at = 0;
    while let Some((tag, header, len)) = binary.get(at..).and_then(packet_header) {
        let Some(whole) = binary.get(at..at + header + len) else {
            break;
        };
        match tag {
            SECRET_KEY | PUBLIC_KEY => {
                primary = fingerprint_of(whole);
                subkey = None;
            }
            SECRET_SUBKEY | PUBLIC_SUBKEY => subkey = fingerprint_of(whole),
            SIGNATURE => {
                if let (Some(p), Some(k)) = (&primary, &subkey) {
                    out.extend(with_embedded_fingerprints_kept(&whole[header..]).map(
                        |signature| KeptBinding {
                            primary: p.clone(),
                            subkey: k.clone(),
                            signature,
                        },
                    ));
                }
            }
            // A Trust or Marker packet may stand among a component's signatures.
            TRUST | MARKER => {}
            _ => subkey = None,
        }
        at += header + len;
    }
    out
}

/// The fingerprint of the key packet `whole` (header included), as Sequoia reads it.
fn fingerprint_of(whole: &[u8]) -> Option<Fingerprint> {
    match Packet::from_bytes(whole).ok()? {
        Packet::PublicKey(k) => Some(k.fingerprint()),
        Packet::SecretKey(k) => Some(k.fingerprint()),
        Packet::PublicSubkey(k) => Some(k.fingerprint()),
        Packet::SecretSubkey(k) => Some(k.fingerprint()),
        _ => None,
    }
}

/// The signature packet body `sig`, read as a [`Signature`] with the malformed
/// Issuer Fingerprints of the unhashed areas of the signatures embedded in its hashed
/// area kept as subpackets Sequoia does not read.
///
/// Why: those octets are inside the outer signature's hashed data, so they cannot be
/// dropped as a top-level hint is; Sequoia's parser refuses them, and with them the
/// subkey's binding. Sequoia reads the packet with them taken out, and they are put
/// back, at their places, as subpackets of unknown content (Sequoia writes such a
/// subpacket's octets as it holds them). The result is used only when it writes back
/// to exactly `sig`: Sequoia then checks the binding over the octets its signer
/// signed, as it checks any other, so this cannot make a bad signature good. A
/// back signature is checked over its hashed area only; what it carries unhashed is a
/// hint nothing reads.
///
/// Sequoia's `issuer_fingerprints()` on such an embedded signature would panic (it
/// takes every subpacket tagged 33 to be read): the certificates these are inserted
/// into are only verified against and encrypted to, never signed with or stored.
fn with_embedded_fingerprints_kept(sig: &[u8]) -> Option<Signature> {
    let areas = Areas::of(sig)?;
    let mut hashed = Vec::new();
    // For each embedded signature, in order: the places in its unhashed area and
    // bodies of the fingerprints taken out.
    let mut taken: Vec<Taken> = Vec::new();
    for sub in subpackets(&sig[areas.hashed.clone()])? {
        if sub.tag & 0x7f != EMBEDDED_SIGNATURE {
            hashed.extend_from_slice(sub.whole);
            continue;
        }
        let (inner, out) = without_malformed_fingerprints(sub.body)
            .unwrap_or_else(|| (sub.body.to_vec(), Vec::new()));
        push_new_length(&mut hashed, inner.len() + 1);
        hashed.push(sub.tag);
        hashed.extend_from_slice(&inner);
        taken.push(out);
    }
    if taken.iter().all(Vec::is_empty) {
        return None;
    }
    let mut parsed = Signature::from_bytes(&areas.with_hashed(sig, &hashed)?).ok()?;
    let mut taken = taken.into_iter();
    let mut area = Vec::new();
    for sub in parsed.hashed_area().iter() {
        let SubpacketValue::EmbeddedSignature(inner) = sub.value() else {
            area.push(sub.clone());
            continue;
        };
        let out = taken.next()?;
        if out.is_empty() {
            area.push(sub.clone());
            continue;
        }
        let mut inner = inner.clone();
        let mut unhashed: Vec<Subpacket> = inner.unhashed_area().iter().cloned().collect();
        for (place, body) in out {
            let unread = SubpacketValue::Unknown {
                tag: SubpacketTag::IssuerFingerprint,
                body,
            };
            if place > unhashed.len() {
                return None;
            }
            unhashed.insert(place, Subpacket::new(unread, false).ok()?);
        }
        *inner.unhashed_area_mut() = SubpacketArea::new(unhashed).ok()?;
        area.push(Subpacket::new(SubpacketValue::EmbeddedSignature(inner), sub.critical()).ok()?);
    }
    if taken.next().is_some() {
        return None;
    }
    *parsed.hashed_area_mut() = SubpacketArea::new(area).ok()?;
    (parsed.to_vec().ok()?.as_slice() == sig).then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sequoia_openpgp::packet::key::{PrimaryRole, PublicParts, SubordinateRole};
    use sequoia_openpgp::packet::Key;

    type PrimaryKey = Key<PublicParts, PrimaryRole>;
    type Subkey = Key<PublicParts, SubordinateRole>;

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

    /// A subkey binding (the packet) of a new key whose back signature carries the
    /// suite's 34-octet version 6 fingerprint unhashed, `critical` or not; the primary
    /// and subkey it binds.
    fn binding_with_a_malformed_backsig_hint(critical: bool) -> (Vec<u8>, PrimaryKey, Subkey) {
        use sequoia_openpgp::cert::prelude::*;
        use sequoia_openpgp::packet::signature::SignatureBuilder;
        use sequoia_openpgp::types::{KeyFlags, SignatureType};
        let (cert, _) = CertBuilder::new().add_signing_subkey().generate().unwrap();
        let primary = cert.primary_key().key().clone();
        let subkey = cert.keys().subkeys().next().unwrap().key().clone();
        let pair = |k: sequoia_openpgp::packet::Key<_, _>| {
            k.parts_into_secret().unwrap().into_keypair().unwrap()
        };
        let mut back = SignatureBuilder::new(SignatureType::PrimaryKeyBinding)
            .sign_primary_key_binding(
                &mut pair(subkey.clone().role_into_unspecified()),
                &primary,
                &subkey,
            )
            .unwrap();
        let mut bad_v6 = vec![6];
        bad_v6.extend([0xaa; 34]);
        let unread = SubpacketValue::Unknown {
            tag: SubpacketTag::IssuerFingerprint,
            body: bad_v6,
        };
        back.unhashed_area_mut()
            .add(Subpacket::new(unread, critical).unwrap())
            .unwrap();
        let binding = subkey
            .bind(
                &mut pair(primary.clone().role_into_unspecified()),
                &cert,
                SignatureBuilder::new(SignatureType::SubkeyBinding)
                    .set_key_flags(KeyFlags::empty().set_signing())
                    .unwrap()
                    .set_embedded_signature(back)
                    .unwrap(),
            )
            .unwrap();
        let packet = Packet::from(binding).to_vec().unwrap();
        (
            packet,
            primary.parts_into_public(),
            subkey.parts_into_public(),
        )
    }

    /// The primary key and subkey packets, one after the other.
    fn key_packets(primary: &PrimaryKey, subkey: &Subkey) -> Vec<u8> {
        [
            Packet::from(primary.clone()).to_vec().unwrap(),
            Packet::from(subkey.clone()).to_vec().unwrap(),
        ]
        .concat()
    }

    #[test]
    fn a_backsigs_malformed_fingerprint_is_kept_and_the_binding_verifies() {
        let (binding, primary, subkey) = binding_with_a_malformed_backsig_hint(false);
        let (_, header, len) = packet_header(&binding).unwrap();
        let body = &binding[header..header + len];
        // Sequoia's parser refuses the packet; the top-level drop cannot touch it.
        assert!(Signature::from_bytes(body).is_err());
        assert_eq!(drop_malformed_issuer_fingerprints(&binding), None);
        let other = packet(13, b"Bob <bob@example.org>");
        let key = key_packets(&primary, &subkey);
        // Only after a primary key and a subkey: the binding is part of that
        // certificate, and binds that subkey if anything.
        assert!(signatures_with_embedded_fingerprints_kept(&binding).is_empty());
        let after_a_user_id = [&key[..], &other, &binding].concat();
        assert!(signatures_with_embedded_fingerprints_kept(&after_a_user_id).is_empty());
        let kept =
            signatures_with_embedded_fingerprints_kept(&[&other, &key[..], &binding].concat());
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].primary, primary.fingerprint());
        assert_eq!(kept[0].subkey, subkey.fingerprint());
        assert_eq!(kept[0].signature.to_vec().unwrap(), body);
        let sig = kept[0].signature.clone();
        sig.verify_subkey_binding(&primary, &primary, &subkey)
            .unwrap();

        // One octet of the fingerprint changed: read the same way, it does not verify.
        let at = binding
            .windows(34)
            .position(|w| w.iter().all(|&o| o == 0xaa))
            .unwrap();
        let mut altered = binding.clone();
        altered[at] ^= 1;
        let sig = signatures_with_embedded_fingerprints_kept(&[key, altered].concat())
            .pop()
            .unwrap()
            .signature;
        assert!(sig
            .verify_subkey_binding(&primary, &primary, &subkey)
            .is_err());
    }

    #[test]
    fn fail_nothing_is_kept_that_is_critical_well_formed_or_not_a_signature() {
        let (critical, primary, subkey) = binding_with_a_malformed_backsig_hint(true);
        let key = key_packets(&primary, &subkey);
        let after_key = |p: &[u8]| [&key[..], p].concat();
        assert!(signatures_with_embedded_fingerprints_kept(&after_key(&critical)).is_empty());
        let sig = v4(&subpacket(32, &v4(&[], &subpacket(16, &[0x22; 8]))), &[]);
        assert!(
            signatures_with_embedded_fingerprints_kept(&after_key(&packet(2, &sig))).is_empty()
        );
        let (binding, primary, subkey) = binding_with_a_malformed_backsig_hint(false);
        let key = key_packets(&primary, &subkey);
        let whole = [&key[..], &binding].concat();
        assert_eq!(signatures_with_embedded_fingerprints_kept(&whole).len(), 1);
        for cut in [1, 10, binding.len() / 2, binding.len() - 1] {
            assert!(
                signatures_with_embedded_fingerprints_kept(&whole[..key.len() + cut]).is_empty()
            );
        }
        assert!(signatures_with_embedded_fingerprints_kept(b"not openpgp").is_empty());
    }
}
