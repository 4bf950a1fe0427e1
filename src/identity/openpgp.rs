//! OpenPGP certificates, keys and User IDs valid at receipt and at the signature's time.
