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
                    // The armor's base64 lines, one byte near the end of the encrypted
                    // data flipped; no checksum line (RFC 9580 6.2: it is optional).
                    let text = String::from_utf8_lossy(armored);
                    let body: String = text
                        .lines()
                        .skip_while(|l| !l.is_empty())
                        .filter(|l| !l.is_empty() && !l.starts_with('=') && !l.starts_with("-----"))
                        .collect();
                    let Ok(mut data) = base64::engine::general_purpose::STANDARD.decode(body)
                    else {
                        return armored.to_vec();
                    };
                    let at = data.len().saturating_sub(30);
                    if let Some(b) = data.get_mut(at) {
                        *b ^= 0x01;
                    }
                    let mut out = b"-----BEGIN PGP MESSAGE-----\r\n\r\n".to_vec();
                    crate::message::transfer::push_base64_lines(
                        &mut out,
                        &data,
                        crate::message::transfer::Width::Mime,
                    );
                    out.extend_from_slice(b"-----END PGP MESSAGE-----");
                    out
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
    Ok(())
}
