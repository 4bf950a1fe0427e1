//! What a misconfigured or lenient peer writes, for the conformance corpus's cases
//! (`crate::corpus`): handshake messages in clear, Welcomes without the ratchet tree,
//! KeyPackages valid for a year or of another cipher suite. Crate-internal: nothing a
//! caller can send with.
//! Every refusal these reach is tested against real peers too (mls-rs, in
//! `tests/mls/mls_rs_peer.rs`); here they give the corpus its cases without mls-rs.

use openmls::prelude::*;

use super::{parse_group_id, Mls, MlsError};

impl Mls {
    /// From now on, this member's handshake messages in `group` go out as
    /// PublicMessages when `plaintext_handshake`, and its Welcomes without the
    /// ratchet tree when `!ratchet_tree`.
    pub(crate) fn misconfigure(
        &self,
        group: &str,
        plaintext_handshake: bool,
        ratchet_tree: bool,
    ) -> Result<(), MlsError> {
        let id = parse_group_id(group)?;
        let mut config = MlsGroupJoinConfig::builder()
            .max_past_epochs(self.config.past_epochs)
            .use_ratchet_tree_extension(ratchet_tree);
        if plaintext_handshake {
            config = config.wire_format_policy(PURE_PLAINTEXT_WIRE_FORMAT_POLICY);
        }
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        g.set_configuration(self.state.provider.storage(), &config.build())
            .map_err(|e| MlsError::State(format!("{e:?}")))?;
        tx.commit()?;
        self.cache_put(g);
        Ok(())
    }

    /// A KeyPackage mail of `email` valid for `seconds`.
    pub(crate) fn key_package_lasting(
        &self,
        email: &str,
        seconds: u64,
    ) -> Result<Vec<u8>, MlsError> {
        let bytes = self.new_key_package(email, false, Some(seconds), super::CIPHERSUITE)?;
        self.key_package_mail(email, &bytes)
    }

    /// A KeyPackage mail of `email` for cipher `suite` (one with an Ed25519 signature,
    /// so that the identity's key signs it), which our groups do not use.
    pub(crate) fn key_package_of_suite(
        &self,
        email: &str,
        suite: Ciphersuite,
    ) -> Result<Vec<u8>, MlsError> {
        let bytes = self.new_key_package(email, false, None, suite)?;
        self.key_package_mail(email, &bytes)
    }
}
