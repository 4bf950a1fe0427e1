//! A `mailseal corpus run` adapter on an independent MLS implementation, AWS's
//! `mls-rs` (RustCrypto provider): the MLS layer of the corpus's MLS cases only.
//!
//! ```sh
//! cargo build --example corpus_adapter_mls_rs
//! mailseal corpus run --impl target/debug/examples/corpus_adapter_mls_rs CORPUS
//! ```
//!
//! It rebuilds the receiver from the case's portable join (`state/mls-join.json`,
//! `schemas/corpus-mls-join.schema.json`), never from mailseal's state file: the
//! KeyPackage and its two private keys go into mls-rs' KeyPackage store as if mls-rs
//! had made them, the signature key becomes its signing identity, and it joins by the
//! Welcome. It then processes the case's prior messages in order and judges the
//! message: `accept` when mls-rs decrypts and verifies it (and, for a Commit or a
//! Welcome, applies it), `refuse` otherwise. It is judged on each case's `crypto`
//! label. It reads the `message/mls` mails with a few lines of its own (the body,
//! base64), not with mailseal, and it cannot judge what lies above MLS (the MailA2A
//! binding, the authentication service's bindings, held and seen messages): the
//! corpus test lists the rules where that shows, each with its reason.
//!
//! Bob is configured as the corpus's receiver is: cipher suite 1, the binding
//! extension type (0xF2A2) known, three past epochs kept. Lifetimes are not checked
//! (no time is given to mls-rs), as a member joining by mail cannot expect its
//! KeyPackage's lifetime to cover the moment the Welcome arrives.

use std::path::Path;

use base64::Engine;
use mls_rs::client_builder::MlsConfig;
use mls_rs::crypto::{HpkeSecretKey, SignaturePublicKey, SignatureSecretKey};
use mls_rs::group::ReceivedMessage;
use mls_rs::identity::basic::{BasicCredential, BasicIdentityProvider};
use mls_rs::identity::SigningIdentity;
use mls_rs::storage_provider::in_memory::{InMemoryGroupStateStorage, InMemoryKeyPackageStorage};
use mls_rs::storage_provider::KeyPackageData;
use mls_rs::{CipherSuite, Client, CryptoProvider, Group, MlsMessage};
use serde_json::{json, Value};

/// The binding extension type of mailseal's authentication service (private use).
const BINDING: u16 = 0xF2A2;
/// Past epochs the corpus's receiver keeps.
const PAST_EPOCHS: usize = 3;

fn main() {
    let Some(case) = std::env::args().nth(1) else {
        eprintln!("usage: corpus_adapter_mls_rs CASE_DIR");
        std::process::exit(2);
    };
    println!("{}", judge(Path::new(&case)));
}

fn say(verdict: &str, reason: impl Into<String>) -> Value {
    json!({"verdict": verdict, "layer": "crypto", "reason": reason.into()})
}

/// The verdict JSON of the adapter protocol for the case in `dir`.
pub fn judge(dir: &Path) -> Value {
    match try_judge(dir) {
        Ok(v) => v,
        // A case this adapter cannot read at all is not a verdict on the message.
        Err(e) => say("skip", format!("cannot set the case up: {e}")),
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn b64(v: &Value, field: &str) -> Result<Vec<u8>, String> {
    let text = v[field]
        .as_str()
        .ok_or_else(|| format!("mls-join.json has no {field}"))?;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("{field}: {e}"))
}

/// The MLSMessage a `message/mls` mail carries (its body, base64), or why not.
fn mls_message(mail: &[u8]) -> Result<MlsMessage, String> {
    let at = mail
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no header section")?;
    let body: Vec<u8> = mail[at + 4..]
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| format!("the body is not base64: {e}"))?;
    MlsMessage::from_bytes(&bytes).map_err(|e| format!("not an MLSMessage: {e:?}"))
}

/// Bob as an mls-rs client, from the case's portable join.
fn client(join: &Value) -> Result<Client<impl MlsConfig>, String> {
    if join["cipherSuite"] != json!(1) {
        return Err(format!("cipher suite {}", join["cipherSuite"]));
    }
    let suite = CipherSuite::CURVE25519_AES128;
    let crypto = mls_rs_crypto_rustcrypto::RustCryptoProvider::default();
    let provider = crypto
        .cipher_suite_provider(suite)
        .ok_or("cipher suite 1 is not supported")?;
    let member = join["member"].as_str().ok_or("no member")?;
    let public = b64(join, "signaturePublicKey")?;
    // mls-rs keeps an Ed25519 secret key as the secret key and the public key.
    let mut secret = b64(join, "signatureSecretKey")?;
    secret.extend_from_slice(&public);
    let identity = SigningIdentity::new(
        BasicCredential::new(member.as_bytes().to_vec()).into_credential(),
        SignaturePublicKey::new(public),
    );
    // The KeyPackage as mls-rs stores its own: the KeyPackage itself (the MLSMessage
    // without its version and wire format), by its reference.
    let key_package_message = b64(join, "keyPackage")?;
    let key_package = MlsMessage::from_bytes(&key_package_message)
        .map_err(|e| format!("keyPackage: {e:?}"))?
        .into_key_package()
        .ok_or("keyPackage is not a KeyPackage")?;
    let reference = key_package
        .to_reference(&provider)
        .map_err(|e| format!("keyPackage: {e:?}"))?;
    let key_packages = InMemoryKeyPackageStorage::new();
    key_packages.insert(
        reference.to_vec(),
        KeyPackageData::new(
            key_package_message[4..].to_vec(),
            HpkeSecretKey::from(b64(join, "initPrivateKey")?),
            HpkeSecretKey::from(b64(join, "encryptionPrivateKey")?),
            u64::MAX,
        ),
    );
    let groups = InMemoryGroupStateStorage::new()
        .with_max_epoch_retention(PAST_EPOCHS)
        .map_err(|e| format!("{e:?}"))?;
    Ok(Client::builder()
        .crypto_provider(crypto)
        .identity_provider(BasicIdentityProvider)
        .extension_type(mls_rs::extension::ExtensionType::new(BINDING))
        .key_package_repo(key_packages)
        .group_state_storage(groups)
        .signing_identity(identity, SignatureSecretKey::new(secret), suite)
        .build())
}

fn try_judge(dir: &Path) -> Result<Value, String> {
    let label = read_json(&dir.join("expected.json"))?;
    if label["profile"] != "mls" {
        return Ok(say("skip", "not MLS"));
    }
    let Some(join_file) = label["mlsJoin"].as_str() else {
        return Ok(say("skip", "no portable MLS join"));
    };
    let join = read_json(&dir.join(join_file))?;
    let client = client(&join)?;
    let message = std::fs::read(dir.join("message.eml")).map_err(|e| e.to_string())?;
    let mut group: Option<Group<_>> = None;
    if join.get("welcome").is_some() {
        let welcome =
            MlsMessage::from_bytes(&b64(&join, "welcome")?).map_err(|e| format!("{e:?}"))?;
        let (mut g, _) = client
            .join_group(None, &welcome, None)
            .map_err(|e| format!("joining by the Welcome: {e:?}"))?;
        g.write_to_storage().map_err(|e| format!("{e:?}"))?;
        group = Some(g);
    }
    // The messages Bob received first, each kept as a receiver by mail keeps it
    // (the state written, which is when mls-rs lets go of epochs past the three kept).
    // One that fails here (a message of an epoch not reached) is left behind, as a
    // receiver without a hold would leave it.
    for name in label["prior"].as_array().into_iter().flatten() {
        let name = name.as_str().ok_or("a prior name that is not text")?;
        let mail = std::fs::read(dir.join(name)).map_err(|e| e.to_string())?;
        let (Ok(m), Some(g)) = (mls_message(&mail), group.as_mut()) else {
            continue;
        };
        if g.process_incoming_message(m).is_ok() {
            g.write_to_storage().map_err(|e| format!("{e:?}"))?;
        }
    }
    let m = match mls_message(&message) {
        Ok(m) => m,
        Err(e) => return Ok(say("refuse", e)),
    };
    if m.clone().into_key_package().is_some() {
        return Ok(say(
            "skip",
            "a KeyPackage alone: mls-rs checks one only when it adds it to a group",
        ));
    }
    Ok(match group.as_mut() {
        // Invited, not yet a member: the message is the Welcome.
        None => match client.join_group(None, &m, None) {
            Ok(_) => say("accept", "joined by the Welcome"),
            Err(e) => say("refuse", format!("{e:?}")),
        },
        Some(g) => match g.process_incoming_message(m) {
            Ok(ReceivedMessage::ApplicationMessage(_)) => say("accept", "an application message"),
            Ok(ReceivedMessage::Commit(_)) => say("accept", "a Commit, applied"),
            Ok(other) => say("accept", kind(&other)),
            Err(e) => say("refuse", format!("{e:?}")),
        },
    })
}

fn kind(m: &ReceivedMessage) -> &'static str {
    match m {
        ReceivedMessage::ApplicationMessage(_) => "an application message",
        ReceivedMessage::Commit(_) => "a Commit",
        ReceivedMessage::Proposal(_) => "a proposal",
        ReceivedMessage::GroupInfo(_) => "a GroupInfo",
        ReceivedMessage::Welcome => "a Welcome",
        ReceivedMessage::KeyPackage(_) => "a KeyPackage",
    }
}
