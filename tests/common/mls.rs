//! MLS agents for the CLI tests: each with its own store directory, driven through
//! the `mailseal` binary only.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One agent: its address and store.
pub struct Agent {
    pub email: String,
    pub store: PathBuf,
}

/// The state (`--state`) each store registered by [`use_state`] runs with.
static STATES: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());

/// From now on, [`mailseal`] runs with `--state STATE` for `store` (a PostgreSQL
/// URL: its MLS state and peer policies live there).
#[allow(dead_code)]
pub fn use_state(store: &Path, state: &str) {
    STATES
        .lock()
        .unwrap()
        .push((store.to_path_buf(), state.to_string()));
}

/// Runs `mailseal --store STORE ARGS` (with `--state` if [`use_state`] set one).
pub fn mailseal(store: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(super::bin());
    cmd.arg("--store").arg(store);
    if let Some((_, state)) = STATES.lock().unwrap().iter().find(|(s, _)| s == store) {
        cmd.arg("--state").arg(state);
    }
    cmd.args(args)
        .env_remove("MAILSEAL_STATE")
        .output()
        .expect("mailseal runs")
}

/// [`mailseal`], which must succeed; its stdout.
pub fn ok(store: &Path, args: &[&str]) -> Vec<u8> {
    let out = mailseal(store, args);
    assert!(
        out.status.success(),
        "mailseal {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A test CA under `root` (made once, by `openssl`): the certificate and key files
/// that issue the agents' S/MIME certificates, which certify their MLS keys.
pub fn test_ca(root: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (root.join("mls-ca.pem"), root.join("mls-ca.key"));
    if !cert.exists() {
        super::openssl_test_ca_files(
            root,
            "mailseal test MLS CA",
            key.to_str().unwrap(),
            cert.to_str().unwrap(),
        );
    }
    (cert, key)
}

/// Makes `store` an MLS agent for `email`: the test CA as its trust anchor, an S/MIME
/// identity the CA issued (its certificate also written to `root/EMAIL.pem`, for peers
/// that encrypt to it), and an MLS identity that identity certifies.
pub fn mls_identity(root: &Path, store: &Path, email: &str) {
    let (cert, key) = test_ca(root);
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let out = root.join(format!("{email}.pem"));
    ok(store, &["key", "import", "--trusted", cert]);
    ok(
        store,
        &[
            "key",
            "generate",
            "--kind",
            "smime",
            "--email",
            email,
            "--issuer-cert",
            cert,
            "--issuer-key",
            key,
            "--cert-out",
            out.to_str().unwrap(),
        ],
    );
    ok(
        store,
        &["key", "generate", "--kind", "mls", "--email", email],
    );
}

/// A key store (leaked: it lives as long as the test process) holding a
/// self-signed S/MIME identity for each of `emails`, so that each pins the others:
/// the authentication service for library tests whose members all trust one another.
pub fn shared_authority(emails: &[&str]) -> mailseal::mls::StoreAuthenticator<'static> {
    use mailseal::keystore::KeyStore;
    let dir = tempfile::tempdir().unwrap().keep();
    let store: &'static mailseal::keystore::DirectoryStore = Box::leak(Box::new(
        mailseal::keystore::DirectoryStore::open(dir.join("keys")).unwrap(),
    ));
    for email in emails {
        let request = mailseal::smime::IdentityRequest {
            email: Some(email.to_string()),
            common_name: None,
            kind: mailseal::smime::KeyKind::P256,
            days: 30,
            ca: false,
        };
        for id in mailseal::smime::generate(&request, None).unwrap() {
            let pem = mailseal::keystore::identity_pem(&id.certificate, &id.private_key).unwrap();
            store.import(pem.as_bytes(), "test", false).unwrap();
        }
    }
    mailseal::mls::StoreAuthenticator::new(store)
}

/// [`shared_authority`] once per test thread and list of members (leaked, like it):
/// the authentication service a test file's members share.
pub fn thread_authority(emails: &[&str]) -> &'static mailseal::mls::StoreAuthenticator<'static> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    type Leaked = &'static mailseal::mls::StoreAuthenticator<'static>;
    thread_local! {
        static BY_MEMBERS: RefCell<HashMap<String, Leaked>> = RefCell::default();
    }
    BY_MEMBERS.with(|m| {
        *m.borrow_mut()
            .entry(emails.join(","))
            .or_insert_with(|| Box::leak(Box::new(shared_authority(emails))))
    })
}

/// A valid `message/send` request envelope numbered `n`.
pub fn envelope(n: usize) -> String {
    serde_json::json!({
        "bindingVersion": "1.0",
        "a2aVersion": "1.0",
        "kind": "request",
        "operation": "message/send",
        "messageId": format!("urn:uuid:group-{n}"),
        "correlationId": format!("exchange-{n}"),
        "sequence": 0,
        "final": false,
        "idempotencyKey": format!("effect-{n}"),
        "payload": {"message": {"messageId": format!("m-{n}"), "role": "ROLE_USER",
            "parts": [{"text": format!("message {n}")}]}}
    })
    .to_string()
}

/// `count` agents under `root` with MLS identities; the first creates a group and adds
/// the others by KeyPackage and Welcome mails. Returns the agents and the group id.
pub fn group(root: &Path, count: usize) -> (Vec<Agent>, String) {
    let agents: Vec<Agent> = (1..=count)
        .map(|i| Agent {
            email: format!("agent{i}@group.example"),
            store: root.join(format!("store{i}")),
        })
        .collect();
    for a in &agents {
        mls_identity(root, &a.store, &a.email);
    }
    for a in &agents[1..] {
        ok(&a.store, &["mls", "inviters", "--allow", &agents[0].email]);
    }
    let mail = root.join("mail");
    std::fs::create_dir_all(&mail).unwrap();
    let group = String::from_utf8(ok(
        &agents[0].store,
        &["mls", "create", "--email", &agents[0].email],
    ))
    .unwrap()
    .trim()
    .to_string();
    let mut kps = Vec::new();
    for a in &agents[1..] {
        let kp = mail.join(format!("kp-{}.eml", a.email));
        ok(
            &a.store,
            &[
                "mls",
                "keypackage",
                "--email",
                &a.email,
                "--out",
                &kp.display().to_string(),
            ],
        );
        kps.push(kp.display().to_string());
    }
    let add_dir = mail.join("add");
    let add_s = add_dir.display().to_string();
    let mut args = vec!["mls", "add", "--group", group.as_str()];
    args.extend(kps.iter().map(String::as_str));
    args.extend(["--out-dir", &add_s]);
    ok(&agents[0].store, &args);
    let welcome = add_dir.join("welcome.eml").display().to_string();
    for a in &agents[1..] {
        let printed = ok(&a.store, &["mls", "join", "--in", &welcome]);
        assert_eq!(String::from_utf8_lossy(&printed).trim(), group);
    }
    (agents, group)
}

/// `from` seals message `n` to `to` in the group; returns the sealed mail's path.
pub fn send(dir: &Path, from: &Agent, to: &[&Agent], group: &str, n: usize) -> PathBuf {
    send_envelope(dir, from, to, group, n, &envelope(n))
}

/// [`send`] of the envelope `env_json` (files named after `n`).
pub fn send_envelope(
    dir: &Path,
    from: &Agent,
    to: &[&Agent],
    group: &str,
    n: usize,
    env_json: &str,
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let env = dir.join(format!("env-{n}.json"));
    std::fs::write(&env, env_json).unwrap();
    let plain = dir.join(format!("plain-{n}.eml"));
    let (env_s, plain_s) = (env.display().to_string(), plain.display().to_string());
    let mut args = vec!["compose", "--from", from.email.as_str()];
    for a in to {
        args.extend(["--to", a.email.as_str()]);
    }
    args.extend(["--in", &env_s, "--out", &plain_s]);
    ok(&from.store, &args);
    let sealed = dir.join(format!("sealed-{n}.eml"));
    ok(
        &from.store,
        &[
            "seal",
            "--profile",
            "mls",
            "--group",
            group,
            "--in",
            &plain_s,
            "--out",
            &sealed.display().to_string(),
        ],
    );
    sealed
}

/// `agent` self-updates in the group; returns the path of the Commit mail it wrote
/// into `dir` (emptied first).
pub fn update(agent: &Agent, group: &str, dir: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    ok(
        &agent.store,
        &[
            "mls",
            "update",
            "--group",
            group,
            "--out-dir",
            &dir.display().to_string(),
        ],
    );
    dir.join("commit.eml")
}

/// Replaces `to` with a copy of the store directory `from` (owner-only, as a store
/// must be).
pub fn copy_store(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
    }
}
