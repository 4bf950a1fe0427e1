//! The S/MIME half of offline signing (`crate::offline`): the connected host holds
//! the signer's certificate only and fixes the signed attributes; the offline host
//! recomputes them from the entity, signs them with the key (a file key or a token's),
//! and the connected host checks the signature and builds the SignedData around it.

use time::OffsetDateTime;
use x509_cert::Certificate;

use super::{certificate, newest_first, signed_data, Smime, SmimeError};
use crate::message::{Headers, Hints};
use crate::seal::SealError;

impl Smime<'_> {
    /// Connected host: `address`'s newest certificate usable for signing at `at`, and
    /// its store fingerprint. Only the certificate is needed.
    /// With `chosen`, that certificate (by store fingerprint) or none.
    pub(crate) fn signing_certificate(
        &self,
        address: &str,
        at: OffsetDateTime,
        chosen: Option<&str>,
    ) -> Result<(Certificate, String), SealError> {
        newest_first(&self.loaded, self.store.certificates_for(address)?)
            .into_iter()
            .filter(|(_, stored)| chosen.is_none_or(|f| stored.fingerprint.eq_ignore_ascii_case(f)))
            .find(|(cert, _)| certificate::check_signer_usage(cert, at).is_ok())
            .map(|(cert, stored)| (cert, stored.fingerprint))
            .ok_or(SealError::NoSigningKey {
                address: address.to_string(),
            })
    }

    /// The certificate `fingerprint` of the store, if it is `address`'s and usable
    /// for signing at `at`.
    pub(crate) fn signer_certificate(
        &self,
        fingerprint: &str,
        address: &str,
        at: OffsetDateTime,
    ) -> Result<Certificate, SealError> {
        let (cert, _) = newest_first(&self.loaded, self.store.certificates_for(address)?)
            .into_iter()
            .find(|(_, stored)| stored.fingerprint == fingerprint)
            .ok_or(SealError::NoSigningKey {
                address: address.to_string(),
            })?;
        certificate::check_signer_usage(&cert, at)?;
        Ok(cert)
    }

    /// Offline host: signs the DER signed attributes with the private key of the
    /// certificate `fingerprint`.
    pub(crate) fn sign_attributes(
        &self,
        fingerprint: &str,
        cert: &Certificate,
        rsa_pss: bool,
        attrs_der: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let key = self
            .store
            .private_key(fingerprint)?
            .ok_or_else(|| SmimeError::Key("no private key for the certificate".into()))?;
        Ok(signed_data::sign_attributes(
            &self.loaded,
            &key,
            cert,
            rsa_pss,
            attrs_der,
        )?)
    }

    /// The message `headers` (Subject obscured) with `entity` (a whole MIME entity,
    /// here a signed one) encrypted in AuthEnvelopedData to a certificate of each of
    /// `addresses`: encryption without signing, for an entity signed elsewhere.
    pub(crate) fn encrypt_signed_entity(
        &self,
        headers: &Headers,
        hints: &Hints,
        entity: &[u8],
        addresses: &[String],
    ) -> Result<Vec<u8>, SealError> {
        let recipients = self.recipient_certificates(addresses, &[])?;
        let (buf, start) = super::enveloped::encrypt_into(
            &recipients,
            entity.len() + 1024,
            |buf: &mut Vec<u8>| -> Result<(), SealError> {
                buf.extend_from_slice(entity);
                Ok(())
            },
        )?;
        super::enveloped_message(headers, hints, &buf[start..])
    }
}

pub(crate) use signed_data::{check_attributes_signature, detached_from_parts, signed_attributes};
