//! `mailseal mls ...`: group membership by mail. Every handshake message is a
//! `message/mls` mail written to a file, to be sent like any other mail.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::exit::ExitCode;
use super::home::Home;
use super::{read_input, write_output, CliResult, Failure};
use crate::mls::{Handshake, Mls, Received, StoreAuthenticator};

#[derive(Subcommand)]
pub(super) enum MlsCommand {
    /// Write a KeyPackage mail (message/mls) from ADDR, to publish or send to a group's
    /// admin.
    Keypackage {
        /// The MLS identity (`key generate --kind mls --email ADDR` first).
        #[arg(long)]
        email: String,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the bare MLSMessage (TLS bytes) instead of a mail: for an Agent Card.
        #[arg(long)]
        raw: bool,
    },
    /// Create a group with ADDR as its only member; prints the group id.
    Create {
        /// Our MLS identity.
        #[arg(long)]
        email: String,
    },
    /// Add members from their KeyPackage mails: writes commit.eml (to the members) and
    /// welcome.eml (to the new ones).
    Add {
        /// The group id.
        #[arg(long, allow_hyphen_values = true)]
        group: String,
        /// KeyPackage mails.
        #[arg(required_unless_present = "member")]
        key_packages: Vec<PathBuf>,
        /// Add this peer with the KeyPackage of its imported Agent Card
        /// (`key import --agent-card`) instead of a KeyPackage mail.
        #[arg(long, conflicts_with = "key_packages")]
        member: Option<String>,
        /// Where to write commit.eml and welcome.eml.
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Remove a member: writes commit.eml (to every member, the removed one included).
    Remove {
        /// The group id.
        #[arg(long, allow_hyphen_values = true)]
        group: String,
        /// The member's address (its credential identity).
        #[arg(long)]
        member: String,
        /// Where to write commit.eml.
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Self-update (fresh keys, post-compromise security): writes commit.eml.
    Update {
        /// The group id.
        #[arg(long, allow_hyphen_values = true)]
        group: String,
        /// Where to write commit.eml.
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Join a group from a Welcome mail (the same as `open` on it); with --external,
    /// from a GroupInfo mail sealed to us (`mls group-info --to`) by an external commit
    /// (writes commit.eml for the members).
    Join {
        /// The Welcome (or GroupInfo) mail.
        #[command(flatten)]
        input: super::input::Input,
        /// Join by external commit from a GroupInfo mail.
        #[arg(long, requires_all = ["email", "out_dir"])]
        external: bool,
        /// --external: our MLS identity.
        #[arg(long)]
        email: Option<String>,
        /// --external: where to write commit.eml.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
    /// Write a GroupInfo mail sealed to the one invited (S/MIME: signed by us,
    /// encrypted to them), with which they join by external commit.
    GroupInfo {
        /// The group id.
        #[arg(long, allow_hyphen_values = true)]
        group: String,
        /// Who is invited (their S/MIME certificate must be in the store).
        #[arg(long)]
        to: String,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Whether this member applies external commits (joins by GroupInfo) in a group:
    /// off by default; each member that should accept them turns them on.
    ExternalJoins {
        /// The group id.
        #[arg(long, allow_hyphen_values = true)]
        group: String,
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        setting: String,
    },
    /// Who may add us to groups by Welcome (nobody by default): an address, @domain,
    /// or * for anyone whose credential authenticates. Lists them without options.
    Inviters {
        /// Accept Welcomes from this inviter.
        #[arg(long, value_name = "ADDRESS|@DOMAIN|*")]
        allow: Vec<String>,
        /// No longer accept them.
        #[arg(long, value_name = "ADDRESS|@DOMAIN|*")]
        remove: Vec<String>,
    },
    /// Pin an MLS signature key (hex, as `mls members --json` lists it) for an
    /// address: for a member on another MLS stack, whose leaf carries no
    /// certification by a mail key. Lists the pins without options.
    Pin {
        /// The member's address.
        #[arg(long, requires = "key")]
        email: Option<String>,
        /// Its Ed25519 signature key, hex.
        #[arg(long, requires = "email")]
        key: Option<String>,
        /// Unpin it instead.
        #[arg(long, requires = "key")]
        remove: bool,
    },
    /// A group's epoch and members; without --group, the groups.
    Members {
        /// The group id.
        #[arg(long, allow_hyphen_values = true)]
        group: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Open the next held message whose epoch has come (after `open` applied the
    /// commit it waited for); nothing (exit 0) when none is ready.
    Next {
        /// Only this group.
        #[arg(long, allow_hyphen_values = true)]
        group: Option<String>,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the inner message (.eml) instead of the envelope JSON.
        #[arg(long)]
        eml: bool,
    },
}

/// Where a store keeps its MLS state: the store directory itself, or the directory
/// of a `sqlite:` store's file. PostgreSQL and token stores have no local directory.
pub(crate) fn state_dir(store: &Path) -> Result<PathBuf, Failure> {
    let text = store.to_string_lossy();
    if let Some(file) = text.strip_prefix("sqlite:") {
        let parent = Path::new(file).parent().unwrap_or(Path::new("."));
        return Ok(if parent.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            parent.to_path_buf()
        });
    }
    if text.starts_with("postgres://")
        || text.starts_with("postgresql://")
        || text.starts_with("pkcs11:")
    {
        return std::env::var_os("MAILSEAL_MLS_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| {
                Failure::new(
                    ExitCode::Usage,
                    "MLS group state lives in a local directory: set MAILSEAL_MLS_HOME for a PostgreSQL or token store",
                )
            });
    }
    Ok(store.to_path_buf())
}

/// The store's MLS state, with `MAILSEAL_MLS_PAST_EPOCHS` (epochs kept for late
/// messages, default 3; applies to groups created or joined afterwards) and
/// `MAILSEAL_MLS_MAX_HELD` (messages held per group for a future epoch, default 256).
/// Opens the store's MLS state when called (a receiver calls it at the first MLS
/// mail), configured from `MAILSEAL_MLS_PAST_EPOCHS` and `MAILSEAL_MLS_MAX_HELD`:
/// the shared state in PostgreSQL when `postgres` names one, else the local file.
pub(crate) fn lazy_state(
    store: &Path,
    postgres: Option<String>,
) -> impl Fn() -> Result<Mls, crate::mls::MlsError> {
    let store = store.to_path_buf();
    move || {
        let mut config = crate::mls::MlsConfig::default();
        for (var, slot) in [
            ("MAILSEAL_MLS_PAST_EPOCHS", &mut config.past_epochs),
            ("MAILSEAL_MLS_MAX_HELD", &mut config.max_held),
        ] {
            if let Some(v) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
                *slot = v
                    .trim()
                    .parse()
                    .map_err(|_| crate::mls::MlsError::Usage(format!("{var}={v}: not a number")))?;
            }
        }
        // Signature keys are encrypted under the store passphrase, like the others.
        let passphrase =
            super::store::passphrase().map_err(|f| crate::mls::MlsError::Usage(f.line))?;
        let mls = match &postgres {
            Some(url) => Mls::open_postgres(url)?,
            None => {
                let dir = state_dir(&store).map_err(|f| crate::mls::MlsError::Usage(f.line))?;
                Mls::open(&dir)?
            }
        };
        Ok(mls.with_config(config).with_passphrase(passphrase))
    }
}

fn fail(what: &str) -> impl Fn(crate::mls::MlsError) -> Failure + '_ {
    move |e| Failure::from(what, e)
}

fn write_file(dir: &Path, name: &str, data: &[u8]) -> CliResult {
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::new(ExitCode::Other, format!("{}: {e}", dir.display())))?;
    let path = dir.join(name);
    write_output(Some(&path), data)?;
    eprintln!("mailseal: wrote {}", path.display());
    Ok(())
}

/// `key generate --kind mls --email ADDR`: the key is certified by our S/MIME (else
/// OpenPGP) key for ADDR, which must be in the store.
pub(super) fn generate(home: &Home, store: &Path, email: &str) -> CliResult {
    // The MLS key is certified by a key the store must hold already: the store is
    // opened (never created) before the MLS state is.
    let keys = super::store::Keys::open(store)?;
    let mls = home.open_mls()?;
    let auth = StoreAuthenticator::new(keys.store());
    let public = mls
        .generate_identity(email, &auth)
        .map_err(fail("key generate"))?;
    // On stderr, as `key generate` reports S/MIME and OpenPGP keys.
    eprintln!(
        "generated mls {public} Ed25519 {}",
        email.to_ascii_lowercase()
    );
    Ok(())
}

pub(super) fn run(home: &Home, store: &Path, cmd: MlsCommand) -> CliResult {
    // The authentication service: leaves are checked against the store's keys. The
    // store must exist before its MLS state is opened (and created) beside it.
    let keys = super::store::Keys::open(store)?;
    let mls = home.open_mls()?;
    let auth = StoreAuthenticator::new(keys.store());
    match cmd {
        MlsCommand::Keypackage { email, out, raw } => {
            let bytes = if raw {
                mls.key_package_message(&email)
            } else {
                mls.key_package(&email)
            }
            .map_err(fail("mls keypackage"))?;
            write_output(out.as_deref(), &bytes)
        }
        MlsCommand::Create { email } => {
            let id = mls.create_group(&email).map_err(fail("mls create"))?;
            println!("{id}");
            Ok(())
        }
        MlsCommand::Add {
            group,
            key_packages,
            member,
            out_dir,
        } => {
            let added = match member {
                // The KeyPackage is taken from the policy only if the add succeeds.
                Some(member) => home.policies()?.update(|policies| {
                    let kp = policies.take_key_package(&member).ok_or_else(|| {
                        Failure::new(
                            ExitCode::NoUsableKey,
                            format!(
                                "mls add: no KeyPackage of {member} from an Agent Card: import its card (key import --agent-card) or give its KeyPackage mail"
                            ),
                        )
                    })?;
                    mls.add_published(&group, &member, &kp, &auth)
                        .map_err(fail("mls add"))
                })?,
                None => {
                    let mails = key_packages
                        .iter()
                        .map(|p| read_input(Some(p)))
                        .collect::<Result<Vec<_>, _>>()?;
                    mls.add(&group, &mails, &auth).map_err(fail("mls add"))?
                }
            };
            write_file(&out_dir, "commit.eml", &added.commit)?;
            write_file(&out_dir, "welcome.eml", &added.welcome)
        }
        MlsCommand::Remove {
            group,
            member,
            out_dir,
        } => {
            let commit = mls.remove(&group, &member).map_err(fail("mls remove"))?;
            write_file(&out_dir, "commit.eml", &commit)
        }
        MlsCommand::Update { group, out_dir } => {
            let commit = mls.update(&group).map_err(fail("mls update"))?;
            write_file(&out_dir, "commit.eml", &commit)
        }
        MlsCommand::ExternalJoins { group, setting } => mls
            .allow_external_joins(&group, setting == "on")
            .map_err(fail("mls external-joins")),
        MlsCommand::GroupInfo { group, to, out } => {
            let mail = mls
                .sealed_group_info(&group, &to, keys.store())
                .map_err(fail("mls group-info"))?;
            write_output(out.as_deref(), &mail)
        }
        MlsCommand::Join {
            input,
            external: true,
            email: Some(email),
            out_dir: Some(out_dir),
        } => {
            let raw = read_input(input.path())?;
            let (group, commit) = mls
                .join_sealed(
                    &raw,
                    &email,
                    keys.store(),
                    &crate::seal::OpenPolicy::default(),
                    &auth,
                )
                .map_err(fail("mls join --external"))?;
            write_file(&out_dir, "commit.eml", &commit)?;
            println!("{group}");
            Ok(())
        }
        MlsCommand::Join { input, .. } => {
            let raw = read_input(input.path())?;
            let receipt = mls
                .receive(&raw, &crate::seal::OpenPolicy::default(), "welcome", &auth)
                .map_err(fail("mls join"))?;
            let joined = match &receipt.received {
                Received::Handshake(Handshake::Joined { group, epoch, by }) => Some((
                    group.clone(),
                    format!("joined MLS group {group} at epoch {epoch} (added by {by})"),
                )),
                _ => None,
            };
            match (&receipt.received, joined) {
                (_, Some((group, line))) => {
                    receipt.commit().map_err(fail("mls join"))?;
                    println!("{group}");
                    eprintln!(
                        "mailseal: {}",
                        crate::error::shown(&line, super::ERROR_LINE_CHARS)
                    );
                    Ok(())
                }
                (Received::Duplicate { .. }, None) => Err(Failure::new(
                    ExitCode::RefusedByPolicy,
                    "mls join: this Welcome was already used",
                )),
                _ => Err(Failure::new(
                    ExitCode::Usage,
                    "mls join: not a Welcome mail",
                )),
            }
        }
        MlsCommand::Inviters { allow, remove } => {
            for p in &allow {
                mls.allow_inviter(p, true).map_err(fail("mls inviters"))?;
            }
            for p in &remove {
                mls.allow_inviter(p, false).map_err(fail("mls inviters"))?;
            }
            if allow.is_empty() && remove.is_empty() {
                for p in mls.inviters().map_err(fail("mls inviters"))? {
                    println!("{p}");
                }
            }
            Ok(())
        }
        MlsCommand::Pin { email, key, remove } => match (email, key) {
            (Some(email), Some(key)) => {
                let key = crate::hex::decode(key.trim())
                    .ok_or_else(|| Failure::new(ExitCode::Usage, "mls pin: --key is not hex"))?;
                mls.pin_key(&email, &key, !remove).map_err(fail("mls pin"))
            }
            _ => {
                for (email, key) in mls.pinned_keys().map_err(fail("mls pin"))? {
                    println!("{email} {key}");
                }
                Ok(())
            }
        },
        MlsCommand::Members { group, json } => match group {
            None => {
                for g in mls.groups().map_err(fail("mls members"))? {
                    println!("{g}");
                }
                Ok(())
            }
            Some(group) => {
                let m = mls.members(&group).map_err(fail("mls members"))?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&m).unwrap_or_default());
                } else {
                    println!("group {} epoch {} (we are {})", m.group, m.epoch, m.me);
                    for (leaf, id) in &m.members {
                        println!("{leaf} {id}");
                    }
                }
                Ok(())
            }
        },
        MlsCommand::Next { .. } => Err(Failure::new(
            ExitCode::Usage,
            "mls next is handled by the receiver",
        )),
    }
}
