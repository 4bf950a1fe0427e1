//! What an S/MIME message shows without keys: its layers, algorithms, recipients and
//! signers (for `mailseal inspect`). Nothing here is verified; every line says so.

use cms::authenveloped_data::AuthEnvelopedData;
use cms::content_info::ContentInfo;
use cms::enveloped_data::{KeyAgreeRecipientIdentifier, RecipientIdentifier, RecipientInfo};
use cms::signed_data::{SignedData, SignerIdentifier};
use der::Decode;

use super::oids::*;
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
        ED25519 => "ed25519",
        AES256_GCM => "aes-256-gcm",
        AES128_GCM => "aes-128-gcm",
        DH_SHA1KDF => "ecdh-x963-sha1kdf",
        DH_SHA256KDF => "ecdh-x963-sha256kdf",
        DH_SHA384KDF => "ecdh-x963-sha384kdf",
        DH_SHA512KDF => "ecdh-x963-sha512kdf",
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
                .and_then(|d| ContentInfo::from_der(&d).ok())
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
    let Ok(ci) = ContentInfo::from_der(&body) else {
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
                    oid_name(aed.auth_encrypted_content_info.content_enc_alg.oid)
                ));
                for ri in aed.recip_infos.0.iter() {
                    match ri {
                        RecipientInfo::Ktri(k) => {
                            let who = match &k.rid {
                                RecipientIdentifier::IssuerAndSerialNumber(ias) => {
                                    format!(
                                        "issuer \"{}\" serial {}",
                                        ias.issuer, ias.serial_number
                                    )
                                }
                                RecipientIdentifier::SubjectKeyIdentifier(_) => {
                                    "subject key identifier".into()
                                }
                            };
                            out.push(format!(
                                "  recipient: {who}; key transport {}",
                                oid_name(k.key_enc_alg.oid)
                            ));
                        }
                        RecipientInfo::Kari(k) => {
                            for rek in &k.recipient_enc_keys {
                                let who = match &rek.rid {
                                    KeyAgreeRecipientIdentifier::IssuerAndSerialNumber(ias) => {
                                        format!(
                                            "issuer \"{}\" serial {}",
                                            ias.issuer, ias.serial_number
                                        )
                                    }
                                    KeyAgreeRecipientIdentifier::RKeyId(_) => {
                                        "key identifier".into()
                                    }
                                };
                                out.push(format!(
                                    "  recipient: {who}; key agreement {}",
                                    oid_name(k.key_enc_alg.oid)
                                ));
                            }
                        }
                        _ => out.push("  recipient: another kind (not supported here)".into()),
                    }
                }
                out.push(
                    "  the signature inside is visible only after decryption (use open)".into(),
                );
            }
        }
        ID_ENVELOPED_DATA => {
            out.push("layer: legacy EnvelopedData (CBC, no integrity): refused on open".into())
        }
        other => out.push(format!("layer: CMS content type {other}")),
    }
    Ok(out)
}
