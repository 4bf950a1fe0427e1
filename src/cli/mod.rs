//! The `mailseal` command line: parse arguments, call the library, print, exit with the
//! codes of DESIGN.md. No protocol logic lives here.

mod card;
mod demo;
mod exit;
mod inspect;
mod mls;
mod receive;
mod sop;
mod store;
mod stream;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode as ProcessExit;

use clap::{Args, Parser, Subcommand};

use self::exit::ExitCode;
use crate::envelope::Envelope;
use crate::error::Classify;
use crate::message::{validate_message, Attachment, Limits, MailA2aMessage, Mailbox};
use store::Keys;

#[derive(Parser)]
#[command(
    name = "mailseal",
    version,
    about = "Seal and open MailA2A agent email (S/MIME 4.0, OpenPGP/MIME, MLS)"
)]
struct Cli {
    /// Key store: a directory, `sqlite:PATH` or `postgres://...` (default: $MAILSEAL_HOME, else
    /// $XDG_DATA_HOME/mailseal).
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Replay and stream state: `postgres://...` (shared by several gateways),
    /// `sqlite:PATH`, or a directory (default: the store's `mailseal.db`).
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
        /// Files or directories.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Show a message's layers, headers, parts and envelope.
    Inspect {
        /// The message.
        file: PathBuf,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Protect a plain MailA2A message (.eml) under a profile.
    Seal(SealArgs),
    /// Verify and open a message; prints the envelope JSON (or the inner .eml).
    Open(receive::OpenArgs),
    /// Manage keys and certificates.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Streams of replies: what is missing, and the events a closed gap released.
    #[command(subcommand)]
    Stream(stream::StreamCommand),
    /// DKIM: sign outbound mail, check inbound mail's signatures (a transport signal).
    #[command(subcommand)]
    Dkim(DkimCommand),
    /// AEP (Agent Email Protocol) mail to a plain MailA2A message and back.
    #[command(subcommand)]
    Aep(AepCommand),
    /// MLS groups: key packages, membership by mail, held messages.
    #[command(subcommand)]
    Mls(mls::MlsCommand),
    /// Print our A2A v1.0 Agent Card with the MailA2A interface and the #protection
    /// extension (profiles, certificates, MLS KeyPackage), or add them to a card.
    Card(card::CardArgs),
    /// The whole tour on a temporary store.
    Demo,
    /// The Stateless OpenPGP interface (`mailseal sop --help`), with SOP's exit codes.
    #[command(disable_help_flag = true)]
    Sop {
        /// SOP subcommand and arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Args)]
struct ComposeArgs {
    /// Sender address.
    #[arg(long, required_unless_present_any = ["payment_required", "payment_payload"],
          conflicts_with_all = ["payment_required", "payment_payload"])]
    from: Option<String>,
    /// Recipient addresses.
    #[arg(long, required_unless_present_any = ["payment_required", "payment_payload"],
          conflicts_with_all = ["payment_required", "payment_payload"])]
    to: Vec<String>,
    /// x402 step 1: the agent's PaymentRequiredError reply to --request, carrying this
    /// x402 PaymentRequired (JSON, kept byte for byte); From, To and thread come from
    /// the request.
    #[arg(long, value_name = "FILE", requires = "request", conflicts_with_all = ["input", "payment_payload", "settlement"])]
    payment_required: Option<PathBuf>,
    /// x402 step 2: the client's retry of --request with this x402 PaymentPayload:
    /// same operation, payload, idempotency key and correlation, a new messageId,
    /// serviceParameters.retry one more.
    #[arg(long, value_name = "FILE", requires = "request", conflicts_with_all = ["input", "settlement"])]
    payment_payload: Option<PathBuf>,
    /// The request (.eml, plain or as `open --eml` wrote it) a payment step answers.
    #[arg(long, value_name = "REQUEST.eml")]
    request: Option<PathBuf>,
    /// With --payment-payload: the agent's PaymentRequired reply (.eml), to thread
    /// the retry after it.
    #[arg(long, value_name = "REPLY.eml", requires = "payment_payload")]
    after: Option<PathBuf>,
    /// x402 step 3: add this x402 SettlementResponse to the response (or event)
    /// envelope of --in.
    #[arg(long, value_name = "FILE")]
    settlement: Option<PathBuf>,
    /// Carbon-copy addresses.
    #[arg(long)]
    cc: Vec<String>,
    /// Message-ID of the request this replies to (sets In-Reply-To and References).
    #[arg(long, value_name = "ID")]
    in_reply_to: Option<String>,
    /// Subject (default "A2A <kind>").
    #[arg(long)]
    subject: Option<String>,
    /// Human fallback text (informative only).
    #[arg(long)]
    text: Option<String>,
    /// Attach a file as `CID=PATH[;MEDIA/TYPE]`, referenced from the payload as `cid:CID`.
    #[arg(long, value_name = "CID=PATH")]
    attach: Vec<String>,
    /// The envelope JSON (default: stdin).
    #[arg(long = "in", value_name = "ENVELOPE.json")]
    input: Option<PathBuf>,
    /// Output file (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Subcommand)]
enum DkimCommand {
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
        /// The message (default: stdin).
        #[arg(long = "in")]
        input: Option<PathBuf>,
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
        /// The message (default: stdin).
        #[arg(long = "in")]
        input: Option<PathBuf>,
    },
}

fn dkim(cmd: DkimCommand) -> CliResult {
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
            let raw = read_input(input.as_deref())?;
            let signed = dkim::sign(&raw, &k).map_err(|e| Failure::from("dkim sign", e))?;
            write_output(out.as_deref(), &signed)
        }
        DkimCommand::Verify { keys, input } => {
            let map = dkim::KeyMap::from_json(&read_input(Some(&keys))?)
                .map_err(|e| Failure::from("dkim verify", e))?;
            let raw = read_input(input.as_deref())?;
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

#[derive(Subcommand)]
enum AepCommand {
    /// An AEP mail (X-AEP-Type, X-AEP-Conversation-Id, JSON or text body) as a plain
    /// MailA2A message (.eml), ready to seal (`seal` also takes AEP mail directly).
    ToMaila2a {
        /// The AEP mail (default: stdin).
        #[arg(long = "in")]
        input: Option<PathBuf>,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// A MailA2A message made from AEP (plain, or the inner message `open --eml`
    /// writes) as the AEP mail it came from.
    FromMaila2a {
        /// The MailA2A message (default: stdin).
        #[arg(long = "in")]
        input: Option<PathBuf>,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn aep(cmd: AepCommand) -> CliResult {
    use crate::ext::aep::AepMessage;
    match cmd {
        AepCommand::ToMaila2a { input, out } => {
            let raw = read_input(input.as_deref())?;
            let m = AepMessage::parse(&raw, &Limits::default())
                .and_then(|a| a.to_maila2a())
                .map_err(|e| Failure::from("aep", e))?;
            let bytes = m.to_rfc5322().map_err(|e| Failure::from("aep", e))?;
            write_output(out.as_deref(), &bytes)
        }
        AepCommand::FromMaila2a { input, out } => {
            let raw = read_input(input.as_deref())?;
            let m = MailA2aMessage::parse(&raw, &Limits::default())
                .map_err(|e| Failure::from("aep", e))?;
            let bytes = AepMessage::from_maila2a(&m)
                .and_then(|a| a.to_rfc5322())
                .map_err(|e| Failure::from("aep", e))?;
            write_output(out.as_deref(), &bytes)
        }
    }
}

#[derive(Args)]
struct SealArgs {
    /// Protection profile: smime, openpgp or mls.
    #[arg(long)]
    profile: String,
    /// mls: the group (its id, as `mls create` printed it).
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    group: Option<String>,
    /// Sign without encrypting.
    #[arg(long)]
    sign_only: bool,
    /// Sign with RSASSA-PSS instead of PKCS#1 v1.5 when the signing key is RSA.
    #[arg(long)]
    rsa_pss: bool,
    /// Repeat every Mail-A2A-* hint on the outer message (default: only the binding).
    #[arg(long)]
    outer_hints: bool,
    /// The plain message (default: stdin).
    #[arg(long = "in")]
    input: Option<PathBuf>,
    /// Output file (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Import X.509 certificates, PKCS#8 keys (plain or encrypted) and PKCS#12 files
    /// (PEM or DER).
    Import {
        /// Make CA certificates trust anchors.
        #[arg(long)]
        trusted: bool,
        /// Passphrase for encrypted keys and PKCS#12: the first line of this file.
        #[arg(long, value_name = "FILE")]
        passphrase_file: Option<PathBuf>,
        /// A peer's A2A Agent Card: imports the certificates of its #protection
        /// extension and records its minimum protection and MLS KeyPackages (in
        /// peers.json beside the store). Signatures on it must verify.
        #[arg(long, value_name = "CARD.json")]
        agent_card: Option<PathBuf>,
        /// With --agent-card: refuse a card without a signature by a certificate this
        /// store already holds for the peer or that chains to a trust anchor.
        #[arg(long, requires = "agent_card")]
        require_signature: bool,
        /// Files.
        #[arg(required_unless_present = "agent_card")]
        files: Vec<PathBuf>,
    },
    /// Make a new key and certificate in the store (S/MIME: self-signed, issued by a CA
    /// in the store or in files, or a new CA).
    Generate(Box<GenerateArgs>),
    /// Write a certificate (PEM, or an armored OpenPGP certificate) for peers.
    Export {
        /// Its fingerprint (see `key list`).
        fingerprint: String,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Delete everything stored under these fingerprints (certificates, keys, token
    /// references; a token's key itself stays on the token).
    Delete {
        /// Fingerprints (see `key list`).
        #[arg(required = true)]
        fingerprints: Vec<String>,
    },
    /// Change the passphrase that encrypts a `sqlite:` store's private keys (the
    /// current one from MAILSEAL_PASSPHRASE_FILE).
    Passwd {
        /// The new passphrase: the first line of this file.
        #[arg(long, value_name = "FILE")]
        new_passphrase_file: Option<PathBuf>,
        /// Store the keys without a passphrase.
        #[arg(long)]
        clear: bool,
    },
    /// List the store.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct GenerateArgs {
    /// What kind of key: smime, openpgp or mls (an MLS signature key and credential
    /// for group membership).
    #[arg(long)]
    kind: String,
    /// OpenPGP only: rfc4880 (default: a v4 Ed25519/Cv25519 key, which GnuPG 2.2
    /// reads) or rfc9580 (a v6 key; SEIPDv2 messages).
    #[arg(long)]
    profile: Option<String>,
    /// The email address the certificate names (required unless --ca).
    #[arg(long)]
    email: Option<String>,
    /// The subject common name (default: the address).
    #[arg(long)]
    name: Option<String>,
    /// p256 (default), p384, rsa2048, rsa3072, rsa4096, or ed25519 (with an X25519
    /// key-agreement certificate beside it).
    #[arg(long, default_value = "p256")]
    algorithm: String,
    /// Days of validity.
    #[arg(long, default_value_t = 365)]
    days: u32,
    /// Make a CA certificate, stored as a trust anchor with its key.
    #[arg(long)]
    ca: bool,
    /// Issue with the CA in the store with this fingerprint (see `key list`).
    #[arg(long, value_name = "FINGERPRINT", conflicts_with_all = ["issuer_cert", "issuer_key"])]
    issuer: Option<String>,
    /// Issue with this CA certificate file ...
    #[arg(long, value_name = "FILE", requires = "issuer_key")]
    issuer_cert: Option<PathBuf>,
    /// ... and this CA private key file (PKCS#8, PKCS#12 or encrypted PKCS#8).
    #[arg(long, value_name = "FILE", requires = "issuer_cert")]
    issuer_key: Option<PathBuf>,
    /// Passphrase for an encrypted issuer key: the first line of this file.
    #[arg(long, value_name = "FILE")]
    passphrase_file: Option<PathBuf>,
    /// Also write the new certificate(s) here (PEM, or an armored OpenPGP
    /// certificate), to give to peers.
    #[arg(long, value_name = "FILE", alias = "export-cert")]
    cert_out: Option<PathBuf>,
    /// S/MIME only: create the key pair on this PKCS#11 token (an RFC 7512 URI:
    /// `pkcs11:token=T;object=LABEL?module-path=LIB&pin-value=PIN`) instead of in the
    /// store: it is sensitive and never extractable; the store keeps the certificate
    /// and the URI without the PIN (give the PIN later by `pin-source` or
    /// `MAILSEAL_PKCS11_PIN`). Algorithms: p256, rsa2048, rsa3072, rsa4096.
    #[arg(long, value_name = "URI", conflicts_with = "ca")]
    pkcs11: Option<String>,
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
    let cli = match Cli::try_parse() {
        Ok(c) => c,
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
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("MAILSEAL_LOG"))
        .try_init();
    match run(cli) {
        Ok(()) => ProcessExit::SUCCESS,
        Err(f) => {
            eprintln!("mailseal: {}", f.line);
            ProcessExit::from(f.code.as_u8())
        }
    }
}

fn run(cli: Cli) -> CliResult {
    let store = cli.store;
    match cli.command {
        Command::Compose(args) => compose(args),
        Command::Aep(cmd) => aep(cmd),
        Command::Dkim(cmd) => dkim(cmd),
        Command::Validate { files } => validate(&files),
        Command::Inspect { file, json } => {
            let raw = read_input(Some(&file))?;
            inspect::inspect(&file.display().to_string(), &raw, json)
        }
        Command::Seal(args) => {
            let state = state_location(cli.state, store.clone())?;
            seal(store_dir(store)?, &state, args)
        }
        Command::Open(args) => {
            let state = state_location(cli.state, store.clone())?;
            receive::open(store_dir(store)?, &state, args)
        }
        Command::Key(cmd) => key(store_dir(store)?, cmd),
        Command::Stream(cmd) => stream::run(&state_location(cli.state, store)?, cmd),
        Command::Mls(mls::MlsCommand::Next { group, out, eml }) => {
            let state = state_location(cli.state, store.clone())?;
            receive::mls_next(store_dir(store)?, &state, group, out, eml)
        }
        Command::Mls(cmd) => mls::run(&store_dir(store)?, cmd),
        Command::Card(args) => card::card(&store_dir(store)?, args),
        Command::Demo => demo::run(),
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
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("MAILSEAL_HOME")
        .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("mailseal")))
        .or_else(|| env("HOME").map(|h| h.join(".local/share/mailseal")))
        .ok_or_else(|| {
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

pub(crate) fn read_input(path: Option<&Path>) -> Result<Vec<u8>, Failure> {
    let limit = Limits::default().max_message_bytes as u64 + 1;
    let mut buf = Vec::new();
    let result = match path {
        Some(p) => std::fs::File::open(p).and_then(|f| f.take(limit).read_to_end(&mut buf)),
        None => std::io::stdin().lock().take(limit).read_to_end(&mut buf),
    };
    let name = path.map_or("stdin".to_string(), |p| p.display().to_string());
    result.map_err(|e| Failure::new(ExitCode::Other, format!("cannot read {name}: {e}")))?;
    Ok(buf)
}

pub(crate) fn write_output(path: Option<&Path>, data: &[u8]) -> CliResult {
    let result = match path {
        Some(p) => std::fs::write(p, data),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(data).and_then(|()| out.flush())
        }
    };
    let name = path.map_or("stdout".to_string(), |p| p.display().to_string());
    result.map_err(|e| Failure::new(ExitCode::Other, format!("cannot write {name}: {e}")))
}

/// Media type of an attachment from its file extension (the common ones).
fn guess_media_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("pdf") => "application/pdf",
        Some("json") => "application/json",
        Some("txt") => "text/plain",
        Some("csv") => "text/csv",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("html" | "htm") => "text/html",
        _ => "application/octet-stream",
    }
}

/// The plain message a payment step answers.
fn read_plain(path: &Path, what: &str) -> Result<MailA2aMessage, Failure> {
    MailA2aMessage::parse(&read_input(Some(path))?, &Limits::default()).map_err(|e| {
        Failure::new(
            ExitCode::of(&e),
            format!(
                "{what} {}: {e} (give the plain message, or the inner one `open --eml` writes)",
                path.display()
            ),
        )
    })
}

/// The x402 steps 1 and 2, whose message is made from the request they answer.
fn compose_payment_step(a: &ComposeArgs) -> Result<Option<MailA2aMessage>, Failure> {
    use crate::ext::payment;
    let Some(request) = &a.request else {
        return Ok(None);
    };
    let request = read_plain(request, "--request")?;
    let fail = |e| Failure::from("compose", e);
    if let Some(f) = &a.payment_required {
        return payment::required_reply(&request, &read_input(Some(f))?)
            .map(Some)
            .map_err(fail);
    }
    if let Some(f) = &a.payment_payload {
        let after = a
            .after
            .as_deref()
            .map(|p| read_plain(p, "--after"))
            .transpose()?;
        return payment::paid_retry(
            &request,
            after.as_ref().map(|m| &m.headers),
            &read_input(Some(f))?,
        )
        .map(Some)
        .map_err(fail);
    }
    Err(Failure::new(
        ExitCode::Usage,
        "--request is for --payment-required or --payment-payload",
    ))
}

fn compose(a: ComposeArgs) -> CliResult {
    let mut msg = match compose_payment_step(&a)? {
        Some(m) => m,
        None => {
            let json = read_input(a.input.as_deref())?;
            let mut envelope =
                Envelope::from_json(&json).map_err(|e| Failure::from("envelope", e))?;
            if let Some(f) = &a.settlement {
                crate::ext::payment::with_settlement(&mut envelope, &read_input(Some(f))?)
                    .map_err(|e| Failure::from("compose", e))?;
            }
            let to: Vec<&str> = a.to.iter().map(String::as_str).collect();
            MailA2aMessage::new(a.from.as_deref().unwrap_or_default(), &to, envelope)
        }
    };
    if !a.cc.is_empty() {
        msg.headers.cc = a.cc.iter().map(|c| Mailbox::new(c)).collect();
    }
    if let Some(id) = a.in_reply_to {
        let id = id
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_string();
        let request = crate::message::Headers {
            message_id: Some(id),
            ..Default::default()
        };
        msg.in_reply_to(&request);
    }
    if a.subject.is_some() {
        msg.headers.subject = a.subject;
    }
    msg.text = a.text;
    for spec in &a.attach {
        let (cid, rest) = spec.split_once('=').ok_or_else(|| {
            Failure::new(
                ExitCode::Usage,
                format!("--attach {spec}: expected CID=PATH[;TYPE]"),
            )
        })?;
        let (path, media) = match rest.rsplit_once(';') {
            Some((p, t)) if t.contains('/') => (PathBuf::from(p), t.to_ascii_lowercase()),
            _ => (
                PathBuf::from(rest),
                guess_media_type(Path::new(rest)).to_string(),
            ),
        };
        let data = std::fs::read(&path).map_err(|e| {
            Failure::new(
                ExitCode::Other,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        msg.attachments.push(Attachment {
            content_id: cid.to_string(),
            content_type: media,
            filename: path
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string),
            data,
        });
    }
    let violations = msg.check(&Default::default());
    if let Some(first) = violations.first() {
        let more = if violations.len() > 1 {
            format!(" (+{} more)", violations.len() - 1)
        } else {
            String::new()
        };
        return Err(Failure::new(
            ExitCode::Malformed,
            format!("refusing to compose: {first}{more}"),
        ));
    }
    let bytes = msg.to_rfc5322().map_err(|e| Failure::from("compose", e))?;
    write_output(a.out.as_deref(), &bytes)
}

/// Every file to validate: files as given, directories' `.eml` files sorted.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| {
                Failure::new(ExitCode::Other, format!("cannot read {}: {e}", p.display()))
            })?;
            let mut files: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| {
                    f.is_file() && f.extension().is_some_and(|x| x.eq_ignore_ascii_case("eml"))
                })
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// One line for one file: `OK path`, `FAIL path: code at where: reason (A2A error)`,
/// or `SEALED path: ...` for a message under a protection profile, whose envelope only
/// `open` can reach (not a failure: validate needs no keys).
pub(crate) fn validate_line(name: &str, raw: &[u8]) -> (bool, String) {
    if let Some(profile) = crate::dispatch::detect_profile(raw) {
        return (
            true,
            format!(
                "SEALED {name}: protected under {profile}; `mailseal open` verifies it and checks its envelope"
            ),
        );
    }
    match validate_message(raw, &Limits::default()) {
        Err(e) => (
            false,
            format!("FAIL {name}: {}: {e} ({})", e.code(), e.a2a_error()),
        ),
        Ok((_, v)) if v.is_empty() => (true, format!("OK {name}")),
        Ok((_, v)) => {
            let more = if v.len() > 1 {
                format!(" (+{} more)", v.len() - 1)
            } else {
                String::new()
            };
            (false, format!("FAIL {name}: {}{more}", v[0]))
        }
    }
}

fn validate(paths: &[PathBuf]) -> CliResult {
    let files = expand(paths)?;
    let bar = if files.len() > 8 {
        let bar = indicatif::ProgressBar::new(files.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        None
    };
    let mut failed = 0usize;
    let mut out = std::io::stdout().lock();
    for f in &files {
        let name = f.display().to_string();
        let (ok, line) = match read_input(Some(f)) {
            Ok(raw) => validate_line(&name, &raw),
            Err(e) => (false, format!("FAIL {name}: {}", e.line)),
        };
        failed += usize::from(!ok);
        match &bar {
            Some(b) => {
                b.suspend(|| writeln!(out, "{line}").ok());
                b.inc(1);
            }
            None => {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if failed > 0 {
        return Err(Failure::new(
            ExitCode::Malformed,
            format!("{failed} of {} messages are not valid MailA2A", files.len()),
        ));
    }
    Ok(())
}

fn seal(dir: PathBuf, state: &str, a: SealArgs) -> CliResult {
    let profile: crate::profile::Profile = a
        .profile
        .parse()
        .map_err(|e: String| Failure::new(ExitCode::Usage, e))?;
    let raw = read_input(a.input.as_deref())?;
    // An AEP message (X-AEP-Type, no MailA2A part) is mapped first: AEP leaves
    // end-to-end protection to the payload layer, this provides it.
    let plain = if crate::ext::aep::is_aep(&raw) {
        crate::ext::aep::AepMessage::parse(&raw, &Limits::default())
            .and_then(|a| a.to_maila2a())
            .map_err(|e| Failure::from("seal (AEP)", e))?
    } else {
        MailA2aMessage::parse(&raw, &Limits::default()).map_err(|e| Failure::from("seal", e))?
    };
    drop(raw); // the parsed message owns what it needs: a large input is not held twice

    if profile == crate::profile::Profile::Mls {
        if a.group.is_none() {
            return Err(Failure::new(
                ExitCode::Usage,
                "seal --profile mls needs --group ID",
            ));
        }
        if a.sign_only {
            return Err(Failure::new(
                ExitCode::Usage,
                "--sign-only: MLS application messages are always encrypted",
            ));
        }
    } else if a.group.is_some() {
        return Err(Failure::new(
            ExitCode::Usage,
            "--group is for --profile mls",
        ));
    }
    let keys = Keys::open(&dir)?;
    let mut builder = crate::Sender::builder(keys.store())
        .peers(card::load_policies(&dir)?)
        .mls_lazy(mls::lazy_state(&dir));
    // The replay state is opened only when the seal records something in it.
    if crate::Sender::needs_replay(&plain) {
        builder = builder
            .replay_boxed(crate::replay::open_store(state).map_err(|e| Failure::from("seal", e))?);
    }
    let sender = builder.build();
    let mut opts = crate::seal::SealOptions::new(profile);
    opts.sign_only = a.sign_only;
    opts.rsa_pss = a.rsa_pss;
    opts.outer_hints = a.outer_hints;
    opts.group = a.group.clone();
    // Written as it is encoded; into a temporary file next to the output, renamed once
    // complete, so a failure leaves no partial message.
    match a.out.as_deref() {
        Some(path) => {
            let tmp = path.with_extension("partial");
            let written = std::fs::File::create(&tmp)
                .map_err(|e| crate::SendError::from(crate::seal::SealError::Output(e)))
                .and_then(|f| {
                    let mut w = std::io::BufWriter::new(f);
                    sender.seal_to(&plain, &opts, &mut w)?;
                    w.into_inner()
                        .map_err(|e| crate::seal::SealError::Output(e.into_error()))?
                        .sync_all()
                        .map_err(|e| crate::seal::SealError::Output(e).into())
                });
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(Failure::from("seal", e));
            }
            std::fs::rename(&tmp, path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                Failure::new(
                    ExitCode::Other,
                    format!("cannot write {}: {e}", path.display()),
                )
            })
        }
        None => {
            // Every check and all the cryptography finish before `seal_to` writes its
            // first byte: a refused message leaves stdout empty.
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            sender
                .seal_to(&plain, &opts, &mut w)
                .and_then(|()| {
                    w.flush()
                        .map_err(|e| crate::seal::SealError::Output(e).into())
                })
                .map_err(|e| Failure::from("seal", e))
        }
    }
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

fn print_entries(verb: &str, entries: &[crate::keystore::KeyEntry]) {
    for e in entries {
        eprintln!(
            "{verb} {} {}{} {} {}",
            e.kind,
            e.algorithm,
            if e.has_private_key { "+secret" } else { "" },
            e.fingerprint,
            e.emails.join(",")
        );
    }
}

fn generate_openpgp(store: &dyn crate::keystore::KeyStore, a: GenerateArgs) -> CliResult {
    let email = a.email.as_deref().ok_or_else(|| {
        Failure::new(ExitCode::Usage, "key generate --kind openpgp needs --email")
    })?;
    let profile: crate::openpgp::KeyProfile = a
        .profile
        .as_deref()
        .unwrap_or("rfc4880")
        .parse()
        .map_err(|e: String| Failure::new(ExitCode::Usage, e))?;
    let tsk = crate::openpgp::generate(email, a.name.as_deref(), profile)
        .map_err(|e| Failure::from("generate", e))?;
    let entries = store
        .import(&tsk, "generated", false)
        .map_err(|e| Failure::from("generate", e))?;
    print_entries("generated", &entries);
    if let Some(out) = &a.cert_out {
        let cert = crate::keystore::openpgp::armored_certificate(&tsk)
            .map_err(|e| Failure::from("generate", e))?;
        write_output(Some(out), &cert)?;
    }
    Ok(())
}

fn generate(keys: &Keys, a: GenerateArgs) -> CliResult {
    let store = keys.store();
    match a.kind.as_str() {
        "smime" => {}
        "openpgp" => return generate_openpgp(store, a),
        other => {
            return Err(Failure::new(
                ExitCode::Usage,
                format!("key generate --kind {other}: smime, openpgp or mls"),
            ))
        }
    }
    if a.profile.is_some() {
        return Err(Failure::new(
            ExitCode::Usage,
            "--profile is for --kind openpgp",
        ));
    }
    let kind: crate::smime::KeyKind = a
        .algorithm
        .parse()
        .map_err(|e: String| Failure::new(ExitCode::Usage, e))?;
    let request = crate::smime::IdentityRequest {
        email: a.email.clone(),
        common_name: a.name.clone(),
        kind,
        days: a.days,
        ca: a.ca,
    };
    let passphrase = a
        .passphrase_file
        .as_deref()
        .map(read_passphrase)
        .transpose()?;
    let issuer = crate::keystore::issuer(
        store,
        a.issuer.as_deref(),
        a.issuer_cert.as_deref().zip(a.issuer_key.as_deref()),
        passphrase.as_deref().map(|p| &p[..]),
    )
    .map_err(|e| Failure::from("issuer", e))?;
    let issuer = issuer
        .as_ref()
        .map(|(certificate, key)| crate::smime::Issuer { certificate, key });
    if let Some(uri) = &a.pkcs11 {
        let uri =
            crate::keystore::Pkcs11Uri::parse(uri).map_err(|e| Failure::from("--pkcs11", e))?;
        return generate_on_token(keys, &a, uri, &request, issuer.as_ref());
    }
    if let Some(uri) = keys.token_key_uri(a.email.as_deref().unwrap_or("mailseal")) {
        return generate_on_token(keys, &a, uri, &request, issuer.as_ref());
    }
    let identities = crate::smime::generate(&request, issuer.as_ref())
        .map_err(|e| Failure::from("generate", e))?;
    let mut certs_pem = String::new();
    for id in &identities {
        let pem = crate::keystore::identity_pem(&id.certificate, &id.private_key)
            .map_err(|e| Failure::from("generate", e))?;
        let entries = store
            .import(pem.as_bytes(), "generated", a.ca)
            .map_err(|e| Failure::from("generate", e))?;
        print_entries("generated", &entries);
        certs_pem.push_str(&pem[..pem.find("-----BEGIN PRIVATE KEY-----").unwrap_or(pem.len())]);
    }
    if let Some(out) = &a.cert_out {
        write_output(Some(out), certs_pem.as_bytes())?;
    }
    Ok(())
}

/// `key generate --kind smime --pkcs11 URI`: the key pair on the token, the
/// certificate (signed by the token key, or by `issuer`) and the URI in the store.
fn generate_on_token(
    store: &Keys,
    a: &GenerateArgs,
    uri: crate::keystore::Pkcs11Uri,
    request: &crate::smime::IdentityRequest,
    issuer: Option<&crate::smime::Issuer<'_>>,
) -> CliResult {
    use crate::keystore::{SecretKey, TokenKey, TokenKeyKind};
    use der::{Encode, EncodePem};
    let kind = match a.algorithm.as_str() {
        "p256" => TokenKeyKind::P256,
        "rsa2048" => TokenKeyKind::Rsa(2048),
        "rsa3072" => TokenKeyKind::Rsa(3072),
        "rsa4096" => TokenKeyKind::Rsa(4096),
        other => {
            return Err(Failure::new(
                ExitCode::Usage,
                format!("--pkcs11 --algorithm {other}: p256, rsa2048, rsa3072 or rsa4096"),
            ))
        }
    };
    let (spki, token) =
        TokenKey::generate(&uri, kind).map_err(|e| Failure::from("generate on token", e))?;
    let key = SecretKey::on_token(String::new(), std::sync::Arc::new(token));
    let cert = crate::smime::certify_token_key(request, &spki, &key, issuer)
        .map_err(|e| Failure::from("generate", e))?;
    let der = cert
        .to_der()
        .map_err(|e| Failure::new(ExitCode::Other, format!("generate: certificate: {e}")))?;
    // The certificate also goes on the token beside its key (CKA_ID = the key's
    // label), so the token alone is a signing identity (`--store pkcs11:...`).
    crate::keystore::store_certificate(&uri, &der, &uri.object, uri.object.as_bytes())
        .map_err(|e| Failure::from("generate", e))?;
    let entries = store
        .add_token_key(&der, &uri)
        .map_err(|e| Failure::from("generate", e))?;
    print_entries("generated on token", &entries);
    if let Some(out) = &a.cert_out {
        let pem = cert
            .to_pem(der::pem::LineEnding::LF)
            .map_err(|e| Failure::new(ExitCode::Other, format!("generate: {e}")))?;
        write_output(Some(out), pem.as_bytes())?;
    }
    Ok(())
}

fn key(dir: PathBuf, cmd: KeyCommand) -> CliResult {
    if let KeyCommand::Generate(a) = &cmd {
        if a.kind == "mls" {
            let email = a.email.as_deref().ok_or_else(|| {
                Failure::new(ExitCode::Usage, "key generate --kind mls needs --email")
            })?;
            return mls::generate(&dir, email);
        }
    }
    let keys = Keys::open(&dir)?;
    let store = keys.store();
    match cmd {
        KeyCommand::Import {
            trusted,
            passphrase_file,
            agent_card,
            require_signature,
            files,
        } => {
            if let Some(card_file) = &agent_card {
                card::import(&dir, &keys, card_file, require_signature)?;
            }
            let passphrase = passphrase_file
                .as_deref()
                .map(read_passphrase)
                .transpose()?;
            for f in &files {
                let bytes = read_input(Some(f))?;
                let name = f.display().to_string();
                let entries = store
                    .import_with_passphrase(
                        &bytes,
                        &name,
                        trusted,
                        passphrase.as_deref().map(|p| &p[..]),
                    )
                    .map_err(|e| Failure::from("import", e))?;
                print_entries("imported", &entries);
            }
            Ok(())
        }
        KeyCommand::Generate(args) => generate(&keys, *args),
        KeyCommand::List { json } => {
            let entries = store.list().map_err(|e| Failure::from("key list", e))?;
            let mut out = String::new();
            if json {
                out = serde_json::to_string_pretty(&entries).unwrap_or_default();
                out.push('\n');
            } else {
                for e in entries {
                    out.push_str(&format!(
                        "{} {} {}{} {}\n",
                        e.fingerprint,
                        e.kind,
                        e.algorithm,
                        if e.has_private_key { "+secret" } else { "" },
                        if e.emails.is_empty() {
                            "-".into()
                        } else {
                            e.emails.join(",")
                        }
                    ));
                }
            }
            write_output(None, out.as_bytes())
        }
        KeyCommand::Export { fingerprint, out } => {
            let cert = keys
                .export_certificate(&fingerprint)
                .map_err(|e| Failure::from("key export", e))?
                .ok_or_else(|| {
                    Failure::new(
                        ExitCode::NoUsableKey,
                        format!("key export: no certificate {fingerprint} in the store"),
                    )
                })?;
            write_output(out.as_deref(), &cert)
        }
        KeyCommand::Delete { fingerprints } => {
            for f in &fingerprints {
                if !keys.delete(f).map_err(|e| Failure::from("key delete", e))? {
                    return Err(Failure::new(
                        ExitCode::NoUsableKey,
                        format!("key delete: nothing stored under {f}"),
                    ));
                }
                println!("deleted {f}");
            }
            Ok(())
        }
        KeyCommand::Passwd {
            new_passphrase_file,
            clear,
        } => {
            let new = match (&new_passphrase_file, clear) {
                (Some(f), false) => Some(read_passphrase(f)?),
                (None, true) => None,
                _ => {
                    return Err(Failure::new(
                        ExitCode::Usage,
                        "key passwd: --new-passphrase-file FILE, or --clear",
                    ))
                }
            };
            let n = keys.set_passphrase(new.as_deref().map(|p| &p[..]))?;
            println!(
                "{n} private key(s) {}",
                if new.is_some() {
                    "encrypted under the new passphrase"
                } else {
                    "stored without a passphrase"
                }
            );
            Ok(())
        }
    }
}
