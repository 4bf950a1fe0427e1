//! `mailseal seal`: a composed message through the library's `Sender`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::exit::ExitCode;
use super::home::Home;
use super::store::Keys;
use super::{read_input, CliResult, Failure};
use crate::message::{Limits, MailA2aMessage};

#[derive(Args)]
pub(super) struct SealArgs {
    /// Protection profile: smime, openpgp, mls or jws (detached-jws: signed only).
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
    /// Inside the encryption, base64 the machine part as on a 7-bit path, for a
    /// recipient that cannot read binary inner parts (default: 8bit or binary inside,
    /// RFC 8551 3.1.2, so a large message grows once, not twice).
    #[arg(long)]
    seven_bit_inside: bool,
    /// The signing time (RFC 3339; default now): stated in the signature, and the
    /// time the signing certificate or key must be valid at.
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// Repeat every Mail-A2A-* hint on the outer message (default: only the binding).
    #[arg(long)]
    outer_hints: bool,
    /// Sign with this key of the From address (its fingerprint as `key list` shows
    /// it, or a unique prefix; S/MIME, OpenPGP, detached-jws). Default: the newest
    /// usable one; an S/MIME address with keys both on a token and in the store
    /// needs it.
    #[arg(long, value_name = "FINGERPRINT")]
    signer: Option<String>,
    /// Sign as ADDR, one of the store's identities: the message's From must be ADDR,
    /// or nothing is signed (a store holding several identities never signs for one
    /// it was not asked to).
    #[arg(long = "as", value_name = "ADDR")]
    sign_as: Option<String>,
    /// The plain message (default: stdin).
    #[arg(long = "in")]
    input: Option<PathBuf>,
    /// The plain message (default: stdin); `--in FILE` says the same.
    #[arg(value_name = "FILE", conflicts_with = "input")]
    file: Option<PathBuf>,
    /// Output file (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(super) fn seal(dir: PathBuf, state: &str, a: SealArgs) -> CliResult {
    let profile: crate::profile::Profile = a
        .profile
        .parse()
        .map_err(|e: String| Failure::new(ExitCode::Usage, e))?;
    // The store first: a path that holds none is named before the input is judged.
    let keys = Keys::open(&dir)?;
    let raw = read_input(a.input.as_deref().or(a.file.as_deref()))?;
    // An AEP message (X-AEP-Type, no MailA2A part) is mapped first: AEP leaves
    // end-to-end protection to the payload layer, this provides it.
    let plain = if crate::ext::aep::is_aep(&raw) {
        crate::ext::aep::AepMessage::parse(&raw, &Limits::default())
            .and_then(|a| a.to_maila2a())
            .map_err(|e| Failure::from("seal (AEP)", e))?
    } else {
        // The input buffer becomes the envelope's text: a large input is not held twice.
        MailA2aMessage::parse_vec(raw, &Limits::default()).map_err(|e| Failure::from("seal", e))?
    };

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
    let home = Home::new(&dir, Some(state));
    let mut builder = crate::Sender::builder(keys.store())
        .peers(home.load_policies()?)
        .mls_lazy(home.lazy_mls());
    // The replay state is opened only when the seal records something in it.
    if crate::Sender::needs_replay(&plain) {
        builder = builder.replay_boxed(super::state_to_record("seal", state)?);
    }
    let sender = builder.build();
    let mut opts = crate::seal::SealOptions::new(profile);
    opts.sign_only = a.sign_only;
    opts.rsa_pss = a.rsa_pss;
    opts.binary_inside = !a.seven_bit_inside;
    opts.outer_hints = a.outer_hints;
    opts.group = a.group.clone();
    opts.signer = signer(&keys, profile, a.signer.as_deref())?;
    opts.sign_as = a.sign_as.clone();
    opts.signing_time =
        a.at.as_deref()
            .map(|s| {
                time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                    .map_err(|e| Failure::new(ExitCode::Usage, format!("--at {s}: {e}")))
            })
            .transpose()?;
    // Written as it is encoded; into a temporary file next to the output, renamed once
    // complete, so a failure leaves no partial message.
    let out = match a.out.as_deref() {
        None => None,
        Some(path) => {
            Some(crate::receiver::deliver::Target::of(path).map_err(|e| Failure::from("seal", e))?)
        }
    };
    match out {
        // A device or FIFO is written in place, never replaced: everything is sealed
        // before `seal_to` writes its first byte.
        Some(crate::receiver::deliver::Target::InPlace(device)) => {
            let written = std::fs::OpenOptions::new()
                .write(true)
                .open(&device)
                .map_err(|e| crate::SendError::from(crate::seal::SealError::Output(e)))
                .and_then(|f| {
                    let mut w = std::io::BufWriter::new(f);
                    sender.seal_to(&plain, &opts, &mut w)?;
                    w.flush()
                        .map_err(|e| crate::seal::SealError::Output(e).into())
                });
            written.map_err(|e| failure(e, &dir, profile))
        }
        // A symlink's final target is replaced, never the link.
        Some(crate::receiver::deliver::Target::File(path)) => {
            let path = path.as_path();
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
                return Err(failure(e, &dir, profile));
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
                .map_err(|e| failure(e, &dir, profile))
        }
    }
}

/// `--signer`, resolved to a whole fingerprint of the store.
pub(super) fn signer(
    keys: &Keys,
    profile: crate::profile::Profile,
    typed: Option<&str>,
) -> Result<Option<String>, Failure> {
    let Some(typed) = typed else {
        return Ok(None);
    };
    if profile == crate::profile::Profile::Mls {
        return Err(Failure::new(
            ExitCode::Usage,
            "--signer: an MLS message is signed by our leaf in the group (--group)",
        ));
    }
    crate::keystore::resolve_fingerprint(keys.store(), typed)
        .map(Some)
        .map_err(|e| Failure::from("--signer", e))
}

/// A seal's failure; one for want of a key says which store was looked in and how to
/// put a key there.
fn failure(
    e: crate::SendError,
    dir: &std::path::Path,
    profile: crate::profile::Profile,
) -> Failure {
    if ExitCode::of(&e) != ExitCode::NoUsableKey {
        return Failure::from("seal", e);
    }
    Failure::new(
        ExitCode::NoUsableKey,
        format!(
            "seal: {e} in the store {} (add one with `mailseal key generate --kind {} --email ADDRESS`, or `mailseal key import FILE`)",
            dir.display(),
            profile.token()
        ),
    )
}
