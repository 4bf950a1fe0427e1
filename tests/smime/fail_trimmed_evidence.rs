//! Trimmed or padded evidence (THREATS.md), issue 55 finding 2: the attacker chooses
//! which certificates a message carries. The victim's store holds its anchors, the
//! intermediates it imported, its pins and its CRLs; Mallory holds everything else
//! (the CEO's leaked key and certificate, the mail, any certificate she found to
//! carry, such as a look-alike of the root). Revocation is decided on a path the store
//! validates, never on what the message carries, and a CRL the store holds but cannot
//! check refuses the certificate.
//!
//! The certificates and CRLs are made by the real `openssl ca`.

use std::path::Path;

use crate::common::openssl;
use crate::fail_path::{
    assert_refused, forged, import, open, victim, Pki, CA_EXT, CEO, NOW_END, NOW_START,
};

fn opens(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A copy of the root under its own name and key, as anyone holding the root's key
/// could have issued it, but with keyCertSign only (no cRLSign): the certificate
/// an attacker would carry so that the root's CRL is judged "not signed by a CRL
/// issuer" and skipped. (The test PKI holds the root's key to make it; in the attack
/// it is a genuine cross- or re-issued root the attacker found, same name and key.)
fn lookalike_root(pki: &Pki) {
    let d = &pki.dir;
    openssl(
        &[
            "req",
            "-new",
            "-key",
            "root.key",
            "-subj",
            "/CN=root",
            "-out",
            "lookalike.csr",
        ],
        d,
    );
    std::fs::write(
        d.join("lookalike.ext"),
        "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n",
    )
    .unwrap();
    openssl(
        &[
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-notext",
            "-selfsign",
            "-keyfile",
            "root.key",
            "-in",
            "lookalike.csr",
            "-out",
            "lookalike.crt",
            "-startdate",
            NOW_START,
            "-enddate",
            NOW_END,
            "-extfile",
            "lookalike.ext",
        ],
        d,
    );
}

/// root -> corp-ca -> ceo, the CEO's certificate issued by the sub-CA.
fn sub_ca_pki(dir: &Path) -> Pki {
    let pki = Pki::new(dir);
    pki.root("", NOW_START, NOW_END);
    pki.ca("corp-ca", "root", CA_EXT);
    pki.leaf("ceo", "corp-ca", CEO, "");
    pki
}

#[test]
fn fail_trimmed_evidence_a_pinned_certificate_whose_sub_ca_the_message_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let pki = sub_ca_pki(dir.path());
    let d = &pki.dir;
    // The victim trusts the root, imported the corporate sub-CA (an intermediate of its
    // own) and pinned the CEO's certificate.
    let store = victim(dir.path(), &d.join("root.crt"));
    import(&store, &[&d.join("corp-ca.crt"), &d.join("ceo.crt")], false);
    // Mallory has the CEO's leaked key and leaves the sub-CA out of the CMS.
    let msg = forged(&pki, "ceo", &[]);
    opens(&open(&store, &msg, &["--stateless"]));
    // The sub-CA revokes the CEO's certificate; the victim imports its CRL.
    pki.revoke("ceo", "corp-ca");
    import(&store, &[&pki.crl("corp-ca")], false);
    assert_refused(
        &open(&store, &msg, &["--stateless"]),
        "certificate CN=ceo is revoked",
    );
    // Carrying the sub-CA changes nothing.
    let carried = forged(&pki, "ceo", &["corp-ca"]);
    assert_refused(
        &open(&store, &carried, &["--stateless"]),
        "certificate CN=ceo is revoked",
    );

    // Not pinned: the path goes through the store's own sub-CA (the message carries
    // no intermediate), and its CRL revokes the CEO there too.
    let store2 = victim(&dir.path().join("second"), &d.join("root.crt"));
    import(&store2, &[&d.join("corp-ca.crt")], false);
    let out = open(&store2, &msg, &["--stateless"]);
    opens(&out);
    import(&store2, &[&pki.crl("corp-ca")], false);
    assert_refused(
        &open(&store2, &msg, &["--stateless"]),
        "certificate CN=ceo is revoked",
    );
}

#[test]
fn fail_trimmed_evidence_a_crl_held_for_an_issuer_the_store_cannot_validate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = sub_ca_pki(dir.path());
    let d = &pki.dir;
    // The victim pinned the CEO and holds the sub-CA's CRL (it lists nothing yet), but
    // trusts no anchor: the CRL's signature cannot be checked under a key the store
    // validates, so the pin does not speak until it can.
    let crl = pki.crl("corp-ca");
    let store = dir.path().join("victim");
    import(&store, &[&d.join("ceo.crt"), &crl], false);
    let msg = forged(&pki, "ceo", &[]);
    assert_refused(
        &open(&store, &msg, &["--stateless"]),
        "revocation of certificate CN=ceo cannot be checked",
    );
    // The message carrying the sub-CA does not validate it for the store.
    let carried = forged(&pki, "ceo", &["corp-ca", "root"]);
    assert_refused(
        &open(&store, &carried, &["--stateless"]),
        "revocation of certificate CN=ceo cannot be checked",
    );
    // Nor does the sub-CA imported without its root.
    import(&store, &[&d.join("corp-ca.crt")], false);
    assert_refused(
        &open(&store, &carried, &["--stateless"]),
        "revocation of certificate CN=ceo cannot be checked",
    );
    // With the root trusted, the CRL is checked (it lists nothing): the pin speaks.
    import(&store, &[&d.join("root.crt")], true);
    opens(&open(&store, &msg, &["--stateless"]));
}

#[test]
fn fail_trimmed_evidence_a_look_alike_root_carried_does_not_unrevoke() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.leaf("ceo", "root", CEO, "");
    lookalike_root(&pki);
    pki.revoke("ceo", "root");
    let crl = pki.crl("root");

    // Pinned: the root's CRL revokes the CEO; the look-alike carried beside it does
    // not make that CRL "unusable".
    let pinned = victim(&dir.path().join("pinned"), &root);
    import(&pinned, &[&pki.dir.join("ceo.crt"), &crl], false);
    for chain in [&[][..], &["lookalike"], &["lookalike", "root"]] {
        let msg = forged(&pki, "ceo", chain);
        assert_refused(
            &open(&pinned, &msg, &["--stateless"]),
            "certificate CN=ceo is revoked",
        );
    }

    // Anchored: the path through the look-alike (root -> look-alike -> ceo, every
    // signature by the root's key) is checked against the same CRL.
    let anchored = victim(&dir.path().join("anchored"), &root);
    import(&anchored, &[&crl], false);
    for chain in [&[][..], &["lookalike"]] {
        let msg = forged(&pki, "ceo", chain);
        assert_refused(
            &open(&anchored, &msg, &["--stateless"]),
            "certificate CN=ceo is revoked",
        );
    }
}

#[test]
fn fail_chosen_time_a_signing_time_after_the_time_of_receipt() {
    // The receiver's clock (`--now`) is an hour before the signature's signingTime:
    // a signature "made" after it arrived is the sender's choice of time.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.leaf("ceo", "root", CEO, "");
    let store = victim(dir.path(), &root);
    let msg = forged(&pki, "ceo", &[]);
    opens(&open(&store, &msg, &["--stateless"]));
    let earlier = (time::OffsetDateTime::now_utc() - time::Duration::hours(1))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    assert_refused(
        &open(&store, &msg, &["--stateless", "--now", &earlier]),
        "after the time of receipt",
    );
}

#[test]
fn fail_trimmed_evidence_a_revoked_recipient_certificate_is_not_encrypted_to() {
    // The sending side: the victim seals to the CEO's certificate it holds. Once the
    // victim holds the root's CRL revoking it, nothing is encrypted to that key (a
    // leaked key would read it); a CRL it holds but cannot check refuses it too.
    use mailseal::envelope::{Envelope, Kind, Operation};
    use mailseal::message::MailA2aMessage;
    const VICTIM: &str = "victim@corp.example";
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    let ceo = pki.issue(
        "ceo",
        Some("root"),
        &format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyAgreement\n\
             extendedKeyUsage=emailProtection\nsubjectAltName=email:{CEO}\n"
        ),
        NOW_START,
        NOW_END,
    );
    let store = victim(dir.path(), &root);
    crate::common::run(
        &[
            "key",
            "generate",
            "--store",
            store.to_str().unwrap(),
            "--kind",
            "smime",
            "--email",
            VICTIM,
        ],
        b"",
    );
    import(&store, &[&ceo], false);
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "to-ceo-1");
    env.set("correlationId", "to-ceo-1");
    env.set("idempotencyKey", "to-ceo-effect-1");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "the quarterly numbers"}]}}),
    );
    let plain = pki.dir.join("plain.eml");
    std::fs::write(
        &plain,
        MailA2aMessage::new(VICTIM, &[CEO], env)
            .to_rfc5322()
            .unwrap(),
    )
    .unwrap();
    let seal = |store: &Path| {
        crate::common::run(
            &[
                "seal",
                "--store",
                store.to_str().unwrap(),
                "--profile",
                "smime",
                "--in",
                plain.to_str().unwrap(),
            ],
            b"",
        )
    };
    opens(&seal(&store));
    pki.revoke("ceo", "root");
    import(&store, &[&pki.crl("root")], false);
    let out = seal(&store);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains(&format!("no usable certificate of {CEO} to encrypt to"))
            && stderr.contains("certificate CN=ceo is revoked"),
        "{stderr}"
    );
}
