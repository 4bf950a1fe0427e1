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
