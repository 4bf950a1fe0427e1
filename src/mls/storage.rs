//! openmls' storage: `openmls_sqlite_storage`'s tables, rows and encoding unchanged (a
//! state file is read the same by either; the message secrets' JSON text is padded
//! with spaces, which JSON allows), with the one write openmls makes for every message
//! done cheaper.
//!
//! Every application message, sent or received, advances a sender ratchet, and
//! openmls then writes the whole message-secrets store (`write_message_secrets`).
//! `openmls_sqlite_storage` does that with `INSERT OR REPLACE`, preparing the
//! statement on every call. The row is several KB in a busy group (a decryption
//! ratchet keeps an entry for each generation it passed, up to the out-of-order
//! tolerance) and spills into overflow pages, which `REPLACE` frees and allocates
//! again each time. Here the same row (the key and the value in our [`JsonCodec`],
//! the data type `message_secrets`, provider version 1) is updated in place, or
//! inserted when it is not there yet, on statements from rusqlite's cache: the
//! write's instructions fall to a third, and a message's seal or open takes 15 to 20
//! µs less (BENCHMARKS.md, MLS, "Where an open's time goes"). Everything else is
//! delegated: those calls come once per Commit, join or group load.
//!
//! Why not a provider of our own throughout: 53 methods of the same SQL, each a new
//! chance to lose a secret or an epoch, for no gain outside the per-message write.
//! The delegations are one line each, expanded by a macro of this module
//! ([`delegated`]); the draft features of `openmls_traits` (`extensions-draft`,
//! `virtual-clients-draft`) add methods this build does not enable, like
//! `openmls_sqlite_storage`'s default features.

use std::rc::Rc;

use openmls_sqlite_storage::{Codec, SqliteStorageProvider};
use openmls_traits::storage::{traits, StorageProvider, CURRENT_VERSION};
use rusqlite::Connection;

use super::state::JsonCodec;

/// The row `openmls_sqlite_storage` writes for `write_message_secrets` (by `INSERT OR
/// REPLACE`): updated in place when it is there; inserted otherwise (`OR REPLACE`
/// as theirs, though the update just found no row).
const UPDATE_MESSAGE_SECRETS: &str = "UPDATE openmls_group_data SET group_data = ?2, provider_version = 1 WHERE group_id = ?1 AND data_type = 'message_secrets'";
const INSERT_MESSAGE_SECRETS: &str = "INSERT OR REPLACE INTO openmls_group_data (group_id, data_type, group_data, provider_version) VALUES (?1, 'message_secrets', ?2, 1)";

/// The message secrets' text is padded to a multiple of this many bytes, so that most
/// writes keep the row's length ([`JsonCodec::to_padded_vec`]); a few hundred bytes
/// of a value of several KB.
const SECRETS_BUCKET: usize = 256;

/// openmls' storage on the state's connection ([`super::state`]).
pub(crate) struct Storage {
    conn: Rc<Connection>,
    inner: SqliteStorageProvider<JsonCodec, Rc<Connection>>,
    /// The buffer to serialize the next message secrets into: the last ones' length
    /// and a bucket more.
    secrets_room: std::cell::Cell<usize>,
}

impl Storage {
    pub(crate) fn new(conn: Rc<Connection>) -> Storage {
        Storage {
            inner: SqliteStorageProvider::new(conn.clone()),
            conn,
            secrets_room: std::cell::Cell::new(2048),
        }
    }
}

/// A codec failure as `openmls_sqlite_storage` reports it.
fn encoding(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

/// Methods forwarded to `openmls_sqlite_storage` as they are. In the list,
/// `fn name<T: Trait>(arg: Type) -> Ok;` stands for the trait's `fn name<T:
/// traits::Trait<CURRENT_VERSION>>(&self, arg: Type) -> Result<Ok, Self::Error>`.
macro_rules! delegated {
    ($(fn $name:ident<$($g:ident: $bound:ident),+>($($arg:ident: $ty:ty),*) -> $ok:ty;)*) => {
        $(
            fn $name<$($g: traits::$bound<CURRENT_VERSION>),+>(
                &self,
                $($arg: $ty),*
            ) -> Result<$ok, Self::Error> {
                self.inner.$name::<$($g),+>($($arg),*)
            }
        )*
    };
}

impl StorageProvider<CURRENT_VERSION> for Storage {
    type Error = rusqlite::Error;

    fn write_message_secrets<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        MessageSecrets: traits::MessageSecrets<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        message_secrets: &MessageSecrets,
    ) -> Result<(), Self::Error> {
        let key = JsonCodec::to_vec(group_id).map_err(encoding)?;
        // The secrets' encoding is wiped when written, as SQLite's copy is not ours to.
        let room = self.secrets_room.get();
        let value =
            JsonCodec::to_padded_vec(message_secrets, SECRETS_BUCKET, room).map_err(encoding)?;
        self.secrets_room.set(value.len() + SECRETS_BUCKET);
        let row = rusqlite::params![key, &value[..]];
        if self
            .conn
            .prepare_cached(UPDATE_MESSAGE_SECRETS)?
            .execute(row)?
            == 0
        {
            self.conn
                .prepare_cached(INSERT_MESSAGE_SECRETS)?
                .execute(row)?;
        }
        Ok(())
    }

    delegated! {
        fn write_mls_join_config<GroupId: GroupId, MlsGroupJoinConfig: MlsGroupJoinConfig>(group_id: &GroupId, config: &MlsGroupJoinConfig) -> ();
        fn append_own_leaf_node<GroupId: GroupId, LeafNode: LeafNode>(group_id: &GroupId, leaf_node: &LeafNode) -> ();
        fn queue_proposal<GroupId: GroupId, ProposalRef: ProposalRef, QueuedProposal: QueuedProposal>(group_id: &GroupId, proposal_ref: &ProposalRef, proposal: &QueuedProposal) -> ();
        fn write_tree<GroupId: GroupId, TreeSync: TreeSync>(group_id: &GroupId, tree: &TreeSync) -> ();
        fn write_interim_transcript_hash<GroupId: GroupId, InterimTranscriptHash: InterimTranscriptHash>(group_id: &GroupId, interim_transcript_hash: &InterimTranscriptHash) -> ();
        fn write_context<GroupId: GroupId, GroupContext: GroupContext>(group_id: &GroupId, group_context: &GroupContext) -> ();
        fn write_confirmation_tag<GroupId: GroupId, ConfirmationTag: ConfirmationTag>(group_id: &GroupId, confirmation_tag: &ConfirmationTag) -> ();
        fn write_group_state<GroupState: GroupState, GroupId: GroupId>(group_id: &GroupId, group_state: &GroupState) -> ();
        fn write_resumption_psk_store<GroupId: GroupId, ResumptionPskStore: ResumptionPskStore>(group_id: &GroupId, resumption_psk_store: &ResumptionPskStore) -> ();
        fn write_own_leaf_index<GroupId: GroupId, LeafNodeIndex: LeafNodeIndex>(group_id: &GroupId, own_leaf_index: &LeafNodeIndex) -> ();
        fn write_group_epoch_secrets<GroupId: GroupId, GroupEpochSecrets: GroupEpochSecrets>(group_id: &GroupId, group_epoch_secrets: &GroupEpochSecrets) -> ();
        fn write_signature_key_pair<SignaturePublicKey: SignaturePublicKey, SignatureKeyPair: SignatureKeyPair>(public_key: &SignaturePublicKey, signature_key_pair: &SignatureKeyPair) -> ();
        fn write_encryption_key_pair<EncryptionKey: EncryptionKey, HpkeKeyPair: HpkeKeyPair>(public_key: &EncryptionKey, key_pair: &HpkeKeyPair) -> ();
        fn write_encryption_epoch_key_pairs<GroupId: GroupId, EpochKey: EpochKey, HpkeKeyPair: HpkeKeyPair>(group_id: &GroupId, epoch: &EpochKey, leaf_index: u32, key_pairs: &[HpkeKeyPair]) -> ();
        fn write_key_package<HashReference: HashReference, KeyPackage: KeyPackage>(hash_ref: &HashReference, key_package: &KeyPackage) -> ();
        fn write_psk<PskId: PskId, PskBundle: PskBundle>(psk_id: &PskId, psk: &PskBundle) -> ();
        fn mls_group_join_config<GroupId: GroupId, MlsGroupJoinConfig: MlsGroupJoinConfig>(group_id: &GroupId) -> Option<MlsGroupJoinConfig>;
        fn own_leaf_nodes<GroupId: GroupId, LeafNode: LeafNode>(group_id: &GroupId) -> Vec<LeafNode>;
        fn queued_proposal_refs<GroupId: GroupId, ProposalRef: ProposalRef>(group_id: &GroupId) -> Vec<ProposalRef>;
        fn queued_proposals<GroupId: GroupId, ProposalRef: ProposalRef, QueuedProposal: QueuedProposal>(group_id: &GroupId) -> Vec<(ProposalRef, QueuedProposal)>;
        fn tree<GroupId: GroupId, TreeSync: TreeSync>(group_id: &GroupId) -> Option<TreeSync>;
        fn group_context<GroupId: GroupId, GroupContext: GroupContext>(group_id: &GroupId) -> Option<GroupContext>;
        fn interim_transcript_hash<GroupId: GroupId, InterimTranscriptHash: InterimTranscriptHash>(group_id: &GroupId) -> Option<InterimTranscriptHash>;
        fn confirmation_tag<GroupId: GroupId, ConfirmationTag: ConfirmationTag>(group_id: &GroupId) -> Option<ConfirmationTag>;
        fn group_state<GroupState: GroupState, GroupId: GroupId>(group_id: &GroupId) -> Option<GroupState>;
        fn message_secrets<GroupId: GroupId, MessageSecrets: MessageSecrets>(group_id: &GroupId) -> Option<MessageSecrets>;
        fn resumption_psk_store<GroupId: GroupId, ResumptionPskStore: ResumptionPskStore>(group_id: &GroupId) -> Option<ResumptionPskStore>;
        fn own_leaf_index<GroupId: GroupId, LeafNodeIndex: LeafNodeIndex>(group_id: &GroupId) -> Option<LeafNodeIndex>;
        fn group_epoch_secrets<GroupId: GroupId, GroupEpochSecrets: GroupEpochSecrets>(group_id: &GroupId) -> Option<GroupEpochSecrets>;
        fn signature_key_pair<SignaturePublicKey: SignaturePublicKey, SignatureKeyPair: SignatureKeyPair>(public_key: &SignaturePublicKey) -> Option<SignatureKeyPair>;
        fn encryption_key_pair<HpkeKeyPair: HpkeKeyPair, EncryptionKey: EncryptionKey>(public_key: &EncryptionKey) -> Option<HpkeKeyPair>;
        fn encryption_epoch_key_pairs<GroupId: GroupId, EpochKey: EpochKey, HpkeKeyPair: HpkeKeyPair>(group_id: &GroupId, epoch: &EpochKey, leaf_index: u32) -> Vec<HpkeKeyPair>;
        fn key_package<KeyPackageRef: HashReference, KeyPackage: KeyPackage>(hash_ref: &KeyPackageRef) -> Option<KeyPackage>;
        fn psk<PskBundle: PskBundle, PskId: PskId>(psk_id: &PskId) -> Option<PskBundle>;
        fn remove_proposal<GroupId: GroupId, ProposalRef: ProposalRef>(group_id: &GroupId, proposal_ref: &ProposalRef) -> ();
        fn delete_own_leaf_nodes<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_group_config<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_tree<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_confirmation_tag<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_group_state<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_context<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_interim_transcript_hash<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_message_secrets<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_all_resumption_psk_secrets<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_own_leaf_index<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn delete_group_epoch_secrets<GroupId: GroupId>(group_id: &GroupId) -> ();
        fn clear_proposal_queue<GroupId: GroupId, ProposalRef: ProposalRef>(group_id: &GroupId) -> ();
        fn delete_signature_key_pair<SignaturePublicKey: SignaturePublicKey>(public_key: &SignaturePublicKey) -> ();
        fn delete_encryption_key_pair<EncryptionKey: EncryptionKey>(public_key: &EncryptionKey) -> ();
        fn delete_encryption_epoch_key_pairs<GroupId: GroupId, EpochKey: EpochKey>(group_id: &GroupId, epoch: &EpochKey, leaf_index: u32) -> ();
        fn delete_key_package<KeyPackageRef: HashReference>(hash_ref: &KeyPackageRef) -> ();
        fn delete_psk<PskKey: PskId>(psk_id: &PskKey) -> ();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmls::prelude::GroupId;
    use openmls_traits::storage::Entity;
    use serde::{Deserialize, Serialize};

    /// Stands in for openmls' message-secrets store (which openmls does not export):
    /// bytes, as openmls' secrets are, and some structure.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Secrets {
        epoch: u64,
        secret: Vec<u8>,
        leaves: Vec<Option<Vec<u8>>>,
        note: String,
    }
    impl Entity<CURRENT_VERSION> for Secrets {}
    impl traits::MessageSecrets<CURRENT_VERSION> for Secrets {}

    fn secrets(epoch: u64) -> Secrets {
        Secrets {
            epoch,
            secret: (0..=255u8).rev().chain(0..=255).collect(),
            leaves: vec![None, Some(vec![epoch as u8; 3]), Some(vec![])],
            note: "quote \" backslash \\ newline \n é \u{1}".into(),
        }
    }

    fn database() -> Rc<Connection> {
        let mut conn = Connection::open_in_memory().unwrap();
        SqliteStorageProvider::<JsonCodec, &mut Connection>::new(&mut conn)
            .run_migrations()
            .unwrap();
        Rc::new(conn)
    }

    fn rows(conn: &Connection) -> Vec<(i64, Vec<u8>, String, Vec<u8>)> {
        let mut s = conn
            .prepare("SELECT provider_version, group_id, data_type, group_data FROM openmls_group_data ORDER BY group_id, data_type")
            .unwrap();
        let rows = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    /// Our rows as `openmls_sqlite_storage`'s, but the message secrets' text padded
    /// with spaces to a multiple of [`SECRETS_BUCKET`] bytes.
    fn unpadded(
        rows: Vec<(i64, Vec<u8>, String, Vec<u8>)>,
    ) -> Vec<(i64, Vec<u8>, String, Vec<u8>)> {
        rows.into_iter()
            .map(|(version, group, kind, mut data)| {
                if kind == "message_secrets" {
                    assert_eq!(data.len() % SECRETS_BUCKET, 0, "padded to the bucket");
                    let text = data.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
                    assert!(
                        data.len() - text < SECRETS_BUCKET,
                        "padded by less than a bucket"
                    );
                    data.truncate(text);
                }
                (version, group, kind, data)
            })
            .collect()
    }

    /// Our write leaves the rows `openmls_sqlite_storage`'s leaves (the message
    /// secrets' text padded with spaces), through a first write (insert), a rewrite
    /// (update in place) and two groups side by side; and each reads the other's.
    #[test]
    fn message_secrets_rows_are_openmls_sqlite_storages() {
        let (a, b) = (
            GroupId::from_slice(b"group a"),
            GroupId::from_slice(b"\x00b"),
        );
        let ours_db = database();
        let theirs_db = database();
        let ours = Storage::new(ours_db.clone());
        let theirs = SqliteStorageProvider::<JsonCodec, Rc<Connection>>::new(theirs_db.clone());
        let steps = [
            (&a, secrets(1)),
            (&b, secrets(7)),
            (&a, secrets(2)),
            (&a, secrets(3)),
        ];
        for (group, value) in &steps {
            ours.write_message_secrets(*group, value).unwrap();
            theirs.write_message_secrets(*group, value).unwrap();
            assert_eq!(unpadded(rows(&ours_db)), rows(&theirs_db));
        }
        assert_eq!(rows(&ours_db).len(), 2);
        let read: Option<Secrets> = theirs.message_secrets(&a).unwrap();
        assert_eq!(read, Some(secrets(3)));
        // Each provider reads what the other wrote.
        let cross = SqliteStorageProvider::<JsonCodec, Rc<Connection>>::new(ours_db.clone());
        assert_eq!(
            cross.message_secrets::<_, Secrets>(&b).unwrap(),
            Some(secrets(7))
        );
        let cross = Storage::new(theirs_db.clone());
        assert_eq!(
            cross.message_secrets::<_, Secrets>(&a).unwrap(),
            Some(secrets(3))
        );
        // Deleting (delegated) removes what our write put there.
        ours.delete_message_secrets(&a).unwrap();
        assert_eq!(ours.message_secrets::<_, Secrets>(&a).unwrap(), None);
        assert_eq!(
            ours.message_secrets::<_, Secrets>(&b).unwrap(),
            Some(secrets(7))
        );
    }

    /// Message secrets whose text grows by a few bytes keep the row's length (so that
    /// SQLite overwrites the row in place), until the text outgrows the bucket; what
    /// is read back is what was written.
    #[test]
    fn message_secrets_keep_their_length_within_a_bucket() {
        let db = database();
        let ours = Storage::new(db.clone());
        let group = GroupId::from_slice(b"group");
        let stored = || -> usize {
            db.query_row(
                "SELECT length(group_data) FROM openmls_group_data WHERE data_type = 'message_secrets'",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        let mut value = secrets(1);
        value.note.clear();
        let text = JsonCodec::to_vec(&value).unwrap().len();
        let mut lengths = Vec::new();
        for extra in [
            0,
            1,
            5,
            SECRETS_BUCKET - 1 - text % SECRETS_BUCKET,
            SECRETS_BUCKET,
        ] {
            value.note = "n".repeat(extra);
            ours.write_message_secrets(&group, &value).unwrap();
            assert_eq!(
                ours.message_secrets::<_, Secrets>(&group).unwrap().as_ref(),
                Some(&value)
            );
            lengths.push(stored());
        }
        let first = text.div_ceil(SECRETS_BUCKET) * SECRETS_BUCKET;
        assert_eq!(
            lengths,
            [first, first, first, first, first + SECRETS_BUCKET]
        );
    }

    /// The codec's text is `serde_json::to_vec`'s, byte for byte: every byte value,
    /// and the other kinds of values openmls stores.
    #[test]
    fn codec_writes_serde_jsons_text() {
        let value = (
            secrets(9),
            [0u16, 255, 256, u16::MAX],
            (-1i64, u64::MAX, 0.5f64, true, ()),
            std::collections::BTreeMap::from([("k", Some(1u8)), ("n", None)]),
        );
        assert_eq!(
            JsonCodec::to_vec(&value).unwrap(),
            serde_json::to_vec(&value).unwrap()
        );
        for v in 0..=255u8 {
            assert_eq!(JsonCodec::to_vec(&v).unwrap(), v.to_string().into_bytes());
        }
    }
}
