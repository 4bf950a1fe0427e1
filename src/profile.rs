//! Protection profiles: what cryptography protected a message.

use std::fmt;
use std::str::FromStr;

/// The four protection profiles of mailseal (DESIGN "profile token").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Profile {
    /// S/MIME 4.0 (RFC 8551).
    Smime,
    /// OpenPGP/MIME (RFC 3156) with RFC 9580 packets.
    OpenPgp,
    /// RFC 9420 `message/mls` application data.
    Mls,
    /// MailA2A `detached-jws`: signed only, a JWS (RFC 7515) with a detached payload
    /// over the inner entity (see [`crate::jws`]).
    Jws,
}

impl Profile {
    /// The profile token used on the command line.
    pub fn token(self) -> &'static str {
        match self {
            Self::Smime => "smime",
            Self::OpenPgp => "openpgp",
            Self::Mls => "mls",
            Self::Jws => "jws",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "smime" => Ok(Self::Smime),
            "openpgp" => Ok(Self::OpenPgp),
            "mls" => Ok(Self::Mls),
            "jws" | "detached-jws" => Ok(Self::Jws),
            other => Err(format!(
                "unknown profile `{other}` (smime, openpgp, mls or jws)"
            )),
        }
    }
}

/// How strongly a message was protected, weakest first; policies compare these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Protection {
    /// No end-to-end protection: outer headers and body as delivered.
    None,
    /// Encrypted without authenticating the sender (legacy CBC EnvelopedData); never
    /// authority for anything.
    EncryptedUnauthenticated,
    /// Signed: authenticity and integrity, no confidentiality.
    Signed,
    /// Signed and encrypted (or MLS application data): authenticity, integrity and
    /// confidentiality.
    SignedEncrypted,
}

impl Protection {
    /// The token of a minimum in an Agent Card's `#protection` extension and in the
    /// peer policy file.
    pub fn token(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::EncryptedUnauthenticated => "encrypted-unauthenticated",
            Self::Signed => "signed",
            Self::SignedEncrypted => "signed-encrypted",
        }
    }
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

impl FromStr for Protection {
    type Err = String;
    /// Only the minimums a policy may demand: `signed` or `signed-encrypted` (MailA2A
    /// 9.1: nothing weaker authenticates a sender).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "signed" => Ok(Self::Signed),
            "signed-encrypted" => Ok(Self::SignedEncrypted),
            other => Err(format!(
                "unknown minimum protection `{other}` (signed or signed-encrypted)"
            )),
        }
    }
}
