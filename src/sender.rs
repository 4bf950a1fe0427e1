//! The one send path: [`Sender`] seals a composed message under a profile after the
//! checks a receiver would otherwise refuse it for, and records what the receiver
//! rules need later.
//!
//! In order: the recipients' Agent Cards (their minimum protection and the profiles
//! they list), the size the receiver accepts (ours, or a recipient's published
//! `maxMessageBytes`, whichever is smaller: refused before any cryptography when the
//! message cannot fit), the sealer of the profile with the store's keys, and two
//! records in the replay state our receiver reads: every request, with its
//! correlation, recipients, attempt and expiry (so that its answers, and only they,
//! are delivered: [`crate::replay::SentRequest`]); and, for a `PaymentRequiredError`
//! carrying x402 `PaymentRequired`, that we asked its recipients for a payment (so
//! their `PaymentPayload` is accepted, and only theirs). A sender without a replay
//! state refuses both rather than send what its receiver would then refuse.
//!
//! ```
//! use mailseal::keystore::DirectoryStore;
//! use mailseal::sender::{SendError, Sender};
//! use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Profile, SealOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let sender = Sender::builder(DirectoryStore::open(dir.path().join("keys"))?).build();
//! let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! env.set("payload", &serde_json::json!({"id": "task-7"}));
//! let plain = MailA2aMessage::new("alice@example.org", &["bob@example.org"], env);
//! // An empty store has no key for Alice: refused, nothing written.
//! let err = sender.seal(&plain, &SealOptions::new(Profile::Smime)).unwrap_err();
//! assert!(matches!(err, SendError::Seal(_)));
//! # Ok(()) }
//! ```

use std::cell::OnceCell;

use crate::envelope::{Kind, PaymentKind};
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::ext::peers::{PeerPolicies, PeerPolicyError};
use crate::keystore::KeyStore;
use crate::message::{Limits, MailA2aMessage};
use crate::mls::{Mls, MlsError};
use crate::profile::Profile;
use crate::receiver::Clock;
use crate::replay::{ReceiverError, ReplayStore};
use crate::seal::{SealError, SealOptions, Sealer};

/// Why a message was not sealed. Nothing was written, except by
/// [`Sender::seal_to`] when the sealed message outgrew the limit while being written
/// ([`SendError::TooLarge`]) or a sealed request could not be recorded
/// ([`SendError::Rules`]): discard that output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The profile's sealer refused or failed.
    #[error(transparent)]
    Seal(#[from] SealError),
    /// A recipient's Agent Card rules the seal out (minimum, profiles).
    #[error(transparent)]
    Peer(#[from] PeerPolicyError),
    /// The MLS layer refused or failed.
    #[error(transparent)]
    Mls(#[from] MlsError),
    /// The payment record could not be written.
    #[error(transparent)]
    Rules(#[from] ReceiverError),
    /// Offline signing refused the request or the response.
    #[error(transparent)]
    Offline(#[from] crate::offline::OfflineError),
    /// The sealed message would exceed what the receiver accepts.
    #[error("the sealed message would be {size} bytes or more; {who} accepts at most {limit}")]
    TooLarge {
        /// The size (a lower bound when refused before sealing).
        size: u64,
        /// The limit.
        limit: u64,
        /// Whose limit: `the receiver` (our default) or the peer's address.
        who: String,
    },
}

/// The recipients [`Sender::seal_for_keyed`] left out of the encryption, each
/// (normalised) with why: its key is missing or refused.
pub type LeftOut = Vec<(String, SendError)>;

impl SendError {
    /// The recipient this error is about when it is that recipient's key alone that
    /// is missing or refused ([`SealError::recipient_without_key`]).
    pub fn recipient_without_key(&self) -> Option<&str> {
        match self {
            Self::Seal(e) => e.recipient_without_key(),
            _ => None,
        }
    }
}

impl Classify for SendError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Seal(e) => e.a2a_error(),
            Self::Peer(e) => e.a2a_error(),
            Self::Mls(e) => e.a2a_error(),
            Self::Rules(e) => e.a2a_error(),
            Self::Offline(e) => e.a2a_error(),
            Self::TooLarge { .. } => A2aErrorType::InvalidRequestError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Seal(e) => e.kind(),
            Self::Peer(e) => e.kind(),
            Self::Mls(e) => e.kind(),
            Self::Rules(e) => e.kind(),
            Self::Offline(e) => e.kind(),
            Self::TooLarge { .. } => ErrorKind::Policy,
        }
    }
}

/// Why a request (or a PaymentRequired) is not sealed by a sender without a state.
fn no_state() -> ReceiverError {
    ReceiverError::Store(
        "sealing a request or an x402 PaymentRequired records it in the replay state, and this sender has none: its answers would be refused as unsolicited (Sender::builder().replay)"
            .into(),
    )
}

type MlsOpener<'a> = Box<dyn Fn() -> Result<Mls, MlsError> + 'a>;

/// Seals messages after the checks of the [module documentation](self); built once,
/// reused for many messages.
pub struct Sender<'a> {
    keys: Box<dyn KeyStore + 'a>,
    replay: Option<Box<dyn ReplayStore + 'a>>,
    mls: OnceCell<Mls>,
    mls_open: Option<MlsOpener<'a>>,
    peers: PeerPolicies,
    limits: Limits,
    clock: Clock,
    /// Keys parsed for one message, kept for the next.
    caches: crate::dispatch::ProfileCaches,
}

/// Builds a [`Sender`].
pub struct SenderBuilder<'a> {
    sender: Sender<'a>,
}

impl<'a> SenderBuilder<'a> {
    /// Where the request and `PaymentRequired` records go: the replay state our
    /// receiver reads (default: the key store's own, see [`SenderBuilder::build`]).
    /// Without any, sealing a request or a `PaymentRequiredError` with x402 data is
    /// refused, since the answer (or the peer's payment) would then be refused as
    /// unsolicited.
    pub fn replay(mut self, store: impl ReplayStore + 'a) -> Self {
        self.sender.replay = Some(Box::new(store));
        self
    }

    /// As [`SenderBuilder::replay`], lent by a caller that keeps it.
    pub fn replay_ref(self, store: &'a dyn ReplayStore) -> Self {
        self.replay(crate::replay::Borrowed(store))
    }

    /// As [`SenderBuilder::replay`], already boxed.
    pub fn replay_boxed(mut self, store: Box<dyn ReplayStore + 'a>) -> Self {
        self.sender.replay = Some(store);
        self
    }

    /// The MLS state, for the `mls` profile.
    pub fn mls(mut self, mls: Mls) -> Self {
        self.sender.mls = OnceCell::from(mls);
        self
    }

    /// The MLS state, opened at the first MLS message.
    pub fn mls_lazy(mut self, open: impl Fn() -> Result<Mls, MlsError> + 'a) -> Self {
        self.sender.mls_open = Some(Box::new(open));
        self
    }

    /// The peers' imported Agent Cards.
    pub fn peers(mut self, peers: PeerPolicies) -> Self {
        self.sender.peers = peers;
        self
    }

    /// Our receiver's limits: the default bound on any message we send, where the
    /// peer publishes none (default 25 MiB).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.sender.limits = limits;
        self
    }

    /// The clock the payment records are dated by.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.sender.clock = clock;
        self
    }

    /// The sender. Without [`Self::replay`], the key store's durable state
    /// ([`KeyStore::state_location`], the one a [`crate::Receiver`] over the same store
    /// reads), opened only when a message records something in it.
    pub fn build(mut self) -> Sender<'a> {
        if self.sender.replay.is_none() {
            if let Some(location) = self.sender.keys.state_location() {
                self.sender.replay = Some(Box::new(crate::replay::Durable::new(location)));
            }
        }
        self.sender
    }
}

/// Counts what passes through and fails once more than `limit` bytes were written.
struct Bounded<'w> {
    inner: &'w mut dyn std::io::Write,
    written: u64,
    limit: u64,
}

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written += buf.len() as u64;
        if self.written > self.limit {
            return Err(std::io::Error::other(TooLargeMarker));
        }
        self.inner
            .write(buf)
            .inspect(|&n| self.written -= (buf.len() - n) as u64)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[derive(Debug)]
struct TooLargeMarker;
impl std::fmt::Display for TooLargeMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("over the size limit")
    }
}
impl std::error::Error for TooLargeMarker {}

impl<'a> Sender<'a> {
    /// [`SealOptions::sign_as`]: an address the store holds no signing key of is
    /// refused as such ([`SealError::NoSigningKey`]), then a From that is not it
    /// ([`SealError::NotSigningAs`]). An MLS identity is its group's to judge.
    fn check_sign_as(&self, plain: &MailA2aMessage, opts: &SealOptions) -> Result<(), SealError> {
        let Some(wanted) = opts.sign_as.as_deref() else {
            return Ok(());
        };
        if opts.profile != Profile::Mls
            && !crate::keystore::own_addresses(self.keys.as_ref())
                .iter()
                .any(|a| a.eq_ignore_ascii_case(wanted.trim()))
        {
            return Err(SealError::NoSigningKey {
                address: crate::error::quoted(wanted),
            });
        }
        crate::seal::signs_as(plain, opts)
    }

    /// A sender over `keys`, with the store's durable replay state (see
    /// [`SenderBuilder::build`]; none for a store that keeps nothing durable), no MLS
    /// state, no peer cards, the default limits and the system clock.
    pub fn builder(keys: impl KeyStore + 'a) -> SenderBuilder<'a> {
        Self::builder_boxed(Box::new(keys))
    }

    /// As [`Sender::builder`], with the key store already boxed.
    pub fn builder_boxed(keys: Box<dyn KeyStore + 'a>) -> SenderBuilder<'a> {
        SenderBuilder {
            sender: Sender {
                keys,
                replay: None,
                mls: OnceCell::new(),
                mls_open: None,
                peers: PeerPolicies::default(),
                limits: Limits::default(),
                clock: Clock::System,
                caches: Default::default(),
            },
        }
    }

    fn mls(&self) -> Result<&Mls, SendError> {
        if let Some(m) = self.mls.get() {
            return Ok(m);
        }
        let open = self
            .mls_open
            .as_ref()
            .ok_or(SealError::ProfileUnavailable(Profile::Mls))?;
        let m = open()?;
        Ok(self.mls.get_or_init(|| m))
    }

    /// Seals `plain` and returns the sealed message.
    pub fn seal(&self, plain: &MailA2aMessage, opts: &SealOptions) -> Result<Vec<u8>, SendError> {
        let mut out = Vec::new();
        self.seal_to(plain, opts, &mut out)?;
        Ok(out)
    }

    /// Seals `plain` into `out`, written as it is encoded where the profile can. Every
    /// check and the cryptography that can fail finish before the first byte, except
    /// the exact size bound (see [`SendError`]).
    pub fn seal_to(
        &self,
        plain: &MailA2aMessage,
        opts: &SealOptions,
        out: &mut dyn std::io::Write,
    ) -> Result<(), SendError> {
        self.check_sign_as(plain, opts)?;
        let recipients = match &opts.encrypt_to {
            None => Self::recipients_of(plain),
            Some(_) if opts.profile == Profile::Mls => {
                return Err(SealError::EncryptTo(
                    "does not apply to MLS: a group message is encrypted to the group".into(),
                )
                .into())
            }
            Some(only) => crate::seal::encrypt_to_subset(plain, only)?,
        };
        if opts.profile == Profile::Mls && opts.sign_only {
            return Err(SealError::MlsAlwaysEncrypted.into());
        }
        // A sealer never signs an invalid message; checked here first, so that
        // nothing is recorded for one.
        let violations = plain.check(&crate::envelope::ValidationContext::new(Some(opts.profile)));
        if !violations.is_empty() {
            return Err(SealError::Invalid(violations).into());
        }
        self.peers
            .check_seal(&recipients, opts.profile, opts.sign_only)?;
        let (limit, who) = self.size_limit(&recipients);
        Self::check_floor(plain, opts, limit, &who)?;
        // A request is recorded once sealed; without a state to record it in, refused
        // before anything is written.
        if Self::needs_replay(plain) && self.replay.is_none() {
            return Err(no_state().into());
        }
        let smime;
        let openpgp;
        let jws;
        let sealer: &dyn Sealer = match opts.profile {
            Profile::Smime => {
                smime = crate::smime::Smime::with_cache(self.keys.as_ref(), &self.caches.smime);
                &smime
            }
            Profile::OpenPgp => {
                openpgp =
                    crate::openpgp::OpenPgp::with_cache(self.keys.as_ref(), &self.caches.openpgp);
                &openpgp
            }
            Profile::Jws => {
                jws = crate::jws::Jws::with_cache(self.keys.as_ref(), &self.caches.jws);
                &jws
            }
            Profile::Mls => {
                // Straight to the group state, so its errors keep their kind (not a
                // member, removed, no identity).
                let group = opts.group.as_deref().ok_or(SealError::NoGroup)?;
                let mls = self.mls()?;
                let group_id = crate::mls::group_id_text(&crate::mls::parse_group_id(group)?);
                self.record_payment_required(plain)?;
                let sealed = mls.seal(plain, group, opts.outer_hints)?;
                if sealed.len() as u64 > limit {
                    return Err(SendError::TooLarge {
                        size: sealed.len() as u64,
                        limit,
                        who,
                    });
                }
                // Recorded once sealed: a request that failed to seal was never sent,
                // and must not hold its exchange.
                self.record_request(plain, Some(group_id))?;
                return out
                    .write_all(&sealed)
                    .map_err(|e| SealError::Output(e).into());
            }
        };
        self.record_payment_required(plain)?;
        // The keys the recipients' cards publish are chosen first.
        let mut with_card_keys;
        let opts = match self.peers.published_keys(&recipients) {
            keys if keys.is_empty() => opts,
            keys => {
                with_card_keys = opts.clone();
                with_card_keys.preferred_keys.extend(keys);
                &with_card_keys
            }
        };
        let mut bounded = Bounded {
            inner: out,
            written: 0,
            limit,
        };
        match sealer.seal_to(plain, opts, &mut bounded) {
            Err(SealError::Output(e)) if e.get_ref().is_some_and(|i| i.is::<TooLargeMarker>()) => {
                Err(SendError::TooLarge {
                    size: bounded.written,
                    limit,
                    who,
                })
            }
            // Recorded once sealed: a request that failed to seal was never sent, and
            // must not hold its exchange. Should recording fail, the error says to
            // discard what was written.
            Ok(()) => self.record_request(plain, None),
            Err(e) => Err(e.into()),
        }
    }

    /// [`Sender::seal`] for those of `plain`'s recipients that have a usable key: each
    /// one whose key is missing or refused is left out of the encryption
    /// ([`SealOptions::encrypt_to`]) and returned with why; the message still names
    /// it. For a gateway that delivers per recipient, where one partner without a key
    /// must not keep the message from the others. Refused as [`Sender::seal`] refuses
    /// when no recipient has a key, for anything but a recipient's key, and for MLS or
    /// a message only signed (which need no recipient key). [`Sender::keyed_options`]
    /// then one seal: each recipient is judged once, and the message sealed once,
    /// however many are left out.
    pub fn seal_for_keyed(
        &self,
        plain: &MailA2aMessage,
        opts: &SealOptions,
    ) -> Result<(Vec<u8>, LeftOut), SendError> {
        let (opts, left_out) = self.keyed_options(plain, opts)?;
        Ok((self.seal(plain, &opts)?, left_out))
    }

    /// What [`Sender::seal_for_keyed`] seals with, found without sealing or recording
    /// anything: `opts` narrowed ([`SealOptions::encrypt_to`]) to those of `plain`'s
    /// recipients (normalised) that have a usable key, and each one without, with the
    /// error sealing would stop at (`opts` as it is, and nobody, when every one has
    /// one, for MLS and for a message only signed). Each recipient is judged once, as
    /// sealing judges it, so the work grows with the recipients and not with their
    /// square. A caller that may still refuse the message once it knows who is left
    /// out (a gateway none of whose SMTP recipients has a key) decides before a
    /// request is recorded, then seals with these options. Refused when no recipient
    /// has a key, and when our own copy's key is the one missing (nothing to split).
    pub fn keyed_options(
        &self,
        plain: &MailA2aMessage,
        opts: &SealOptions,
    ) -> Result<(SealOptions, LeftOut), SendError> {
        if opts.sign_only || opts.profile == Profile::Mls {
            return Ok((opts.clone(), Vec::new()));
        }
        let mut recipients = match &opts.encrypt_to {
            None => Self::recipients_of(plain),
            Some(only) => crate::seal::encrypt_to_subset(plain, only)?,
        };
        let mut seen = std::collections::HashSet::new();
        recipients.retain(|r| seen.insert(r.clone()));
        let mut preferred = opts.preferred_keys.clone();
        preferred.extend(self.peers.published_keys(&recipients));
        let mut without = match opts.profile {
            Profile::Smime => {
                crate::smime::Smime::with_cache(self.keys.as_ref(), &self.caches.smime)
                    .without_key(&recipients, &preferred)
            }
            Profile::OpenPgp => {
                crate::openpgp::OpenPgp::with_cache(self.keys.as_ref(), &self.caches.openpgp)
                    .without_key(&recipients, &preferred)
            }
            Profile::Jws => crate::jws::Jws::with_cache(self.keys.as_ref(), &self.caches.jws)
                .without_key(&recipients, &preferred),
            Profile::Mls => Ok(Vec::new()),
        }?;
        if without.is_empty() {
            return Ok((opts.clone(), Vec::new()));
        }
        // Our own copy's key: nothing to split.
        let own = plain.sender();
        if let Some(i) = without
            .iter()
            .position(|(a, _)| own.as_deref() == Some(a.as_str()))
        {
            return Err(without.swap_remove(i).1.into());
        }
        let left: std::collections::HashSet<&str> =
            without.iter().map(|(a, _)| a.as_str()).collect();
        let keyed: Vec<String> = recipients
            .iter()
            .filter(|r| !left.contains(r.as_str()))
            .cloned()
            .collect();
        if keyed.is_empty() {
            return Err(without.swap_remove(0).1.into());
        }
        let mut narrowed = opts.clone();
        narrowed.encrypt_to = Some(keyed);
        Ok((
            narrowed,
            without.into_iter().map(|(a, e)| (a, e.into())).collect(),
        ))
    }

    /// Offline signing, connected host: the signing request for `plain` (see
    /// [`crate::offline`]), after the checks a seal makes first (the binding rules,
    /// the size bound). The store needs the signer's certificate or public key only.
    pub fn signing_request(
        &self,
        plain: &MailA2aMessage,
        opts: &SealOptions,
    ) -> Result<crate::offline::SigningRequest, SendError> {
        self.check_sign_as(plain, opts)?;
        let recipients = Self::recipients_of(plain);
        let (limit, who) = self.size_limit(&recipients);
        Self::check_floor(plain, opts, limit, &who)?;
        Ok(
            crate::offline::Offline::with_caches(self.keys.as_ref(), self.caches.clone())
                .prepare(plain, opts)?,
        )
    }

    /// Offline signing, connected host: the message a request and its response make
    /// (see [`crate::offline::assemble`]), under the rules of [`Sender::seal`]: each
    /// recipient's minimum (a `signed-encrypted` peer needs `encrypt`), the size
    /// limit, the record of an x402 `PaymentRequired`. With `encrypt`, the signed
    /// entity is then encrypted to the recipients (and the sender) under the request's
    /// profile (S/MIME or OpenPGP; detached-jws is never encrypted).
    pub fn assemble(
        &self,
        request: &crate::offline::SigningRequest,
        response: &crate::offline::SigningResponse,
        encrypt: bool,
    ) -> Result<Vec<u8>, SendError> {
        let assembled =
            crate::offline::Offline::with_caches(self.keys.as_ref(), self.caches.clone())
                .assemble(request, response)?;
        let plain = &assembled.plain;
        let recipients = Self::recipients_of(plain);
        if encrypt && request.profile == Profile::Jws {
            return Err(crate::offline::OfflineError::NotEncryptable.into());
        }
        self.peers
            .check_seal(&recipients, request.profile, !encrypt)?;
        let (limit, who) = self.size_limit(&recipients);
        let message = if encrypt {
            let mut addresses = recipients.clone();
            addresses.push(request.signer_address.clone());
            match request.profile {
                Profile::Smime => {
                    crate::smime::Smime::with_cache(self.keys.as_ref(), &self.caches.smime)
                        .encrypt_signed_entity(
                            &assembled.headers,
                            &assembled.hints,
                            &assembled.signed_entity,
                            &addresses,
                        )?
                }
                _ => crate::openpgp::OpenPgp::with_cache(self.keys.as_ref(), &self.caches.openpgp)
                    .encrypt_signed_entity(
                        &assembled.headers,
                        &assembled.hints,
                        &assembled.signed_entity,
                        &addresses,
                    )?,
            }
        } else {
            assembled.message
        };
        if message.len() as u64 > limit {
            return Err(SendError::TooLarge {
                size: message.len() as u64,
                limit,
                who,
            });
        }
        self.record_request(plain, None)?;
        self.record_payment_required(plain)?;
        Ok(message)
    }

    /// Refuses, before sealing, a message whose sealed size would exceed `limit`.
    fn check_floor(
        plain: &MailA2aMessage,
        opts: &SealOptions,
        limit: u64,
        who: &str,
    ) -> Result<(), SendError> {
        let floor = Self::size_floor(plain, opts);
        if floor > limit {
            return Err(SendError::TooLarge {
                size: floor,
                limit,
                who: who.to_string(),
            });
        }
        Ok(())
    }

    fn recipients_of(plain: &MailA2aMessage) -> Vec<String> {
        plain
            .headers
            .to
            .iter()
            .chain(&plain.headers.cc)
            .map(|m| m.normalized())
            .collect()
    }

    /// The profile to seal `plain` under when the caller has not chosen one (a
    /// gateway): MLS when its envelope names a group; else `default` when every
    /// recipient whose Agent Card lists profiles lists it; else the first of S/MIME and
    /// OpenPGP that all of them list; else `default` (and [`Sender::seal`] then says
    /// which recipient rules it out).
    pub fn choose_profile(&self, plain: &MailA2aMessage, default: Profile) -> Profile {
        if plain.envelope().group().is_some() {
            return Profile::Mls;
        }
        let lists: Vec<&Vec<String>> = plain
            .headers
            .to
            .iter()
            .chain(&plain.headers.cc)
            .filter_map(|m| self.peers.peers.get(&m.normalized()))
            .map(|r| &r.profiles)
            .filter(|l| !l.is_empty())
            .collect();
        [default, Profile::Smime, Profile::OpenPgp]
            .into_iter()
            .find(|p| {
                let token = crate::ext::peers::profile_token(*p);
                lists.iter().all(|l| l.iter().any(|t| t == token))
            })
            .unwrap_or(default)
    }

    /// The smaller of our limit and the recipients' published ones, and whose it is.
    fn size_limit(&self, recipients: &[String]) -> (u64, String) {
        let mut best = (
            self.limits.max_message_bytes as u64,
            "the receiver".to_string(),
        );
        for r in recipients {
            let published = self
                .peers
                .peers
                .get(r)
                .and_then(|p| p.limits.as_ref())
                .and_then(|l| l.max_message_bytes);
            if let Some(max) = published.filter(|&m| m < best.0) {
                best = (max, r.clone());
            }
        }
        best
    }

    /// A lower bound of the sealed size, known before sealing: the inner entity holds
    /// the JSON, text and attachments at least once; an encrypted message is
    /// base64-encoded once more outside (4 bytes for 3).
    fn size_floor(plain: &MailA2aMessage, opts: &SealOptions) -> u64 {
        let content = plain.envelope_bytes().len()
            + plain.text.as_ref().map_or(0, String::len)
            + plain
                .attachments
                .iter()
                .map(|a| a.data.len())
                .sum::<usize>();
        let content = content as u64;
        if opts.sign_only {
            content
        } else {
            content / 3 * 4
        }
    }

    /// Whether sealing `plain` records something in the replay state (a request, an
    /// x402 `PaymentRequired`): a caller that opens its state lazily opens it for
    /// these.
    pub fn needs_replay(plain: &MailA2aMessage) -> bool {
        let env = plain.envelope();
        env.correlation_id().is_some()
            && (env.kind() == Some(Kind::Request)
                || (env.kind() == Some(Kind::Error)
                    && env.payment_kind() == Some(PaymentKind::Required)))
    }

    /// Records the request `plain` (sent to the MLS group `group`, when sealed under
    /// `mls`) before it is sealed, so that its answers are delivered (see
    /// [`crate::replay::SentRequest`]).
    fn record_request(
        &self,
        plain: &MailA2aMessage,
        group: Option<String>,
    ) -> Result<(), SendError> {
        let rules = crate::replay::ReceiverPolicy::default();
        let Some(record) = crate::replay::SentRequest::of(plain, group, self.clock.now(), &rules)
        else {
            return Ok(());
        };
        let Some(replay) = &self.replay else {
            return Err(no_state().into());
        };
        replay.record_request(&record)?;
        Ok(())
    }

    /// A `PaymentRequiredError` carrying x402 `PaymentRequired` asks its recipients
    /// for a payment: recorded before it is sealed, so their `PaymentPayload` is
    /// accepted (MailA2A section 8), and only theirs.
    fn record_payment_required(&self, plain: &MailA2aMessage) -> Result<(), SendError> {
        let env = plain.envelope();
        if env.kind() != Some(Kind::Error) || env.payment_kind() != Some(PaymentKind::Required) {
            return Ok(());
        }
        let Some(corr) = env.correlation_id() else {
            return Ok(());
        };
        let Some(replay) = &self.replay else {
            return Err(ReceiverError::Store(
                "a PaymentRequired needs the replay state to record it in (Sender::builder().replay)"
                    .into(),
            )
            .into());
        };
        let now = self.clock.now();
        // Kept as the asking agent's (its From): only its own receiver takes the
        // payment (see `Candidate::agent`).
        let author = plain.sender().filter(|a| !a.is_empty());
        for to in plain.headers.to.iter().chain(&plain.headers.cc) {
            replay.record_payment_required(
                &crate::replay::agent_key(author.as_deref(), &to.normalized()),
                &corr,
                plain.headers.in_reply_to.as_deref(),
                now,
            )?;
        }
        Ok(())
    }
}
