//! The agent's side of the MLS profile: identities, group membership by mail,
//! application messages, and receiving whatever arrives in whatever order.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use openmls::prelude::*;
use openmls_basic_credential::SignatureKeyPair;
use rusqlite::{params, OptionalExtension};
use sha2::{Digest, Sha256};

use super::state::{State, Tx};
use super::wire::{self, Body, Content, Framing};
use super::{group_id_text, parse_group_id, MlsError, CIPHERSUITE};
use crate::binding::{finish, Authenticated};
use crate::message::{Headers, Hints, Limits, MailA2aMessage, Mailbox};
use crate::profile::{Profile, Protection};
use crate::seal::{OpenPolicy, Opened, SignerIdentity};

/// How a member keeps its groups.
#[derive(Clone, Debug)]
pub struct MlsConfig {
    /// Past epochs whose secrets are kept, so late application messages still open
    /// (default 3).
    pub past_epochs: usize,
    /// Messages held for a future epoch, per group (default 256); more are refused.
    pub max_held: usize,
    /// How far back in one sender's ratchet a late message may be (default 1000):
    /// mail reorders far more than a delivery service.
    pub out_of_order_tolerance: u32,
    /// How far ahead in one sender's ratchet a message may be (default 10000).
    pub max_forward_distance: u32,
}

impl Default for MlsConfig {
    fn default() -> Self {
        MlsConfig {
            past_epochs: 3,
            max_held: 256,
            out_of_order_tolerance: 1000,
            max_forward_distance: 10_000,
        }
    }
}

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
    /// A GroupInfo (an invitation to join by external commit: `mailseal mls join
    /// --external`); its signature is checked when it is used.
    GroupInfo {
        /// The group id (base64url) it names.
        group: String,
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

/// A message held for a future epoch whose epoch has now come.
#[derive(Clone, Debug)]
pub struct Held {
    group_id: Vec<u8>,
    digest: Vec<u8>,
    /// The name it was received under (the batch file stem).
    pub name: String,
    /// The whole mail, as received.
    pub raw: Vec<u8>,
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
}

/// An agent's MLS state: identities and groups, in one state file.
pub struct Mls {
    state: State,
    config: MlsConfig,
    limits: Limits,
    /// Groups loaded, with the version they were taken at.
    groups: RefCell<HashMap<Vec<u8>, (i64, MlsGroup)>>,
    /// The version each group was last taken at (by this process, inside its
    /// transaction): what [`Mls::cache_put`] files it under.
    versions: RefCell<HashMap<Vec<u8>, i64>>,
    signers: RefCell<HashMap<String, std::rc::Rc<Identity>>>,
}

/// One of our MLS identities: its signature key (zeroized on drop) and credential.
struct Identity {
    keys: SignatureKeyPair,
    credential: CredentialWithKey,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn sha256(b: &[u8]) -> Vec<u8> {
    Sha256::digest(b).to_vec()
}

fn op(e: impl std::fmt::Display) -> MlsError {
    MlsError::Operation(e.to_string())
}

/// A credential's identity (our identities are email addresses), lower case.
fn identity_of(c: &Credential) -> Result<String, MlsError> {
    let basic = BasicCredential::try_from(c.clone())
        .map_err(|_| MlsError::Binding("not a basic credential".into()))?;
    let id = std::str::from_utf8(basic.identity())
        .map_err(|_| MlsError::Binding("credential identity is not UTF-8".into()))?;
    Ok(id.to_ascii_lowercase())
}

/// A GroupInfo mail needs a From (who invites).
fn check_group_info_sender(headers: &Headers) -> Result<(), MlsError> {
    if headers.from.is_none() {
        return Err(MlsError::Malformed("a GroupInfo mail without From".into()));
    }
    Ok(())
}

/// The outer From must be the MLS sender when the mail names one.
fn check_from(headers: &Headers, identity: &str) -> Result<(), MlsError> {
    match &headers.from {
        Some(m) if m.normalized() != identity => Err(MlsError::Binding(format!(
            "the MLS sender {identity} is not the mail's From {}",
            m.normalized()
        ))),
        _ => Ok(()),
    }
}

/// Verifies a KeyPackage (signature, our cipher suite) and returns it with its
/// credential identity.
fn checked_key_package(
    kp: KeyPackageIn,
    crypto: &impl openmls_traits::crypto::OpenMlsCrypto,
) -> Result<(KeyPackage, String), MlsError> {
    let kp = kp
        .validate(crypto, ProtocolVersion::Mls10)
        .map_err(|e| MlsError::Invalid(format!("KeyPackage: {e}")))?;
    if kp.ciphersuite() != CIPHERSUITE {
        return Err(MlsError::Usage(format!(
            "KeyPackage cipher suite {:?} is not the one mailseal groups use",
            kp.ciphersuite()
        )));
    }
    let identity = identity_of(kp.leaf_node().credential())?;
    Ok((kp, identity))
}

/// A published KeyPackage (a bare MLSMessage, as an Agent Card carries it), checked
/// without any state: its signature verifies, its cipher suite is ours. Returns its
/// credential identity (the member's address) and whether it is a last-resort
/// KeyPackage (usable for more than one group).
pub fn key_package_identity(bytes: &[u8]) -> Result<(String, bool), MlsError> {
    let Body::KeyPackage(kp) = wire::split(wire::decode(bytes)?)?.1 else {
        return Err(MlsError::Malformed("not a KeyPackage".into()));
    };
    let crypto = openmls_rust_crypto::RustCrypto::default();
    let (kp, identity) = checked_key_package(kp, &crypto)?;
    Ok((identity, kp.last_resort()))
}

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

    /// A state that lives in memory only (tests, benches).
    pub fn in_memory() -> Result<Mls, MlsError> {
        Ok(Self::with_state(State::in_memory()?))
    }

    fn with_state(state: State) -> Mls {
        Mls {
            state,
            config: MlsConfig::default(),
            limits: Limits::default(),
            groups: RefCell::new(HashMap::new()),
            versions: RefCell::new(HashMap::new()),
            signers: RefCell::new(HashMap::new()),
        }
    }

    /// Replaces the configuration (applies to groups created or joined afterwards,
    /// and to holding).
    pub fn with_config(mut self, config: MlsConfig) -> Mls {
        self.config = config;
        self
    }

    fn join_config(&self) -> MlsGroupJoinConfig {
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

    // === Identities ===

    /// Makes an MLS identity (Ed25519 signature key, basic credential naming `email`);
    /// returns its public key in hex. An existing identity is kept.
    pub fn generate_identity(&self, email: &str) -> Result<String, MlsError> {
        let email = email.trim().to_ascii_lowercase();
        if !Mailbox::new(&email).is_valid_addr_spec() {
            return Err(MlsError::Usage(format!("{email}: not an email address")));
        }
        let tx = self.state.begin()?;
        if let Some(pk) = self.public_key(&email)? {
            return Ok(crate::keystore::hex(&pk));
        }
        let keys = SignatureKeyPair::new(CIPHERSUITE.signature_algorithm()).map_err(op)?;
        keys.store(self.state.provider.storage())
            .map_err(|e| MlsError::State(format!("{e:?}")))?;
        self.state.exec(
            "INSERT INTO mailseal_mls_identity (email, public_key, scheme) VALUES (?1, ?2, ?3)",
            params![
                email,
                keys.public(),
                CIPHERSUITE.signature_algorithm() as u16
            ],
        )?;
        tx.commit()?;
        Ok(crate::keystore::hex(keys.public()))
    }

    /// Our identities: (email, public key hex).
    pub fn identities(&self) -> Result<Vec<(String, String)>, MlsError> {
        let mut st = self
            .state
            .conn
            .prepare("SELECT email, public_key FROM mailseal_mls_identity ORDER BY email")?;
        let rows = st.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (e, pk) = row?;
            out.push((e, crate::keystore::hex(&pk)));
        }
        Ok(out)
    }

    fn public_key(&self, email: &str) -> Result<Option<Vec<u8>>, MlsError> {
        Ok(self
            .state
            .query_row(
                "SELECT public_key FROM mailseal_mls_identity WHERE email = ?1",
                [email],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Our signature key and credential for `email`, read once per process.
    fn signer(&self, email: &str) -> Result<std::rc::Rc<Identity>, MlsError> {
        if let Some(id) = self.signers.borrow().get(email) {
            return Ok(id.clone());
        }
        let pk = self
            .public_key(email)?
            .ok_or_else(|| MlsError::NoIdentity(email.to_string()))?;
        let keys = SignatureKeyPair::read(
            self.state.provider.storage(),
            &pk,
            CIPHERSUITE.signature_algorithm(),
        )
        .ok_or_else(|| MlsError::NoIdentity(email.to_string()))?;
        let credential = CredentialWithKey {
            credential: BasicCredential::new(email.as_bytes().to_vec()).into(),
            signature_key: pk.into(),
        };
        let id = std::rc::Rc::new(Identity { keys, credential });
        self.signers
            .borrow_mut()
            .insert(email.to_string(), id.clone());
        Ok(id)
    }

    // === Groups ===

    fn cache_put(&self, g: MlsGroup) {
        let id = g.group_id().as_slice().to_vec();
        let version = self.versions.borrow().get(&id).copied().unwrap_or(0);
        self.groups.borrow_mut().insert(id, (version, g));
    }

    /// Takes the group out of the cache (or loads it): put back only once the
    /// transaction that changed it committed. The group's version is bumped in the
    /// caller's transaction; a cached group of another version (another process
    /// changed the group since) is loaded again.
    fn take_group(&self, id: &[u8]) -> Result<MlsGroup, MlsError> {
        let stored: Option<i64> = self
            .state
            .query_row(
                "SELECT version FROM mailseal_mls_group WHERE group_id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        let version = stored.unwrap_or(0);
        if stored.is_some() {
            self.state.exec(
                "UPDATE mailseal_mls_group SET version = version + 1 WHERE group_id = ?1",
                [id],
            )?;
            self.versions.borrow_mut().insert(id.to_vec(), version + 1);
        }
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
    fn active_member(&self, id: &[u8]) -> Result<String, MlsError> {
        match self.membership(id)? {
            (me, None) => Ok(me),
            (_, Some(epoch)) => Err(MlsError::Removed {
                group: group_id_text(id),
                epoch,
            }),
        }
    }

    /// The members a Commit of ours goes to: everyone else, or ourselves when alone
    /// (a mail needs a recipient).
    fn commit_recipients(group: &MlsGroup, me: &str) -> Vec<String> {
        let to = Self::others(group, me);
        if to.is_empty() {
            vec![me.to_string()]
        } else {
            to
        }
    }

    /// (our identity, removed at epoch) for a group we belong to.
    fn membership(&self, id: &[u8]) -> Result<(String, Option<u64>), MlsError> {
        self.state
            .query_row(
                "SELECT email, removed_epoch FROM mailseal_mls_group WHERE group_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.map(|e| e as u64))),
            )
            .optional()?
            .ok_or_else(|| MlsError::UnknownGroup(group_id_text(id)))
    }

    /// Creates a group with `email` as its only member; returns its id (base64url).
    pub fn create_group(&self, email: &str) -> Result<String, MlsError> {
        let email = email.trim().to_ascii_lowercase();
        let me_id = self.signer(&email)?;
        let (signer, credential) = (&me_id.keys, me_id.credential.clone());
        let tx = self.state.begin()?;
        let config = MlsGroupCreateConfig::builder()
            .ciphersuite(CIPHERSUITE)
            .max_past_epochs(self.config.past_epochs)
            .use_ratchet_tree_extension(true)
            .sender_ratchet_configuration(SenderRatchetConfiguration::new(
                self.config.out_of_order_tolerance,
                self.config.max_forward_distance,
            ))
            .wire_format_policy(PURE_CIPHERTEXT_WIRE_FORMAT_POLICY)
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

    /// A KeyPackage for `email`, as the MLSMessage bytes (for an Agent Card).
    pub fn key_package_message(&self, email: &str) -> Result<Vec<u8>, MlsError> {
        self.new_key_package(email, false)
    }

    /// A last-resort KeyPackage (RFC 9420 section 16.8) of `email` as a bare
    /// MLSMessage, for publication in an Agent Card: a card is read by many peers, so
    /// its KeyPackage must survive being used for more than one group (its private
    /// part stays in the state after a join).
    pub fn last_resort_key_package(&self, email: &str) -> Result<Vec<u8>, MlsError> {
        self.new_key_package(email, true)
    }

    fn new_key_package(&self, email: &str, last_resort: bool) -> Result<Vec<u8>, MlsError> {
        let email = email.trim().to_ascii_lowercase();
        let me_id = self.signer(&email)?;
        let (signer, credential) = (&me_id.keys, me_id.credential.clone());
        let tx = self.state.begin()?;
        let mut builder = KeyPackage::builder();
        if last_resort {
            // The leaf must list the extension it carries (RFC 9420 section 13.4).
            builder = builder
                .mark_as_last_resort()
                .leaf_node_capabilities(Capabilities::new(
                    None,
                    None,
                    Some(&[ExtensionType::LastResort]),
                    None,
                    None,
                ));
        }
        let bundle = builder
            .build(CIPHERSUITE, &self.state.provider, signer, credential)
            .map_err(op)?;
        let msg = MlsMessageOut::from(bundle.key_package().clone());
        let bytes = msg.to_bytes().map_err(op)?;
        tx.commit()?;
        Ok(bytes)
    }

    /// A KeyPackage mail from `email` (to itself: it is published, not sent to a group).
    pub fn key_package(&self, email: &str) -> Result<Vec<u8>, MlsError> {
        let bytes = self.key_package_message(email)?;
        let email = email.trim().to_ascii_lowercase();
        self.mail(
            &email,
            std::slice::from_ref(&email),
            "MLS key package",
            &bytes,
        )
    }

    fn mail(
        &self,
        from: &str,
        to: &[String],
        subject: &str,
        message: &[u8],
    ) -> Result<Vec<u8>, MlsError> {
        let domain = from.rsplit_once('@').map_or("localhost", |(_, d)| d);
        let headers = Headers {
            from: Some(Mailbox::new(from)),
            from_count: 1,
            to: to.iter().map(|a| Mailbox::new(a)).collect(),
            date: Some(time::OffsetDateTime::now_utc()),
            message_id: Some(format!("{}@{domain}", uuid::Uuid::new_v4())),
            subject: Some(subject.to_string()),
            ..Headers::default()
        };
        wire::write_mail(&headers, &Hints::default(), message)
    }

    /// The identities of a group's members other than us.
    fn others(group: &MlsGroup, me: &str) -> Vec<String> {
        group
            .members()
            .filter_map(|m| identity_of(&m.credential).ok())
            .filter(|i| i != me)
            .collect()
    }

    /// Records a Commit we made (so its copy coming back is a duplicate, and a
    /// different Commit for the same epoch a fork).
    fn record_commit(&self, id: &[u8], epoch: u64, bytes: &[u8]) -> Result<(), MlsError> {
        let digest = sha256(bytes);
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_commit (group_id, epoch, digest) VALUES (?1, ?2, ?3)",
            params![id, epoch as i64, digest],
        )?;
        self.state.exec(
            "INSERT OR IGNORE INTO mailseal_mls_seen (group_id, digest, epoch, seen_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, digest, epoch as i64, now()],
        )?;
        Ok(())
    }

    /// Adds the members whose KeyPackage mails are given: a Commit for the group and a
    /// Welcome for them. Each KeyPackage must verify and name its mail's From.
    pub fn add(&self, group: &str, key_package_mails: &[Vec<u8>]) -> Result<Added, MlsError> {
        let mut packages = Vec::new();
        for raw in key_package_mails {
            let mail = wire::read_mail(raw, &self.limits)?;
            let Body::KeyPackage(kp) = wire::split(wire::decode(&mail.message)?)?.1 else {
                return Err(MlsError::Usage("not a KeyPackage mail".into()));
            };
            let (kp, identity) = checked_key_package(kp, self.state.provider.crypto())?;
            check_from(&mail.headers, &identity)?;
            packages.push((kp, identity));
        }
        self.add_packages(group, packages)
    }

    /// Adds `member` with a KeyPackage published for it (a bare MLSMessage, as an
    /// Agent Card carries it): the KeyPackage must verify and its credential must be
    /// `member`.
    pub fn add_published(
        &self,
        group: &str,
        member: &str,
        key_package: &[u8],
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
        self.add_packages(group, vec![(kp, identity)])
    }

    fn add_packages(
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
        g.merge_pending_commit(&self.state.provider).map_err(op)?;
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
        g.merge_pending_commit(&self.state.provider).map_err(op)?;
        let commit = commit.to_bytes().map_err(op)?;
        self.record_commit(&id, epoch, &commit)?;
        let mail = self.mail(&me, &to, "MLS commit", &commit)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }

    /// A self-update (fresh leaf keys: post-compromise security): a Commit to the
    /// others.
    pub fn update(&self, group: &str) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let me = self.active_member(&id)?;
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let epoch = g.epoch().as_u64();
        let bundle = g
            .self_update(&self.state.provider, signer, LeafNodeParameters::default())
            .map_err(op)?;
        g.merge_pending_commit(&self.state.provider).map_err(op)?;
        let commit = bundle.commit().to_bytes().map_err(op)?;
        self.record_commit(&id, epoch, &commit)?;
        let to = Self::commit_recipients(&g, &me);
        let mail = self.mail(&me, &to, "MLS commit", &commit)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }

    /// A GroupInfo mail for the group (signed by us, with the ratchet tree): whoever
    /// holds it can join by an external commit ([`Mls::join_external`]), so give it
    /// only to agents that may join.
    pub fn group_info(&self, group: &str) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let me = self.active_member(&id)?;
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let g = self.take_group(&id)?;
        let info = g.export_group_info(self.state.provider.crypto(), signer, true);
        self.cache_put(g);
        let bytes = info.map_err(op)?.to_bytes().map_err(op)?;
        self.mail(&me, std::slice::from_ref(&me), "MLS group info", &bytes)
    }

    /// Joins a group from its GroupInfo mail by an external commit, as `email`;
    /// returns the group id and the Commit mail for the members.
    pub fn join_external(
        &self,
        group_info_mail: &[u8],
        email: &str,
    ) -> Result<(String, Vec<u8>), MlsError> {
        let email = email.trim().to_ascii_lowercase();
        let mail = wire::read_mail(group_info_mail, &self.limits)?;
        let Body::GroupInfo(info) = wire::split(wire::decode(&mail.message)?)?.1 else {
            return Err(MlsError::Usage("not a GroupInfo mail".into()));
        };
        let me_id = self.signer(&email)?;
        let (signer, credential) = (&me_id.keys, me_id.credential.clone());
        let tx = self.state.begin()?;
        let (group, bundle) = MlsGroup::external_commit_builder()
            .with_config(self.join_config())
            .skip_lifetime_validation()
            .build_group(&self.state.provider, info, credential)
            .map_err(|e| MlsError::Invalid(format!("GroupInfo: {e}")))?
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

    /// The groups we belong to (or belonged to), as base64url ids.
    pub fn groups(&self) -> Result<Vec<String>, MlsError> {
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
        let out = Members {
            group: group_id_text(&id),
            epoch: g.epoch().as_u64(),
            me,
            members,
        };
        self.cache_put(g);
        Ok(out)
    }

    // === Application messages ===

    /// Seals `plain` as an application message to the group: its envelope gains the
    /// `group` coordinates (or must already carry these), its From must be our
    /// identity in the group. The generation also travels in the MLS authenticated
    /// data, so the receiver checks it against the framing.
    pub fn seal(
        &self,
        plain: &MailA2aMessage,
        group: &str,
        outer_hints: bool,
    ) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let me = self.active_member(&id)?;
        let from = plain.sender().unwrap_or_default();
        if from != me {
            return Err(MlsError::Binding(format!(
                "the message is from {from}, our identity in group {group} is {me}"
            )));
        }
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let epoch = g.epoch().as_u64();
        let generation: u64 = self
            .state
            .query_row(
                "SELECT next_generation FROM mailseal_mls_sent WHERE group_id = ?1 AND epoch = ?2",
                params![id, epoch as i64],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .unwrap_or(0) as u64;
        let coordinates = crate::envelope::GroupCoordinates {
            id: group_id_text(&id),
            epoch,
            generation,
        };
        let mut env = plain.envelope().clone();
        match env.group() {
            Some(c) if c != coordinates => {
                self.cache_put(g);
                return Err(MlsError::Binding(format!(
                    "the envelope's group coordinates are not the group's next ({}, epoch {epoch}, generation {generation})",
                    coordinates.id
                )));
            }
            Some(_) => {}
            None => env.set("group", &serde_json::to_value(&coordinates).map_err(op)?),
        }
        let mut msg = plain.clone();
        msg.set_envelope(env);
        let violations = msg.check(&crate::envelope::ValidationContext::new(Some(Profile::Mls)));
        if !violations.is_empty() {
            self.cache_put(g);
            return Err(MlsError::Open(crate::seal::OpenError::Invalid(violations)));
        }
        let entity = msg.to_inner_entity(true)?;
        g.set_aad(generation.to_be_bytes().to_vec());
        let out = g
            .create_message(&self.state.provider, signer, &entity)
            .map_err(op)?;
        let bytes = out.to_bytes().map_err(op)?;
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_sent (group_id, epoch, next_generation) VALUES (?1, ?2, ?3)",
            params![id, epoch as i64, generation as i64 + 1],
        )?;
        self.state.exec(
            "INSERT OR IGNORE INTO mailseal_mls_seen (group_id, digest, epoch, seen_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, sha256(&bytes), epoch as i64, now()],
        )?;
        let mut outer = msg.headers.clone();
        outer.subject = Some("[...]".into());
        let hints = if outer_hints {
            Hints::from_envelope(msg.envelope())
        } else {
            Hints::binding_only()
        };
        let mail = wire::write_mail(&outer, &hints, &bytes)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }

    /// Seals `entity` as it is, with `aad` as the MLS authenticated data: no check of
    /// the entity, its From or its coordinates. For conformance tests of receivers
    /// (what a lying or broken sender writes); never for real messages.
    #[doc(hidden)]
    pub fn seal_unchecked(
        &self,
        entity: &[u8],
        group: &str,
        headers: &Headers,
        aad: Vec<u8>,
    ) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let (me, _) = self.membership(&id)?;
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let epoch = g.epoch().as_u64();
        g.set_aad(aad);
        let out = g
            .create_message(&self.state.provider, signer, entity)
            .map_err(op)?;
        let bytes = out.to_bytes().map_err(op)?;
        let generation: i64 = self
            .state
            .query_row(
                "SELECT next_generation FROM mailseal_mls_sent WHERE group_id = ?1 AND epoch = ?2",
                params![id, epoch as i64],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0);
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_sent (group_id, epoch, next_generation) VALUES (?1, ?2, ?3)",
            params![id, epoch as i64, generation + 1],
        )?;
        let mail = wire::write_mail(headers, &Hints::binding_only(), &bytes)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }

    // === Receiving ===

    /// Receives one `message/mls` mail: an application message is verified, decrypted
    /// and bound (DESIGN decision 7) and its `group` coordinates checked; a Welcome
    /// joins; a Commit applies (in epoch order); anything for a future epoch is held.
    /// `name` names the mail if it is held (the batch file stem).
    ///
    /// Nothing is durable until [`Receipt::commit`]; on an error the state is
    /// unchanged.
    pub fn receive(
        &self,
        raw: &[u8],
        policy: &OpenPolicy,
        name: &str,
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
                let kp = kp
                    .validate(self.state.provider.crypto(), ProtocolVersion::Mls10)
                    .map_err(|e| MlsError::Invalid(format!("KeyPackage: {e}")))?;
                let identity = identity_of(kp.leaf_node().credential())?;
                check_from(&mail.headers, &identity)?;
                (
                    Received::Handshake(Handshake::KeyPackage { identity }),
                    None,
                )
            }
            (_, Body::Welcome(w)) => self.join(w, &mail.headers, &digest)?,
            (_, Body::GroupInfo(info)) => {
                let group = group_id_text(info.group_id().as_slice());
                check_group_info_sender(&mail.headers)?;
                (Received::Handshake(Handshake::GroupInfo { group }), None)
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
                    name,
                    headers: &mail.headers,
                },
                p,
                policy,
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

    fn seen(&self, id: &[u8], digest: &[u8]) -> Result<Option<i64>, MlsError> {
        Ok(self
            .state
            .query_row(
                "SELECT seen_at FROM mailseal_mls_seen WHERE group_id = ?1 AND digest = ?2",
                params![id, digest],
                |r| r.get(0),
            )
            .optional()?)
    }

    fn mark_seen(&self, id: &[u8], digest: &[u8], epoch: u64) -> Result<(), MlsError> {
        self.state.exec(
            "INSERT OR IGNORE INTO mailseal_mls_seen (group_id, digest, epoch, seen_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, digest, epoch as i64, now()],
        )?;
        self.state.exec(
            "DELETE FROM mailseal_mls_held WHERE group_id = ?1 AND digest = ?2",
            params![id, digest],
        )?;
        Ok(())
    }

    fn join(
        &self,
        welcome: Welcome,
        headers: &Headers,
        digest: &[u8],
    ) -> Result<(Received, Option<MlsGroup>), MlsError> {
        // A Welcome names its group only inside its encryption: its duplicates are
        // recognised by digest under the empty group id.
        if let Some(first_seen) = self.seen(&[], digest)? {
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
        let staged =
            StagedWelcome::build_from_welcome(&self.state.provider, &self.join_config(), welcome)
                .and_then(|b| b.skip_lifetime_validation().build())
                .map_err(|e| match e {
                    WelcomeError::NoMatchingKeyPackage | WelcomeError::NoMatchingEncryptionKey => {
                        MlsError::UnknownGroup(
                            "of this Welcome: none of our KeyPackages is in it".into(),
                        )
                    }
                    other => MlsError::Invalid(format!("Welcome: {other}")),
                })?;
        let by = staged
            .welcome_sender()
            .map_err(op)
            .and_then(|l| identity_of(l.credential()))?;
        check_from(headers, &by)?;
        let group = staged.into_group(&self.state.provider).map_err(op)?;
        let id = group.group_id().as_slice().to_vec();
        let me = identity_of(group.credential().map_err(op)?)?;
        let epoch = group.epoch().as_u64();
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_group (group_id, email, joined_epoch, removed_epoch) VALUES (?1, ?2, ?3, NULL)",
            params![id, me, epoch as i64],
        )?;
        self.mark_seen(&[], digest, epoch)?;
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

    fn receive_protocol(
        &self,
        m: Incoming<'_>,
        p: ProtocolMessage,
        policy: &OpenPolicy,
    ) -> Result<(Received, Option<MlsGroup>), MlsError> {
        let group_text = group_id_text(&m.id);
        let (_, removed) = self.membership(&m.id)?;
        if let Some(first_seen) = self.seen(&m.id, &m.digest)? {
            return Ok((
                Received::Duplicate {
                    group: group_text,
                    first_seen,
                },
                None,
            ));
        }
        if let Some(epoch) = removed {
            return Err(MlsError::Removed {
                group: group_text,
                epoch,
            });
        }
        let mut g = self.take_group(&m.id)?;
        let current = g.epoch().as_u64();
        let result = self.process(&mut g, m, p, policy, current);
        // The group goes back to the cache with the receipt, or is reloaded from the
        // (rolled back) state next time.
        result.map(|r| (r, Some(g)))
    }

    fn process(
        &self,
        g: &mut MlsGroup,
        m: Incoming<'_>,
        p: ProtocolMessage,
        policy: &OpenPolicy,
        current: u64,
    ) -> Result<Received, MlsError> {
        let group_text = group_id_text(&m.id);
        if m.epoch > current {
            let held: i64 = self.state.query_row(
                "SELECT count(*) FROM mailseal_mls_held WHERE group_id = ?1",
                [&m.id],
                |r| r.get(0),
            )?;
            if held as usize >= self.config.max_held {
                return Err(MlsError::BufferFull {
                    group: group_text,
                    held: held as usize,
                });
            }
            self.state.exec(
                "INSERT OR IGNORE INTO mailseal_mls_held (group_id, digest, epoch, is_commit, name, raw, held_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    m.id,
                    m.digest,
                    m.epoch as i64,
                    (m.content == Content::Commit) as i64,
                    m.name,
                    m.raw,
                    now()
                ],
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
                _ => {
                    self.mark_seen(&m.id, &m.digest, m.epoch)?;
                    Ok(Received::Handshake(Handshake::Stale {
                        group: group_text,
                        epoch: m.epoch,
                    }))
                }
            };
        }
        let processed = g.process_message(&self.state.provider, p).map_err(|e| {
            if m.epoch < current {
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
        let aad = processed.aad().to_vec();
        let framing_epoch = processed.epoch().as_u64();
        let received = match processed.into_content() {
            ProcessedMessageContent::ApplicationMessage(app) => {
                // The plaintext: wiped when this scope ends (the opened message keeps
                // what it parsed).
                let entity = zeroize::Zeroizing::new(app.into_bytes());
                let opened = finish(
                    Authenticated {
                        profile: Profile::Mls,
                        entity: &entity,
                        outer_headers: m.headers,
                        encrypted: true,
                        protection: Protection::SignedEncrypted,
                        signer: SignerIdentity::Mls {
                            identity: sender.clone(),
                        },
                        signer_emails: vec![sender.clone()],
                        algorithm: "MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519".into(),
                    },
                    policy,
                )?;
                check_coordinates(&opened, &m.id, framing_epoch, &aad)?;
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
        self.mark_seen(&m.id, &m.digest, m.epoch)?;
        Ok(received)
    }

    /// The next held message whose epoch has come (commits of an epoch after its
    /// application messages), across every group or in `group` only. Open it with
    /// [`Mls::receive`] (which drops it from the hold); if that fails, drop it with
    /// [`Mls::discard`].
    pub fn next_ready(&self, group: Option<&str>) -> Result<Option<Held>, MlsError> {
        let ids: Vec<Vec<u8>> = match group {
            Some(g) => vec![parse_group_id(g)?],
            None => {
                let mut st = self
                    .state
                    .conn
                    .prepare("SELECT DISTINCT group_id FROM mailseal_mls_held")?;
                let rows = st.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
                rows.collect::<Result<_, _>>()?
            }
        };
        for id in ids {
            let Ok(g) = self.take_group(&id) else {
                continue;
            };
            let epoch = g.epoch().as_u64();
            self.cache_put(g);
            let row = self.state.query_row(
                    "SELECT digest, name, raw FROM mailseal_mls_held WHERE group_id = ?1 AND epoch <= ?2 ORDER BY epoch, is_commit, held_at LIMIT 1",
                    params![id, epoch as i64],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            if let Some((digest, name, raw)) = row {
                return Ok(Some(Held {
                    group_id: id,
                    digest,
                    name,
                    raw,
                }));
            }
        }
        Ok(None)
    }

    /// Drops a held message that did not open.
    pub fn discard(&self, held: &Held) -> Result<(), MlsError> {
        self.state.exec(
            "DELETE FROM mailseal_mls_held WHERE group_id = ?1 AND digest = ?2",
            params![held.group_id, held.digest],
        )?;
        Ok(())
    }

    /// How many messages wait for a Commit, per group.
    pub fn held_count(&self, group: &str) -> Result<usize, MlsError> {
        let id = parse_group_id(group)?;
        let n: i64 = self.state.query_row(
            "SELECT count(*) FROM mailseal_mls_held WHERE group_id = ?1",
            [id],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }
}

/// A group message as received, before processing.
struct Incoming<'a> {
    id: Vec<u8>,
    epoch: u64,
    content: Content,
    digest: Vec<u8>,
    raw: &'a [u8],
    name: &'a str,
    headers: &'a Headers,
}

/// The envelope's `group` must be the MLS framing's: group id, epoch, and the
/// generation the sender put in the authenticated data.
fn check_coordinates(opened: &Opened, id: &[u8], epoch: u64, aad: &[u8]) -> Result<(), MlsError> {
    let Some(c) = opened.envelope().group() else {
        return Err(MlsError::Binding(
            "an MLS application message without group coordinates".into(),
        ));
    };
    let generation = <[u8; 8]>::try_from(aad)
        .map(u64::from_be_bytes)
        .map_err(|_| MlsError::Binding("no generation in the MLS authenticated data".into()))?;
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
            "envelope group.generation {} is not the MLS generation {generation}",
            c.generation
        )));
    }
    Ok(())
}

/// The [`Sealer`](crate::seal::Sealer) of the MLS profile: `opts.group` names the
/// group. Receiving has no `Opener`: opening MLS mail changes the group state and
/// handles handshake mail too, so it is [`Mls::receive`].
impl crate::seal::Sealer for Mls {
    fn seal(
        &self,
        plain: &MailA2aMessage,
        opts: &crate::seal::SealOptions,
    ) -> Result<Vec<u8>, crate::seal::SealError> {
        use crate::seal::{OpenError, SealError};
        if opts.profile != Profile::Mls {
            return Err(SealError::ProfileUnavailable(opts.profile));
        }
        if opts.sign_only {
            return Err(SealError::Group(
                "MLS application messages are always encrypted".into(),
            ));
        }
        let group = opts
            .group
            .as_deref()
            .ok_or_else(|| SealError::Group("no MLS group given".into()))?;
        Mls::seal(self, plain, group, opts.outer_hints).map_err(|e| match e {
            MlsError::NoIdentity(address) => SealError::NoSigningKey { address },
            MlsError::Open(OpenError::Invalid(v)) => SealError::Invalid(v),
            MlsError::Message(m) => SealError::Message(m),
            MlsError::Operation(o) | MlsError::State(o) => SealError::Crypto(o),
            other => SealError::Group(other.to_string()),
        })
    }
}
