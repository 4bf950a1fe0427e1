//! Differential: our strict Ed25519 verification of MLS signatures
//! (`src/mls/ed25519.rs`, which leaves out the decompression of the signature's `R`)
//! against `ed25519-dalek`'s `verify_strict`, which every MLS implementation on
//! RustCrypto uses, on the same key, message and signature.
//!
//! Random bytes are almost never a valid signature, so the input chooses how the case
//! is made (the first byte):
//! - a genuine signature by a key from the input's seed, then one byte of it or of the
//!   key set to a value the input picks (possibly the same: a valid case);
//! - key, signature and message as raw bytes;
//! - the cases an attacker crafts: a key `[a]B + T` and a nonce `[n]B + T'` with
//!   small-order `T`, `T'` (any of the eight), signed as `s = k a + n`, so that the
//!   plain equation holds when `-[k]T = T'`: a key or a nonce of small order or with a
//!   torsion part;
//! - a genuine signature with `s + L` (not reduced) instead of `s`.
//!
//! Invariant: the same verdict, and the same refusal of a key that is no point.
#![no_main]

use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT, EIGHT_TORSION};
use curve25519_dalek::scalar::Scalar;
use ed25519_dalek::Signer as _;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest as _, Sha512};

/// The group order L, little-endian.
const L: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

fn take<const N: usize>(data: &mut &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = data.len().min(N);
    out[..n].copy_from_slice(&data[..n]);
    *data = &data[n..];
    out
}

fn reference(pk: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Option<bool> {
    let key = ed25519_dalek::VerifyingKey::from_bytes(pk).ok()?;
    Some(
        key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(signature))
            .is_ok(),
    )
}

fuzz_target!(|input: &[u8]| {
    let mut data = input;
    let [mode] = take::<1>(&mut data);
    let (pk, signature, message): ([u8; 32], [u8; 64], Vec<u8>) = match mode % 4 {
        0 => {
            let seed = take::<32>(&mut data);
            let [at, value] = take::<2>(&mut data);
            let key = ed25519_dalek::SigningKey::from_bytes(&seed);
            let mut pk = key.verifying_key().to_bytes();
            let mut signature = key.sign(data).to_bytes();
            // Positions 0 to 63 in the signature, 64 to 95 in the key, the rest none.
            match at as usize {
                i @ 0..=63 => signature[i] = value,
                i @ 64..=95 => pk[i - 64] = value,
                _ => {}
            }
            (pk, signature, data.to_vec())
        }
        1 => {
            let pk = take::<32>(&mut data);
            let signature = take::<64>(&mut data);
            (pk, signature, data.to_vec())
        }
        2 => {
            let a = Scalar::from_bytes_mod_order(take::<32>(&mut data));
            let n = Scalar::from_bytes_mod_order(take::<32>(&mut data));
            let [ta, tr, flags] = take::<3>(&mut data);
            let torsion = |i: u8| EIGHT_TORSION[usize::from(i % 8)];
            // The flags drop the prime-order part of the key or of the nonce.
            let a = if flags & 1 == 1 { Scalar::ZERO } else { a };
            let n = if flags & 2 == 2 { Scalar::ZERO } else { n };
            let pk = (ED25519_BASEPOINT_POINT * a + torsion(ta))
                .compress()
                .to_bytes();
            let r = (ED25519_BASEPOINT_POINT * n + torsion(tr))
                .compress()
                .to_bytes();
            let k = Scalar::from_hash(
                Sha512::new()
                    .chain_update(r)
                    .chain_update(pk)
                    .chain_update(data),
            );
            let mut signature = [0u8; 64];
            signature[..32].copy_from_slice(&r);
            signature[32..].copy_from_slice((k * a + n).as_bytes());
            (pk, signature, data.to_vec())
        }
        _ => {
            let seed = take::<32>(&mut data);
            let key = ed25519_dalek::SigningKey::from_bytes(&seed);
            let mut signature = key.sign(data).to_bytes();
            let mut carry = 0u16;
            for (i, l) in L.iter().enumerate() {
                let v = u16::from(signature[32 + i]) + u16::from(*l) + carry;
                signature[32 + i] = v as u8;
                carry = v >> 8;
            }
            (key.verifying_key().to_bytes(), signature, data.to_vec())
        }
    };
    let ours = mailseal::mls::fuzz_ed25519_verify(&pk, &message, &signature);
    let theirs = reference(&pk, &message, &signature);
    assert_eq!(
        ours,
        theirs,
        "key {pk:02x?} signature {signature:02x?} message of {} bytes",
        message.len()
    );
});
