//! ASN.1 helpers shared by the key store (PKCS#12, PKCS#11) and S/MIME: the BER to DER
//! rewrite and the object identifiers. A leaf module: it depends on nothing else in the
//! crate, so both the store and the profile can use it without depending on each other.

pub(crate) mod ber;
pub(crate) mod count;
pub(crate) mod oids;

/// A BER input the rewrite cannot read; the string says which rule it broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("BER: {0}")]
pub(crate) struct BerError(pub(crate) &'static str);
