//! Reading PGP/MIME: decrypting and verifying with Sequoia's streaming decryptor, which
//! holds the plaintext back until the integrity check and the signature checks passed,
//! then applying the binding's checks to the signed entity.
//!
//! Compressed data is inflated before any signature in it can be checked (the
//! signature follows the content it covers), for anyone: anyone can encrypt to us. What
//! it may inflate to is tied to what it weighs ([`Limits::inflation_budget`]): four
//! times the OpenPGP message, at least 8 MiB, at most the decoded-bytes limit (64 MiB).
//! Past it the message is refused whole (`message.decoded-too-large`), never cut, and
//! nothing past it is stored (issue #58: a 395 KB bomb held 147.5 MB, bounded only by
//! the 64 MiB limit and the copies made growing to it).
//!
//! Why those figures: a message's peak memory is held to 12 times its size plus
//! 48 MiB (docs/security.md). The content is held once ([`read_bounded`] grows its buffer
//! so that the buffer and its copy never hold more than the budget), and the canonical
//! form of a `multipart/signed` entity inside is read through for its signature, not
//! copied, until the signature verified; with the mail's own copies (the file, the
//! decoded part, the dearmored message: some three times the mail) four times the
//! message fits that bound, and the 8 MiB floor fits within the 48 MiB whatever the
//! message's size. A message whose content is at most 8 MiB opens whatever its
//! compression (GnuPG compresses by default, and repeated text compresses a hundredfold);
//! above 8 MiB, content that compresses more than fourfold is refused. mailseal never
//! compresses what it sends; [`Limits::inflation_ratio`] and [`Limits::inflation_floor`]
//! raise the budget for a peer whose tool does, at the cost the bound states.

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::Read;

use sequoia_openpgp as openpgp;

use openpgp::cert::amalgamation::key::ValidErasedKeyAmalgamation;
use openpgp::cert::amalgamation::ValidAmalgamation;
use openpgp::cert::Cert;
use openpgp::crypto::{Decryptor as _, SessionKey};
use openpgp::packet::{Tag, PKESK, SKESK};
use openpgp::parse::stream::{
    DecryptionHelper, DecryptorBuilder, DetachedVerifierBuilder, GoodChecksum, MessageLayer,
    MessageStructure, VerificationError, VerificationHelper, VerifierBuilder,
};
use openpgp::parse::{PacketParser, Parse};
use openpgp::types::SymmetricAlgorithm;
use openpgp::{Fingerprint, KeyHandle};
use zeroize::Zeroizing;

use super::{keys, OpenPgp, OpenPgpError};
use crate::binding::{finish, Authenticated};
use crate::message::{canonical_crlf, read_outer, CanonicalReader, Limits, Outer};
use crate::profile::{Profile, Protection};
use crate::seal::{OpenError, OpenPolicy, Opened, Opener, SignerIdentity};

/// Who made the one good signature.
#[derive(Clone, Debug)]
pub(crate) struct SignerInfo {
    /// The certificate (primary key) fingerprint.
    pub(crate) fingerprint: Fingerprint,
    /// The key that made the signature (a subkey, or the primary).
    pub(crate) key_fingerprint: Fingerprint,
    /// When the signature says it was made.
    pub(crate) created: Option<std::time::SystemTime>,
    /// A text-mode (0x01) signature.
    pub(crate) text: bool,
    /// The addresses the signature speaks for (see `Helper::signer_emails`).
    pub(crate) emails: Vec<String>,
    algorithm: String,
    intended: Vec<Fingerprint>,
}

/// What the helper learnt while Sequoia read the message. Kept outside the helper,
/// which Sequoia drops when it fails, so the reason survives.
#[derive(Default)]
pub(crate) struct Outcome {
    failure: Option<OpenPgpError>,
    /// Every good signature, in order.
    pub(crate) signers: Vec<SignerInfo>,
    pub(crate) encrypted: bool,
    pub(crate) aead: bool,
    decrypted_with: Option<Fingerprint>,
    saw_sed: bool,
    /// The session key that decrypted, when [`Symmetric::keep_session_key`] asked.
    pub(crate) session_key: Option<(Option<SymmetricAlgorithm>, SessionKey)>,
    /// An Argon2 SKESK was not tried: it asked for more than the budget.
    pub(crate) argon2_over_budget: bool,
}

/// What else may decrypt a message than our secret keys: passwords and session keys
/// the caller holds (SOP's `decrypt`; mail never has them).
#[derive(Default)]
pub(crate) struct Symmetric<'a> {
    /// Passwords for the message's SKESK packets.
    pub(crate) passwords: &'a [openpgp::crypto::Password],
    /// Session keys, each with its algorithm when known, tried before anything else.
    pub(crate) session_keys: &'a [(Option<SymmetricAlgorithm>, SessionKey)],
    /// Keep the session key that decrypted in [`Outcome::session_key`].
    pub(crate) keep_session_key: bool,
}

/// SKESK packets tried with each password (each costs a key derivation).
const MAX_SKESKS: usize = 8;
/// The largest Argon2 memory exponent tried (2^18 KiB, 256 MiB: RFC 9580's second
/// recommended parameter set); a message asking for more is not tried (issue #58: a
/// 228-byte message asking for 2 GiB cost 2 GiB).
const MAX_ARGON2_MEMORY_EXPONENT: u8 = 18;
/// The Argon2 work one message may ask of us over all its SKESKs and passwords, in
/// KiB times passes (2^20: 256 MiB four times, about a second); a derivation that
/// would go past it is not made.
const ARGON2_BUDGET: u64 = 1 << 20;
/// What Sequoia's decryptor holds back before its signatures are checked. It may be
/// small: nothing it releases early leaves here before the whole message is read and
/// every check has passed ([`read_bounded`] keeps it, and an error drops it), so its
/// buffer is only memory (issue #58: with 25 MiB, a compression bomb peaked at 264 MB).
const RELEASE_BUFFER: usize = 1 << 20;

/// What a message's signatures must be for it to be released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signatures {
    /// At least one good signature by a known certificate, and no bad one.
    Required,
    /// As `Required`, but an encrypted message may carry none: its decrypted entity is
    /// then itself `multipart/signed` (RFC 3156 6.1), which the caller requires.
    OrSignedInside,
    /// Collect the good ones and judge nothing (SOP's decrypt and verify report them;
    /// the integrity of encrypted data is still enforced).
    Collect,
}

struct Helper<'a> {
    store: &'a OpenPgp<'a>,
    /// The store's certificates (ours among them have secret keys); `None` when the
    /// message is only verified.
    own: Option<std::sync::Arc<super::parsed::View>>,
    certs: &'a [Cert],
    /// What the signatures must be.
    signatures: Signatures,
    /// When the signing keys must be valid: the time of receipt (Sequoia checks them
    /// at the signature's own, signer-chosen time; a key expired or revoked since must
    /// not verify a backdated message).
    at: std::time::SystemTime,
    outcome: &'a RefCell<Outcome>,
    /// Packets seen so far, at every depth (inside the encryption too).
    packets: usize,
    /// Passwords and session keys to try beside our keys.
    symmetric: &'a Symmetric<'a>,
}

impl Helper<'_> {
    /// Hands `sk` to Sequoia; on success, keeps it when asked.
    fn try_session_key(
        &self,
        algo: Option<SymmetricAlgorithm>,
        sk: &SessionKey,
        decrypt: &mut dyn FnMut(Option<SymmetricAlgorithm>, &SessionKey) -> bool,
    ) -> bool {
        if !decrypt(algo, sk) {
            return false;
        }
        if self.symmetric.keep_session_key {
            self.outcome.borrow_mut().session_key = Some((algo, sk.clone()));
        }
        true
    }

    /// Tries the caller's session keys.
    fn try_session_keys(
        &self,
        sym_algo: Option<SymmetricAlgorithm>,
        decrypt: &mut dyn FnMut(Option<SymmetricAlgorithm>, &SessionKey) -> bool,
    ) -> bool {
        self.symmetric
            .session_keys
            .iter()
            .any(|(algo, sk)| self.try_session_key(algo.or(sym_algo), sk, decrypt))
    }

    /// Tries the caller's passwords on the first [`MAX_SKESKS`] SKESKs. An Argon2 S2K
    /// that asks for more memory than [`MAX_ARGON2_MEMORY_EXPONENT`], or more work
    /// than what is left of [`ARGON2_BUDGET`] over the whole message, is skipped and
    /// said ([`Outcome::argon2_over_budget`]).
    fn try_passwords(
        &self,
        skesks: &[SKESK],
        sym_algo: Option<SymmetricAlgorithm>,
        decrypt: &mut dyn FnMut(Option<SymmetricAlgorithm>, &SessionKey) -> bool,
    ) -> bool {
        let mut budget = ARGON2_BUDGET;
        for skesk in skesks.iter().take(MAX_SKESKS) {
            let s2k = match skesk {
                SKESK::V4(s) => s.s2k(),
                SKESK::V6(s) => s.s2k(),
                _ => continue,
            };
            #[allow(deprecated)]
            if let openpgp::crypto::S2K::Argon2 { m, t, .. } = s2k {
                // Every password costs a derivation.
                let work = (1u64 << (*m).min(63))
                    .saturating_mul(u64::from(*t).max(1))
                    .saturating_mul(self.symmetric.passwords.len() as u64);
                if *m > MAX_ARGON2_MEMORY_EXPONENT || work > budget {
                    self.outcome.borrow_mut().argon2_over_budget = true;
                    continue;
                }
                budget -= work;
            }
            for password in self.symmetric.passwords {
                if let Ok((algo, sk)) = skesk.decrypt(password) {
                    if self.try_session_key(algo.or(sym_algo), &sk, decrypt) {
                        return true;
                    }
                }
            }
        }
        false
    }

    fn fail(&self, e: OpenPgpError) -> anyhow::Error {
        let text = e.to_string();
        let mut o = self.outcome.borrow_mut();
        if o.failure.is_none() {
            o.failure = Some(e);
        }
        anyhow::anyhow!(text)
    }
}

impl Helper<'_> {
    /// The certificate and its key `key` are valid, alive, unrevoked and the key
    /// signing-capable at [`Helper::at`].
    fn valid_at_receipt(&self, cert: &Cert, key: &Fingerprint) -> bool {
        use openpgp::types::RevocationStatus;
        let Ok(valid) = cert.with_policy(&self.store.policy, self.at) else {
            return false;
        };
        if valid.alive().is_err()
            || !matches!(
                valid.revocation_status(),
                RevocationStatus::NotAsFarAsWeKnow
            )
        {
            return false;
        }
        valid
            .keys()
            .key_handle(key.clone())
            .next()
            .is_some_and(|k| {
                k.alive().is_ok()
                    && k.for_signing()
                    && matches!(k.revocation_status(), RevocationStatus::NotAsFarAsWeKnow)
                    && primary_bound(&k)
            })
    }
}

impl Helper<'_> {
    /// Why `sig` is refused as dated after the time of receipt plus the skew (the
    /// signer's choice of time), or `None`.
    fn signed_in_the_future(&self, sig: &openpgp::packet::Signature) -> Option<String> {
        let signed_at = time::OffsetDateTime::from(sig.signature_creation_time()?);
        crate::identity::check_signed_at(signed_at, self.at.into(), crate::identity::DEFAULT_SKEW)
            .err()
            .map(|e| e.to_string())
    }

    /// The addresses the signature speaks for. Mail: the User IDs valid at receipt
    /// and at the signature's time ([`crate::identity::openpgp::signer_addresses`]),
    /// so a back-dated signature cannot revive a User ID revoked since. SOP
    /// (`Collect`): the certificate as Sequoia validated it at the signature's time,
    /// which the SOP suites expect.
    fn signer_emails(
        &self,
        ka: &ValidErasedKeyAmalgamation<'_, openpgp::packet::key::PublicParts>,
        sig: &openpgp::packet::Signature,
    ) -> Vec<String> {
        if self.signatures == Signatures::Collect {
            return keys::emails_of_valid(ka.valid_cert());
        }
        crate::identity::openpgp::signer_addresses(
            ka.cert(),
            &self.store.policy,
            self.at,
            sig.signature_creation_time(),
        )
    }
}

/// A signature by a primary key counts only if, at its creation time (the time `ka`
/// was validated at), the key's capabilities came from a live self-signature: a
/// direct-key signature, or the binding of a User ID not revoked then. Sequoia falls
/// back to a revoked User ID's binding when every User ID is revoked, which lets a key
/// whose only identity was (temporarily) revoked keep signing.
fn primary_bound(ka: &ValidErasedKeyAmalgamation<'_, openpgp::packet::key::PublicParts>) -> bool {
    use openpgp::cert::amalgamation::key::PrimaryKey as _;
    use openpgp::types::RevocationStatus;
    if !ka.primary() {
        return true;
    }
    let cert = ka.valid_cert();
    cert.direct_key_signature().is_ok()
        || cert
            .userids()
            .any(|u| matches!(u.revocation_status(), RevocationStatus::NotAsFarAsWeKnow))
}

impl VerificationHelper for Helper<'_> {
    fn get_certs(&mut self, ids: &[KeyHandle]) -> openpgp::Result<Vec<Cert>> {
        Ok(self
            .certs
            .iter()
            .filter(|c| c.keys().key_handles(ids.iter()).next().is_some())
            .cloned()
            .collect())
    }

    fn inspect(&mut self, pp: &PacketParser) -> openpgp::Result<()> {
        // Inside an encryption anyone can make (our public key is public), packets
        // reach Sequoia's grammar check, whose cost grows with the square of their
        // number: more than any writer makes is refused (issue #17).
        self.packets += 1;
        if self.packets > MAX_PACKETS {
            return Err(self.fail(OpenPgpError::Malformed(format!(
                "more than {MAX_PACKETS} packets"
            ))));
        }
        if pp.packet.tag() == Tag::SED {
            self.outcome.borrow_mut().saw_sed = true;
            return Err(self.fail(OpenPgpError::NoIntegrity));
        }
        Ok(())
    }

    fn check(&mut self, structure: MessageStructure) -> openpgp::Result<()> {
        let mut good: Vec<SignerInfo> = Vec::new();
        let mut missing = false;
        let mut bad: Option<String> = None;
        let mut signature_groups = 0;
        for layer in structure {
            match layer {
                MessageLayer::Compression { .. } => {}
                MessageLayer::Encryption { aead_algo, .. } => {
                    let mut o = self.outcome.borrow_mut();
                    o.encrypted = true;
                    o.aead = aead_algo.is_some();
                }
                MessageLayer::SignatureGroup { results } => {
                    signature_groups += 1;
                    for r in results {
                        match r {
                            Ok(GoodChecksum { ka, .. })
                                if self.signatures != Signatures::Collect
                                    && !self
                                        .valid_at_receipt(ka.cert(), &ka.key().fingerprint()) =>
                            {
                                bad = Some(
                                    "the signing key is not valid now (expired, revoked or no longer for signing)"
                                        .into(),
                                );
                            }
                            Ok(GoodChecksum { ka, .. }) if !primary_bound(&ka) => {
                                bad = Some(
                                    "when the signature was made, no unrevoked User ID or direct-key signature gave the primary key its signing capability"
                                        .into(),
                                );
                            }
                            Ok(GoodChecksum { sig, .. })
                                if self.signatures != Signatures::Collect
                                    && self.signed_in_the_future(sig).is_some() =>
                            {
                                bad = self.signed_in_the_future(sig);
                            }
                            Ok(GoodChecksum { sig, ka }) => good.push(SignerInfo {
                                fingerprint: ka.cert().fingerprint(),
                                key_fingerprint: ka.key().fingerprint(),
                                created: sig.signature_creation_time(),
                                text: sig.typ() == openpgp::types::SignatureType::Text,
                                emails: self.signer_emails(&ka, sig),
                                algorithm: format!("{}/{}", sig.pk_algo(), sig.hash_algo()),
                                intended: sig.intended_recipients().cloned().collect(),
                            }),
                            Err(VerificationError::MissingKey { .. }) => missing = true,
                            Err(e) => bad = Some(e.to_string()),
                        }
                    }
                }
            }
        }
        if self.signatures == Signatures::Collect {
            self.outcome.borrow_mut().signers = good;
            return Ok(());
        }
        // Any signature that fails refuses the message, even beside a good one.
        if let Some(reason) = bad {
            return Err(self.fail(OpenPgpError::BadSignature(reason)));
        }
        if !good.is_empty() {
            self.outcome.borrow_mut().signers = good;
            return Ok(());
        }
        if missing {
            return Err(self.fail(OpenPgpError::UnknownSigner));
        }
        if signature_groups == 0
            && self.signatures == Signatures::OrSignedInside
            && self.outcome.borrow().encrypted
        {
            return Ok(());
        }
        Err(self.fail(OpenPgpError::Unsigned))
    }
}

impl DecryptionHelper for Helper<'_> {
    fn decrypt(
        &mut self,
        pkesks: &[PKESK],
        skesks: &[SKESK],
        sym_algo: Option<SymmetricAlgorithm>,
        decrypt: &mut dyn FnMut(Option<SymmetricAlgorithm>, &SessionKey) -> bool,
    ) -> openpgp::Result<Option<Cert>> {
        if self.try_session_keys(sym_algo, decrypt) {
            return Ok(None);
        }
        // Our secret keys that can decrypt (see `parsed::Secret`), with their
        // certificate: the store's, while `certs` are the ones to verify with. Only
        // the certificates a PKESK names are looked up (all of them when one is
        // anonymous), so a store with many identities reads one key per message.
        let own = match &self.own {
            Some(v) => v.clone(),
            None => return Err(self.fail(OpenPgpError::NotForUs)),
        };
        let anonymous = pkesks.iter().any(|p| p.recipient().is_none());
        let named = |cert: &Cert| {
            anonymous
                || pkesks
                    .iter()
                    .filter_map(PKESK::recipient)
                    .any(|r| cert.keys().any(|k| r.aliases(k.key().key_handle())))
        };
        let secrets = |wanted: &dyn Fn(&Cert) -> bool| {
            let mut out = Vec::new();
            for cert in own.certs.iter().filter(|c| wanted(c)) {
                if let Some(secret) = self
                    .store
                    .secret_for(cert)
                    .map_err(|e| self.fail(OpenPgpError::Key(e.to_string())))?
                {
                    out.push((cert.fingerprint(), secret));
                }
            }
            Ok::<_, anyhow::Error>(out)
        };
        let addressed_secrets = secrets(&named)?;
        let ours = pairs(&addressed_secrets);
        let mut addressed = false;
        // Work before authentication is bounded (issue #17): a PKESK that names a key
        // of ours costs one decryption; anonymous ones (no key ID) are tried only the
        // first MAX_ANONYMOUS_PKESKS, whatever the message carries.
        let mut anonymous_left = MAX_ANONYMOUS_PKESKS;
        for pkesk in pkesks {
            let wanted = pkesk.recipient();
            if wanted.is_none() {
                if anonymous_left == 0 {
                    continue;
                }
                anonymous_left -= 1;
            }
            for &(fingerprint, key) in &ours {
                if wanted
                    .as_ref()
                    .is_some_and(|w| !w.aliases(key.public().key_handle()))
                {
                    continue;
                }
                addressed |= wanted.is_some();
                let mut pair = key.clone();
                if let Some((algo, sk)) = pkesk.decrypt(&mut pair, sym_algo) {
                    if self.try_session_key(algo.or(sym_algo), &sk, decrypt) {
                        self.outcome.borrow_mut().decrypted_with = Some(fingerprint.clone());
                        // None: the intended-recipient check is ours (see open), so
                        // that a forwarded message is reported as such.
                        return Ok(None);
                    }
                }
            }
        }
        if self.try_passwords(skesks, sym_algo, decrypt) {
            return Ok(None);
        }
        if addressed {
            return Err(self.fail(OpenPgpError::Undecryptable(
                "the session key addressed to us does not decrypt".into(),
            )));
        }
        if self.outcome.borrow().argon2_over_budget {
            return Err(self.fail(OpenPgpError::Undecryptable(format!(
                "the message's password key derivation (Argon2) asks for more than this reader spends: at most {} MiB of memory and {} MiB-passes in all",
                (1u64 << MAX_ARGON2_MEMORY_EXPONENT) >> 10,
                ARGON2_BUDGET >> 10
            ))));
        }
        // No recipient names a key of ours. If one of our keys still decrypts a
        // session key, the recipient's key ID was changed: altered, not "not for us".
        let all_secrets = secrets(&|_| true)?;
        let ours = pairs(&all_secrets);
        for pkesk in pkesks.iter().take(MAX_TRIAL_PKESKS) {
            for &(_, key) in &ours {
                let mut pair = key.clone();
                if let Some((algo, sk)) = pkesk.decrypt(&mut pair, sym_algo) {
                    if decrypt(algo, &sk) {
                        return Err(self.fail(OpenPgpError::Undecryptable(
                            "a recipient key ID was altered".into(),
                        )));
                    }
                }
            }
        }
        Err(self.fail(OpenPgpError::NotForUs))
    }
}

/// Refuses a message with more top-level packets than any writer makes, before
/// Sequoia's grammar check (quadratic in the packet count) sees it.
fn bounded_packets(message: &[u8]) -> Result<(), OpenPgpError> {
    use super::framing::{count_top_level, MAX_TOP_LEVEL_PACKETS};
    if count_top_level(message, MAX_TOP_LEVEL_PACKETS) > MAX_TOP_LEVEL_PACKETS {
        return Err(OpenPgpError::Malformed(format!(
            "more than {MAX_TOP_LEVEL_PACKETS} top-level packets"
        )));
    }
    Ok(())
}

/// Packets a message may have at all depths (its session keys, containers, one-pass
/// signatures, literal data and signatures).
const MAX_PACKETS: usize = 1024;

/// Anonymous PKESKs (wildcard key ID) tried per message.
const MAX_ANONYMOUS_PKESKS: usize = 4;
/// PKESKs tried with every key of ours when none names one (to tell an altered key ID
/// from a message for someone else).
const MAX_TRIAL_PKESKS: usize = 4;

/// Each decryption-capable key of `secrets` with its certificate's fingerprint.
fn pairs(
    secrets: &[(Fingerprint, std::sync::Arc<super::parsed::Secret>)],
) -> Vec<(&Fingerprint, &super::parsed::Decrypter)> {
    secrets
        .iter()
        .flat_map(|(f, s)| s.decryption.iter().map(move |k| (f, k)))
        .collect()
}

/// Runs one Sequoia parse, turning a panic inside it into an error. Sequoia 2.4.2
/// panics on some malformed input (an `unwrap` in `PacketParser::decrypt` on a
/// truncated SEIPDv1, found by the `openpgp_open` fuzz target); a gateway must refuse
/// such a message, not die. Everything the closure built is dropped (and wiped) on the
/// way out, so nothing of a half-read message survives.
fn guarded<T>(f: impl FnOnce() -> Result<T, anyhow::Error>) -> Result<T, anyhow::Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(anyhow::Error::new(openpgp::Error::MalformedMessage(
            "the OpenPGP parser gave up on this input".into(),
        )))
    })
}

/// What [`read_bounded`] may read of one message's content: its
/// [`Limits::inflation_budget`], and the limits it came from (to say which was passed).
#[derive(Clone, Copy, Debug)]
struct Budget {
    limit: usize,
    limits: Limits,
}

impl Budget {
    /// The budget of a message of `size` bytes (binary, or armored for the inline
    /// verifier): content that is not compressed is never larger than its message, so
    /// only compressed content can go past it.
    fn of(size: usize, limits: &Limits) -> Budget {
        Budget {
            limit: limits.inflation_budget(size),
            limits: *limits,
        }
    }

    /// The refusal of content past the budget: past the decoded-bytes limit itself,
    /// or past what a message of its size may inflate to.
    fn exceeded(&self) -> OpenPgpError {
        if self.limit >= self.limits.max_decoded_bytes {
            return OpenPgpError::TooLarge { limit: self.limit };
        }
        OpenPgpError::Inflated {
            limit: self.limit,
            ratio: self.limits.inflation_ratio,
            floor: self.limits.inflation_floor,
        }
    }
}

/// What [`read_bounded`] reads at a time.
const READ_CHUNK: usize = 64 << 10;

/// Everything `reader` releases, at most `budget.limit` bytes (more is an error, never
/// a truncation: decompression cannot inflate past the budget unnoticed, and what
/// would go past it is not stored). The buffer never has more capacity than the
/// budget, and it and the copy it grows into never hold more than the budget together
/// ([`grown_capacity`]); each buffer it leaves behind is wiped. Sequoia's own buffers
/// come on top ([`RELEASE_BUFFER`]).
fn read_bounded(
    reader: &mut impl Read,
    budget: Budget,
) -> Result<Zeroizing<Vec<u8>>, anyhow::Error> {
    let limit = budget.limit;
    let mut out = Zeroizing::new(Vec::with_capacity(limit.min(READ_CHUNK)));
    let mut chunk = Zeroizing::new(vec![0u8; READ_CHUNK]);
    loop {
        let n = match reader.read(&mut chunk[..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if n > limit - out.len() {
            return Err(anyhow::Error::new(Exceeded(budget)));
        }
        if out.len() + n > out.capacity() {
            // Grow into a new buffer of our choosing, so the old one is wiped.
            let want = grown_capacity(out.capacity(), out.len() + n, limit);
            let mut grown = Zeroizing::new(Vec::with_capacity(want));
            grown.extend_from_slice(&out);
            out = grown;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    Ok(out)
}

/// The capacity a buffer of `capacity` bytes grows to when it must hold `needed`
/// (at most `limit`): twice as much while the next growth's copy (the old buffer and
/// the new one both holding the content) would stay within `limit`, else `limit`
/// itself. So no growth holds more than `limit` bytes at once (doubling held up to
/// twice the limit: the 64 MiB cap grew into a second buffer of 64 MiB and one byte),
/// and there are a logarithmic number of copies.
fn grown_capacity(capacity: usize, needed: usize, limit: usize) -> usize {
    let doubled = capacity.saturating_mul(2).max(needed);
    if doubled.saturating_mul(2) <= limit {
        doubled
    } else {
        limit
    }
}

/// [`read_bounded`]'s refusal, told apart from Sequoia's errors in [`failure`].
#[derive(Debug)]
struct Exceeded(Budget);

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the content exceeds {} bytes", self.0.limit)
    }
}

impl std::error::Error for Exceeded {}

/// Classifies a Sequoia failure: the helper's own reason when it gave one.
fn failure(outcome: &RefCell<Outcome>, e: anyhow::Error) -> OpenPgpError {
    let mut o = outcome.borrow_mut();
    if let Some(f) = o.failure.take() {
        return f;
    }
    if o.saw_sed {
        return OpenPgpError::NoIntegrity;
    }
    if let Some(Exceeded(budget)) = e.downcast_ref::<Exceeded>() {
        return budget.exceeded();
    }
    let text = e.to_string();
    if let Some(openpgp::Error::PolicyViolation(what, _)) = e.downcast_ref::<openpgp::Error>() {
        if what.contains("SED") || what.contains("Symmetrically Encrypted Data") {
            return OpenPgpError::NoIntegrity;
        }
    }
    if o.decrypted_with.is_some() {
        OpenPgpError::Undecryptable(text)
    } else {
        OpenPgpError::Malformed(text)
    }
}

/// What a detached signature is checked over.
#[derive(Clone, Copy)]
pub(super) enum Detached<'e> {
    /// These bytes.
    Bytes(&'e [u8]),
    /// The canonical (CRLF) form of this entity, read without a copy.
    Canonical(&'e [u8]),
}

/// The signed entity, how it was protected, and who signed it.
struct Verified<'r> {
    entity: Cow<'r, [u8]>,
    signer: SignerInfo,
    encrypted: bool,
}

impl OpenPgp<'_> {
    /// Decrypts and verifies one OpenPGP message (armored or binary); the literal data
    /// once everything passed, never before.
    pub(crate) fn decrypt_verify(
        &self,
        message: &[u8],
        certs: &[Cert],
        own: Option<std::sync::Arc<super::parsed::View>>,
        policy: &OpenPolicy,
        signatures: Signatures,
    ) -> Result<(Zeroizing<Vec<u8>>, Outcome), OpenPgpError> {
        self.decrypt_verify_with(
            message,
            certs,
            own,
            policy,
            signatures,
            &Symmetric::default(),
        )
    }

    /// [`OpenPgp::decrypt_verify`], also trying `symmetric`'s session keys and
    /// passwords.
    pub(crate) fn decrypt_verify_with(
        &self,
        message: &[u8],
        certs: &[Cert],
        own: Option<std::sync::Arc<super::parsed::View>>,
        policy: &OpenPolicy,
        signatures: Signatures,
        symmetric: &Symmetric<'_>,
    ) -> Result<(Zeroizing<Vec<u8>>, Outcome), OpenPgpError> {
        let outcome = RefCell::new(Outcome::default());
        let own = match own {
            Some(v) => v,
            None => self
                .certificates()
                .map_err(|e| OpenPgpError::Key(e.to_string()))?,
        };
        let helper = Helper {
            store: self,
            own: Some(own),
            certs,
            signatures,
            at: policy.validation_time().into(),
            outcome: &outcome,
            packets: 0,
            symmetric,
        };
        let binary = super::armor::dearmor(message, "PGP MESSAGE");
        let message = binary.as_deref().unwrap_or(message);
        let budget = Budget::of(message.len(), &policy.limits);
        bounded_packets(message)?;
        let plain = guarded(|| -> Result<Zeroizing<Vec<u8>>, anyhow::Error> {
            let mut decryptor = DecryptorBuilder::from_bytes(message)?
                .buffer_size(RELEASE_BUFFER)
                .with_policy(&self.policy, None, helper)?;
            let plain = read_bounded(&mut decryptor, budget)?;
            if !decryptor.message_processed() {
                anyhow::bail!("the message was not read to its end");
            }
            Ok(plain)
        })
        .map_err(|e| failure(&outcome, e))?;
        let outcome = outcome.into_inner();
        if !outcome.encrypted {
            // A bare signed (or plain) OpenPGP message in multipart/encrypted.
            return Err(OpenPgpError::Malformed(
                "multipart/encrypted holds no encrypted OpenPGP message".into(),
            ));
        }
        Ok((plain, outcome))
    }

    /// Verifies a detached signature over `entity`: its first good signer.
    pub(super) fn verify_detached(
        &self,
        signature: &[u8],
        entity: Detached<'_>,
        certs: &[Cert],
        at: std::time::SystemTime,
    ) -> Result<SignerInfo, OpenPgpError> {
        let outcome =
            self.verify_detached_over(signature, entity, certs, Signatures::Required, at)?;
        outcome
            .signers
            .into_iter()
            .next()
            .ok_or(OpenPgpError::Unsigned)
    }

    /// Verifies detached signatures over `entity` under `signatures`.
    pub(crate) fn verify_detached_with(
        &self,
        signature: &[u8],
        entity: &[u8],
        certs: &[Cert],
        signatures: Signatures,
        at: std::time::SystemTime,
    ) -> Result<Outcome, OpenPgpError> {
        self.verify_detached_over(signature, Detached::Bytes(entity), certs, signatures, at)
    }

    /// [`OpenPgp::verify_detached_with`] over the bytes `entity` stands for.
    fn verify_detached_over(
        &self,
        signature: &[u8],
        entity: Detached<'_>,
        certs: &[Cert],
        signatures: Signatures,
        at: std::time::SystemTime,
    ) -> Result<Outcome, OpenPgpError> {
        let outcome = RefCell::new(Outcome::default());
        let helper = Helper {
            store: self,
            own: None,
            certs,
            signatures,
            at,
            outcome: &outcome,
            packets: 0,
            symmetric: &Symmetric::default(),
        };
        let binary = super::armor::dearmor(signature, "PGP SIGNATURE");
        let signature = binary.as_deref().unwrap_or(signature);
        bounded_packets(signature)?;
        guarded(|| -> Result<(), anyhow::Error> {
            let mut verifier = DetachedVerifierBuilder::from_bytes(signature)?.with_policy(
                &self.policy,
                None,
                helper,
            )?;
            match entity {
                Detached::Bytes(bytes) => verifier.verify_bytes(bytes),
                Detached::Canonical(entity) => verifier.verify_reader(CanonicalReader::new(entity)),
            }
        })
        .map_err(|e| failure(&outcome, e))?;
        Ok(outcome.into_inner())
    }

    /// The signed entity of a `multipart/signed; protocol="application/pgp-signature"`.
    fn verify_signed<'r>(
        &self,
        outer: &Outer<'r>,
        certs: &[Cert],
        at: std::time::SystemTime,
    ) -> Result<(Cow<'r, [u8]>, SignerInfo), OpenPgpError> {
        let [content, sig] = outer.parts.as_slice() else {
            return Err(OpenPgpError::Malformed(
                "multipart/signed must have exactly two parts".into(),
            ));
        };
        if sig.media_type != "application/pgp-signature" {
            return Err(OpenPgpError::Malformed(
                "the second part is not an OpenPGP signature".into(),
            ));
        }
        let signature = sig
            .decoded()
            .map_err(|e| OpenPgpError::Malformed(e.to_string()))?;
        // RFC 3156 5: the signature covers the canonical (CRLF) form, which is made
        // once it verified (before, it was twice an entity of bare line ends, for
        // anyone: issue #58).
        let signer =
            self.verify_detached(&signature, Detached::Canonical(content.entity), certs, at)?;
        Ok((canonical_crlf(content.entity), signer))
    }

    /// Decrypts (when encrypted) and verifies.
    fn verify<'r>(
        &self,
        outer: &Outer<'r>,
        policy: &OpenPolicy,
    ) -> Result<Verified<'r>, OpenPgpError> {
        let view = self
            .certificates()
            .map_err(|e| OpenPgpError::Key(e.to_string()))?;
        let certs = &view.certs;
        let protocol = outer.param("protocol").map(str::to_ascii_lowercase);
        match (outer.media_type.as_str(), protocol.as_deref()) {
            ("multipart/encrypted", Some("application/pgp-encrypted")) => {
                let [control, data] = outer.parts.as_slice() else {
                    return Err(OpenPgpError::Malformed(
                        "multipart/encrypted must have exactly two parts".into(),
                    ));
                };
                let version = control
                    .decoded()
                    .map_err(|e| OpenPgpError::Malformed(e.to_string()))?;
                let version_1 = control.media_type == "application/pgp-encrypted"
                    && String::from_utf8_lossy(&version)
                        .lines()
                        .any(|l| l.trim().eq_ignore_ascii_case("Version: 1"));
                if !version_1 || data.media_type != "application/octet-stream" {
                    return Err(OpenPgpError::Malformed(
                        "not an RFC 3156 encrypted message (control part Version: 1, then application/octet-stream)".into(),
                    ));
                }
                let message = data
                    .decoded()
                    .map_err(|e| OpenPgpError::Malformed(e.to_string()))?;
                let (mut plain, outcome) = self.decrypt_verify(
                    &message,
                    certs,
                    Some(view.clone()),
                    policy,
                    Signatures::OrSignedInside,
                )?;
                let signer = match outcome.signers.into_iter().next() {
                    Some(signer) => {
                        // Signed inside the encryption: when the signature names its
                        // intended recipients, we must be one (RFC 9580 5.2.3.36).
                        if !signer.intended.is_empty()
                            && !outcome
                                .decrypted_with
                                .as_ref()
                                .is_some_and(|ours| signer.intended.contains(ours))
                        {
                            return Err(OpenPgpError::NotIntendedRecipient);
                        }
                        signer
                    }
                    None => {
                        // RFC 3156 6.1: a multipart/signed entity, then encrypted.
                        let inner = read_outer(&plain, &policy.limits)
                            .map_err(|_| OpenPgpError::Unsigned)?;
                        let signed = inner.media_type == "multipart/signed"
                            && inner.param("protocol").is_some_and(|p| {
                                p.eq_ignore_ascii_case("application/pgp-signature")
                            });
                        if !signed {
                            return Err(OpenPgpError::Unsigned);
                        }
                        let (entity, signer) =
                            self.verify_signed(&inner, certs, policy.validation_time().into())?;
                        return Ok(Verified {
                            entity: Cow::Owned(entity.into_owned()),
                            signer,
                            encrypted: true,
                        });
                    }
                };
                Ok(Verified {
                    // Verified: the plaintext is the caller's now.
                    entity: Cow::Owned(std::mem::take(&mut *plain)),
                    signer,
                    encrypted: true,
                })
            }
            ("multipart/signed", Some("application/pgp-signature")) => {
                let (entity, signer) =
                    self.verify_signed(outer, certs, policy.validation_time().into())?;
                Ok(Verified {
                    entity,
                    signer,
                    encrypted: false,
                })
            }
            (media_type, _) => Err(OpenPgpError::Malformed(format!(
                "{media_type} is not a PGP/MIME message"
            ))),
        }
    }
}

/// A decrypted OpenPGP message, outside any MIME structure.
#[derive(Debug)]
#[non_exhaustive]
pub struct DecryptedMessage {
    /// The literal data; wiped when dropped.
    pub content: Zeroizing<Vec<u8>>,
    /// Who signed it, when it was signed (every signature verified).
    pub signer: Option<SignerIdentity>,
    /// Whether it was SEIPDv2 (AEAD) rather than SEIPDv1 (MDC).
    pub aead: bool,
}

fn identity(info: SignerInfo) -> SignerIdentity {
    SignerIdentity::OpenPgp {
        fingerprint: info.fingerprint.to_hex().to_ascii_lowercase(),
        emails: info.emails,
    }
}

impl OpenPgp<'_> {
    /// Decrypts one OpenPGP message (armored or binary) with our keys. A signature in
    /// it must verify under a certificate in the store, but none is required: a caller
    /// that needs to know the sender checks [`DecryptedMessage::signer`].
    pub fn decrypt_message(
        &self,
        message: &[u8],
        policy: &OpenPolicy,
    ) -> Result<DecryptedMessage, OpenError> {
        let view = self
            .certificates()
            .map_err(|e| OpenPgpError::Key(e.to_string()))?;
        let certs = &view.certs;
        let (content, outcome) = self.decrypt_verify(
            message,
            certs,
            Some(view.clone()),
            policy,
            Signatures::OrSignedInside,
        )?;
        Ok(DecryptedMessage {
            content,
            signer: outcome.signers.into_iter().next().map(identity),
            aead: outcome.aead,
        })
    }

    /// Verifies an inline-signed or cleartext-signed OpenPGP message and returns its
    /// content and signer; nothing when any signature fails.
    pub fn verify_inline(
        &self,
        message: &[u8],
        policy: &OpenPolicy,
    ) -> Result<(Zeroizing<Vec<u8>>, SignerIdentity), OpenError> {
        let view = self
            .certificates()
            .map_err(|e| OpenPgpError::Key(e.to_string()))?;
        let certs = &view.certs;
        let (content, outcome) =
            self.verify_inline_with(message, certs, policy, Signatures::Required)?;
        let signer = outcome
            .signers
            .into_iter()
            .next()
            .ok_or(OpenPgpError::Unsigned)?;
        Ok((content, identity(signer)))
    }

    /// Verifies an inline-signed or cleartext-signed message under `signatures`.
    pub(crate) fn verify_inline_with(
        &self,
        message: &[u8],
        certs: &[Cert],
        policy: &OpenPolicy,
        signatures: Signatures,
    ) -> Result<(Zeroizing<Vec<u8>>, Outcome), OpenPgpError> {
        let outcome = RefCell::new(Outcome::default());
        let helper = Helper {
            store: self,
            own: None,
            certs,
            signatures,
            at: policy.validation_time().into(),
            outcome: &outcome,
            packets: 0,
            symmetric: &Symmetric::default(),
        };
        let budget = Budget::of(message.len(), &policy.limits);
        bounded_packets(message)?;
        let content = guarded(|| -> Result<Zeroizing<Vec<u8>>, anyhow::Error> {
            let mut verifier = VerifierBuilder::from_bytes(message)?
                .buffer_size(RELEASE_BUFFER)
                .with_policy(&self.policy, None, helper)?;
            let content = read_bounded(&mut verifier, budget)?;
            if !verifier.message_processed() {
                anyhow::bail!("the message was not read to its end");
            }
            Ok(content)
        })
        .map_err(|e| failure(&outcome, e))?;
        Ok((content, outcome.into_inner()))
    }

    /// Decrypts (when encrypted) and verifies `raw` and returns the signed entity,
    /// exactly as signed, and its signer. It does not read the entity as MailA2A:
    /// [`Opener::open`] does.
    pub fn verified_entity(
        &self,
        raw: &[u8],
        policy: &OpenPolicy,
    ) -> Result<(Vec<u8>, SignerIdentity), OpenError> {
        let outer = read_outer(raw, &policy.limits)?;
        let v = self.verify(&outer, policy)?;
        Ok((v.entity.into_owned(), identity(v.signer)))
    }
}

impl Opener for OpenPgp<'_> {
    fn open(&self, raw: &[u8], policy: &OpenPolicy) -> Result<Opened, OpenError> {
        let outer = read_outer(raw, &policy.limits)?;
        let Verified {
            entity,
            signer,
            encrypted,
        } = self.verify(&outer, policy)?;
        let fingerprint = signer.fingerprint.to_hex().to_ascii_lowercase();
        finish(
            Authenticated {
                profile: Profile::OpenPgp,
                entity: crate::binding::Entity::Borrowed(&entity),
                outer_headers: &outer.headers,
                encrypted,
                protection: if encrypted {
                    Protection::SignedEncrypted
                } else {
                    Protection::Signed
                },
                signer: SignerIdentity::OpenPgp {
                    fingerprint,
                    emails: signer.emails.clone(),
                },
                signer_emails: signer.emails,
                signed_at: signer.created.map(time::OffsetDateTime::from),
                warnings: Vec::new(),
                algorithm: signer.algorithm,
                our_identities: &|| crate::keystore::own_addresses(self.store),
            },
            policy,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{grown_capacity, read_bounded, Budget, Exceeded, READ_CHUNK};
    use crate::openpgp::OpenPgpError;
    use crate::Limits;

    fn budget(limit: usize) -> Budget {
        Budget {
            limit,
            limits: Limits::default(),
        }
    }

    /// Issue #58: what a decompressor releases is read into at most `limit` bytes of
    /// buffer, and one byte past the limit is refused without being stored.
    #[test]
    fn fail_cost_read_bounded_never_allocates_past_the_limit() {
        for limit in [1_000_000, 1 << 20, (1 << 20) + 1, 100] {
            let exact = vec![7u8; limit];
            let out = read_bounded(&mut &exact[..], budget(limit)).unwrap();
            assert_eq!(out.len(), limit);
            assert!(out.capacity() <= limit, "{limit}: {}", out.capacity());
            let over = vec![7u8; limit + 1];
            let err = read_bounded(&mut &over[..], budget(limit)).unwrap_err();
            assert!(err.downcast_ref::<Exceeded>().is_some(), "{err}");
            assert!(read_bounded(&mut &b""[..], budget(limit))
                .unwrap()
                .is_empty());
        }
    }

    /// Every growth copies a buffer into one no larger than the limit, and the two
    /// together never hold more than the limit (the 64 MiB cap once grew into a second
    /// 64 MiB buffer for its last byte: a bomb's 147.5 MB).
    #[test]
    fn fail_cost_a_growth_never_holds_more_than_the_limit() {
        for limit in [
            1 << 20,
            (1 << 20) + 1,
            3 << 20,
            8 << 20,
            (8 << 20) - 1,
            64 << 20,
            12_345_678,
        ] {
            let mut capacity = limit.min(READ_CHUNK);
            let mut held = capacity;
            while capacity < limit {
                let needed = (capacity + READ_CHUNK).min(limit);
                let next = grown_capacity(capacity, needed, limit);
                assert!(
                    next >= needed && next <= limit,
                    "{limit}: {capacity} -> {next}"
                );
                // The old buffer, full, and its copy in the new one.
                held = held.max(2 * capacity).max(next);
                capacity = next;
            }
            assert!(held <= limit, "{limit}: {held} held at once");
        }
    }

    /// The budget: the floor for a small message, a multiple of a larger one, never
    /// past the decoded-bytes limit; going past it says which.
    #[test]
    fn fail_cost_the_inflation_budget_follows_the_message() {
        let limits = Limits::default();
        assert_eq!(limits.inflation_budget(1000), limits.inflation_floor);
        assert_eq!(
            limits.inflation_budget(5 << 20),
            (5 << 20) * limits.inflation_ratio
        );
        assert_eq!(limits.inflation_budget(20 << 20), limits.max_decoded_bytes);
        assert!(matches!(
            Budget::of(1000, &limits).exceeded(),
            OpenPgpError::Inflated { limit, ratio: 4, floor } if limit == floor
        ));
        assert!(matches!(
            Budget::of(20 << 20, &limits).exceeded(),
            OpenPgpError::TooLarge { limit } if limit == limits.max_decoded_bytes
        ));
    }
}
