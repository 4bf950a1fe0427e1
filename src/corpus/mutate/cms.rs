//! `--layer packets` under S/MIME: the detached CMS SignedData rebuilt around a
//! signature that stays valid.
//!
//! A verifier checks the signature over the signed attributes and the content; this
//! layer changes neither (the signed attributes are written back byte for byte) and
//! changes everything else a CMS reader must parse on the way: unsigned attributes of
//! every shape (unknown types, a countersignature, capabilities, nested structures,
//! no value or many, many attributes), the certificate set
//! (duplicates, reversed order, `OtherCertificateFormat`), revocation information
//! (`OtherRevocationInfoFormat`), extra digest algorithms, and BER indefinite lengths
//! on the outer layers.
//!
//! Left out: an unsigned content type, message digest or signing time. RFC 5652 11
//! requires them signed, and OpenSSL 3 refuses such a SignerInfo before it looks at
//! the signature ("attribute error"), so they test nothing behind it.
//!
//! Written over tag-length-value nodes rather than the `cms` crate's types because the
//! mutants break DER on purpose (unsorted and duplicated SET OF elements, indefinite
//! lengths), which a typed DER encoder refuses to write. It reads only DER that this
//! crate's own signer wrote.

use super::tokens;
use crate::asn1::ber::push_header;
use crate::asn1::oids;
use crate::corpus::rng::Rng;

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const UTF8_STRING: u8 = 0x0c;
const INTEGER: u8 = 0x02;
const NULL: u8 = 0x05;
/// SignedData `[0] IMPLICIT CertificateSet`, and a SignerInfo's signed attributes.
const CONTEXT_0: u8 = 0xa0;
/// SignedData `[1] IMPLICIT RevocationInfoChoices`, a SignerInfo's unsigned
/// attributes, and `OtherRevocationInfoFormat` within the former.
const CONTEXT_1: u8 = 0xa1;
/// `CertificateChoices`' `[3] IMPLICIT OtherCertificateFormat`.
const CONTEXT_3: u8 = 0xa3;
/// OpenSSL reads no deeper than 30 constructed levels; the mutants stay readable.
const MAX_NEST: usize = 24;

/// One element: a single-byte tag and its content, split into elements when it is
/// constructed.
#[derive(Clone)]
struct Node {
    tag: u8,
    body: Body,
    /// Written with an indefinite length (BER) rather than DER's definite one.
    indefinite: bool,
}

#[derive(Clone)]
enum Body {
    Bytes(Vec<u8>),
    Nodes(Vec<Node>),
}

impl Node {
    fn leaf(tag: u8, bytes: &[u8]) -> Node {
        Node {
            tag,
            body: Body::Bytes(bytes.to_vec()),
            indefinite: false,
        }
    }

    fn of(tag: u8, nodes: Vec<Node>) -> Node {
        Node {
            tag,
            body: Body::Nodes(nodes),
            indefinite: false,
        }
    }

    fn nodes(&mut self) -> Option<&mut Vec<Node>> {
        match &mut self.body {
            Body::Nodes(n) => Some(n),
            Body::Bytes(_) => None,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        let mut content = Vec::new();
        match &self.body {
            Body::Bytes(b) => content.extend_from_slice(b),
            Body::Nodes(nodes) => nodes.iter().for_each(|n| n.write(&mut content)),
        }
        if self.indefinite {
            out.extend_from_slice(&[self.tag, 0x80]);
            out.extend_from_slice(&content);
            out.extend_from_slice(&[0, 0]);
        } else {
            push_header(out, self.tag, content.len());
            out.extend_from_slice(&content);
        }
    }
}

/// The DER elements that make up all of `data`, or `None` where it is not DER this
/// module reads (a multi-byte tag, an indefinite or overlong length, too deep).
fn parse(data: &[u8], depth: usize) -> Option<Vec<Node>> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let tag = rest[0];
        if tag & 0x1f == 0x1f || depth > 64 {
            return None;
        }
        let first = *rest.get(1)?;
        let (len, head) = if first < 0x80 {
            (usize::from(first), 2)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 {
                return None;
            }
            let len = rest
                .get(2..2 + n)?
                .iter()
                .fold(0usize, |a, b| (a << 8) | usize::from(*b));
            (len, 2 + n)
        };
        let content = rest.get(head..head.checked_add(len)?)?;
        let body = if tag & 0x20 != 0 {
            Body::Nodes(parse(content, depth + 1)?)
        } else {
            Body::Bytes(content.to_vec())
        };
        out.push(Node {
            tag,
            body,
            indefinite: false,
        });
        rest = &rest[head + len..];
    }
    Some(out)
}

/// `der` (a ContentInfo holding a SignedData) with one to three structural mutations
/// below its signature, and BER lengths on the outer layers one time in three. Bytes
/// this module cannot read come back as they are.
pub(super) fn mutate(der: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    let Some(mut root) = parse(&der, 0).and_then(|mut n| (n.len() == 1).then(|| n.remove(0)))
    else {
        return der;
    };
    let rounds = 1 + rng.below(3);
    let mut done = 0;
    for _ in 0..rounds {
        done += usize::from(mutate_once(&mut root, rng).is_some());
    }
    if done == 0 {
        return der;
    }
    if rng.below(3) == 0 {
        indefinite_outer(&mut root, rng);
    }
    let mut out = Vec::with_capacity(der.len() * 2);
    root.write(&mut out);
    out
}

/// The SignedData of a ContentInfo: `SEQUENCE { contentType, [0] EXPLICIT content }`.
fn signed_data(root: &mut Node) -> Option<&mut Vec<Node>> {
    root.nodes()?.get_mut(1)?.nodes()?.get_mut(0)?.nodes()
}

fn mutate_once(root: &mut Node, rng: &mut Rng) -> Option<()> {
    let sd = signed_data(root)?;
    match rng.below(5) {
        0 => {
            let signer = sd.last_mut()?.nodes()?.first()?.clone();
            let certs = certificates(sd);
            let attribute = attribute(rng, &signer, &certs);
            unsigned_attributes(sd)?.push(attribute);
        }
        1 => {
            let signer = sd.last_mut()?.nodes()?.first()?.clone();
            let certs = certificates(sd);
            let many = 10 + rng.below(90);
            let attributes: Vec<Node> =
                (0..many).map(|_| attribute(rng, &signer, &certs)).collect();
            unsigned_attributes(sd)?.extend(attributes);
        }
        2 => {
            let set = sd.iter_mut().find(|n| n.tag == CONTEXT_0)?.nodes()?;
            match rng.below(3) {
                1 if set.len() > 1 => set.reverse(),
                0 | 1 => {
                    let copy = rng.pick(set)?.clone();
                    for _ in 0..1 + rng.below(8) {
                        let at = rng.below(set.len() + 1);
                        set.insert(at, copy.clone());
                    }
                }
                _ => {
                    let other = Node::of(CONTEXT_3, vec![oid(rng), value(rng, &[], 0)]);
                    let at = rng.below(set.len() + 1);
                    set.insert(at, other);
                }
            }
        }
        3 => {
            // RevocationInfoChoices sits between the certificates and the SignerInfos.
            let other = Node::of(CONTEXT_1, vec![oid(rng), value(rng, &[], 0)]);
            match sd.iter_mut().find(|n| n.tag == CONTEXT_1) {
                Some(crls) => crls.nodes()?.push(other),
                None => {
                    let at = sd.len().checked_sub(1)?;
                    sd.insert(at, Node::of(CONTEXT_1, vec![other]));
                }
            }
        }
        _ => {
            let algorithms = sd.get_mut(1).filter(|n| n.tag == SET)?.nodes()?;
            for _ in 0..1 + rng.below(4) {
                let digest = rng.pick(&[oids::SHA256, oids::SHA384, oids::SHA512, oids::SHA1])?;
                let mut id = vec![Node::leaf(OID, digest.as_bytes())];
                if rng.below(2) == 0 {
                    id.push(Node::leaf(NULL, &[]));
                }
                let at = rng.below(algorithms.len() + 1);
                algorithms.insert(at, Node::of(SEQUENCE, id));
            }
        }
    }
    Some(())
}

/// The certificates the SignedData carries.
fn certificates(sd: &mut [Node]) -> Vec<Node> {
    sd.iter_mut()
        .find(|n| n.tag == CONTEXT_0)
        .and_then(Node::nodes)
        .map(|n| n.clone())
        .unwrap_or_default()
}

/// The first SignerInfo's `[1] IMPLICIT` unsigned attributes, made if absent (it is
/// the SignerInfo's last field).
fn unsigned_attributes(sd: &mut [Node]) -> Option<&mut Vec<Node>> {
    let signer = sd.last_mut()?.nodes()?.first_mut()?.nodes()?;
    if signer.last().map(|n| n.tag) != Some(CONTEXT_1) {
        signer.push(Node::of(CONTEXT_1, vec![]));
    }
    signer.last_mut()?.nodes()
}

/// An `Attribute ::= SEQUENCE { attrType, attrValues SET OF }` that no signature
/// covers.
fn attribute(rng: &mut Rng, signer: &Node, certs: &[Node]) -> Node {
    let (kind, values) = match rng.below(5) {
        // A countersignature: a SignerInfo, here the signer's own.
        0 => (Node::leaf(OID, COUNTERSIGNATURE), vec![signer.clone()]),
        // An S/MIME capabilities list, which belongs in the signed attributes and
        // says otherwise here.
        1 => (
            Node::leaf(OID, oids::ATTR_SMIME_CAPABILITIES.as_bytes()),
            vec![Node::of(
                SEQUENCE,
                (0..rng.below(8))
                    .map(|_| Node::of(SEQUENCE, vec![oid(rng)]))
                    .collect(),
            )],
        ),
        // No value at all, or many.
        2 => (oid(rng), vec![]),
        3 => {
            let n = 2 + rng.below(30);
            (oid(rng), (0..n).map(|_| value(rng, certs, 0)).collect())
        }
        _ => (oid(rng), vec![value(rng, certs, 0)]),
    };
    Node::of(SEQUENCE, vec![kind, Node::of(SET, values)])
}

/// `countersignature` (RFC 5652 11.4).
const COUNTERSIGNATURE: &[u8] = b"\x2a\x86\x48\x86\xf7\x0d\x01\x09\x06";

/// An object identifier: one of the dictionary's (but the three attributes that must
/// be signed), or arcs made up under 1.3.6.1.4.1 (private enterprises).
fn oid(rng: &mut Rng) -> Node {
    let signed_only = [
        oids::ATTR_CONTENT_TYPE,
        oids::ATTR_MESSAGE_DIGEST,
        oids::ATTR_SIGNING_TIME,
    ];
    let known: Vec<&Vec<u8>> = tokens::asn1()
        .iter()
        .filter(|t| t.first() == Some(&OID) && t.len() > 2)
        .filter(|t| !signed_only.iter().any(|o| o.as_bytes() == &t[2..]))
        .collect();
    if rng.below(2) == 0 {
        if let Some(t) = rng.pick(&known) {
            return Node::leaf(OID, &t[2..]);
        }
    }
    let mut arcs = b"\x2b\x06\x01\x04\x01".to_vec();
    arcs.extend((0..1 + rng.below(8)).map(|_| (1 + rng.below(127)) as u8));
    Node::leaf(OID, &arcs)
}

/// A value of any type: strings of dictionary tokens, integers, nested sequences,
/// sets, a carried certificate.
fn value(rng: &mut Rng, certs: &[Node], depth: usize) -> Node {
    match rng.below(7) {
        0 => Node::leaf(OCTET_STRING, &token(rng)),
        1 => Node::leaf(UTF8_STRING, &token(rng)),
        2 => {
            let mut n: Vec<u8> = (0..1 + rng.below(64)).map(|_| rng.next() as u8).collect();
            n[0] = 1 + n[0] % 0x7f;
            Node::leaf(INTEGER, &n)
        }
        3 if depth < MAX_NEST => {
            let levels = 1 + rng.below(MAX_NEST - depth);
            let mut v = Node::leaf(NULL, &[]);
            for _ in 0..levels {
                v = Node::of(SEQUENCE, vec![v]);
            }
            v
        }
        4 if depth + 1 < MAX_NEST => {
            let n = rng.below(5);
            Node::of(SET, (0..n).map(|_| value(rng, certs, depth + 1)).collect())
        }
        5 if !certs.is_empty() => rng.pick(certs).cloned().unwrap_or(Node::leaf(NULL, &[])),
        _ => Node::leaf(NULL, &[]),
    }
}

/// One token of the MIME or ASN.1 dictionary, a few times over.
fn token(rng: &mut Rng) -> Vec<u8> {
    let from = if rng.below(2) == 0 {
        tokens::mime()
    } else {
        tokens::asn1()
    };
    let t = rng.pick(from).cloned().unwrap_or_default();
    t.repeat(1 + rng.below(4))
}

/// Indefinite lengths on the ContentInfo and some of the layers below it (BER, which
/// S/MIME receivers read: streaming signers write it). The signed attributes keep
/// their DER: their encoding is what is signed.
fn indefinite_outer(root: &mut Node, rng: &mut Rng) {
    root.indefinite = true;
    let Some(explicit) = root.nodes().and_then(|n| n.get_mut(1)) else {
        return;
    };
    explicit.indefinite = rng.below(2) == 0;
    let Some(sd) = explicit.nodes().and_then(|n| n.get_mut(0)) else {
        return;
    };
    sd.indefinite = rng.below(2) == 0;
    for field in sd.nodes().into_iter().flatten() {
        field.indefinite = field.tag & 0x20 != 0 && rng.below(2) == 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmutated_der_is_written_back_the_same() {
        // A ContentInfo with an indefinite-free nested structure.
        let node = Node::of(
            SEQUENCE,
            vec![
                Node::leaf(OID, oids::ID_SIGNED_DATA.as_bytes()),
                Node::of(
                    CONTEXT_0,
                    vec![Node::of(SEQUENCE, vec![Node::leaf(INTEGER, &[1]); 200])],
                ),
            ],
        );
        let mut der = Vec::new();
        node.write(&mut der);
        let mut again = Vec::new();
        parse(&der, 0).unwrap()[0].write(&mut again);
        assert_eq!(der, again);
        // Not DER this module reads: left alone.
        assert_eq!(
            mutate(b"\x30\x80\x00\x00".to_vec(), &mut Rng(1)),
            b"\x30\x80\x00\x00"
        );
    }
}
