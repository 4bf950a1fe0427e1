//! `mailseal demo`: the whole tour on a temporary store. It grows as profiles land.

use super::exit::ExitCode;
use super::words::list;
use super::{CliResult, Failure};
use crate::dispatch::Dispatcher;
use crate::envelope::{next_event, Envelope, Kind, Operation};
use crate::keystore::{KeyStore, SqliteStore};
use crate::message::{Attachment, Limits, MailA2aMessage};
use crate::profile::Profile;
use crate::replay::SqliteReplayStore;
use crate::seal::{OpenPolicy, Opener, SealOptions, Sealer};
use crate::smime::Smime;

const ALICE_CERT: &[u8] = include_bytes!("../../keys-fixtures/rfc9216/alice.sign.crt");
const ALICE_KEY: &[u8] = include_bytes!("../../keys-fixtures/rfc9216/alice.sign.key");
const BOB_CERT: &[u8] = include_bytes!("../../keys-fixtures/rfc9216/bob.sign.crt");
const BOB_KEY: &[u8] = include_bytes!("../../keys-fixtures/rfc9216/bob.sign.key");
const CA_RSA: &[u8] = include_bytes!("../../keys-fixtures/rfc9216/ca.rsa.crt");

fn fail(step: &str, e: impl std::fmt::Display) -> Failure {
    Failure::new(ExitCode::Other, format!("demo: {step}: {e}"))
}

/// An expected refusal, in words: the exit code the command line would give, and why
/// (without the error's own leading "refused: ").
fn refused<E: crate::error::Classify + std::fmt::Display>(e: &E) -> String {
    let text = e.to_string();
    let why = text.strip_prefix("refused: ").unwrap_or(&text);
    format!(
        "refused as expected (exit {}): {why}",
        ExitCode::of(e).as_u8()
    )
}

fn step(n: u32, text: &str) {
    println!("\n[{n}] {text}");
}

pub(super) fn run() -> CliResult {
    let dir = tempfile::tempdir().map_err(|e| fail("temporary store", e))?;
    println!(
        "mailseal demo: MailA2A messages end to end, one key store per party under {}",
        dir.path().display()
    );

    step(
        1,
        "Alice's key store (SQLite, the embedded default): her RFC 9216 sample key, Bob's certificate, their CA",
    );
    let store = SqliteStore::open(&dir.path().join("alice/mailseal.db"), None)
        .map_err(|e| fail("store", e))?;
    for (name, bytes, trusted) in [
        ("ca.rsa.crt", CA_RSA, true),
        ("alice.sign.crt", ALICE_CERT, false),
        ("alice.sign.key", ALICE_KEY, false),
        ("bob.sign.crt", BOB_CERT, false),
    ] {
        store
            .import(bytes, name, trusted)
            .map_err(|e| fail(name, e))?;
    }
    for e in store.list().map_err(|e| fail("list", e))? {
        println!(
            "    {} {:<12} {:<7} secret={:<5} {}",
            e.fingerprint,
            e.kind.to_string(),
            e.algorithm.to_string(),
            e.has_private_key,
            e.emails.join(",")
        );
    }

    step(2, "compose a message/send request with a cid: attachment");
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "demo-request-1");
    env.set("correlationId", "demo-exchange-1");
    env.set("idempotencyKey", "demo-effect-1");
    env.set("createdAt", "2026-08-30T07:00:00Z");
    env.set("expiresAt", "2099-08-31T07:00:00Z");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "a2a-msg-1", "role": "ROLE_USER", "parts": [
            {"text": "Summarize the attached report."},
            {"url": "cid:report-1@example.net", "mediaType": "text/csv", "filename": "report.csv"}
        ]}}),
    );
    let mut request = MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
    request.text = Some("Machine-readable A2A request attached.".into());
    request.attachments.push(Attachment {
        content_id: "report-1@example.net".into(),
        content_type: "text/csv".into(),
        filename: Some("report.csv".into()),
        data: b"quarter,revenue\nQ1,100\nQ2,120\n".to_vec(),
    });
    let request_bytes = request.to_rfc5322().map_err(|e| fail("compose", e))?;
    let (reparsed, violations) =
        crate::message::validate_message(&request_bytes, &Limits::default())
            .map_err(|e| fail("parse", e))?;
    println!(
        "    {} bytes, {} violations, envelope sha256 {}",
        request_bytes.len(),
        violations.len(),
        &crate::keystore::hex(&reparsed.content_digest())[..16]
    );

    step(
        3,
        "open it unprotected: an effectful request needs at least a signature",
    );
    match Dispatcher::new().open(&request_bytes, &OpenPolicy::default()) {
        Err(e) => println!("    {}", refused(&e)),
        Ok(_) => return Err(fail("open", "an unsigned effectful request was accepted")),
    }

    step(
        4,
        "S/MIME: Alice signs the request; it verifies and opens, a flipped byte does not",
    );
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let smime = Smime::new(&store);
    let signed = smime.seal(&reparsed, &opts).map_err(|e| fail("seal", e))?;
    // This store is Alice's: she reads her own message to Bob as her own copy only.
    let own_copy = OpenPolicy {
        own_copy: true,
        ..OpenPolicy::default()
    };
    match Dispatcher::with_store(&store).open(&signed, &OpenPolicy::default()) {
        Err(e) => println!("    her own message, mailed back to her: {}", refused(&e)),
        Ok(_) => return Err(fail("open", "our own message to Bob was delivered to us")),
    }
    let opened = Dispatcher::with_store(&store)
        .open(&signed, &own_copy)
        .map_err(|e| fail("open signed", e))?;
    println!(
        "    {} bytes signed; opened: profile {}, protection {}, algorithm {}, signer {}",
        signed.len(),
        opened.verdict.profile.map_or("none", |p| p.token()),
        opened.verdict.protection,
        opened.verdict.algorithm.as_deref().unwrap_or("-"),
        opened
            .verdict
            .signer
            .as_ref()
            .map(|s| s.replay_id())
            .unwrap_or_default()
    );
    let mut tampered = signed.clone();
    let at = tampered.len() / 2;
    tampered[at] ^= 0x01;
    match Dispatcher::with_store(&store).open(&tampered, &own_copy) {
        Err(e) => println!("    one flipped byte: {}", refused(&e)),
        Ok(_) => return Err(fail("open", "a tampered message was accepted")),
    }

    println!("\n[4b] OpenPGP: new v4 keys for two agents; sign-then-encrypt, open, tamper");
    let pgp_alice = SqliteStore::open(&dir.path().join("pgp-alice/mailseal.db"), None)
        .map_err(|e| fail("store", e))?;
    let pgp_bob = SqliteStore::open(&dir.path().join("pgp-bob/mailseal.db"), None)
        .map_err(|e| fail("store", e))?;
    for (store, email) in [
        (&pgp_alice, "alice@smime.example"),
        (&pgp_bob, "bob@smime.example"),
    ] {
        let tsk = crate::openpgp::generate(email, None, crate::openpgp::KeyProfile::Rfc4880)
            .map_err(|e| fail("generate", e))?;
        let cert =
            crate::keystore::openpgp::armored_certificate(&tsk).map_err(|e| fail("generate", e))?;
        store
            .import(&tsk, email, false)
            .map_err(|e| fail("import", e))?;
        // Each peer gets the other's certificate.
        let other = if std::ptr::eq(store, &pgp_alice) {
            &pgp_bob
        } else {
            &pgp_alice
        };
        other
            .import(&cert, email, false)
            .map_err(|e| fail("import", e))?;
    }
    let sealed = crate::openpgp::OpenPgp::new(&pgp_alice)
        .seal(&reparsed, &SealOptions::new(Profile::OpenPgp))
        .map_err(|e| fail("seal openpgp", e))?;
    let opened = Dispatcher::with_store(&pgp_bob)
        .open(&sealed, &OpenPolicy::default())
        .map_err(|e| fail("open openpgp", e))?;
    println!(
        "    {} bytes (multipart/encrypted, SEIPDv1, intended recipients); opened: protection {}, algorithm {}",
        sealed.len(),
        opened.verdict.protection,
        opened.verdict.algorithm.as_deref().unwrap_or("-")
    );
    let mut tampered = sealed.clone();
    let at = tampered.len() - 200;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    match Dispatcher::with_store(&pgp_bob).open(&tampered, &OpenPolicy::default()) {
        Err(e) => println!("    one changed armor character: {}", refused(&e)),
        Ok(_) => return Err(fail("open", "a tampered message was accepted")),
    }

    demo_mls()?;
    demo_agent_card(dir.path(), &pgp_bob, &reparsed)?;
    demo_jws(dir.path(), &reparsed)?;
    demo_offline(dir.path(), &reparsed)?;

    step(
        5,
        "an unsigned read-only tasks/get: refused by default, opened once the policy lowers the minimum for that peer",
    );
    let mut get = Envelope::new(Kind::Request, Operation::TasksGet, "demo-get-1");
    get.set("correlationId", "demo-exchange-2");
    get.set("payload", &serde_json::json!({"id": "task-42"}));
    let get_bytes = MailA2aMessage::new(
        "client-agent@example.net",
        &["research-bot@example.com"],
        get,
    )
    .to_rfc5322()
    .map_err(|e| fail("compose", e))?;
    match Dispatcher::new().open(&get_bytes, &OpenPolicy::default()) {
        Err(e) => println!("    {}", refused(&e)),
        Ok(_) => return Err(fail("open", "an unsigned tasks/get was accepted")),
    }
    let mut lowered = OpenPolicy::default();
    lowered.minimum_per_peer.insert(
        "client-agent@example.net".into(),
        crate::profile::Protection::None,
    );
    let opened_get = Dispatcher::new()
        .open(&get_bytes, &lowered)
        .map_err(|e| fail("open", e))?;
    println!(
        "    opened: protection {}, envelope {}",
        opened_get.verdict.protection,
        String::from_utf8_lossy(opened_get.message.envelope_bytes())
    );

    step(
        6,
        "the agent answers with a stream of events in the request's thread",
    );
    let states = [
        "TASK_STATE_WORKING",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ];
    let mut events = Vec::new();
    for (i, state) in states.iter().enumerate() {
        let seq = i as u64 + 1;
        let mut e = Envelope::new(
            Kind::Event,
            Operation::MessageSend,
            &format!("demo-event-{seq}"),
        );
        e.set("correlationId", "demo-exchange-1");
        e.set("sequence", &seq);
        e.set("final", &(seq == 3));
        e.set(
            "payload",
            &serde_json::json!({"statusUpdate": {"taskId": "task-42", "contextId": "ctx-1", "status": {"state": state}}}),
        );
        let mut m = MailA2aMessage::new("bob@smime.example", &["alice@smime.example"], e);
        m.in_reply_to(&request.headers);
        let bytes = m.to_rfc5322().map_err(|e| fail("compose event", e))?;
        let (parsed, v) = crate::message::validate_message(&bytes, &Limits::default())
            .map_err(|e| fail("parse event", e))?;
        println!(
            "    event {seq}: {state}, final={}, In-Reply-To {}, {} violations",
            seq == 3,
            parsed.headers.in_reply_to.as_deref().unwrap_or("-"),
            v.len()
        );
        events.push(parsed.envelope().clone());
    }
    println!(
        "    ordering: 1->2 next={}, 1->3 next={}, 3 is final so nothing follows: {}",
        next_event(&events[0], &events[1]),
        next_event(&events[0], &events[2]),
        !next_event(&events[2], &events[1])
    );

    step(
        7,
        "an outer hint that lies about the protected envelope is refused",
    );
    let forged = String::from_utf8_lossy(&request_bytes).replace(
        "Mail-A2A-Operation: message/send",
        "Mail-A2A-Operation: tasks/get",
    );
    let (ok, line) = super::validate::validate_line("forged.eml", forged.as_bytes());
    if ok {
        return Err(fail("validate", "a lying outer hint was accepted"));
    }
    println!(
        "    refused as expected: {}",
        line.strip_prefix("FAIL ").unwrap_or(&line)
    );

    step(
        8,
        "replay state: redelivery is a duplicate, same messageId with other bytes a conflict",
    );
    // Alice's own store receives (her own copies): it knows her CA, her certificate
    // and Bob's.
    let state = dir.path().join("alice/mailseal.db");
    let mut receiver = crate::Receiver::builder(&store)
        .replay(SqliteReplayStore::open(&state).map_err(|e| fail("replay state", e))?)
        .policy(own_copy.clone())
        .build();
    println!("    (receiver rules over SQLite in {})", state.display());
    let word = |o: Result<crate::Outcome, crate::ReceiveError>| match o {
        Ok(crate::Outcome::Duplicate { first_accepted, .. }) => format!(
            "duplicate (first accepted {})",
            crate::replay::rfc3339(first_accepted)
        ),
        Ok(crate::Outcome::Held(crate::receiver::HeldReason::Stream { missing, .. })) => {
            format!("held until event {} arrives", list(&missing))
        }
        Ok(crate::Outcome::Deliver { released, .. }) if released > 0 => {
            format!("delivered, and {released} held event released")
        }
        Ok(crate::Outcome::Deliver { .. }) => "delivered".to_string(),
        Ok(o) => o.word().to_string(),
        Err(e) => refused(&e),
    };
    let mut receive = |raw: &[u8]| word(receiver.receive(raw).and_then(|i| i.commit()));
    println!("    first delivery: {}", receive(&signed));
    let redelivery = receive(&signed);
    println!("    SMTP redelivery: {redelivery}");
    if !redelivery.starts_with("duplicate") {
        return Err(fail("replay", "a redelivery was not recognised"));
    }
    // The same messageId, other content, validly signed: a security error.
    let mut altered = reparsed.clone();
    let mut env = altered.envelope().clone();
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": "transfer 1000"}]}}),
    );
    altered.set_envelope(env);
    let resigned = smime.seal(&altered, &opts).map_err(|e| fail("seal", e))?;
    println!(
        "    altered content, same messageId: {}",
        receive(&resigned)
    );
    println!(
        "    the stream of step 6 arrives out of order: 1, 3, 2 (Bob signs each, in his own store)"
    );
    let bob = SqliteStore::open(&dir.path().join("bob/mailseal.db"), None)
        .map_err(|e| fail("store", e))?;
    for (name, bytes) in [("bob.sign.crt", BOB_CERT), ("bob.sign.key", BOB_KEY)] {
        bob.import(bytes, name, false).map_err(|e| fail(name, e))?;
    }
    let bob_smime = Smime::new(&bob);
    // Only answers to a request Alice sent are delivered: the Sender records each
    // request it seals in her state; here the request of step 6 is recorded so.
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    if let Some(sent) = crate::replay::SentRequest::of(
        &request,
        None,
        now,
        &crate::replay::ReceiverPolicy::default(),
    ) {
        receiver
            .replay()
            .record_request(&sent)
            .map_err(|e| fail("request record", e))?;
    }
    let mut receive = |raw: &[u8]| word(receiver.receive(raw).and_then(|i| i.commit()));
    for i in [0, 2, 1] {
        let mut m = MailA2aMessage::new(
            "bob@smime.example",
            &["alice@smime.example"],
            events[i].clone(),
        );
        m.in_reply_to(&request.headers);
        let sealed = bob_smime
            .seal(&m, &opts)
            .map_err(|e| fail("seal event", e))?;
        println!("    event {}: {}", i + 1, receive(&sealed));
    }
    let released = receiver
        .take_stream_events("demo-exchange-1")
        .map_err(|e| fail("replay", e))?;
    println!(
        "    released after the gap closed: event {}",
        list(&released.iter().map(|e| e.sequence).collect::<Vec<_>>())
    );
    if released.len() != 1 {
        return Err(fail("replay", "the held event was not released"));
    }

    step(9, "protection profiles in this build");
    println!(
        "    smime: signed, and signed-then-encrypted (AES-256-GCM; RSA-OAEP, ECDH P-256/P-384 and X25519 recipients);"
    );
    println!(
        "           opens ChaCha20-Poly1305, RFC 9709 derived keys, streamed BER, pre-shared-key recipients;"
    );
    println!(
        "           legacy CBC only with --allow-legacy-cbc; `key generate --kind smime`, PKCS#12 import"
    );
    println!(
        "    openpgp: RFC 3156 signed, and signed-then-encrypted (SEIPDv2 when every recipient"
    );
    println!(
        "           advertises it, else SEIPDv1), v4 and v6 keys, `key generate --kind openpgp`, `mailseal sop`"
    );
    println!(
        "    mls: RFC 9420 groups by mail (KeyPackage, Commit, Welcome mails), application data in message/mls;"
    );
    println!(
        "           future-epoch messages held until their commit, past epochs kept (3), duplicates, forks refused"
    );
    println!(
        "    jws: detached-jws, signed only (EdDSA, ES256, ES384, RS256, PS256); JWK, did:key, did:jwk, did:web;"
    );
    println!("           Agent Cards fetched over HTTPS (`card fetch`)");
    println!("\ndemo finished: every step behaved as the MailA2A binding requires");
    Ok(())
}

/// Step 4e: detached-jws. Alice and Bob each make an Ed25519 JWK and import the other's
/// for its address; Alice signs, Bob opens; a key Bob holds for nobody is refused.
fn demo_jws(dir: &std::path::Path, request: &MailA2aMessage) -> CliResult {
    println!("\n[4e] detached-jws: Ed25519 JWKs exchanged; Alice signs, Bob opens; a stranger's key is refused");
    let store = |name: &str| {
        crate::keystore::DirectoryStore::open(dir.join(name)).map_err(|e| fail("store", e))
    };
    let (alice, bob, stranger) = (
        store("jws-alice")?,
        store("jws-bob")?,
        store("jws-stranger")?,
    );
    for (s, email) in [
        (&alice, "alice@smime.example"),
        (&bob, "bob@smime.example"),
        (&stranger, "alice@smime.example"),
    ] {
        crate::jws::jwk::generate(s, email, crate::jws::JwsAlgorithm::EdDsa)
            .map_err(|e| fail("key generate --kind jws", e))?;
    }
    let alice_jwk = crate::jws::jwk::public_jwks(&alice, "alice@smime.example")
        .map_err(|e| fail("key export", e))?;
    let key = crate::jws::Jwk::parse(alice_jwk[0].to_string().as_bytes())
        .map_err(|e| fail("key import --jwk", e))?;
    crate::jws::jwk::bind(&bob, &key, &["alice@smime.example".into()], "jwk")
        .map_err(|e| fail("key import --jwk", e))?;
    let opts = SealOptions::new(Profile::Jws);
    let signed = crate::jws::Jws::new(&alice)
        .seal(request, &opts)
        .map_err(|e| fail("seal jws", e))?;
    let opened = Dispatcher::with_store(&bob)
        .open(&signed, &OpenPolicy::default())
        .map_err(|e| fail("open jws", e))?;
    println!(
        "    {} bytes (multipart/signed, application/jose, kid {}); opened: protection {}, algorithm {}",
        signed.len(),
        key.thumbprint(),
        opened.verdict.protection,
        opened.verdict.algorithm.as_deref().unwrap_or("-")
    );
    let forged = crate::jws::Jws::new(&stranger)
        .seal(request, &opts)
        .map_err(|e| fail("seal jws", e))?;
    match Dispatcher::with_store(&bob).open(&forged, &OpenPolicy::default()) {
        Err(e) => println!("    signed as Alice by another key: {}", refused(&e)),
        Ok(_) => {
            return Err(fail(
                "open",
                "a message signed by an unknown key was accepted",
            ))
        }
    }
    Ok(())
}

/// Step 4f: offline signing. A connected host holding only Alice's public JWK writes a
/// signing request; the offline host (Alice's store from 4e) checks and signs it; the
/// connected host assembles the message, which Bob opens. A request changed on the
/// way (the signed entity's To) is refused by the offline host.
fn demo_offline(dir: &std::path::Path, request: &MailA2aMessage) -> CliResult {
    use crate::offline::{self, SigningRequest, SigningResponse};
    println!("\n[4f] offline signing: request on a connected host, signature on an offline one, assembled, opened");
    let store = |name: &str| {
        crate::keystore::DirectoryStore::open(dir.join(name)).map_err(|e| fail("store", e))
    };
    let (offline_host, connected, bob) = (
        store("jws-alice")?,
        store("jws-connected")?,
        store("jws-bob")?,
    );
    let jwk = crate::jws::jwk::public_jwks(&offline_host, "alice@smime.example")
        .map_err(|e| fail("key export", e))?;
    let jwk = jwk
        .first()
        .ok_or_else(|| fail("key export", "no JWK for alice@smime.example"))?;
    let key = crate::jws::Jwk::parse(jwk.to_string().as_bytes())
        .map_err(|e| fail("key import --jwk", e))?;
    crate::jws::jwk::bind(&connected, &key, &["alice@smime.example".into()], "jwk")
        .map_err(|e| fail("key import --jwk", e))?;
    let mut opts = SealOptions::new(Profile::Jws);
    opts.sign_only = true;
    let text = offline::prepare(&connected, request, &opts)
        .map_err(|e| fail("sign-request", e))?
        .to_text();
    let request = SigningRequest::parse(text.as_bytes()).map_err(|e| fail("sign", e))?;
    let review = offline::review(&offline_host, request.clone()).map_err(|e| fail("sign", e))?;
    let response = review
        .sign(time::OffsetDateTime::now_utc())
        .map_err(|e| fail("sign", e))?;
    let response =
        SigningResponse::parse(response.to_text().as_bytes()).map_err(|e| fail("assemble", e))?;
    let assembled =
        offline::assemble(&connected, &request, &response).map_err(|e| fail("assemble", e))?;
    let opened = Dispatcher::with_store(&bob)
        .open(&assembled.message, &OpenPolicy::default())
        .map_err(|e| fail("open", e))?;
    println!(
        "    request {} ({} bytes of text) signed offline; assembled {} bytes; Bob opened it: protection {}",
        offline::short_fingerprint(review.fingerprint()),
        text.len(),
        assembled.message.len(),
        opened.verdict.protection
    );
    let mut changed = request.clone();
    changed.entity = String::from_utf8_lossy(&changed.entity)
        .replacen("bob@smime.example", "eve@smime.example", 1)
        .into_bytes();
    match offline::review(&offline_host, changed) {
        Err(e) => println!("    the same request with another To: {}", refused(&e)),
        Ok(_) => return Err(fail("sign", "a changed request was accepted for signing")),
    }
    Ok(())
}

/// Step 4c: three agents form an MLS group by mail and talk in it, out of order.
/// Bob publishes his OpenPGP certificate and his minimum protection in an A2A Agent
/// Card; Dana, who has nothing of his but that card, seals to him.
fn demo_agent_card(
    dir: &std::path::Path,
    pgp_bob: &SqliteStore,
    request: &MailA2aMessage,
) -> CliResult {
    use crate::ext::agent_card::{self, CardFields, Published};
    use crate::ext::peers::PeerPolicies;
    println!("\n[4d] Agent Card: Bob publishes keys and minimum protection; Dana seals with only his card");
    let (bob, dana) = ("bob@smime.example", "dana@smime.example");
    let mut published = Published::from_store(pgp_bob, bob).map_err(|e| fail("card", e))?;
    published.minimum = crate::profile::Protection::SignedEncrypted;
    let (card, _) = agent_card::write_card(None, bob, &CardFields::default(), &published)
        .map_err(|e| fail("card", e))?;
    let card_bytes = agent_card::to_pretty_json(&card);
    let dana_store = SqliteStore::open(&dir.join("card-dana/mailseal.db"), None)
        .map_err(|e| fail("store", e))?;
    let tsk = crate::openpgp::generate(dana, None, crate::openpgp::KeyProfile::Rfc4880)
        .map_err(|e| fail("generate", e))?;
    dana_store
        .import(&tsk, dana, false)
        .map_err(|e| fail("import", e))?;
    // Bob knows Dana's certificate (from her card, the same way).
    pgp_bob
        .import(
            &crate::keystore::openpgp::armored_certificate(&tsk).map_err(|e| fail("card", e))?,
            dana,
            false,
        )
        .map_err(|e| fail("import", e))?;
    let now = time::OffsetDateTime::now_utc();
    let peer = agent_card::read_card(&card_bytes, &dana_store, now).map_err(|e| fail("card", e))?;
    agent_card::import_keys(&peer, &dana_store).map_err(|e| fail("card", e))?;
    let mut policies = PeerPolicies::default();
    policies.record(&peer, now);
    println!(
        "    card: {} bytes, a valid A2A v1.0 AgentCard for {} (profiles {}, minimum {}); Dana imported it",
        card_bytes.len(),
        peer.address,
        peer.profiles.join(","),
        peer.minimum
    );
    let mut to_bob = request.clone();
    to_bob.headers.from = Some(crate::message::Mailbox::new(dana));
    to_bob.headers.to = vec![crate::message::Mailbox::new(bob)];
    match policies.check_seal(&[bob.to_string()], Profile::OpenPgp, true) {
        Err(e) => println!("    Dana signs without encrypting: {}", refused(&e)),
        Ok(()) => return Err(fail("card", "a seal below the card's minimum was allowed")),
    }
    let sealed = crate::openpgp::OpenPgp::new(&dana_store)
        .seal(&to_bob, &SealOptions::new(Profile::OpenPgp))
        .map_err(|e| fail("seal to the card's key", e))?;
    let mut policy = OpenPolicy::default();
    policies.apply(&mut policy);
    let opened = Dispatcher::with_store(pgp_bob)
        .open(&sealed, &policy)
        .map_err(|e| fail("open", e))?;
    println!(
        "    sealed with the card's certificate; Bob opened it: protection {}, signer {}",
        opened.verdict.protection,
        opened.message.sender().unwrap_or_default()
    );
    let forged = String::from_utf8_lossy(&card_bytes)
        .replace("mailto:bob@smime.example", "mailto:mallory@smime.example");
    match agent_card::read_card(forged.as_bytes(), &dana_store, now) {
        Err(e) => println!("    the card re-addressed to mallory: {}", refused(&e)),
        Ok(_) => {
            return Err(fail(
                "card",
                "a card with another agent's keys was accepted",
            ))
        }
    }
    Ok(())
}

/// Key stores for MLS agents: each holds its own S/MIME identity, issued by one demo
/// CA that each trusts as an anchor, which is what certifies their MLS keys.
fn mls_stores(
    root: &std::path::Path,
    emails: &[&str],
) -> Result<Vec<crate::keystore::DirectoryStore>, Failure> {
    use crate::smime::{IdentityRequest, KeyKind};
    let request = |email: Option<&str>, ca: bool| IdentityRequest {
        email: email.map(str::to_string),
        common_name: Some(email.unwrap_or("mailseal demo MLS CA").to_string()),
        kind: KeyKind::P256,
        days: 30,
        ca,
    };
    let ca = crate::smime::generate(&request(None, true), None).map_err(|e| fail("ca", e))?;
    let ca_pem = crate::keystore::identity_pem(&ca[0].certificate, &ca[0].private_key)
        .map_err(|e| fail("ca", e))?;
    let ca_store =
        crate::keystore::DirectoryStore::open(root.join("ca")).map_err(|e| fail("ca", e))?;
    let entry = ca_store
        .import(ca_pem.as_bytes(), "demo-ca", true)
        .map_err(|e| fail("ca", e))?;
    let fpr = entry
        .first()
        .map(|e| e.fingerprint.clone())
        .unwrap_or_default();
    let (cert, key) = crate::keystore::issuer(&ca_store, Some(&fpr), None, None)
        .map_err(|e| fail("ca", e))?
        .ok_or_else(|| fail("ca", "the demo CA is not in its store"))?;
    let issuer = crate::smime::Issuer {
        certificate: &cert,
        key: &key,
    };
    let anchor =
        der::EncodePem::to_pem(&cert, der::pem::LineEnding::LF).map_err(|e| fail("ca", e))?;
    emails
        .iter()
        .map(|email| {
            let store = crate::keystore::DirectoryStore::open(root.join(email))
                .map_err(|e| fail("store", e))?;
            store
                .import(anchor.as_bytes(), "demo-ca", true)
                .map_err(|e| fail("anchor", e))?;
            for id in crate::smime::generate(&request(Some(email), false), Some(&issuer))
                .map_err(|e| fail("identity", e))?
            {
                let pem = crate::keystore::identity_pem(&id.certificate, &id.private_key)
                    .map_err(|e| fail("identity", e))?;
                store
                    .import(pem.as_bytes(), "demo", false)
                    .map_err(|e| fail("identity", e))?;
            }
            Ok(store)
        })
        .collect()
}

fn demo_mls() -> CliResult {
    use crate::mls::{Mls, Received, StoreAuthenticator};
    println!("\n[4c] MLS: three agents form a group by mail; one message overtakes its commit");
    let emails = ["ann@mls.example", "bea@mls.example", "cal@mls.example"];
    let dir = tempfile::tempdir().map_err(|e| fail("temporary store", e))?;
    let stores = mls_stores(dir.path(), &emails)?;
    let auths: Vec<StoreAuthenticator<'_>> =
        stores.iter().map(|s| StoreAuthenticator::new(s)).collect();
    let members: Vec<(Mls, &str)> = emails
        .into_iter()
        .zip(&auths)
        .map(|(e, auth)| {
            let m = Mls::in_memory().map_err(|x| fail("mls", x))?;
            m.generate_identity(e, auth).map_err(|x| fail("mls", x))?;
            m.allow_inviter("ann@mls.example", true)
                .map_err(|x| fail("mls", x))?;
            Ok((m, e))
        })
        .collect::<Result<_, Failure>>()?;
    let (ann, bea, cal) = (&members[0].0, &members[1].0, &members[2].0);
    // Who receives: 1 is bea, 2 is cal, each checking with its own store.
    let receive = |i: usize, raw: &[u8]| {
        members[i]
            .0
            .receive(raw, &OpenPolicy::default(), "demo", &auths[i])
            .and_then(|r| r.commit())
            .map_err(|e| fail("mls receive", e))
    };
    println!("    each agent's MLS key is certified by its S/MIME key (one demo CA); every leaf is checked");
    let group = ann.create_group(members[0].1).map_err(|e| fail("mls", e))?;
    let kps = [
        bea.key_package(members[1].1).map_err(|e| fail("mls", e))?,
        cal.key_package(members[2].1).map_err(|e| fail("mls", e))?,
    ];
    let added = ann
        .add(&group, &kps, &auths[0])
        .map_err(|e| fail("mls add", e))?;
    for i in [1, 2] {
        receive(i, &added.welcome)?;
    }
    println!(
        "    group {group}: KeyPackage mails {} B, Welcome mail {} B; bea and cal joined",
        kps[0].len(),
        added.welcome.len()
    );
    let message = |id: &str| {
        let mut env = Envelope::new(Kind::Request, Operation::MessageSend, id);
        env.set("correlationId", "demo-mls");
        env.set("idempotencyKey", id);
        env.set(
            "payload",
            &serde_json::json!({"message": {"messageId": id, "role": "ROLE_USER",
                "parts": [{"text": "status of the quarterly run?"}]}}),
        );
        MailA2aMessage::new(members[0].1, &[members[1].1, members[2].1], env)
    };
    let first = ann
        .seal(&message("demo-mls-1"), &group, false)
        .map_err(|e| fail("mls seal", e))?;
    let opened = receive(1, &first)?;
    if let Received::Application(o) = &opened {
        let c = o.envelope().group();
        println!(
            "    bea opened demo-mls-1 from {}: epoch {}, generation {}",
            o.verdict
                .signer
                .as_ref()
                .map_or("-".into(), |s| s.replay_id()),
            c.as_ref().map_or("-".into(), |c| c.epoch.to_string()),
            c.as_ref().map_or("-".into(), |c| c.generation.to_string())
        );
    }
    println!("    the same mail again: {}", short(&receive(1, &first)?));
    let commit = ann.update(&group).map_err(|e| fail("mls update", e))?;
    let later = ann
        .seal(&message("demo-mls-2"), &group, false)
        .map_err(|e| fail("mls seal", e))?;
    println!(
        "    cal gets the epoch-2 message first: {}",
        short(&receive(2, &later)?)
    );
    println!(
        "    then ann's self-update commit: {}",
        short(&receive(2, &commit)?)
    );
    let held = cal
        .next_ready(Some(&group))
        .map_err(|e| fail("mls", e))?
        .ok_or_else(|| fail("mls", "the held message was not released"))?;
    let released = receive(2, &held.raw)?;
    println!("    released: {}", short(&released));
    receive(1, &commit)?;
    let forked = ann.update(&group).map_err(|e| fail("mls update", e))?;
    let rival = bea.update(&group).map_err(|e| fail("mls update", e))?;
    receive(2, &forked)?;
    match cal.receive(&rival, &OpenPolicy::default(), "demo", &auths[2]) {
        Err(e) => println!(
            "    bea's commit racing ann's for epoch 2 reaches cal second: {}",
            refused(&e)
        ),
        Ok(_) => return Err(fail("mls", "a fork was accepted")),
    }
    let mut tampered = ann
        .seal(&message("demo-mls-3"), &group, false)
        .map_err(|e| fail("mls seal", e))?;
    let at = tampered.len() - 10;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    match cal.receive(&tampered, &OpenPolicy::default(), "demo", &auths[2]) {
        Err(e) => println!(
            "    one changed character in an application message: {}",
            refused(&e)
        ),
        Ok(_) => return Err(fail("mls", "a tampered message was accepted")),
    }
    // Mallory, with an S/MIME identity for ann's address from a CA of her own, makes
    // a group "as ann" and adds cal with one of cal's KeyPackages (she pins cal's
    // key): cal's store does not trust her key for ann, so the Welcome is refused.
    let forged = mls_stores(&dir.path().join("mallory"), &[members[0].1])?;
    let mal_auth = StoreAuthenticator::new(&forged[0]);
    let mal = Mls::in_memory().map_err(|e| fail("mls", e))?;
    mal.generate_identity(members[0].1, &mal_auth)
        .map_err(|e| fail("mls", e))?;
    let cal_key = cal
        .identities()
        .map_err(|e| fail("mls", e))?
        .into_iter()
        .map(|(e, k)| format!("{e} {k}"))
        .collect::<Vec<_>>()
        .join("\n");
    let pins = crate::mls::PinnedKeys::parse(&cal_key).map_err(|e| fail("mls", e))?;
    let fake = mal.create_group(members[0].1).map_err(|e| fail("mls", e))?;
    let invite = mal
        .add(
            &fake,
            &[cal.key_package(members[2].1).map_err(|e| fail("mls", e))?],
            &pins,
        )
        .map_err(|e| fail("mls add", e))?;
    match cal.receive(&invite.welcome, &OpenPolicy::default(), "demo", &auths[2]) {
        Err(e) => println!(
            "    Mallory's group \"as ann\" (her own CA) invites cal: {}",
            refused(&e)
        ),
        Ok(_) => return Err(fail("mls", "a Welcome from a forged leaf was accepted")),
    }
    Ok(())
}

/// A one-line summary of what an MLS mail came to.
fn short(r: &crate::mls::Received) -> String {
    use crate::mls::{Handshake, Received};
    match r {
        Received::Application(o) => format!(
            "delivered {}",
            o.envelope().message_id().unwrap_or_default()
        ),
        Received::Handshake(Handshake::Committed { epoch, ready, .. }) => {
            format!("commit applied, epoch {epoch}, {ready} held message(s) ready")
        }
        Received::Held { epoch, current, .. } => {
            format!("held (for epoch {epoch}, we are at {current})")
        }
        Received::Duplicate { .. } => "duplicate".into(),
        Received::Handshake(Handshake::Joined { epoch, .. }) => {
            format!("joined the group at epoch {epoch}")
        }
        Received::Handshake(_) => "handshake applied".into(),
    }
}
