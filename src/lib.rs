//! mailseal seals and opens the protected A2A JSON part of agent email (the MailA2A
//! binding) under S/MIME 4.0, OpenPGP/MIME and MLS, behind one API.
//!
//! The layers, each depending only on the ones after it:
//! CLI -> [`dispatch`] -> profiles -> [`seal`] / [`message`] -> [`envelope`].
//!
//! ```
//! use mailseal::envelope::{validate, Envelope, Kind, Operation, ValidationContext};
//!
//! let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! env.set("payload", &serde_json::json!({"id": "task-7"}));
//! assert!(validate(&env, &ValidationContext::default()).is_empty());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod asn1;
mod binding;
pub mod dispatch;
pub mod dkim;
pub mod envelope;
pub mod error;
pub mod ext;
#[cfg(feature = "gateway")]
pub mod gateway;
mod hex;
pub mod keystore;
pub mod message;
pub mod mls;
pub mod openpgp;
mod postgres_db;
#[cfg(feature = "tls")]
mod postgres_tls;
pub mod profile;
pub mod receiver;
pub mod replay;
pub mod seal;
pub mod sender;
pub mod smime;
mod sqlite;

#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;

/// The README's Rust examples, run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use envelope::{Envelope, Kind, Operation};
pub use error::{A2aErrorType, Classify, ErrorKind};
pub use message::{Limits, MailA2aMessage};
pub use profile::{Profile, Protection};
pub use receiver::{Incoming, Outcome, ReceiveError, Receiver};
pub use seal::{OpenPolicy, Opened, Opener, SealOptions, Sealer, Verdict};
pub use sender::{SendError, Sender};
