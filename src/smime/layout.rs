//! Where the parts of an enveloped CMS lie in its DER, found without copying anything.
//!
//! The `cms` crate's owned types copy the encrypted content twice while decoding (the
//! ContentInfo's content, then the OCTET STRING); for a large message those copies and
//! their fresh pages cost more than the AES-GCM itself. This walker reads the outer
//! layers of a DER (Auth)EnvelopedData as byte ranges, strictly (definite minimal
//! lengths, the exact fields in order, nothing after them), so the content can be
//! decrypted in place; the small parts (recipient infos, algorithm, attributes) are
//! still decoded by the `cms` crate from their ranges.

use std::ops::Range;

use der::asn1::ObjectIdentifier;
use der::Decode;

use super::SmimeError;
use crate::asn1::oids::{ID_CT_AUTH_ENVELOPED_DATA, ID_ENVELOPED_DATA};

fn malformed(what: &str) -> SmimeError {
    SmimeError::Malformed(format!("CMS: {what}"))
}

/// One DER element: its tag, the whole element and its content.
#[derive(Clone, Debug)]
pub(crate) struct Tlv {
    pub tag: u8,
    pub whole: Range<usize>,
    pub content: Range<usize>,
}

/// Reads the DER element at `pos`, which must end by `end`.
fn tlv(der: &[u8], pos: usize, end: usize) -> Result<Tlv, SmimeError> {
    let byte = |i: usize| -> Result<u8, SmimeError> {
        if i < end {
            Ok(der[i])
        } else {
            Err(malformed("truncated"))
        }
    };
    let tag = byte(pos)?;
    if tag & 0x1f == 0x1f {
        return Err(malformed("high tag number"));
    }
    let first = byte(pos + 1)?;
    let (len, header) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let count = (first & 0x7f) as usize;
        if count == 0 || count > 4 {
            return Err(malformed("not a definite DER length"));
        }
        let mut len = 0usize;
        for i in 0..count {
            len = (len << 8) | byte(pos + 2 + i)? as usize;
        }
        // DER: the shortest form, no leading zero byte.
        if len < 0x80 || byte(pos + 2)? == 0 {
            return Err(malformed("non-minimal length"));
        }
        (len, 2 + count)
    };
    let start = pos + header;
    let stop = start
        .checked_add(len)
        .filter(|s| *s <= end)
        .ok_or_else(|| malformed("element beyond its parent"))?;
    Ok(Tlv {
        tag,
        whole: pos..stop,
        content: start..stop,
    })
}

/// The elements inside `parent`, which must exactly fill it.
fn children(der: &[u8], parent: &Range<usize>) -> Result<Vec<Tlv>, SmimeError> {
    let mut out = Vec::new();
    let mut pos = parent.start;
    while pos < parent.end {
        let t = tlv(der, pos, parent.end)?;
        pos = t.whole.end;
        out.push(t);
    }
    Ok(out)
}

/// The layout of an AuthEnvelopedData or EnvelopedData.
pub(crate) struct Enveloped {
    /// `true` for AuthEnvelopedData.
    pub authenticated: bool,
    /// The RecipientInfos SET (whole element).
    pub recipient_infos: Range<usize>,
    /// The encrypted content's type OID (whole element).
    pub content_type: Range<usize>,
    /// The content-encryption AlgorithmIdentifier (whole element).
    pub algorithm: Range<usize>,
    /// The ciphertext (the `[0] IMPLICIT` content octets).
    pub ciphertext: Range<usize>,
    /// AuthEnvelopedData's authAttrs (whole `[1]` element), when present.
    pub auth_attrs: Option<Range<usize>>,
    /// AuthEnvelopedData's mac octets.
    pub mac: Option<Range<usize>>,
}

fn expect(t: Option<&Tlv>, tag: u8, what: &str) -> Result<Tlv, SmimeError> {
    match t {
        Some(t) if t.tag == tag => Ok(t.clone()),
        _ => Err(malformed(what)),
    }
}

/// Reads the layout of a DER ContentInfo holding an AuthEnvelopedData or an
/// EnvelopedData. Anything else, or any deviation from DER, is an error.
pub(crate) fn enveloped(der: &[u8]) -> Result<Enveloped, SmimeError> {
    let top = tlv(der, 0, der.len())?;
    if top.tag != 0x30 || top.whole.end != der.len() {
        return Err(malformed("not one ContentInfo"));
    }
    let ci = children(der, &top.content)?;
    let oid = expect(ci.first(), 0x06, "ContentInfo without a content type")?;
    let content_type = ObjectIdentifier::from_der(&der[oid.whole.clone()])
        .map_err(|_| malformed("content type"))?;
    let authenticated = match content_type {
        ID_CT_AUTH_ENVELOPED_DATA => true,
        ID_ENVELOPED_DATA => false,
        other => {
            return Err(SmimeError::Malformed(format!(
                "content type {other} is not authEnveloped-data"
            )))
        }
    };
    let explicit = expect(ci.get(1), 0xa0, "ContentInfo without its content")?;
    if ci.len() != 2 {
        return Err(malformed("ContentInfo with extra fields"));
    }
    let inner = children(der, &explicit.content)?;
    let body = expect(inner.first(), 0x30, "not a SEQUENCE")?;
    if inner.len() != 1 {
        return Err(malformed("data after the content"));
    }
    let fields = children(der, &body.content)?;
    let mut it = fields.iter().peekable();
    let version = expect(it.next(), 0x02, "no version")?;
    let version = &der[version.content.clone()];
    // AuthEnvelopedData is always version 0 (RFC 5083); EnvelopedData 0 or 2 when no
    // originator info or other recipient types are used (RFC 5652 6.1).
    let version_ok = if authenticated {
        version == [0]
    } else {
        version == [0] || version == [2]
    };
    if !version_ok {
        return Err(malformed("a version this profile does not accept"));
    }
    if it.peek().is_some_and(|t| t.tag == 0xa0) {
        return Err(malformed("originator info is not accepted"));
    }
    let recipient_infos = expect(it.next(), 0x31, "no recipient infos")?.whole;
    let eci = expect(it.next(), 0x30, "no encrypted content info")?;
    let eci_fields = children(der, &eci.content)?;
    let content_type = expect(eci_fields.first(), 0x06, "no encrypted content type")?.whole;
    let algorithm = expect(eci_fields.get(1), 0x30, "no content encryption algorithm")?.whole;
    let ciphertext = expect(eci_fields.get(2), 0x80, "no (primitive) encrypted content")?.content;
    if eci_fields.len() != 3 {
        return Err(malformed("encrypted content info with extra fields"));
    }
    let (auth_attrs, mac) = if authenticated {
        let auth_attrs = match it.peek() {
            Some(t) if t.tag == 0xa1 => it.next().map(|t| t.whole.clone()),
            _ => None,
        };
        let mac = expect(it.next(), 0x04, "no mac")?.content;
        if it.peek().is_some_and(|t| t.tag == 0xa2) {
            it.next(); // unauthAttrs: carried, not authenticated, not used
        }
        (auth_attrs, Some(mac))
    } else {
        if it.peek().is_some_and(|t| t.tag == 0xa1) {
            it.next(); // unprotectedAttrs: not used
        }
        (None, None)
    };
    if it.next().is_some() {
        return Err(malformed("fields after the last one"));
    }
    Ok(Enveloped {
        authenticated,
        recipient_infos,
        content_type,
        algorithm,
        ciphertext,
        auth_attrs,
        mac,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_non_minimal_lengths_and_trailing_data() {
        assert!(tlv(&[0x04, 0x81, 0x05, 1, 2, 3, 4, 5], 0, 8).is_err());
        assert!(tlv(&[0x04, 0x82, 0x00, 0x90], 0, 4).is_err());
        assert!(tlv(&[0x04, 0x80], 0, 2).is_err());
        assert!(tlv(&[0x04, 0x03, 1, 2], 0, 4).is_err());
        let ok = tlv(&[0x04, 0x02, 1, 2], 0, 4).unwrap();
        assert_eq!(ok.content, 2..4);
        assert!(enveloped(&[0x30, 0x00, 0x00]).is_err());
    }
}
