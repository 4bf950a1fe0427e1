//! `mailseal card` (write our Agent Card) and `mailseal key import --agent-card`
//! (import a peer's): the library's `ext::agent_card` and `ext::peers` on the store.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::exit::ExitCode;
use super::home::Home;
use super::store::Keys;
use super::{read_input, write_output, CliResult, Failure};
use crate::ext::agent_card::{self, CardFields, Published};
use crate::profile::Protection;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct CardArgs {
    /// Fetch a peer's card instead of writing ours.
    #[command(subcommand)]
    command: Option<CardCommand>,
    /// Our address: the MailA2A interface's mailto: and the keys published.
    #[arg(long)]
    email: Option<String>,
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

#[derive(Subcommand)]
pub(super) enum CardCommand {
    /// Fetch a peer's Agent Card over HTTPS (rustls) and import it as `key import
    /// --agent-card` does: every check of a card file, and the card's address must be
    /// in the domain of the URL's host. Cached for the server's max-age. The card is
    /// compared with what the store holds for its address, whatever URL, file, JWK or
    /// DID put it there: changed keys, a lower minimum protection or a signed card
    /// replaced by an unsigned one are refused until --accept-changed.
    Fetch(FetchArgs),
}

#[derive(Args)]
pub(super) struct FetchArgs {
    /// The card's URL, e.g. `https://agent.example/.well-known/agent-card.json`.
    url: String,
    /// Trust this CA certificate (PEM) besides the system's roots.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// Allow a host on a loopback, private or link-local address.
    #[arg(long)]
    allow_private: bool,
    /// Import a card that changes what the store holds for its address (its keys,
    /// its minimum protection, how far it is signed), from whatever URL or file that
    /// came: check with the agent first.
    #[arg(long)]
    accept_changed: bool,
    /// Fetch again even when the cached card is fresh.
    #[arg(long)]
    refresh: bool,
    /// Refuse a card without a signature by a key this store trusts.
    #[arg(long)]
    require_signature: bool,
    /// The certificate whose fingerprint is FPR may sign the cards of every address
    /// of DOMAIN (as `key import --agent-card --card-operator`).
    #[arg(long = "card-operator", value_name = "DOMAIN=FPR")]
    card_operator: Vec<String>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
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
    if let Some(CardCommand::Fetch(f)) = a.command {
        return fetch(home, store, f);
    }
    let email = a.email.ok_or_else(|| {
        Failure::new(
            ExitCode::Usage,
            "card: --email ADDR (ours), or `card fetch URL` (a peer's)",
        )
    })?;
    let minimum: Protection = a
        .minimum
        .parse()
        .map_err(|e: String| Failure::new(ExitCode::Usage, format!("--minimum: {e}")))?;
    let keys = Keys::open(store)?;
    let fail = |e| Failure::from("card", e);
    let mut published = Published::from_store(keys.store(), &email).map_err(fail)?;
    published.minimum = minimum;
    let email = email.trim().to_ascii_lowercase();
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

/// `card fetch URL`.
fn fetch(home: &Home, store: &Path, f: FetchArgs) -> CliResult {
    // Importing a peer's card writes its keys: this may make the store.
    let keys = Keys::open_or_create(store)?;
    let mut opts = crate::https::FetchOptions {
        allow_private: f.allow_private,
        timeout: std::time::Duration::from_secs(f.timeout.max(1)),
        ..Default::default()
    };
    if let Some(ca) = &f.ca {
        opts.add_roots_pem(&read_input(Some(ca))?)
            .map_err(|e| Failure::from("--ca", e))?;
    }
    let cache = agent_card::CardCache::new(policy_dir(store)?.join("card-cache"));
    let now = time::OffsetDateTime::now_utc();
    let fail = |e| Failure::from(&format!("card fetch {}", f.url), e);
    let mut operators = agent_card::CardOperators::new();
    for o in &f.card_operator {
        operators
            .allow_text(o)
            .map_err(|e| Failure::from("--card-operator", e))?;
    }
    let fetched = agent_card::fetch_card(
        &f.url,
        &opts,
        &cache,
        keys.store(),
        &operators,
        now,
        f.refresh,
    )
    .map_err(fail)?;
    let options = agent_card::ImportOptions::new()
        .require_signature(f.require_signature)
        .accept_changed(f.accept_changed)
        .origin(Some(fetched.origin.clone()));
    let c = import_card(home, &keys, &fetched.card, &f.url, &options, now)?;
    let address = &fetched.card.address;
    let since = c.since.as_deref().unwrap_or("the last import");
    if fetched.from_cache {
        eprintln!(
            "card of {address} from the cache (fresh for the server's max-age of {} s)",
            fetched.max_age
        );
    } else if c.first {
        eprintln!("fetched the card of {address} for the first time");
    } else if c.needs_acceptance() {
        eprintln!("mailseal: warning: {}", accepted(address, &c));
    } else {
        eprintln!("the keys of the card of {address} are unchanged since {since}");
    }
    if let Some((held, now_at)) = &c.origin {
        eprintln!("mailseal: note: the card of {address} was fetched from {held} before, now from {now_at}");
    }
    cache.remember(&fetched, now).map_err(fail)
}

/// `key import --agent-card FILE`: the card's keys into the store, its policy into
/// the peer policy file.
pub(super) fn import(
    home: &Home,
    keys: &Keys,
    file: &Path,
    options: &agent_card::ImportOptions,
    operators: &agent_card::CardOperators,
) -> CliResult {
    let bytes = read_input(Some(file))?;
    let now = time::OffsetDateTime::now_utc();
    let name = file.display().to_string();
    let fail = |e| Failure::from(&format!("import {name}"), e);
    let card = agent_card::read_card_with(&bytes, keys.store(), now, operators).map_err(fail)?;
    let c = import_card(home, keys, &card, &name, options, now)?;
    if c.needs_acceptance() {
        eprintln!("mailseal: warning: {}", accepted(&card.address, &c));
    }
    Ok(())
}

/// What an accepted change was, for the warning.
fn accepted(address: &str, c: &crate::identity::pins::Changes) -> String {
    format!(
        "the {} of {address} changed since {}: {}; accepted with --accept-changed",
        if c.keys_changed() { "keys" } else { "card" },
        c.since.as_deref().unwrap_or("the last import"),
        c.describe()
    )
}

/// A checked card into the store and the peer policy file, compared with the pin of
/// its address ([`agent_card::import_card`]).
fn import_card(
    home: &Home,
    keys: &Keys,
    card: &agent_card::PeerCard,
    name: &str,
    options: &agent_card::ImportOptions,
    now: time::OffsetDateTime,
) -> Result<crate::identity::pins::Changes, Failure> {
    let fail = |e| Failure::from(&format!("import {name}"), e);
    let policies = home.policies()?;
    let done = policies
        .update(|p| agent_card::import_card(card, keys.store(), p, options, now).map_err(fail))?;
    super::key::print_entries("imported", &done.entries);
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
        "imported card {}: minimum {}, profiles {}, {} MLS KeyPackage(s), {} JWK(s), {signed}",
        card.address,
        card.minimum,
        if card.profiles.is_empty() {
            "-".to_string()
        } else {
            card.profiles.join(",")
        },
        card.mls_key_packages.len(),
        card.jwks.len(),
    );
    Ok(done.changes)
}
