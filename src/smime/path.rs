//! Certification paths and revocation for S/MIME: the rules live in
//! [`crate::identity::x509`] and [`crate::identity::crl`] (one authority for every
//! profile); these names keep the profile's callers compiling.

pub(crate) use crate::identity::crl::Revocation;
pub(crate) use crate::identity::x509::Held;
