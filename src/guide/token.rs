//! # Keys on a token
//!
//! A private key can live on a PKCS#11 token (a smart card, an HSM, SoftHSM in tests):
//! every signature and decryption happens there and the key never leaves it. A store
//! records the key's certificate and the token URI (never the PIN: give it by the
//! URI's `pin-source` or `MAILSEAL_PKCS11_PIN`), and uses it as any other key. A
//! token can also be a store of its own ([`TokenStore`](crate::keystore::TokenStore)):
//! its certificates and keys, and nothing else, so its replay state is given
//! explicitly.
//!
//! This recipe is compiled but not run (it needs a token):
//!
//! ```no_run
//! use mailseal::keystore::{DirectoryStore, KeyStore, Pkcs11Uri, TokenStore};
//! use mailseal::replay::SqliteReplayStore;
//! use mailseal::Receiver;
//!
//! # fn main() -> Result<(), mailseal::Report> {
//! let uri = "pkcs11:token=agents;object=alice?module-path=/usr/lib/softhsm/libsofthsm2.so";
//! // The key on the token, its certificate (issued for it) in the store.
//! let store = DirectoryStore::open("/var/lib/agent/keys")?;
//! let certificate = std::fs::read("alice.crt")?;
//! store.add_token_key(&certificate, &Pkcs11Uri::parse(uri)?)?;
//! let receiver = Receiver::builder(&store).build(); // signs and decrypts on the token
//!
//! // Or the token as the whole store, with the replay state beside it.
//! let token = TokenStore::open(uri)?;
//! let state = SqliteReplayStore::open(std::path::Path::new("/var/lib/agent/state.db"))?;
//! let receiver = Receiver::builder(&token).replay(state).build();
//! # let _ = receiver;
//! # Ok(()) }
//! ```
//!
//! New keys are made on the token by `mailseal key generate --kind smime --pkcs11 URI`
//! (or [`TokenKey::generate`](crate::keystore::TokenKey::generate)).
