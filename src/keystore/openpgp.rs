//! OpenPGP certificates and secret keys: recognising them among other key material,
//! reading them (armored or binary, several per input, passphrase-protected secrets
//! unlocked on import), describing them for `key list`, and generating new ones.
//!
//! The key store keeps OpenPGP material as bytes; this module is the only place that
//! turns those bytes into Sequoia certificates for the store.

use std::time::SystemTime;

use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;
use openpgp::crypto::Password;
use openpgp::packet::UserID;
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::SerializeInto;
use openpgp::types::{Features, PublicKeyAlgorithm};
use openpgp::Packet;
use zeroize::Zeroizing;

use crate::keystore::{EntryKind, KeyAlgorithm, KeyEntry, KeyStoreError};

pub(crate) use super::openpgp_placement as placement;
/// The invariants of the bounded certificate reading, for the fuzz target.
#[doc(hidden)]
pub use super::openpgp_placement::check as check_placement;

/// Whether `input` is OpenPGP material (an armored block, or binary packets) rather
/// than X.509/PKCS material. Binary OpenPGP starts with a packet header byte, whose
/// top bit is set; DER starts with a SEQUENCE (0x30).
pub(crate) fn looks_like_openpgp(input: &[u8]) -> bool {
    let text = input.trim_ascii_start();
    text.starts_with(b"-----BEGIN PGP ") || input.first().is_some_and(|b| b & 0x80 != 0)
}

/// One certificate read from an input, ready for the store.
pub(crate) struct ParsedCert {
    /// The OpenPGP fingerprint, lower-case hex.
    pub fingerprint: String,
    /// The certificate without secret key material (binary).
    pub public: Vec<u8>,
    /// The transferable secret key (binary, unlocked), when the input had one.
    pub secret: Option<Zeroizing<Vec<u8>>>,
    /// How `key list` shows it.
    pub entry: KeyEntry,
    /// Every address its User IDs name, valid or not (revoked, expired, bound in the
    /// future): what an Agent Card's key is judged on
    /// ([`crate::identity::openpgp::every_address`]).
    pub every_email: Vec<String>,
}

fn malformed(what: &str, reason: impl std::fmt::Display) -> KeyStoreError {
    KeyStoreError::Malformed {
        what: what.to_string(),
        reason: reason.to_string(),
    }
}

/// Reads every certificate in `input` to import it now. Locked secret keys are
/// unlocked with `passphrase` (stored unlocked, in an owner-only file, as PKCS#8 keys
/// are); without one they are refused with [`KeyStoreError::PassphraseRequired`]. A
/// certificate with a User ID bound in the future is refused
/// ([`crate::identity::openpgp::check_import`]): it would later speak for an address
/// the operator did not see at import.
pub(crate) fn read_certs(
    input: &[u8],
    what: &str,
    passphrase: Option<&[u8]>,
) -> Result<Vec<ParsedCert>, KeyStoreError> {
    read_certs_at(input, what, passphrase, Some(SystemTime::now()))
}

/// [`read_certs`], judging the import rule at `import_at`; `None` reads the
/// certificates as given, for SOP, which stores nothing and keeps Sequoia's reading.
pub(crate) fn read_certs_at(
    input: &[u8],
    what: &str,
    passphrase: Option<&[u8]>,
    import_at: Option<SystemTime>,
) -> Result<Vec<ParsedCert>, KeyStoreError> {
    use placement::PlacementError;
    let parser = placement::certificates(input).map_err(|e| match e {
        PlacementError::Packets(e) => malformed(what, e),
        e => KeyStoreError::Refused {
            what: what.to_string(),
            reason: e.to_string(),
        },
    })?;
    // Stored without what fits nowhere, or every reading would search for it again.
    let certs = parser
        .map(|cert| {
            cert.map(placement::without_unplaced_signatures)
                .map_err(|e| malformed(what, e))
        })
        .collect::<Result<Vec<Cert>, _>>()?;
    // Copies merged here, each certificate once: stored one by one, each copy would
    // re-read the growing stored certificate.
    let certs = merge_copies(certs, |_, _| Vec::new()).map_err(|e| malformed(what, e))?;
    let mut out = Vec::new();
    for cert in certs {
        conforms(&cert).map_err(|reason| malformed(what, reason))?;
        if let Some(at) = import_at {
            super::user_ids::check_import(&cert, at).map_err(|e| KeyStoreError::Refused {
                what: what.to_string(),
                reason: e.to_string(),
            })?;
        }
        let cert = writable(cert).map_err(|e| malformed(what, e))?;
        let cert = unlock(cert, what, passphrase)?;
        let has_secret = cert.is_tsk();
        let public = cert
            .clone()
            .strip_secret_key_material()
            .to_vec()
            .map_err(|e| malformed(what, e))?;
        let secret = if has_secret {
            Some(Zeroizing::new(
                cert.as_tsk().to_vec().map_err(|e| malformed(what, e))?,
            ))
        } else {
            None
        };
        out.push(ParsedCert {
            fingerprint: fingerprint(&cert),
            public,
            secret,
            entry: entry(&cert, has_secret),
            every_email: super::user_ids::every_address(&cert),
        });
    }
    if out.is_empty() {
        return Err(KeyStoreError::Unrecognised {
            what: what.to_string(),
        });
    }
    Ok(out)
}

/// `cert` without the unhashed subpackets Sequoia cannot write back (an Issuer
/// Fingerprint of a version it does not know): the certificate is stored as bytes
/// Sequoia writes, and one such subpacket would make it impossible to store. The
/// unhashed area is covered by no signature, so dropping them changes no statement.
fn writable(cert: Cert) -> openpgp::Result<Cert> {
    use openpgp::packet::signature::subpacket::SubpacketArea;
    use openpgp::serialize::Marshal;
    if cert.as_tsk().to_vec().is_ok() {
        return Ok(cert);
    }
    let packets = cert.into_tsk().into_packets().map(|p| match p {
        Packet::Signature(mut sig) => {
            let keep: Vec<_> = sig
                .unhashed_area()
                .iter()
                .filter(|sp| sp.serialize(&mut std::io::sink()).is_ok())
                .cloned()
                .collect();
            if keep.len() != sig.unhashed_area().iter().count() {
                if let Ok(area) = SubpacketArea::new(keep) {
                    *sig.unhashed_area_mut() = area;
                }
            }
            Packet::Signature(sig)
        }
        other => other,
    });
    Cert::from_packets(packets)
}

/// RFC 9580 5.5.2: a v6 key must not use the legacy EdDSA (22) or ECDH over
/// Curve25519Legacy algorithms, which are v4-only. Sequoia reads such keys; we refuse
/// them, so no signature or message under one is ever accepted.
pub(crate) fn conforms(cert: &Cert) -> Result<(), String> {
    use openpgp::crypto::mpi::PublicKey;
    use openpgp::types::Curve;
    for ka in cert.keys() {
        let key = ka.key();
        if key.version() != 6 {
            continue;
        }
        #[allow(deprecated)]
        let legacy = match (key.pk_algo(), key.mpis()) {
            (PublicKeyAlgorithm::EdDSA, _) => true,
            (PublicKeyAlgorithm::ECDH, PublicKey::ECDH { curve, .. }) => *curve == Curve::Cv25519,
            _ => false,
        };
        if legacy {
            return Err(format!(
                "v6 key {} uses the v4-only legacy algorithm {} (RFC 9580 5.5.2)",
                key.fingerprint(),
                key.pk_algo()
            ));
        }
    }
    Ok(())
}

/// Every locked secret key of `cert` unlocked with `passphrase`.
fn unlock(cert: Cert, what: &str, passphrase: Option<&[u8]>) -> Result<Cert, KeyStoreError> {
    let locked: Vec<_> = cert
        .keys()
        .secret()
        .filter(|ka| !ka.key().has_unencrypted_secret())
        .map(|ka| (ka.primary(), ka.key().clone()))
        .collect();
    if locked.is_empty() {
        return Ok(cert);
    }
    let Some(passphrase) = passphrase else {
        return Err(KeyStoreError::PassphraseRequired {
            what: what.to_string(),
            kind: "a passphrase-protected OpenPGP secret key".into(),
        });
    };
    let password = Password::from(passphrase);
    let mut unlocked: Vec<Packet> = Vec::new();
    for (_, key) in &locked {
        if let Some(openpgp::packet::key::SecretKeyMaterial::Encrypted(e)) = key.optional_secret() {
            affordable(e.s2k()).map_err(|reason| malformed(what, reason))?;
        }
    }
    for (primary, key) in locked {
        let key = key
            .decrypt_secret(&password)
            .map_err(|_| malformed(what, "the passphrase does not unlock the secret key"))?;
        unlocked.push(if primary {
            Packet::SecretKey(key.role_into_primary())
        } else {
            Packet::SecretSubkey(key.role_into_subordinate())
        });
    }
    let (cert, _) = cert
        .insert_packets(unlocked)
        .map_err(|e| malformed(what, e))?;
    Ok(cert)
}

/// `tsk` (a transferable secret key, unlocked) with every secret locked under
/// `passphrase` (Sequoia's default S2K), for storage at rest.
pub(crate) fn lock(tsk: &[u8], passphrase: &[u8]) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    let what = "secret key";
    let cert = Cert::from_bytes(tsk).map_err(|e| malformed(what, e))?;
    let password = Password::from(passphrase);
    let mut locked: Vec<Packet> = Vec::new();
    for ka in cert.keys().secret() {
        if !ka.key().has_unencrypted_secret() {
            continue;
        }
        let key = ka
            .key()
            .clone()
            .encrypt_secret(&password)
            .map_err(|e| malformed(what, e))?;
        locked.push(if ka.primary() {
            Packet::SecretKey(key.role_into_primary())
        } else {
            Packet::SecretSubkey(key.role_into_subordinate())
        });
    }
    let (cert, _) = cert
        .insert_packets(locked)
        .map_err(|e| malformed(what, e))?;
    let bytes = cert.as_tsk().to_vec().map_err(|e| malformed(what, e))?;
    Ok(Zeroizing::new(bytes))
}

/// The secret key stored locked by [`lock`], unlocked with `passphrase`.
pub(crate) fn unlock_stored(
    locked: &[u8],
    passphrase: &[u8],
) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    let what = "stored secret key";
    let cert = Cert::from_bytes(locked).map_err(|e| malformed(what, e))?;
    let cert = unlock(cert, what, Some(passphrase)).map_err(|_| KeyStoreError::WrongPassphrase)?;
    let bytes = cert.as_tsk().to_vec().map_err(|e| malformed(what, e))?;
    Ok(Zeroizing::new(bytes))
}

/// Refuses a passphrase derivation whose cost a key file chooses beyond reason: Argon2
/// over 2 GiB of memory (RFC 9580 4.x recommends at most 2 GiB), more than 16 passes or
/// lanes. Without this, importing a hostile key could exhaust memory.
fn affordable(s2k: &openpgp::crypto::S2K) -> Result<(), String> {
    match s2k {
        openpgp::crypto::S2K::Argon2 { t, p, m, .. } if *m > 21 || *t > 16 || *p > 16 => {
            Err(format!(
                "the key's Argon2 passphrase derivation asks for 2^{m} KiB, {t} passes, {p} lanes: refused (at most 2 GiB, 16, 16)"
            ))
        }
        _ => Ok(()),
    }
}

/// The fingerprint as the store names files: lower-case hex.
pub(crate) fn fingerprint(cert: &Cert) -> String {
    cert.fingerprint().to_hex().to_ascii_lowercase()
}

/// The email addresses of `cert`'s User IDs that are valid under the standard policy
/// at `at` (self-signed, not revoked), lower case: the rule is
/// [`crate::identity::openpgp::addresses_at`].
pub(crate) fn emails_at(cert: &Cert, at: Option<SystemTime>) -> Vec<String> {
    let policy = StandardPolicy::new();
    super::user_ids::addresses_at(cert, &policy, at.unwrap_or_else(SystemTime::now))
}

/// The addresses of a certificate already validated under a policy at a time: SOP's
/// reading of a signer (at the signature's own time); mail uses
/// [`crate::identity::openpgp::signer_addresses`].
pub(crate) fn emails_of_valid(valid: &ValidCert<'_>) -> Vec<String> {
    let mut out: Vec<String> = valid
        .userids()
        .revoked(false)
        .filter_map(|u| {
            u.userid()
                .email()
                .ok()
                .flatten()
                .map(str::to_ascii_lowercase)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn algorithm(cert: &Cert) -> KeyAlgorithm {
    #[allow(deprecated)]
    match cert.primary_key().key().pk_algo() {
        PublicKeyAlgorithm::RSAEncryptSign | PublicKeyAlgorithm::RSASign => KeyAlgorithm::Rsa,
        PublicKeyAlgorithm::ECDSA => KeyAlgorithm::Ec,
        PublicKeyAlgorithm::EdDSA | PublicKeyAlgorithm::Ed25519 => KeyAlgorithm::Ed25519,
        _ => KeyAlgorithm::Other,
    }
}

/// How `key list` shows an OpenPGP certificate.
pub(crate) fn entry(cert: &Cert, has_secret: bool) -> KeyEntry {
    let policy = StandardPolicy::new();
    let valid = cert.with_policy(&policy, None).ok();
    let subject = valid
        .as_ref()
        .and_then(|v| v.primary_userid().ok())
        .map(|u| String::from_utf8_lossy(u.userid().value()).into_owned())
        .or_else(|| {
            cert.userids()
                .next()
                .map(|u| String::from_utf8_lossy(u.userid().value()).into_owned())
        });
    let not_after = valid
        .as_ref()
        .and_then(|v| v.primary_key().key_expiration_time())
        .map(|t| {
            time::OffsetDateTime::from(t)
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
        });
    KeyEntry {
        fingerprint: fingerprint(cert),
        kind: EntryKind::OpenPgpCertificate,
        algorithm: algorithm(cert),
        emails: emails_at(cert, None),
        subject,
        not_after,
        has_private_key: has_secret,
    }
}

/// Which OpenPGP generation a new key follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyProfile {
    /// A v4 Ed25519 primary with a Cv25519 encryption subkey, advertising SEIPDv1 only:
    /// the key GnuPG 2.2 and Sequoia 1 read and write to.
    #[default]
    Rfc4880,
    /// An RFC 9580 v6 Ed25519/X25519 key, advertising SEIPDv2 (AEAD).
    Rfc9580,
}

impl std::str::FromStr for KeyProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rfc4880" | "v4" => Ok(Self::Rfc4880),
            "rfc9580" | "v6" => Ok(Self::Rfc9580),
            other => Err(format!(
                "unknown OpenPGP profile `{other}` (rfc4880 or rfc9580)"
            )),
        }
    }
}

/// A new OpenPGP key for `email`: certification+signing primary, a signing subkey and
/// an encryption subkey, valid for three years. Returns the transferable secret key,
/// binary and unprotected (the caller stores it owner-only).
pub fn generate(
    email: &str,
    name: Option<&str>,
    profile: KeyProfile,
) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    generate_at(email, name, profile, std::time::SystemTime::now())
}

/// [`generate`], created at `at` (the conformance corpus judges its cases at a fixed
/// time).
pub(crate) fn generate_at(
    email: &str,
    name: Option<&str>,
    profile: KeyProfile,
    at: std::time::SystemTime,
) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    let userid = match name {
        Some(n) => UserID::from(format!("{n} <{email}>")),
        None => UserID::from(format!("<{email}>")),
    };
    let builder = CertBuilder::general_purpose(Some(userid))
        .set_cipher_suite(CipherSuite::Cv25519)
        .set_creation_time(at)
        .set_validity_period(std::time::Duration::from_secs(3 * 365 * 24 * 3600));
    let builder = match profile {
        KeyProfile::Rfc4880 => builder.set_features(Features::empty().set_seipdv1()),
        KeyProfile::Rfc9580 => builder.set_profile(openpgp::Profile::RFC9580),
    }
    .map_err(|e| malformed("new OpenPGP key", e))?;
    let (cert, _revocation) = builder
        .generate()
        .map_err(|e| malformed("new OpenPGP key", e))?;
    let tsk = cert
        .as_tsk()
        .to_vec()
        .map_err(|e| malformed("new OpenPGP key", e))?;
    Ok(Zeroizing::new(tsk))
}

/// Reads one certificate (public or secret) that this crate serialised itself.
pub(crate) fn parse_stored(bytes: &[u8]) -> Option<Cert> {
    Cert::from_bytes(bytes).ok().filter(|c| conforms(c).is_ok())
}

/// `certs` with the copies of one certificate (one primary key) merged into one, in
/// the order each first appears, each merged certificate canonicalised once: its
/// primary key (a secret copy's when there is one) and its own signatures, then each
/// copy's components with their signatures, and after each component what `after`
/// gives for it (given the primary key and the component). Sequoia then checks every
/// signature where it stands, one check each however many copies an input holds;
/// merging copies one by one re-reads the growing certificate each time.
pub(crate) fn merge_copies(
    certs: Vec<Cert>,
    mut after: impl FnMut(&Packet, &Packet) -> Vec<Packet>,
) -> openpgp::Result<Vec<Cert>> {
    use std::collections::HashMap;
    let mut order = Vec::new();
    let mut copies: HashMap<openpgp::Fingerprint, Vec<Cert>> = HashMap::new();
    for cert in certs {
        let copy = copies.entry(cert.fingerprint()).or_default();
        if copy.is_empty() {
            order.push(cert.fingerprint());
        }
        copy.push(cert);
    }
    let mut out = Vec::with_capacity(order.len());
    for fingerprint in order {
        let copy = copies.remove(&fingerprint).unwrap_or_default();
        let secret = copy
            .iter()
            .position(|c| c.primary_key().key().has_secret())
            .unwrap_or(0);
        let (mut first, mut primary) = (None, None);
        let mut head = Vec::new();
        let mut components = Vec::new();
        let mut added = false;
        let single = copy.len() == 1;
        let mut unchanged = None;
        for (i, cert) in copy.into_iter().enumerate() {
            if single {
                unchanged = Some(cert.clone());
            }
            let mut packets = cert.into_tsk().into_packets();
            let key = packets.next();
            if i == 0 {
                first = key.clone();
            }
            if i == secret {
                primary = key;
            }
            let mut own = true;
            for p in packets {
                own &= matches!(p, Packet::Signature(_));
                if own {
                    head.push(p);
                    continue;
                }
                let theirs = match (&first, &p) {
                    (_, Packet::Signature(_)) | (None, _) => Vec::new(),
                    (Some(key), component) => after(key, component),
                };
                added |= !theirs.is_empty();
                components.push(p);
                components.extend(theirs);
            }
        }
        match unchanged {
            Some(cert) if !added => out.push(cert),
            _ => out.push(Cert::from_packets(
                primary.into_iter().chain(head).chain(components),
            )?),
        }
    }
    Ok(out)
}

/// `old` and `new` copies of one certificate merged (binary, public parts), or `None`
/// when either does not parse or they are different certificates.
pub(crate) fn merge(old: &[u8], new: &[u8]) -> Option<Vec<u8>> {
    let old = Cert::from_bytes(old).ok()?;
    let new = Cert::from_bytes(new).ok()?;
    old.merge_public(new).ok()?.to_vec().ok()
}

/// The armored certificate (public parts only) of a transferable secret key, to give to
/// peers.
pub fn armored_certificate(tsk: &[u8]) -> Result<Vec<u8>, KeyStoreError> {
    let cert = Cert::from_bytes(tsk).map_err(|e| malformed("OpenPGP key", e))?;
    cert.strip_secret_key_material()
        .armored()
        .to_vec()
        .map_err(|e| malformed("OpenPGP key", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keystore::openpgp_placement::tests::{bob, signer};
    use openpgp::packet::signature::SignatureBuilder;
    use openpgp::types::SignatureType;

    #[test]
    fn fail_cost_copies_in_one_input_are_merged_once() {
        // Each copy brings a binding of its own that fits where it stands: stored one
        // by one, each would re-read the growing certificate.
        let bob = bob();
        let mut signer = signer(&bob);
        let uid = bob.userids().next().unwrap().userid().clone();
        let mut input = Vec::new();
        for i in 0..50u64 {
            let at =
                bob.primary_key().key().creation_time() + std::time::Duration::from_secs(1 + i);
            let sig = SignatureBuilder::new(SignatureType::PositiveCertification)
                .set_signature_creation_time(at)
                .unwrap()
                .sign_userid_binding(&mut signer, bob.primary_key().key(), &uid)
                .unwrap();
            let copy = bob.clone().insert_packets(Some(sig)).unwrap().0;
            input.extend(copy.strip_secret_key_material().to_vec().unwrap());
        }
        let parsed = read_certs_at(&input, "test", None, None).unwrap();
        assert_eq!(parsed.len(), 1);
        let cert = Cert::from_bytes(&parsed[0].public).unwrap();
        assert_eq!(cert.fingerprint(), bob.fingerprint());
        let bindings = cert.userids().next().unwrap().self_signatures().count();
        assert_eq!(bindings, 51);
    }

    #[test]
    fn a_public_and_a_secret_copy_merge_into_the_secret_key() {
        let bob = bob();
        let public = bob.clone().strip_secret_key_material().to_vec().unwrap();
        let secret = bob.as_tsk().to_vec().unwrap();
        for input in [
            [public.clone(), secret.clone()].concat(),
            [secret, public].concat(),
        ] {
            let parsed = read_certs_at(&input, "test", None, None).unwrap();
            assert_eq!(parsed.len(), 1);
            let tsk = Cert::from_bytes(&parsed[0].secret.as_ref().unwrap()[..]).unwrap();
            assert_eq!(tsk.keys().secret().count(), bob.keys().count());
            assert_eq!(
                tsk.strip_secret_key_material(),
                bob.clone().strip_secret_key_material()
            );
        }
    }
}
