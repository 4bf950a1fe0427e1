//! Counting the elements of a DER SET or SEQUENCE by their headers alone, before the
//! `der` crate decodes them: decoding a `SET OF` checks its DER order with comparisons
//! that re-encode both sides, so a CMS structure with tens of thousands of elements
//! costs seconds before anything is authenticated (issue #17, BENCHMARKS.md
//! "adversarial inputs"). Callers refuse a structure with more elements than any
//! writer makes.

use der::{Decode, Reader, SliceReader, Tagged};

/// The elements of `content` (the bytes inside a SET or SEQUENCE), counted up to
/// `limit + 1`; counting stops at the first element that does not parse (the decoder
/// then says why).
pub(crate) fn elements(content: &[u8], limit: usize) -> usize {
    let Ok(mut r) = SliceReader::new(content) else {
        return 0;
    };
    let mut n = 0;
    while !r.is_finished() && n <= limit {
        if der::asn1::AnyRef::decode(&mut r).is_err() {
            break;
        }
        n += 1;
    }
    n
}

/// The elements of the whole TLV `der` (a SET or SEQUENCE with its header).
pub(crate) fn elements_of(der: &[u8], limit: usize) -> usize {
    match der::asn1::AnyRef::from_der(der) {
        Ok(any) => elements(any.value(), limit),
        Err(_) => 0,
    }
}

/// In the DER SEQUENCE `der`, the elements inside its first field tagged `[tag]`
/// (constructed, context-specific, implicit), counted up to `limit + 1`; 0 when there
/// is none.
pub(crate) fn elements_of_field(der: &[u8], tag: u8, limit: usize) -> usize {
    let Ok(seq) = der::asn1::AnyRef::from_der(der) else {
        return 0;
    };
    let Ok(mut r) = SliceReader::new(seq.value()) else {
        return 0;
    };
    while !r.is_finished() {
        let Ok(field) = der::asn1::AnyRef::decode(&mut r) else {
            return 0;
        };
        let wanted = der::Tag::ContextSpecific {
            constructed: true,
            number: der::TagNumber(tag.into()),
        };
        if field.tag() == wanted {
            return elements(field.value(), limit);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_elements_and_stops_past_the_limit() {
        // SET { INTEGER 1, INTEGER 2, INTEGER 3 }
        let set = [0x31, 9, 2, 1, 1, 2, 1, 2, 2, 1, 3];
        assert_eq!(elements_of(&set, 10), 3);
        assert_eq!(elements_of(&set, 1), 2);
        // SEQUENCE { INTEGER 1, [0] { NULL, NULL } }
        let seq = [0x30, 9, 2, 1, 1, 0xA0, 4, 5, 0, 5, 0];
        assert_eq!(elements_of_field(&seq, 0, 10), 2);
        assert_eq!(elements_of_field(&seq, 1, 10), 0);
        assert_eq!(elements_of(&[0x31, 5, 2], 10), 0);
    }
}
