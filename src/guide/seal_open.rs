//! # Seal and open
//!
//! Each agent has a key store with an identity of its own and the certificates of its
//! peers. [`KeyStore::generate_identity`](crate::Identities::generate_identity)
//! makes an identity in one call (S/MIME, OpenPGP or a JWS key),
//! [`KeyStore::export_public`](crate::Identities::export_public) writes what a
//! peer needs (never a private key), and [`KeyStore::import_as`](crate::Identities::import_as)
//! with [`ImportAs::Peer`](crate::ImportAs::Peer) takes it on the other side.
//!
//! A [`Sender`](crate::Sender) seals (signed, then encrypted to every recipient and
//! to the sender's own copy), and a [`Receiver`](crate::Receiver) opens: verifies,
//! decrypts, checks that the signer is the protected From and that we are among the
//! protected recipients, then applies the receiver rules.
//!
//! ```
//! use mailseal::keystore::{KeyStore, MemoryStore};
//! use mailseal::{Identities, IdentityKind, ImportAs};
//! use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Profile, Receiver, SealOptions, Sender};
//!
//! # fn main() -> Result<(), mailseal::Report> {
//! let (alice, bob) = (MemoryStore::new(), MemoryStore::new());
//! alice.generate_identity(IdentityKind::OpenPgp, "alice@example.org")?;
//! bob.generate_identity(IdentityKind::OpenPgp, "bob@example.org")?;
//! let alice_public = alice.export_public(IdentityKind::OpenPgp, "alice@example.org")?;
//! bob.import_as(&alice_public, ImportAs::Peer)?;
//! let bob_public = bob.export_public(IdentityKind::OpenPgp, "bob@example.org")?;
//! alice.import_as(&bob_public, ImportAs::Peer)?;
//!
//! let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! env.set("payload", &serde_json::json!({"id": "task-7"}));
//! let plain = MailA2aMessage::new("alice@example.org", &["bob@example.org"], env);
//! let sealed = Sender::builder(&alice)
//!     .build()
//!     .seal(&plain, &SealOptions::new(Profile::OpenPgp))?;
//!
//! let outcome = Receiver::builder(&bob).build().receive(&sealed)?.commit()?;
//! let delivery = outcome.delivered().expect("delivered");
//! assert_eq!(delivery.opened.verdict.protection.to_string(), "signed-encrypted");
//! assert_eq!(delivery.payload::<serde_json::Value>(), Some(serde_json::json!({"id": "task-7"})));
//! # Ok(()) }
//! ```
//!
//! [`SealOptions`](crate::SealOptions) says how: `SealOptions::new(Profile::Smime)
//! .sign_only(true)` signs without encrypting, `.encrypt_to([...])` encrypts to some
//! of the recipients only. A store in memory ([`MemoryStore`](crate::keystore::MemoryStore))
//! suits tests; an agent keeps its keys in a
//! [`DirectoryStore`](crate::keystore::DirectoryStore) or a
//! [`SqliteStore`](crate::keystore::SqliteStore) (what `mailseal` uses, at
//! [`default_location`](crate::keystore::default_location)), which also keep the
//! replay state ([`super::replay`]).
