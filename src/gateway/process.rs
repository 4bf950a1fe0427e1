//! What the gateway does with a message it is handed: the library's [`Sender`] seals
//! outbound mail, its [`Receiver`] opens inbound mail, and the result is spooled
//! before the client hears 250. No protocol rule lives here: the choices are the
//! library's (the profile a recipient's card names, every receiver rule), the
//! gateway only maps their outcomes to SMTP replies and spool entries.
//!
//! [`Receiver`] and [`Sender`] hold per-thread state (key caches, the MLS group
//! cache), so each worker thread builds its own from the [`PipelineFactory`] and
//! keeps it; jobs come to the workers over a channel and their decisions go back to
//! the SMTP session that waits for them.
//!
//! Inbound, a message is received (verified, decrypted, the rules previewed), its
//! output spooled, then committed. A crash between the put and the commit leaves the
//! output queued but the message unrecorded: the client, not having heard 250, sends
//! it again, and the put of the same entry is a no-op (the spool names an opened
//! message by its signer, `messageId` and envelope digest, and remembers delivered
//! ones): also when two copies sealed apart arrive at once and both pass the preview. A crash after the commit makes the
//! client's retry a duplicate, accepted and dropped, its output already queued.

use std::sync::{mpsc, Arc, Mutex};

use tokio::sync::oneshot;

use super::config::{Config, Mode, NoKey, Plain, Submission};
use super::session::Transaction;
use super::spool::{Entry, Spool};
use super::submission::Submitters;
use crate::error::{Classify, ErrorKind};
use crate::message::{Limits, MailA2aMessage};
use crate::profile::Profile;
use crate::receiver::{Delivery, Incoming, Outcome, ReceiveError, Receiver};
use crate::replay::Admission;
use crate::seal::SealOptions;
use crate::sender::Sender;

/// The header field the gateway owns: what it decided about a message it opened.
/// Stripped from everything it accepts, so only the gateway's own reaches the inside.
pub const VERDICT_HEADER: &str = "Mailseal-Verdict";

/// The header field in which an agent behind the gateway names the MLS group a message
/// goes to (its id, as `mailseal mls create` printed it). Removed before sealing.
pub const GROUP_HEADER: &str = "Mailseal-Group";

/// One worker's seal and open paths, built in its own thread.
pub struct Pipeline {
    /// Opens inbound mail.
    pub receiver: Receiver<'static>,
    /// Seals outbound mail.
    pub sender: Sender<'static>,
}

/// Builds a worker's [`Pipeline`] (the CLI's opens the configured stores).
pub type PipelineFactory = dyn Fn() -> Result<Pipeline, String> + Send + Sync;

/// What became of a message, as the SMTP client hears it and the log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The SMTP reply code.
    pub code: u16,
    /// The enhanced status code.
    pub status: &'static str,
    /// The reply text (one line, no secrets).
    pub text: String,
    /// One word for the log: `sealed`, `opened`, `passed`, `duplicate`,
    /// `handshake`, `held`, `refused`, `deferred`.
    pub verdict: &'static str,
    /// The profile, when one was used.
    pub profile: Option<Profile>,
    /// The spool entry, when one was queued.
    pub id: Option<String>,
    /// What its log line says of the message, filled in once it is decided.
    pub logged: Option<Box<Logged>>,
}

/// What the log line of a [`Decision`] says of its message besides the decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Logged {
    /// When nothing was queued, what the line calls the message instead: the name it
    /// was received under (see `logline::describe`).
    pub name: Option<String>,
    /// The From address, bounded and escaped for a log line.
    pub from: String,
    /// The Message-ID, bounded and escaped for a log line.
    pub message_id: String,
}

impl Decision {
    fn accepted(verdict: &'static str, profile: Option<Profile>, id: Option<String>) -> Self {
        let text = match &id {
            Some(id) => format!("queued as {id}"),
            None => format!("accepted ({verdict}), nothing to deliver"),
        };
        Decision {
            code: 250,
            status: "2.0.0",
            text,
            verdict,
            profile,
            id,
            logged: None,
        }
    }

    fn refused(code: u16, status: &'static str, text: impl std::fmt::Display) -> Self {
        Decision {
            code,
            status,
            text: one_line(&text.to_string()),
            verdict: if code >= 500 { "refused" } else { "deferred" },
            profile: None,
            id: None,
            logged: None,
        }
    }

    /// A temporary failure of ours (a store, the spool): the client retries.
    pub(crate) fn local_error(text: impl std::fmt::Display) -> Self {
        Decision::refused(451, "4.3.0", text)
    }

    /// The reply line.
    pub fn reply(&self) -> Vec<u8> {
        format!("{} {} {}\r\n", self.code, self.status, self.text).into_bytes()
    }
}

/// Printable ASCII on one line, at most 200 characters: an error's text as a reply.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                ' '
            }
        })
        .take(200)
        .collect()
}

/// A refusal that carries an error's kind: a failure of ours is temporary.
fn refusal<E: Classify + std::fmt::Display>(e: &E) -> Decision {
    match e.kind() {
        ErrorKind::Other => Decision::local_error(format!("temporary failure: {e}")),
        ErrorKind::Malformed => Decision::refused(554, "5.6.0", e),
        ErrorKind::NoUsableKey => Decision::refused(550, "5.7.1", e),
        _ => Decision::refused(550, "5.7.1", e),
    }
}

/// A refusal of a message received: one that only a bound on what waits refused
/// ([`ReceiveError::retry_later`]) is temporary (452 4.3.1, the mail system is full
/// for now), so a flood nobody can authenticate yet delays the genuine mail behind it
/// and never bounces it.
///
/// A refusal by the receiver rules names its code, not its text: the rules judge the
/// decrypted envelope, and their text quotes its fields (a `messageId`, a correlation,
/// an idempotency key), which whoever replays the ciphertext must not learn. The log
/// keeps the text.
fn receive_refusal(e: &ReceiveError) -> Decision {
    if e.retry_later() {
        Decision::refused(452, "4.3.1", e)
    } else if let (ReceiveError::Rules(r), false) = (e, e.kind() == ErrorKind::Other) {
        tracing::info!(code = r.code(), reason = %crate::error::quoted(r.to_string()), "refused by the receiver rules");
        Decision::refused(
            550,
            "5.7.1",
            format!("refused by the receiver rules ({})", r.code()),
        )
    } else {
        refusal(e)
    }
}

/// A message to process, and where its decision goes.
pub(crate) struct Job {
    pub(crate) listener: String,
    pub(crate) mode: Mode,
    pub(crate) transaction: Transaction,
    pub(crate) done: oneshot::Sender<Decision>,
}

/// The worker threads.
pub(crate) struct Workers {
    jobs: mpsc::SyncSender<Job>,
    /// Bumped on SIGHUP: each worker builds its pipeline again before its next job,
    /// so peer policies and cards changed since (by any instance) take effect.
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl Workers {
    /// Starts `n` workers, each building its pipeline with `factory`.
    pub(crate) fn start(
        n: usize,
        factory: Arc<PipelineFactory>,
        spool: Arc<dyn Spool>,
        config: Arc<Config>,
        submitters: Arc<Submitters>,
    ) -> std::io::Result<Workers> {
        let (tx, rx) = mpsc::sync_channel::<Job>(n * 4);
        let rx = Arc::new(Mutex::new(rx));
        let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
        for i in 0..n {
            let rx = rx.clone();
            let factory = factory.clone();
            let spool = spool.clone();
            let config = config.clone();
            let submitters = submitters.clone();
            let generation = generation.clone();
            std::thread::Builder::new()
                .name(format!("mailseal-worker-{i}"))
                .spawn(move || worker(rx, factory, spool, config, submitters, generation))?;
        }
        Ok(Workers {
            jobs: tx,
            generation,
        })
    }

    /// Has every worker build its pipeline again (stores, cards, peer policies)
    /// before its next message.
    pub(crate) fn reload(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Hands `job` to a worker (waiting while all are busy and the queue is full).
    pub(crate) async fn submit(&self, job: Job) {
        let jobs = self.jobs.clone();
        // The channel is bounded: a full queue pushes back on the SMTP clients.
        let _ = tokio::task::spawn_blocking(move || jobs.send(job).map_err(drop)).await;
    }
}

fn worker(
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    factory: Arc<PipelineFactory>,
    spool: Arc<dyn Spool>,
    config: Arc<Config>,
    submitters: Arc<Submitters>,
    generation: Arc<std::sync::atomic::AtomicU64>,
) {
    let build = || match factory() {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::error!(error = %e, "worker: cannot open the stores; messages are deferred until they open");
            None
        }
    };
    let mut built = generation.load(std::sync::atomic::Ordering::SeqCst);
    let mut pipeline = build();
    let mut last_build = std::time::Instant::now();
    // The last job failed on our side (4.3.0): the pipeline may hold a dead connection.
    let mut failed = false;
    let profile = config.default_profile().unwrap_or(Profile::Smime);
    loop {
        let job = {
            let rx = jobs.lock().unwrap_or_else(|p| p.into_inner());
            match rx.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        // After SIGHUP, when the stores did not open, or after a failure of ours (a
        // database that went away: its stores connect again when built again, at most
        // once a second): build it again (a failed rebuild keeps the pipeline that
        // works).
        let now_generation = generation.load(std::sync::atomic::Ordering::SeqCst);
        let retry = failed && last_build.elapsed() >= std::time::Duration::from_secs(1);
        if now_generation != built || pipeline.is_none() || retry {
            built = now_generation;
            last_build = std::time::Instant::now();
            if let Some(p) = build() {
                pipeline = Some(p);
            }
        }
        let mut decision = match pipeline.as_mut() {
            None => Decision::local_error("the gateway cannot open its key store"),
            Some(p) => {
                let ctx = Context {
                    spool: spool.as_ref(),
                    config: &config,
                    submitters: &submitters,
                    listener: &job.listener,
                    default_profile: profile,
                };
                match job.mode {
                    // A first line that continues a header field would continue the
                    // field the gateway puts on top (Received:, Mailseal-Verdict:): a
                    // message begins with a field, never with its continuation.
                    _ if matches!(job.transaction.data.first(), Some(b' ' | b'\t')) => {
                        Decision::refused(
                            554,
                            "5.6.0",
                            "the message begins with a folded line (a continuation of no header field)",
                        )
                    }
                    Mode::Outbound => ctx.outbound(&p.sender, &job.transaction),
                    Mode::Inbound => ctx.inbound(&mut p.receiver, &job.transaction),
                    Mode::Relay => ctx.relay(&job.transaction),
                }
            }
        };
        failed = decision.status == "4.3.0";
        super::logline::describe(
            &mut decision,
            &job.listener,
            &job.transaction,
            config.limits.max_message_bytes,
        );
        let _ = job.done.send(decision);
    }
}

struct Context<'c> {
    spool: &'c dyn Spool,
    config: &'c Config,
    submitters: &'c Submitters,
    listener: &'c str,
    default_profile: Profile,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

impl Context<'_> {
    /// Spools `data` for `t`'s recipients under the name `key` gives it (see
    /// [`Entry::keyed`]): the client's bytes, or, for an opened message, the message
    /// the receiver rules know (two copies they would call one are one entry).
    fn queue(&self, t: &Transaction, key: &[u8], data: Vec<u8>) -> Result<String, Decision> {
        self.queue_to(t, &t.recipients, key, data)
    }

    /// [`Context::queue`] for `recipients` rather than the transaction's.
    fn queue_to(
        &self,
        t: &Transaction,
        recipients: &[String],
        key: &[u8],
        data: Vec<u8>,
    ) -> Result<String, Decision> {
        let at = now();
        let mut entry = Entry::keyed(self.listener, &t.mail_from, recipients, key, data, at)
            .accepted_at(super::spool::now_ms());
        // The trace field of this hop, on top of what is queued (named by `key`, not
        // by these bytes: a client's retry is still the same entry).
        let received = super::trace::received(t, &self.config.hostname, &entry.id, recipients, at);
        entry.data.splice(0..0, received.into_bytes());
        self.spool
            .put(&entry)
            .map(|_| entry.id)
            .map_err(Decision::local_error)
    }

    fn relay(&self, t: &Transaction) -> Decision {
        // A relay gives no verdict, so it passes on none it was handed.
        match self.queue(t, &t.data, strip_header(&t.data, VERDICT_HEADER)) {
            Ok(id) => Decision::accepted("passed", None, Some(id)),
            Err(d) => d,
        }
    }

    /// Why `t` may not leave under its From and MAIL FROM for the submitter its session
    /// proved (issue #57: signed or passed on, nothing leaves as an agent its
    /// submitter may not use).
    fn refuse_submitter(&self, t: &Transaction, raw: &[u8]) -> Option<Decision> {
        let policy = self
            .config
            .listener(self.listener)
            .and_then(|l| l.submission)
            .unwrap_or(Submission::Auth);
        if policy == Submission::Open {
            return None;
        }
        if policy == Submission::None {
            return Some(Decision::refused(
                550,
                "5.7.1",
                "this listener takes no submissions (submission = \"none\")",
            ));
        }
        let limits = Limits {
            max_message_bytes: self.config.limits.max_message_bytes,
            ..Limits::default()
        };
        let headers = crate::message::read_outer(raw, &limits)
            .ok()
            .map(|o| o.headers);
        let from = headers
            .as_ref()
            .filter(|h| h.from_count == 1)
            .and_then(|h| h.from.as_ref())
            .map(|f| f.address.as_str());
        super::submission::refuse_from(
            policy,
            self.submitters,
            t.login.as_deref(),
            &t.mail_from,
            from,
        )
        .map(|why| Decision::refused(550, "5.7.1", why))
    }

    fn outbound(&self, sender: &Sender<'_>, t: &Transaction) -> Decision {
        let raw = strip_header(&t.data, VERDICT_HEADER);
        if let Some(refused) = self.refuse_submitter(t, &raw) {
            return refused;
        }
        // An agent names the MLS group of a message in this field (it cannot know
        // the coordinates the group's state gives it); the field goes no further.
        let (raw, groups) = take_header(&raw, GROUP_HEADER);
        if crate::dispatch::detect_profile(&raw).is_some() {
            // Sealed already (by the agent itself): it goes as it is.
            return match self.queue(t, &t.data, raw) {
                Ok(id) => Decision::accepted("passed", None, Some(id)),
                Err(d) => d,
            };
        }
        if !is_maila2a(&raw) {
            return match self.config.outbound.non_maila2a {
                Plain::Pass => match self.queue(t, &t.data, raw) {
                    Ok(id) => Decision::accepted("passed", None, Some(id)),
                    Err(d) => d,
                },
                Plain::Refuse => Decision::refused(
                    550,
                    "5.7.1",
                    "only MailA2A mail leaves through this gateway",
                ),
            };
        }
        // A message that claims to be MailA2A is sealed or refused: never sent in clear.
        let limits = Limits {
            max_message_bytes: self.config.limits.max_message_bytes,
            ..Limits::default()
        };
        let plain = match MailA2aMessage::parse(&raw, &limits) {
            Ok(p) => p,
            Err(e) => {
                return Decision::refused(
                    554,
                    "5.6.0",
                    format!("not a well-formed MailA2A message: {e}"),
                )
            }
        };
        let group = groups
            .into_iter()
            .next()
            .or_else(|| plain.envelope().group().map(|g| g.id));
        let profile = match group {
            Some(_) => Profile::Mls,
            None => sender.choose_profile(&plain, self.default_profile),
        };
        // A recipient the message does not name (a Bcc) would make the partner refuse
        // the whole sealed message as forwarded, and the named recipients with it: it
        // is left out, and the agent hears why (a group's members are named by the
        // group instead).
        let (named, unnamed) = match profile {
            Profile::Mls => (t.recipients.clone(), Vec::new()),
            _ => split_named(&plain, &t.recipients),
        };
        if named.is_empty() {
            return Decision::refused(
                550,
                "5.7.1",
                "the message names none of its SMTP recipients in To or Cc: a partner refuses sealed mail that does not name its recipient (send each a message that names it)",
            );
        }
        // Nobody to tell of those left out (a null reverse path): refused now instead.
        if !unnamed.is_empty() && t.mail_from.is_empty() {
            return Decision::refused(
                550,
                "5.7.1",
                "the message does not name every SMTP recipient in To or Cc (a Bcc), and a null reverse path leaves nobody to report it to: send each a message that names it",
            );
        }
        let mut opts = SealOptions::new(profile);
        opts.sign_only = self.config.outbound.sign_only && profile != Profile::Mls;
        opts.group = group;
        let no_key = self.config.outbound.no_key;
        let no_usable_key = |e: &dyn std::fmt::Display| match no_key {
            NoKey::Refuse | NoKey::Split => Decision::refused(550, "5.7.1", format!("{e}")),
            NoKey::Defer => Decision::refused(451, "4.7.1", format!("{e}")),
        };
        // Split: sealed for the recipients that have a key, each other one left out
        // and reported (MLS goes to its group; a signed-only message needs no key).
        // Who is left out is known before the message is sealed, so that one refused
        // for it records nothing (a request whose answers would be taken).
        let split = no_key == NoKey::Split && profile != Profile::Mls && !opts.sign_only;
        let (opts, keyless) = if split {
            match sender.keyed_options(&plain, &opts) {
                Ok(o) => o,
                Err(e) if e.kind() == ErrorKind::NoUsableKey => return no_usable_key(&e),
                Err(e) => return refusal(&e),
            }
        } else {
            (opts, Vec::new())
        };
        let (named, keyless) = split_keyless(named, keyless);
        if let Some((_, e)) = keyless.first() {
            // None of this transaction's recipients can read it, or nobody to tell
            // (a null reverse path): refused whole.
            if named.is_empty() {
                return no_usable_key(e);
            }
            if t.mail_from.is_empty() {
                return Decision::refused(
                    550,
                    "5.7.1",
                    format!("{e}; and a null reverse path leaves nobody to report it to"),
                );
            }
        }
        let sealed = match sender.seal(&plain, &opts) {
            Ok(s) => s,
            Err(e) if e.kind() == ErrorKind::NoUsableKey => return no_usable_key(&e),
            Err(e) => return refusal(&e),
        };
        // Named by what the agent sent: its retry is the same entry, though sealing
        // it again would give other bytes.
        match self.queue_to(t, &named, &t.data, sealed) {
            Ok(id) => {
                if !unnamed.is_empty() || !keyless.is_empty() {
                    self.report_left_out(
                        t,
                        plain.headers.message_id.as_deref(),
                        &unnamed,
                        &keyless,
                    );
                }
                Decision::accepted("sealed", Some(profile), Some(id))
            }
            Err(d) => d,
        }
    }

    fn inbound(&self, receiver: &mut Receiver<'_>, t: &Transaction) -> Decision {
        if crate::dispatch::detect_profile(&t.data).is_none() && !is_maila2a(&t.data) {
            return match self.config.inbound.non_maila2a {
                Plain::Pass => {
                    let out = with_verdict(&t.data, "none; not MailA2A");
                    match self.queue(t, &t.data, out) {
                        Ok(id) => Decision::accepted("passed", None, Some(id)),
                        Err(d) => d,
                    }
                }
                Plain::Refuse => Decision::refused(
                    550,
                    "5.7.1",
                    "only MailA2A mail enters through this gateway",
                ),
            };
        }
        let name = super::spool::entry_id(self.listener, &t.mail_from, &t.recipients, &t.data);
        let incoming = match receiver.receive_named(&t.data, &name) {
            Ok(i) => i,
            Err(e) => return receive_refusal(&e),
        };
        let profile = incoming
            .outcome()
            .delivery()
            .and_then(|d| d.opened.verdict.profile);
        let (mut decision, stream) = match self.settle(incoming, t, None) {
            Ok(d) => d,
            Err(d) => return d,
        };
        decision.profile = decision.profile.or(profile);
        if let Some(s) = stream {
            self.deliver_stream_events(receiver, s, t);
        }
        // A Commit may have brought the epoch of held MLS messages.
        self.release(receiver, t);
        decision
    }

    /// Spools what `incoming` delivers, then commits it. Also says which streams'
    /// held events the delivery released. `released`: a held message `t` (a Commit)
    /// released, with our addresses (see [`Context::recipients`]).
    ///
    /// Each recipient is an agent of its own: the rules decide for each in its own
    /// state (replay, idempotency, streams, the requests it sent), and each gets its
    /// own spool entry, named by the message and that recipient. A copy of a message
    /// sent to one recipient again (an MTA retrying per recipient, or an attacker
    /// replaying it to one) is a duplicate for that one alone and never keeps it from
    /// another; two instances that take one message at once queue each recipient's
    /// entry once.
    fn settle(
        &self,
        incoming: Incoming<'_>,
        t: &Transaction,
        released: Option<&[String]>,
    ) -> Result<(Decision, Option<StreamRelease>), Decision> {
        let Some(delivery) = incoming.outcome().delivery() else {
            // An MLS handshake, a message held for an epoch, an MLS copy seen before:
            // nothing for any agent yet.
            let outcome = incoming.commit().map_err(|e| receive_refusal(&e))?;
            return Ok((
                match outcome {
                    Outcome::Held(_) => Decision::accepted("held", None, None),
                    Outcome::Handshake(_) => {
                        Decision::accepted("handshake", Some(Profile::Mls), None)
                    }
                    _ => Decision::accepted("duplicate", None, None),
                },
                None,
            ));
        };
        let to = self.recipients(delivery, t, released)?;
        // One agent, however many spellings of its address the client gave (RCPT
        // `bob@`, `BOB@`, `Bob@`): judged once, delivered once, to the first spelling.
        let mut agents: Vec<(String, String)> = Vec::with_capacity(to.len());
        for r in &to {
            let agent = crate::message::Mailbox::new(r).normalized();
            if !agents.iter().any(|(a, _)| *a == agent) {
                agents.push((agent, r.clone()));
            }
        }
        if agents.is_empty() {
            // Only its author was asked for (see `recipients`): nothing is delivered
            // and nothing recorded, so the copies for the agents it names are not
            // taken for duplicates of this one.
            return Ok((Decision::accepted("duplicate", None, None), None));
        }
        // Queued before the commit for those the rules would deliver it to now: a
        // crash between leaves it queued and unrecorded, and the client's retry puts
        // the same entries (no-ops) and records it.
        let key = message_key(delivery);
        // The hops before this one stay on top of what is delivered, under this hop's
        // own field (RFC 5321 4.4: no relay deletes a trace field). Not for a held
        // message a Commit released: its hops are not this transaction's.
        let mut rendered = match released {
            None => trace_of(&t.data),
            Some(_) => Vec::new(),
        };
        rendered.extend_from_slice(&render(delivery)?);
        let mut ids = Vec::new();
        let mut queued_for = Vec::new();
        for (agent, rcpt) in &agents {
            match incoming.preview_for(agent) {
                Ok(Some(Admission::Deliver { .. })) => {}
                Ok(_) => continue,
                // A failure of ours, or a bound on what waits: the client retries.
                Err(e) if e.retry_later() || e.kind() == ErrorKind::Other => {
                    return Err(receive_refusal(&e))
                }
                // Refused for this agent: judged again on commit.
                Err(_) => continue,
            }
            ids.push(self.queue_for(t, agent, rcpt, &key, rendered.clone())?);
            queued_for.push(agent.clone());
        }
        let profile = delivery.opened.verdict.profile;
        let stream = StreamRelease::of(delivery);
        let author = delivery.opened.message.sender().unwrap_or_default();
        let mail_id = delivery.opened.message.headers.message_id.clone();
        let names: Vec<String> = agents.iter().map(|(a, _)| a.clone()).collect();
        let results = incoming
            .commit_for(&names)
            .map_err(|e| receive_refusal(&e))?;
        let mut delivered = 0;
        let mut held = 0;
        let mut releases = false;
        let mut refused: Vec<(String, ReceiveError)> = Vec::new();
        for (agent, result) in results {
            match result {
                Ok(Admission::Deliver { released, .. }) => {
                    delivered += 1;
                    releases |= released > 0;
                    // Held when previewed, delivered when committed (another worker
                    // filled the gap between): queued now, or it would be recorded
                    // as delivered and never handed over.
                    if !queued_for.contains(&agent) {
                        let rcpt = agents
                            .iter()
                            .find(|(a, _)| *a == agent)
                            .map_or(agent.clone(), |(_, r)| r.clone());
                        match self.queue_for(t, &agent, &rcpt, &key, rendered.clone()) {
                            Ok(id) => ids.push(id),
                            Err(d) => {
                                tracing::error!(to = %crate::error::quoted(&agent), reason = %d.text, "an opened message was recorded and not queued")
                            }
                        }
                    }
                }
                Ok(Admission::Held { .. }) => held += 1,
                Ok(_) => {}
                Err(e) => {
                    tracing::info!(to = %crate::error::quoted(&agent), code = %e.code(), reason = %one_line(&e.to_string()), "refused for this recipient");
                    refused.push((agent, e));
                }
            }
        }
        let queued = (!ids.is_empty()).then(|| ids.join(","));
        if refused.len() == agents.len() {
            // Refused for every recipient: the client hears why.
            return Err(receive_refusal(&refused[0].1));
        }
        if !refused.is_empty() {
            // Taken for the others (250): those it was refused for are reported to
            // the sender, as for any recipient the gateway accepted and could not
            // deliver to (RFC 5321 6.1).
            self.report_refused(t, &author, mail_id.as_deref(), &key, &refused);
        }
        let decision = if delivered > 0 {
            Decision::accepted("opened", profile, queued)
        } else if held > 0 {
            Decision::accepted("held", None, queued)
        } else {
            Decision::accepted("duplicate", None, queued)
        };
        Ok((decision, stream.filter(|_| releases)))
    }

    /// Spools an opened message for one recipient, named by the message (`key`, see
    /// [`message_key`]) and that recipient alone: the same for every copy of the
    /// message and every SMTP transaction that brings it.
    fn queue_for(
        &self,
        t: &Transaction,
        agent: &str,
        rcpt: &str,
        key: &[u8],
        data: Vec<u8>,
    ) -> Result<String, Decision> {
        let to = [rcpt.to_string()];
        let at = now();
        let mut entry = Entry::keyed(self.listener, &t.mail_from, &to, key, data, at)
            .accepted_at(super::spool::now_ms());
        entry.id = super::spool::entry_id(self.listener, "", &[agent.to_string()], key);
        // The trace field of this hop on top, as [`Context::queue_to`] adds it.
        let received = super::trace::received(t, &self.config.hostname, &entry.id, &to, at);
        entry.data.splice(0..0, received.into_bytes());
        self.spool
            .put(&entry)
            .map(|_| entry.id)
            .map_err(Decision::local_error)
    }

    /// One notice to the agent that submitted `t` for the SMTP recipients its message
    /// was not sent to: those it does not name (a Bcc), and those without a usable key
    /// (`no_key = "split"`), each with why.
    fn report_left_out(
        &self,
        t: &Transaction,
        mail_id: Option<&str>,
        unnamed: &[String],
        keyless: &[(String, crate::sender::SendError)],
    ) {
        let mut failures: Vec<super::dsn::Failure> = unnamed
            .iter()
            .map(|r| super::dsn::Failure {
                recipient: r.clone(),
                status: "5.7.1".into(),
                diagnostic: "the message does not name this recipient in To or Cc (a Bcc): a partner refuses sealed mail that does not name its recipient, so it was not sent to it; send it a message that names it".into(),
            })
            .collect();
        failures.extend(keyless.iter().map(|(r, e)| super::dsn::Failure {
            recipient: r.clone(),
            status: "5.7.1".into(),
            diagnostic: format!(
                "no usable key for this recipient ({}): the message was sealed for the other recipients and not sent to this one; import its certificate or Agent Card and send it again",
                one_line(&e.to_string())
            ),
        }));
        let keyless_list: Vec<String> = keyless.iter().map(|(r, _)| r.clone()).collect();
        tracing::info!(
            unnamed = super::logline::recipients(unnamed).as_str(),
            keyless = super::logline::recipients(&keyless_list).as_str(),
            "recipients left out and reported to the sender"
        );
        // Named by the message and the recipients it reports: a retry of the
        // transaction makes no second notice, while another transaction of the same
        // message (the rest of its recipients, after a 452) makes its own.
        let left: Vec<String> = failures.iter().map(|f| f.recipient.clone()).collect();
        let name = super::spool::entry_id("left out", &t.mail_from, &left, &t.data);
        self.queue_report_to(&t.mail_from, mail_id, name.as_bytes(), &failures);
    }

    /// Queues a delivery status notification to `to` about the message whose
    /// Message-ID is `mail_id`, named by `name` (the same notice is queued once). It
    /// carries no header of the message but that Message-ID: the message's own may
    /// be protected, or the unauthenticated outer ones of whoever sent it.
    fn queue_report_to(
        &self,
        to: &str,
        mail_id: Option<&str>,
        name: &[u8],
        failures: &[super::dsn::Failure],
    ) {
        let header = match mail_id {
            Some(m) => format!("Message-ID: <{}>\r\n\r\n", one_line(m)),
            None => "\r\n".to_string(),
        };
        let report = super::dsn::compose(
            &self.config.hostname,
            to,
            header.as_bytes(),
            now(),
            failures,
        );
        let to = [to.to_string()];
        let route = self.config.return_route(self.listener);
        let mut bounce = Entry::new(route, "", &to, report, now());
        bounce.id = super::spool::entry_id(route, "", &to, name);
        if let Err(e) = self.spool.put(&bounce) {
            tracing::error!(error = %e, "spool: a delivery status notification was not queued");
        }
    }

    /// A delivery status notification for the recipients the rules refused the
    /// message for while it was taken for others. It goes to the message's
    /// authenticated sender (its protected From, which the signature bound), never to
    /// the unauthenticated MAIL FROM, and names the refusal by its code alone (the
    /// error's text may quote protected fields); it carries no header of the message
    /// but its Message-ID. One per message and set of refused agents: a replay of the
    /// message makes no second one. Not for a message with a null reverse path (a
    /// notification itself).
    fn report_refused(
        &self,
        t: &Transaction,
        author: &str,
        mail_id: Option<&str>,
        key: &[u8],
        refused: &[(String, ReceiveError)],
    ) {
        if t.mail_from.is_empty() || author.is_empty() {
            return;
        }
        let failures: Vec<super::dsn::Failure> = refused
            .iter()
            .map(|(agent, e)| super::dsn::Failure {
                recipient: agent.clone(),
                status: receive_refusal(e).status.to_string(),
                diagnostic: format!("refused by the receiver rules ({})", e.code()),
            })
            .collect();
        let mut name = key.to_vec();
        for (agent, _) in refused {
            name.extend_from_slice(b"\0");
            name.extend_from_slice(agent.as_bytes());
        }
        self.queue_report_to(author, mail_id, &name, &failures);
    }

    /// Who an opened message goes to. Every SMTP recipient must be one the sealed
    /// message names ([`crate::receiver::Delivery::meant_for`]): a message for one
    /// agent here, sent on to another, is refused whole. A released message (held
    /// for an epoch, delivered when a Commit came) goes to the Commit's recipients it
    /// names, else to those of `ours` it names.
    fn recipients(
        &self,
        delivery: &crate::receiver::Delivery,
        t: &Transaction,
        released: Option<&[String]>,
    ) -> Result<Vec<String>, Decision> {
        let aliases = &self.config.inbound.also_addressed_to;
        let Some(ours) = released else {
            return match t.recipients.iter().find(|r| !delivery.meant_for(r, aliases)) {
                Some(r) => Err(Decision::refused(
                    550,
                    "5.7.1",
                    format!(
                        "<{}>: the sealed message does not name this recipient (To/Cc): refused as forwarded",
                        one_line(r)
                    ),
                )),
                // Its author, when it named itself, wrote it: a copy coming back to it
                // is no delivery (the receiver already refused our own mail that does
                // not name us, as a reflection).
                None => {
                    let author = delivery.opened.message.sender().unwrap_or_default();
                    Ok(t.recipients
                        .iter()
                        .filter(|r| crate::message::Mailbox::new(r).normalized() != author)
                        .cloned()
                        .collect())
                }
            };
        };
        let mut to: Vec<String> = t
            .recipients
            .iter()
            .filter(|r| delivery.meant_for(r, aliases))
            .cloned()
            .collect();
        if to.is_empty() {
            to = delivery
                .named_recipients()
                .into_iter()
                .filter(|a| ours.iter().any(|o| o.eq_ignore_ascii_case(a)))
                .collect();
        }
        if to.is_empty() {
            return Err(Decision::local_error(
                "a released message names none of our addresses",
            ));
        }
        Ok(to)
    }

    fn release(&self, receiver: &mut Receiver<'_>, t: &Transaction) {
        loop {
            let stream = match self.release_one(receiver, t) {
                Some(s) => s,
                None => return,
            };
            if let Some(s) = stream {
                self.deliver_stream_events(receiver, s, t);
            }
        }
    }

    /// The next held MLS message whose epoch has come, settled: `None` when there is
    /// none; else the stream whose events it released, if any.
    fn release_one(
        &self,
        receiver: &mut Receiver<'_>,
        t: &Transaction,
    ) -> Option<Option<StreamRelease>> {
        let ours = receiver.policy().our_addresses.clone();
        let released = match receiver.next_released(None) {
            Ok(Some(r)) => r,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "held MLS messages not released");
                return None;
            }
        };
        let crate::receiver::Released { name, result } = released;
        Some(match result {
            Ok(incoming) => {
                // Its own From and Message-ID (authenticated now), as a message line
                // says them, so one grep finds it held and then released.
                let (from, message_id) = incoming
                    .outcome()
                    .delivery()
                    .map(|d| {
                        let h = &d.opened.message.headers;
                        (
                            super::logline::shown(h.from.as_ref().map(|f| f.address.as_str())),
                            super::logline::shown(h.message_id.as_deref()),
                        )
                    })
                    .unwrap_or_else(|| (super::logline::NONE.into(), super::logline::NONE.into()));
                match self.settle(incoming, t, Some(&ours)) {
                    Ok((d, stream)) => {
                        tracing::info!(held = %name, id = d.id.as_deref().unwrap_or(super::logline::NONE), from = from.as_str(), message_id = message_id.as_str(), verdict = d.verdict, "released");
                        stream
                    }
                    Err(d) => {
                        // It stays held (nothing was committed): stop here rather than
                        // take it again at once, and try at the next Commit.
                        tracing::warn!(held = %name, from = from.as_str(), message_id = message_id.as_str(), reason = %d.text, "released message not delivered; it stays held");
                        return None;
                    }
                }
            }
            Err(e) => {
                tracing::info!(held = %name, error = %e, "held message refused");
                None
            }
        })
    }

    /// Held stream events a delivery released: each goes out as a message of the same
    /// sender to the same recipients, carrying the event's envelope as received.
    fn deliver_stream_events(&self, receiver: &Receiver<'_>, s: StreamRelease, t: &Transaction) {
        let events = match receiver.take_stream_events(&s.correlation) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, correlation = %s.correlation, "released stream events not taken");
                return;
            }
        };
        let to: Vec<&str> = s.to.iter().map(String::as_str).collect();
        for event in events {
            let composed = crate::envelope::Envelope::from_json(&event.envelope)
                .map_err(|e| e.to_string())
                .and_then(|env| {
                    MailA2aMessage::new(&s.from, &to, env)
                        .to_rfc5322()
                        .map_err(|e| e.to_string())
                });
            let out = match composed {
                Ok(m) => with_verdict(
                    &m,
                    &format!(
                        "pass; released-from-hold; sequence={}; signer={}",
                        event.sequence,
                        one_line(&event.signer).replace([';', ' '], "")
                    ),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "a released stream event cannot be rendered");
                    continue;
                }
            };
            let key = [
                event.signer.as_bytes(),
                b"\0",
                event.message_id.as_bytes(),
                b"\0",
                &event.envelope,
            ]
            .concat();
            // An event kept for one agent goes to that agent alone.
            let queued = match &event.agent {
                Some(agent) => self.queue_to(t, std::slice::from_ref(agent), &key, out),
                None => self.queue(t, &key, out),
            };
            match queued {
                Ok(id) => {
                    tracing::info!(id = %id, sequence = event.sequence, "released stream event queued")
                }
                Err(d) => {
                    tracing::error!(reason = %d.text, "a released stream event was not queued")
                }
            }
        }
    }
}

/// The SMTP recipients `named` split into those the message was sealed for and those
/// left out for want of a key (`keyless`, normalised header addresses, each with its
/// error): an SMTP recipient is left out when it is one of them, under any spelling.
fn split_keyless(
    named: Vec<String>,
    keyless: Vec<(String, crate::sender::SendError)>,
) -> (Vec<String>, Vec<(String, crate::sender::SendError)>) {
    if keyless.is_empty() {
        return (named, keyless);
    }
    // In a map: the message may name many more addresses than the SMTP recipients.
    let mut errors: std::collections::HashMap<String, crate::sender::SendError> =
        keyless.into_iter().collect();
    let mut keyed = Vec::with_capacity(named.len());
    let mut left: Vec<(String, crate::sender::SendError)> = Vec::new();
    let mut reported = std::collections::HashSet::new();
    for r in named {
        let n = crate::message::Mailbox::new(&r).normalized();
        match errors.remove(&n) {
            Some(e) => {
                reported.insert(n);
                left.push((r, e));
            }
            None if reported.contains(&n) => {}
            None => keyed.push(r),
        }
    }
    (keyed, left)
}

/// `recipients` split into those `plain` names in its To or Cc and those it does not.
fn split_named(plain: &MailA2aMessage, recipients: &[String]) -> (Vec<String>, Vec<String>) {
    let h = &plain.headers;
    let named: std::collections::HashSet<String> =
        h.to.iter().chain(&h.cc).map(|m| m.normalized()).collect();
    recipients
        .iter()
        .cloned()
        .partition(|r| named.contains(&crate::message::Mailbox::new(r).normalized()))
}

/// The stream whose held events a delivery released, and who they go from and to.
struct StreamRelease {
    correlation: String,
    from: String,
    to: Vec<String>,
}

impl StreamRelease {
    fn of(delivery: &Delivery) -> Option<Self> {
        let m = &delivery.opened.message;
        Some(StreamRelease {
            correlation: delivery.opened.envelope().correlation_id()?,
            from: m.headers.from.as_ref()?.address.clone(),
            to: m.headers.to.iter().map(|a| a.address.clone()).collect(),
        })
    }
}

/// What names an opened message in the spool: its signer, `messageId` and envelope
/// digest, as the replay rules know it. A copy sealed again by its sender (new
/// signature, new boundaries) is the same entry; its rendering, whose MIME boundaries
/// are new each time, is not what names it.
fn message_key(delivery: &Delivery) -> Vec<u8> {
    let c = &delivery.candidate;
    [
        c.signer.as_bytes(),
        b"\0",
        c.message_id.as_bytes(),
        b"\0",
        &c.digest,
    ]
    .concat()
}

/// The inner message of `delivery` with the gateway's verdict on top.
fn render(delivery: &Delivery) -> Result<Vec<u8>, Decision> {
    let inner = delivery
        .opened
        .message
        .to_rfc5322()
        .map_err(|e| Decision::local_error(format!("cannot render the inner message: {e}")))?;
    let v = &delivery.opened.verdict;
    let mut value = format!(
        "pass; profile={}; protection={}; header-protection={}",
        v.profile.map_or("none", Profile::token),
        v.protection.token(),
        if v.header_protection { "yes" } else { "no" },
    );
    if let Some(from) = &delivery.opened.message.headers.from {
        value.push_str(&format!(
            "; from={}",
            one_line(&from.address).replace([';', ' '], "")
        ));
    }
    value.push_str(&format!(
        "; signer={}",
        one_line(&delivery.candidate.signer).replace([';', ' '], "")
    ));
    Ok(with_verdict(&inner, &value))
}

/// `message` without any `name` header field, and with `Mailseal-Verdict: value` first.
pub fn with_verdict(message: &[u8], value: &str) -> Vec<u8> {
    let stripped = strip_header(message, VERDICT_HEADER);
    let mut out = Vec::with_capacity(stripped.len() + value.len() + 32);
    out.extend_from_slice(VERDICT_HEADER.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&stripped);
    out
}

/// `message` without the header fields named `name` (case-insensitively, with their
/// folded continuation lines). The body is untouched.
pub fn strip_header(message: &[u8], name: &str) -> Vec<u8> {
    take_header(message, name).0
}

/// `message` without the header fields named `name`, and their values (unfolded,
/// trimmed), in order.
pub fn take_header(message: &[u8], name: &str) -> (Vec<u8>, Vec<String>) {
    let mut out = Vec::with_capacity(message.len());
    let mut values: Vec<String> = Vec::new();
    let mut rest = message;
    let mut taking = false;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let (line, tail) = rest.split_at(end);
        if line == b"\r\n" || line == b"\n" {
            // The end of the header: the rest is the body.
            out.extend_from_slice(rest);
            break;
        }
        let folded = matches!(line.first(), Some(b' ' | b'\t'));
        if !folded {
            let colon = line[name.len().min(line.len())..]
                .iter()
                .position(|b| !matches!(b, b' ' | b'\t'))
                .map(|i| i + name.len());
            taking = line.len() > name.len()
                && line[..name.len()].eq_ignore_ascii_case(name.as_bytes())
                && colon.is_some_and(|c| line[c] == b':');
            if taking {
                let value = &line[colon.unwrap_or(name.len()) + 1..];
                values.push(String::from_utf8_lossy(value).trim().to_string());
            }
        } else if taking {
            if let Some(v) = values.last_mut() {
                v.push(' ');
                v.push_str(String::from_utf8_lossy(line).trim());
            }
        }
        if !taking {
            out.extend_from_slice(line);
        }
        rest = tail;
    }
    (out, values)
}

/// The `Received:` fields of `message`'s header section as written, folded lines and
/// all, in their order: the trace of the hops it came through. Only whole fields are
/// taken (a field begins at a line that does not start with a space or tab), so
/// nothing a client wrote can begin another field in what is delivered.
fn trace_of(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut taking = false;
    for line in message.split_inclusive(|&b| b == b'\n') {
        if line == b"\r\n" || line == b"\n" || !line.ends_with(b"\r\n") {
            break;
        }
        if !matches!(line.first(), Some(b' ' | b'\t')) {
            let name = b"Received";
            taking = line.len() > name.len()
                && line[..name.len()].eq_ignore_ascii_case(name)
                && line[name.len()..]
                    .iter()
                    .find(|b| !matches!(b, b' ' | b'\t'))
                    == Some(&b':');
        }
        if taking {
            out.extend_from_slice(line);
        }
    }
    out
}

/// Whether `raw` is MailA2A mail: a `Mail-A2A-*` header field or an
/// `application/a2a+json` part anywhere. Deliberately broad: what claims to be
/// MailA2A is sealed or refused outbound, never passed in clear.
pub fn is_maila2a(raw: &[u8]) -> bool {
    let header_end = memchr::memmem::find(raw, b"\r\n\r\n").unwrap_or(raw.len());
    let has_field = raw[..header_end]
        .split(|&b| b == b'\n')
        .any(|l| l.len() >= 9 && l[..9].eq_ignore_ascii_case(b"mail-a2a-"));
    // Only at each '/' is the media type compared: one pass, however large the mail.
    const TYPE: &[u8] = b"application";
    const SUBTYPE: &[u8] = b"a2a+json";
    has_field
        || memchr::memchr_iter(b'/', raw).any(|i| {
            i >= TYPE.len()
                && raw[i - TYPE.len()..i].eq_ignore_ascii_case(TYPE)
                && raw
                    .get(i + 1..i + 1 + SUBTYPE.len())
                    .is_some_and(|t| t.eq_ignore_ascii_case(SUBTYPE))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_header_replaces_any_other() {
        let m = b"From: a@x\r\nmailseal-verdict : pass; forged\r\n continued\r\nTo: b@y\r\n\r\nMailseal-Verdict: in body\r\n";
        let out = with_verdict(m, "none");
        assert_eq!(
            out,
            b"Mailseal-Verdict: none\r\nFrom: a@x\r\nTo: b@y\r\n\r\nMailseal-Verdict: in body\r\n"
        );
    }

    #[test]
    fn trace_of_takes_whole_received_fields_only() {
        let m = b"Received: from a\r\n by b; Sun, 6 Dec 2026 09:00:00 +0000\r\nX-Other: 1\r\nreceived :c\r\nReceivedX: no\r\n\r\nReceived: body\r\n";
        assert_eq!(
            trace_of(m),
            b"Received: from a\r\n by b; Sun, 6 Dec 2026 09:00:00 +0000\r\nreceived :c\r\n"
        );
        assert!(trace_of(b"Subject: x\r\n\r\n").is_empty());
    }

    #[test]
    fn take_header_returns_unfolded_values() {
        let m = b"Mailseal-Group: abc\r\n def\r\nFrom: a@x\r\nMAILSEAL-GROUP:xyz\r\n\r\nMailseal-Group: body\r\n";
        let (rest, values) = take_header(m, GROUP_HEADER);
        assert_eq!(values, ["abc def", "xyz"]);
        assert_eq!(rest, b"From: a@x\r\n\r\nMailseal-Group: body\r\n");
    }

    /// A refusal only a bound on what waits made is temporary, so the sending MTA
    /// delivers the mail again; any other refusal of the MLS layer is not.
    #[test]
    fn refusals_of_a_full_hold_are_temporary() {
        use crate::mls::MlsError;
        let full = ReceiveError::Mls(MlsError::BufferFull {
            group: "g".into(),
            held: 64,
            sender: Some("alice@a.example".into()),
        });
        let ahead = ReceiveError::Mls(MlsError::TooFarAhead {
            group: "g".into(),
            epoch: 9,
            current: 1,
        });
        let events = ReceiveError::Rules(crate::replay::ReceiverError::BufferFull { limit: 3 });
        for e in [full, ahead, events] {
            let d = receive_refusal(&e);
            assert_eq!((d.code, d.status), (452, "4.3.1"), "{e}");
        }
        let removed = ReceiveError::Mls(MlsError::SenderRemoved {
            group: "g".into(),
            sender: "carol@c.example".into(),
        });
        assert_eq!(receive_refusal(&removed).code, 550);
    }

    #[test]
    fn maila2a_detection() {
        assert!(is_maila2a(b"Mail-A2A-Binding: 1.0\r\n\r\nx"));
        assert!(is_maila2a(
            b"Subject: x\r\n\r\n--b\r\nContent-Type: Application/A2A+JSON\r\n"
        ));
        assert!(!is_maila2a(b"Subject: hello\r\n\r\nplain mail"));
    }
}
