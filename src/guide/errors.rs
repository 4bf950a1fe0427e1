//! # Errors
//!
//! Every refusal is a typed error of the layer that refused it, one enum per concern,
//! with its cause kept as its source: [`SendError`](crate::SendError) when sealing,
//! [`ReceiveError`](crate::ReceiveError) when receiving (verification, decryption,
//! binding, the MLS layer, the receiver rules),
//! [`KeyStoreError`](crate::keystore::KeyStoreError) and
//! [`IdentityError`](crate::IdentityError) for keys. Each says what kind of
//! failure it is ([`Classify::kind`](crate::Classify::kind): malformed, not
//! authentic, no usable key, refused by policy...; the command line's exit codes),
//! which A2A error a peer should be answered with
//! ([`Classify::a2a_error`](crate::Classify::a2a_error)), and, for a refused message, a
//! stable verdict code ([`ReceiveError::code`](crate::ReceiveError::code), e.g.
//! `rules.conflict`). Text a message put there (an address, an identifier) is quoted
//! and escaped: an error can be logged as it is.
//!
//! ```
//! use mailseal::keystore::{KeyStore, MemoryStore};
//! use mailseal::{Identities, IdentityKind::Smime};
//! use mailseal::{Classify, Envelope, ErrorKind, Kind, MailA2aMessage, Operation};
//! use mailseal::{Profile, Receiver, SealOptions, SendError, Sender};
//!
//! # fn main() -> Result<(), mailseal::Report> {
//! let alice = MemoryStore::new();
//! alice.generate_identity(Smime, "alice@example.org")?;
//! let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "m-1");
//! env.set("payload", &serde_json::json!({"id": "task-7"}));
//! let plain = MailA2aMessage::new("alice@example.org", &["bob@example.org"], env);
//!
//! // Alice holds no certificate of Bob's: nothing to encrypt to.
//! let err = Sender::builder(&alice)
//!     .build()
//!     .seal(&plain, &SealOptions::new(Profile::Smime))
//!     .unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::NoUsableKey);
//! assert_eq!(err.recipient_without_key(), Some("bob@example.org"));
//! assert!(matches!(err, SendError::Seal(_)));
//! println!("{err}"); // a sentence for a person
//!
//! // Bytes that are not mail: malformed, with a stable code.
//! let err = Receiver::builder(&alice).build().receive(b"\x00 not mail").unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Malformed);
//! assert!(err.code().starts_with("message."), "{}", err.code());
//! # Ok(()) }
//! ```
//!
//! A `main` that returns `Err` prints the error's `Debug`: the library's enums show
//! their structure there. Return [`Report`](crate::Report) instead, which any error
//! converts into by `?` and whose `Debug` is the `Display` of the error and its
//! sources:
//!
//! ```
//! use mailseal::keystore::{KeyStore, MemoryStore};
//! use mailseal::{Identities, IdentityKind::Smime};
//!
//! fn export(store: &MemoryStore) -> Result<Vec<u8>, mailseal::Report> {
//!     Ok(store.export_public(Smime, "bob@example.org")?)
//! }
//!
//! // What `fn main() -> Result<(), mailseal::Report>` would print after "Error: ".
//! let shown = format!("{:?}", export(&MemoryStore::new()).unwrap_err());
//! assert!(shown.starts_with("no S/MIME identity of ours for"), "{shown}");
//! assert!(!shown.contains("NoIdentity"), "{shown}");
//! ```
