//! The core abstraction: [`Sealer`] wraps a plain MailA2A message into a protected one,
//! [`Opener`] verifies and decrypts one and returns the inner message with its
//! [`Verdict`], or an error and nothing else: no partial plaintext, ever.
//!
//! This module knows no profile; profiles implement these traits and the dispatcher
//! picks one from the outer Content-Type.

use std::collections::HashMap;

use crate::envelope::{Envelope, Violation};
use crate::error::{A2aErrorType, Classify, ErrorKind};
use crate::keystore::KeyStoreError;
use crate::message::{Limits, MailA2aMessage, MessageError};
use crate::profile::{Profile, Protection};

/// How to seal.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SealOptions {
    /// The profile.
    pub profile: Profile,
    /// Sign without encrypting.
    pub sign_only: bool,
    /// Repeat every `Mail-A2A-*` hint on the outer message (default: only
    /// `Mail-A2A-Binding`, so the routing layer learns as little as possible).
    pub outer_hints: bool,
    /// MLS group id (base64url) for the `mls` profile.
    pub group: Option<String>,
    /// Sign with RSASSA-PSS (SHA-256, MGF1 with SHA-256, 32-byte salt) when the signing
    /// key is RSA. RFC 8551 prefers PSS; PKCS#1 v1.5 stays the default because every
    /// S/MIME reader verifies it. Ignored for other keys.
    pub rsa_pss: bool,
    /// Inside encryption, write the machine part 8bit or binary instead of base64
    /// (default: on). RFC 8551 3.1.2 asks for this when the recipients read binary
    /// inner parts, as every MailA2A receiver must; turn it off for a recipient known
    /// to want 7-bit inner entities. Ignored when only signing.
    pub binary_inside: bool,
    /// The signing time to state (S/MIME `signingTime`) and to choose the signing
    /// certificate at: `None`, now. For offline signing of a message made earlier;
    /// a receiver never trusts it (it validates at the time of receipt).
    pub signing_time: Option<time::OffsetDateTime>,
    /// Key store fingerprints to choose first among a recipient's keys: the keys its
    /// Agent Card publishes ([`crate::Sender`] fills them from the imported cards).
    /// Among the others, and when none is given, the newest usable key is chosen
    /// (issue #17), never the store's order.
    pub preferred_keys: Vec<String>,
    /// Encrypt to these of the message's To and Cc addresses only (and the sender's
    /// own copy), not to all of them: the message still names every recipient, and
    /// its signature covers that, but only these can read it. `None`: all of them.
    /// For a gateway that delivers per recipient ([`crate::Sender::seal_for_keyed`]):
    /// one recipient without a key must not keep the message from the others. Each
    /// address must be one the message names; MLS encrypts to its group and refuses it.
    pub encrypt_to: Option<Vec<String>>,
    /// The signing key: the key store fingerprint (lower-case hex) of one of the From
    /// address's keys. `None`: the newest usable one, unless the address has usable
    /// keys both on a PKCS#11 token and in the store, which is refused
    /// ([`SealError::AmbiguousSigner`]) rather than settled by dates.
    pub signer: Option<String>,
    /// The address the caller means to sign as (`--as`): the store must hold a
    /// signing key of it, and the message's From must be it, or the seal is refused
    /// ([`SealError::NotSigningAs`]): a store that holds several identities never
    /// signs for one it was not asked to.
    pub sign_as: Option<String>,
}

impl SealOptions {
    /// Sign and encrypt under `profile`, minimal outer hints.
    pub fn new(profile: Profile) -> Self {
        SealOptions {
            profile,
            sign_only: false,
            outer_hints: false,
            group: None,
            rsa_pss: false,
            binary_inside: true,
            signing_time: None,
            preferred_keys: Vec::new(),
            encrypt_to: None,
            signer: None,
            sign_as: None,
        }
    }

    /// Sign without encrypting ([`Self::sign_only`](field@Self::sign_only)).
    pub fn sign_only(mut self, on: bool) -> Self {
        self.sign_only = on;
        self
    }

    /// Repeat every hint on the outer message ([`Self::outer_hints`](field@Self::outer_hints)).
    pub fn outer_hints(mut self, on: bool) -> Self {
        self.outer_hints = on;
        self
    }

    /// The MLS group (base64url id) of a message under `mls`.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Sign with RSASSA-PSS when the key is RSA ([`Self::rsa_pss`](field@Self::rsa_pss)).
    pub fn rsa_pss(mut self, on: bool) -> Self {
        self.rsa_pss = on;
        self
    }

    /// Binary inner parts inside encryption ([`Self::binary_inside`](field@Self::binary_inside)).
    pub fn binary_inside(mut self, on: bool) -> Self {
        self.binary_inside = on;
        self
    }

    /// The signing time to state ([`Self::signing_time`](field@Self::signing_time)).
    pub fn signing_time(mut self, at: time::OffsetDateTime) -> Self {
        self.signing_time = Some(at);
        self
    }

    /// Keys to choose first ([`Self::preferred_keys`](field@Self::preferred_keys)).
    pub fn preferred_keys(mut self, fingerprints: Vec<String>) -> Self {
        self.preferred_keys = fingerprints;
        self
    }

    /// Encrypt to these recipients only ([`Self::encrypt_to`](field@Self::encrypt_to)).
    pub fn encrypt_to<S: Into<String>>(mut self, addresses: impl IntoIterator<Item = S>) -> Self {
        self.encrypt_to = Some(addresses.into_iter().map(Into::into).collect());
        self
    }
}

/// What a receiver accepts (DESIGN decisions 7 and 8).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OpenPolicy {
    /// Minimum protection per peer address (lower case), from configuration or the
    /// peer's Agent Card.
    pub minimum_per_peer: HashMap<String, Protection>,
    /// Minimum for peers without an entry, for every kind of message: `Signed`. An
    /// unauthenticated message is never delivered: MailA2A 9.1 asks it for effectful
    /// requests, and a forged unsigned response or error is as dangerous.
    pub default_minimum: Protection,
    /// Read legacy CBC EnvelopedData (never reported as authenticated).
    pub allow_legacy_cbc: bool,
    /// Our own addresses: a signed message must name one of them in its protected To
    /// or Cc, or come from one of them (our own copy), so a message signed for someone
    /// else and forwarded to us is refused (MailA2A section 9, surreptitious
    /// forwarding). Empty: the profile takes our identities from its key store (our
    /// S/MIME certificates with their keys, our OpenPGP secret keys, our MLS
    /// identities); [`crate::Receiver`] fills it once from the store. A list or an
    /// alias we are reached through is added here, by explicit policy.
    pub our_addresses: Vec<String>,
    /// Check the recipients at all (default: yes). Off only by explicit policy, for a
    /// verifier that is nobody's recipient (an archive, a test of someone else's mail).
    pub check_recipients: bool,
    /// Resource limits.
    pub limits: Limits,
    /// DKIM keys to check the outer message's signatures with (a transport signal
    /// reported in [`Verdict::dkim`], never authority); `None`: not checked.
    pub dkim_keys: Option<crate::dkim::KeyMap>,
    /// The time certificates and keys are validated at: `None`, the time of receipt
    /// (now). A time the signer chose (CMS `signingTime`, an OpenPGP signature's
    /// creation time) never moves it: a key expired or revoked by now does not verify
    /// a message backdated to its lifetime. `Some` only for archival validation, by
    /// explicit choice (`open --at TIME`; a [`crate::Receiver`] with a fixed clock).
    pub validation_time: Option<time::OffsetDateTime>,
    /// Refuse signed mail whose signed entity carries no header fields even from the
    /// peers [`OpenPolicy::legacy_peers`] marks (a legacy sender: `openssl cms -sign`
    /// of the A2A part alone, `gpg --sign --encrypt` of it).
    pub require_header_protection: bool,
    /// As [`OpenPolicy::require_header_protection`], for these senders only (lower
    /// case).
    pub require_header_protection_from: Vec<String>,
    /// The peers whose signed mail may come without header protection (MailA2A 9.2).
    /// Nothing binds such a message's recipients or date (they are the outer, unsigned
    /// fields), so it is opened only from these peers (default: none); its outer From
    /// must still be an address of the signer, and its lifetime comes from signed data
    /// (see [`crate::identity::recipients`]).
    pub legacy_peers: crate::identity::recipients::LegacyPeers,
    /// Open our own copy of a message we sent: a message signed by one of our
    /// identities that does not name us in its protected To or Cc. Off by default: a
    /// recipient could otherwise mail our own message back to us (reflection) and
    /// have it delivered. On only for reading one's sent mail (`open --own-copy`).
    pub own_copy: bool,
    /// Refuse an S/MIME signer when a certificate on its path (the signer's included)
    /// has no current CRL of its issuer in the key store (CRLs are imported with
    /// `key import`; nothing is fetched). Default: a held CRL is checked, a missing one
    /// is no refusal.
    pub require_crl: bool,
}

impl Default for OpenPolicy {
    fn default() -> Self {
        OpenPolicy {
            minimum_per_peer: HashMap::new(),
            default_minimum: Protection::Signed,
            allow_legacy_cbc: false,
            our_addresses: Vec::new(),
            check_recipients: true,
            limits: Limits::default(),
            dkim_keys: None,
            validation_time: None,
            require_header_protection: false,
            require_header_protection_from: Vec::new(),
            legacy_peers: crate::identity::recipients::LegacyPeers::none(),
            own_copy: false,
            require_crl: false,
        }
    }
}

impl OpenPolicy {
    /// Accepts unsigned mail from each of `peers` (the only way to lower the default
    /// minimum, `Signed`, for a peer; a peer's card can raise it again).
    pub fn allow_unsigned_from<S: AsRef<str>>(&mut self, peers: impl IntoIterator<Item = S>) {
        for peer in peers {
            self.minimum_per_peer
                .insert(peer.as_ref().trim().to_ascii_lowercase(), Protection::None);
        }
    }

    /// The time certificates and keys are validated at (see
    /// [`OpenPolicy::validation_time`]).
    pub fn validation_time(&self) -> time::OffsetDateTime {
        self.validation_time
            .unwrap_or_else(time::OffsetDateTime::now_utc)
    }

    /// DESIGN decision 8, widened by issue #17: refuses `message`, of any kind, when
    /// its protection `got` is weaker than what this policy demands of its sender
    /// (`Signed` by default; a peer's card can raise it, only
    /// [`OpenPolicy::minimum_per_peer`] set by the caller can lower it for a peer).
    pub fn check_protection(
        &self,
        message: &MailA2aMessage,
        got: Protection,
    ) -> Result<(), OpenError> {
        // Every kind alike (issue #17): a forged unsigned task result or
        // `PaymentRequired` is as dangerous as a forged request.
        let env = message.envelope();
        let peer = message.sender().unwrap_or_default();
        let required = self.minimum_for(&peer);
        if required > got {
            return Err(OpenError::Downgrade {
                peer,
                operation: env
                    .operation()
                    .map(|o| o.as_str())
                    .unwrap_or_default()
                    .to_string(),
                required,
                got,
            });
        }
        Ok(())
    }

    /// The minimum protection required of `peer`.
    pub fn minimum_for(&self, peer: &str) -> Protection {
        self.minimum_per_peer
            .get(&peer.to_ascii_lowercase())
            .copied()
            .unwrap_or(self.default_minimum)
    }
}

/// Who signed, as the profile verified it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignerIdentity {
    /// An X.509 certificate (S/MIME).
    Certificate {
        /// Public-key fingerprint.
        fingerprint: String,
        /// Its email addresses.
        emails: Vec<String>,
        /// Whether it chains to a trust anchor.
        trusted: bool,
    },
    /// An OpenPGP certificate.
    OpenPgp {
        /// Primary key fingerprint.
        fingerprint: String,
        /// User ID email addresses.
        emails: Vec<String>,
    },
    /// An MLS credential.
    Mls {
        /// The credential identity.
        identity: String,
    },
    /// A JSON Web Key (the `jws` profile).
    Jwk {
        /// Its RFC 7638 thumbprint.
        thumbprint: String,
        /// The addresses the store binds it to.
        emails: Vec<String>,
        /// Where the binding came from (`jwk`, `agent-card`, a DID).
        source: String,
    },
}

impl SignerIdentity {
    /// A stable string for the replay tuple.
    pub fn replay_id(&self) -> String {
        match self {
            Self::Certificate { fingerprint, .. } => format!("x509:{fingerprint}"),
            Self::OpenPgp { fingerprint, .. } => format!("openpgp:{fingerprint}"),
            Self::Mls { identity } => format!("mls:{identity}"),
            Self::Jwk { thumbprint, .. } => format!("jwk:{thumbprint}"),
        }
    }
}

/// What opening established.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// The profile, `None` for an unprotected message.
    pub profile: Option<Profile>,
    /// How strongly the message was protected.
    pub protection: Protection,
    /// The verified signer.
    pub signer: Option<SignerIdentity>,
    /// Header names protected by the cryptography.
    pub protected_headers: Vec<String>,
    /// Whether every outer value that is also protected matched it.
    pub outer_headers_matched: bool,
    /// Whether the header fields were inside the signature (RFC 9788). `false`: a
    /// legacy sender signed the A2A part alone; From, To, Date and Message-ID came
    /// from the outer message, which nothing authenticates beyond the From being an
    /// address of the signer.
    pub header_protection: bool,
    /// The signature algorithm, when signed.
    pub algorithm: Option<String>,
    /// The time the signature says it was made (CMS signingTime, the OpenPGP
    /// signature's creation time), when it states one. The signer chose it: it never
    /// widens what is accepted (certificates and keys are judged at receipt), and it is
    /// a legacy message's date, since its outer Date is unsigned.
    pub signed_at: Option<time::OffsetDateTime>,
    /// The outer message's DKIM results when the policy had keys to check them: which
    /// domain's server handled the message. A transport signal only: it never raises
    /// `protection` and a failure never refuses a message the profile authenticated.
    pub dkim: Vec<crate::dkim::DkimSignal>,
    /// What opened but deserves the reader's notice, one line each: legacy CBC content
    /// (no integrity: only the signature protects it), a key agreed with the SHA-1
    /// KDF, a `micalg` that names another digest than the signature's (RFC 8551
    /// 3.5.3.2 asks receivers to be lenient; lenient is not silent).
    pub warnings: Vec<String>,
}

/// An opened message: the inner message (envelope, its exact bytes and digest inside)
/// and the verdict.
#[derive(Clone, Debug)]
pub struct Opened {
    /// The inner message.
    pub message: MailA2aMessage,
    /// The verdict.
    pub verdict: Verdict,
}

impl Opened {
    /// The envelope.
    pub fn envelope(&self) -> &Envelope {
        self.message.envelope()
    }
}

/// The error of a profile's own layer ([`crate::smime::SmimeError`],
/// [`crate::openpgp::OpenPgpError`], [`crate::mls::MlsError`]), carried whole inside
/// [`OpenError::Profile`] and [`SealError::Profile`]: a caller reaches it with
/// `std::error::Error::source` and `downcast_ref`, and its kind is the whole error's.
pub type ProfileSource = Box<dyn std::error::Error + Send + Sync>;

/// The words an error's kind puts before its message.
fn kind_words(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Malformed => "malformed",
        ErrorKind::Authentication => "authentication failed",
        ErrorKind::NoUsableKey => "no usable key",
        ErrorKind::Policy => "refused",
        _ => "failed",
    }
}

/// Why an authentic message is not bound to its sender or to us (MailA2A section 9).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// The signer's certificate or credential does not name the message's From.
    #[error("the signer's certificate does not name the sender {}", crate::error::quoted(.sender))]
    SignerIsNotSender {
        /// The protected From address.
        sender: String,
    },
    /// None of our addresses is in the protected To or Cc: the message was signed for
    /// someone else and forwarded to us.
    #[error("we are not a protected recipient (forwarded message)")]
    NotARecipient,
    /// Signed by one of our own identities, and not naming us in its protected To or
    /// Cc: our own mail, sent to someone else and mailed back to us (reflection).
    #[error("our own message to others, mailed back to us (reflection): it does not name us in its protected To or Cc; `open --own-copy` reads one's own sent mail")]
    OwnMessageNotForUs,
    /// A legacy sender's message (no header protection) that nothing signed dates: no
    /// `createdAt` or `expiresAt` in its envelope and no time in its signature. Its
    /// outer Date is unsigned, so it would be fresh again whenever it is sent.
    #[error("{} sent mail without header protection and without a signed time (no createdAt or expiresAt, no signature time): its outer Date is unsigned, so it could be replayed as new at any time", crate::error::quoted(.sender))]
    LegacyUndated {
        /// The outer From address.
        sender: String,
    },
    /// The signed entity carries no header fields (a legacy sender) and the sender is
    /// not marked as legacy: nothing binds its recipients or date.
    #[error("{} sent mail without header protection (a legacy signer: To, Cc and Date are not signed); open it only from a peer marked as legacy (`--allow-legacy-from {}` or `@DOMAIN`, a peer policy's `legacy`)", crate::error::quoted(.sender), crate::error::quoted(.sender))]
    LegacyNotAllowed {
        /// The outer From address.
        sender: String,
    },
    /// The signed entity carries no header fields (a legacy sender without header
    /// protection) and the policy demands header protection of this sender.
    #[error("{} must protect its header fields (RFC 9788); this message does not", crate::error::quoted(.sender))]
    NoHeaderProtection {
        /// The outer From address.
        sender: String,
    },
}

/// Why sealing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// The plain message breaks binding rules: a sealer never signs an invalid message.
    #[error("refusing to seal an invalid message: {}", .0.first().map(ToString::to_string).unwrap_or_default())]
    Invalid(Vec<Violation>),
    /// No private key for the From address.
    #[error("no signing key for {address}")]
    NoSigningKey {
        /// The From address.
        address: String,
    },
    /// The From address has usable signing keys both on a token and in the store, and
    /// no [`SealOptions::signer`] chose one.
    #[error("{address} has signing keys on a token and in the store: {}; choose one (--signer FINGERPRINT)", .candidates.join(", "))]
    AmbiguousSigner {
        /// The From address.
        address: String,
        /// Each key: its fingerprint and where it is (`on a token` or `in the store`).
        candidates: Vec<String>,
    },
    /// The message's From is not the address [`SealOptions::sign_as`] names.
    #[error("the message is from {from}, not {sign_as}: a store signs only as the address it is asked to (--as)")]
    NotSigningAs {
        /// The message's From (quoted).
        from: String,
        /// The address asked for.
        sign_as: String,
    },
    /// [`SealOptions::signer`] names no usable signing key of the From address.
    #[error("no usable signing key {signer} for {address}")]
    NoSuchSigner {
        /// The From address.
        address: String,
        /// The fingerprint asked for.
        signer: String,
    },
    /// No certificate for a recipient.
    #[error("no certificate for recipient {address}")]
    NoRecipientKey {
        /// The recipient.
        address: String,
    },
    /// Every certificate of a recipient is refused for encryption (expired, revoked,
    /// not for encryption, from no trusted issuer).
    #[error("no usable certificate of {address} to encrypt to: {reason}")]
    RecipientKeyRefused {
        /// The recipient.
        address: String,
        /// Why the last certificate was refused.
        reason: String,
    },
    /// [`SealOptions::encrypt_to`] cannot be honoured.
    #[error("encrypt_to {0}")]
    EncryptTo(String),
    /// The profile's own layer failed (S/MIME, OpenPGP, MLS): its error whole, with its
    /// kind and its source chain (a PKCS#11 token without the mechanism, a removed MLS
    /// member, a key that cannot sign).
    #[error("sealing failed: {source}")]
    Profile {
        /// The profile that failed.
        profile: Profile,
        /// The kind of its error.
        kind: ErrorKind,
        /// Its error.
        #[source]
        source: ProfileSource,
    },
    /// The operating system gave no randomness (for a MIME boundary).
    #[error("sealing failed: no randomness from the operating system")]
    NoRandomness,
    /// The signed entity contains the MIME boundary a signed-only message would use.
    #[error("sealing failed: the signed entity contains its own MIME boundary")]
    BoundaryInContent,
    /// This build has no implementation of the profile.
    #[error("profile {0} is not available in this build")]
    ProfileUnavailable(Profile),
    /// MLS: no group was given to seal to.
    #[error("no MLS group given")]
    NoGroup,
    /// MLS: a sign-only seal was asked for; application messages are always encrypted.
    #[error("MLS application messages are always encrypted")]
    MlsAlwaysEncrypted,
    /// The message could not be written.
    #[error(transparent)]
    Message(#[from] MessageError),
    /// The key store failed.
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
    /// Writing the sealed message out failed (`Sealer::seal_to`).
    #[error("cannot write the sealed message: {0}")]
    Output(std::io::Error),
}

impl SealError {
    /// A profile's own error, kept whole with its kind.
    pub fn profile<E>(profile: Profile, e: E) -> Self
    where
        E: std::error::Error + Classify + Send + Sync + 'static,
    {
        SealError::Profile {
            profile,
            kind: e.kind(),
            source: Box::new(e),
        }
    }
}

impl Classify for SealError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Invalid(v) => v
                .first()
                .map_or(A2aErrorType::InvalidRequestError, Violation::a2a_error),
            Self::Message(e) => e.a2a_error(),
            _ => A2aErrorType::InternalError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::Malformed,
            Self::AmbiguousSigner { .. } | Self::NotSigningAs { .. } => ErrorKind::InvalidArgument,
            Self::NoSigningKey { .. }
            | Self::NoSuchSigner { .. }
            | Self::NoRecipientKey { .. }
            | Self::RecipientKeyRefused { .. } => ErrorKind::NoUsableKey,
            Self::ProfileUnavailable(_)
            | Self::NoGroup
            | Self::MlsAlwaysEncrypted
            | Self::EncryptTo(_) => ErrorKind::InvalidArgument,
            Self::Profile { kind, .. } => *kind,
            Self::NoRandomness | Self::Output(_) => ErrorKind::Other,
            Self::BoundaryInContent => ErrorKind::Malformed,
            Self::Message(e) => e.kind(),
            Self::KeyStore(e) => e.kind(),
        }
    }
}

/// Why opening failed. No variant carries decrypted content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The message (outer or inner) could not be read.
    #[error(transparent)]
    Malformed(#[from] MessageError),
    /// The inner message breaks binding rules.
    #[error("{}", .0.first().map(ToString::to_string).unwrap_or_default())]
    Invalid(Vec<Violation>),
    /// The profile's cryptographic layer refused the message: its error whole, so its
    /// kind (a malformed CMS is malformed, a bad signature is an authentication
    /// failure, no key of ours is no usable key) and its source chain survive.
    #[error("{}: {source}", kind_words(*kind))]
    Profile {
        /// The profile whose layer refused it.
        profile: Profile,
        /// The kind of its error.
        kind: ErrorKind,
        /// Its error's stable verdict code (`smime.bad-signature`).
        code: &'static str,
        /// Its error.
        #[source]
        source: ProfileSource,
    },
    /// Weaker protection than the policy requires for this peer and operation.
    #[error("refused: {operation} from {peer} needs {required} protection, the message has {got}")]
    Downgrade {
        /// The peer.
        peer: String,
        /// The operation.
        operation: String,
        /// Required protection.
        required: Protection,
        /// Actual protection.
        got: Protection,
    },
    /// The verified signer is not the sender, or we are not a recipient.
    #[error("refused: {0}")]
    Binding(#[source] BindingError),
    /// The outer Content-Type names a profile this build does not have.
    #[error("profile {0} is not available in this build")]
    ProfileUnavailable(Profile),
}

impl OpenError {
    /// A profile's own error, kept whole with its kind and code.
    pub fn profile<E>(profile: Profile, e: E) -> Self
    where
        E: std::error::Error + Classify + crate::error::Coded + Send + Sync + 'static,
    {
        OpenError::Profile {
            profile,
            kind: e.kind(),
            code: e.verdict_code(),
            source: Box::new(e),
        }
    }

    /// The profile's own error, when the profile's layer refused the message.
    pub fn profile_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            OpenError::Profile { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

crate::error::verdict_codes!(BindingError, "binding", {
    Self::SignerIsNotSender { .. } => "signer-is-not-sender",
    Self::NotARecipient => "not-a-recipient",
    Self::NoHeaderProtection { .. } => "no-header-protection",
    Self::OwnMessageNotForUs => "own-message-not-for-us",
    Self::LegacyNotAllowed { .. } => "legacy-not-allowed",
    Self::LegacyUndated { .. } => "legacy-undated",
});

impl OpenError {
    /// The stable verdict code of this refusal (`layer.reason`): the code of the
    /// layer that refused, a profile's own for a profile's refusal, `validation.CODE`
    /// for the first binding rule the inner message breaks.
    pub fn code(&self) -> String {
        match self {
            Self::Malformed(e) => format!("message.{}", e.code()),
            Self::Invalid(v) => v.first().map_or_else(
                || "validation.invalid".to_string(),
                |v| format!("validation.{}", v.code.as_str()),
            ),
            Self::Profile { code, .. } => (*code).into(),
            Self::Downgrade { .. } => "open.downgrade".into(),
            Self::Binding(b) => b.code().into(),
            Self::ProfileUnavailable(_) => "open.profile-unavailable".into(),
        }
    }

    /// The codes [`Self::code`] gives outside the profiles' own, validation's and the
    /// message reader's.
    pub const CODES: &'static [&'static str] = &["open.downgrade", "open.profile-unavailable"];
}

impl Classify for OpenError {
    fn a2a_error(&self) -> A2aErrorType {
        match self {
            Self::Malformed(e) => e.a2a_error(),
            Self::Invalid(v) => v
                .first()
                .map_or(A2aErrorType::InvalidRequestError, Violation::a2a_error),
            Self::ProfileUnavailable(_) => A2aErrorType::UnsupportedOperationError,
            _ => A2aErrorType::InvalidRequestError,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Malformed(_) | Self::Invalid(_) => ErrorKind::Malformed,
            Self::Profile { kind, .. } => *kind,
            Self::Downgrade { .. } | Self::Binding(_) => ErrorKind::Policy,
            Self::ProfileUnavailable(_) => ErrorKind::Other,
        }
    }
}

impl SealError {
    /// The recipient this error is about when it is that recipient's key alone that
    /// is missing or refused: the message could still be sealed for the others
    /// ([`crate::Sender::seal_for_keyed`]).
    pub fn recipient_without_key(&self) -> Option<&str> {
        match self {
            Self::NoRecipientKey { address } | Self::RecipientKeyRefused { address, .. } => {
                Some(address)
            }
            _ => None,
        }
    }
}

/// A rewrite of a signature's structure after signing (a CMS SignedData, OpenPGP
/// packets), below its cryptography: only the conformance corpus's `--layer packets`
/// passes one to a sealer.
pub(crate) type SignatureEdit<'a> = &'a dyn Fn(Vec<u8>) -> Vec<u8>;

/// What every sealer checks first: the options name `profile`, and `plain` passes the
/// binding's rules under it (a sealer never signs an invalid message). The From
/// address (the signer) and every address the message is encrypted to: To, Cc and
/// the sender, who can read its own copy.
/// Refuses a message whose From is not [`SealOptions::sign_as`], when that is given
/// (compared as addresses are: case-insensitively).
pub(crate) fn signs_as(plain: &MailA2aMessage, opts: &SealOptions) -> Result<(), SealError> {
    let Some(wanted) = opts.sign_as.as_deref() else {
        return Ok(());
    };
    let from = plain.sender().unwrap_or_default();
    if from.eq_ignore_ascii_case(wanted.trim()) {
        return Ok(());
    }
    Err(SealError::NotSigningAs {
        from: crate::error::quoted(&from),
        sign_as: crate::error::quoted(wanted),
    })
}

pub(crate) fn sealing_addresses(
    plain: &MailA2aMessage,
    opts: &SealOptions,
    profile: Profile,
) -> Result<(String, Vec<String>), SealError> {
    if opts.profile != profile {
        return Err(SealError::ProfileUnavailable(opts.profile));
    }
    let violations = plain.check(&crate::envelope::ValidationContext::new(Some(profile)));
    if !violations.is_empty() {
        return Err(SealError::Invalid(violations));
    }
    let from = plain
        .headers
        .from
        .as_ref()
        .map(|m| m.address.clone())
        .unwrap_or_default();
    signs_as(plain, opts)?;
    // Each address once, as first written (a message may name one many times, under
    // several spellings: each would be looked up and judged again), in a set: the
    // work grows with the addresses, not with their square.
    let only: Option<std::collections::HashSet<String>> = match &opts.encrypt_to {
        None => None,
        Some(only) => Some(encrypt_to_subset(plain, only)?.into_iter().collect()),
    };
    let mut seen = std::collections::HashSet::new();
    let mut recipients: Vec<String> = plain
        .headers
        .to
        .iter()
        .chain(&plain.headers.cc)
        .filter(|m| {
            let n = m.normalized();
            only.as_ref().is_none_or(|o| o.contains(&n)) && seen.insert(n)
        })
        .map(|m| m.address.clone())
        .collect();
    recipients.push(from.clone());
    Ok((from, recipients))
}

/// The addresses of [`SealOptions::encrypt_to`], normalised, each checked to be one
/// `plain` names in To or Cc: encrypting to an address the message does not name
/// would hand it to someone its signature does not address.
pub(crate) fn encrypt_to_subset(
    plain: &MailA2aMessage,
    only: &[String],
) -> Result<Vec<String>, SealError> {
    let named: std::collections::HashSet<String> = plain
        .headers
        .to
        .iter()
        .chain(&plain.headers.cc)
        .map(|m| m.normalized())
        .collect();
    if only.is_empty() {
        return Err(SealError::EncryptTo(
            "names no recipient (leave it unset to encrypt to every recipient)".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(only.len());
    for a in only {
        let a = crate::message::Mailbox::new(a).normalized();
        if !named.contains(&a) {
            return Err(SealError::EncryptTo(format!(
                "{} is not a recipient the message names in To or Cc",
                crate::error::quoted(&a)
            )));
        }
        if seen.insert(a.clone()) {
            out.push(a);
        }
    }
    Ok(out)
}

/// Wraps a plain MailA2A message into a protected one.
pub trait Sealer {
    /// Seal `plain` (which must pass the binding's rules) into RFC 5322 bytes.
    fn seal(&self, plain: &MailA2aMessage, opts: &SealOptions) -> Result<Vec<u8>, SealError>;

    /// [`Sealer::seal`], written to `out` as it is encoded where the profile can (S/MIME
    /// encodes its encrypted body into `out` in pieces, so a large message is not held
    /// twice); nothing is written when sealing fails before the output starts.
    fn seal_to(
        &self,
        plain: &MailA2aMessage,
        opts: &SealOptions,
        out: &mut dyn std::io::Write,
    ) -> Result<(), SealError> {
        let sealed = self.seal(plain, opts)?;
        out.write_all(&sealed).map_err(SealError::Output)
    }

    /// Those of `addresses` (normalised) without a key [`Sealer::seal`] would encrypt
    /// to, each with the error sealing would stop at ([`SealError::recipient_without_key`]),
    /// judged as sealing judges them (`preferred`: the keys taken first), and without
    /// sealing: [`crate::Sender::seal_for_keyed`] asks once for all the recipients,
    /// then seals once, rather than sealing again for each one left out. An error
    /// that is no recipient's (the store's) is returned as it is. A sealer that
    /// encrypts to no recipient key has none to miss.
    fn without_key(
        &self,
        addresses: &[String],
        preferred: &[String],
    ) -> Result<Vec<(String, SealError)>, SealError> {
        let _ = (addresses, preferred);
        Ok(Vec::new())
    }
}

/// Verifies and decrypts a protected message.
pub trait Opener {
    /// Verify and decrypt; return the inner message and the verdict, or an error and
    /// nothing else.
    fn open(&self, raw: &[u8], policy: &OpenPolicy) -> Result<Opened, OpenError>;

    /// [`Self::open`] of a message whose buffer the opener may use: a profile that
    /// can decodes and decrypts in it, so a large message is held once. The default
    /// opens it as borrowed.
    fn open_owned(&self, raw: Vec<u8>, policy: &OpenPolicy) -> Result<Opened, OpenError> {
        self.open(&raw, policy)
    }
}

/// A MIME boundary of 192 random bits.
/// The boundary of a signed-only message: from a digest of the signed entity and the
/// signing time, so that signing the same message at the same time gives the same
/// bytes, here or through offline signing (a boundary protects nothing; it only must
/// not occur in the entity, which a digest of the entity itself cannot be made to).
pub(crate) fn content_boundary(
    entity: &[u8],
    signing_time: time::OffsetDateTime,
) -> Result<String, SealError> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(b"mailseal boundary\0");
    h.update(signing_time.unix_timestamp().to_be_bytes());
    h.update(entity);
    let hex = crate::hex::hex(&h.finalize()[..24]);
    let boundary = format!("{}_{}_{}", &hex[..16], &hex[16..32], &hex[32..]);
    let delimiter = format!("--{boundary}");
    if memchr::memmem::find(entity, delimiter.as_bytes()).is_some() {
        return Err(SealError::BoundaryInContent);
    }
    Ok(boundary)
}

pub(crate) fn random_boundary() -> Result<String, SealError> {
    // The OS generator directly: one getrandom(2) call, where a DRBG's reseeding
    // costs more than the rest of composing a small message (the corpus's seeded
    // stream inside its scope).
    let mut bytes = [0u8; 24];
    crate::entropy::fill(&mut bytes).map_err(|_| SealError::NoRandomness)?;
    let hex = crate::hex::hex(&bytes);
    Ok(format!("{}_{}_{}", &hex[..16], &hex[16..32], &hex[32..]))
}
