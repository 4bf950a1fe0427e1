//! Certificates and secret keys parsed once per [`OpenPgp`](super::OpenPgp) object and
//! reused while the store hands out the same bytes: parsing a certificate and checking
//! its self-signatures costs more than signing a small message, so a gateway that
//! opens many messages from the same peers parses each peer once. Changed bytes are
//! parsed again; the addresses of the certificates are re-derived at least every
//! [`REFRESH`], so a User ID binding that expires stops counting soon after.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sequoia_openpgp as openpgp;

use openpgp::crypto::{mpi, Decryptor, KeyPair, SessionKey};
use openpgp::packet::key::{PublicParts, SecretParts, UnspecifiedRole};
use openpgp::packet::Key;
use openpgp::policy::Policy;
use openpgp::Cert;
use zeroize::Zeroizing;

use super::keys;

/// How long the derived addresses of a certificate set are reused.
const REFRESH: Duration = Duration::from_secs(600);
/// At most this many secret keys are kept; past it the cache starts over.
const CAPACITY: usize = 1024;

/// The store's certificates, parsed, with their User ID addresses (valid when built).
pub(crate) struct View {
    bytes: Vec<Vec<u8>>,
    /// `parsed[i]`: what `bytes[i]` parsed to.
    parsed: Vec<Option<Cert>>,
    built: Instant,
    /// The certificates that parse and conform.
    pub(crate) certs: Vec<Cert>,
    /// `emails[i]`: the addresses of `certs[i]`.
    pub(crate) emails: Vec<Vec<String>>,
}

/// One of our transferable secret keys with the keys of it that may decrypt.
pub(crate) struct Secret {
    /// The key.
    pub(crate) tsk: Cert,
    /// Its unlocked encryption-capable keys, ready to decrypt (expired ones included:
    /// a message written while they were valid still decrypts, as with GnuPG).
    pub(crate) decryption: Vec<Decrypter>,
}

/// One key able to decrypt session keys: Sequoia's key pair, or a legacy ElGamal key,
/// which Sequoia's backend cannot use (see [`super::elgamal`]).
#[derive(Clone)]
pub(crate) enum Decrypter {
    Pair(KeyPair),
    ElGamal(super::elgamal::ElGamal),
}

impl Decryptor for Decrypter {
    fn public(&self) -> &Key<PublicParts, UnspecifiedRole> {
        match self {
            Self::Pair(p) => p.public(),
            Self::ElGamal(e) => e.public(),
        }
    }

    fn decrypt(
        &mut self,
        ciphertext: &mpi::Ciphertext,
        plaintext_len: Option<usize>,
    ) -> openpgp::Result<SessionKey> {
        match self {
            Self::Pair(p) => p.decrypt(ciphertext, plaintext_len),
            Self::ElGamal(e) => e.decrypt(ciphertext, plaintext_len),
        }
    }
}

impl Decrypter {
    /// The decrypter of an unlocked secret key.
    pub(crate) fn of(key: &Key<SecretParts, UnspecifiedRole>) -> Option<Self> {
        if let Some(e) = super::elgamal::ElGamal::new(key) {
            return Some(Self::ElGamal(e));
        }
        key.clone().into_keypair().ok().map(Self::Pair)
    }
}

/// A secret key's bytes and what they parsed to.
type SecretEntry = (Zeroizing<Vec<u8>>, Arc<Secret>);

#[derive(Default)]
pub(crate) struct Parsed {
    view: Mutex<Option<Arc<View>>>,
    secrets: Mutex<Vec<SecretEntry>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Parsed {
    /// The certificates in `bytes`, reusing what was parsed from the same bytes.
    pub(crate) fn view(&self, bytes: Vec<Vec<u8>>) -> Arc<View> {
        let mut slot = lock(&self.view);
        if let Some(v) = slot.as_ref() {
            if v.bytes == bytes && v.built.elapsed() < REFRESH {
                return v.clone();
            }
        }
        let old = slot.take();
        let mut parsed = Vec::with_capacity(bytes.len());
        let mut certs = Vec::new();
        let mut emails = Vec::new();
        for b in &bytes {
            let cert = match old
                .as_ref()
                .and_then(|o| o.bytes.iter().position(|ob| ob == b).map(|i| (o, i)))
            {
                Some((o, i)) => o.parsed[i].clone(),
                None => keys::parse_stored(b),
            };
            if let Some(cert) = &cert {
                emails.push(keys::emails_at(cert, None));
                certs.push(cert.clone());
            }
            parsed.push(cert);
        }
        let view = Arc::new(View {
            bytes,
            parsed,
            built: Instant::now(),
            certs,
            emails,
        });
        *slot = Some(view.clone());
        view
    }

    /// The secret key in `bytes`, reusing what was parsed from the same bytes.
    pub(crate) fn secret(
        &self,
        bytes: &Zeroizing<Vec<u8>>,
        policy: &dyn Policy,
    ) -> Option<Arc<Secret>> {
        let mut entries = lock(&self.secrets);
        if let Some((_, s)) = entries.iter().find(|(b, _)| **b == **bytes) {
            return Some(s.clone());
        }
        let tsk = keys::parse_stored(bytes)?;
        let valid = tsk.with_policy(policy, None).ok();
        let decryption = tsk
            .keys()
            .secret()
            .filter(|ka| {
                ka.key().has_unencrypted_secret()
                    && valid
                        .as_ref()
                        .and_then(|v| v.keys().key_handle(ka.key().key_handle()).next())
                        .is_none_or(|k| k.for_transport_encryption() || k.for_storage_encryption())
            })
            .filter_map(|ka| Decrypter::of(ka.key().role_as_unspecified()))
            .collect();
        let secret = Arc::new(Secret { tsk, decryption });
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.push((bytes.clone(), secret.clone()));
        Some(secret)
    }
}
