//! `mailseal bridge --config FILE` runs the gateway with the A2A bridge inside it
//! ([`crate::bridge`]); `mailseal bridge check-config FILE` checks the configuration
//! (the gateway's, and its `[bridge]` section), then exits.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::exit::ExitCode;
use super::{CliResult, Failure};
use crate::bridge::Bridge;
use crate::gateway::config::LogFormat;
use crate::gateway::Gateway;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct BridgeArgs {
    /// The configuration: a gateway's (TOML) with a `[bridge]` section (docs/bridge.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<BridgeCommand>,
}

#[derive(Subcommand)]
enum BridgeCommand {
    /// Check a configuration (the gateway's and its [bridge] section), then exit.
    CheckConfig {
        /// The configuration.
        file: PathBuf,
    },
}

fn failure(e: impl std::fmt::Display) -> Failure {
    Failure::new(ExitCode::Usage, format!("bridge: {e}"))
}

pub(super) fn bridge(a: BridgeArgs) -> CliResult {
    let (file, check) = match (a.command, a.config) {
        (Some(BridgeCommand::CheckConfig { file }), _) => (file, true),
        (None, Some(file)) => (file, false),
        (None, None) => return Err(failure("--config FILE, or check-config FILE")),
    };
    let config = super::gateway::load(&file)?;
    super::init_log(true, !check && config.log.format == LogFormat::Json)?;
    let factory = super::gateway::factory(&config);
    let bridge = Bridge::new(config.clone(), factory.clone()).map_err(failure)?;
    let gateway = Gateway::new(config.clone(), factory).with_attachment(bridge.clone());
    if check {
        let report = gateway.check().map_err(failure)?;
        for note in &report.notes {
            eprintln!("bridge: note: {note}");
        }
        let b = &bridge.config;
        println!(
            "{}: ok (A2A on {}: {} local agents, {} peers; private keys for {})",
            file.display(),
            b.listen,
            b.agents.len(),
            b.peers.len(),
            report.agents.join(", ")
        );
        return Ok(());
    }
    gateway
        .run()
        .map_err(|e| Failure::new(ExitCode::Other, format!("bridge: {e}")))
}
