//! Revocation: decided only on a path the store validated; a CRL held for an issuer
//! that cannot be checked fails closed.
