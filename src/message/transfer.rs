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

/// Checks `body` is exact base64 (standard alphabet, white space between characters,
/// canonical padding only at the end) without decoding it; returns the decoded length.
/// The main loop is branch-free (a class table, an OR and a sum), so it vectorises.
pub(crate) fn check_base64(body: &[u8]) -> Result<usize, DecodeFault> {
    const ALPHABET: u8 = 1;
    const PAD: u8 = 0x40;
    const INVALID: u8 = 0x80;
    const fn table() -> [u8; 256] {
        let mut t = [INVALID; 256];
        let mut i = 0;
        while i < 256 {
            let c = i as u8;
            if c.is_ascii_alphanumeric() || c == b'+' || c == b'/' {
                t[i] = ALPHABET;
            } else if c == b'\r' || c == b'\n' || c == b' ' || c == b'\t' {
                t[i] = 0;
            } else if c == b'=' {
                t[i] = PAD;
            }
            i += 1;
        }
        t
    }
    static CLASS: [u8; 256] = table();
    let is_ws = |b: &u8| CLASS[*b as usize] == 0;
    // Split off the tail: trailing white space, then up to two '=' (with white space).
    let mut end = body.len();
    let mut padding = 0usize;
    while end > 0 && (is_ws(&body[end - 1]) || (body[end - 1] == b'=' && padding < 2)) {
        padding += usize::from(body[end - 1] == b'=');
        end -= 1;
    }
    let head = &body[..end];
    let mut flags = 0u8;
    let mut symbols = 0usize;
    for &b in head {
        let c = CLASS[b as usize];
        flags |= c;
        symbols += usize::from(c & ALPHABET);
    }
    if flags & (INVALID | PAD) != 0 {
        return Err(DecodeFault::Base64);
    }
    if (symbols + padding) % 4 != 0 || (padding > 0 && symbols % 4 + padding != 4) {
        return Err(DecodeFault::Base64);
    }
    // Canonical: the unused low bits of the last symbol are zero (as the decoder demands).
    if padding > 0 {
        let last = head
            .iter()
            .rev()
            .find(|b| !is_ws(b))
            .copied()
            .unwrap_or(b'A');
        let value = match last {
            b'A'..=b'Z' => last - b'A',
            b'a'..=b'z' => last - b'a' + 26,
            b'0'..=b'9' => last - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let unused_mask = if padding == 1 { 0b11 } else { 0b1111 };
        if value & unused_mask != 0 {
            return Err(DecodeFault::Base64);
        }
    }
    Ok(symbols / 4 * 3 + (symbols % 4).saturating_sub(1))
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

#[cfg(test)]
/// base64 with CRLF every 76 characters (RFC 2045), ending in CRLF. Each 57-byte input
/// chunk is encoded straight into its line of the output buffer.
pub(crate) fn encode_base64_lines(data: &[u8]) -> Vec<u8> {
    const IN_LINE: usize = 57; // 57 bytes -> 76 characters
    let lines = data.len().div_ceil(IN_LINE);
    let mut out = vec![0u8; data.len().div_ceil(3) * 4 + lines * 2];
    let mut at = 0;
    for chunk in data.chunks(IN_LINE) {
        // The buffer was sized for every chunk plus its CRLF, so this cannot run out.
        let n = STANDARD.encode_slice(chunk, &mut out[at..]).unwrap_or(0);
        at += n;
        out[at..at + 2].copy_from_slice(b"\r\n");
        at += 2;
    }
    out.truncate(at);
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
    fn base64_check_agrees_with_the_decoder() {
        let samples: [&[u8]; 12] = [
            b"",
            b"aGVs\r\nbG8=\r\n",
            b"aGVsbG8",
            b"aGVs!G8=",
            b"aGVsbG8==",
            b"aGVsbA==",
            b"aGVsbB==",
            b"=aGVs",
            b"aG=Vs",
            b"aGVsbG9v",
            b"aGVsbG9=\r\nx",
            b"QQ==",
        ];
        for s in samples {
            let strict = decode(s, Cte::Base64);
            assert_eq!(
                check_base64(s).ok(),
                strict.as_ref().ok().map(Vec::len),
                "{}",
                String::from_utf8_lossy(s)
            );
        }
        for n in 0..64usize {
            let data: Vec<u8> = (0..n as u8).collect();
            let enc = encode_base64_lines(&data);
            assert_eq!(check_base64(&enc), Ok(n));
        }
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
