//! The peer policy file: what imported Agent Cards say about each peer, kept beside
//! the key store as `peers.json` (owner-only, replaced atomically).
//!
//! A receiver applies it in [`PeerPolicies::apply`] (DESIGN decision 8: the peer's
//! minimum protection, never below the policy's default); a sender checks it in
//! [`PeerPolicies::check_seal`] (never seal below a recipient's minimum, nor under a
//! profile its card does not list). MLS KeyPackages from cards wait here for
//! `mls add --member`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::agent_card::{PeerCard, JWS_TOKEN, MLS_TOKEN, OPENPGP_TOKEN, SMIME_TOKEN};
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::identity::pins::{Pin, Vouched};
use crate::profile::{Profile, Protection};
use crate::seal::OpenPolicy;

/// The file name, in the store's directory.
pub const FILE_NAME: &str = "peers.json";

/// Why the peer policy file could not be used, or a seal goes against it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerPolicyError {
    /// The file could not be read or written.
    #[error("peer policy file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The shared policies in PostgreSQL could not be read or written.
    #[error("peer policies in PostgreSQL: {0}")]
    Database(String),
    /// Sealing for a recipient below the minimum its card declares.
    #[error("{peer}'s Agent Card demands {required} for every message; this one would be {got}")]
    BelowMinimum {
        /// The recipient.
        peer: String,
        /// What its card demands.
        required: Protection,
        /// What the seal would give.
        got: Protection,
    },
    /// Sealing for a recipient under a profile its card does not list.
    #[error("{peer}'s Agent Card lists {listed}, not {profile}")]
    ProfileNotListed {
        /// The recipient.
        peer: String,
        /// The profile token asked for.
        profile: String,
        /// What the card lists.
        listed: String,
    },
}

impl Classify for PeerPolicyError {
    fn a2a_error(&self) -> A2aErrorType {
        A2aErrorType::InternalError
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::File { .. } | Self::Database(_) => ErrorKind::Other,
            Self::BelowMinimum { .. } | Self::ProfileNotListed { .. } => ErrorKind::Policy,
        }
    }
}

/// What one imported card said.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerRecord {
    /// `minimumProtection` (`signed` or `signed-encrypted`).
    pub minimum_protection: String,
    /// The card's `profiles`.
    pub profiles: Vec<String>,
    /// SHA-256 of the card's signed form.
    pub card_digest: String,
    /// When it was imported (RFC 3339).
    pub imported_at: String,
    /// Each verified signature: `ALG by SIGNER (TRUST)`; empty when unsigned.
    #[serde(default)]
    pub signatures: Vec<String>,
    /// The card's MLS KeyPackages (standard base64), for `mls add --member`.
    #[serde(default)]
    pub mls_key_packages: Vec<StoredKeyPackage>,
    /// The resource limits the card publishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<super::agent_card::CardLimits>,
    /// The key store fingerprints of the S/MIME certificates and OpenPGP keys the card
    /// publishes: chosen first when the store holds several keys for the address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published_keys: Vec<String>,
    /// The key store fingerprints of every key the card publishes (S/MIME, OpenPGP,
    /// JWK): the card's part of the address's pin ([`crate::identity::pins`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned_keys: Vec<String>,
    /// How far the card's signatures vouched for it (none: a record written before
    /// this was kept, read from `signatures`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vouched: Option<Vouched>,
    /// The normalised origin the card was fetched from (none: a file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A KeyPackage from a card.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredKeyPackage {
    /// The MLSMessage, standard base64.
    pub key_package: String,
    /// A last-resort KeyPackage stays for the next group; another is used once.
    pub last_resort: bool,
}

/// The peer policy file's content.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PeerPolicies {
    /// By address, lower case.
    #[serde(default)]
    pub peers: BTreeMap<String, PeerRecord>,
}

/// The key store fingerprints of the keys `card` publishes.
fn published_keys(card: &PeerCard) -> Vec<String> {
    use der::Decode;
    let mut out: Vec<String> = card
        .smime_certificates
        .iter()
        .filter_map(|d| x509_cert::Certificate::from_der(d).ok())
        .map(|c| {
            crate::keystore::fingerprint(
                c.tbs_certificate()
                    .subject_public_key_info()
                    .subject_public_key
                    .raw_bytes(),
            )
        })
        .collect();
    for armored in &card.openpgp_certificates {
        if let Ok(certs) = crate::keystore::openpgp::read_certs(armored, "card", None) {
            out.extend(certs.into_iter().map(|c| c.entry.fingerprint));
        }
    }
    out
}

/// How far a record written before `vouched` was kept was vouched for, from its
/// signatures' words (`ALG by SIGNER (TRUST)`).
fn vouched_of(signatures: &[String]) -> Vouched {
    if signatures.is_empty() {
        Vouched::Unsigned
    } else if signatures
        .iter()
        .any(|s| s.ends_with("(pinned)") || s.ends_with("(anchored)") || s.ends_with("(operator)"))
    {
        Vouched::Trusted
    } else {
        Vouched::Signed
    }
}

fn file_error(path: &Path, reason: impl std::fmt::Display) -> PeerPolicyError {
    PeerPolicyError::File {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

impl PeerPolicies {
    /// The file in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE_NAME)
    }

    /// Reads `dir`'s file; none yet is an empty policy.
    pub fn load(dir: &Path) -> Result<PeerPolicies, PeerPolicyError> {
        let path = Self::path(dir);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| file_error(&path, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PeerPolicies::default()),
            Err(e) => Err(file_error(&path, e)),
        }
    }

    /// Writes `dir`'s file: a new owner-only file renamed over the old one, so a
    /// reader sees the old policy or the new, never half of one.
    pub fn save(&self, dir: &Path) -> Result<(), PeerPolicyError> {
        let path = Self::path(dir);
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| file_error(&path, e))?;
        text.push(b'\n');
        let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| file_error(&path, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o600))
                .map_err(|e| file_error(&path, e))?;
        }
        std::fs::write(tmp.path(), &text).map_err(|e| file_error(&path, e))?;
        tmp.as_file().sync_all().map_err(|e| file_error(&path, e))?;
        tmp.persist(&path).map_err(|e| file_error(&path, e.error))?;
        Ok(())
    }

    /// Records what `card` says, replacing an earlier card of the same address.
    pub fn record(&mut self, card: &PeerCard, now: time::OffsetDateTime) {
        let imported_at = now
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        self.peers.insert(
            card.address.clone(),
            PeerRecord {
                minimum_protection: card.minimum.token().to_string(),
                profiles: card.profiles.clone(),
                card_digest: card.digest.clone(),
                imported_at,
                signatures: card
                    .signatures
                    .iter()
                    .map(|s| format!("{} by {} ({})", s.algorithm, s.signer, s.trust))
                    .collect(),
                mls_key_packages: card
                    .mls_key_packages
                    .iter()
                    .map(|(kp, last_resort)| StoredKeyPackage {
                        key_package: STANDARD.encode(kp),
                        last_resort: *last_resort,
                    })
                    .collect(),
                limits: card.limits.clone(),
                published_keys: published_keys(card),
                pinned_keys: super::agent_card::key_fingerprints(card),
                vouched: Some(card.vouched()),
                origin: None,
            },
        );
    }

    /// The pin of `address`: what this store holds for it, whichever import path put
    /// it there: the last accepted card's keys, minimum, signatures and origin (from
    /// this file), and every JWK `store` binds to the address. Every card, JWK and DID
    /// import for the address is compared with it ([`crate::identity::pins::check`]).
    pub fn pin(
        &self,
        store: &dyn crate::keystore::KeyStore,
        address: &str,
    ) -> Result<Pin, crate::keystore::KeyStoreError> {
        let mut pin = Pin::new(address);
        let mut bound: Vec<String> = store
            .jwk_identities()?
            .into_iter()
            .filter(|r| r.emails.contains(&pin.address))
            .map(|r| r.fingerprint)
            .collect();
        bound.sort();
        pin.bound_keys = bound;
        if let Some(r) = self.peers.get(&pin.address) {
            pin.card_keys = if r.pinned_keys.is_empty() {
                r.published_keys.clone()
            } else {
                r.pinned_keys.clone()
            };
            pin.minimum = Some(
                r.minimum_protection
                    .parse()
                    .unwrap_or(Protection::SignedEncrypted),
            );
            pin.vouched = Some(r.vouched.unwrap_or_else(|| vouched_of(&r.signatures)));
            pin.origin = r.origin.clone();
            pin.since = Some(r.imported_at.clone());
        }
        Ok(pin)
    }

    /// The keys the recipients' cards publish (key store fingerprints).
    pub fn published_keys(&self, recipients: &[String]) -> Vec<String> {
        recipients
            .iter()
            .filter_map(|r| self.peers.get(&r.trim().to_ascii_lowercase()))
            .flat_map(|p| p.published_keys.iter().cloned())
            .collect()
    }

    /// The minimum protection `peer`'s card declares.
    pub fn minimum_for(&self, peer: &str) -> Option<Protection> {
        self.peers
            .get(&peer.trim().to_ascii_lowercase())
            .and_then(|r| r.minimum_protection.parse().ok())
    }

    /// Puts each peer's minimum into `policy` (never below its default: a card can
    /// raise what we demand of its agent, not lower it).
    pub fn apply(&self, policy: &mut OpenPolicy) {
        for peer in self.peers.keys() {
            if let Some(min) = self.minimum_for(peer) {
                let current = policy.minimum_for(peer);
                policy
                    .minimum_per_peer
                    .insert(peer.clone(), min.max(current));
            }
        }
    }

    /// Refuses a seal for `recipients` under `profile` (`sign_only`: signed, not
    /// encrypted) that a recipient's card rules out.
    pub fn check_seal(
        &self,
        recipients: &[String],
        profile: Profile,
        sign_only: bool,
    ) -> Result<(), PeerPolicyError> {
        // detached-jws is signed only, whatever was asked.
        let got = if sign_only || profile == Profile::Jws {
            Protection::Signed
        } else {
            Protection::SignedEncrypted
        };
        let token = profile_token(profile);
        for r in recipients {
            let peer = r.trim().to_ascii_lowercase();
            let Some(record) = self.peers.get(&peer) else {
                continue;
            };
            if let Some(required) = self.minimum_for(&peer) {
                if required > got {
                    return Err(PeerPolicyError::BelowMinimum {
                        peer,
                        required,
                        got,
                    });
                }
            }
            // A group message goes to the group, not to one card's profiles.
            if profile != Profile::Mls
                && !record.profiles.is_empty()
                && !record.profiles.iter().any(|p| p == token)
            {
                return Err(PeerPolicyError::ProfileNotListed {
                    peer,
                    profile: token.to_string(),
                    listed: record.profiles.join(", "),
                });
            }
        }
        Ok(())
    }

    /// A KeyPackage `peer`'s card published, for adding it to a group: a last-resort
    /// one stays, any other is taken out (a KeyPackage serves one join).
    pub fn take_key_package(&mut self, peer: &str) -> Option<Vec<u8>> {
        let record = self.peers.get_mut(&peer.trim().to_ascii_lowercase())?;
        let i = record
            .mls_key_packages
            .iter()
            .position(|k| !k.last_resort)
            .or_else(|| (!record.mls_key_packages.is_empty()).then_some(0))?;
        let kp = if record.mls_key_packages[i].last_resort {
            record.mls_key_packages[i].clone()
        } else {
            record.mls_key_packages.remove(i)
        };
        STANDARD.decode(kp.key_package).ok()
    }
}

/// The token an Agent Card lists `profile` under.
pub fn profile_token(profile: Profile) -> &'static str {
    match profile {
        Profile::Smime => SMIME_TOKEN,
        Profile::OpenPgp => OPENPGP_TOKEN,
        Profile::Jws => JWS_TOKEN,
        _ => MLS_TOKEN,
    }
}
