//! What signed MIME needs from any profile: the canonical (CRLF) form that signatures
//! cover (RFC 8551 3.1.1, RFC 3156 5), and boundaries no signed entity contains.

use std::borrow::Cow;

/// Bare LF (and bare CR) become CRLF; CRLF stays.
pub(crate) fn canonical_crlf(entity: &[u8]) -> Cow<'_, [u8]> {
    // Already canonical when every LF follows a CR and there are as many CRs as LFs
    // (then no CR is bare): two SIMD scans instead of a look at every byte.
    let lf_after_cr = memchr::memchr_iter(b'\n', entity).all(|i| i > 0 && entity[i - 1] == b'\r');
    if lf_after_cr
        && memchr::memchr_iter(b'\r', entity).count() == memchr::memchr_iter(b'\n', entity).count()
    {
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

/// A MIME boundary of 192 random bits.
pub(crate) fn random_boundary() -> Result<String, crate::seal::SealError> {
    // The OS generator directly: one getrandom(2) call, where a DRBG's reseeding
    // costs more than the rest of composing a small message.
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes)
        .map_err(|_| crate::seal::SealError::Crypto("no randomness".into()))?;
    let hex = crate::keystore::hex(&bytes);
    Ok(format!("{}_{}_{}", &hex[..16], &hex[16..32], &hex[32..]))
}

#[cfg(test)]
mod tests {
    use super::canonical_crlf;

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
        }
    }
}
