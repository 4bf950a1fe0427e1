//! Three stores (connected host, offline host, recipient) per profile, and the
//! command line between them.

use std::path::PathBuf;
use std::process::Output;

use super::common::{fixture, run};

/// A signing time inside the RFC 9216 certificates' validity and after any key a
/// test generates (generated keys are dated now).
pub fn now_text() -> String {
    let t = time::OffsetDateTime::now_utc() + time::Duration::seconds(5);
    t.replace_nanosecond(0)
        .expect("whole seconds")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("formats")
}

/// The three stores and the scratch directory they live in.
pub struct Hosts {
    pub dir: tempfile::TempDir,
    pub from: &'static str,
    pub to: &'static str,
}

impl Hosts {
    /// Three empty stores in a new directory, mail from `from` to `to`.
    pub fn empty(from: &'static str, to: &'static str) -> Hosts {
        hosts(from, to)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn p(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
    /// `mailseal --store STORE ARGS...` with `stdin`; the output, whatever the status.
    pub fn at(&self, store: &str, args: &[&str], stdin: &[u8]) -> Output {
        let s = self.p(store);
        let mut all = vec!["--store", s.as_str()];
        all.extend_from_slice(args);
        run(&all, stdin)
    }
    /// As [`Hosts::at`]; fails the test unless it succeeds.
    pub fn ok(&self, store: &str, args: &[&str], stdin: &[u8]) -> Output {
        let out = self.at(store, args, stdin);
        assert!(
            out.status.success(),
            "{store}: {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
    /// Composes the `message/send` request `id` from `from` to `to` into `plain.eml`
    /// (or `name`).
    pub fn compose(&self, name: &str, id: &str, text: &str) -> String {
        let env = serde_json::json!({"bindingVersion":"1.0","a2aVersion":"1.0",
            "kind":"request","operation":"message/send","messageId":id,
            "correlationId":"c-1","sequence":0,"final":false,"idempotencyKey":id,
            "payload":{"message":{"messageId":"m-1","role":"ROLE_USER",
                "parts":[{"text":text},{"data":{"approve":"invoice-77","limit":250}}]}}});
        let envelope = self.path(&format!("{name}.json"));
        std::fs::write(&envelope, env.to_string()).expect("write envelope");
        let out = self.p(name);
        self.ok(
            "connected",
            &[
                "compose",
                "--from",
                self.from,
                "--to",
                self.to,
                "--in",
                &envelope.display().to_string(),
                "--out",
                &out,
            ],
            b"",
        );
        out
    }
    /// sign-request on the connected host for `plain` under `profile`, signing time now,
    /// into `out` (with `extra` arguments).
    pub fn request(&self, profile: &str, plain: &str, out: &str, extra: &[&str]) {
        let at = now_text();
        let mut args = vec![
            "sign-request",
            "--profile",
            profile,
            "--at",
            &at,
            plain,
            "--out",
            out,
        ];
        args.extend_from_slice(extra);
        self.ok("connected", &args, b"");
    }

    /// sign-request on the connected host, sign (confirmed on stdin) on the offline
    /// host, assemble on the connected host: the paths of the request, the response
    /// and the message.
    pub fn round_trip(
        &self,
        profile: &str,
        plain: &str,
        at: &str,
        tag: &str,
    ) -> (String, String, String) {
        let req = self.p(&format!("{tag}.req"));
        let resp = self.p(&format!("{tag}.resp"));
        let msg = self.p(&format!("{tag}.eml"));
        self.ok(
            "connected",
            &[
                "sign-request",
                "--profile",
                profile,
                "--at",
                at,
                plain,
                "--out",
                &req,
            ],
            b"",
        );
        self.ok(
            "offline",
            &["sign", &req, "--out", &resp],
            &confirmation(&req),
        );
        self.ok("connected", &["assemble", &req, &resp, "--out", &msg], b"");
        (req, resp, msg)
    }
}

fn hosts(from: &'static str, to: &'static str) -> Hosts {
    Hosts {
        dir: tempfile::tempdir().expect("temp dir"),
        from,
        to,
    }
}

/// S/MIME with the RFC 9216 sample identities: Alice's signing key on the offline
/// host only; the connected host holds her certificates and Bob's; Bob holds his key,
/// the CA, and nothing of Alice's but what her mail carries.
pub fn smime() -> Hosts {
    let h = hosts("alice@smime.example", "bob@smime.example");
    let f = |r: &str| fixture(&format!("rfc9216/{r}")).display().to_string();
    h.ok(
        "offline",
        &["key", "import", &f("alice.sign.crt"), &f("alice.sign.key")],
        b"",
    );
    h.ok(
        "offline",
        &["key", "import", "--trusted", &f("ca.rsa.crt")],
        b"",
    );
    h.ok(
        "connected",
        &[
            "key",
            "import",
            &f("alice.sign.crt"),
            &f("alice.encrypt.crt"),
            &f("bob.encrypt.crt"),
        ],
        b"",
    );
    h.ok(
        "connected",
        &["key", "import", "--trusted", &f("ca.rsa.crt")],
        b"",
    );
    h.ok(
        "bob",
        &[
            "key",
            "import",
            &f("bob.encrypt.crt"),
            &f("bob.encrypt.key"),
        ],
        b"",
    );
    h.ok(
        "bob",
        &["key", "import", "--trusted", &f("ca.rsa.crt")],
        b"",
    );
    h
}

/// OpenPGP with generated v4 keys: Alice's secret key on the offline host; her and
/// Bob's certificates on the connected host; Bob's key and Alice's certificate at Bob.
pub fn openpgp() -> Hosts {
    let h = hosts("alice@pgp.example", "bob@pgp.example");
    let (a, b) = (h.p("alice.asc"), h.p("bob.asc"));
    h.ok(
        "offline",
        &[
            "key",
            "generate",
            "--kind",
            "openpgp",
            "--email",
            h.from,
            "--cert-out",
            &a,
        ],
        b"",
    );
    h.ok(
        "bob",
        &[
            "key",
            "generate",
            "--kind",
            "openpgp",
            "--email",
            h.to,
            "--cert-out",
            &b,
        ],
        b"",
    );
    h.ok("connected", &["key", "import", &a, &b], b"");
    h.ok("bob", &["key", "import", &a], b"");
    h
}

/// detached-jws with a generated Ed25519 JWK (or `algorithm`).
pub fn jws(algorithm: &str) -> Hosts {
    let h = hosts("alice@jws.example", "bob@jws.example");
    let jwk = h.p("alice.jwk");
    h.ok(
        "offline",
        &[
            "key",
            "generate",
            "--kind",
            "jws",
            "--algorithm",
            algorithm,
            "--email",
            h.from,
            "--cert-out",
            &jwk,
        ],
        b"",
    );
    h.ok(
        "bob",
        &["key", "generate", "--kind", "jws", "--email", h.to],
        b"",
    );
    h.ok(
        "connected",
        &["key", "import", "--jwk", &jwk, "--email", h.from],
        b"",
    );
    h.ok(
        "bob",
        &["key", "import", "--jwk", &jwk, "--email", h.from],
        b"",
    );
    h
}

/// The first part of a `multipart/signed` message (the signed entity, as signed) and
/// the body of its second part.
pub fn signed_parts(message: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let text = String::from_utf8(message.to_vec()).expect("7-bit message");
    let boundary = text
        .split("boundary=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("boundary")
        .to_string();
    let first = format!("--{boundary}\r\n");
    let delim = format!("\r\n--{boundary}");
    let start = text.find(&first).expect("first part") + first.len();
    let end = text[start..].find(&delim).expect("second part") + start;
    let rest = &text[end + delim.len()..];
    let body_start = rest.find("\r\n\r\n").expect("signature headers") + 4;
    let body_end = rest.find(&delim).expect("close delimiter");
    (
        text.as_bytes()[start..end].to_vec(),
        rest.as_bytes()[body_start..body_end].to_vec(),
    )
}

/// What the operator types to sign the request in file `req`: the first eight
/// characters of its digest (the armor's Fingerprint line, which the summary shows).
pub fn confirmation(req: &str) -> Vec<u8> {
    let text = String::from_utf8(read(req)).expect("text");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Fingerprint: "))
        .expect("Fingerprint line");
    let mut typed: String = line
        .chars()
        .filter(|c| !c.is_whitespace())
        .take(8)
        .collect();
    typed.push('\n');
    typed.into_bytes()
}

/// Reads a file.
pub fn read(p: &str) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}"))
}
