//! Where a store's peer policies are kept: the owner-only `peers.json` beside a local
//! store, or, when the state is in PostgreSQL, one row per peer in the database
//! several gateway instances share (issue #18), so they act as one policy.
//!
//! Changes go through [`PeerPolicyHome::update`]: read, change and write under a lock
//! (a lock file beside `peers.json`; the table's lock in PostgreSQL), so two
//! processes importing cards at once never lose one of them.

use std::path::PathBuf;

use super::peers::{PeerPolicies, PeerPolicyError, PeerRecord};

/// A store's peer policies: a directory (its `peers.json`) or a PostgreSQL database.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum PeerPolicyHome {
    /// `peers.json` in this directory.
    Dir(PathBuf),
    /// The `mailseal_peer_policy` table of the database at this URL.
    Postgres(String),
}

fn db(e: impl std::fmt::Display) -> PeerPolicyError {
    PeerPolicyError::Database(e.to_string())
}

impl PeerPolicyHome {
    /// The policies as they are now (none yet: empty).
    pub fn load(&self) -> Result<PeerPolicies, PeerPolicyError> {
        match self {
            Self::Dir(dir) => PeerPolicies::load(dir),
            Self::Postgres(url) => {
                let mut client = crate::postgres_db::connect(url).map_err(db)?;
                read(&mut client)
            }
        }
    }

    /// Reads the policies, lets `f` change them and writes them back, all under a
    /// lock; nothing is written when `f` fails.
    pub fn update<T, E: From<PeerPolicyError>>(
        &self,
        f: impl FnOnce(&mut PeerPolicies) -> Result<T, E>,
    ) -> Result<T, E> {
        match self {
            Self::Dir(dir) => {
                let path = dir.join(".peers.lock");
                let lock = crate::sqlite::create_private(&path)
                    .and_then(|()| std::fs::OpenOptions::new().write(true).open(&path))
                    .map_err(|e| PeerPolicyError::File {
                        path: path.display().to_string(),
                        reason: e.to_string(),
                    })?;
                lock.lock().map_err(|e| PeerPolicyError::File {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                let mut policies = PeerPolicies::load(dir)?;
                let out = f(&mut policies)?;
                policies.save(dir)?;
                Ok(out)
            }
            Self::Postgres(url) => {
                let mut client = crate::postgres_db::connect(url).map_err(db)?;
                let mut tx = client.transaction().map_err(db)?;
                tx.batch_execute("LOCK TABLE mailseal_peer_policy IN SHARE ROW EXCLUSIVE MODE")
                    .map_err(db)?;
                let before = read_tx(&mut tx)?;
                let mut policies = before.clone();
                let out = f(&mut policies)?;
                for (address, record) in &policies.peers {
                    let text = serde_json::to_string(record).map_err(db)?;
                    tx.execute(
                        "INSERT INTO mailseal_peer_policy (address, record) VALUES ($1, $2)
                         ON CONFLICT (address) DO UPDATE SET record = EXCLUDED.record",
                        &[address, &text],
                    )
                    .map_err(db)?;
                }
                for address in before.peers.keys() {
                    if !policies.peers.contains_key(address) {
                        tx.execute(
                            "DELETE FROM mailseal_peer_policy WHERE address = $1",
                            &[address],
                        )
                        .map_err(db)?;
                    }
                }
                tx.commit().map_err(db)?;
                Ok(out)
            }
        }
    }
}

fn read(client: &mut postgres::Client) -> Result<PeerPolicies, PeerPolicyError> {
    let mut tx = client.transaction().map_err(db)?;
    read_tx(&mut tx)
}

fn read_tx(tx: &mut postgres::Transaction<'_>) -> Result<PeerPolicies, PeerPolicyError> {
    let mut policies = PeerPolicies::default();
    for row in tx
        .query("SELECT address, record FROM mailseal_peer_policy", &[])
        .map_err(db)?
    {
        let address: String = row.get(0);
        let record: PeerRecord = serde_json::from_str(row.get(1))
            .map_err(|e| db(format!("peer policy of {address}: {e}")))?;
        policies.peers.insert(address, record);
    }
    Ok(policies)
}
