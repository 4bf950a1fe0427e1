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

use super::signers::{first_subkey_pair, primary_pair};

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

/// The OpenPGP interoperability suite's Bob (draft-bre-openpgp-samples), whose primary
/// key signs and whose subkey the binding cases bind as a signing subkey.
fn suite_bob() -> Cert {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/keys-fixtures/openpgp/bob@openpgp.example.sec.asc"
    );
    Cert::from_file(path).unwrap()
}

/// What the suite expects of a case: a good signature, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Good,
    Refused,
}

/// The cases whose verdict differs from the suite's expectation, as `name: got`.
fn misses(cases: &[(&str, Vec<u8>, Vec<u8>, Expect)]) -> Vec<String> {
    cases
        .iter()
        .filter_map(|(name, sig, cert, expect)| {
            let got = sop::verify(sig, std::slice::from_ref(cert), DATA, Window::default());
            let ok = match expect {
                Expect::Good => got.as_ref().is_ok_and(|v| v.len() == 1),
                Expect::Refused => matches!(got, Err(SopError::NoSignature)),
            };
            (!ok).then(|| format!("{name}: {got:?}"))
        })
        .collect()
}

fn sub(value: SubpacketValue, critical: bool) -> Subpacket {
    Subpacket::new(value, critical).unwrap()
}

/// The suite's unknown subpacket (tag 127, "value") and unknown notation.
fn unknown_subpacket(critical: bool) -> Subpacket {
    sub(
        SubpacketValue::Unknown {
            tag: SubpacketTag::Unknown(127),
            body: b"value".to_vec(),
        },
        critical,
    )
}

fn unknown_notation(critical: bool) -> Subpacket {
    use openpgp::packet::signature::subpacket::NotationData;
    sub(
        SubpacketValue::NotationData(NotationData::new(
            "unknown@tests.sequoia-pgp.org",
            b"value",
            None,
        )),
        critical,
    )
}

/// An Issuer Fingerprint of a fictitious version 6 with a 34-octet body, as the
/// suite writes it, and an Issuer no key has.
fn fictitious_v6_issuer_fingerprint() -> Subpacket {
    let mut body = vec![6u8];
    body.extend([0xAA; 34]);
    sub(
        SubpacketValue::Unknown {
            tag: SubpacketTag::IssuerFingerprint,
            body,
        },
        false,
    )
}

fn fake_issuer() -> Subpacket {
    sub(
        SubpacketValue::Issuer("AAAABBBBCCCCDDDD".parse().unwrap()),
        false,
    )
}

/// The suite's "Detached signature with Subpackets": Bob's primary key signs `DATA`
/// with exactly the `hashed` and `unhashed` subpackets (no creation time added when
/// `no_time`), verified against Bob's certificate.
#[test]
fn the_suites_detached_signatures_with_subpackets() {
    let bob = suite_bob();
    let fp = bob.fingerprint();
    let id = bob.keyid();
    let cert = public_bytes(&bob);
    let now = SystemTime::now();
    let time = |t: SystemTime| {
        sub(
            SubpacketValue::SignatureCreationTime(t.try_into().unwrap()),
            false,
        )
    };
    let issuer_fp = || sub(SubpacketValue::IssuerFingerprint(fp.clone()), false);
    let issuer = || sub(SubpacketValue::Issuer(id.clone()), false);
    let sign = |hashed: Vec<Subpacket>, unhashed: Vec<Subpacket>, no_time: bool| {
        let mut b = SignatureBuilder::new(SignatureType::Binary);
        if no_time {
            b = b.suppress_signature_creation_time().unwrap();
        }
        b.hashed_area_mut().clear();
        for s in hashed {
            b.hashed_area_mut().add(s).unwrap();
        }
        for s in unhashed {
            b.unhashed_area_mut().add(s).unwrap();
        }
        b.sign_message(&mut primary_pair(&bob), DATA).unwrap()
    };
    let case = |name, hashed, unhashed, no_time, expect| {
        (
            name,
            bytes_of(&sign(hashed, unhashed, no_time)),
            cert.clone(),
            expect,
        )
    };
    use Expect::*;
    let (day, week) = (DAY, DAY * 7);
    let cases = vec![
        case(
            "Base case",
            vec![time(now), issuer_fp()],
            vec![issuer()],
            false,
            Good,
        ),
        case(
            "Base case, unhashed issuer fingerprint",
            vec![time(now)],
            vec![issuer_fp(), issuer()],
            false,
            Good,
        ),
        case(
            "Base case, hashed issuer",
            vec![time(now), issuer_fp(), issuer()],
            vec![],
            false,
            Good,
        ),
        case(
            "No issuer fingerprint",
            vec![time(now)],
            vec![issuer()],
            false,
            Good,
        ),
        case(
            "No issuer fingerprint, hashed issuer",
            vec![time(now), issuer()],
            vec![],
            false,
            Good,
        ),
        case(
            "No issuer",
            vec![time(now), issuer_fp()],
            vec![],
            false,
            Good,
        ),
        case(
            "No issuer, unhashed issuer fingerprint",
            vec![time(now)],
            vec![issuer_fp()],
            false,
            Good,
        ),
        case(
            "Issuer, fake issuer",
            vec![time(now)],
            vec![issuer(), fake_issuer()],
            false,
            Good,
        ),
        case(
            "Fake issuer, issuer",
            vec![time(now)],
            vec![fake_issuer(), issuer()],
            false,
            Good,
        ),
        case(
            "Issuer, fake issuer, V6 issuer FP",
            vec![time(now)],
            vec![issuer(), fake_issuer(), fictitious_v6_issuer_fingerprint()],
            false,
            Good,
        ),
        case(
            "Fake issuer, issuer, V6 issuer FP",
            vec![time(now)],
            vec![fake_issuer(), issuer(), fictitious_v6_issuer_fingerprint()],
            false,
            Good,
        ),
        case(
            "Unhashed creation time",
            vec![issuer_fp()],
            vec![time(now), issuer()],
            true,
            Refused,
        ),
        case(
            "No creation time",
            vec![issuer_fp()],
            vec![issuer()],
            true,
            Refused,
        ),
        case(
            "Creation time given twice",
            vec![time(now), time(now), issuer_fp()],
            vec![issuer()],
            true,
            Good,
        ),
        case(
            "Future creation time",
            vec![time(now + day), issuer_fp()],
            vec![issuer()],
            true,
            Refused,
        ),
        case(
            "Future creation time given twice",
            vec![time(now + day), time(now + week), issuer_fp()],
            vec![issuer()],
            true,
            Refused,
        ),
        case(
            "Future creation time, backdated",
            vec![time(now + week), issuer_fp()],
            vec![issuer(), time(now)],
            true,
            Refused,
        ),
        case(
            "Unknown subpacket",
            vec![time(now), issuer_fp(), unknown_subpacket(false)],
            vec![issuer()],
            false,
            Good,
        ),
        case(
            "Critical unknown subpacket",
            vec![time(now), issuer_fp(), unknown_subpacket(true)],
            vec![issuer()],
            false,
            Refused,
        ),
        case(
            "Unknown subpacket, unhashed",
            vec![time(now), issuer_fp()],
            vec![issuer(), unknown_subpacket(false)],
            false,
            Good,
        ),
        case(
            "Unknown notation",
            vec![time(now), issuer_fp(), unknown_notation(false)],
            vec![issuer()],
            false,
            Good,
        ),
        case(
            "Critical unknown notation",
            vec![time(now), issuer_fp(), unknown_notation(true)],
            vec![issuer()],
            false,
            Refused,
        ),
        case(
            "Unknown notation, unhashed",
            vec![time(now), issuer_fp()],
            vec![issuer(), unknown_notation(false)],
            false,
            Good,
        ),
        // Not the suite's: the same malformed fingerprint where it is signed stays
        // refused (only what nothing signed is dropped).
        case(
            "V6 issuer FP, hashed",
            vec![time(now), issuer_fp(), fictitious_v6_issuer_fingerprint()],
            vec![issuer()],
            false,
            Refused,
        ),
    ];
    assert_eq!(cases.len(), 24);
    let missed = misses(&cases);
    assert!(missed.is_empty(), "{missed:#?}");
}

/// The suite's "Binding signature subpackets": Bob's subkey, bound as a signing subkey
/// (its primary only certifies), signs `DATA`; the certificate varies the subkey
/// binding (SKB) and the embedded primary key binding (PKB, the backsig).
#[test]
fn the_suites_binding_signature_subpackets() {
    let bob = suite_bob();
    let half_a_year_ago = SystemTime::now() - DAY * 182;
    let primary = bob.primary_key().key().clone();
    let subkey = bob.keys().subkeys().next().unwrap().key().clone();
    let mut primary_signer = primary_pair(&bob);
    let subkey_signer = || first_subkey_pair(&bob);
    let userid = bob.userids().next().unwrap().userid().clone();
    let userid_binding = userid
        .bind(
            &mut primary_signer,
            &bob,
            SignatureBuilder::new(SignatureType::PositiveCertification)
                .set_signature_creation_time(half_a_year_ago)
                .unwrap()
                .set_key_flags(KeyFlags::empty().set_certification())
                .unwrap()
                .set_preferred_hash_algorithms(vec![HashAlgorithm::SHA256, HashAlgorithm::SHA512])
                .unwrap()
                .set_preferred_symmetric_algorithms(vec![SymmetricAlgorithm::AES256])
                .unwrap(),
        )
        .unwrap();
    // The signature: Bob's subkey over DATA.
    let signature = bytes_of(
        &SignatureBuilder::new(SignatureType::Binary)
            .sign_message(&mut subkey_signer(), DATA)
            .unwrap(),
    );
    // A backsig made by the primary key instead of the subkey.
    let fake_backsig = SignatureBuilder::new(SignatureType::PrimaryKeyBinding)
        .set_signature_creation_time(half_a_year_ago)
        .unwrap()
        .sign_primary_key_binding(&mut primary_signer, &primary, &subkey)
        .unwrap();
    let backsig = |hashed: Vec<Subpacket>, unhashed: Vec<Subpacket>, drop_issuer: bool| {
        let mut b = SignatureBuilder::new(SignatureType::PrimaryKeyBinding)
            .set_signature_creation_time(half_a_year_ago)
            .unwrap();
        for s in hashed {
            b.hashed_area_mut().add(s).unwrap();
        }
        for s in unhashed {
            b.unhashed_area_mut().add(s).unwrap();
        }
        let mut sig = b
            .sign_primary_key_binding(&mut subkey_signer(), &primary, &subkey)
            .unwrap();
        if drop_issuer {
            sig.unhashed_area_mut().remove_all(SubpacketTag::Issuer);
        }
        sig
    };
    // The certificate whose subkey binding has the `hashed` and `unhashed` subpackets
    // and, when `embedded` is given, that backsig.
    let cert_with = |hashed: Vec<Subpacket>,
                     unhashed: Vec<Subpacket>,
                     embedded: Option<Signature>,
                     drop_issuer: bool| {
        let mut b = SignatureBuilder::new(SignatureType::SubkeyBinding)
            .set_signature_creation_time(half_a_year_ago)
            .unwrap()
            .set_key_flags(KeyFlags::empty().set_signing())
            .unwrap();
        for s in hashed {
            b.hashed_area_mut().add(s).unwrap();
        }
        for s in unhashed {
            b.unhashed_area_mut().add(s).unwrap();
        }
        if let Some(e) = embedded {
            b = b.set_embedded_signature(e).unwrap();
        }
        let mut binding = subkey.bind(&mut primary_pair(&bob), &bob, b).unwrap();
        if drop_issuer {
            binding.unhashed_area_mut().remove_all(SubpacketTag::Issuer);
        }
        let packets: Vec<Packet> = vec![
            primary.clone().into(),
            userid.clone().into(),
            userid_binding.clone().into(),
            subkey.clone().into(),
            binding.into(),
        ];
        packets
            .iter()
            .flat_map(|p| p.to_vec().unwrap())
            .collect::<Vec<u8>>()
    };
    let primary_fp = bob.fingerprint();
    let primary_id = bob.keyid();
    let good = || Some(backsig(vec![], vec![], false));
    let issuer_fp = || sub(SubpacketValue::IssuerFingerprint(primary_fp.clone()), false);
    let issuer = || sub(SubpacketValue::Issuer(primary_id.clone()), false);
    let embedded = |s: Signature| sub(SubpacketValue::EmbeddedSignature(s), false);
    use Expect::*;
    let mut cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        ("Base case", cert_with(vec![], vec![], good(), false), Good),
        (
            "SKB: Issuer FP only",
            cert_with(vec![], vec![issuer_fp()], good(), false),
            Good,
        ),
        (
            "SKB: Issuer, V6 issuer FP",
            cert_with(
                vec![],
                vec![issuer(), fictitious_v6_issuer_fingerprint()],
                good(),
                false,
            ),
            Good,
        ),
        (
            "SKB: Issuer, fake issuer",
            cert_with(vec![], vec![issuer(), fake_issuer()], good(), false),
            Good,
        ),
        (
            "SKB: Fake issuer, issuer",
            cert_with(vec![], vec![fake_issuer(), issuer()], good(), false),
            Good,
        ),
        (
            "SKB: Unknown subpacket",
            cert_with(vec![unknown_subpacket(false)], vec![], good(), false),
            Good,
        ),
        (
            "SKB: Critical unknown subpacket",
            cert_with(vec![unknown_subpacket(true)], vec![], good(), false),
            Refused,
        ),
        (
            "SKB: Unknown subpacket, unhashed",
            cert_with(vec![], vec![unknown_subpacket(false)], good(), false),
            Good,
        ),
        (
            "SKB: Unknown notation",
            cert_with(vec![unknown_notation(false)], vec![], good(), false),
            Good,
        ),
        (
            "SKB: Critical unknown notation",
            cert_with(vec![unknown_notation(true)], vec![], good(), false),
            Refused,
        ),
        (
            "SKB: Unknown notation, unhashed",
            cert_with(vec![], vec![unknown_notation(false)], good(), false),
            Good,
        ),
        (
            "SKB: Backsig, fake backsig",
            cert_with(
                vec![],
                vec![
                    embedded(backsig(vec![], vec![], false)),
                    embedded(fake_backsig.clone()),
                ],
                None,
                false,
            ),
            Good,
        ),
        (
            "SKB: Fake backsig, backsig",
            cert_with(
                vec![],
                vec![
                    embedded(fake_backsig.clone()),
                    embedded(backsig(vec![], vec![], false)),
                ],
                None,
                false,
            ),
            Good,
        ),
        (
            "PKB: Issuer FP only",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![], vec![issuer_fp()], false)),
                false,
            ),
            Good,
        ),
        (
            "PKB: Issuer, V6 issuer FP",
            cert_with(
                vec![],
                vec![],
                Some(backsig(
                    vec![],
                    vec![issuer(), fictitious_v6_issuer_fingerprint()],
                    false,
                )),
                false,
            ),
            Good,
        ),
        (
            "PKB: Issuer, fake issuer",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![], vec![issuer(), fake_issuer()], false)),
                false,
            ),
            Good,
        ),
        (
            "PKB: Fake issuer, issuer",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![], vec![fake_issuer(), issuer()], false)),
                false,
            ),
            Good,
        ),
        (
            "PKB: Unknown subpacket",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![unknown_subpacket(false)], vec![], false)),
                false,
            ),
            Good,
        ),
        (
            "PKB: Critical unknown subpacket",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![unknown_subpacket(true)], vec![], false)),
                false,
            ),
            Refused,
        ),
        (
            "PKB: Unknown subpacket, unhashed",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![], vec![unknown_subpacket(false)], false)),
                false,
            ),
            Good,
        ),
        (
            "PKB: Unknown notation",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![unknown_notation(false)], vec![], false)),
                false,
            ),
            Good,
        ),
        (
            "PKB: Critical unknown notation",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![unknown_notation(true)], vec![], false)),
                false,
            ),
            Refused,
        ),
        (
            "PKB: Unknown notation, unhashed",
            cert_with(
                vec![],
                vec![],
                Some(backsig(vec![], vec![unknown_notation(false)], false)),
                false,
            ),
            Good,
        ),
    ];
    // The suite leaves these without an expectation; they must not panic.
    for cert in [
        cert_with(vec![], vec![fake_issuer()], good(), false),
        cert_with(vec![], vec![fake_issuer()], good(), true),
        cert_with(
            vec![],
            vec![],
            Some(backsig(vec![], vec![fake_issuer()], false)),
            false,
        ),
        cert_with(
            vec![],
            vec![],
            Some(backsig(vec![], vec![fake_issuer()], true)),
            false,
        ),
    ] {
        let _ = sop::verify(&signature, &[cert], DATA, Window::default());
    }
    assert_eq!(cases.len(), 23);
    let cases: Vec<(&str, Vec<u8>, Vec<u8>, Expect)> = cases
        .drain(..)
        .map(|(n, cert, e)| (n, signature.clone(), cert, e))
        .collect();
    // Every case is met, "PKB: Issuer, V6 issuer FP" among them: its malformed
    // fingerprint sits in the backsig's unhashed area, inside the subkey binding's
    // hashed area, which Sequoia's parser refuses whole; mailseal reads the binding
    // with the fingerprint kept unread (`src/openpgp/unhashed.rs`), and Sequoia checks
    // it over the octets the key signed. `sqop` misses that case.
    let missed = misses(&cases);
    assert!(missed.is_empty(), "{missed:#?}");
}

/// The suite's malformed fingerprint in a back signature, as an attacker with a key of
/// their own would use it: the binding is read with the fingerprint kept only where
/// every octet is as its signers signed it, so a changed octet, a back signature by
/// the wrong key, a critical malformed subpacket, or Bob's back signature moved into
/// Mallory's certificate binds nothing, and Bob's signature is credited to Bob only.
#[test]
fn fail_a_malformed_hint_in_a_back_signature_binds_only_what_was_signed() {
    let bob = suite_bob();
    let mallory = signing_primary(200);
    let then = SystemTime::now() - DAY * 182;
    let subkey = bob.keys().subkeys().next().unwrap().key().clone();
    let subkey_pair = || first_subkey_pair(&bob);
    let signature = bytes_of(
        &SignatureBuilder::new(SignatureType::Binary)
            .sign_message(&mut subkey_pair(), DATA)
            .unwrap(),
    );
    // A back signature over (`owner`'s primary key, Bob's subkey) by `signer`, with the
    // suite's 34-octet version 6 fingerprint unhashed.
    let backsig_at =
        |signer: &mut openpgp::crypto::KeyPair, owner: &Cert, critical: bool, then: SystemTime| {
            let mut hint = vec![6u8];
            hint.extend([0xAA; 34]);
            // Added once signed: Sequoia's signer reads every Issuer Fingerprint it holds.
            let mut sig = SignatureBuilder::new(SignatureType::PrimaryKeyBinding)
                .set_signature_creation_time(then)
                .unwrap()
                .sign_primary_key_binding(signer, owner.primary_key().key(), &subkey)
                .unwrap();
            sig.unhashed_area_mut()
                .add(sub(
                    SubpacketValue::Unknown {
                        tag: SubpacketTag::IssuerFingerprint,
                        body: hint,
                    },
                    critical,
                ))
                .unwrap();
            sig
        };
    let backsig = |signer: &mut openpgp::crypto::KeyPair, owner: &Cert, critical: bool| {
        backsig_at(signer, owner, critical, then)
    };
    // `owner`'s certificate with Bob's subkey bound by `owner`'s primary key, embedding
    // `back`.
    let cert = |owner: &Cert, back: Signature| -> Vec<u8> {
        let b = SignatureBuilder::new(SignatureType::SubkeyBinding)
            .set_signature_creation_time(then)
            .unwrap()
            .set_key_flags(KeyFlags::empty().set_signing())
            .unwrap()
            .set_embedded_signature(back)
            .unwrap();
        let binding = subkey.bind(&mut primary_pair(owner), owner, b).unwrap();
        let uid = owner.userids().next().unwrap();
        let packets: Vec<Packet> = vec![
            owner.primary_key().key().clone().into(),
            uid.userid().clone().into(),
            uid.self_signatures().next().unwrap().clone().into(),
            subkey.clone().into(),
            binding.into(),
        ];
        packets.iter().flat_map(|p| p.to_vec().unwrap()).collect()
    };
    let verify_with = |certs: &[Vec<u8>]| sop::verify(&signature, certs, DATA, Window::default());

    // Bob's own: good, by Bob.
    let bobs_backsig = backsig(&mut subkey_pair(), &bob, false);
    let bobs = cert(&bob, bobs_backsig.clone());
    let good = verify_with(std::slice::from_ref(&bobs)).unwrap();
    assert_eq!(good.len(), 1);
    assert_eq!(good[0].certificate, bob.fingerprint().to_hex());

    // One octet of the kept fingerprint changed: the binding no longer verifies.
    let mut altered = bobs.clone();
    let at = altered
        .windows(34)
        .position(|w| w.iter().all(|&o| o == 0xAA))
        .unwrap();
    altered[at + 7] ^= 1;
    // A back signature by the primary key, not the subkey; a critical malformed
    // fingerprint; Bob's back signature in Mallory's binding of Bob's subkey.
    let by_primary = cert(&bob, backsig(&mut primary_pair(&bob), &bob, false));
    let critical = cert(&bob, backsig(&mut subkey_pair(), &bob, true));
    let transplanted = cert(&mallory, bobs_backsig.clone());
    for (name, c) in [
        ("altered", altered),
        ("by the primary key", by_primary),
        ("critical", critical),
        ("transplanted", transplanted.clone()),
    ] {
        let got = verify_with(std::slice::from_ref(&c));
        assert!(matches!(got, Err(SopError::NoSignature)), "{name}: {got:?}");
    }
    // Given with Bob's, Mallory's certificate gets no credit.
    let both = verify_with(&[transplanted, bobs.clone()]).unwrap();
    assert_eq!(both.len(), 1, "{both:?}");
    assert_eq!(both[0].certificate, bob.fingerprint().to_hex());

    // Copies of Bob's certificate, each with a binding of its own (a second apart), in
    // one file and in several: read as one certificate, each binding checked once
    // where it stands (the copies once cost time and memory with the square of their
    // number), and the signature credited once.
    let copies: Vec<Vec<u8>> = (0..12)
        .map(|i| {
            cert(
                &bob,
                backsig_at(
                    &mut subkey_pair(),
                    &bob,
                    false,
                    then + Duration::from_secs(i),
                ),
            )
        })
        .collect();
    for certs in [vec![copies.concat()], copies.clone(), vec![bobs.repeat(12)]] {
        let got = verify_with(&certs).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].certificate, bob.fingerprint().to_hex());
    }
}
