//! The peer policies where several processes share them (issue #18): the PostgreSQL
//! table of a shared state, and `peers.json` under its lock file. Concurrent changes
//! lose nothing; a change that fails writes nothing.

use mailseal::ext::peer_home::PeerPolicyHome;
use mailseal::ext::peers::{PeerPolicies, PeerPolicyError, PeerRecord, StoredKeyPackage};

fn record(minimum: &str, key_packages: usize) -> PeerRecord {
    PeerRecord {
        minimum_protection: minimum.into(),
        profiles: vec!["smime".into(), "mls".into()],
        card_digest: "00".repeat(32),
        imported_at: "2026-12-02T00:00:00Z".into(),
        signatures: Vec::new(),
        mls_key_packages: (0..key_packages)
            .map(|i| StoredKeyPackage {
                key_package: format!("AAA{i}"),
                last_resort: false,
            })
            .collect(),
        limits: None,
        published_keys: Vec::new(),
        pinned_keys: Vec::new(),
        vouched: None,
        origin: None,
    }
}

/// Eight threads, each its own connection, add a peer each and take one of bob's
/// eight KeyPackages: all eight peers are there, and no KeyPackage was taken twice
/// (a KeyPackage serves one join; two gateways adding bob at once must not share
/// one).
fn concurrent_updates_lose_nothing(home: PeerPolicyHome) {
    home.update(|p| {
        p.peers.insert("bob@b.example".into(), record("signed", 8));
        Ok::<_, PeerPolicyError>(())
    })
    .unwrap();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let home = home.clone();
            std::thread::spawn(move || {
                home.update(|p| {
                    let kp = p.take_key_package("bob@b.example").expect("one left");
                    // Widens the window a missing lock would lose an update in.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    p.peers
                        .insert(format!("agent{i}@x.example"), record("signed", 1));
                    Ok::<_, PeerPolicyError>(kp)
                })
                .unwrap()
            })
        })
        .collect();
    let mut taken: Vec<Vec<u8>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    taken.sort();
    taken.dedup();
    assert_eq!(taken.len(), 8, "a KeyPackage was handed out twice");
    let policies = home.load().unwrap();
    assert_eq!(policies.peers.len(), 9, "{:?}", policies.peers.keys());
    assert!(policies.peers["bob@b.example"].mls_key_packages.is_empty());
    assert_eq!(
        policies
            .minimum_for("AGENT3@x.example")
            .map(|p| p.to_string()),
        Some("signed".into())
    );
}

/// A KeyPackage taken in a change that then fails stays; taken in one that
/// succeeds, it is gone for every reader.
fn failed_change_writes_nothing(home: PeerPolicyHome) {
    home.update(|p| {
        p.peers
            .insert("bob@b.example".into(), record("signed-encrypted", 2));
        Ok::<_, PeerPolicyError>(())
    })
    .unwrap();
    let refused: Result<(), PeerPolicyError> = home.update(|p| {
        assert!(p.take_key_package("bob@b.example").is_some());
        p.peers.remove("bob@b.example");
        Err(PeerPolicyError::Database("the add failed".into()))
    });
    assert!(refused.is_err());
    let p = home.load().unwrap();
    assert_eq!(p.peers["bob@b.example"].mls_key_packages.len(), 2);
    home.update(|p| {
        p.take_key_package("bob@b.example").unwrap();
        Ok::<_, PeerPolicyError>(())
    })
    .unwrap();
    let p: PeerPolicies = home.load().unwrap();
    assert_eq!(p.peers["bob@b.example"].mls_key_packages.len(), 1);
}

#[test]
fn postgres_policies_concurrent_updates_lose_nothing() {
    let Some(db) = crate::common::postgres_database() else {
        return;
    };
    concurrent_updates_lose_nothing(PeerPolicyHome::Postgres(db));
}

#[test]
fn directory_policies_concurrent_updates_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    concurrent_updates_lose_nothing(PeerPolicyHome::Dir(dir.path().to_path_buf()));
}

#[test]
fn fail_postgres_policy_change_that_fails_writes_nothing() {
    let Some(db) = crate::common::postgres_database() else {
        return;
    };
    failed_change_writes_nothing(PeerPolicyHome::Postgres(db));
}

#[test]
fn fail_directory_policy_change_that_fails_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    failed_change_writes_nothing(PeerPolicyHome::Dir(dir.path().to_path_buf()));
}
