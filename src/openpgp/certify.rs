//! Our OpenPGP key certifying another key of ours: a detached signature over a
//! statement (the MLS credential binding of [`crate::mls::authentication`]), and its
//! verification against the certificates this store holds for the address.

use super::OpenPgp;
use crate::seal::{OpenError, OpenPolicy, SealError};

impl OpenPgp<'_> {
    /// A binary detached signature over `statement`, made at `now` by our signing key
    /// for `address`.
    pub(crate) fn certify(
        &self,
        address: &str,
        statement: &[u8],
        now: time::OffsetDateTime,
    ) -> Result<Vec<u8>, SealError> {
        let view = self
            .certificates()
            .map_err(|e| super::OpenPgpError::Key(e.to_string()))?;
        let (_, pair) = self.signing_identity(&view, address, None)?;
        self.detached_signature(statement, pair, now)
    }

    /// Verifies a [`OpenPgp::certify`] certification: `signature` signs `statement`
    /// with a key of a certificate this store holds for `address`, valid at the
    /// policy's validation time.
    pub(crate) fn verify_certification(
        &self,
        address: &str,
        signature: &[u8],
        statement: &[u8],
        policy: &OpenPolicy,
    ) -> Result<(), OpenError> {
        let view = self
            .certificates()
            .map_err(|e| super::OpenPgpError::Key(e.to_string()))?;
        // The certificates naming `address` at the policy's time (`--at` or the time
        // of receipt), not at the wall clock.
        let at = std::time::SystemTime::from(policy.validation_time());
        let certs: Vec<_> = view
            .certificates_for(address, &self.policy, at)
            .into_iter()
            .cloned()
            .collect();
        if certs.is_empty() {
            return Err(super::OpenPgpError::UnknownSigner.into());
        }
        let signer = self.verify_detached(
            signature,
            super::open::Detached::Bytes(statement),
            &certs,
            at,
        )?;
        // The User ID for `address` was also valid when the certification says it was
        // made (a back-dated certification cannot lean on a User ID revoked since).
        if !signer
            .emails
            .iter()
            .any(|e| e.eq_ignore_ascii_case(address))
        {
            return Err(super::OpenPgpError::BadSignature(format!(
                "the certification is dated when the certificate's User ID for {address} was not valid (bound later, or revoked since)"
            ))
            .into());
        }
        Ok(())
    }
}
