//! Strict JSON reading for untrusted protected envelopes.
//!
//! `serde_json` silently keeps the last of two duplicate keys and only bounds nesting at
//! 128. A MailA2A receiver must not: two `operation` keys could mean one thing to us and
//! another to a relay or the agent behind us. This pass walks the document once, refuses
//! duplicate object keys and nesting deeper than the limit, and allocates nothing but
//! the keys of the object it is in.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::EnvelopeError;

/// Checks `bytes` is one UTF-8 JSON value without duplicate keys and at most `max_depth`
/// levels of arrays/objects.
pub(crate) fn check_strict(bytes: &[u8], max_depth: usize) -> Result<(), EnvelopeError> {
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(EnvelopeError::InvalidUtf8 {
            offset: e.valid_up_to(),
        });
    }
    let mut state = State {
        depth: 0,
        max_depth,
        path: Vec::new(),
        fault: None,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result = Check { state: &mut state }
        .deserialize(&mut de)
        .and_then(|()| de.end());
    match (result, state.fault) {
        (_, Some(fault)) => Err(fault),
        (Ok(()), None) => Ok(()),
        (Err(e), None) => Err(EnvelopeError::Syntax {
            line: e.line(),
            column: e.column(),
            reason: short_reason(&e),
        }),
    }
}

/// serde_json's message without its " at line N column M" suffix (we report those apart).
fn short_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.find(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

// serde_json's own recursion limit (128) is above ours, so ours always fires first.

struct State {
    depth: usize,
    max_depth: usize,
    path: Vec<String>,
    fault: Option<EnvelopeError>,
}

impl State {
    fn pointer(&self) -> String {
        let mut s = String::new();
        for p in &self.path {
            s.push('/');
            s.push_str(&p.replace('~', "~0").replace('/', "~1"));
        }
        s
    }
    fn enter<E: de::Error>(&mut self) -> Result<(), E> {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.fault = Some(EnvelopeError::TooDeep {
                limit: self.max_depth,
                path: self.pointer(),
            });
            return Err(E::custom("too deep"));
        }
        Ok(())
    }
}

struct Check<'s> {
    state: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.state.enter()?;
        let mut i = 0usize;
        loop {
            self.state.path.push(i.to_string());
            let next = seq.next_element_seed(Check {
                state: &mut *self.state,
            })?;
            self.state.path.pop();
            if next.is_none() {
                break;
            }
            i += 1;
        }
        self.state.depth -= 1;
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.state.enter()?;
        // Small objects (the common case) are checked by a linear scan; large ones by hash.
        let mut seen: Vec<Cow<'de, str>> = Vec::new();
        let mut seen_set: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let duplicate = if seen_set.is_empty() {
                seen.contains(&key)
            } else {
                seen_set.contains(&key)
            };
            if duplicate {
                self.state.path.push(key.into_owned());
                self.state.fault = Some(EnvelopeError::DuplicateKey {
                    path: self.state.pointer(),
                });
                return Err(de::Error::custom("duplicate key"));
            }
            self.state.path.push(key.to_string());
            map.next_value_seed(Check {
                state: &mut *self.state,
            })?;
            self.state.path.pop();
            if seen_set.is_empty() && seen.len() < 16 {
                seen.push(key);
            } else {
                seen_set.extend(seen.drain(..));
                seen_set.insert(key);
            }
        }
        self.state.depth -= 1;
        Ok(())
    }
}

/// Deserializes an object key, borrowing it from the input when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        let err = check_strict(br#"{"a":{"b":1,"b":2}}"#, 64).unwrap_err();
        assert_eq!(
            err,
            EnvelopeError::DuplicateKey {
                path: "/a/b".into()
            }
        );
        // An escaped spelling of the same key is the same key.
        let err = check_strict(br#"{"kind":1,"\u006bind":2}"#, 64).unwrap_err();
        assert!(matches!(err, EnvelopeError::DuplicateKey { .. }));
    }

    #[test]
    fn depth_is_bounded() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(matches!(
            check_strict(deep.as_bytes(), 64),
            Err(EnvelopeError::TooDeep { limit: 64, .. })
        ));
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        check_strict(ok.as_bytes(), 64).unwrap();
        // Far deeper than serde_json's own limit: still our error, no stack overflow.
        let bomb = "[".repeat(100_000);
        assert!(matches!(
            check_strict(bomb.as_bytes(), 64),
            Err(EnvelopeError::TooDeep { .. })
        ));
    }

    #[test]
    fn utf8_and_syntax() {
        assert!(matches!(
            check_strict(b"{\"a\":\"\xff\"}", 64),
            Err(EnvelopeError::InvalidUtf8 { offset: 6 })
        ));
        assert!(matches!(
            check_strict(b"{\"a\":1", 64),
            Err(EnvelopeError::Syntax { .. })
        ));
        assert!(matches!(
            check_strict(b"{} {}", 64),
            Err(EnvelopeError::Syntax { .. })
        ));
    }
}
