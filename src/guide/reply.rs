//! # Reply to a request
//!
//! A request that expects an answer carries a `correlationId`. The requester's
//! [`Sender`](crate::Sender) records it in the replay state of its store, and the
//! requester's [`Receiver`](crate::Receiver) delivers only answers to requests so
//! recorded, from an agent the request went to, before the request expired.
//!
//! [`Envelope::response_to`](crate::Envelope::response_to) fills a response's
//! correlation fields from the request (kind, operation, `correlationId`, sequence 1,
//! final), and [`MailA2aMessage::reply`](crate::MailA2aMessage::reply) addresses it to
//! the requester in the request's thread (In-Reply-To, References,
//! `Auto-Submitted: auto-replied`).
//!
//! ```
//! use mailseal::keystore::{DirectoryStore, KeyStore};
//! use mailseal::{Identities, IdentityKind::Smime, ImportAs};
//! use mailseal::{A2aErrorType, Envelope, Kind, MailA2aMessage, Operation};
//! use mailseal::{Profile, Receiver, SealOptions, Sender};
//!
//! # fn main() -> Result<(), mailseal::Report> {
//! # let dir = tempfile::tempdir()?;
//! let (a, b) = ("alice@example.org", "bob@example.org");
//! // Directory stores: the request record must outlive the sender that wrote it.
//! let alice = DirectoryStore::open(dir.path().join("alice"))?;
//! let bob = DirectoryStore::open(dir.path().join("bob"))?;
//! alice.generate_identity(Smime, a)?;
//! bob.generate_identity(Smime, b)?;
//! bob.import_as(&alice.export_public(Smime, a)?, ImportAs::Peer)?;
//! alice.import_as(&bob.export_public(Smime, b)?, ImportAs::Peer)?;
//! let smime = SealOptions::new(Profile::Smime);
//!
//! let mut ask = Envelope::new(Kind::Request, Operation::TasksGet, "req-1");
//! ask.set("correlationId", "exchange-1");
//! ask.set("payload", &serde_json::json!({"id": "task-7"}));
//! let request = MailA2aMessage::new(a, &[b], ask);
//! let sealed = Sender::builder(&alice).build().seal(&request, &smime)?;
//! let outcome = Receiver::builder(&bob).build().receive(&sealed)?.commit()?;
//! let asked = outcome.delivered().expect("delivered");
//!
//! // Bob has no such task: an A2A error answers the request.
//! let error = Envelope::error_to(asked.envelope(), "err-1", A2aErrorType::TaskNotFoundError, "no task-7");
//! let reply = MailA2aMessage::reply(asked.message(), b, error);
//! let sealed = Sender::builder(&bob).build().seal(&reply, &smime)?;
//! let outcome = Receiver::builder(&alice).build().receive(&sealed)?.commit()?;
//! let answer = outcome.delivered().expect("the answer is delivered");
//! assert_eq!(answer.envelope().kind(), Some(Kind::Error));
//! assert_eq!(answer.envelope().correlation_id().as_deref(), Some("exchange-1"));
//!
//! // A second answer to the same exchange is refused: one final per exchange.
//! let mut late = Envelope::response_to(asked.envelope(), "resp-2");
//! late.set("payload", &serde_json::json!({"id": "task-7", "contextId": "c",
//!     "status": {"state": "TASK_STATE_COMPLETED"}}));
//! let sealed = Sender::builder(&bob).build().seal(&MailA2aMessage::reply(asked.message(), b, late), &smime)?;
//! assert!(Receiver::builder(&alice).build().receive(&sealed).is_err());
//! # Ok(()) }
//! ```
//!
//! A stream of replies is numbered from 1 and ends with one `final`: build each event
//! with `Envelope::new(Kind::Event, ...)`, the request's `correlationId`, `sequence` n
//! and `final` on the last; the receiver holds an event back until the ones before it
//! came ([`Receiver::take_stream_events`](crate::Receiver::take_stream_events)).
