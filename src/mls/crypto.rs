//! openmls' cryptography and randomness: RustCrypto's (`openmls_rust_crypto`), but
//! inside the conformance corpus's seeded scope ([`crate::entropy`]), where every
//! random value comes from the seed.
//!
//! `openmls_rust_crypto` draws from two generators no caller reaches: its provider's
//! own ChaCha20, seeded from the operating system when the provider is made (leaf and
//! path secrets, reuse guards, group ids, init keys), and a fresh one inside each HPKE
//! seal (the ephemeral key of every Welcome and every UpdatePath). So the conformance
//! corpus's MLS cases came out different on every run, where issue #21 asks for the
//! same bytes from the same seed. Here, outside the scope, the first is still
//! RustCrypto's and the second is keyed by the operating system, as hpke-rs' own is;
//! inside it, both draw from the seeded stream, and a seal's ephemeral key from a key
//! the provider took from the scope and the seal's own inputs, because openmls seals
//! on rayon's threads ([`Crypto::seeded`]).
//!
//! Nothing is hand-written: HPKE is still hpke-rs over RustCrypto (its
//! [`HpkeCrypto`] is generic over where its generator comes from, and
//! [`EntropyHpke`] only changes that), and every other operation is
//! `openmls_rust_crypto`'s, called through, but for one: an Ed25519 verification
//! decompresses the public key and the signature's R (each a field exponentiation;
//! together 7.5% of the instructions of opening a 2 KiB application message), so the
//! keys are kept decompressed ([`Crypto::ed25519_key`]) and verified by
//! [`super::ed25519`], which decides as RustCrypto's `verify_strict` without
//! decompressing R; the errors are RustCrypto's. And an AEAD operation on twelve
//! bytes, the size of an MLS `SenderData`, is shown to a watch open on this thread
//! ([`super::sender_data::watch`]): so the receiver reads the sender data openmls
//! opened instead of opening it a second time.

use openmls::prelude::tls_codec::SecretVLBytes;
use openmls_rust_crypto::RustCrypto;
use openmls_traits::crypto::OpenMlsCrypto;
use openmls_traits::random::OpenMlsRand;
use openmls_traits::types::{
    AeadType, Ciphersuite, CryptoError, ExporterSecret, HashType, HpkeAeadType, HpkeCiphertext,
    HpkeConfig, HpkeKdfType, HpkeKemType, HpkeKeyPair, SignatureScheme,
};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use hpke_rs::{Hpke, HpkeError, Mode};
use hpke_rs_crypto::error::Error as HpkeCryptoError;
use hpke_rs_crypto::types::{AeadAlgorithm, KdfAlgorithm, KemAlgorithm};
use hpke_rs_crypto::{HpkeCrypto, HpkeTestRng};
use hpke_rs_rust_crypto::HpkeRustCrypto;

use crate::entropy::{self, NoRandomness};

/// The provider's cryptography and randomness (see the module doc).
pub(crate) struct Crypto {
    rust_crypto: RustCrypto,
    /// Inside the corpus's seeded scope when the provider was made: the key its HPKE
    /// seals draw their ephemeral keys by. openmls seals an UpdatePath's path secrets
    /// in parallel on rayon's threads, which the thread's seeded scope does not
    /// reach, and in no fixed order ([`entropy::Derived`]).
    seeded: Option<entropy::Derived>,
    /// Ed25519 public keys decompressed, by their bytes: a group's members sign every
    /// message with the same few keys.
    ed25519_keys:
        std::sync::Mutex<std::collections::HashMap<[u8; 32], super::ed25519::VerifyingKey>>,
}

/// Decompressed Ed25519 keys kept at most (the map is emptied when full: keys are
/// public, and a peer who signs with a new one each time only keeps it busy).
const MAX_ED25519_KEYS: usize = 1024;

impl Crypto {
    /// RustCrypto, and the seeded scope's key if this thread is in one.
    pub(crate) fn new() -> Crypto {
        Crypto {
            rust_crypto: RustCrypto::default(),
            seeded: entropy::Derived::draw(),
            ed25519_keys: Default::default(),
        }
    }

    /// The Ed25519 key `pk`, decompressed once: a key that is not 32 bytes or does not
    /// decompress is the library error RustCrypto gives for it.
    fn ed25519_key(&self, pk: &[u8]) -> Result<super::ed25519::VerifyingKey, CryptoError> {
        let bytes: [u8; 32] = pk.try_into().map_err(|_| CryptoError::CryptoLibraryError)?;
        let kept = self
            .ed25519_keys
            .lock()
            .ok()
            .and_then(|m| m.get(&bytes).copied());
        if let Some(key) = kept {
            return Ok(key);
        }
        let key = super::ed25519::VerifyingKey::from_bytes(&bytes)
            .ok_or(CryptoError::CryptoLibraryError)?;
        if let Ok(mut map) = self.ed25519_keys.lock() {
            if map.len() >= MAX_ED25519_KEYS {
                map.clear();
            }
            map.insert(bytes, key);
        }
        Ok(key)
    }

    /// On this thread, for the seal of `inputs`, the scope hpke-rs' generator is keyed
    /// from ([`EntropyHpke::prng`]): seeded from [`Crypto::seeded`] and the inputs
    /// inside the corpus, keyed by the operating system everywhere else, where its
    /// failure is this error rather than a panic inside hpke-rs.
    fn seal_scope(&self, inputs: &[&[u8]]) -> Result<entropy::Seeded, CryptoError> {
        match &self.seeded {
            Some(key) => Ok(key.scope(inputs)),
            None => entropy::Seeded::from_os().map_err(|_| CryptoError::InsufficientRandomness),
        }
    }
}

impl OpenMlsRand for Crypto {
    type Error = NoRandomness;

    // Outside the seeded scope, RustCrypto's own generator (a ChaCha20 the operating
    // system keyed), as before: a system call per draw costs a seal about 5%.
    fn random_array<const N: usize>(&self) -> Result<[u8; N], Self::Error> {
        let mut out = [0u8; N];
        match entropy::with_seeded(|rng| rng.fill_bytes(&mut out)) {
            Some(()) => Ok(out),
            None => self.rust_crypto.random_array().map_err(|_| NoRandomness),
        }
    }

    fn random_vec(&self, len: usize) -> Result<Vec<u8>, Self::Error> {
        let mut out = vec![0u8; len];
        match entropy::with_seeded(|rng| rng.fill_bytes(&mut out)) {
            Some(()) => Ok(out),
            None => self.rust_crypto.random_vec(len).map_err(|_| NoRandomness),
        }
    }
}

/// hpke-rs in base mode for an MLS cipher suite's HPKE algorithms, its ephemeral keys
/// drawn from `_scope`, which must stay open while it is used: taking it here is what
/// makes every generator hpke-rs asks for find one ([`EntropyHpke::prng`]).
fn hpke(config: &HpkeConfig, _scope: &entropy::Seeded) -> Result<Hpke<EntropyHpke>, CryptoError> {
    let kem = match config.0 {
        HpkeKemType::DhKemP256 => KemAlgorithm::DhKemP256,
        HpkeKemType::DhKemP384 => KemAlgorithm::DhKemP384,
        HpkeKemType::DhKemP521 => KemAlgorithm::DhKemP521,
        HpkeKemType::DhKem25519 => KemAlgorithm::DhKem25519,
        HpkeKemType::DhKem448 => KemAlgorithm::DhKem448,
        // The post-quantum KEMs of openmls' draft feature (`EntropyHpke::supports_kem`).
        #[allow(unreachable_patterns)]
        _ => return Err(CryptoError::UnsupportedCiphersuite),
    };
    let kdf = match config.1 {
        HpkeKdfType::HkdfSha256 => KdfAlgorithm::HkdfSha256,
        HpkeKdfType::HkdfSha384 => KdfAlgorithm::HkdfSha384,
        HpkeKdfType::HkdfSha512 => KdfAlgorithm::HkdfSha512,
    };
    let aead = match config.2 {
        HpkeAeadType::AesGcm128 => AeadAlgorithm::Aes128Gcm,
        HpkeAeadType::AesGcm256 => AeadAlgorithm::Aes256Gcm,
        HpkeAeadType::ChaCha20Poly1305 => AeadAlgorithm::ChaCha20Poly1305,
        HpkeAeadType::Export => AeadAlgorithm::HpkeExport,
    };
    Ok(Hpke::new(Mode::Base, kem, kdf, aead))
}

impl OpenMlsCrypto for Crypto {
    fn supports(&self, ciphersuite: Ciphersuite) -> Result<(), CryptoError> {
        self.rust_crypto.supports(ciphersuite)
    }

    fn supported_ciphersuites(&self) -> Vec<Ciphersuite> {
        self.rust_crypto.supported_ciphersuites()
    }

    fn hkdf_extract(
        &self,
        hash_type: HashType,
        salt: &[u8],
        ikm: &[u8],
    ) -> Result<SecretVLBytes, CryptoError> {
        self.rust_crypto.hkdf_extract(hash_type, salt, ikm)
    }

    fn hmac(
        &self,
        hash_type: HashType,
        key: &[u8],
        message: &[u8],
    ) -> Result<SecretVLBytes, CryptoError> {
        self.rust_crypto.hmac(hash_type, key, message)
    }

    fn hkdf_expand(
        &self,
        hash_type: HashType,
        prk: &[u8],
        info: &[u8],
        okm_len: usize,
    ) -> Result<SecretVLBytes, CryptoError> {
        self.rust_crypto.hkdf_expand(hash_type, prk, info, okm_len)
    }

    fn hash(&self, hash_type: HashType, data: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.rust_crypto.hash(hash_type, data)
    }

    fn aead_encrypt(
        &self,
        alg: AeadType,
        key: &[u8],
        data: &[u8],
        nonce: &[u8],
        aad: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        let sealed = self.rust_crypto.aead_encrypt(alg, key, data, nonce, aad)?;
        super::sender_data::note(aad, &sealed, data);
        Ok(sealed)
    }

    fn aead_decrypt(
        &self,
        alg: AeadType,
        key: &[u8],
        ct_tag: &[u8],
        nonce: &[u8],
        aad: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        let plain = self
            .rust_crypto
            .aead_decrypt(alg, key, ct_tag, nonce, aad)?;
        super::sender_data::note(aad, ct_tag, &plain);
        Ok(plain)
    }

    /// Not on our path: MLS signature keys are made from our own randomness and
    /// imported (`SignatureKeyPair::from_raw`), so this is RustCrypto's as it is.
    fn signature_key_gen(&self, alg: SignatureScheme) -> Result<(Vec<u8>, Vec<u8>), CryptoError> {
        self.rust_crypto.signature_key_gen(alg)
    }

    fn verify_signature(
        &self,
        alg: SignatureScheme,
        data: &[u8],
        pk: &[u8],
        signature: &[u8],
    ) -> Result<(), CryptoError> {
        if alg != SignatureScheme::ED25519 {
            return self.rust_crypto.verify_signature(alg, data, pk, signature);
        }
        // RustCrypto's Ed25519 branch, the key kept: the same order of checks, the
        // same errors, strict verification's verdicts.
        let key = self.ed25519_key(pk)?;
        let signature: [u8; 64] = signature
            .try_into()
            .map_err(|_| CryptoError::CryptoLibraryError)?;
        if key.verify_strict(data, &signature) {
            Ok(())
        } else {
            Err(CryptoError::InvalidSignature)
        }
    }

    fn sign(&self, alg: SignatureScheme, data: &[u8], key: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.rust_crypto.sign(alg, data, key)
    }

    fn hpke_seal(
        &self,
        config: HpkeConfig,
        pk_r: &[u8],
        info: &[u8],
        aad: &[u8],
        ptxt: &[u8],
    ) -> Result<HpkeCiphertext, CryptoError> {
        let scope = self.seal_scope(&[b"seal", pk_r, info, aad, ptxt])?;
        let (kem_output, ciphertext) = hpke(&config, &scope)?
            .seal(&pk_r.into(), info, aad, ptxt, None, None, None)
            .map_err(|e| match e {
                HpkeError::InvalidInput => CryptoError::InvalidLength,
                HpkeError::InsufficientRandomness => CryptoError::InsufficientRandomness,
                _ => CryptoError::CryptoLibraryError,
            })?;
        Ok(HpkeCiphertext {
            kem_output: kem_output.into(),
            ciphertext: ciphertext.into(),
        })
    }

    fn hpke_open(
        &self,
        config: HpkeConfig,
        input: &HpkeCiphertext,
        sk_r: &[u8],
        info: &[u8],
        aad: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        self.rust_crypto.hpke_open(config, input, sk_r, info, aad)
    }

    fn hpke_setup_sender_and_export(
        &self,
        config: HpkeConfig,
        pk_r: &[u8],
        info: &[u8],
        exporter_context: &[u8],
        exporter_length: usize,
    ) -> Result<(Vec<u8>, ExporterSecret), CryptoError> {
        let scope = self.seal_scope(&[b"export", pk_r, info, exporter_context])?;
        let (kem_output, context) = hpke(&config, &scope)?
            .setup_sender(&pk_r.into(), info, None, None, None)
            .map_err(|_| CryptoError::SenderSetupError)?;
        let exported = context
            .export(exporter_context, exporter_length)
            .map_err(|_| CryptoError::ExporterError)?;
        Ok((kem_output, exported.into()))
    }

    fn hpke_setup_receiver_and_export(
        &self,
        config: HpkeConfig,
        enc: &[u8],
        sk_r: &[u8],
        info: &[u8],
        exporter_context: &[u8],
        exporter_length: usize,
    ) -> Result<ExporterSecret, CryptoError> {
        self.rust_crypto.hpke_setup_receiver_and_export(
            config,
            enc,
            sk_r,
            info,
            exporter_context,
            exporter_length,
        )
    }

    fn derive_hpke_keypair(
        &self,
        config: HpkeConfig,
        ikm: &[u8],
    ) -> Result<HpkeKeyPair, CryptoError> {
        self.rust_crypto.derive_hpke_keypair(config, ikm)
    }
}

/// hpke-rs' RustCrypto backend with one change: its generator ([`EntropyPrng`]).
#[derive(Debug)]
struct EntropyHpke;

/// A ChaCha20 keyed, when hpke-rs asks for a generator, from this thread's
/// [`crate::entropy`] scope: the corpus's seeded stream, or one keyed by the operating
/// system for the seal ([`Crypto::seal_scope`]).
struct EntropyPrng {
    rng: ChaCha20Rng,
    /// Whether a scope or the operating system keyed it ([`EntropyHpke::prng`]).
    keyed: bool,
}

impl zeroize::Zeroize for EntropyPrng {
    fn zeroize(&mut self) {
        // rand_chacha's state is not reachable: rekeying with zeros overwrites it.
        self.rng = ChaCha20Rng::from_seed([0; 32]);
    }
}

impl Drop for EntropyPrng {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(self);
    }
}

impl hpke_rs_crypto::TryRng for EntropyPrng {
    type Error = core::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.rng.next_u32())
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.rng.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.rng.fill_bytes(dst);
        Ok(())
    }
}

impl hpke_rs_crypto::TryCryptoRng for EntropyPrng {}

impl HpkeTestRng for EntropyPrng {
    type Error = NoRandomness;

    /// hpke-rs reads "known" bytes only under its `hpke-test-prng` feature, which this
    /// build never turns on; were it on, these are the generator's bytes all the same.
    fn try_fill_test_bytes(&mut self, dest: &mut [u8]) -> Result<(), Self::Error> {
        if !self.keyed {
            return Err(NoRandomness);
        }
        self.rng.fill_bytes(dest);
        Ok(())
    }

    /// Rekeys from `seed` (hashed to a ChaCha20 key); hpke-rs calls it only in its
    /// own tests.
    fn seed(&mut self, seed: &[u8]) {
        use sha2::Digest;
        self.rng = ChaCha20Rng::from_seed(sha2::Sha256::digest(seed).into());
        self.keyed = true;
    }
}

impl HpkeCrypto for EntropyHpke {
    type HpkePrng = EntropyPrng;

    fn name() -> String {
        "RustCrypto, mailseal's randomness".into()
    }

    fn supports_kdf(alg: KdfAlgorithm) -> Result<(), HpkeCryptoError> {
        HpkeRustCrypto::supports_kdf(alg)
    }

    fn supports_kem(alg: KemAlgorithm) -> Result<(), HpkeCryptoError> {
        match alg {
            // The KEMs whose encapsulation draws through `Hpke::random` (RFC 9180
            // DeriveKeyPair over our bytes); the post-quantum ones would take
            // RustCrypto's own generator type, which this one is not.
            KemAlgorithm::DhKem25519
            | KemAlgorithm::DhKemP256
            | KemAlgorithm::DhKemP384
            | KemAlgorithm::DhKemK256 => HpkeRustCrypto::supports_kem(alg),
            _ => Err(HpkeCryptoError::UnknownKemAlgorithm),
        }
    }

    fn supports_aead(alg: AeadAlgorithm) -> Result<(), HpkeCryptoError> {
        HpkeRustCrypto::supports_aead(alg)
    }

    /// Keyed from this thread's scope. The trait leaves no way to fail (hpke-rs' own
    /// panics when the operating system gives nothing), so the failure is moved to
    /// where it can be returned: every `Hpke<EntropyHpke>` is made by [`hpke`], which
    /// takes an open scope, made by [`Crypto::seal_scope`], which returns the error.
    /// Outside a scope (no path in this crate) the generator is keyed by the operating
    /// system, or, if even that fails, refuses to make keys ([`Self::kem_key_gen`])
    /// and is all zeros.
    fn prng() -> Self::HpkePrng {
        let mut key = zeroize::Zeroizing::new([0u8; 32]);
        let keyed = entropy::with_seeded(|rng| rng.fill_bytes(&mut key[..])).is_some()
            || getrandom::fill(&mut key[..]).is_ok();
        EntropyPrng {
            rng: ChaCha20Rng::from_seed(*key),
            keyed,
        }
    }

    fn kdf_extract(alg: KdfAlgorithm, salt: &[u8], ikm: &[u8]) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::kdf_extract(alg, salt, ikm)
    }

    fn kdf_expand(
        alg: KdfAlgorithm,
        prk: &[u8],
        info: &[u8],
        output_size: usize,
    ) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::kdf_expand(alg, prk, info, output_size)
    }

    fn dh(alg: KemAlgorithm, pk: &[u8], sk: &[u8]) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::dh(alg, pk, sk)
    }

    fn secret_to_public(alg: KemAlgorithm, sk: &[u8]) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::secret_to_public(alg, sk)
    }

    /// A fresh key pair: a secret drawn from `prng`, drawn again while it is not a
    /// valid scalar (the P-curves' rejection sampling; any 32 bytes are an X25519
    /// secret), and its public key. hpke-rs calls it only for
    /// `Hpke::generate_key_pair`, which openmls does not use (it derives).
    fn kem_key_gen(
        alg: KemAlgorithm,
        prng: &mut Self::HpkePrng,
    ) -> Result<(Vec<u8>, Vec<u8>), HpkeCryptoError> {
        Self::supports_kem(alg)?;
        if !prng.keyed {
            return Err(HpkeCryptoError::InsufficientRandomness);
        }
        for _ in 0..64 {
            let mut sk = zeroize::Zeroizing::new(vec![0u8; alg.private_key_len()]);
            prng.rng.fill_bytes(&mut sk);
            let valid = match alg {
                // Clamped where it is used (RFC 7748); RustCrypto validates P-curves only.
                KemAlgorithm::DhKem25519 => Ok(sk.to_vec()),
                _ => HpkeRustCrypto::dh_validate_sk(alg, &sk),
            };
            if let Ok(sk) = valid {
                let pk = HpkeRustCrypto::secret_to_public(alg, &sk)?;
                return Ok((pk, sk));
            }
        }
        Err(HpkeCryptoError::InsufficientRandomness)
    }

    fn kem_key_gen_derand(
        alg: KemAlgorithm,
        seed: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>), HpkeCryptoError> {
        HpkeRustCrypto::kem_key_gen_derand(alg, seed)
    }

    /// The post-quantum KEMs' encapsulation: not supported ([`Self::supports_kem`]);
    /// the DH KEMs encapsulate in hpke-rs itself.
    fn kem_encaps(
        _alg: KemAlgorithm,
        _pk_r: &[u8],
        _prng: &mut Self::HpkePrng,
    ) -> Result<(Vec<u8>, Vec<u8>), HpkeCryptoError> {
        Err(HpkeCryptoError::UnsupportedKemOperation)
    }

    fn kem_decaps(alg: KemAlgorithm, ct: &[u8], sk_r: &[u8]) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::kem_decaps(alg, ct, sk_r)
    }

    fn dh_validate_sk(alg: KemAlgorithm, sk: &[u8]) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::dh_validate_sk(alg, sk)
    }

    fn aead_seal(
        alg: AeadAlgorithm,
        key: &[u8],
        nonce: &[u8],
        aad: &[u8],
        msg: &[u8],
    ) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::aead_seal(alg, key, nonce, aad, msg)
    }

    fn aead_open(
        alg: AeadAlgorithm,
        key: &[u8],
        nonce: &[u8],
        aad: &[u8],
        msg: &[u8],
    ) -> Result<Vec<u8>, HpkeCryptoError> {
        HpkeRustCrypto::aead_open(alg, key, nonce, aad, msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmls_traits::types::Ciphersuite;

    const SUITE: Ciphersuite = crate::mls::CIPHERSUITE;

    fn receiver() -> HpkeKeyPair {
        RustCrypto::default()
            .derive_hpke_keypair(SUITE.hpke_config(), &[7u8; 32])
            .unwrap()
    }

    fn seal(crypto: &Crypto, pk: &[u8], text: &[u8]) -> HpkeCiphertext {
        crypto
            .hpke_seal(SUITE.hpke_config(), pk, b"info", b"aad", text)
            .unwrap()
    }

    fn open(sk: &[u8], ct: &HpkeCiphertext) -> Vec<u8> {
        RustCrypto::default()
            .hpke_open(SUITE.hpke_config(), ct, sk, b"info", b"aad")
            .unwrap()
    }

    /// Ed25519 verification with the keys kept decompressed gives RustCrypto's
    /// verdict and error on every case, the first time and from the kept key; other
    /// schemes go through.
    #[test]
    fn ed25519_verification_with_kept_keys_is_rust_cryptos() {
        use ed25519_dalek::Signer as _;
        let (ours, theirs) = (Crypto::new(), RustCrypto::default());
        let key = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]);
        let pk = key.verifying_key().to_bytes();
        let sig = key.sign(b"data").to_bytes();
        let mut tampered = sig;
        tampered[5] ^= 1;
        // A 32-byte string that is no point, and the identity point (small order,
        // which strict verification refuses).
        let off_curve = (2u8..=255)
            .map(|i| [i; 32])
            .find(|b| ed25519_dalek::VerifyingKey::from_bytes(b).is_err())
            .unwrap();
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let cases: Vec<(&[u8], &[u8], &[u8])> = vec![
            (&pk, b"data", &sig),
            (&pk, b"data", &sig),
            (&pk, b"other", &sig),
            (&pk, b"data", &tampered),
            (&pk, b"data", &sig[..63]),
            (&pk[..31], b"data", &sig),
            (&off_curve, b"data", &sig),
            (&identity, b"data", &sig),
            (&identity, b"data", &[0u8; 64]),
        ];
        let mut verdicts = Vec::new();
        for (pk, data, sig) in cases {
            let want = theirs.verify_signature(SignatureScheme::ED25519, data, pk, sig);
            verdicts.push(want);
            for _ in 0..2 {
                assert_eq!(
                    ours.verify_signature(SignatureScheme::ED25519, data, pk, sig),
                    want
                );
            }
        }
        for expected in [
            Ok(()),
            Err(CryptoError::InvalidSignature),
            Err(CryptoError::CryptoLibraryError),
        ] {
            assert!(verdicts.contains(&expected), "{expected:?} among the cases");
        }
        let p256 = theirs
            .signature_key_gen(SignatureScheme::ECDSA_SECP256R1_SHA256)
            .unwrap();
        let signed = theirs
            .sign(SignatureScheme::ECDSA_SECP256R1_SHA256, b"data", &p256.0)
            .unwrap();
        for data in [&b"data"[..], b"other"] {
            assert_eq!(
                ours.verify_signature(
                    SignatureScheme::ECDSA_SECP256R1_SHA256,
                    data,
                    &p256.1,
                    &signed
                ),
                theirs.verify_signature(
                    SignatureScheme::ECDSA_SECP256R1_SHA256,
                    data,
                    &p256.1,
                    &signed
                )
            );
        }
    }

    #[test]
    fn outside_the_corpus_every_seal_is_fresh_and_opens_with_openmls_rust_crypto() {
        let crypto = Crypto::new();
        assert!(crypto.seeded.is_none(), "no seeded key outside the scope");
        let keys = receiver();
        let (a, b) = (
            seal(&crypto, keys.public.as_slice(), b"path secret"),
            seal(&crypto, keys.public.as_slice(), b"path secret"),
        );
        assert_ne!(
            a.kem_output, b.kem_output,
            "a fresh ephemeral key each time"
        );
        assert_ne!(a.ciphertext, b.ciphertext);
        assert_eq!(open(&keys.private[..], &a), b"path secret");
        assert_eq!(open(&keys.private[..], &b), b"path secret");
        let drawn: [u8; 16] = crypto.random_array().unwrap();
        assert_ne!(drawn, crypto.random_array::<16>().unwrap());
    }

    #[test]
    fn inside_the_corpus_scope_a_seal_repeats_on_any_thread_and_still_opens() {
        let keys = receiver();
        let (crypto, random) = {
            let _s = entropy::Seeded::new(5, "test");
            let crypto = Crypto::new();
            let random: [u8; 16] = crypto.random_array().unwrap();
            (crypto, random)
        };
        let again = {
            let _s = entropy::Seeded::new(5, "test");
            let again = Crypto::new();
            assert_eq!(random, again.random_array::<16>().unwrap());
            again
        };
        let here = seal(&crypto, keys.public.as_slice(), b"path secret");
        // As openmls seals an UpdatePath: on another thread, in no fixed order.
        let there = std::thread::scope(|s| {
            s.spawn(|| seal(&again, keys.public.as_slice(), b"path secret"))
                .join()
                .unwrap()
        });
        assert_eq!(here.kem_output, there.kem_output);
        assert_eq!(here.ciphertext, there.ciphertext);
        assert_eq!(open(&keys.private[..], &there), b"path secret");
        let other = seal(&crypto, keys.public.as_slice(), b"another secret");
        assert_ne!(
            here.kem_output, other.kem_output,
            "other inputs, another key"
        );
        assert!(!entropy::is_seeded(), "a seal's scope ends with it");
    }

    #[test]
    fn an_exported_secret_matches_the_receivers_of_openmls_rust_crypto() {
        let keys = receiver();
        let crypto = Crypto::new();
        let (enc, ours) = crypto
            .hpke_setup_sender_and_export(
                SUITE.hpke_config(),
                keys.public.as_slice(),
                b"info",
                b"context",
                32,
            )
            .unwrap();
        let theirs = RustCrypto::default()
            .hpke_setup_receiver_and_export(
                SUITE.hpke_config(),
                &enc,
                &keys.private[..],
                b"info",
                b"context",
                32,
            )
            .unwrap();
        assert_eq!(&ours[..], &theirs[..]);
    }

    #[test]
    fn a_generated_kem_key_pair_is_valid_and_receives() {
        for alg in [KemAlgorithm::DhKem25519, KemAlgorithm::DhKemP256] {
            let _scope = entropy::Seeded::from_os().unwrap();
            let mut prng = EntropyHpke::prng();
            assert!(prng.keyed);
            let (pk, sk) = EntropyHpke::kem_key_gen(alg, &mut prng).unwrap();
            assert_eq!(EntropyHpke::secret_to_public(alg, &sk).unwrap(), pk);
            let mut hpke = Hpke::<EntropyHpke>::new(
                Mode::Base,
                alg,
                KdfAlgorithm::HkdfSha256,
                AeadAlgorithm::Aes128Gcm,
            );
            let (enc, ct) = hpke
                .seal(&pk.as_slice().into(), b"i", b"a", b"text", None, None, None)
                .unwrap();
            let opened = Hpke::<HpkeRustCrypto>::new(
                Mode::Base,
                alg,
                KdfAlgorithm::HkdfSha256,
                AeadAlgorithm::Aes128Gcm,
            )
            .open(
                &enc,
                &sk.as_slice().into(),
                b"i",
                b"a",
                &ct,
                None,
                None,
                None,
            )
            .unwrap();
            assert_eq!(opened, b"text");
        }
        assert!(EntropyHpke::supports_kem(KemAlgorithm::MlKem768).is_err());
    }
}
