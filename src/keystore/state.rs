//! Where a store keeps its replay and stream state ([`super::KeyStore::state_location`]):
//! a neutral record the replay layer opens (`crate::replay::open_location`).

/// Where a key store's durable replay and stream state lives.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateLocation {
    /// A SQLite database file (a `SqliteReplayStore`).
    Sqlite(std::path::PathBuf),
    /// A PostgreSQL database (a `PostgresReplayStore`): its connection URL.
    Postgres(String),
}

/// The URL's password is not shown.
impl std::fmt::Debug for StateLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            Self::Postgres(_) => f.debug_tuple("Postgres").finish_non_exhaustive(),
        }
    }
}
