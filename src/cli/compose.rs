//! `mailseal compose`: an unprotected MailA2A message from an envelope, attachments and
//! threading flags, and the x402 steps built from the messages before them.

use std::path::{Path, PathBuf};

use clap::Args;

use super::exit::ExitCode;
use super::{read_input, write_output, CliResult, Failure};
use crate::envelope::Envelope;
use crate::message::{Attachment, Limits, MailA2aMessage, Mailbox};

#[derive(Args)]
pub(super) struct ComposeArgs {
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
    /// Subject (default: "A2A" and the message kind, as in "A2A request").
    #[arg(long)]
    subject: Option<String>,
    /// Human fallback text (informative only).
    #[arg(long)]
    text: Option<String>,
    /// Attach a file as `CID=PATH[;MEDIA/TYPE]`, referenced from the payload as `cid:CID`.
    #[arg(long, value_name = "CID=PATH")]
    attach: Vec<String>,
    /// The envelope JSON; `-` or none: standard input.
    #[arg(value_name = "ENVELOPE.json", conflicts_with_all = ["input", "payment_required", "payment_payload"])]
    file: Option<PathBuf>,
    /// The same as ENVELOPE.json.
    #[arg(long = "in", value_name = "ENVELOPE.json")]
    input: Option<PathBuf>,
    /// Output file (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Media type of an attachment from its file extension (the common ones).
pub(super) fn guess_media_type(path: &Path) -> &'static str {
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
pub(super) fn read_plain(path: &Path, what: &str) -> Result<MailA2aMessage, Failure> {
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
pub(super) fn compose_payment_step(a: &ComposeArgs) -> Result<Option<MailA2aMessage>, Failure> {
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

pub(super) fn compose(a: ComposeArgs) -> CliResult {
    let mut msg = match compose_payment_step(&a)? {
        Some(m) => m,
        None => {
            let json = read_input(a.input.as_deref().or(a.file.as_deref()))?;
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
    match violations.as_slice() {
        [] => {}
        [only] => {
            return Err(Failure::new(
                ExitCode::Malformed,
                format!("refusing to compose: {only}"),
            ))
        }
        all => {
            // Every one, a line each (escaped: a violation may quote the envelope), so
            // one run shows all there is to fix.
            for v in all {
                eprintln!(
                    "mailseal: violation: {}",
                    crate::error::shown(&v.to_string(), super::ERROR_LINE_CHARS)
                );
            }
            return Err(Failure::new(
                ExitCode::Malformed,
                format!(
                    "refusing to compose: {} violations, listed above",
                    all.len()
                ),
            ));
        }
    }
    let bytes = msg.to_rfc5322().map_err(|e| Failure::from("compose", e))?;
    write_output(a.out.as_deref(), &bytes)
}
