//! The OpenPGP half of offline signing (`crate::offline`): a v4 detached signature
//! split into what the connected host fixes (the hashed subpacket area: creation
//! time, issuer, Sequoia's salt notation) and what only the key can make (the
//! signature over the entity and that area).
//!
//! The connected host builds the area with Sequoia's own `SignatureBuilder::pre_sign`
//! (the same fields a `seal --sign-only` signature has); the offline host reads it
//! back through Sequoia's packet parser, refuses any subpacket but those four kinds,
//! and signs the digest it computes itself. No subpacket bytes are parsed here by hand.

use sequoia_openpgp as openpgp;

use openpgp::crypto::{mpi, Signer};
use openpgp::packet::key::{PublicParts, UnspecifiedRole};
use openpgp::packet::signature::subpacket::{SubpacketArea, SubpacketTag, SubpacketValue};
use openpgp::packet::signature::{Signature4, SignatureBuilder};
use openpgp::packet::{Key, Packet, Signature};
use openpgp::parse::Parse;
use openpgp::serialize::MarshalInto;
use openpgp::types::{HashAlgorithm, PublicKeyAlgorithm, SignatureType};
use time::OffsetDateTime;

use super::{OpenPgp, OpenPgpError};

/// `t` as Sequoia's time type (whole seconds, as OpenPGP states them).
pub(super) fn system_time(t: OffsetDateTime) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.unix_timestamp().max(0) as u64)
}

/// The salt notation Sequoia adds to every v4 signature.
const SALT_NOTATION: &str = "salt@notations.sequoia-pgp.org";

/// What the connected host fixes of a v4 binary signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Template {
    /// The signing (sub)key's fingerprint, lower-case hex.
    pub key: String,
    /// Its public-key algorithm (RFC 9580 9.1).
    pub pk_algo: u8,
    /// The hashed subpacket area, serialized.
    pub hashed_area: Vec<u8>,
}

impl Template {
    /// The bytes hashed after the entity (RFC 9580 5.2.4, v4): version, type,
    /// algorithms, the hashed area with its length, and the final trailer.
    pub(crate) fn trailer(&self) -> Vec<u8> {
        let len = self.hashed_area.len();
        let mut out = Vec::with_capacity(len + 12);
        out.extend_from_slice(&[4, 0x00, self.pk_algo, 8]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&self.hashed_area);
        out.extend_from_slice(&[4, 0xff]);
        out.extend_from_slice(&((6 + len) as u32).to_be_bytes());
        out
    }
}

fn sequoia(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> OpenPgpError {
    OpenPgpError::Sequoia(e.into())
}

fn refused(why: impl Into<String>) -> OpenPgpError {
    OpenPgpError::OfflineRequest(why.into())
}

/// Only the public half: enough for `pre_sign`, which reads the key and never signs.
struct PublicOnly(Key<PublicParts, UnspecifiedRole>);

impl Signer for PublicOnly {
    fn public(&self) -> &Key<PublicParts, UnspecifiedRole> {
        &self.0
    }
    fn sign(&mut self, _: HashAlgorithm, _: &[u8]) -> openpgp::Result<mpi::Signature> {
        Err(anyhow::anyhow!("the connected host holds no secret key"))
    }
}

/// A placeholder signature value of the right shape for `pk_algo`, so a template
/// can go through Sequoia's packet parser before anything is signed.
fn placeholder(pk_algo: PublicKeyAlgorithm) -> Result<mpi::Signature, OpenPgpError> {
    let one = || mpi::MPI::new(&[1]);
    Ok(match pk_algo {
        PublicKeyAlgorithm::RSAEncryptSign => mpi::Signature::RSA { s: one() },
        PublicKeyAlgorithm::EdDSA => mpi::Signature::EdDSA { r: one(), s: one() },
        PublicKeyAlgorithm::ECDSA => mpi::Signature::ECDSA { r: one(), s: one() },
        other => return Err(refused(format!("no offline signing with a {other} key"))),
    })
}

/// The template's fields as Sequoia reads them, checked: a binary-document v4
/// signature by `key` with SHA-256, and in its hashed area a creation time, the issuer
/// (key id and fingerprint of `key`) and the salt notation, each once, nothing else.
fn read_template(
    template: &Template,
    key: &Key<PublicParts, UnspecifiedRole>,
) -> Result<(Signature, OffsetDateTime), OpenPgpError> {
    let pk_algo = PublicKeyAlgorithm::from(template.pk_algo);
    if pk_algo != key.pk_algo() || template.key != key.fingerprint().to_hex().to_ascii_lowercase() {
        return Err(refused("the signature template names another key"));
    }
    if template.hashed_area.len() > u16::MAX as usize {
        return Err(refused("the hashed area is too long"));
    }
    let mut body = vec![4, 0x00, template.pk_algo, 8];
    body.extend_from_slice(&(template.hashed_area.len() as u16).to_be_bytes());
    body.extend_from_slice(&template.hashed_area);
    body.extend_from_slice(&[0, 0, 0, 0]);
    body.extend_from_slice(&placeholder(pk_algo)?.to_vec().map_err(sequoia)?);
    // Sequoia's signature parser reads the packet body.
    let sig = Signature::from_bytes(&body)
        .map_err(|e| refused(format!("the signature template does not parse: {e}")))?;
    if sig.version() != 4
        || sig.typ() != SignatureType::Binary
        || sig.hash_algo() != HashAlgorithm::SHA256
    {
        return Err(refused(
            "the template is not a v4 binary signature with SHA-256",
        ));
    }
    let mut seen = Vec::new();
    for sp in sig.hashed_area().iter() {
        let tag = sp.tag();
        if seen.contains(&tag) {
            return Err(refused(format!("the template repeats subpacket {tag:?}")));
        }
        seen.push(tag);
        match sp.value() {
            SubpacketValue::SignatureCreationTime(_) => {}
            SubpacketValue::Issuer(id) if *id == key.keyid() => {}
            SubpacketValue::IssuerFingerprint(fp) if *fp == key.fingerprint() => {}
            SubpacketValue::NotationData(n)
                if n.name() == SALT_NOTATION && !sp.critical() && n.value().len() <= 64 => {}
            _ => {
                return Err(refused(format!(
                    "the template carries a subpacket the offline host does not sign: {tag:?}"
                )))
            }
        }
    }
    for needed in [
        SubpacketTag::SignatureCreationTime,
        SubpacketTag::IssuerFingerprint,
    ] {
        if !seen.contains(&needed) {
            return Err(refused(format!("the template has no {needed:?}")));
        }
    }
    let created = sig
        .signature_creation_time()
        .ok_or_else(|| refused("the template has no creation time"))?;
    let secs = created
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| refused("the creation time is before 1970"))?
        .as_secs();
    let created = OffsetDateTime::from_unix_timestamp(secs as i64)
        .map_err(|_| refused("the creation time is out of range"))?;
    Ok((sig, created))
}

/// SHA-256 over `entity` and the template's trailer, through Sequoia's own hashing of
/// the parsed template; checked against the trailer the request states.
fn digest(template: &Template, sig: &Signature, entity: &[u8]) -> Result<Vec<u8>, OpenPgpError> {
    use openpgp::crypto::hash::Hash;
    let mut ctx = HashAlgorithm::SHA256
        .context()
        .map_err(sequoia)?
        .for_signature(4);
    ctx.update(entity);
    sig.hash(&mut ctx).map_err(sequoia)?;
    let digest = ctx.into_digest().map_err(sequoia)?;
    let mut ours = HashAlgorithm::SHA256
        .context()
        .map_err(sequoia)?
        .for_signature(4);
    ours.update(entity);
    ours.update(&template.trailer());
    if ours.into_digest().map_err(sequoia)? != digest {
        return Err(refused("the template's trailer is not what Sequoia hashes"));
    }
    Ok(digest)
}

impl OpenPgp<'_> {
    /// Connected host: the template of a signature by `address`'s newest certificate
    /// with a signing key alive at `at` (the one whose store fingerprint is `chosen`,
    /// when given), and the certificate's fingerprint.
    pub(crate) fn signature_template(
        &self,
        address: &str,
        at: OffsetDateTime,
        chosen: Option<&str>,
    ) -> Result<(String, Template), OpenPgpError> {
        let view = self.certificates().map_err(|e| refused(e.to_string()))?;
        let when = system_time(at);
        for cert in Self::certificates_for(&view, address) {
            if chosen.is_some_and(|f| {
                !crate::keystore::openpgp::fingerprint(cert).eq_ignore_ascii_case(f)
            }) {
                continue;
            }
            let Ok(valid) = cert.with_policy(&self.policy, when) else {
                continue;
            };
            let Some(ka) = valid
                .keys()
                .for_signing()
                .alive()
                .revoked(false)
                .supported()
                .next()
            else {
                continue;
            };
            let key = ka.key().clone().role_into_unspecified();
            if key.version() != 4 {
                return Err(refused(format!(
                    "offline signing takes v4 OpenPGP keys (what GnuPG 2.2 reads); {address}'s \
                     signing key is v{}",
                    key.version()
                )));
            }
            let fpr = key.fingerprint().to_hex().to_ascii_lowercase();
            let pk_algo = u8::from(key.pk_algo());
            let builder = SignatureBuilder::new(SignatureType::Binary)
                .set_hash_algo(HashAlgorithm::SHA256)
                .set_signature_creation_time(when)
                .map_err(sequoia)?
                .pre_sign(&PublicOnly(key))
                .map_err(sequoia)?;
            let hashed_area = builder.hashed_area().to_vec().map_err(sequoia)?;
            return Ok((
                super::keys::fingerprint(cert),
                Template {
                    key: fpr,
                    pk_algo,
                    hashed_area,
                },
            ));
        }
        Err(refused(format!(
            "no OpenPGP certificate for {address} with a signing key valid at that time"
        )))
    }

    /// The public signing key `template` names, in the certificate `cert_fpr` of
    /// the store, valid for signing at `at`.
    fn template_key(
        &self,
        cert_fpr: &str,
        template: &Template,
        at: OffsetDateTime,
    ) -> Result<Key<PublicParts, UnspecifiedRole>, OpenPgpError> {
        let view = self.certificates().map_err(|e| refused(e.to_string()))?;
        let cert = view
            .certs
            .iter()
            .find(|c| super::keys::fingerprint(c) == cert_fpr)
            .ok_or_else(|| refused(format!("no certificate {cert_fpr} in the store")))?;
        let valid = cert
            .with_policy(&self.policy, system_time(at))
            .map_err(|e| refused(format!("the certificate is not valid then: {e}")))?;
        valid
            .keys()
            .for_signing()
            .alive()
            .revoked(false)
            .find(|ka| ka.key().fingerprint().to_hex().to_ascii_lowercase() == template.key)
            .map(|ka| ka.key().clone().role_into_unspecified())
            .ok_or_else(|| refused("the template names no signing key of that certificate"))
    }

    /// Either host: `template` holds together (see [`read_template`]), was made at
    /// `at`, and its trailer is what is hashed after `entity`.
    pub(crate) fn check_template(
        &self,
        cert_fpr: &str,
        template: &Template,
        at: OffsetDateTime,
        entity: &[u8],
    ) -> Result<(), OpenPgpError> {
        let public = self.template_key(cert_fpr, template, at)?;
        let (sig, created) = read_template(template, &public)?;
        if created != at {
            return Err(refused("the template's creation time is not the request's"));
        }
        digest(template, &sig, entity).map(|_| ())
    }

    /// Offline host: checks `template` (see [`read_template`]) and that it was made
    /// at `at`, then signs `entity` with the secret key; the signature packet.
    pub(crate) fn sign_template(
        &self,
        cert_fpr: &str,
        template: &Template,
        at: OffsetDateTime,
        entity: &[u8],
    ) -> Result<Vec<u8>, OpenPgpError> {
        let public = self.template_key(cert_fpr, template, at)?;
        let (sig, created) = read_template(template, &public)?;
        if created != at {
            return Err(refused("the template's creation time is not the request's"));
        }
        let digest = digest(template, &sig, entity)?;
        let secret = self
            .store
            .openpgp_secret_key(cert_fpr)
            .map_err(|e| refused(e.to_string()))?
            .and_then(|b| self.parsed.secret(&b, &self.policy))
            .ok_or_else(|| refused(format!("no secret key for {cert_fpr} in this store")))?;
        let ka = secret
            .tsk
            .keys()
            .secret()
            .find(|ka| ka.key().fingerprint() == public.fingerprint())
            .ok_or_else(|| refused("the secret certificate lacks the signing key"))?;
        if !ka.key().has_unencrypted_secret() {
            return Err(refused("the signing key is locked"));
        }
        let mut pair = ka
            .key()
            .clone()
            .role_into_unspecified()
            .into_keypair()
            .map_err(sequoia)?;
        let mpis = pair.sign(HashAlgorithm::SHA256, &digest).map_err(sequoia)?;
        let signed = Signature4::new(
            SignatureType::Binary,
            public.pk_algo(),
            HashAlgorithm::SHA256,
            sig.hashed_area().clone(),
            SubpacketArea::default(),
            [digest[0], digest[1]],
            mpis,
        );
        let signed = Signature::from(signed);
        signed
            .verify_message(&public, entity)
            .map_err(|_| refused("the key's signature does not verify"))?;
        Packet::from(signed).to_vec().map_err(sequoia)
    }

    /// The message `headers` (Subject obscured) with `entity` (signed elsewhere)
    /// encrypted to a certificate of each of `addresses`, unsigned (RFC 3156 6.1).
    pub(crate) fn encrypt_signed_entity(
        &self,
        headers: &crate::message::Headers,
        hints: &crate::message::Hints,
        entity: &[u8],
        addresses: &[String],
    ) -> Result<Vec<u8>, crate::seal::SealError> {
        let view = self.certificates()?;
        let recipients = self.recipient_certificates(&view, addresses, &[])?;
        let binary = self.encrypt_only(entity, &recipients)?;
        super::seal::encrypted_message(headers, hints, &binary)
    }

    /// Connected host: `packet` is one v4 signature whose hashed area is the
    /// template's, made by its key over `entity`.
    pub(crate) fn check_signature_packet(
        &self,
        cert_fpr: &str,
        template: &Template,
        at: OffsetDateTime,
        entity: &[u8],
        packet: &[u8],
    ) -> Result<(), OpenPgpError> {
        let public = self.template_key(cert_fpr, template, at)?;
        let sig = match Packet::from_bytes(packet) {
            Ok(Packet::Signature(sig)) => sig,
            Ok(_) => return Err(refused("the response carries no signature packet")),
            Err(e) => {
                return Err(refused(format!(
                    "the response's signature does not parse: {e}"
                )))
            }
        };
        if sig.hashed_area().to_vec().map_err(sequoia)? != template.hashed_area
            || sig.unhashed_area().iter().next().is_some()
            || sig.version() != 4
            || sig.typ() != SignatureType::Binary
            || sig.hash_algo() != HashAlgorithm::SHA256
            || Packet::from(sig.clone()).to_vec().map_err(sequoia)? != packet
        {
            return Err(refused(
                "the response's signature is not over the request's template",
            ));
        }
        sig.verify_message(&public, entity)
            .map_err(|e| OpenPgpError::BadSignature(e.to_string()))
    }
}

/// A signed-only PGP/MIME message (RFC 3156 5): `head`, then `multipart/signed` over
/// `entity` with the binary signature `packet`, armored.
pub(crate) fn signed_message(head: &[u8], boundary: &str, entity: &[u8], packet: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len() + entity.len() + packet.len() * 2 + 512);
    out.extend_from_slice(head);
    out.extend_from_slice(
        b"Content-Type: multipart/signed; micalg=\"pgp-sha256\";\r\n protocol=\"application/pgp-signature\";\r\n boundary=\"",
    );
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"\"\r\n\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(entity);
    out.extend_from_slice(b"\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(
        b"\r\nContent-Type: application/pgp-signature; name=\"signature.asc\"\r\n\
Content-Description: OpenPGP digital signature\r\n\
Content-Disposition: attachment; filename=\"signature.asc\"\r\n\r\n",
    );
    super::armor::push_armored(&mut out, "PGP SIGNATURE", packet);
    out.extend_from_slice(b"\r\n--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"--\r\n");
    out
}
