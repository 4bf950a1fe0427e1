//! The queue tools' view of a spool: what an operator needs to see a queue and act on
//! it (list, show, flush, hold, release, delete, requeue) while the gateway runs.
//!
//! Each backend makes each change atomic against the gateway's claim, retry and done
//! (the directory with a lock on each entry, PostgreSQL with row locks), so a tool and
//! a running gateway always agree on where an entry stands:
//!
//! - **hold** keeps an entry from being claimed until it is released, across restarts.
//!   An attempt already under way goes on; if it defers, the entry then waits held.
//! - **release** lets it be claimed at its next attempt (now, if that time has passed).
//! - **flush** makes it due now; **requeue** also forgets its attempts and last error
//!   and restarts its age, from which the gateway counts `delivery.max_age_secs`: a
//!   fresh retry period. Both leave an entry that is being delivered as it is
//!   ([`Applied::Busy`]): the attempt decides, and the tool says so.
//! - **delete** removes an entry without delivering it and remembers its id as done,
//!   so a client's retry of the same message within [`super::DONE_RETENTION_SECS`] is
//!   not queued again. An entry being delivered is deleted all the same: the attempt
//!   under way may still hand it to the next hop, and whatever it comes to, the entry
//!   is not queued again ([`Applied::ChangedWhileDelivering`]).
//!
//! Ids may be given as unique prefixes ([`resolve`]); all are resolved before anything
//! changes, so a mistyped one changes nothing.

use super::{Entry, SpoolError};

/// Where a queued entry stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryState {
    /// Waiting for its next attempt (or due now).
    Queued,
    /// Held: never claimed until released.
    Held,
    /// A delivery attempt holds it now (its lease).
    Delivering,
}

impl EntryState {
    /// The word the tools print.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Held => "held",
            Self::Delivering => "delivering",
        }
    }
}

/// A queued entry as the tools see it: its envelope and schedule, not its message.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Queued {
    /// The entry (its `data` left empty).
    #[serde(flatten)]
    pub entry: Entry,
    /// Where it stands.
    pub state: EntryState,
    /// Whether it is held (a held entry being delivered is [`EntryState::Delivering`]
    /// and waits held after a deferral).
    pub held: bool,
    /// Until when a delivery attempt holds it, Unix seconds.
    pub leased_until: Option<i64>,
    /// The message's size, bytes.
    pub size: u64,
}

impl Queued {
    /// The state of an entry held or not and leased until `lease` (if it is) at `now`.
    pub(super) fn state_of(held: bool, lease: Option<i64>, now: i64) -> EntryState {
        match (lease.filter(|l| *l > now), held) {
            (Some(_), _) => EntryState::Delivering,
            (None, true) => EntryState::Held,
            (None, false) => EntryState::Queued,
        }
    }
}

/// What a change did to an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applied {
    /// Changed as asked.
    Changed,
    /// Changed, while a delivery attempt was under way: that attempt goes on (hold:
    /// it waits held after a deferral; delete: the attempt may still deliver it, and
    /// it is not queued again whatever it comes to).
    ChangedWhileDelivering,
    /// Made due (flush, requeue), but held: not delivered until released.
    ChangedButHeld,
    /// Nothing to do: it already was so (held, not held, due).
    Already,
    /// Left as it was: a delivery attempt holds it now (flush, requeue); its outcome
    /// decides.
    Busy,
    /// No longer queued (delivered or deleted since it was listed).
    Gone,
}

impl Applied {
    /// Whether the entry was changed.
    pub fn changed(self) -> bool {
        matches!(
            self,
            Self::Changed | Self::ChangedWhileDelivering | Self::ChangedButHeld
        )
    }
}

/// A change the tools make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Due now.
    Flush,
    /// Never claimed until released.
    Hold,
    /// Claimed again at its next attempt.
    Release,
    /// Removed undelivered, its id remembered as done.
    Delete,
    /// Due now, no attempts, no last error, its age restarted.
    Requeue,
}

impl Action {
    /// The command's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Flush => "flush",
            Self::Hold => "hold",
            Self::Release => "release",
            Self::Delete => "delete",
            Self::Requeue => "requeue",
        }
    }
}

/// The queue tools' operations on a spool, safe beside running gateways. Every
/// change is durable when it returns and atomic against the gateways' claim, retry and
/// done; `now` is Unix seconds.
pub trait QueueAdmin {
    /// Every queued entry (not done), oldest first.
    fn list(&self, now: i64) -> Result<Vec<Queued>, SpoolError>;
    /// One entry (a whole id) and its message.
    fn show(&self, id: &str, now: i64) -> Result<(Queued, Vec<u8>), SpoolError>;
    /// Makes an entry due now.
    fn flush(&self, id: &str, now: i64) -> Result<Applied, SpoolError>;
    /// Keeps an entry from being claimed until [`QueueAdmin::release`].
    fn hold(&self, id: &str, now: i64) -> Result<Applied, SpoolError>;
    /// Lets a held entry be claimed again.
    fn release(&self, id: &str, now: i64) -> Result<Applied, SpoolError>;
    /// Removes an entry undelivered; its id is remembered as done.
    fn delete(&self, id: &str, now: i64) -> Result<Applied, SpoolError>;
    /// Makes an entry due now with no attempts, no last error and its age restarted.
    fn requeue(&self, id: &str, now: i64) -> Result<Applied, SpoolError>;
}

/// The whole id of the one entry of `entries` that `prefix` begins (any case).
pub fn resolve(entries: &[Queued], prefix: &str) -> Result<String, SpoolError> {
    let p = prefix.to_ascii_lowercase();
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SpoolError::UnknownId(prefix.to_string()));
    }
    let mut found = entries.iter().filter(|q| q.entry.id.starts_with(&p));
    match (found.next(), found.count()) {
        (None, _) => Err(SpoolError::UnknownId(prefix.to_string())),
        (Some(q), 0) => Ok(q.entry.id.clone()),
        (Some(_), more) => Err(SpoolError::Ambiguous {
            prefix: prefix.to_string(),
            count: more + 1,
        }),
    }
}

/// Applies `action` to the entries `prefixes` name (all queued entries when none is
/// given and the action is [`Action::Flush`]), each resolved first: an unknown or
/// ambiguous one changes nothing. Each change is logged (the entry's route, sender and
/// recipients quoted). Returns each entry with what was done.
pub fn apply(
    admin: &dyn QueueAdmin,
    action: Action,
    prefixes: &[String],
    now: i64,
) -> Result<Vec<(Queued, Applied)>, SpoolError> {
    let entries = admin.list(now)?;
    let chosen: Vec<&Queued> = if prefixes.is_empty() && action == Action::Flush {
        entries.iter().collect()
    } else {
        let mut ids = Vec::with_capacity(prefixes.len());
        for p in prefixes {
            let id = resolve(&entries, p)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids.iter()
            .filter_map(|id| entries.iter().find(|q| &q.entry.id == id))
            .collect()
    };
    let mut out = Vec::with_capacity(chosen.len());
    for q in chosen {
        let id = &q.entry.id;
        // The message's own From and Message-ID, for the line below as on the
        // gateway's lines, so one grep finds what the operator did to it (read before:
        // a deleted entry is gone).
        let seen = admin
            .show(id, now)
            .ok()
            .map(|(_, m)| crate::gateway::logline::Seen::of(&m, m.len()));
        let applied = match action {
            Action::Flush => admin.flush(id, now),
            Action::Hold => admin.hold(id, now),
            Action::Release => admin.release(id, now),
            Action::Delete => admin.delete(id, now),
            Action::Requeue => admin.requeue(id, now),
        }?;
        if applied.changed() {
            let to: Vec<String> = q
                .entry
                .recipients
                .iter()
                .map(crate::error::quoted)
                .collect();
            let none = crate::gateway::logline::NONE;
            tracing::info!(
                id = %id,
                route = %crate::error::quoted(&q.entry.route),
                mail_from = %crate::error::quoted(&q.entry.mail_from),
                to = %to.join(","),
                from = seen.as_ref().map_or(none, |s| s.from.as_str()),
                message_id = seen.as_ref().map_or(none, |s| s.message_id.as_str()),
                action = action.as_str(),
                result = ?applied,
                "queue: {}",
                match action {
                    Action::Delete => "deleted by the operator, not delivered",
                    Action::Hold => "held by the operator",
                    Action::Release => "released by the operator",
                    Action::Flush => "made due now by the operator",
                    Action::Requeue => "requeued by the operator",
                }
            );
        }
        out.push((q.clone(), applied));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str) -> Queued {
        let mut entry = Entry::new("out", "a@x", &["b@y".into()], Vec::new(), 0);
        entry.id = id.into();
        Queued {
            entry,
            state: EntryState::Queued,
            held: false,
            leased_until: None,
            size: 0,
        }
    }

    #[test]
    fn prefixes_resolve_to_one_entry_or_fail_clearly() {
        let all = [q("ab12"), q("ab34"), q("cd56")];
        assert_eq!(resolve(&all, "ab1").unwrap(), "ab12");
        assert_eq!(resolve(&all, "CD").unwrap(), "cd56");
        assert!(matches!(
            resolve(&all, "ab"),
            Err(SpoolError::Ambiguous { count: 2, .. })
        ));
        for bad in ["ef", "", "a*", "ab12x", "../x"] {
            assert!(
                matches!(resolve(&all, bad), Err(SpoolError::UnknownId(_))),
                "{bad}"
            );
        }
        let e = resolve(&all, "ab").unwrap_err().to_string();
        assert!(e.contains("2 queued entries"), "{e}");
    }

    #[test]
    fn state_follows_lease_then_hold() {
        assert_eq!(Queued::state_of(true, Some(20), 10), EntryState::Delivering);
        assert_eq!(Queued::state_of(true, Some(5), 10), EntryState::Held);
        assert_eq!(Queued::state_of(false, None, 10), EntryState::Queued);
    }
}
