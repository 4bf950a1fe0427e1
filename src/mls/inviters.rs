//! Local MLS trust policy (issue #17): who may add us to a group (a Welcome that uses
//! one of our published KeyPackages would otherwise put us in any group, so joining
//! by Welcome needs an inviter that local policy names, besides one whose leaf
//! authenticates), and MLS keys pinned by hand for members that cannot carry a
//! certification (another MLS stack).

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
        let tx = self.state.begin()?;
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
        tx.commit()
    }

    /// The inviter patterns [`Mls::allow_inviter`] set.
    pub fn inviters(&self) -> Result<Vec<String>, MlsError> {
        self.state.refresh()?;
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

    /// Before a Welcome is read: with no inviter allowed, none is taken; otherwise the
    /// mail's From, which the inviter's authenticated identity must equal, must be one
    /// our policy lets add us. Refusing on the unauthenticated From is safe: the
    /// authenticated check after would refuse the same Welcome (issue #58: openmls'
    /// reading of the tree is the costly part, and anyone may send one).
    pub(super) fn check_inviter_before_join(
        &self,
        headers: &crate::message::Headers,
    ) -> Result<(), MlsError> {
        let from = headers.from.as_ref().map(|m| m.normalized());
        if self.inviters()?.is_empty() {
            return Err(MlsError::InviterRefused {
                inviter: from.unwrap_or_else(|| "a Welcome without a From".into()),
            });
        }
        match from {
            Some(from) => self.check_inviter(&from),
            None => Ok(()),
        }
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

    /// Pins `signature_key` (Ed25519, as `mls members --json` lists it) as the MLS
    /// key of `email` in this state, or unpins it: a leaf with that credential and key
    /// authenticates without a certification.
    pub fn pin_key(&self, email: &str, signature_key: &[u8], pin: bool) -> Result<(), MlsError> {
        let email = email.trim().to_ascii_lowercase();
        if !crate::message::Mailbox::new(&email).is_valid_addr_spec() {
            return Err(MlsError::Usage(format!("{email}: not an email address")));
        }
        if signature_key.len() != 32 {
            return Err(MlsError::Usage(
                "an MLS signature key here is Ed25519: 32 bytes (64 hex digits)".into(),
            ));
        }
        let tx = self.state.begin()?;
        if pin {
            self.state.exec(
                "INSERT OR IGNORE INTO mailseal_mls_pinned (email, public_key) VALUES (?1, ?2)",
                rusqlite::params![email, signature_key],
            )?;
        } else {
            self.state.exec(
                "DELETE FROM mailseal_mls_pinned WHERE email = ?1 AND public_key = ?2",
                rusqlite::params![email, signature_key],
            )?;
        }
        tx.commit()
    }

    /// The keys [`Mls::pin_key`] pinned: (email, key hex).
    pub fn pinned_keys(&self) -> Result<Vec<(String, String)>, MlsError> {
        self.state.refresh()?;
        let mut st = self.state.conn.prepare(
            "SELECT email, public_key FROM mailseal_mls_pinned ORDER BY email, public_key",
        )?;
        let rows = st.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for r in rows {
            let (e, k) = r?;
            out.push((e, crate::keystore::hex(&k)));
        }
        Ok(out)
    }

    pub(super) fn is_pinned(&self, email: &str, signature_key: &[u8]) -> Result<bool, MlsError> {
        use rusqlite::OptionalExtension;
        Ok(self
            .state
            .query_row(
                "SELECT 1 FROM mailseal_mls_pinned WHERE email = ?1 AND public_key = ?2",
                rusqlite::params![email, signature_key],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }
}
