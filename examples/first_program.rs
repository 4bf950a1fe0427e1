//! A first program: two agents, each with an S/MIME identity made in one call; Alice
//! asks Bob, a second receiver over Bob's store refuses the replay, and Bob's reply is
//! delivered to Alice. Every store keeps its replay state on disk (its `mailseal.db`).
//!
//! ```sh
//! cargo run --example first_program
//! ```

use mailseal::keystore::DirectoryStore;
use mailseal::{Envelope, Identities, IdentityKind::Smime, ImportAs, Kind, MailA2aMessage};
use mailseal::{Operation, Outcome, Profile, Receiver, Report, SealOptions, Sender};
use serde_json::json;

fn main() -> Result<(), Report> {
    let dir = tempfile::tempdir()?;
    let (a, b) = ("alice@example.org", "bob@example.org");
    let open = |name: &str| DirectoryStore::open(dir.path().join(name));
    let (alice, bob) = (open("alice")?, open("bob")?);
    alice.generate_identity(Smime, a)?;
    bob.generate_identity(Smime, b)?;
    bob.import_as(&alice.export_public(Smime, a)?, ImportAs::Peer)?;
    alice.import_as(&bob.export_public(Smime, b)?, ImportAs::Peer)?;

    // Alice asks; her store's state records the request, so that its answer is accepted.
    let mut ask = Envelope::new(Kind::Request, Operation::TasksGet, "req-1");
    ask.set("correlationId", "exchange-1");
    ask.set("payload", &json!({"id": "task-7"}));
    let request = MailA2aMessage::new(a, &[b], ask);
    let smime = SealOptions::new(Profile::Smime);
    let sealed = Sender::builder(&alice).build().seal(&request, &smime)?;

    // Bob receives it; a receiver built later over his store refuses it as a replay.
    let outcome = Receiver::builder(&bob).build().receive(&sealed)?.commit()?;
    let asked = outcome.delivered().expect("delivered to Bob");
    let payload: serde_json::Value = asked.payload().unwrap_or_default();
    println!("Bob got {payload}");
    let again = Receiver::builder(&bob).build().receive(&sealed)?.commit()?;
    assert!(matches!(again, Outcome::Duplicate { .. }), "replayed");

    // Bob answers in the request's thread; Alice's receiver delivers the answer.
    let mut answer = Envelope::response_to(asked.envelope(), "resp-1");
    let done =
        json!({"id": "task-7", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}});
    answer.set("payload", &done);
    let reply = MailA2aMessage::reply(asked.message(), b, answer);
    let sealed = Sender::builder(&bob).build().seal(&reply, &smime)?;
    let mut inbox = Receiver::builder(&alice).build();
    let outcome = inbox.receive(&sealed)?.commit()?;
    let answered = outcome.delivered().expect("delivered to Alice");
    print!(
        "Alice got {}",
        String::from_utf8_lossy(&answered.envelope_json())
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
