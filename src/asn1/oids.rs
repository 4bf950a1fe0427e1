//! Object identifiers of the S/MIME profile.

use der::asn1::ObjectIdentifier as Oid;

pub(crate) const ID_DATA: Oid = Oid::new_unwrap("1.2.840.113549.1.7.1");
pub(crate) const ID_SIGNED_DATA: Oid = Oid::new_unwrap("1.2.840.113549.1.7.2");
pub(crate) const ATTR_CONTENT_TYPE: Oid = Oid::new_unwrap("1.2.840.113549.1.9.3");
pub(crate) const ATTR_MESSAGE_DIGEST: Oid = Oid::new_unwrap("1.2.840.113549.1.9.4");
pub(crate) const ATTR_SIGNING_TIME: Oid = Oid::new_unwrap("1.2.840.113549.1.9.5");
pub(crate) const ATTR_SMIME_CAPABILITIES: Oid = Oid::new_unwrap("1.2.840.113549.1.9.15");

pub(crate) const SHA256: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.1");
pub(crate) const SHA384: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.2");
pub(crate) const SHA512: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.3");

pub(crate) const RSA_ENCRYPTION: Oid = Oid::new_unwrap("1.2.840.113549.1.1.1");
pub(crate) const RSASSA_PSS: Oid = Oid::new_unwrap("1.2.840.113549.1.1.10");
pub(crate) const SHA256_WITH_RSA: Oid = Oid::new_unwrap("1.2.840.113549.1.1.11");
pub(crate) const SHA384_WITH_RSA: Oid = Oid::new_unwrap("1.2.840.113549.1.1.12");
pub(crate) const SHA512_WITH_RSA: Oid = Oid::new_unwrap("1.2.840.113549.1.1.13");
pub(crate) const ECDSA_WITH_SHA256: Oid = Oid::new_unwrap("1.2.840.10045.4.3.2");
pub(crate) const ECDSA_WITH_SHA384: Oid = Oid::new_unwrap("1.2.840.10045.4.3.3");
pub(crate) const ECDSA_WITH_SHA512: Oid = Oid::new_unwrap("1.2.840.10045.4.3.4");
pub(crate) const ID_EC_PUBLIC_KEY: Oid = Oid::new_unwrap("1.2.840.10045.2.1");
pub(crate) const SECP256R1: Oid = Oid::new_unwrap("1.2.840.10045.3.1.7");
pub(crate) const SECP384R1: Oid = Oid::new_unwrap("1.3.132.0.34");
pub(crate) const SECP521R1: Oid = Oid::new_unwrap("1.3.132.0.35");
pub(crate) const ED25519: Oid = Oid::new_unwrap("1.3.101.112");

pub(crate) const AES256_GCM: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.46");
pub(crate) const AES128_GCM: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.6");
pub(crate) const MGF1: Oid = Oid::new_unwrap("1.2.840.113549.1.1.8");
pub(crate) const ID_CT_AUTH_ENVELOPED_DATA: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.1.23");
pub(crate) const ID_ENVELOPED_DATA: Oid = Oid::new_unwrap("1.2.840.113549.1.7.3");
pub(crate) const RSAES_OAEP: Oid = Oid::new_unwrap("1.2.840.113549.1.1.7");
pub(crate) const SHA1: Oid = Oid::new_unwrap("1.3.14.3.2.26");
pub(crate) const DH_SHA1KDF: Oid = Oid::new_unwrap("1.3.133.16.840.63.0.2");
pub(crate) const DH_SHA256KDF: Oid = Oid::new_unwrap("1.3.132.1.11.1");
pub(crate) const DH_SHA384KDF: Oid = Oid::new_unwrap("1.3.132.1.11.2");
pub(crate) const DH_SHA512KDF: Oid = Oid::new_unwrap("1.3.132.1.11.3");
pub(crate) const AES128_WRAP: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.5");
pub(crate) const AES256_WRAP: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.45");
pub(crate) const CHACHA20_POLY1305: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.3.18");
pub(crate) const CEK_HKDF_SHA256: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.3.31");
pub(crate) const AES128_CBC: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.2");
pub(crate) const AES192_CBC: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.22");
pub(crate) const AES256_CBC: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.42");
pub(crate) const DES_EDE3_CBC: Oid = Oid::new_unwrap("1.2.840.113549.3.7");
pub(crate) const ID_X25519: Oid = Oid::new_unwrap("1.3.101.110");
pub(crate) const DH_HKDF_SHA256: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.3.19");
pub(crate) const DH_HKDF_SHA384: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.3.20");
pub(crate) const DH_HKDF_SHA512: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.3.21");
