//! One case: its label (`expected.json`), its message, what the receiver received
//! before, and the receiving party's keys (`keys/keys.json` and the files it lists).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{io, pretty, CorpusError};

/// What the receiver must do with the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Deliver it.
    Accept,
    /// Refuse it (with the labelled code).
    Refuse,
    /// It was delivered before (a prior message): not again.
    Duplicate,
    /// Keep it until the messages before it arrive (a stream event after a gap).
    Held,
}

/// What the cryptographic layer alone decides: the signature verifies with a signer
/// the receiver's anchors or pinned keys vouch for, and the message decrypts with the
/// receiver's key. A tool that checks only that layer is judged on this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Crypto {
    /// The layer passes: whatever refuses the message lies above it.
    Pass,
    /// The layer refuses it.
    Fail,
}

/// `expected.json`: the label of a case (schema: `schemas/corpus-case.schema.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Expected {
    /// The case's name, also its directory: `profile--rule--variant`.
    pub id: String,
    /// The rule it exercises: `valid` or the verdict code it must be refused with.
    pub rule: String,
    /// What the case is, in a sentence.
    pub description: String,
    /// `smime`, `openpgp`, `jws` (detached-jws), or `none` (no protection).
    pub profile: String,
    /// `signed`, `signed-encrypted` or `none`.
    pub protection: String,
    /// What the receiver must do.
    pub verdict: Verdict,
    /// The verdict code of the refusal ([`crate::ReceiveError::code`]); `None` unless
    /// refused.
    pub code: Option<String>,
    /// The error kind of the refusal ([`crate::ErrorKind`]).
    pub kind: Option<String>,
    /// The exit status of `mailseal open` ([`super::exit_status`]).
    pub exit: u8,
    /// What the cryptographic layer alone decides.
    pub crypto: Crypto,
    /// The receiver's time, RFC 3339.
    pub now: String,
    /// The receiver's own addresses.
    pub recipients: Vec<String>,
    /// Messages the receiver accepted first, in order (`prior-1.eml`, ...).
    pub prior: Vec<String>,
    /// The requests the receiver sent before (it keeps a record of them): a
    /// response, error or event is accepted only as the answer to one of these, from
    /// an address it went to, before it expired, in its attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<SentLabel>,
    /// The receiver's policy where a case needs it other than the default; absent
    /// for the default.
    #[serde(default, skip_serializing_if = "CasePolicy::is_default")]
    pub policy: CasePolicy,
    /// The receiving party's MLS state, for the MLS cases: [`MLS_STATE`], this
    /// crate's state file (openmls' storage and ours in SQLite, `src/mls/state.rs`)
    /// holding Bob's MLS identity and the groups he is in. No MLS implementation
    /// exports a member's group state in a common form (RFC 9420 leaves it to each):
    /// another implementation rebuilds Bob from [`Expected::mls_join`] instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mls_state: Option<String>,
    /// The same receiving party in a form any MLS implementation can rebuild it from
    /// ([`MLS_JOIN`], an [`MlsJoin`]): his keys, the KeyPackage he was invited with
    /// and its private keys, and the Welcome he joined by. Present wherever
    /// [`Expected::mls_state`] is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mls_join: Option<String>,
}

/// A request the receiving party sent before a case ([`Expected::sent`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SentLabel {
    /// Its `correlationId`.
    pub correlation_id: String,
    /// Its RFC 5322 Message-ID (no angle brackets): what a reply's In-Reply-To names.
    pub mail_id: String,
    /// The addresses it went to.
    pub to: Vec<String>,
    /// Its `serviceParameters.retry` (0 for the first attempt).
    pub attempt: u64,
    /// It carried an x402 `PaymentPayload`.
    pub paid: bool,
    /// When it expires (RFC 3339).
    pub expires_at: String,
}

impl SentLabel {
    /// The record a receiver keeps of it.
    pub(crate) fn record(&self) -> crate::replay::SentRequest {
        let expires_at = time::OffsetDateTime::parse(
            &self.expires_at,
            &time::format_description::well_known::Rfc3339,
        )
        .map_or(0, |t| t.unix_timestamp());
        crate::replay::SentRequest {
            correlation_id: self.correlation_id.clone(),
            message_id: self.mail_id.clone(),
            attempt: self.attempt,
            mail_id: Some(self.mail_id.clone()),
            author: String::new(),
            recipients: self.to.iter().map(|a| a.to_ascii_lowercase()).collect(),
            group: None,
            operation: String::new(),
            idempotency_key: None,
            expires_at,
            paid: self.paid,
            sent_at: 0,
        }
    }
}

/// Where a case keeps the receiving party's MLS state ([`Expected::mls_state`]).
pub const MLS_STATE: &str = "state/mls.db";

/// Where a case keeps the receiving party's portable MLS join ([`Expected::mls_join`]).
pub const MLS_JOIN: &str = "state/mls-join.json";

/// `state/mls-join.json`: the receiving party of an MLS case as any MLS implementation
/// can rebuild it (schema: `schemas/corpus-mls-join.schema.json`). It imports the
/// KeyPackage with its two private keys, as if it had made it, and the signature key;
/// then processes [`MlsJoin::welcome`] if there is one, then the case's prior messages
/// in order, then its message. Bob's state file holds the same member after the same
/// Welcome; what it holds beyond that (the policy of who may invite him, held and seen
/// messages) is this crate's and the case's label says what it decides.
///
/// The keys are the corpus's test keys, written in clear like every key of a case.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct MlsJoin {
    /// The member's address: the identity of his BasicCredential.
    pub member: String,
    /// The cipher suite, RFC 9420 numbering (1: X25519, AES-128-GCM, SHA-256, Ed25519).
    pub cipher_suite: u16,
    /// His Ed25519 secret key (RFC 8032, 32 bytes), base64.
    pub signature_secret_key: String,
    /// His Ed25519 public key, base64: the leaf's `signature_key`.
    pub signature_public_key: String,
    /// The KeyPackage he was invited with: an MLSMessage, base64.
    pub key_package: String,
    /// The private key of the KeyPackage's `init_key` (HPKE, X25519), base64.
    pub init_private_key: String,
    /// The private key of its leaf's `encryption_key` (HPKE, X25519), base64.
    pub encryption_private_key: String,
    /// The Welcome he joined by: an MLSMessage, base64. Absent when he has only been
    /// invited and the case's message is the Welcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub welcome: Option<String>,
}

/// The receiver's policy switches a case can set (the default: both off). A rule that
/// only a stricter or a more lenient receiver applies needs one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct CasePolicy {
    /// Every sender must protect its header fields (RFC 9788): a legacy sender's
    /// message, whose header fields are outside the signature, is refused.
    #[serde(default)]
    pub require_header_protection: bool,
    /// Legacy CBC EnvelopedData (no integrity) is read, marked unauthenticated, and
    /// every failure after its decryption is one error.
    #[serde(default)]
    pub allow_legacy_cbc: bool,
    /// The receiver marks the message's sender (its outer From) as a legacy peer, whose
    /// signed mail may come without header protection (MailA2A 9.2). Unmarked, such
    /// mail is refused (`binding.legacy-not-allowed`).
    #[serde(default)]
    pub allow_legacy_from_sender: bool,
}

impl CasePolicy {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The open policy this describes for `message` (whose outer From is the sender
    /// [`CasePolicy::allow_legacy_from_sender`] marks).
    pub(crate) fn open_policy(&self, message: &[u8]) -> crate::OpenPolicy {
        let mut policy = crate::OpenPolicy {
            require_header_protection: self.require_header_protection,
            allow_legacy_cbc: self.allow_legacy_cbc,
            ..Default::default()
        };
        if self.allow_legacy_from_sender {
            let limits = crate::message::Limits::default();
            if let Some(from) = crate::message::read_outer(message, &limits)
                .ok()
                .and_then(|o| o.headers.from)
            {
                // An address the outer From parsed as; a mark that is not one marks
                // nothing, and the case is then refused as unmarked.
                let _ = policy.legacy_peers.add(&from.normalized());
            }
        }
        policy
    }
}

/// What a key file is to the receiving party.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyRole {
    /// The receiver's own key or certificate.
    Own,
    /// A trust anchor (a CA certificate).
    Anchor,
    /// A peer's certificate or public key, trusted for the addresses it names (a
    /// pinned key).
    Peer,
}

/// One entry of `keys/keys.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KeyFile {
    /// The file name under `keys/`.
    pub file: String,
    /// What it is to the receiver.
    pub role: KeyRole,
    /// `x509` (PEM certificate), `pkcs8` (PEM private key), `openpgp` (armored
    /// certificate or secret key), or `jwk`.
    pub format: String,
    /// For a JWK: the address it is bound to (a JWK names none itself).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub email: Option<String>,
    /// The bytes (not in `keys.json`: they are the file).
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// A case ready to be written.
pub(crate) struct Case {
    pub(crate) expected: Expected,
    pub(crate) message: Vec<u8>,
    pub(crate) prior: Vec<Vec<u8>>,
    /// The receiving party's keys.
    pub(crate) keys: std::sync::Arc<Vec<KeyFile>>,
    /// The receiving party's MLS state file ([`MLS_STATE`]), for the MLS cases.
    pub(crate) mls_state: Option<Vec<u8>>,
    /// The same party, portable ([`MLS_JOIN`]), for the MLS cases.
    pub(crate) mls_join: Option<MlsJoin>,
}

impl Case {
    /// Writes the case directory `dir`.
    pub(crate) fn write(&self, dir: &Path) -> Result<(), CorpusError> {
        let keys = dir.join("keys");
        std::fs::create_dir_all(&keys).map_err(io(&keys))?;
        let put = |path: &Path, bytes: &[u8]| std::fs::write(path, bytes).map_err(io(path));
        put(&dir.join("message.eml"), &self.message)?;
        for (i, p) in self.prior.iter().enumerate() {
            put(&dir.join(format!("prior-{}.eml", i + 1)), p)?;
        }
        for k in self.keys.iter() {
            put(&keys.join(&k.file), &k.bytes)?;
        }
        if let Some(state) = &self.mls_state {
            let path = dir.join(MLS_STATE);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            put(&path, state)?;
        }
        if let Some(join) = &self.mls_join {
            let value = serde_json::to_value(join).unwrap_or_default();
            put(&dir.join(MLS_JOIN), &pretty(&value))?;
        }
        let list = serde_json::to_value(&*self.keys).unwrap_or_default();
        put(&keys.join("keys.json"), &pretty(&list))?;
        let label = serde_json::to_value(&self.expected).unwrap_or_default();
        put(&dir.join("expected.json"), &pretty(&label))
    }
}

/// A case read back.
pub(crate) struct CaseFiles {
    pub(crate) expected: Expected,
    pub(crate) message: Vec<u8>,
    pub(crate) prior: Vec<Vec<u8>>,
    pub(crate) keys: Vec<KeyFile>,
    /// The receiving party's MLS state file, if the case has one.
    pub(crate) mls_state: Option<Vec<u8>>,
}

/// Reads a case directory back: its label, message, prior messages, keys and state.
pub(crate) fn read(dir: &Path) -> Result<CaseFiles, CorpusError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bad = |reason: String| CorpusError::BadCase {
        case: name.clone(),
        reason,
    };
    let get = |p: &Path| std::fs::read(p).map_err(io(p));
    let expected: Expected = serde_json::from_slice(&get(&dir.join("expected.json"))?)
        .map_err(|e| bad(format!("expected.json: {e}")))?;
    let message = get(&dir.join("message.eml"))?;
    let mut prior = Vec::new();
    for p in &expected.prior {
        if p.contains('/') || p.contains('\\') || p.starts_with('.') {
            return Err(bad(format!(
                "prior message name {p:?} leaves the case directory"
            )));
        }
        prior.push(get(&dir.join(p))?);
    }
    let keys_dir = dir.join("keys");
    let mut keys: Vec<KeyFile> = serde_json::from_slice(&get(&keys_dir.join("keys.json"))?)
        .map_err(|e| bad(format!("keys.json: {e}")))?;
    for k in &mut keys {
        if k.file.contains('/') || k.file.contains('\\') || k.file.starts_with('.') {
            return Err(bad(format!("key file name {:?} leaves keys/", k.file)));
        }
        k.bytes = get(&keys_dir.join(&k.file))?;
    }
    let mls_state = match expected.mls_state.as_deref() {
        None => None,
        Some(MLS_STATE) => Some(get(&dir.join(MLS_STATE))?),
        Some(other) => return Err(bad(format!("mlsState {other:?}: only {MLS_STATE:?}"))),
    };
    match expected.mls_join.as_deref() {
        None | Some(MLS_JOIN) => {}
        Some(other) => return Err(bad(format!("mlsJoin {other:?}: only {MLS_JOIN:?}"))),
    }
    Ok(CaseFiles {
        expected,
        message,
        prior,
        keys,
        mls_state,
    })
}
