//! Who an address is: the one authority every profile, import path and the gateway
//! ask "is this key this address, now?".
//!
//! The profiles parse messages and verify signatures; they do not decide identity.
//! Each decision below lives in one file of this module, and every rule has a test in
//! which the attacker controls everything except the victim's store (docs/security.md names
//! the attack classes and the tests).
//!
//! # The rules
//!
//! - **Receipt time.** Every validity (certificate, CRL, OpenPGP User ID binding,
//!   JWK/DID binding, MLS binding, pin) is judged at the receiver's clock, or the time
//!   the caller fixed explicitly (`open --at`, a [`crate::Receiver`] with a fixed
//!   clock). A time the sender wrote (a signature's creation time, CMS signingTime,
//!   `createdAt`, the outer Date) may narrow what is accepted, never widen it: an
//!   address binding must hold at receipt *and* at the time the signature says it was
//!   made, and a signature dated more than the skew after receipt is refused
//!   ([`check_signed_at`]).
//! - **OpenPGP User IDs** ([`openpgp`]): a User ID speaks for its address only if its
//!   binding is live at receipt and was live at the signature's time; one revoked at
//!   receipt or bound only in the future never does. The Agent Card check ("a card key
//!   names only the card's address") reads every User ID the certificate has ever
//!   carried, valid or not.
//! - **Paths and revocation** ([`x509`], [`crl`]): a certificate path is built from the
//!   store's anchors and imported intermediates plus what the message carries, and
//!   revocation is decided on that validated path, never on a carried certificate
//!   alone. A pinned certificate is checked against every CRL the store holds whose
//!   issuer name and key identifier match. A CRL held for an issuer that cannot be
//!   checked (no validated issuer key, a form we do not implement) fails closed; CRL
//!   forms we do not implement are refused at import, with the extension named.
//! - **Pins by identity** ([`pins`]): card, JWK and DID bindings are keyed by the
//!   address (and the card's normalised origin), never by the URL or file they came
//!   from. A changed key, a lower minimum protection, or a signed card replaced by an
//!   unsigned one is refused until the operator accepts the change; a key bound to one
//!   address moves to another only by an explicit rebind naming both.
//! - **Only signed fields decide** ([`recipients`]): the signer is the protected From;
//!   we are named in the protected To or Cc (no forwarding, no reflection: a message
//!   signed by one of our own identities is delivered to us only if it names us).
//!   Legacy mail without header protection binds neither its recipients nor its date:
//!   it is opened only from peers marked as legacy, and its lifetime comes from signed
//!   data (the envelope's `createdAt`/`expiresAt`, the CMS signingTime or the OpenPGP
//!   signature time), never the outer Date.
//! - Nothing is fetched while judging: the evidence is the store and the message.

pub mod crl;
pub mod openpgp;
pub mod pins;
pub mod recipients;
pub mod x509;

use time::{Duration, OffsetDateTime};

/// The default tolerance for clocks between sender and receiver: five minutes, the
/// receiver rules' default skew.
pub const DEFAULT_SKEW: Duration = Duration::minutes(5);

/// A refusal of the time a sender wrote.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeError {
    /// The signature says it was made after the time of receipt plus the skew.
    #[error("the signature is dated {signed_at}, after the time of receipt {at} plus the allowed clock skew")]
    SignedInTheFuture {
        /// The time the signature states (RFC 3339).
        signed_at: String,
        /// The time of receipt (RFC 3339).
        at: String,
    },
}

/// The signature's stated creation time `signed_at` is acceptable at receipt time `at`:
/// not more than `skew` after it. A signature dated in the future is the sender's
/// choice of time, and it would let a binding that starts later, or a key that is not
/// yet valid, speak now.
pub fn check_signed_at(
    signed_at: OffsetDateTime,
    at: OffsetDateTime,
    skew: Duration,
) -> Result<(), TimeError> {
    if signed_at > at + skew {
        let f = |t: OffsetDateTime| {
            t.format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|_| t.unix_timestamp().to_string())
        };
        return Err(TimeError::SignedInTheFuture {
            signed_at: f(signed_at),
            at: f(at),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_dated_past_the_skew_is_refused_and_within_it_is_not() {
        let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        assert!(check_signed_at(at, at, DEFAULT_SKEW).is_ok());
        assert!(check_signed_at(at + DEFAULT_SKEW, at, DEFAULT_SKEW).is_ok());
        assert!(check_signed_at(at - Duration::days(400), at, DEFAULT_SKEW).is_ok());
        let e = check_signed_at(at + DEFAULT_SKEW + Duration::seconds(1), at, DEFAULT_SKEW)
            .unwrap_err();
        assert!(e.to_string().contains("after the time of receipt"), "{e}");
    }
}
