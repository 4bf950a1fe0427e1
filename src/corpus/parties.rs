//! Who sends and who receives in the corpus, and their keys.
//!
//! Alice sends, Bob receives: both with the public RFC 9216 S/MIME sample identities
//! (RSA-2048, the RSA sample CA as Bob's trust anchor), the draft-bre OpenPGP samples,
//! and Ed25519 JWKs derived from fixed seeds. Mallory is the attacker of the identity
//! rules: he controls everything but Bob's store, so he holds a certificate from Bob's
//! own CA for his own address (an insider), a CA of his own with a certificate for
//! Alice's address, a self-signed one for it, an OpenPGP key and a JWK claiming it.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::case::{KeyFile, KeyRole};
use super::CorpusError;
use crate::keystore::{DirectoryStore, KeyStore};

macro_rules! fixture {
    ($path:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/keys-fixtures/",
            $path
        ))
        .as_slice()
    };
}

const CA_RSA_CRT: &[u8] = fixture!("rfc9216/ca.rsa.crt");
const CA_RSA_KEY: &[u8] = fixture!("rfc9216/ca.rsa.key");
const ALICE_SIGN_CRT: &[u8] = fixture!("rfc9216/alice.sign.crt");
const ALICE_SIGN_KEY: &[u8] = fixture!("rfc9216/alice.sign.key");
const ALICE_ENCRYPT_CRT: &[u8] = fixture!("rfc9216/alice.encrypt.crt");
const ALICE_ENCRYPT_KEY: &[u8] = fixture!("rfc9216/alice.encrypt.key");
const BOB_SIGN_CRT: &[u8] = fixture!("rfc9216/bob.sign.crt");
const BOB_SIGN_KEY: &[u8] = fixture!("rfc9216/bob.sign.key");
const BOB_ENCRYPT_CRT: &[u8] = fixture!("rfc9216/bob.encrypt.crt");
const BOB_ENCRYPT_KEY: &[u8] = fixture!("rfc9216/bob.encrypt.key");
const PGP_ALICE_SEC: &[u8] = fixture!("openpgp/alice@openpgp.example.sec.asc");
const PGP_ALICE_PUB: &[u8] = fixture!("openpgp/alice@openpgp.example.pub.asc");
const PGP_BOB_SEC: &[u8] = fixture!("openpgp/bob@openpgp.example.sec.asc");
const PGP_BOB_PUB: &[u8] = fixture!("openpgp/bob@openpgp.example.pub.asc");

/// Alice's and Bob's S/MIME (and detached-jws) addresses.
pub(crate) const ALICE: &str = "alice@smime.example";
pub(crate) const BOB: &str = "bob@smime.example";
/// Their OpenPGP addresses (those of the OpenPGP sample keys).
pub(crate) const PGP_ALICE: &str = "alice@openpgp.example";
pub(crate) const PGP_BOB: &str = "bob@openpgp.example";
/// A third party, named instead of Bob in a forwarded message.
pub(crate) const CAROL: &str = "carol@smime.example";
/// The insider's own address, certified by Bob's CA.
pub(crate) const MALLORY: &str = "mallory@smime.example";

/// A key store in a temporary directory, gone with it: the stores that hold X.509
/// and OpenPGP material alike keep it in files.
pub(crate) struct TempStore {
    pub(crate) store: DirectoryStore,
    _dir: tempfile::TempDir,
}

impl TempStore {
    pub(crate) fn new(party: &'static str) -> Result<Self, CorpusError> {
        let dir = tempfile::tempdir().map_err(|e| self::party(party)(e.to_string()))?;
        let store = DirectoryStore::open(dir.path().join("store"))
            .map_err(|e| self::party(party)(e.to_string()))?;
        Ok(TempStore { store, _dir: dir })
    }
}

/// A sending party: a key store the sealers use.
pub(crate) type Sender = TempStore;

/// Every party of the corpus.
pub(crate) struct Parties {
    pub(crate) alice: Sender,
    /// Mallory with a certificate from Bob's CA for his own address, and an OpenPGP
    /// key and a JWK of his own.
    pub(crate) insider: Sender,
    /// Mallory's own CA, and its certificate for Alice's address.
    pub(crate) rogue_ca: Sender,
    /// Alice's certificate from Bob's CA, expired.
    pub(crate) expired: Sender,
    /// A self-signed certificate for Alice's address, and an OpenPGP key and a JWK that
    /// claim it.
    pub(crate) impostor: Sender,
    /// Bob's keys as files: his identities, his CA, Alice's OpenPGP certificate and
    /// JWK.
    pub(crate) bob: Arc<Vec<KeyFile>>,
    /// The MLS members' key stores: each with Bob's CA as its anchor (to check the
    /// other members' leaves) and its S/MIME identity (which certifies its MLS key).
    /// Alice's is her RFC 9216 sample identity; Carol and Mallory hold certificates
    /// from Bob's CA for their own addresses.
    pub(crate) mls_alice: Sender,
    pub(crate) mls_carol: Sender,
    pub(crate) mls_mallory: Sender,
}

fn party(name: &'static str) -> impl Fn(String) -> CorpusError {
    move |reason| CorpusError::Party {
        party: name,
        reason,
    }
}

fn import(
    store: &DirectoryStore,
    name: &'static str,
    files: &[(&[u8], bool)],
) -> Result<(), CorpusError> {
    for (bytes, trusted) in files {
        store
            .import(bytes, name, *trusted)
            .map_err(|e| party(name)(e.to_string()))?;
    }
    Ok(())
}

/// A private Ed25519 JWK from a fixed seed (the SHA-256 of `label`): deterministic,
/// public test material like the RFC 9216 keys.
pub(crate) fn jwk_from_seed(label: &str) -> Result<(Vec<u8>, Vec<u8>), CorpusError> {
    use aws_lc_rs::signature::KeyPair;
    use sha2::Digest;
    let seed: [u8; 32] = sha2::Sha256::digest(label.as_bytes()).into();
    let pair = aws_lc_rs::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
        .map_err(|e| party("jwk")(e.to_string()))?;
    let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    let private = serde_json::json!({
        "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA",
        "x": x, "d": URL_SAFE_NO_PAD.encode(seed),
    });
    let public = serde_json::json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "x": x});
    Ok((super::pretty(&private), super::pretty(&public)))
}

fn bind_jwk(store: &DirectoryStore, jwk: &[u8], email: &str) -> Result<(), CorpusError> {
    let key = crate::jws::Jwk::parse(jwk).map_err(|e| party("jwk")(e.to_string()))?;
    crate::jws::jwk::bind(store, &key, &[email.to_string()], "jwk")
        .map_err(|e| party("jwk")(e.to_string()))?;
    Ok(())
}

/// The moment the attacker's keys are made: before [`super::NOW`], so they are valid
/// when the cases are judged.
fn made_at() -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(super::NOW - 30 * 86_400)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// A new identity for `email` (a CA without one), issued by `issuer` (self-signed
/// without), valid for `days` from `from`, stored in `store`.
fn smime_identity(
    store: &DirectoryStore,
    name: &'static str,
    email: Option<&str>,
    issuer: Option<&crate::smime::Issuer<'_>>,
    (from, days): (time::OffsetDateTime, u32),
) -> Result<Vec<crate::smime::Identity>, CorpusError> {
    let ca = email.is_none();
    let req = crate::smime::IdentityRequest {
        email: email.map(str::to_string),
        common_name: Some(email.unwrap_or("Mallory's CA").to_string()),
        kind: crate::smime::KeyKind::P256,
        days,
        ca,
    };
    let ids =
        crate::smime::generate_at(&req, issuer, from).map_err(|e| party(name)(e.to_string()))?;
    for id in &ids {
        let pem = crate::keystore::identity_pem(&id.certificate, &id.private_key)
            .map_err(|e| party(name)(e.to_string()))?;
        store
            .import(pem.as_bytes(), name, ca)
            .map_err(|e| party(name)(e.to_string()))?;
    }
    Ok(ids)
}

/// The attacker's OpenPGP key claiming Alice's address: an Ed25519 certification key
/// with Ed25519 signing and Curve25519 encryption subkeys, made once by
/// `keystore::openpgp::generate_at` (created 30 days before [`super::NOW`], valid
/// three years) and kept here, because Sequoia generates keys and their binding
/// signatures only from the system's generator, and the corpus must be the same bytes
/// for the same seed. A throwaway test key: its secret is public on purpose.
const IMPOSTOR_OPENPGP: &[u8] = include_bytes!("impostor-alice.pgp");

fn openpgp_identity(
    store: &DirectoryStore,
    name: &'static str,
    email: &str,
) -> Result<(), CorpusError> {
    let cert = crate::keystore::openpgp::parse_stored(IMPOSTOR_OPENPGP)
        .ok_or_else(|| party(name)("the impostor's OpenPGP key does not load".into()))?;
    if !cert
        .userids()
        .any(|u| u.userid().email().ok().flatten() == Some(email))
    {
        return Err(party(name)(format!(
            "the impostor's OpenPGP key does not claim {email}"
        )));
    }
    store
        .import(IMPOSTOR_OPENPGP, name, false)
        .map_err(|e| party(name)(e.to_string()))?;
    Ok(())
}

impl Parties {
    pub(crate) fn new() -> Result<Self, CorpusError> {
        let (alice_jwk, alice_jwk_pub) = jwk_from_seed("mailseal corpus: alice jws")?;
        let (bob_jwk, _) = jwk_from_seed("mailseal corpus: bob jws")?;

        let alice_store = TempStore::new("alice")?;
        let alice = &alice_store.store;
        import(
            alice,
            "alice",
            &[
                (ALICE_SIGN_CRT, false),
                (ALICE_SIGN_KEY, false),
                (ALICE_ENCRYPT_CRT, false),
                (ALICE_ENCRYPT_KEY, false),
                (BOB_ENCRYPT_CRT, false),
                (PGP_ALICE_SEC, false),
                (PGP_BOB_PUB, false),
            ],
        )?;
        bind_jwk(alice, &alice_jwk, ALICE)?;

        // The insider: a certificate from Bob's own CA, for his own address.
        let insider_store = TempStore::new("insider")?;
        let insider = &insider_store.store;
        import(
            insider,
            "insider",
            &[(BOB_ENCRYPT_CRT, false), (PGP_BOB_PUB, false)],
        )?;
        let ca_temp = TempStore::new("ca")?;
        let ca_store = &ca_temp.store;
        import(ca_store, "ca", &[(CA_RSA_CRT, true), (CA_RSA_KEY, false)])?;
        let ca_fpr = ca_store
            .trust_anchors()
            .map_err(|e| party("ca")(e.to_string()))?
            .into_iter()
            .next()
            .map(|c| c.fingerprint)
            .ok_or_else(|| party("ca")("the RSA sample CA is not an anchor".into()))?;
        let (ca_cert, ca_key) = crate::keystore::issuer(ca_store, Some(&ca_fpr), None, None)
            .map_err(|e| party("ca")(e.to_string()))?
            .ok_or_else(|| party("ca")("no CA key".into()))?;
        let bobs_ca = crate::smime::Issuer {
            certificate: &ca_cert,
            key: &ca_key,
        };
        smime_identity(
            insider,
            "insider",
            Some(MALLORY),
            Some(&bobs_ca),
            (made_at(), 3650),
        )?;

        // The MLS members' stores.
        let mls_alice = TempStore::new("alice")?;
        import(
            &mls_alice.store,
            "alice",
            &[
                (CA_RSA_CRT, true),
                (ALICE_SIGN_CRT, false),
                (ALICE_SIGN_KEY, false),
            ],
        )?;
        let mls_member = |name: &'static str, email: &str| -> Result<Sender, CorpusError> {
            let member = TempStore::new(name)?;
            import(&member.store, name, &[(CA_RSA_CRT, true)])?;
            smime_identity(
                &member.store,
                name,
                Some(email),
                Some(&bobs_ca),
                (made_at(), 3650),
            )?;
            Ok(member)
        };
        let mls_carol = mls_member("carol", CAROL)?;
        let mls_mallory = mls_member("insider", MALLORY)?;

        // Alice's certificate from Bob's CA that expired before the cases are judged.
        let expired_store = TempStore::new("expired")?;
        let expired = &expired_store.store;
        import(expired, "expired", &[(BOB_ENCRYPT_CRT, false)])?;
        let long_ago = made_at() - time::Duration::days(400);
        smime_identity(
            expired,
            "expired",
            Some(ALICE),
            Some(&bobs_ca),
            (long_ago, 30),
        )?;

        // Mallory's own CA, which certifies Alice's address.
        let rogue_ca_store = TempStore::new("rogue-ca")?;
        let rogue_ca = &rogue_ca_store.store;
        import(rogue_ca, "rogue-ca", &[(BOB_ENCRYPT_CRT, false)])?;
        let scratch = TempStore::new("rogue-ca")?;
        let rogue = smime_identity(&scratch.store, "rogue-ca", None, None, (made_at(), 3650))?;
        let rogue_key = crate::keystore::SecretKey::new(
            String::new(),
            crate::keystore::KeyAlgorithm::Ec,
            rogue[0].private_key.clone(),
        );
        let rogue_issuer = crate::smime::Issuer {
            certificate: &rogue[0].certificate,
            key: &rogue_key,
        };
        smime_identity(
            rogue_ca,
            "rogue-ca",
            Some(ALICE),
            Some(&rogue_issuer),
            (made_at(), 3650),
        )?;

        // A self-signed certificate, an OpenPGP key and a JWK, each claiming Alice.
        let impostor_store = TempStore::new("impostor")?;
        let impostor = &impostor_store.store;
        import(
            impostor,
            "impostor",
            &[(BOB_ENCRYPT_CRT, false), (PGP_BOB_PUB, false)],
        )?;
        smime_identity(impostor, "impostor", Some(ALICE), None, (made_at(), 3650))?;
        openpgp_identity(impostor, "impostor", PGP_ALICE)?;
        let (impostor_jwk, _) = jwk_from_seed("mailseal corpus: mallory jws")?;
        bind_jwk(impostor, &impostor_jwk, ALICE)?;

        let file = |file: &str, role, format: &str, bytes: &[u8], email: Option<&str>| KeyFile {
            file: file.into(),
            role,
            format: format.into(),
            email: email.map(str::to_string),
            bytes: bytes.to_vec(),
        };
        let bob = vec![
            file("ca.rsa.crt", KeyRole::Anchor, "x509", CA_RSA_CRT, None),
            file("bob.sign.crt", KeyRole::Own, "x509", BOB_SIGN_CRT, None),
            file("bob.sign.key", KeyRole::Own, "pkcs8", BOB_SIGN_KEY, None),
            file(
                "bob.encrypt.crt",
                KeyRole::Own,
                "x509",
                BOB_ENCRYPT_CRT,
                None,
            ),
            file(
                "bob.encrypt.key",
                KeyRole::Own,
                "pkcs8",
                BOB_ENCRYPT_KEY,
                None,
            ),
            file(
                "bob.openpgp.sec.asc",
                KeyRole::Own,
                "openpgp",
                PGP_BOB_SEC,
                None,
            ),
            file("bob.jwk", KeyRole::Own, "jwk", &bob_jwk, Some(BOB)),
            file(
                "alice.openpgp.pub.asc",
                KeyRole::Peer,
                "openpgp",
                PGP_ALICE_PUB,
                None,
            ),
            file(
                "alice.pub.jwk",
                KeyRole::Peer,
                "jwk",
                &alice_jwk_pub,
                Some(ALICE),
            ),
        ];
        Ok(Parties {
            alice: alice_store,
            insider: insider_store,
            rogue_ca: rogue_ca_store,
            expired: expired_store,
            impostor: impostor_store,
            bob: Arc::new(bob),
            mls_alice,
            mls_carol,
            mls_mallory,
        })
    }
}

/// A key store holding `keys` as the receiving party holds them.
pub(crate) fn store_of(keys: &[KeyFile]) -> Result<TempStore, CorpusError> {
    let temp = TempStore::new("receiver")?;
    let store = &temp.store;
    for k in keys {
        match k.format.as_str() {
            "jwk" => {
                let email = k.email.as_deref().ok_or_else(|| {
                    party("receiver")(format!("{}: a JWK without an email", k.file))
                })?;
                bind_jwk(store, &k.bytes, email)?;
            }
            _ => {
                store
                    .import(&k.bytes, "corpus", k.role == KeyRole::Anchor)
                    .map_err(|e| party("receiver")(format!("{}: {e}", k.file)))?;
            }
        }
    }
    Ok(temp)
}
