//! # A receive loop
//!
//! Receiving has two phases, so that a crash neither loses a message nor delivers it
//! twice: [`Receiver::receive`](crate::Receiver::receive) verifies and says what the
//! message would come to, recording nothing; the caller stores its output durably;
//! then [`Incoming::commit`](crate::Incoming::commit) records it and gives the final
//! [`Outcome`](crate::Outcome) (act on that one). A crash between the two leaves the
//! message unrecorded: it is received again and delivered again to the same place.
//! [`DeliveryDir`](crate::receiver::deliver::DeliveryDir) does both steps for a
//! directory of outputs, idempotently.
//!
//! ```
//! use mailseal::keystore::{DirectoryStore, KeyStore};
//! use mailseal::{Identities, IdentityKind::Smime, ImportAs};
//! use mailseal::receiver::deliver::{DeliveryDir, Format};
//! use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Outcome};
//! use mailseal::{Profile, Receiver, SealOptions, Sender};
//!
//! # fn main() -> Result<(), mailseal::Report> {
//! # let dir = tempfile::tempdir()?;
//! # let alice = DirectoryStore::open(dir.path().join("alice"))?;
//! # alice.generate_identity(Smime, "alice@example.org")?;
//! # let bob = DirectoryStore::open(dir.path().join("bob"))?;
//! # bob.generate_identity(Smime, "bob@example.org")?;
//! # bob.import_as(&alice.export_public(Smime, "alice@example.org")?, ImportAs::Peer)?;
//! # let seal = |id: &str| -> Result<Vec<u8>, mailseal::Report> {
//! #     let mut env = Envelope::new(Kind::Request, Operation::TasksGet, id);
//! #     env.set("payload", &serde_json::json!({"id": "task-7"}));
//! #     let plain = MailA2aMessage::new("alice@example.org", &["bob@example.org"], env);
//! #     Ok(Sender::builder(&alice).build()
//! #         .seal(&plain, &SealOptions::new(Profile::Smime).sign_only(true))?)
//! # };
//! let inbox: Vec<(String, Vec<u8>)> =
//!     vec![("1.eml".into(), seal("m-1")?), ("2.eml".into(), b"not mail".to_vec()), ("3.eml".into(), seal("m-1")?)];
//! let mut receiver = Receiver::builder(&bob).build();
//!
//! // By hand: output first, then commit.
//! let (name, raw) = &inbox[0];
//! match receiver.receive(raw) {
//!     Ok(incoming) => {
//!         if let Some(delivery) = incoming.outcome().delivered() {
//!             std::fs::write(dir.path().join(format!("{name}.json")), delivery.envelope_json())?;
//!         }
//!         match incoming.commit()? {
//!             Outcome::Deliver { .. } => println!("{name}: delivered"),
//!             other => println!("{name}: {}", other.word()),
//!         }
//!     }
//!     // Refused: nothing recorded; `e.code()` is the stable verdict code.
//!     Err(e) => println!("{name}: refused: {e} ({})", e.code()),
//! }
//!
//! // Or with a delivery directory, which publishes each output once.
//! let out = DeliveryDir::open(&dir.path().join("out"), Format::EnvelopeJson)?;
//! let mut words = Vec::new();
//! for (name, raw) in &inbox[1..] {
//!     match out.deliver(&mut receiver, raw, name) {
//!         Ok(done) => words.push(done.outcome.word()),
//!         Err(_) => words.push("refused"),
//!     }
//!     // MLS messages held for an epoch a Commit has now reached come back here.
//!     for (_held, _result) in out.deliver_released(&mut receiver)? {}
//! }
//! // The garbage is refused; the copy of m-1 is a duplicate of the first.
//! assert_eq!(words, ["refused", "duplicate"]);
//! # Ok(()) }
//! ```
//!
//! A receiver takes `&mut self` per message: one message at a time, so that each
//! commit sees the one before. Several processes may share one state (a directory
//! store's SQLite file, or PostgreSQL): every decision is atomic across them.
