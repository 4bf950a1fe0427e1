//! The cases: valid messages of every operation and kind under every profile, then
//! one or more cases for each rule, each sealed with valid cryptography for Bob.
//!
//! Each case declares what it must come to (accept, or refuse with a code) by hand,
//! from the rule it breaks; the generator then judges it with this crate, and a case
//! this crate judges otherwise is an error, never written out. The kind and exit
//! status of a refusal are read from that judgement.

mod envelope;
mod identity;
mod layers;
mod legacy;
mod mime;
mod mls;
mod rules;
mod valid;

use serde_json::{json, Value};

use super::case::{Case, CasePolicy, Crypto, Expected, Verdict};
use super::parties::{Parties, Sender, ALICE, BOB, CAROL, MALLORY, PGP_ALICE, PGP_BOB};
use super::rng::Rng;
use super::CorpusError;
use crate::envelope::Envelope;
use crate::message::{Hints, MailA2aMessage};

/// How a case is sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    SmimeSigned,
    SmimeEncrypted,
    OpenPgpSigned,
    OpenPgpEncrypted,
    Jws,
    /// An MLS application or handshake message of Bob's group (sealed by the group,
    /// in the `mls` module, not by [`Builder::seal`]).
    Mls,
    /// No protection: the plain message.
    Plain,
}

const MODES: [Mode; 5] = [
    Mode::SmimeSigned,
    Mode::SmimeEncrypted,
    Mode::OpenPgpSigned,
    Mode::OpenPgpEncrypted,
    Mode::Jws,
];

impl Mode {
    /// The label's profile: the profile's token, `none` for a plain message.
    fn profile_token(self) -> &'static str {
        match self {
            Mode::SmimeSigned | Mode::SmimeEncrypted => "smime",
            Mode::OpenPgpSigned | Mode::OpenPgpEncrypted => "openpgp",
            Mode::Jws => "jws",
            Mode::Mls => "mls",
            Mode::Plain => "none",
        }
    }
    fn protection(self) -> &'static str {
        match self {
            Mode::Plain => "none",
            m if m.encrypted() => "signed-encrypted",
            _ => "signed",
        }
    }
    fn encrypted(self) -> bool {
        matches!(
            self,
            Mode::SmimeEncrypted | Mode::OpenPgpEncrypted | Mode::Mls
        )
    }
    fn name(self) -> &'static str {
        match self {
            Mode::SmimeSigned => "smime-signed",
            Mode::SmimeEncrypted => "smime-encrypted",
            Mode::OpenPgpSigned => "openpgp-signed",
            Mode::OpenPgpEncrypted => "openpgp-encrypted",
            Mode::Jws => "jws",
            Mode::Mls => "mls",
            Mode::Plain => "plain",
        }
    }
    /// Alice's and Bob's addresses under this profile.
    fn parties(self) -> (&'static str, &'static str) {
        match self {
            Mode::OpenPgpSigned | Mode::OpenPgpEncrypted => (PGP_ALICE, PGP_BOB),
            _ => (ALICE, BOB),
        }
    }
}

/// A rewrite of an inner entity.
type Mutation = fn(Vec<u8>) -> Vec<u8>;

/// One message to seal: its plain form, and what is done to its inner entity after it
/// is written and before it is sealed.
struct Draft {
    msg: MailA2aMessage,
    /// Rewrites the inner entity (a hostile case); `None` keeps it.
    mutate: Option<Mutation>,
}

/// Who seals a draft and for whom.
#[derive(Clone, Copy)]
struct Sealing<'p> {
    mode: Mode,
    sender: &'p Sender,
    /// The address whose key signs (the From, unless the case says otherwise).
    signer: Option<&'p str>,
    /// Whom it is encrypted to (Bob and the signer, unless the case says otherwise).
    encrypt_to: Option<&'p [&'p str]>,
    /// Signed (the default), or an encrypted mode's entity encrypted unsigned.
    sign: bool,
    /// When it is signed (default: a minute before the receiver's time).
    signed_at: Option<time::OffsetDateTime>,
}

struct Builder<'p> {
    parties: &'p Parties,
    ids: Rng,
    cases: Vec<Case>,
    /// The receiver's policy for the cases pushed now (see [`Builder::under`]).
    policy: CasePolicy,
    /// The receiver's MLS state for the next case pushed (taken by it): this crate's
    /// state file, and the same receiver portable.
    mls: Option<(Vec<u8>, super::case::MlsJoin)>,
    /// The moment the next case pushed is judged at, when not [`super::NOW`] (taken
    /// by it): a KeyPackage mail's, see `cases::mls`.
    now: Option<i64>,
    /// The requests the receiver sent, for the next case pushed (taken by it): each
    /// reply drafted records the request it answers, unless `unsolicited`.
    sent: Vec<super::case::SentLabel>,
    /// Replies drafted now answer no request of the receiver's.
    unsolicited: bool,
}

fn at() -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(super::NOW - 60)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// `base` with `patch`'s top-level fields set (null removes a field).
fn with(mut base: Value, patch: Value) -> Value {
    if let (Some(obj), Some(p)) = (base.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            if v.is_null() {
                obj.remove(k);
            } else {
                obj.insert(k.clone(), v.clone());
            }
        }
    }
    base
}

/// A request for `operation` with a payload that fits it.
fn request_payload(operation: &str) -> Value {
    match operation {
        "message/send" | "message/stream" => {
            json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Summarize the report."}]}})
        }
        "tasks/get" | "tasks/cancel" | "tasks/subscribe" => json!({"id": "task-1"}),
        "tasks/list" => json!({}),
        "push/create" => json!({"taskId": "task-1", "url": "https://agent.example/hook"}),
        "push/get" | "push/delete" => json!({"taskId": "task-1", "id": "hook-1"}),
        "push/list" => json!({"taskId": "task-1"}),
        _ => json!({}),
    }
}

/// A successful response payload for `operation`.
fn response_payload(operation: &str) -> Value {
    let task =
        json!({"id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}});
    match operation {
        "message/send" => json!({"task": task}),
        "message/stream" | "tasks/subscribe" => {
            json!({"statusUpdate": {"taskId": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}}})
        }
        "tasks/get" => json!(task),
        "tasks/cancel" => {
            json!({"id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_CANCELED"}})
        }
        "tasks/list" => {
            json!({"tasks": [task], "nextPageToken": "", "pageSize": 1, "totalSize": 1})
        }
        "push/create" | "push/get" => {
            json!({"taskId": "task-1", "id": "hook-1", "url": "https://agent.example/hook"})
        }
        "push/list" => {
            json!({"configs": [{"taskId": "task-1", "id": "hook-1", "url": "https://agent.example/hook"}]})
        }
        "push/delete" => json!({}),
        "agent-card/get-extended" => json!({
            "name": "Bob", "description": "An agent reached by mail", "version": "1.0",
            "supportedInterfaces": [{"url": "mailto:bob@smime.example", "protocolBinding": "https://kotoba-lang.github.io/mail-a2a/spec/v1/", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "summarize", "name": "Summarize", "description": "Summarizes documents", "tags": ["text"]}]
        }),
        _ => json!({}),
    }
}

impl<'p> Builder<'p> {
    /// A request envelope, fresh identifiers.
    fn request(&mut self, operation: &str) -> Value {
        let mut v = json!({
            "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
            "operation": operation, "messageId": self.ids.id("msg"),
            "correlationId": self.ids.id("exchange"), "sequence": 0, "final": false,
            "createdAt": crate::replay::rfc3339(super::NOW - 60), "expiresAt": crate::replay::rfc3339(super::NOW + 86_400),
            "payload": request_payload(operation),
        });
        if operation
            .parse::<crate::envelope::Operation>()
            .is_ok_and(crate::envelope::Operation::is_effectful)
        {
            v["idempotencyKey"] = json!(self.ids.id("effect"));
        }
        v
    }

    /// A reply of `kind` (response, event, error) for `operation`.
    fn reply(&mut self, operation: &str, kind: &str) -> Value {
        let mut v = json!({
            "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": kind,
            "operation": operation, "messageId": self.ids.id("msg"),
            "correlationId": self.ids.id("exchange"), "sequence": 1, "final": true,
            "createdAt": crate::replay::rfc3339(super::NOW - 60),
            "payload": response_payload(operation),
        });
        match kind {
            "event" => {
                v["final"] = json!(false);
                v["payload"] = json!({"statusUpdate": {"taskId": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_WORKING"}}});
            }
            "error" => {
                v["payload"] = json!({});
                v["error"] =
                    json!({"type": "TaskNotFoundError", "code": -32001, "message": "no such task"});
            }
            _ => {}
        }
        v
    }

    /// The plain message from Alice (under `mode`'s addresses) to Bob carrying `env`,
    /// dated just before the receiver's time; a reply names a request in its thread.
    fn draft(&mut self, mode: Mode, env: &Value) -> Result<Draft, CorpusError> {
        let (from, to) = mode.parties();
        self.draft_between(mode, env, from, &[to])
    }

    fn draft_between(
        &mut self,
        mode: Mode,
        env: &Value,
        from: &str,
        to: &[&str],
    ) -> Result<Draft, CorpusError> {
        let envelope = Envelope::from_json(env.to_string().as_bytes()).map_err(|e| {
            CorpusError::Inconsistent {
                case: "envelope".into(),
                reason: e.to_string(),
            }
        })?;
        let mut msg = MailA2aMessage::new(from, to, envelope);
        let _ = mode;
        msg.headers.date = Some(at());
        let domain = from.rsplit_once('@').map_or("example", |(_, d)| d);
        msg.headers.message_id = Some(format!("{}@{domain}", self.ids.id("mail")));
        if env["kind"] != "request" {
            let request = crate::message::Headers {
                message_id: Some(format!("{}@{domain}", self.ids.id("request"))),
                ..Default::default()
            };
            msg.in_reply_to(&request);
            // The receiver asked: it keeps a record of the request this answers.
            // One request per exchange and attempt: the replies of a stream answer the
            // same one (its Message-ID, or our latest attempt).
            let attempt = env["serviceParameters"]["retry"].as_u64().unwrap_or(0);
            let corr = env["correlationId"].as_str().filter(|_| !self.unsolicited);
            if let Some(corr) = corr.filter(|c| {
                !self
                    .sent
                    .iter()
                    .any(|s| s.correlation_id == *c && s.attempt == attempt)
            }) {
                self.sent.push(super::case::SentLabel {
                    correlation_id: corr.to_string(),
                    mail_id: request.message_id.clone().unwrap_or_default(),
                    to: vec![from.to_string()],
                    attempt,
                    paid: env["payment"]["kind"] == "response",
                    expires_at: crate::replay::rfc3339(super::NOW + 86_400),
                });
            }
        }
        msg.text = Some("A MailA2A message of the conformance corpus.".into());
        Ok(Draft { msg, mutate: None })
    }

    /// Seals `draft` as `sealing` says.
    fn seal(&self, id: &str, draft: &Draft, sealing: Sealing<'_>) -> Result<Vec<u8>, CorpusError> {
        let mode = sealing.mode;
        let msg = &draft.msg;
        let entity = inner_entity(id, msg, mode.encrypted())?;
        let entity = match &draft.mutate {
            Some(f) => f(entity),
            None => entity,
        };
        let from = msg.sender().unwrap_or_default();
        let signer = sealing.signer.unwrap_or(&from);
        let (_, bob) = mode.parties();
        let default_to = [bob, signer];
        let encrypt_to: Vec<String> = sealing
            .encrypt_to
            .unwrap_or(&default_to)
            .iter()
            .map(|a| a.to_string())
            .collect();
        let hints: Hints = msg.headers.hints.clone();
        let store = &sealing.sender.store;
        let at = sealing.signed_at.unwrap_or_else(at);
        let sealed = match mode {
            Mode::Plain => Ok(entity),
            Mode::Mls => {
                return Err(CorpusError::Inconsistent {
                    case: id.into(),
                    reason: "an MLS case is sealed by its group".into(),
                })
            }
            Mode::SmimeEncrypted if !sealing.sign => crate::smime::Smime::new(store)
                .encrypt_signed_entity(&msg.headers, &hints, &entity, &encrypt_to),
            Mode::OpenPgpEncrypted if !sealing.sign => crate::openpgp::OpenPgp::new(store)
                .encrypt_signed_entity(&msg.headers, &hints, &entity, &encrypt_to),
            Mode::SmimeSigned | Mode::SmimeEncrypted => crate::smime::Smime::new(store).seal_raw(
                &msg.headers,
                &hints,
                &entity,
                signer,
                mode.encrypted().then_some(encrypt_to.as_slice()),
                at,
            ),
            Mode::OpenPgpSigned | Mode::OpenPgpEncrypted => crate::openpgp::OpenPgp::new(store)
                .seal_raw(
                    &msg.headers,
                    &hints,
                    &entity,
                    signer,
                    mode.encrypted().then_some(crate::openpgp::Recipients {
                        addresses: &encrypt_to,
                        preferred: &[],
                        intended: None,
                    }),
                    at,
                ),
            Mode::Jws => {
                crate::jws::Jws::new(store).seal_raw(&msg.headers, &hints, &entity, signer, at)
            }
        };
        sealed.map_err(|source| CorpusError::Seal {
            case: id.into(),
            source,
        })
    }

    /// Runs `f` with the receiver's policy `policy` for the cases it adds.
    fn under(
        &mut self,
        policy: CasePolicy,
        f: impl FnOnce(&mut Self) -> Result<(), CorpusError>,
    ) -> Result<(), CorpusError> {
        let before = std::mem::replace(&mut self.policy, policy);
        let r = f(self);
        self.policy = before;
        r
    }

    /// Sealed by Alice: her From signs, encrypted to Bob and to her.
    fn alice(&self, mode: Mode) -> Sealing<'p> {
        Sealing {
            mode,
            sender: &self.parties.alice,
            signer: None,
            encrypt_to: None,
            sign: true,
            signed_at: None,
        }
    }

    /// Sealed by another party with its key for the From, encrypted to Bob alone (an
    /// attacker has no reason to encrypt to itself).
    fn by(&self, mode: Mode, sender: &'p Sender) -> Sealing<'p> {
        const TO_BOB: [&str; 1] = [BOB];
        const TO_PGP_BOB: [&str; 1] = [PGP_BOB];
        Sealing {
            mode,
            sender,
            signer: None,
            encrypt_to: Some(match mode {
                Mode::OpenPgpSigned | Mode::OpenPgpEncrypted => &TO_PGP_BOB,
                _ => &TO_BOB,
            }),
            sign: true,
            signed_at: None,
        }
    }

    /// Adds a case: `draft` sealed by `sealing`, after `prior` (already sealed).
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        name: &str,
        rule: Rule,
        description: &str,
        draft: &Draft,
        sealing: Sealing<'_>,
        prior: Vec<Vec<u8>>,
        crypto: Crypto,
    ) -> Result<(), CorpusError> {
        let id = format!("{}--{}", sealing.mode.name(), name);
        let message = self.seal(&id, draft, sealing)?;
        self.push(id, rule, description, sealing.mode, message, prior, crypto)
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        id: String,
        rule: Rule,
        description: &str,
        mode: Mode,
        message: Vec<u8>,
        prior: Vec<Vec<u8>>,
        crypto: Crypto,
    ) -> Result<(), CorpusError> {
        let (verdict, code) = match rule {
            Rule::Accept => (Verdict::Accept, None),
            Rule::Duplicate => (Verdict::Duplicate, None),
            Rule::Held => (Verdict::Held, None),
            Rule::Refuse(code) => (Verdict::Refuse, Some(code.to_string())),
        };
        let mut expected = Expected {
            id: id.clone(),
            rule: code.clone().unwrap_or_else(|| match verdict {
                Verdict::Duplicate => "rules.duplicate".into(),
                Verdict::Held => "rules.held".into(),
                _ => "valid".into(),
            }),
            description: description.into(),
            profile: mode.profile_token().into(),
            protection: mode.protection().into(),
            verdict,
            code,
            kind: None,
            exit: 0,
            crypto,
            now: crate::replay::rfc3339(self.now.take().unwrap_or(super::NOW)),
            recipients: vec![BOB.into(), PGP_BOB.into()],
            prior: (1..=prior.len())
                .map(|i| format!("prior-{i}.eml"))
                .collect(),
            sent: std::mem::take(&mut self.sent),
            policy: self.policy,
            mls_state: None,
            mls_join: None,
        };
        let (mls_state, mls_join) = self.mls.take().unzip();
        if mls_state.is_some() {
            expected.mls_state = Some(super::case::MLS_STATE.into());
            expected.mls_join = Some(super::case::MLS_JOIN.into());
        }
        let mut files = super::case::CaseFiles {
            expected,
            message,
            prior,
            keys: self.parties.bob.to_vec(),
            mls_state,
        };
        // Judged here as `corpus run` judges it: a case this crate decides otherwise
        // is a bug of the case or of the crate, and is not written.
        let got = super::run::judge(&files);
        let expected = &mut files.expected;
        if got.verdict != expected.verdict || got.code != expected.code {
            return Err(CorpusError::Inconsistent {
                case: id,
                reason: format!(
                    "labelled {:?} {:?}, judged {:?} {:?}: {}",
                    expected.verdict,
                    expected.code,
                    got.verdict,
                    got.code,
                    got.detail.unwrap_or_default()
                ),
            });
        }
        expected.kind = got.kind;
        expected.exit = got.exit;
        self.cases.push(Case {
            expected: files.expected,
            message: files.message,
            prior: files.prior,
            keys: self.parties.bob.clone(),
            mls_state: files.mls_state,
            mls_join,
        });
        Ok(())
    }
}

/// What a case must come to.
#[derive(Clone, Copy)]
enum Rule {
    Accept,
    Duplicate,
    Held,
    Refuse(&'static str),
}

/// Every case, in a fixed order.
/// A family of cases: what adds them to the builder.
type Family = fn(&mut Builder<'_>) -> Result<(), CorpusError>;

pub(crate) fn all(
    parties: &Parties,
    seed: u64,
    progress: &mut dyn FnMut(super::Progress),
) -> Result<Vec<Case>, CorpusError> {
    let mut b = Builder {
        parties,
        ids: Rng(seed),
        cases: Vec::new(),
        policy: CasePolicy::default(),
        mls: None,
        now: None,
        sent: Vec::new(),
        unsolicited: false,
    };
    let families: [Family; 8] = [
        valid::cases,
        envelope::cases,
        mime::cases,
        identity::cases,
        layers::cases,
        legacy::cases,
        rules::cases,
        mls::cases,
    ];
    for (done, family) in families.iter().enumerate() {
        family(&mut b)?;
        progress(super::Progress {
            phase: "building",
            done: done as u64 + 1,
            total: families.len() as u64,
        });
    }
    Ok(b.cases)
}

/// `msg`'s inner entity (as it is signed, or encrypted when `encrypted`).
fn inner_entity(id: &str, msg: &MailA2aMessage, encrypted: bool) -> Result<Vec<u8>, CorpusError> {
    msg.to_inner_entity(encrypted)
        .map_err(|e| CorpusError::Inconsistent {
            case: id.into(),
            reason: e.to_string(),
        })
}

/// Replaces the first `from` in the entity by `to`.
fn replace(entity: Vec<u8>, from: &str, to: &str) -> Vec<u8> {
    replace_bytes(entity, from.as_bytes(), to.as_bytes())
}

/// Replaces the first `from` in `data` by `to`.
fn replace_bytes(data: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    let Some(at) = memchr::memmem::find(&data, from) else {
        return data;
    };
    let mut out = data[..at].to_vec();
    out.extend_from_slice(to);
    out.extend_from_slice(&data[at + from.len()..]);
    out
}
