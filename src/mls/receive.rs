//! Whatever arrives, in whatever order: Welcomes, Commits, proposals and application
//! messages, each processed in one transaction, with what it yields.

use openmls::prelude::*;
use rusqlite::{params, OptionalExtension};

use super::agent::Taken;
use super::authentication::Authenticator;
use super::identity::{check_from, check_lifetime, check_suite, identity_of, verified_key_package};
use super::sender_data::{self, SenderData};
use super::state::Tx;
use super::wire::{self, Body, Content, Framing};
use super::{group_id_text, now, op, sha256, Mls, MlsError};
use crate::binding::{finish, Authenticated};
use crate::message::Headers;
use crate::profile::{Profile, Protection};
use crate::seal::{OpenPolicy, Opened, SignerIdentity};

/// What receiving one `message/mls` mail came to.
#[derive(Debug)]
#[non_exhaustive]
pub enum Received {
    /// An application message: verified, decrypted and bound to its sender.
    Application(Box<Opened>),
    /// A handshake message (Welcome, Commit, Proposal, GroupInfo, KeyPackage),
    /// applied or noted.
    Handshake(Handshake),
    /// Seen before (or our own message): not processed again.
    Duplicate {
        /// The group id (base64url); empty for a Welcome.
        group: String,
        /// When it was first seen (Unix seconds).
        first_seen: i64,
    },
    /// For an epoch we have not reached: held until the Commits leading there arrive.
    Held {
        /// The group id (base64url).
        group: String,
        /// The message's epoch.
        epoch: u64,
        /// Our epoch: the Commits for epochs `current..epoch` are missing.
        current: u64,
    },
}

/// An MLS handshake message, applied (once its receipt commits) or noted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handshake {
    /// A Welcome: we joined the group.
    Joined {
        /// The group id (base64url).
        group: String,
        /// The epoch we joined at.
        epoch: u64,
        /// Who added us.
        by: String,
    },
    /// A Commit was applied.
    Committed {
        /// The group id (base64url).
        group: String,
        /// The new epoch.
        epoch: u64,
        /// Who committed.
        by: String,
        /// The Commit removed us.
        removed_us: bool,
        /// Held messages that can now be opened ([`Mls::next_ready`]).
        ready: usize,
    },
    /// A standalone proposal, queued for the next Commit.
    Proposal {
        /// The group id (base64url).
        group: String,
        /// Who proposed.
        by: String,
    },
    /// A KeyPackage (it joins nobody by itself: `mailseal mls add`).
    KeyPackage {
        /// Its credential identity.
        identity: String,
    },
    /// A handshake message from an epoch before we joined: nothing to do.
    Stale {
        /// The group id (base64url).
        group: String,
        /// Its epoch.
        epoch: u64,
    },
}

/// A received message whose state change is not yet committed: call
/// [`Receipt::commit`] once its result is safely delivered; dropped, the state is as
/// before the message.
pub struct Receipt<'a> {
    /// What the message came to.
    pub received: Received,
    tx: Tx<'a>,
    mls: &'a Mls,
    group: Option<MlsGroup>,
}

impl Receipt<'_> {
    /// Makes the state change durable; returns what the message came to.
    pub fn commit(self) -> Result<Received, MlsError> {
        let Receipt {
            received,
            tx,
            mls,
            group,
        } = self;
        tx.commit()?;
        if let Some(g) = group {
            mls.cache_put(g);
        }
        Ok(received)
    }
}

/// A group message as received, before processing.
pub(super) struct Incoming<'a> {
    id: Vec<u8>,
    epoch: u64,
    content: Content,
    digest: Vec<u8>,
    raw: &'a [u8],
    /// The MLSMessage itself (the mail's decoded body).
    message: &'a [u8],
    name: &'a str,
    headers: &'a Headers,
}

/// The envelope's `group` must be the MLS framing's: the group id, the epoch, and
/// the generation the content was really encrypted at (`real`, from the decrypted
/// sender data, [`super::sender_data`]). The authenticated data may be empty, or
/// the eight-byte big-endian generation mailseal writes (for receivers that read
/// it there); what it says must then be the real generation too.
pub(super) fn check_coordinates(
    opened: &Opened,
    id: &[u8],
    epoch: u64,
    aad: &[u8],
    real: SenderData,
) -> Result<(), MlsError> {
    let Some(c) = opened.envelope().group() else {
        return Err(MlsError::Binding(
            "an MLS application message without group coordinates (the envelope needs \"group\": {id, epoch, generation})".into(),
        ));
    };
    let generation = u64::from(real.generation);
    match <[u8; 8]>::try_from(aad).map(u64::from_be_bytes) {
        _ if aad.is_empty() => {}
        Ok(stated) if stated == generation => {}
        Ok(stated) => {
            return Err(MlsError::Binding(format!(
                "the MLS authenticated data says generation {stated}, the message was sent at generation {generation}"
            )))
        }
        Err(_) => {
            return Err(MlsError::Binding(format!(
                "MLS authenticated data of {} bytes: mailseal reads none, or an eight-byte generation",
                aad.len()
            )))
        }
    }
    if c.id != group_id_text(id) {
        return Err(MlsError::Binding(format!(
            "envelope group.id {} is not the MLS group {}",
            c.id,
            group_id_text(id)
        )));
    }
    if c.epoch != epoch {
        return Err(MlsError::Binding(format!(
            "envelope group.epoch {} is not the MLS epoch {epoch}",
            c.epoch
        )));
    }
    if c.generation != generation {
        return Err(MlsError::Binding(format!(
            "envelope group.generation {} is not the generation the message was sent at ({generation})",
            c.generation
        )));
    }
    Ok(())
}

impl Mls {
    /// Receives one `message/mls` mail: an application message is verified, decrypted
    /// and bound (DESIGN decision 7) and its `group` coordinates checked; a Welcome
    /// joins; a Commit applies (in epoch order); anything for a future epoch is held.
    /// `name` names the mail if it is held (the batch file stem).
    ///
    /// Every leaf that would enter our view of a group (a Welcome's tree, added or
    /// updated leaves, an external joiner) and every sender must authenticate under
    /// `auth` ([`super::authentication`]); a Welcome must come from an inviter our
    /// policy accepts ([`Mls::allow_inviter`]).
    ///
    /// Nothing is durable until [`Receipt::commit`]; on an error the state is
    /// unchanged.
    pub fn receive(
        &self,
        raw: &[u8],
        policy: &OpenPolicy,
        name: &str,
        auth: &dyn Authenticator,
    ) -> Result<Receipt<'_>, MlsError> {
        if raw.len() > policy.limits.max_message_bytes {
            return Err(crate::message::MessageError::TooLarge {
                size: raw.len(),
                limit: policy.limits.max_message_bytes,
            }
            .into());
        }
        let mail = wire::read_mail(raw, &policy.limits)?;
        let digest = sha256(&mail.message);
        let (framing, body) = wire::split(wire::decode(&mail.message)?)?;
        let tx = self.state.begin()?;
        let (received, group) = match (framing, body) {
            (_, Body::KeyPackage(kp)) => {
                let kp = verified_key_package(
                    kp,
                    self.state.provider.crypto(),
                    policy.validation_time,
                )?;
                check_suite(&kp)?;
                check_lifetime(&kp)?;
                let identity = self.check_leaf(kp.leaf_node(), auth)?;
                check_from(&mail.headers, &identity)?;
                (
                    Received::Handshake(Handshake::KeyPackage { identity }),
                    None,
                )
            }
            (_, Body::Welcome(_)) if mail.message.len() > self.config.max_welcome_bytes => {
                return Err(MlsError::WelcomeTooLarge {
                    size: mail.message.len(),
                    limit: self.config.max_welcome_bytes,
                })
            }
            (_, Body::Welcome(w)) => {
                self.join(w, &mail.headers, &digest, recorded_at(policy), auth)?
            }
            // Issue #17: a GroupInfo travels sealed to the one invited
            // (`Mls::sealed_group_info`); one in clear was leaked or forged.
            (_, Body::GroupInfo(_)) => {
                return Err(MlsError::Binding(
                    "a GroupInfo in clear: GroupInfo travels sealed to the one invited (mls group-info --to; mls join --external)".into(),
                ))
            }
            (
                Framing::Protocol {
                    group_id,
                    epoch,
                    content,
                    ..
                },
                Body::Protocol(p),
            ) => self.receive_protocol(
                Incoming {
                    id: group_id,
                    epoch,
                    content,
                    digest,
                    raw,
                    message: &mail.message,
                    name,
                    headers: &mail.headers,
                },
                p,
                policy,
                auth,
            )?,
            _ => return Err(MlsError::Malformed("inconsistent MLSMessage".into())),
        };
        Ok(Receipt {
            received,
            tx,
            mls: self,
            group,
        })
    }

    /// Who really sent the application message `message` (a PrivateMessage of
    /// `epoch`, already processed by `g`): its decrypted sender data, as openmls read
    /// it while `watched` (or wrote it, for our own send), else decrypted here.
    pub(super) fn real_sender(
        &self,
        g: &MlsGroup,
        message: &[u8],
        epoch: u64,
        watched: &sender_data::Watched,
    ) -> Result<SenderData, MlsError> {
        let framing = sender_data::private_framing(message).ok_or_else(|| {
            MlsError::Malformed("an MLS application message that is not a PrivateMessage".into())
        })?;
        if let Some(real) = watched.sender_data(&framing) {
            return Ok(real);
        }
        let current = g.epoch().as_u64();
        let key = (epoch == current).then(|| {
            (
                g.group_id().as_slice().to_vec(),
                epoch,
                g.epoch_authenticator().as_slice().to_vec(),
            )
        });
        let cached = key
            .as_ref()
            .and_then(|k| self.sender_data_secrets.borrow().get(k).cloned());
        let secret = match cached {
            Some(secret) => secret,
            None => {
                let secret = sender_data::sender_data_secret(
                    self.state.provider.storage(),
                    g.group_id(),
                    epoch,
                    current,
                )?
                .ok_or_else(|| {
                    MlsError::State(format!(
                        "the sender-data secret of epoch {epoch} is not kept"
                    ))
                })?;
                if let Some(k) = key {
                    let mut cache = self.sender_data_secrets.borrow_mut();
                    if cache.len() >= 64 {
                        cache.clear();
                    }
                    cache.insert(k, secret.clone());
                }
                secret
            }
        };
        sender_data::decrypt(
            self.state.provider.crypto(),
            g.ciphersuite(),
            &secret,
            &framing,
        )
        .ok_or_else(|| MlsError::Invalid("the MLS sender data does not decrypt".into()))
    }

    /// When a message was first seen. A group message's record is found by its key
    /// (`epoch` given: the framing's); a Welcome's, under the empty group id, by its
    /// digest among the Welcomes.
    pub(super) fn seen(
        &self,
        id: &[u8],
        digest: &[u8],
        epoch: Option<u64>,
    ) -> Result<Option<i64>, MlsError> {
        let at = match epoch {
            Some(epoch) => self.state.query_row(
                "SELECT seen_at FROM mailseal_mls_seen WHERE group_id = ?1 AND epoch = ?2 AND digest = ?3",
                params![id, epoch as i64, digest],
                |r| r.get(0),
            ),
            None => self.state.query_row(
                "SELECT seen_at FROM mailseal_mls_seen WHERE group_id = ?1 AND digest = ?2",
                params![id, digest],
                |r| r.get(0),
            ),
        };
        Ok(at.optional()?)
    }

    /// Records a message (received, or sent by us) as seen at `at` (Unix seconds:
    /// [`recorded_at`]) in `epoch` (its framing's) unless it was before: whether it
    /// is new. The duplicate check and the record are one statement.
    pub(super) fn record_seen(
        &self,
        id: &[u8],
        digest: &[u8],
        epoch: u64,
        at: i64,
    ) -> Result<bool, MlsError> {
        Ok(self.state.exec(
            "INSERT OR IGNORE INTO mailseal_mls_seen (group_id, digest, epoch, seen_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, digest, epoch as i64, at],
        )? == 1)
    }

    /// Drops a message from the hold (it was released, or came again by mail).
    fn unhold(&self, id: &[u8], digest: &[u8]) -> Result<(), MlsError> {
        self.state.exec(
            "DELETE FROM mailseal_mls_held WHERE group_id = ?1 AND digest = ?2",
            params![id, digest],
        )?;
        Ok(())
    }

    /// Records a message as received at `at` (Unix seconds: [`recorded_at`]).
    pub(super) fn mark_seen(
        &self,
        id: &[u8],
        digest: &[u8],
        epoch: u64,
        at: i64,
    ) -> Result<(), MlsError> {
        self.record_seen(id, digest, epoch, at)?;
        self.unhold(id, digest)
    }

    pub(super) fn join(
        &self,
        welcome: Welcome,
        headers: &Headers,
        digest: &[u8],
        at: i64,
        auth: &dyn Authenticator,
    ) -> Result<(Received, Option<MlsGroup>), MlsError> {
        // A Welcome names its group only inside its encryption: its duplicates are
        // recognised by digest under the empty group id.
        if let Some(first_seen) = self.seen(&[], digest, None)? {
            return Ok((
                Received::Duplicate {
                    group: String::new(),
                    first_seen,
                },
                None,
            ));
        }
        // The tree's leaves keep the lifetime of the KeyPackage that added them until
        // they update: a member added months ago and silent since would make every
        // later Welcome fail. RFC 9420 section 7.3 allows skipping that check on tree
        // leaves; the new KeyPackages themselves are checked when they are added.
        // Issue #58: what can be judged before openmls validates the tree (work that
        // grows with the square of its members) is judged first. The inviter must be
        // the mail's From (`check_from`, once it is authenticated), so a From our
        // policy does not let invite us, or a policy that lets no one, refuses it now.
        self.check_inviter_before_join(headers)?;
        let welcome_error = |e: WelcomeError<_>| match e {
            WelcomeError::MissingRatchetTree => MlsError::NoRatchetTree,
            WelcomeError::NoMatchingKeyPackage | WelcomeError::NoMatchingEncryptionKey => {
                MlsError::UnknownGroup("of this Welcome: none of our KeyPackages is in it".into())
            }
            other => MlsError::Invalid(format!("Welcome: {other}")),
        };
        let builder =
            StagedWelcome::build_from_welcome(&self.state.provider, &self.join_config(), welcome)
                .map_err(welcome_error)?;
        // The group's size, from its decrypted (not yet verified) GroupInfo: a tree
        // of more members than we join is refused before it is validated.
        let members = builder
            .processed_welcome()
            .unverified_group_info()
            .extensions()
            .ratchet_tree()
            .map_or(0, |t| t.ratchet_tree().leaves().count());
        if members > self.config.max_welcome_members {
            return Err(MlsError::WelcomeTooManyMembers {
                members,
                limit: self.config.max_welcome_members,
            });
        }
        let staged = builder
            .skip_lifetime_validation()
            .build()
            .map_err(welcome_error)?;
        // Who added us, authenticated, and allowed to; then everyone in the group. The
        // group is kept only if all of it holds (an error rolls the transaction back).
        let by = self.check_leaf(staged.welcome_sender().map_err(op)?, auth)?;
        check_from(headers, &by)?;
        self.check_inviter(&by)?;
        let group = staged.into_group(&self.state.provider).map_err(op)?;
        self.check_tree(&group, auth)?;
        let id = group.group_id().as_slice().to_vec();
        let me = identity_of(group.credential().map_err(op)?)?;
        let epoch = group.epoch().as_u64();
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_group (group_id, email, joined_epoch, removed_epoch) VALUES (?1, ?2, ?3, NULL)",
            params![id, me, epoch as i64],
        )?;
        self.mark_seen(&[], digest, epoch, at)?;
        self.versions.borrow_mut().insert(id.clone(), 0);
        Ok((
            Received::Handshake(Handshake::Joined {
                group: group_id_text(&id),
                epoch,
                by,
            }),
            Some(group),
        ))
    }

    pub(super) fn receive_protocol(
        &self,
        m: Incoming<'_>,
        p: ProtocolMessage,
        policy: &OpenPolicy,
        auth: &dyn Authenticator,
    ) -> Result<(Received, Option<MlsGroup>), MlsError> {
        let group_text = group_id_text(&m.id);
        // Seen rows exist only for groups we have a record of (which stays).
        // The duplicate check and the record in one statement: the record goes with
        // the transaction if the message is refused, and is taken back if it is held
        // ([`Mls::process`]).
        let at = recorded_at(policy);
        if !self.record_seen(&m.id, &m.digest, m.epoch, at)? {
            // A copy of it held too would otherwise be released again and again.
            self.unhold(&m.id, &m.digest)?;
            return Ok((
                Received::Duplicate {
                    group: group_text,
                    first_seen: self.seen(&m.id, &m.digest, Some(m.epoch))?.unwrap_or(at),
                },
                None,
            ));
        }
        // Our membership, read as the group is taken (its version bumped); a refusal
        // rolls the bump back with the rest.
        let taken = match self.bump_group(&m.id)? {
            None => return Err(MlsError::UnknownGroup(group_text)),
            Some(Taken {
                removed: Some(epoch),
                ..
            }) => {
                return Err(MlsError::Removed {
                    group: group_text,
                    epoch,
                })
            }
            Some(taken) => taken,
        };
        let mut g = self.cached_group(&m.id, taken.version)?;
        let current = g.epoch().as_u64();
        // A message received is no longer held (released from the hold, or come again
        // by mail while a copy waits), unless it is held again now. With nothing held
        // in the group there is nothing to look for.
        let held_copy = taken.holds.then(|| (m.id.clone(), m.digest.clone()));
        let received = self.process(&mut g, m, p, policy, current, auth)?;
        if let (Some((id, digest)), false) = (held_copy, matches!(received, Received::Held { .. }))
        {
            self.unhold(&id, &digest)?;
        }
        // The group goes back to the cache with the receipt, or is reloaded from the
        // (rolled back) state next time.
        Ok((received, Some(g)))
    }

    /// Whose share of the hold a message for a future epoch counts against: the
    /// member its mail's From names, or `""` (one share for every name that is not
    /// a member now). Nothing in it is authenticated yet (its epoch's keys are not
    /// ours), so a name is only a claim: the shares keep one claimed name's flood from
    /// filling the hold for the others ([`MlsConfig::max_held_per_sender`]).
    ///
    /// [`MlsConfig::max_held_per_sender`]: super::MlsConfig::max_held_per_sender
    fn hold_share(&self, g: &MlsGroup, headers: &Headers) -> String {
        let Some(from) = headers.from.as_ref().map(|f| f.normalized()) else {
            return String::new();
        };
        if g.members()
            .any(|mm| identity_of(&mm.credential).is_ok_and(|i| i == from))
        {
            from
        } else {
            String::new()
        }
    }

    /// The bounds on holding `m` (for an epoch after `current`) under the share
    /// `claimed` of a group of `members`: how far ahead, how many messages and bytes
    /// in the group, and in the share. Each share gets at most its part of the group's
    /// bounds (one share per member and one for names of no member), so the shares
    /// never add up to more than the group holds and no flood under some names fills
    /// the hold for another's genuine mail. A refusal records nothing and may be
    /// delivered again later ([`MlsError::retry_later`]).
    fn check_hold(
        &self,
        group_text: &str,
        m: &Incoming<'_>,
        current: u64,
        claimed: &str,
        members: usize,
    ) -> Result<(), MlsError> {
        if m.epoch - current > self.config.max_epochs_ahead {
            return Err(MlsError::TooFarAhead {
                group: group_text.to_owned(),
                epoch: m.epoch,
                current,
            });
        }
        let (held, bytes, share, share_bytes): (i64, i64, i64, i64) = self.state.query_row(
            "SELECT count(*), coalesce(sum(length(raw)), 0), coalesce(sum(claimed = ?2), 0), coalesce(sum(CASE WHEN claimed = ?2 THEN length(raw) ELSE 0 END), 0) FROM mailseal_mls_held WHERE group_id = ?1",
            params![m.id, claimed],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let full = |held: i64, sender: Option<&str>| MlsError::BufferFull {
            group: group_text.to_owned(),
            held: held as usize,
            sender: sender.map(|s| {
                if s.is_empty() {
                    "senders not in the group".to_owned()
                } else {
                    s.to_owned()
                }
            }),
        };
        let size = m.raw.len();
        if held as usize >= self.config.max_held
            || bytes as usize + size > self.config.max_held_bytes
        {
            return Err(full(held, None));
        }
        let shares = members + 1;
        let share_max = self
            .config
            .max_held_per_sender
            .min(self.config.max_held / shares)
            .max(1);
        let share_max_bytes = self.config.max_held_bytes / shares;
        if share as usize >= share_max || share_bytes as usize + size > share_max_bytes {
            return Err(full(share, Some(claimed)));
        }
        Ok(())
    }

    pub(super) fn process(
        &self,
        g: &mut MlsGroup,
        m: Incoming<'_>,
        p: ProtocolMessage,
        policy: &OpenPolicy,
        current: u64,
        auth: &dyn Authenticator,
    ) -> Result<Received, MlsError> {
        let group_text = group_id_text(&m.id);
        if m.epoch > current {
            let claimed = self.hold_share(g, m.headers);
            self.check_hold(&group_text, &m, current, &claimed, g.members().count())?;
            self.state.exec(
                "INSERT OR IGNORE INTO mailseal_mls_held (group_id, digest, epoch, is_commit, name, raw, held_at, claimed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    m.id,
                    m.digest,
                    m.epoch as i64,
                    (m.content == Content::Commit) as i64,
                    m.name,
                    m.raw,
                    recorded_at(policy),
                    claimed
                ],
            )?;
            // Not seen yet: it is received when its epoch comes.
            self.state.exec(
                "DELETE FROM mailseal_mls_seen WHERE group_id = ?1 AND epoch = ?2 AND digest = ?3",
                params![m.id, m.epoch as i64, m.digest],
            )?;
            return Ok(Received::Held {
                group: group_text,
                epoch: m.epoch,
                current,
            });
        }
        if m.epoch < current && m.content != Content::Application {
            let applied: Option<Vec<u8>> = self
                .state
                .query_row(
                    "SELECT digest FROM mailseal_mls_commit WHERE group_id = ?1 AND epoch = ?2",
                    params![m.id, m.epoch as i64],
                    |r| r.get(0),
                )
                .optional()?;
            return match applied {
                Some(_) if m.content == Content::Commit => Err(MlsError::Fork {
                    group: group_text,
                    epoch: m.epoch,
                }),
                _ => Ok(Received::Handshake(Handshake::Stale {
                    group: group_text,
                    epoch: m.epoch,
                })),
            };
        }
        // Our identity in this group: what its application messages must name.
        let me = identity_of(g.credential().map_err(op)?)?;
        let (processed, watched) =
            sender_data::watch(|| g.process_message(&self.state.provider, p));
        let processed = processed.map_err(|e| {
            if matches!(e, ProcessMessageError::IncompatibleWireFormat) {
                MlsError::PlaintextHandshake {
                    group: group_text.clone(),
                    content: if m.content == Content::Commit {
                        "Commit"
                    } else {
                        "proposal"
                    },
                }
            } else if m.epoch < current {
                MlsError::EpochGone {
                    group: group_text.clone(),
                    epoch: m.epoch,
                    current,
                }
            } else {
                MlsError::Invalid(e.to_string())
            }
        })?;
        let sender = identity_of(processed.credential())?;
        check_from(m.headers, &sender)?;
        let framed_before = processed.epoch().as_u64() < g.epoch().as_u64();
        // The leaf that signed, at the epoch the message was framed in, is the leaf at
        // its index now only if no Commit since emptied it: a member removed and added
        // again (or anyone else) may hold the index now, under the same name.
        let leaf_vacated = match processed.sender() {
            Sender::Member(index) if framed_before => {
                self.vacated_since(&m.id, index.u32(), processed.epoch().as_u64())?
            }
            _ => false,
        };
        match processed.content() {
            // Past-epoch secrets are kept for late mail, not for members removed
            // since: their old-epoch messages stop counting once the removal applies.
            ProcessedMessageContent::ApplicationMessage(_)
                if framed_before
                    && (leaf_vacated
                        || !g
                            .members()
                            .any(|mm| mm.credential == *processed.credential())) =>
            {
                return Err(MlsError::SenderRemoved {
                    group: group_text,
                    sender,
                });
            }
            ProcessedMessageContent::StagedCommitMessage(_)
            | ProcessedMessageContent::ExternalJoinProposalMessage(_)
                if matches!(
                    processed.sender(),
                    Sender::NewMemberCommit | Sender::NewMemberProposal | Sender::External(_)
                ) && !self.external_joins(&m.id)? =>
            {
                return Err(MlsError::ExternalJoinRefused {
                    group: group_text,
                    joiner: sender,
                });
            }
            ProcessedMessageContent::ApplicationMessage(_)
                if !matches!(processed.sender(), Sender::Member(_)) =>
            {
                return Err(MlsError::Binding(
                    "an application message not from a member".into(),
                ));
            }
            ProcessedMessageContent::StagedCommitMessage(staged) => {
                self.check_commit(staged, auth)?;
            }
            // A standalone proposal is checked as it arrives too: our own next Commit
            // would include it by reference.
            ProcessedMessageContent::ProposalMessage(q)
            | ProcessedMessageContent::ExternalJoinProposalMessage(q) => match q.proposal() {
                Proposal::Add(a) => {
                    self.check_leaf(a.key_package().leaf_node(), auth)?;
                }
                Proposal::Update(u) => {
                    self.check_leaf(u.leaf_node(), auth)?;
                }
                _ => {}
            },
            _ => {}
        }
        // A member's leaf as it stands authenticates, whatever it sends: this covers a
        // group joined before the authentication service, and a key whose certificate
        // was revoked since it entered. A Commit that replaces the committer's leaf is
        // judged by the new leaf (checked above): so a member whose certification has
        // lapsed can renew it by an update.
        let renews_leaf = matches!(
            processed.content(),
            ProcessedMessageContent::StagedCommitMessage(s) if s.update_path_leaf_node().is_some()
        );
        if let (Sender::Member(index), false) = (processed.sender(), renews_leaf) {
            let leaf = g
                .public_group()
                .leaf(*index)
                .filter(|l| l.credential() == processed.credential())
                .ok_or_else(|| MlsError::SenderRemoved {
                    group: group_text.clone(),
                    sender: sender.clone(),
                })?;
            self.check_leaf(leaf, auth)?;
        }
        let aad = processed.aad().to_vec();
        let framing_epoch = processed.epoch().as_u64();
        let sender_leaf = match processed.sender() {
            Sender::Member(index) => Some(index.u32()),
            _ => None,
        };
        let received = match processed.into_content() {
            ProcessedMessageContent::ApplicationMessage(app) => {
                let real = self.real_sender(g, m.message, framing_epoch, &watched)?;
                if Some(real.leaf_index) != sender_leaf {
                    return Err(MlsError::Binding(
                        "the MLS sender data names another leaf than the signer".into(),
                    ));
                }
                // The plaintext: wiped when this scope ends (the opened message keeps
                // what it parsed).
                let entity = zeroize::Zeroizing::new(app.into_bytes());
                let opened = finish(
                    Authenticated {
                        profile: Profile::Mls,
                        entity: crate::binding::Entity::Borrowed(&entity),
                        outer_headers: m.headers,
                        encrypted: true,
                        protection: Protection::SignedEncrypted,
                        signer: SignerIdentity::Mls {
                            identity: sender.clone(),
                        },
                        signer_emails: vec![sender.clone()],
                        algorithm: "MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519".into(),
                        signed_at: None,
                        warnings: Vec::new(),
                        our_identities: &|| vec![me.clone()],
                    },
                    policy,
                )?;
                check_coordinates(&opened, &m.id, framing_epoch, &aad, real)?;
                let mut opened = opened;
                if let Some(keys) = &policy.dkim_keys {
                    opened.verdict.dkim = crate::dkim::verify(m.raw, keys);
                }
                Received::Application(Box::new(opened))
            }
            ProcessedMessageContent::ProposalMessage(q) => {
                g.store_pending_proposal(self.state.provider.storage(), *q)
                    .map_err(op)?;
                Received::Handshake(Handshake::Proposal {
                    group: group_text.clone(),
                    by: sender,
                })
            }
            ProcessedMessageContent::ExternalJoinProposalMessage(q) => {
                g.store_pending_proposal(self.state.provider.storage(), *q)
                    .map_err(op)?;
                Received::Handshake(Handshake::Proposal {
                    group: group_text.clone(),
                    by: sender,
                })
            }
            ProcessedMessageContent::OwnPendingCommit
            | ProcessedMessageContent::OwnPrivateMessage => {
                // Our own message fanned back: sealing recorded it as seen, so only a
                // copy we did not record (another store with our identity) gets here.
                return Err(MlsError::Binding(
                    "a message from our own leaf that this store did not send".into(),
                ));
            }
            ProcessedMessageContent::StagedCommitMessage(staged) => {
                let removed_us = staged.self_removed();
                self.record_vacated(&m.id, m.epoch, &staged)?;
                g.merge_staged_commit(&self.state.provider, *staged)
                    .map_err(op)?;
                let epoch = g.epoch().as_u64();
                self.state.exec(
                    "INSERT OR REPLACE INTO mailseal_mls_commit (group_id, epoch, digest) VALUES (?1, ?2, ?3)",
                    params![m.id, m.epoch as i64, m.digest],
                )?;
                if removed_us || !g.is_active() {
                    self.state.exec(
                        "UPDATE mailseal_mls_group SET removed_epoch = ?2 WHERE group_id = ?1",
                        params![m.id, epoch as i64],
                    )?;
                    self.state
                        .exec("DELETE FROM mailseal_mls_held WHERE group_id = ?1", [&m.id])?;
                }
                // Seen entries older than the kept epochs can never match again.
                let floor = epoch.saturating_sub(self.config.past_epochs as u64 + 1);
                self.state.exec(
                    "DELETE FROM mailseal_mls_seen WHERE group_id = ?1 AND epoch < ?2",
                    params![m.id, floor as i64],
                )?;
                let ready: i64 = self.state.query_row(
                    "SELECT count(*) FROM mailseal_mls_held WHERE group_id = ?1 AND epoch <= ?2",
                    params![m.id, epoch as i64],
                    |r| r.get(0),
                )?;
                Received::Handshake(Handshake::Committed {
                    group: group_text.clone(),
                    epoch,
                    by: sender,
                    removed_us: removed_us || !g.is_active(),
                    ready: ready as usize,
                })
            }
        };
        Ok(received)
    }
}

/// When a received message is recorded as seen or held: the receiver's clock, which
/// is the system's unless the policy fixes the moment of judgement (a
/// [`crate::Receiver`] with a fixed clock, `open --at`, the conformance corpus).
fn recorded_at(policy: &OpenPolicy) -> i64 {
    policy
        .validation_time
        .map_or_else(now, time::OffsetDateTime::unix_timestamp)
}
