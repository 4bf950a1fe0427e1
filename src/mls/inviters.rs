//! Who may add us to a group (issue #17): a Welcome that uses one of our published
//! KeyPackages would otherwise put us in any group, so joining by Welcome needs an
//! inviter that local policy names, besides one whose leaf authenticates.

use super::{Mls, MlsError};

impl Mls {
    /// Who may add us to a group: an address, `@domain` for a whole domain, or `*`
    /// for anyone whose leaf authenticates. Nobody by default (issue #17): a Welcome
    /// that uses one of our published KeyPackages would otherwise put us in any group.
    pub fn allow_inviter(&self, pattern: &str, allow: bool) -> Result<(), MlsError> {
        let pattern = pattern.trim().to_ascii_lowercase();
        let valid = pattern == "*"
            || pattern
                .strip_prefix('@')
                .is_some_and(|d| !d.is_empty() && !d.contains('@'))
            || crate::message::Mailbox::new(&pattern).is_valid_addr_spec();
        if !valid {
            return Err(MlsError::Usage(format!(
                "{pattern}: an inviter is an address, @domain or *"
            )));
        }
        if allow {
            self.state.exec(
                "INSERT OR IGNORE INTO mailseal_mls_inviter (pattern) VALUES (?1)",
                [&pattern],
            )?;
        } else {
            self.state.exec(
                "DELETE FROM mailseal_mls_inviter WHERE pattern = ?1",
                [&pattern],
            )?;
        }
        Ok(())
    }

    /// The inviter patterns [`Mls::allow_inviter`] set.
    pub fn inviters(&self) -> Result<Vec<String>, MlsError> {
        let mut st = self
            .state
            .conn
            .prepare("SELECT pattern FROM mailseal_mls_inviter ORDER BY pattern")?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        let mut out = Vec::new();
        for r in rows {
            out.push(r?);
        }
        Ok(out)
    }

    /// Whether our policy lets `inviter` (an authenticated address) add us.
    pub(super) fn check_inviter(&self, inviter: &str) -> Result<(), MlsError> {
        let domain = inviter.rsplit_once('@').map(|(_, d)| format!("@{d}"));
        let allowed = self
            .inviters()?
            .iter()
            .any(|p| p == "*" || p == inviter || domain.as_deref() == Some(p.as_str()));
        if allowed {
            Ok(())
        } else {
            Err(MlsError::InviterRefused {
                inviter: inviter.to_string(),
            })
        }
    }
}
