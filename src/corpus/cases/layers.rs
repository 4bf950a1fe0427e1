//! Each profile's own layer, broken after sealing.

use base64::Engine;

use super::*;

/// The byte range of the body of the part that follows `marker` (its Content-Type
/// line): after its blank line, up to the CRLF before the next delimiter.
fn part_body(message: &[u8], marker: &[u8]) -> Option<std::ops::Range<usize>> {
    let at = memchr::memmem::rfind(message, marker)?;
    let start = at + memchr::memmem::find(&message[at..], b"\r\n\r\n")? + 4;
    let end = start + memchr::memmem::find(&message[start..], b"\r\n--")?;
    Some(start..end)
}

/// `message` with the body of the part after `marker` rewritten by `f`.
fn rewrite_part(message: Vec<u8>, marker: &[u8], f: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let Some(range) = part_body(&message, marker) else {
        return message;
    };
    let mut out = message[..range.start].to_vec();
    out.extend_from_slice(&f(&message[range.clone()]));
    out.extend_from_slice(&message[range.end..]);
    out
}

/// base64 (MIME, line breaks ignored) decoded, changed by `f`, encoded again in lines of
/// 76.
fn rebase64(body: &[u8], f: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let text: Vec<u8> = body
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let Ok(mut der) = base64::engine::general_purpose::STANDARD.decode(&text) else {
        return body.to_vec();
    };
    f(&mut der);
    let mut out = Vec::new();
    crate::message::transfer::push_base64_lines(
        &mut out,
        &der,
        crate::message::transfer::Width::Mime,
    );
    while out.ends_with(b"\r\n") {
        out.truncate(out.len() - 2);
    }
    out
}

/// An armored OpenPGP message (its base64 lines; no checksum line, RFC 9580 6.2: it is
/// optional) decoded, changed by `f`, armored again.
fn rearmor(armored: &[u8], f: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let text = String::from_utf8_lossy(armored);
    let body: String = text
        .lines()
        .skip_while(|l| !l.is_empty())
        .filter(|l| !l.is_empty() && !l.starts_with('=') && !l.starts_with("-----"))
        .collect();
    let Ok(mut data) = base64::engine::general_purpose::STANDARD.decode(body) else {
        return armored.to_vec();
    };
    f(&mut data);
    let mut out = b"-----BEGIN PGP MESSAGE-----\r\n\r\n".to_vec();
    crate::message::transfer::push_base64_lines(
        &mut out,
        &data,
        crate::message::transfer::Width::Mime,
    );
    out.extend_from_slice(b"-----END PGP MESSAGE-----");
    out
}

/// A CMS SignedData with its SignerInfos emptied (certificates and content kept).
fn without_signer_infos(der: &mut Vec<u8>) {
    use der::{Decode, Encode};
    let Ok(info) = cms::content_info::ContentInfo::from_der(der) else {
        return;
    };
    let Ok(mut signed) = info.content.decode_as::<cms::signed_data::SignedData>() else {
        return;
    };
    signed.signer_infos = cms::signed_data::SignerInfos(Default::default());
    let Ok(content) = der::Any::encode_from(&signed) else {
        return;
    };
    let info = cms::content_info::ContentInfo {
        content_type: info.content_type,
        content,
    };
    if let Ok(bytes) = info.to_der() {
        *der = bytes;
    }
}

/// The first Symmetrically Encrypted Integrity Protected Data packet (tag 18) of an
/// OpenPGP message retagged Symmetrically Encrypted Data (tag 9), its body kept: the
/// packets before it (the session keys) are walked by their lengths.
fn seipd_to_sed(data: &mut [u8]) {
    let mut at = 0;
    while let Some(&head) = data.get(at) {
        if head & 0x80 == 0 {
            return;
        }
        let new_format = head & 0x40 != 0;
        let tag = if new_format {
            head & 0x3f
        } else {
            (head >> 2) & 0x0f
        };
        if tag == 18 {
            data[at] = if new_format {
                0xc0 | 9
            } else {
                0x80 | (9 << 2) | (head & 3)
            };
            return;
        }
        // (header length, body length) of a packet before it: never a partial or an
        // indeterminate length (only the encrypted data streams).
        let len = |from: usize, n: usize| {
            data.get(from..from + n)
                .map(|b| b.iter().fold(0usize, |acc, &x| acc << 8 | x as usize))
        };
        let (header, body) = if new_format {
            match data.get(at + 1) {
                Some(&l @ 0..=191) => (2, l as usize),
                Some(&l @ 192..=223) => match data.get(at + 2) {
                    Some(&l2) => (3, ((l as usize - 192) << 8) + l2 as usize + 192),
                    None => return,
                },
                Some(255) => match len(at + 2, 4) {
                    Some(n) => (6, n),
                    None => return,
                },
                _ => return,
            }
        } else {
            let n = match head & 3 {
                0 => 1,
                1 => 2,
                2 => 4,
                _ => return,
            };
            match len(at + 1, n) {
                Some(body) => (1 + n, body),
                None => return,
            }
        };
        at += header + body;
    }
}

/// Each profile's own layer: its structure and its cryptography broken after sealing,
/// an encrypted message nobody signed, an expired certificate, no protection at all.
pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let parties = b.parties;
    type Break = fn(Vec<u8>) -> Vec<u8>;
    let breaks: Vec<(Mode, &str, &'static str, Break, &str)> = vec![
        (
            Mode::SmimeSigned,
            "signature-value-changed",
            "smime.bad-signature",
            |m| {
                rewrite_part(m, b"Content-Type: application/pkcs7-signature", |body| {
                    rebase64(body, |der| {
                        if let Some(last) = der.last_mut() {
                            *last ^= 0x01;
                        }
                    })
                })
            },
            "the last byte of the signature value flipped",
        ),
        (
            Mode::SmimeSigned,
            "signature-not-cms",
            "smime.malformed",
            |m| {
                rewrite_part(m, b"Content-Type: application/pkcs7-signature", |_| {
                    b"bm90IGEgQ01TIHN0cnVjdHVyZQ==".to_vec()
                })
            },
            "the signature part is not CMS",
        ),
        (
            Mode::Jws,
            "jws-alg-none",
            "jws.header",
            |m| {
                rewrite_part(m, b"Content-Type: application/jose", |body| {
                    let dot = body.iter().position(|&c| c == b'.').unwrap_or(0);
                    let mut out = b"eyJhbGciOiJub25lIn0".to_vec();
                    out.extend_from_slice(&body[dot..]);
                    out
                })
            },
            "the JWS protected header says alg none",
        ),
        (
            Mode::Jws,
            "jws-not-compact",
            "jws.malformed",
            |m| {
                rewrite_part(m, b"Content-Type: application/jose", |_| {
                    b"this is not a JWS".to_vec()
                })
            },
            "the signature part is not a compact JWS",
        ),
        (
            Mode::OpenPgpEncrypted,
            "encrypted-part-not-openpgp",
            "openpgp.malformed",
            |m| {
                rewrite_part(m, b"Content-Type: application/octet-stream", |_| {
                    b"-----BEGIN PGP MESSAGE-----\r\n\r\nbm90IE9wZW5QR1A=\r\n-----END PGP MESSAGE-----".to_vec()
                })
            },
            "the encrypted part is not OpenPGP data",
        ),
        (
            Mode::SmimeEncrypted,
            "ciphertext-changed",
            "smime.undecryptable",
            |m| {
                let Some(start) = memchr::memmem::find(&m, b"\r\n\r\n").map(|i| i + 4) else {
                    return m;
                };
                let mut out = m[..start].to_vec();
                out.extend_from_slice(&rebase64(&m[start..], |der| {
                    // Inside the encrypted content: the last 16 bytes are the tag.
                    let at = der.len().saturating_sub(40);
                    if let Some(b) = der.get_mut(at) {
                        *b ^= 0x01;
                    }
                }));
                out.extend_from_slice(b"\r\n");
                out
            },
            "one byte of the AES-GCM ciphertext flipped",
        ),
        (
            Mode::SmimeSigned,
            "digest-algorithm-sha224",
            "smime.unsupported-algorithm",
            |m| {
                rewrite_part(m, b"Content-Type: application/pkcs7-signature", |body| {
                    rebase64(body, |der| {
                        // id-sha256 to id-sha224 wherever the (unsigned) digest
                        // algorithm is named.
                        const SHA256: &[u8] = &[6, 9, 0x60, 0x86, 0x48, 1, 0x65, 3, 4, 2, 1];
                        let mut at = 0;
                        while let Some(i) = memchr::memmem::find(&der[at..], SHA256) {
                            der[at + i + SHA256.len() - 1] = 4;
                            at += i + SHA256.len();
                        }
                    })
                })
            },
            "the digest algorithm renamed SHA-224 in the unsigned fields",
        ),
        (
            Mode::OpenPgpEncrypted,
            "ciphertext-changed",
            "openpgp.undecryptable",
            |m| {
                rewrite_part(m, b"Content-Type: application/octet-stream", |armored| {
                    rearmor(armored, |data| {
                        let at = data.len().saturating_sub(30);
                        if let Some(b) = data.get_mut(at) {
                            *b ^= 0x01;
                        }
                    })
                })
            },
            "one byte of the encrypted data flipped",
        ),
        (
            Mode::SmimeEncrypted,
            "certs-only-media-type",
            "smime.not-signed",
            |m| {
                replace_bytes(
                    m,
                    b"smime-type=\"authEnveloped-data\"",
                    b"smime-type=\"certs-only\"",
                )
            },
            "the outer Content-Type says certs-only: no signed message",
        ),
        (
            Mode::SmimeSigned,
            "no-signer-info",
            "smime.no-signer",
            |m| {
                rewrite_part(m, b"Content-Type: application/pkcs7-signature", |body| {
                    rebase64(body, without_signer_infos)
                })
            },
            "a SignedData with its certificates and no SignerInfo: nobody signed",
        ),
        (
            Mode::OpenPgpEncrypted,
            "sed-packet",
            "openpgp.no-integrity",
            |m| {
                rewrite_part(m, b"Content-Type: application/octet-stream", |armored| {
                    rearmor(armored, |data| seipd_to_sed(data))
                })
            },
            "the encrypted data in a Symmetrically Encrypted Data packet (RFC 9580 5.7: no integrity protection, refused before decryption)",
        ),
    ];
    for (mode, name, code, f, what) in breaks {
        // A wrong smime-type parameter is above the cryptography: OpenSSL decrypts and
        // verifies the message all the same.
        let crypto = if name == "certs-only-media-type" {
            Crypto::Pass
        } else {
            Crypto::Fail
        };
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let sealed = b.seal(name, &d, b.alice(mode))?;
        let id = format!("{}--{name}", mode.name());
        b.push(
            id,
            Rule::Refuse(code),
            what,
            mode,
            f(sealed),
            vec![],
            crypto,
        )?;
    }
    // Encrypted to Bob, signed by nobody.
    for (mode, code) in [
        (Mode::SmimeEncrypted, "smime.encrypted-not-signed"),
        (Mode::OpenPgpEncrypted, "openpgp.unsigned"),
    ] {
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let sealing = Sealing {
            sign: false,
            ..b.alice(mode)
        };
        b.add(
            "encrypted-not-signed",
            Rule::Refuse(code),
            "encrypted to Bob, signed by nobody",
            &d,
            sealing,
            vec![],
            Crypto::Fail,
        )?;
    }
    // Alice's certificate from Bob's CA, expired a year ago.
    for mode in [Mode::SmimeSigned, Mode::SmimeEncrypted] {
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let sealing = Sealing {
            // While the certificate was valid (it was, from 430 to 400 days before).
            signed_at: time::OffsetDateTime::from_unix_timestamp(crate::corpus::NOW - 420 * 86_400)
                .ok(),
            ..b.by(mode, &parties.expired)
        };
        b.add(
            "certificate-expired",
            Rule::Refuse("smime.certificate"),
            "signed with Alice's certificate from Bob's CA, expired a year before",
            &d,
            sealing,
            vec![],
            Crypto::Fail,
        )?;
    }
    // No protection: an effectful request needs at least a signature.
    let env = b.request("message/send");
    let d = b.draft(Mode::Plain, &env)?;
    b.add(
        "unsigned-request",
        Rule::Refuse("open.downgrade"),
        "a message/send request neither signed nor encrypted",
        &d,
        b.alice(Mode::Plain),
        vec![],
        Crypto::Fail,
    )?;
    legacy_cbc(b)
}

/// Signed by Alice, encrypted to Bob in legacy CBC EnvelopedData.
fn legacy_cbc_message(b: &mut Builder<'_>, id: &str) -> Result<Vec<u8>, CorpusError> {
    let mode = Mode::SmimeEncrypted;
    let env = b.request("message/send");
    let d = b.draft(mode, &env)?;
    let entity = inner_entity(id, &d.msg, true)?;
    crate::smime::Smime::new(&b.parties.alice.store)
        .seal_raw_legacy_cbc(
            &d.msg.headers,
            &d.msg.headers.hints,
            &entity,
            ALICE,
            &[BOB.to_string(), ALICE.to_string()],
            at(),
        )
        .map_err(|source| CorpusError::Seal {
            case: id.into(),
            source,
        })
}

/// Legacy CBC EnvelopedData (no integrity, EFAIL): refused by default; read, when the
/// receiver allows it, with every failure after the decryption one error.
fn legacy_cbc(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let mode = Mode::SmimeEncrypted;
    let id = format!("{}--legacy-cbc", mode.name());
    let message = legacy_cbc_message(b, &id)?;
    // OpenSSL decrypts and verifies it: the refusal is our policy, above its layer.
    b.push(
        id,
        Rule::Refuse("smime.legacy-encryption"),
        "signed by Alice, encrypted to Bob in AES-256-CBC EnvelopedData (no integrity)",
        mode,
        message,
        vec![],
        Crypto::Pass,
    )?;
    let allow = CasePolicy {
        allow_legacy_cbc: true,
        ..CasePolicy::default()
    };
    b.under(allow, |b| {
        let id = format!("{}--valid--legacy-cbc-allowed", mode.name());
        let message = legacy_cbc_message(b, &id)?;
        b.push(
            id,
            Rule::Accept,
            "legacy CBC EnvelopedData to a receiver that allows it",
            mode,
            message,
            vec![],
            Crypto::Pass,
        )?;
        // A byte of the last block's padding changed, and a byte of the content: the
        // receiver must say the same of both (else it is a padding oracle).
        for (name, from_end, what) in [
            ("padding", 17, "the padding no longer checks"),
            ("content", 200, "the signed entity no longer verifies"),
        ] {
            let id = format!("{}--legacy-cbc-{name}-changed", mode.name());
            let message = legacy_cbc_message(b, &id)?;
            let message = {
                let start = memchr::memmem::find(&message, b"\r\n\r\n").map_or(0, |i| i + 4);
                let mut out = message[..start].to_vec();
                out.extend_from_slice(&rebase64(&message[start..], |der| {
                    // CBC: a byte flipped in one block flips the same byte of the
                    // next block's plaintext (the last 16 bytes are the last block).
                    let at = der.len().saturating_sub(from_end);
                    if let Some(b) = der.get_mut(at) {
                        *b ^= 0x01;
                    }
                }));
                out.extend_from_slice(b"\r\n");
                out
            };
            b.push(
                id,
                Rule::Refuse("smime.legacy-undecryptable"),
                &format!("legacy CBC EnvelopedData, a ciphertext byte flipped so that {what}, to a receiver that allows legacy CBC"),
                mode,
                message,
                vec![],
                Crypto::Fail,
            )?;
        }
        Ok(())
    })
}
