//! A GroupInfo travels sealed, never in clear (issue #17): whoever holds a GroupInfo
//! learns the group's members and, where the group accepts external joins, can ask to
//! join. So the member who invites writes the GroupInfo mail (`message/mls`) as the
//! inner entity of an S/MIME message signed by its key and encrypted to the one
//! invited; the one invited opens it with its own key, checks that the signer is
//! trusted for the inner From and is a member of the group the GroupInfo describes,
//! and only then joins by external commit.

use super::authentication::Authenticator;
use super::wire::{self, Body};
use super::{parse_group_id, Mls, MlsError};
use crate::keystore::KeyStore;
use crate::message::Mailbox;
use crate::seal::OpenPolicy;

impl Mls {
    /// The GroupInfo of `group` sealed to `to` (S/MIME: signed by our key, encrypted
    /// to theirs), for [`Mls::join_sealed`].
    pub fn sealed_group_info(
        &self,
        group: &str,
        to: &str,
        store: &dyn KeyStore,
    ) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let me = self.active_member(&id)?;
        let to = to.trim().to_ascii_lowercase();
        if !Mailbox::new(&to).is_valid_addr_spec() {
            return Err(MlsError::Usage(format!("{to}: not an email address")));
        }
        let inner = self.group_info_to(group, std::slice::from_ref(&to))?;
        let headers = self.headers(&me, std::slice::from_ref(&to), "MLS group info")?;
        crate::smime::Smime::new(store)
            .seal_entity(&headers, &inner)
            .map_err(|e| MlsError::Usage(format!("sealing the GroupInfo to {to}: {e}")))
    }

    /// Joins by external commit from a GroupInfo mail sealed by [`Mls::sealed_group_info`],
    /// as `email`: it must decrypt with our key and be signed by a certificate `store`
    /// trusts (under `policy`) for the inner mail's From, who must be a member of the
    /// group; every member's leaf must authenticate under `auth`. A GroupInfo in clear
    /// is refused. Returns the group id and the Commit mail for the members.
    pub fn join_sealed(
        &self,
        sealed: &[u8],
        email: &str,
        store: &dyn KeyStore,
        policy: &OpenPolicy,
        auth: &dyn Authenticator,
    ) -> Result<(String, Vec<u8>), MlsError> {
        let (inner, inviter) = open_group_info(sealed, store, policy)?;
        self.join_external_from(&inner, email, auth, Some(&inviter))
    }
}

/// The GroupInfo mail inside a sealed one, and its verified signer's address (which
/// the inner From names).
fn open_group_info(
    sealed: &[u8],
    store: &dyn KeyStore,
    policy: &OpenPolicy,
) -> Result<(Vec<u8>, String), MlsError> {
    if crate::dispatch::detect_profile(sealed) == Some(crate::profile::Profile::Mls) {
        return Err(MlsError::Binding(
            "a GroupInfo in clear: a GroupInfo is accepted only sealed to us (mls group-info --to)"
                .into(),
        ));
    }
    let signed = crate::smime::Smime::new(store).verified_entity(sealed, policy)?;
    let crate::seal::SignerIdentity::Certificate { emails, .. } = &signed.signer else {
        return Err(MlsError::Binding(
            "the GroupInfo is not signed under S/MIME".into(),
        ));
    };
    let mail = wire::read_mail(&signed.entity, &policy.limits)?;
    let inviter = mail
        .headers
        .from
        .as_ref()
        .map(|m| m.normalized())
        .ok_or_else(|| MlsError::Malformed("a GroupInfo mail without From".into()))?;
    if !emails.contains(&inviter) {
        return Err(MlsError::Binding(format!(
            "the GroupInfo's From {inviter} is not its signer's address"
        )));
    }
    if !matches!(
        wire::split(wire::decode(&mail.message)?)?.1,
        Body::GroupInfo(_)
    ) {
        return Err(MlsError::Malformed(
            "the sealed mail holds no GroupInfo".into(),
        ));
    }
    Ok((signed.entity, inviter))
}
