//! Messages held for an epoch not reached yet, and their release once it is.

use rusqlite::{params, OptionalExtension};

use super::{parse_group_id, Mls, MlsError};

/// A message held for a future epoch whose epoch has now come.
#[derive(Clone, Debug)]
pub struct Held {
    group_id: Vec<u8>,
    digest: Vec<u8>,
    /// The share it was held under (the name its mail gave): one copy of several.
    claimed: String,
    /// The name it was received under (the batch file stem).
    pub name: String,
    /// The whole mail, as received.
    pub raw: Vec<u8>,
}

impl Mls {
    /// The next held message whose epoch has come (commits of an epoch after its
    /// application messages), across every group or in `group` only. Open it with
    /// [`Mls::receive`] (which drops it from the hold); if that fails, drop it with
    /// [`Mls::discard`].
    pub fn next_ready(&self, group: Option<&str>) -> Result<Option<Held>, MlsError> {
        // In a transaction: taking a group bumps its version (see `take_group`).
        let tx = self.state.begin()?;
        let ready = self.next_ready_in(group)?;
        tx.commit()?;
        Ok(ready)
    }

    fn next_ready_in(&self, group: Option<&str>) -> Result<Option<Held>, MlsError> {
        let ids: Vec<Vec<u8>> = match group {
            Some(g) => vec![parse_group_id(g)?],
            None => {
                let mut st = self
                    .state
                    .conn
                    .prepare("SELECT DISTINCT group_id FROM mailseal_mls_held")?;
                let rows = st.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
                rows.collect::<Result<_, _>>()?
            }
        };
        for id in ids {
            let Ok(g) = self.take_group(&id) else {
                continue;
            };
            let epoch = g.epoch().as_u64();
            self.cache_put(g);
            let row = self.state.query_row(
                    "SELECT digest, name, raw, claimed FROM mailseal_mls_held WHERE group_id = ?1 AND epoch <= ?2 ORDER BY epoch, is_commit, held_at LIMIT 1",
                    params![id, epoch as i64],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()?;
            if let Some((digest, name, raw, claimed)) = row {
                return Ok(Some(Held {
                    group_id: id,
                    digest,
                    claimed,
                    name,
                    raw,
                }));
            }
        }
        Ok(None)
    }

    /// Drops a held message that did not open: this copy only (another copy of the
    /// same MLS message, held under another name, may be the genuine one).
    pub fn discard(&self, held: &Held) -> Result<(), MlsError> {
        let tx = self.state.begin()?;
        self.state.exec(
            "DELETE FROM mailseal_mls_held WHERE group_id = ?1 AND digest = ?2 AND claimed = ?3",
            params![held.group_id, held.digest, held.claimed],
        )?;
        tx.commit()
    }

    /// How many messages wait for a Commit, per group.
    pub fn held_count(&self, group: &str) -> Result<usize, MlsError> {
        let id = parse_group_id(group)?;
        self.state.refresh()?;
        let n: i64 = self.state.query_row(
            "SELECT count(*) FROM mailseal_mls_held WHERE group_id = ?1",
            [id],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }
}
