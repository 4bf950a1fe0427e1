//! The `mls_open` fuzz target's fixture and seeds as a regression test: Bob's state
//! file (written by an earlier mailseal, so also a schema-compatibility check) opens,
//! each seed mail comes to what it was made to be, and every seed and fuzzer crash
//! reproducer (`tests/cases/crashes/mls_open-*`) is handled without a panic.

use crate::common;

use mailseal::mls::{Handshake, Mls, MlsError, Received};
use mailseal::seal::OpenPolicy;

fn fuzz_dir(rel: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(rel)
}

fn bob() -> (tempfile::TempDir, Mls) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fuzz_dir("fixtures/mls/bob-mls.db"),
        dir.path().join("mls.db"),
    )
    .unwrap();
    let mls = Mls::open(dir.path()).unwrap();
    // As the fuzz target: Welcomes from anyone reach openmls (with nobody allowed to
    // invite, the fixture's default, they are refused before it reads them).
    mls.allow_inviter("*", true).unwrap();
    (dir, mls)
}

/// The fixture group's members, pinned: it predates credential bindings.
fn pinned() -> mailseal::mls::PinnedKeys {
    let text = std::fs::read_to_string(fuzz_dir("fixtures/mls/pinned.txt")).unwrap();
    mailseal::mls::PinnedKeys::parse(&text).unwrap()
}

fn receive(mls: &Mls, seed: &str) -> Result<Received, MlsError> {
    receive_with(mls, seed, &pinned())
}

fn receive_with(
    mls: &Mls,
    seed: &str,
    auth: &dyn mailseal::mls::Authenticator,
) -> Result<Received, MlsError> {
    let raw = std::fs::read(fuzz_dir(&format!("seeds/mls_open/{seed}"))).unwrap();
    // Dropped, not committed: every seed sees the fixture's state.
    mls.receive(&raw, &OpenPolicy::default(), "seed", auth)
        .map(|r| r.received)
}

#[test]
fn seeds_come_to_what_they_were_made_to_be() {
    let (_dir, bob) = bob();
    let group = std::fs::read_to_string(fuzz_dir("fixtures/mls/group.txt")).unwrap();
    let group = group.trim();
    assert_eq!(bob.members(group).unwrap().epoch, 1);
    match receive(&bob, "application.eml").unwrap() {
        Received::Application(o) => {
            assert_eq!(
                o.verdict.signer.as_ref().unwrap().replay_id(),
                "mls:alice@fuzz.example"
            );
            assert_eq!(o.envelope().group().unwrap().id, group);
        }
        other => panic!("{other:?}"),
    }
    match receive(&bob, "application-outer-hints.eml").unwrap() {
        Received::Application(o) => {
            assert_eq!(
                o.verdict.signer.as_ref().unwrap().replay_id(),
                "mls:carol@fuzz.example"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        receive(&bob, "commit-add.eml").unwrap(),
        Received::Handshake(Handshake::Committed { epoch: 2, .. })
    ));
    assert!(matches!(
        receive(&bob, "welcome-used.eml").unwrap(),
        Received::Duplicate { .. }
    ));
    assert!(matches!(
        receive(&bob, "welcome-other.eml").unwrap_err(),
        MlsError::UnknownGroup(_)
    ));
    bob.allow_inviter("*", false).unwrap();
    assert!(matches!(
        receive(&bob, "welcome-other.eml").unwrap_err(),
        MlsError::InviterRefused { .. }
    ));
    bob.allow_inviter("*", true).unwrap();
    assert!(matches!(
        receive(&bob, "keypackage.eml").unwrap(),
        Received::Handshake(Handshake::KeyPackage { .. })
    ));
    assert!(matches!(
        receive(&bob, "application-future-epoch.eml").unwrap(),
        Received::Held {
            epoch: 2,
            current: 1,
            ..
        }
    ));
    assert!(matches!(
        receive(&bob, "group-info.eml"),
        Err(MlsError::Binding(ref why)) if why.contains("in clear")
    ));
    // Nothing above was committed.
    assert_eq!(bob.members(group).unwrap().epoch, 1);
    assert_eq!(bob.held_count(group).unwrap(), 0);
}

#[test]
fn fail_unpinned_fixture_members_are_refused() {
    // The same seeds with carol's key not pinned: her message and the Commit that
    // adds dave (unpinned too) are refused as unauthenticated; alice's still opens.
    let (_dir, bob) = bob();
    let group = std::fs::read_to_string(fuzz_dir("fixtures/mls/group.txt")).unwrap();
    let group = group.trim();
    let text = std::fs::read_to_string(fuzz_dir("fixtures/mls/pinned.txt")).unwrap();
    let only_alice = mailseal::mls::PinnedKeys::parse(
        &text
            .lines()
            .filter(|l| l.starts_with("alice@"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    assert!(matches!(
        receive_with(&bob, "application.eml", &only_alice).unwrap(),
        Received::Application(_)
    ));
    for seed in ["application-outer-hints.eml", "commit-add.eml"] {
        match receive_with(&bob, seed, &only_alice) {
            Err(MlsError::Unbound(why)) => assert!(why.contains("not pinned"), "{seed}: {why}"),
            other => panic!("{seed}: {other:?}"),
        }
    }
    // Nothing above was committed.
    assert_eq!(bob.members(group).unwrap().epoch, 1);
    assert_eq!(bob.held_count(group).unwrap(), 0);
}

#[test]
fn every_seed_and_crash_reproducer_is_handled() {
    let (_dir, bob) = bob();
    let mut inputs: Vec<std::path::PathBuf> = std::fs::read_dir(fuzz_dir("seeds/mls_open"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let crashes = common::data("../cases/crashes");
    if let Ok(rd) = std::fs::read_dir(&crashes) {
        inputs.extend(rd.map(|e| e.unwrap().path()).filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("mls_open-")
        }));
    }
    assert!(inputs.len() > 90);
    for p in inputs {
        let data = std::fs::read(&p).unwrap();
        // The fuzz target's framing: an odd first byte means a bare MLSMessage.
        let mail = match data.first() {
            Some(b) if b & 1 == 1 => {
                let mut m = b"From: <alice@fuzz.example>\r\nTo: <bob@fuzz.example>\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000\r\nMessage-ID: <f@fuzz.example>\r\nMIME-Version: 1.0\r\nContent-Type: message/mls; version=1.0\r\nContent-Transfer-Encoding: binary\r\n\r\n".to_vec();
                m.extend_from_slice(&data[1..]);
                m
            }
            _ => data,
        };
        let _ = bob.receive(&mail, &OpenPolicy::default(), "seed", &pinned());
    }
}

#[test]
fn inspect_reads_the_framing_only() {
    for (seed, expect) in [
        ("application.eml", "MLS PrivateMessage (application data"),
        ("commit-add.eml", "MLS PrivateMessage (a Commit)"),
        ("welcome-other.eml", "MLS Welcome"),
        ("keypackage.eml", "MLS KeyPackage"),
        ("group-info.eml", "MLS GroupInfo"),
    ] {
        let path = fuzz_dir(&format!("seeds/mls_open/{seed}"));
        let out = common::run(&["inspect", &path.display().to_string()], b"");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{seed}");
        assert!(text.contains(expect), "{seed}: {text}");
    }
}

/// The `mls_changeset` target's seeds (a snapshot and log entries read back from a
/// shared state in PostgreSQL: this replica schema's rows, so also a format check)
/// and reproducers hold the target's invariants; the snapshot applies and has rows.
/// `crash-migrations-table-replicated.seed` is the first input the target stopped
/// on: openmls' migration history table (`openmls_sqlite_storage_migrations`) was
/// replicated like a state table, so an empty replica was not empty and a rebuild
/// rewrote each process's migration history; it is each replica's own now.
#[test]
fn mls_changeset_seeds_hold_the_invariants() {
    let mut n = 0;
    for entry in std::fs::read_dir(fuzz_dir("seeds/mls_changeset")).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let result = mailseal::mls::check_changeset(&data);
        assert!(result.is_ok(), "{}: {result:?}", path.display());
        n += 1;
    }
    assert!(n >= 5, "the seeds are there ({n})");
    // The snapshot is a whole state (bob's identity in it) and applies; so does the
    // first log entry, which made that identity.
    for seed in ["snapshot.seed", "setup-1.seed"] {
        let data = std::fs::read(fuzz_dir(&format!("seeds/mls_changeset/{seed}"))).unwrap();
        assert!(data.windows(13).any(|w| w == b"bob@b.example"), "{seed}");
        assert_eq!(
            mailseal::mls::check_changeset(&data),
            Ok(true),
            "{seed} applies"
        );
    }
}
