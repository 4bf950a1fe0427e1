//! Stale members and state (THREATS.md): a message is judged by the leaf that signed it
//! at the epoch it was framed in, and nothing a non-member sends fills the hold for
//! the members.
//!
//! The attacker holds a removed member's old device state (its signature key and the
//! epoch secrets of the epochs it was in) or has seen one group mail (the group id and
//! epoch are in the clear), and writes whatever mail it likes; only Bob's state is
//! out of its reach.

use mailseal::message::Hints;
use mailseal::mls::{wire, Mls, MlsConfig, MlsError, Received};

use super::fail_review_stale_members::{carol_ahead, release};
use super::mls_group::{auth, member, open, request, sender_of, trio};

/// Carol, removed and then added again from a new device, lands on the leaf she had.
/// The old device's message of the epoch before the removal is refused: that leaf was
/// emptied since, whoever holds it now.
#[test]
fn fail_stale_members_re_added_member_old_epoch_message() {
    let (a, b, c, g) = trio();
    let carol_leaf = |m: &Mls| {
        m.members(&g)
            .unwrap()
            .members
            .iter()
            .find(|(_, who)| who == "carol@c.example")
            .map(|(i, _)| *i)
    };
    let leaf_before = carol_leaf(&b).unwrap();
    // Sealed by the old device at epoch 1, kept by the thief, never sent then.
    let old = c
        .seal(
            &request("carol@c.example", &["bob@b.example"], "m-stolen-state"),
            &g,
            false,
        )
        .unwrap();
    let removal = a.remove(&g, "carol@c.example").unwrap();
    open(&b, &removal).unwrap();
    let carol_again = member("carol@c.example");
    let kp = carol_again.key_package("carol@c.example").unwrap();
    let added = a.add(&g, &[kp], auth()).unwrap();
    open(&b, &added.commit).unwrap();
    open(&carol_again, &added.welcome).unwrap();
    // The premise: the new leaf is where the old one was, under the same name.
    assert_eq!(carol_leaf(&b), Some(leaf_before));

    let err = open(&b, &old).unwrap_err();
    assert!(
        matches!(err, MlsError::SenderRemoved { ref sender, .. } if sender == "carol@c.example"),
        "{err}"
    );
    // Control: Carol's new device speaks for her at the current epoch.
    let fresh = carol_again
        .seal(
            &request("carol@c.example", &["bob@b.example"], "m-new-device"),
            &g,
            false,
        )
        .unwrap();
    assert_eq!(sender_of(&open(&b, &fresh).unwrap()), "m-new-device");
}

/// A member whose leaf stayed (an update in between) still has its late message of
/// the earlier epoch delivered: only a removal ends a leaf's past.
#[test]
fn stale_members_control_update_keeps_late_mail() {
    let (a, b, c, g) = trio();
    let late = c
        .seal(
            &request("carol@c.example", &["bob@b.example"], "m-late"),
            &g,
            false,
        )
        .unwrap();
    let update = c.update(&g).unwrap();
    open(&b, &update).unwrap();
    open(&a, &update).unwrap();
    assert_eq!(sender_of(&open(&b, &late).unwrap()), "m-late");
}

/// Mail of Bob's group as Mallory, never a member, writes it once she has seen one
/// group mail: the framing of `genuine` (group id, epoch) with its epoch set to
/// `epoch`, its ciphertext's last byte changed by `n`, under the From `from`.
fn garbage(genuine: &[u8], group: &str, epoch: u64, n: u8, from: &str) -> Vec<u8> {
    use base64::Engine;
    let limits = mailseal::message::Limits::default();
    let mail = wire::read_mail(genuine, &limits).unwrap();
    let mut message = mail.message;
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(group)
        .unwrap();
    let at = message
        .windows(id.len())
        .position(|w| w == id.as_slice())
        .unwrap()
        + id.len();
    message[at..at + 8].copy_from_slice(&epoch.to_be_bytes());
    let last = message.len() - 1;
    message[last] ^= n.wrapping_add(1);
    let mut headers = mail.headers;
    headers.from = Some(mailseal::message::Mailbox::new(from));
    wire::write_mail(&headers, &Hints::default(), &message).unwrap()
}

/// Garbage for the next epochs under a member's name and under names of no member:
/// each name fills its own share of the hold only, and the refusals past it are
/// temporary (the mail is delivered again later); a message too many epochs ahead is
/// refused, not held; Carol's genuine message for the next epoch is still held, and
/// Alice's, refused while her share was full, opens when delivered again after the
/// Commit.
#[test]
fn fail_stale_members_hold_flood_before_authentication() {
    let (a, b, c, g) = trio();
    let config = MlsConfig::default();
    // Alice commits (epoch 2); Carol has it, Bob has not yet.
    let (commit, from_carol) = carol_ahead(&a, &c, &g);
    let from_alice = a
        .seal(
            &request("alice@a.example", &["bob@b.example"], "m-alice-next"),
            &g,
            false,
        )
        .unwrap();

    // Under Alice's name: her share fills, then temporary refusals.
    for n in 0..config.max_held_per_sender {
        let held = open(&b, &garbage(&from_carol, &g, 2, n as u8, "alice@a.example")).unwrap();
        assert!(
            matches!(
                held,
                Received::Held {
                    epoch: 2,
                    current: 1,
                    ..
                }
            ),
            "{held:?}"
        );
    }
    let err = open(&b, &garbage(&from_carol, &g, 2, 200, "alice@a.example")).unwrap_err();
    assert!(
        matches!(err, MlsError::BufferFull { sender: Some(ref s), .. } if s == "alice@a.example"),
        "{err}"
    );
    assert!(err.retry_later());
    let err = open(&b, &from_alice).unwrap_err();
    assert!(
        matches!(err, MlsError::BufferFull { .. }) && err.retry_later(),
        "{err}"
    );

    // Under names of no member (one share for all of them).
    for n in 0..config.max_held_per_sender {
        let from = format!("mallory-{n}@m.example");
        open(&b, &garbage(&from_carol, &g, 3, n as u8, &from)).unwrap();
    }
    let err = open(&b, &garbage(&from_carol, &g, 3, 201, "nobody@m.example")).unwrap_err();
    assert!(
        matches!(
            err,
            MlsError::BufferFull {
                sender: Some(_),
                ..
            }
        ),
        "{err}"
    );

    // Too far ahead: refused, not held, whoever it names.
    let err = open(
        &b,
        &garbage(
            &from_carol,
            &g,
            1 + config.max_epochs_ahead + 1,
            0,
            "carol@c.example",
        ),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            MlsError::TooFarAhead {
                epoch: 6,
                current: 1,
                ..
            }
        ) && err.retry_later(),
        "{err}"
    );
    let held_before = b.held_count(&g).unwrap();

    // Carol's genuine message for epoch 2 is held: her share is her own.
    assert!(matches!(
        open(&b, &from_carol).unwrap(),
        Received::Held {
            epoch: 2,
            current: 1,
            ..
        }
    ));
    assert_eq!(b.held_count(&g).unwrap(), held_before + 1);

    // The Commit comes: what was held for epoch 2 is released; Mallory's garbage does
    // not open and is dropped, Carol's message opens.
    open(&b, &commit).unwrap();
    let opened = release(&b, &g);
    assert_eq!(opened, ["m-carol-next"]);
    // Alice's message, refused for now while her share was full, delivered again.
    assert_eq!(sender_of(&open(&b, &from_alice).unwrap()), "m-alice-next");
    // What waits now is Mallory's mail for epoch 3 only.
    assert_eq!(b.held_count(&g).unwrap(), config.max_held_per_sender);
}

/// A held MLS message whose lifetime ends while it waits for its Commit: the hold
/// could not judge it (its epoch's keys were not ours yet), so the release does, and
/// refuses it as expired (exit 6); it is dropped from the hold, never delivered.
#[test]
fn fail_stale_members_a_held_message_that_expired_while_held_is_not_released() {
    use crate::common::mls::{mailseal, ok, send_envelope, update};
    let root = tempfile::tempdir().unwrap();
    let (agents, group) = crate::common::mls::group(root.path(), 2);
    let mail = root.path().join("mail");
    let commit = update(&agents[0], &group, &mail.join("update"));
    let fmt = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let now = time::OffsetDateTime::now_utc();
    let mut env: serde_json::Value =
        serde_json::from_str(&crate::common::mls::envelope(1)).unwrap();
    env["createdAt"] = fmt(now - time::Duration::hours(2)).into();
    env["expiresAt"] = fmt(now - time::Duration::hours(1)).into();
    let sealed = send_envelope(
        &mail,
        &agents[0],
        &[&agents[1]],
        &group,
        1,
        &env.to_string(),
    );
    let bob = &agents[1].store;
    let held = mailseal(bob, &["open", "--in", sealed.to_str().unwrap()]);
    assert_eq!(held.status.code(), Some(0));
    assert!(held.stdout.is_empty());
    assert!(String::from_utf8_lossy(&held.stderr).contains("held"));
    ok(bob, &["open", "--in", commit.to_str().unwrap()]);
    let released = mailseal(bob, &["mls", "next", "--group", &group]);
    let stderr = String::from_utf8_lossy(&released.stderr);
    assert_eq!(released.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("expired"), "{stderr}");
    assert!(released.stdout.is_empty());
    // Dropped, not held again.
    let again = mailseal(bob, &["mls", "next", "--group", &group]);
    assert!(again.stdout.is_empty());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no held MLS message is ready"));
}
