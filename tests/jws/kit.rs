//! Two parties with JWS identities, each in its own store, and the message between them.

use mailseal::jws::JwsAlgorithm;
use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::{Envelope, Kind, MailA2aMessage, Operation};

/// A party: its store and its public JWK (as `key export` writes it).
pub struct Party {
    pub store: DirectoryStore,
    pub jwk: Vec<u8>,
}

/// A store at `dir/name` with a new JWS key for `email` under `alg`.
pub fn party(dir: &std::path::Path, name: &str, email: &str, alg: JwsAlgorithm) -> Party {
    let store = DirectoryStore::open(dir.join(name)).expect("store");
    mailseal::jws::jwk::generate(&store, email, alg).expect("generate");
    let jwk = mailseal::jws::jwk::public_jwks(&store, email).expect("jwks");
    Party {
        store,
        jwk: jwk[0].to_string().into_bytes(),
    }
}

/// Binds `jwk` to `email` in `store`, as `key import --jwk FILE --email ADDR` does.
pub fn import(store: &dyn KeyStore, jwk: &[u8], email: &str) {
    let key = mailseal::jws::Jwk::parse(jwk).expect("jwk");
    mailseal::jws::jwk::bind(store, &key, &[email.to_string()], "jwk").expect("bind");
}

/// Alice and Bob, each with the other's JWK.
pub fn alice_and_bob(dir: &std::path::Path, alg: JwsAlgorithm) -> (Party, Party) {
    let alice = party(dir, "alice", "alice@jws.example", alg);
    let bob = party(dir, "bob", "bob@jws.example", alg);
    import(&bob.store, &alice.jwk, "alice@jws.example");
    import(&alice.store, &bob.jwk, "bob@jws.example");
    (alice, bob)
}

/// A `message/send` request from `from` to `to`, message id `id`.
pub fn request(from: &str, to: &str, id: &str) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, id);
    env.set("payload", &serde_json::json!({"id": "task-7"}));
    MailA2aMessage::new(from, &[to], env)
}

/// Every algorithm of the profile.
pub const ALGORITHMS: [JwsAlgorithm; 5] = [
    JwsAlgorithm::EdDsa,
    JwsAlgorithm::Es256,
    JwsAlgorithm::Es384,
    JwsAlgorithm::Rs256,
    JwsAlgorithm::Ps256,
];

/// The two parts of a detached-jws message: the signed entity (canonical, as signed)
/// and the compact JWS text.
pub fn split(sealed: &[u8]) -> (Vec<u8>, String) {
    let text = String::from_utf8(sealed.to_vec()).expect("7-bit message");
    let boundary = text
        .split("boundary=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("boundary")
        .to_string();
    let delim = format!("\r\n--{boundary}");
    let start = text.find(&format!("--{boundary}\r\n")).expect("first part") + boundary.len() + 4;
    let end = text[start..].find(&delim).expect("second part") + start;
    let entity = text.as_bytes()[start..end].to_vec();
    let rest = &text[end + delim.len()..];
    let body = rest.split("\r\n\r\n").nth(1).expect("signature part body");
    let jws = body.split("\r\n").next().expect("jws line").to_string();
    (entity, jws)
}

/// `sealed` with its JWS replaced by `jws`.
pub fn with_jws(sealed: &[u8], jws: &str) -> Vec<u8> {
    let (_, old) = split(sealed);
    String::from_utf8(sealed.to_vec())
        .expect("text")
        .replace(&old, jws)
        .into_bytes()
}

/// Runs `mailseal ARGS`; fails the test unless it succeeds.
pub fn cli(args: &[&str]) -> std::process::Output {
    let out = super::common::run(args, b"");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// On the command line, in `dir`: composes a `tasks/get` request `id` from `from` to
/// `to` and seals it under jws with the store `store`; the signed message's path.
pub fn cli_signed(dir: &std::path::Path, store: &str, from: &str, to: &str, id: &str) -> String {
    let d = |f: &str| dir.join(f).display().to_string();
    let env = serde_json::json!({"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request",
        "operation":"tasks/get","messageId":id,"correlationId":"c-1","sequence":0,
        "final":false,"payload":{"id":"task-1"}});
    std::fs::write(d("env.json"), env.to_string()).unwrap();
    cli(&[
        "compose",
        "--from",
        from,
        "--to",
        to,
        "--in",
        &d("env.json"),
        "--out",
        &d("plain.eml"),
    ]);
    cli(&[
        "seal",
        "--store",
        store,
        "--profile",
        "jws",
        &d("plain.eml"),
        "--out",
        &d("signed.eml"),
    ]);
    d("signed.eml")
}

/// The `tasks/get` request `id` from `from` to `to`, sealed under jws with the
/// keys of `store`.
pub fn sealed_by(store: &dyn KeyStore, from: &str, to: &str, id: &str) -> Vec<u8> {
    mailseal::Sender::builder(store)
        .build()
        .seal(
            &request(from, to, id),
            &mailseal::SealOptions::new(mailseal::Profile::Jws),
        )
        .unwrap()
}

/// The card `mailseal card` would write for `address` with `published`, as JSON text.
pub fn card_text(address: &str, published: &mailseal::ext::agent_card::Published) -> String {
    let (card, _) =
        mailseal::ext::agent_card::write_card(None, address, &Default::default(), published)
            .unwrap();
    card.to_string()
}
