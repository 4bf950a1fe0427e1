//! Writing PGP/MIME: RFC 3156 section 4 (`multipart/encrypted`, the signature inside
//! the encryption) and section 5 (`multipart/signed`, detached signature over the
//! canonical inner entity).

use std::io::Write;

use sequoia_openpgp as openpgp;

use openpgp::cert::prelude::*;

use openpgp::crypto::KeyPair;
use openpgp::serialize::stream::{
    Compressor, Encryptor, LiteralWriter, Message, Recipient, Signer,
};
use openpgp::types::{CompressionAlgorithm, DataFormat, HashAlgorithm};

use super::OpenPgp;
use crate::message::{write_header_section, Hints, MailA2aMessage};
use crate::profile::Profile;
use crate::seal::random_boundary;
use crate::seal::{SealError, SealOptions, Sealer, SignatureEdit};

/// Sequoia's error (an `anyhow::Error` or an I/O error while writing packets), kept as
/// the source of ours.
fn crypto(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SealError {
    super::OpenPgpError::Sequoia(e.into()).into()
}

impl OpenPgp<'_> {
    /// Our certificate for `address` with an unlocked secret signing key valid now:
    /// the one whose store fingerprint is `chosen` (`--signer`), else the first.
    pub(super) fn signing_identity<'v>(
        &self,
        view: &'v super::parsed::View,
        address: &str,
        chosen: Option<&str>,
    ) -> Result<(&'v Cert, KeyPair), SealError> {
        for cert in Self::certificates_for(view, address) {
            if chosen.is_some_and(|f| {
                !crate::keystore::openpgp::fingerprint(cert).eq_ignore_ascii_case(f)
            }) {
                continue;
            }
            let Some(secret) = self.secret_for(cert)? else {
                continue;
            };
            let Ok(valid) = secret.tsk.with_policy(&self.policy, None) else {
                continue;
            };
            let key = valid
                .keys()
                .secret()
                .for_signing()
                .alive()
                .revoked(false)
                .supported()
                .find(|ka| ka.key().has_unencrypted_secret());
            if let Some(ka) = key {
                let pair = ka.key().clone().into_keypair().map_err(crypto)?;
                return Ok((cert, pair));
            }
        }
        Err(match chosen {
            Some(f) => SealError::NoSuchSigner {
                address: address.to_string(),
                signer: f.to_string(),
            },
            None => SealError::NoSigningKey {
                address: address.to_string(),
            },
        })
    }

    /// One certificate for each address, with the address: when an address has
    /// several, the newest with a usable transport-encryption key (a single one is
    /// checked when the message is encrypted, in [`Self::seal_raw_packets`]).
    pub(super) fn recipient_certificates<'v>(
        &self,
        view: &'v super::parsed::View,
        addresses: &'v [String],
        preferred: &[String],
    ) -> Result<Vec<(&'v str, &'v Cert)>, SealError> {
        let mut out: Vec<(&str, &Cert)> = Vec::new();
        for address in addresses {
            let mut candidates = Self::certificates_for(view, address);
            // The card's keys first, the newest among them (a stable sort).
            candidates
                .sort_by_key(|c| !preferred.contains(&crate::keystore::openpgp::fingerprint(c)));
            let usable = if candidates.len() == 1 {
                candidates.first().copied()
            } else {
                candidates.into_iter().find(|c| {
                    c.with_policy(&self.policy, None).is_ok_and(|v| {
                        v.keys()
                            .supported()
                            .alive()
                            .revoked(false)
                            .for_transport_encryption()
                            .next()
                            .is_some()
                    })
                })
            };
            match usable {
                Some(c) if !out.iter().any(|(_, o)| o.fingerprint() == c.fingerprint()) => {
                    out.push((address, c))
                }
                Some(_) => {}
                None => {
                    return Err(SealError::NoRecipientKey {
                        address: address.clone(),
                    })
                }
            }
        }
        Ok(out)
    }

    /// The encryption keys of every recipient (each must have one).
    fn recipient_keys<'c>(
        &'c self,
        recipients: &'c [(&str, &Cert)],
    ) -> Result<Vec<RecipientKey<'c>>, SealError> {
        let mut keys = Vec::new();
        for (address, c) in recipients {
            let v = c
                .with_policy(&self.policy, None)
                .map_err(|_| SealError::NoRecipientKey {
                    address: address.to_string(),
                })?;
            let before = keys.len();
            keys.extend(
                v.keys()
                    .supported()
                    .alive()
                    .revoked(false)
                    .for_transport_encryption()
                    .map(|ka| (ka.valid_cert().features(), ka.key())),
            );
            if keys.len() == before {
                return Err(SealError::NoRecipientKey {
                    address: address.to_string(),
                });
            }
        }
        Ok(keys)
    }

    /// The binary OpenPGP message: `entity` encrypted to every recipient, unsigned
    /// (RFC 3156 6.1: the entity is itself `multipart/signed`, signed elsewhere).
    pub(super) fn encrypt_only(
        &self,
        entity: &[u8],
        recipients: &[(&str, &Cert)],
    ) -> Result<Vec<u8>, SealError> {
        let at = time::OffsetDateTime::now_utc();
        self.encrypt(entity, None, recipients, &[], Packets::default(), at)
    }

    /// `entity` as a literal packet, signed by `signer` if given (naming `intended` as
    /// its intended recipients), the whole in a compressed data packet if `compress`,
    /// rewritten by `edit` if given, encrypted to every recipient; the signature made
    /// at `at`.
    fn encrypt(
        &self,
        entity: &[u8],
        signer: Option<KeyPair>,
        recipients: &[(&str, &Cert)],
        intended: &[(&str, &Cert)],
        packets: Packets<'_>,
        at: time::OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        let keys = self.recipient_keys(recipients)?;
        if crate::entropy::is_seeded() {
            return seeded_encrypt(entity, signer, &keys, intended, packets, at);
        }
        let keys = keys
            .into_iter()
            .map(|(features, key)| Recipient::new(features, key.key_handle(), key));
        let mut binary = Vec::with_capacity(entity.len() + 4096);
        let message = Message::new(&mut binary);
        let mut message = Encryptor::for_recipients(message, keys)
            .build()
            .map_err(crypto)?;
        match packets.edit {
            None => write_signed(message, entity, signer, intended, packets.compress, at)?,
            Some(edit) => {
                // The signed packets whole, then rewritten, then encrypted.
                let mut plain = Vec::with_capacity(entity.len() + 1024);
                write_signed(
                    Message::new(&mut plain),
                    entity,
                    signer,
                    intended,
                    packets.compress,
                    at,
                )?;
                message.write_all(&edit(plain)).map_err(crypto)?;
                message.finalize().map_err(crypto)?;
            }
        }
        Ok(binary)
    }

    /// The binary detached signature of `entity`.
    pub(super) fn detached_signature(
        &self,
        entity: &[u8],
        signer: KeyPair,
        at: time::OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        let mut binary = Vec::new();
        let message = Message::new(&mut binary);
        // A copy of the key only where the corpus resalts the signature.
        let mut resalt = crate::entropy::is_seeded().then(|| signer.clone());
        let mut signing = Signer::new(message, signer)
            .map_err(crypto)?
            .hash_algo(HashAlgorithm::SHA256)
            .map_err(crypto)?
            .creation_time(super::offline::system_time(at))
            .detached()
            .build()
            .map_err(crypto)?;
        signing.write_all(entity).map_err(crypto)?;
        signing.finalize().map_err(crypto)?;
        let Some(key) = resalt.as_mut() else {
            return Ok(binary);
        };
        crate::entropy::with_seeded(|rng| super::seeded::resalt_detached(&binary, entity, key, rng))
            .ok_or(SealError::NoRandomness)?
            .map_err(crypto)
    }
}

/// An encryption key of a recipient, and the features their certificate advertises.
type RecipientKey<'c> = (
    Option<openpgp::types::Features>,
    &'c openpgp::packet::Key<
        openpgp::packet::key::PublicParts,
        openpgp::packet::key::UnspecifiedRole,
    >,
);

/// [`OpenPgp::encrypt`] inside the corpus's seeded scope ([`crate::entropy`]): the
/// same packets, their salts, session key and ephemeral keys from the seeded stream
/// ([`super::seeded`]).
fn seeded_encrypt(
    entity: &[u8],
    signer: Option<KeyPair>,
    keys: &[RecipientKey<'_>],
    intended: &[(&str, &Cert)],
    packets: Packets<'_>,
    at: time::OffsetDateTime,
) -> Result<Vec<u8>, SealError> {
    let mut plain = Vec::with_capacity(entity.len() + 1024);
    let mut resalt = signer.clone();
    write_signed(
        Message::new(&mut plain),
        entity,
        signer,
        intended,
        false,
        at,
    )?;
    let keys: Vec<_> = keys.iter().map(|(_, key)| *key).collect();
    crate::entropy::with_seeded(|rng| {
        if let Some(signer) = resalt.as_mut() {
            plain = super::seeded::resalt_inline(&plain, signer, rng)?;
        }
        if packets.compress {
            let mut compressed = Vec::with_capacity(plain.len());
            let mut message = Compressor::new(Message::new(&mut compressed))
                .algo(CompressionAlgorithm::Zip)
                .build()?;
            message.write_all(&plain)?;
            message.finalize()?;
            plain = compressed;
        }
        if let Some(edit) = packets.edit {
            plain = edit(std::mem::take(&mut plain));
        }
        super::seeded::encrypt(&plain, &keys, rng)
    })
    .ok_or(SealError::NoRandomness)?
    .map_err(crypto)
}

/// How the packets inside the encryption are written, where the conformance corpus
/// wants them otherwise (the sealer itself never compresses or edits).
#[derive(Clone, Copy, Default)]
pub(crate) struct Packets<'a> {
    /// The signed packets in a compressed data packet (deflate). We never compress
    /// what we send (RFC 9580 permits it, and a receiver must bound what it inflates):
    /// only the corpus does, to make a decompression bomb that is validly signed.
    pub(crate) compress: bool,
    /// The signed packets (or the detached signature) rewritten below the signature
    /// (`--layer packets`).
    pub(crate) edit: Option<SignatureEdit<'a>>,
    /// The signing certificate, by its store fingerprint ([`SealOptions::signer`]).
    pub(crate) signer: Option<&'a str>,
}

/// Writes `entity` into `message` as a literal packet, signed by `signer` if given
/// (naming `intended` as its intended recipients), the whole compressed if
/// `compress`, and finishes the message.
fn write_signed(
    mut message: Message<'_>,
    entity: &[u8],
    signer: Option<KeyPair>,
    intended: &[(&str, &Cert)],
    compress: bool,
    at: time::OffsetDateTime,
) -> Result<(), SealError> {
    // Compressed around the signed packets, as GnuPG writes it (and reads it: with
    // the one-pass signature outside and the literal data inside the compressed
    // packet, GnuPG 2.2 decrypts and reports no signature at all).
    if compress {
        message = Compressor::new(message)
            .algo(CompressionAlgorithm::Zip)
            .build()
            .map_err(crypto)?;
    }
    if let Some(signer) = signer {
        let mut signing = Signer::new(message, signer)
            .map_err(crypto)?
            .hash_algo(HashAlgorithm::SHA256)
            .map_err(crypto)?
            .creation_time(super::offline::system_time(at));
        for (_, r) in intended {
            signing = signing.add_intended_recipient(r);
        }
        message = signing.build().map_err(crypto)?;
    }
    let mut literal = LiteralWriter::new(message)
        .format(DataFormat::Binary)
        .build()
        .map_err(crypto)?;
    literal.write_all(entity).map_err(crypto)?;
    literal.finalize().map_err(crypto)
}

fn outer_hints(msg: &MailA2aMessage, opts: &SealOptions) -> Hints {
    if opts.outer_hints {
        msg.headers.hints.clone()
    } else {
        Hints::binding_only()
    }
}

impl Sealer for OpenPgp<'_> {
    fn seal(&self, plain: &MailA2aMessage, opts: &SealOptions) -> Result<Vec<u8>, SealError> {
        let (from, addresses) = crate::seal::sealing_addresses(plain, opts, Profile::OpenPgp)?;
        let at = opts
            .signing_time
            .unwrap_or_else(time::OffsetDateTime::now_utc);
        // RFC 3156 5: a signed part is 7-bit, CRLF.
        let mut entity = Vec::new();
        plain.write_inner_entity(
            !opts.sign_only,
            opts.binary_inside && !opts.sign_only,
            &mut entity,
        )?;
        let encrypt_to = Recipients {
            addresses: &addresses,
            preferred: &opts.preferred_keys,
            intended: None,
        };
        self.seal_raw_packets(
            &plain.headers,
            &outer_hints(plain, opts),
            &entity,
            &from,
            (!opts.sign_only).then_some(encrypt_to),
            at,
            Packets {
                signer: opts.signer.as_deref(),
                ..Packets::default()
            },
        )
    }

    /// Each address judged as [`Sealer::seal`] judges a recipient (a certificate,
    /// then a live transport-encryption key in it), over the store's certificates
    /// read once.
    fn without_key(
        &self,
        addresses: &[String],
        preferred: &[String],
    ) -> Result<Vec<(String, SealError)>, SealError> {
        let view = self.certificates()?;
        let mut out = Vec::new();
        for address in addresses {
            let checked = self
                .recipient_certificates(&view, std::slice::from_ref(address), preferred)
                .and_then(|certs| self.recipient_keys(&certs).map(drop));
            match checked {
                Ok(()) => {}
                Err(e) if e.recipient_without_key().is_some() => out.push((address.clone(), e)),
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// Whom a message is encrypted to: their addresses, and the keys to take first (an
/// Agent Card's).
#[derive(Clone, Copy)]
pub(crate) struct Recipients<'a> {
    pub(crate) addresses: &'a [String],
    pub(crate) preferred: &'a [String],
    /// Whom the signature names as its intended recipients (RFC 9580 5.2.3.36), when
    /// not those it is encrypted to: only the conformance corpus sets it, to make
    /// what a forwarder who re-encrypts a signed message makes.
    pub(crate) intended: Option<&'a [String]>,
}

impl OpenPgp<'_> {
    /// `entity` as it is, signed by our key for `signer` and, given `recipients`,
    /// encrypted to them and to the signer, under `headers` and outer `hints`. Nothing
    /// of `entity` is checked: the sealer's own last step, and what the conformance
    /// corpus ([`crate::corpus`]) seals its hostile inner entities with.
    pub(crate) fn seal_raw(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signer: &str,
        recipients: Option<Recipients<'_>>,
        at: time::OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        let packets = Packets::default();
        self.seal_raw_packets(headers, hints, entity, signer, recipients, at, packets)
    }

    /// [`Self::seal_raw`] with the packets written as `packets` says: compressed, or
    /// rewritten below the signature (the detached signature when not encrypted).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn seal_raw_packets(
        &self,
        headers: &crate::message::Headers,
        hints: &Hints,
        entity: &[u8],
        signer: &str,
        recipients: Option<Recipients<'_>>,
        at: time::OffsetDateTime,
        packets: Packets<'_>,
    ) -> Result<Vec<u8>, SealError> {
        let view = self.certificates()?;
        let (own, signing_key) = self.signing_identity(&view, signer, packets.signer)?;
        let Some(to) = recipients else {
            // RFC 3156 5: the signature covers the entity from its first header to the
            // CRLF before the next delimiter. The boundary follows from the entity and
            // the time (as offline signing writes it).
            let boundary = crate::seal::content_boundary(entity, at)?;
            let mut signature = self.detached_signature(entity, signing_key, at)?;
            if let Some(edit) = packets.edit {
                signature = edit(signature);
            }
            let mut head = Vec::new();
            write_header_section(&mut head, headers, hints)?;
            return Ok(super::offline::signed_message(
                &head, &boundary, entity, &signature,
            ));
        };
        // Recipients first: a message that cannot reach every recipient is not signed.
        let mut certs = self.recipient_certificates(&view, to.addresses, to.preferred)?;
        if !certs
            .iter()
            .any(|(_, c)| c.fingerprint() == own.fingerprint())
        {
            certs.push((signer, own));
        }
        let intended = match to.intended {
            None => None,
            Some(intended) => Some(self.recipient_certificates(&view, intended, &[])?),
        };
        let intended = intended.as_deref().unwrap_or(&certs);
        let binary = self.encrypt(entity, Some(signing_key), &certs, intended, packets, at)?;
        encrypted_message(headers, hints, &binary)
    }
}

/// A whole `multipart/encrypted` message around the binary OpenPGP message: `headers`
/// with an obscured Subject (RFC 9788) and `hints`.
pub(super) fn encrypted_message(
    headers: &crate::message::Headers,
    hints: &Hints,
    binary: &[u8],
) -> Result<Vec<u8>, SealError> {
    let boundary = random_boundary()?;
    let mut outer = headers.clone();
    outer.subject = Some("[...]".into());
    let mut out = Vec::with_capacity(binary.len() / 48 * 66 + 1024);
    write_header_section(&mut out, &outer, hints)?;
    push_encrypted(&mut out, &boundary, binary);
    Ok(out)
}

/// The `multipart/encrypted` body of RFC 3156 4 around the binary OpenPGP message.
pub(super) fn push_encrypted(out: &mut Vec<u8>, boundary: &str, binary: &[u8]) {
    out.extend_from_slice(
        b"Content-Type: multipart/encrypted;\r\n protocol=\"application/pgp-encrypted\";\r\n boundary=\"",
    );
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"\"\r\n\r\nThis is an OpenPGP/MIME encrypted message (RFC 3156).\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(
        b"\r\nContent-Type: application/pgp-encrypted\r\n\
Content-Description: PGP/MIME version identification\r\n\r\nVersion: 1\r\n\r\n--",
    );
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(
        b"\r\nContent-Type: application/octet-stream; name=\"encrypted.asc\"\r\n\
Content-Description: OpenPGP encrypted message\r\n\
Content-Disposition: inline; filename=\"encrypted.asc\"\r\n\r\n",
    );
    super::armor::push_armored(out, "PGP MESSAGE", binary);
    out.extend_from_slice(b"\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"--\r\n");
}
