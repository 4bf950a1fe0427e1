//! Opens every mail in a maildir with `mailseal::Receiver` and delivers each accepted
//! message exactly once, as `OUT/NAME.json`, whatever point the process is killed at.
//!
//! ```sh
//! cargo run --example maildir -- STORE MAILDIR OUT
//! ```
//!
//! STORE is a store directory `mailseal` made (`mailseal.db` holds the keys and the
//! replay state, `mls.db` the MLS groups). A mail in `MAILDIR/new` is moved to
//! `MAILDIR/cur` once it is dealt with; a refused one gets a `:2,T` flag (trashed).

use std::path::{Path, PathBuf};

use mailseal::keystore::SqliteStore;
use mailseal::mls::Mls;
use mailseal::receiver::deliver::{DeliveryDir, Format};
use mailseal::replay::SqliteReplayStore;
use mailseal::{Outcome, Receiver};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [store, maildir, out] = args.as_slice() else {
        return Err("usage: maildir STORE MAILDIR OUT".into());
    };
    let db = store.join("mailseal.db");
    let mls_dir = store.clone();
    let mut receiver = Receiver::builder(SqliteStore::open(&db, None)?)
        .replay(SqliteReplayStore::open(&db)?)
        .mls_lazy(move || Mls::open(&mls_dir))
        .build();
    let target = DeliveryDir::open(out, Format::EnvelopeJson)?;
    let cur = maildir.join("cur");
    std::fs::create_dir_all(&cur)?;

    let mut mails: Vec<PathBuf> = std::fs::read_dir(maildir.join("new"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    mails.sort(); // maildir names begin with the delivery time
    for path in mails {
        let name = file_name(&path);
        let raw = std::fs::read(&path)?;
        let flags = match target.deliver(&mut receiver, &raw, &name) {
            Ok(done) => {
                report(&name, &done.outcome, done.resumed);
                ":2,S"
            }
            Err(e) => {
                println!("{name}: refused: {e}");
                ":2,T"
            }
        };
        // A Commit can release MLS messages held for its epoch.
        for (held, result) in target.deliver_released(&mut receiver)? {
            match result {
                Ok(done) => report(&held, &done.outcome, done.resumed),
                Err(e) => println!("{held}: refused: {e}"),
            }
        }
        // Only now is the mail taken out of `new`: a kill before this line makes the
        // next run receive it again, which the receiver reports as a duplicate.
        std::fs::rename(&path, cur.join(format!("{name}{flags}")))?;
    }
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn report(name: &str, outcome: &Outcome, resumed: bool) {
    match outcome.delivery() {
        Some(d) if resumed || matches!(outcome, Outcome::Deliver { .. }) => println!(
            "{name}: delivered {} from {}",
            d.candidate.message_id, d.candidate.signer
        ),
        _ => println!("{name}: {}", outcome.word()),
    }
}
