//! mailseal seals and opens the protected A2A JSON part of agent email (the MailA2A
//! binding) under S/MIME 4.0, OpenPGP/MIME, detached-jws and MLS, behind one API.
//!
//! The layers, each depending only on the ones after it:
//! CLI -> [`dispatch`] -> profiles -> [`seal`] / [`message`] -> [`envelope`].
//!
//! Sealing and opening: a [`Sender`] seals a composed [`MailA2aMessage`] with the keys
//! of one store; a [`Receiver`] over another store opens it, applies the binding's
//! identity checks and the receiver rules, and records it on `commit()`. The same two
//! calls serve S/MIME, OpenPGP and MLS ([`Profile`]). A receiver keeps its replay state
//! in its key store (a directory store's `mailseal.db`, as `mailseal` does), so a
//! message accepted once is refused by every later receiver over the same store.
//!
//! The [`guide`] has a recipe for each task (seal and open, reply, replay, a receive
//! loop, keys on a token, MLS, errors); `examples/` has each profile end to end
//! (`cargo run --example first_program`, `smime_seal_open`, `openpgp_seal_open`,
//! `mls_two_agents`, and `maildir` for a receive loop).
//!
//! ```
//! use mailseal::keystore::{DirectoryStore, KeyStore};
//! use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Outcome, Profile};
//! use mailseal::{Receiver, SealOptions, Sender};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let fx = |f: &str| std::fs::read(format!("{}/keys-fixtures/rfc9216/{f}", env!("CARGO_MANIFEST_DIR")));
//! let tmp = tempfile::tempdir()?;
//! let alice = DirectoryStore::open(tmp.path().join("alice"))?;
//! let bob = DirectoryStore::open(tmp.path().join("bob"))?;
//! for (store, own, peer) in [(&alice, "alice", "bob"), (&bob, "bob", "alice")] {
//!     store.import(&fx("ca.rsa.crt")?, "ca", true)?;
//!     for f in [format!("{own}.sign.crt"), format!("{own}.sign.key"),
//!               format!("{own}.encrypt.crt"), format!("{own}.encrypt.key"),
//!               format!("{peer}.encrypt.crt")] {
//!         store.import(&fx(&f)?, &f, false)?;
//!     }
//! }
//! let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! env.set("payload", &serde_json::json!({"id": "task-7"}));
//! let plain = MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
//!
//! // Signed, then encrypted to Bob (and to Alice's own copy).
//! let sealed = Sender::builder(&alice).build().seal(&plain, &SealOptions::new(Profile::Smime))?;
//!
//! let mut receiver = Receiver::builder(&bob).build();
//! let Outcome::Deliver { delivery, .. } = receiver.receive(&sealed)?.commit()? else {
//!     panic!("delivered")
//! };
//! assert_eq!(delivery.candidate.message_id, "m-1");
//! assert_eq!(delivery.opened.verdict.protection.to_string(), "signed-encrypted");
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod asn1;
mod binding;
#[cfg(feature = "bridge")]
pub mod bridge;
// The conformance corpus's generator and runner (`mailseal corpus`): a tool of the
// command line, not a stable API.
#[doc(hidden)]
pub mod corpus;
pub mod dispatch;
pub mod dkim;
mod entropy;
pub mod envelope;
pub mod error;
pub mod ext;
#[cfg(feature = "gateway")]
pub mod gateway;
pub mod guide;
mod hex;
#[cfg(feature = "https")]
pub mod https;
pub mod identities;
pub mod identity;
pub mod jws;
pub mod keystore;
pub mod message;
pub mod mls;
pub mod offline;
pub mod openpgp;
mod postgres_db;
#[cfg(feature = "tls")]
mod postgres_tls;
pub mod profile;
pub mod receiver;
pub mod replay;
mod report;
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
pub use identities::{Identities, IdentityError, IdentityKind, ImportAs};
pub use message::{Limits, MailA2aMessage};
pub use profile::{Profile, Protection};
pub use receiver::{Incoming, Outcome, ReceiveError, Receiver};
pub use report::Report;
pub use seal::{OpenPolicy, Opened, Opener, SealOptions, Sealer, Verdict};
pub use sender::{SendError, Sender};
