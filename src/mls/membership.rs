//! Group membership by mail: create, add, remove, update, GroupInfo and external joins.

use openmls::prelude::*;
use rusqlite::{params, OptionalExtension};

use super::authentication::{self, Authenticator};
use super::identity::{check_from, checked_key_package, identity_of, lasting_key_package};
use super::wire::{self, Body};
use super::{group_id_text, now, op, parse_group_id, sha256, Mls, MlsError, CIPHERSUITE};

/// The two mails `mls add` writes.
#[derive(Debug)]
pub struct Added {
    /// The Commit, to the members before the add.
    pub commit: Vec<u8>,
    /// The Welcome, to the new members.
    pub welcome: Vec<u8>,
}

/// A group's members as this member sees them.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Members {
    /// The group id (base64url).
    pub group: String,
    /// Our epoch.
    pub epoch: u64,
    /// Our own identity in it.
    pub me: String,
    /// (leaf index, credential identity), in leaf order.
    pub members: Vec<(u32, String)>,
    /// Each member's MLS signature key (hex), in the same order: what
    /// [`super::PinnedKeys`] pins.
    pub signature_keys: Vec<String>,
}

/// Whether an added KeyPackage's lifetime may span more than ours do
/// (`identity::check_lifetime`).
#[derive(Clone, Copy)]
pub(super) enum LifetimeCap {
    /// At most 84 days and an hour: every add a caller makes.
    Ours,
    /// Any span that covers now: the conformance corpus's members, whose KeyPackages
    /// carry a fixed date and must stay valid on openmls' system clock for as long
    /// as the corpus is used (`conformance`).
    None,
}

impl Mls {
    /// The members a Commit of ours goes to: everyone else, or ourselves when alone
    /// (a mail needs a recipient).
    pub(super) fn commit_recipients(group: &MlsGroup, me: &str) -> Vec<String> {
        let to = Self::others(group, me);
        if to.is_empty() {
            vec![me.to_string()]
        } else {
            to
        }
    }

    /// Creates a group with `email` as its only member; returns its id (base64url).
    pub fn create_group(&self, email: &str) -> Result<String, MlsError> {
        self.create_group_with(email, None)
    }

    /// [`Mls::create_group`], our leaf valid for `lifetime` rather than openmls'
    /// 84 days from now (the conformance corpus's fixed dates).
    pub(super) fn create_group_with(
        &self,
        email: &str,
        lifetime: Option<Lifetime>,
    ) -> Result<String, MlsError> {
        let email = email.trim().to_ascii_lowercase();
        let me_id = self.signer(&email)?;
        let (signer, credential) = (&me_id.keys, me_id.credential.clone());
        let extensions = self.own_leaf_extensions(&email)?;
        let tx = self.state.begin()?;
        let config = MlsGroupCreateConfig::builder()
            .ciphersuite(CIPHERSUITE)
            .capabilities(authentication::capabilities(false))
            .with_leaf_node_extensions(extensions)
            .map_err(op)?
            .max_past_epochs(self.config.past_epochs)
            .use_ratchet_tree_extension(true)
            .sender_ratchet_configuration(SenderRatchetConfiguration::new(
                self.config.out_of_order_tolerance,
                self.config.max_forward_distance,
            ))
            .wire_format_policy(PURE_CIPHERTEXT_WIRE_FORMAT_POLICY);
        let config = match lifetime {
            Some(lifetime) => config.lifetime(lifetime),
            None => config,
        }
        .build();
        let group = MlsGroup::new(&self.state.provider, signer, &config, credential).map_err(op)?;
        let id = group.group_id().as_slice().to_vec();
        self.state.exec(
            "INSERT INTO mailseal_mls_group (group_id, email, joined_epoch) VALUES (?1, ?2, 0)",
            params![id, email],
        )?;
        tx.commit()?;
        self.versions.borrow_mut().insert(id.clone(), 0);
        self.cache_put(group);
        Ok(group_id_text(&id))
    }

    /// The identities of a group's members other than us.
    pub(super) fn others(group: &MlsGroup, me: &str) -> Vec<String> {
        group
            .members()
            .filter_map(|m| identity_of(&m.credential).ok())
            .filter(|i| i != me)
            .collect()
    }

    /// Records a Commit we made (so its copy coming back is a duplicate, and a
    /// different Commit for the same epoch a fork).
    pub(super) fn record_commit(
        &self,
        id: &[u8],
        epoch: u64,
        bytes: &[u8],
    ) -> Result<(), MlsError> {
        let digest = sha256(bytes);
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_commit (group_id, epoch, digest) VALUES (?1, ?2, ?3)",
            params![id, epoch as i64, digest],
        )?;
        self.record_seen(id, &digest, epoch, now())?;
        Ok(())
    }

    /// Merges the Commit we just made in `g` (framed at `epoch`), recording the leaves
    /// it empties ([`Mls::record_vacated`]).
    pub(super) fn merge_own_commit(
        &self,
        g: &mut MlsGroup,
        id: &[u8],
        epoch: u64,
    ) -> Result<(), MlsError> {
        if let Some(staged) = g.pending_commit() {
            self.record_vacated(id, epoch, staged)?;
        }
        g.merge_pending_commit(&self.state.provider).map_err(op)
    }

    /// Records the leaves the Commit `staged`, framed at `epoch`, removes from group
    /// `id`, and forgets those recorded before the oldest epoch whose secrets are
    /// kept: a message framed at or before `epoch` by one of those leaves was written
    /// by the member that left, whoever holds the leaf since ([`Mls::vacated_since`]).
    pub(super) fn record_vacated(
        &self,
        id: &[u8],
        epoch: u64,
        staged: &StagedCommit,
    ) -> Result<(), MlsError> {
        for removal in staged.remove_proposals() {
            self.state.exec(
                "INSERT OR IGNORE INTO mailseal_mls_vacated (group_id, leaf_index, epoch) VALUES (?1, ?2, ?3)",
                params![id, removal.remove_proposal().removed().u32(), epoch as i64],
            )?;
        }
        let floor = (epoch + 1).saturating_sub(self.config.past_epochs as u64 + 1);
        self.state.exec(
            "DELETE FROM mailseal_mls_vacated WHERE group_id = ?1 AND epoch < ?2",
            params![id, floor as i64],
        )?;
        Ok(())
    }

    /// Whether the leaf `leaf` of group `id` was emptied by a Commit framed at or after
    /// `epoch`: a message framed at `epoch` from that leaf is then the removed member's.
    pub(super) fn vacated_since(&self, id: &[u8], leaf: u32, epoch: u64) -> Result<bool, MlsError> {
        Ok(self
            .state
            .query_row(
                "SELECT 1 FROM mailseal_mls_vacated WHERE group_id = ?1 AND leaf_index = ?2 AND epoch >= ?3 LIMIT 1",
                params![id, leaf, epoch as i64],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Adds the members whose KeyPackage mails are given: a Commit for the group and a
    /// Welcome for them. Each KeyPackage must verify, name its mail's From, and be
    /// bound to its address under `auth`.
    pub fn add(
        &self,
        group: &str,
        key_package_mails: &[Vec<u8>],
        auth: &dyn Authenticator,
    ) -> Result<Added, MlsError> {
        self.add_mails(group, key_package_mails, auth, LifetimeCap::Ours)
    }

    /// [`Mls::add`], the lifetime cap aside when `cap` says so (the conformance
    /// corpus's members, `conformance::add_lasting`).
    pub(super) fn add_mails(
        &self,
        group: &str,
        key_package_mails: &[Vec<u8>],
        auth: &dyn Authenticator,
        cap: LifetimeCap,
    ) -> Result<Added, MlsError> {
        let mut packages = Vec::new();
        for raw in key_package_mails {
            let mail = wire::read_mail(raw, &self.limits)?;
            let Body::KeyPackage(kp) = wire::split(wire::decode(&mail.message)?)?.1 else {
                return Err(MlsError::Usage("not a KeyPackage mail".into()));
            };
            let (kp, identity) = match cap {
                LifetimeCap::Ours => checked_key_package(kp, self.state.provider.crypto())?,
                LifetimeCap::None => lasting_key_package(kp, self.state.provider.crypto())?,
            };
            check_from(&mail.headers, &identity)?;
            self.check_leaf(kp.leaf_node(), auth)?;
            packages.push((kp, identity));
        }
        self.add_packages(group, packages)
    }

    /// Adds `member` with a KeyPackage published for it (a bare MLSMessage, as an
    /// Agent Card carries it): the KeyPackage must verify, its credential must be
    /// `member`, bound to it under `auth`.
    pub fn add_published(
        &self,
        group: &str,
        member: &str,
        key_package: &[u8],
        auth: &dyn Authenticator,
    ) -> Result<Added, MlsError> {
        let member = member.trim().to_ascii_lowercase();
        let Body::KeyPackage(kp) = wire::split(wire::decode(key_package)?)?.1 else {
            return Err(MlsError::Usage(format!(
                "the KeyPackage published for {member} is not a KeyPackage"
            )));
        };
        let (kp, identity) = checked_key_package(kp, self.state.provider.crypto())?;
        if identity != member {
            return Err(MlsError::Binding(format!(
                "the KeyPackage published for {member} names {identity}"
            )));
        }
        self.check_leaf(kp.leaf_node(), auth)?;
        self.add_packages(group, vec![(kp, identity)])
    }

    pub(super) fn add_packages(
        &self,
        group: &str,
        checked: Vec<(KeyPackage, String)>,
    ) -> Result<Added, MlsError> {
        let id = parse_group_id(group)?;
        let (packages, joiners): (Vec<KeyPackage>, Vec<String>) = checked.into_iter().unzip();
        if packages.is_empty() {
            return Err(MlsError::Usage("no KeyPackage to add".into()));
        }
        let me = self.active_member(&id)?;
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let before = Self::others(&g, &me);
        if let Some(dup) = joiners.iter().find(|j| before.contains(j) || **j == me) {
            self.cache_put(g);
            return Err(MlsError::Usage(format!("{dup} is already a member")));
        }
        let epoch = g.epoch().as_u64();
        let (commit, welcome, _) = g
            .add_members(&self.state.provider, signer, &packages)
            .map_err(op)?;
        self.merge_own_commit(&mut g, &id, epoch)?;
        let commit = commit.to_bytes().map_err(op)?;
        let welcome = welcome.to_bytes().map_err(op)?;
        self.record_commit(&id, epoch, &commit)?;
        let to = if before.is_empty() {
            vec![me.clone()]
        } else {
            before
        };
        let added = Added {
            commit: self.mail(&me, &to, "MLS commit", &commit)?,
            welcome: self.mail(&me, &joiners, "MLS welcome", &welcome)?,
        };
        tx.commit()?;
        self.cache_put(g);
        Ok(added)
    }

    /// Removes `member` (its credential identity): a Commit to everyone, the removed
    /// member included, so it learns.
    pub fn remove(&self, group: &str, member: &str) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let member = member.trim().to_ascii_lowercase();
        let me = self.active_member(&id)?;
        if member == me {
            return Err(MlsError::Usage("a member cannot remove itself here".into()));
        }
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let leaf = g
            .members()
            .find(|m| identity_of(&m.credential).is_ok_and(|i| i == member))
            .map(|m| m.index);
        let Some(leaf) = leaf else {
            self.cache_put(g);
            return Err(MlsError::Usage(format!(
                "{member} is not a member of {group}"
            )));
        };
        let to = Self::others(&g, &me);
        let epoch = g.epoch().as_u64();
        let (commit, _, _) = g
            .remove_members(&self.state.provider, signer, &[leaf])
            .map_err(op)?;
        self.merge_own_commit(&mut g, &id, epoch)?;
        let commit = commit.to_bytes().map_err(op)?;
        self.record_commit(&id, epoch, &commit)?;
        let mail = self.mail(&me, &to, "MLS commit", &commit)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }

    /// A self-update (fresh leaf keys: post-compromise security): a Commit to the
    /// others. The new leaf carries our current certification, so an update after
    /// `key generate --kind mls` (say, with a renewed mail certificate) refreshes it.
    pub fn update(&self, group: &str) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let me = self.active_member(&id)?;
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let epoch = g.epoch().as_u64();
        // The capabilities too: a leaf made before the authentication service does
        // not list the extension it now carries.
        let leaf = LeafNodeParameters::builder()
            .with_capabilities(authentication::capabilities(false))
            .with_extensions(self.own_leaf_extensions(&me)?)
            .build();
        let bundle = g
            .self_update(&self.state.provider, signer, leaf)
            .map_err(op)?;
        self.merge_own_commit(&mut g, &id, epoch)?;
        let commit = bundle.commit().to_bytes().map_err(op)?;
        self.record_commit(&id, epoch, &commit)?;
        let to = Self::commit_recipients(&g, &me);
        let mail = self.mail(&me, &to, "MLS commit", &commit)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }

    /// A GroupInfo mail for the group (signed by us, with the ratchet tree), in clear:
    /// whoever holds it can ask to join by an external commit ([`Mls::join_external`])
    /// and learns the members. What leaves the machine is
    /// [`Mls::sealed_group_info`], this mail sealed to the one invited.
    pub fn group_info(&self, group: &str) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let me = self.active_member(&id)?;
        self.group_info_to(group, std::slice::from_ref(&me))
    }

    /// [`Mls::group_info`], addressed to `to`.
    pub(super) fn group_info_to(&self, group: &str, to: &[String]) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        // In a transaction: taking a group bumps its version (see `take_group`).
        let tx = self.state.begin()?;
        let me = self.active_member(&id)?;
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let g = self.take_group(&id)?;
        let info = g.export_group_info(self.state.provider.crypto(), signer, true);
        tx.commit()?;
        self.cache_put(g);
        let bytes = info.map_err(op)?.to_bytes().map_err(op)?;
        self.mail(&me, to, "MLS group info", &bytes)
    }

    /// Joins a group from its GroupInfo mail by an external commit, as `email`;
    /// returns the group id and the Commit mail for the members. Every member's leaf
    /// in the GroupInfo's tree must authenticate under `auth`.
    pub fn join_external(
        &self,
        group_info_mail: &[u8],
        email: &str,
        auth: &dyn Authenticator,
    ) -> Result<(String, Vec<u8>), MlsError> {
        self.join_external_from(group_info_mail, email, auth, None)
    }

    /// [`Mls::join_external`]; with `inviter` (the authenticated sender of a sealed
    /// GroupInfo), that address must be a member of the group.
    pub(super) fn join_external_from(
        &self,
        group_info_mail: &[u8],
        email: &str,
        auth: &dyn Authenticator,
        inviter: Option<&str>,
    ) -> Result<(String, Vec<u8>), MlsError> {
        let email = email.trim().to_ascii_lowercase();
        let mail = wire::read_mail(group_info_mail, &self.limits)?;
        let Body::GroupInfo(info) = wire::split(wire::decode(&mail.message)?)?.1 else {
            return Err(MlsError::Usage("not a GroupInfo mail".into()));
        };
        let me_id = self.signer(&email)?;
        let (signer, credential) = (&me_id.keys, me_id.credential.clone());
        let leaf = LeafNodeParameters::builder()
            .with_capabilities(authentication::capabilities(false))
            .with_extensions(self.own_leaf_extensions(&email)?)
            .build();
        let tx = self.state.begin()?;
        let (group, bundle) = MlsGroup::external_commit_builder()
            .with_config(self.join_config())
            .skip_lifetime_validation()
            .build_group(&self.state.provider, info, credential)
            .map_err(|e| MlsError::Invalid(format!("GroupInfo: {e}")))?
            .leaf_node_parameters(leaf)
            .load_psks(self.state.provider.storage())
            .map_err(op)?
            .build(
                self.state.provider.rand(),
                self.state.provider.crypto(),
                signer,
                |_| true,
            )
            .map_err(op)?
            .finalize(&self.state.provider)
            .map_err(op)?;
        // Before anything is kept (the transaction rolls back on error): the members
        // we would talk to are who they say. Who invites is not asked: joining by
        // GroupInfo is our own user's act, not something mail does to us.
        self.check_tree(&group, auth)?;
        if let Some(inviter) = inviter {
            if !Self::others(&group, &email).iter().any(|m| m == inviter) {
                return Err(MlsError::Binding(format!(
                    "the GroupInfo's signer {inviter} is not a member of the group"
                )));
            }
        }
        let id = group.group_id().as_slice().to_vec();
        let epoch = group.epoch().as_u64();
        let commit = bundle.commit().to_bytes().map_err(op)?;
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_group (group_id, email, joined_epoch, removed_epoch) VALUES (?1, ?2, ?3, NULL)",
            params![id, email, epoch as i64],
        )?;
        self.record_commit(&id, epoch.saturating_sub(1), &commit)?;
        self.versions.borrow_mut().insert(id.clone(), 0);
        let to = Self::commit_recipients(&group, &email);
        let out = self.mail(&email, &to, "MLS commit", &commit)?;
        tx.commit()?;
        self.cache_put(group);
        Ok((group_id_text(&id), out))
    }

    /// Whether this member applies external commits (joins by GroupInfo) in `group`.
    /// Off by default (issue #17): whoever holds a GroupInfo could otherwise join
    /// under any name, so a group that wants them says so on each member.
    pub fn allow_external_joins(&self, group: &str, allow: bool) -> Result<(), MlsError> {
        let id = parse_group_id(group)?;
        let tx = self.state.begin()?;
        self.membership(&id)?;
        self.state.exec(
            "UPDATE mailseal_mls_group SET external_joins = ?2 WHERE group_id = ?1",
            params![id, allow as i64],
        )?;
        tx.commit()
    }

    pub(super) fn external_joins(&self, id: &[u8]) -> Result<bool, MlsError> {
        Ok(self.state.query_row(
            "SELECT external_joins FROM mailseal_mls_group WHERE group_id = ?1",
            [id],
            |r| r.get::<_, i64>(0),
        )? != 0)
    }

    /// The groups we belong to (or belonged to), as base64url ids.
    pub fn groups(&self) -> Result<Vec<String>, MlsError> {
        self.state.refresh()?;
        let mut st = self
            .state
            .conn
            .prepare("SELECT group_id FROM mailseal_mls_group ORDER BY group_id")?;
        let ids = st.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
        let mut out = Vec::new();
        for id in ids {
            out.push(group_id_text(&id?));
        }
        Ok(out)
    }

    /// A group's members and epoch.
    pub fn members(&self, group: &str) -> Result<Members, MlsError> {
        let id = parse_group_id(group)?;
        // In a transaction: taking a group bumps its version (see `take_group`).
        let tx = self.state.begin()?;
        let (me, _) = self.membership(&id)?;
        let g = self.take_group(&id)?;
        let members = g
            .members()
            .map(|m| {
                (
                    m.index.u32(),
                    identity_of(&m.credential).unwrap_or_else(|_| "?".into()),
                )
            })
            .collect();
        let signature_keys = g
            .members()
            .map(|m| crate::keystore::hex(&m.signature_key))
            .collect();
        let out = Members {
            group: group_id_text(&id),
            epoch: g.epoch().as_u64(),
            me,
            members,
            signature_keys,
        };
        tx.commit()?;
        self.cache_put(g);
        Ok(out)
    }
}
