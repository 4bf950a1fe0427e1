//! Lowercase hexadecimal, for fingerprints, digests and boundaries: a leaf every
//! layer can use (the store, the message composer, the extensions).

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
