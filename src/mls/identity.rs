//! Our MLS identities and KeyPackages, and the identity a credential or a mail claims.

use openmls::prelude::*;
use openmls_basic_credential::SignatureKeyPair;
use rusqlite::{params, OptionalExtension};

use super::authentication::{self, Authenticator};
use super::wire::{self, Body};
use super::{op, Identity, Mls, MlsError, CIPHERSUITE};
use crate::message::{Headers, Mailbox};

/// `private` encrypted under `passphrase`: an EncryptedPrivateKeyInfo (PBES2 with
/// scrypt and AES-256-CBC) around the raw key bytes.
fn seal_key(passphrase: &[u8], private: &[u8]) -> Result<Vec<u8>, MlsError> {
    use der::Encode;
    let fail = |e: &dyn std::fmt::Display| MlsError::State(format!("sealing the key: {e}"));
    let mut salt = [0u8; 16];
    let mut iv = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| fail(&e))?;
    getrandom::fill(&mut iv).map_err(|e| fail(&e))?;
    let params =
        pkcs8::pkcs5::pbes2::Parameters::generate_scrypt_aes256cbc(Default::default(), &salt, iv)
            .map_err(|e| fail(&e))?;
    let scheme = pkcs8::pkcs5::EncryptionScheme::Pbes2(params);
    let ciphertext = scheme.encrypt(passphrase, private).map_err(|e| fail(&e))?;
    pkcs8::EncryptedPrivateKeyInfoOwned {
        encryption_algorithm: scheme,
        encrypted_data: der::asn1::OctetString::new(ciphertext).map_err(|e| fail(&e))?,
    }
    .to_der()
    .map_err(|e| fail(&e))
}

/// The raw key [`seal_key`] sealed, or `None` (wrong passphrase, damaged).
fn open_key(passphrase: &[u8], sealed: &[u8]) -> Option<zeroize::Zeroizing<Vec<u8>>> {
    use der::Decode;
    let epki = pkcs8::EncryptedPrivateKeyInfoRef::from_der(sealed).ok()?;
    epki.encryption_algorithm
        .decrypt(passphrase, epki.encrypted_data.as_bytes())
        .ok()
        .map(zeroize::Zeroizing::new)
}

/// A credential's identity (our identities are email addresses), lower case.
pub(super) fn identity_of(c: &Credential) -> Result<String, MlsError> {
    let basic = BasicCredential::try_from(c.clone())
        .map_err(|_| MlsError::Binding("not a basic credential".into()))?;
    let id = std::str::from_utf8(basic.identity())
        .map_err(|_| MlsError::Binding("credential identity is not UTF-8".into()))?;
    Ok(id.to_ascii_lowercase())
}

/// The outer From must be the MLS sender when the mail names one.
pub(super) fn check_from(headers: &Headers, identity: &str) -> Result<(), MlsError> {
    match &headers.from {
        Some(m) if m.normalized() != identity => Err(MlsError::Binding(format!(
            "the MLS sender {identity} is not the mail's From {}",
            m.normalized()
        ))),
        _ => Ok(()),
    }
}

/// A KeyPackage's validity may span at most what ours do (openmls' default, 84 days
/// and an hour of margin): its init key stays usable, and its holder's leaf
/// unrenewed, for as long as it says. Checked where we choose to add someone (a
/// KeyPackage mail, a published one); a Commit of another member's is its
/// committer's choice (openmls checks that its lifetime covers now).
pub(super) fn check_lifetime(kp: &KeyPackage) -> Result<(), MlsError> {
    let lifetime = kp.life_time();
    if lifetime.has_acceptable_range() {
        return Ok(());
    }
    Err(MlsError::KeyPackageLifetime {
        identity: identity_of(kp.leaf_node().credential())?,
        days: lifetime.not_after().saturating_sub(lifetime.not_before()) / 86_400,
    })
}

/// A KeyPackage must be of the one cipher suite our groups use ([`CIPHERSUITE`]):
/// any other could never be added, so it is refused where it arrives, under its own
/// code, and not later as a failed add.
pub(super) fn check_suite(kp: &KeyPackage) -> Result<(), MlsError> {
    if kp.ciphersuite() == CIPHERSUITE {
        return Ok(());
    }
    Err(MlsError::CipherSuite {
        identity: identity_of(kp.leaf_node().credential())?,
        suite: u16::from(kp.ciphersuite()),
    })
}

/// A received KeyPackage verified as openmls verifies it, its lifetime judged at `at`
/// when the receiver has a clock of its own (`OpenPolicy::validation_time`: a
/// [`crate::Receiver`] with a fixed clock, `open --at`, the conformance corpus's
/// moment of judgement). openmls checks a lifetime against the system clock only, as
/// the last of its checks; so when that is the one check that failed, everything else
/// (both signatures, the protocol version, the keys, the extensions) has passed, and
/// the package is taken as verified and judged at `at` instead. Without this, a
/// corpus's valid KeyPackage mail was refused once 84 days had passed since it was
/// generated, whatever moment its label names.
pub(super) fn verified_key_package(
    kp: KeyPackageIn,
    crypto: &impl openmls_traits::crypto::OpenMlsCrypto,
    at: Option<time::OffsetDateTime>,
) -> Result<KeyPackage, MlsError> {
    let invalid = |e: &dyn std::fmt::Display| MlsError::Invalid(format!("KeyPackage: {e}"));
    let Some(at) = at else {
        return kp
            .validate(crypto, ProtocolVersion::Mls10)
            .map_err(|e| invalid(&e));
    };
    let copy = kp.clone();
    let kp = match kp.validate(crypto, ProtocolVersion::Mls10) {
        Ok(kp) => kp,
        Err(openmls::prelude::KeyPackageVerifyError::LifetimeError(_)) => copy.into_unchecked(),
        Err(e) => return Err(invalid(&e)),
    };
    kp.life_time()
        .validate_with_time(std::time::SystemTime::from(at))
        .map_err(|e| invalid(&e))?;
    Ok(kp)
}

/// Verifies a KeyPackage (signature, our cipher suite, its lifetime) and returns it
/// with its credential identity.
pub(super) fn checked_key_package(
    kp: KeyPackageIn,
    crypto: &impl openmls_traits::crypto::OpenMlsCrypto,
) -> Result<(KeyPackage, String), MlsError> {
    let (kp, identity) = lasting_key_package(kp, crypto)?;
    check_lifetime(&kp)?;
    Ok((kp, identity))
}

/// [`checked_key_package`] but for the cap on how long its lifetime spans (it must
/// still cover now): the conformance corpus's members only
/// ([`super::LifetimeCap::None`]).
pub(super) fn lasting_key_package(
    kp: KeyPackageIn,
    crypto: &impl openmls_traits::crypto::OpenMlsCrypto,
) -> Result<(KeyPackage, String), MlsError> {
    let kp = verified_key_package(kp, crypto, None)?;
    check_suite(&kp)?;
    let identity = identity_of(kp.leaf_node().credential())?;
    Ok((kp, identity))
}

/// A published KeyPackage (a bare MLSMessage, as an Agent Card carries it), checked
/// without any state: its signature verifies, its cipher suite is ours. Returns its
/// credential identity (the member's address) and whether it is a last-resort
/// KeyPackage (usable for more than one group).
pub fn key_package_identity(bytes: &[u8]) -> Result<(String, bool), MlsError> {
    let Body::KeyPackage(kp) = wire::split(wire::decode(bytes)?)?.1 else {
        return Err(MlsError::Malformed("not a KeyPackage".into()));
    };
    let crypto = openmls_rust_crypto::RustCrypto::default();
    let (kp, identity) = checked_key_package(kp, &crypto)?;
    Ok((identity, kp.last_resort()))
}

impl Mls {
    /// Makes an MLS identity (Ed25519 signature key, basic credential naming `email`)
    /// whose key `auth` certifies with our mail key for `email` (see
    /// [`authentication`]); returns its public key in hex. An existing identity is
    /// kept and certified again (after a mail key was renewed, say).
    pub fn generate_identity(
        &self,
        email: &str,
        auth: &dyn Authenticator,
    ) -> Result<String, MlsError> {
        let email = email.trim().to_ascii_lowercase();
        if !Mailbox::new(&email).is_valid_addr_spec() {
            return Err(MlsError::Usage(format!("{email}: not an email address")));
        }
        let tx = self.state.begin()?;
        if let Some(pk) = self.public_key(&email)? {
            let binding = auth.certify(&email, &authentication::statement(&email, &pk))?;
            self.state.exec(
                "UPDATE mailseal_mls_identity SET binding = ?2 WHERE email = ?1",
                params![email, binding.to_bytes()],
            )?;
            tx.commit()?;
            return Ok(crate::keystore::hex(&pk));
        }
        // An Ed25519 seed of our own (the suite's signature scheme), so that under a
        // store passphrase it can be kept encrypted in our own table (issue #17),
        // never in openmls' storage, where it would be in clear.
        let mut seed = zeroize::Zeroizing::new([0u8; 32]);
        crate::entropy::fill(&mut seed[..]).map_err(|e| MlsError::State(e.to_string()))?;
        let public = ed25519_dalek::SigningKey::from_bytes(&seed)
            .verifying_key()
            .to_bytes();
        // Certified first: without a mail key to vouch for it, nothing is stored.
        let binding = auth.certify(&email, &authentication::statement(&email, &public))?;
        let keys = SignatureKeyPair::from_raw(
            CIPHERSUITE.signature_algorithm(),
            seed.to_vec(),
            public.to_vec(),
        );
        let sealed = match &self.passphrase {
            Some(pass) => Some(seal_key(pass, &seed[..])?),
            None => {
                keys.store(self.state.provider.storage())
                    .map_err(|e| MlsError::State(format!("{e:?}")))?;
                None
            }
        };
        self.state.exec(
            "INSERT INTO mailseal_mls_identity (email, public_key, scheme, sealed_key, binding) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                email,
                keys.public(),
                CIPHERSUITE.signature_algorithm() as u16,
                sealed,
                binding.to_bytes()
            ],
        )?;
        tx.commit()?;
        Ok(crate::keystore::hex(keys.public()))
    }

    /// The leaf-node extensions our leaves carry for `email`: its credential binding.
    pub(super) fn own_leaf_extensions(
        &self,
        email: &str,
    ) -> Result<Extensions<LeafNode>, MlsError> {
        let binding: Option<Vec<u8>> = self
            .state
            .query_row(
                "SELECT binding FROM mailseal_mls_identity WHERE email = ?1",
                [email],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        let binding = binding.ok_or_else(|| {
            MlsError::Unbound(format!(
                "our own MLS key of {email} is not certified by a mail key: `mailseal key generate --kind mls --email {email}` certifies it"
            ))
        })?;
        authentication::leaf_extensions(&binding)
    }

    /// Our identities: (email, public key hex).
    pub fn identities(&self) -> Result<Vec<(String, String)>, MlsError> {
        self.state.refresh()?;
        let mut st = self
            .state
            .conn
            .prepare("SELECT email, public_key FROM mailseal_mls_identity ORDER BY email")?;
        let rows = st.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (e, pk) = row?;
            out.push((e, crate::keystore::hex(&pk)));
        }
        Ok(out)
    }

    pub(super) fn public_key(&self, email: &str) -> Result<Option<Vec<u8>>, MlsError> {
        self.state.refresh()?;
        Ok(self
            .state
            .query_row(
                "SELECT public_key FROM mailseal_mls_identity WHERE email = ?1",
                [email],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Our signature key and credential for `email`, read once per process.
    pub(super) fn signer(&self, email: &str) -> Result<std::rc::Rc<Identity>, MlsError> {
        if let Some(id) = self.signers.borrow().get(email) {
            return Ok(id.clone());
        }
        let pk = self
            .public_key(email)?
            .ok_or_else(|| MlsError::NoIdentity(email.to_string()))?;
        let sealed: Option<Vec<u8>> = self.state.query_row(
            "SELECT sealed_key FROM mailseal_mls_identity WHERE email = ?1",
            [email],
            |r| r.get(0),
        )?;
        let keys = match sealed {
            Some(sealed) => {
                let pass = self
                    .passphrase
                    .as_ref()
                    .ok_or_else(|| MlsError::Locked(email.to_string()))?;
                let private =
                    open_key(pass, &sealed).ok_or_else(|| MlsError::Locked(email.to_string()))?;
                SignatureKeyPair::from_raw(
                    CIPHERSUITE.signature_algorithm(),
                    private.to_vec(),
                    pk.clone(),
                )
            }
            None => SignatureKeyPair::read(
                self.state.provider.storage(),
                &pk,
                CIPHERSUITE.signature_algorithm(),
            )
            .ok_or_else(|| MlsError::NoIdentity(email.to_string()))?,
        };
        let credential = CredentialWithKey {
            credential: BasicCredential::new(email.as_bytes().to_vec()).into(),
            signature_key: pk.into(),
        };
        let id = std::rc::Rc::new(Identity {
            keys: super::signer::Signer::new(keys),
            credential,
        });
        self.signers
            .borrow_mut()
            .insert(email.to_string(), id.clone());
        Ok(id)
    }

    /// A KeyPackage for `email`, as the MLSMessage bytes (for an Agent Card).
    pub fn key_package_message(&self, email: &str) -> Result<Vec<u8>, MlsError> {
        self.new_key_package(email, false, None, CIPHERSUITE)
    }

    /// A last-resort KeyPackage (RFC 9420 section 16.8) of `email` as a bare
    /// MLSMessage, for publication in an Agent Card: a card is read by many peers, so
    /// its KeyPackage must survive being used for more than one group (its private
    /// part stays in the state after a join).
    pub fn last_resort_key_package(&self, email: &str) -> Result<Vec<u8>, MlsError> {
        self.new_key_package(email, true, None, CIPHERSUITE)
    }

    /// A KeyPackage of `email`, valid for openmls' default lifetime (84 days from an
    /// hour ago) unless `lifetime` says otherwise, and of our cipher suite unless
    /// `suite` is another (the conformance corpus's fixed-date, long-lived and
    /// foreign-suite ones).
    pub(super) fn new_key_package(
        &self,
        email: &str,
        last_resort: bool,
        lifetime: Option<Lifetime>,
        suite: Ciphersuite,
    ) -> Result<Vec<u8>, MlsError> {
        let email = email.trim().to_ascii_lowercase();
        let me_id = self.signer(&email)?;
        let (signer, credential) = (&me_id.keys, me_id.credential.clone());
        let tx = self.state.begin()?;
        // The leaf lists the extensions it carries (RFC 9420 section 13.4).
        let mut builder = KeyPackage::builder()
            .leaf_node_capabilities(authentication::capabilities(last_resort))
            .leaf_node_extensions(self.own_leaf_extensions(&email)?);
        if last_resort {
            builder = builder.mark_as_last_resort();
        }
        if let Some(lifetime) = lifetime {
            builder = builder.key_package_lifetime(lifetime);
        }
        let bundle = builder
            .build(suite, &self.state.provider, signer, credential)
            .map_err(op)?;
        let msg = MlsMessageOut::from(bundle.key_package().clone());
        let bytes = msg.to_bytes().map_err(op)?;
        tx.commit()?;
        Ok(bytes)
    }

    /// A KeyPackage mail from `email` (to itself: it is published, not sent to a group).
    pub fn key_package(&self, email: &str) -> Result<Vec<u8>, MlsError> {
        let bytes = self.key_package_message(email)?;
        self.key_package_mail(email, &bytes)
    }

    /// The mail of `email`'s KeyPackage `bytes`.
    pub(super) fn key_package_mail(&self, email: &str, bytes: &[u8]) -> Result<Vec<u8>, MlsError> {
        let email = email.trim().to_ascii_lowercase();
        self.mail(
            &email,
            std::slice::from_ref(&email),
            "MLS key package",
            bytes,
        )
    }
}
