//! Content-Transfer-Encoding, strictly.
//!
//! General mail parsers decode leniently (a truncated base64 body decodes to whatever
//! came before the cut). The machine part is authoritative, so here a body that is not
//! exactly valid in its declared encoding is an error.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// A declared transfer encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cte {
    /// 7bit, 8bit, binary or none: the bytes as they are.
    Identity,
    /// RFC 2045 base64.
    Base64,
    /// RFC 2045 quoted-printable.
    QuotedPrintable,
}

impl Cte {
    /// Reads a `Content-Transfer-Encoding` value; `None` when unknown.
    pub(crate) fn from_header(value: Option<&str>) -> Option<Cte> {
        let v = value.map(|v| v.trim().to_ascii_lowercase());
        match v.as_deref() {
            None | Some("7bit") | Some("8bit") | Some("binary") => Some(Cte::Identity),
            Some("base64") => Some(Cte::Base64),
            Some("quoted-printable") => Some(Cte::QuotedPrintable),
            Some(_) => None,
        }
    }
}

/// Why a body does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecodeFault {
    /// base64 with a bad character, bad padding or a length that is not a multiple of 4
    /// (a truncated body).
    Base64,
    /// quoted-printable with `=` not followed by two hex digits or a line break.
    QuotedPrintable,
}

/// Decodes `body` in `cte`.
pub(crate) fn decode(body: &[u8], cte: Cte) -> Result<Vec<u8>, DecodeFault> {
    match cte {
        Cte::Identity => Ok(body.to_vec()),
        Cte::Base64 => {
            let compact: Vec<u8> = body
                .iter()
                .copied()
                .filter(|b| !matches!(b, b'\r' | b'\n' | b' ' | b'\t'))
                .collect();
            STANDARD.decode(compact).map_err(|_| DecodeFault::Base64)
        }
        Cte::QuotedPrintable => decode_qp(body),
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

fn decode_qp(body: &[u8]) -> Result<Vec<u8>, DecodeFault> {
    let mut out = Vec::with_capacity(body.len());
    let mut lines = body.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // Trailing white space was added in transport (RFC 2045 6.7 rule 3).
        let end = line
            .iter()
            .rposition(|b| !matches!(b, b' ' | b'\t'))
            .map_or(0, |i| i + 1);
        let line = &line[..end];
        let mut soft_break = false;
        let mut i = 0;
        while i < line.len() {
            if line[i] != b'=' {
                out.push(line[i]);
                i += 1;
            } else if i + 1 == line.len() {
                soft_break = true;
                break;
            } else {
                match (
                    line.get(i + 1).and_then(|&b| hex(b)),
                    line.get(i + 2).and_then(|&b| hex(b)),
                ) {
                    (Some(h), Some(l)) => out.push(h << 4 | l),
                    _ => return Err(DecodeFault::QuotedPrintable),
                }
                i += 3;
            }
        }
        if !soft_break && lines.peek().is_some() {
            out.extend_from_slice(b"\r\n");
        }
    }
    Ok(out)
}

/// base64 with CRLF every 76 characters (RFC 2045), ending in CRLF.
pub(crate) fn encode_base64_lines(data: &[u8]) -> Vec<u8> {
    let encoded = STANDARD.encode(data);
    let mut out = Vec::with_capacity(encoded.len() + encoded.len() / 76 * 2 + 2);
    for chunk in encoded.as_bytes().chunks(76) {
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_strict() {
        assert_eq!(decode(b"aGVs\r\nbG8=\r\n", Cte::Base64).unwrap(), b"hello");
        assert_eq!(decode(b"aGVsbG8", Cte::Base64), Err(DecodeFault::Base64));
        assert_eq!(decode(b"aGVs!G8=", Cte::Base64), Err(DecodeFault::Base64));
        let data: Vec<u8> = (0..=255).collect();
        assert_eq!(
            decode(&encode_base64_lines(&data), Cte::Base64).unwrap(),
            data
        );
    }

    #[test]
    fn quoted_printable() {
        assert_eq!(
            decode(b"caf=C3=A9 =3D x=\r\nyz  \r\nnext", Cte::QuotedPrintable).unwrap(),
            "café = xyz\r\nnext".as_bytes()
        );
        assert_eq!(
            decode(b"a=3D\r\nb", Cte::QuotedPrintable).unwrap(),
            b"a=\r\nb"
        );
        assert_eq!(
            decode(b"bad=ZZ", Cte::QuotedPrintable),
            Err(DecodeFault::QuotedPrintable)
        );
        assert_eq!(
            decode(b"bad=4", Cte::QuotedPrintable),
            Err(DecodeFault::QuotedPrintable)
        );
    }
}
