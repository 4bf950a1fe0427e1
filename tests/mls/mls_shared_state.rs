//! The MLS state in PostgreSQL (issue #18): several processes (here, several `Mls`
//! values, each with its own connection and replica) act as one group member. The
//! other members are local, in memory.

use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::mls::{Handshake, Mls, MlsError, Received};
use mailseal::seal::OpenPolicy;
use mailseal::MailA2aMessage;

use crate::common;

fn auth() -> &'static mailseal::mls::StoreAuthenticator<'static> {
    common::mls::thread_authority(&["alice@a.example", "bob@b.example"])
}

fn request(from: &str, to: &str, id: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, id);
    env.set("payload", &serde_json::json!({"id": "task-7"}));
    MailA2aMessage::new(from, &[to], env)
}

fn open(m: &Mls, raw: &[u8]) -> Result<Received, MlsError> {
    m.receive(raw, &OpenPolicy::default(), "x", auth())?
        .commit()
}

/// (epoch, generation) of an application message.
fn coordinates(r: &Received) -> (u64, u64) {
    match r {
        Received::Application(o) => {
            let g = o.envelope().group().expect("group coordinates");
            (g.epoch, g.generation)
        }
        other => panic!("not an application message: {other:?}"),
    }
}

/// alice (local) and bob, whose state is shared by `bobs` processes on `db`.
fn alice_and_shared_bob(db: &str, bobs: usize) -> (Mls, Vec<Mls>, String) {
    let alice = Mls::in_memory().unwrap();
    alice.generate_identity("alice@a.example", auth()).unwrap();
    // Every process opens before bob exists: what one does, the others learn.
    let bob: Vec<Mls> = (0..bobs).map(|_| Mls::open_postgres(db).unwrap()).collect();
    bob[0].generate_identity("bob@b.example", auth()).unwrap();
    bob[0].allow_inviter("alice@a.example", true).unwrap();
    let g = alice.create_group("alice@a.example").unwrap();
    let kp = bob[0].key_package("bob@b.example").unwrap();
    let added = alice.add(&g, &[kp], auth()).unwrap();
    // The second process takes the Welcome: the KeyPackage's private key and the
    // inviter policy the first one made are in the shared state.
    match open(&bob[bobs - 1], &added.welcome).unwrap() {
        Received::Handshake(Handshake::Joined { group, .. }) => assert_eq!(group, g),
        other => panic!("{other:?}"),
    }
    (alice, bob, g)
}

#[test]
fn processes_on_one_database_act_as_one_member() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let (alice, bob, g) = alice_and_shared_bob(&db, 2);
    assert_eq!(bob[0].groups().unwrap(), vec![g.clone()]);
    assert_eq!(bob[0].identities().unwrap(), bob[1].identities().unwrap());

    // A message opened by one process is a duplicate at the other.
    let m1 = alice
        .seal(
            &request("alice@a.example", "bob@b.example", "m-1"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(coordinates(&open(&bob[0], &m1).unwrap()), (1, 0));
    assert!(matches!(
        open(&bob[1], &m1).unwrap(),
        Received::Duplicate { .. }
    ));

    // Both processes send: one sender ratchet, never a generation twice.
    let mut seen = Vec::new();
    for (i, id) in ["b-1", "b-2", "b-3", "b-4"].iter().enumerate() {
        let sealed = bob[i % 2]
            .seal(&request("bob@b.example", "alice@a.example", id), &g, false)
            .unwrap();
        seen.push(coordinates(&open(&alice, &sealed).unwrap()));
    }
    assert_eq!(seen, vec![(1, 0), (1, 1), (1, 2), (1, 3)]);

    // A Commit applied by one process moves the other to the new epoch.
    let commit = alice.update(&g).unwrap();
    assert!(matches!(
        open(&bob[1], &commit).unwrap(),
        Received::Handshake(Handshake::Committed { epoch: 2, .. })
    ));
    let sealed = bob[0]
        .seal(
            &request("bob@b.example", "alice@a.example", "b-5"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(coordinates(&open(&alice, &sealed).unwrap()), (2, 0));
    assert_eq!(bob[0].members(&g).unwrap().epoch, 2);
}

#[test]
fn fail_uncommitted_receipt_changes_nothing_anywhere() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let (alice, bob, g) = alice_and_shared_bob(&db, 2);
    let m = alice
        .seal(
            &request("alice@a.example", "bob@b.example", "m-1"),
            &g,
            false,
        )
        .unwrap();
    // Opened and dropped (the caller could not store the output): not recorded.
    {
        let receipt = bob[0]
            .receive(&m, &OpenPolicy::default(), "x", auth())
            .unwrap();
        assert!(matches!(receipt.received, Received::Application(_)));
    }
    assert!(matches!(
        open(&bob[1], &m).unwrap(),
        Received::Application(_)
    ));
    assert!(matches!(
        open(&bob[0], &m).unwrap(),
        Received::Duplicate { .. }
    ));
}

/// Past two compactions (every 256 versions), a process that joins late rebuilds from
/// the snapshot, and one that stayed behind since the start (the log it would need is
/// gone) rebuilds its replica: both still know every message.
#[test]
fn compacted_state_rebuilds_and_catches_up() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let (alice, bob, g) = alice_and_shared_bob(&db, 2);
    let mut mails = Vec::new();
    for i in 0..520 {
        let m = alice
            .seal(
                &request("alice@a.example", "bob@b.example", &format!("m-{i}")),
                &g,
                false,
            )
            .unwrap();
        assert!(matches!(
            open(&bob[0], &m).unwrap(),
            Received::Application(_)
        ));
        mails.push(m);
    }
    let mut client = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let row = client
        .query_one("SELECT version, base_version FROM mailseal_mls_head", &[])
        .unwrap();
    let (version, base): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        version > 520 && base == 512,
        "version {version}, base {base}"
    );
    let oldest: i64 = client
        .query_one("SELECT min(version) FROM mailseal_mls_log", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        oldest, 257,
        "the log before the previous snapshot is dropped"
    );
    let late = Mls::open_postgres(&db).unwrap();
    for m in [&mails[0], &mails[519]] {
        assert!(matches!(
            open(&late, m).unwrap(),
            Received::Duplicate { .. }
        ));
        assert!(matches!(
            open(&bob[1], m).unwrap(),
            Received::Duplicate { .. }
        ));
    }
    let sealed = late
        .seal(
            &request("bob@b.example", "alice@a.example", "b-1"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(coordinates(&open(&alice, &sealed).unwrap()), (1, 0));
    let sealed = bob[1]
        .seal(
            &request("bob@b.example", "alice@a.example", "b-2"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(coordinates(&open(&alice, &sealed).unwrap()), (1, 1));
}

#[test]
fn fail_shared_state_of_another_schema_is_refused() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    drop(Mls::open_postgres(&db).unwrap());
    let mut client = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    client
        .execute("UPDATE mailseal_mls_head SET schema = '99:0000'", &[])
        .unwrap();
    let err = Mls::open_postgres(&db).err().expect("refused");
    assert!(err.to_string().contains("schema 99:0000"), "{err}");
}

/// Two processes seal at the same time (each its own connection): every message
/// gets its own generation, and alice opens them all.
#[test]
fn concurrent_senders_never_reuse_a_generation() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let (alice, _bob, g) = alice_and_shared_bob(&db, 1);
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let (db, g) = (db.clone(), g.clone());
            std::thread::spawn(move || {
                let bob = Mls::open_postgres(&db).unwrap();
                (0..20)
                    .map(|i| {
                        bob.seal(
                            &request("bob@b.example", "alice@a.example", &format!("t{t}-{i}")),
                            &g,
                            false,
                        )
                        .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut generations = Vec::new();
    for t in threads {
        for sealed in t.join().unwrap() {
            generations.push(coordinates(&open(&alice, &sealed).unwrap()).1);
        }
    }
    generations.sort();
    assert_eq!(generations, (0..40).collect::<Vec<u64>>());
}

/// The server drops the connection (a restart, a fail-over): the operation that meets
/// the dead connection fails, the next one connects again, rebuilds the replica and
/// goes on where the database is.
#[test]
fn lost_connection_is_made_again() {
    let Some(db) = common::postgres_database() else {
        return;
    };
    let (alice, bob, g) = alice_and_shared_bob(&db, 1);
    let mut admin = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(killed >= 1);
    let m = alice
        .seal(
            &request("alice@a.example", "bob@b.example", "m-1"),
            &g,
            false,
        )
        .unwrap();
    let received = match open(&bob[0], &m) {
        Ok(r) => r,
        Err(e) => {
            assert!(e.to_string().contains("PostgreSQL"), "{e}");
            open(&bob[0], &m).unwrap()
        }
    };
    assert_eq!(coordinates(&received), (1, 0));
    let sealed = bob[0]
        .seal(
            &request("bob@b.example", "alice@a.example", "b-1"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(coordinates(&open(&alice, &sealed).unwrap()), (1, 0));
}
