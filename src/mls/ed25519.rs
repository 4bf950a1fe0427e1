//! Ed25519 verification as `ed25519-dalek`'s `verify_strict` decides it, one field
//! exponentiation cheaper.
//!
//! Every MLS message is signed, and on opening a 2 KiB application message the
//! signature's verification is about 40% of the time (`perf`, BENCHMARKS.md). Strict
//! verification decompresses the signature's `R` (a square root: a field
//! exponentiation, about 6 µs of 41 here) only to ask whether it is of small order;
//! the point it then compares against, `R' = [s]B - [k]A`, is compressed anyway, and
//! the comparison is of bytes. Where those bytes are equal, `R` is the canonical
//! encoding of `R'`, so `R` is of small order exactly when `R'` is, which three
//! doublings tell. So this is dalek's `verify_strict` (its `RCompute`) in the same
//! order with that one substitution, built from `curve25519-dalek`'s public
//! operations; nothing below the curve is written here:
//!
//! | `verify_strict` refuses when | here |
//! | --- | --- |
//! | `s` is not below the group order | the same (`Scalar::from_canonical_bytes`) |
//! | `R` does not decompress | `R` is never the canonical encoding of `R'` |
//! | `R` is of small order | `R'` is, once its encoding equals `R` |
//! | `A` is of small order | the same, asked once per key when it is kept |
//! | `compress(R')` is not `R` | the same |
//!
//! A unit test holds this to `verify_strict` on valid, tampered and crafted signatures
//! (small-order `R` and `A`, `s` not reduced, `R` off the curve or not canonical), and
//! the `ed25519_strict` fuzz target on any bytes.

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest as _, Sha512};

/// An Ed25519 public key kept for verification: its bytes as given (the challenge
/// hashes them so), its point negated, and whether the point is of small order.
#[derive(Clone, Copy)]
pub(crate) struct VerifyingKey {
    bytes: [u8; 32],
    minus_a: EdwardsPoint,
    small_order: bool,
}

impl VerifyingKey {
    /// The key `bytes`, if they decompress to a point (as `ed25519-dalek`'s
    /// `VerifyingKey::from_bytes` requires).
    pub(crate) fn from_bytes(bytes: &[u8; 32]) -> Option<VerifyingKey> {
        let a = CompressedEdwardsY(*bytes).decompress()?;
        Some(VerifyingKey {
            bytes: *bytes,
            minus_a: -a,
            small_order: a.is_small_order(),
        })
    }

    /// Whether `signature` is this key's strict Ed25519 signature of `message`
    /// (RFC 8032 5.1.7, cofactorless, with `verify_strict`'s refusals).
    pub(crate) fn verify_strict(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let (r, s) = signature.split_at(32);
        let Ok(s) = <[u8; 32]>::try_from(s) else {
            return false;
        };
        let Some(s) = Option::<Scalar>::from(Scalar::from_canonical_bytes(s)) else {
            return false;
        };
        if self.small_order {
            return false;
        }
        let k = Scalar::from_hash(
            Sha512::new()
                .chain_update(r)
                .chain_update(self.bytes)
                .chain_update(message),
        );
        let expected = EdwardsPoint::vartime_double_scalar_mul_basepoint(&k, &self.minus_a, &s);
        expected.compress().as_bytes() == r && !expected.is_small_order()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT, EIGHT_TORSION};
    use ed25519_dalek::Signer as _;

    /// dalek's verdict on the same inputs.
    fn dalek(pk: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Option<bool> {
        let key = ed25519_dalek::VerifyingKey::from_bytes(pk).ok()?;
        Some(
            key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(signature))
                .is_ok(),
        )
    }

    fn ours(pk: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Option<bool> {
        Some(VerifyingKey::from_bytes(pk)?.verify_strict(message, signature))
    }

    /// A signature by the scalar `a` with the public key `A = [a]B + ta` and the nonce
    /// point `R = [n]B + tr`, `s = k a + n`: then `[s]B - [k]A = [n]B - [k] ta`, which
    /// an attacker who chooses all of them makes equal `R` (by trying messages until
    /// `-[k] ta = tr`), so that the plain, cofactorless equation holds with a nonce or
    /// a key of small order or with a torsion part.
    fn crafted(
        (a, ta): (Scalar, EdwardsPoint),
        (n, tr): (Scalar, EdwardsPoint),
        m: &[u8],
    ) -> ([u8; 32], [u8; 64]) {
        let pk = (ED25519_BASEPOINT_POINT * a + ta).compress().to_bytes();
        let r = (ED25519_BASEPOINT_POINT * n + tr).compress().to_bytes();
        let k = Scalar::from_hash(
            Sha512::new()
                .chain_update(r)
                .chain_update(pk)
                .chain_update(m),
        );
        let mut sig = [0u8; 64];
        sig[..32].copy_from_slice(&r);
        sig[32..].copy_from_slice((k * a + n).as_bytes());
        (pk, sig)
    }

    /// A message for which [`crafted`]'s signature satisfies the plain equation.
    fn satisfying(
        key: (Scalar, EdwardsPoint),
        nonce: (Scalar, EdwardsPoint),
    ) -> Option<(Vec<u8>, [u8; 32], [u8; 64])> {
        (0u32..256).find_map(|i| {
            let m = i.to_be_bytes().to_vec();
            let (pk, sig) = crafted(key, nonce, &m);
            let plain = ed25519_dalek::VerifyingKey::from_bytes(&pk).ok()?;
            ed25519_dalek::Verifier::verify(&plain, &m, &ed25519_dalek::Signature::from_bytes(&sig))
                .is_ok()
                .then_some((m, pk, sig))
        })
    }

    #[test]
    fn verdicts_are_verify_stricts() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]);
        let pk = key.verifying_key().to_bytes();
        let mut cases: Vec<([u8; 32], Vec<u8>, [u8; 64])> = Vec::new();
        for m in [&b""[..], b"data", &[7u8; 3000]] {
            let sig = key.sign(m).to_bytes();
            cases.push((pk, m.to_vec(), sig));
            cases.push((pk, [m, b"x"].concat(), sig));
            for bit in [0, 7, 100, 255, 256, 300, 511] {
                let mut t = sig;
                t[bit / 8] ^= 1 << (bit % 8);
                cases.push((pk, m.to_vec(), t));
            }
            // s + L: the same point, not reduced.
            let mut unreduced = sig;
            let s = Scalar::from_canonical_bytes(sig[32..].try_into().unwrap()).unwrap();
            let l_minus_1 = -Scalar::ONE;
            let mut carry = 0u16;
            let (sb, lb) = (s.to_bytes(), l_minus_1.to_bytes());
            for i in 0..32 {
                // s + (L - 1) + 1 as bytes, little-endian.
                let v = sb[i] as u16 + lb[i] as u16 + carry + u16::from(i == 0);
                unreduced[32 + i] = v as u8;
                carry = v >> 8;
            }
            cases.push((pk, m.to_vec(), unreduced));
        }
        // Keys and nonces of small order or with a torsion part, each also with a
        // message for which the plain equation holds: strict verification refuses
        // those with a small-order key or nonce, and takes those with torsion parts.
        let (a, n) = (
            Scalar::from_bytes_mod_order([5u8; 32]),
            Scalar::from_bytes_mod_order([11u8; 32]),
        );
        let (zero, o) = (Scalar::ZERO, EdwardsPoint::default());
        let mut plain_passes = 0;
        for t in EIGHT_TORSION {
            for (key, nonce) in [
                ((a, t), (zero, -t)),
                ((a, t), (zero, t)),
                ((a, o), (zero, t)),
                ((zero, t), (zero, -t)),
                ((zero, t), (n, -t)),
                ((a, t), (n, -t)),
            ] {
                if let Some((m, pk_c, sig_c)) = satisfying(key, nonce) {
                    plain_passes += 1;
                    cases.push((pk_c, m, sig_c));
                }
                let (pk_c, sig_c) = crafted(key, nonce, b"m");
                cases.push((pk_c, b"m".to_vec(), sig_c));
            }
        }
        assert!(
            plain_passes >= 24,
            "crafted cases the plain equation takes: {plain_passes}"
        );
        // R not canonical (y + p for a small y) and R off the curve.
        let mut non_canonical = key.sign(b"data").to_bytes();
        non_canonical[..32].copy_from_slice(&{
            let mut y = [0xffu8; 32];
            y[0] = 0xee;
            y[31] = 0x7f;
            y
        });
        cases.push((pk, b"data".to_vec(), non_canonical));
        let off = (2u8..=255)
            .map(|i| [i; 32])
            .find(|b| CompressedEdwardsY(*b).decompress().is_none())
            .unwrap();
        let mut off_r = key.sign(b"data").to_bytes();
        off_r[..32].copy_from_slice(&off);
        cases.push((pk, b"data".to_vec(), off_r));
        cases.push((off, b"data".to_vec(), key.sign(b"data").to_bytes()));

        let mut seen = [0usize; 3];
        for (pk, m, sig) in &cases {
            let want = dalek(pk, m, sig);
            assert_eq!(ours(pk, m, sig), want, "key {pk:02x?} signature {sig:02x?}");
            seen[match want {
                Some(true) => 0,
                Some(false) => 1,
                None => 2,
            }] += 1;
        }
        assert!(
            seen.iter().all(|n| *n > 0),
            "accepted, refused, bad key: {seen:?}"
        );
    }
}
