//! `mailseal aep to-maila2a|from-maila2a`: the Agent Email Protocol draft's messages.

use std::path::PathBuf;

use clap::Subcommand;

use super::{read_input, write_output, CliResult, Failure};
use crate::message::{Limits, MailA2aMessage};

#[derive(Subcommand)]
pub(super) enum AepCommand {
    /// An AEP mail (X-AEP-Type, X-AEP-Conversation-Id, JSON or text body) as a plain
    /// MailA2A message (.eml), ready to seal (`seal` also takes AEP mail directly).
    ToMaila2a {
        /// The AEP mail (default: stdin).
        #[command(flatten)]
        input: super::input::Input,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// A MailA2A message made from AEP (plain, or the inner message `open --eml`
    /// writes) as the AEP mail it came from.
    FromMaila2a {
        /// The MailA2A message (default: stdin).
        #[command(flatten)]
        input: super::input::Input,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

pub(super) fn aep(cmd: AepCommand) -> CliResult {
    use crate::ext::aep::AepMessage;
    match cmd {
        AepCommand::ToMaila2a { input, out } => {
            let raw = read_input(input.path())?;
            let m = AepMessage::parse(&raw, &Limits::default())
                .and_then(|a| a.to_maila2a())
                .map_err(|e| Failure::from("aep", e))?;
            let bytes = m.to_rfc5322().map_err(|e| Failure::from("aep", e))?;
            write_output(out.as_deref(), &bytes)
        }
        AepCommand::FromMaila2a { input, out } => {
            let raw = read_input(input.path())?;
            let m = MailA2aMessage::parse(&raw, &Limits::default())
                .map_err(|e| Failure::from("aep", e))?;
            let bytes = AepMessage::from_maila2a(&m)
                .and_then(|a| a.to_rfc5322())
                .map_err(|e| Failure::from("aep", e))?;
            write_output(out.as_deref(), &bytes)
        }
    }
}
