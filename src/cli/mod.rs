//! The `mailseal` command line: parse arguments, call the library, print, exit with the
//! codes of DESIGN.md. No protocol logic lives here.

mod aep;
#[cfg(feature = "bridge")]
mod bridge;
mod card;
mod compose;
mod corpus;
mod demo;
mod dkim;
mod edge_cloud;
mod exit;
#[cfg(feature = "gateway")]
mod gateway;
mod home;
mod input;
mod inspect;
mod key;
mod mls;
mod offline;
#[cfg(feature = "gateway")]
mod queue;
mod receive;
mod seal;
mod sop;
mod store;
mod stream;
mod validate;
mod words;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode as ProcessExit;

use clap::{Parser, Subcommand};

use self::aep::AepCommand;
use self::compose::ComposeArgs;
use self::dkim::DkimCommand;
use self::exit::ExitCode;
use self::key::KeyCommand;
use self::seal::SealArgs;
use crate::error::Classify;
use crate::message::Limits;

#[derive(Parser)]
#[command(
    name = "mailseal",
    version,
    about = "Seal and open MailA2A agent email (S/MIME 4.0, OpenPGP/MIME, detached-jws, MLS)"
)]
struct Cli {
    /// Key store: a directory, `sqlite:PATH` or `postgres://...` (default: $MAILSEAL_HOME, else
    /// $XDG_DATA_HOME/mailseal).
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Replay and stream state: `postgres://...` (shared by several gateways; the
    /// MLS group state and the peer policies then live there too), `sqlite:PATH`, or a
    /// directory (default: the store's `mailseal.db`).
    #[arg(long, global = true, value_name = "URL", env = "MAILSEAL_STATE")]
    state: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compose a plain MailA2A message (.eml) from an envelope.
    Compose(ComposeArgs),
    /// Check MailA2A structure (no keys needed); directories: every .eml in them.
    Validate {
        /// Files or directories; `-` or none: standard input.
        files: Vec<PathBuf>,
        /// A file to check (the same as FILES).
        #[arg(long = "in", value_name = "FILE")]
        input: Vec<PathBuf>,
    },
    /// Show a message's layers, headers, parts and envelope.
    Inspect {
        #[command(flatten)]
        input: input::Input,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Protect a plain MailA2A message (.eml) under a profile.
    Seal(SealArgs),
    /// Offline signing, connected host: write a signing request for a plain message.
    SignRequest(offline::SignRequestArgs),
    /// Offline signing, offline host (no network): check, show and sign a request.
    ///
    /// Reads the request (a file, or --qr-in PNG), recomputes everything it states from
    /// the signed entity, shows what will be signed, asks for confirmation (or --yes),
    /// signs with a key of the store (a directory, sqlite:PATH or a pkcs11: token) and
    /// appends the signature to the hash-chained signing log. No network code is on
    /// this path: it reads files and the key store and writes files (a postgres://
    /// store is refused).
    Sign(offline::SignArgs),
    /// Offline signing, connected host: request + response -> the signed message.
    Assemble(offline::AssembleArgs),
    /// The offline host's hash-chained signing log.
    #[command(subcommand)]
    SignLog(offline::SignLogCommand),
    /// Verify and open a message; prints the envelope JSON (or the inner .eml).
    Open(receive::OpenArgs),
    /// Manage keys and certificates.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Streams of replies: what is missing, and the events a closed gap released.
    #[command(subcommand)]
    Stream(stream::StreamCommand),
    /// The labelled MailA2A conformance corpus: generate it, run an implementation over
    /// it.
    #[command(subcommand)]
    Corpus(corpus::CorpusCommand),
    /// DKIM: sign outbound mail, check inbound mail's signatures (a transport signal).
    #[command(subcommand)]
    Dkim(DkimCommand),
    /// AEP (Agent Email Protocol) mail to a plain MailA2A message and back.
    #[command(subcommand)]
    Aep(AepCommand),
    /// The edge-cloud capability contract: check an execution receipt.
    #[command(subcommand)]
    EdgeCloud(edge_cloud::EdgeCloudCommand),
    /// MLS groups: key packages, membership by mail, held messages.
    #[command(subcommand)]
    Mls(mls::MlsCommand),
    /// Print our A2A v1.0 Agent Card with the MailA2A interface and the #protection
    /// extension (profiles, certificates, MLS KeyPackage), or add them to a card.
    Card(card::CardArgs),
    /// The whole tour on a temporary store (of its own: --store and --state are refused).
    Demo,
    /// Print the completion script for SHELL (e.g. `mailseal completions bash >
    /// /etc/bash_completion.d/mailseal`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Man pages: mailseal(1) on stdout, or with --out every page (mailseal.1 and one
    /// per subcommand, mailseal-open.1, mailseal-key-generate.1, ...) into DIR.
    Man {
        /// The directory the pages are written to (created).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// The SMTP gateway: seal what internal agents send, open what arrives.
    #[cfg(feature = "gateway")]
    Gateway(gateway::GatewayArgs),
    /// The gateway's queue, while it runs: list, show, flush, hold, release, delete,
    /// requeue.
    #[cfg(feature = "gateway")]
    Queue(queue::QueueArgs),
    /// The A2A bridge: A2A agents reach other organisations' agents by sealed mail
    /// (the gateway, with A2A v1.0 over HTTP in front of it).
    #[cfg(feature = "bridge")]
    Bridge(bridge::BridgeArgs),
    /// The Stateless OpenPGP interface (`mailseal sop --help`), with SOP's exit codes.
    #[command(disable_help_flag = true)]
    Sop {
        /// SOP subcommand and arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

/// A failure on its way to stderr: one line, and an exit code.
pub(crate) struct Failure {
    code: ExitCode,
    line: String,
}

impl Failure {
    pub(crate) fn new(code: ExitCode, line: impl Into<String>) -> Self {
        Failure {
            code,
            line: line.into(),
        }
    }
    fn from<E: Classify + std::fmt::Display>(context: &str, e: E) -> Self {
        Failure::new(ExitCode::of(&e), format!("{context}: {e}"))
    }
}

type CliResult = Result<(), Failure>;

/// Entry point of the binary.
pub fn main() -> ProcessExit {
    // `sop` has its own argument rules and exit codes: it is parsed on its own.
    let mut args = std::env::args_os();
    let _ = args.next();
    if args.next().is_some_and(|a| a == "sop") {
        return sop::main(args.collect());
    }
    use clap::FromArgMatches;
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    let cli = match parsed {
        Ok((c, m)) => {
            if let Err(f) = demo_takes_no_store(&c, &m) {
                eprintln!("mailseal: {}", f.line);
                return ProcessExit::from(f.code.as_u8());
            }
            c
        }
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ProcessExit::SUCCESS
                }
                _ => ProcessExit::from(ExitCode::Usage.as_u8()),
            };
        }
    };
    // The gateway starts its log once it has read its configuration, which may ask
    // for JSON lines (`gateway::gateway`); every other command now: only errors
    // unless MAILSEAL_LOG says otherwise, and for the queue tools each change they make.
    #[cfg(feature = "bridge")]
    let bridging = matches!(cli.command, Command::Bridge(_));
    #[cfg(not(feature = "bridge"))]
    let bridging = false;
    #[cfg(feature = "gateway")]
    let (gateway, queue) = (
        matches!(cli.command, Command::Gateway(_)) || bridging,
        matches!(cli.command, Command::Queue(_)),
    );
    #[cfg(not(feature = "gateway"))]
    let (gateway, queue) = (false, false);
    if !gateway {
        if let Err(f) = init_log(queue, false) {
            eprintln!("mailseal: {}", f.line);
            return ProcessExit::from(f.code.as_u8());
        }
    }
    match run(cli) {
        Ok(()) => ProcessExit::SUCCESS,
        Err(f) => {
            // An error may quote what a message says: escaped and bounded, it cannot
            // forge a line or drive the terminal.
            eprintln!(
                "mailseal: {}",
                crate::error::shown(&f.line, ERROR_LINE_CHARS)
            );
            ProcessExit::from(f.code.as_u8())
        }
    }
}

/// The command line's definition, as parsed and as `completions` and `man` describe
/// it: the exit statuses in the top-level help (from the table the process uses), and
/// the global options (`--store`, `--state`) described there only. Each subcommand
/// still takes them, without repeating their help.
fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command().after_help(ExitCode::help_table());
    // Built first: building is what copies the global options into each subcommand.
    cmd.build();
    hide_globals(cmd, true)
}

/// `cmd` with the global options hidden from its subcommands' help (and from its own
/// unless `top`).
fn hide_globals(mut cmd: clap::Command, top: bool) -> clap::Command {
    if !top {
        // In place: `mut_arg` would move the argument to the end, out of step with the
        // index a built command keeps of its arguments.
        cmd = cmd.mut_args(|a| {
            let hide = a.is_hide_set() || GLOBAL_OPTIONS.contains(&a.get_id().as_str());
            a.hide(hide)
        });
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |s| hide_globals(s, false));
    }
    cmd
}

/// The options every subcommand takes, described once, in `mailseal --help`.
const GLOBAL_OPTIONS: [&str; 2] = ["store", "state"];

/// `demo` runs on a temporary store of its own: a `--store` or `--state` given to it
/// would be silently ignored, so it is refused (the environment's MAILSEAL_STATE is
/// not the user asking).
fn demo_takes_no_store(cli: &Cli, m: &clap::ArgMatches) -> CliResult {
    if !matches!(cli.command, Command::Demo) {
        return Ok(());
    }
    for id in GLOBAL_OPTIONS {
        if m.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
            return Err(Failure::new(
                ExitCode::Usage,
                format!("demo runs on a temporary store of its own: --{id} is not taken"),
            ));
        }
    }
    Ok(())
}

/// `mailseal completions SHELL`: the script on stdout.
fn completions(shell: clap_complete::Shell) -> CliResult {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(), "mailseal", &mut out);
    write_output(None, &out)
}

/// `mailseal man [--out DIR]`: mailseal(1) on stdout, or every page into DIR.
fn man(out: Option<&Path>) -> CliResult {
    let fail =
        |what: &str, e: std::io::Error| Failure::new(ExitCode::Other, format!("man: {what}: {e}"));
    let Some(dir) = out else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command())
            .source(format!("mailseal {}", env!("CARGO_PKG_VERSION")))
            .render(&mut page)
            .map_err(|e| fail("stdout", e))?;
        return write_output(None, &page);
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(&dir.display().to_string(), e))?;
    pages(&command(), dir).map_err(|e| fail(&dir.display().to_string(), e))
}

/// The man page of `cmd` and of each of its subcommands (not clap's `help`, whose
/// pages would only repeat the others), named as its display name says:
/// `mailseal-key-generate.1`.
fn pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        pages(sub, dir)?;
    }
    // Each page names the program and its version (a subcommand's would say only
    // its own name).
    clap_mangen::Man::new(cmd.clone())
        .source(format!("mailseal {}", env!("CARGO_PKG_VERSION")))
        .generate_to(dir)
        .map(|_| ())
}

/// Starts the log on standard error. A command logs only errors unless `MAILSEAL_LOG`
/// says otherwise; a `server` (the gateway) logs a line per message by default. Lines
/// are text, or JSON objects (one a line, their fields at the top level) when
/// `MAILSEAL_LOG_FORMAT=json`, or else when `json` (the gateway's `[log] format`) says.
pub(crate) fn init_log(server: bool, json: bool) -> Result<(), Failure> {
    let json = match std::env::var("MAILSEAL_LOG_FORMAT") {
        Ok(v) if !v.is_empty() => match v.trim().to_ascii_lowercase().as_str() {
            "json" => true,
            "text" => false,
            _ => {
                return Err(Failure::new(
                    ExitCode::Usage,
                    format!(
                        "MAILSEAL_LOG_FORMAT: {}: text or json",
                        crate::error::quoted(&v)
                    ),
                ))
            }
        },
        _ => json,
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("MAILSEAL_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if server { "info" } else { "error" })
    });
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init()
    } else {
        builder.try_init()
    };
    Ok(())
}

/// The most characters of an error line the command line prints.
pub(crate) const ERROR_LINE_CHARS: usize = 1000;

fn run(cli: Cli) -> CliResult {
    let store = cli.store;
    match cli.command {
        Command::Compose(args) => compose::compose(args),
        Command::Aep(cmd) => aep::aep(cmd),
        Command::EdgeCloud(cmd) => edge_cloud::edge_cloud(cmd),
        Command::Dkim(cmd) => dkim::dkim(cmd),
        Command::Validate { mut files, input } => {
            files.extend(input);
            validate::validate(&files)
        }
        Command::Inspect { input, json } => {
            let raw = read_input(input.path())?;
            let name = input
                .path()
                .map_or("stdin".to_string(), |p| p.display().to_string());
            inspect::inspect(&name, &raw, json)
        }
        Command::Seal(args) => {
            let state = state_location(cli.state, store.clone())?;
            seal::seal(store_dir(store)?, &state, args)
        }
        Command::SignRequest(args) => {
            let state = state_location(cli.state, store.clone())?;
            offline::sign_request(store_dir(store)?, &state, args)
        }
        Command::Sign(args) => offline::sign(store_dir(store)?, args),
        Command::Assemble(args) => {
            let state = state_location(cli.state, store.clone())?;
            offline::assemble(store_dir(store)?, &state, args)
        }
        Command::SignLog(cmd) => offline::sign_log(store_dir(store)?, cmd),
        Command::Open(args) => {
            let state = state_location(cli.state, store.clone())?;
            receive::open(store_dir(store)?, &state, args)
        }
        Command::Key(cmd) => {
            let dir = store_dir(store)?;
            key::key(&home::Home::new(&dir, cli.state.as_deref()), dir, cmd)
        }
        Command::Stream(cmd) => {
            // The state of a store's own directory is read only where a store is.
            if cli.state.as_deref().is_none_or(str::is_empty) {
                store::require_existing(&store_dir(store.clone())?)?;
            }
            stream::run(&state_location(cli.state, store)?, cmd)
        }
        Command::Corpus(cmd) => corpus::run(store, cmd),
        Command::Mls(mls::MlsCommand::Next { group, out, eml }) => {
            let state = state_location(cli.state, store.clone())?;
            receive::mls_next(store_dir(store)?, &state, group, out, eml)
        }
        Command::Mls(cmd) => {
            let dir = store_dir(store)?;
            mls::run(&home::Home::new(&dir, cli.state.as_deref()), &dir, cmd)
        }
        Command::Card(args) => {
            let dir = store_dir(store)?;
            card::card(&home::Home::new(&dir, cli.state.as_deref()), &dir, args)
        }
        Command::Demo => demo::run(),
        Command::Completions { shell } => completions(shell),
        Command::Man { out } => man(out.as_deref()),
        #[cfg(feature = "gateway")]
        Command::Gateway(args) => gateway::gateway(args),
        #[cfg(feature = "gateway")]
        Command::Queue(args) => queue::queue(args),
        #[cfg(feature = "bridge")]
        Command::Bridge(args) => bridge::bridge(args),
        Command::Sop { .. } => Err(Failure::new(
            ExitCode::Usage,
            "sop must be the first argument: mailseal sop SUBCOMMAND",
        )),
    }
}

/// `--store`, else `$MAILSEAL_HOME`, else `$XDG_DATA_HOME/mailseal`, else
/// `~/.local/share/mailseal`.
fn store_dir(flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    if let Some(p) = flag {
        return Ok(p);
    }
    crate::keystore::default_location().ok_or_else(|| {
        Failure::new(
            ExitCode::Usage,
            "no key store: pass --store or set MAILSEAL_HOME",
        )
    })
}

/// `--state`, else the store directory (its `mailseal.db`).
fn state_location(flag: Option<String>, store: Option<PathBuf>) -> Result<String, Failure> {
    // A token holds keys, not state: its state is the default store directory's.
    let store = store.filter(|s| !s.to_string_lossy().starts_with("pkcs11:"));
    match flag.filter(|s| !s.is_empty()) {
        Some(s) => Ok(s),
        None => Ok(store_dir(store)?.display().to_string()),
    }
}

/// The replay state at `location` for a command that records in it (a seal records
/// the request it sends): a state directory that does not exist yet (a token's
/// default, whose keys live elsewhere) is created owner-only first.
pub(crate) fn state_to_record(
    what: &str,
    location: &str,
) -> Result<Box<dyn crate::replay::ReplayStore>, Failure> {
    let is_dir = !location.contains("://") && !location.starts_with("sqlite:");
    let path = Path::new(location);
    if is_dir && !path.exists() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(|e| Failure::new(ExitCode::Other, format!("{what}: {location}: {e}")))?;
    }
    crate::replay::open_store(location).map_err(|e| Failure::from(what, e))
}

pub(crate) fn read_input(path: Option<&Path>) -> Result<Vec<u8>, Failure> {
    let limit = Limits::default().max_message_bytes as u64 + 1;
    let mut buf = Vec::new();
    let path = path.filter(|p| !input::is_stdin(p));
    let result = match path {
        // Sized from the file's length, so a large message is not read into a buffer
        // that doubled past it (one more read proves the end).
        Some(p) => std::fs::File::open(p).and_then(|f| {
            let len = f.metadata().map_or(0, |m| m.len()).min(limit);
            buf.reserve_exact(len as usize + 1);
            f.take(limit).read_to_end(&mut buf)
        }),
        None => {
            use std::io::IsTerminal;
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                // Not a silent wait: say what is read, and how to end it.
                eprintln!(
                    "mailseal: reading the message from the terminal (end with Ctrl-D; or name a file)"
                );
            }
            stdin.lock().take(limit).read_to_end(&mut buf)
        }
    };
    let name = path.map_or("stdin".to_string(), |p| p.display().to_string());
    result.map_err(|e| Failure::new(ExitCode::Other, format!("cannot read {name}: {e}")))?;
    Ok(buf)
}

pub(crate) fn write_output(path: Option<&Path>, data: &[u8]) -> CliResult {
    let result = match path {
        Some(p) => crate::receiver::deliver::write_file_atomically(p, data)
            .map_err(|e| std::io::Error::other(e.to_string())),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(data).and_then(|()| out.flush())
        }
    };
    let name = path.map_or("stdout".to_string(), |p| p.display().to_string());
    result.map_err(|e| Failure::new(ExitCode::Other, format!("cannot write {name}: {e}")))
}

/// The first line of a passphrase file (without its line end), wiped after use.
fn read_passphrase(path: &Path) -> Result<zeroize::Zeroizing<Vec<u8>>, Failure> {
    let mut bytes = zeroize::Zeroizing::new(std::fs::read(path).map_err(|e| {
        Failure::new(
            ExitCode::Usage,
            format!("passphrase file {}: {e}", path.display()),
        )
    })?);
    let end = bytes
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .unwrap_or(bytes.len());
    bytes.truncate(end);
    Ok(bytes)
}
