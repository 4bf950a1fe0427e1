//! The tokens of the fuzz dictionaries (`fuzz/dicts/`), which the mutations insert.

use std::sync::OnceLock;

/// The tokens of a libFuzzer dictionary: each quoted value, `\\`, `\"` and `\xNN`
/// unescaped.
fn dictionary(text: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let (Some(start), Some(end)) = (line.find('"'), line.rfind('"')) else {
            continue;
        };
        if end <= start {
            continue;
        }
        let raw = &line.as_bytes()[start + 1..end];
        let mut token = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            match (raw[i], raw.get(i + 1)) {
                (b'\\', Some(b'x')) if i + 4 <= raw.len() => {
                    let hex = std::str::from_utf8(&raw[i + 2..i + 4]).unwrap_or("");
                    match u8::from_str_radix(hex, 16) {
                        Ok(b) => token.push(b),
                        Err(_) => token.extend_from_slice(&raw[i..i + 2]),
                    }
                    i += 4;
                }
                (b'\\', Some(&c)) => {
                    token.push(c);
                    i += 2;
                }
                (c, _) => {
                    token.push(c);
                    i += 1;
                }
            }
        }
        if !token.is_empty() {
            out.push(token);
        }
    }
    out
}

pub(super) fn mime() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| dictionary(include_str!("../../../fuzz/dicts/mime.dict")))
}

pub(super) fn json() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| dictionary(include_str!("../../../fuzz/dicts/json.dict")))
}

pub(super) fn asn1() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| dictionary(include_str!("../../../fuzz/dicts/asn1.dict")))
}

pub(super) fn openpgp() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| dictionary(include_str!("../../../fuzz/dicts/openpgp.dict")))
}
