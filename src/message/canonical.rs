//! What signed MIME needs from any profile: the canonical (CRLF) form that signatures
//! cover (RFC 8551 3.1.1, RFC 3156 5), and boundaries no signed entity contains.

use std::borrow::Cow;

/// Bare LF (and bare CR) become CRLF; CRLF stays.
pub(crate) fn canonical_crlf(entity: &[u8]) -> Cow<'_, [u8]> {
    // Already canonical when there are as many CRLF pairs as CRs and as LFs (then no
    // CR or LF is bare): three vectorised counts, no step per line (a step per line
    // cost a third of the digest of the lines for a large entity).
    let crs = memchr::memchr_iter(b'\r', entity).count();
    if crs == memchr::memchr_iter(b'\n', entity).count() && crs == crlf_pairs(entity) {
        return Cow::Borrowed(entity);
    }
    let mut out = Vec::with_capacity(entity.len() + entity.len() / 32);
    let mut i = 0;
    while i < entity.len() {
        match entity[i] {
            b'\r' if entity.get(i + 1) == Some(&b'\n') => {
                out.extend_from_slice(b"\r\n");
                i += 2;
                continue;
            }
            b'\r' | b'\n' => out.extend_from_slice(b"\r\n"),
            b => out.push(b),
        }
        i += 1;
    }
    Cow::Owned(out)
}

/// How many CRLF pairs `bytes` has. Counted in byte-wide counters over blocks of 128
/// bytes (which cannot overflow them), a loop the compiler turns into SIMD compares.
fn crlf_pairs(bytes: &[u8]) -> usize {
    if bytes.len() < 2 {
        return 0;
    }
    let (first, second) = (&bytes[..bytes.len() - 1], &bytes[1..]);
    first
        .chunks(128)
        .zip(second.chunks(128))
        .map(|(a, b)| {
            let mut n = 0u8;
            for (&x, &y) in a.iter().zip(b) {
                n = n.wrapping_add(u8::from(x == b'\r') & u8::from(y == b'\n'));
            }
            usize::from(n)
        })
        .sum()
}

/// [`canonical_crlf`] as a reader: the canonical form of an entity without a copy of
/// it, for a signature check that may fail (issue #58: an entity of bare line ends,
/// inflated from a few kilobytes, has a canonical form twice its size; it is made only
/// once the signature over it verified).
pub(crate) struct CanonicalReader<'a> {
    rest: &'a [u8],
    /// The LF of a CRLF whose CR filled the last buffer.
    pending_lf: bool,
}

impl<'a> CanonicalReader<'a> {
    pub(crate) fn new(entity: &'a [u8]) -> Self {
        CanonicalReader {
            rest: entity,
            pending_lf: false,
        }
    }
}

impl std::io::Read for CanonicalReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        if self.pending_lf && !buf.is_empty() {
            buf[0] = b'\n';
            n = 1;
            self.pending_lf = false;
        }
        while n < buf.len() && !self.rest.is_empty() {
            // A run without line ends, as much of it as fits.
            let run = memchr::memchr2(b'\r', b'\n', self.rest).unwrap_or(self.rest.len());
            let take = run.min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&self.rest[..take]);
            n += take;
            self.rest = &self.rest[take..];
            if take < run || self.rest.is_empty() || n == buf.len() {
                break;
            }
            // A line end: CRLF, or a bare CR or LF, is CRLF.
            let end = match self.rest {
                [b'\r', b'\n', ..] => 2,
                _ => 1,
            };
            self.rest = &self.rest[end..];
            buf[n] = b'\r';
            n += 1;
            if n < buf.len() {
                buf[n] = b'\n';
                n += 1;
            } else {
                self.pending_lf = true;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::{canonical_crlf, CanonicalReader};

    /// Everything a [`CanonicalReader`] gives when read `size` bytes at a time.
    fn read_in(entity: &[u8], size: usize) -> Vec<u8> {
        use std::io::Read;
        let mut reader = CanonicalReader::new(entity);
        let mut out = Vec::new();
        let mut buf = vec![0u8; size];
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn canonical_crlf_fixes_bare_line_ends_only() {
        let cases: [(&[u8], &[u8]); 7] = [
            (b"a\r\nb\r\n", b"a\r\nb\r\n"),
            (b"a\nb\n", b"a\r\nb\r\n"),
            (b"a\rb", b"a\r\nb"),
            (b"\n", b"\r\n"),
            (b"a\r\r\nb", b"a\r\n\r\nb"),
            (b"a\r\n\nb\r", b"a\r\n\r\nb\r\n"),
            (b"", b""),
        ];
        for (input, expected) in cases {
            assert_eq!(
                canonical_crlf(input),
                expected,
                "{}",
                String::from_utf8_lossy(input)
            );
            for size in [1, 2, 3, 64] {
                assert_eq!(read_in(input, size), expected, "{size}");
            }
        }
    }

    /// The vectorised shortcut agrees with a byte-by-byte reading, line ends placed on
    /// and around the block edges.
    #[test]
    fn canonical_check_agrees_with_a_plain_reading_across_blocks() {
        fn plain(e: &[u8]) -> Vec<u8> {
            let mut out = Vec::new();
            let mut i = 0;
            while i < e.len() {
                if e[i] == b'\r' && e.get(i + 1) == Some(&b'\n') {
                    out.extend_from_slice(b"\r\n");
                    i += 2;
                } else if e[i] == b'\r' || e[i] == b'\n' {
                    out.extend_from_slice(b"\r\n");
                    i += 1;
                } else {
                    out.push(e[i]);
                    i += 1;
                }
            }
            out
        }
        for len in [126usize, 127, 128, 129, 255, 256, 257, 600] {
            for at in (0..len.saturating_sub(1))
                .step_by(7)
                .chain([len - 2, len - 1])
            {
                for ends in [&b"\r\n"[..], b"\n", b"\r", b"\n\r", b"\r\r\n"] {
                    let mut e = vec![b'x'; len];
                    for (k, &c) in ends.iter().enumerate() {
                        if at + k < len {
                            e[at + k] = c;
                        }
                    }
                    assert_eq!(
                        canonical_crlf(&e).as_ref(),
                        plain(&e).as_slice(),
                        "{len} {at} {ends:?}"
                    );
                    // The reader gives the same, whatever its buffer's size.
                    for size in [1, 2, 3, 64, 4096] {
                        assert_eq!(read_in(&e, size), plain(&e), "{len} {at} {ends:?} {size}");
                    }
                }
            }
        }
    }
}
