//! `mailseal card` (write our Agent Card) and `mailseal key import --agent-card`
//! (import a peer's): the library's `ext::agent_card` and `ext::peers` on the store.

use std::path::{Path, PathBuf};

use clap::Args;

use super::exit::ExitCode;
use super::home::Home;
use super::store::Keys;
use super::{read_input, write_output, CliResult, Failure};
use crate::ext::agent_card::{self, CardFields, Published};
use crate::profile::Protection;

#[derive(Args)]
pub(super) struct CardArgs {
    /// Our address: the MailA2A interface's mailto: and the keys published.
    #[arg(long)]
    email: String,
    /// Add the interface and the #protection extension to this card (A2A v1.0; v0.3
    /// members are moved to their v1.0 places) instead of writing a new one.
    #[arg(long = "in", value_name = "CARD.json")]
    input: Option<PathBuf>,
    /// The card's name (default: the given card's, else the address).
    #[arg(long)]
    name: Option<String>,
    /// The card's description.
    #[arg(long)]
    description: Option<String>,
    /// The agent's version (default: the given card's, else 1.0.0).
    #[arg(long = "agent-version", value_name = "VERSION")]
    agent_version: Option<String>,
    /// The weakest protection we send and accept for effectful operations:
    /// signed or signed-encrypted.
    #[arg(long, default_value = "signed")]
    minimum: String,
    /// Publish no MLS KeyPackage even when the store has an MLS identity.
    #[arg(long)]
    no_mls: bool,
    /// Sign the card (JWS, A2A `signatures`) with our S/MIME key, its certificate in
    /// x5c.
    #[arg(long)]
    sign: bool,
    /// Output file (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Where the peer policy file of a store lives: the store's directory (the MLS
/// state's, so `MAILSEAL_MLS_HOME` for a PostgreSQL or token store).
pub(super) fn policy_dir(store: &Path) -> Result<PathBuf, Failure> {
    super::mls::state_dir(store).map_err(|_| {
        Failure::new(
            ExitCode::Usage,
            "the peer policy file (peers.json) lives in a local directory: set MAILSEAL_MLS_HOME for a PostgreSQL or token store",
        )
    })
}

pub(super) fn card(home: &Home, store: &Path, a: CardArgs) -> CliResult {
    let minimum: Protection = a
        .minimum
        .parse()
        .map_err(|e: String| Failure::new(ExitCode::Usage, format!("--minimum: {e}")))?;
    let keys = Keys::open(store)?;
    let fail = |e| Failure::from("card", e);
    let mut published = Published::from_store(keys.store(), &a.email).map_err(fail)?;
    published.minimum = minimum;
    let email = a.email.trim().to_ascii_lowercase();
    if !a.no_mls {
        // Only a store that already has MLS state and an identity for the address
        // publishes a KeyPackage: writing a card creates no MLS state of its own.
        if home.has_mls_state() {
            let mls = home.open_mls()?;
            let ids = mls.identities().map_err(|e| Failure::from("card", e))?;
            if ids.iter().any(|(e, _)| *e == email) {
                let kp = mls
                    .last_resort_key_package(&email)
                    .map_err(|e| Failure::from("card", e))?;
                published.mls_key_packages.push(kp);
            }
        }
    }
    if published.is_empty() {
        return Err(fail(agent_card::CardError::NothingToPublish(email)));
    }
    let base = a
        .input
        .as_deref()
        .map(|p| read_input(Some(p)))
        .transpose()?;
    let fields = CardFields {
        name: a.name,
        description: a.description,
        version: a.agent_version,
    };
    let (mut card, notes) =
        agent_card::write_card(base.as_deref(), &email, &fields, &published).map_err(fail)?;
    for n in notes {
        eprintln!("mailseal: card: {n}");
    }
    if a.sign {
        agent_card::sign_card(&mut card, keys.store(), &email).map_err(fail)?;
    }
    write_output(a.out.as_deref(), &agent_card::to_pretty_json(&card))
}

/// `key import --agent-card FILE`: the card's keys into the store, its policy into
/// the peer policy file.
pub(super) fn import(
    home: &Home,
    keys: &Keys,
    file: &Path,
    require_signature: bool,
    operators: &agent_card::CardOperators,
) -> CliResult {
    let bytes = read_input(Some(file))?;
    let now = time::OffsetDateTime::now_utc();
    let name = file.display().to_string();
    let fail = |e| Failure::from(&format!("import {name}"), e);
    let card = agent_card::read_card_with(&bytes, keys.store(), now, operators).map_err(fail)?;
    if require_signature && !card.trusted() {
        return Err(fail(agent_card::CardError::Untrusted(card.address.clone())));
    }
    let policies = home.policies()?;
    let entries = agent_card::import_keys(&card, keys.store()).map_err(fail)?;
    super::key::print_entries("imported", &entries);
    policies.update(|p| {
        p.record(&card, now);
        Ok::<(), Failure>(())
    })?;
    let signed = if card.signatures.is_empty() {
        "unsigned".to_string()
    } else {
        card.signatures
            .iter()
            .map(|s| {
                let whose = match s.trust {
                    agent_card::SignerTrust::Pinned => "a key this store already holds for the address",
                    agent_card::SignerTrust::Anchored => "a certificate under a trusted CA",
                    agent_card::SignerTrust::Operator => "an operator key for the domain",
                    // The signature holds, but nobody we know made it.
                    _ => "a key nobody in this store vouches for: the card is intact, its author unproven",
                };
                format!("{} signature by {} verified, made with {whose}", s.algorithm, s.signer)
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    eprintln!(
        "imported card {}: minimum {}, profiles {}, {} MLS KeyPackage(s), {signed}",
        card.address,
        card.minimum,
        if card.profiles.is_empty() {
            "-".to_string()
        } else {
            card.profiles.join(",")
        },
        card.mls_key_packages.len(),
    );
    Ok(())
}
