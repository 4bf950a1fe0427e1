//! The exit statuses of the `mailseal` command line (DESIGN "Command line"), and the
//! one place a library [`ErrorKind`] becomes one. The library says what kind of failure
//! happened; only the command line turns that into a process status.

use crate::error::{Classify, ErrorKind};

/// Exit codes of the `mailseal` command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExitCode {
    /// 1: anything else (I/O, internal).
    Other,
    /// 2: the command line is wrong.
    Usage,
    /// 3: the input is malformed.
    Malformed,
    /// 4: authentication (signature, integrity) failed.
    AuthenticationFailed,
    /// 5: no usable key.
    NoUsableKey,
    /// 6: refused by policy (downgrade, replay, expiry, binding).
    RefusedByPolicy,
}

impl ExitCode {
    /// The process exit status.
    pub(crate) fn as_u8(self) -> u8 {
        match self {
            Self::Other => 1,
            Self::Usage => 2,
            Self::Malformed => 3,
            Self::AuthenticationFailed => 4,
            Self::NoUsableKey => 5,
            Self::RefusedByPolicy => 6,
        }
    }

    /// Every status, in order.
    pub(crate) const ALL: [ExitCode; 6] = [
        Self::Other,
        Self::Usage,
        Self::Malformed,
        Self::AuthenticationFailed,
        Self::NoUsableKey,
        Self::RefusedByPolicy,
    ];

    /// What the status means, as `mailseal --help` lists it.
    pub(crate) fn meaning(self) -> &'static str {
        match self {
            Self::Other => "anything else (I/O, internal)",
            Self::Usage => "the command line is wrong (or names no key store)",
            Self::Malformed => "the input is malformed",
            Self::AuthenticationFailed => "authentication (signature, integrity) failed",
            Self::NoUsableKey => "no usable key",
            Self::RefusedByPolicy => "refused by policy (downgrade, replay, expiry, binding)",
        }
    }

    /// The exit-status table of `mailseal --help`, from [`Self::ALL`].
    pub(crate) fn help_table() -> String {
        let mut text = String::from("Exit status:\n  0  success\n");
        for code in Self::ALL {
            text.push_str(&format!("  {}  {}\n", code.as_u8(), code.meaning()));
        }
        text
    }

    /// The status for a library error.
    pub(crate) fn of(e: &(impl Classify + ?Sized)) -> Self {
        Self::from(e.kind())
    }
}

impl From<ErrorKind> for ExitCode {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::InvalidArgument => Self::Usage,
            ErrorKind::Malformed => Self::Malformed,
            ErrorKind::Authentication => Self::AuthenticationFailed,
            ErrorKind::NoUsableKey => Self::NoUsableKey,
            ErrorKind::Policy => Self::RefusedByPolicy,
            // `ErrorKind` is non-exhaustive: a kind added later is "anything else"
            // until the command line gives it a status of its own.
            _ => Self::Other,
        }
    }
}
