//! Where the sealers' randomness comes from: the operating system, always, except on a
//! thread inside a [`Seeded`] scope, which only the conformance corpus opens.
//!
//! `corpus generate --seed N` must write the same bytes every time (issue #21), and a
//! sealed message is made of random values: content keys, nonces, ephemeral keys,
//! signature salts, MIME boundaries, and the attacker's keys the corpus generates.
//! Inside the scope each of them comes from one ChaCha20 stream keyed by the seed, so
//! anyone who knows the seed can compute them: right for public test data, fatal for a
//! message somebody relies on (a content key anyone can derive, a nonce repeated
//! across runs). So the scope is crate-private, lives on one thread (the guard is not
//! `Send` and ends when dropped), and every caller outside it gets the system's
//! generator exactly as before. Primitives that cannot take a generator (aws-lc-rs's
//! ECDSA and RSA-OAEP, Sequoia's session keys and salts) are replaced inside the scope
//! by ones that can (RFC 6979 ECDSA, RustCrypto's OAEP, the corpus's own SEIPD writer);
//! outside it they are not touched.

use std::cell::RefCell;
use std::marker::PhantomData;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sha2::Digest;

thread_local! {
    static SEEDED: RefCell<Option<ChaCha20Rng>> = const { RefCell::new(None) };
}

/// The operating system could not give us random bytes.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("no randomness from the operating system")]
pub(crate) struct NoRandomness;

/// Fills `buf` with random bytes: from the seeded stream inside a [`Seeded`] scope on
/// this thread, from the operating system everywhere else.
pub(crate) fn fill(buf: &mut [u8]) -> Result<(), NoRandomness> {
    if with_seeded(|rng| rng.fill_bytes(buf)).is_some() {
        return Ok(());
    }
    getrandom::fill(buf).map_err(|_| NoRandomness)
}

/// Runs `f` on the seeded stream when this thread is inside a [`Seeded`] scope;
/// `None` (and `f` not run) everywhere else, where the caller uses its usual source.
pub(crate) fn with_seeded<R>(f: impl FnOnce(&mut ChaCha20Rng) -> R) -> Option<R> {
    SEEDED.with(|cell| cell.borrow_mut().as_mut().map(f))
}

/// Whether this thread is inside a [`Seeded`] scope.
pub(crate) fn is_seeded() -> bool {
    SEEDED.with(|cell| cell.borrow().is_some())
}

/// A scope in which this thread's randomness is the seeded stream. Dropping it puts
/// back what was there before (the system's generator, or an enclosing scope).
pub(crate) struct Seeded {
    previous: Option<ChaCha20Rng>,
    // Not `Send`: the scope is the thread's, and must end on it.
    _thread: PhantomData<*const ()>,
}

impl Seeded {
    /// Opens the scope for `seed`; `purpose` separates streams drawn for different
    /// jobs from the same seed (generating the corpus, mutating seeds).
    pub(crate) fn new(seed: u64, purpose: &str) -> Self {
        let mut h = sha2::Sha256::new();
        h.update(b"mailseal seeded randomness (test data only)\0");
        h.update(purpose.as_bytes());
        h.update([0]);
        h.update(seed.to_be_bytes());
        Self::keyed(h.finalize().into())
    }

    /// Opens a scope keyed by the operating system (one draw), for work whose own
    /// generator cannot fail: a failure here is an error its caller can return.
    pub(crate) fn from_os() -> Result<Self, NoRandomness> {
        let mut key = zeroize::Zeroizing::new([0u8; 32]);
        getrandom::fill(&mut key[..]).map_err(|_| NoRandomness)?;
        Ok(Self::keyed(*key))
    }

    /// Opens a scope whose stream is keyed by `key` (a [`Derived`] key and what is
    /// drawn for).
    fn keyed(key: [u8; 32]) -> Self {
        let rng = ChaCha20Rng::from_seed(key);
        let previous = SEEDED.with(|cell| cell.borrow_mut().replace(rng));
        Seeded {
            previous,
            _thread: PhantomData,
        }
    }
}

/// A key drawn from a seeded scope, for work that leaves the scope's thread: openmls
/// seals an UpdatePath's path secrets on rayon's threads, in whatever order they run,
/// so a stream shared in order of use cannot make those seals repeatable. Each draw
/// there opens a scope of its own on the thread it runs on ([`Derived::scope`]),
/// keyed by this key and by what the draw is for, as RFC 6979 derives a nonce from
/// the key and the message: the same inputs, the same bytes, on any thread.
pub(crate) struct Derived(zeroize::Zeroizing<[u8; 32]>);

impl Derived {
    /// A key from this thread's seeded stream; `None` outside a [`Seeded`] scope,
    /// where every draw stays the system's.
    pub(crate) fn draw() -> Option<Derived> {
        with_seeded(|rng| {
            let mut key = zeroize::Zeroizing::new([0u8; 32]);
            rng.fill_bytes(&mut key[..]);
            Derived(key)
        })
    }

    /// A seeded scope on this thread for a draw whose inputs are `inputs` (each
    /// length-prefixed, so that no two lists hash alike).
    pub(crate) fn scope(&self, inputs: &[&[u8]]) -> Seeded {
        let mut h = sha2::Sha256::new();
        h.update(b"mailseal derived randomness (test data only)\0");
        h.update(&self.0[..]);
        for input in inputs {
            h.update((input.len() as u64).to_be_bytes());
            h.update(input);
        }
        Seeded::keyed(h.finalize().into())
    }
}

impl Drop for Seeded {
    fn drop(&mut self) {
        let previous = self.previous.take();
        SEEDED.with(|cell| *cell.borrow_mut() = previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw() -> [u8; 16] {
        let mut b = [0u8; 16];
        fill(&mut b).unwrap();
        b
    }

    #[test]
    fn a_seeded_scope_repeats_and_ends_when_dropped() {
        let (a, b) = {
            let _s = Seeded::new(7, "test");
            (draw(), draw())
        };
        assert_ne!(a, b, "the stream moves on");
        let again = {
            let _s = Seeded::new(7, "test");
            draw()
        };
        assert_eq!(a, again, "the same seed gives the same bytes");
        let other = {
            let _s = Seeded::new(7, "other purpose");
            draw()
        };
        assert_ne!(a, other);
        assert!(!is_seeded(), "the scope ended");
        assert_ne!(draw(), a, "outside the scope: the system's generator");
    }

    #[test]
    fn a_seeded_scope_is_this_threads_only() {
        let _s = Seeded::new(1, "test");
        assert!(is_seeded());
        let elsewhere = std::thread::spawn(is_seeded).join().unwrap();
        assert!(!elsewhere, "another thread still draws from the system");
    }

    #[test]
    fn a_derived_scope_repeats_on_any_thread_for_the_same_inputs() {
        assert!(Derived::draw().is_none(), "no key outside a seeded scope");
        let key = {
            let _s = Seeded::new(3, "test");
            Derived::draw().unwrap()
        };
        let here = {
            let _d = key.scope(&[b"pk", b"message"]);
            draw()
        };
        let key = std::sync::Arc::new(key);
        let k = key.clone();
        let there = std::thread::spawn(move || {
            let _d = k.scope(&[b"pk", b"message"]);
            draw()
        })
        .join()
        .unwrap();
        assert_eq!(here, there, "the same key and inputs, another thread");
        let other = {
            let _d = key.scope(&[b"pk", b"another message"]);
            draw()
        };
        assert_ne!(here, other);
        let shifted = {
            let _d = key.scope(&[b"pkm", b"essage"]);
            draw()
        };
        assert_ne!(here, shifted, "the inputs are length-prefixed");
        assert!(!is_seeded(), "each scope ended");
    }

    #[test]
    fn an_inner_scope_gives_back_the_outer_one_where_it_was() {
        let expected = {
            let _s = Seeded::new(1, "outer");
            (draw(), draw())
        };
        let _outer = Seeded::new(1, "outer");
        let first = draw();
        {
            let _inner = Seeded::new(2, "inner");
            draw();
        }
        assert_eq!((first, draw()), expected);
    }
}
