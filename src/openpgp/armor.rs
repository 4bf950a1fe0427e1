//! ASCII armor (RFC 9580 section 6) read in one pass.
//!
//! Sequoia's armor reader decodes base64 a byte at a time through a filter and its own
//! buffers; for a 2 KiB message that is about a tenth of the whole decryption. The
//! armor a PGP/MIME part carries is almost always the plain form every implementation
//! writes (the header line, `Key: Value` headers, a blank line, base64 lines, an
//! optional CRC24 line, the tail line), which is read here with the strict SIMD base64
//! decoder the MIME layer uses. Anything else (leading text, a missing blank line,
//! characters outside base64, text after the tail) is not guessed at: the caller hands
//! the text to Sequoia unchanged, so the set of messages accepted is Sequoia's.
//!
//! The CRC24 line is skipped, not checked, as RFC 9580 section 6.1 requires ("MUST NOT
//! reject an OpenPGP object when the CRC24 footer is present, missing, malformed, or
//! disagrees") and as Sequoia does; the packets' own integrity protection decides.
//!
//! Writing is the same form with CRLF line ends, as a MIME body needs them, and with
//! the CRC24 line, as Sequoia writes it for RFC 4880 peers (GnuPG 2.2 among them).

use crate::message::transfer::{decode, push_base64_lines, Cte, Width};

/// Appends `data` armored as `label` (`PGP MESSAGE`, `PGP SIGNATURE`) to `out`: the
/// header line, a blank line, base64 in lines of 64 characters, the CRC24 line and the
/// tail line, each ending in CRLF.
pub(crate) fn push_armored(out: &mut Vec<u8>, label: &str, data: &[u8]) {
    out.extend_from_slice(b"-----BEGIN ");
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(b"-----\r\n\r\n");
    push_base64_lines(out, data, Width::Armor);
    let crc = crc24(data).to_be_bytes();
    out.push(b'=');
    base64_simd::STANDARD.encode_append(&crc[1..], out);
    out.extend_from_slice(b"\r\n-----END ");
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(b"-----\r\n");
}

/// The CRC-24 of RFC 9580 section 6.1.1, a table lookup per byte.
fn crc24(data: &[u8]) -> u32 {
    const INIT: u32 = 0x00B7_04CE;
    const POLY: u32 = 0x0086_4CFB;
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = (i as u32) << 16;
            let mut bit = 0;
            while bit < 8 {
                c <<= 1;
                if c & 0x0100_0000 != 0 {
                    c ^= POLY;
                }
                bit += 1;
            }
            t[i] = c & 0x00FF_FFFF;
            i += 1;
        }
        t
    };
    let mut crc = INIT;
    for &b in data {
        crc = ((crc << 8) & 0x00FF_FFFF) ^ TABLE[((crc >> 16) as u8 ^ b) as usize];
    }
    crc
}

/// The binary data of an armored block labelled `label` (`PGP MESSAGE`,
/// `PGP SIGNATURE`), or `None` when `text` is not in the plain armored form (see the
/// module documentation), including when it is binary already.
pub fn dearmor(text: &[u8], label: &str) -> Option<Vec<u8>> {
    let mut lines = Lines { text, at: 0 };
    // The header line, after nothing but blank lines.
    let first = loop {
        let line = lines.next()?;
        if !line.is_empty() {
            break line;
        }
    };
    let begin = first.strip_prefix(b"-----BEGIN ")?.strip_suffix(b"-----")?;
    if begin != label.as_bytes() {
        return None;
    }
    // Armor headers up to the blank line; each must look like one.
    loop {
        let line = lines.next()?;
        if line.is_empty() {
            break;
        }
        memchr::memmem::find(line, b": ")?;
    }
    // The base64 lines run to the checksum line or the tail line.
    let body_start = lines.offset();
    let body_end;
    loop {
        let at = lines.offset();
        let line = lines.next()?;
        if line.starts_with(b"-----") {
            body_end = at;
            if !is_tail(line, label) {
                return None;
            }
            break;
        }
        if line.len() == 5 && line[0] == b'=' {
            // RFC 4880 section 6.2: `=` and four base64 characters of CRC-24.
            // Anything else there (`=JL=j`) is not a checksum line, and Sequoia
            // refuses the armor (the `openpgp_open` differential found it).
            if !line[1..]
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
            {
                return None;
            }
            body_end = at;
            if !is_tail(lines.next()?, label) {
                return None;
            }
            break;
        }
    }
    // Only blank lines after the tail.
    if lines.any(|l| !l.is_empty()) {
        return None;
    }
    let body = &text[body_start..body_end];
    if body.is_empty() {
        return None;
    }
    decode(body, Cte::Base64).ok().filter(|b| !b.is_empty())
}

fn is_tail(line: &[u8], label: &str) -> bool {
    line.strip_prefix(b"-----END ")
        .and_then(|l| l.strip_suffix(b"-----"))
        .is_some_and(|l| l == label.as_bytes())
}

/// Lines without their end (LF or CRLF) and trailing spaces or tabs, with where each
/// starts in the text.
struct Lines<'a> {
    text: &'a [u8],
    at: usize,
}

impl Lines<'_> {
    /// Where the next line starts in the text.
    fn offset(&self) -> usize {
        self.at
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = &self.text[self.at..];
        if rest.is_empty() {
            return None;
        }
        let line = match memchr::memchr(b'\n', rest) {
            Some(i) => {
                self.at += i + 1;
                &rest[..i]
            }
            None => {
                self.at = self.text.len();
                rest
            }
        };
        let mut end = line.len();
        while end > 0 && matches!(line[end - 1], b'\r' | b' ' | b'\t') {
            end -= 1;
        }
        Some(&line[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sequoia_openpgp as openpgp;

    use openpgp::armor::{Kind, Reader, ReaderMode, Writer};
    use std::io::{Read, Write};

    fn sequoia_armored(data: &[u8], kind: Kind) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), kind).unwrap();
        w.write_all(data).unwrap();
        w.finalize().unwrap()
    }

    fn sequoia_dearmored(text: &[u8]) -> Vec<u8> {
        let mut r = Reader::from_bytes(text, ReaderMode::Tolerant(None));
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        out
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn writes_what_sequoia_writes_with_crlf() {
        for len in [1, 2, 3, 47, 48, 49, 1000, 12_345, 100_000] {
            let data = sample(len);
            let mut ours = Vec::new();
            push_armored(&mut ours, "PGP MESSAGE", &data);
            let theirs = sequoia_armored(&data, Kind::Message);
            let theirs = String::from_utf8(theirs)
                .unwrap()
                .replace("\r\n", "\n")
                .replace('\n', "\r\n");
            assert_eq!(
                String::from_utf8(ours.clone()).unwrap(),
                theirs,
                "length {len}"
            );
            assert_eq!(sequoia_dearmored(&ours), data);
        }
    }

    #[test]
    fn reads_what_sequoia_writes_in_either_line_end() {
        for len in [1, 2, 3, 48, 4096, 70_001] {
            let data = sample(len);
            let lf = sequoia_armored(&data, Kind::Message);
            assert_eq!(dearmor(&lf, "PGP MESSAGE").unwrap(), data);
            let crlf = String::from_utf8(lf).unwrap().replace('\n', "\r\n");
            assert_eq!(dearmor(crlf.as_bytes(), "PGP MESSAGE").unwrap(), data);
            let sig = sequoia_armored(&data, Kind::Signature);
            assert_eq!(dearmor(&sig, "PGP SIGNATURE").unwrap(), data);
            assert!(dearmor(&sig, "PGP MESSAGE").is_none());
        }
    }

    #[test]
    fn headers_a_missing_or_wrong_checksum_and_blank_lines_are_read() {
        let data = sample(200);
        let text = String::from_utf8(sequoia_armored(&data, Kind::Message)).unwrap();
        let with_headers = text.replacen(
            "-----\n\n",
            "-----\nVersion: GnuPG v2\nComment: a comment: with colons\n\n",
            1,
        );
        assert_eq!(
            dearmor(with_headers.as_bytes(), "PGP MESSAGE").unwrap(),
            data
        );
        let lines: Vec<&str> = text.lines().collect();
        let crc = lines
            .iter()
            .position(|l| l.starts_with('=') && l.len() == 5)
            .unwrap();
        let mut without = lines.clone();
        without.remove(crc);
        assert_eq!(
            dearmor(without.join("\n").as_bytes(), "PGP MESSAGE").unwrap(),
            data
        );
        let mut wrong = lines.clone();
        wrong[crc] = "=AAAA";
        assert_eq!(
            dearmor(wrong.join("\n").as_bytes(), "PGP MESSAGE").unwrap(),
            data
        );
        let padded = format!("\n\r\n{}  \n\n", text.replace('\n', " \t\n"));
        assert_eq!(dearmor(padded.as_bytes(), "PGP MESSAGE").unwrap(), data);
    }

    #[test]
    fn fail_other_forms_are_left_to_sequoia() {
        let data = sample(300);
        let text = String::from_utf8(sequoia_armored(&data, Kind::Message)).unwrap();
        let cases = [
            format!("some text first\n{text}"),
            text.replacen("-----\n\n", "-----\n", 1),
            text.replacen("-----\n\n", "-----\nnot a header\n\n", 1),
            format!("{text}trailing text\n"),
            text.replacen(
                "-----END PGP MESSAGE-----",
                "-----END PGP SIGNATURE-----",
                1,
            ),
            text.replacen("-----END PGP MESSAGE-----", "", 1),
            // A character outside base64 in the body.
            text.replacen("-----\n\n", "-----\n\n*", 1),
            text.lines().take(2).collect::<Vec<_>>().join("\n"),
            // A checksum line that is not `=` and four base64 characters (the
            // `openpgp_open` smoke run's input: Sequoia refuses it).
            "-----BEGIN PGP MESSAGE-----\n\nwX4DQmZGNzBhMDE=\n=JL=j\n-----END PGP MESSAGE-----\n"
                .to_string(),
        ];
        for (i, case) in cases.iter().enumerate() {
            assert!(
                dearmor(case.as_bytes(), "PGP MESSAGE").is_none(),
                "case {i}"
            );
        }
        // Binary input is binary already.
        assert!(dearmor(&data, "PGP MESSAGE").is_none());
        assert!(dearmor(b"", "PGP MESSAGE").is_none());
    }

    #[test]
    fn crc24_matches_the_rfc_check_value() {
        // CRC-24/OPENPGP of "123456789".
        assert_eq!(crc24(b"123456789"), 0x21CF02);
        assert_eq!(crc24(b""), 0xB704CE);
    }
}
