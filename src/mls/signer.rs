//! Our MLS signature key as openmls' [`Signer`], its Ed25519 signing key derived once.
//!
//! `openmls_basic_credential::SignatureKeyPair` keeps the raw private key and derives
//! the Ed25519 signing key from it on every signature: a SHA-512 of the seed and a
//! base-point multiplication for the public key, which a sixth of a 2 KiB `Mls::seal`
//! went to (`perf`, BENCHMARKS.md). The identity is read once per process
//! (`Mls::signer`), so the derived key is kept beside the pair and signs instead.
//! Ed25519 signatures are deterministic: the same key signs the same bytes either way,
//! so the kept key signs with AWS-LC (already our S/MIME and TLS cryptography), which
//! takes 18 µs for a 3 KB payload where `ed25519-dalek` takes 28 µs (BENCHMARKS.md).
//! Other schemes (none that our cipher suite uses) sign through the pair as before.

use openmls::prelude::tls_codec::Serialize as _;
use openmls::prelude::SignatureScheme;
use openmls_basic_credential::SignatureKeyPair;
use openmls_traits::signatures::{Signer as MlsSigner, SignerError};

/// A signature key pair with its Ed25519 signing key derived, as AWS-LC's key (whose
/// memory AWS-LC clears when it frees it).
pub(super) struct Signer {
    pair: SignatureKeyPair,
    ed25519: Option<aws_lc_rs::signature::Ed25519KeyPair>,
}

impl Signer {
    pub(super) fn new(pair: SignatureKeyPair) -> Self {
        let ed25519 = match pair.signature_scheme() {
            SignatureScheme::ED25519 => derive_ed25519(&pair),
            _ => None,
        };
        Signer { pair, ed25519 }
    }

    /// The pair as openmls stores it.
    pub(super) fn pair(&self) -> &SignatureKeyPair {
        &self.pair
    }

    /// The Ed25519 private key (the seed), if this is an Ed25519 signer: for the
    /// conformance corpus's portable members.
    pub(super) fn ed25519_seed(&self) -> Option<zeroize::Zeroizing<Vec<u8>>> {
        self.ed25519.as_ref()?;
        Some(zeroize::Zeroizing::new(seed_of(&self.pair)?.to_vec()))
    }
}

/// The Ed25519 signing key of `pair`, if its private key reads as one whose public
/// key is the pair's own.
fn derive_ed25519(pair: &SignatureKeyPair) -> Option<aws_lc_rs::signature::Ed25519KeyPair> {
    let seed = seed_of(pair)?;
    // A pair whose halves disagree signs through the pair, as it would have.
    aws_lc_rs::signature::Ed25519KeyPair::from_seed_and_public_key(&*seed, pair.public()).ok()
}

/// The private key of `pair` if it is 32 bytes (an Ed25519 seed). It is reachable only
/// through the pair's serialisations; the TLS one is written into a buffer of its exact
/// length (no copy left behind by growth) that is zeroized on drop: `private` first, a
/// variable-length vector (a one-byte length, 32, for an Ed25519 seed).
fn seed_of(pair: &SignatureKeyPair) -> Option<zeroize::Zeroizing<[u8; 32]>> {
    let bytes = zeroize::Zeroizing::new(pair.tls_serialize_detached().ok()?);
    match bytes.split_first() {
        Some((32, rest)) => Some(zeroize::Zeroizing::new(rest.get(..32)?.try_into().ok()?)),
        _ => None,
    }
}

impl MlsSigner for Signer {
    fn sign(&self, payload: &[u8]) -> Result<Vec<u8>, SignerError> {
        match &self.ed25519 {
            Some(key) => key
                .try_sign(payload)
                .map(|s| s.as_ref().to_vec())
                .map_err(|_| SignerError::SigningError),
            None => self.pair.sign(payload),
        }
    }

    fn signature_scheme(&self) -> SignatureScheme {
        self.pair.signature_scheme()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The private key of `pair`, from its serde form (`from_raw` takes it so).
    fn serde_seed(pair: &SignatureKeyPair) -> Vec<u8> {
        serde_json::from_value(serde_json::to_value(pair).unwrap()["private"].clone()).unwrap()
    }

    /// The derived key signs exactly as the pair does; a pair whose private key is
    /// not its public key's, and a P-256 pair, sign through the pair.
    #[test]
    fn derived_key_signs_as_the_pair() {
        let pair = SignatureKeyPair::new(SignatureScheme::ED25519).unwrap();
        let signer = Signer::new(SignatureKeyPair::from_raw(
            SignatureScheme::ED25519,
            serde_seed(&pair),
            pair.public().to_vec(),
        ));
        assert!(signer.ed25519.is_some());
        assert_eq!(signer.ed25519_seed().unwrap().as_slice(), serde_seed(&pair));
        for payload in [&b""[..], b"x", &[7u8; 3000]] {
            assert_eq!(signer.sign(payload).unwrap(), pair.sign(payload).unwrap());
        }

        let other = SignatureKeyPair::new(SignatureScheme::ED25519).unwrap();
        let halves = || {
            SignatureKeyPair::from_raw(
                SignatureScheme::ED25519,
                serde_seed(&pair),
                other.public().to_vec(),
            )
        };
        let mismatched = Signer::new(halves());
        assert!(mismatched.ed25519.is_none());
        assert_eq!(mismatched.sign(b"m").unwrap(), halves().sign(b"m").unwrap());

        let p256 =
            Signer::new(SignatureKeyPair::new(SignatureScheme::ECDSA_SECP256R1_SHA256).unwrap());
        assert!(p256.ed25519.is_none());
        assert_eq!(
            p256.signature_scheme(),
            SignatureScheme::ECDSA_SECP256R1_SHA256
        );
        assert!(!p256.sign(b"m").unwrap().is_empty());
    }
}
