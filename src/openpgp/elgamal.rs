//! Decryption with legacy ElGamal keys (OpenPGP algorithm 16), which Sequoia's
//! RustCrypto backend cannot do. Hand-written because no kept crate does ElGamal for
//! OpenPGP; it is small: one modular exponentiation and the EME-PKCS1-v1_5 decoding of
//! RFC 9580 section 5.1.3.
//!
//! Only decryption: RFC 9580 (section 9.1) keeps ElGamal for reading old messages and
//! tells implementations not to encrypt to it, which `sop encrypt` follows. The private
//! exponent is blinded with a fresh multiple of `p - 1` on each use, so the timing of the
//! (variable-time) exponentiation does not follow the key, and the padding is checked
//! without an early exit; whatever fails, the caller learns only "does not decrypt".

use rsa::BigUint;
use sequoia_openpgp as openpgp;

use openpgp::crypto::mem::Protected;
use openpgp::crypto::{mpi, Decryptor, SessionKey};
use openpgp::packet::key::{PublicParts, SecretParts, UnspecifiedRole};
use openpgp::packet::Key;
use zeroize::Zeroizing;

/// An ElGamal key able to decrypt session keys.
#[derive(Clone)]
pub(crate) struct ElGamal {
    public: Key<PublicParts, UnspecifiedRole>,
    /// The private exponent `x`, big-endian.
    x: Protected,
}

fn refused(why: &str) -> anyhow::Error {
    openpgp::Error::InvalidOperation(format!("ElGamal: {why}")).into()
}

impl ElGamal {
    /// The key's decryptor, when it is an unlocked ElGamal key.
    pub(crate) fn new(key: &Key<SecretParts, UnspecifiedRole>) -> Option<Self> {
        let mpi::PublicKey::ElGamal { .. } = key.mpis() else {
            return None;
        };
        let x = match key.secret() {
            openpgp::packet::key::SecretKeyMaterial::Unencrypted(u) => u.map(|m| match m {
                mpi::SecretKeyMaterial::ElGamal { x } => Some(Protected::from(x.value())),
                _ => None,
            })?,
            openpgp::packet::key::SecretKeyMaterial::Encrypted(_) => return None,
        };
        Some(Self {
            public: key.clone().parts_into_public(),
            x,
        })
    }

    /// `c * e^-x mod p`, the padded session key, as `len(p)` big-endian bytes.
    fn recover(&self, e: &[u8], c: &[u8]) -> Result<Zeroizing<Vec<u8>>, anyhow::Error> {
        let mpi::PublicKey::ElGamal { p, .. } = self.public.mpis() else {
            return Err(refused("not an ElGamal key"));
        };
        let p = BigUint::from_bytes_be(p.value());
        let one = BigUint::from(1u8);
        if p <= one {
            return Err(refused("bad modulus"));
        }
        let e = BigUint::from_bytes_be(e);
        let c = BigUint::from_bytes_be(c);
        if e.bits() == 0 || e >= p || c >= p {
            return Err(refused("ciphertext out of range"));
        }
        let order = &p - &one;
        let x = BigUint::from_bytes_be(&self.x);
        if x >= order {
            return Err(refused("bad private exponent"));
        }
        // e^-x = e^(p-1-x) (Fermat), blinded: e^(p-1-x + r(p-1)) is the same value.
        let mut r = [0u8; 8];
        openpgp::crypto::random(&mut r)?;
        let exponent = (&order - &x) + BigUint::from_bytes_be(&r) * &order;
        let m = (c * e.modpow(&exponent, &p)) % &p;
        let width = p.to_bytes_be().len();
        let bytes = Zeroizing::new(m.to_bytes_be());
        if bytes.len() > width {
            return Err(refused("ciphertext out of range"));
        }
        let mut out = Zeroizing::new(vec![0u8; width]);
        out[width - bytes.len()..].copy_from_slice(&bytes);
        Ok(out)
    }
}

/// The message of an EME-PKCS1-v1_5 block `00 02 PS 00 M` (PS: at least 8 non-zero
/// bytes), read without branching on the secret bytes until the end.
pub fn unpad(block: &[u8]) -> Option<&[u8]> {
    if block.len() < 11 {
        return None;
    }
    let mut ok = u8::from(block[0] == 0) & u8::from(block[1] == 2);
    // The index of the first zero after the type byte, or 0 when there is none.
    let mut separator = 0usize;
    let mut found = 0u8;
    for (i, &b) in block.iter().enumerate().skip(2) {
        let zero = u8::from(b == 0);
        let first = zero & (1 - found);
        separator |= i * usize::from(first);
        found |= zero;
    }
    ok &= found & u8::from(separator >= 10);
    (ok == 1).then(|| &block[separator + 1..])
}

impl Decryptor for ElGamal {
    fn public(&self) -> &Key<PublicParts, UnspecifiedRole> {
        &self.public
    }

    fn decrypt(
        &mut self,
        ciphertext: &mpi::Ciphertext,
        _plaintext_len: Option<usize>,
    ) -> openpgp::Result<SessionKey> {
        let mpi::Ciphertext::ElGamal { e, c } = ciphertext else {
            return Err(refused("not an ElGamal ciphertext"));
        };
        let block = self.recover(e.value(), c.value())?;
        let message = unpad(&block).ok_or_else(|| refused("does not decrypt"))?;
        Ok(SessionKey::from(message))
    }
}

#[cfg(test)]
mod tests {
    use super::unpad;

    #[test]
    fn unpad_takes_the_message_after_the_first_zero() {
        let mut block = vec![0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 0, 7];
        assert_eq!(unpad(&block), Some(&[9, 0, 7][..]));
        // Padding shorter than 8 bytes, a wrong type byte, or no separator: refused.
        block[9] = 0;
        assert_eq!(unpad(&block), None);
        assert_eq!(unpad(&[0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 5]), None);
        assert_eq!(unpad(&[0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5]), None);
        assert_eq!(unpad(&[1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 5]), None);
        assert_eq!(unpad(&[0, 2, 1]), None);
        // An empty message after a full padding is a block, not a panic.
        assert_eq!(unpad(&[0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0]), Some(&[][..]));
    }
}
