//! Attacker's review of issue 55, class "Trimmed or padded evidence" (extra names) /
//! "Respelled keys": Bob's store already decides who alice@smime.example is (her
//! certificate chains to his anchor, the RFC 9216 CA). Mallory gives Bob "her"
//! self-signed certificate, whose subjectAltName names mallory@evil.example and, as an
//! extra name, alice@smime.example. Bob's operator imports it with plain `key import`
//! (the listing names both addresses, nothing warns that alice@ already has an
//! identity in the store); from then on it is a pinned certificate for alice@, and
//! Mallory's message From alice@ is delivered (exit 0). The OpenPGP twin (extra User
//! ID, with alice@ pinned by her card) is tests/openpgp/fail_review_respelled_keys.rs.

use crate::common;

use common::{fixture, openssl, run};

use super::fail_path::import;

#[test]
fn fail_review_respelled_keys_extra_san_through_plain_import_takes_an_anchored_address() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fx = |f: &str| fixture(&format!("rfc9216/{f}"));
    let bob = d.join("bob");
    let own = [
        "bob.encrypt.crt",
        "bob.encrypt.key",
        "bob.sign.crt",
        "bob.sign.key",
    ]
    .map(fx);
    import(&bob, &own.each_ref().map(|p| p.as_path()), false);
    import(&bob, &[&fx("ca.rsa.crt")], true);

    let out = openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "m.key",
            "-out",
            "m.crt",
            "-days",
            "30",
            "-subj",
            "/CN=Mallory",
            "-addext",
            "subjectAltName=email:mallory@evil.example,email:alice@smime.example",
            "-addext",
            "keyUsage=critical,digitalSignature",
            "-addext",
            "extendedKeyUsage=emailProtection",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ],
        d,
    );
    assert!(out.status.success());
    // Bob imports Mallory's certificate as she published it: refused, since it names
    // alice@, whose domain the store's anchor speaks for, with a key the store does
    // not hold for her (issue 55: no import path takes an address the store already
    // identifies without --accept-changed).
    let m_crt = d.join("m.crt").display().to_string();
    let out = run(
        &[
            "key",
            "import",
            "--store",
            &bob.display().to_string(),
            &m_crt,
        ],
        b"",
    );
    let listing = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{listing}");
    assert!(
        listing.contains("alice@smime.example") && listing.contains("--accept-changed"),
        "{listing}"
    );
    let mallory = d.join("mallory");
    import(&mallory, &[&d.join("m.crt"), &d.join("m.key")], false);

    let now = time::OffsetDateTime::now_utc();
    let f = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let env = serde_json::json!({"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request","operation":"message/send","messageId":"s2","correlationId":"s2c","sequence":0,"final":false,"createdAt":f(now),"expiresAt":f(now + time::Duration::days(1)),"idempotencyKey":"s2e","serviceParameters":{},"payload":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"pay invoice 7"}]}}});
    std::fs::write(d.join("env.json"), env.to_string()).unwrap();
    let p = |f: &str| d.join(f).display().to_string();
    let out = run(
        &[
            "compose",
            "--from",
            "alice@smime.example",
            "--to",
            "bob@smime.example",
            "--in",
            &p("env.json"),
            "--out",
            &p("plain.eml"),
        ],
        b"",
    );
    assert!(out.status.success());
    let out = run(
        &[
            "seal",
            "--store",
            &p("mallory"),
            "--profile",
            "smime",
            "--sign-only",
            "--in",
            &p("plain.eml"),
            "--out",
            &p("forged.eml"),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(
        &["open", "--store", &p("bob"), "--in", &p("forged.eml")],
        b"",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(0) && out.stdout.is_empty(),
        "Mallory's self-signed certificate with an extra SAN signed as alice@ and was delivered \
         (import said: {listing}; open: exit {:?}: {stderr})",
        out.status.code()
    );
}

/// The same gap through the card path: alice@ has no pin (no card, no JWK), only an
/// identity through Bob's anchor, so an unsigned card file for alice@ carrying
/// Mallory's self-signed certificate is a "first use" and is imported (exit 0, "first
/// fetch"); Mallory's message From alice@ is then delivered. The pin of an address
/// ignores the certificates and anchors the store already holds for it.
#[test]
fn fail_review_respelled_keys_unsigned_card_is_first_use_for_an_anchored_address() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fx = |f: &str| fixture(&format!("rfc9216/{f}"));
    let p = |f: &str| d.join(f).display().to_string();
    let bob = d.join("bob");
    let own = [
        "bob.encrypt.crt",
        "bob.encrypt.key",
        "bob.sign.crt",
        "bob.sign.key",
    ]
    .map(fx);
    import(&bob, &own.each_ref().map(|p| p.as_path()), false);
    import(&bob, &[&fx("ca.rsa.crt")], true);
    let ok = |args: &[&str]| {
        let out = run(args, b"");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ok(&[
        "key",
        "generate",
        "--store",
        &p("mallory"),
        "--kind",
        "smime",
        "--email",
        "alice@smime.example",
    ]);
    import(&d.join("mallory"), &[&fx("bob.encrypt.crt")], false);
    ok(&[
        "card",
        "--store",
        &p("mallory"),
        "--email",
        "alice@smime.example",
        "--out",
        &p("card.json"),
    ]);
    let imported = run(
        &[
            "key",
            "import",
            "--store",
            &p("bob"),
            "--agent-card",
            &p("card.json"),
        ],
        b"",
    );

    let now = time::OffsetDateTime::now_utc();
    let f = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let env = serde_json::json!({"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request","operation":"message/send","messageId":"c1","correlationId":"c1c","sequence":0,"final":false,"createdAt":f(now),"expiresAt":f(now + time::Duration::days(1)),"idempotencyKey":"c1e","serviceParameters":{},"payload":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"pay invoice 8"}]}}});
    std::fs::write(d.join("env.json"), env.to_string()).unwrap();
    ok(&[
        "compose",
        "--from",
        "alice@smime.example",
        "--to",
        "bob@smime.example",
        "--in",
        &p("env.json"),
        "--out",
        &p("plain.eml"),
    ]);
    ok(&[
        "seal",
        "--store",
        &p("mallory"),
        "--profile",
        "smime",
        "--in",
        &p("plain.eml"),
        "--out",
        &p("forged.eml"),
    ]);
    let out = run(
        &["open", "--store", &p("bob"), "--in", &p("forged.eml")],
        b"",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(0) && out.stdout.is_empty(),
        "an unsigned card put Mallory's key in place for anchored alice@ and her message was delivered \
         (card import: exit {:?} {}; open: exit {:?}: {stderr})",
        imported.status.code(),
        String::from_utf8_lossy(&imported.stderr),
        out.status.code()
    );
}
