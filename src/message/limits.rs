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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 25 * 1024 * 1024,
            max_mime_depth: 8,
            max_parts: 64,
            max_json_depth: 64,
            max_decoded_bytes: 64 * 1024 * 1024,
        }
    }
}
