//! Two agents on one MLS group by mail (RFC 9420, `message/mls`): Alice creates the
//! group, Bob sends his KeyPackage mail, Alice's Commit adds him and her Welcome mail
//! lets him join, then a request goes one way and the answer the other. Each MLS key
//! is certified by the agent's S/MIME key (the RFC 9216 sample identities), and each
//! side checks the other's against its own store.
//!
//! ```sh
//! cargo run --example mls_two_agents
//! ```

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::mls::{Mls, Received, StoreAuthenticator};
use mailseal::{Envelope, Kind, MailA2aMessage, OpenPolicy, Operation};

const ALICE: &str = "alice@smime.example";
const BOB: &str = "bob@smime.example";

/// `who`'s key store in `dir`: the CA it trusts and its own S/MIME identity.
fn store_of(
    dir: &std::path::Path,
    who: &str,
) -> Result<DirectoryStore, Box<dyn std::error::Error>> {
    let fixture = |f: &str| {
        std::fs::read(format!(
            "{}/keys-fixtures/rfc9216/{f}",
            env!("CARGO_MANIFEST_DIR")
        ))
    };
    let store = DirectoryStore::open(dir.join(who))?;
    store.import(&fixture("ca.rsa.crt")?, "ca", true)?;
    store.import(&fixture(&format!("{who}.sign.crt"))?, "crt", false)?;
    store.import(&fixture(&format!("{who}.sign.key"))?, "key", false)?;
    Ok(store)
}

fn message(from: &str, to: &str, kind: Kind, id: &str, text: &str) -> MailA2aMessage {
    let mut env = Envelope::new(kind, Operation::MessageSend, id);
    env.set("correlationId", "mls-exchange-1");
    if kind == Kind::Request {
        env.set("idempotencyKey", id);
        env.set(
            "payload",
            &serde_json::json!({"message": {"messageId": id, "role": "ROLE_USER",
                "parts": [{"text": text}]}}),
        );
    } else {
        // The one answer of the exchange: replies are numbered from 1.
        env.set("sequence", &1u64);
        env.set("final", &true);
        env.set(
            "payload",
            &serde_json::json!({"message": {"messageId": id, "role": "ROLE_AGENT",
                "parts": [{"text": text}]}}),
        );
    }
    MailA2aMessage::new(from, &[to], env)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?;
    let (alice_store, bob_store) = (
        store_of(scratch.path(), "alice")?,
        store_of(scratch.path(), "bob")?,
    );
    let (alice_auth, bob_auth) = (
        StoreAuthenticator::new(&alice_store),
        StoreAuthenticator::new(&bob_store),
    );
    let alice = Mls::in_memory()?;
    alice.generate_identity(ALICE, &alice_auth)?;
    let bob = Mls::in_memory()?;
    bob.generate_identity(BOB, &bob_auth)?;
    // Bob joins groups Alice invites him to (and no one else's).
    bob.allow_inviter(ALICE, true)?;

    let group = alice.create_group(ALICE)?;
    let key_package = bob.key_package(BOB)?; // a mail Bob sends Alice
    let added = alice.add(&group, &[key_package], &alice_auth)?;
    bob.receive(&added.welcome, &OpenPolicy::default(), "welcome", &bob_auth)?
        .commit()?;
    println!("group {group}: Bob joined with Alice's Welcome mail");

    let request = message(ALICE, BOB, Kind::Request, "req-1", "status of the run?");
    let sealed = alice.seal(&request, &group, false)?;
    let receipt = bob.receive(&sealed, &OpenPolicy::default(), "req-1", &bob_auth)?;
    let Received::Application(opened) = receipt.commit()? else {
        return Err("Bob got no application message".into());
    };
    println!(
        "Bob opened {} from {}",
        opened.envelope().message_id().unwrap_or_default(),
        opened
            .verdict
            .signer
            .as_ref()
            .map_or("-".into(), |s| s.replay_id())
    );

    let mut answer = message(BOB, ALICE, Kind::Response, "resp-1", "done, all green");
    answer.in_reply_to(&request.headers);
    let sealed = bob.seal(&answer, &group, false)?;
    let receipt = alice.receive(&sealed, &OpenPolicy::default(), "resp-1", &alice_auth)?;
    let Received::Application(opened) = receipt.commit()? else {
        return Err("Alice got no application message".into());
    };
    println!(
        "Alice opened {}: {}",
        opened.envelope().message_id().unwrap_or_default(),
        String::from_utf8_lossy(opened.message.envelope_bytes())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    /// `cargo test` runs the example to its end (it is declared with `test = true`).
    #[test]
    fn runs_to_the_end() {
        super::main().unwrap();
    }
}
