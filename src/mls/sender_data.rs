//! The real sender of a PrivateMessage: the leaf index and the generation it was
//! encrypted at, read by decrypting its sender data (RFC 9420 section 6.3.2).
//!
//! MailA2A section 9.3 makes "MLS epoch and generation the cryptographic ordering
//! authority", and the envelope's `group` coordinates must be the framing's. The epoch
//! is in the clear; the generation is only inside the encrypted sender data, which
//! openmls decrypts internally without saying what it read. A generation the sender
//! merely *states* (in the authenticated data, or in the envelope) could be anything:
//! a message sent at generation 3 that says 0 would pass. So we read the sender data
//! ourselves: as openmls opened it, seen through our crypto provider while the
//! message was processed (`watch`), or else by decrypting it by the RFC's
//! construction: a key and a nonce derived with `ExpandWithLabel` from the epoch's
//! sender-data secret and a sample of the content ciphertext, an AEAD open over
//! `SenderDataAAD`, and a twelve-byte `SenderData`.
//!
//! Hand-written because openmls keeps both the construction and the secret private.
//! The secret is read from openmls' own storage record (its `MessageSecretsStore`,
//! which openmls keeps readable across releases as a persisted format; we read only
//! the sender-data secret and the epochs); the construction is checked against the
//! RFC 9420 message-protection test vectors (`tests/mls/mls_vectors.rs`), and the
//! reader of the PrivateMessage framing is fuzzed against openmls' decoder (the
//! `mls_open` target). Should openmls change how it stores the secret, the read
//! fails and application messages are refused, never delivered unchecked.

use openmls::prelude::tls_codec::{Deserialize as _, Serialize as _, VLBytes};
use openmls::prelude::{Ciphersuite, GroupId};
use openmls_traits::crypto::OpenMlsCrypto;
use openmls_traits::storage::{traits, Entity, StorageProvider, CURRENT_VERSION};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::MlsError;

/// The wire format of a PrivateMessage in an MLSMessage (RFC 9420 section 6).
const WIRE_FORMAT_PRIVATE: u16 = 2;
/// The protocol version `mls10`.
const MLS10: u16 = 1;

/// The clear fields of a PrivateMessage that the sender data decryption needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateFraming {
    /// The group id.
    pub group_id: Vec<u8>,
    /// The epoch.
    pub epoch: u64,
    /// The content type (1 application, 2 proposal, 3 commit).
    pub content_type: u8,
    /// The authenticated data (sent in the clear, authenticated by the content AEAD).
    pub authenticated_data: Vec<u8>,
    /// The encrypted `SenderData`.
    pub encrypted_sender_data: Vec<u8>,
    /// The encrypted content.
    pub ciphertext: Vec<u8>,
}

/// Who sent a PrivateMessage, as its sender data says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderData {
    /// The sender's leaf index.
    pub leaf_index: u32,
    /// The generation of the sender's ratchet the content was encrypted at.
    pub generation: u32,
}

/// Reads the framing of a PrivateMessage from a whole MLSMessage; `None` when the
/// bytes are another wire format or do not decode (trailing bytes included).
pub fn private_framing(message: &[u8]) -> Option<PrivateFraming> {
    let mut rest = message;
    let version = u16::tls_deserialize(&mut rest).ok()?;
    let wire_format = u16::tls_deserialize(&mut rest).ok()?;
    if version != MLS10 || wire_format != WIRE_FORMAT_PRIVATE {
        return None;
    }
    let group_id = VLBytes::tls_deserialize(&mut rest).ok()?;
    let epoch = u64::tls_deserialize(&mut rest).ok()?;
    let content_type = u8::tls_deserialize(&mut rest).ok()?;
    let authenticated_data = VLBytes::tls_deserialize(&mut rest).ok()?;
    let encrypted_sender_data = VLBytes::tls_deserialize(&mut rest).ok()?;
    let ciphertext = VLBytes::tls_deserialize(&mut rest).ok()?;
    if !rest.is_empty() {
        return None;
    }
    Some(PrivateFraming {
        group_id: group_id.into(),
        epoch,
        content_type,
        authenticated_data: authenticated_data.into(),
        encrypted_sender_data: encrypted_sender_data.into(),
        ciphertext: ciphertext.into(),
    })
}

/// `ExpandWithLabel(secret, label, context, length)` (RFC 9420 section 8).
fn expand_with_label(
    crypto: &impl OpenMlsCrypto,
    suite: Ciphersuite,
    secret: &[u8],
    label: &str,
    context: &[u8],
    length: usize,
) -> Option<Zeroizing<Vec<u8>>> {
    let mut info = Vec::with_capacity(2 + 1 + 8 + label.len() + 1 + context.len());
    u16::try_from(length).ok()?.tls_serialize(&mut info).ok()?;
    VLBytes::new(format!("MLS 1.0 {label}").into_bytes())
        .tls_serialize(&mut info)
        .ok()?;
    VLBytes::new(context.to_vec())
        .tls_serialize(&mut info)
        .ok()?;
    let out = crypto
        .hkdf_expand(suite.hash_algorithm(), secret, &info, length)
        .ok()?;
    Some(Zeroizing::new(out.as_slice().to_vec()))
}

/// Decrypts the sender data of `framing` with the epoch's `sender_data_secret`;
/// `None` when it does not open (another epoch's secret, or tampered bytes).
pub fn decrypt(
    crypto: &impl OpenMlsCrypto,
    suite: Ciphersuite,
    sender_data_secret: &[u8],
    framing: &PrivateFraming,
) -> Option<SenderData> {
    let sample = &framing.ciphertext[..framing.ciphertext.len().min(suite.hash_length())];
    let key = expand_with_label(
        crypto,
        suite,
        sender_data_secret,
        "key",
        sample,
        suite.aead_key_length(),
    )?;
    let nonce = expand_with_label(
        crypto,
        suite,
        sender_data_secret,
        "nonce",
        sample,
        suite.aead_nonce_length(),
    )?;
    let aad = sender_data_aad(framing)?;
    let plain = Zeroizing::new(
        crypto
            .aead_decrypt(
                suite.aead_algorithm(),
                &key,
                &framing.encrypted_sender_data,
                &nonce,
                &aad,
            )
            .ok()?,
    );
    read_sender_data(plain.as_slice().try_into().ok()?)
}

/// `SenderDataAAD` (RFC 9420 section 6.3.2): the group id, the epoch and the content
/// type of the PrivateMessage.
fn sender_data_aad(framing: &PrivateFraming) -> Option<Vec<u8>> {
    let mut aad = Vec::with_capacity(framing.group_id.len() + 16);
    VLBytes::new(framing.group_id.clone())
        .tls_serialize(&mut aad)
        .ok()?;
    aad.extend_from_slice(&framing.epoch.to_be_bytes());
    aad.push(framing.content_type);
    Some(aad)
}

/// `SenderData`: uint32 leaf_index, uint32 generation, opaque reuse_guard[4].
fn read_sender_data(fields: &[u8; SENDER_DATA_LEN]) -> Option<SenderData> {
    Some(SenderData {
        leaf_index: u32::from_be_bytes([fields[0], fields[1], fields[2], fields[3]]),
        generation: u32::from_be_bytes([fields[4], fields[5], fields[6], fields[7]]),
    })
}

/// The length of a `SenderData` in the clear.
const SENDER_DATA_LEN: usize = 12;

/// Twelve-byte AEAD operations noted in one watch at most: a message's processing
/// opens one sender data, a send seals one.
const MAX_NOTED: usize = 8;

/// One AEAD operation on twelve bytes that openmls made on this thread while a watch
/// was open: the associated data, the sealed bytes (ciphertext and tag) and the plain.
struct Noted {
    aad: Vec<u8>,
    sealed: Vec<u8>,
    plain: [u8; SENDER_DATA_LEN],
}

thread_local! {
    /// The operations of the watch open on this thread, if any.
    static WATCHED: std::cell::RefCell<Option<Vec<Noted>>> = const { std::cell::RefCell::new(None) };
}

/// Our [`super::crypto::Crypto`] calls this after every AEAD operation it did: one on
/// twelve bytes while a watch is open on this thread is kept.
pub(crate) fn note(aad: &[u8], sealed: &[u8], plain: &[u8]) {
    let Ok(plain) = <[u8; SENDER_DATA_LEN]>::try_from(plain) else {
        return;
    };
    WATCHED.with(|w| {
        if let Some(noted) = w.borrow_mut().as_mut() {
            if noted.len() < MAX_NOTED {
                noted.push(Noted {
                    aad: aad.to_vec(),
                    sealed: sealed.to_vec(),
                    plain,
                });
            }
        }
    });
}

/// The sender data openmls opened (or sealed) while a watch was open.
///
/// Why it may stand for our own decryption ([`decrypt`]): openmls opens a
/// PrivateMessage's sender data with the key and nonce the RFC derives from the
/// epoch's sender-data secret, as we would, and picks the sender's leaf and ratchet
/// generation from what it read; an AEAD open that succeeded, during this very
/// message's processing, on exactly its `encrypted_sender_data` under exactly its
/// `SenderDataAAD`, *is* that reading. Nothing else openmls opens or seals is twelve
/// bytes long (a content carries at least its signature). So reading it here is the
/// same check at no second cost (two `ExpandWithLabel` and an AEAD open, about 3% of
/// opening a 2 KiB application message); when no noted operation matches (another
/// openmls, say), the caller decrypts as before.
pub(crate) struct Watched(Vec<Noted>);

impl Watched {
    /// The sender data of `framing`, if an operation of the watch was on exactly its
    /// encrypted sender data and associated data.
    pub(crate) fn sender_data(&self, framing: &PrivateFraming) -> Option<SenderData> {
        let aad = sender_data_aad(framing)?;
        self.0
            .iter()
            .find(|n| n.sealed == framing.encrypted_sender_data && n.aad == aad)
            .and_then(|n| read_sender_data(&n.plain))
    }
}

/// Runs `f` with a watch open on this thread: what openmls sealed or opened of twelve
/// bytes meanwhile comes back with its result. The watch before, if any, is restored,
/// unwinding or not.
pub(crate) fn watch<T>(f: impl FnOnce() -> T) -> (T, Watched) {
    struct Restore(Option<Vec<Noted>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            WATCHED.with(|w| *w.borrow_mut() = before);
        }
    }
    let restore = Restore(WATCHED.with(|w| w.borrow_mut().replace(Vec::new())));
    let out = f();
    let noted = WATCHED.with(|w| w.borrow_mut().take()).unwrap_or_default();
    drop(restore);
    (out, Watched(noted))
}

/// A secret as openmls stores it (`{"secret": {"value": {"vec": [...]}}}`).
#[derive(Serialize, Deserialize)]
struct StoredSecret {
    secret: StoredValue,
}

#[derive(Serialize, Deserialize)]
struct StoredValue {
    value: StoredBytes,
}

#[derive(Serialize, Deserialize)]
struct StoredBytes {
    vec: Vec<u8>,
}

impl Drop for StoredBytes {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.vec);
    }
}

/// The one field of an epoch's message secrets read here.
#[derive(Serialize, Deserialize)]
struct EpochSecrets {
    sender_data_secret: StoredSecret,
}

#[derive(Serialize, Deserialize)]
struct PastEpoch {
    epoch: u64,
    message_secrets: EpochSecrets,
}

/// openmls' `MessageSecretsStore` as far as it is read here: the current epoch's
/// secrets and the kept past epochs'. Never written back.
#[derive(Serialize, Deserialize)]
struct SecretsStore {
    #[serde(default)]
    past_epoch_trees: Vec<PastEpoch>,
    message_secrets: EpochSecrets,
}

impl Entity<CURRENT_VERSION> for SecretsStore {}
impl traits::MessageSecrets<CURRENT_VERSION> for SecretsStore {}

/// The sender-data secret of `epoch` in group `group_id`, whose current epoch is
/// `current`, from openmls' storage; `None` when that epoch's secrets are not kept.
pub(crate) fn sender_data_secret<S: StorageProvider<CURRENT_VERSION>>(
    storage: &S,
    group_id: &GroupId,
    epoch: u64,
    current: u64,
) -> Result<Option<Zeroizing<Vec<u8>>>, MlsError> {
    let store: Option<SecretsStore> = storage
        .message_secrets(group_id)
        .map_err(|_| MlsError::State("the group's message secrets do not read".into()))?;
    let Some(store) = store else {
        return Ok(None);
    };
    let secrets = if epoch == current {
        Some(&store.message_secrets)
    } else {
        store
            .past_epoch_trees
            .iter()
            .find(|p| p.epoch == epoch)
            .map(|p| &p.message_secrets)
    };
    Ok(secrets.map(|s| Zeroizing::new(s.sender_data_secret.secret.value.vec.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_reads_only_whole_private_messages() {
        let mut m = vec![0, 1, 0, 2];
        VLBytes::new(b"group".to_vec())
            .tls_serialize(&mut m)
            .unwrap();
        m.extend_from_slice(&7u64.to_be_bytes());
        m.push(1);
        for field in [&[0u8; 8][..], &[9; 28], &[5; 40]] {
            VLBytes::new(field.to_vec()).tls_serialize(&mut m).unwrap();
        }
        let f = private_framing(&m).unwrap();
        assert_eq!(f.group_id, b"group");
        assert_eq!((f.epoch, f.content_type), (7, 1));
        assert_eq!(f.authenticated_data, [0; 8]);
        assert_eq!(f.encrypted_sender_data, [9; 28]);
        assert_eq!(f.ciphertext, [5; 40]);
        let mut trailing = m.clone();
        trailing.push(0);
        assert_eq!(private_framing(&trailing), None);
        for cut in 0..m.len() {
            assert_eq!(private_framing(&m[..cut]), None, "cut at {cut}");
        }
        let mut public = m.clone();
        public[3] = 1;
        assert_eq!(private_framing(&public), None);
    }

    /// What openmls opened (and sealed) of a message's sender data, as a watch sees it
    /// through our crypto provider, is what our own decryption reads, message after
    /// message; a framing whose encrypted sender data or associated data differ in
    /// one byte finds nothing, and nothing is noted outside a watch.
    #[test]
    fn the_sender_data_openmls_opens_is_the_one_we_decrypt() {
        use crate::mls::state::State;
        use crate::mls::CIPHERSUITE;
        use openmls::prelude::*;
        use openmls_basic_credential::SignatureKeyPair;

        let member = |state: &State, name: &str| {
            let signer = SignatureKeyPair::new(CIPHERSUITE.signature_algorithm()).unwrap();
            signer.store(state.provider.storage()).unwrap();
            let credential = CredentialWithKey {
                credential: BasicCredential::new(name.as_bytes().to_vec()).into(),
                signature_key: signer.public().into(),
            };
            (signer, credential)
        };
        let (alice, bob) = (State::in_memory().unwrap(), State::in_memory().unwrap());
        let ((sa, ca), (sb, cb)) = (member(&alice, "alice"), member(&bob, "bob"));
        let config = MlsGroupCreateConfig::builder()
            .ciphersuite(CIPHERSUITE)
            .use_ratchet_tree_extension(true)
            .build();
        let mut ga = MlsGroup::new(&alice.provider, &sa, &config, ca).unwrap();
        let kp = KeyPackage::builder()
            .build(CIPHERSUITE, &bob.provider, &sb, cb)
            .unwrap();
        let (_, welcome, _) = ga
            .add_members(&alice.provider, &sa, &[kp.key_package().clone()])
            .unwrap();
        ga.merge_pending_commit(&alice.provider).unwrap();
        let welcome = MlsMessageIn::tls_deserialize_exact(welcome.to_bytes().unwrap()).unwrap();
        let MlsMessageBodyIn::Welcome(welcome) = welcome.extract() else {
            panic!("a Welcome")
        };
        let mut gb =
            StagedWelcome::new_from_welcome(&bob.provider, config.join_config(), welcome, None)
                .unwrap()
                .into_group(&bob.provider)
                .unwrap();
        let mut earlier: Option<PrivateFraming> = None;
        for n in 0..3u32 {
            let (sent, sealed) =
                watch(|| ga.create_message(&alice.provider, &sa, b"hello").unwrap());
            let bytes = sent.to_bytes().unwrap();
            let framing = private_framing(&bytes).unwrap();
            let message = MlsMessageIn::tls_deserialize_exact(&bytes).unwrap();
            let (processed, opened) = watch(|| {
                gb.process_message(&bob.provider, message.try_into_protocol_message().unwrap())
                    .unwrap()
            });
            assert!(matches!(
                processed.into_content(),
                ProcessedMessageContent::ApplicationMessage(_)
            ));
            let epoch = gb.epoch().as_u64();
            let secret = sender_data_secret(bob.provider.storage(), gb.group_id(), epoch, epoch)
                .unwrap()
                .unwrap();
            let ours = decrypt(bob.provider.crypto(), CIPHERSUITE, &secret, &framing).unwrap();
            assert_eq!((ours.leaf_index, ours.generation), (0, n));
            assert_eq!(
                opened.sender_data(&framing),
                Some(ours),
                "opened, message {n}"
            );
            assert_eq!(
                sealed.sender_data(&framing),
                Some(ours),
                "sealed, message {n}"
            );
            // The watch of another message does not speak for this one.
            if let Some(before) = earlier.replace(framing.clone()) {
                assert_eq!(opened.sender_data(&before), None);
            }
            let mut other = framing.clone();
            other.encrypted_sender_data[0] ^= 1;
            assert_eq!(opened.sender_data(&other), None);
            let mut other = framing.clone();
            other.content_type = 2;
            assert_eq!(opened.sender_data(&other), None);
            let mut other = framing.clone();
            other.epoch += 1;
            assert_eq!(opened.sender_data(&other), None);
        }
        // Outside a watch nothing is kept, and a watch inside a watch gives the outer
        // one back what it had.
        let (_, outer) = watch(|| {
            note(b"aad", b"sealed", &[0; SENDER_DATA_LEN]);
            let ((), inner) = watch(|| {});
            assert!(inner.0.is_empty());
        });
        assert_eq!(outer.0.len(), 1);
        ga.create_message(&alice.provider, &sa, b"unwatched")
            .unwrap();
        let ((), after) = watch(|| {});
        assert!(after.0.is_empty());
    }
}
