//! GnuPG's S/MIME implementation, `gpgsm` (Debian `gpgsm`), both ways: gpgsm signs the
//! inner entity with SHA-256, SHA-384 and SHA-512 and we open the multipart/signed
//! message made of it; we sign with RSA and ECDSA P-256/P-384 and gpgsm verifies.
//!
//! gpgsm 2.2 signs only with RSA here: its PKCS#12 import crashes on an EC key and its
//! certificate requests are RSA only, so no ECDSA key of ours can reach it; it verifies
//! ECDSA. Encryption goes one way only: gpgsm 2.2 writes EnvelopedData with CBC content
//! (no AuthEnvelopedData), which we refuse by default (a padding oracle, see DESIGN.md)
//! and read under `--allow-legacy-cbc`; it reads no AES-GCM AuthEnvelopedData, which is
//! all we write.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::interop_openssl_smime::{first_part, pki, plain, seal_cli, signature_der, store};
use crate::common;
use mailseal::envelope::Operation;

/// A throw-away gpgsm home: its own keybox, agent and trust list.
struct Gpgsm {
    home: tempfile::TempDir,
}

impl Gpgsm {
    /// A new home, when gpgsm is installed.
    fn new() -> Option<Self> {
        if !common::peer_available(
            "gpgsm (Debian gpgsm)",
            Command::new("gpgsm").arg("--version"),
        ) {
            return None;
        }
        let home = tempfile::Builder::new().prefix("gpgsm").tempdir().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        // The passphrase of an imported key comes from the command line, not a dialog.
        std::fs::write(
            home.path().join("gpg-agent.conf"),
            "allow-loopback-pinentry\n",
        )
        .unwrap();
        Some(Gpgsm { home })
    }

    /// Runs `gpgsm ARGS` with `stdin`, in batch mode without CRL checks (the test CA
    /// publishes none); the output, whatever the exit status.
    fn try_run(&self, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child = Command::new("gpgsm")
            .env("GNUPGHOME", self.home.path())
            .args([
                "--batch",
                "--disable-crl-checks",
                "--pinentry-mode",
                "loopback",
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpgsm runs");
        let mut input = child.stdin.take().unwrap();
        let data = stdin.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = input.write_all(&data);
        });
        let out = child.wait_with_output().unwrap();
        let _ = writer.join();
        out
    }

    fn run(&self, args: &[&str], stdin: &[u8]) -> Output {
        let out = self.try_run(args, stdin);
        assert!(
            out.status.success(),
            "gpgsm {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Imports the CA certificate `ca` and trusts it as a root (`trustlist.txt`).
    fn trust(&self, ca: &Path) {
        self.run(&["--import", ca.to_str().unwrap()], b"");
        std::fs::write(
            self.home.path().join("trustlist.txt"),
            format!("{} S relax\n", fingerprint(ca)),
        )
        .unwrap();
    }

    /// Imports `crt` and `key` (a PKCS#12 with the ciphers gpgsm 2.2 reads).
    fn import_identity(&self, dir: &Path, crt: &Path, key: &Path) {
        common::openssl(
            &[
                "pkcs12",
                "-export",
                "-in",
                crt.to_str().unwrap(),
                "-inkey",
                key.to_str().unwrap(),
                "-passout",
                "pass:gpgsm-test",
                "-keypbe",
                "PBE-SHA1-3DES",
                "-certpbe",
                "PBE-SHA1-3DES",
                "-macalg",
                "sha1",
                "-out",
                "identity.p12",
            ],
            dir,
        );
        let p12 = dir.join("identity.p12");
        self.run(
            &["--passphrase-fd", "0", "--import", p12.to_str().unwrap()],
            b"gpgsm-test\n",
        );
    }
}

impl Drop for Gpgsm {
    fn drop(&mut self) {
        // The agent gpgsm started for this home ends with it.
        let _ = Command::new("gpgconf")
            .env("GNUPGHOME", self.home.path())
            .args(["--kill", "all"])
            .output();
    }
}

/// A multipart/signed message of `entity` and the detached CMS signature `der`, as an
/// S/MIME agent assembles gpgsm's output (RFC 8551 3.5.3).
fn multipart_signed(entity: &[u8], der: &[u8], micalg: &str) -> Vec<u8> {
    let boundary = "gpgsm-signed-3f9c";
    [
        format!(
            "MIME-Version: 1.0\r\nContent-Type: multipart/signed; \
             protocol=\"application/pkcs7-signature\"; micalg=\"{micalg}\"; \
             boundary=\"{boundary}\"\r\n\r\nThis is a signed message.\r\n--{boundary}\r\n"
        )
        .as_bytes(),
        entity,
        format!(
            "\r\n--{boundary}\r\nContent-Type: application/pkcs7-signature; name=\"smime.p7s\"\r\n\
             Content-Transfer-Encoding: base64\r\n\
             Content-Disposition: attachment; filename=\"smime.p7s\"\r\n\r\n"
        )
        .as_bytes(),
        &common::base64_lines(der),
        format!("\r\n--{boundary}--\r\n").as_bytes(),
    ]
    .concat()
}

/// `mailseal open` of `raw` by the store `s` (which holds the signer's own identity:
/// its own copy); the exit code, stderr and the report.
fn open(s: &Path, raw: &[u8], dir: &Path) -> (Option<i32>, String, serde_json::Value) {
    let report = dir.join("report.json");
    let _ = std::fs::remove_file(&report);
    let out = common::run(
        &[
            "open",
            "--own-copy",
            "--store",
            s.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        raw,
    );
    let r = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        r,
    )
}

/// gpgsm signs with SHA-256, SHA-384 and SHA-512 (RSA PKCS#1 v1.5: gpgsm 2.2 signs
/// with RSA only); each opens, named by its digest, and the same signature over a
/// changed entity does not.
#[test]
fn gpgsm_signatures_open_for_every_digest() {
    let Some(gpgsm) = Gpgsm::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, crt, key) = pki(d, "rsa", "agent@example.net");
    let s = store(d, &[&crt, &key], &[&ca]);
    gpgsm.trust(&ca);
    gpgsm.import_identity(d, &crt, &key);
    let msg = plain(
        "agent@example.net",
        "peer@example.com",
        Operation::MessageSend,
    );
    let entity = msg.to_inner_entity(false).unwrap();
    std::fs::write(d.join("inner.eml"), &entity).unwrap();
    for (digest, micalg, name) in [
        ("SHA256", "sha-256", "rsa-pkcs1-sha256"),
        ("SHA384", "sha-384", "rsa-pkcs1-sha384"),
        ("SHA512", "sha-512", "rsa-pkcs1-sha512"),
    ] {
        let signed = gpgsm.run(
            &[
                "--passphrase-fd",
                "0",
                "--digest-algo",
                digest,
                "--include-certs",
                "-1",
                "--local-user",
                "agent@example.net",
                "--detach-sign",
                d.join("inner.eml").to_str().unwrap(),
            ],
            b"gpgsm-test\n",
        );
        let raw = multipart_signed(&entity, &signed.stdout, micalg);
        let (code, stderr, report) = open(&s, &raw, d);
        assert_eq!(code, Some(0), "{digest}: {stderr}");
        assert_eq!(report["algorithm"], name, "{digest}");
        assert_eq!(report["protection"], "signed", "{digest}");
        assert_eq!(report["warnings"], serde_json::json!([]), "{digest}");
        // It was checked: the same signature over a changed entity is refused.
        let changed = String::from_utf8_lossy(&raw).replace("signed request", "signed requesT");
        assert_ne!(changed.as_bytes(), &raw[..]);
        let (code, stderr, _) = open(&s, changed.as_bytes(), d);
        assert_eq!(code, Some(4), "{digest}: a changed entity: {stderr}");
    }
}

/// What we sign with RSA, ECDSA P-256 and ECDSA P-384 gpgsm verifies as a good
/// signature by the agent's certificate, and a changed entity as a bad one.
#[test]
fn our_signatures_verify_in_gpgsm() {
    for kind in ["rsa", "ec", "ec:P-384"] {
        // A home each: every test CA has the same name.
        let Some(gpgsm) = Gpgsm::new() else { return };
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (ca, crt, key) = pki(d, kind, "agent@example.net");
        let s = store(d, &[&crt, &key], &[&ca]);
        gpgsm.trust(&ca);
        let msg = plain(
            "agent@example.net",
            "peer@example.com",
            Operation::MessageSend,
        );
        let sealed = seal_cli(&s, &msg, d);
        std::fs::write(d.join("entity.eml"), first_part(&sealed)).unwrap();
        std::fs::write(d.join("sig.der"), signature_der(&sealed)).unwrap();
        let verify = |entity: &Path| {
            gpgsm.try_run(
                &[
                    "--status-fd",
                    "1",
                    "--verify",
                    d.join("sig.der").to_str().unwrap(),
                    entity.to_str().unwrap(),
                ],
                b"",
            )
        };
        let out = verify(&d.join("entity.eml"));
        let status = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && status.contains("[GNUPG:] GOODSIG")
                && status.contains("[GNUPG:] VALIDSIG"),
            "{kind}: {status}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let changed = String::from_utf8_lossy(&first_part(&sealed))
            .replace("signed request", "signed requesT");
        std::fs::write(d.join("changed.eml"), changed).unwrap();
        let out = verify(&d.join("changed.eml"));
        let status = String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success()
                && status.contains("[GNUPG:] BADSIG")
                && !status.contains("GOODSIG"),
            "{kind}: a changed entity: {status}"
        );
    }
}

/// The SHA-1 fingerprint of the certificate `crt`, as gpgsm names a certificate.
fn fingerprint(crt: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha1", "-in"])
        .arg(crt)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.trim().split('=').nth(1).unwrap().replace(':', "")
}

/// gpgsm signs and then encrypts to Alice's RFC 9216 encryption certificate: gpgsm 2.2
/// writes EnvelopedData with CBC content, which has no integrity. It is refused by
/// default (exit 4, the EFAIL class), and opens with `--allow-legacy-cbc` as signed
/// only, with the warning.
#[test]
fn fail_gpgsm_encryption_is_legacy_cbc_and_opens_only_when_allowed() {
    let Some(gpgsm) = Gpgsm::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let f = |name: &str| common::fixture(&format!("rfc9216/{name}"));
    let s = store(
        d,
        &[
            &f("alice.sign.crt"),
            &f("alice.sign.key"),
            &f("alice.encrypt.crt"),
            &f("alice.encrypt.key"),
        ],
        &[&f("ca.rsa.crt")],
    );
    gpgsm.trust(&f("ca.rsa.crt"));
    gpgsm.import_identity(d, &f("alice.sign.crt"), &f("alice.sign.key"));
    gpgsm.run(&["--import", f("alice.encrypt.crt").to_str().unwrap()], b"");
    let msg = plain(
        "alice@smime.example",
        "bob@smime.example",
        Operation::MessageSend,
    );
    let entity = msg.to_inner_entity(true).unwrap();
    std::fs::write(d.join("inner.eml"), &entity).unwrap();
    let signed = gpgsm.run(
        &[
            "--passphrase-fd",
            "0",
            "--digest-algo",
            "SHA256",
            "--local-user",
            &format!("0x{}", fingerprint(&f("alice.sign.crt"))),
            "--detach-sign",
            d.join("inner.eml").to_str().unwrap(),
        ],
        b"gpgsm-test\n",
    );
    let signed = multipart_signed(&entity, &signed.stdout, "sha-256");
    std::fs::write(d.join("signed.eml"), &signed).unwrap();
    let encrypted = gpgsm.run(
        &[
            "--recipient",
            &format!("0x{}", fingerprint(&f("alice.encrypt.crt"))),
            "--encrypt",
            d.join("signed.eml").to_str().unwrap(),
        ],
        b"",
    );
    let raw = [
        &b"MIME-Version: 1.0\r\nContent-Type: application/pkcs7-mime; \
           smime-type=enveloped-data; name=\"smime.p7m\"\r\n\
           Content-Transfer-Encoding: base64\r\n\
           Content-Disposition: attachment; filename=\"smime.p7m\"\r\n\r\n"[..],
        &common::base64_lines(&encrypted.stdout),
        b"\r\n",
    ]
    .concat();
    let (code, stderr, _) = open(&s, &raw, d);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("EFAIL"), "{stderr}");
    let report = d.join("legacy.json");
    let out = common::run(
        &[
            "open",
            "--own-copy",
            "--allow-legacy-cbc",
            "--store",
            s.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        &raw,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: legacy content encryption") && stderr.contains("no integrity"),
        "{stderr}"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    assert_eq!(r["protection"], "signed", "{r}");
    assert_eq!(r["algorithm"], "rsa-pkcs1-sha256", "{r}");
}
