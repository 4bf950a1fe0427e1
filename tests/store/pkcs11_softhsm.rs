//! S/MIME with private keys on a PKCS#11 token (SoftHSM2): created on the token, never
//! in the store, never extractable; they sign what `openssl cms -verify` accepts
//! (ECDSA P-256, RSA PKCS#1 v1.5, RSA-PSS) and decrypt what `openssl cms -encrypt`
//! writes (ECDH P-256, RSAES-OAEP, RSAES-PKCS1-v1_5) and what mailseal seals. Every
//! token operation runs in a `mailseal` process, as a user would run it. Skips (saying
//! why) without SoftHSM2, fails then under `MAILSEAL_REQUIRE_PEERS=1`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{fixture, openssl, openssl_issue, openssl_test_ca};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;

const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
const PIN: &str = "1234";

/// A SoftHSM2 configuration of its own with one initialised token, "mailseal".
struct Hsm {
    dir: tempfile::TempDir,
}

impl Hsm {
    fn new() -> Option<Hsm> {
        let usable = Path::new(MODULE).exists()
            && common::peer_available(
                "softhsm2-util",
                Command::new("softhsm2-util").arg("--version"),
            );
        if !usable {
            assert!(
                std::env::var("MAILSEAL_REQUIRE_PEERS").as_deref() != Ok("1"),
                "SoftHSM2 is required (MAILSEAL_REQUIRE_PEERS=1): apt-get install softhsm2"
            );
            common::skip(&format!("SoftHSM2 ({MODULE}) is not installed"));
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tokens")).unwrap();
        std::fs::write(
            dir.path().join("softhsm2.conf"),
            format!(
                "directories.tokendir = {}/tokens\nobjectstore.backend = file\nlog.level = ERROR\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let hsm = Hsm { dir };
        let out = Command::new("softhsm2-util")
            .args([
                "--init-token",
                "--free",
                "--label",
                "mailseal",
                "--pin",
                PIN,
                "--so-pin",
                "5678",
            ])
            .env("SOFTHSM2_CONF", hsm.conf())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(hsm)
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("softhsm2.conf")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `mailseal ARGS` with this token's configuration and its PIN in the environment.
    fn mailseal(&self, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child = Command::new(common::bin())
            .args(args)
            .env("SOFTHSM2_CONF", self.conf())
            .env("MAILSEAL_PKCS11_PIN", PIN)
            .env("MAILSEAL_PKCS11_MODULES", MODULE)
            .env("MAILSEAL_HOME", self.path("default-store"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// [`Hsm::mailseal`] on a machine whose `MAILSEAL_PKCS11_MODULES` lists no module:
    /// the token's keys cannot be loaded there.
    fn mailseal_no_modules(&self, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child = Command::new(common::bin())
            .args(args)
            .env("SOFTHSM2_CONF", self.conf())
            .env_remove("MAILSEAL_PKCS11_PIN")
            .env_remove("MAILSEAL_PKCS11_MODULES")
            .env("MAILSEAL_HOME", self.path("default-store"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    fn ok(&self, args: &[&str], stdin: &[u8]) -> Output {
        let out = self.mailseal(args, stdin);
        assert!(
            out.status.success(),
            "mailseal {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Creates `object` on the token for `email` in the store `store`; returns the
    /// certificate file.
    fn generate(&self, store: &str, email: &str, object: &str, algorithm: &str) -> PathBuf {
        let uri =
            format!("pkcs11:token=mailseal;object={object}?module-path={MODULE}&pin-value={PIN}");
        let cert = self.path(&format!("{object}.pem"));
        self.ok(
            &[
                "key",
                "generate",
                "--kind",
                "smime",
                "--email",
                email,
                "--algorithm",
                algorithm,
                "--store",
                self.path(store).to_str().unwrap(),
                "--pkcs11",
                &uri,
                "--cert-out",
                cert.to_str().unwrap(),
            ],
            b"",
        );
        cert
    }
}

fn request(id: &str, from: &str, to: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, id);
    env.set("correlationId", &format!("{id}-ex"));
    env.set("idempotencyKey", &format!("{id}-effect"));
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": "token plans"}]}}),
    );
    MailA2aMessage::new(from, &[to], env)
}

#[test]
fn token_keys_sign_what_openssl_verifies() {
    let Some(hsm) = Hsm::new() else { return };
    for (object, algorithm, pss) in [
        ("sig-ec", "p256", false),
        ("sig-rsa", "rsa2048", false),
        ("sig-pss", "rsa2048", true),
    ] {
        let store = format!("store-{object}");
        let cert = hsm.generate(&store, "bob@smime.example", object, algorithm);
        let plain = hsm.path(&format!("{object}.eml"));
        std::fs::write(
            &plain,
            request(object, "bob@smime.example", "alice@smime.example")
                .to_rfc5322()
                .unwrap(),
        )
        .unwrap();
        let mut args = vec![
            "seal",
            "--store",
            hsm.path(&store).to_str().unwrap().to_owned().leak(),
            "--profile",
            "smime",
            "--sign-only",
            "--in",
            plain.to_str().unwrap().to_owned().leak(),
        ];
        if pss {
            args.push("--rsa-pss");
        }
        let signed = hsm.ok(&args, b"").stdout;
        std::fs::write(hsm.path("signed.eml"), &signed).unwrap();
        let c = cert.to_str().unwrap();
        let out = openssl(
            &[
                "cms",
                "-verify",
                "-in",
                "signed.eml",
                "-CAfile",
                c,
                "-purpose",
                "smimesign",
                "-out",
                "/dev/null",
            ],
            hsm.dir.path(),
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("Verification successful"));
        if pss {
            let text = String::from_utf8_lossy(
                &openssl(
                    &["cms", "-cmsout", "-print", "-in", "signed.eml"],
                    hsm.dir.path(),
                )
                .stdout,
            )
            .into_owned();
            assert!(text.contains("rsassaPss"), "{text}");
        }
    }
}

/// Either the token decrypted it (the envelope `id` on stdout), or it said clearly
/// that it lacks RSAES-OAEP with SHA-256: SoftHSM 2.6 does OAEP with SHA-1 only, and
/// mailseal's RSA recipients get OAEP-SHA-256 (RFC 8551 recommends it).
fn opened_or_oaep_sha256_unsupported(out: &Output, id: &str) {
    if out.status.success() {
        assert!(String::from_utf8_lossy(&out.stdout).contains(id), "{id}");
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("token does not support RSAES-OAEP with SHA-256"),
        "{err}"
    );
}

#[test]
fn token_keys_decrypt_what_openssl_and_mailseal_encrypt() {
    let Some(hsm) = Hsm::new() else { return };
    let k = |f: &str| fixture(&format!("rfc9216/{f}")).display().to_string();
    // Bob's key is on the token; Alice signs with her RFC 9216 file key.
    for (object, algorithm) in [("dec-ec", "p256"), ("dec-rsa", "rsa2048")] {
        let store = format!("store-{object}");
        let bob = hsm.generate(&store, "bob@smime.example", object, algorithm);
        let s = hsm.path(&store);
        let s = s.to_str().unwrap();
        hsm.ok(&["key", "import", "--store", s, &k("alice.sign.crt")], b"");
        hsm.ok(
            &["key", "import", "--store", s, "--trusted", &k("ca.rsa.crt")],
            b"",
        );
        // OpenSSL encrypts: ECDH for the EC key (with the SHA-256 KDF: its SHA-1
        // default is legacy); for RSA its default PKCS#1 v1.5, OAEP with SHA-1, and
        // OAEP with SHA-256.
        let variants: &[(&str, &[&str])] = if algorithm == "p256" {
            &[("ecdh", &["-keyopt", "ecdh_kdf_md:sha256"])]
        } else {
            &[
                ("pkcs1", &[]),
                ("oaep-sha1", &["-keyopt", "rsa_padding_mode:oaep"]),
                (
                    "oaep-sha256",
                    &[
                        "-keyopt",
                        "rsa_padding_mode:oaep",
                        "-keyopt",
                        "rsa_oaep_md:sha256",
                    ],
                ),
            ]
        };
        for (variant, keyopts) in variants {
            let id = format!("{object}-{variant}");
            let msg = request(&id, "alice@smime.example", "bob@smime.example");
            std::fs::write(hsm.path("inner.eml"), msg.to_inner_entity(true).unwrap()).unwrap();
            openssl(
                &[
                    "cms",
                    "-sign",
                    "-in",
                    "inner.eml",
                    "-signer",
                    &k("alice.sign.crt"),
                    "-inkey",
                    &k("alice.sign.key"),
                    "-out",
                    "signed.eml",
                ],
                hsm.dir.path(),
            );
            let mut args = vec![
                "cms",
                "-encrypt",
                "-aes-256-gcm",
                "-in",
                "signed.eml",
                "-recip",
                bob.to_str().unwrap(),
            ];
            args.extend_from_slice(keyopts);
            args.extend(["-out", "enc.eml"]);
            openssl(&args, hsm.dir.path());
            let out = hsm.mailseal(
                &["open", "--store", s],
                &std::fs::read(hsm.path("enc.eml")).unwrap(),
            );
            if *variant == "oaep-sha256" {
                opened_or_oaep_sha256_unsupported(&out, &id);
            } else {
                assert!(
                    out.status.success(),
                    "{id}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(String::from_utf8_lossy(&out.stdout).contains(&id), "{id}");
            }
        }

        // mailseal to the token holder: Alice's store has her file keys and Bob's
        // token certificate.
        let alice = hsm.path(&format!("alice-{object}"));
        let a = alice.to_str().unwrap();
        // One import: each certificate with its key is our own (a certificate for
        // an address the store holds, imported alone, is a change: issue 55).
        let files = [
            "alice.sign.crt",
            "alice.sign.key",
            "alice.encrypt.crt",
            "alice.encrypt.key",
        ]
        .map(k);
        let mut args = vec!["key", "import", "--store", a];
        args.extend(files.iter().map(String::as_str));
        hsm.ok(&args, b"");
        hsm.ok(&["key", "import", "--store", a, bob.to_str().unwrap()], b"");
        let id = format!("{object}-mailseal");
        let again = request(&id, "alice@smime.example", "bob@smime.example");
        std::fs::write(hsm.path("plain.eml"), again.to_rfc5322().unwrap()).unwrap();
        let sealed = hsm
            .ok(
                &[
                    "seal",
                    "--store",
                    a,
                    "--profile",
                    "smime",
                    "--in",
                    hsm.path("plain.eml").to_str().unwrap(),
                ],
                b"",
            )
            .stdout;
        let out = hsm.mailseal(&["open", "--store", s], &sealed);
        if algorithm == "p256" {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
        } else {
            opened_or_oaep_sha256_unsupported(&out, &id);
        }
    }
}

#[test]
fn token_keys_never_leave_the_token() {
    let Some(hsm) = Hsm::new() else { return };
    let cert = hsm.generate("store", "bob@smime.example", "kept", "p256");
    // The store holds the certificate and a reference without the PIN, no key.
    let db = rusqlite::Connection::open(hsm.path("store/mailseal.db")).unwrap();
    let rows: Vec<(Option<Vec<u8>>, String)> = db
        .prepare("SELECT pkcs8, token_uri FROM private_key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 1);
    let (pkcs8, reference) = &rows[0];
    assert!(pkcs8.is_none(), "no key material in the store");
    assert!(
        reference.starts_with("pkcs11:token=mailseal;object=kept"),
        "{reference}"
    );
    assert!(
        !reference.contains(PIN) && !reference.contains("pin-value"),
        "{reference}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(hsm.path("store/mailseal.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let list = hsm.ok(
        &[
            "key",
            "list",
            "--json",
            "--store",
            hsm.path("store").to_str().unwrap(),
        ],
        b"",
    );
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        list[0]["hasPrivateKey"]
            .as_bool()
            .or(list[0]["has_private_key"].as_bool()),
        Some(true),
        "{list}"
    );
    assert!(cert.exists());

    // On the token: sensitive and never extractable (checked in this process, the
    // only token use in it).
    std::env::set_var("SOFTHSM2_CONF", hsm.conf());
    std::env::set_var("MAILSEAL_PKCS11_MODULES", MODULE);
    let uri = mailseal::keystore::Pkcs11Uri::parse(&format!(
        "pkcs11:token=mailseal;object=kept?module-path={MODULE}&pin-value={PIN}"
    ))
    .unwrap();
    let key = mailseal::keystore::TokenKey::open(&uri).unwrap();
    assert!(key.never_leaves_the_token());

    // Without the PIN the key is unusable, and says how to give it.
    let out = Command::new(common::bin())
        .args([
            "seal",
            "--store",
            hsm.path("store").to_str().unwrap(),
            "--profile",
            "smime",
            "--sign-only",
        ])
        .env("SOFTHSM2_CONF", hsm.conf())
        .env("MAILSEAL_PKCS11_MODULES", MODULE)
        .env_remove("MAILSEAL_PKCS11_PIN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(
                &request("nopin", "bob@smime.example", "alice@smime.example")
                    .to_rfc5322()
                    .unwrap(),
            )?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("MAILSEAL_PKCS11_PIN"));

    // Issue #17: a module named by a stored key reference (a store another host may
    // write) is loaded only when this machine's MAILSEAL_PKCS11_MODULES lists it.
    let out = Command::new(common::bin())
        .args([
            "seal",
            "--store",
            hsm.path("store").to_str().unwrap(),
            "--profile",
            "smime",
            "--sign-only",
        ])
        .env("SOFTHSM2_CONF", hsm.conf())
        .env("MAILSEAL_PKCS11_PIN", PIN)
        .env("MAILSEAL_PKCS11_MODULES", "/usr/lib/some/other/module.so")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(
                &request("notlisted", "bob@smime.example", "alice@smime.example")
                    .to_rfc5322()
                    .unwrap(),
            )?;
            c.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("MAILSEAL_PKCS11_MODULES does not list"),
        "{stderr}"
    );
}

#[test]
fn a_token_alone_is_a_signing_store() {
    let Some(hsm) = Hsm::new() else { return };
    let store = format!("pkcs11:token=mailseal?module-path={MODULE}");
    let cert = hsm.path("carol.pem");
    hsm.ok(
        &[
            "key",
            "generate",
            "--store",
            &store,
            "--kind",
            "smime",
            "--email",
            "carol@smime.example",
            "--cert-out",
            cert.to_str().unwrap(),
        ],
        b"",
    );
    let list = hsm.ok(&["key", "list", "--store", &store], b"");
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    // Its key is on the token, and listed so.
    assert!(list.contains("ec+token carol@smime.example"), "{list}");
    let msg = request("tok-store", "carol@smime.example", "alice@smime.example");
    let signed = hsm
        .ok(
            &[
                "seal",
                "--store",
                &store,
                "--profile",
                "smime",
                "--sign-only",
            ],
            &msg.to_rfc5322().unwrap(),
        )
        .stdout;
    std::fs::write(hsm.path("signed.eml"), &signed).unwrap();
    let out = openssl(
        &[
            "cms",
            "-verify",
            "-in",
            "signed.eml",
            "-CAfile",
            cert.to_str().unwrap(),
            "-purpose",
            "smimesign",
            "-out",
            "/dev/null",
        ],
        hsm.dir.path(),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Verification successful"));
    // Software keys never enter the token, nor certificates without a key on it.
    for f in ["alice.sign.key", "alice.sign.crt"] {
        let out = hsm.mailseal(
            &[
                "key",
                "import",
                "--store",
                &store,
                fixture(&format!("rfc9216/{f}")).to_str().unwrap(),
            ],
            b"",
        );
        assert_ne!(out.status.code(), Some(0), "{f}");
        assert!(out.stdout.is_empty());
    }
}

/// Issue #23: a token label the module does not have is named, with the SoftHSM2 step
/// that creates it (the message said "token: token:" before).
#[test]
fn fail_a_missing_token_is_named_with_how_to_create_it() {
    let Some(hsm) = Hsm::new() else { return };
    let uri = format!("pkcs11:token=nosuch;object=agent?module-path={MODULE}&pin-value={PIN}");
    let out = hsm.mailseal(
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            "agent@example.org",
            "--store",
            hsm.path("store-missing").to_str().unwrap(),
            "--pkcs11",
            &uri,
        ],
        b"",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no token labelled \"nosuch\"") && err.contains("softhsm2-util --init-token"),
        "{err}"
    );
    assert!(!err.contains("token: token:"), "{err}");
}

/// Offline signing with the key on a token (issue #20): the key made on the token with
/// a certificate request, the request issued from by an OpenSSL CA and the issued
/// certificate bound to the token key on import; then a signing request made on a
/// connected host (certificates only), signed on the token, assembled, and verified by
/// `openssl cms -verify` against that CA.
#[test]
fn an_offline_token_key_signs_requests_and_takes_its_issued_certificate() {
    let Some(hsm) = Hsm::new() else { return };
    let d = hsm.dir.path();
    openssl_test_ca(d, "Token CA");
    let uri = format!("pkcs11:token=mailseal;object=treasury?module-path={MODULE}&pin-value={PIN}");
    let p = |n: &str| hsm.path(n).to_str().unwrap().to_owned();
    let (offline, connected) = (p("offline"), p("connected"));
    hsm.ok(
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            "treasury@smime.example",
            "--store",
            &offline,
            "--pkcs11",
            &uri,
            "--csr",
            &p("t.csr"),
        ],
        b"",
    );
    openssl(&["req", "-in", "t.csr", "-verify", "-noout"], d);
    openssl_issue(d, "t.csr", "issued.pem");
    let out = hsm.ok(
        &["key", "import", "--store", &offline, &p("issued.pem")],
        b"",
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("+secret"),
        "the issued certificate is bound to the token key: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    hsm.ok(
        &["key", "import", "--store", &connected, &p("issued.pem")],
        b"",
    );
    let plain = hsm.path("t.eml");
    std::fs::write(
        &plain,
        request(
            "token-offline",
            "treasury@smime.example",
            "alice@smime.example",
        )
        .to_rfc5322()
        .unwrap(),
    )
    .unwrap();
    hsm.ok(
        &[
            "sign-request",
            "--store",
            &connected,
            "--profile",
            "smime",
            plain.to_str().unwrap(),
            "--out",
            &p("t.req"),
        ],
        b"",
    );
    // The operator types the first eight characters of the request's digest.
    let req_text = std::fs::read_to_string(p("t.req")).unwrap();
    let mut typed: String = req_text
        .lines()
        .find_map(|l| l.strip_prefix("Fingerprint: "))
        .unwrap()
        .replace(' ', "")[..8]
        .to_string();
    typed.push('\n');
    hsm.ok(
        &[
            "sign",
            "--store",
            &offline,
            &p("t.req"),
            "--out",
            &p("t.resp"),
            "--log",
            &p("t.log"),
        ],
        typed.as_bytes(),
    );
    hsm.ok(
        &[
            "assemble",
            "--store",
            &connected,
            &p("t.req"),
            &p("t.resp"),
            "--out",
            &p("signed.eml"),
        ],
        b"",
    );
    let out = openssl(
        &[
            "cms",
            "-verify",
            "-in",
            "signed.eml",
            "-CAfile",
            "ca.pem",
            "-out",
            "/dev/null",
        ],
        d,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Verification successful"));
}

/// After a token key is added for one address, the store's other addresses work on a
/// machine that does not allow the token's module (issue #61): their mail opens and
/// they sign; only the token key itself needs the module, and `key list` says which
/// keys are on a token.
#[test]
fn a_token_key_for_one_address_leaves_the_stores_other_addresses_working() {
    let Some(hsm) = Hsm::new() else { return };
    let store = hsm.path("shared");
    let s = store.to_str().unwrap();
    let peer = hsm.path("peer");
    let p = peer.to_str().unwrap();
    let carol_pem = hsm.path("carol.pem");
    let dave_pem = hsm.path("dave.pem");
    for (st, email, pem) in [
        (s, "carol@smime.example", &carol_pem),
        (p, "dave@smime.example", &dave_pem),
    ] {
        hsm.ok(
            &[
                "key",
                "generate",
                "--store",
                st,
                "--kind",
                "smime",
                "--email",
                email,
                "--cert-out",
                pem.to_str().unwrap(),
            ],
            b"",
        );
    }
    let tom_pem = hsm.generate("shared", "tom@smime.example", "tom", "p256");
    hsm.ok(
        &["key", "import", "--store", s, dave_pem.to_str().unwrap()],
        b"",
    );
    for pem in [&carol_pem, &tom_pem] {
        hsm.ok(&["key", "import", "--store", p, pem.to_str().unwrap()], b"");
    }

    // `key list`: the token key is marked, without the module.
    let listed = hsm.mailseal_no_modules(&["key", "list", "--store", s], b"");
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let text = String::from_utf8_lossy(&listed.stdout);
    let line = |who: &str| {
        text.lines()
            .find(|l| l.contains(who))
            .unwrap_or_else(|| panic!("{who} in {text}"))
            .to_string()
    };
    assert!(line("tom@smime.example").contains("+token"), "{text}");
    assert!(line("carol@smime.example").contains("+secret"), "{text}");
    let json = hsm.mailseal_no_modules(&["key", "list", "--store", s, "--json"], b"");
    let entries: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let on_token: Vec<&serde_json::Value> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("token").is_some())
        .collect();
    assert_eq!(on_token.len(), 1, "{entries}");
    assert!(!on_token[0]["token"].as_str().unwrap().contains(PIN));

    // Dave writes to Carol and to Tom, signed and encrypted.
    let mut sealed = Vec::new();
    for (id, to) in [
        ("to-carol", "carol@smime.example"),
        ("to-tom", "tom@smime.example"),
    ] {
        let plain = request(id, "dave@smime.example", to).to_rfc5322().unwrap();
        let out = hsm.ok(&["seal", "--store", p, "--profile", "smime"], &plain);
        sealed.push(out.stdout);
    }
    // Carol's mail opens where the token's module is not allowed.
    let out = hsm.mailseal_no_modules(&["open", "--store", s, "--stateless"], &sealed[0]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("to-carol"));
    // Tom's needs the module: refused, saying so (exit 5).
    let out = hsm.mailseal_no_modules(&["open", "--store", s, "--stateless"], &sealed[1]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("MAILSEAL_PKCS11_MODULES"), "{stderr}");
    // ... and opens where it is.
    let out = hsm.mailseal(&["open", "--store", s, "--stateless"], &sealed[1]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Carol signs and encrypts to Dave without the module.
    let plain = request("from-carol", "carol@smime.example", "dave@smime.example")
        .to_rfc5322()
        .unwrap();
    let out = hsm.mailseal_no_modules(&["seal", "--store", s, "--profile", "smime"], &plain);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An address with a key in the store and a key on a token: `seal` does not pick one
/// by dates (the token key, made later, would win silently); it refuses, naming
/// both and where each is, until `--signer` chooses (issue #61).
#[test]
fn fail_seal_does_not_choose_between_a_token_key_and_a_file_key_by_itself() {
    let Some(hsm) = Hsm::new() else { return };
    let store = hsm.path("both");
    let s = store.to_str().unwrap();
    let file_pem = hsm.path("file.pem");
    hsm.ok(
        &[
            "key",
            "generate",
            "--store",
            s,
            "--kind",
            "smime",
            "--email",
            "eve@smime.example",
            "--cert-out",
            file_pem.to_str().unwrap(),
        ],
        b"",
    );
    hsm.generate("both", "eve@smime.example", "eve", "p256");
    let fingerprints: Vec<(String, bool)> = {
        let out = hsm.ok(&["key", "list", "--store", s], b"");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("eve@smime.example"))
            .map(|l| {
                (
                    l.split_whitespace().next().unwrap().to_string(),
                    l.contains("+token"),
                )
            })
            .collect()
    };
    assert_eq!(fingerprints.len(), 2, "{fingerprints:?}");
    let plain = request("both-1", "eve@smime.example", "eve@smime.example")
        .to_rfc5322()
        .unwrap();
    let seal = |extra: &[&str]| {
        let mut args = vec!["seal", "--store", s, "--profile", "smime", "--sign-only"];
        args.extend_from_slice(extra);
        hsm.mailseal(&args, &plain)
    };
    let out = seal(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    for (f, _) in &fingerprints {
        assert!(stderr.contains(f.as_str()), "{stderr}");
    }
    assert!(
        stderr.contains("on a token") && stderr.contains("--signer"),
        "{stderr}"
    );
    // Each key chosen by a prefix of its fingerprint signs, and the signature is its.
    for (f, on_token) in &fingerprints {
        let out = seal(&["--signer", &f[..16]]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = hsm.path("report.json");
        let opened = hsm.mailseal(
            &[
                "open",
                "--store",
                s,
                "--stateless",
                "--own-copy",
                "--report",
                report.to_str().unwrap(),
            ],
            &out.stdout,
        );
        assert!(
            opened.status.success(),
            "{}",
            String::from_utf8_lossy(&opened.stderr)
        );
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(
            report["signer"].as_str(),
            Some(format!("x509:{f}").as_str()),
            "signed with the {} key",
            if *on_token { "token" } else { "file" }
        );
    }
    // A fingerprint of no key of the address: refused.
    let out = seal(&["--signer", "ffff"]);
    assert_ne!(out.status.code(), Some(0));
}
