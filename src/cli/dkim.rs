//! `mailseal dkim sign|verify`: DKIM on outbound and inbound mail with static keys.

use std::path::PathBuf;

use clap::Subcommand;

use super::exit::ExitCode;
use super::{read_input, write_output, CliResult, Failure};

#[derive(Subcommand)]
pub(super) enum DkimCommand {
    /// Add a DKIM-Signature (the message goes out unchanged below it).
    Sign {
        /// The private key: PKCS#8 PEM or DER, Ed25519 (RFC 8463) or RSA.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// The signing domain (d=).
        #[arg(long)]
        domain: String,
        /// The selector (s=).
        #[arg(long)]
        selector: String,
        /// The message.
        #[command(flatten)]
        input: super::input::Input,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a message's DKIM signatures with a key map (no DNS): one JSON line per
    /// signature; exit 0 when all pass, 4 otherwise.
    Verify {
        /// `{"SELECTOR._domainkey.DOMAIN": "v=DKIM1; k=...; p=..."}`.
        #[arg(long, value_name = "FILE")]
        keys: PathBuf,
        /// The message.
        #[command(flatten)]
        input: super::input::Input,
    },
}

pub(super) fn dkim(cmd: DkimCommand) -> CliResult {
    use crate::dkim;
    match cmd {
        DkimCommand::Sign {
            key,
            domain,
            selector,
            input,
            out,
        } => {
            let key_bytes = zeroize::Zeroizing::new(read_input(Some(&key))?);
            let k = dkim::DkimSigningKey::from_pkcs8(&key_bytes, &domain, &selector)
                .map_err(|e| Failure::from("dkim sign", e))?;
            let raw = read_input(input.path())?;
            let signed = dkim::sign(&raw, &k).map_err(|e| Failure::from("dkim sign", e))?;
            write_output(out.as_deref(), &signed)
        }
        DkimCommand::Verify { keys, input } => {
            let map = dkim::KeyMap::from_json(&read_input(Some(&keys))?)
                .map_err(|e| Failure::from("dkim verify", e))?;
            let raw = read_input(input.path())?;
            let signals = dkim::verify(&raw, &map);
            let mut out = String::new();
            for s in &signals {
                out.push_str(&serde_json::to_string(s).unwrap_or_default());
                out.push('\n');
            }
            write_output(None, out.as_bytes())?;
            if signals.iter().all(|s| s.result == "pass") {
                Ok(())
            } else {
                Err(Failure::new(
                    ExitCode::AuthenticationFailed,
                    "dkim verify: not every signature passes",
                ))
            }
        }
    }
}
