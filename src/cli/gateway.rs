//! `mailseal gateway --config FILE` runs the SMTP gateway; `mailseal gateway
//! check-config FILE` checks a configuration and what it names, then exits; `mailseal
//! gateway hash-password` writes a submitter's `password_hash`. The
//! gateway is the library's ([`crate::gateway`]); this opens the stores its workers
//! use and prints.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use clap::{Args, Subcommand};

use super::exit::ExitCode;
use super::home::Home;
use super::{CliResult, Failure};
use crate::gateway::config::LogFormat;
use crate::gateway::{Config, Gateway, Pipeline};
use crate::keystore::KeyStore;
use crate::{Receiver, Sender};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct GatewayArgs {
    /// The configuration (TOML; see the README's gateway section).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<GatewayCommand>,
}

#[derive(Subcommand)]
enum GatewayCommand {
    /// Check a configuration, its TLS files, spool and stores, then exit.
    CheckConfig {
        /// The configuration.
        file: PathBuf,
    },
    /// Print the Argon2id hash of a submitter's password, for `password_hash` in a
    /// `[[submitter]]` (the password is read from the file, or the first line of
    /// standard input: never from the command line, which other users can see).
    HashPassword {
        /// A file holding the password (its first line).
        #[arg(long, value_name = "FILE")]
        password_file: Option<PathBuf>,
    },
}

pub(super) fn load(path: &Path) -> Result<Config, Failure> {
    Config::load(path).map_err(|e| Failure::new(ExitCode::Usage, format!("gateway: {e}")))
}

/// A configuration for `mailseal gateway`: one with a `[bridge]` section is the
/// bridge's (`mailseal bridge`), never run without it.
fn load_gateway(path: &Path) -> Result<Config, Failure> {
    let config = load(path)?;
    if config.bridge.is_some() {
        return Err(Failure::new(
            ExitCode::Usage,
            format!(
                "gateway: {} has a [bridge] section: run it with `mailseal bridge --config`",
                path.display()
            ),
        ));
    }
    Ok(config)
}

/// Each worker's pipeline: the configured key store, shared by its receiver and
/// sender; the peers' cards and MLS state beside the store; the replay state.
pub(super) fn factory(config: &Config) -> Arc<crate::gateway::PipelineFactory> {
    let store = PathBuf::from(&config.store);
    let state = config
        .state
        .clone()
        .unwrap_or_else(|| store.display().to_string());
    let policy = config.inbound.open_policy();
    let rules = config.inbound.rules();
    Arc::new(move || {
        let keys: Rc<dyn KeyStore> = super::store::Keys::open(&store)
            .map_err(|f| f.line)?
            .into_store();
        let home = Home::new(&store, Some(&state));
        let peers = home.load_policies().map_err(|f| f.line)?;
        let replay = |what| crate::replay::open_store(&state).map_err(|e| format!("{what}: {e}"));
        let receiver = Receiver::builder(keys.clone())
            .policy(policy.clone())
            .rules(rules.clone())
            .peers(&peers)
            .mls_lazy(home.lazy_mls())
            .replay_boxed(replay("replay state")?)
            .build();
        let sender = Sender::builder(keys)
            .peers(peers)
            .mls_lazy(home.lazy_mls())
            .replay_boxed(replay("replay state")?)
            .build();
        Ok(Pipeline { receiver, sender })
    })
}

pub(super) fn gateway(a: GatewayArgs) -> CliResult {
    match (a.command, a.config) {
        (Some(GatewayCommand::CheckConfig { file }), _) => {
            super::init_log(true, false)?;
            let config = load_gateway(&file)?;
            let listeners = config.listeners.len();
            let report = Gateway::new(config.clone(), factory(&config))
                .check()
                .map_err(|e| Failure::new(ExitCode::Usage, format!("gateway: {e}")))?;
            for note in &report.notes {
                eprintln!("gateway: note: {note}");
            }
            println!(
                "{}: ok ({listeners} listeners; private keys for {})",
                file.display(),
                report.agents.join(", ")
            );
            Ok(())
        }
        (Some(GatewayCommand::HashPassword { password_file }), _) => {
            super::init_log(true, false)?;
            let text = zeroize::Zeroizing::new(match &password_file {
                Some(f) => std::fs::read_to_string(f).map_err(|e| {
                    Failure::new(ExitCode::Usage, format!("gateway: {}: {e}", f.display()))
                })?,
                None => {
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line).map_err(|e| {
                        Failure::new(ExitCode::Usage, format!("gateway: standard input: {e}"))
                    })?;
                    line
                }
            });
            let password = text.lines().next().unwrap_or_default();
            if password.is_empty() {
                return Err(Failure::new(
                    ExitCode::Usage,
                    "gateway: hash-password: the password is empty",
                ));
            }
            let hash = crate::gateway::submission::hash_password(password)
                .map_err(|e| Failure::new(ExitCode::Other, format!("gateway: {e}")))?;
            println!("{hash}");
            Ok(())
        }
        (None, Some(file)) => {
            let config = load_gateway(&file)?;
            // Its lines as the configuration asks, from the first.
            super::init_log(true, config.log.format == LogFormat::Json)?;
            Gateway::new(config.clone(), factory(&config))
                .run()
                .map_err(|e| Failure::new(ExitCode::Other, format!("gateway: {e}")))
        }
        (None, None) => Err(Failure::new(
            ExitCode::Usage,
            "gateway: --config FILE, or check-config FILE",
        )),
    }
}
