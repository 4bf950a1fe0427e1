//! The signed entity's MIME structure and machine part, broken under the signature.

use super::*;

/// The inner entity's MIME structure and its machine part broken under the signature.
pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let table: Vec<(&str, Mutation, &'static str)> = vec![
        (
            "no-machine-part",
            |e| {
                replace(
                    e,
                    "Content-Type: application/a2a+json",
                    "Content-Type: application/json",
                )
            },
            "message.no-machine-part",
        ),
        (
            "unsupported-charset",
            |e| {
                replace(
                    e,
                    "Content-Type: application/a2a+json; charset=\"utf-8\"",
                    "Content-Type: application/a2a+json; charset=\"iso-8859-1\"",
                )
            },
            "message.unsupported-charset",
        ),
        (
            "duplicate-from",
            |e| replace(e, "From: ", "From: <mallory@smime.example>\r\nFrom: "),
            "message.duplicate-header",
        ),
        (
            "header-not-a-field",
            |e| {
                replace(
                    e,
                    "Subject: ",
                    "this line is not a header field\r\nSubject: ",
                )
            },
            "message.bad-header",
        ),
        (
            "invalid-json",
            |e| replace(e, "\"bindingVersion\"", "\"bindingVersion"),
            "message.invalid-json",
        ),
        (
            "duplicate-json-key",
            |e| {
                replace(
                    e,
                    "\"kind\":\"request\"",
                    "\"kind\":\"request\",\"kind\":\"request\"",
                )
            },
            "message.duplicate-key",
        ),
        (
            "json-array",
            |e| {
                // The machine part's body: the line after its header section.
                let Some(part) = memchr::memmem::find(&e, b"Content-Type: application/a2a+json")
                else {
                    return e;
                };
                let Some(blank) = memchr::memmem::find(&e[part..], b"\r\n\r\n") else {
                    return e;
                };
                let start = part + blank + 4;
                let Some(len) = memchr::memmem::find(&e[start..], b"\r\n") else {
                    return e;
                };
                let mut out = e[..start].to_vec();
                out.extend_from_slice(b"[1]");
                out.extend_from_slice(&e[start + len..]);
                out
            },
            "message.must-be-map",
        ),
        (
            "control-character-in-json",
            |e| replace(e, "Summarize the report.", "Summarize the \u{0}report."),
            "message.invalid-json",
        ),
        (
            "mime-ten-levels-deep",
            |e| around(&e, &nested(10)),
            "message.mime-too-deep",
        ),
        (
            "seventy-parts",
            |e| around(&e, &many_parts(70)),
            "message.too-many-parts",
        ),
        (
            "json-seventy-levels-deep",
            |e| {
                let deep = format!("{{\"metadata\":{}{}", "[".repeat(70), "]".repeat(70));
                replace(e, "{\"a2aVersion\"", &format!("{deep},\"a2aVersion\""))
            },
            "message.json-too-deep",
        ),
        (
            "invalid-utf8-in-json",
            |e| replace_bytes(e, b"Summarize the report.", b"Summarize the \xffreport."),
            "message.invalid-utf8",
        ),
        (
            "no-close-delimiter",
            |e| {
                let Some(end) = memchr::memmem::rfind(&e, b"--\r\n") else {
                    return e;
                };
                let mut out = e[..end].to_vec();
                out.extend_from_slice(b"\r\n");
                out
            },
            "message.bad-multipart",
        ),
        (
            "unknown-transfer-encoding",
            |e| {
                replace(e, "Content-Type: application/a2a+json; charset=\"utf-8\"\r\nContent-Transfer-Encoding: 7bit", "Content-Type: application/a2a+json; charset=\"utf-8\"\r\nContent-Transfer-Encoding: x-uuencode")
            },
            "message.unknown-transfer-encoding",
        ),
        (
            "bad-base64",
            |e| {
                let e = replace(e, "Content-Type: application/a2a+json; charset=\"utf-8\"\r\nContent-Transfer-Encoding: 7bit", "Content-Type: application/a2a+json; charset=\"utf-8\"\r\nContent-Transfer-Encoding: base64");
                replace(e, "{\"a2aVersion\"", "!!!!{\"a2aVersion\"")
            },
            "message.bad-transfer-encoding",
        ),
        (
            "second-machine-part",
            |e| {
                let Some(part) = memchr::memmem::find(&e, b"Content-Type: application/a2a+json")
                else {
                    return e;
                };
                let Some(next) = memchr::memmem::find(&e[part..], b"\r\n--") else {
                    return e;
                };
                let machine = e[part..part + next + 2].to_vec();
                let mut out = e[..part + next + 2].to_vec();
                let Some(delim_len) = memchr::memmem::find(&e[part + next + 2..], b"\r\n") else {
                    return e;
                };
                let delimiter = e[part + next + 2..part + next + 2 + delim_len + 2].to_vec();
                out.extend_from_slice(&delimiter);
                out.extend_from_slice(&machine);
                out.extend_from_slice(&e[part + next + 2..]);
                out
            },
            "message.multiple-machine-parts",
        ),
    ];
    for (i, (name, f, code)) in table.into_iter().enumerate() {
        for mode in [
            MODES[i % MODES.len()],
            MODES[(i + 1) % MODES.len()],
            MODES[(i + 3) % MODES.len()],
        ] {
            let env = b.request("message/send");
            let mut d = b.draft(mode, &env)?;
            d.mutate = Some(f);
            b.add(
                name,
                Rule::Refuse(code),
                &format!("the signed inner entity: {name}"),
                &d,
                b.alice(mode),
                vec![],
                Crypto::Pass,
            )?;
        }
    }
    // Over the size limit (25 MiB): signed by Alice with a valid signature, refused
    // before anything is parsed. OpenSSL verifies it.
    {
        let mode = Mode::SmimeSigned;
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        let limit = crate::message::Limits::default().max_message_bytes;
        let line = "The report is long, and this line is one of many.\n";
        d.msg.text = Some(line.repeat(limit / line.len() + 1));
        b.add(
            "message-over-25-mib",
            Rule::Refuse("message.message-too-large"),
            "a validly signed message of over 25 MiB, the receiver's limit",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Pass,
        )?;
    }
    // A decompression bomb: Alice's valid signature over an entity of over 64 MiB (the
    // receiver's limit on what it decodes) in a compressed data packet, encrypted to
    // Bob: 270 KiB on the wire. Refused while it inflates, before the signature is
    // checked or the entity parsed. GnuPG decrypts it and finds the signature good.
    {
        let mode = Mode::OpenPgpEncrypted;
        let id = format!("{}--compressed-past-64-mib", mode.name());
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        let limit = crate::message::Limits::default().max_decoded_bytes;
        let line = "The report is long, and this line is one of many.\n";
        d.msg.text = Some(line.repeat(limit / line.len() + 1));
        let entity = inner_entity(&id, &d.msg, true)?;
        let message = crate::openpgp::OpenPgp::new(&b.parties.alice.store)
            .seal_raw_packets(
                &d.msg.headers,
                &d.msg.headers.hints,
                &entity,
                PGP_ALICE,
                Some(crate::openpgp::Recipients {
                    addresses: &[PGP_BOB.to_string(), PGP_ALICE.to_string()],
                    preferred: &[],
                    intended: None,
                }),
                at(),
                crate::openpgp::Packets {
                    compress: true,
                    ..Default::default()
                },
            )
            .map_err(|source| CorpusError::Seal {
                case: id.clone(),
                source,
            })?;
        b.push(
            id,
            Rule::Refuse("message.decoded-too-large"),
            "a compressed data packet, validly signed and encrypted, that inflates past 64 MiB",
            mode,
            message,
            vec![],
            Crypto::Pass,
        )?;
    }
    // Bytes that are no message at all. (Inside a signature the same bytes are a bad
    // header: a signed entity is read with the outer header fields in front of it, as
    // a legacy entity without protected header fields would be.)
    {
        let mode = Mode::Plain;
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        d.mutate = Some(|_| b"\x00\x01 not a header field\r\n".to_vec());
        b.add(
            "not-mime",
            Rule::Refuse("message.not-mime"),
            "bytes that are no message: no header field first",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Fail,
        )?;
    }
    Ok(())
}

/// The entity `e`'s header fields above its Content-Type, then `body` (which brings
/// its own Content-Type): the signed headers kept, the MIME structure replaced.
fn around(e: &[u8], body: &str) -> Vec<u8> {
    let end = memchr::memmem::find(e, b"Content-Type: multipart/mixed").unwrap_or(0);
    let mut out = e[..end].to_vec();
    out.extend_from_slice(body.as_bytes());
    out
}

/// `levels` multiparts, each the only part of the one above, around a text part.
fn nested(levels: usize) -> String {
    let mut out = String::new();
    for i in 0..levels {
        out.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=\"level{i}\"\r\n\r\n--level{i}\r\n"
        ));
    }
    out.push_str("Content-Type: text/plain\r\n\r\ndeep\r\n");
    for i in (0..levels).rev() {
        out.push_str(&format!("--level{i}--\r\n"));
    }
    out
}

/// A multipart of `n` text parts.
fn many_parts(n: usize) -> String {
    let mut out = String::from("Content-Type: multipart/mixed; boundary=\"many\"\r\n\r\n");
    for i in 0..n {
        out.push_str(&format!(
            "--many\r\nContent-Type: text/plain\r\n\r\npart {i}\r\n"
        ));
    }
    out.push_str("--many--\r\n");
    out
}
