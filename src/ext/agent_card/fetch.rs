//! Agent Cards over HTTPS (`mailseal card fetch URL`): fetched with the crate's one
//! HTTPS client, checked as a card file is (`read_card_with`), bound to the URL's
//! host, cached for the server's `max-age`, and compared with the card fetched before:
//! a change of keys is refused until the user accepts it, as SSH does with a host key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::{read_card_with, CardError, CardOperators, PeerCard};
use crate::https::{self, FetchOptions};
use crate::keystore::KeyStore;

/// What the cache keeps of a fetched card.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    url: String,
    fetched_at: i64,
    max_age: u64,
    /// The card's bytes as fetched.
    card: String,
    /// The fingerprints of its keys, sorted.
    keys: Vec<String>,
}

/// Cached cards, one file per URL (`DIR/SHA256(URL).json`).
#[derive(Clone, Debug)]
pub struct CardCache {
    dir: PathBuf,
}

/// How a card differs from the one fetched before from the same URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CardChanges {
    /// Never fetched before.
    pub first: bool,
    /// When it was fetched before (RFC 3339).
    pub since: Option<String>,
    /// Key fingerprints now published that were not.
    pub added: Vec<String>,
    /// Key fingerprints no longer published.
    pub removed: Vec<String>,
    /// Whether anything else in the card changed.
    pub other: bool,
}

impl CardChanges {
    /// Whether the keys changed (what needs the user's acceptance).
    pub fn keys_changed(&self) -> bool {
        !self.first && (!self.added.is_empty() || !self.removed.is_empty())
    }
}

/// A card as `fetch_card` returns it: checked, with where it came from.
#[derive(Debug)]
#[non_exhaustive]
pub struct FetchedCard {
    /// The checked card.
    pub card: PeerCard,
    /// Taken from the cache (fresh under the server's max-age), not the network.
    pub from_cache: bool,
    /// How it differs from the card fetched before.
    pub changes: CardChanges,
    /// Seconds the server lets it be cached.
    pub max_age: u64,
    bytes: Vec<u8>,
    url: String,
    keys: Vec<String>,
}

impl CardCache {
    /// A cache in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CardCache { dir: dir.into() }
    }

    fn path(&self, url: &str) -> PathBuf {
        self.dir.join(format!(
            "{}.json",
            crate::keystore::hex(&Sha256::digest(url.as_bytes()))
        ))
    }

    fn get(&self, url: &str) -> Option<Entry> {
        let bytes = std::fs::read(self.path(url)).ok()?;
        serde_json::from_slice::<Entry>(&bytes)
            .ok()
            .filter(|e| e.url == url)
    }

    /// Records `fetched` as the card of its URL (after the caller imported it).
    pub fn remember(&self, fetched: &FetchedCard, now: OffsetDateTime) -> Result<(), CardError> {
        if fetched.from_cache {
            return Ok(());
        }
        let io = |e: std::io::Error| {
            CardError::Store(crate::keystore::KeyStoreError::Io {
                path: self.dir.display().to_string(),
                source: e,
            })
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let entry = Entry {
            url: fetched.url.clone(),
            fetched_at: now.unix_timestamp(),
            max_age: fetched.max_age,
            card: String::from_utf8_lossy(&fetched.bytes).into_owned(),
            keys: fetched.keys.clone(),
        };
        let text =
            serde_json::to_vec_pretty(&entry).map_err(|e| CardError::NotJson(e.to_string()))?;
        let path = self.path(&fetched.url);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

/// The key store fingerprints of every key a card publishes (S/MIME certificates'
/// public keys, OpenPGP certificates, JWKs), sorted. MLS KeyPackages are left out:
/// they are meant to rotate.
pub fn key_fingerprints(card: &PeerCard) -> Vec<String> {
    use der::Decode;
    let mut out = Vec::new();
    for der in &card.smime_certificates {
        if let Ok(c) = x509_cert::Certificate::from_der(der) {
            out.push(crate::keystore::fingerprint(
                c.tbs_certificate()
                    .subject_public_key_info()
                    .subject_public_key
                    .raw_bytes(),
            ));
        }
    }
    for armored in &card.openpgp_certificates {
        if let Ok(certs) = crate::keystore::openpgp::read_certs(armored, "card", None) {
            out.extend(certs.into_iter().map(|c| c.fingerprint));
        }
    }
    for jwk in &card.jwks {
        if let Ok(k) = crate::jws::Jwk::parse(jwk.to_string().as_bytes()) {
            out.push(k.fingerprint());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether an address's domain is `host` or a parent of it (`agent.example.com`
/// speaks for `example.com`).
fn host_speaks_for(host: &str, address: &str) -> bool {
    let domain = address.rsplit_once('@').map(|(_, d)| d).unwrap_or_default();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    !domain.is_empty() && (host == domain || host.ends_with(&format!(".{domain}")))
}

/// Fetches (or takes from `cache` while fresh, unless `refresh`) the card at `url`,
/// checks it as `key import --agent-card` does, and compares it with the card fetched
/// before. A card for an address outside the host's domain is refused; changed keys
/// are refused unless `accept_changed`. Nothing is imported here: the caller imports
/// [`FetchedCard::card`] and then calls [`CardCache::remember`].
#[allow(clippy::too_many_arguments)]
pub fn fetch_card(
    url: &str,
    fetch: &FetchOptions,
    cache: &CardCache,
    store: &dyn KeyStore,
    operators: &CardOperators,
    now: OffsetDateTime,
    refresh: bool,
    accept_changed: bool,
) -> Result<FetchedCard, CardError> {
    let before = cache.get(url);
    if let Some(e) = before.as_ref().filter(|_| !refresh) {
        let age = now.unix_timestamp().saturating_sub(e.fetched_at);
        if age >= 0 && (age as u64) < e.max_age {
            let card = read_card_with(e.card.as_bytes(), store, now, operators)?;
            return Ok(FetchedCard {
                keys: key_fingerprints(&card),
                card,
                from_cache: true,
                changes: CardChanges::default(),
                max_age: e.max_age,
                bytes: e.card.clone().into_bytes(),
                url: url.to_string(),
            });
        }
    }
    let mut opts = fetch.clone();
    opts.max_bytes = opts.max_bytes.min(super::MAX_CARD_BYTES);
    let fetched = https::get(url, &opts)?;
    let card = read_card_with(&fetched.body, store, now, operators)?;
    let host = url::Url::parse(&fetched.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    if !host_speaks_for(&host, &card.address) {
        return Err(CardError::WrongHost {
            host,
            address: card.address.clone(),
        });
    }
    let keys = key_fingerprints(&card);
    let changes = match &before {
        None => CardChanges {
            first: true,
            ..CardChanges::default()
        },
        Some(e) => CardChanges {
            first: false,
            since: OffsetDateTime::from_unix_timestamp(e.fetched_at)
                .ok()
                .and_then(|t| {
                    t.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                }),
            added: keys
                .iter()
                .filter(|k| !e.keys.contains(k))
                .cloned()
                .collect(),
            removed: e
                .keys
                .iter()
                .filter(|k| !keys.contains(k))
                .cloned()
                .collect(),
            other: e.card.as_bytes() != fetched.body.as_slice(),
        },
    };
    if changes.keys_changed() && !accept_changed {
        let list = |l: &[String]| {
            if l.is_empty() {
                "none".to_string()
            } else {
                l.join(", ")
            }
        };
        return Err(CardError::KeysChanged {
            address: card.address.clone(),
            since: changes.since.clone().unwrap_or_default(),
            added: list(&changes.added),
            removed: list(&changes.removed),
        });
    }
    Ok(FetchedCard {
        card,
        from_cache: false,
        changes,
        max_age: fetched.max_age.unwrap_or(0),
        bytes: fetched.body,
        url: url.to_string(),
        keys,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_speak_for_their_domain_only() {
        assert!(host_speaks_for("example.com", "bot@example.com"));
        assert!(host_speaks_for("agent.example.com", "bot@example.com"));
        assert!(!host_speaks_for("evil.example", "bot@example.com"));
        assert!(!host_speaks_for("badexample.com", "bot@example.com"));
        assert!(!host_speaks_for(
            "example.com.evil.example",
            "bot@example.com"
        ));
    }
}
