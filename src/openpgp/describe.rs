//! `inspect` for PGP/MIME: the layers, the session-key packets (recipients and
//! algorithms), the encryption container and the signatures, read without any key and
//! without decrypting. Nothing here is verified: it shows what the message claims.

use sequoia_openpgp as openpgp;

use openpgp::packet::{Packet, SEIP};
use openpgp::parse::{PacketParser, PacketParserResult, Parse};

use crate::message::{read_outer, Limits};
use crate::seal::OpenError;

fn packets(data: &[u8], out: &mut Vec<String>) -> Result<(), String> {
    let mut ppr = PacketParser::from_bytes(data).map_err(|e| e.to_string())?;
    let mut seen = 0;
    while let PacketParserResult::Some(pp) = ppr {
        seen += 1;
        if seen > 1000 {
            out.push("  ... (more packets not shown)".into());
            break;
        }
        match &pp.packet {
            Packet::PKESK(p) => out.push(format!(
                "  recipient: PKESK v{} {} to {}",
                p.version(),
                p.pk_algo(),
                p.recipient()
                    .map_or("anyone (anonymous)".to_string(), |h| key_handle(&h))
            )),
            Packet::SKESK(_) => out.push("  recipient: a password (SKESK)".into()),
            Packet::SEIP(SEIP::V1(_)) => {
                out.push("  encrypted: SEIPDv1 (CFB with MDC integrity)".into())
            }
            Packet::SEIP(SEIP::V2(s)) => out.push(format!(
                "  encrypted: SEIPDv2 {} {} (AEAD)",
                s.symmetric_algo(),
                s.aead()
            )),
            Packet::Signature(s) => out.push(format!(
                "  signature: {} {}/{} by {}{}",
                s.typ(),
                s.pk_algo(),
                s.hash_algo(),
                s.get_issuers()
                    .first()
                    .map_or("an unnamed key".to_string(), key_handle),
                s.signature_creation_time()
                    .map(|t| format!(
                        ", made {}",
                        time::OffsetDateTime::from(t)
                            .format(&time::format_description::well_known::Rfc3339)
                            .unwrap_or_default()
                    ))
                    .unwrap_or_default()
            )),
            Packet::OnePassSig(_) => {}
            other => {
                let tag = other.tag();
                if !matches!(tag, openpgp::packet::Tag::Marker) {
                    out.push(format!("  packet: {tag}"));
                }
            }
        }
        // Containers are not entered: their content is encrypted or compressed.
        ppr = pp.next().map_err(|e| e.to_string())?.1;
    }
    Ok(())
}

/// The lines `mailseal inspect` prints for a PGP/MIME message.
pub fn describe(raw: &[u8], limits: &Limits) -> Result<Vec<String>, OpenError> {
    let outer = read_outer(raw, limits)?;
    let mut out = Vec::new();
    let protocol = outer
        .param("protocol")
        .unwrap_or_default()
        .to_ascii_lowercase();
    match outer.media_type.as_str() {
        "multipart/encrypted" => {
            out.push(format!(
                "layer 1: OpenPGP/MIME encrypted (RFC 3156, protocol={protocol})"
            ));
            if let Some(data) = outer.parts.get(1) {
                match data.decoded() {
                    Ok(bytes) => {
                        if let Err(e) = packets(&bytes, &mut out) {
                            out.push(format!("  unreadable OpenPGP data: {e}"));
                        }
                    }
                    Err(e) => out.push(format!("  unreadable part: {e}")),
                }
            }
            out.push("layer 2: signed inner entity (inside the encryption; open to verify)".into());
        }
        "multipart/signed" => {
            out.push(format!(
                "layer 1: OpenPGP/MIME signed (RFC 3156, protocol={protocol}, micalg={})",
                outer.param("micalg").unwrap_or("-")
            ));
            if let Some(sig) = outer.parts.get(1) {
                match sig.decoded() {
                    Ok(bytes) => {
                        if let Err(e) = packets(&bytes, &mut out) {
                            out.push(format!("  unreadable signature: {e}"));
                        }
                    }
                    Err(e) => out.push(format!("  unreadable part: {e}")),
                }
            }
        }
        other => out.push(format!("layer 1: {other}, not PGP/MIME")),
    }
    Ok(out)
}

/// A key ID or fingerprint in the one form the command line shows a key's fingerprint
/// (`key list`): lower-case hex, no spaces.
fn key_handle(h: &openpgp::KeyHandle) -> String {
    h.to_hex().to_ascii_lowercase()
}
