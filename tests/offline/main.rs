//! Offline signing (issue #20): the request made on a connected host, signed on an
//! offline one, assembled on the connected host again, and opened by the recipient,
//! for S/MIME, OpenPGP and detached-jws, with OpenSSL and GnuPG as the verifiers; the
//! alterations between the hosts that must be refused; the signing log; QR codes; a
//! certificate request issued by an OpenSSL CA.

#[path = "../common/mod.rs"]
mod common;

mod csr;
mod fail_offline;
mod fail_summary_attack;
mod flow;
mod fuzz_seeds;
mod kit;
mod qr;
mod signing_log;
mod summary;
