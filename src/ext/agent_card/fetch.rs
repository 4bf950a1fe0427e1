//! Agent Cards over HTTPS (`mailseal card fetch URL`): fetched with the crate's one
//! HTTPS client, checked as a card file is (`read_card_with`), bound to the URL's
//! host, and cached for the server's `max-age`.
//!
//! The cache is keyed by the URL, and it is only a cache: it decides nothing. Whether
//! the card changes what the store holds for its address is decided when it is
//! imported ([`super::import_card`]), against the pin of the address
//! ([`crate::identity::pins`]): a card reached under another spelling of its URL (a
//! trailing `?`, the host in capitals, another path, another host of the domain) is
//! compared with the same pin, and a change of keys is refused until the user accepts
//! it, as SSH does with a host key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::{key_fingerprints, read_card_with, CardError, CardOperators, PeerCard};
use crate::https::{self, FetchOptions};
use crate::identity::pins;
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

/// A card as `fetch_card` returns it: checked, with where it came from.
#[derive(Debug)]
#[non_exhaustive]
pub struct FetchedCard {
    /// The checked card.
    pub card: PeerCard,
    /// Taken from the cache (fresh under the server's max-age), not the network.
    pub from_cache: bool,
    /// Seconds the server lets it be cached.
    pub max_age: u64,
    /// The normalised origin it came from (scheme, host, port;
    /// [`crate::identity::pins::origin`]), recorded with the address's pin.
    pub origin: String,
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

/// Whether an address's domain is `host` or a parent of it (`agent.example.com`
/// speaks for `example.com`).
fn host_speaks_for(host: &str, address: &str) -> bool {
    let domain = address.rsplit_once('@').map(|(_, d)| d).unwrap_or_default();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    !domain.is_empty() && (host == domain || host.ends_with(&format!(".{domain}")))
}

/// Fetches (or takes from `cache` while fresh, unless `refresh`) the card at `url`
/// and checks it as `key import --agent-card` does. A card for an address outside the
/// host's domain is refused. Nothing is imported or compared here: the caller imports
/// [`FetchedCard::card`] with [`super::import_card`] (which compares it with the pin
/// of its address, under [`FetchedCard::origin`]) and then calls
/// [`CardCache::remember`].
pub fn fetch_card(
    url: &str,
    fetch: &FetchOptions,
    cache: &CardCache,
    store: &dyn KeyStore,
    operators: &CardOperators,
    now: OffsetDateTime,
    refresh: bool,
) -> Result<FetchedCard, CardError> {
    if let Some(e) = cache.get(url).filter(|_| !refresh) {
        let age = now.unix_timestamp().saturating_sub(e.fetched_at);
        if age >= 0 && (age as u64) < e.max_age {
            let card = read_card_with(e.card.as_bytes(), store, now, operators)?;
            return Ok(FetchedCard {
                keys: key_fingerprints(&card),
                card,
                from_cache: true,
                max_age: e.max_age,
                origin: pins::origin(url)?,
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
    Ok(FetchedCard {
        keys: key_fingerprints(&card),
        card,
        from_cache: false,
        max_age: fetched.max_age.unwrap_or(0),
        origin: pins::origin(&fetched.url)?,
        bytes: fetched.body,
        url: url.to_string(),
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
