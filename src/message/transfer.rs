//! Content-Transfer-Encoding, strictly.
//!
//! General mail parsers decode leniently (a truncated base64 body decodes to whatever
//! came before the cut). The machine part is authoritative, so here a body that is not
//! exactly valid in its declared encoding is an error.

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
        Cte::Base64 => decode_base64(body),
        Cte::QuotedPrintable => decode_qp(body),
    }
}

/// Strict base64 with white space anywhere, decoded in chunks of the compact text so the
/// whole compact copy of a large body never exists at once. The usual layout (RFC 2045:
/// 76 characters and CRLF) is cut without a search. A chunk that does not decode, or
/// padding before the last chunk, sends the body to the slow path, which drops every
/// white-space byte and decodes the whole: strictness is decided there.
fn decode_base64(body: &[u8]) -> Result<Vec<u8>, DecodeFault> {
    const CHUNK: usize = 64 * 1024;
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 3);
    let mut chunk: Vec<u8> = Vec::with_capacity(body.len().min(CHUNK) + 80);
    let mut rest = body;
    let mut regular = true;
    loop {
        let nl = if rest.len() >= 78 && rest[76] == b'\r' && rest[77] == b'\n' {
            77
        } else {
            match memchr::memchr(b'\n', rest) {
                Some(i) => i,
                None => break,
            }
        };
        let line = &rest[..nl];
        chunk.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        rest = &rest[nl + 1..];
        if chunk.len() >= CHUNK {
            let whole = chunk.len() / 4 * 4;
            if memchr::memchr(b'=', &chunk[..whole]).is_some()
                || base64_simd::STANDARD
                    .decode_append(&chunk[..whole], &mut out)
                    .is_err()
            {
                regular = false;
                break;
            }
            chunk.drain(..whole);
        }
    }
    if regular {
        chunk.extend_from_slice(rest);
        if base64_simd::STANDARD
            .decode_append(&chunk, &mut out)
            .is_ok()
        {
            return Ok(out);
        }
    }
    drop(out);
    let compact: Vec<u8> = body
        .iter()
        .copied()
        .filter(|b| !matches!(b, b'\r' | b'\n' | b' ' | b'\t'))
        .collect();
    base64_simd::STANDARD
        .decode_to_vec(&compact)
        .map_err(|_| DecodeFault::Base64)
}

/// Decodes the transfer-encoded body at `raw[at]` into the front of `raw` and cuts
/// `raw` to the decoded bytes, so that a large body is never held twice (the input and
/// its decoded copy): what comes before `at` (the header section) is overwritten. The
/// same strictness as [`decode`]: base64 is read with its CR, LF, space and tab
/// dropped, and the rest must be canonical base64.
pub(crate) fn decode_in_place(
    raw: &mut Vec<u8>,
    at: std::ops::Range<usize>,
    cte: Cte,
) -> Result<(), DecodeFault> {
    let Some(end) = raw.get(at.clone()).map(|_| at.end) else {
        return Err(DecodeFault::Base64);
    };
    let len = match cte {
        Cte::Identity => {
            raw.copy_within(at.clone(), 0);
            at.len()
        }
        Cte::Base64 => {
            // Compact: the line breaks go, the rest moves to the front (reading is
            // always ahead of writing). Every line is searched: unlike `decode_base64`,
            // which may guess the usual layout (76 characters and CRLF) because a wrong
            // guess fails its fast path and falls back, nothing here can be read again,
            // so a line break inside a guessed line (the `smime_open` fuzzer's "b\r1\n")
            // would be kept and the body refused.
            let mut w = 0;
            let mut r = at.start;
            while r < end {
                let next = memchr::memchr2(b'\r', b'\n', &raw[r..end]).map_or(end, |i| r + i);
                raw.copy_within(r..next, w);
                w += next - r;
                r = next + 1;
                if r < end && raw[next] == b'\r' && raw[r] == b'\n' {
                    r += 1;
                }
            }
            // Spaces and tabs are white space too; rare, so looked for once.
            if memchr::memchr2(b' ', b'\t', &raw[..w]).is_some() {
                let mut kept = 0;
                for i in 0..w {
                    let b = raw[i];
                    if b != b' ' && b != b'\t' {
                        raw[kept] = b;
                        kept += 1;
                    }
                }
                w = kept;
            }
            base64_simd::STANDARD
                .decode_inplace(&mut raw[..w])
                .map_err(|_| DecodeFault::Base64)?
                .len()
        }
        Cte::QuotedPrintable => {
            let decoded = decode_qp(&raw[at])?;
            let len = decoded.len();
            *raw = decoded;
            len
        }
    };
    raw.truncate(len);
    Ok(())
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
/// base64 with CRLF every 76 characters (RFC 2045), ending in CRLF.
pub(crate) fn encode_base64_lines(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    push_base64_lines(&mut out, data, Width::Mime);
    out
}

/// Appends `data` in base64 to `out`, 76 characters (RFC 2045) or 64 (RFC 9580
/// armor) and CRLF per line, the last line ending in CRLF too; nothing for empty data.
/// encodify's SIMD encoder lays the lines out as it encodes: one pass, no copy.
pub(crate) fn push_base64_lines(out: &mut Vec<u8>, data: &[u8], line: Width) {
    use encodify::base64::{LineEnding, STANDARD};
    const MIME: encodify::base64::Base64 = STANDARD.wrapped(76, LineEnding::CrLf);
    const ARMOR: encodify::base64::Base64 = STANDARD.wrapped(64, LineEnding::CrLf);
    if data.is_empty() {
        return;
    }
    let engine = match line {
        Width::Mime => MIME,
        Width::Armor => ARMOR,
    };
    engine.encode_append(data, out);
    if !out.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
}

/// The line width of [`push_base64_lines`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Width {
    /// 76 characters, MIME's (RFC 2045 section 6.8).
    Mime,
    /// 64 characters, OpenPGP armor's (RFC 9580 section 6.3).
    Armor,
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
    fn decoding_in_place_agrees_with_decode() {
        let data: Vec<u8> = (0..300_001u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut bodies: Vec<Vec<u8>> = [
            &b""[..],
            b"aGVs\r\nbG8=\r\n",
            b"aGVs bG8=",
            b"aG\tVs\nbG\r\n8=",
            b"aGVsbG8",
            b"aGVs!G8=",
            b"aGVsbG8==",
            b"aG=Vs",
            b"aGVsbG9=\r\nx",
            b"aGVs\x00bG8=",
            b"caf=C3=A9 =\r\nsoft\r\n",
            b"=ZZ",
            b"\r\n\r\n",
        ]
        .iter()
        .map(|b| b.to_vec())
        .collect();
        bodies.push(encode_base64_lines(&data));
        bodies.push(data.clone());
        // The smime_open fuzzer's finding: a CR moved one place left in a 76-character
        // line ("b1\r\n" became "b\r1\n").
        let crash = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/cases/crashes/smime_open-open-owned-differs"
        ))
        .unwrap();
        let body = memchr::memmem::find(&crash, b"\r\n\r\n").unwrap() + 4;
        bodies.push(crash[body..].to_vec());
        // The same built: in the usual layout, one line's CR moved one place left, and
        // the next line two characters shorter (they move to the line after), so that
        // a guessed CRLF at 76 lands on the next line's end.
        let mut lines = encode_base64_lines(&data[..600]);
        let cr = memchr::memchr(b'\r', &lines).unwrap();
        lines.swap(cr - 1, cr);
        let next_cr = cr + 2 + memchr::memchr(b'\r', &lines[cr + 2..]).unwrap();
        let moved: Vec<u8> = lines.drain(next_cr - 2..next_cr).collect();
        let third_cr = next_cr + memchr::memchr(b'\r', &lines[next_cr..]).unwrap();
        lines.splice(third_cr..third_cr, moved);
        assert!(decode(&lines, Cte::Base64).is_ok());
        bodies.push(lines);
        for body in &bodies {
            for cte in [Cte::Identity, Cte::Base64, Cte::QuotedPrintable] {
                let mut raw = b"Content-Type: x/y\r\n\r\n".to_vec();
                let start = raw.len();
                raw.extend_from_slice(body);
                let at = start..raw.len();
                raw.extend_from_slice(b"\r\n--trailer--");
                let result = decode_in_place(&mut raw, at, cte);
                match decode(body, cte) {
                    Ok(expected) => {
                        assert_eq!(result, Ok(()));
                        assert!(raw == expected, "{cte:?} of {} bytes", body.len());
                    }
                    Err(fault) => assert_eq!(result, Err(fault)),
                }
            }
        }
        // A range outside the buffer is refused, not a panic.
        let mut raw = b"abc".to_vec();
        assert!(decode_in_place(&mut raw, 2..9, Cte::Base64).is_err());
    }

    #[test]
    fn base64_white_space_anywhere_and_nothing_else() {
        let good: [(&[u8], &[u8]); 7] = [
            (b"", b""),
            (b"aGVs\r\nbG8=\r\n", b"hello"),
            (b"aGVs bG8=", b"hello"),
            (b"aG\tVs\nbG\r\n8=", b"hello"),
            (b"aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8g\nd29y\r\nbGQ=", b"hello world hello world hello world hello world hello world"),
            (b"aGVsbA==", b"hell"),
            (b"QQ==", b"A"),
        ];
        for (enc, plain) in good {
            assert_eq!(decode(enc, Cte::Base64).unwrap(), plain);
        }
        let bad: [&[u8]; 8] = [
            b"aGVsbG8",
            b"aGVs!G8=",
            b"aGVsbG8==",
            b"aGVsbB==",
            b"=aGVs",
            b"aG=Vs",
            b"aGVsbG9=\r\nx",
            b"aGVs\x00bG8=",
        ];
        for enc in bad {
            assert_eq!(
                decode(enc, Cte::Base64),
                Err(DecodeFault::Base64),
                "{}",
                String::from_utf8_lossy(enc)
            );
        }
        for n in 0..64usize {
            let data: Vec<u8> = (0..n as u8).collect();
            let enc = encode_base64_lines(&data);
            assert_eq!(decode(&enc, Cte::Base64).unwrap(), data);
        }
        // Bodies over one decoding chunk: regular, irregular, and padded in the middle.
        let data: Vec<u8> = (0..300_001u32).map(|i| (i * 7 % 251) as u8).collect();
        let enc = encode_base64_lines(&data);
        assert_eq!(decode(&enc, Cte::Base64).unwrap(), data);
        let spaced: Vec<u8> = enc
            .iter()
            .enumerate()
            .flat_map(|(i, &b)| {
                if i % 1000 == 0 {
                    vec![b' ', b]
                } else {
                    vec![b]
                }
            })
            .collect();
        assert_eq!(decode(&spaced, Cte::Base64).unwrap(), data);
        let half = encode_base64_lines(&data[..150_001]);
        let mut padded_inside = half.clone();
        padded_inside.extend_from_slice(&enc);
        assert_eq!(
            decode(&padded_inside, Cte::Base64),
            Err(DecodeFault::Base64)
        );
        let mut truncated = enc.clone();
        truncated.truncate(enc.len() - 3);
        assert_eq!(decode(&truncated, Cte::Base64), Err(DecodeFault::Base64));
        // A short line whose CRLF falls where a full line's would: still exact.
        let data: Vec<u8> = (0..60u8).collect();
        let enc = base64_simd::STANDARD.encode_to_string(&data).into_bytes();
        let mut odd = enc[..40].to_vec();
        odd.push(b'\n');
        odd.extend_from_slice(&enc[40..75]);
        odd.extend_from_slice(b"\r\n");
        odd.extend_from_slice(&enc[75..]);
        assert_eq!(odd[76..78], *b"\r\n");
        assert_eq!(decode(&odd, Cte::Base64).unwrap(), data);
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
