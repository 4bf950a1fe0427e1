//! Resource limits on untrusted messages (DESIGN decision 10). Over a limit is an error,
//! never a truncation.

/// Bounds applied while reading a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest raw message, in bytes (default 25 MiB).
    pub max_message_bytes: usize,
    /// Deepest MIME multipart nesting; the top-level entity is depth 1 (default 8).
    pub max_mime_depth: usize,
    /// Most MIME parts, containers included (default 64).
    pub max_parts: usize,
    /// Deepest JSON nesting in the envelope (default 64).
    pub max_json_depth: usize,
    /// Most transfer-decoded bytes over all parts (default 64 MiB).
    pub max_decoded_bytes: usize,
    /// How many times its own size compressed content (an OpenPGP compressed data
    /// packet) may inflate to, above [`Limits::inflation_floor`] (default 4). It is
    /// inflated before its signature can be checked, so what it may cost is tied to
    /// what it weighs: a 64 KiB bomb would otherwise hold the whole
    /// [`Limits::max_decoded_bytes`] (see [`Limits::inflation_budget`]).
    pub inflation_ratio: usize,
    /// What compressed content may always inflate to, whatever its ratio (default
    /// 8 MiB): a small message that compresses very well still opens.
    pub inflation_floor: usize,
}

impl Limits {
    /// The most that compressed content of `compressed` bytes may inflate to:
    /// [`Limits::inflation_ratio`] times its size, at least [`Limits::inflation_floor`],
    /// never more than [`Limits::max_decoded_bytes`]. Content that is not compressed
    /// is never larger than the message that carries it, so it is always within.
    pub fn inflation_budget(&self, compressed: usize) -> usize {
        compressed
            .saturating_mul(self.inflation_ratio)
            .max(self.inflation_floor)
            .min(self.max_decoded_bytes)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 25 * 1024 * 1024,
            max_mime_depth: 8,
            max_parts: 64,
            max_json_depth: 64,
            max_decoded_bytes: 64 * 1024 * 1024,
            inflation_ratio: 4,
            inflation_floor: 8 * 1024 * 1024,
        }
    }
}
