//! A certificate's keys with their secrets, ready to sign, for the tests that build
//! signatures and bindings by hand with Sequoia.

use sequoia_openpgp as openpgp;

use openpgp::crypto::KeyPair;
use openpgp::packet::key::{KeyParts, KeyRole};
use openpgp::packet::Key;
use openpgp::Cert;

/// `key` with its secret, ready to sign.
fn pair<P: KeyParts, R: KeyRole>(key: &Key<P, R>) -> KeyPair {
    key.clone()
        .role_into_unspecified()
        .parts_into_secret()
        .unwrap()
        .into_keypair()
        .unwrap()
}

/// `cert`'s primary key with its secret, ready to sign.
pub fn primary_pair(cert: &Cert) -> KeyPair {
    pair(cert.primary_key().key())
}

/// `cert`'s first subkey with its secret, ready to sign.
pub fn first_subkey_pair(cert: &Cert) -> KeyPair {
    pair(cert.keys().subkeys().next().unwrap().key())
}
