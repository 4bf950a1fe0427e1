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
        let (_, pair) = self.signing_identity(&view, address)?;
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
        let certs: Vec<_> = Self::certificates_for(&view, address)
            .into_iter()
            .cloned()
            .collect();
        if certs.is_empty() {
            return Err(super::OpenPgpError::UnknownSigner.into());
        }
        let at = std::time::SystemTime::from(policy.validation_time());
        self.verify_detached(signature, statement, &certs, at)?;
        Ok(())
    }
}
