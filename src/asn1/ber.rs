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

/// At most this many constructed elements: far more than any CMS structure has (the
/// carried certificates and recipients are bounded long before), and it bounds the
/// per-element bookkeeping below (12 bytes each).
const MAX_CONSTRUCTED: usize = 1 << 18;

/// What the first pass learns about one constructed element, in document order: the
/// writing pass needs each length before the content it heads. Primitive elements
/// need nothing: their length is in the input, so a string cut into a million
/// segments costs nothing here (issue #17, memory linear with a small constant).
#[derive(Clone, Copy)]
struct Entry {
    /// The DER length of its content as a constructed element.
    body: u32,
    /// The joined length of its OCTET STRING segments, when it is made of nothing
    /// else ([`NOT_A_STRING`] otherwise).
    joined: u32,
    /// Constructed elements in its subtree, itself included: where the next sibling's
    /// entry is when this one is written as a joined string.
    subtree: u32,
    /// A SEQUENCE shaped like an EncryptedContentInfo: its third element, an
    /// `[0] IMPLICIT OCTET STRING`, is joined too.
    eci: bool,
}

const NOT_A_STRING: u32 = u32::MAX;

/// The length of a DER header for `len` content bytes.
fn header_len(len: usize) -> usize {
    if len < 0x80 {
        2
    } else {
        2 + (usize::BITS as usize / 8 - len.leading_zeros() as usize / 8)
    }
}

/// How one element measures: its DER length written normally, the joined length of
/// its segments when it is a string of them, and its kind.
#[derive(Clone, Copy)]
struct Measure {
    der: usize,
    joined: Option<usize>,
    tag: u8,
    constructed: bool,
}

impl Measure {
    /// Its DER length when written as an implicitly tagged string (joined if it can be).
    fn as_string(&self) -> usize {
        match self.joined {
            Some(j) if self.constructed => header_len(j) + j,
            _ => self.der,
        }
    }
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
}

/// An element's identifier, length and where its content starts.
struct Header {
    tag: u8,
    length: Option<usize>,
}

fn to_u32(n: usize) -> Result<u32, BerError> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n != NOT_A_STRING)
        .ok_or_else(|| malformed("too long"))
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

    /// The content of the primitive element whose header was just read, leaving the
    /// reader after it (the writing pass, over input the first pass checked).
    fn primitive_content(&mut self, length: Option<usize>) -> Result<&[u8], BerError> {
        let len = length.ok_or_else(|| malformed("indefinite primitive"))?;
        let start = self.pos;
        let content = self
            .input
            .get(start..start + len)
            .ok_or_else(|| malformed("truncated"))?;
        self.pos += len;
        Ok(content)
    }

    fn header(&mut self) -> Result<Header, BerError> {
        let tag = self.byte()?;
        if tag & 0x1f == 0x1f {
            return Err(malformed("high tag numbers are not used by CMS"));
        }
        let length = self.length()?;
        Ok(Header { tag, length })
    }

    /// Whether the children of a constructed element whose content started where
    /// `stop` (definite) says, or that ends in end-of-contents, are exhausted; the
    /// end-of-contents is consumed.
    fn at_end(&mut self, stop: Option<usize>, end: usize) -> Result<bool, BerError> {
        match stop {
            Some(stop) => Ok(self.pos >= stop),
            None => {
                if self.input.get(self.pos..self.pos + 2) == Some(&[0, 0]) {
                    self.pos += 2;
                    return Ok(true);
                }
                if self.pos >= end {
                    return Err(malformed("no end-of-contents"));
                }
                Ok(false)
            }
        }
    }

    /// First pass: reads and checks one element ending at or before `end`, appending
    /// an [`Entry`] for each constructed element in it.
    fn measure(
        &mut self,
        end: usize,
        depth: usize,
        entries: &mut Vec<Entry>,
    ) -> Result<Measure, BerError> {
        if depth > MAX_DEPTH {
            return Err(malformed("nested too deeply"));
        }
        let Header { tag, length } = self.header()?;
        if tag & CONSTRUCTED == 0 {
            let len = length.ok_or_else(|| malformed("indefinite primitive"))?;
            if len > end.saturating_sub(self.pos) {
                return Err(malformed("element beyond its parent"));
            }
            self.pos += len;
            return Ok(Measure {
                der: header_len(len) + len,
                joined: (tag == OCTET_STRING).then_some(len),
                tag,
                constructed: false,
            });
        }
        if entries.len() >= MAX_CONSTRUCTED {
            return Err(malformed("too many constructed elements"));
        }
        let index = entries.len();
        entries.push(Entry {
            body: 0,
            joined: NOT_A_STRING,
            subtree: 0,
            eci: false,
        });
        let stop = match length {
            Some(len) => {
                let stop = self.pos + len;
                if stop > end {
                    return Err(malformed("element beyond its parent"));
                }
                Some(stop)
            }
            None => None,
        };
        let inner_end = stop.unwrap_or(end);
        // The first three children are kept to recognise an EncryptedContentInfo.
        let mut first: [Option<Measure>; 3] = [None; 3];
        let (mut count, mut body, mut joined) = (0usize, 0usize, Some(0usize));
        while !self.at_end(stop, end)? {
            let child = self.measure(inner_end, depth + 1, entries)?;
            if let Some(slot) = first.get_mut(count) {
                *slot = Some(child);
            }
            count += 1;
            body += child.der;
            let segment = child.tag == OCTET_STRING
                || (child.constructed && child.tag == OCTET_STRING | CONSTRUCTED);
            joined = match (joined, child.joined) {
                (Some(j), Some(c)) if segment => Some(j + c),
                _ => None,
            };
        }
        if self.pos > end {
            return Err(malformed("element beyond its parent"));
        }
        let eci = tag == SEQUENCE
            && count == 3
            && matches!(
                first,
                [
                    Some(Measure {
                        tag: OID,
                        constructed: false,
                        ..
                    }),
                    Some(Measure {
                        tag: SEQUENCE,
                        constructed: true,
                        ..
                    }),
                    Some(Measure {
                        tag: 0xa0,
                        constructed: true,
                        ..
                    }),
                ]
            );
        if eci {
            if let [_, _, Some(third)] = first {
                body = body - third.der + third.as_string();
            }
        }
        let entry = Entry {
            body: to_u32(body)?,
            joined: match joined {
                Some(j) => to_u32(j)?,
                None => NOT_A_STRING,
            },
            subtree: to_u32(entries.len() - index)?,
            eci,
        };
        entries[index] = entry;
        let der = match joined {
            Some(j) if tag == OCTET_STRING | CONSTRUCTED => header_len(j) + j,
            _ => header_len(body) + body,
        };
        Ok(Measure {
            der,
            joined,
            tag,
            constructed: true,
        })
    }
}

/// Second pass: writes the element at `reader.pos` as DER, using the entries from
/// `*next` on; `implicit_string` when its parent makes it an implicit OCTET STRING.
fn write(
    reader: &mut Reader<'_>,
    entries: &[Entry],
    next: &mut usize,
    out: &mut Vec<u8>,
    implicit_string: bool,
) -> Result<(), BerError> {
    let start = reader.pos;
    let Header { tag, length } = reader.header()?;
    if tag & CONSTRUCTED == 0 {
        let content = reader.primitive_content(length)?;
        push_header(out, tag, content.len());
        out.extend_from_slice(content);
        return Ok(());
    }
    let entry = *entries
        .get(*next)
        .ok_or_else(|| malformed("inconsistent"))?;
    let string_tag = if tag == OCTET_STRING | CONSTRUCTED {
        Some(OCTET_STRING)
    } else if implicit_string {
        Some(tag & !CONSTRUCTED)
    } else {
        None
    };
    let stop = length.map(|len| reader.pos + len);
    let end = reader.input.len();
    if let (Some(primitive), true) = (string_tag, entry.joined != NOT_A_STRING) {
        push_header(out, primitive, entry.joined as usize);
        reader.pos = start;
        copy_segments(reader, out)?;
        *next += entry.subtree as usize;
        return Ok(());
    }
    *next += 1;
    push_header(out, tag, entry.body as usize);
    let mut i = 0;
    while !reader.at_end(stop, end)? {
        write(reader, entries, next, out, entry.eci && i == 2)?;
        i += 1;
    }
    Ok(())
}

/// Copies the content of the OCTET STRING segments of the element at `reader.pos`
/// (checked to be nothing else by the first pass), leaving the reader after it.
fn copy_segments(reader: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<(), BerError> {
    let Header { tag, length } = reader.header()?;
    if tag & CONSTRUCTED == 0 {
        out.extend_from_slice(reader.primitive_content(length)?);
        return Ok(());
    }
    let stop = length.map(|len| reader.pos + len);
    let end = reader.input.len();
    while !reader.at_end(stop, end)? {
        copy_segments(reader, out)?;
    }
    Ok(())
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

/// The DER form of the BER element that makes up all of `input`: one pass measures
/// (and checks everything), a second writes straight into the output, which is
/// allocated once at its final size.
pub(crate) fn to_der(input: &[u8]) -> Result<Vec<u8>, BerError> {
    let mut reader = Reader { input, pos: 0 };
    let mut entries = Vec::new();
    let root = reader.measure(input.len(), 0, &mut entries)?;
    if reader.pos != input.len() {
        return Err(malformed("data after the content"));
    }
    let mut out = Vec::with_capacity(root.der);
    let mut reader = Reader { input, pos: 0 };
    write(&mut reader, &entries, &mut 0, &mut out, false)?;
    debug_assert_eq!(out.len(), root.der);
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
    fn an_encrypted_content_info_joins_its_implicit_string() {
        // SEQUENCE { OID, SEQUENCE {}, [0] constructed { "ab", constructed { "c" } } }
        let ber = [
            0x30, 0x80, 0x06, 0x01, 0x2a, 0x30, 0x00, 0xa0, 0x80, 0x04, 0x02, b'a', b'b', 0x24,
            0x80, 0x04, 0x01, b'c', 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            to_der(&ber).unwrap(),
            [0x30, 0x0a, 0x06, 0x01, 0x2a, 0x30, 0x00, 0x80, 0x03, b'a', b'b', b'c']
        );
        // A fourth element: not that shape, so the [0] stays constructed.
        let mut four = ber[..ber.len() - 2].to_vec();
        four.extend_from_slice(&[0x05, 0x00, 0, 0]);
        assert_eq!(
            to_der(&four).unwrap(),
            [
                0x30, 0x10, 0x06, 0x01, 0x2a, 0x30, 0x00, 0xa0, 0x07, 0x04, 0x02, b'a', b'b', 0x04,
                0x01, b'c', 0x05, 0x00
            ]
        );
    }

    #[test]
    fn a_string_of_many_segments_is_joined_without_a_tree() {
        // A 1 MiB OCTET STRING in one-byte segments, inside a SEQUENCE whose length
        // needs three bytes: the output is exact, and allocated once.
        let n = 1 << 20;
        let mut ber = vec![0x30, 0x80, 0x24, 0x80];
        for i in 0..n {
            ber.extend_from_slice(&[0x04, 0x01, i as u8]);
        }
        ber.extend_from_slice(&[0, 0, 0, 0]);
        let der = to_der(&ber).unwrap();
        assert_eq!(
            &der[..10],
            &[0x30, 0x83, 0x10, 0x00, 0x05, 0x04, 0x83, 0x10, 0x00, 0x00]
        );
        assert_eq!(der.len(), 10 + n);
        assert_eq!(der.capacity(), der.len());
        assert!(der[10..].iter().enumerate().all(|(i, b)| *b == i as u8));
    }

    #[test]
    fn fail_too_many_constructed_elements() {
        let mut ber = vec![0x30, 0x80];
        for _ in 0..MAX_CONSTRUCTED {
            ber.extend_from_slice(&[0x30, 0x00]);
        }
        ber.extend_from_slice(&[0, 0]);
        assert!(to_der(&ber).is_err());
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
