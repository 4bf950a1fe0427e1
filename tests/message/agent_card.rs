//! Agent Card key discovery through the command line: `mailseal card` writes a card
//! that is a valid A2A v1.0 AgentCard; `key import --agent-card` on another store is
//! all a peer needs to seal to us under S/MIME, OpenPGP and MLS; the card's minimum
//! protection holds both ways; signatures (ours, and JWS made with OpenSSL) verify and
//! a changed card is refused; every malformed or foreign card is refused with its own
//! error (`fail_*`).

use crate::common;

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use common::mls::{mailseal, ok};
use serde_json::{json, Value};

const BOB: &str = "bob@card.example";
const ALICE: &str = "alice@card.example";

/// A store with S/MIME, OpenPGP and MLS keys for `email`.
fn agent(root: &Path, name: &str, email: &str) -> PathBuf {
    let store = root.join(name);
    for kind in ["smime", "openpgp", "mls"] {
        ok(
            &store,
            &["key", "generate", "--kind", kind, "--email", email],
        );
    }
    store
}

/// `mailseal card` for `email` with extra arguments, written to `out`; the card.
fn card(store: &Path, email: &str, extra: &[&str], out: &Path) -> Value {
    let mut args = vec!["card", "--email", email, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(store, &args);
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

fn write(path: &Path, card: &Value) -> PathBuf {
    std::fs::write(path, serde_json::to_vec_pretty(card).unwrap()).unwrap();
    path.to_path_buf()
}

/// `key import --agent-card FILE` on `store`: (exit code, stderr).
fn import(store: &Path, file: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["key", "import", "--agent-card", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = mailseal(store, &args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The A2A v1.0 schemas of `../shared/a2a-spec/derived/`: strict and lenient (for
/// the strict one, the repository's copy in `schemas/` when the shared folder is
/// absent: they are the same file).
fn agent_card_validators() -> Vec<(&'static str, jsonschema::Validator)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let derived = repo.join("../shared/a2a-spec/derived");
    let copy = std::fs::read(repo.join("schemas/a2a-v1.0.1.strict.schema.json")).unwrap();
    let mut bundles = vec![(
        "strict",
        match std::fs::read(derived.join("a2a-v1.0.1.strict.schema.json")) {
            Ok(shared) => {
                assert_eq!(shared, copy, "schemas/ is the shared schema");
                shared
            }
            Err(_) => copy,
        },
    )];
    if let Ok(lenient) = std::fs::read(derived.join("a2a-v1.0.1.lenient.schema.json")) {
        bundles.push(("lenient", lenient));
    }
    bundles
        .into_iter()
        .map(|(name, text)| {
            let bundle: Value = serde_json::from_slice(&text).unwrap();
            let schema = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$defs": bundle["$defs"],
                "$ref": "#/$defs/AgentCard",
            });
            (name, jsonschema::validator_for(&schema).unwrap())
        })
        .collect()
}

fn assert_valid_card(card: &Value) {
    for (name, v) in agent_card_validators() {
        let errors: Vec<String> = v
            .iter_errors(card)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "not a valid A2A v1.0 AgentCard ({name} schema): {errors:?}"
        );
    }
}

fn protection(card: &Value) -> &Value {
    card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == "https://kotoba-lang.github.io/mail-a2a/spec/v1/#protection")
        .map(|e| &e["params"])
        .expect("#protection extension")
}

fn protection_mut(card: &mut Value) -> &mut Value {
    card["capabilities"]["extensions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["uri"] == "https://kotoba-lang.github.io/mail-a2a/spec/v1/#protection")
        .map(|e| &mut e["params"])
        .expect("#protection extension")
}

fn envelope(id: &str) -> String {
    json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": id, "correlationId": format!("x-{id}"),
        "sequence": 0, "final": false, "idempotencyKey": format!("k-{id}"),
        "payload": {"message": {"messageId": format!("m-{id}"), "role": "ROLE_USER",
            "parts": [{"text": "sealed with keys from an Agent Card"}]}}
    })
    .to_string()
}

/// Composes a request from `from` to `to` in `dir`; the plain .eml.
fn compose(dir: &Path, from: &str, to: &str, id: &str) -> PathBuf {
    let env = dir.join(format!("{id}.json"));
    std::fs::write(&env, envelope(id)).unwrap();
    let eml = dir.join(format!("{id}.eml"));
    let out = common::run(
        &[
            "compose",
            "--from",
            from,
            "--to",
            to,
            "--in",
            env.to_str().unwrap(),
            "--out",
            eml.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eml
}

/// `creator` (at `email`) makes a group and adds Bob with his card's KeyPackage; Bob
/// joins by the Welcome. The group id.
fn group_with_bob(creator: &Path, email: &str, bob: &Path, out: &Path) -> String {
    let group = String::from_utf8(ok(creator, &["mls", "create", "--email", email]))
        .unwrap()
        .trim()
        .to_string();
    let out = out.to_str().unwrap();
    ok(
        creator,
        &[
            "mls",
            "add",
            "--group",
            &group,
            "--member",
            BOB,
            "--out-dir",
            out,
        ],
    );
    let welcome = Path::new(out).join("welcome.eml");
    ok(bob, &["mls", "inviters", "--allow", email]);
    ok(bob, &["mls", "join", "--in", welcome.to_str().unwrap()]);
    group
}

/// `sender` (at `from`) sends request `id` to Bob in `group`; Bob opens it.
fn mls_to_bob(dir: &Path, sender: &Path, from: &str, group: &str, bob: &Path, id: &str) {
    let plain = compose(dir, from, BOB, id);
    let sealed = dir.join(format!("{id}.sealed.eml"));
    ok(
        sender,
        &[
            "seal",
            "--profile",
            "mls",
            "--group",
            group,
            "--in",
            plain.to_str().unwrap(),
            "--out",
            sealed.to_str().unwrap(),
        ],
    );
    let env: Value =
        serde_json::from_slice(&ok(bob, &["open", "--in", sealed.to_str().unwrap()])).unwrap();
    assert_eq!(env["messageId"], id);
}

#[test]
fn the_card_is_a_valid_a2a_v1_agent_card_with_interface_and_keys() {
    let root = tempfile::tempdir().unwrap();
    let bob = agent(root.path(), "bob", BOB);
    let c = card(
        &bob,
        BOB,
        &["--minimum", "signed-encrypted", "--sign"],
        &root.path().join("c.json"),
    );
    assert_valid_card(&c);
    let interfaces = c["supportedInterfaces"].as_array().unwrap();
    assert!(interfaces.contains(&json!({
        "url": format!("mailto:{BOB}"),
        "protocolBinding": "https://kotoba-lang.github.io/mail-a2a/spec/v1/",
        "protocolVersion": "1.0"
    })));
    let p = protection(&c);
    assert_eq!(p["profiles"], json!(["smime-4", "openpgp-mime", "mls"]));
    assert_eq!(p["minimumProtection"], "signed-encrypted");
    assert_eq!(p["smimeCertificates"].as_array().unwrap().len(), 1);
    assert_eq!(p["openpgpCertificates"].as_array().unwrap().len(), 1);
    assert_eq!(p["mlsKeyPackages"].as_array().unwrap().len(), 1);
    // MailA2A section 11: the limits this agent enforces.
    assert_eq!(p["limits"]["maxMessageBytes"], 25 * 1024 * 1024);
    assert_eq!(p["limits"]["maxMimeParts"], 64);
    assert_eq!(p["limits"]["maxHeldMessages"], 256);
    assert_eq!(p["limits"]["expiryHorizonSeconds"], 7 * 24 * 3600);
    assert_eq!(c["signatures"].as_array().unwrap().len(), 1);

    // Real peers read what the card publishes: OpenSSL the certificate, GnuPG the
    // OpenPGP certificate.
    let pem = root.path().join("bob.pem");
    std::fs::write(&pem, p["smimeCertificates"][0].as_str().unwrap()).unwrap();
    let x509 = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
        .arg(&pem)
        .output()
        .unwrap();
    assert!(x509.status.success());
    assert!(String::from_utf8_lossy(&x509.stdout).contains(BOB));
    let asc = root.path().join("bob.asc");
    std::fs::write(&asc, p["openpgpCertificates"][0].as_str().unwrap()).unwrap();
    let gnupg = tempfile::tempdir().unwrap();
    let gpg = std::process::Command::new("gpg")
        .arg("--homedir")
        .arg(gnupg.path())
        .args(["--batch", "--import"])
        .arg(&asc)
        .output()
        .unwrap();
    assert!(
        gpg.status.success(),
        "{}",
        String::from_utf8_lossy(&gpg.stderr)
    );
    assert!(String::from_utf8_lossy(&gpg.stderr).contains(BOB));
}

#[test]
fn a_peer_seals_to_us_using_only_that_card() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let alice = agent(dir, "alice", ALICE);
    // Alice has nothing of Bob's but his card; Bob has Alice's card to verify her.
    let bob_card = dir.join("bob-card.json");
    card(&bob, BOB, &[], &bob_card);
    let alice_card = dir.join("alice-card.json");
    card(&alice, ALICE, &[], &alice_card);
    assert_eq!(import(&alice, &bob_card, &[]).0, 0);
    assert_eq!(import(&bob, &alice_card, &[]).0, 0);

    for profile in ["smime", "openpgp"] {
        let id = format!("card-{profile}");
        let plain = compose(dir, ALICE, BOB, &id);
        let sealed = dir.join(format!("{id}.sealed.eml"));
        ok(
            &alice,
            &[
                "seal",
                "--profile",
                profile,
                "--in",
                plain.to_str().unwrap(),
                "--out",
                sealed.to_str().unwrap(),
            ],
        );
        let opened = ok(&bob, &["open", "--in", sealed.to_str().unwrap()]);
        let env: Value = serde_json::from_slice(&opened).unwrap();
        assert_eq!(env["messageId"], id.as_str(), "{profile}");
    }

    // MLS: Alice adds Bob to a group with the KeyPackage of his card.
    let group = group_with_bob(&alice, ALICE, &bob, &dir.join("add"));
    mls_to_bob(dir, &alice, ALICE, &group, &bob, "card-mls");
}

#[test]
fn a_card_key_package_serves_two_groups_and_survives_an_update() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let bob_card = dir.join("bob-card.json");
    card(&bob, BOB, &[], &bob_card);
    let mut groups = Vec::new();
    for (name, email) in [("alice", ALICE), ("carol", "carol@card.example")] {
        // Their S/MIME key certifies their MLS key; Bob pins its certificate.
        let store = dir.join(name);
        let cert = dir.join(format!("{name}.pem"));
        let cert = cert.to_str().unwrap();
        ok(
            &store,
            &[
                "key",
                "generate",
                "--kind",
                "smime",
                "--email",
                email,
                "--cert-out",
                cert,
            ],
        );
        ok(&bob, &["key", "import", cert]);
        ok(
            &store,
            &["key", "generate", "--kind", "mls", "--email", email],
        );
        assert_eq!(import(&store, &bob_card, &[]).0, 0);
        let group = group_with_bob(&store, email, &bob, &dir.join(format!("add-{name}")));
        groups.push((store, email, group));
    }
    // Bob renews his keys in the first group; the second still reads and writes.
    let up = dir.join("update");
    ok(
        &bob,
        &[
            "mls",
            "update",
            "--group",
            &groups[0].2,
            "--out-dir",
            up.to_str().unwrap(),
        ],
    );
    ok(
        &groups[0].0,
        &["open", "--in", up.join("commit.eml").to_str().unwrap()],
    );
    for (i, (store, email, group)) in groups.iter().enumerate() {
        mls_to_bob(dir, store, email, group, &bob, &format!("two-groups-{i}"));
    }
}

#[test]
fn the_card_minimum_protection_holds_for_sender_and_receiver() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let alice = agent(dir, "alice", ALICE);
    let bob_card = dir.join("bob-card.json");
    card(&bob, BOB, &["--minimum", "signed-encrypted"], &bob_card);
    let alice_card = dir.join("alice-card.json");
    card(&alice, ALICE, &[], &alice_card);
    assert_eq!(import(&bob, &alice_card, &[]).0, 0);

    // Bob signs a request to Alice without encrypting. Alice has his certificate
    // (imported on its own) but not yet his card: the message opens.
    let bob_c: Value = serde_json::from_slice(&std::fs::read(&bob_card).unwrap()).unwrap();
    let pem = dir.join("bob.pem");
    std::fs::write(
        &pem,
        protection(&bob_c)["smimeCertificates"][0].as_str().unwrap(),
    )
    .unwrap();
    ok(&alice, &["key", "import", pem.to_str().unwrap()]);
    let plain = compose(dir, BOB, ALICE, "min-1");
    let signed = dir.join("min-1.signed.eml");
    ok(
        &bob,
        &[
            "seal",
            "--profile",
            "smime",
            "--sign-only",
            "--in",
            plain.to_str().unwrap(),
            "--out",
            signed.to_str().unwrap(),
        ],
    );
    let before = mailseal(
        &alice,
        &["open", "--stateless", "--in", signed.to_str().unwrap()],
    );
    assert_eq!(
        before.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&before.stderr)
    );

    // Once she imported it, the same message is a downgrade: refused, nothing out.
    // (Her store already holds a certificate for bob@, so his unsigned card, which
    // publishes more keys than that one, is a change she accepts: issue 55.)
    assert_eq!(import(&alice, &bob_card, &["--accept-changed"]).0, 0);
    let after = mailseal(&alice, &["open", "--in", signed.to_str().unwrap()]);
    assert_eq!(after.status.code(), Some(6));
    assert!(after.stdout.is_empty());
    let err = String::from_utf8_lossy(&after.stderr);
    assert!(err.contains("needs signed-encrypted protection"), "{err}");

    // And she does not seal to Bob below it, nor under a profile his card lacks.
    let to_bob = compose(dir, ALICE, BOB, "min-2");
    let refused = mailseal(
        &alice,
        &[
            "seal",
            "--profile",
            "smime",
            "--sign-only",
            "--in",
            to_bob.to_str().unwrap(),
        ],
    );
    assert_eq!(refused.status.code(), Some(6));
    assert!(refused.stdout.is_empty());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("demands signed-encrypted"));
    let smime_only = dir.join("bob-smime-only.json");
    card(
        &bob,
        BOB,
        &["--no-mls", "--minimum", "signed-encrypted"],
        &smime_only,
    );
    let mut c: Value = serde_json::from_slice(&std::fs::read(&smime_only).unwrap()).unwrap();
    let p = protection_mut(&mut c);
    p["profiles"] = json!(["smime-4"]);
    p.as_object_mut().unwrap().remove("openpgpCertificates");
    write(&smime_only, &c);
    // Bob's OpenPGP key is gone from his card: a change of what Alice holds for him,
    // taken only once she accepts it.
    let (code, err) = import(&alice, &smime_only, &[]);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("its keys changed") && err.contains("--accept-changed"),
        "{err}"
    );
    assert_eq!(import(&alice, &smime_only, &["--accept-changed"]).0, 0);
    let refused = mailseal(
        &alice,
        &[
            "seal",
            "--profile",
            "openpgp",
            "--in",
            to_bob.to_str().unwrap(),
        ],
    );
    assert_eq!(refused.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("lists smime-4, not openpgp-mime"));

    // The policy file is the owner's only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(alice.join("peers.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "peers.json mode {mode:o}");
    }
}

#[test]
fn a_signed_card_verifies_and_is_pinned_once_imported() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let signed = dir.join("signed.json");
    card(&bob, BOB, &["--sign"], &signed);
    let alice = dir.join("alice");
    // A fresh store knows no key of Bob's: --require-signature refuses.
    let (code, err) = import(&alice, &signed, &["--require-signature"]);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("no signature by a key this store trusts"),
        "{err}"
    );
    let (code, err) = import(&alice, &signed, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "ES256 signature by {BOB} verified, made with a key nobody in this store vouches for"
        )),
        "{err}"
    );
    // The next card, signed by the certificate now in the store, is pinned.
    let next = dir.join("next.json");
    card(&bob, BOB, &["--sign", "--agent-version", "1.0.1"], &next);
    let (code, err) = import(&alice, &next, &["--require-signature"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("made with a key this store already holds"),
        "{err}"
    );
}

#[test]
fn fail_a_signed_card_changed_after_signing() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let mut c = card(&bob, BOB, &["--sign"], &dir.join("c.json"));
    for (i, change) in ["description", "minimum", "key order kept"]
        .iter()
        .enumerate()
    {
        let mut changed = c.clone();
        match *change {
            "description" => changed["description"] = json!("a different agent"),
            "minimum" => {
                protection_mut(&mut changed)["minimumProtection"] = json!("signed-encrypted")
            }
            _ => {
                // Re-serialised compactly, members reordered: still verifies (JCS).
                let text = serde_json::to_string(&changed).unwrap();
                let f = dir.join("compact.json");
                std::fs::write(&f, text).unwrap();
                assert_eq!(import(&dir.join("fresh"), &f, &[]).0, 0);
                continue;
            }
        }
        let f = write(&dir.join(format!("changed-{i}.json")), &changed);
        let (code, err) = import(&dir.join(format!("s{i}")), &f, &[]);
        assert_eq!(code, 4, "{change}: {err}");
        assert!(err.contains("signature 0 does not verify"), "{err}");
        assert!(!dir.join(format!("s{i}/peers.json")).exists());
    }
    // A flipped signature byte.
    let sig = c["signatures"][0]["signature"]
        .as_str()
        .unwrap()
        .to_string();
    let mut raw = URL_SAFE_NO_PAD.decode(&sig).unwrap();
    raw[5] ^= 1;
    c["signatures"][0]["signature"] = json!(URL_SAFE_NO_PAD.encode(raw));
    let f = write(&dir.join("flipped.json"), &c);
    assert_eq!(import(&dir.join("s9"), &f, &[]).0, 4);
}

/// Signs `card` as an outside JWS implementation would (OpenSSL for the signature,
/// serde_json's sorted compact form as the JCS payload).
fn openssl_sign(
    card: &mut Value,
    header: Value,
    key: &openssl::pkey::PKey<openssl::pkey::Private>,
) {
    let mut payload = card.clone();
    payload.as_object_mut().unwrap().remove("signatures");
    let protected = URL_SAFE_NO_PAD.encode(header.to_string());
    let input = format!(
        "{protected}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap())
    );
    let signature = if key.id() == openssl::pkey::Id::EC {
        let der = {
            let mut s =
                openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), key).unwrap();
            s.sign_oneshot_to_vec(input.as_bytes()).unwrap()
        };
        let sig = openssl::ecdsa::EcdsaSig::from_der(&der).unwrap();
        [
            sig.r().to_vec_padded(32).unwrap(),
            sig.s().to_vec_padded(32).unwrap(),
        ]
        .concat()
    } else {
        let mut s =
            openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), key).unwrap();
        s.sign_oneshot_to_vec(input.as_bytes()).unwrap()
    };
    card["signatures"] =
        json!([{"protected": protected, "signature": URL_SAFE_NO_PAD.encode(signature)}]);
}

#[test]
fn jws_made_by_openssl_verifies_es256_jwk_and_rs256_x5c() {
    use openssl::{bn::BigNumContext, ec, nid::Nid, pkey::PKey, rsa::Rsa};
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let base = card(&bob, BOB, &["--no-mls"], &dir.join("base.json"));

    // ES256, the key in a jwk header.
    let group = ec::EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    let eckey = ec::EcKey::generate(&group).unwrap();
    let (mut x, mut y) = (
        openssl::bn::BigNum::new().unwrap(),
        openssl::bn::BigNum::new().unwrap(),
    );
    eckey
        .public_key()
        .affine_coordinates(&group, &mut x, &mut y, &mut BigNumContext::new().unwrap())
        .unwrap();
    let jwk = json!({"kty": "EC", "crv": "P-256",
        "x": URL_SAFE_NO_PAD.encode(x.to_vec_padded(32).unwrap()),
        "y": URL_SAFE_NO_PAD.encode(y.to_vec_padded(32).unwrap())});
    let mut c = base.clone();
    openssl_sign(
        &mut c,
        json!({"alg": "ES256", "kid": "ops-key", "jwk": jwk}),
        &PKey::from_ec_key(eckey).unwrap(),
    );
    let f = write(&dir.join("es256.json"), &c);
    let (code, err) = import(&dir.join("a1"), &f, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("ES256 signature by ops-key verified, made with a key nobody"),
        "{err}"
    );
    c["name"] = json!("renamed");
    let f = write(&dir.join("es256-changed.json"), &c);
    assert_eq!(import(&dir.join("a2"), &f, &[]).0, 4);

    // RS256, a self-signed certificate of Bob's address in x5c.
    let rsa = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
    let mut name = openssl::x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "bob").unwrap();
    let name = name.build();
    let mut b = openssl::x509::X509::builder().unwrap();
    b.set_version(2).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&rsa).unwrap();
    b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(30).unwrap())
        .unwrap();
    let san = openssl::x509::extension::SubjectAlternativeName::new()
        .email(BOB)
        .build(&b.x509v3_context(None, None))
        .unwrap();
    b.append_extension(san).unwrap();
    b.sign(&rsa, openssl::hash::MessageDigest::sha256())
        .unwrap();
    let cert = b.build();
    let mut c = base.clone();
    openssl_sign(
        &mut c,
        json!({"alg": "RS256", "x5c": [STANDARD.encode(cert.to_der().unwrap())]}),
        &rsa,
    );
    let f = write(&dir.join("rs256.json"), &c);
    let (code, err) = import(&dir.join("a3"), &f, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "RS256 signature by {BOB} verified, made with a key nobody in this store vouches for"
        )),
        "{err}"
    );
    // The same certificate, now imported for Bob, pins the next card it signs.
    std::fs::write(dir.join("rsa.pem"), cert.to_pem().unwrap()).unwrap();
    ok(
        &dir.join("a4"),
        &["key", "import", dir.join("rsa.pem").to_str().unwrap()],
    );
    let (code, err) = import(&dir.join("a4"), &f, &["--require-signature"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("made with a key this store already holds"),
        "{err}"
    );
    // A jwk beside x5c that names another key is refused.
    let mut c2 = c.clone();
    let mut header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(c2["signatures"][0]["protected"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    header["jwk"] = jwk;
    openssl_sign(&mut c2, header, &rsa);
    let f = write(&dir.join("mixed.json"), &c2);
    let (code, err) = import(&dir.join("a5"), &f, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("jwk and x5c name different keys"), "{err}");
}

#[test]
fn card_in_adds_interface_and_extension_to_the_spec_example() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maila2a/agent-card.json");
    let out = dir.join("card.json");
    let run = mailseal(
        &bob,
        &[
            "card",
            "--email",
            BOB,
            "--in",
            example.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let notes = String::from_utf8_lossy(&run.stderr);
    // The draft's example is a v0.3-style card: what was changed is said.
    assert!(
        notes.contains("dropped the card-level protocolVersion"),
        "{notes}"
    );
    assert!(notes.contains("added the required `skills`"), "{notes}");
    let c: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_valid_card(&c);
    assert_eq!(c["name"], "Mail Research Agent");
    assert_eq!(c["capabilities"]["streaming"], true);
    assert_eq!(
        c["supportedInterfaces"].as_array().unwrap().len(),
        1,
        "the example's MailA2A interface is replaced by ours"
    );
    assert_eq!(c["supportedInterfaces"][0]["url"], format!("mailto:{BOB}"));
    // Idempotent: adding to the result changes nothing but the fresh KeyPackage.
    let again = dir.join("again.json");
    ok(
        &bob,
        &[
            "card",
            "--email",
            BOB,
            "--no-mls",
            "--in",
            out.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
        ],
    );
    let c2: Value = serde_json::from_slice(&std::fs::read(&again).unwrap()).unwrap();
    assert_eq!(c2["supportedInterfaces"], c["supportedInterfaces"]);
    assert_eq!(
        c2["capabilities"]["extensions"].as_array().unwrap().len(),
        1
    );
}

/// Each malformed or foreign card, made from a valid one, is refused with its exit
/// code and reason, and nothing is recorded.
#[test]
fn fail_cases_each_give_their_error() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let bob = agent(dir, "bob", BOB);
    let carol = agent(dir, "carol", "carol@card.example");
    let good = card(&bob, BOB, &[], &dir.join("good.json"));
    let carol_card = card(&carol, "carol@card.example", &[], &dir.join("carol.json"));
    let carol_p = protection(&carol_card).clone();
    let gnupg = tempfile::tempdir().unwrap();
    let gpg = |args: &[&str]| {
        let out = std::process::Command::new("gpg")
            .arg("--homedir")
            .arg(gnupg.path())
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    gpg(&["--quick-gen-key", BOB, "ed25519", "sign", "never"]);
    let secret = String::from_utf8(gpg(&["--armor", "--export-secret-keys", BOB])).unwrap();

    type Change = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Change, i32, &str)> = vec![
        (
            "no-maila2a-interface",
            Box::new(|c| {
                c["supportedInterfaces"] = json!([{"url": "https://bob.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]);
            }),
            3,
            "no MailA2A interface",
        ),
        (
            "two-addresses",
            Box::new(|c| {
                let mut second = c["supportedInterfaces"][0].clone();
                second["url"] = json!("mailto:other@card.example");
                c["supportedInterfaces"]
                    .as_array_mut()
                    .unwrap()
                    .push(second);
            }),
            3,
            "interfaces for two addresses",
        ),
        (
            "mailto-with-body",
            Box::new(|c| {
                c["supportedInterfaces"][0]["url"] = json!(format!("mailto:{BOB}?body=run"));
            }),
            3,
            "header fields",
        ),
        (
            "binding-version-2",
            Box::new(|c| {
                c["supportedInterfaces"][0]["protocolVersion"] = json!("2.0");
            }),
            3,
            "binding version `2.0` is not supported",
        ),
        (
            "no-protection-extension",
            Box::new(|c| {
                c["capabilities"]["extensions"] = json!([]);
            }),
            3,
            "publishes no keys",
        ),
        (
            "two-protection-extensions",
            Box::new(|c| {
                let e = c["capabilities"]["extensions"][0].clone();
                c["capabilities"]["extensions"]
                    .as_array_mut()
                    .unwrap()
                    .push(e);
            }),
            3,
            "present more than once",
        ),
        (
            "minimum-none",
            Box::new(|c| {
                protection_mut(c)["minimumProtection"] = json!("none");
            }),
            3,
            "unknown minimum protection `none`",
        ),
        (
            "schema-no-skills",
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("skills");
            }),
            3,
            "not a valid A2A v1.0 AgentCard",
        ),
        (
            "schema-v03-member",
            Box::new(|c| {
                c["protocolVersion"] = json!("0.3.0");
            }),
            3,
            "not a valid A2A v1.0 AgentCard",
        ),
        (
            "foreign-smime-certificate",
            {
                let p = carol_p.clone();
                Box::new(move |c| {
                    protection_mut(c)["smimeCertificates"] = p["smimeCertificates"].clone()
                })
            },
            6,
            "is for carol@card.example, not for the card's address",
        ),
        (
            "foreign-openpgp-certificate",
            {
                let p = carol_p.clone();
                Box::new(move |c| {
                    protection_mut(c)["openpgpCertificates"] = p["openpgpCertificates"].clone()
                })
            },
            6,
            "OpenPGP certificate 0 is for carol@card.example",
        ),
        (
            "foreign-mls-key-package",
            {
                let p = carol_p.clone();
                Box::new(move |c| protection_mut(c)["mlsKeyPackages"] = p["mlsKeyPackages"].clone())
            },
            6,
            "MLS KeyPackage 0 is for carol@card.example",
        ),
        (
            "openpgp-secret-key",
            {
                let s = secret.clone();
                Box::new(move |c| protection_mut(c)["openpgpCertificates"] = json!([s]))
            },
            3,
            "carries secret key material",
        ),
        (
            "garbage-certificate",
            Box::new(|c| {
                protection_mut(c)["smimeCertificates"] =
                    json!(["-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]);
            }),
            3,
            "S/MIME certificate 0: not one PEM certificate",
        ),
        (
            "garbage-key-package",
            Box::new(|c| {
                protection_mut(c)["mlsKeyPackages"] = json!(["AAEABQAB"]);
            }),
            3,
            "MLS KeyPackage 0",
        ),
        (
            "limits-not-integers",
            Box::new(|c| {
                protection_mut(c)["limits"]["maxMessageBytes"] = json!("25 MiB");
            }),
            3,
            "limits.maxMessageBytes is not a non-negative integer",
        ),
        (
            "seventeen-certificates",
            Box::new(|c| {
                let one = protection(c)["smimeCertificates"][0].clone();
                protection_mut(c)["smimeCertificates"] = json!(vec![one; 17]);
            }),
            3,
            "more than 16",
        ),
        (
            "jws-alg-none",
            Box::new(|c| {
                c["signatures"] = json!([{"protected": URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#), "signature": ""}]);
            }),
            3,
            "algorithm `none` is not accepted",
        ),
        (
            "jws-hs256",
            Box::new(|c| {
                c["signatures"] = json!([{"protected": URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","kid":"k"}"#), "signature": "AAAA"}]);
            }),
            3,
            "algorithm `HS256` is not accepted",
        ),
        (
            "jws-no-key",
            Box::new(|c| {
                c["signatures"] = json!([{"protected": URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","kid":"unknown"}"#), "signature": "AAAA"}]);
            }),
            3,
            "no key to check it with",
        ),
    ];
    assert!(cases.len() >= 15);
    for (name, change, code, reason) in &cases {
        let mut c = good.clone();
        change(&mut c);
        let f = write(&dir.join(format!("fail-{name}.json")), &c);
        let store = dir.join(format!("store-{name}"));
        let (got, err) = import(&store, &f, &[]);
        assert_eq!(got, *code, "{name}: {err}");
        assert!(err.contains(reason), "{name}: {err}");
        assert!(!store.join("peers.json").exists(), "{name}: recorded");
    }
    // Not JSON, and too large.
    let f = dir.join("not-json.json");
    std::fs::write(&f, b"{\"name\": ").unwrap();
    assert_eq!(import(&dir.join("nj"), &f, &[]).0, 3);
    std::fs::write(&f, vec![b' '; (1 << 20) + 1]).unwrap();
    let (code, err) = import(&dir.join("big"), &f, &[]);
    assert_eq!(code, 3);
    assert!(err.contains("more than the 1048576"), "{err}");
}

/// An X.509 certificate made with the openssl crate: `issuer` None is self-signed;
/// `emails` its subjectAltNames; `ca` a CA.
fn x509(
    cn: &str,
    emails: &[&str],
    ca: bool,
    key: &openssl::pkey::PKey<openssl::pkey::Private>,
    issuer: Option<(
        &openssl::x509::X509,
        &openssl::pkey::PKey<openssl::pkey::Private>,
    )>,
) -> openssl::x509::X509 {
    use openssl::x509::extension::{BasicConstraints, KeyUsage, SubjectAlternativeName};
    let mut name = openssl::x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    let name = name.build();
    let mut b = openssl::x509::X509::builder().unwrap();
    b.set_version(2).unwrap();
    let serial = openssl::bn::BigNum::from_u32(rand_serial()).unwrap();
    b.set_serial_number(&serial.to_asn1_integer().unwrap())
        .unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(issuer.map_or(&name, |(c, _)| c.subject_name()))
        .unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(30).unwrap())
        .unwrap();
    if ca {
        b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
            .unwrap();
        b.append_extension(KeyUsage::new().critical().key_cert_sign().build().unwrap())
            .unwrap();
    } else {
        b.append_extension(
            KeyUsage::new()
                .critical()
                .digital_signature()
                .build()
                .unwrap(),
        )
        .unwrap();
    }
    if !emails.is_empty() {
        let mut san = SubjectAlternativeName::new();
        for e in emails {
            san.email(e);
        }
        let ctx = b.x509v3_context(issuer.map(|(c, _)| c.as_ref()), None);
        let san = san.build(&ctx).unwrap();
        b.append_extension(san).unwrap();
    }
    b.sign(
        issuer.map_or(key, |(_, k)| k),
        openssl::hash::MessageDigest::sha256(),
    )
    .unwrap();
    b.build()
}

fn rand_serial() -> u32 {
    use std::time::{SystemTime, UNIX_EPOCH};
    (SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        >> 1)
        + 1
}

fn ec_key() -> openssl::pkey::PKey<openssl::pkey::Private> {
    let group = openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap();
    openssl::pkey::PKey::from_ec_key(openssl::ec::EcKey::generate(&group).unwrap()).unwrap()
}

/// The addresses the store at `store` holds keys for (`key list --json`).
fn listed_addresses(store: &Path) -> String {
    let out = mailseal(store, &["key", "list", "--json"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Issue #17: a card installs keys for its own address only. Mallory publishes a
/// card for her own address whose certificate (S/MIME: a second subjectAltName;
/// OpenPGP: a second User ID) also names the CEO: importing it would pin her key for
/// the CEO. The card is refused whole and the victim's store is unchanged.
#[test]
fn fail_a_card_key_that_also_names_another_address() {
    const MALLORY: &str = "mallory@evil.example";
    const CEO: &str = "ceo@corp.example";
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let mallory = agent(dir, "mallory", MALLORY);
    let base = card(&mallory, MALLORY, &["--no-mls"], &dir.join("base.json"));
    let victim = dir.join("victim");

    let key = ec_key();
    let both = x509("mallory", &[MALLORY, CEO], false, &key, None);
    let mut c = base.clone();
    protection_mut(&mut c)["smimeCertificates"] =
        json!([String::from_utf8(both.to_pem().unwrap()).unwrap()]);
    let f = write(&dir.join("two-names.json"), &c);
    let (code, err) = import(&victim, &f, &[]);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("not for the card's address alone"), "{err}");
    assert!(!listed_addresses(&victim).contains(CEO));
    assert!(!victim.join("peers.json").exists());

    // OpenPGP: one certificate with a User ID for each.
    let gnupg = common::Gpg::new();
    gnupg.run(
        &[
            "--passphrase",
            "",
            "--quick-gen-key",
            MALLORY,
            "ed25519",
            "sign",
            "never",
        ],
        b"",
    );
    let listing = gnupg
        .run(&["--with-colons", "--list-keys", MALLORY], b"")
        .stdout;
    let fpr = String::from_utf8_lossy(&listing)
        .lines()
        .find(|l| l.starts_with("fpr:"))
        .and_then(|l| l.split(':').nth(9))
        .unwrap()
        .to_string();
    gnupg.run(&["--passphrase", "", "--quick-add-uid", &fpr, CEO], b"");
    let armored = gnupg.run(&["--armor", "--export", MALLORY], b"").stdout;
    let mut c = base.clone();
    protection_mut(&mut c)["openpgpCertificates"] = json!([String::from_utf8(armored).unwrap()]);
    let f = write(&dir.join("two-uids.json"), &c);
    let (code, err) = import(&victim, &f, &[]);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("not for the card's address alone"), "{err}");
    assert!(!listed_addresses(&victim).contains(CEO));
}

/// Issue #17: a signer certificate that chains to the victim's trust anchor vouches
/// for its own address, not for any card. Mallory holds an ordinary certificate from
/// the victim's CA and signs a card for the CEO carrying keys she made herself: it
/// must not count as trusted (`--require-signature` refuses it). The same signer on
/// Mallory's own card is anchored.
#[test]
fn fail_an_anchored_card_signer_vouching_for_another_address() {
    const MALLORY: &str = "mallory@evil.example";
    const CEO: &str = "ceo@corp.example";
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let ca_key = ec_key();
    let ca = x509("Corp Root", &[], true, &ca_key, None);
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.to_pem().unwrap()).unwrap();
    let victim = dir.join("victim");
    ok(
        &victim,
        &["key", "import", "--trusted", ca_file.to_str().unwrap()],
    );
    let signer_key = ec_key();
    let signer = x509(
        "mallory",
        &[MALLORY],
        false,
        &signer_key,
        Some((&ca, &ca_key)),
    );
    let x5c = json!([STANDARD.encode(signer.to_der().unwrap())]);

    // Mallory's store with keys she generated for the CEO's address.
    let fake_ceo = agent(dir, "fake-ceo", CEO);
    let mut forged = card(&fake_ceo, CEO, &["--no-mls"], &dir.join("ceo.json"));
    openssl_sign(
        &mut forged,
        json!({"alg": "ES256", "x5c": x5c}),
        &signer_key,
    );
    let f = write(&dir.join("ceo-signed.json"), &forged);
    let (code, err) = import(&victim, &f, &["--require-signature"]);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("no signature by a key this store trusts"),
        "{err}"
    );
    assert!(!listed_addresses(&victim).contains(CEO));

    // Her own card, signed by the same certificate: anchored, accepted.
    let mallory = agent(dir, "mallory", MALLORY);
    let mut own = card(&mallory, MALLORY, &["--no-mls"], &dir.join("m.json"));
    openssl_sign(&mut own, json!({"alg": "ES256", "x5c": x5c}), &signer_key);
    let f = write(&dir.join("m-signed.json"), &own);
    let (code, err) = import(&victim, &f, &["--require-signature"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("made with a certificate under a trusted CA"),
        "{err}"
    );
}

/// Issue #17: an operator key (a provider's certificate that signs the cards of every
/// agent of its domain) counts only where local configuration names it for that
/// domain.
#[test]
fn an_operator_key_vouches_only_for_the_domain_it_is_configured_for() {
    const CEO: &str = "ceo@corp.example";
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let ca_key = ec_key();
    let ca = x509("Corp Root", &[], true, &ca_key, None);
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.to_pem().unwrap()).unwrap();
    let ops_key = ec_key();
    let ops = x509(
        "ops",
        &["ops@corp.example"],
        false,
        &ops_key,
        Some((&ca, &ca_key)),
    );
    let fpr = mailseal::keystore::describe(&ops.to_pem().unwrap(), "ops")
        .unwrap()
        .remove(0)
        .fingerprint;
    let ceo = agent(dir, "ceo", CEO);
    let mut c = card(&ceo, CEO, &["--no-mls"], &dir.join("ceo.json"));
    openssl_sign(
        &mut c,
        json!({"alg": "ES256", "x5c": [STANDARD.encode(ops.to_der().unwrap())]}),
        &ops_key,
    );
    let f = write(&dir.join("ceo-by-ops.json"), &c);
    for (name, operator, code) in [
        ("none", None, 6),
        ("other-domain", Some(format!("evil.example={fpr}")), 6),
        ("configured", Some(format!("corp.example={fpr}")), 0),
    ] {
        let victim = dir.join(format!("victim-{name}"));
        ok(
            &victim,
            &["key", "import", "--trusted", ca_file.to_str().unwrap()],
        );
        let mut extra = vec!["--require-signature".to_string()];
        if let Some(o) = operator {
            extra.extend(["--card-operator".to_string(), o]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (got, err) = import(&victim, &f, &extra);
        assert_eq!(got, code, "{name}: {err}");
        if code == 0 {
            assert!(
                err.contains("made with an operator key for the domain"),
                "{err}"
            );
        }
    }
}
