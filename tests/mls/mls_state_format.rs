//! How openmls' state is written in `mls.db`: the values it rewrites per message in
//! MessagePack behind a marker byte, every lookup key in JSON (as state files written
//! before have them), and a state file whose values are all JSON (as earlier versions
//! wrote them) still read and written on.

use std::path::Path;

use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::mls::{Mls, Received};
use mailseal::seal::OpenPolicy;
use mailseal::MailA2aMessage;

use crate::common;

fn auth() -> &'static mailseal::mls::StoreAuthenticator<'static> {
    common::mls::thread_authority(&["alice@a.example", "bob@b.example"])
}

fn member(dir: &Path, email: &str) -> Mls {
    let m = Mls::open(dir).unwrap();
    m.generate_identity(email, auth()).unwrap();
    m.allow_inviter("*", true).unwrap();
    m
}

fn request(n: usize) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, &format!("req-{n}"));
    env.set("payload", &serde_json::json!({"id": format!("task-{n}")}));
    MailA2aMessage::new("alice@a.example", &["bob@b.example"], env)
}

fn open(m: &Mls, raw: &[u8]) -> Received {
    m.receive(raw, &OpenPolicy::default(), "x", auth())
        .unwrap()
        .commit()
        .unwrap()
}

/// (data type, first byte of the value, first byte of the group id key) of each row of
/// openmls' group data.
fn group_rows(db: &Path) -> Vec<(String, u8, u8)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT data_type, group_data, group_id FROM openmls_group_data")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            let value: Vec<u8> = r.get(1)?;
            let key: Vec<u8> = r.get(2)?;
            Ok((r.get::<_, String>(0)?, value[0], key[0]))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    rows
}

fn pair(root: &Path) -> (Mls, Mls, String) {
    let (a, b) = (
        member(&root.join("a"), "alice@a.example"),
        member(&root.join("b"), "bob@b.example"),
    );
    let g = a.create_group("alice@a.example").unwrap();
    let added = a
        .add(&g, &[b.key_package("bob@b.example").unwrap()], auth())
        .unwrap();
    open(&b, &added.welcome);
    (a, b, g)
}

#[test]
fn per_message_values_are_message_pack_and_every_key_json() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, g) = pair(dir.path());
    let sealed = a.seal(&request(1), &g, false).unwrap();
    assert!(matches!(open(&b, &sealed), Received::Application(_)));
    drop((a, b));
    let rows = group_rows(&dir.path().join("b").join("mls.db"));
    let kind = |t: &str| {
        rows.iter()
            .find(|r| r.0 == t)
            .unwrap_or_else(|| panic!("{t}"))
    };
    for compact in [
        "message_secrets",
        "tree",
        "group_epoch_secrets",
        "resumption_psk_store",
    ] {
        assert_eq!(kind(compact).1, 0xc1, "{compact} is MessagePack");
    }
    // Everything else as JSON, and every key: rows are found by the key's encoding.
    assert_eq!(kind("context").1, b'{');
    for (t, _, key) in &rows {
        assert!(
            matches!(key, b'{' | b'[' | b'"'),
            "{t}: key starts with {key:#x}"
        );
    }
    // The tree and the message secrets take at most 60% of their JSON (here 46% and
    // 57%: secrets and keys are byte strings, not lists of decimal numbers).
    let conn = rusqlite::Connection::open(dir.path().join("b").join("mls.db")).unwrap();
    for t in ["tree", "message_secrets"] {
        let value: Vec<u8> = conn
            .query_row(
                "SELECT group_data FROM openmls_group_data WHERE data_type = ?1",
                [t],
                |r| r.get(0),
            )
            .unwrap();
        let as_json: serde_json::Value = rmp_serde::from_slice(&value[1..]).unwrap();
        let json = serde_json::to_vec(&as_json).unwrap().len();
        assert!(
            value.len() * 10 <= json * 6,
            "{t}: {} against {json}",
            value.len()
        );
    }
}

#[test]
fn a_state_file_with_json_values_reads_and_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, g) = pair(dir.path());
    let first = a.seal(&request(1), &g, false).unwrap();
    assert!(matches!(open(&b, &first), Received::Application(_)));
    drop(b);
    // Rewrite bob's MessagePack values as JSON, as the earlier codec wrote every value.
    let db = dir.path().join("b").join("mls.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let rows: Vec<(Vec<u8>, String, Vec<u8>)> = conn
            .prepare("SELECT group_id, data_type, group_data FROM openmls_group_data")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut rewritten = 0;
        for (key, t, value) in rows {
            if value.first() != Some(&0xc1) {
                continue;
            }
            let v: serde_json::Value = rmp_serde::from_slice(&value[1..]).unwrap();
            conn.execute(
                "UPDATE openmls_group_data SET group_data = ?3 WHERE group_id = ?1 AND data_type = ?2",
                rusqlite::params![key, t, serde_json::to_vec(&v).unwrap()],
            )
            .unwrap();
            rewritten += 1;
        }
        assert_eq!(rewritten, 4);
    }
    assert!(group_rows(&db).iter().all(|r| r.1 != 0xc1));
    // Bob opens the state written the old way, reads the next message, and writes on.
    let b = Mls::open(&dir.path().join("b")).unwrap();
    for n in 2..4 {
        let sealed = a.seal(&request(n), &g, false).unwrap();
        assert!(
            matches!(open(&b, &sealed), Received::Application(_)),
            "message {n}"
        );
    }
    drop(b);
    let rows = group_rows(&db);
    assert_eq!(
        rows.iter().find(|r| r.0 == "message_secrets").unwrap().1,
        0xc1,
        "rewritten in MessagePack"
    );
}
