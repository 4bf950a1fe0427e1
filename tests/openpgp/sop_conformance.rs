//! `mailseal sop` on the cases an OpenPGP interoperability suite probes, built here with
//! Sequoia so that each is exact: what is not covered by a signature cannot spoil it,
//! a key signs only while its certificate says it may, the recipients' algorithm
//! preferences are followed (never below the policy).

use std::time::{Duration, SystemTime};

use sequoia_openpgp as openpgp;

use mailseal::openpgp::sop::{self, DataMode, SopError, Window};
use openpgp::cert::prelude::*;
use openpgp::packet::signature::subpacket::{Subpacket, SubpacketTag, SubpacketValue};
use openpgp::packet::signature::SignatureBuilder;
use openpgp::packet::{Packet, Signature, UserID};
use openpgp::parse::Parse;
use openpgp::serialize::SerializeInto;
use openpgp::types::{
    HashAlgorithm, KeyFlags, ReasonForRevocation, SignatureType, SymmetricAlgorithm,
};
use openpgp::Cert;
use zeroize::Zeroizing;

const DATA: &[u8] = b"Hello World :)";
const DAY: Duration = Duration::from_secs(24 * 3600);

/// A certificate with a signing-capable primary key (no subkeys), made `days_ago`.
fn signing_primary(days_ago: u64) -> Cert {
    let (cert, _) = CertBuilder::new()
        .set_creation_time(SystemTime::now() - DAY * days_ago as u32)
        .set_primary_key_flags(KeyFlags::empty().set_signing().set_certification())
        .add_userid("Bob <bob@sop.example>")
        .generate()
        .unwrap();
    cert
}

fn secret_bytes(cert: &Cert) -> Vec<u8> {
    cert.as_tsk().to_vec().unwrap()
}

fn public_bytes(cert: &Cert) -> Vec<u8> {
    cert.to_vec().unwrap()
}

/// `cert`'s primary key with its secret, ready to sign.
fn primary_pair(cert: &Cert) -> openpgp::crypto::KeyPair {
    cert.primary_key()
        .key()
        .clone()
        .parts_into_secret()
        .unwrap()
        .into_keypair()
        .unwrap()
}

/// A detached binary signature over `DATA` by `cert`'s primary key, made at `at`.
fn signature_at(cert: &Cert, at: SystemTime) -> Signature {
    let mut pair = primary_pair(cert);
    SignatureBuilder::new(SignatureType::Binary)
        .set_signature_creation_time(at)
        .unwrap()
        .sign_message(&mut pair, DATA)
        .unwrap()
}

fn bytes_of(sig: &Signature) -> Vec<u8> {
    Packet::from(sig.clone()).to_vec().unwrap()
}

fn verify(sig: &[u8], cert: &Cert) -> Result<Vec<sop::Verification>, SopError> {
    sop::verify(sig, &[public_bytes(cert)], DATA, Window::default())
}

/// An Issuer Fingerprint subpacket of a version no RFC defines yet.
fn future_issuer_fingerprint() -> Subpacket {
    // Sequoia does not write fingerprints it does not know: the body by hand (the
    // version octet, then the fingerprint).
    let mut body = vec![23u8];
    body.extend([0x23; 40]);
    Subpacket::new(
        SubpacketValue::Unknown {
            tag: SubpacketTag::IssuerFingerprint,
            body,
        },
        false,
    )
    .unwrap()
}

#[test]
fn an_unknown_subpacket_in_the_unhashed_area_does_not_spoil_a_good_signature() {
    let cert = signing_primary(10);
    let mut sig = signature_at(&cert, SystemTime::now() - DAY);
    assert_eq!(verify(&bytes_of(&sig), &cert).unwrap().len(), 1);
    sig.unhashed_area_mut()
        .add(future_issuer_fingerprint())
        .unwrap();
    let found = verify(&bytes_of(&sig), &cert).expect("still a good signature");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].certificate, cert.fingerprint().to_hex());
    // Added to the hashed area after signing, it changes what was signed: refused.
    let mut tampered = signature_at(&cert, SystemTime::now() - DAY);
    tampered
        .hashed_area_mut()
        .add(future_issuer_fingerprint())
        .unwrap();
    let r = verify(&bytes_of(&tampered), &cert);
    assert!(matches!(r, Err(SopError::NoSignature)), "{r:?}");
}

#[test]
fn an_unknown_subpacket_in_a_subkey_binding_does_not_spoil_the_subkey() {
    let (cert, _) = CertBuilder::new()
        .add_userid("Sub <sub@sop.example>")
        .add_signing_subkey()
        .generate()
        .unwrap();
    // Add the future Issuer Fingerprint to the unhashed area of the subkey binding.
    let mut packets: Vec<Packet> = cert.into_tsk().into_packets().collect();
    let mut changed = 0;
    for p in &mut packets {
        if let Packet::Signature(s) = p {
            if s.typ() == SignatureType::SubkeyBinding {
                s.unhashed_area_mut()
                    .add(future_issuer_fingerprint())
                    .unwrap();
                changed += 1;
            }
        }
    }
    assert_eq!(changed, 1);
    let cert = Cert::from_packets(packets.into_iter()).unwrap();
    let key = secret_bytes(&cert);
    let (_, signature) = sop::sign(&[key], &[], DATA, false).unwrap();
    let found = verify(&signature, &cert).expect("the subkey is bound");
    assert_eq!(found.len(), 1);
    assert_ne!(
        found[0].signing_key, found[0].certificate,
        "made by the subkey"
    );
}

/// The certificate of the "temporary validity" case: signing-capable from `t1`, not
/// from `t2` to `t3` (how: `variant`), then again from `t3`.
fn temporarily_invalid(variant: char, t1: SystemTime) -> Cert {
    let (cert, _) = CertBuilder::new()
        .set_creation_time(t1)
        .set_primary_key_flags(KeyFlags::empty().set_signing().set_certification())
        .generate()
        .unwrap();
    let t2 = t1 + DAY * 28;
    let t3 = t1 + DAY * 56;
    let mut pair = primary_pair(&cert);
    let uid = UserID::from("Bob <bob@sop.example>");
    let binding = |at: SystemTime, period: Option<Duration>| {
        let mut b = SignatureBuilder::new(SignatureType::PositiveCertification)
            .set_signature_creation_time(at)
            .unwrap()
            .set_key_flags(KeyFlags::empty().set_signing().set_certification())
            .unwrap()
            .set_preferred_hash_algorithms(vec![HashAlgorithm::SHA256])
            .unwrap();
        if let Some(p) = period {
            b = b.set_signature_validity_period(p).unwrap();
        }
        b
    };
    // The primary key (with its secret) and the User ID, without the direct-key
    // signature the builder made: only the bindings below say what the key may do.
    let primary = cert
        .primary_key()
        .key()
        .clone()
        .parts_into_secret()
        .unwrap();
    let mut packets: Vec<Packet> = vec![primary.into(), uid.clone().into()];
    match variant {
        // The User ID binding expires at t2; a new one is made at t3.
        'A' => {
            let sig = uid
                .bind(&mut pair, &cert, binding(t1, Some(DAY * 28)))
                .unwrap();
            packets.push(sig.into());
            let sig = uid.bind(&mut pair, &cert, binding(t3, None)).unwrap();
            packets.push(sig.into());
        }
        // The only User ID is revoked from t2, by a revocation that expires at t3.
        'B' => {
            let sig = uid.bind(&mut pair, &cert, binding(t1, None)).unwrap();
            packets.push(sig.into());
            let rev = uid
                .bind(
                    &mut pair,
                    &cert,
                    SignatureBuilder::new(SignatureType::CertificationRevocation)
                        .set_signature_creation_time(t2)
                        .unwrap()
                        .set_signature_validity_period(DAY * 28)
                        .unwrap()
                        .set_reason_for_revocation(
                            ReasonForRevocation::UIDRetired,
                            b"Temporary suspension",
                        )
                        .unwrap(),
                )
                .unwrap();
            packets.push(rev.into());
        }
        // The key itself is revoked from t2, by a revocation that expires at t3.
        _ => {
            let sig = uid.bind(&mut pair, &cert, binding(t1, None)).unwrap();
            packets.push(sig.into());
            let rev = SignatureBuilder::new(SignatureType::KeyRevocation)
                .set_signature_creation_time(t2)
                .unwrap()
                .set_signature_validity_period(DAY * 28)
                .unwrap()
                .set_reason_for_revocation(ReasonForRevocation::KeyRetired, b"Temporary")
                .unwrap()
                .sign_direct_key(&mut pair, None)
                .unwrap();
            packets.push(rev.into());
        }
    }
    Cert::from_packets(packets.into_iter()).unwrap()
}

#[test]
fn a_signature_counts_only_while_its_key_may_sign() {
    let now = SystemTime::now();
    let t1 = now - DAY * 100;
    for variant in ['A', 'B', 'C'] {
        let cert = temporarily_invalid(variant, t1);
        let public = Cert::from_bytes(&public_bytes(&cert)).unwrap();
        let at = |days: u64| t1 + DAY * days as u32;
        let cases = [
            (t1 - DAY * 14, false, "before the key existed"),
            (at(14), true, "while valid"),
            (at(42), false, "while not valid"),
            (at(70), true, "valid again"),
        ];
        for (when, good, what) in cases {
            let sig = bytes_of(&signature_at(&cert, when));
            let result = verify(&sig, &public);
            assert_eq!(
                result.is_ok(),
                good,
                "cert {variant}, signature {what}: {result:?}"
            );
            if !good {
                assert!(matches!(result, Err(SopError::NoSignature)));
            }
        }
    }
}

/// The symmetric algorithm of the first PKESK (v3) the message's holder decrypts:
/// read from the session key SOP reports.
fn cipher_of(message: &[u8], key: &[u8]) -> String {
    let decrypted = sop::decrypt(
        &sop::DecryptRequest {
            keys: &[key.to_vec()],
            session_key_out: true,
            ..Default::default()
        },
        message,
    )
    .unwrap();
    let text = decrypted.session_key.expect("asked for");
    text.split(':').next().unwrap().to_string()
}

/// A key whose certificate prefers `ciphers` and `hashes`.
fn key_preferring(ciphers: &[SymmetricAlgorithm], hashes: &[HashAlgorithm]) -> Cert {
    let (cert, _) = CertBuilder::general_purpose(Some("Pref <pref@sop.example>"))
        .set_cipher_suite(CipherSuite::Cv25519)
        .set_features(openpgp::types::Features::empty().set_seipdv1())
        .unwrap()
        .generate()
        .unwrap();
    // Replace the User ID binding with one stating the preferences.
    let mut pair = primary_pair(&cert);
    let uid = cert.userids().next().unwrap().userid().clone();
    let template = cert
        .userids()
        .next()
        .unwrap()
        .self_signatures()
        .next()
        .unwrap()
        .clone();
    let sig = uid
        .bind(
            &mut pair,
            &cert,
            SignatureBuilder::from(template)
                .set_signature_creation_time(SystemTime::now())
                .unwrap()
                .set_preferred_symmetric_algorithms(ciphers.to_vec())
                .unwrap()
                .set_preferred_hash_algorithms(hashes.to_vec())
                .unwrap(),
        )
        .unwrap();
    cert.insert_packets(Some(sig)).unwrap().0
}

#[test]
fn encrypt_and_sign_follow_the_recipients_preferences() {
    let aes128 = key_preferring(&[SymmetricAlgorithm::AES128], &[HashAlgorithm::SHA384]);
    let aes192 = key_preferring(
        &[SymmetricAlgorithm::AES192, SymmetricAlgorithm::AES128],
        &[HashAlgorithm::SHA512, HashAlgorithm::SHA384],
    );
    let encrypt = |to: &[&Cert], sign_with: &[Vec<u8>]| {
        let certs: Vec<Vec<u8>> = to.iter().map(|c| public_bytes(c)).collect();
        sop::encrypt(
            &sop::EncryptRequest {
                certs: &certs,
                sign_with,
                session_key_out: true,
                ..Default::default()
            },
            DATA,
        )
        .unwrap()
    };
    // One recipient: its first preference.
    let m = encrypt(&[&aes192], &[]);
    assert_eq!(cipher_of(&m.message, &secret_bytes(&aes192)), "8");
    assert!(m.session_key.unwrap().starts_with("8:"));
    // Two: the first both have (AES-128), readable by both.
    let signer = secret_bytes(&aes192);
    let m = encrypt(&[&aes192, &aes128], std::slice::from_ref(&signer));
    assert_eq!(cipher_of(&m.message, &secret_bytes(&aes128)), "7");
    assert_eq!(cipher_of(&m.message, &secret_bytes(&aes192)), "7");
    // The signature hashes with the first hash both recipients prefer (SHA-384).
    let hash = signature_hash_inside(&m.message, &aes128, &aes192);
    assert_eq!(hash, HashAlgorithm::SHA384);
    // A preference the policy refuses (3DES, IDEA) is skipped, never used.
    #[allow(deprecated)] // named to be refused
    let weak_ciphers = [SymmetricAlgorithm::TripleDES, SymmetricAlgorithm::IDEA];
    let weak = key_preferring(&weak_ciphers, &[HashAlgorithm::SHA1, HashAlgorithm::SHA256]);
    let m = encrypt(&[&weak], std::slice::from_ref(&secret_bytes(&weak)));
    assert_eq!(cipher_of(&m.message, &secret_bytes(&weak)), "7", "AES-128");
    assert_eq!(
        signature_hash_inside(&m.message, &weak, &weak),
        HashAlgorithm::SHA256
    );
    // A detached signature follows the signer's own preference, and micalg says so.
    let (micalg, sig) = sop::sign(&[secret_bytes(&aes192)], &[], DATA, false).unwrap();
    assert_eq!(micalg, "pgp-sha512");
    let pile = openpgp::PacketPile::from_bytes(&sig).unwrap();
    let Some(Packet::Signature(sig)) = pile.children().next() else {
        panic!("a signature packet")
    };
    assert_eq!(sig.hash_algo(), HashAlgorithm::SHA512);
}

/// The hash algorithm of `signer`'s signature inside an encrypted message to `holder`.
fn signature_hash_inside(message: &[u8], holder: &Cert, signer: &Cert) -> HashAlgorithm {
    use openpgp::parse::stream::{
        DecryptionHelper, DecryptorBuilder, MessageLayer, MessageStructure, VerificationHelper,
    };
    struct H(Cert, Cert, Option<HashAlgorithm>);
    impl VerificationHelper for H {
        fn get_certs(&mut self, _: &[openpgp::KeyHandle]) -> openpgp::Result<Vec<Cert>> {
            Ok(vec![self.1.clone()])
        }
        fn check(&mut self, s: MessageStructure) -> openpgp::Result<()> {
            for layer in s {
                if let MessageLayer::SignatureGroup { results } = layer {
                    for r in results.into_iter().flatten() {
                        self.2 = Some(r.sig.hash_algo());
                    }
                }
            }
            Ok(())
        }
    }
    impl DecryptionHelper for H {
        fn decrypt(
            &mut self,
            pkesks: &[openpgp::packet::PKESK],
            _: &[openpgp::packet::SKESK],
            sym: Option<SymmetricAlgorithm>,
            decrypt: &mut dyn FnMut(
                Option<SymmetricAlgorithm>,
                &openpgp::crypto::SessionKey,
            ) -> bool,
        ) -> openpgp::Result<Option<Cert>> {
            let policy = openpgp::policy::StandardPolicy::new();
            for ka in self
                .0
                .keys()
                .with_policy(&policy, None)
                .secret()
                .for_transport_encryption()
            {
                let mut pair = ka.key().clone().into_keypair()?;
                for p in pkesks {
                    if let Some((a, sk)) = p.decrypt(&mut pair, sym) {
                        if decrypt(a, &sk) {
                            return Ok(None);
                        }
                    }
                }
            }
            Err(anyhow::anyhow!("no key"))
        }
    }
    let policy = openpgp::policy::StandardPolicy::new();
    let mut d = DecryptorBuilder::from_bytes(message)
        .unwrap()
        .with_policy(&policy, None, H(holder.clone(), signer.clone(), None))
        .unwrap();
    std::io::copy(&mut d, &mut std::io::sink()).unwrap();
    d.into_helper().2.expect("signed")
}

#[test]
fn passwords_and_session_keys_decrypt() {
    let pw = Zeroizing::new(b"correct horse\n".to_vec());
    let m = sop::encrypt(
        &sop::EncryptRequest {
            passwords: std::slice::from_ref(&pw),
            session_key_out: true,
            ..Default::default()
        },
        DATA,
    )
    .unwrap();
    // The password as given (its line end dropped) and the session key both decrypt.
    for request in [
        sop::DecryptRequest {
            passwords: &[Zeroizing::new(b"correct horse".to_vec())],
            ..Default::default()
        },
        sop::DecryptRequest {
            passwords: &[Zeroizing::new(b"correct horse\r\n".to_vec())],
            ..Default::default()
        },
        sop::DecryptRequest {
            session_keys: &[Zeroizing::new(
                m.session_key.as_ref().unwrap().as_bytes().to_vec(),
            )],
            ..Default::default()
        },
    ] {
        let out = sop::decrypt(&request, &m.message).unwrap();
        assert_eq!(&out.plaintext[..], DATA);
    }
    // A wrong password and a wrong session key: CANNOT_DECRYPT, nothing released.
    let wrong_key = format!("9:{}", "00".repeat(32));
    for request in [
        sop::DecryptRequest {
            passwords: &[Zeroizing::new(b"wrong".to_vec())],
            ..Default::default()
        },
        sop::DecryptRequest {
            session_keys: &[Zeroizing::new(wrong_key.into_bytes())],
            ..Default::default()
        },
    ] {
        let e = sop::decrypt(&request, &m.message).err().expect("refused");
        assert_eq!(e.sop_code(), 29, "{e}");
    }
    // Malformed session keys are BAD_DATA.
    for text in ["9", "9:zz", "9:0011", "x:00"] {
        let e = sop::parse_session_key(text.as_bytes()).err().unwrap();
        assert_eq!(e.sop_code(), 41, "{text}");
    }
    // Text that is not UTF-8 where text is asked for: EXPECTED_TEXT.
    let e = sop::encrypt(
        &sop::EncryptRequest {
            passwords: std::slice::from_ref(&pw),
            mode: Some(DataMode::Text),
            ..Default::default()
        },
        b"\xff\xfe",
    )
    .err()
    .unwrap();
    assert_eq!(e.sop_code(), 53);
}
