//! The MLS profile (RFC 9420) on `openmls`: a group of agents shares one MLS group and
//! exchanges MailA2A messages as MLS application data in `message/mls; version=1.0`
//! parts. The handshake travels by mail too: KeyPackages, Commits and Welcomes are
//! `message/mls` mails like the application messages.
//!
//! Mail is store-and-forward, so the group state here is built for messages that
//! arrive late, twice, out of order or not at all:
//! - a message for a future epoch is held (bounded, persisted) until the Commits that
//!   lead there arrive, and Commits apply strictly in epoch order;
//! - a message from one of the last [`MlsConfig::past_epochs`] epochs still opens;
//! - a message seen before is reported as a duplicate, never opened twice;
//! - a second, different Commit for an epoch already left is a fork, refused with the
//!   state unchanged.
//!
//! Every received message is processed in one SQLite transaction over the openmls
//! storage and our own tables (the `state` module): a process killed at any point leaves the
//! group at the old epoch or the new one, never in between.

mod agent;
pub mod authentication;
mod changeset;
mod conformance;
mod crypto;
mod ed25519;
mod held;
mod identity;
pub mod invitation;
mod inviters;
mod membership;
mod receive;
mod send;
pub mod sender_data;
mod shared;
mod signer;
mod state;
mod storage;
pub mod wire;

pub use authentication::{
    Authenticator, Binding, PinnedKeys, StoreAuthenticator, VerifiedBindings,
};
#[doc(hidden)]
pub use changeset::check as check_changeset;
pub(crate) use conformance::state_as_of;
pub use held::Held;
pub use identity::key_package_identity;
pub use membership::{Added, Members};
pub use receive::{Handshake, Receipt, Received};

/// Our strict Ed25519 verdict ([`ed25519`]) on `signature` by `pk` over `message`, or
/// `None` for a key that is no point: for the `ed25519_strict` fuzz target, which holds
/// it to `ed25519-dalek`'s `verify_strict`. Not a stable API (feature `fuzz-api`).
#[cfg(feature = "fuzz-api")]
#[doc(hidden)]
pub fn fuzz_ed25519_verify(pk: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Option<bool> {
    Some(ed25519::VerifyingKey::from_bytes(pk)?.verify_strict(message, signature))
}

use std::cell::RefCell;
use std::collections::HashMap;

use openmls::prelude::{CredentialWithKey, MlsGroup};
use sha2::{Digest, Sha256};

use self::state::State;
/// The file name of the MLS state in a state directory ([`Mls::open`]).
pub(crate) use self::state::FILE_NAME as STATE_FILE;
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::message::Limits;

/// The cipher suite of groups created here (DESIGN "MLS").
pub const CIPHERSUITE: openmls::prelude::Ciphersuite =
    openmls::prelude::Ciphersuite::MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519;

/// Why an MLS operation failed. Never carries decrypted content or key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MlsError {
    /// The mail is not a `message/mls` mail, or its body is not one MLSMessage.
    #[error("MLS structure: {0}")]
    Malformed(String),
    /// openmls refused the message: a signature, membership tag or AEAD check failed,
    /// or the message contradicts the group state.
    #[error("MLS message does not verify: {0}")]
    Invalid(String),
    /// The identity's signature key is encrypted under the store passphrase and none
    /// was given, or the one given does not open it.
    #[error("the MLS signature key of {0} is encrypted: give the store passphrase (MAILSEAL_PASSPHRASE_FILE)")]
    Locked(String),
    /// No MLS identity (signature key) for this address in the store.
    #[error("no MLS identity for {0}: `mailseal key generate --kind mls --email {0}`")]
    NoIdentity(String),
    /// We are not a member of this group (never joined, or unknown group id).
    #[error("not a member of MLS group {0}")]
    UnknownGroup(String),
    /// We were removed from this group: its new messages are not for us.
    #[error(
        "removed from MLS group {group} (at epoch {epoch}): its messages are no longer for us"
    )]
    Removed {
        /// The group id (base64url).
        group: String,
        /// The epoch our removal took effect.
        epoch: u64,
    },
    /// An application message framed in an epoch before the current one, by a member
    /// who is no longer in the group: removed since, it cannot speak for the group.
    #[error("the sender {} was removed from MLS group {group} after the epoch it wrote in", crate::error::quoted(.sender))]
    SenderRemoved {
        /// The group id (base64url).
        group: String,
        /// The removed member's identity.
        sender: String,
    },
    /// An external commit (a join by GroupInfo) in a group where this member does not
    /// accept them: [`Mls::allow_external_joins`] turns them on per group.
    #[error("an external join of {} into MLS group {group}, which does not accept external joins here", crate::error::quoted(.joiner))]
    ExternalJoinRefused {
        /// The group id (base64url).
        group: String,
        /// Who tried to join.
        joiner: String,
    },
    /// A second, different Commit for an epoch this member already left: the group has
    /// forked. The state is unchanged.
    #[error("fork: a different commit for epoch {epoch} of group {group} was already applied")]
    Fork {
        /// The group id (base64url).
        group: String,
        /// The epoch both Commits start from.
        epoch: u64,
    },
    /// The message is from an epoch whose secrets are no longer kept.
    #[error("message for epoch {epoch} of group {group}, which is no longer kept (now at epoch {current})")]
    EpochGone {
        /// The group id (base64url).
        group: String,
        /// The message's epoch.
        epoch: u64,
        /// Our epoch.
        current: u64,
    },
    /// Too many messages are held waiting for Commits, in the group or under the
    /// sender its mail names ([`MlsConfig::max_held_per_sender`]); this one is not
    /// recorded and may be delivered again later ([`MlsError::retry_later`]).
    #[error("{held} messages of group {group} already wait for commits{}; this one is not kept", sender.as_ref().map(|s| format!(" from {}", crate::error::quoted(s))).unwrap_or_default())]
    BufferFull {
        /// The group id (base64url).
        group: String,
        /// How many are held (in the group, or under the sender).
        held: usize,
        /// The member whose share is full; `None`: the group's.
        sender: Option<String>,
    },
    /// A Welcome larger than [`MlsConfig::max_welcome_bytes`]: refused before openmls
    /// reads its tree.
    #[error("a Welcome of {size} bytes, over the {limit}-byte limit (MlsConfig::max_welcome_bytes): its group is larger than this member joins")]
    WelcomeTooLarge {
        /// Its size (the MLSMessage).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A Welcome whose ratchet tree has more members than
    /// [`MlsConfig::max_welcome_members`]: refused before openmls validates the tree.
    #[error("a Welcome to a group of {members} members, over the {limit}-member limit (MlsConfig::max_welcome_members): its group is larger than this member joins")]
    WelcomeTooManyMembers {
        /// The members its tree names.
        members: usize,
        /// The limit.
        limit: usize,
    },
    /// A message for an epoch further ahead of ours than we hold for
    /// ([`MlsConfig::max_epochs_ahead`]): not recorded; delivered again once the
    /// Commits before it are in, it is taken ([`MlsError::retry_later`]).
    #[error("MLS group {group}: a message of epoch {epoch}, {ahead} epochs ahead of ours ({current}); this one is not kept", ahead = epoch - current)]
    TooFarAhead {
        /// The group id (base64url).
        group: String,
        /// The message's epoch.
        epoch: u64,
        /// Our epoch.
        current: u64,
    },
    /// A Commit or proposal sent as a PublicMessage to a group of ours: handshake
    /// messages are taken only encrypted, since the mail path reads a PublicMessage's
    /// membership changes in the clear (docs/mls.md, "The MLS mail profile").
    #[error("a {content} of MLS group {group} sent as a PublicMessage: mailseal groups take handshake messages only encrypted (PrivateMessage); the sender must encrypt its control messages (mls-rs: EncryptionOptions with encrypt_control_messages; openmls: PURE_CIPHERTEXT_WIRE_FORMAT_POLICY)")]
    PlaintextHandshake {
        /// The group id (base64url).
        group: String,
        /// "Commit" or "proposal".
        content: &'static str,
    },
    /// A Welcome without the ratchet tree: we have no other way to get it by mail.
    #[error("the Welcome carries no ratchet tree: mailseal joins only from a Welcome with the ratchet_tree extension (RFC 9420 section 12.4.3.3); the inviter must include it (mls-rs: CommitOptions::with_ratchet_tree_extension(true); openmls: use_ratchet_tree_extension(true))")]
    NoRatchetTree,
    /// A KeyPackage valid for longer than we issue ours: its init key would sit
    /// usable for that long.
    #[error("the KeyPackage of {} is valid for {days} days; mailseal takes KeyPackages valid for at most 84 days, as it issues its own: ask for a shorter-lived one (mls-rs: ClientBuilder::key_package_lifetime)", crate::error::quoted(.identity))]
    KeyPackageLifetime {
        /// The KeyPackage's credential identity.
        identity: String,
        /// How long it is valid, in days (rounded down).
        days: u64,
    },
    /// A KeyPackage of a cipher suite mailseal groups do not use: the member could
    /// not be added to any of our groups (all use [`CIPHERSUITE`]), and its holder
    /// would only learn that from a failed add. Refused where it arrives (a
    /// KeyPackage mail, an Agent Card), not at the add.
    #[error("the KeyPackage of {} is for MLS cipher suite 0x{suite:04x}; mailseal groups use 0x0001 (MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519): ask for a KeyPackage of that suite", crate::error::quoted(.identity))]
    CipherSuite {
        /// The KeyPackage's credential identity.
        identity: String,
        /// Its cipher suite, as RFC 9420 numbers them.
        suite: u16,
    },
    /// A leaf's credential is not bound to a key we trust for the address it names
    /// (see [`authentication`]): a KeyPackage, a Welcome's tree, an added or updated
    /// leaf, an external joiner or a sender. Nothing was applied.
    #[error("unauthenticated MLS credential: {0}")]
    Unbound(String),
    /// A Welcome from an inviter this member's policy does not accept
    /// ([`Mls::allow_inviter`]).
    #[error("{} may not add us to MLS groups here (mailseal mls inviters --allow ADDRESS)", crate::error::quoted(.inviter))]
    InviterRefused {
        /// Who sent the Welcome.
        inviter: String,
    },
    /// The sender's credential does not name the From address, or the envelope's
    /// `group` coordinates disagree with the MLS framing.
    #[error("refused: {0}")]
    Binding(String),
    /// The inner message failed the binding's checks.
    #[error(transparent)]
    Open(#[from] crate::seal::OpenError),
    /// A message could not be written.
    #[error(transparent)]
    Message(#[from] crate::message::MessageError),
    /// The group or key operation failed in openmls.
    #[error("MLS operation failed: {0}")]
    Operation(String),
    /// The state database failed.
    #[error("MLS state: {0}")]
    State(String),
    /// A key package's, member's or argument's value is not usable.
    #[error("{0}")]
    Usage(String),
}

impl From<rusqlite::Error> for MlsError {
    fn from(e: rusqlite::Error) -> Self {
        MlsError::State(e.to_string())
    }
}

impl MlsError {
    /// Whether the message was refused only because a bound on what waits for Commits
    /// was reached ([`MlsError::BufferFull`], [`MlsError::TooFarAhead`]): nothing of
    /// it was recorded, and the same mail delivered again later (once the Commits
    /// before it are in) is taken. A gateway answers it with a temporary failure, so
    /// that a flood of mail nobody can authenticate yet delays a member's message
    /// and never loses it.
    pub fn retry_later(&self) -> bool {
        matches!(self, Self::BufferFull { .. } | Self::TooFarAhead { .. })
    }
}

impl Classify for MlsError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Open(e) => e.a2a_error(),
            Self::Message(e) => e.a2a_error(),
            Self::Operation(_) | Self::State(_) => A2aErrorType::InternalError,
            _ => A2aErrorType::InvalidRequestError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Malformed(_) => ErrorKind::Malformed,
            Self::Invalid(_) | Self::Unbound(_) => ErrorKind::Authentication,
            Self::NoIdentity(_)
            | Self::UnknownGroup(_)
            | Self::Removed { .. }
            | Self::Locked(_) => ErrorKind::NoUsableKey,
            Self::EpochGone { .. } => ErrorKind::NoUsableKey,
            Self::Fork { .. }
            | Self::BufferFull { .. }
            | Self::TooFarAhead { .. }
            | Self::WelcomeTooLarge { .. }
            | Self::WelcomeTooManyMembers { .. }
            | Self::Binding(_)
            | Self::SenderRemoved { .. }
            | Self::InviterRefused { .. }
            | Self::ExternalJoinRefused { .. }
            | Self::PlaintextHandshake { .. }
            | Self::NoRatchetTree
            | Self::KeyPackageLifetime { .. }
            | Self::CipherSuite { .. } => ErrorKind::Policy,
            Self::Open(e) => e.kind(),
            Self::Message(e) => e.kind(),
            Self::Operation(_) | Self::State(_) => ErrorKind::Other,
            Self::Usage(_) => ErrorKind::InvalidArgument,
        }
    }
}

/// base64url without padding: how a group id is written (DESIGN "MLS").
pub fn group_id_text(id: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

/// Reads a group id written by [`group_id_text`].
pub fn parse_group_id(text: &str) -> Result<Vec<u8>, MlsError> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|_| MlsError::Usage(format!("{text}: not a base64url group id")))
}

/// How a member keeps its groups.
#[derive(Clone, Debug)]
pub struct MlsConfig {
    /// Past epochs whose secrets are kept, so late application messages still open
    /// (default 3).
    pub past_epochs: usize,
    /// Messages held for a future epoch, per group (default 256); more are refused.
    pub max_held: usize,
    /// Messages held for a future epoch whose mail names one sender, per group
    /// (default 64): a held message is not authenticated (its epoch's keys are not
    /// ours yet), so whoever floods under a member's name fills that name's share
    /// only. Mail whose From is no member of ours now (a member added by a Commit we
    /// have not seen, or anyone) shares one such share. A share also holds at most its
    /// part of [`MlsConfig::max_held`] and [`MlsConfig::max_held_bytes`] (one part
    /// per member and one for names of no member), so the shares never add up to
    /// more than the group holds.
    pub max_held_per_sender: usize,
    /// The bytes of the messages held per group (default 16 MiB).
    pub max_held_bytes: usize,
    /// How many epochs ahead of ours a message may be to be held (default 4); one
    /// further ahead is refused, not held.
    pub max_epochs_ahead: u64,
    /// The largest Welcome taken, in bytes (default 4 MiB, a group of some two
    /// thousand members whose leaves are certified). openmls' processing of a
    /// Welcome's ratchet tree grows faster than the tree (issue #58: 100,000 leaves
    /// took 247 s and 489 MB), and it runs before the inviter is known, for anyone
    /// holding one of our KeyPackages.
    pub max_welcome_bytes: usize,
    /// The most members a Welcome's group may have (default 2,000), counted once its
    /// GroupInfo is decrypted, before openmls validates the tree: openmls checks each
    /// leaf against every other (`validate_leaf_node_capabilities`), so the work is
    /// the square of the members, and 4 MiB of the attacker's smallest leaves are
    /// 12,700 members, 2.8 s (BENCHMARKS.md). 2,000 cost some 0.1 s.
    pub max_welcome_members: usize,
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
            max_held_per_sender: 64,
            max_held_bytes: 16 << 20,
            max_epochs_ahead: 4,
            max_welcome_bytes: 4 << 20,
            max_welcome_members: 2000,
            out_of_order_tolerance: 1000,
            max_forward_distance: 10_000,
        }
    }
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
    /// Sender-data secrets of current epochs read from openmls' storage (reading them
    /// parses the whole stored secret tree), keyed by group, epoch and the epoch
    /// authenticator: an epoch's key schedule, never a rolled-back one's.
    sender_data_secrets: RefCell<HashMap<SecretKey, zeroize::Zeroizing<Vec<u8>>>>,
    /// The store passphrase: signature keys are kept encrypted under it.
    passphrase: Option<zeroize::Zeroizing<Vec<u8>>>,
    /// The Date of the mails this state writes, when fixed ([`Mls::dated`]).
    mail_time: Option<i64>,
}

/// (group id, epoch, epoch authenticator).
type SecretKey = (Vec<u8>, u64, Vec<u8>);

/// One of our MLS identities: its signature key (zeroized on drop) and credential.
struct Identity {
    keys: signer::Signer,
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

// `Open` and `Message` carry another layer's error: [`crate::ReceiveError::code`] gives
// that error's own code instead of these two.
crate::error::verdict_codes!(MlsError, "mls", {
    Self::Malformed(_) => "malformed",
    Self::Invalid(_) => "invalid",
    Self::Locked(_) => "locked",
    Self::NoIdentity(_) => "no-identity",
    Self::UnknownGroup(_) => "unknown-group",
    Self::Removed { .. } => "removed",
    Self::SenderRemoved { .. } => "sender-removed",
    Self::ExternalJoinRefused { .. } => "external-join-refused",
    Self::Fork { .. } => "fork",
    Self::EpochGone { .. } => "epoch-gone",
    Self::BufferFull { .. } => "buffer-full",
    Self::TooFarAhead { .. } => "too-far-ahead",
    Self::WelcomeTooLarge { .. } | Self::WelcomeTooManyMembers { .. } => "welcome-too-large",
    Self::PlaintextHandshake { .. } => "plaintext-handshake",
    Self::NoRatchetTree => "no-ratchet-tree",
    Self::KeyPackageLifetime { .. } => "key-package-lifetime",
    Self::CipherSuite { .. } => "cipher-suite",
    Self::Unbound(_) => "unbound",
    Self::InviterRefused { .. } => "inviter-refused",
    Self::Binding(_) => "binding",
    Self::Open(_) => "open",
    Self::Message(_) => "message",
    Self::Operation(_) => "operation",
    Self::State(_) => "state",
    Self::Usage(_) => "usage",
});
