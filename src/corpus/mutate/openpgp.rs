//! `--layer packets` under OpenPGP: the packet sequence rebuilt around a signature
//! that stays valid.
//!
//! A v4 or v6 signature covers the literal data's content and its own hashed
//! subpackets. This layer changes neither and changes what a reader parses around
//! them: unhashed subpackets (notations, private types, URIs, user ids, each with
//! minimal or five-byte lengths), marker packets anywhere (RFC 9580 5.8: ignored), the
//! literal packet's file name and date (outside a v4 signature), packet headers in
//! every framing (old and new format, one-, two- and five-byte lengths, partial body
//! lengths on the packets that allow them), and compressed data packets of the
//! `Uncompressed` algorithm around the whole.
//!
//! Hand-written over the packet framing (RFC 9580 4.2) rather than through Sequoia's
//! packet types, because the point is the framing Sequoia normalises: its serializer
//! writes one canonical header per packet. It reads only what this crate's sealer
//! wrote.

use super::tokens;
use crate::corpus::rng::Rng;
use crate::openpgp::framing::new_length;

const COMPRESSED: u8 = 8;
const SIGNATURE: u8 = 2;
const MARKER: u8 = 10;
const LITERAL: u8 = 11;

/// One packet: its tag and its body, whatever framing it had.
#[derive(Clone)]
struct Packet {
    tag: u8,
    body: Vec<u8>,
}

/// The packets of `data` (either framing, partial body lengths joined), or `None`.
fn parse(mut data: &[u8]) -> Option<Vec<Packet>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let ctb = data[0];
        if ctb & 0x80 == 0 {
            return None;
        }
        let mut body = Vec::new();
        let tag;
        if ctb & 0x40 != 0 {
            tag = ctb & 0x3f;
            let mut pos = 1;
            loop {
                let (len, head, partial) = new_length(data.get(pos..)?)?;
                let start = pos + head;
                body.extend_from_slice(data.get(start..start.checked_add(len)?)?);
                pos = start + len;
                if !partial {
                    break;
                }
            }
            data = &data[pos..];
        } else {
            tag = (ctb >> 2) & 0x0f;
            let width = match ctb & 3 {
                0 => 1,
                1 => 2,
                2 => 4,
                _ => return None,
            };
            let len = data
                .get(1..1 + width)?
                .iter()
                .fold(0usize, |a, b| (a << 8) | usize::from(*b));
            body.extend_from_slice(data.get(1 + width..(1 + width).checked_add(len)?)?);
            data = &data[1 + width + len..];
        }
        out.push(Packet { tag, body });
    }
    Some(out)
}

/// How a packet's header is written.
#[derive(Clone, Copy)]
enum Framing {
    /// New format, the shortest length.
    Minimal,
    /// New format, a five-byte length whatever the size.
    Five,
    /// Old format (tags below 16), the length in four bytes.
    Old,
    /// New format, partial body lengths of 2^`n` bytes then the rest.
    Partial(u32),
}

fn write_packet(out: &mut Vec<u8>, p: &Packet, framing: Framing) {
    match framing {
        Framing::Old if p.tag < 16 => {
            out.push(0x80 | (p.tag << 2) | 2);
            out.extend_from_slice(&(p.body.len() as u32).to_be_bytes());
            out.extend_from_slice(&p.body);
        }
        // RFC 9580 4.2.1.4: partial lengths on data packets only, the first at least
        // 512 bytes.
        Framing::Partial(n) if matches!(p.tag, LITERAL | COMPRESSED) && p.body.len() > 1 << n => {
            out.push(0xc0 | p.tag);
            let chunk = 1usize << n;
            let mut rest = &p.body[..];
            while rest.len() > chunk {
                out.push(224 + n as u8);
                out.extend_from_slice(&rest[..chunk]);
                rest = &rest[chunk..];
            }
            push_new_length(out, rest.len(), false);
            out.extend_from_slice(rest);
        }
        Framing::Five => {
            out.push(0xc0 | p.tag);
            push_new_length(out, p.body.len(), true);
            out.extend_from_slice(&p.body);
        }
        _ => {
            out.push(0xc0 | p.tag);
            push_new_length(out, p.body.len(), false);
            out.extend_from_slice(&p.body);
        }
    }
}

fn push_new_length(out: &mut Vec<u8>, len: usize, five: bool) {
    match len {
        0..=191 if !five => out.push(len as u8),
        192..=8383 if !five => {
            let l = len - 192;
            out.extend_from_slice(&[(l >> 8) as u8 + 192, l as u8]);
        }
        _ => {
            out.push(255);
            out.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }
}

/// `data` (the packets of a signed message, or a detached signature) with one to
/// three mutations below the signature, each packet then written in a framing of its
/// own. Bytes this module cannot read come back as they are.
pub(super) fn mutate(data: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    let Some(mut packets) = parse(&data) else {
        return data;
    };
    let detached = !packets.iter().any(|p| p.tag == LITERAL);
    for _ in 0..1 + rng.below(3) {
        match rng.below(if detached { 2 } else { 4 }) {
            0 => {
                for p in packets.iter_mut().filter(|p| p.tag == SIGNATURE) {
                    for _ in 0..1 + rng.below(6) {
                        add_unhashed(p, rng);
                    }
                }
            }
            1 => {
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(packets.len() + 1);
                    packets.insert(
                        at,
                        Packet {
                            tag: MARKER,
                            body: b"PGP".to_vec(),
                        },
                    );
                }
            }
            2 => {
                if let Some(lit) = packets.iter_mut().find(|p| p.tag == LITERAL) {
                    literal_metadata(lit, rng);
                }
            }
            _ => {
                // A compressed data packet, algorithm 0 (Uncompressed), around all.
                let mut body = vec![0];
                for p in &packets {
                    write_packet(&mut body, p, framing(rng));
                }
                packets = vec![Packet {
                    tag: COMPRESSED,
                    body,
                }];
            }
        }
    }
    let mut out = Vec::with_capacity(data.len() * 2);
    for p in &packets {
        write_packet(&mut out, p, framing(rng));
    }
    out
}

fn framing(rng: &mut Rng) -> Framing {
    match rng.below(4) {
        0 => Framing::Minimal,
        1 => Framing::Five,
        2 => Framing::Old,
        _ => Framing::Partial(9 + rng.below(4) as u32),
    }
}

/// One more subpacket in the unhashed area of a v4 or v6 signature (two- and
/// four-byte area lengths): never critical, never one that names the issuer (which
/// a verifier uses to find the key).
fn add_unhashed(sig: &mut Packet, rng: &mut Rng) {
    let width = match sig.body.first() {
        Some(4) => 2,
        Some(6) => 4,
        _ => return,
    };
    let area_len = |b: &[u8], at: usize| {
        b.get(at..at + width)
            .map(|l| l.iter().fold(0usize, |a, x| (a << 8) | usize::from(*x)))
    };
    let Some(hashed) = area_len(&sig.body, 4) else {
        return;
    };
    let unhashed_at = 4 + width + hashed;
    let Some(unhashed) = area_len(&sig.body, unhashed_at) else {
        return;
    };
    let (kind, value) = match rng.below(5) {
        // Notation data (RFC 9580 5.2.3.24): human-readable flag, a name and a value.
        0 => {
            let name = token(rng);
            let value = token(rng);
            let mut v = vec![0x80, 0, 0, 0];
            v.extend_from_slice(&(name.len().min(0xffff) as u16).to_be_bytes());
            v.extend_from_slice(&(value.len().min(0xffff) as u16).to_be_bytes());
            v.extend_from_slice(&name[..name.len().min(0xffff)]);
            v.extend_from_slice(&value[..value.len().min(0xffff)]);
            (20, v)
        }
        // Preferred key server, policy URI, signer's user id.
        1 => (24, token(rng)),
        2 => (26, token(rng)),
        3 => (28, token(rng)),
        // Private or experimental types.
        _ => (100 + rng.below(11) as u8, token(rng)),
    };
    let mut sub = Vec::new();
    push_new_length(&mut sub, value.len() + 1, rng.below(3) == 0);
    sub.push(kind);
    sub.extend_from_slice(&value);
    let new_len = unhashed + sub.len();
    if new_len > if width == 2 { 0xffff } else { 0x00ff_ffff } {
        return;
    }
    let end = unhashed_at + width + unhashed;
    sig.body.splice(end..end, sub);
    let len_bytes = (new_len as u32).to_be_bytes();
    sig.body[unhashed_at..unhashed_at + width].copy_from_slice(&len_bytes[4 - width..]);
}

/// The literal packet's file name (up to 255 bytes) and date, which a v4 signature
/// does not cover.
fn literal_metadata(lit: &mut Packet, rng: &mut Rng) {
    let Some(&name_len) = lit.body.get(1) else {
        return;
    };
    let name_end = 2 + usize::from(name_len);
    if lit.body.len() < name_end + 4 {
        return;
    }
    let mut name = token(rng);
    name.truncate(255);
    let date = (rng.next() as u32).to_be_bytes();
    let mut head = vec![lit.body[0], name.len() as u8];
    head.extend_from_slice(&name);
    head.extend_from_slice(&date);
    lit.body.splice(..name_end + 4, head);
}

fn token(rng: &mut Rng) -> Vec<u8> {
    let from = if rng.below(2) == 0 {
        tokens::mime()
    } else {
        tokens::openpgp()
    };
    let t = rng.pick(from).cloned().unwrap_or_default();
    t.repeat(1 + rng.below(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_framing_reads_back_the_same_packets() {
        let packets = [
            Packet {
                tag: LITERAL,
                body: (0..3000).map(|i| i as u8).collect(),
            },
            Packet {
                tag: SIGNATURE,
                body: vec![4; 300],
            },
        ];
        for framing in [
            Framing::Minimal,
            Framing::Five,
            Framing::Old,
            Framing::Partial(9),
        ] {
            let mut out = Vec::new();
            for p in &packets {
                write_packet(&mut out, p, framing);
            }
            let back = parse(&out).unwrap();
            assert_eq!(back.len(), 2);
            for (a, b) in back.iter().zip(&packets) {
                assert_eq!((a.tag, &a.body), (b.tag, &b.body));
            }
        }
    }

    #[test]
    fn an_unhashed_subpacket_lands_in_the_unhashed_area() {
        // v4: version, type, algorithms, hashed area of 3 bytes, unhashed of 0.
        let mut sig = Packet {
            tag: SIGNATURE,
            body: vec![4, 0, 22, 8, 0, 3, 2, 27, 1, 0, 0, 0xab, 0xcd],
        };
        add_unhashed(&mut sig, &mut Rng(5));
        let unhashed = usize::from(u16::from_be_bytes([sig.body[9], sig.body[10]]));
        assert!(unhashed > 0);
        assert_eq!(sig.body.len(), 13 + unhashed);
        assert_eq!(&sig.body[sig.body.len() - 2..], &[0xab, 0xcd]);
        assert_eq!(&sig.body[..9], &[4, 0, 22, 8, 0, 3, 2, 27, 1]);
    }
}
