//! A key named by its fingerprint as a person types it: the whole lower-case hex
//! that `list` shows, or any unique prefix of it (upper case, spaces and colons
//! allowed, as fingerprints are often copied). A prefix that fits several keys is
//! refused naming them all: a key is never chosen by listing order.

use super::{KeyStore, KeyStoreError};

/// The fewest hex digits a prefix must have: shorter ones name keys by accident.
pub const MIN_PREFIX_DIGITS: usize = 4;

/// The full fingerprint of the one entry of `store` whose fingerprint starts with
/// `typed`.
pub fn resolve_fingerprint(store: &dyn KeyStore, typed: &str) -> Result<String, KeyStoreError> {
    let wanted: String = typed
        .chars()
        .filter(|c| !matches!(c, ' ' | ':'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let no_key = || KeyStoreError::NoSuchKey {
        fingerprint: crate::error::quoted(typed),
    };
    if wanted.len() < MIN_PREFIX_DIGITS || !wanted.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(no_key());
    }
    let mut found: Vec<String> = store
        .list()?
        .into_iter()
        .map(|e| e.fingerprint)
        .filter(|f| f.starts_with(&wanted))
        .collect();
    found.sort();
    found.dedup();
    match found.len() {
        0 => Err(no_key()),
        1 => Ok(found.remove(0)),
        _ => Err(KeyStoreError::AmbiguousFingerprint {
            prefix: wanted,
            candidates: found,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keystore::MemoryStore;

    #[test]
    fn fail_short_ambiguous_and_unknown_prefixes_are_refused() {
        let store = MemoryStore::default();
        for email in ["a@x.example", "b@x.example"] {
            let tsk = crate::keystore::openpgp::generate(email, None, Default::default()).unwrap();
            store.import(&tsk, "generated", false).unwrap();
        }
        let all: Vec<String> = store
            .list()
            .unwrap()
            .into_iter()
            .map(|e| e.fingerprint)
            .collect();
        let full = &all[0];
        assert_eq!(&resolve_fingerprint(&store, full).unwrap(), full);
        assert_eq!(
            &resolve_fingerprint(&store, &full[..12].to_ascii_uppercase()).unwrap(),
            full
        );
        assert!(matches!(
            resolve_fingerprint(&store, &full[..3]),
            Err(KeyStoreError::NoSuchKey { .. })
        ));
        assert!(matches!(
            resolve_fingerprint(&store, "0123zz"),
            Err(KeyStoreError::NoSuchKey { .. })
        ));
        // The longest prefix the two share (if any) names both.
        let common = full
            .chars()
            .zip(all[1].chars())
            .take_while(|(a, b)| a == b)
            .count();
        if common >= MIN_PREFIX_DIGITS {
            let e = resolve_fingerprint(&store, &full[..common]).unwrap_err();
            assert!(e.to_string().contains(&all[1]), "{e}");
        }
    }
}
