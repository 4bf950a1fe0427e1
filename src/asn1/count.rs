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

/// In the DER SEQUENCE `der`, the elements inside its last field (a SignedData's
/// SignerInfos), counted up to `limit + 1`; 0 when it has none.
pub(crate) fn elements_of_last_field(der: &[u8], limit: usize) -> usize {
    let Ok(seq) = der::asn1::AnyRef::from_der(der) else {
        return 0;
    };
    let Ok(mut r) = SliceReader::new(seq.value()) else {
        return 0;
    };
    let mut last = None;
    while !r.is_finished() {
        let Ok(field) = der::asn1::AnyRef::decode(&mut r) else {
            return 0;
        };
        last = Some(field);
    }
    last.map_or(0, |field| elements(field.value(), limit))
}

/// The most attributes either name of the certificate `der` (its issuer, its subject)
/// has, counted from their headers up to `limit + 1`; 0 when the certificate does not
/// parse that far (the decoder then says why). A name's attributes are those of all
/// its RDNs.
pub(crate) fn certificate_name_attributes(der: &[u8], limit: usize) -> usize {
    let fields = || -> Option<Vec<der::asn1::AnyRef<'_>>> {
        let cert = der::asn1::AnyRef::from_der(der).ok()?;
        let mut outer = SliceReader::new(cert.value()).ok()?;
        let tbs = der::asn1::AnyRef::decode(&mut outer).ok()?;
        let mut r = SliceReader::new(tbs.value()).ok()?;
        let mut out = Vec::new();
        while !r.is_finished() && out.len() < 6 {
            out.push(der::asn1::AnyRef::decode(&mut r).ok()?);
        }
        Some(out)
    };
    let Some(fields) = fields() else {
        return 0;
    };
    // [0] version (optional), serialNumber, signature, issuer, validity, subject.
    let explicit_version = der::Tag::ContextSpecific {
        constructed: true,
        number: der::TagNumber(0),
    };
    let skip = usize::from(fields.first().is_some_and(|f| f.tag() == explicit_version));
    let attributes = |name: &der::asn1::AnyRef<'_>| {
        let Ok(mut rdns) = SliceReader::new(name.value()) else {
            return 0;
        };
        let mut n = 0;
        while !rdns.is_finished() && n <= limit {
            let Ok(rdn) = der::asn1::AnyRef::decode(&mut rdns) else {
                break;
            };
            n += elements(rdn.value(), limit - n);
        }
        n
    };
    [2 + skip, 4 + skip]
        .iter()
        .filter_map(|&i| fields.get(i))
        .map(attributes)
        .max()
        .unwrap_or(0)
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
        assert_eq!(elements_of_last_field(&seq, 10), 2);
        assert_eq!(elements_of_last_field(&seq, 1), 2);
        assert_eq!(elements_of_last_field(&[0x30, 0], 10), 0);
        assert_eq!(elements_of(&[0x31, 5, 2], 10), 0);
    }

    /// A certificate's issuer and subject attributes, over all their RDNs, counted from
    /// the headers (a certificate's shape: version, serial, algorithm, issuer,
    /// validity, subject), stopping past the limit; the version is optional.
    #[test]
    fn counts_the_attributes_of_a_certificate_s_names() {
        fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
            let mut out = vec![tag];
            match content.len() {
                n if n < 0x80 => out.push(n as u8),
                n if n < 0x100 => out.extend([0x81, n as u8]),
                n => out.extend([0x82, (n >> 8) as u8, n as u8]),
            }
            out.extend_from_slice(content);
            out
        }
        // `rdns` RDNs of `each` attributes (a NULL stands for each).
        let name =
            |rdns: usize, each: usize| tlv(0x30, &tlv(0x31, &[5u8, 0].repeat(each)).repeat(rdns));
        let cert = |version: bool, issuer: &[u8], subject: &[u8]| {
            let mut tbs = Vec::new();
            if version {
                tbs.extend(tlv(0xA0, &[2, 1, 2]));
            }
            tbs.extend([2, 1, 1]);
            tbs.extend(tlv(0x30, &[]));
            tbs.extend_from_slice(issuer);
            tbs.extend(tlv(0x30, &[]));
            tbs.extend_from_slice(subject);
            tlv(0x30, &tlv(0x30, &tbs))
        };
        for version in [true, false] {
            let c = cert(version, &name(3, 2), &name(1, 1));
            assert_eq!(certificate_name_attributes(&c, 64), 6);
            let c = cert(version, &name(1, 1), &name(10, 10));
            assert_eq!(certificate_name_attributes(&c, 64), 65);
            assert_eq!(certificate_name_attributes(&c, 200), 100);
            let c = cert(version, &name(1, 500), &name(0, 0));
            assert_eq!(certificate_name_attributes(&c, 64), 65);
        }
        assert_eq!(certificate_name_attributes(&[0x30, 0], 64), 0);
    }
}
