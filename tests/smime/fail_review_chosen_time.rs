//! Attacker's review of issue 55, class "Chosen time" / "Unbound fields": a legacy
//! S/MIME message whose signature states no time (`openssl cms -sign -noattr`: no
//! signingTime) and whose envelope has neither `createdAt` nor `expiresAt` has no
//! signed date at all. The receiver then keeps it "the default lifetime from now",
//! so once Bob's replay record of it is pruned (a week later) Mallory, who holds a
//! copy, has it delivered again, and again, for ever: the outer Date no longer
//! decides, but nothing signed does either. Issue 55: "its expiry and replay window
//! come from the signed envelope ... or the CMS signingTime / OpenPGP signature time,
//! never the outer Date". A legacy message with none of them should be refused (as an
//! effectful request without a lifetime already is), not given a fresh week.

use crate::common;

use std::path::{Path, PathBuf};

use common::{fixture, openssl, run};

use super::fail_path::import;

const BOB: &str = "bob@smime.example";

fn bob_store(dir: &Path) -> PathBuf {
    let store = dir.join("bob");
    let fx = |f: &str| fixture(&format!("rfc9216/{f}"));
    let own = [
        "bob.encrypt.crt",
        "bob.encrypt.key",
        "bob.sign.crt",
        "bob.sign.key",
    ]
    .map(fx);
    import(&store, &own.each_ref().map(|p| p.as_path()), false);
    import(&store, &[&fx("ca.rsa.crt")], true);
    store
}

/// Alice's legacy reply (A2A part alone signed without signed attributes, then
/// encrypted to Bob), undated inside the signature and the envelope.
fn undated_legacy_reply(dir: &Path, outer_date: &str) -> Vec<u8> {
    let json = br#"{"bindingVersion":"1.0","a2aVersion":"1.0","kind":"response","operation":"message/send","messageId":"legacy-resp-1","correlationId":"legacy-c-1","sequence":1,"final":true,"serviceParameters":{},"payload":{"message":{"messageId":"m-1","role":"ROLE_AGENT","parts":[{"text":"done"}]}}}"#;
    let mut part = b"Content-Type: application/a2a+json\r\n\r\n".to_vec();
    part.extend_from_slice(json);
    std::fs::write(dir.join("part.eml"), &part).unwrap();
    let crt = fixture("rfc9216/alice.sign.crt");
    let key = fixture("rfc9216/alice.sign.key");
    let out = openssl(
        &[
            "cms",
            "-sign",
            "-noattr",
            "-in",
            "part.eml",
            "-signer",
            crt.to_str().unwrap(),
            "-inkey",
            key.to_str().unwrap(),
            "-out",
            "signed.eml",
        ],
        dir,
    );
    assert!(out.status.success());
    let bob = fixture("rfc9216/bob.encrypt.crt");
    let out = openssl(
        &[
            "cms",
            "-encrypt",
            "-aes-256-gcm",
            "-in",
            "signed.eml",
            "-out",
            "encrypted.eml",
            "-from",
            "alice@smime.example",
            "-to",
            BOB,
            "-subject",
            "task",
            bob.to_str().unwrap(),
        ],
        dir,
    );
    assert!(out.status.success());
    let mut mail = format!(
        "Date: {outer_date}\r\nMessage-ID: <legacy-r1@smime.example>\r\nIn-Reply-To: <req-1@smime.example>\r\nMail-A2A-Binding: 1.0\r\n"
    )
    .into_bytes();
    let text = String::from_utf8(std::fs::read(dir.join("encrypted.eml")).unwrap()).unwrap();
    for line in text.lines() {
        mail.extend_from_slice(line.as_bytes());
        mail.extend_from_slice(b"\r\n");
    }
    mail
}

#[test]
fn fail_review_chosen_time_undated_legacy_mail_is_fresh_for_ever() {
    let dir = tempfile::tempdir().unwrap();
    let mail = undated_legacy_reply(dir.path(), "Tue, 01 Dec 2026 12:00:00 +0000");
    // Half a year later, Bob's record of it long pruned (a fresh store stands for
    // that), Mallory sends the same bytes again.
    let later = (time::OffsetDateTime::now_utc() + time::Duration::days(200))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let store = bob_store(dir.path());
    let out = run(
        &[
            "open",
            "--store",
            store.to_str().unwrap(),
            "--allow-legacy-from",
            "@smime.example",
            "--now",
            &later,
        ],
        &mail,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.stdout.is_empty() && out.status.code() != Some(0),
        "an undated legacy message replayed 200 days later was delivered: exit {:?}: {stderr}",
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("without a signed time"), "{stderr}");
}

/// Chosen time, X.509 (after the id-x509 merge): the signing certificate's validity
/// starts ten minutes from now, and the signature (`openssl cms -sign`, whose
/// signingTime is the signer's clock) is made now, before the certificate existed.
/// Received an hour later (`--now`, as an archive or a delayed delivery is read), the
/// certificate is valid at receipt and the message opens, though the binding was not
/// valid when the signature says it was made. Issue 55: "an address binding (X.509
/// SAN, ...) counts only if it is valid at receipt *and* was valid when the
/// signature says it was made".
#[test]
fn fail_review_chosen_time_signing_time_before_the_certificate_is_valid() {
    use crate::fail_path::{forged, open, victim, Pki, CEO, NOW_END, NOW_START};
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    let fmt = time::macros::format_description!("[year][month][day][hour][minute][second]Z");
    let start = (time::OffsetDateTime::now_utc() + time::Duration::minutes(10))
        .format(&fmt)
        .unwrap();
    pki.issue(
        "late",
        Some("root"),
        &format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=emailProtection\nsubjectAltName=email:{CEO}\n"
        ),
        &start,
        NOW_END,
    );
    let store = victim(dir.path(), &root);
    let msg = forged(&pki, "late", &[]);
    let later = (time::OffsetDateTime::now_utc() + time::Duration::hours(1))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let out = open(&store, &msg, &["--stateless", "--now", &later]);
    assert!(
        out.status.code() != Some(0) && out.stdout.is_empty(),
        "a signature made before its certificate's notBefore opened: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
