//! BER to DER for the CMS that streaming producers write (`openssl cms -stream`, the
//! OpenSSL AuthEnvelopedData test files): indefinite lengths become definite, long-form
//! lengths become minimal, and content split into a constructed OCTET STRING is joined
//! into one primitive string.
//!
//! The `der` crate reads DER only, so a BER message is rewritten once before it is
//! decoded. Only the encodings above are rewritten; anything else DER forbids (a
//! non-minimal INTEGER, an unsorted SET OF) still fails in the decoder. The rewrite
//! is bounded: nesting depth, and an output never longer than the input plus a few
//! length bytes per element.

use super::BerError;

/// Deeper than any CMS structure we read (certificates included).
const MAX_DEPTH: usize = 48;

const OCTET_STRING: u8 = 0x04;
const CONSTRUCTED: u8 = 0x20;
const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;

fn malformed(what: &'static str) -> BerError {
    BerError(what)
}

/// Whether `input` needs rewriting: an indefinite length or a constructed OCTET STRING
/// somewhere in its outer layers. Cheap enough to ask before every decode.
pub(crate) fn is_ber(input: &[u8]) -> bool {
    // DER's outer ContentInfo always has a definite length; streamed CMS starts 30 80.
    input.len() >= 2 && input[0] == SEQUENCE && input[1] == 0x80
}

/// One decoded element: its identifier octet and where its content is.
enum Node {
    Primitive {
        tag: u8,
        content: std::ops::Range<usize>,
    },
    Constructed {
        tag: u8,
        children: Vec<Node>,
    },
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, BerError> {
        let b = *self
            .input
            .get(self.pos)
            .ok_or_else(|| malformed("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    /// `None` for the indefinite form.
    fn length(&mut self) -> Result<Option<usize>, BerError> {
        let first = self.byte()?;
        if first < 0x80 {
            return Ok(Some(first as usize));
        }
        if first == 0x80 {
            return Ok(None);
        }
        let count = (first & 0x7f) as usize;
        if count > 4 {
            return Err(malformed("length too long"));
        }
        let mut len = 0usize;
        for _ in 0..count {
            len = (len << 8) | self.byte()? as usize;
        }
        if len > self.input.len() - self.pos {
            return Err(malformed("length beyond the input"));
        }
        Ok(Some(len))
    }

    /// Reads one element ending at or before `end`.
    fn node(&mut self, end: usize, depth: usize) -> Result<Node, BerError> {
        if depth > MAX_DEPTH {
            return Err(malformed("nested too deeply"));
        }
        let tag = self.byte()?;
        if tag & 0x1f == 0x1f {
            return Err(malformed("high tag numbers are not used by CMS"));
        }
        let length = self.length()?;
        if tag & CONSTRUCTED == 0 {
            let len = length.ok_or_else(|| malformed("indefinite primitive"))?;
            let start = self.pos;
            if len > end.saturating_sub(start) {
                return Err(malformed("element beyond its parent"));
            }
            self.pos += len;
            return Ok(Node::Primitive {
                tag,
                content: start..start + len,
            });
        }
        let mut children = Vec::new();
        match length {
            Some(len) => {
                let stop = self.pos + len;
                if stop > end {
                    return Err(malformed("element beyond its parent"));
                }
                while self.pos < stop {
                    children.push(self.node(stop, depth + 1)?);
                }
            }
            None => loop {
                if self.input.get(self.pos..self.pos + 2) == Some(&[0, 0]) {
                    self.pos += 2;
                    break;
                }
                if self.pos >= end {
                    return Err(malformed("no end-of-contents"));
                }
                children.push(self.node(end, depth + 1)?);
            },
        }
        if self.pos > end {
            return Err(malformed("element beyond its parent"));
        }
        Ok(Node::Constructed { tag, children })
    }
}

/// The concatenated content of a string built of OCTET STRING segments, or `None`
/// when a child is anything else.
fn segments(children: &[Node], input: &[u8], out: &mut Vec<u8>) -> Option<()> {
    for child in children {
        match child {
            Node::Primitive {
                tag: OCTET_STRING,
                content,
            } => out.extend_from_slice(&input[content.clone()]),
            Node::Constructed {
                tag: t,
                children: inner,
            } if *t == OCTET_STRING | CONSTRUCTED => segments(inner, input, out)?,
            _ => return None,
        }
    }
    Some(())
}

/// Appends the DER header of a `tag` element whose content is `len` bytes long.
pub(crate) fn push_header(out: &mut Vec<u8>, tag: u8, len: usize) {
    out.push(tag);
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

/// Whether `children` have the shape of an EncryptedContentInfo (contentType OID,
/// AlgorithmIdentifier, `[0] IMPLICIT` content): its `[0]` is an OCTET STRING, so a
/// constructed `[0]` of segments there is joined like one.
fn is_encrypted_content_info(children: &[Node]) -> bool {
    matches!(
        children,
        [
            Node::Primitive { tag: OID, .. },
            Node::Constructed { tag: SEQUENCE, .. },
            Node::Constructed { tag: 0xa0, .. }
        ]
    )
}

fn encode(node: &Node, input: &[u8], out: &mut Vec<u8>, implicit_string: bool) {
    match node {
        Node::Primitive { tag, content } => {
            push_header(out, *tag, content.len());
            out.extend_from_slice(&input[content.clone()]);
        }
        Node::Constructed { tag, children } => {
            let string_tag = if *tag == OCTET_STRING | CONSTRUCTED {
                Some(OCTET_STRING)
            } else if implicit_string {
                Some(tag & !CONSTRUCTED)
            } else {
                None
            };
            if let Some(primitive) = string_tag {
                let mut joined = Vec::new();
                if segments(children, input, &mut joined).is_some() {
                    push_header(out, primitive, joined.len());
                    out.extend_from_slice(&joined);
                    return;
                }
            }
            let eci = *tag == SEQUENCE && is_encrypted_content_info(children);
            let mut body = Vec::new();
            for (i, child) in children.iter().enumerate() {
                encode(child, input, &mut body, eci && i == 2);
            }
            push_header(out, *tag, body.len());
            out.extend_from_slice(&body);
        }
    }
}

/// The DER form of the BER element that makes up all of `input`.
pub(crate) fn to_der(input: &[u8]) -> Result<Vec<u8>, BerError> {
    let mut reader = Reader { input, pos: 0 };
    let root = reader.node(input.len(), 0)?;
    if reader.pos != input.len() {
        return Err(malformed("data after the content"));
    }
    let mut out = Vec::with_capacity(input.len());
    encode(&root, input, &mut out, false);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indefinite_lengths_and_segments_become_der() {
        // SEQUENCE(indef) { OCTET STRING constructed(indef) { "ab", "c" }, INTEGER 5 }
        let ber = [
            0x30, 0x80, 0x24, 0x80, 0x04, 0x02, b'a', b'b', 0x04, 0x01, b'c', 0x00, 0x00, 0x02,
            0x01, 0x05, 0x00, 0x00,
        ];
        assert!(is_ber(&ber));
        assert_eq!(
            to_der(&ber).unwrap(),
            [0x30, 0x08, 0x04, 0x03, b'a', b'b', b'c', 0x02, 0x01, 0x05]
        );
    }

    #[test]
    fn long_form_lengths_become_minimal() {
        assert_eq!(
            to_der(&[0x30, 0x82, 0x00, 0x03, 0x02, 0x01, 0x07]).unwrap(),
            [0x30, 0x03, 0x02, 0x01, 0x07]
        );
    }

    #[test]
    fn an_explicit_tag_around_a_string_stays_constructed() {
        // [0] EXPLICIT { OCTET STRING constructed { "x" } } as in eContent.
        let ber = [0xa0, 0x80, 0x24, 0x80, 0x04, 0x01, b'x', 0, 0, 0, 0];
        assert_eq!(to_der(&ber).unwrap(), [0xa0, 0x03, 0x04, 0x01, b'x']);
    }

    #[test]
    fn fail_truncated_unterminated_and_deep_inputs() {
        assert!(to_der(&[0x30, 0x80, 0x02, 0x01, 0x05]).is_err());
        assert!(to_der(&[0x30, 0x05, 0x02, 0x01]).is_err());
        assert!(to_der(&[0x04, 0x80]).is_err());
        let mut deep = Vec::new();
        for _ in 0..100 {
            deep.extend_from_slice(&[0x30, 0x80]);
        }
        for _ in 0..100 {
            deep.extend_from_slice(&[0, 0]);
        }
        assert!(to_der(&deep).is_err());
        assert!(to_der(&[0x02, 0x01, 0x05, 0x00]).is_err());
    }
}
