//! The offline host's signing log: every signature appended, the chain checked by
//! `sign-log verify`; a removed or edited entry is found, and a removed tail against
//! the head the operator noted. And `sign --batch` with a refused request in the batch.

use super::kit::{self, read, Hosts};

fn three_signatures() -> (Hosts, std::path::PathBuf) {
    let h = kit::smime();
    let at = kit::now_text();
    for i in 0..3 {
        let plain = h.compose(&format!("p{i}.eml"), &format!("req-{i}"), "Log me.");
        h.round_trip("smime", &plain, &at, &format!("m{i}"));
    }
    let log = h.path("offline").join("signing.log");
    (h, log)
}

fn verify(h: &Hosts, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["sign-log", "verify"];
    args.extend_from_slice(extra);
    h.at("offline", &args, b"")
}

#[test]
fn the_log_chains_every_signature_and_finds_an_edit_or_a_removal() {
    let (h, log) = three_signatures();
    let out = verify(&h, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ok: 3 entries"), "{stdout}");
    let head = stdout
        .rsplit("head ")
        .next()
        .expect("head")
        .trim()
        .to_string();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&log).expect("log").permissions().mode();
        assert_eq!(mode & 0o077, 0, "the log is owner-only");
    }
    let original = String::from_utf8(read(&log.display().to_string())).expect("text");
    let lines: Vec<&str> = original.lines().collect();
    // The middle entry removed.
    std::fs::write(&log, format!("{}\n{}\n", lines[0], lines[2])).expect("write");
    let out = verify(&h, &[]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));
    // One entry edited (another recipient), its hash left.
    std::fs::write(
        &log,
        original.replacen("bob@smime.example", "eve@smime.example", 1),
    )
    .expect("write");
    let out = verify(&h, &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed after it was written"));
    // The last entry removed: the chain still holds, the noted head does not.
    std::fs::write(&log, format!("{}\n{}\n", lines[0], lines[1])).expect("write");
    assert!(verify(&h, &[]).status.success());
    let out = verify(&h, &["--head", &head]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A broken log is not extended.
    std::fs::write(&log, format!("{}\n{}\n", lines[0], lines[2])).expect("write");
    let plain = h.compose("p9.eml", "req-9", "After tampering.");
    let req = h.p("p9.req");
    h.ok(
        "connected",
        &["sign-request", "--profile", "smime", &plain, "--out", &req],
        b"",
    );
    let out = h.at("offline", &["sign", &req, "--yes"], b"");
    assert_eq!(out.status.code(), Some(4));
    assert!(out.stdout.is_empty(), "signed onto a broken log");
}

#[test]
fn a_batch_signs_every_good_request_and_lists_the_refused() {
    let h = kit::smime();
    let at = kit::now_text();
    let batch = h.path("batch");
    std::fs::create_dir(&batch).expect("mkdir");
    for i in 0..4 {
        let plain = h.compose(&format!("b{i}.eml"), &format!("batch-{i}"), "Batch.");
        let req = batch.join(format!("{i}.req")).display().to_string();
        h.ok(
            "connected",
            &[
                "sign-request",
                "--profile",
                "smime",
                "--at",
                &at,
                &plain,
                "--out",
                &req,
            ],
            b"",
        );
    }
    std::fs::write(batch.join("9.req"), "not a request").expect("write");
    let out = h.at(
        "offline",
        &["sign", "--batch", &batch.display().to_string()],
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "asks for --yes");
    let out = h.at(
        "offline",
        &["sign", "--batch", &batch.display().to_string(), "--yes"],
        b"",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("signed 4 of 5"), "{stdout}");
    assert!(
        stdout.contains("refused") && stdout.contains("9.req"),
        "{stdout}"
    );
    for i in 0..4 {
        let req = batch.join(format!("{i}.req")).display().to_string();
        let resp = batch.join(format!("{i}.resp")).display().to_string();
        let msg = h.p(&format!("b{i}.signed"));
        h.ok("connected", &["assemble", &req, &resp, "--out", &msg], b"");
        h.ok("bob", &["open", "--in", &msg], b"");
    }
    assert!(!batch.join("9.resp").exists());
    assert!(String::from_utf8_lossy(&verify(&h, &[]).stdout).contains("ok: 4 entries"));
}

#[test]
fn fail_a_response_logged_with_another_request() {
    use mailseal::offline::{SigningLog, SigningRequest, SigningResponse};
    let seed = |n: &str| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fuzz/seeds/offline")
                .join(n),
        )
        .expect("seed")[1..]
            .to_vec()
    };
    let request = SigningRequest::parse(&seed("smime.req.bin")).expect("request");
    let other = SigningRequest::parse(&seed("jws.req.bin")).expect("request");
    let response = SigningResponse::parse(&seed("smime.resp.bin")).expect("response");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = SigningLog::new(dir.path().join("signing.log"));
    assert!(log.append(&other, &response).is_err());
    assert!(!dir.path().join("signing.log").exists() || log.verify().expect("verifies").is_empty());
    let entry = log.append(&request, &response).expect("appends");
    assert_eq!(entry.seq, 1);
    assert_eq!(log.verify().expect("verifies").len(), 1);
}

#[test]
fn a_request_signed_again_is_said_to_have_been_signed_before() {
    let h = kit::smime();
    let plain = h.compose("p.eml", "again-1", "Twice.");
    let req = h.p("again.req");
    h.request("smime", &plain, &req, &[]);
    let typed = kit::confirmation(&req);
    let first = h.ok("offline", &["sign", &req, "--out", &h.p("a1.resp")], &typed);
    assert!(!String::from_utf8_lossy(&first.stderr).contains("signed before"));
    let second = h.ok("offline", &["sign", &req, "--out", &h.p("a2.resp")], &typed);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("this request was signed before: signing log entry 1"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&verify(&h, &[]).stdout).contains("ok: 2 entries"));
}

#[test]
fn a_log_without_summaries_still_verifies_and_an_edited_summary_digest_is_found() {
    use mailseal::keystore::{DirectoryStore, KeyStore};
    use mailseal::offline::{self, SigningLog, SigningRequest, SigningResponse};
    let seed = |n: &str| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fuzz/seeds/offline")
                .join(n),
        )
        .expect("seed")[1..]
            .to_vec()
    };
    let request = SigningRequest::parse(&seed("smime.req.bin")).expect("request");
    let response = SigningResponse::parse(&seed("smime.resp.bin")).expect("response");
    let dir = tempfile::tempdir().expect("temp dir");
    let store = DirectoryStore::open(dir.path().join("s")).expect("store");
    let f =
        |r: &str| std::fs::read(super::common::fixture(&format!("rfc9216/{r}"))).expect("fixture");
    let mut identity = f("alice.sign.crt");
    identity.extend(f("alice.sign.key"));
    store.import(&identity, "alice", false).expect("import");
    let path = dir.path().join("signing.log");
    let log = SigningLog::new(&path);
    // An entry as the log wrote them before summaries were recorded: no member.
    let old = log.append(&request, &response).expect("appends");
    assert_eq!(old.summary, None);
    assert!(!std::fs::read_to_string(&path)
        .expect("log")
        .contains("summary"));
    let review = offline::review(&store, request.clone()).expect("reviews");
    let new = log
        .append_shown(&request, &response, review.summary())
        .expect("appends");
    assert_eq!(
        new.summary.as_deref(),
        Some(review.summary().digest().as_str())
    );
    assert_eq!(SigningLog::new(&path).verify().expect("verifies").len(), 2);
    // The recorded digest replaced by another summary's: the entry's hash breaks.
    let text = std::fs::read_to_string(&path).expect("log");
    let forged = text.replace(&review.summary().digest(), &"0".repeat(64));
    std::fs::write(&path, forged).expect("write");
    let e = SigningLog::new(&path).verify().expect_err("edited");
    assert!(
        e.to_string().contains("changed after it was written"),
        "{e}"
    );
}
