//! `mailseal sop ...`: the Stateless OpenPGP command line
//! (draft-dkg-openpgp-stateless-cli), with SOP's own exit codes. Arguments only; the
//! operations are `crate::openpgp::sop`.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode as ProcessExit;

use clap::{Parser, Subcommand, ValueEnum};
use zeroize::Zeroizing;

use crate::openpgp::sop::{self, DataMode, SopError, Verification, Window};

#[derive(Parser)]
#[command(name = "mailseal sop", about = "Stateless OpenPGP (SOP) interface")]
struct Sop {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum As {
    Binary,
    Text,
    Clearsigned,
}

/// `--as` of `sign` and `encrypt`, which have no cleartext form.
#[derive(Clone, Copy, ValueEnum)]
enum SignAs {
    Binary,
    Text,
}

impl From<SignAs> for DataMode {
    fn from(a: SignAs) -> Self {
        match a {
            SignAs::Binary => DataMode::Binary,
            SignAs::Text => DataMode::Text,
        }
    }
}

impl From<As> for DataMode {
    fn from(a: As) -> Self {
        match a {
            As::Binary => DataMode::Binary,
            As::Text => DataMode::Text,
            As::Clearsigned => DataMode::Clearsigned,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Version information.
    Version {
        /// The OpenPGP library underneath.
        #[arg(long, conflicts_with_all = ["extended", "sop_spec"])]
        backend: bool,
        /// Everything known about the version.
        #[arg(long, conflicts_with = "sop_spec")]
        extended: bool,
        /// The SOP specification version implemented.
        #[arg(long)]
        sop_spec: bool,
    },
    /// The profiles of a subcommand.
    ListProfiles {
        /// generate-key or encrypt.
        subcommand: String,
    },
    /// Generate a secret key.
    GenerateKey {
        #[arg(long)]
        no_armor: bool,
        #[arg(long)]
        profile: Option<String>,
        #[arg(long)]
        signing_only: bool,
        #[arg(long, value_name = "PASSWORD")]
        with_key_password: Option<String>,
        userids: Vec<String>,
    },
    /// Extract the certificate from a secret key.
    ExtractCert {
        #[arg(long)]
        no_armor: bool,
    },
    /// Create detached signatures.
    Sign {
        #[arg(long)]
        no_armor: bool,
        #[arg(long = "as", value_enum, default_value = "binary")]
        as_: SignAs,
        #[arg(long, value_name = "MICALG")]
        micalg_out: Option<String>,
        #[arg(long, value_name = "PASSWORD")]
        with_key_password: Vec<String>,
        keys: Vec<String>,
    },
    /// Verify detached signatures.
    Verify {
        #[arg(long, value_name = "DATE")]
        not_before: Option<String>,
        #[arg(long, value_name = "DATE")]
        not_after: Option<String>,
        signatures: String,
        certs: Vec<String>,
    },
    /// Encrypt a message.
    Encrypt {
        #[arg(long = "as", value_enum, default_value = "binary")]
        as_: SignAs,
        #[arg(long)]
        no_armor: bool,
        #[arg(long, value_name = "PASSWORD")]
        with_password: Vec<String>,
        #[arg(long, value_name = "PASSWORD")]
        with_key_password: Vec<String>,
        #[arg(long, value_name = "KEYS")]
        sign_with: Vec<String>,
        #[arg(long)]
        profile: Option<String>,
        #[arg(long, value_name = "SESSIONKEY")]
        session_key_out: Option<String>,
        certs: Vec<String>,
    },
    /// Decrypt a message.
    Decrypt {
        #[arg(long, value_name = "SESSIONKEY")]
        session_key_out: Option<String>,
        #[arg(long, value_name = "SESSIONKEY")]
        with_session_key: Vec<String>,
        #[arg(long, value_name = "PASSWORD")]
        with_password: Vec<String>,
        #[arg(long, value_name = "PASSWORD")]
        with_key_password: Vec<String>,
        /// Where to write the verifications (`--verify-out` is its older name).
        #[arg(long, value_name = "VERIFICATIONS", alias = "verify-out")]
        verifications_out: Option<String>,
        #[arg(long, value_name = "CERTS")]
        verify_with: Vec<String>,
        #[arg(long, value_name = "DATE")]
        verify_not_before: Option<String>,
        #[arg(long, value_name = "DATE")]
        verify_not_after: Option<String>,
        keys: Vec<String>,
    },
    /// Add ASCII armor.
    Armor {
        /// Ignored: the label follows the data (older drafts).
        #[arg(long)]
        label: Option<String>,
    },
    /// Remove ASCII armor.
    Dearmor,
    /// Create an inline-signed message.
    InlineSign {
        #[arg(long)]
        no_armor: bool,
        #[arg(long = "as", value_enum, default_value = "binary")]
        as_: As,
        #[arg(long, value_name = "PASSWORD")]
        with_key_password: Vec<String>,
        keys: Vec<String>,
    },
    /// Verify an inline-signed message.
    InlineVerify {
        #[arg(long, value_name = "DATE")]
        not_before: Option<String>,
        #[arg(long, value_name = "DATE")]
        not_after: Option<String>,
        /// Where to write the verifications (`--verify-out` is its older name).
        #[arg(long, value_name = "VERIFICATIONS", alias = "verify-out")]
        verifications_out: Option<String>,
        certs: Vec<String>,
    },
}

/// Reads an input named on the command line: a file, or `@ENV:NAME`, or `@FD:N`.
fn input(name: &str) -> Result<Vec<u8>, SopError> {
    // SOP: a special designator that is also the name of a file is ambiguous.
    if (name.starts_with("@ENV:") || name.starts_with("@FD:"))
        && Path::new(name).symlink_metadata().is_ok()
    {
        return Err(SopError::AmbiguousInput(name.to_string()));
    }
    if let Some(var) = name.strip_prefix("@ENV:") {
        return std::env::var_os(var)
            .map(|v| v.into_encoded_bytes())
            .ok_or_else(|| SopError::MissingInput(name.to_string()));
    }
    if let Some(fd) = name.strip_prefix("@FD:") {
        if !fd.bytes().all(|b| b.is_ascii_digit()) || fd.is_empty() {
            return Err(SopError::UnsupportedSpecialPrefix(name.to_string()));
        }
        return std::fs::read(format!("/dev/fd/{fd}"))
            .map_err(|_| SopError::MissingInput(name.to_string()));
    }
    if name.starts_with('@') {
        return Err(SopError::UnsupportedSpecialPrefix(name.to_string()));
    }
    std::fs::read(name).map_err(|_| SopError::MissingInput(name.to_string()))
}

fn inputs(names: &[String]) -> Result<Vec<Vec<u8>>, SopError> {
    names.iter().map(|n| input(n)).collect()
}

fn passwords(names: &[String]) -> Result<Vec<Zeroizing<Vec<u8>>>, SopError> {
    names.iter().map(|n| input(n).map(Zeroizing::new)).collect()
}

/// An output named on the command line must not exist yet: checked before the work,
/// so that a refusal leaves nothing half-written.
fn not_there(name: &str) -> Result<(), SopError> {
    if name.starts_with('@') {
        return Err(SopError::UnsupportedSpecialPrefix(name.to_string()));
    }
    if Path::new(name).symlink_metadata().is_ok() {
        return Err(SopError::OutputExists(name.to_string()));
    }
    Ok(())
}

/// An output named on the command line: it must not exist yet.
fn output_file(name: &str, bytes: &[u8]) -> Result<(), SopError> {
    if name.starts_with('@') {
        return Err(SopError::UnsupportedSpecialPrefix(name.to_string()));
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(Path::new(name))
        .map_err(|_| SopError::OutputExists(name.to_string()))?;
    f.write_all(bytes)
        .map_err(|e| SopError::BadData(e.to_string()))
}

fn stdin() -> Result<Vec<u8>, SopError> {
    let mut data = Vec::new();
    std::io::stdin()
        .read_to_end(&mut data)
        .map_err(|e| SopError::BadData(e.to_string()))?;
    Ok(data)
}

/// A SOP DATE: `-` (no bound), `now`, an RFC 3339 time or a `YYYY-MM-DD` day.
fn date(s: Option<&str>) -> Result<Option<std::time::SystemTime>, SopError> {
    let Some(s) = s else { return Ok(None) };
    match s {
        "-" => Ok(None),
        "now" => Ok(Some(std::time::SystemTime::now())),
        _ => {
            use time::format_description::well_known::Rfc3339;
            let t = time::OffsetDateTime::parse(s, &Rfc3339)
                .or_else(|_| {
                    time::Date::parse(s, time::macros::format_description!("[year]-[month]-[day]"))
                        .map(|d| d.midnight().assume_utc())
                })
                .or_else(|_| {
                    time::PrimitiveDateTime::parse(
                        s,
                        time::macros::format_description!(
                            "[year][month][day]T[hour][minute][second]Z"
                        ),
                    )
                    .map(|d| d.assume_utc())
                })
                .map_err(|_| SopError::UnsupportedOption(format!("date {s}")))?;
            Ok(Some(t.into()))
        }
    }
}

fn lines(v: &[Verification]) -> Vec<u8> {
    v.iter()
        .flat_map(|v| format!("{v}\n").into_bytes())
        .collect()
}

fn run(command: Command) -> Result<Vec<u8>, SopError> {
    use sequoia_openpgp::armor::Kind;
    match command {
        Command::Version {
            backend,
            extended,
            sop_spec,
        } => Ok(if backend {
            format!("{}\n", sop::backend()).into_bytes()
        } else if extended {
            format!(
                "mailseal {}\n{}\n{}",
                env!("CARGO_PKG_VERSION"),
                sop::backend(),
                sop::POLICY
            )
            .into_bytes()
        } else if sop_spec {
            sop::SOP_SPEC.into()
        } else {
            format!("mailseal {}\n", env!("CARGO_PKG_VERSION")).into_bytes()
        }),
        Command::ListProfiles { subcommand } => Ok(sop::profiles(&subcommand)?
            .into_iter()
            .flat_map(|p| format!("{p}\n").into_bytes())
            .collect()),
        Command::GenerateKey {
            no_armor,
            profile,
            signing_only,
            with_key_password,
            userids,
        } => {
            // SOP: a password that locks a new key loses its trailing whitespace
            // (a password file's line end), and is tried both ways when unlocking.
            let password = with_key_password
                .as_deref()
                .map(input)
                .transpose()?
                .map(Zeroizing::new);
            let key = sop::generate_key(
                &userids,
                profile.as_deref(),
                signing_only,
                password.as_deref().map(|p| p.trim_ascii_end()),
            )?;
            sop::output(key, Kind::SecretKey, !no_armor)
        }
        Command::ExtractCert { no_armor } => {
            sop::output(sop::extract_cert(&stdin()?)?, Kind::PublicKey, !no_armor)
        }
        Command::Sign {
            no_armor,
            as_,
            micalg_out,
            with_key_password,
            keys,
        } => {
            let mode = DataMode::from(as_);
            let (micalg, sig) = sop::sign(
                &inputs(&keys)?,
                &passwords(&with_key_password)?,
                &stdin()?,
                mode == DataMode::Text,
            )?;
            if let Some(f) = micalg_out {
                output_file(&f, micalg.as_bytes())?;
            }
            sop::output(sig, Kind::Signature, !no_armor)
        }
        Command::Verify {
            not_before,
            not_after,
            signatures,
            certs,
        } => {
            let window = Window {
                not_before: date(not_before.as_deref())?,
                not_after: date(not_after.as_deref())?,
            };
            let found = sop::verify(&input(&signatures)?, &inputs(&certs)?, &stdin()?, window)?;
            Ok(lines(&found))
        }
        Command::Encrypt {
            as_,
            no_armor,
            with_password,
            with_key_password,
            sign_with,
            profile,
            session_key_out,
            certs,
        } => {
            if let Some(f) = &session_key_out {
                not_there(f)?;
            }
            let request = sop::EncryptRequest {
                certs: &inputs(&certs)?,
                passwords: &passwords(&with_password)?,
                sign_with: &inputs(&sign_with)?,
                key_passwords: &passwords(&with_key_password)?,
                mode: Some(as_.into()),
                profile: profile.as_deref(),
                session_key_out: session_key_out.is_some(),
            };
            let encrypted = sop::encrypt(&request, &stdin()?)?;
            if let (Some(f), Some(key)) = (session_key_out, &encrypted.session_key) {
                let line = Zeroizing::new(format!("{}\n", key.as_str()));
                output_file(&f, line.as_bytes())?;
            }
            sop::output(encrypted.message, Kind::Message, !no_armor)
        }
        Command::Decrypt {
            session_key_out,
            with_session_key,
            with_password,
            with_key_password,
            verifications_out,
            verify_with,
            verify_not_before,
            verify_not_after,
            keys,
        } => {
            // SOP: certificates to verify with and a place to report to come together.
            if verifications_out.is_some() == verify_with.is_empty() {
                return Err(SopError::IncompleteVerification(
                    "--verifications-out and --verify-with go together".into(),
                ));
            }
            let window = Window {
                not_before: date(verify_not_before.as_deref())?,
                not_after: date(verify_not_after.as_deref())?,
            };
            for f in [&session_key_out, &verifications_out].into_iter().flatten() {
                not_there(f)?;
            }
            let request = sop::DecryptRequest {
                keys: &inputs(&keys)?,
                key_passwords: &passwords(&with_key_password)?,
                passwords: &passwords(&with_password)?,
                session_keys: &passwords(&with_session_key)?,
                verify_with: &inputs(&verify_with)?,
                window,
                session_key_out: session_key_out.is_some(),
            };
            let decrypted = sop::decrypt(&request, &stdin()?)?;
            if let (Some(f), Some(key)) = (session_key_out, &decrypted.session_key) {
                let line = Zeroizing::new(format!("{}\n", key.as_str()));
                output_file(&f, line.as_bytes())?;
            }
            if let Some(f) = verifications_out {
                output_file(&f, &lines(&decrypted.verifications))?;
            }
            Ok(decrypted.plaintext.to_vec())
        }
        Command::Armor { .. } => sop::armor(&stdin()?),
        Command::Dearmor => sop::dearmor(&stdin()?),
        Command::InlineSign {
            no_armor,
            as_,
            with_key_password,
            keys,
        } => {
            let mode = DataMode::from(as_);
            if mode == DataMode::Clearsigned && no_armor {
                return Err(SopError::IncompatibleOptions(
                    "--as=clearsigned with --no-armor".into(),
                ));
            }
            let signed = sop::inline_sign(
                &inputs(&keys)?,
                &passwords(&with_key_password)?,
                &stdin()?,
                mode,
            )?;
            if mode == DataMode::Clearsigned {
                Ok(signed)
            } else {
                sop::output(signed, Kind::Message, !no_armor)
            }
        }
        Command::InlineVerify {
            not_before,
            not_after,
            verifications_out,
            certs,
        } => {
            let window = Window {
                not_before: date(not_before.as_deref())?,
                not_after: date(not_after.as_deref())?,
            };
            let (content, found) = sop::inline_verify(&inputs(&certs)?, &stdin()?, window)?;
            if let Some(f) = verifications_out {
                output_file(&f, &lines(&found))?;
            }
            Ok(content.to_vec())
        }
    }
}

/// Runs `mailseal sop ARGS` (`args` after `sop`).
pub(crate) fn main(args: Vec<std::ffi::OsString>) -> ProcessExit {
    let argv = std::iter::once(std::ffi::OsString::from("mailseal sop")).chain(args);
    let parsed = match Sop::try_parse_from(argv) {
        Ok(p) => p,
        Err(e) => {
            use clap::error::ErrorKind;
            let _ = e.print();
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                ErrorKind::InvalidSubcommand => 69,
                ErrorKind::MissingRequiredArgument | ErrorKind::MissingSubcommand => 19,
                ErrorKind::ArgumentConflict => 83,
                _ => 37,
            };
            return ProcessExit::from(code);
        }
    };
    match run(parsed.command) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(&out)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ProcessExit::from(1);
            }
            ProcessExit::SUCCESS
        }
        Err(e) => {
            eprintln!("mailseal sop: {e}");
            ProcessExit::from(e.sop_code())
        }
    }
}
