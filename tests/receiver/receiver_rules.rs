//! The receiver rules of MailA2A sections 6 and 7 (DESIGN decisions 4 to 6), each run
//! against every state backend: in memory, SQLite, and PostgreSQL (skipped with a
//! message when no server is configured; required in CI).

use crate::common;

use mailseal::envelope::Envelope;
use mailseal::replay::{
    Admission, Candidate, ReceiverError, ReceiverPolicy, ReplayStore, SqliteReplayStore,
    Unsolicited,
};
use serde_json::json;

const NOW: i64 = 1_796_000_000; // 2026-11-30
const ALICE: &str = "x509:alice";
const BOB: &str = "x509:bob";

/// Every backend, fresh.
fn backends() -> (tempfile::TempDir, common::ReplayBackends) {
    common::replay_backends()
}

fn candidate(signer: &str, v: serde_json::Value) -> Candidate {
    let bytes = serde_json::to_vec(&v).unwrap();
    let env = Envelope::from_json(&bytes).unwrap();
    Candidate::new(signer.to_string(), &env, &bytes).unwrap()
}

fn request(id: &str) -> serde_json::Value {
    json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": id, "correlationId": "corr-1",
        "sequence": 0, "final": false, "idempotencyKey": "effect-1",
        "createdAt": "2026-11-30T00:00:00Z", "expiresAt": "2026-12-01T00:00:00Z",
        "payload": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    })
}

fn event(corr: &str, seq: u64, last: bool) -> serde_json::Value {
    json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "event",
        "operation": "message/stream", "messageId": format!("{corr}-ev-{seq}"),
        "correlationId": corr, "sequence": seq, "final": last,
        "payload": {"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": if last { "TASK_STATE_COMPLETED" } else { "TASK_STATE_WORKING" }}}}
    })
}

/// The rules these tests judge: streams, replay and expiry alone, so replies are
/// accepted without a request record (`Unsolicited::Accept`; the record has its own
/// tests in `fail_unsolicited`).
fn rules() -> ReceiverPolicy {
    ReceiverPolicy {
        unsolicited: Unsolicited::Accept,
        ..ReceiverPolicy::default()
    }
}

fn admit(s: &dyn ReplayStore, c: &Candidate) -> Result<Admission, ReceiverError> {
    s.admit(c, NOW, &rules())
}

fn deliver(released: u64) -> Admission {
    Admission::Deliver {
        retry_of: None,
        released,
    }
}

#[test]
fn rule1_identical_redelivery_is_a_duplicate() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let c = candidate(ALICE, request("req-1"));
        assert_eq!(admit(s.as_ref(), &c).unwrap(), deliver(0), "{name}");
        for _ in 0..2 {
            assert_eq!(
                admit(s.as_ref(), &c).unwrap(),
                Admission::Duplicate {
                    first_accepted: NOW
                },
                "{name}"
            );
        }
        // The same messageId from another signer is another message.
        let other = candidate(BOB, request("req-1"));
        assert_eq!(admit(s.as_ref(), &other).unwrap(), deliver(0), "{name}");
    }
}

#[test]
fn rule2_fail_same_message_id_with_other_bytes_is_a_security_error() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        admit(s.as_ref(), &candidate(ALICE, request("req-1"))).unwrap();
        let mut changed = request("req-1");
        changed["payload"]["message"]["parts"][0]["text"] = json!("transfer 1000");
        let err = admit(s.as_ref(), &candidate(ALICE, changed)).unwrap_err();
        assert!(
            matches!(err, ReceiverError::Conflict { .. }),
            "{name}: {err}"
        );
        assert_eq!(mailseal::Classify::kind(&err), mailseal::ErrorKind::Policy);
        // The refusal recorded nothing: the original is still the one on record.
        assert!(
            matches!(
                admit(s.as_ref(), &candidate(ALICE, request("req-1"))).unwrap(),
                Admission::Duplicate { .. }
            ),
            "{name}"
        );
    }
}

#[test]
fn rule3_fail_expired_and_future_dated_messages_are_refused() {
    let (_d, stores) = backends();
    let policy = rules();
    let expires = 1_796_083_200; // 2026-12-01T00:00:00Z
    for (name, s) in &stores {
        let c = candidate(ALICE, request("req-exp"));
        // Within the skew after expiry: still accepted.
        assert_eq!(
            s.admit(&c, expires + policy.skew, &policy).unwrap(),
            deliver(0),
            "{name}"
        );
        let late = candidate(ALICE, request("req-late"));
        let err = s
            .admit(&late, expires + policy.skew + 1, &policy)
            .unwrap_err();
        assert!(
            matches!(err, ReceiverError::Expired { .. }),
            "{name}: {err}"
        );
        // No expiresAt: the default lifetime runs from createdAt.
        let mut old = request("req-old");
        old.as_object_mut().unwrap().remove("expiresAt");
        old["createdAt"] = json!("2026-11-01T00:00:00Z");
        let err = admit(s.as_ref(), &candidate(ALICE, old)).unwrap_err();
        assert!(
            matches!(err, ReceiverError::Expired { .. }),
            "{name}: {err}"
        );
        let mut future = request("req-future");
        future["createdAt"] = json!("2026-11-30T01:00:00Z");
        let err = s
            .admit(&candidate(ALICE, future), 1_796_000_000, &policy)
            .unwrap_err();
        assert!(
            matches!(err, ReceiverError::FromTheFuture { .. }),
            "{name}: {err}"
        );
    }
}

/// Issue #17 (DESIGN decision 5, revised): without `expiresAt` and `createdAt`, the
/// seven days run from the protected Date; an effectful request with none of the
/// three is refused; nothing is kept forever.
#[test]
fn rule3_fail_undated_effectful_requests_and_old_protected_dates() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let undated = |id: &str| {
            let mut v = request(id);
            let o = v.as_object_mut().unwrap();
            o.remove("expiresAt");
            o.remove("createdAt");
            v
        };
        let err = admit(s.as_ref(), &candidate(ALICE, undated("req-undated"))).unwrap_err();
        assert!(
            matches!(err, ReceiverError::NoLifetime { .. }),
            "{name}: {err}"
        );
        // The protected Date eight days ago: expired.
        let mut c = candidate(ALICE, undated("req-dated-old"));
        c.date = Some(NOW - 8 * 24 * 3600);
        let err = admit(s.as_ref(), &c).unwrap_err();
        assert!(
            matches!(err, ReceiverError::Expired { .. }),
            "{name}: {err}"
        );
        // Six days ago: accepted.
        let mut c = candidate(ALICE, undated("req-dated"));
        c.date = Some(NOW - 6 * 24 * 3600);
        assert_eq!(admit(s.as_ref(), &c).unwrap(), deliver(0), "{name}");
        // A read-only request without any date is delivered (kept seven days from now).
        let mut get = undated("req-get");
        get["operation"] = json!("tasks/get");
        get.as_object_mut().unwrap().remove("idempotencyKey");
        get["payload"] = json!({"id": "task-1"});
        assert_eq!(
            admit(s.as_ref(), &candidate(ALICE, get)).unwrap(),
            deliver(0),
            "{name}"
        );
    }
}

#[test]
fn rule4_a_gap_holds_later_events_back_until_it_closes() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        assert_eq!(
            admit(s, &candidate(BOB, event("c1", 1, false))).unwrap(),
            deliver(0)
        );
        assert_eq!(
            admit(s, &candidate(BOB, event("c1", 4, true))).unwrap(),
            Admission::Held {
                missing: vec![2, 3]
            },
            "{name}"
        );
        assert_eq!(
            admit(s, &candidate(BOB, event("c1", 3, false))).unwrap(),
            Admission::Held { missing: vec![2] },
            "{name}"
        );
        let status = s.streams(Some("c1")).unwrap();
        assert_eq!(status.len(), 1, "{name}");
        assert_eq!(
            (
                status[0].next_sequence,
                status[0].missing.clone(),
                status[0].held.clone(),
                status[0].final_sequence,
                status[0].complete,
                status[0].gap_since.is_some()
            ),
            (2, vec![2], vec![3, 4], Some(4), false, true),
            "{name}"
        );
        // Nothing is deliverable while the gap is open.
        assert!(s.take_deliverable("c1").unwrap().is_empty(), "{name}");
        assert_eq!(
            admit(s, &candidate(BOB, event("c1", 2, false))).unwrap(),
            deliver(2),
            "{name}"
        );
        let released = s.take_deliverable("c1").unwrap();
        assert_eq!(
            released.iter().map(|e| e.sequence).collect::<Vec<_>>(),
            [3, 4],
            "{name}"
        );
        assert_eq!(
            released[1].envelope,
            serde_json::to_vec(&event("c1", 4, true)).unwrap(),
            "{name}: the held envelope comes back byte for byte"
        );
        assert!(
            s.take_deliverable("c1").unwrap().is_empty(),
            "{name}: taken once"
        );
        let status = &s.streams(Some("c1")).unwrap()[0];
        assert!(
            status.complete && status.gap_since.is_none(),
            "{name}: {status:?}"
        );
    }
}

#[test]
fn fail_stale_state_a_held_event_that_expired_while_it_waited_is_not_released() {
    // Event 3 (expiring a minute after NOW) is held behind the gap at 2, with event 4
    // behind it. Event 2 arrives twenty minutes later: it is delivered, event 3 is not
    // (its lifetime ended while it waited, as a fresh copy's would be refused), and the
    // stream stops there, incomplete, never joined around it: event 4 stays held.
    let (_d, stores) = backends();
    let expiring = |seq: u64, until: i64| {
        let mut v = event("c-exp", seq, false);
        v["expiresAt"] = json!(rfc3339(until));
        v
    };
    for (name, s) in &stores {
        let s = s.as_ref();
        let p = rules();
        assert_eq!(
            admit(s, &candidate(BOB, event("c-exp", 1, false))).unwrap(),
            deliver(0)
        );
        let three = candidate(BOB, expiring(3, NOW + 60));
        assert!(matches!(admit(s, &three).unwrap(), Admission::Held { .. }));
        let four = candidate(BOB, expiring(4, NOW + 86_400));
        assert!(matches!(admit(s, &four).unwrap(), Admission::Held { .. }));
        let later = NOW + 1200;
        assert_eq!(
            s.admit(&candidate(BOB, expiring(2, NOW + 86_400)), later, &p)
                .unwrap(),
            deliver(0),
            "{name}"
        );
        assert!(s.take_deliverable("c-exp").unwrap().is_empty(), "{name}");
        let status = &s.streams(Some("c-exp")).unwrap()[0];
        assert_eq!(
            (
                status.next_sequence,
                status.missing.clone(),
                status.held.clone(),
                status.complete
            ),
            (3, vec![3], vec![4], false),
            "{name}: {status:?}"
        );
        assert!(status.gap_since.is_some(), "{name}");
        // The same event sent again is not delivered either.
        assert!(
            !matches!(s.admit(&three, later, &p), Ok(Admission::Deliver { .. })),
            "{name}"
        );
        assert!(s.take_deliverable("c-exp").unwrap().is_empty(), "{name}");
    }
}

#[test]
fn rule5_fail_exactly_one_final_per_stream() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        admit(s, &candidate(BOB, event("c2", 1, false))).unwrap();
        admit(s, &candidate(BOB, event("c2", 2, true))).unwrap();
        let mut second_final = event("c2", 3, true);
        second_final["messageId"] = json!("other-final");
        let err = admit(s, &candidate(BOB, second_final)).unwrap_err();
        assert!(
            matches!(err, ReceiverError::AfterFinal { .. }),
            "{name}: {err}"
        );
        let err = admit(s, &candidate(BOB, event("c2", 3, false))).unwrap_err();
        assert!(
            matches!(err, ReceiverError::AfterFinal { .. }),
            "{name}: {err}"
        );
        // A final held behind a gap also ends the stream.
        admit(s, &candidate(BOB, event("c3", 3, true))).unwrap();
        let err = admit(s, &candidate(BOB, event("c3", 5, false))).unwrap_err();
        assert!(
            matches!(err, ReceiverError::AfterFinal { .. }),
            "{name}: {err}"
        );
        // And a final cannot come before events already held after it.
        admit(s, &candidate(BOB, event("c4", 4, false))).unwrap();
        let err = admit(s, &candidate(BOB, event("c4", 2, true))).unwrap_err();
        assert!(
            matches!(err, ReceiverError::AfterFinal { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn fail_a_second_event_with_a_used_sequence_number() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        admit(s, &candidate(BOB, event("c5", 1, false))).unwrap();
        admit(s, &candidate(BOB, event("c5", 3, false))).unwrap();
        for seq in [1, 3] {
            let mut again = event("c5", seq, false);
            again["messageId"] = json!(format!("impostor-{seq}"));
            let err = admit(s, &candidate(BOB, again)).unwrap_err();
            assert!(
                matches!(err, ReceiverError::SequenceReused { .. }),
                "{name}: {err}"
            );
        }
    }
}

#[test]
fn fail_buffer_and_gap_bounds() {
    let (_d, stores) = backends();
    let policy = ReceiverPolicy {
        max_pending_per_sender: 3,
        max_gap: 10,
        ..rules()
    };
    for (name, s) in &stores {
        for seq in 2..5 {
            s.admit(&candidate(BOB, event("c6", seq, false)), NOW, &policy)
                .unwrap();
        }
        let err = s
            .admit(&candidate(BOB, event("c6", 5, false)), NOW, &policy)
            .unwrap_err();
        assert!(
            matches!(err, ReceiverError::BufferFull { limit: 3 }),
            "{name}: {err}"
        );
        // Not recorded: once the gap closes the same event is accepted.
        s.admit(&candidate(BOB, event("c6", 1, false)), NOW, &policy)
            .unwrap();
        assert_eq!(s.take_deliverable("c6").unwrap().len(), 3, "{name}");
        assert_eq!(
            s.admit(&candidate(BOB, event("c6", 5, false)), NOW, &policy)
                .unwrap(),
            deliver(0),
            "{name}"
        );
        let err = s
            .admit(&candidate(BOB, event("c6", 17, false)), NOW, &policy)
            .unwrap_err();
        assert!(
            matches!(err, ReceiverError::TooFarAhead { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn retries_keep_the_idempotency_key_and_are_reported() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        admit(s, &candidate(ALICE, request("attempt-0"))).unwrap();
        let mut retry = request("attempt-1");
        retry["serviceParameters"] = json!({"retry": 1});
        assert_eq!(
            admit(s, &candidate(ALICE, retry)).unwrap(),
            Admission::Deliver {
                retry_of: Some("attempt-0".into()),
                released: 0
            },
            "{name}"
        );
        // The retry's replies are numbered from 1 again: their own stream.
        let mut reply = event("corr-1", 1, true);
        reply["operation"] = json!("message/send");
        let first = candidate(BOB, reply.clone());
        reply["messageId"] = json!("reply-to-retry");
        reply["serviceParameters"] = json!({"retry": 1});
        let second = candidate(BOB, reply);
        assert_eq!(admit(s, &first).unwrap(), deliver(0), "{name}");
        assert_eq!(admit(s, &second).unwrap(), deliver(0), "{name}");
        // The key reused for another operation is refused.
        let mut other = request("attempt-x");
        other["operation"] = json!("tasks/cancel");
        other["payload"] = json!({"id": "t"});
        let err = admit(s, &candidate(ALICE, other)).unwrap_err();
        assert!(
            matches!(err, ReceiverError::IdempotencyConflict { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn fail_a_reply_that_changes_the_stream_operation() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        admit(s.as_ref(), &candidate(BOB, event("c7", 1, false))).unwrap();
        let mut wrong = event("c7", 2, false);
        wrong["operation"] = json!("tasks/subscribe");
        let err = admit(s.as_ref(), &candidate(BOB, wrong)).unwrap_err();
        assert!(
            matches!(err, ReceiverError::StreamMismatch { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn state_survives_reopening_and_the_file_is_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let s = SqliteReplayStore::open(&path).unwrap();
        admit(&s, &candidate(ALICE, request("req-1"))).unwrap();
        admit(&s, &candidate(BOB, event("c8", 2, true))).unwrap();
    }
    let s = SqliteReplayStore::open(&path).unwrap();
    assert!(matches!(
        admit(&s, &candidate(ALICE, request("req-1"))).unwrap(),
        Admission::Duplicate { .. }
    ));
    assert_eq!(s.streams(Some("c8")).unwrap()[0].held, [2]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["state.db", "state.db-wal"] {
            let p = dir.path().join(f);
            if p.exists() {
                let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{f}");
            }
        }
    }
}

#[test]
fn fail_a_state_file_from_a_newer_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    drop(SqliteReplayStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = SqliteReplayStore::open(&path).unwrap_err();
    assert!(
        matches!(err, ReceiverError::NewerSchema { found: 99, .. }),
        "{err}"
    );
}

#[test]
fn an_empty_older_file_is_migrated() {
    // A database that exists but predates the replay tables (schema 0) opens and gets
    // them: the migration path every older store takes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE unrelated (x INTEGER)")
        .unwrap();
    let s = SqliteReplayStore::open(&path).unwrap();
    assert_eq!(
        s.schema_version().unwrap(),
        mailseal::replay::SCHEMA_VERSION
    );
    admit(&s, &candidate(ALICE, request("req-1"))).unwrap();
}

#[test]
fn fail_a_payment_payload_nobody_asked_for() {
    let (_d, stores) = backends();
    for (name, s) in &stores {
        let s = s.as_ref();
        let mut paid = request("paid-1");
        paid["serviceParameters"] = json!({"retry": 1});
        paid["payment"] = json!({"kind": "payload", "x402Version": 2,
            "object": {"x402Version": 2, "accepted": {}, "payload": {}}});
        let mut c = candidate(ALICE, paid);
        c.peer = "alice@example.net".into();
        let err = admit(s, &c).unwrap_err();
        assert!(
            matches!(err, ReceiverError::UnsolicitedPayment { .. }),
            "{name}: {err}"
        );
        // Asked of someone else, or in another exchange: still refused.
        s.record_payment_required("mallory@example.net", "corr-1", None, NOW)
            .unwrap();
        s.record_payment_required("alice@example.net", "corr-9", None, NOW)
            .unwrap();
        assert!(admit(s, &c).is_err(), "{name}");
        // Asked of this peer in this exchange, as the retry of the request it priced:
        // accepted (and not before).
        let mut priced = candidate(ALICE, request("priced-0"));
        priced.peer = "alice@example.net".into();
        admit(s, &priced).unwrap();
        s.record_payment_required("alice@example.net", "corr-1", None, NOW)
            .unwrap();
        assert!(
            matches!(admit(s, &c).unwrap(), Admission::Deliver { .. }),
            "{name}"
        );
    }
}

#[test]
fn a_preview_decides_as_admit_would_and_records_nothing() {
    let (_d, stores) = backends();
    let policy = rules();
    for (name, s) in &stores {
        let req = candidate(ALICE, request("req-preview"));
        for _ in 0..2 {
            assert_eq!(s.preview(&req, NOW, &policy).unwrap(), deliver(0), "{name}");
        }
        assert_eq!(admit(s.as_ref(), &req).unwrap(), deliver(0), "{name}");
        assert!(
            matches!(
                s.preview(&req, NOW, &policy).unwrap(),
                Admission::Duplicate { .. }
            ),
            "{name}"
        );
        // Event 2 previewed before event 1: held, but nothing is kept, so event 1
        // releases nothing and event 2 is then simply next.
        let e1 = candidate(BOB, event("corr-preview", 1, false));
        let e2 = candidate(BOB, event("corr-preview", 2, true));
        assert!(
            matches!(
                s.preview(&e2, NOW, &policy).unwrap(),
                Admission::Held { .. }
            ),
            "{name}"
        );
        assert_eq!(admit(s.as_ref(), &e1).unwrap(), deliver(0), "{name}");
        assert_eq!(admit(s.as_ref(), &e2).unwrap(), deliver(0), "{name}");
        assert!(
            s.take_deliverable("corr-preview").unwrap().is_empty(),
            "{name}"
        );
    }
}

/// Issue #17, store hygiene: a receiver whose clock is far in the future (misset, or
/// an archive replayed with a future `--now`) must not prune a shared replay store
/// past the machine's time: the others would accept the forgotten messages again.
#[test]
fn a_clock_far_in_the_future_never_prunes_a_shared_store() {
    let (_d, stores) = backends();
    let real_now = time::OffsetDateTime::now_utc().unix_timestamp();
    let policy = rules();
    for (name, s) in &stores {
        let mut v = request("req-shared");
        v["createdAt"] = serde_json::json!(rfc3339(real_now - 60));
        v["expiresAt"] = serde_json::json!(rfc3339(real_now + 3600));
        let c = candidate(ALICE, v);
        assert_eq!(
            s.admit(&c, real_now, &policy).unwrap(),
            deliver(0),
            "{name}"
        );
        // Another receiver sharing the store, its clock ten years ahead.
        let mut other = request("req-from-the-future-clock");
        other["idempotencyKey"] = serde_json::json!("effect-far");
        other.as_object_mut().unwrap().remove("expiresAt");
        other["createdAt"] = serde_json::json!(rfc3339(real_now + 10 * 365 * 86400));
        let _ = s.admit(
            &candidate(ALICE, other),
            real_now + 10 * 365 * 86400,
            &policy,
        );
        // The first message is still remembered.
        assert!(
            matches!(
                s.admit(&c, real_now, &policy).unwrap(),
                Admission::Duplicate { .. }
            ),
            "{name}"
        );
    }
}

fn rfc3339(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}
