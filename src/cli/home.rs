//! Where a store's MLS state and peer policies live: in the PostgreSQL database of
//! `--state postgres://...` (shared by every process on it, issue #18), else in the
//! store's directory (`MAILSEAL_MLS_HOME` for a PostgreSQL or token store).

use std::path::{Path, PathBuf};

use super::{mls, Failure};
use crate::ext::peer_home::PeerPolicyHome;
use crate::ext::peers::PeerPolicies;
use crate::mls::{Mls, MlsError};

/// A store and the state location it is used with.
#[derive(Clone, Debug)]
pub(crate) struct Home {
    store: PathBuf,
    postgres: Option<String>,
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl Home {
    /// `state` is `--state` (or the gateway's `state`), when given.
    pub(crate) fn new(store: &Path, state: Option<&str>) -> Home {
        Home {
            store: store.to_path_buf(),
            postgres: state.filter(|s| is_postgres(s)).map(str::to_string),
        }
    }

    /// Where the peer policies are.
    pub(crate) fn policies(&self) -> Result<PeerPolicyHome, Failure> {
        match &self.postgres {
            Some(url) => Ok(PeerPolicyHome::Postgres(url.clone())),
            None => super::card::policy_dir(&self.store).map(PeerPolicyHome::Dir),
        }
    }

    /// The peer policies (empty when the store has no place for them yet).
    pub(crate) fn load_policies(&self) -> Result<PeerPolicies, Failure> {
        match self.policies() {
            Ok(home) => home.load().map_err(|e| Failure::from("peer policy", e)),
            Err(_) => Ok(PeerPolicies::default()),
        }
    }

    /// Whether MLS state exists already (a card publishes a KeyPackage only then).
    pub(crate) fn has_mls_state(&self) -> bool {
        self.postgres.is_some()
            || mls::state_dir(&self.store)
                .map(|d| d.join("mls.db").exists())
                .unwrap_or(false)
    }

    /// The MLS state, configured as [`mls::lazy_state`] says.
    pub(crate) fn open_mls(&self) -> Result<Mls, Failure> {
        self.lazy_mls()().map_err(|e| Failure::from("mls", e))
    }

    /// Opens the MLS state when called (a receiver calls it at its first MLS mail).
    pub(crate) fn lazy_mls(&self) -> impl Fn() -> Result<Mls, MlsError> {
        mls::lazy_state(&self.store, self.postgres.clone())
    }
}

impl From<crate::ext::peers::PeerPolicyError> for Failure {
    fn from(e: crate::ext::peers::PeerPolicyError) -> Failure {
        Failure::from("peer policy", e)
    }
}
