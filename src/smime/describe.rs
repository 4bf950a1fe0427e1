//! What an S/MIME message shows without keys: its layers, algorithms, recipients and
//! signers (for `mailseal inspect`). Nothing here is verified; every line says so.

use cms::authenveloped_data::AuthEnvelopedData;
use cms::enveloped_data::{
    EnvelopedData, KeyAgreeRecipientIdentifier, OriginatorIdentifierOrKey, RecipientIdentifier,
    RecipientInfo, RecipientInfos,
};
use cms::signed_data::{SignedData, SignerIdentifier};

use crate::asn1::oids::*;
use crate::message::{read_outer, Limits, MessageError};

fn oid_name(oid: der::asn1::ObjectIdentifier) -> String {
    let name = match oid {
        SHA256 => "sha-256",
        SHA384 => "sha-384",
        SHA512 => "sha-512",
        RSA_ENCRYPTION => "rsa-pkcs1-v1.5",
        RSASSA_PSS => "rsa-pss",
        RSAES_OAEP => "rsaes-oaep",
        SHA256_WITH_RSA => "sha256-with-rsa",
        ECDSA_WITH_SHA256 => "ecdsa-with-sha256",
        ECDSA_WITH_SHA384 => "ecdsa-with-sha384",
        ECDSA_WITH_SHA512 => "ecdsa-with-sha512",
        ED25519 => "ed25519",
        AES256_GCM => "aes-256-gcm",
        AES128_GCM => "aes-128-gcm",
        DH_SHA1KDF => "ecdh-x963-sha1kdf",
        DH_SHA256KDF => "ecdh-x963-sha256kdf",
        DH_SHA384KDF => "ecdh-x963-sha384kdf",
        DH_SHA512KDF => "ecdh-x963-sha512kdf",
        DH_HKDF_SHA256 => "ecdh-hkdf-sha256",
        DH_HKDF_SHA384 => "ecdh-hkdf-sha384",
        DH_HKDF_SHA512 => "ecdh-hkdf-sha512",
        ID_X25519 => "x25519",
        ID_EC_PUBLIC_KEY => "ec",
        CHACHA20_POLY1305 => "chacha20-poly1305",
        AES128_CBC => "aes-128-cbc",
        AES192_CBC => "aes-192-cbc",
        AES256_CBC => "aes-256-cbc",
        DES_EDE3_CBC => "3des-cbc",
        AES128_WRAP => "aes-128-wrap",
        AES256_WRAP => "aes-256-wrap",
        _ => return oid.to_string(),
    };
    name.to_string()
}

fn signed_lines(sd: &SignedData, out: &mut Vec<String>) {
    for si in sd.signer_infos.0.iter() {
        let who = match &si.sid {
            SignerIdentifier::IssuerAndSerialNumber(ias) => {
                format!("issuer \"{}\" serial {}", ias.issuer, ias.serial_number)
            }
            SignerIdentifier::SubjectKeyIdentifier(_) => "subject key identifier".into(),
        };
        out.push(format!(
            "  signer: {who}; digest {}, signature {} (not verified here: use open)",
            oid_name(si.digest_alg.oid),
            oid_name(si.signature_algorithm.oid)
        ));
    }
    for c in sd.certificates.iter().flat_map(|s| s.0.iter()) {
        if let cms::cert::CertificateChoices::Certificate(c) = c {
            out.push(format!(
                "  certificate carried: \"{}\"",
                c.tbs_certificate().subject()
            ));
        }
    }
}

/// A content-encryption algorithm's name; RFC 9709 shows the algorithm it wraps.
fn content_alg_name(alg: &spki::AlgorithmIdentifierOwned) -> String {
    if alg.oid == CEK_HKDF_SHA256 {
        if let Some(inner) = alg
            .parameters
            .as_ref()
            .and_then(|p| p.decode_as::<spki::AlgorithmIdentifierOwned>().ok())
        {
            return format!(
                "{} with an HKDF-derived key (RFC 9709)",
                oid_name(inner.oid)
            );
        }
    }
    oid_name(alg.oid)
}

fn ias_name(ias: &cms::cert::IssuerAndSerialNumber) -> String {
    format!("issuer \"{}\" serial {}", ias.issuer, ias.serial_number)
}

fn recipient_lines(infos: &RecipientInfos, out: &mut Vec<String>) {
    for ri in infos.0.iter() {
        match ri {
            RecipientInfo::Ktri(k) => {
                let who = match &k.rid {
                    RecipientIdentifier::IssuerAndSerialNumber(ias) => ias_name(ias),
                    RecipientIdentifier::SubjectKeyIdentifier(_) => "subject key identifier".into(),
                };
                out.push(format!(
                    "  recipient: {who}; key transport {}",
                    oid_name(k.key_enc_alg.oid)
                ));
            }
            RecipientInfo::Kari(k) => {
                let originator = match &k.originator {
                    OriginatorIdentifierOrKey::OriginatorKey(key) => oid_name(key.algorithm.oid),
                    _ => "static".into(),
                };
                for rek in &k.recipient_enc_keys {
                    let who = match &rek.rid {
                        KeyAgreeRecipientIdentifier::IssuerAndSerialNumber(ias) => ias_name(ias),
                        KeyAgreeRecipientIdentifier::RKeyId(_) => "key identifier".into(),
                    };
                    out.push(format!(
                        "  recipient: {who}; key agreement {} ({originator} ephemeral key)",
                        oid_name(k.key_enc_alg.oid)
                    ));
                }
            }
            RecipientInfo::Kekri(k) => out.push(format!(
                "  recipient: pre-shared key id {}; key wrap {}",
                crate::keystore::hex(k.kek_id.kek_identifier.as_bytes()),
                oid_name(k.key_enc_alg.oid)
            )),
            _ => out.push("  recipient: another kind (not supported here)".into()),
        }
    }
}

/// The layers of an S/MIME message as lines of text.
pub fn describe(raw: &[u8], limits: &Limits) -> Result<Vec<String>, MessageError> {
    let outer = read_outer(raw, limits)?;
    let mut out = Vec::new();
    let smime_type = outer.param("smime-type").map(str::to_ascii_lowercase);
    if outer.media_type == "multipart/signed" {
        out.push(format!(
            "layer: S/MIME multipart/signed, micalg {}",
            outer.param("micalg").unwrap_or("-")
        ));
        if let Some(sig) = outer.parts.get(1) {
            if let Some(sd) = sig
                .decoded()
                .ok()
                .and_then(|d| super::content_info(&d).ok())
                .and_then(|ci| ci.content.decode_as::<SignedData>().ok())
            {
                signed_lines(&sd, &mut out);
            }
        }
        return Ok(out);
    }
    let Some(body) = outer.single.as_ref().and_then(|s| s.decoded().ok()) else {
        out.push(format!("layer: {} (not S/MIME)", outer.media_type));
        return Ok(out);
    };
    let Ok(ci) = super::content_info(&body) else {
        out.push(format!(
            "layer: {} with an undecodable CMS body",
            outer.media_type
        ));
        return Ok(out);
    };
    match ci.content_type {
        ID_SIGNED_DATA => {
            out.push("layer: S/MIME signed-data (opaque)".into());
            if let Ok(sd) = ci.content.decode_as::<SignedData>() {
                signed_lines(&sd, &mut out);
            }
        }
        ID_CT_AUTH_ENVELOPED_DATA => {
            out.push(format!(
                "layer: S/MIME authEnveloped-data ({})",
                smime_type.as_deref().unwrap_or("-")
            ));
            if let Ok(aed) = ci.content.decode_as::<AuthEnvelopedData>() {
                out.push(format!(
                    "  content encryption: {}",
                    content_alg_name(&aed.auth_encrypted_content_info.content_enc_alg)
                ));
                recipient_lines(&aed.recip_infos, &mut out);
                out.push(
                    "  the signature inside is visible only after decryption (use open)".into(),
                );
            }
        }
        ID_ENVELOPED_DATA => {
            out.push(
                "layer: legacy EnvelopedData (CBC, no integrity): refused on open unless --allow-legacy-cbc".into(),
            );
            if let Ok(ed) = ci.content.decode_as::<EnvelopedData>() {
                out.push(format!(
                    "  content encryption: {}",
                    content_alg_name(&ed.encrypted_content.content_enc_alg)
                ));
                recipient_lines(&ed.recip_infos, &mut out);
            }
        }
        other => out.push(format!("layer: CMS content type {other}")),
    }
    Ok(out)
}
