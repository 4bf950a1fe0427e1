//! Who may have the gateway sign as which agent (issue #57, THREATS "the gateway signs
//! for whoever submits").
//!
//! The outbound listener signs as our agents; before this, anyone who reached it
//! (any local process, or any host Postfix's `permit_mynetworks` let through) had mail
//! sealed under any agent's identity just by writing its address in From. Each
//! outbound listener now says who may submit ([`Submission`]), and a message is
//! sealed only when its From is an address its submitter may use:
//!
//! - `auth`: SMTP AUTH (PLAIN or LOGIN, under TLS only) against the configured
//!   [`Submitter`]s, each a login, an Argon2id hash of its password (PHC string, as
//!   `mailseal gateway hash-password` writes it) and the addresses it may send as;
//! - `mta`: the client is an MTA that authenticated the submitter and tied the
//!   envelope sender to its login (Postfix: `smtpd_sender_login_maps` and
//!   `reject_sender_login_mismatch`); the From must then be the envelope sender;
//! - `open`: no check (anyone the listener serves signs as any agent), only when the
//!   operator writes it.
//!
//! A From the submitter may not use is refused with 550 5.7.1 before anything is
//! signed. The rule lives here; the session ([`super::session`]) only carries the
//! exchange and the connection loop only calls [`Submitters::verify`].

use std::collections::HashMap;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use serde::Deserialize;
use zeroize::Zeroizing;

/// Who may submit to an outbound listener.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Submission {
    /// SMTP AUTH against `[[submitter]]`; the From must be one of the login's addresses.
    Auth,
    /// A trusted MTA that checked the sender's login; the From must be MAIL FROM.
    Mta,
    /// Anyone the listener serves, as any agent (the operator's explicit choice).
    Open,
}

/// One login allowed to submit (`[[submitter]]`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submitter {
    /// The SMTP AUTH login.
    pub login: String,
    /// The password's Argon2id hash, a PHC string (`mailseal gateway hash-password`).
    pub password_hash: String,
    /// The From addresses it may send as.
    pub addresses: Vec<String>,
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
    /// A submitter may send as no address.
    #[error("submitter {login} has no addresses to send as")]
    NoAddresses {
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
            if s.addresses.is_empty() {
                return Err(SubmissionError::NoAddresses {
                    login: s.login.clone(),
                });
            }
            if by_login.insert(s.login.clone(), s.clone()).is_some() {
                return Err(SubmissionError::DuplicateLogin {
                    login: s.login.clone(),
                });
            }
        }
        Ok(Submitters { by_login })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_login.is_empty()
    }

    /// Whether `password` is `login`'s (Argon2 verification: run it off the async
    /// threads). An unknown login is checked against a decoy hash, so it costs the same.
    pub fn verify(&self, login: &str, password: &str) -> bool {
        let argon2 = argon2::Argon2::default();
        match self.by_login.get(login) {
            Some(s) => PasswordHash::new(&s.password_hash)
                .is_ok_and(|h| argon2.verify_password(password.as_bytes(), &h).is_ok()),
            None => {
                if let Ok(h) = PasswordHash::new(DECOY) {
                    let _ = argon2.verify_password(password.as_bytes(), &h);
                }
                false
            }
        }
    }

    /// Whether `login` may send as `from` (addresses compared without regard to case).
    pub fn may_send_as(&self, login: &str, from: &str) -> bool {
        self.by_login
            .get(login)
            .is_some_and(|s| s.addresses.iter().any(|a| same_address(a, from)))
    }
}

/// Two addresses are one: the local part as written, the domain without regard to
/// case (RFC 5321 2.4: only the domain is case-insensitive by rule; our agents' local
/// parts are compared without case too, as the identity store does).
fn same_address(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Why a message may not be sealed for its submitter: the reply's text (550 5.7.1).
pub fn refuse_from(
    policy: Submission,
    submitters: &Submitters,
    login: Option<&str>,
    mail_from: &str,
    from: &str,
) -> Option<String> {
    match policy {
        Submission::Open => None,
        Submission::Mta => (!same_address(mail_from, from)).then(|| {
            format!(
                "From {} is not the envelope sender {} the MTA checked: not signed",
                crate::error::quoted(from),
                crate::error::quoted(mail_from)
            )
        }),
        Submission::Auth => match login {
            None => Some("authentication required: not signed".into()),
            Some(login) if submitters.may_send_as(login, from) => None,
            Some(login) => Some(format!(
                "{} may not send as {}: not signed",
                crate::error::quoted(login),
                crate::error::quoted(from)
            )),
        },
    }
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
            },
            Submitter {
                login: "mallory".into(),
                password_hash: hash_password("mallory's own").unwrap(),
                addresses: vec!["mallory@corp.example".into()],
            },
        ])
        .unwrap()
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
    /// agent's address in From: refused before anything is signed.
    #[test]
    fn fail_submission_a_login_signs_only_as_its_own_addresses() {
        let s = submitters();
        let refuse = |login: Option<&str>, from: &str| {
            refuse_from(Submission::Auth, &s, login, "x@corp.example", from)
        };
        assert_eq!(refuse(Some("treasury"), "treasury@corp.example"), None);
        assert_eq!(refuse(Some("treasury"), "Treasury@CORP.example"), None);
        assert!(refuse(Some("mallory"), "treasury@corp.example").is_some());
        assert!(refuse(None, "treasury@corp.example").is_some());
        assert!(refuse(Some("nobody"), "treasury@corp.example").is_some());
    }

    #[test]
    fn fail_submission_behind_an_mta_from_must_be_the_envelope_sender() {
        let s = Submitters::default();
        let mta =
            |mail_from: &str, from: &str| refuse_from(Submission::Mta, &s, None, mail_from, from);
        assert_eq!(mta("treasury@corp.example", "treasury@corp.example"), None);
        assert!(mta("mallory@corp.example", "treasury@corp.example").is_some());
        assert!(mta("", "treasury@corp.example").is_some());
        assert_eq!(
            refuse_from(Submission::Open, &s, None, "m@x", "treasury@corp.example"),
            None
        );
    }

    #[test]
    fn fail_submission_config_refuses_bad_hashes_and_duplicates() {
        let one = |login: &str, hash: &str, addrs: &[&str]| Submitter {
            login: login.into(),
            password_hash: hash.into(),
            addresses: addrs.iter().map(|a| a.to_string()).collect(),
        };
        let good = hash_password("pw").unwrap();
        assert!(matches!(
            Submitters::new(&[one("a", "plaintext", &["a@x"])]),
            Err(SubmissionError::BadHash { .. })
        ));
        assert!(matches!(
            Submitters::new(&[one("a", &good, &[])]),
            Err(SubmissionError::NoAddresses { .. })
        ));
        assert!(matches!(
            Submitters::new(&[one("a", &good, &["a@x"]), one("a", &good, &["b@x"])]),
            Err(SubmissionError::DuplicateLogin { .. })
        ));
    }
}
