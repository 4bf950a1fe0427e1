//! `mailseal key import|list|export|generate`: the key store from the command line.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::exit::ExitCode;
use super::home::Home;
use super::store::Keys;
use super::{card, mls, read_input, read_passphrase, write_output, CliResult, Failure};

#[derive(Subcommand)]
pub(super) enum KeyCommand {
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
        /// With --agent-card: the certificate whose fingerprint (`key list`) is FPR may
        /// sign the cards of every address of DOMAIN (an operator key). Without one, a
        /// card's signer must name the card's own address.
        #[arg(
            long = "card-operator",
            value_name = "DOMAIN=FPR",
            requires = "agent_card"
        )]
        card_operator: Vec<String>,
        /// A JSON Web Key (public, or private: Ed25519, P-256, P-384) for the
        /// detached-jws profile, bound to the addresses of --email.
        #[arg(long, value_name = "FILE", requires = "email", conflicts_with = "did")]
        jwk: Option<PathBuf>,
        /// A DID whose keys speak for the addresses of --email: did:key and did:jwk are
        /// read offline, did:web is fetched over HTTPS (its document at
        /// https://HOST/.well-known/did.json or https://HOST/PATH/did.json).
        #[arg(long, value_name = "DID", requires = "email")]
        did: Option<String>,
        /// With --jwk or --did: the address the key speaks for (repeat for more). The
        /// binding is yours to declare: nothing in a JWK or DID names an address.
        #[arg(long, value_name = "ADDR")]
        email: Vec<String>,
        /// With a did:web: trust this CA certificate (PEM) besides the system's roots.
        #[arg(long, value_name = "FILE", requires = "did")]
        ca: Option<PathBuf>,
        /// With a did:web: allow a host on a loopback, private or link-local address.
        #[arg(long, requires = "did")]
        allow_private: bool,
        /// Import what changes what the store holds for an address (keys it does not
        /// hold, card keys gone, a lower minimum protection, an unsigned card after a
        /// signed one), whatever path put it there: a card, a JWK, a DID, or a
        /// certificate file naming an address the store already identifies (a pin, a
        /// held certificate or key, a domain its anchors speak for). Check with the
        /// agent first.
        #[arg(long)]
        accept_changed: bool,
        /// With --jwk or --did: the address the key is bound to now (repeat for each).
        /// A key bound to one address is bound to the addresses of --email only when
        /// --rebind names every address it is bound to now, e.g. `key import --jwk F
        /// --email new@example.com --rebind old@example.com`; the refusal names them.
        #[arg(long, value_name = "OLD-ADDR")]
        rebind: Vec<String>,
        /// Files.
        #[arg(required_unless_present_any = ["agent_card", "jwk", "did"])]
        files: Vec<PathBuf>,
    },
    /// Make a new key and certificate in the store (S/MIME: self-signed, issued by a CA
    /// in the store or in files, or a new CA).
    Generate(Box<GenerateArgs>),
    /// Write a certificate (PEM, or an armored OpenPGP certificate) for peers.
    Export {
        /// Its fingerprint (see `key list`).
        fingerprint: String,
        /// Public parts only: what export always writes (a certificate, an OpenPGP
        /// certificate without secret keys, a public JWK); never a private key.
        #[arg(long)]
        public: bool,
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
pub(super) struct GenerateArgs {
    /// What kind of key: smime, openpgp, mls (an MLS signature key and credential
    /// for group membership) or jws (a JWK for the detached-jws profile).
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
    /// S/MIME: p256 (default), p384, rsa2048, rsa3072, rsa4096, or ed25519 (with an
    /// X25519 key-agreement certificate beside it). JWS: eddsa (default, Ed25519),
    /// es256, es384, rs256 or ps256 (RSA 2048).
    #[arg(long)]
    algorithm: Option<String>,
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
    /// S/MIME only: also write a PKCS#10 certificate request (PEM) for the new key to
    /// this file, for a CA to issue a signing certificate from (`openssl x509 -req
    /// -copy_extensions copy`); importing the issued certificate binds it to the key,
    /// in the store or on the token.
    #[arg(long, value_name = "FILE", conflicts_with = "ca")]
    csr: Option<PathBuf>,
    /// S/MIME only: create the key pair on this PKCS#11 token (an RFC 7512 URI:
    /// `pkcs11:token=T;object=LABEL?module-path=LIB&pin-value=PIN`) instead of in the
    /// store: it is sensitive and never extractable; the store keeps the certificate
    /// and the URI without the PIN (give the PIN later by `pin-source` or
    /// `MAILSEAL_PKCS11_PIN`). Algorithms: p256, rsa2048, rsa3072, rsa4096.
    #[arg(long, value_name = "URI", conflicts_with = "ca")]
    pkcs11: Option<String>,
}

pub(super) fn print_entries(verb: &str, entries: &[crate::keystore::KeyEntry]) {
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

pub(super) fn generate_openpgp(
    store: &dyn crate::keystore::KeyStore,
    a: GenerateArgs,
) -> CliResult {
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

pub(super) fn generate(keys: &Keys, a: GenerateArgs) -> CliResult {
    let store = keys.store();
    match a.kind.as_str() {
        "smime" => {}
        "openpgp" => return generate_openpgp(store, a),
        "jws" => return generate_jws(store, a),
        other => {
            return Err(Failure::new(
                ExitCode::Usage,
                format!("key generate --kind {other}: smime, openpgp, mls or jws"),
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
        .as_deref()
        .unwrap_or("p256")
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
    if let (Some(csr), Some(id)) = (&a.csr, identities.first()) {
        let (alg, _) = crate::keystore::key_public(&id.private_key, "new key")
            .map_err(|e| Failure::from("generate", e))?;
        let key = crate::keystore::SecretKey::new(String::new(), alg, id.private_key.clone());
        write_csr(csr, &request, &id.certificate, &key)?;
    }
    let mut certs_pem = String::new();
    for id in &identities {
        let pem = crate::keystore::identity_pem(&id.certificate, &id.private_key)
            .map_err(|e| Failure::from("generate", e))?;
        let entries = store
            .import(pem.as_bytes(), "generated", a.ca)
            .map_err(|e| Failure::from("generate", e))?;
        print_entries("generated", &entries);
        certs_pem.push_str(
            &der::EncodePem::to_pem(&id.certificate, der::pem::LineEnding::LF)
                .map_err(|e| Failure::new(ExitCode::Other, format!("generate: {e}")))?,
        );
    }
    if let Some(out) = &a.cert_out {
        write_output(Some(out), certs_pem.as_bytes())?;
    }
    Ok(())
}

/// `key generate --kind jws`: a JWK bound to `--email`, its private key in the store.
fn generate_jws(store: &dyn crate::keystore::KeyStore, a: GenerateArgs) -> CliResult {
    use crate::jws::JwsAlgorithm;
    let email = a
        .email
        .as_deref()
        .ok_or_else(|| Failure::new(ExitCode::Usage, "key generate --kind jws needs --email"))?;
    let alg = match a.algorithm.as_deref().unwrap_or("eddsa") {
        "eddsa" | "ed25519" => JwsAlgorithm::EdDsa,
        "es256" | "p256" => JwsAlgorithm::Es256,
        "es384" | "p384" => JwsAlgorithm::Es384,
        "rs256" | "rsa2048" => JwsAlgorithm::Rs256,
        "ps256" => JwsAlgorithm::Ps256,
        other => {
            return Err(Failure::new(
                ExitCode::Usage,
                format!(
                "key generate --kind jws --algorithm {other}: eddsa, es256, es384, rs256 or ps256"
            ),
            ))
        }
    };
    let entry =
        crate::jws::jwk::generate(store, email, alg).map_err(|e| Failure::from("generate", e))?;
    print_entries("generated", std::slice::from_ref(&entry));
    if let Some(out) = &a.cert_out {
        let jwk = public_jwk_of(store, &entry.fingerprint)?;
        write_output(Some(out), jwk.as_bytes())?;
    }
    Ok(())
}

/// The public JWK stored under `fingerprint`, pretty JSON with a newline.
fn public_jwk_of(
    store: &dyn crate::keystore::KeyStore,
    fingerprint: &str,
) -> Result<String, Failure> {
    let records = store
        .jwk_identities()
        .map_err(|e| Failure::from("key export", e))?;
    let record = records
        .iter()
        .find(|r| r.fingerprint == fingerprint)
        .ok_or_else(|| {
            Failure::new(
                ExitCode::NoUsableKey,
                format!("key export: no certificate or JWK {fingerprint} in the store"),
            )
        })?;
    let value: serde_json::Value = serde_json::from_str(&record.jwk)
        .map_err(|e| Failure::new(ExitCode::Other, format!("key export: stored JWK: {e}")))?;
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

/// How `key import --jwk`/`--did` binds: the pins of the addresses and the options
/// that accept a change or move a key.
struct BindOptions<'a> {
    held: Vec<crate::identity::pins::Pin>,
    accept_changed: bool,
    rebind: &'a [String],
}

/// `key import --jwk FILE` or `--did DID`, bound to `emails` (compared with what the
/// store holds for each address, and never moved from another address without
/// --rebind: [`crate::jws::jwk::import`]).
fn import_jwk_or_did(
    store: &dyn crate::keystore::KeyStore,
    jwk: Option<&std::path::Path>,
    did: Option<&str>,
    emails: &[String],
    ca: Option<&std::path::Path>,
    allow_private: bool,
    bind: &BindOptions,
) -> CliResult {
    let import = |key: &crate::jws::Jwk, source: &str| {
        crate::jws::jwk::import(
            store,
            key,
            emails,
            source,
            &bind.held,
            bind.accept_changed,
            bind.rebind,
        )
        .map_err(|e| Failure::from("import", e))
    };
    if let Some(path) = jwk {
        let text = read_input(Some(path))?;
        let key = crate::jws::Jwk::parse(&text).map_err(|e| Failure::from("--jwk", e))?;
        let entry = import(&key, "jwk")?;
        print_entries("imported", std::slice::from_ref(&entry));
    }
    if let Some(did) = did {
        let keys = if did.starts_with("did:web:") {
            let mut fetch = crate::https::FetchOptions {
                allow_private,
                ..Default::default()
            };
            if let Some(ca) = ca {
                fetch
                    .add_roots_pem(&read_input(Some(ca))?)
                    .map_err(|e| Failure::from("--ca", e))?;
            }
            let found =
                crate::jws::did::resolve_web_at(did, &fetch, time::OffsetDateTime::now_utc())
                    .map_err(|e| Failure::from("--did", e))?;
            for s in &found.skipped {
                eprintln!("mailseal: {did}: not bound: {s}");
            }
            for s in &found.expiring {
                eprintln!(
                    "mailseal: {did}: bound, but the document says it ends: {s} (import the DID again then)"
                );
            }
            found.keys
        } else {
            crate::jws::did::resolve_offline(did).map_err(|e| Failure::from("--did", e))?
        };
        for key in &keys {
            let entry = import(key, did)?;
            print_entries("imported", std::slice::from_ref(&entry));
        }
    }
    Ok(())
}

/// `key generate --kind smime --pkcs11 URI`: the key pair on the token, the
/// certificate (signed by the token key, or by `issuer`) and the URI in the store.
pub(super) fn generate_on_token(
    store: &Keys,
    a: &GenerateArgs,
    uri: crate::keystore::Pkcs11Uri,
    request: &crate::smime::IdentityRequest,
    issuer: Option<&crate::smime::Issuer<'_>>,
) -> CliResult {
    use crate::keystore::{SecretKey, TokenKey, TokenKeyKind};
    use der::{Encode, EncodePem};
    let kind = match a.algorithm.as_deref().unwrap_or("p256") {
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
    if let Some(csr) = &a.csr {
        write_csr(csr, request, &cert, &key)?;
    }
    if let Some(out) = &a.cert_out {
        let pem = cert
            .to_pem(der::pem::LineEnding::LF)
            .map_err(|e| Failure::new(ExitCode::Other, format!("generate: {e}")))?;
        write_output(Some(out), pem.as_bytes())?;
    }
    Ok(())
}

/// Writes the PKCS#10 request for the key of `cert` (PEM) to `path`.
fn write_csr(
    path: &std::path::Path,
    request: &crate::smime::IdentityRequest,
    cert: &x509_cert::Certificate,
    key: &crate::keystore::SecretKey,
) -> CliResult {
    let email = request
        .email
        .as_deref()
        .ok_or_else(|| Failure::new(ExitCode::Usage, "--csr needs --email"))?;
    let der = crate::smime::certificate_request(email, request.common_name.as_deref(), cert, key)
        .map_err(|e| Failure::from("--csr", e))?;
    let pem = der::pem::encode_string("CERTIFICATE REQUEST", der::pem::LineEnding::LF, &der)
        .map_err(|e| Failure::new(ExitCode::Other, format!("--csr: {e}")))?;
    write_output(Some(path), pem.as_bytes())
}

pub(super) fn key(home: &Home, dir: PathBuf, cmd: KeyCommand) -> CliResult {
    if let KeyCommand::Generate(a) = &cmd {
        if a.kind == "mls" {
            let email = a.email.as_deref().ok_or_else(|| {
                Failure::new(ExitCode::Usage, "key generate --kind mls needs --email")
            })?;
            return mls::generate(home, &dir, email);
        }
    }
    // Only the commands that write keys make a store; the others refuse a path that
    // holds none, so a mistyped --store is named, not created.
    let keys = match &cmd {
        KeyCommand::Import { .. } | KeyCommand::Generate(_) => Keys::open_or_create(&dir)?,
        _ => Keys::open(&dir)?,
    };
    let store = keys.store();
    match cmd {
        KeyCommand::Import {
            trusted,
            passphrase_file,
            agent_card,
            require_signature,
            card_operator,
            jwk,
            did,
            email,
            ca,
            allow_private,
            accept_changed,
            rebind,
            files,
        } => {
            if !rebind.is_empty() && jwk.is_none() && did.is_none() {
                return Err(Failure::new(
                    ExitCode::Usage,
                    "--rebind moves a key imported with --jwk or --did: a card never moves one",
                ));
            }
            if jwk.is_some() || did.is_some() {
                let policies = home.load_policies()?;
                let held = email
                    .iter()
                    .map(|a| policies.pin(store, a))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| Failure::from("import", e))?;
                import_jwk_or_did(
                    store,
                    jwk.as_deref(),
                    did.as_deref(),
                    &email,
                    ca.as_deref(),
                    allow_private,
                    &BindOptions {
                        held,
                        accept_changed,
                        rebind: &rebind,
                    },
                )?;
            }
            if let Some(card_file) = &agent_card {
                let mut operators = crate::ext::agent_card::CardOperators::new();
                for o in &card_operator {
                    operators
                        .allow_text(o)
                        .map_err(|e| Failure::from("--card-operator", e))?;
                }
                let options = crate::ext::agent_card::ImportOptions::new()
                    .require_signature(require_signature)
                    .accept_changed(accept_changed);
                card::import(home, &keys, card_file, &options, &operators)?;
            }
            let passphrase = passphrase_file
                .as_deref()
                .map(read_passphrase)
                .transpose()?;
            // Every file is read first and compared with what the store holds as one
            // import, before anything is stored.
            let mut read = Vec::new();
            for f in &files {
                read.push((read_input(Some(f))?, f.display().to_string()));
            }
            if !read.is_empty() {
                let policies = home.load_policies()?;
                let pin_of = |a: &str| {
                    policies
                        .pin(store, a)
                        .map_err(|e| crate::identity::pins::PinError::Store {
                            address: a.to_string(),
                            reason: e.to_string(),
                        })
                };
                crate::identity::pins::check_import_files(
                    store,
                    &read,
                    passphrase.as_deref().map(|p| &p[..]),
                    trusted,
                    &pin_of,
                    accept_changed,
                    time::OffsetDateTime::now_utc(),
                )
                .map_err(|e| Failure::from("import", e))?;
            }
            for (bytes, name) in &read {
                let entries = store
                    .import_with_passphrase(
                        bytes,
                        name,
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
            if entries.is_empty() {
                eprintln!("mailseal: no keys in {}", dir.display());
            }
            // Which private keys are on a token (asked without opening one).
            let mut tokens = Vec::with_capacity(entries.len());
            for e in &entries {
                tokens.push(if e.has_private_key {
                    store
                        .token_key_uri(&e.fingerprint)
                        .map_err(|e| Failure::from("key list", e))?
                } else {
                    None
                });
            }
            let mut out = String::new();
            if json {
                let listed: Vec<serde_json::Value> = entries
                    .iter()
                    .zip(&tokens)
                    .map(|(e, token)| {
                        let mut v = serde_json::to_value(e).unwrap_or_default();
                        if let (Some(obj), Some(uri)) = (v.as_object_mut(), token) {
                            obj.insert("token".into(), uri.clone().into());
                        }
                        v
                    })
                    .collect();
                out = serde_json::to_string_pretty(&listed).unwrap_or_default();
                out.push('\n');
            } else {
                for (e, token) in entries.into_iter().zip(&tokens) {
                    out.push_str(&format!(
                        "{} {} {}{} {}\n",
                        e.fingerprint,
                        e.kind,
                        e.algorithm,
                        match (e.has_private_key, token) {
                            (true, Some(_)) => "+token",
                            (true, None) => "+secret",
                            _ => "",
                        },
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
        KeyCommand::Export {
            fingerprint,
            out,
            public: _,
        } => {
            let fingerprint = crate::keystore::resolve_fingerprint(store, &fingerprint)
                .map_err(|e| Failure::from("key export", e))?;
            let cert = keys
                .export_certificate(&fingerprint)
                .map_err(|e| Failure::from("key export", e))?;
            match cert {
                Some(cert) => write_output(out.as_deref(), &cert),
                None => {
                    let jwk = public_jwk_of(store, &fingerprint)?;
                    write_output(out.as_deref(), jwk.as_bytes())
                }
            }
        }
        KeyCommand::Delete { fingerprints } => {
            // Every prefix resolved before anything is deleted.
            let fingerprints = fingerprints
                .iter()
                .map(|f| crate::keystore::resolve_fingerprint(store, f))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Failure::from("key delete", e))?;
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
