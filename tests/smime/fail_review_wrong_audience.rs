//! Attacker's review of issue 55, class "Wrong audience" (reflection of legacy mail):
//! Bob's organisation still has an OpenSSL-based client, so his operator marks the
//! domain as legacy (`--allow-legacy-from @smime.example`). Bob's own legacy message
//! (`openssl cms -sign` of the A2A part alone), which he sent to Mallory, is mailed
//! back to him by Mallory with the outer To rewritten to bob@: it has no protected To
//! or Cc, so nothing says it was for Bob, yet it is delivered (exit 0) as a request
//! from bob@ to bob@. Issue 55: "a message signed by one of our own identities is
//! delivered to us only if its protected To or Cc names us"; a legacy message signed
//! by one of our own identities never has a protected To, so it should be refused
//! (unless `--own-copy`).

use crate::common;

use common::{fixture, openssl, run};

use super::fail_path::import;

#[test]
fn fail_review_wrong_audience_our_own_legacy_mail_reflected_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("bob");
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

    let now = time::OffsetDateTime::now_utc();
    let f = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let env = serde_json::json!({"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request","operation":"message/send","messageId":"bob-legacy-1","correlationId":"bl-1","sequence":0,"final":false,"createdAt":f(now),"expiresAt":f(now + time::Duration::days(1)),"idempotencyKey":"bl-e-1","serviceParameters":{},"payload":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"approve invoice 42"}]}}});
    let mut part = b"Content-Type: application/a2a+json\r\n\r\n".to_vec();
    part.extend_from_slice(env.to_string().as_bytes());
    std::fs::write(d.join("part.eml"), &part).unwrap();
    // Bob's legacy client signs his message to Mallory.
    let out = openssl(
        &[
            "cms",
            "-sign",
            "-in",
            "part.eml",
            "-signer",
            fx("bob.sign.crt").to_str().unwrap(),
            "-inkey",
            fx("bob.sign.key").to_str().unwrap(),
            "-out",
            "signed.eml",
        ],
        d,
    );
    assert!(out.status.success());
    // Mallory mails it back to Bob: the outer To, which nothing signs, names him.
    let mut mail = b"From: bob@smime.example\r\nTo: bob@smime.example\r\nDate: Sun, 06 Dec 2026 04:00:00 +0000\r\nMessage-ID: <bl-1@smime.example>\r\nMail-A2A-Binding: 1.0\r\n".to_vec();
    let text = String::from_utf8(std::fs::read(d.join("signed.eml")).unwrap()).unwrap();
    for line in text.lines() {
        mail.extend_from_slice(line.trim_end_matches('\r').as_bytes());
        mail.extend_from_slice(b"\r\n");
    }
    let out = run(
        &[
            "open",
            "--store",
            store.to_str().unwrap(),
            "--allow-legacy-from",
            "@smime.example",
        ],
        &mail,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(0) && out.stdout.is_empty(),
        "our own legacy message, reflected back with a rewritten outer To, was delivered: exit {:?}: {stderr}",
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("reflection"), "{stderr}");
}
