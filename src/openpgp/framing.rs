//! A count of an OpenPGP message's top-level packets, before Sequoia reads it.
//!
//! Why hand-written: Sequoia's message grammar check (`MessageValidator`) re-parses
//! the packet sequence as each packet arrives, so its cost grows with the square of
//! the number of packets; a 4 MiB message of anonymous PKESKs took 19 s (issue #17,
//! BENCHMARKS.md "adversarial inputs"). Real messages have a handful of top-level
//! packets (session keys for each recipient, one encrypted or signed container), so
//! the opener refuses more than [`MAX_TOP_LEVEL_PACKETS`] before any parse. This
//! reads only the packet headers (RFC 9580 section 4.2): the tag byte and the length,
//! partial body lengths included; a header it cannot read ends the count and Sequoia
//! reports the error. The `openpgp_open` fuzz target runs it on every input.

/// Top-level packets an OpenPGP message may have.
pub(crate) const MAX_TOP_LEVEL_PACKETS: usize = 256;

/// A new-format packet length at the start of `d` (RFC 9580 4.2.1): the length, the
/// bytes its header takes, and whether it is a partial body length (more follow).
/// `None` when `d` ends inside the header.
pub(crate) fn new_length(d: &[u8]) -> Option<(usize, usize, bool)> {
    let first = *d.first()?;
    Some(match first {
        0..=191 => (usize::from(first), 1, false),
        192..=223 => (
            ((usize::from(first) - 192) << 8) + usize::from(*d.get(1)?) + 192,
            2,
            false,
        ),
        255 => {
            let b = d.get(1..5)?;
            (
                u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize,
                5,
                false,
            )
        }
        _ => (1usize << (first & 0x1f), 1, true),
    })
}

/// The number of top-level packets of `message` (binary), counted up to `limit + 1`.
pub(crate) fn count_top_level(message: &[u8], limit: usize) -> usize {
    let mut at = 0usize;
    let mut count = 0usize;
    while at < message.len() && count <= limit {
        let tag = message[at];
        if tag & 0x80 == 0 {
            break;
        }
        at += 1;
        count += 1;
        if tag & 0x40 != 0 {
            // New format: one or more length headers (partial bodies continue).
            loop {
                let Some((len, header, partial)) = new_length(&message[at.min(message.len())..])
                else {
                    return count;
                };
                at = at.saturating_add(header).saturating_add(len);
                if !partial {
                    break;
                }
            }
        } else {
            // Legacy format: the length type in the tag's low bits.
            let len = match tag & 0x03 {
                0 => message.get(at).map(|&b| (b as usize, 1)),
                1 => message
                    .get(at..at + 2)
                    .map(|b| (u16::from_be_bytes([b[0], b[1]]) as usize, 2)),
                2 => message
                    .get(at..at + 4)
                    .map(|b| (u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize, 4)),
                // Indeterminate: the rest of the message.
                _ => return count,
            };
            let Some((len, header)) = len else {
                return count;
            };
            at = at.saturating_add(header).saturating_add(len);
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::count_top_level;

    #[test]
    fn counts_new_legacy_and_partial_packets() {
        // New format PKESK (tag 1) of 3 bytes, twice; then a legacy literal (tag 11,
        // one-byte length) of 2 bytes.
        let mut m = vec![0xC1, 3, 0, 0, 0, 0xC1, 3, 0, 0, 0];
        m.extend([0x80 | (11 << 2), 2, b'h', b'i']);
        assert_eq!(count_top_level(&m, 10), 3);
        // A partial body (2 bytes, then a final 1-byte part) is one packet.
        let partial = [0xD2, 0xE1, 0, 0, 1, 0];
        assert_eq!(count_top_level(&partial, 10), 1);
        // Two-byte and five-byte lengths.
        let mut long = vec![0xD2, 192, 0];
        long.extend(vec![0u8; 192]);
        long.extend([0xD2, 255, 0, 0, 0, 1, 0]);
        assert_eq!(count_top_level(&long, 10), 2);
        // Counting stops past the limit; a truncated header ends the count.
        let many: Vec<u8> = std::iter::repeat_n([0xC1u8, 0], 100).flatten().collect();
        assert_eq!(count_top_level(&many, 10), 11);
        assert_eq!(count_top_level(&[0xC1, 255, 0], 10), 1);
        assert_eq!(count_top_level(&[], 10), 0);
    }
}
