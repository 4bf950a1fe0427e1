//! Who may have the gateway sign as which agent (issue #57, THREATS "the gateway signs
//! for whoever submits").
//!
//! The outbound listener signs as our agents; before this, anyone who reached it
//! (any local process, or any host Postfix's `permit_mynetworks` let through) had mail
//! sealed under any agent's identity just by writing its address in From. Each
//! outbound listener now says who may submit ([`Submission`]):
//!
//! - `auth`: SMTP AUTH (PLAIN or LOGIN) against the configured [`Submitter`]s, each a
//!   login and an Argon2id hash of its password (PHC string, as `mailseal gateway
//!   hash-password` writes it). An agent's login names the `addresses` it may send
//!   as: MAIL FROM and From must be among them. A `relay` login is an MTA in front
//!   (Postfix) that logged its own submitters in and tied MAIL FROM to their logins
//!   (`reject_sender_login_mismatch`): the From must then be that MAIL FROM. AUTH is
//!   taken under TLS, or in clear from a loopback client only (which only the host's
//!   root can observe: how Postfix on the same host logs in).
//! - `open`: no check (anyone the listener serves signs as any agent), only when the
//!   operator writes it.
//!
//! An MTA in front is authenticated like anyone else: the agents may run on its host
//! and reach the listener's loopback port themselves, so trusting a loopback client
//! for being Postfix would let them past Postfix's login (found by review). A From
//! the submitter may not use is refused with 550 5.7.1 before anything is signed,
//! and so is any mail the listener would pass on unsigned (already sealed, or not
//! MailA2A) under a From or MAIL FROM not the submitter's. The rule lives here; the
//! session ([`super::session`]) only carries the exchange and the connection loop
//! only calls [`Submitters::verify`], a few at a time and each failure slowed.

use std::collections::HashMap;

use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use serde::Deserialize;
use zeroize::Zeroizing;

/// Who may submit to an outbound listener.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Submission {
    /// SMTP AUTH against `[[submitter]]` (see the module doc).
    Auth,
    /// Anyone the listener serves, as any agent (the operator's explicit choice).
    Open,
    /// Nobody: the listener takes no mail; its next hop carries what runs inside
    /// the gateway queues (the A2A bridge's sealed mail).
    None,
}

/// One login allowed to submit (`[[submitter]]`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submitter {
    /// The SMTP AUTH login.
    pub login: String,
    /// The password's Argon2id hash, a PHC string (`mailseal gateway hash-password`).
    pub password_hash: String,
    /// The addresses an agent's login may send as (MAIL FROM and From).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// An MTA in front that checked its own submitters' logins against MAIL FROM: the
    /// From of what it hands over must be that MAIL FROM (it has no addresses).
    #[serde(default)]
    pub relay: bool,
}

/// Why a submitter list or a password hash is not usable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmissionError {
    /// A submitter's `password_hash` is not an Argon2 PHC string.
    #[error("submitter {login}: password_hash is not an Argon2 PHC string ($argon2id$...): write one with `mailseal gateway hash-password`")]
    BadHash {
        /// The submitter's login.
        login: String,
    },
    /// Two submitters have one login.
    #[error("two submitters have the login {login}")]
    DuplicateLogin {
        /// The login.
        login: String,
    },
    /// A hash asks for more work than a check may take before authentication.
    #[error("submitter {login}: the hash asks for m={m} KiB, t={t}, p={p}: at most m=77824, t=10, p=4 (checks run before anyone is authenticated)")]
    Costly {
        /// The submitter's login.
        login: String,
        /// Memory (KiB).
        m: u32,
        /// Passes.
        t: u32,
        /// Lanes.
        p: u32,
    },
    /// An agent's login may send as no address, or a relay login names some.
    #[error("submitter {login}: an agent's login names the addresses it may send as; a relay login (relay = true) names none")]
    Addresses {
        /// The submitter's login.
        login: String,
    },
    /// The password could not be hashed.
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

/// The configured submitters, by login.
#[derive(Debug, Default)]
pub struct Submitters {
    by_login: HashMap<String, Submitter>,
    /// Checked for a login nobody has, so that it costs what a real one does: a hash
    /// (of a password nobody knows) with the first submitter's parameters.
    decoy: Option<String>,
}

/// A hash verified when the login is unknown, so that an unknown login costs what a
/// wrong password does and the reply's timing does not tell which logins exist.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$bWFpbHNlYWwtZGVjb3k$X6p9Nnn/bHbvL4P5Ak1GEZ5uwVd3K4u0w4PUfJ1hmg8";

impl Submitters {
    /// Checks and indexes `list`: every hash a PHC string, logins unique, each with an
    /// address.
    pub fn new(list: &[Submitter]) -> Result<Submitters, SubmissionError> {
        let mut by_login = HashMap::new();
        for s in list {
            if PasswordHash::new(&s.password_hash).is_err()
                || !s.password_hash.starts_with("$argon2")
            {
                return Err(SubmissionError::BadHash {
                    login: s.login.clone(),
                });
            }
            if let Ok(params) =
                argon2::Params::try_from(&PasswordHash::new(&s.password_hash).map_err(|_| {
                    SubmissionError::BadHash {
                        login: s.login.clone(),
                    }
                })?)
            {
                if params.m_cost() > MAX_MEMORY_KIB
                    || params.t_cost() > MAX_PASSES
                    || params.p_cost() > MAX_LANES
                {
                    return Err(SubmissionError::Costly {
                        login: s.login.clone(),
                        m: params.m_cost(),
                        t: params.t_cost(),
                        p: params.p_cost(),
                    });
                }
            } else {
                return Err(SubmissionError::BadHash {
                    login: s.login.clone(),
                });
            }
            if s.addresses.is_empty() != s.relay {
                return Err(SubmissionError::Addresses {
                    login: s.login.clone(),
                });
            }
            if by_login.insert(s.login.clone(), s.clone()).is_some() {
                return Err(SubmissionError::DuplicateLogin {
                    login: s.login.clone(),
                });
            }
        }
        let decoy = list.first().and_then(|first| {
            let hash = PasswordHash::new(&first.password_hash).ok()?;
            let params = argon2::Params::try_from(&hash).ok()?;
            let algorithm = argon2::Algorithm::try_from(hash.algorithm).ok()?;
            let mut secret = [0u8; 16];
            getrandom::fill(&mut secret).ok()?;
            let salt = SaltString::encode_b64(&secret[..12]).ok()?;
            argon2::Argon2::new(algorithm, argon2::Version::V0x13, params)
                .hash_password(&secret, &salt)
                .ok()
                .map(|h| h.to_string())
        });
        Ok(Submitters { by_login, decoy })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_login.is_empty()
    }

    /// Whether `password` is `login`'s, computed in `memory` (grown to the hash's
    /// memory cost once, then reused: see [`Verifying`]). An unknown login is checked
    /// against a decoy hash, so it costs the same. Argon2: run it off the async threads.
    pub fn verify_in(&self, login: &str, password: &str, memory: &mut Verifying) -> bool {
        match self.by_login.get(login) {
            Some(s) => memory.matches(&s.password_hash, password),
            None => {
                let _ = memory.matches(self.decoy.as_deref().unwrap_or(DECOY), password);
                false
            }
        }
    }

    /// [`Submitters::verify_in`] with memory of its own.
    pub fn verify(&self, login: &str, password: &str) -> bool {
        self.verify_in(login, password, &mut Verifying::default())
    }

    /// Whether `login` may send as `address` (an agent's login naming it; compared
    /// without regard to case).
    pub fn may_send_as(&self, login: &str, address: &str) -> bool {
        self.by_login
            .get(login)
            .is_some_and(|s| s.addresses.iter().any(|a| same_address(a, address)))
    }

    /// Whether `login` is an MTA's (`relay = true`).
    pub fn is_relay(&self, login: &str) -> bool {
        self.by_login.get(login).is_some_and(|s| s.relay)
    }
}

/// The memory one thread checks passwords in. The `argon2` crate's own verification
/// allocates its 19 MiB for each check and frees it; the allocator kept much of it, and
/// a thread that checked twenty passwords held some 200 MB (so a flood of wrong
/// passwords grew the gateway by 760 MB). Here the blocks are allocated once per
/// thread and reused.
#[derive(Default)]
pub struct Verifying {
    blocks: Vec<argon2::Block>,
}

/// The largest memory cost a configured hash may ask for (KiB): Argon2's own default
/// is 19 MiB; four times that is room for stronger choices, and a bound on each check.
const MAX_MEMORY_KIB: u32 = 4 * 19 * 1024;
/// The most passes a configured hash may ask for.
const MAX_PASSES: u32 = 10;
/// The most lanes a configured hash may ask for.
const MAX_LANES: u32 = 4;

impl Verifying {
    /// Whether `password` hashes to `phc` (constant-time comparison of the outputs).
    fn matches(&mut self, phc: &str, password: &str) -> bool {
        let Ok(hash) = PasswordHash::new(phc) else {
            return false;
        };
        let (Ok(params), Ok(algorithm), Some(expected), Some(salt)) = (
            argon2::Params::try_from(&hash),
            argon2::Algorithm::try_from(hash.algorithm),
            hash.hash,
            hash.salt,
        ) else {
            return false;
        };
        let version = match hash.version.map(argon2::Version::try_from) {
            None => argon2::Version::default(),
            Some(Ok(v)) => v,
            Some(Err(_)) => return false,
        };
        if params.m_cost() > MAX_MEMORY_KIB {
            return false;
        }
        let mut salt_bytes = [0u8; 64];
        let Ok(salt) = salt.decode_b64(&mut salt_bytes) else {
            return false;
        };
        let blocks = params.block_count();
        if self.blocks.len() < blocks {
            self.blocks.resize(blocks, argon2::Block::default());
        }
        let mut out = Zeroizing::new(vec![0u8; expected.len()]);
        let computed = argon2::Argon2::new(algorithm, version, params)
            .hash_password_into_with_memory(
                password.as_bytes(),
                salt,
                &mut out,
                &mut self.blocks[..blocks],
            )
            .ok()
            .and_then(|()| argon2::password_hash::Output::new(&out).ok());
        // The blocks were derived from the password: wiped for the next check.
        self.blocks[..blocks].fill(argon2::Block::default());
        // Output's equality is constant-time.
        computed.is_some_and(|c| c == expected)
    }
}

/// Two addresses are one: compared without regard to ASCII case (as the identity
/// store compares them).
fn same_address(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Why a message may not leave for its submitter, as the reply's text (550 5.7.1), or
/// `None`. `from`: the message's one From address (`None`: none, or several).
pub fn refuse_from(
    policy: Submission,
    submitters: &Submitters,
    login: Option<&str>,
    mail_from: &str,
    from: Option<&str>,
) -> Option<String> {
    if policy == Submission::Open {
        return None;
    }
    if policy == Submission::None {
        return Some("this listener takes no submissions (submission = \"none\")".into());
    }
    let Some(login) = login else {
        return Some("authentication required".into());
    };
    let Some(from) = from else {
        return Some("the message has no single From: not sent".into());
    };
    let who = crate::error::quoted(login);
    if submitters.is_relay(login) {
        return (mail_from.is_empty() || !same_address(mail_from, from)).then(|| {
            format!(
                "From {} is not the envelope sender {} that {who} checked: not sent",
                crate::error::quoted(from),
                crate::error::quoted(mail_from)
            )
        });
    }
    if !submitters.may_send_as(login, mail_from) {
        return Some(format!(
            "{who} may not use the envelope sender {}: not sent",
            crate::error::quoted(mail_from)
        ));
    }
    (!submitters.may_send_as(login, from)).then(|| {
        format!(
            "{who} may not send as {}: not sent",
            crate::error::quoted(from)
        )
    })
}

/// An Argon2id PHC string for `password` (the default parameters of the `argon2`
/// crate, OWASP's: 19 MiB, 2 passes), with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, SubmissionError> {
    let password = Zeroizing::new(password.to_string());
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| SubmissionError::Hash(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| SubmissionError::Hash(e.to_string()))?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| SubmissionError::Hash(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submitters() -> Submitters {
        Submitters::new(&[
            Submitter {
                login: "treasury".into(),
                password_hash: hash_password("right horse").unwrap(),
                addresses: vec!["treasury@corp.example".into()],
                relay: false,
            },
            Submitter {
                login: "mallory".into(),
                password_hash: hash_password("mallory's own").unwrap(),
                addresses: vec!["mallory@corp.example".into()],
                relay: false,
            },
            Submitter {
                login: "postfix".into(),
                password_hash: hash_password("relay secret").unwrap(),
                addresses: vec![],
                relay: true,
            },
        ])
        .unwrap()
    }

    /// The reused-memory check agrees with the argon2 crate's own verification, for
    /// our hashes and for others' parameters.
    #[test]
    fn verifying_in_reused_memory_agrees_with_argon2() {
        use argon2::password_hash::PasswordVerifier;
        let mut memory = Verifying::default();
        let light = argon2::Argon2::new(
            argon2::Algorithm::Argon2i,
            argon2::Version::V0x10,
            argon2::Params::new(1024, 3, 1, Some(24)).unwrap(),
        );
        let salt = SaltString::encode_b64(b"0123456789abcdef").unwrap();
        let hashes = [
            hash_password("right horse").unwrap(),
            light
                .hash_password(b"right horse", &salt)
                .unwrap()
                .to_string(),
        ];
        for phc in &hashes {
            for pw in ["right horse", "wrong horse", ""] {
                let theirs = argon2::Argon2::default()
                    .verify_password(pw.as_bytes(), &PasswordHash::new(phc).unwrap())
                    .is_ok();
                assert_eq!(memory.matches(phc, pw), theirs, "{phc} {pw:?}");
            }
        }
        assert!(!memory.matches(
            "$argon2id$v=19$m=999999999,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
            "x"
        ));
    }

    #[test]
    fn the_decoy_is_a_hash() {
        assert!(PasswordHash::new(DECOY).is_ok());
    }

    #[test]
    fn a_login_verifies_with_its_password_only() {
        let s = submitters();
        assert!(s.verify("treasury", "right horse"));
        assert!(!s.verify("treasury", "right horse "));
        assert!(!s.verify("treasury", "mallory's own"));
        assert!(!s.verify("nobody", "right horse"));
    }

    /// The attacker holds a login of its own (mallory) and writes the treasury
    /// agent's address in From, or in MAIL FROM: refused before anything is signed.
    #[test]
    fn fail_submission_a_login_signs_only_as_its_own_addresses() {
        let s = submitters();
        let auth = |login: Option<&str>, mail_from: &str, from: &str| {
            refuse_from(Submission::Auth, &s, login, mail_from, Some(from))
        };
        let t = "treasury@corp.example";
        assert_eq!(auth(Some("treasury"), t, t), None);
        assert_eq!(auth(Some("treasury"), "Treasury@CORP.example", t), None);
        assert!(auth(Some("mallory"), "mallory@corp.example", t).is_some());
        assert!(auth(Some("mallory"), t, "mallory@corp.example").is_some());
        assert!(auth(None, t, t).is_some());
        assert!(auth(Some("nobody"), t, t).is_some());
        assert!(refuse_from(Submission::Auth, &s, Some("treasury"), t, None).is_some());
        assert_eq!(
            refuse_from(Submission::Open, &s, None, "m@x", Some(t)),
            None
        );
    }

    /// A relay login (Postfix, which checked MAIL FROM against its own submitter's
    /// login) has mail signed only when From is that MAIL FROM.
    #[test]
    fn fail_submission_through_a_relay_login_from_must_be_the_envelope_sender() {
        let s = submitters();
        let relay = |mail_from: &str, from: &str| {
            refuse_from(Submission::Auth, &s, Some("postfix"), mail_from, Some(from))
        };
        let t = "treasury@corp.example";
        assert_eq!(relay(t, t), None);
        assert!(relay("mallory@corp.example", t).is_some());
        assert!(relay("", t).is_some());
        assert!(!s.may_send_as("postfix", t), "a relay login is no agent");
    }

    #[test]
    fn fail_submission_config_refuses_bad_hashes_and_duplicates() {
        let one = |login: &str, hash: &str, addrs: &[&str], relay: bool| Submitter {
            login: login.into(),
            password_hash: hash.into(),
            addresses: addrs.iter().map(|a| a.to_string()).collect(),
            relay,
        };
        let good = hash_password("pw").unwrap();
        assert!(matches!(
            Submitters::new(&[one("a", "plaintext", &["a@x"], false)]),
            Err(SubmissionError::BadHash { .. })
        ));
        // A hash whose check would take more than a check before authentication may.
        let heavy = argon2::Argon2::new(
            argon2::Algorithm::Argon2id,
            argon2::Version::V0x13,
            argon2::Params::new(8, 1000, 1, None).unwrap(),
        )
        .hash_password(b"pw", &SaltString::encode_b64(b"saltsalt").unwrap())
        .unwrap()
        .to_string();
        assert!(matches!(
            Submitters::new(&[one("a", &heavy, &["a@x"], false)]),
            Err(SubmissionError::Costly { t: 1000, .. })
        ));
        assert!(matches!(
            Submitters::new(&[one("a", &good, &[], false)]),
            Err(SubmissionError::Addresses { .. })
        ));
        assert!(matches!(
            Submitters::new(&[one("a", &good, &["a@x"], true)]),
            Err(SubmissionError::Addresses { .. })
        ));
        assert!(matches!(
            Submitters::new(&[
                one("a", &good, &["a@x"], false),
                one("a", &good, &["b@x"], false)
            ]),
            Err(SubmissionError::DuplicateLogin { .. })
        ));
    }
}
