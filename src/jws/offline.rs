//! The detached-jws half of offline signing (`crate::offline`): the connected host
//! fixes the protected header (algorithm, `cty`, the key's thumbprint), the offline
//! host checks it is exactly the header its key makes and signs
//! `BASE64URL(header) "." BASE64URL(entity)`, which it computes itself.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::{compact, protected_header, Jws, JwsAlgorithm, JwsError};

impl Jws<'_> {
    /// Connected host: the first JWK identity (by fingerprint) bound to `address`
    /// (the one whose fingerprint is `chosen`, when given), and the protected header a
    /// signature by it carries.
    pub(crate) fn signing_header(
        &self,
        address: &str,
        chosen: Option<&str>,
    ) -> Result<(String, String), JwsError> {
        let mut records: Vec<_> = self
            .store
            .jwk_identities()?
            .into_iter()
            .filter(|r| r.emails.iter().any(|e| e == address))
            .filter(|r| chosen.is_none_or(|f| r.fingerprint.eq_ignore_ascii_case(f)))
            .collect();
        records.sort_by(|a, b| a.fingerprint.cmp(&b.fingerprint));
        let record = records.into_iter().next().ok_or(JwsError::NoSigningKey {
            address: address.to_string(),
        })?;
        let public = self.cache.public(&record)?;
        let (jwk, thumbprint) = &*public;
        Ok((record.fingerprint, protected_header(jwk, thumbprint)))
    }

    /// The JWK identity `fingerprint`, bound to `address`, and the header it signs
    /// with; `protected` must be exactly that header.
    fn header_of(
        &self,
        fingerprint: &str,
        address: &str,
        protected: &str,
    ) -> Result<(crate::keystore::StoredJwk, JwsAlgorithm), JwsError> {
        let record = self
            .store
            .jwk_identities()?
            .into_iter()
            .find(|r| r.fingerprint == fingerprint && r.emails.iter().any(|e| e == address))
            .ok_or(JwsError::NoSigningKey {
                address: address.to_string(),
            })?;
        let public = self.cache.public(&record)?;
        let (jwk, thumbprint) = &*public;
        if protected_header(jwk, thumbprint) != protected {
            return Err(JwsError::Header(
                "the request's protected header is not the one this key signs with".into(),
            ));
        }
        Ok((record, jwk.alg))
    }

    /// Either host: `protected` is exactly the header the identity `fingerprint`
    /// (bound to `address`) signs with.
    pub(crate) fn check_header(
        &self,
        fingerprint: &str,
        address: &str,
        protected: &str,
    ) -> Result<JwsAlgorithm, JwsError> {
        self.header_of(fingerprint, address, protected)
            .map(|(_, alg)| alg)
    }

    /// Offline host: signs `entity` under `protected` with the private key of the
    /// identity `fingerprint` (bound to `address`); the base64url signature.
    pub(crate) fn sign_header(
        &self,
        fingerprint: &str,
        address: &str,
        protected: &str,
        entity: &[u8],
    ) -> Result<String, JwsError> {
        let (record, alg) = self.header_of(fingerprint, address, protected)?;
        let secret = self
            .store
            .private_key(&record.fingerprint)?
            .filter(|s| s.token().is_none())
            .ok_or(JwsError::NoSigningKey {
                address: address.to_string(),
            })?;
        let pair = self.cache.signing(alg, secret.pkcs8_der())?;
        let sig = pair
            .sign(&compact::signing_input(protected, entity))
            .map_err(JwsError::Key)?;
        Ok(URL_SAFE_NO_PAD.encode(sig))
    }

    /// Connected host: `signature` (base64url) is the identity's signature over
    /// `entity` under `protected`; the compact JWS and its algorithm.
    pub(crate) fn check_header_signature(
        &self,
        fingerprint: &str,
        address: &str,
        protected: &str,
        entity: &[u8],
        signature: &str,
    ) -> Result<(String, JwsAlgorithm), JwsError> {
        let (record, alg) = self.header_of(fingerprint, address, protected)?;
        let sig = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| JwsError::Malformed("the signature is not base64url".into()))?;
        let public = self.cache.public(&record)?;
        if !public
            .0
            .key
            .verify(alg, &compact::signing_input(protected, entity), &sig)
        {
            return Err(JwsError::BadSignature);
        }
        Ok((format!("{protected}..{signature}"), alg))
    }
}
