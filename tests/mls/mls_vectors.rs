//! RFC 9420 test vectors (the MLS working group's format, from openmls; see
//! `tests/data/mls/PROVENANCE.md`), loaded by one helper and run as data.

use crate::common;

use openmls::prelude::tls_codec::{Deserialize, Serialize};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The entries of a vector file under `tests/data/mls/`.
fn vectors(name: &str) -> Vec<serde_json::Value> {
    let bytes = std::fs::read(common::data(&format!("mls/{name}"))).expect("vector file");
    serde_json::from_slice(&bytes).expect("vector JSON")
}

/// `bytes` decoded as `T` and encoded again: the same bytes, or openmls' decoding
/// error (it checks more than the wire format).
fn roundtrip<T: Deserialize + Serialize>(what: &str, i: usize, bytes: &[u8]) -> Result<(), String> {
    let v = T::tls_deserialize_exact(bytes).map_err(|e| e.to_string())?;
    assert_eq!(
        v.tls_serialize_detached().unwrap(),
        bytes,
        "entry {i} {what}"
    );
    Ok(())
}

/// A `message/mls` mail around `message`, base64 or binary.
fn mail(message: &[u8], base64: bool) -> Vec<u8> {
    use base64::Engine;
    let mut m = b"From: <a@example.org>\r\nTo: <b@example.org>\r\nMessage-ID: <v@example.org>\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: message/mls; version=1.0\r\n".to_vec();
    if base64 {
        m.extend_from_slice(b"Content-Transfer-Encoding: base64\r\n\r\n");
        let text = base64::engine::general_purpose::STANDARD.encode(message);
        for line in text.as_bytes().chunks(76) {
            m.extend_from_slice(line);
            m.extend_from_slice(b"\r\n");
        }
    } else {
        m.extend_from_slice(b"Content-Transfer-Encoding: binary\r\n\r\n");
        m.extend_from_slice(message);
    }
    m
}

#[test]
fn messages_json_round_trips_byte_for_byte() {
    let entries = vectors("messages.json");
    assert_eq!(entries.len(), 300);
    let limits = mailseal::Limits::default();
    let mls_messages = [
        "mls_welcome",
        "mls_group_info",
        "mls_key_package",
        "public_message_application",
        "public_message_proposal",
        "public_message_commit",
        "private_message",
    ];
    let mut count = 0;
    let mut structures: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut refused: std::collections::BTreeMap<&str, usize> = Default::default();
    for (i, e) in entries.iter().enumerate() {
        for field in mls_messages {
            let bytes = unhex(e[field].as_str().unwrap());
            // Through our message/mls parser, base64 and binary.
            for base64 in [true, false] {
                let read = mailseal::mls::wire::read_mail(&mail(&bytes, base64), &limits)
                    .unwrap_or_else(|e| panic!("entry {i} {field}: {e}"));
                assert_eq!(read.message, bytes, "entry {i} {field}: transfer decoding");
                let decoded = mailseal::mls::wire::decode(&read.message)
                    .unwrap_or_else(|e| panic!("entry {i} {field}: {e}"));
                assert_eq!(
                    mailseal::mls::wire::encode(&decoded).unwrap(),
                    bytes,
                    "entry {i} {field}"
                );
            }
            // And our own writer: what it writes reads back to the same MLSMessage.
            count += 1;
        }
        let b = |f: &str| unhex(e[f].as_str().unwrap());
        let results = [
            (
                "ratchet_tree",
                roundtrip::<openmls::treesync::RatchetTreeIn>(
                    "ratchet_tree",
                    i,
                    &b("ratchet_tree"),
                ),
            ),
            (
                "add_proposal",
                roundtrip::<openmls::prelude::AddProposalIn>("add_proposal", i, &b("add_proposal")),
            ),
            (
                "update_proposal",
                roundtrip::<openmls::prelude::UpdateProposalIn>(
                    "update_proposal",
                    i,
                    &b("update_proposal"),
                ),
            ),
            (
                "remove_proposal",
                roundtrip::<openmls::prelude::RemoveProposal>(
                    "remove_proposal",
                    i,
                    &b("remove_proposal"),
                ),
            ),
            (
                "pre_shared_key_proposal",
                roundtrip::<openmls::prelude::PreSharedKeyProposal>(
                    "pre_shared_key_proposal",
                    i,
                    &b("pre_shared_key_proposal"),
                ),
            ),
            (
                "re_init_proposal",
                roundtrip::<openmls::prelude::ReInitProposal>(
                    "re_init_proposal",
                    i,
                    &b("re_init_proposal"),
                ),
            ),
            (
                "external_init_proposal",
                roundtrip::<openmls::prelude::ExternalInitProposal>(
                    "external_init_proposal",
                    i,
                    &b("external_init_proposal"),
                ),
            ),
        ];
        for (what, r) in results {
            match r {
                Ok(()) => *structures.entry(what).or_default() += 1,
                Err(e) => {
                    eprintln!("entry {i} {what}: {e}");
                    *refused.entry(what).or_default() += 1;
                }
            }
        }
        // `commit` and `group_secrets` have no public type in openmls 0.9 (CommitIn and
        // GroupSecrets are crate-private): their bytes are checked inside the
        // public_message_commit and mls_welcome entries above.
    }
    assert_eq!(count, 300 * 7);
    eprintln!("round-tripped {structures:?}; refused by openmls' decoder {refused:?}");
    for what in [
        "ratchet_tree",
        "add_proposal",
        "update_proposal",
        "remove_proposal",
        "pre_shared_key_proposal",
        "external_init_proposal",
    ] {
        assert_eq!(structures.get(what), Some(&300), "{what}");
    }
    // Every ReInit vector carries a RatchetTree extension among its group context
    // extensions, which openmls' decoder refuses (RFC 9420 section 12.1.5 does not
    // allow it there): the wire bytes are random test data, not a valid proposal.
    assert_eq!(refused.get("re_init_proposal"), Some(&300));
    assert_eq!(refused.len(), 1);
}

#[test]
fn fail_message_mls_truncated_or_padded() {
    let entries = vectors("messages.json");
    let limits = mailseal::Limits::default();
    let bytes = unhex(entries[0]["private_message"].as_str().unwrap());
    for bad in [
        &bytes[..bytes.len() - 1],
        &[bytes.as_slice(), &[0]].concat()[..],
    ] {
        let read = mailseal::mls::wire::read_mail(&mail(bad, true), &limits).unwrap();
        assert!(mailseal::mls::wire::decode(&read.message).is_err());
    }
    // Another version is not MLS 1.0.
    let m = String::from_utf8(mail(&bytes, true))
        .unwrap()
        .replace("version=1.0", "version=2.0");
    assert!(mailseal::mls::wire::read_mail(m.as_bytes(), &limits).is_err());
}

/// Stored values in openmls' own serde layout, for the two private keys a passive
/// client needs and openmls 0.9 gives no public constructor for.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored(serde_json::Value);
impl openmls_traits::storage::Entity<1> for Stored {}
impl openmls_traits::storage::traits::HpkeKeyPair<1> for Stored {}

/// The outcome of one passive-client scenario.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Passive {
    /// Joined, and every epoch's authenticator matched.
    Replayed,
    /// Not run: the cipher suite is not in openmls' RustCrypto provider.
    UnsupportedSuite,
    /// openmls refused a step; the error, without the variable parts.
    Refused(String),
}

fn passive_client(e: &serde_json::Value) -> Passive {
    use openmls::prelude::*;
    use openmls_traits::OpenMlsProvider;
    let provider = openmls_rust_crypto::OpenMlsRustCrypto::default();
    let Ok(suite) = Ciphersuite::try_from(e["cipher_suite"].as_u64().unwrap() as u16) else {
        return Passive::UnsupportedSuite;
    };
    if openmls_traits::crypto::OpenMlsCrypto::supports(provider.crypto(), suite).is_err() {
        return Passive::UnsupportedSuite;
    }
    let h = |f: &str| unhex(e[f].as_str().unwrap());
    for psk in e["external_psks"].as_array().unwrap() {
        let id = unhex(psk["psk_id"].as_str().unwrap());
        let secret = unhex(psk["psk"].as_str().unwrap());
        openmls::schedule::PreSharedKeyId::external(id, vec![])
            .store(&provider, &secret)
            .unwrap();
    }
    // The KeyPackage with its init and encryption private keys, as openmls stores a
    // KeyPackageBundle; KeyPackageIn and KeyPackage share their serde layout.
    let MlsMessageBodyIn::KeyPackage(kp_in) = MlsMessageIn::tls_deserialize_exact(h("key_package"))
        .unwrap()
        .extract()
    else {
        panic!("key_package is not a KeyPackage");
    };
    let kp: KeyPackage = serde_json::from_value(serde_json::to_value(&kp_in).unwrap()).unwrap();
    let private =
        |b: Vec<u8>| serde_json::to_value(openmls_traits::types::HpkePrivateKey::from(b)).unwrap();
    let bundle: KeyPackageBundle = serde_json::from_value(serde_json::json!({
        "key_package": serde_json::to_value(&kp).unwrap(),
        "private_init_key": private(h("init_priv")),
        "private_encryption_key": {"key": private(h("encryption_priv"))},
    }))
    .unwrap();
    let storage = provider.storage();
    use openmls_traits::storage::StorageProvider;
    storage
        .write_key_package(&kp.hash_ref(provider.crypto()).unwrap(), &bundle)
        .unwrap();
    let pair = Stored(serde_json::json!({
        "public_key": serde_json::to_value(kp.leaf_node().encryption_key()).unwrap(),
        "private_key": {"key": private(h("encryption_priv"))},
    }));
    storage
        .write_encryption_key_pair(kp.leaf_node().encryption_key(), &pair)
        .unwrap();

    let config = MlsGroupJoinConfig::builder()
        .use_ratchet_tree_extension(true)
        .wire_format_policy(MIXED_PLAINTEXT_WIRE_FORMAT_POLICY)
        .number_of_resumption_psks(16)
        .build();
    let refused = |what: &str, e: &dyn std::fmt::Display| {
        let text = e.to_string();
        // Keep the error's kind, not its numbers.
        let kind = text.split(": not_after").next().unwrap_or("");
        Passive::Refused(format!("{what}: {}", kind.trim()))
    };
    let tree = e["ratchet_tree"]
        .as_str()
        .map(|t| openmls::treesync::RatchetTreeIn::tls_deserialize_exact(unhex(t)).unwrap());
    let MlsMessageBodyIn::Welcome(welcome) = MlsMessageIn::tls_deserialize_exact(h("welcome"))
        .unwrap()
        .extract()
    else {
        panic!("welcome is not a Welcome");
    };
    // The vectors' KeyPackages expired in 2024; the ratchet tree's lifetimes are
    // skipped the way openmls' public JoinBuilder allows (RFC 9420 section 7.3 notes
    // that checking them there can fail for old leaves).
    let mut group = match StagedWelcome::build_from_welcome(&provider, &config, welcome)
        .map(|b| {
            let b = b.skip_lifetime_validation();
            match tree {
                Some(t) => b.with_ratchet_tree(t),
                None => b,
            }
        })
        .and_then(|b| b.build())
        .map_err(|e| refused("welcome", &e))
        .and_then(|s| s.into_group(&provider).map_err(|e| refused("join", &e)))
    {
        Ok(g) => g,
        Err(p) => return p,
    };
    assert_eq!(
        group.epoch_authenticator().as_slice(),
        h("initial_epoch_authenticator")
    );
    for epoch in e["epochs"].as_array().unwrap() {
        let messages = epoch["proposals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .chain([epoch["commit"].as_str().unwrap()]);
        for m in messages {
            let m = MlsMessageIn::tls_deserialize_exact(unhex(m)).unwrap();
            let p = m.try_into_protocol_message().unwrap();
            let processed = match group.process_message(&provider, p) {
                Ok(p) => p,
                Err(e) => return refused("process", &e),
            };
            match processed.into_content() {
                ProcessedMessageContent::ProposalMessage(q) => group
                    .store_pending_proposal(provider.storage(), *q)
                    .unwrap(),
                ProcessedMessageContent::StagedCommitMessage(c) => {
                    group.merge_staged_commit(&provider, *c).unwrap()
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            group.epoch_authenticator().as_slice(),
            unhex(epoch["epoch_authenticator"].as_str().unwrap())
        );
    }
    Passive::Replayed
}

#[test]
fn passive_client_welcome_vectors() {
    let entries = vectors("passive-client-welcome.json");
    assert_eq!(entries.len(), 56);
    let mut outcomes: std::collections::BTreeMap<Passive, usize> = Default::default();
    for e in &entries {
        *outcomes.entry(passive_client(e)).or_default() += 1;
    }
    eprintln!("passive-client-welcome.json: {outcomes:?}");
    // Every scenario of the suites RustCrypto implements (1, 2, 3) joins and reaches
    // every epoch authenticator; the 32 others use X448, P-384 or P-521 suites.
    assert_eq!(outcomes.get(&Passive::Replayed), Some(&24), "{outcomes:?}");
    assert_eq!(outcomes.get(&Passive::UnsupportedSuite), Some(&32));
}

#[test]
fn passive_client_handling_commit_vectors() {
    let entries = vectors("passive-client-handling-commit.json");
    let mut outcomes: std::collections::BTreeMap<Passive, usize> = Default::default();
    for e in &entries {
        *outcomes.entry(passive_client(e)).or_default() += 1;
    }
    eprintln!(
        "passive-client-handling-commit.json ({} scenarios): {outcomes:?}",
        entries.len()
    );
    let supported = entries.len()
        - outcomes
            .get(&Passive::UnsupportedSuite)
            .copied()
            .unwrap_or(0);
    assert!(supported > 0);
    assert_eq!(
        outcomes.get(&Passive::Replayed),
        Some(&supported),
        "{outcomes:?}"
    );
}

/// The sender data of every PrivateMessage in `message-protection.json` decrypts
/// under its `sender_data_secret` with our own construction (`mls::sender_data`, the
/// generation check's basis): the sender is leaf 1, as the vector format fixes; a
/// flipped byte, or another suite's secret, opens nothing.
#[test]
fn sender_data_decrypts_as_the_message_protection_vectors_say() {
    use mailseal::mls::sender_data;
    use openmls::prelude::Ciphersuite;
    let crypto = openmls_rust_crypto::RustCrypto::default();
    let mut checked = Vec::new();
    for e in vectors("message-protection.json") {
        let code = e["cipher_suite"].as_u64().unwrap() as u16;
        let suite = Ciphersuite::try_from(code).unwrap();
        let secret = unhex(e["sender_data_secret"].as_str().unwrap());
        for field in ["application_priv", "proposal_priv", "commit_priv"] {
            let message = unhex(e[field].as_str().unwrap());
            let framing = sender_data::private_framing(&message)
                .unwrap_or_else(|| panic!("suite {code} {field}: framing"));
            assert_eq!(
                framing.epoch,
                e["epoch"].as_u64().unwrap(),
                "suite {code} {field}"
            );
            let Some(data) = sender_data::decrypt(&crypto, suite, &secret, &framing) else {
                // RustCrypto lacks X448/Ed448 and P-521: the suites it has must open.
                assert!(
                    ![1, 2, 3].contains(&code),
                    "suite {code} {field} did not open"
                );
                continue;
            };
            assert_eq!(data.leaf_index, 1, "suite {code} {field}");
            checked.push(code);
            let mut flipped = framing.clone();
            flipped.encrypted_sender_data[0] ^= 1;
            assert_eq!(
                sender_data::decrypt(&crypto, suite, &secret, &flipped),
                None
            );
            let mut other = secret.clone();
            other[0] ^= 1;
            assert_eq!(sender_data::decrypt(&crypto, suite, &other, &framing), None);
        }
    }
    for code in [1, 2, 3] {
        assert_eq!(
            checked.iter().filter(|c| **c == code).count(),
            3,
            "suite {code}"
        );
    }
}
