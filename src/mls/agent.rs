//! The MLS agent itself: its state, the groups it has loaded, the mail it writes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use openmls::prelude::*;
use rusqlite::OptionalExtension;

use super::state::State;
use super::{group_id_text, wire, Mls, MlsConfig, MlsError};
use crate::message::{Headers, Hints, Limits, Mailbox};

impl Mls {
    /// Opens the MLS state of the store directory `dir` (creating it owner-only).
    pub fn open(dir: &Path) -> Result<Mls, MlsError> {
        // Owner-only, like a key store directory: the state holds private keys.
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir).map_err(|e| MlsError::State(e.to_string()))?;
        Ok(Self::with_state(State::open(
            &dir.join(super::state::FILE_NAME),
        )?))
    }

    /// The MLS state shared by every process on the PostgreSQL database at `url`
    /// (`postgres://...`, TLS as for the replay state): gateway instances on one
    /// database act as one group member. Each MLS operation locks the shared state,
    /// so they run one at a time across the processes (see the `shared` module).
    pub fn open_postgres(url: &str) -> Result<Mls, MlsError> {
        Ok(Self::with_state(State::postgres(url)?))
    }

    /// A state that lives in memory only (tests, benches).
    pub fn in_memory() -> Result<Mls, MlsError> {
        Ok(Self::with_state(State::in_memory()?))
    }

    pub(super) fn with_state(state: State) -> Mls {
        Mls {
            state,
            config: MlsConfig::default(),
            limits: Limits::default(),
            groups: RefCell::new(HashMap::new()),
            versions: RefCell::new(HashMap::new()),
            signers: RefCell::new(HashMap::new()),
            sender_data_secrets: RefCell::new(HashMap::new()),
            passphrase: None,
            mail_time: None,
        }
    }

    /// Dates the mails this state writes (KeyPackages, Welcomes, Commits, GroupInfos)
    /// at `at` (Unix seconds) rather than now: the conformance corpus, whose mails
    /// must be the same bytes in every run.
    pub(crate) fn dated(mut self, at: i64) -> Mls {
        self.mail_time = Some(at);
        self
    }

    /// Encrypts the signature keys of identities generated from now on under
    /// `passphrase` (PBES2: scrypt and AES-256-CBC, as the key store encrypts PKCS#8
    /// keys), and opens them with it. Identities made without one stay readable
    /// without one.
    pub fn with_passphrase(mut self, passphrase: Option<zeroize::Zeroizing<Vec<u8>>>) -> Mls {
        self.passphrase = passphrase;
        self
    }

    /// Replaces the configuration (applies to groups created or joined afterwards,
    /// and to holding).
    pub fn with_config(mut self, config: MlsConfig) -> Mls {
        self.config = config;
        self
    }

    pub(super) fn join_config(&self) -> MlsGroupJoinConfig {
        MlsGroupJoinConfig::builder()
            .max_past_epochs(self.config.past_epochs)
            .use_ratchet_tree_extension(true)
            .sender_ratchet_configuration(SenderRatchetConfiguration::new(
                self.config.out_of_order_tolerance,
                self.config.max_forward_distance,
            ))
            .wire_format_policy(PURE_CIPHERTEXT_WIRE_FORMAT_POLICY)
            .build()
    }

    pub(super) fn cache_put(&self, g: MlsGroup) {
        let id = g.group_id().as_slice().to_vec();
        let version = self.versions.borrow().get(&id).copied().unwrap_or(0);
        self.groups.borrow_mut().insert(id, (version, g));
    }

    /// Takes the group out of the cache (or loads it): put back only once the
    /// transaction that changed it committed. The group's version is bumped in the
    /// caller's transaction; a cached group of another version (another process
    /// changed the group since) is loaded again.
    pub(super) fn take_group(&self, id: &[u8]) -> Result<MlsGroup, MlsError> {
        let version = self.bump_group(id)?.map_or(0, |t| t.version);
        self.cached_group(id, version)
    }

    /// Bumps the group's version in the caller's transaction (in a state that other
    /// processes can see: a file, or the shared state), and reads our membership,
    /// the version and whether the group holds messages ([`Taken`]); `None` for a
    /// group we have no record of. (Not `UPDATE ...
    /// RETURNING`: SQLite buffers returned rows in a temporary table, twice the
    /// instructions of the two statements.)
    pub(super) fn bump_group(&self, id: &[u8]) -> Result<Option<Taken>, MlsError> {
        let row: Option<(Option<i64>, i64, bool)> = self
            .state
            .query_row(
                "SELECT removed_epoch, version, EXISTS (SELECT 1 FROM mailseal_mls_held WHERE group_id = ?1) FROM mailseal_mls_group WHERE group_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((removed, version, holds)) = row else {
            return Ok(None);
        };
        // A state no other process sees needs no version: every change to a group
        // here takes it out of the cache first (`take_group`, `cached_group`).
        let after = if self.state.private() {
            version
        } else {
            self.state.exec(
                "UPDATE mailseal_mls_group SET version = version + 1 WHERE group_id = ?1",
                [id],
            )?;
            version + 1
        };
        self.versions.borrow_mut().insert(id.to_vec(), after);
        Ok(Some(Taken {
            removed: removed.map(|e| e as u64),
            version,
            holds,
        }))
    }

    /// The group at `version` from the cache, or loaded from the state.
    pub(super) fn cached_group(&self, id: &[u8], version: i64) -> Result<MlsGroup, MlsError> {
        if let Some((v, g)) = self.groups.borrow_mut().remove(id) {
            if v == version {
                return Ok(g);
            }
        }
        MlsGroup::load(self.state.provider.storage(), &GroupId::from_slice(id))
            .map_err(|e| MlsError::State(e.to_string()))?
            .ok_or_else(|| MlsError::UnknownGroup(group_id_text(id)))
    }

    /// Our identity in a group we still belong to; `Removed` once a Commit removed us.
    pub(super) fn active_member(&self, id: &[u8]) -> Result<String, MlsError> {
        match self.membership(id)? {
            (me, None) => Ok(me),
            (_, Some(epoch)) => Err(MlsError::Removed {
                group: group_id_text(id),
                epoch,
            }),
        }
    }

    /// (our identity, removed at epoch) for a group we belong to.
    pub(super) fn membership(&self, id: &[u8]) -> Result<(String, Option<u64>), MlsError> {
        self.state.refresh()?;
        self.state
            .query_row(
                "SELECT email, removed_epoch FROM mailseal_mls_group WHERE group_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.map(|e| e as u64))),
            )
            .optional()?
            .ok_or_else(|| MlsError::UnknownGroup(group_id_text(id)))
    }

    pub(super) fn mail(
        &self,
        from: &str,
        to: &[String],
        subject: &str,
        message: &[u8],
    ) -> Result<Vec<u8>, MlsError> {
        let headers = self.headers(from, to, subject)?;
        wire::write_mail(&headers, &Hints::default(), message)
    }

    /// The header fields of a mail of ours from `from` to `to`: dated now (or at
    /// [`Mls::dated`]'s time), a fresh Message-ID (random, version 4).
    pub(super) fn headers(
        &self,
        from: &str,
        to: &[String],
        subject: &str,
    ) -> Result<Headers, MlsError> {
        let domain = from.rsplit_once('@').map_or("localhost", |(_, d)| d);
        let date = match self.mail_time {
            Some(t) => time::OffsetDateTime::from_unix_timestamp(t)
                .map_err(|e| MlsError::Usage(format!("mail time {t}: {e}")))?,
            None => time::OffsetDateTime::now_utc(),
        };
        let mut id = [0u8; 16];
        crate::entropy::fill(&mut id).map_err(|e| MlsError::State(e.to_string()))?;
        let id = uuid::Builder::from_random_bytes(id).into_uuid();
        Ok(Headers {
            from: Some(Mailbox::new(from)),
            from_count: 1,
            to: to.iter().map(|a| Mailbox::new(a)).collect(),
            date: Some(date),
            message_id: Some(format!("{id}@{domain}")),
            subject: Some(subject.to_string()),
            ..Headers::default()
        })
    }
}

/// A group's record as a transaction takes the group ([`Mls::bump_group`]).
pub(super) struct Taken {
    /// The epoch a Commit removed us at, if one did.
    pub removed: Option<u64>,
    /// The group's version before the transaction.
    pub version: i64,
    /// Whether messages of the group are held for a later epoch ([`super::held`]).
    /// Nothing else can hold one while the transaction lasts.
    pub holds: bool,
}
