//! # MLS
//!
//! Under the `mls` profile a group of agents shares one MLS group (RFC 9420) by mail:
//! KeyPackages, Commits and Welcomes travel as `message/mls` parts, and one sealed
//! message reaches every member. Each agent's MLS key is certified by its S/MIME (or
//! OpenPGP) identity, and every member checks the others' against its own key store.
//! The group state is an [`Mls`](crate::mls::Mls) (a SQLite file with
//! [`Mls::open`](crate::mls::Mls::open); in memory here), which a
//! [`Receiver`](crate::Receiver) takes beside its key store, so that MLS mail goes
//! through the same receive path as the rest.
//!
//! ```
//! use mailseal::keystore::{KeyStore, MemoryStore};
//! use mailseal::{Identities, IdentityKind::Smime, ImportAs};
//! use mailseal::mls::{Mls, StoreAuthenticator};
//! use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Outcome, Receiver};
//!
//! # fn main() -> Result<(), mailseal::Report> {
//! let (a, b) = ("alice@example.org", "bob@example.org");
//! let (alice_keys, bob_keys) = (MemoryStore::new(), MemoryStore::new());
//! alice_keys.generate_identity(Smime, a)?;
//! bob_keys.generate_identity(Smime, b)?;
//! bob_keys.import_as(&alice_keys.export_public(Smime, a)?, ImportAs::Peer)?;
//! alice_keys.import_as(&bob_keys.export_public(Smime, b)?, ImportAs::Peer)?;
//!
//! // Each agent's MLS key, certified by its S/MIME key.
//! let alice = Mls::in_memory()?;
//! alice.generate_identity(a, &StoreAuthenticator::new(&alice_keys))?;
//! let bob = Mls::in_memory()?;
//! bob.generate_identity(b, &StoreAuthenticator::new(&bob_keys))?;
//! bob.allow_inviter(a, true)?; // Bob joins the groups Alice invites him to
//!
//! // Alice makes a group and adds Bob from his KeyPackage mail; he joins by her Welcome.
//! let group = alice.create_group(a)?;
//! let added = alice.add(&group, &[bob.key_package(b)?], &StoreAuthenticator::new(&alice_keys))?;
//! let mut receiver = Receiver::builder(&bob_keys).mls(bob).build();
//! let joined = receiver.receive(&added.welcome)?.commit()?;
//! assert_eq!(joined.word(), "joined");
//!
//! // A message to the whole group.
//! let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! env.set("payload", &serde_json::json!({"id": "task-7"}));
//! let plain = MailA2aMessage::new(a, &[b], env);
//! let sealed = alice.seal(&plain, &group, false)?;
//! let outcome = receiver.receive(&sealed)?.commit()?;
//! assert!(matches!(outcome, Outcome::Deliver { .. }));
//! # Ok(()) }
//! ```
//!
//! A [`Sender`](crate::Sender) seals to a group with
//! `SealOptions::new(Profile::Mls).group(id)` and
//! [`SenderBuilder::mls`](crate::sender::SenderBuilder::mls). `examples/mls_two_agents.rs`
//! runs a request and its answer; the README shows the same with the command line.
