//! Two agents with new OpenPGP keys exchange certificates; one signs and encrypts a
//! MailA2A request (PGP/MIME, RFC 3156), the other opens it. A changed byte is refused.
//!
//! ```sh
//! cargo run --example openpgp_seal_open
//! ```

use mailseal::keystore::openpgp::{armored_certificate, generate, KeyProfile};
use mailseal::keystore::{KeyStore, MemoryStore};
use mailseal::{Envelope, Kind, MailA2aMessage, Operation, Outcome, Profile};
use mailseal::{Receiver, SealOptions, Sender};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ann = MemoryStore::new();
    let bea = MemoryStore::new();
    let ann_key = generate("ann@pgp.example", Some("Ann"), KeyProfile::Rfc4880)?;
    let bea_key = generate("bea@pgp.example", Some("Bea"), KeyProfile::Rfc4880)?;
    ann.import(&ann_key, "own", false)?;
    bea.import(&bea_key, "own", false)?;
    // Each gives the other its certificate (public parts only).
    ann.import(&armored_certificate(&bea_key)?, "bea", false)?;
    bea.import(&armored_certificate(&ann_key)?, "ann", false)?;

    let mut env = Envelope::new(Kind::Request, Operation::TasksGet, "get-1");
    env.set("payload", &serde_json::json!({"id": "task-7"}));
    let plain = MailA2aMessage::new("ann@pgp.example", &["bea@pgp.example"], env);
    // A request with no correlation expects no answer: nothing is recorded.
    let sealed = Sender::builder(&ann)
        .build()
        .seal(&plain, &SealOptions::new(Profile::OpenPgp))?;
    println!("sealed: {} bytes of PGP/MIME", sealed.len());

    let mut receiver = Receiver::builder(&bea).build();
    let mut tampered = sealed.clone();
    let at = tampered.len() - 100;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    match receiver.receive(&tampered) {
        Err(e) => println!("a changed byte: refused ({e})"),
        Ok(_) => return Err("a tampered message was accepted".into()),
    }
    let Outcome::Deliver { delivery, .. } = receiver.receive(&sealed)?.commit()? else {
        return Err("not delivered".into());
    };
    println!(
        "opened: {} ({}), protection {}",
        delivery.candidate.message_id,
        delivery.opened.verdict.algorithm.as_deref().unwrap_or("-"),
        delivery.opened.verdict.protection
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
