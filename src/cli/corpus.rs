//! `mailseal corpus generate|run|adapter`: the labelled MailA2A conformance corpus
//! ([`crate::corpus`]) and running an implementation over it.

use std::path::PathBuf;

use clap::Subcommand;

use super::exit::ExitCode;
use super::{CliResult, Failure};
use crate::corpus::{self, Adapter, CommandAdapter, MailsealAdapter};

#[derive(Subcommand)]
pub(super) enum CorpusCommand {
    /// Write the labelled corpus: one directory per case (message, keys, prior
    /// messages, expected.json).
    Generate {
        /// The corpus directory (created).
        #[arg(long)]
        out: PathBuf,
        /// The seed of the identifiers and texts.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run an implementation over a corpus: a table by rule on stdout, JUnit XML on
    /// request; exit 1 if any case failed.
    Run {
        /// `mailseal` (this build, in-process) or an adapter command (run with the case
        /// directory as its last argument; README "Conformance corpus").
        #[arg(long = "impl", value_name = "mailseal|CMD")]
        implementation: String,
        /// JUnit XML report.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// The corpus directory.
        dir: PathBuf,
    },
    /// Hostile mail that passes a target's cryptographic checks: seed messages broken at
    /// one layer below the cryptography, then signed (and encrypted) with the store's
    /// keys: the seed's From signs, its To and Cc are encrypted to.
    Mutate {
        /// outer (the unsigned header section), inner (the signed entity's MIME), json
        /// (the machine part) or packets (the CMS SignedData or the OpenPGP packets
        /// around the signature; S/MIME and OpenPGP).
        #[arg(long)]
        layer: crate::corpus::Layer,
        /// How many messages.
        #[arg(long, default_value_t = 100)]
        count: usize,
        /// The seed of every choice.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// smime, openpgp or jws.
        #[arg(long, default_value = "smime")]
        profile: crate::Profile,
        /// Sign only (detached-jws always is).
        #[arg(long)]
        sign_only: bool,
        /// The signing time (RFC 3339; default now): with it, the same seed gives the
        /// same bytes.
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// A directory for one file per message (mutant-NNNNN.eml).
        #[arg(long, conflicts_with = "stream")]
        out: Option<PathBuf>,
        /// One message per line on stdout, in base64, for a fuzzer's input.
        #[arg(long)]
        stream: bool,
        /// Seed messages (RFC 5322).
        #[arg(required = true)]
        seeds: Vec<PathBuf>,
    },
    /// The adapter protocol for this build: judge one case directory, print the verdict
    /// JSON.
    Adapter {
        /// The case directory.
        case: PathBuf,
    },
}

fn failed(e: impl std::fmt::Display) -> Failure {
    Failure::new(ExitCode::Other, e.to_string())
}

pub(super) fn run(store: Option<PathBuf>, cmd: CorpusCommand) -> CliResult {
    match cmd {
        CorpusCommand::Mutate {
            layer,
            count,
            seed,
            profile,
            sign_only,
            at,
            out,
            stream,
            seeds,
        } => {
            let keys = super::store::Keys::open(&super::store_dir(store)?)?;
            let seeds = seeds
                .iter()
                .map(|p| super::read_input(Some(p)))
                .collect::<Result<Vec<_>, _>>()?;
            let mut opts = corpus::MutateOptions::new(layer, count);
            opts.seed = seed;
            opts.profile = profile;
            opts.encrypt = !sign_only && profile != crate::Profile::Jws;
            opts.at = super::offline::parse_at(at.as_deref())?;
            let mutants = corpus::mutate(keys.store(), &seeds, &opts).map_err(failed)?;
            write_mutants(&mutants, out.as_deref(), stream)
        }
        CorpusCommand::Generate { out, seed } => {
            let mut bar = Bar::new();
            let summary =
                corpus::generate_with_progress(&out, seed, &mut |p| bar.show(p)).map_err(failed)?;
            bar.finish();
            println!(
                "{} cases in {} ({} to accept, {} refusal codes)",
                summary.cases,
                out.display(),
                summary.accept,
                summary.codes.len()
            );
            Ok(())
        }
        CorpusCommand::Run {
            implementation,
            junit,
            dir,
        } => {
            let adapter: Box<dyn Adapter> = if implementation == "mailseal" {
                Box::new(MailsealAdapter)
            } else {
                let command = shell_words(&implementation);
                if command.is_empty() {
                    return Err(Failure::new(ExitCode::Usage, "--impl names no command"));
                }
                Box::new(CommandAdapter { command })
            };
            let mut bar = Bar::new();
            let report = corpus::run_with_progress(&dir, adapter.as_ref(), &mut |p| bar.show(p))
                .map_err(failed)?;
            bar.finish();
            print!("{}", report.table());
            if let Some(path) = junit {
                std::fs::write(&path, report.junit())
                    .map_err(|e| failed(format!("{}: {e}", path.display())))?;
            }
            let (_, failures, _) = report.totals();
            if failures > 0 {
                return Err(Failure::new(
                    ExitCode::Other,
                    format!("{failures} of {} cases failed", report.cases.len()),
                ));
            }
            Ok(())
        }
        CorpusCommand::Adapter { case } => {
            let j = MailsealAdapter.judge(&case).map_err(failed)?;
            let v = serde_json::json!({
                "verdict": j.verdict, "layer": j.layer, "code": j.code, "exit": j.exit, "reason": j.reason,
            });
            println!("{v}");
            Ok(())
        }
    }
}

/// A progress bar on standard error while it is a terminal; nothing at all otherwise,
/// so that a script or a CI log reads the same output as before.
struct Bar(Option<indicatif::ProgressBar>);

impl Bar {
    fn new() -> Bar {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Bar(None);
        }
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:>8} {bar:40} {pos}/{len}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Bar(Some(bar))
    }

    fn show(&mut self, p: corpus::Progress) {
        if let Some(bar) = &self.0 {
            bar.set_message(p.phase);
            bar.set_length(p.total);
            bar.set_position(p.done);
        }
    }

    fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}

fn write_mutants(mutants: &[Vec<u8>], out: Option<&std::path::Path>, stream: bool) -> CliResult {
    use base64::Engine;
    use std::io::Write;
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
            for (i, m) in mutants.iter().enumerate() {
                let path = dir.join(format!("mutant-{:05}.eml", i + 1));
                std::fs::write(&path, m).map_err(|e| failed(format!("{}: {e}", path.display())))?;
            }
            eprintln!("mailseal: {} messages in {}", mutants.len(), dir.display());
            Ok(())
        }
        None if stream => {
            let mut stdout = std::io::stdout().lock();
            for m in mutants {
                let line = base64::engine::general_purpose::STANDARD.encode(m);
                writeln!(stdout, "{line}").map_err(|e| failed(format!("stdout: {e}")))?;
            }
            Ok(())
        }
        None => Err(Failure::new(
            ExitCode::Usage,
            "corpus mutate needs --out DIR or --stream",
        )),
    }
}

/// An adapter command split on white space, with single or double quotes keeping
/// words together (no escapes, no expansion: it is not run through a shell).
fn shell_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}
