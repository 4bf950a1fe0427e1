//! The one receive path: [`Receiver`] opens a message under any profile (MLS
//! included), applies the binding and identity checks, the peers' minimums and the
//! receiver rules (replay, expiry, streams), and says what the message came to, as an
//! [`Incoming`] that records nothing until [`Incoming::commit`].
//!
//! Two phases, so that nothing is lost or delivered twice across a crash:
//!
//! 1. [`Receiver::receive`] verifies and decrypts, and asks the state what it *would*
//!    decide (a dry run of the rules, an uncommitted MLS transaction). Every store is
//!    as before; dropping the [`Incoming`] keeps it so.
//! 2. The caller stores or forwards the output durably, then calls
//!    [`Incoming::commit`], which records the message (replay tuple, stream position,
//!    then the MLS state) and returns the final [`Outcome`]. The MLS state is committed
//!    last, so it is never ahead of what was delivered.
//!
//! A crash between the two leaves the message unrecorded: it is received again and
//! delivered again to the same place, which [`deliver::DeliveryDir`] makes idempotent.
//! A crash after the commit but before the output is published leaves a staged output
//! that `DeliveryDir` publishes on the next run (the message is then a duplicate).
//!
//! ```
//! use mailseal::keystore::{DirectoryStore, KeyStore};
//! use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Outcome, Profile};
//! use mailseal::{Receiver, SealOptions, Sender};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/keys-fixtures/rfc9216/");
//! let read = |f: &str| std::fs::read(format!("{fx}{f}"));
//! // Alice signs; Bob trusts her CA and holds his own identity (a signed message is
//! // accepted only by a recipient it names).
//! let alice = DirectoryStore::open(tmp.path().join("alice"))?;
//! alice.import(&read("alice.sign.crt")?, "crt", false)?;
//! alice.import(&read("alice.sign.key")?, "key", false)?;
//! let bob = DirectoryStore::open(tmp.path().join("bob"))?;
//! bob.import(&read("ca.rsa.crt")?, "ca", true)?;
//! bob.import(&read("bob.sign.crt")?, "crt", false)?;
//! bob.import(&read("bob.sign.key")?, "key", false)?;
//!
//! let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! env.set("payload", &serde_json::json!({"id": "task-7"}));
//! let plain = MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
//! let mut opts = SealOptions::new(Profile::Smime);
//! opts.sign_only = true;
//! let sealed = Sender::builder(&alice).build().seal(&plain, &opts)?;
//!
//! let mut receiver = Receiver::builder(&bob).build();
//! // Phase one: verified, nothing recorded. Dropped, it would be received afresh.
//! let incoming = receiver.receive(&sealed)?;
//! assert!(matches!(incoming.outcome(), Outcome::Deliver { .. }));
//! // Phase two, once the output is safe: recorded, and final.
//! let Outcome::Deliver { delivery, .. } = incoming.commit()? else { unreachable!() };
//! assert_eq!(delivery.candidate.message_id, "m-1");
//! // An SMTP redelivery is a duplicate.
//! assert!(matches!(receiver.receive(&sealed)?.commit()?, Outcome::Duplicate { .. }));
//! # Ok(()) }
//! ```

pub mod deliver;
mod outcome;

use std::cell::OnceCell;

pub use outcome::{Delivery, Handshake, HeldReason, Outcome, ReceiveError};

use crate::dispatch::{detect_profile, Dispatcher, ProfileCaches};
use crate::keystore::KeyStore;
use crate::mls::{Held, Mls, MlsError, Receipt, Received as MlsReceived};
use crate::profile::Profile;
use crate::replay::{MemoryReplayStore, ReceiverPolicy, ReplayStore, StreamEvent};
use crate::seal::{OpenError, OpenPolicy, Opened, Opener};

/// The time the receiver judges expiry and freshness at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Clock {
    /// The system clock, read for every message.
    #[default]
    System,
    /// A fixed time, Unix seconds: for replaying archives and for tests.
    Fixed(i64),
}

impl Clock {
    /// Now, Unix seconds.
    pub fn now(&self) -> i64 {
        match self {
            Clock::System => time::OffsetDateTime::now_utc().unix_timestamp(),
            Clock::Fixed(t) => *t,
        }
    }
}

type MlsOpener<'a> = Box<dyn Fn() -> Result<Mls, MlsError> + 'a>;

/// Opens messages and applies every receiver rule; built once, reused for many
/// messages. See the [module documentation](self) for the two phases.
pub struct Receiver<'a> {
    keys: Box<dyn KeyStore + 'a>,
    replay: Box<dyn ReplayStore + 'a>,
    mls: OnceCell<Mls>,
    mls_open: Option<MlsOpener<'a>>,
    policy: OpenPolicy,
    rules: ReceiverPolicy,
    clock: Clock,
    /// Keys parsed for one message, kept for the next.
    caches: ProfileCaches,
    /// MLS credential bindings verified lately (see [`crate::mls::authentication`]).
    bindings: crate::mls::VerifiedBindings,
    /// MLS keys pinned locally, accepted without a binding.
    mls_pinned: crate::mls::PinnedKeys,
    /// The addresses our key store holds private keys for, sorted: the agents whose
    /// state the rules keep apart ([`crate::replay::Candidate::agent`]).
    agents: Vec<String>,
}

/// Builds a [`Receiver`].
pub struct ReceiverBuilder<'a> {
    receiver: Receiver<'a>,
    /// The caller named the replay state; otherwise `build` takes the key store's.
    replay_chosen: bool,
}

impl<'a> ReceiverBuilder<'a> {
    /// The replay and stream state. Default: the key store's durable state
    /// ([`KeyStore::state_location`]: a directory store's `mailseal.db`, a SQL store's
    /// own database), so that a message one receiver accepted is a replay to every
    /// later one over the same store (and to `mailseal open` without `--state`); in
    /// memory only for a store that keeps nothing durable
    /// ([`crate::keystore::MemoryStore`]). A state kept elsewhere (`mailseal open
    /// --state LOCATION`, `MAILSEAL_STATE`, a gateway's `state`) is not the store's:
    /// the library reads no environment, so a program sharing it passes it here
    /// (`.replay_boxed(mailseal::replay::open_store(LOCATION)?)`).
    pub fn replay(mut self, store: impl ReplayStore + 'a) -> Self {
        self.receiver.replay = Box::new(store);
        self.replay_chosen = true;
        self
    }

    /// Replay and stream state in memory, gone with this receiver: a replay is
    /// refused only within its life. For tests, and for tools that open a message
    /// once and forget it; never for an agent that acts on what it receives.
    pub fn replay_in_memory(self) -> Self {
        self.replay(MemoryReplayStore::default())
    }

    /// The replay and stream state, lent by a caller that keeps it.
    pub fn replay_ref(self, store: &'a dyn ReplayStore) -> Self {
        self.replay(crate::replay::Borrowed(store))
    }

    /// The replay and stream state, already boxed (as [`crate::replay::open_store`]
    /// returns it).
    pub fn replay_boxed(mut self, store: Box<dyn ReplayStore + 'a>) -> Self {
        self.receiver.replay = store;
        self.replay_chosen = true;
        self
    }

    /// The MLS state. Without it (and without [`ReceiverBuilder::mls_lazy`]), MLS mail
    /// is refused as a profile this receiver does not have.
    pub fn mls(mut self, mls: Mls) -> Self {
        self.receiver.mls = OnceCell::from(mls);
        self
    }

    /// MLS signature keys accepted for their addresses without a credential binding
    /// (members on another MLS stack; see [`crate::mls::authentication`]).
    pub fn mls_pinned_keys(mut self, pinned: crate::mls::PinnedKeys) -> Self {
        self.receiver.mls_pinned = pinned;
        self
    }

    /// The MLS state, opened by `open` at the first `message/mls` mail (so a receiver
    /// that never sees one creates no MLS state).
    pub fn mls_lazy(mut self, open: impl Fn() -> Result<Mls, MlsError> + 'a) -> Self {
        self.receiver.mls_open = Some(Box::new(open));
        self
    }

    /// The open policy: minimums, legacy CBC, limits, DKIM keys, our addresses.
    pub fn policy(mut self, policy: OpenPolicy) -> Self {
        self.receiver.policy = policy;
        self
    }

    /// Raises the minimums to what the peers' imported Agent Cards declare (never
    /// lowers one).
    pub fn peers(mut self, peers: &crate::ext::peers::PeerPolicies) -> Self {
        peers.apply(&mut self.receiver.policy);
        self
    }

    /// Addresses we are also reached through (a list, an alias), added to our
    /// identities in the key store: a signed message must name one of them among its
    /// protected recipients, or come from one (MailA2A section 9, no surreptitious
    /// forwarding). Our identities need not be listed: `build` reads them from the
    /// store.
    pub fn our_addresses<S: AsRef<str>>(mut self, addresses: impl IntoIterator<Item = S>) -> Self {
        self.receiver.policy.our_addresses.extend(
            addresses
                .into_iter()
                .map(|a| a.as_ref().trim().to_ascii_lowercase()),
        );
        self
    }

    /// Accepts signed messages whatever recipients they name: for a verifier that is
    /// nobody's recipient (an archive). Off by default; never for an agent.
    pub fn unchecked_recipients(mut self) -> Self {
        self.receiver.policy.check_recipients = false;
        self
    }

    /// The receiver rules' tolerances (skew, lifetime, stream buffers).
    pub fn rules(mut self, rules: ReceiverPolicy) -> Self {
        self.receiver.rules = rules;
        self
    }

    /// The clock (default: the system's).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.receiver.clock = clock;
        self
    }

    /// The resource limits on untrusted messages.
    pub fn limits(mut self, limits: crate::message::Limits) -> Self {
        self.receiver.policy.limits = limits;
        self
    }

    /// The receiver. Without [`Self::replay`] (or [`Self::replay_in_memory`]), the key
    /// store's durable state, opened at the first message: a state that does not
    /// open refuses every message with its error, rather than forget.
    pub fn build(mut self) -> Receiver<'a> {
        if !self.replay_chosen {
            if let Some(location) = self.receiver.keys.state_location() {
                self.receiver.replay = Box::new(crate::replay::Durable::new(location));
            }
        }
        // A fixed clock is archival: certificates are judged as of then too.
        if let (Clock::Fixed(t), None) =
            (&self.receiver.clock, self.receiver.policy.validation_time)
        {
            self.receiver.policy.validation_time =
                time::OffsetDateTime::from_unix_timestamp(*t).ok();
        }
        // Our identities, read once: the agents whose state the rules keep apart, and
        // the recipient binding's default (the profiles would otherwise list the store
        // for every message).
        let mut agents = crate::keystore::own_addresses(self.receiver.keys.as_ref());
        agents.sort();
        agents.dedup();
        self.receiver.agents = agents;
        if self.receiver.policy.check_recipients {
            let policy = &mut self.receiver.policy;
            policy
                .our_addresses
                .extend(self.receiver.agents.iter().cloned());
            policy.our_addresses.sort();
            policy.our_addresses.dedup();
        }
        self.receiver
    }
}

/// A message received but not yet recorded. [`Incoming::commit`] once its output is
/// safe; dropped, every store is as before.
#[must_use = "nothing is recorded until commit(); dropping it forgets the message"]
pub struct Incoming<'r> {
    outcome: Outcome,
    receipt: Option<Receipt<'r>>,
    receiver: &'r Receiver<'r>,
}

impl std::fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming")
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl<'r> Incoming<'r> {
    /// What the message would come to if committed now.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// Records the message: the receiver rules decide again, atomically (another
    /// process sharing the state may have taken the message since [`Receiver::receive`]),
    /// then the MLS state change is made durable. Returns the final outcome: act on
    /// this one, not on the preview. On an error nothing is recorded.
    pub fn commit(self) -> Result<Outcome, ReceiveError> {
        let Incoming {
            outcome,
            receipt,
            receiver,
        } = self;
        let outcome = match outcome.into_delivery() {
            Ok(delivery) => {
                let admission = receiver.judge(&delivery, false)?;
                Outcome::from_admission(delivery, admission)
            }
            Err(other) => other,
        };
        if let Some(r) = receipt {
            r.commit()?;
        }
        Ok(outcome)
    }
}

impl Incoming<'_> {
    /// What the rules would decide for the message received for `agent` (an address
    /// of ours: a gateway's SMTP recipient), recording nothing: each agent keeps its
    /// own state ([`crate::replay::Candidate::agent`]). `None` when the message is no
    /// application message (an MLS handshake, one held for an epoch, an MLS copy
    /// seen before).
    pub fn preview_for(
        &self,
        agent: &str,
    ) -> Result<Option<crate::replay::Admission>, ReceiveError> {
        let Some(delivery) = self.outcome.delivery() else {
            return Ok(None);
        };
        let candidate = for_agent(&delivery.candidate, agent);
        Ok(Some(self.receiver.replay.preview(
            &candidate,
            self.receiver.clock.now(),
            &self.receiver.rules,
        )?))
    }

    /// Records the message for each of `agents` (each decided again, atomically, in
    /// its own state) and then makes the MLS state change durable, when no agent's
    /// rules failed on the store itself. Returns each agent's final decision (act on
    /// these, not on the previews); a refusal for one agent leaves the others'. For a
    /// message that is no application message, only the MLS state change.
    pub fn commit_for(self, agents: &[String]) -> Result<Vec<AgentAdmission>, ReceiveError> {
        let Incoming {
            outcome,
            receipt,
            receiver,
        } = self;
        let mut out = Vec::with_capacity(agents.len());
        if let Some(delivery) = outcome.delivery() {
            for agent in agents {
                let candidate = for_agent(&delivery.candidate, agent);
                match receiver
                    .replay
                    .admit(&candidate, receiver.clock.now(), &receiver.rules)
                {
                    // The state itself failed: nothing more is recorded (those
                    // recorded stay so: when the message comes again it is a
                    // duplicate for them and new for the others), and the MLS state
                    // is not moved on.
                    Err(e)
                        if crate::error::Classify::kind(&e) == crate::error::ErrorKind::Other =>
                    {
                        return Err(e.into())
                    }
                    admission => out.push((
                        candidate.agent.unwrap_or_default(),
                        admission.map_err(ReceiveError::from),
                    )),
                }
            }
        }
        if let Some(r) = receipt {
            r.commit()?;
        }
        Ok(out)
    }
}

/// An agent's final decision from [`Incoming::commit_for`]: its address, and what the
/// rules decided for it.
pub type AgentAdmission = (String, Result<crate::replay::Admission, ReceiveError>);

/// `candidate` received for `agent`.
fn for_agent(candidate: &crate::replay::Candidate, agent: &str) -> crate::replay::Candidate {
    let mut c = candidate.clone();
    c.agent = Some(crate::message::Mailbox::new(agent).normalized());
    c
}

/// A held MLS message whose epoch has come, as received again.
pub struct Released<'r> {
    /// The name it was first received under.
    pub name: String,
    /// What it came to; on an error it was dropped from the hold.
    pub result: Result<Incoming<'r>, ReceiveError>,
}

impl<'a> Receiver<'a> {
    /// A receiver over `keys`, with the store's durable replay state (see
    /// [`ReceiverBuilder::replay`]), no MLS state, the default policy and rules, and
    /// the system clock.
    pub fn builder(keys: impl KeyStore + 'a) -> ReceiverBuilder<'a> {
        Self::builder_boxed(Box::new(keys))
    }

    /// As [`Receiver::builder`], with the key store already boxed.
    pub fn builder_boxed(keys: Box<dyn KeyStore + 'a>) -> ReceiverBuilder<'a> {
        ReceiverBuilder {
            receiver: Receiver {
                keys,
                replay: Box::new(MemoryReplayStore::default()),
                mls: OnceCell::new(),
                mls_open: None,
                policy: OpenPolicy::default(),
                rules: ReceiverPolicy::default(),
                clock: Clock::System,
                caches: ProfileCaches::default(),
                bindings: Default::default(),
                mls_pinned: Default::default(),
                agents: Vec::new(),
            },
            replay_chosen: false,
        }
    }

    /// The open policy in force.
    pub fn policy(&self) -> &OpenPolicy {
        &self.policy
    }

    /// The replay and stream state.
    pub fn replay(&self) -> &dyn ReplayStore {
        self.replay.as_ref()
    }

    /// The MLS state, opening it now if it is opened lazily.
    pub fn mls(&self) -> Result<&Mls, ReceiveError> {
        if let Some(m) = self.mls.get() {
            return Ok(m);
        }
        let open = self.mls_open.as_ref().ok_or(ReceiveError::Open(
            crate::seal::OpenError::ProfileUnavailable(Profile::Mls),
        ))?;
        let m = open()?;
        Ok(self.mls.get_or_init(|| m))
    }

    /// The addresses this receiver's key store holds private keys for: the agents it
    /// opens mail for (lower case, each once).
    pub fn own_addresses(&self) -> Vec<String> {
        crate::keystore::own_addresses(self.keys.as_ref())
    }

    /// Receives one message (see [`Receiver::receive_named`]).
    pub fn receive(&mut self, raw: &[u8]) -> Result<Incoming<'_>, ReceiveError> {
        self.receive_named(raw, "")
    }

    /// Receives one message: verifies, decrypts, binds, and previews the receiver
    /// rules. `name` names an MLS message that is held for a future epoch (it comes
    /// back under that name from [`Receiver::next_released`]). Takes `&mut self`: one
    /// message at a time, so that each commit sees the one before.
    pub fn receive_named(&mut self, raw: &[u8], name: &str) -> Result<Incoming<'_>, ReceiveError> {
        let me: &Receiver<'_> = self;
        me.receive_shared(raw, name)
    }

    /// [`Self::receive_named`] taking the message's buffer, which may be decoded and
    /// decrypted in place: a large encrypted message is then held once, not as the
    /// input, its CMS and its plaintext side by side.
    pub fn receive_owned(
        &mut self,
        raw: Vec<u8>,
        name: &str,
    ) -> Result<Incoming<'_>, ReceiveError> {
        let me: &Receiver<'_> = self;
        me.receive_input(Input::Owned(raw), name)
    }

    fn receive_shared<'r>(&'r self, raw: &[u8], name: &str) -> Result<Incoming<'r>, ReceiveError> {
        self.receive_input(Input::Borrowed(raw), name)
    }

    fn receive_input<'r>(
        &'r self,
        raw: Input<'_>,
        name: &str,
    ) -> Result<Incoming<'r>, ReceiveError> {
        if detect_profile(raw.bytes()) == Some(Profile::Mls) {
            let receipt =
                self.mls()?
                    .receive(raw.bytes(), &self.policy, name, &self.authenticator())?;
            return self.after_mls(receipt);
        }
        let opened = raw.open(
            &Dispatcher::with_caches(self.keys.as_ref(), &self.caches),
            &self.policy,
        )?;
        Ok(Incoming {
            outcome: self.preview(self.delivery(opened)?)?,
            receipt: None,
            receiver: self,
        })
    }

    /// The MLS authentication service over our key store, checking as our mail is
    /// checked (the policy's validation time and CRL rule).
    pub fn authenticator(&self) -> crate::mls::StoreAuthenticator<'_> {
        crate::mls::StoreAuthenticator::with_policy(self.keys.as_ref(), &self.policy)
            .cached(&self.bindings)
            .with_pinned(&self.mls_pinned)
    }

    /// `opened` as the rules take it, received for the agent of ours it names, when
    /// it names exactly one ([`crate::replay::Candidate::agent`]; a caller that knows
    /// better names it with [`Incoming::commit_for`]).
    fn delivery(&self, opened: Opened) -> Result<Delivery, crate::replay::ReceiverError> {
        let mut d = Delivery::new(opened)?;
        if let [one] = self.named_agents(&d).as_slice() {
            d.candidate.agent = Some(one.clone());
        }
        Ok(d)
    }

    /// What the rules would decide for `delivery` now, recording nothing.
    fn preview(&self, delivery: Delivery) -> Result<Outcome, ReceiveError> {
        let admission = self.judge(&delivery, true)?;
        Ok(Outcome::from_admission(Box::new(delivery), admission))
    }

    /// The rules' decision on `delivery` (recording it unless `dry`), for the agent it
    /// was received for; for a message that names several agents of ours and was
    /// received for none in particular, for each of them, as one decision: delivered
    /// when any of them takes it, else held, else a duplicate when one had it already,
    /// else refused. So every agent's state knows it, whoever receives it next (a
    /// gateway judging per recipient, or this receiver again).
    fn judge(
        &self,
        delivery: &Delivery,
        dry: bool,
    ) -> Result<crate::replay::Admission, ReceiveError> {
        use crate::replay::Admission;
        let now = self.clock.now();
        let run = |c: &crate::replay::Candidate| match dry {
            true => self.replay.preview(c, now, &self.rules),
            false => self.replay.admit(c, now, &self.rules),
        };
        let agents = match &delivery.candidate.agent {
            Some(_) => Vec::new(),
            None => self.named_agents(delivery),
        };
        if agents.len() < 2 {
            return Ok(run(&delivery.candidate)?);
        }
        let (mut deliver, mut held, mut refused, mut duplicate) = (None, None, None, None);
        for agent in &agents {
            match run(&for_agent(&delivery.candidate, agent)) {
                Ok(Admission::Deliver { retry_of, released }) => {
                    let (r, n) = deliver.get_or_insert((None, 0));
                    if r.is_none() {
                        *r = retry_of;
                    }
                    *n += released;
                }
                Ok(h @ Admission::Held { .. }) => held = held.or(Some(h)),
                Ok(d) => duplicate = duplicate.or(Some(d)),
                // The state itself failed: the message is not taken.
                Err(e) if crate::error::Classify::kind(&e) == crate::error::ErrorKind::Other => {
                    return Err(e.into())
                }
                Err(e) => refused = refused.or(Some(e)),
            }
        }
        if let Some((retry_of, released)) = deliver {
            return Ok(Admission::Deliver { retry_of, released });
        }
        match (held, duplicate, refused) {
            (Some(h), _, _) => Ok(h),
            (None, Some(d), _) => Ok(d),
            (None, None, Some(e)) => Err(e.into()),
            (None, None, None) => Ok(run(&delivery.candidate)?),
        }
    }

    /// The agents of ours `delivery` names (its protected To and Cc), each once.
    fn named_agents(&self, delivery: &Delivery) -> Vec<String> {
        let mut ours: Vec<String> = delivery
            .named_recipients()
            .into_iter()
            .filter(|a| self.agents.binary_search(a).is_ok())
            .collect();
        ours.sort();
        ours.dedup();
        ours
    }

    fn after_mls<'r>(&'r self, receipt: Receipt<'r>) -> Result<Incoming<'r>, ReceiveError> {
        let outcome = match &receipt.received {
            MlsReceived::Application(opened) => self.preview(self.delivery((**opened).clone())?)?,
            other => Outcome::from_mls(other),
        };
        Ok(Incoming {
            outcome,
            receipt: Some(receipt),
            receiver: self,
        })
    }

    /// Verifies and decrypts only: no receiver rule (replay, expiry, streams) is
    /// applied and nothing is recorded (an MLS message is opened and rolled back). For
    /// inspecting archives: an agent must never act on what this returns.
    pub fn verify(&self, raw: &[u8]) -> Result<Outcome, ReceiveError> {
        self.verify_input(Input::Borrowed(raw))
    }

    /// [`Self::verify`] taking the message's buffer (see [`Self::receive_owned`]).
    pub fn verify_owned(&self, raw: Vec<u8>) -> Result<Outcome, ReceiveError> {
        self.verify_input(Input::Owned(raw))
    }

    fn verify_input(&self, raw: Input<'_>) -> Result<Outcome, ReceiveError> {
        let opened = if detect_profile(raw.bytes()) == Some(Profile::Mls) {
            let receipt = self.mls()?.receive(
                raw.bytes(),
                &self.policy,
                "stateless",
                &self.authenticator(),
            )?;
            match &receipt.received {
                MlsReceived::Application(o) => (**o).clone(),
                other => return Ok(Outcome::from_mls(other)),
            }
        } else {
            raw.open(
                &Dispatcher::with_caches(self.keys.as_ref(), &self.caches),
                &self.policy,
            )?
        };
        Ok(Outcome::Deliver {
            delivery: Box::new(self.delivery(opened)?),
            retry_of: None,
            released: 0,
        })
    }

    /// The next MLS message that was held for an epoch that has now come (after a
    /// Commit), received again; `None` when none is ready or the MLS state is not
    /// open (see [`Receiver::mls`]).
    pub fn next_released(
        &mut self,
        group: Option<&str>,
    ) -> Result<Option<Released<'_>>, ReceiveError> {
        let me: &Receiver<'_> = self;
        // Only a receiver that has opened its MLS state (it received MLS mail, or the
        // caller asked for it with `mls()`) can have released anything.
        match me.mls.get() {
            Some(mls) => me.released_from(mls, group),
            None => Ok(None),
        }
    }

    fn released_from<'r>(
        &'r self,
        mls: &'r Mls,
        group: Option<&str>,
    ) -> Result<Option<Released<'r>>, ReceiveError> {
        let Some(held): Option<Held> = mls.next_ready(group)? else {
            return Ok(None);
        };
        let result = mls
            .receive(&held.raw, &self.policy, &held.name, &self.authenticator())
            .map_err(ReceiveError::from)
            .and_then(|r| self.after_mls(r));
        if result.is_err() {
            mls.discard(&held)?;
        }
        Ok(Some(Released {
            name: held.name,
            result,
        }))
    }

    /// Takes the events of stream `correlation_id` that a gap fill made deliverable,
    /// in order.
    pub fn take_stream_events(
        &self,
        correlation_id: &str,
    ) -> Result<Vec<StreamEvent>, ReceiveError> {
        Ok(self.replay.take_deliverable(correlation_id)?)
    }
}

/// A message as the caller gave it: borrowed, or a buffer we may decode and decrypt in.
enum Input<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Input<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Input::Borrowed(b) => b,
            Input::Owned(v) => v,
        }
    }

    fn open(self, opener: &dyn Opener, policy: &OpenPolicy) -> Result<Opened, OpenError> {
        match self {
            Input::Borrowed(b) => opener.open(b, policy),
            Input::Owned(v) => opener.open_owned(v, policy),
        }
    }
}
