//! What a receiver of MLS mail refuses: changed bytes, envelopes whose `group`
//! coordinates or From disagree with the MLS framing, a removed member, replays; and
//! a process killed mid-commit leaves the group at the old epoch or the new one.

use crate::common;

use base64::Engine;
use common::mls::{copy_store, group, mailseal, ok, send, update};
use mailseal::message::{Headers, Mailbox};
use mailseal::mls::Mls;

/// The sealed mail's MLSMessage, and the mail rebuilt around other MLSMessage bytes.
fn body(mail: &[u8]) -> (usize, Vec<u8>) {
    let start = mail.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let b64: Vec<u8> = mail[start..]
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    (
        start,
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
}

fn rebuild(mail: &[u8], start: usize, message: &[u8]) -> Vec<u8> {
    let mut out = mail[..start].to_vec();
    out.extend_from_slice(
        base64::engine::general_purpose::STANDARD
            .encode(message)
            .as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    out
}

#[test]
fn fail_flipped_bytes_are_refused_and_nothing_reaches_stdout() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 2);
    let sealed = send(&root.path().join("mail"), &agents[0], &[&agents[1]], &g, 1);
    let mail = std::fs::read(&sealed).unwrap();
    let (start, message) = body(&mail);
    let tampered = root.path().join("tampered.eml");
    let mut authentication_failures = 0;
    // Every byte of the ciphertext and its tag (after the clear framing: the AEAD
    // covers the framing too, so a flip there fails the same way once its epoch is ours).
    for i in (0..message.len()).step_by(3) {
        let mut m = message.clone();
        m[i] ^= 0x20;
        std::fs::write(&tampered, rebuild(&mail, start, &m)).unwrap();
        let out = mailseal(
            &agents[1].store,
            &["open", "--in", &tampered.display().to_string()],
        );
        assert!(out.stdout.is_empty(), "byte {i}: something reached stdout");
        let code = out.status.code().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A flip in the clear epoch may point to an epoch we have not reached: held
        // (exit 0, never delivered), or refused if too far ahead (exit 6); in the
        // group id: not our group (exit 5).
        assert!(
            code == 4
                || code == 3
                || code == 5
                || (code == 0 && stderr.contains("held"))
                || (code == 6 && stderr.contains("epochs ahead of ours")),
            "byte {i}: exit {code}: {stderr}"
        );
        if code == 4 {
            authentication_failures += 1;
        }
    }
    assert!(
        authentication_failures > message.len() / 4,
        "{authentication_failures}"
    );
    // The untouched message still opens, once.
    let opened = ok(
        &agents[1].store,
        &["open", "--in", &sealed.display().to_string()],
    );
    assert!(String::from_utf8_lossy(&opened).contains("urn:uuid:group-1"));
}

#[test]
fn fail_replayed_application_message_is_a_duplicate() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 2);
    let sealed = send(&root.path().join("mail"), &agents[0], &[&agents[1]], &g, 1);
    let path = sealed.display().to_string();
    assert!(!ok(&agents[1].store, &["open", "--in", &path]).is_empty());
    let again = mailseal(&agents[1].store, &["open", "--in", &path]);
    assert!(again.status.success());
    assert!(again.stdout.is_empty());
    assert!(String::from_utf8_lossy(&again.stderr).contains("duplicate"));
}

/// A lying sender: the inner entity of a valid message, sealed with other coordinates.
fn crafted(
    agents: &[common::mls::Agent],
    g: &str,
    entity_env: serde_json::Value,
    aad: u64,
    from: &str,
) -> Vec<u8> {
    crafted_with_aad(agents, g, entity_env, aad.to_be_bytes().to_vec(), from)
}

/// [`crafted`] with any authenticated data.
fn crafted_with_aad(
    agents: &[common::mls::Agent],
    g: &str,
    entity_env: serde_json::Value,
    aad: Vec<u8>,
    from: &str,
) -> Vec<u8> {
    let sender = Mls::open(&agents[0].store).unwrap();
    let env = mailseal::Envelope::from_json(entity_env.to_string().as_bytes()).unwrap();
    let msg = mailseal::MailA2aMessage::new(from, &[agents[1].email.as_str()], env);
    let entity = msg.to_inner_entity(true).unwrap();
    let headers = Headers {
        from: Some(Mailbox::new(from)),
        from_count: 1,
        to: vec![Mailbox::new(&agents[1].email)],
        date: msg.headers.date,
        message_id: msg.headers.message_id.clone(),
        ..Headers::default()
    };
    sender.seal_unchecked(&entity, g, &headers, aad).unwrap()
}

fn envelope_with_group(g: &str, epoch: u64, generation: u64) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&common::mls::envelope(7)).unwrap();
    v["group"] = serde_json::json!({"id": g, "epoch": epoch, "generation": generation});
    v
}

fn open_file(store: &std::path::Path, mail: &[u8], dir: &std::path::Path) -> std::process::Output {
    let p = dir.join("crafted.eml");
    std::fs::write(&p, mail).unwrap();
    mailseal(store, &["open", "--in", &p.display().to_string()])
}

#[test]
fn fail_envelope_group_disagrees_with_framing() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 2);
    let from = agents[0].email.clone();
    // Epoch 1 is the framing's; the envelope says 0, then 2.
    for (n, epoch) in [(0, 0), (1, 2)] {
        let mail = crafted(&agents, &g, envelope_with_group(&g, epoch, n), n, &from);
        let out = open_file(&agents[1].store, &mail, root.path());
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{stderr}");
        assert!(stderr.contains("group.epoch"), "{stderr}");
    }
    // The generation bound into the MLS authenticated data and the envelope's must
    // agree (this is the sender's third message: generation 2).
    let mail = crafted(&agents, &g, envelope_with_group(&g, 1, 3), 2, &from);
    let out = open_file(&agents[1].store, &mail, root.path());
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("group.generation"));
    // Another group's id.
    let mail = crafted(
        &agents,
        &g,
        envelope_with_group("AAAAAAAAAAAAAAAAAAAAAA", 1, 3),
        3,
        &from,
    );
    let out = open_file(&agents[1].store, &mail, root.path());
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("group.id"));
    // No coordinates at all.
    let plain: serde_json::Value = serde_json::from_str(&common::mls::envelope(8)).unwrap();
    let mail = crafted(&agents, &g, plain, 4, &from);
    let out = open_file(&agents[1].store, &mail, root.path());
    assert_eq!(out.status.code(), Some(6));
    assert!(out.stdout.is_empty());
}

/// The generation is the one the message was really encrypted at (its sender
/// data), not what the sender states: a message sent at generation 3 that says 0 in
/// both its authenticated data and its envelope is refused. A generic MLS client
/// that writes no authenticated data is read by the envelope against the real
/// generation alone; authenticated data of another shape is refused.
#[test]
fn fail_stated_generation_is_not_the_real_one() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 2);
    let from = agents[0].email.clone();
    let env = |generation: u64, n: usize| {
        let mut v: serde_json::Value = serde_json::from_str(&common::mls::envelope(n)).unwrap();
        v["group"] = serde_json::json!({"id": g, "epoch": 1, "generation": generation});
        v
    };
    let refused = |mail: &[u8]| {
        let out = open_file(&agents[1].store, mail, root.path());
        assert!(out.stdout.is_empty());
        assert_eq!(
            out.status.code(),
            Some(6),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Generations 0 to 2, each saying so, delivered; no authenticated data for 2.
    for n in 0..3u64 {
        let aad = if n == 2 {
            vec![]
        } else {
            n.to_be_bytes().to_vec()
        };
        let mail = crafted_with_aad(&agents, &g, env(n, 20 + n as usize), aad, &from);
        let out = open_file(&agents[1].store, &mail, root.path());
        assert!(
            out.status.success(),
            "generation {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("urn:uuid:group-{}", 20 + n))
        );
    }
    // Sent at 3, says 0 twice over.
    let stderr = refused(&crafted(&agents, &g, env(0, 23), 0, &from));
    assert!(stderr.contains("generation 3"), "{stderr}");
    // Sent at 4, says 4 in the authenticated data but 0 in the envelope.
    let stderr = refused(&crafted(&agents, &g, env(0, 24), 4, &from));
    assert!(stderr.contains("group.generation 0"), "{stderr}");
    // Sent at 5, the envelope right, the authenticated data not.
    let stderr = refused(&crafted(&agents, &g, env(5, 25), 9, &from));
    assert!(stderr.contains("says generation 9"), "{stderr}");
    // Authenticated data that is not a generation.
    let stderr = refused(&crafted_with_aad(
        &agents,
        &g,
        env(6, 26),
        b"hi".to_vec(),
        &from,
    ));
    assert!(stderr.contains("authenticated data of 2 bytes"), "{stderr}");
}

#[test]
fn fail_sender_is_not_the_from() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 3);
    // agent1's credential, agent3's address in the protected and outer From.
    let mail = crafted(
        &agents,
        &g,
        envelope_with_group(&g, 1, 0),
        0,
        &agents[2].email,
    );
    let out = open_file(&agents[1].store, &mail, root.path());
    assert!(out.stdout.is_empty());
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn fail_removed_member() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 3);
    let mail_dir = root.path().join("mail");
    // agent3 keeps a copy of its state from before its removal.
    let copy = root.path().join("store3-copy");
    copy_store(&agents[2].store, &copy);
    let rm = root.path().join("rm");
    ok(
        &agents[0].store,
        &[
            "mls",
            "remove",
            "--group",
            &g,
            "--member",
            &agents[2].email,
            "--out-dir",
            &rm.display().to_string(),
        ],
    );
    let commit = rm.join("commit.eml").display().to_string();
    ok(&agents[1].store, &["open", "--in", &commit]);
    let out = mailseal(&agents[2].store, &["open", "--in", &commit]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed us"));
    // The removed member cannot write to the group any more ...
    let env = mail_dir.join("env-9.json");
    std::fs::write(&env, common::mls::envelope(9)).unwrap();
    let plain = mail_dir.join("plain-9.eml");
    ok(
        &agents[2].store,
        &[
            "compose",
            "--from",
            &agents[2].email,
            "--to",
            &agents[1].email,
            "--in",
            &env.display().to_string(),
            "--out",
            &plain.display().to_string(),
        ],
    );
    let out = mailseal(
        &agents[2].store,
        &[
            "seal",
            "--profile",
            "mls",
            "--group",
            &g,
            "--in",
            &plain.display().to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(5));
    assert!(out.stdout.is_empty());
    // ... nor read it.
    let after = send(&mail_dir, &agents[0], &[&agents[1], &agents[2]], &g, 10);
    let out = mailseal(
        &agents[2].store,
        &["open", "--in", &after.display().to_string()],
    );
    assert_eq!(out.status.code(), Some(5));
    assert!(out.stdout.is_empty());
    // With its old state it still writes at the epoch it was removed from; once that
    // epoch has left the kept window (three more epochs), the message is refused.
    for _ in 0..3 {
        let commit = update(&agents[0], &g, &root.path().join("up"));
        ok(
            &agents[1].store,
            &["open", "--in", &commit.display().to_string()],
        );
    }
    let stale = common::mls::Agent {
        email: agents[2].email.clone(),
        store: copy,
    };
    let late = send(&root.path().join("late"), &stale, &[&agents[1]], &g, 11);
    let out = mailseal(
        &agents[1].store,
        &["open", "--in", &late.display().to_string()],
    );
    assert!(out.stdout.is_empty());
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no longer kept"));
}

#[test]
fn killed_mid_commit_leaves_old_or_new_epoch() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 3);
    let commit = update(&agents[0], &g, &root.path().join("up"))
        .display()
        .to_string();
    let pristine = root.path().join("pristine");
    copy_store(&agents[1].store, &pristine);
    let (mut old, mut new) = (0, 0);
    for delay_ms in (0..60).step_by(3) {
        copy_store(&pristine, &agents[1].store);
        let mut child = std::process::Command::new(common::bin())
            .args([
                "--store",
                &agents[1].store.display().to_string(),
                "open",
                "--in",
                &commit,
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let m = ok(
            &agents[1].store,
            &["mls", "members", "--group", &g, "--json"],
        );
        let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
        match m["epoch"].as_u64() {
            Some(1) => {
                old += 1;
                // Not broken: the commit still applies.
                ok(&agents[1].store, &["open", "--in", &commit]);
            }
            Some(2) => new += 1,
            other => panic!("epoch {other:?}"),
        }
        // Either way the group works at epoch 2.
        let msg = send(
            &root.path().join(format!("m{delay_ms}")),
            &agents[0],
            &[&agents[1]],
            &g,
            delay_ms as usize,
        );
        assert!(!ok(
            &agents[1].store,
            &["open", "--in", &msg.display().to_string()]
        )
        .is_empty());
    }
    eprintln!("killed at the old epoch {old} times, at the new one {new} times");
    assert!(old > 0, "no kill landed before the commit");
}

#[test]
fn stateless_open_leaves_the_group_state_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let (agents, g) = group(root.path(), 2);
    let sealed = send(&root.path().join("mail"), &agents[0], &[&agents[1]], &g, 1);
    let path = sealed.display().to_string();
    for _ in 0..2 {
        let out = mailseal(&agents[1].store, &["open", "--stateless", "--in", &path]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("urn:uuid:group-1"));
        assert!(String::from_utf8_lossy(&out.stderr).contains("do not act on this"));
    }
    // Still unopened for the receiver rules and the ratchet: delivered once now.
    assert!(!ok(&agents[1].store, &["open", "--in", &path]).is_empty());
    let again = mailseal(&agents[1].store, &["open", "--in", &path]);
    assert!(again.stdout.is_empty());
    // A Commit under --stateless is reported, not applied.
    let commit = update(&agents[0], &g, &root.path().join("up"))
        .display()
        .to_string();
    let out = mailseal(&agents[1].store, &["open", "--stateless", "--in", &commit]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not applied"));
    let m = ok(
        &agents[1].store,
        &["mls", "members", "--group", &g, "--json"],
    );
    let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
    assert_eq!(m["epoch"], 1);
}

#[test]
fn group_ids_may_begin_with_a_hyphen() {
    // base64url ids begin with '-' one time in 64: they are values, not flags.
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("s");
    // A store of its own (only key commands make one), with no group.
    let cert = common::fixture("rfc9216/bob.sign.crt");
    ok(&store, &["key", "import", cert.to_str().unwrap()]);
    for args in [
        vec!["mls", "members", "--group", "-cy-hLVAW2YNbqClDPFNNg"],
        vec![
            "mls",
            "update",
            "--group",
            "-cy-hLVAW2YNbqClDPFNNg",
            "--out-dir",
            "x",
        ],
        vec!["mls", "next", "--group", "-cy-hLVAW2YNbqClDPFNNg"],
    ] {
        let out = mailseal(&store, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
    let out = mailseal(
        &store,
        &["mls", "members", "--group", "-cy-hLVAW2YNbqClDPFNNg"],
    );
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
