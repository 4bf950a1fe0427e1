//! Seal a MailA2A request under S/MIME (signed, then encrypted with AES-256-GCM) as
//! Alice, and open it as Bob with the receiver rules: the library's `Sender` and
//! `Receiver`, with the RFC 9216 sample identities from `keys-fixtures/`.
//!
//! ```sh
//! cargo run --example smime_seal_open
//! ```

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Outcome, Profile};
use mailseal::{Receiver, SealOptions, Sender};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixture = |f: &str| {
        std::fs::read(format!(
            "{}/keys-fixtures/rfc9216/{f}",
            env!("CARGO_MANIFEST_DIR")
        ))
    };
    // Each party its own store (here in a scratch directory): its keys, the other's
    // certificates, the CA it trusts.
    let scratch = tempfile::tempdir()?;
    let alice = DirectoryStore::open(scratch.path().join("alice"))?;
    let bob = DirectoryStore::open(scratch.path().join("bob"))?;
    for (store, own, peer) in [(&alice, "alice", "bob"), (&bob, "bob", "alice")] {
        store.import(&fixture("ca.rsa.crt")?, "ca", true)?;
        for use_ in ["sign", "encrypt"] {
            store.import(&fixture(&format!("{own}.{use_}.crt"))?, "own", false)?;
            store.import(&fixture(&format!("{own}.{use_}.key"))?, "own key", false)?;
            store.import(&fixture(&format!("{peer}.{use_}.crt"))?, "peer", false)?;
        }
    }

    // Alice composes a message/send request and seals it to Bob.
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "req-1");
    env.set("correlationId", "exchange-1");
    env.set("idempotencyKey", "effect-1");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": "Summarize the quarter."}]}}),
    );
    let plain = MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env);
    // The sender's store records the request in its replay state (its `mailseal.db`),
    // so that the answer is accepted when it comes back.
    let sealed = Sender::builder(&alice)
        .build()
        .seal(&plain, &SealOptions::new(Profile::Smime))?;
    println!("sealed: {} bytes of S/MIME", sealed.len());

    // Bob receives: verified, decrypted, checked against the receiver rules, recorded
    // only on commit (after the caller stored what it delivers).
    let mut receiver = Receiver::builder(&bob).build();
    let Outcome::Deliver { delivery, .. } = receiver.receive(&sealed)?.commit()? else {
        return Err("not delivered".into());
    };
    let verdict = &delivery.opened.verdict;
    println!(
        "opened: {} from {}, protection {}",
        delivery.candidate.message_id,
        verdict
            .signer
            .as_ref()
            .map_or("-".into(), |s| s.replay_id()),
        verdict.protection
    );
    println!(
        "envelope: {}",
        String::from_utf8_lossy(delivery.opened.message.envelope_bytes())
    );
    // The same mail again (an SMTP redelivery) is a duplicate, never delivered twice.
    assert!(matches!(
        receiver.receive(&sealed)?.commit()?,
        Outcome::Duplicate { .. }
    ));
    println!("redelivery: duplicate");
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
