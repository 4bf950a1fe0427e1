//! Certificates and secret keys parsed once per [`OpenPgp`](super::OpenPgp) object and
//! reused while the store hands out the same bytes: parsing a certificate and checking
//! its self-signatures costs more than signing a small message, so a gateway that
//! opens many messages from the same peers parses each peer once. Changed bytes are
//! parsed again. What is kept does not depend on time: the addresses a certificate
//! speaks for are judged at the time each caller asks ([`View::certificates_for`]:
//! the receipt time, `open --at`, or now when sealing), so no cache answers for a
//! time other than the one asked.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use sequoia_openpgp as openpgp;

use openpgp::crypto::{mpi, Decryptor, KeyPair, SessionKey};
use openpgp::packet::key::{PublicParts, SecretParts, UnspecifiedRole};
use openpgp::packet::Key;
use openpgp::policy::Policy;
use openpgp::Cert;
use zeroize::Zeroizing;

use super::keys;

/// At most this many secret keys are kept; past it the cache starts over.
const CAPACITY: usize = 1024;

/// The store's certificates, parsed.
pub(crate) struct View {
    bytes: Vec<Vec<u8>>,
    /// `parsed[i]`: what `bytes[i]` parsed to.
    parsed: Vec<Option<Cert>>,
    /// The certificates that parse and conform.
    pub(crate) certs: Vec<Cert>,
    /// `named[i]`: every address `certs[i]`'s User IDs name, valid or not (a
    /// time-independent superset of the addresses it speaks for at any time, to pick
    /// the few certificates worth validating).
    named: Vec<Vec<String>>,
}

impl View {
    /// The certificates with a User ID for `address` valid under `policy` at `at`
    /// ([`crate::identity::openpgp::addresses_at`]), newest first: the rule that picks
    /// among several (issue #17) is the newest usable one (latest primary key
    /// creation), never fingerprint order.
    pub(crate) fn certificates_for(
        &self,
        address: &str,
        policy: &dyn Policy,
        at: SystemTime,
    ) -> Vec<&Cert> {
        let address = address.to_ascii_lowercase();
        let mut certs: Vec<&Cert> = self
            .certs
            .iter()
            .zip(&self.named)
            .filter(|(_, named)| named.contains(&address))
            .filter(|(c, _)| {
                crate::identity::openpgp::addresses_at(c, policy, at).contains(&address)
            })
            .map(|(c, _)| c)
            .collect();
        certs.sort_by(|a, b| {
            b.primary_key()
                .key()
                .creation_time()
                .cmp(&a.primary_key().key().creation_time())
                .then_with(|| a.fingerprint().cmp(&b.fingerprint()))
        });
        certs
    }
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
            if v.bytes == bytes {
                return v.clone();
            }
        }
        let old = slot.take();
        let mut parsed = Vec::with_capacity(bytes.len());
        let mut certs = Vec::new();
        let mut named = Vec::new();
        for b in &bytes {
            let cert = match old
                .as_ref()
                .and_then(|o| o.bytes.iter().position(|ob| ob == b).map(|i| (o, i)))
            {
                Some((o, i)) => o.parsed[i].clone(),
                None => keys::parse_stored(b),
            };
            if let Some(cert) = &cert {
                named.push(crate::identity::openpgp::every_address(cert));
                certs.push(cert.clone());
            }
            parsed.push(cert);
        }
        let view = Arc::new(View {
            bytes,
            parsed,
            certs,
            named,
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
