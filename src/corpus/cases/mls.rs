//! MLS cases: Bob in a group with Alice (and Carol), his MLS state as it stands when
//! the case's message arrives ([`crate::corpus::MLS_STATE`]), and the message.
//!
//! Each case builds its own group, so that no case depends on another's epoch. Bob's
//! state is taken after he joined (or, for the cases about joining, after he made
//! the KeyPackage he is invited with); what happened in the group after that travels
//! as the case's prior messages (Commits, earlier application messages), which an
//! implementation replays as Bob would have received them.

use super::*;
use crate::corpus::parties::TempStore;
use crate::corpus::MlsJoin;
use crate::message::{Headers, Mailbox};
use crate::mls::{Authenticator, Mls, StoreAuthenticator};
use crate::receiver::{Clock, Receiver};

/// Every KeyPackage of the corpus is dated, not made at the time of the run (the same
/// bytes from the same seed): valid from an hour before [`NOW`], as openmls dates its
/// own.
const FROM: u64 = crate::corpus::NOW as u64 - 3600;

/// The KeyPackages the corpus's groups add last a century from [`FROM`]
/// (`Mls::add_lasting`): openmls judges an added KeyPackage by the system clock
/// wherever the Commit is processed, so the corpus's Commits must find them valid
/// whenever it is run.
const LASTING: (u64, u64) = (FROM, FROM + 100 * 365 * 86_400);

/// The KeyPackage mails Bob judges (at [`NOW`]) last what ours do, or longer where
/// that is the fault.
const fn valid_for_days(days: u64) -> (u64, u64) {
    (FROM, crate::corpus::NOW as u64 + days * 86_400)
}

/// Every party checks and certifies at [`NOW`] (the bindings' signing times are the
/// same in every run).
static AT_NOW: std::sync::LazyLock<crate::OpenPolicy> =
    std::sync::LazyLock::new(|| crate::OpenPolicy {
        validation_time: time::OffsetDateTime::from_unix_timestamp(crate::corpus::NOW).ok(),
        ..Default::default()
    });

/// A party's authenticator over `store`, at [`NOW`].
fn auth_of(store: &dyn crate::keystore::KeyStore) -> StoreAuthenticator<'_> {
    StoreAuthenticator::with_policy(store, &AT_NOW)
}

/// A member other than Bob: its MLS state (in memory) and key store.
struct Member<'p> {
    email: &'static str,
    mls: Mls,
    keys: &'p Sender,
}

impl<'p> Member<'p> {
    fn new(email: &'static str, keys: &'p Sender) -> Result<Self, CorpusError> {
        let mls = Mls::in_memory()
            .map_err(mls_party(email))?
            .dated(crate::corpus::NOW);
        mls.generate_identity(email, &auth_of(&keys.store))
            .map_err(mls_party(email))?;
        Ok(Member { email, mls, keys })
    }

    fn auth(&self) -> StoreAuthenticator<'_> {
        auth_of(&self.keys.store)
    }

    /// A KeyPackage mail of this member's for a group to add ([`LASTING`]).
    fn lasting_key_package(&self) -> Result<Vec<u8>, CorpusError> {
        self.mls
            .key_package_valid(self.email, LASTING, crate::mls::CIPHERSUITE)
            .map_err(mls_party(self.email))
    }

    /// Takes in a Welcome, Commit or application message of the group.
    fn receive(&self, mail: &[u8]) -> Result<(), CorpusError> {
        self.mls
            .receive(mail, &AT_NOW, "corpus", &self.auth())
            .and_then(|r| r.commit())
            .map(drop)
            .map_err(mls_party(self.email))
    }
}

/// Bob: his key store (the case's keys) and his MLS state in a directory, opened for
/// each step, so that the state file can be read between steps.
struct Bob {
    keys: TempStore,
    dir: tempfile::TempDir,
    /// Bob for another implementation: the last KeyPackage he made, its keys, and the
    /// Welcome he joined by.
    join: std::cell::RefCell<Option<MlsJoin>>,
}

/// Bob's MLS state as a case carries it: this crate's state file, and the same Bob
/// portable.
#[derive(Clone)]
struct BobState {
    file: Vec<u8>,
    join: MlsJoin,
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl Bob {
    fn new(parties: &Parties) -> Result<Self, CorpusError> {
        let keys = crate::corpus::parties::store_of(&parties.bob)?;
        let dir = tempfile::tempdir().map_err(|e| mls_party(BOB)(e))?;
        let bob = Bob {
            keys,
            dir,
            join: Default::default(),
        };
        bob.mls()?
            .generate_identity(BOB, &auth_of(&bob.keys.store))
            .map_err(mls_party(BOB))?;
        Ok(bob)
    }

    fn mls(&self) -> Result<Mls, CorpusError> {
        Ok(Mls::open(self.dir.path())
            .map_err(mls_party(BOB))?
            .dated(crate::corpus::NOW))
    }

    /// A KeyPackage mail of Bob's, and its keys kept for [`Bob::state`].
    fn key_package(&self) -> Result<Vec<u8>, CorpusError> {
        let mls = self.mls()?;
        let mail = mls
            .key_package_valid(BOB, LASTING, crate::mls::CIPHERSUITE)
            .map_err(mls_party(BOB))?;
        let p = mls.portable_member(BOB, &mail).map_err(mls_party(BOB))?;
        *self.join.borrow_mut() = Some(MlsJoin {
            member: BOB.into(),
            cipher_suite: crate::mls::CIPHERSUITE as u16,
            signature_secret_key: base64(&p.signature.0),
            signature_public_key: base64(&p.signature.1),
            key_package: base64(&p.key_package),
            init_private_key: base64(&p.init_private_key),
            encryption_private_key: base64(&p.encryption_private_key),
            welcome: None,
        });
        Ok(mail)
    }

    /// Joins by the Welcome mail `welcome`, and keeps it for [`Bob::state`].
    fn join(&self, welcome: &[u8]) -> Result<(), CorpusError> {
        self.receive(welcome)?;
        let read = crate::mls::wire::read_mail(welcome, &crate::message::Limits::default())
            .map_err(mls_party(BOB))?;
        let mut join = self.join.borrow_mut();
        let join = join.as_mut().ok_or_else(|| CorpusError::Inconsistent {
            case: "mls".into(),
            reason: "Bob joined without a KeyPackage of his".into(),
        })?;
        join.welcome = Some(base64(&read.message));
        Ok(())
    }

    /// Receives `mail` as the case's receiver will, and commits it.
    fn receive(&self, mail: &[u8]) -> Result<(), CorpusError> {
        let mut receiver = Receiver::builder(&self.keys.store)
            .replay_in_memory()
            .mls(self.mls()?)
            .clock(Clock::Fixed(crate::corpus::NOW))
            .build();
        receiver
            .receive(mail)
            .and_then(|incoming| incoming.commit())
            .map(drop)
            .map_err(|e| mls_party(BOB)(e))
    }

    /// The state file as it is now (no connection is open between steps, so the
    /// write-ahead log has been folded into it), dated [`NOW`] where openmls dated it
    /// by the system clock (`mls::state_as_of`), and Bob portable.
    fn state(&self) -> Result<BobState, CorpusError> {
        let path = self.dir.path().join(crate::mls::STATE_FILE);
        let file = crate::mls::state_as_of(&path, crate::corpus::NOW).map_err(mls_party(BOB))?;
        let join = self
            .join
            .borrow()
            .clone()
            .ok_or_else(|| CorpusError::Inconsistent {
                case: "mls".into(),
                reason: "Bob's state before he made a KeyPackage".into(),
            })?;
        Ok(BobState { file, join })
    }
}

fn mls_party<E: std::fmt::Display>(party: &'static str) -> impl Fn(E) -> CorpusError {
    move |e| CorpusError::Party {
        party,
        reason: e.to_string(),
    }
}

/// A group Alice made, Bob (and Carol, with `carol`) added by one Commit, every
/// member at epoch 1; Bob's state taken after he joined.
struct Group<'p> {
    alice: Member<'p>,
    carol: Option<Member<'p>>,
    id: String,
    joined: BobState,
}

impl<'p> Group<'p> {
    fn new(parties: &'p Parties, carol: bool) -> Result<Self, CorpusError> {
        let alice = Member::new(ALICE, &parties.mls_alice)?;
        let carol = carol
            .then(|| Member::new(CAROL, &parties.mls_carol))
            .transpose()?;
        let bob = Bob::new(parties)?;
        bob.mls()?
            .allow_inviter(ALICE, true)
            .map_err(mls_party(BOB))?;
        let id = alice
            .mls
            .create_group_valid(ALICE, LASTING)
            .map_err(mls_party(ALICE))?;
        let mut kps = vec![bob.key_package()?];
        if let Some(c) = &carol {
            c.mls.allow_inviter(ALICE, true).map_err(mls_party(CAROL))?;
            kps.push(c.lasting_key_package()?);
        }
        let added = alice
            .mls
            .add_lasting(&id, &kps, &alice.auth())
            .map_err(mls_party(ALICE))?;
        bob.join(&added.welcome)?;
        if let Some(c) = &carol {
            c.receive(&added.welcome)?;
        }
        let joined = bob.state()?;
        Ok(Group {
            alice,
            carol,
            id,
            joined,
        })
    }

    fn carol(&self) -> Result<&Member<'p>, CorpusError> {
        self.carol
            .as_ref()
            .ok_or_else(|| CorpusError::Inconsistent {
                case: "mls".into(),
                reason: "a group without Carol".into(),
            })
    }
}

impl Builder<'_> {
    /// A request from `from` to Bob, sealed as an application message of `group`.
    fn mls_request(
        &mut self,
        member: &Member<'_>,
        group: &str,
        operation: &str,
    ) -> Result<Vec<u8>, CorpusError> {
        let env = self.request(operation);
        let d = self.draft_between(Mode::Mls, &env, member.email, &[BOB])?;
        member
            .mls
            .seal(&d.msg, group, false)
            .map_err(mls_party(member.email))
    }

    /// An application message of `group` from `member` carrying `env`, From `from`,
    /// sealed without the sender's checks (what a lying or broken sender writes).
    fn mls_unchecked(
        &mut self,
        member: &Member<'_>,
        group: &str,
        env: &Value,
        from: &str,
    ) -> Result<Vec<u8>, CorpusError> {
        let d = self.draft_between(Mode::Mls, env, from, &[BOB])?;
        let entity = inner_entity("mls", &d.msg, true)?;
        let headers = Headers {
            from: Some(Mailbox::new(from)),
            from_count: 1,
            to: vec![Mailbox::new(BOB)],
            date: d.msg.headers.date,
            message_id: d.msg.headers.message_id.clone(),
            ..Headers::default()
        };
        let generation = 0u64;
        member
            .mls
            .seal_unchecked(&entity, group, &headers, generation.to_be_bytes().to_vec())
            .map_err(mls_party(member.email))
    }

    /// Adds an MLS case: `message` to Bob in the state `state`, after `prior`.
    #[allow(clippy::too_many_arguments)]
    fn add_mls(
        &mut self,
        name: &str,
        rule: Rule,
        description: &str,
        state: BobState,
        message: Vec<u8>,
        prior: Vec<Vec<u8>>,
        crypto: Crypto,
    ) -> Result<(), CorpusError> {
        self.mls = Some((state.file, state.join));
        let id = format!("{}--{}", Mode::Mls.name(), name);
        self.push(id, rule, description, Mode::Mls, message, prior, crypto)
    }
}

/// The message of `mail` with one byte of its MLSMessage changed at `from_end`
/// bytes before its end, in a mail otherwise the same.
fn flipped(mail: &[u8], from_end: usize) -> Result<Vec<u8>, CorpusError> {
    let read = crate::mls::wire::read_mail(mail, &crate::message::Limits::default())
        .map_err(mls_party("alice"))?;
    let mut message = read.message;
    let at = message.len().saturating_sub(from_end);
    if let Some(b) = message.get_mut(at) {
        *b ^= 0x01;
    }
    crate::mls::wire::write_mail(&read.headers, &Hints::binding_only(), &message)
        .map_err(mls_party("alice"))
}

pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let parties = b.parties;

    // Valid: a request and a response from Alice; a Commit; a KeyPackage.
    let g = Group::new(parties, false)?;
    for op in ["message/send", "tasks/get"] {
        let message = b.mls_request(&g.alice, &g.id, op)?;
        b.add_mls(
            &format!("valid--request-{}", op.replace('/', "-")),
            Rule::Accept,
            &format!("a {op} request from Alice, an application message of the group Bob joined"),
            g.joined.clone(),
            message,
            vec![],
            Crypto::Pass,
        )?;
    }
    let env = b.reply("message/send", "response");
    let d = b.draft_between(Mode::Mls, &env, ALICE, &[BOB])?;
    let message = g
        .alice
        .mls
        .seal(&d.msg, &g.id, false)
        .map_err(mls_party(ALICE))?;
    b.add_mls(
        "valid--response-message-send",
        Rule::Accept,
        "a message/send response from Alice in the group",
        g.joined.clone(),
        message,
        vec![],
        Crypto::Pass,
    )?;

    let g = Group::new(parties, false)?;
    let update = g.alice.mls.update(&g.id).map_err(mls_party(ALICE))?;
    b.add_mls(
        "valid--commit-update",
        Rule::Accept,
        "Alice's Commit that updates her leaf: the group moves to epoch 2",
        g.joined.clone(),
        update.clone(),
        vec![],
        Crypto::Pass,
    )?;
    // After the Commit, a message of the new epoch; before it, the message is held.
    let later = b.mls_request(&g.alice, &g.id, "message/send")?;
    b.add_mls(
        "valid--after-commit",
        Rule::Accept,
        "a request of epoch 2, after the Commit that led there",
        g.joined.clone(),
        later.clone(),
        vec![update.clone()],
        Crypto::Pass,
    )?;
    b.add_mls(
        "rules.held--future-epoch",
        Rule::Held,
        "a request of epoch 2 before the Commit that leads there: held until it arrives",
        g.joined.clone(),
        later,
        vec![],
        Crypto::Pass,
    )?;

    // A message seen before.
    let g = Group::new(parties, false)?;
    let m = b.mls_request(&g.alice, &g.id, "message/send")?;
    b.add_mls(
        "rules.duplicate--application-message-twice",
        Rule::Duplicate,
        "Alice's request a second time (a redelivery): not opened again",
        g.joined.clone(),
        m.clone(),
        vec![m.clone()],
        Crypto::Pass,
    )?;

    // Changed bytes: the AEAD tag, and a body that is no MLSMessage.
    b.add_mls(
        "mls.invalid--flipped-ciphertext",
        Rule::Refuse("mls.invalid"),
        "Alice's request with one bit of its ciphertext flipped",
        g.joined.clone(),
        flipped(&m, 2)?,
        vec![],
        Crypto::Fail,
    )?;
    let headers = Headers {
        from: Some(Mailbox::new(ALICE)),
        from_count: 1,
        to: vec![Mailbox::new(BOB)],
        date: Some(at()),
        message_id: Some(format!("{}@smime.example", b.ids.id("mail"))),
        ..Headers::default()
    };
    let garbage = crate::mls::wire::write_mail(
        &headers,
        &Hints::binding_only(),
        b"\x00\x01\x00\x02 not an MLSMessage",
    )
    .map_err(mls_party(ALICE))?;
    b.add_mls(
        "mls.malformed--not-an-mls-message",
        Rule::Refuse("mls.malformed"),
        "a message/mls part whose body is not one MLSMessage",
        g.joined.clone(),
        garbage,
        vec![],
        Crypto::Fail,
    )?;

    // The sender names someone else in From.
    let env = b.request("message/send");
    let m = b.mls_unchecked(&g.alice, &g.id, &env, CAROL)?;
    b.add_mls(
        "mls.binding--from-is-not-the-sender",
        Rule::Refuse("mls.binding"),
        "Alice, a member, sends as Carol: the From and the inner From name Carol, the MLS credential Alice",
        g.joined.clone(),
        m,
        vec![],
        Crypto::Pass,
    )?;
    // The envelope's group id is not base64url.
    let mut env = b.request("message/send");
    env["group"] = json!({"id": "not base64url!", "epoch": 1, "generation": 1});
    let m = b.mls_unchecked(&g.alice, &g.id, &env, ALICE)?;
    b.add_mls(
        "validation.must-be-base64url--group-id",
        Rule::Refuse("validation.must-be-base64url"),
        "an application message whose envelope's group.id is not base64url",
        g.joined.clone(),
        m,
        vec![],
        Crypto::Pass,
    )?;
    // A group Bob is not in.
    let other = g
        .alice
        .mls
        .create_group_valid(ALICE, LASTING)
        .map_err(mls_party(ALICE))?;
    let m = b.mls_request(&g.alice, &other, "message/send")?;
    b.add_mls(
        "mls.unknown-group--not-a-member",
        Rule::Refuse("mls.unknown-group"),
        "a request in a group of Alice's that Bob was never added to",
        g.joined.clone(),
        m,
        vec![],
        Crypto::Fail,
    )?;

    // Bob removed: the group's next messages are not for him.
    let g = Group::new(parties, false)?;
    let removal = g.alice.mls.remove(&g.id, BOB).map_err(mls_party(ALICE))?;
    let after = b.mls_request(&g.alice, &g.id, "message/send")?;
    b.add_mls(
        "mls.removed--after-own-removal",
        Rule::Refuse("mls.removed"),
        "a request of the epoch after Alice's Commit that removed Bob",
        g.joined.clone(),
        after,
        vec![removal],
        Crypto::Fail,
    )?;

    // Carol writes at epoch 1, then Alice removes her: her late message no longer
    // speaks for the group, though its epoch's secrets are still kept.
    let g = Group::new(parties, true)?;
    let carol = g.carol()?;
    let late = b.mls_request(carol, &g.id, "message/send")?;
    let removal = g.alice.mls.remove(&g.id, CAROL).map_err(mls_party(ALICE))?;
    b.add_mls(
        "mls.sender-removed--late-message",
        Rule::Refuse("mls.sender-removed"),
        "Carol's request of epoch 1, arriving after the Commit that removed her",
        g.joined.clone(),
        late,
        vec![removal],
        Crypto::Pass,
    )?;

    // Two Commits for epoch 1: Alice's applied, then Carol's.
    let g = Group::new(parties, true)?;
    let alices = g.alice.mls.update(&g.id).map_err(mls_party(ALICE))?;
    let carols = g.carol()?.mls.update(&g.id).map_err(mls_party(CAROL))?;
    b.add_mls(
        "mls.fork--second-commit-for-an-epoch",
        Rule::Refuse("mls.fork"),
        "Carol's Commit for epoch 1 after Alice's Commit for epoch 1 was applied",
        g.joined.clone(),
        carols,
        vec![alices],
        Crypto::Pass,
    )?;

    // A message from an epoch whose secrets are gone (three past epochs are kept).
    let g = Group::new(parties, false)?;
    let old = b.mls_request(&g.alice, &g.id, "message/send")?;
    let mut commits = Vec::new();
    for _ in 0..4 {
        commits.push(g.alice.mls.update(&g.id).map_err(mls_party(ALICE))?);
    }
    b.add_mls(
        "mls.epoch-gone--four-epochs-late",
        Rule::Refuse("mls.epoch-gone"),
        "Alice's request of epoch 1 after four Commits: Bob keeps three past epochs",
        g.joined.clone(),
        old,
        commits,
        Crypto::Fail,
    )?;

    // Held messages up to the limit (64 a sender named), then one more.
    let g = Group::new(parties, false)?;
    g.alice.mls.update(&g.id).map_err(mls_party(ALICE))?;
    let mut held = Vec::new();
    for _ in 0..64 {
        held.push(b.mls_request(&g.alice, &g.id, "tasks/get")?);
    }
    let one_more = b.mls_request(&g.alice, &g.id, "tasks/get")?;
    b.add_mls(
        "mls.buffer-full--65th-held-message-of-one-sender",
        Rule::Refuse("mls.buffer-full"),
        "Alice's 65th request of an epoch Bob has not reached: 64 are held a sender named (a held message is not authenticated yet), to be delivered again later",
        g.joined.clone(),
        one_more,
        held,
        Crypto::Pass,
    )?;

    // A message five epochs ahead of Bob's: held messages may be four ahead.
    let g = Group::new(parties, false)?;
    for _ in 0..5 {
        g.alice.mls.update(&g.id).map_err(mls_party(ALICE))?;
    }
    let ahead = b.mls_request(&g.alice, &g.id, "tasks/get")?;
    b.add_mls(
        "mls.too-far-ahead--five-epochs-ahead",
        Rule::Refuse("mls.too-far-ahead"),
        "Alice's request of epoch 6 to Bob at epoch 1: a message more than four epochs ahead is refused, not held, to be delivered again once the Commits are in",
        g.joined.clone(),
        ahead,
        Vec::new(),
        Crypto::Pass,
    )?;

    // Mallory, a member of Bob's organisation, joins by an external Commit.
    let g = Group::new(parties, false)?;
    let mallory = Member::new(MALLORY, &parties.mls_mallory)?;
    let info = g.alice.mls.group_info(&g.id).map_err(mls_party(ALICE))?;
    let (_, join) = mallory
        .mls
        .join_external(&info, MALLORY, &mallory.auth())
        .map_err(mls_party(MALLORY))?;
    b.add_mls(
        "mls.external-join-refused--external-commit",
        Rule::Refuse("mls.external-join-refused"),
        "Mallory's external Commit (a join by GroupInfo) into a group where Bob does not accept them",
        g.joined.clone(),
        join,
        vec![],
        Crypto::Pass,
    )?;

    // Invitations: from an inviter Bob does not allow, and from an impostor.
    let bob = Bob::new(parties)?;
    let kp = bob.key_package()?;
    let invited = bob.state()?;
    let carol = Member::new(CAROL, &parties.mls_carol)?;
    let group = carol
        .mls
        .create_group_valid(CAROL, LASTING)
        .map_err(mls_party(CAROL))?;
    let added = carol
        .mls
        .add_lasting(&group, std::slice::from_ref(&kp), &carol.auth())
        .map_err(mls_party(CAROL))?;
    b.add_mls(
        "mls.inviter-refused--not-an-allowed-inviter",
        Rule::Refuse("mls.inviter-refused"),
        "Carol's Welcome: her leaf authenticates, but Bob takes invitations from Alice only",
        with_inviter(&bob, ALICE, invited.clone())?,
        added.welcome,
        vec![],
        Crypto::Pass,
    )?;
    let impostor = Mls::in_memory()
        .map_err(mls_party("impostor"))?
        .dated(crate::corpus::NOW);
    impostor
        .generate_identity(ALICE, &auth_of(&parties.impostor.store))
        .map_err(mls_party("impostor"))?;
    let group = impostor
        .create_group_valid(ALICE, LASTING)
        .map_err(mls_party("impostor"))?;
    // Mallory checks Bob's KeyPackage as Alice would: he controls his own checks.
    let added = impostor
        .add_lasting(
            &group,
            std::slice::from_ref(&kp),
            &auth_of(&parties.mls_alice.store) as &dyn Authenticator,
        )
        .map_err(mls_party("impostor"))?;
    b.add_mls(
        "mls.unbound--impostor-inviter",
        Rule::Refuse("mls.unbound"),
        "a Welcome from a leaf that names Alice, its key certified by Mallory's self-signed certificate for her address",
        with_inviter(&bob, ALICE, invited)?,
        added.welcome,
        vec![],
        Crypto::Fail,
    )?;
    misconfigured(b)?;

    // Bob's state written by a newer mailseal: refused, not misread.
    let g = Group::new(parties, false)?;
    let m = b.mls_request(&g.alice, &g.id, "message/send")?;
    b.add_mls(
        "mls.state--state-of-a-newer-version",
        Rule::Refuse("mls.state"),
        "Alice's valid request to a receiver whose MLS state has a schema version newer than it knows: it refuses (exit 1) and changes nothing",
        newer_version(&g.joined)?,
        m,
        vec![],
        Crypto::Pass,
    )
}

/// `state` as a later version of this crate would have written it (a schema version
/// beyond the ones known here).
fn newer_version(state: &BobState) -> Result<BobState, CorpusError> {
    let dir = tempfile::tempdir().map_err(mls_party(BOB))?;
    let path = dir.path().join(crate::mls::STATE_FILE);
    std::fs::write(&path, &state.file).map_err(crate::corpus::io(&path))?;
    let conn = rusqlite::Connection::open(&path).map_err(mls_party(BOB))?;
    conn.pragma_update(None, "user_version", 1_000)
        .map_err(mls_party(BOB))?;
    drop(conn);
    Ok(BobState {
        file: std::fs::read(&path).map_err(crate::corpus::io(&path))?,
        join: state.join.clone(),
    })
}

/// `state` with `inviter` allowed to add Bob to groups.
fn with_inviter(bob: &Bob, inviter: &str, state: BobState) -> Result<BobState, CorpusError> {
    let path = bob.dir.path().join(crate::mls::STATE_FILE);
    std::fs::write(&path, &state.file).map_err(crate::corpus::io(&path))?;
    bob.mls()?
        .allow_inviter(inviter, true)
        .map_err(mls_party(BOB))?;
    bob.state()
}

/// What a misconfigured or lenient peer sends: a Commit in clear, a Welcome without
/// the ratchet tree, a KeyPackage valid for a year.
fn misconfigured(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let parties = b.parties;
    let g = Group::new(parties, false)?;
    g.alice
        .mls
        .misconfigure(&g.id, true, true)
        .map_err(mls_party(ALICE))?;
    let commit = g.alice.mls.update(&g.id).map_err(mls_party(ALICE))?;
    b.add_mls(
        "mls.plaintext-handshake--commit-in-clear",
        Rule::Refuse("mls.plaintext-handshake"),
        "Alice's Commit sent as a PublicMessage: its membership changes would travel readable by every mail hop",
        g.joined.clone(),
        commit,
        vec![],
        Crypto::Pass,
    )?;

    let bob = Bob::new(parties)?;
    let kp = bob.key_package()?;
    let invited = with_inviter(&bob, ALICE, bob.state()?)?;
    let alice = Member::new(ALICE, &parties.mls_alice)?;
    let group = alice
        .mls
        .create_group_valid(ALICE, LASTING)
        .map_err(mls_party(ALICE))?;
    alice
        .mls
        .misconfigure(&group, false, false)
        .map_err(mls_party(ALICE))?;
    let added = alice
        .mls
        .add_lasting(&group, std::slice::from_ref(&kp), &alice.auth())
        .map_err(mls_party(ALICE))?;
    b.add_mls(
        "mls.no-ratchet-tree--welcome-without-tree",
        Rule::Refuse("mls.no-ratchet-tree"),
        "Alice's Welcome without the ratchet_tree extension: a member joining by mail has no other way to get the tree",
        invited,
        added.welcome,
        vec![],
        Crypto::Pass,
    )?;

    // KeyPackage mails Bob judges at NOW (`valid_for_days`); openmls' own check of a
    // KeyPackage's lifetime is on the system clock, so Bob judges it at his clock
    // instead (`mls::identity::verified_key_package`).
    let g = Group::new(parties, false)?;
    let carol = Member::new(CAROL, &parties.mls_carol)?;
    let year = carol
        .mls
        .key_package_valid(CAROL, valid_for_days(365), crate::mls::CIPHERSUITE)
        .map_err(mls_party(CAROL))?;
    b.add_mls(
        "mls.key-package-lifetime--valid-for-a-year",
        Rule::Refuse("mls.key-package-lifetime"),
        "Carol's KeyPackage, valid for 365 days: its init key would stay usable that long",
        g.joined.clone(),
        year,
        vec![],
        Crypto::Pass,
    )?;
    let foreign = carol
        .mls
        .key_package_valid(
            CAROL,
            valid_for_days(84),
            openmls::prelude::Ciphersuite::MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519,
        )
        .map_err(mls_party(CAROL))?;
    b.add_mls(
        "mls.cipher-suite--key-package-of-another-suite",
        Rule::Refuse("mls.cipher-suite"),
        "Carol's KeyPackage for cipher suite 3 (ChaCha20-Poly1305), validly signed and certified: no group of ours could add her with it",
        g.joined.clone(),
        foreign,
        vec![],
        Crypto::Pass,
    )?;
    let kp = carol
        .mls
        .key_package_valid(CAROL, valid_for_days(84), crate::mls::CIPHERSUITE)
        .map_err(mls_party(CAROL))?;
    b.add_mls(
        "valid--key-package",
        Rule::Accept,
        "Carol's KeyPackage mail, valid for 84 days, its leaf certified by her mail key",
        g.joined.clone(),
        kp,
        vec![],
        Crypto::Pass,
    )
}
