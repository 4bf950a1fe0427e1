//! openmls' storage: `openmls_sqlite_storage`'s tables, rows and encoding unchanged (a
//! state file is read and written the same by either), with the one write openmls
//! makes for every message done cheaper.
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
//! µs less (BENCHMARKS.md, "openmls' per-message write in place"). Everything else is
//! delegated: those calls come once per Commit, join or group load.
//!
//! Why not a provider of our own throughout: 53 methods of the same SQL, each a new
//! chance to lose a secret or an epoch, for no gain outside the per-message write.
//! The delegations are written out (the trait's generic methods cannot be forwarded
//! by a macro of the crates we use); the draft features of `openmls_traits`
//! (`extensions-draft`, `virtual-clients-draft`) add methods this build does not
//! enable, like `openmls_sqlite_storage`'s default features.

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

/// openmls' storage on the state's connection ([`super::state`]).
pub(crate) struct Storage {
    conn: Rc<Connection>,
    inner: SqliteStorageProvider<JsonCodec, Rc<Connection>>,
}

impl Storage {
    pub(crate) fn new(conn: Rc<Connection>) -> Storage {
        Storage {
            inner: SqliteStorageProvider::new(conn.clone()),
            conn,
        }
    }
}

/// A codec failure as `openmls_sqlite_storage` reports it.
fn encoding(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
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
        let value = zeroize::Zeroizing::new(JsonCodec::to_vec(message_secrets).map_err(encoding)?);
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

    fn write_mls_join_config<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        MlsGroupJoinConfig: traits::MlsGroupJoinConfig<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        config: &MlsGroupJoinConfig,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_mls_join_config::<GroupId, MlsGroupJoinConfig>(group_id, config)
    }

    fn append_own_leaf_node<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        LeafNode: traits::LeafNode<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        leaf_node: &LeafNode,
    ) -> Result<(), Self::Error> {
        self.inner
            .append_own_leaf_node::<GroupId, LeafNode>(group_id, leaf_node)
    }

    fn queue_proposal<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ProposalRef: traits::ProposalRef<CURRENT_VERSION>,
        QueuedProposal: traits::QueuedProposal<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        proposal_ref: &ProposalRef,
        proposal: &QueuedProposal,
    ) -> Result<(), Self::Error> {
        self.inner
            .queue_proposal::<GroupId, ProposalRef, QueuedProposal>(
                group_id,
                proposal_ref,
                proposal,
            )
    }

    fn write_tree<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        TreeSync: traits::TreeSync<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        tree: &TreeSync,
    ) -> Result<(), Self::Error> {
        self.inner.write_tree::<GroupId, TreeSync>(group_id, tree)
    }

    fn write_interim_transcript_hash<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        InterimTranscriptHash: traits::InterimTranscriptHash<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        interim_transcript_hash: &InterimTranscriptHash,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_interim_transcript_hash::<GroupId, InterimTranscriptHash>(
                group_id,
                interim_transcript_hash,
            )
    }

    fn write_context<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        GroupContext: traits::GroupContext<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        group_context: &GroupContext,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_context::<GroupId, GroupContext>(group_id, group_context)
    }

    fn write_confirmation_tag<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ConfirmationTag: traits::ConfirmationTag<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        confirmation_tag: &ConfirmationTag,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_confirmation_tag::<GroupId, ConfirmationTag>(group_id, confirmation_tag)
    }

    fn write_group_state<
        GroupState: traits::GroupState<CURRENT_VERSION>,
        GroupId: traits::GroupId<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        group_state: &GroupState,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_group_state::<GroupState, GroupId>(group_id, group_state)
    }

    fn write_resumption_psk_store<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ResumptionPskStore: traits::ResumptionPskStore<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        resumption_psk_store: &ResumptionPskStore,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_resumption_psk_store::<GroupId, ResumptionPskStore>(
                group_id,
                resumption_psk_store,
            )
    }

    fn write_own_leaf_index<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        LeafNodeIndex: traits::LeafNodeIndex<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        own_leaf_index: &LeafNodeIndex,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_own_leaf_index::<GroupId, LeafNodeIndex>(group_id, own_leaf_index)
    }

    fn write_group_epoch_secrets<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        GroupEpochSecrets: traits::GroupEpochSecrets<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        group_epoch_secrets: &GroupEpochSecrets,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_group_epoch_secrets::<GroupId, GroupEpochSecrets>(group_id, group_epoch_secrets)
    }

    fn write_signature_key_pair<
        SignaturePublicKey: traits::SignaturePublicKey<CURRENT_VERSION>,
        SignatureKeyPair: traits::SignatureKeyPair<CURRENT_VERSION>,
    >(
        &self,
        public_key: &SignaturePublicKey,
        signature_key_pair: &SignatureKeyPair,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_signature_key_pair::<SignaturePublicKey, SignatureKeyPair>(
                public_key,
                signature_key_pair,
            )
    }

    fn write_encryption_key_pair<
        EncryptionKey: traits::EncryptionKey<CURRENT_VERSION>,
        HpkeKeyPair: traits::HpkeKeyPair<CURRENT_VERSION>,
    >(
        &self,
        public_key: &EncryptionKey,
        key_pair: &HpkeKeyPair,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_encryption_key_pair::<EncryptionKey, HpkeKeyPair>(public_key, key_pair)
    }

    fn write_encryption_epoch_key_pairs<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        EpochKey: traits::EpochKey<CURRENT_VERSION>,
        HpkeKeyPair: traits::HpkeKeyPair<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        epoch: &EpochKey,
        leaf_index: u32,
        key_pairs: &[HpkeKeyPair],
    ) -> Result<(), Self::Error> {
        self.inner
            .write_encryption_epoch_key_pairs::<GroupId, EpochKey, HpkeKeyPair>(
                group_id, epoch, leaf_index, key_pairs,
            )
    }

    fn write_key_package<
        HashReference: traits::HashReference<CURRENT_VERSION>,
        KeyPackage: traits::KeyPackage<CURRENT_VERSION>,
    >(
        &self,
        hash_ref: &HashReference,
        key_package: &KeyPackage,
    ) -> Result<(), Self::Error> {
        self.inner
            .write_key_package::<HashReference, KeyPackage>(hash_ref, key_package)
    }

    fn write_psk<
        PskId: traits::PskId<CURRENT_VERSION>,
        PskBundle: traits::PskBundle<CURRENT_VERSION>,
    >(
        &self,
        psk_id: &PskId,
        psk: &PskBundle,
    ) -> Result<(), Self::Error> {
        self.inner.write_psk::<PskId, PskBundle>(psk_id, psk)
    }

    fn mls_group_join_config<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        MlsGroupJoinConfig: traits::MlsGroupJoinConfig<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<MlsGroupJoinConfig>, Self::Error> {
        self.inner
            .mls_group_join_config::<GroupId, MlsGroupJoinConfig>(group_id)
    }

    fn own_leaf_nodes<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        LeafNode: traits::LeafNode<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Vec<LeafNode>, Self::Error> {
        self.inner.own_leaf_nodes::<GroupId, LeafNode>(group_id)
    }

    fn queued_proposal_refs<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ProposalRef: traits::ProposalRef<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Vec<ProposalRef>, Self::Error> {
        self.inner
            .queued_proposal_refs::<GroupId, ProposalRef>(group_id)
    }

    fn queued_proposals<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ProposalRef: traits::ProposalRef<CURRENT_VERSION>,
        QueuedProposal: traits::QueuedProposal<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Vec<(ProposalRef, QueuedProposal)>, Self::Error> {
        self.inner
            .queued_proposals::<GroupId, ProposalRef, QueuedProposal>(group_id)
    }

    fn tree<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        TreeSync: traits::TreeSync<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<TreeSync>, Self::Error> {
        self.inner.tree::<GroupId, TreeSync>(group_id)
    }

    fn group_context<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        GroupContext: traits::GroupContext<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<GroupContext>, Self::Error> {
        self.inner.group_context::<GroupId, GroupContext>(group_id)
    }

    fn interim_transcript_hash<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        InterimTranscriptHash: traits::InterimTranscriptHash<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<InterimTranscriptHash>, Self::Error> {
        self.inner
            .interim_transcript_hash::<GroupId, InterimTranscriptHash>(group_id)
    }

    fn confirmation_tag<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ConfirmationTag: traits::ConfirmationTag<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<ConfirmationTag>, Self::Error> {
        self.inner
            .confirmation_tag::<GroupId, ConfirmationTag>(group_id)
    }

    fn group_state<
        GroupState: traits::GroupState<CURRENT_VERSION>,
        GroupId: traits::GroupId<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<GroupState>, Self::Error> {
        self.inner.group_state::<GroupState, GroupId>(group_id)
    }

    fn message_secrets<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        MessageSecrets: traits::MessageSecrets<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<MessageSecrets>, Self::Error> {
        self.inner
            .message_secrets::<GroupId, MessageSecrets>(group_id)
    }

    fn resumption_psk_store<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ResumptionPskStore: traits::ResumptionPskStore<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<ResumptionPskStore>, Self::Error> {
        self.inner
            .resumption_psk_store::<GroupId, ResumptionPskStore>(group_id)
    }

    fn own_leaf_index<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        LeafNodeIndex: traits::LeafNodeIndex<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<LeafNodeIndex>, Self::Error> {
        self.inner
            .own_leaf_index::<GroupId, LeafNodeIndex>(group_id)
    }

    fn group_epoch_secrets<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        GroupEpochSecrets: traits::GroupEpochSecrets<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<Option<GroupEpochSecrets>, Self::Error> {
        self.inner
            .group_epoch_secrets::<GroupId, GroupEpochSecrets>(group_id)
    }

    fn signature_key_pair<
        SignaturePublicKey: traits::SignaturePublicKey<CURRENT_VERSION>,
        SignatureKeyPair: traits::SignatureKeyPair<CURRENT_VERSION>,
    >(
        &self,
        public_key: &SignaturePublicKey,
    ) -> Result<Option<SignatureKeyPair>, Self::Error> {
        self.inner
            .signature_key_pair::<SignaturePublicKey, SignatureKeyPair>(public_key)
    }

    fn encryption_key_pair<
        HpkeKeyPair: traits::HpkeKeyPair<CURRENT_VERSION>,
        EncryptionKey: traits::EncryptionKey<CURRENT_VERSION>,
    >(
        &self,
        public_key: &EncryptionKey,
    ) -> Result<Option<HpkeKeyPair>, Self::Error> {
        self.inner
            .encryption_key_pair::<HpkeKeyPair, EncryptionKey>(public_key)
    }

    fn encryption_epoch_key_pairs<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        EpochKey: traits::EpochKey<CURRENT_VERSION>,
        HpkeKeyPair: traits::HpkeKeyPair<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        epoch: &EpochKey,
        leaf_index: u32,
    ) -> Result<Vec<HpkeKeyPair>, Self::Error> {
        self.inner
            .encryption_epoch_key_pairs::<GroupId, EpochKey, HpkeKeyPair>(
                group_id, epoch, leaf_index,
            )
    }

    fn key_package<
        KeyPackageRef: traits::HashReference<CURRENT_VERSION>,
        KeyPackage: traits::KeyPackage<CURRENT_VERSION>,
    >(
        &self,
        hash_ref: &KeyPackageRef,
    ) -> Result<Option<KeyPackage>, Self::Error> {
        self.inner
            .key_package::<KeyPackageRef, KeyPackage>(hash_ref)
    }

    fn psk<PskBundle: traits::PskBundle<CURRENT_VERSION>, PskId: traits::PskId<CURRENT_VERSION>>(
        &self,
        psk_id: &PskId,
    ) -> Result<Option<PskBundle>, Self::Error> {
        self.inner.psk::<PskBundle, PskId>(psk_id)
    }

    fn remove_proposal<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ProposalRef: traits::ProposalRef<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        proposal_ref: &ProposalRef,
    ) -> Result<(), Self::Error> {
        self.inner
            .remove_proposal::<GroupId, ProposalRef>(group_id, proposal_ref)
    }

    fn delete_own_leaf_nodes<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_own_leaf_nodes::<GroupId>(group_id)
    }

    fn delete_group_config<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_group_config::<GroupId>(group_id)
    }

    fn delete_tree<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_tree::<GroupId>(group_id)
    }

    fn delete_confirmation_tag<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_confirmation_tag::<GroupId>(group_id)
    }

    fn delete_group_state<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_group_state::<GroupId>(group_id)
    }

    fn delete_context<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_context::<GroupId>(group_id)
    }

    fn delete_interim_transcript_hash<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner
            .delete_interim_transcript_hash::<GroupId>(group_id)
    }

    fn delete_message_secrets<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_message_secrets::<GroupId>(group_id)
    }

    fn delete_all_resumption_psk_secrets<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner
            .delete_all_resumption_psk_secrets::<GroupId>(group_id)
    }

    fn delete_own_leaf_index<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_own_leaf_index::<GroupId>(group_id)
    }

    fn delete_group_epoch_secrets<GroupId: traits::GroupId<CURRENT_VERSION>>(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner.delete_group_epoch_secrets::<GroupId>(group_id)
    }

    fn clear_proposal_queue<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        ProposalRef: traits::ProposalRef<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
    ) -> Result<(), Self::Error> {
        self.inner
            .clear_proposal_queue::<GroupId, ProposalRef>(group_id)
    }

    fn delete_signature_key_pair<
        SignaturePublicKey: traits::SignaturePublicKey<CURRENT_VERSION>,
    >(
        &self,
        public_key: &SignaturePublicKey,
    ) -> Result<(), Self::Error> {
        self.inner
            .delete_signature_key_pair::<SignaturePublicKey>(public_key)
    }

    fn delete_encryption_key_pair<EncryptionKey: traits::EncryptionKey<CURRENT_VERSION>>(
        &self,
        public_key: &EncryptionKey,
    ) -> Result<(), Self::Error> {
        self.inner
            .delete_encryption_key_pair::<EncryptionKey>(public_key)
    }

    fn delete_encryption_epoch_key_pairs<
        GroupId: traits::GroupId<CURRENT_VERSION>,
        EpochKey: traits::EpochKey<CURRENT_VERSION>,
    >(
        &self,
        group_id: &GroupId,
        epoch: &EpochKey,
        leaf_index: u32,
    ) -> Result<(), Self::Error> {
        self.inner
            .delete_encryption_epoch_key_pairs::<GroupId, EpochKey>(group_id, epoch, leaf_index)
    }

    fn delete_key_package<KeyPackageRef: traits::HashReference<CURRENT_VERSION>>(
        &self,
        hash_ref: &KeyPackageRef,
    ) -> Result<(), Self::Error> {
        self.inner.delete_key_package::<KeyPackageRef>(hash_ref)
    }

    fn delete_psk<PskKey: traits::PskId<CURRENT_VERSION>>(
        &self,
        psk_id: &PskKey,
    ) -> Result<(), Self::Error> {
        self.inner.delete_psk::<PskKey>(psk_id)
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

    /// Our write leaves the rows `openmls_sqlite_storage`'s leaves, through a first
    /// write (insert), a rewrite (update in place) and two groups side by side; and
    /// each reads the other's.
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
            assert_eq!(rows(&ours_db), rows(&theirs_db));
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
