//! Five agents, each with its own store directory and its own `mailseal` processes,
//! build an MLS group by mail files only, exchange 50 application messages delivered
//! shuffled and with duplicates, and remove one member: every remaining member opens
//! every message exactly once with the right sender (the removed member's old-epoch
//! messages only if read before its removal was applied), and the removed one opens
//! none of the messages sent after its removal.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::mls::{mailseal, ok, send, Agent};

/// A deterministic shuffle (xorshift), so a failure reproduces.
fn shuffle<T>(v: &mut [T], seed: &mut u64) {
    for i in (1..v.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        v.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
}

#[test]
fn five_agents_fifty_messages_shuffled_with_duplicates_and_a_removal() {
    let root = tempfile::tempdir().unwrap();
    let (agents, group) = common::mls::group(root.path(), 5);
    let inboxes: Vec<PathBuf> = (1..=5)
        .map(|i| root.path().join(format!("inbox{i}")))
        .collect();
    for i in &inboxes {
        std::fs::create_dir_all(i).unwrap();
    }
    let mail = root.path().join("mail");
    let members = ok(
        &agents[2].store,
        &["mls", "members", "--group", &group, "--json"],
    );
    let members: serde_json::Value = serde_json::from_slice(&members).unwrap();
    assert_eq!(members["members"].as_array().unwrap().len(), 5);

    // Phase 1: 25 messages from every member, epoch 1.
    let mut sent: BTreeMap<String, (usize, PathBuf)> = BTreeMap::new(); // messageId -> (sender, mail)
    let mut deliveries: Vec<Vec<PathBuf>> = vec![Vec::new(); 5];
    for n in 0..25 {
        let s = n % 5;
        let to: Vec<&Agent> = agents
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != s)
            .map(|(_, a)| a)
            .collect();
        let path = send(&mail, &agents[s], &to, &group, n);
        sent.insert(format!("urn:uuid:group-{n}"), (s, path.clone()));
        for (i, d) in deliveries.iter_mut().enumerate() {
            if i != s {
                d.push(path.clone());
            }
        }
    }
    // agent1 removes agent5; the Commit goes to every other member, agent5 included.
    let rm_dir = mail.join("remove");
    ok(
        &agents[0].store,
        &[
            "mls",
            "remove",
            "--group",
            &group,
            "--member",
            &agents[4].email,
            "--out-dir",
            &rm_dir.display().to_string(),
        ],
    );
    let commit = rm_dir.join("commit.eml");
    for d in deliveries.iter_mut().skip(1) {
        d.push(commit.clone());
    }
    // agent2 and agent3 read that Commit before they write again; agent4 reads its
    // mail only at the end, in whatever order it comes.
    for a in &agents[1..3] {
        ok(&a.store, &["open", "--in", &commit.display().to_string()]);
    }
    // Phase 2: 25 messages from agents 1-3, epoch 2; agent5 still gets copies.
    let mut after_removal = BTreeSet::new();
    for n in 25..50 {
        let s = n % 3;
        let to: Vec<&Agent> = agents
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != s)
            .map(|(_, a)| a)
            .collect();
        let path = send(&mail, &agents[s], &to, &group, n);
        sent.insert(format!("urn:uuid:group-{n}"), (s, path.clone()));
        after_removal.insert(format!("urn:uuid:group-{n}"));
        for (i, d) in deliveries.iter_mut().enumerate() {
            if i != s {
                d.push(path.clone());
            }
        }
    }

    // Delivery: each inbox shuffled, with every fourth mail delivered twice.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..agents.len() {
        let mut mails = deliveries[i].clone();
        let dups: Vec<PathBuf> = mails.iter().step_by(4).cloned().collect();
        mails.extend(dups);
        shuffle(&mut mails, &mut seed);
        for (k, m) in mails.iter().enumerate() {
            std::fs::copy(m, inboxes[i].join(format!("{k:04}.eml"))).unwrap();
        }
    }

    for (i, a) in agents.iter().enumerate() {
        let out_dir = root.path().join(format!("out{}", i + 1));
        let out = mailseal(
            &a.store,
            &[
                "open",
                "--batch",
                &inboxes[i].display().to_string(),
                "--out-dir",
                &out_dir.display().to_string(),
            ],
        );
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON result line"))
            .collect();
        let mut delivered: BTreeMap<String, String> = BTreeMap::new();
        for l in &lines {
            if l["result"] == "deliver" || l["result"] == "deliver-released" {
                let id = l["messageId"].as_str().unwrap().to_string();
                let signer = l["signer"].as_str().unwrap().to_string();
                assert!(
                    delivered.insert(id.clone(), signer).is_none(),
                    "agent{} got {id} twice",
                    i + 1
                );
            }
        }
        // What reached the output directory is exactly what was delivered.
        let files: BTreeSet<String> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| {
                let v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
                v["messageId"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(files, delivered.keys().cloned().collect::<BTreeSet<_>>());
        if i == 4 {
            // The removed member: nothing sent after its removal, and it says why.
            for id in &after_removal {
                assert!(!delivered.contains_key(id), "removed agent5 opened {id}");
            }
            assert!(!out.status.success());
            assert!(lines.iter().any(|l| l["result"] == "refused"
                && l["exit"] == 5
                && l["error"]
                    .as_str()
                    .unwrap()
                    .contains("removed from MLS group")));
            continue;
        }
        // The only refusals: agent5's messages of the old epoch read after its
        // removal was applied (issue #17: a removed member's old-epoch messages stop
        // counting once the removal applies).
        let refused: Vec<&serde_json::Value> =
            lines.iter().filter(|l| l["result"] == "refused").collect();
        for l in &refused {
            assert!(
                l["error"]
                    .as_str()
                    .unwrap()
                    .contains("agent5@group.example was removed from MLS group"),
                "agent{}: {l}",
                i + 1
            );
        }
        assert_eq!(out.status.success(), refused.is_empty(), "agent{}", i + 1);
        let expected: BTreeMap<String, String> = sent
            .iter()
            .filter(|(_, (s, _))| *s != i)
            .map(|(id, (s, _))| (id.clone(), format!("mls:{}", agents[*s].email)))
            .collect();
        for (id, signer) in &delivered {
            assert_eq!(expected.get(id), Some(signer), "agent{}: {id}", i + 1);
        }
        let missing: Vec<&String> = expected
            .keys()
            .filter(|id| !delivered.contains_key(*id))
            .collect();
        for id in &missing {
            assert_eq!(
                sent[*id].0,
                4,
                "agent{}: {id} from a member still in the group was not delivered",
                i + 1
            );
        }
        assert!(refused.len() >= missing.len(), "agent{}", i + 1);
        assert!(lines.iter().any(|l| l["result"] == "duplicate"));
        if i == 3 {
            // agent4 read the removal Commit somewhere in the middle: what came
            // before it for epoch 2 was held, then released.
            assert!(lines.iter().any(|l| l["result"] == "held"));
            assert!(lines.iter().any(|l| l["result"] == "deliver-released"));
        }
        let m = ok(&a.store, &["mls", "members", "--group", &group, "--json"]);
        let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(m["members"].as_array().unwrap().len(), 4);
        assert_eq!(m["epoch"], 2);
    }
}
