//! The whole flow in three stores, per profile: the assembled message verifies with
//! the real tools (`openssl cms -verify`, `gpg --verify`), opens at the recipient, is
//! the message a signed-only seal makes with the same key and time, and encrypts
//! afterwards when asked.

use super::common::{fixture, openssl, Gpg};
use super::kit::{self, read};

/// `seal --sign-only --at AT` of `plain` on the offline host (which holds the key).
fn sealed_sign_only(h: &kit::Hosts, profile: &str, at: &str, plain: &str) -> std::process::Output {
    h.ok(
        "offline",
        &[
            "seal",
            "--profile",
            profile,
            "--sign-only",
            "--at",
            at,
            plain,
        ],
        b"",
    )
}

/// Bob opens `msg` and delivers the envelope `id`.
fn delivered_at_bob(h: &kit::Hosts, msg: &str, id: &str) {
    let opened = h.ok("bob", &["open", "--in", msg], b"");
    let env: serde_json::Value = serde_json::from_slice(&opened.stdout).expect("envelope JSON");
    assert_eq!(env["messageId"], id);
}

/// The request and response assembled and then encrypted: Bob opens it as
/// signed-encrypted (`marker` is in the encrypted message's layout).
fn encrypted_opens_at_bob(h: &kit::Hosts, req: &str, resp: &str, id: &str, marker: &str) {
    let enc = h.p("enc.eml");
    h.ok(
        "connected",
        &["assemble", req, resp, "--encrypt", "--out", &enc],
        b"",
    );
    assert!(String::from_utf8_lossy(&read(&enc)).contains(marker));
    let opened = h.ok(
        "bob",
        &["open", "--in", &enc, "--report", &h.p("v.json")],
        b"",
    );
    let env: serde_json::Value = serde_json::from_slice(&opened.stdout).expect("envelope JSON");
    assert_eq!(env["messageId"], id);
    let report: serde_json::Value = serde_json::from_slice(&read(&h.p("v.json"))).expect("report");
    assert_eq!(report["protection"], "signed-encrypted", "{report}");
}

#[test]
fn smime_request_sign_assemble_verifies_with_openssl_and_opens_at_bob() {
    let h = kit::smime();
    let plain = h.compose("plain.eml", "req-smime-1", "Pay invoice 77.");
    let at = kit::now_text();
    let (req, _, msg) = h.round_trip("smime", &plain, &at, "one");
    // OpenSSL verifies the signature and the chain to the RFC 9216 CA.
    let ca = fixture("rfc9216/ca.rsa.crt").display().to_string();
    openssl(
        &[
            "cms",
            "-verify",
            "-in",
            &msg,
            "-CAfile",
            &ca,
            "-out",
            "/dev/null",
        ],
        h.dir.path(),
    );
    // The same bytes as a signed-only seal with the key and time (RSA PKCS#1 v1.5 is
    // deterministic, the boundaries follow from the content).
    let sealed = sealed_sign_only(&h, "smime", &at, &plain);
    assert_eq!(
        sealed.stdout,
        read(&msg),
        "assembled message differs from seal --sign-only"
    );
    // Bob delivers it: the envelope JSON on stdout.
    delivered_at_bob(&h, &msg, "req-smime-1");
    // The request is small, readable text.
    let text = String::from_utf8(read(&req)).expect("text");
    assert!(text.starts_with("-----BEGIN MAILSEAL SIGNING REQUEST-----\nFingerprint: "));
    assert!(text.contains("\"signerAddress\": \"alice@smime.example\""));
}

#[test]
fn smime_assembled_then_encrypted_opens_at_bob() {
    let h = kit::smime();
    let plain = h.compose("plain.eml", "req-smime-2", "Encrypted after signing.");
    let (req, resp, _) = h.round_trip("smime", &plain, &kit::now_text(), "one");
    encrypted_opens_at_bob(&h, &req, &resp, "req-smime-2", "authEnveloped-data");
}

#[test]
fn openpgp_request_sign_assemble_verifies_with_gpg_and_opens_at_bob() {
    let h = kit::openpgp();
    let plain = h.compose("plain.eml", "req-pgp-1", "Approve the transfer.");
    let at = kit::now_text();
    let (_, _, msg) = h.round_trip("openpgp", &plain, &at, "one");
    let message = read(&msg);
    // GnuPG 2.2 verifies the detached signature over the signed entity.
    let (entity, signature) = kit::signed_parts(&message);
    let gpg = Gpg::new();
    gpg.run(&["--import", &h.p("alice.asc")], b"");
    std::fs::write(h.path("entity"), &entity).expect("write");
    std::fs::write(h.path("entity.asc"), &signature).expect("write");
    let out = gpg.run(&["--verify", &h.p("entity.asc"), &h.p("entity")], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Good signature"));
    // And Sequoia's own SOP (sqop), a second OpenPGP implementation.
    if super::common::peer_available("sqop", std::process::Command::new("sqop").arg("version")) {
        let mut child = std::process::Command::new("sqop")
            .args(["verify", &h.p("entity.asc"), &h.p("alice.asc")])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("sqop runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&entity)
            .expect("write");
        let out = child.wait_with_output().expect("sqop finishes");
        assert!(
            out.status.success(),
            "sqop verify: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stdout.is_empty(), "sqop names the verification");
    }
    // Bob delivers it.
    delivered_at_bob(&h, &msg, "req-pgp-1");
    // A signed-only seal at the same time differs only in Sequoia's salt notation
    // (chosen by the connected host here, by the sealer there) and so the signature.
    let sealed = sealed_sign_only(&h, "openpgp", &at, &plain);
    let (seal_entity, _) = kit::signed_parts(&sealed.stdout);
    assert_eq!(seal_entity, entity, "the signed entity is the same");
    let head = |m: &[u8]| {
        m[..memchr::memmem::find(m, b"-----BEGIN PGP SIGNATURE").expect("armor")].to_vec()
    };
    assert_eq!(head(&sealed.stdout), head(&message));
}

#[test]
fn openpgp_assembled_then_encrypted_opens_at_bob() {
    let h = kit::openpgp();
    let plain = h.compose("plain.eml", "req-pgp-2", "Encrypted after signing.");
    let (req, resp, _) = h.round_trip("openpgp", &plain, &kit::now_text(), "one");
    encrypted_opens_at_bob(&h, &req, &resp, "req-pgp-2", "multipart/encrypted");
}

#[test]
fn jws_request_sign_assemble_is_the_sealed_message_and_opens_at_bob() {
    for alg in ["eddsa", "rs256"] {
        let h = kit::jws(alg);
        let plain = h.compose("plain.eml", "req-jws-1", "Sign with a JWK.");
        let at = kit::now_text();
        let (req, resp, msg) = h.round_trip("jws", &plain, &at, "one");
        let sealed = sealed_sign_only(&h, "jws", &at, &plain);
        assert_eq!(
            sealed.stdout,
            read(&msg),
            "{alg}: assembled differs from seal"
        );
        delivered_at_bob(&h, &msg, "req-jws-1");
        // detached-jws is signed only.
        let out = h.at("connected", &["assemble", &req, &resp, "--encrypt"], b"");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn the_library_flow_needs_no_private_key_on_the_connected_host() {
    use mailseal::keystore::{DirectoryStore, KeyStore};
    use mailseal::offline::{self, SigningRequest, SigningResponse};
    let dir = tempfile::tempdir().expect("temp dir");
    let offline_store = DirectoryStore::open(dir.path().join("offline")).expect("store");
    let connected = DirectoryStore::open(dir.path().join("connected")).expect("store");
    let f = |r: &str| std::fs::read(fixture(&format!("rfc9216/{r}"))).expect("fixture");
    let mut identity = f("alice.sign.crt");
    identity.extend(f("alice.sign.key"));
    offline_store
        .import(&identity, "alice", false)
        .expect("import");
    offline_store
        .import(&f("ca.rsa.crt"), "ca", true)
        .expect("import");
    connected
        .import(&f("alice.sign.crt"), "alice", false)
        .expect("import");
    connected
        .import(&f("ca.rsa.crt"), "ca", true)
        .expect("import");
    let mut env = mailseal::Envelope::new(
        mailseal::Kind::Request,
        mailseal::Operation::TasksGet,
        "lib-1",
    );
    env.set("payload", &serde_json::json!({"id": "task-1"}));
    let plain = mailseal::MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
    let mut opts = mailseal::SealOptions::new(mailseal::Profile::Smime);
    opts.sign_only = true;
    let request = offline::prepare(&connected, &plain, &opts).expect("prepare");
    // Across the gap as text.
    let request = SigningRequest::parse(request.to_text().as_bytes()).expect("parse");
    let review = offline::review(&offline_store, request.clone()).expect("review");
    let summary = review.summary().to_string();
    assert!(
        summary.contains("alice@smime.example") && summary.contains("tasks/get"),
        "{summary}"
    );
    let response = review.sign(time::OffsetDateTime::now_utc()).expect("sign");
    let response = SigningResponse::parse(response.to_text().as_bytes()).expect("parse");
    // The connected store cannot sign (no key) but assembles.
    assert!(offline::review(&connected, request.clone())
        .and_then(|r| r.sign(time::OffsetDateTime::now_utc()))
        .is_err());
    let assembled = offline::assemble(&connected, &request, &response).expect("assemble");
    let opened = mailseal::Opener::open(
        &mailseal::smime::Smime::new(&offline_store),
        &assembled.message,
        &{
            let mut p = mailseal::OpenPolicy::default();
            p.check_recipients = false;
            p
        },
    )
    .expect("opens");
    assert_eq!(
        opened.message.envelope().message_id().as_deref(),
        Some("lib-1")
    );
}
