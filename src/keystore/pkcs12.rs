//! PKCS#12 (RFC 7292) import: the certificates and private keys of a `.p12`/`.pfx`.
//!
//! Written here because the RustCrypto `pkcs12` and `p12-keystore` crates pin a `cms`
//! release that conflicts with ours (STACK-NOTES). Read: PFX v3 with a password MAC
//! (HMAC-SHA-1/256/384/512 under the PKCS#12 KDF, checked in constant time before
//! anything is decrypted), authenticated safes of plain or password-encrypted
//! SafeContents, key bags, shrouded key bags and X.509 certificate bags. Encryption:
//! PBES2 (PBKDF2 or scrypt with AES-CBC, what OpenSSL 3 writes) and the legacy PKCS#12
//! PBEs with SHA-1 (3DES-CBC, RC2-CBC 128 and 40 bit, what older tools write). Other
//! bags (CRLs, secrets) are skipped.

use aws_lc_rs::{digest, hmac};
use cms::content_info::ContentInfo;
use cms::enveloped_data::EncryptedContentInfo;
use der::asn1::{ObjectIdentifier as Oid, OctetString, OctetStringRef};
use der::{Any, Decode, Encode};
use spki::AlgorithmIdentifierOwned;
use zeroize::Zeroizing;

use super::material::Material;
use super::KeyStoreError;

const ID_DATA: Oid = Oid::new_unwrap("1.2.840.113549.1.7.1");
const ID_ENCRYPTED_DATA: Oid = Oid::new_unwrap("1.2.840.113549.1.7.6");
const KEY_BAG: Oid = Oid::new_unwrap("1.2.840.113549.1.12.10.1.1");
const SHROUDED_KEY_BAG: Oid = Oid::new_unwrap("1.2.840.113549.1.12.10.1.2");
const CERT_BAG: Oid = Oid::new_unwrap("1.2.840.113549.1.12.10.1.3");
const X509_CERTIFICATE: Oid = Oid::new_unwrap("1.2.840.113549.1.9.22.1");
const PBE_SHA1_3DES: Oid = Oid::new_unwrap("1.2.840.113549.1.12.1.3");
const PBE_SHA1_RC2_128: Oid = Oid::new_unwrap("1.2.840.113549.1.12.1.5");
const PBE_SHA1_RC2_40: Oid = Oid::new_unwrap("1.2.840.113549.1.12.1.6");
const PBES2: Oid = Oid::new_unwrap("1.2.840.113549.1.5.13");
const SHA1: Oid = Oid::new_unwrap("1.3.14.3.2.26");
const SHA256: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.1");
const SHA384: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.2");
const SHA512: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.3");

/// More iterations than any real file uses; a hostile file cannot make import spin.
/// (Fuzzing builds use a smaller bound so that each run stays fast.)
const MAX_ITERATIONS: u32 = if cfg!(fuzzing) { 4096 } else { 10_000_000 };
/// scrypt memory (128 * r * N bytes) above which an encrypted key is refused rather
/// than allowed to exhaust memory: 256 MiB, far above OpenSSL's default (16 MiB).
const MAX_SCRYPT_MEMORY: u64 = if cfg!(fuzzing) { 1 << 20 } else { 256 << 20 };

#[derive(der::Sequence)]
struct Pfx {
    version: u8,
    auth_safe: ContentInfo,
    #[asn1(optional = "true")]
    mac_data: Option<MacData>,
}

#[derive(der::Sequence)]
struct MacData {
    mac: DigestInfo,
    mac_salt: OctetString,
    #[asn1(default = "one")]
    iterations: u32,
}

fn one() -> u32 {
    1
}

#[derive(der::Sequence)]
struct DigestInfo {
    algorithm: AlgorithmIdentifierOwned,
    digest: OctetString,
}

#[derive(der::Sequence)]
struct SafeBag {
    bag_id: Oid,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT")]
    bag_value: Any,
    #[asn1(optional = "true")]
    bag_attributes: Option<Any>,
}

#[derive(der::Sequence)]
struct CertBag {
    cert_id: Oid,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT")]
    cert_value: OctetString,
}

#[derive(der::Sequence)]
struct EncryptedData {
    version: u8,
    encrypted_content_info: EncryptedContentInfo,
}

#[derive(der::Sequence)]
pub(crate) struct EncryptedPrivateKeyInfo {
    pub(crate) algorithm: AlgorithmIdentifierOwned,
    pub(crate) encrypted_data: OctetString,
}

#[derive(der::Sequence)]
struct Pkcs12PbeParams {
    salt: OctetString,
    iterations: u32,
}

fn malformed(what: &str, reason: impl std::fmt::Display) -> KeyStoreError {
    KeyStoreError::Malformed {
        what: what.to_string(),
        reason: format!("PKCS#12: {reason}"),
    }
}

/// Whether `input` is shaped like a PFX (SEQUENCE { INTEGER 3, ContentInfo, ... }),
/// so that it is read as one, with a passphrase, rather than reported unrecognised.
pub(crate) fn looks_like_pfx(input: &[u8]) -> bool {
    Pfx::from_der(input).is_ok_and(|p| p.version == 3)
        || crate::asn1::ber::to_der(input)
            .ok()
            .and_then(|d| Pfx::from_der(&d).ok())
            .is_some_and(|p| p.version == 3)
}

/// The PKCS#12 key derivation (RFC 7292 B.2) with `alg`, for purpose `id` (1 key,
/// 2 IV, 3 MAC key); `password` is already the BMPString with its two zero bytes.
fn pkcs12_kdf(
    alg: &'static digest::Algorithm,
    password: &[u8],
    salt: &[u8],
    id: u8,
    iterations: u32,
    n: usize,
) -> Zeroizing<Vec<u8>> {
    let u = alg.output_len();
    let v = alg.block_len();
    let fill = |src: &[u8]| -> Vec<u8> {
        if src.is_empty() {
            return Vec::new();
        }
        let len = v * src.len().div_ceil(v);
        src.iter().copied().cycle().take(len).collect()
    };
    let mut i_block = Zeroizing::new(fill(salt));
    i_block.extend_from_slice(&fill(password));
    let d = vec![id; v];
    let mut out = Zeroizing::new(Vec::with_capacity(n + u));
    while out.len() < n {
        let mut a = {
            let mut ctx = digest::Context::new(alg);
            ctx.update(&d);
            ctx.update(&i_block);
            Zeroizing::new(ctx.finish().as_ref().to_vec())
        };
        for _ in 1..iterations {
            a = Zeroizing::new(digest::digest(alg, &a).as_ref().to_vec());
        }
        out.extend_from_slice(&a);
        if out.len() >= n {
            break;
        }
        // I_j = (I_j + B + 1) mod 2^(8v), B = A repeated to v bytes.
        let b: Zeroizing<Vec<u8>> = Zeroizing::new(a.iter().copied().cycle().take(v).collect());
        for chunk in i_block.chunks_mut(v) {
            let mut carry = 1u16;
            for k in (0..v).rev() {
                let sum = chunk[k] as u16 + b[k] as u16 + carry;
                chunk[k] = sum as u8;
                carry = sum >> 8;
            }
        }
    }
    out.truncate(n);
    out
}

/// The password as a BMPString (UTF-16BE) with its terminating zero, as RFC 7292 B.1
/// feeds it to the KDF.
fn bmp_password(password: &[u8]) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    let text = std::str::from_utf8(password)
        .map_err(|_| malformed("passphrase", "the passphrase is not UTF-8"))?;
    let mut out = Zeroizing::new(Vec::with_capacity(text.len() * 2 + 2));
    for unit in text.encode_utf16() {
        out.extend_from_slice(&unit.to_be_bytes());
    }
    out.extend_from_slice(&[0, 0]);
    Ok(out)
}

fn digest_for(oid: Oid) -> Option<(&'static digest::Algorithm, hmac::Algorithm)> {
    Some(match oid {
        SHA1 => (
            &digest::SHA1_FOR_LEGACY_USE_ONLY,
            hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        ),
        SHA256 => (&digest::SHA256, hmac::HMAC_SHA256),
        SHA384 => (&digest::SHA384, hmac::HMAC_SHA384),
        SHA512 => (&digest::SHA512, hmac::HMAC_SHA512),
        _ => return None,
    })
}

fn check_iterations(what: &str, iterations: u32) -> Result<(), KeyStoreError> {
    if iterations == 0 || iterations > MAX_ITERATIONS {
        return Err(malformed(
            what,
            format!("iteration count {iterations} is outside 1..={MAX_ITERATIONS}"),
        ));
    }
    Ok(())
}

/// Decrypts `data` under the password-based scheme `alg` (also used for encrypted
/// PKCS#8 keys, which use the same schemes).
pub(crate) fn pbe_decrypt(
    what: &str,
    alg: &AlgorithmIdentifierOwned,
    password: &[u8],
    data: &[u8],
) -> Result<Zeroizing<Vec<u8>>, KeyStoreError> {
    use cbc::cipher::{block_padding::Pkcs7, BlockModeDecrypt, InnerIvInit, KeyIvInit};
    let wrong = || malformed(what, "does not decrypt: wrong passphrase or altered file");
    if alg.oid == PBES2 {
        let scheme = pkcs8::pkcs5::EncryptionScheme::from_der(
            &alg.to_der().map_err(|e| malformed(what, e))?,
        )
        .map_err(|e| malformed(what, e))?;
        if let pkcs8::pkcs5::EncryptionScheme::Pbes2(p) = &scheme {
            match &p.kdf {
                pkcs8::pkcs5::pbes2::Kdf::Pbkdf2(k) => check_iterations(what, k.iteration_count)?,
                pkcs8::pkcs5::pbes2::Kdf::Scrypt(k) => {
                    let memory = 128u64
                        .saturating_mul(k.block_size as u64)
                        .saturating_mul(k.cost_parameter)
                        .saturating_mul(k.parallelization.max(1) as u64);
                    if memory > MAX_SCRYPT_MEMORY {
                        return Err(malformed(
                            what,
                            format!("scrypt parameters ask for {memory} bytes of memory"),
                        ));
                    }
                }
                _ => {}
            }
        }
        return scheme
            .decrypt(password, data)
            .map(Zeroizing::new)
            .map_err(|_| wrong());
    }
    let params: Pkcs12PbeParams = alg
        .parameters
        .as_ref()
        .ok_or_else(|| malformed(what, "PBE without parameters"))?
        .decode_as()
        .map_err(|e| malformed(what, e))?;
    check_iterations(what, params.iterations)?;
    let bmp = bmp_password(password)?;
    let sha1 = &digest::SHA1_FOR_LEGACY_USE_ONLY;
    let salt = params.salt.as_bytes();
    let (key_len, eff_bits) = match alg.oid {
        PBE_SHA1_3DES => (24, 0),
        PBE_SHA1_RC2_128 => (16, 128),
        PBE_SHA1_RC2_40 => (5, 40),
        other => {
            return Err(malformed(
                what,
                format!("unsupported encryption {other} (PBES2 and the SHA-1 PBEs are read)"),
            ))
        }
    };
    let key = pkcs12_kdf(sha1, &bmp, salt, 1, params.iterations, key_len);
    let iv = pkcs12_kdf(sha1, &bmp, salt, 2, params.iterations, 8);
    let mut buf = Zeroizing::new(data.to_vec());
    let n = if eff_bits == 0 {
        cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
            .map_err(|_| wrong())?
            .decrypt_padded::<Pkcs7>(&mut buf)
            .map_err(|_| wrong())?
            .len()
    } else {
        let rc2 = rc2::Rc2::new_with_eff_key_len(&key, eff_bits);
        cbc::Decryptor::<rc2::Rc2>::inner_iv_slice_init(rc2, &iv)
            .map_err(|_| wrong())?
            .decrypt_padded::<Pkcs7>(&mut buf)
            .map_err(|_| wrong())?
            .len()
    };
    buf.truncate(n);
    Ok(buf)
}

/// Verifies the PFX password MAC over the authenticated safe's octets.
fn verify_mac(
    what: &str,
    mac: &MacData,
    password: &[u8],
    content: &[u8],
) -> Result<(), KeyStoreError> {
    check_iterations(what, mac.iterations)?;
    let (dig, hm) = digest_for(mac.mac.algorithm.oid).ok_or_else(|| {
        malformed(
            what,
            format!("unsupported MAC digest {}", mac.mac.algorithm.oid),
        )
    })?;
    let bmp = bmp_password(password)?;
    let key = pkcs12_kdf(
        dig,
        &bmp,
        mac.mac_salt.as_bytes(),
        3,
        mac.iterations,
        dig.output_len(),
    );
    hmac::verify(
        &hmac::Key::new(hm, &key),
        content,
        mac.mac.digest.as_bytes(),
    )
    .map_err(|_| {
        malformed(
            what,
            "the MAC does not verify: wrong passphrase or altered file",
        )
    })
}

fn read_bags(
    what: &str,
    safe_contents: &[u8],
    password: &[u8],
    out: &mut Vec<Material>,
) -> Result<(), KeyStoreError> {
    let bags = Vec::<SafeBag>::from_der(safe_contents).map_err(|e| malformed(what, e))?;
    for bag in bags {
        match bag.bag_id {
            KEY_BAG => out.push(Material::PrivateKey {
                der: Zeroizing::new(bag.bag_value.to_der().map_err(|e| malformed(what, e))?),
            }),
            SHROUDED_KEY_BAG => {
                let epki: EncryptedPrivateKeyInfo =
                    bag.bag_value.decode_as().map_err(|e| malformed(what, e))?;
                let der = pbe_decrypt(
                    what,
                    &epki.algorithm,
                    password,
                    epki.encrypted_data.as_bytes(),
                )?;
                pkcs8::PrivateKeyInfoRef::from_der(&der)
                    .map_err(|_| malformed(what, "a shrouded key is not PKCS#8"))?;
                out.push(Material::PrivateKey { der });
            }
            CERT_BAG => {
                let cert: CertBag = bag.bag_value.decode_as().map_err(|e| malformed(what, e))?;
                if cert.cert_id == X509_CERTIFICATE {
                    let c = x509_cert::Certificate::from_der(cert.cert_value.as_bytes())
                        .map_err(|e| malformed(what, e))?;
                    out.push(Material::Certificate(Box::new(c)));
                }
            }
            _ => {} // CRL, secret and nested bags carry nothing we store
        }
    }
    Ok(())
}

/// The certificates and private keys in the PFX `input` (DER, or BER as some tools
/// write), opened with `password`.
pub(crate) fn read(
    input: &[u8],
    what: &str,
    password: &[u8],
) -> Result<Vec<Material>, KeyStoreError> {
    let rewritten;
    let pfx = match Pfx::from_der(input) {
        Ok(p) => p,
        Err(_) => {
            rewritten = crate::asn1::ber::to_der(input)
                .map_err(|_| malformed(what, "not a DER or BER PFX"))?;
            Pfx::from_der(&rewritten).map_err(|e| malformed(what, e))?
        }
    };
    if pfx.version != 3 {
        return Err(malformed(what, format!("version {} is not 3", pfx.version)));
    }
    if pfx.auth_safe.content_type != ID_DATA {
        return Err(malformed(
            what,
            "public-key integrity mode is not supported (password MAC only)",
        ));
    }
    let content = pfx
        .auth_safe
        .content
        .decode_as::<&OctetStringRef>()
        .map_err(|e| malformed(what, e))?
        .as_bytes();
    let mac = pfx
        .mac_data
        .as_ref()
        .ok_or_else(|| malformed(what, "no MAC: the file's integrity cannot be checked"))?;
    let verified = verify_mac(what, mac, password, content);
    // Fuzzing builds go on past a wrong MAC, which no mutation could forge, so that the
    // bag and decryption parsers behind it are reached. Every other build stops here.
    if !cfg!(fuzzing) {
        verified?;
    }
    let safes = Vec::<ContentInfo>::from_der(content).map_err(|e| malformed(what, e))?;
    let mut out = Vec::new();
    for safe in safes {
        match safe.content_type {
            ID_DATA => {
                let octets = safe
                    .content
                    .decode_as::<&OctetStringRef>()
                    .map_err(|e| malformed(what, e))?;
                read_bags(what, octets.as_bytes(), password, &mut out)?;
            }
            ID_ENCRYPTED_DATA => {
                let ed: EncryptedData = safe.content.decode_as().map_err(|e| malformed(what, e))?;
                let eci = ed.encrypted_content_info;
                let ciphertext = eci
                    .encrypted_content
                    .ok_or_else(|| malformed(what, "encrypted safe without content"))?;
                let plain =
                    pbe_decrypt(what, &eci.content_enc_alg, password, ciphertext.as_bytes())?;
                read_bags(what, &plain, password, &mut out)?;
            }
            other => {
                return Err(malformed(
                    what,
                    format!(
                        "safe of content type {other} (public-key privacy mode) is not supported"
                    ),
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(malformed(what, "no certificate or key inside"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kdf_matches_rfc7292_b2_by_hand_for_one_block() {
        // One iteration, one output block: A = SHA-1(D || S' || P').
        let bmp = bmp_password(b"ab").unwrap();
        assert_eq!(&bmp[..], &[0, b'a', 0, b'b', 0, 0]);
        let salt = [1u8, 2, 3];
        let out = pkcs12_kdf(&digest::SHA1_FOR_LEGACY_USE_ONLY, &bmp, &salt, 1, 1, 20);
        let mut input = vec![1u8; 64];
        input.extend(salt.iter().copied().cycle().take(64));
        input.extend(bmp.iter().copied().cycle().take(64));
        let expected = digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, &input);
        assert_eq!(&out[..], expected.as_ref());
    }
}
