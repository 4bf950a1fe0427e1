//! `mailseal stream status|next`: the receiver's view of reply streams.

use clap::Subcommand;

use super::{CliResult, Failure};
use crate::replay::open_store;

#[derive(Subcommand)]
pub(super) enum StreamCommand {
    /// Each stream's state: next sequence, missing events and since when, final.
    Status {
        /// Only the streams of this correlation.
        #[arg(long, value_name = "ID")]
        correlation: Option<String>,
        /// JSON output (an array).
        #[arg(long)]
        json: bool,
    },
    /// Print the events of a correlation that are deliverable now (held ones a late
    /// event released), one envelope JSON per line in order, and forget them. Each
    /// event's sender is named on stderr (with `--json`, in the line itself).
    Next {
        /// The correlation.
        #[arg(long, value_name = "ID")]
        correlation: String,
        /// One JSON object per line: `{"signer", "correlationId", "sequence",
        /// "messageId", "envelope"}`.
        #[arg(long)]
        json: bool,
    },
}

use super::words::list;

pub(super) fn run(state: &str, cmd: StreamCommand) -> CliResult {
    let store = open_store(state).map_err(|e| Failure::from("stream", e))?;
    match cmd {
        StreamCommand::Status { correlation, json } => {
            let streams = store
                .streams(correlation.as_deref())
                .map_err(|e| Failure::from("stream status", e))?;
            if json {
                let text = serde_json::to_string_pretty(&streams).unwrap_or_default();
                println!("{text}");
                return Ok(());
            }
            if streams.is_empty() {
                // Say so: an empty answer must not look like a failure to look.
                match &correlation {
                    Some(c) => eprintln!("mailseal: no stream for correlation {c} in {state}"),
                    None => eprintln!("mailseal: no streams in {state} (a stream starts with the first event received)"),
                }
            }
            for s in &streams {
                let status = if s.complete {
                    "complete".to_string()
                } else if !s.missing.is_empty() {
                    format!(
                        "gap: missing {} since {}",
                        list(&s.missing),
                        s.gap_since.as_deref().unwrap_or("-")
                    )
                } else {
                    "open".to_string()
                };
                println!(
                    "{} attempt {} from {}: {} next {} final {} held {} deliverable {}: {}",
                    s.correlation_id,
                    s.attempt,
                    s.signer,
                    s.operation,
                    s.next_sequence,
                    s.final_sequence.map_or("-".to_string(), |f| f.to_string()),
                    list(&s.held),
                    list(&s.deliverable),
                    status
                );
            }
            Ok(())
        }
        StreamCommand::Next { correlation, json } => {
            let events = store
                .take_deliverable(&correlation)
                .map_err(|e| Failure::from("stream next", e))?;
            let mut out = Vec::new();
            for e in events {
                // Streams are per sender: which one an event came from is part of
                // what is printed, never left for the reader to guess.
                if json {
                    let envelope: serde_json::Value =
                        serde_json::from_slice(&e.envelope).unwrap_or(serde_json::Value::Null);
                    let line = serde_json::json!({
                        "signer": e.signer,
                        "correlationId": e.correlation_id,
                        "sequence": e.sequence,
                        "messageId": e.message_id,
                        "envelope": envelope,
                    });
                    out.extend_from_slice(line.to_string().as_bytes());
                } else {
                    eprintln!(
                        "mailseal: event {} of {} from {}",
                        e.sequence,
                        e.correlation_id.escape_debug(),
                        e.signer.escape_debug()
                    );
                    out.extend_from_slice(&e.envelope);
                }
                out.push(b'\n');
            }
            super::write_output(None, &out)
        }
    }
}
