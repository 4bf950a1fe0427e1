//! # Replay
//!
//! Every message that verified goes through the receiver rules before an agent sees
//! it: the same message again (an SMTP redelivery, or an attacker's copy) is a
//! duplicate, never a second operation; the same `messageId` with other content is a
//! security error; expired messages are refused ([`crate::replay`]).
//!
//! The rules remember in the replay state. A receiver built over a store uses the
//! store's own, durable state
//! ([`KeyStore::state_location`](crate::keystore::KeyStore::state_location): a
//! directory store's `mailseal.db`, where `mailseal open` keeps it too; a SQLite or
//! PostgreSQL store's own database). So a receiver built again (the next run of the
//! agent, another process, the command line) refuses what an earlier one accepted:
//!
//! ```
//! use mailseal::keystore::{DirectoryStore, KeyStore};
//! use mailseal::{Identities, IdentityKind::Smime, ImportAs};
//! use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Outcome};
//! use mailseal::{Profile, Receiver, SealOptions, Sender};
//!
//! # fn main() -> Result<(), mailseal::Report> {
//! # let dir = tempfile::tempdir()?;
//! # let alice = DirectoryStore::open(dir.path().join("alice"))?;
//! # alice.generate_identity(Smime, "alice@example.org")?;
//! # let bob_keys = DirectoryStore::open(dir.path().join("bob"))?;
//! # bob_keys.generate_identity(Smime, "bob@example.org")?;
//! # bob_keys.import_as(&alice.export_public(Smime, "alice@example.org")?, ImportAs::Peer)?;
//! # let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! # env.set("payload", &serde_json::json!({"id": "task-7"}));
//! # let plain = MailA2aMessage::new("alice@example.org", &["bob@example.org"], env);
//! # let sealed = Sender::builder(&alice).build()
//! #     .seal(&plain, &SealOptions::new(Profile::Smime).sign_only(true))?;
//! let bob = DirectoryStore::open(dir.path().join("bob"))?;
//! let first = Receiver::builder(&bob).build().receive(&sealed)?.commit()?;
//! assert!(matches!(first, Outcome::Deliver { .. }));
//!
//! // Later, another receiver over the same store (opened afresh):
//! let bob = DirectoryStore::open(dir.path().join("bob"))?;
//! let again = Receiver::builder(&bob).build().receive(&sealed)?.commit()?;
//! assert!(matches!(again, Outcome::Duplicate { .. }));
//!
//! // Memory only by name: this receiver forgets when dropped (tests, one-off tools).
//! let forgetful = Receiver::builder(&bob).replay_in_memory().build().receive(&sealed)?.commit()?;
//! assert!(matches!(forgetful, Outcome::Deliver { .. }));
//! # Ok(()) }
//! ```
//!
//! A store that keeps nothing durable ([`MemoryStore`](crate::keystore::MemoryStore),
//! a [`TokenStore`](crate::keystore::TokenStore)) gives its receivers state in memory:
//! give such a receiver a state of its own with
//! [`ReceiverBuilder::replay`](crate::receiver::ReceiverBuilder::replay), e.g.
//! [`SqliteReplayStore`](crate::replay::SqliteReplayStore) or
//! [`PostgresReplayStore`](crate::replay::PostgresReplayStore) (several gateways on
//! one database), and the same state to the [`Sender`](crate::Sender) that records
//! the requests whose answers it then accepts.
