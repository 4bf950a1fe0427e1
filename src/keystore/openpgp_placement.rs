//! What reading an OpenPGP certificate from outside costs, bounded before Sequoia
//! reads it.
//!
//! Sequoia canonicalises every certificate it reads (`Cert::from_packets`, and so
//! `CertParser` and `Cert::from_bytes`): it hashes each signature with the primary key
//! and the component the signature follows, and a signature whose digest prefix does
//! not match is then hashed against every component of its kind, in case it is merely
//! out of place. Both passes can be made quadratic by the certificate's author:
//!
//! - B signatures that fit nowhere on a certificate of C components cost B × C hashes
//!   (1 MB of bare User IDs and junk certifications, 4,800 of each, took 28 s to read
//!   in a release build, and the cost grows with the square of the size);
//! - Sequoia finds the primary User ID by going through them all, for each User ID and
//!   key it validates (9,600 bare User IDs, 182 KB, took 3.7 s to import);
//! - a large component followed by many small signatures costs their number times its
//!   size in the first pass.
//!
//! Certificates reach us from outside before anything about them is authenticated:
//! SOP inputs, Agent Cards fetched over HTTPS, key imports. [`certificates`] reads them
//! for Sequoia in time linear in the input:
//!
//! 1. It frames the packets (Sequoia's packet parser, which does no hashing, on past
//!    the end of each armored block into the next as the certificate parser goes),
//!    refuses a key whose verification costs more than its size says (a DSA group or
//!    an RSA key larger than any in use) and a certificate with more than
//!    [`MAX_USER_IDS`] User IDs or [`MAX_SUBKEYS`] subkeys, and estimates the first
//!    pass from the packets' sizes: over [`budget`], the input is refused before
//!    anything is hashed.
//! 2. It checks each signature where it stands, as Sequoia's first pass does (its type
//!    and its digest prefix over the primary key and the component it follows; no
//!    public-key operation), and estimates what the search for a place for those that
//!    do not fit would hash. Copies of one primary key are counted together against
//!    the caps, since they are merged into one certificate; copies of one signature
//!    under different components are counted for each, since Sequoia merges copies
//!    only under one component and searches for each; bytes hashed with a legacy
//!    algorithm (SHA-1 with collision detection) count four times.
//! 3. When that search would hash more than the budget, or the clones it could make
//!    (Sequoia puts a signature under every component its two-octet digest prefix
//!    matches) would hold more than a sixteenth of it, exactly those signatures are
//!    dropped from the costliest copies until what is left is within it, before
//!    anything is read, and the search has little to do. Each copy of a certificate
//!    is counted on its own, as Sequoia canonicalises each on its own. A revocation
//!    or direct-key signature of the primary key among them is placed after it
//!    instead (one hash, no search); any other is looked for among the components of
//!    its kind before it in its copy, in the order the signatures stand, while the
//!    budget the dropped left lasts, so that what is appended to a certificate cannot
//!    crowd out its own revocations; what is not found is lost. A signature that fits
//!    where it stands is never touched, whatever copies of it stand elsewhere. Under
//!    the budget, Sequoia reads the packets as they are.
//!
//! [`without_unplaced_signatures`] takes out what fits nowhere once a certificate is read:
//! Sequoia writes such signatures at the end of a certificate, where every later
//! reading of the stored bytes would search for them again.

// Signatures are keys of sets and maps here: Sequoia's `Signature` keeps caches behind
// interior mutability, but hashes and compares only its fields, MPIs and digest prefix
// (and a subpacket area only its subpackets, "the cache ... does not implement hash").
#![allow(clippy::mutable_key_type)]

use std::collections::{HashMap, HashSet};

use sequoia_openpgp as openpgp;

use openpgp::cert::{Cert, CertParser};
use openpgp::packet::header::BodyLength;
use openpgp::packet::key::{PrimaryRole, PublicParts};
use openpgp::packet::{Key, Signature, Tag};
use openpgp::parse::{PacketParser, PacketParserResult, Parse};
use openpgp::types::SignatureType;
use openpgp::{Fingerprint, Packet};

/// The hashing a reading may cost at least, whatever the input's size.
const BUDGET_FLOOR: u64 = 64 << 20;

/// The hashing a reading may cost per byte of input, beyond the floor: a certificate
/// read in time linear in its size (a flooded one with 150,000 certifications hashes
/// about 3 bytes per byte read) stays far under it.
const BUDGET_PER_INPUT_BYTE: u64 = 64;

/// What one hash costs beyond the bytes it hashes, in bytes: setting up the hash and
/// the signature's trailer cost as much as hashing a kilobyte (a search of 300 junk
/// certifications across 300 User IDs took 140 ms, about 1.5 µs a check).
const PER_HASH: u64 = 1024;

/// The bytes a reading of `input_len` bytes may hash, in each of Sequoia's two passes.
pub(crate) fn budget(input_len: usize) -> u64 {
    BUDGET_FLOOR.saturating_add(BUDGET_PER_INPUT_BYTE.saturating_mul(input_len as u64))
}

/// The most User IDs and User Attributes one certificate (its copies merged) may have.
/// Sequoia finds the primary User ID by going through them all, and does so again for
/// each User ID and key it validates: the cost grows with the square of their number
/// (4,800 bare User IDs, 91 KB, took 1.1 s in `sop encrypt`; 9,600 took 3.7 s).
/// Certificates in use have a few.
pub(crate) const MAX_USER_IDS: usize = 256;

/// The most subkeys (and components of unknown kinds) one certificate may have: each
/// is validated against the primary User ID, found as above.
pub(crate) const MAX_SUBKEYS: usize = 256;

/// The largest DSA group a key may have, in bits (p, q): FIPS 186-4's largest. Each
/// verification raises y to q modulo p, before any policy judges the key: a 16,384-bit
/// group of 4 KB took 10 s to check one signature with.
const MAX_DSA_BITS: (usize, usize) = (3072, 256);

/// The largest RSA modulus and public exponent a key may have, in bits.
const MAX_RSA_BITS: (usize, usize) = (16384, 33);

/// The key in `packet` (its fingerprint, and what is too large) when verifying a
/// signature with it costs more than its size says.
fn too_costly_key(packet: &Packet) -> Option<(String, String)> {
    use openpgp::crypto::mpi::PublicKey as Mpis;
    let (fingerprint, mpis) = match packet {
        Packet::PublicKey(k) => (k.fingerprint(), k.mpis()),
        Packet::PublicSubkey(k) => (k.fingerprint(), k.mpis()),
        Packet::SecretKey(k) => (k.fingerprint(), k.mpis()),
        Packet::SecretSubkey(k) => (k.fingerprint(), k.mpis()),
        _ => return None,
    };
    let parameters = match mpis {
        Mpis::DSA { p, q, .. } if p.bits() > MAX_DSA_BITS.0 || q.bits() > MAX_DSA_BITS.1 => {
            format!(
                "a DSA group of {} and {} bits, more than the {} and {} a key may have",
                p.bits(),
                q.bits(),
                MAX_DSA_BITS.0,
                MAX_DSA_BITS.1
            )
        }
        Mpis::RSA { e, n } if n.bits() > MAX_RSA_BITS.0 || e.bits() > MAX_RSA_BITS.1 => {
            format!(
                "an RSA modulus of {} bits and exponent of {} bits, more than the {} and {} a key may have",
                n.bits(),
                e.bits(),
                MAX_RSA_BITS.0,
                MAX_RSA_BITS.1
            )
        }
        _ => return None,
    };
    Some((fingerprint.to_hex(), parameters))
}

/// Why certificates were not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum PlacementError {
    /// The packets do not frame.
    #[error("{0}")]
    Packets(#[source] anyhow::Error),
    /// More components than a certificate may have.
    #[error(
        "certificate {fingerprint}: {user_ids} User IDs and {subkeys} subkeys, more than \
         the {MAX_USER_IDS} and {MAX_SUBKEYS} a certificate may have"
    )]
    TooManyComponents {
        /// The primary key's fingerprint.
        fingerprint: String,
        /// Its User IDs and User Attributes, copies counted together.
        user_ids: usize,
        /// Its subkeys and components of unknown kinds.
        subkeys: usize,
    },
    /// A key whose every verification costs more than its size says.
    #[error("key {fingerprint}: {parameters}")]
    KeyTooCostly {
        /// The key's fingerprint.
        fingerprint: String,
        /// What is too large.
        parameters: String,
    },
    /// Checking the signatures where they stand would hash more than the budget.
    #[error(
        "certificate {fingerprint}: checking its {signatures} signatures would hash \
         {cost} MiB, more than the {budget} MiB a {input} byte input may cost"
    )]
    TooCostly {
        /// The primary key's fingerprint.
        fingerprint: String,
        /// How many signatures it carries.
        signatures: usize,
        /// The estimate, in MiB.
        cost: u64,
        /// The budget, in MiB.
        budget: u64,
        /// The input's size.
        input: usize,
    },
}

/// What a reading of `input` costs and what it dropped, for tests and the fuzz target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Placement {
    /// Bytes Sequoia's first pass would hash (every signature where it stands).
    pub first_pass: u64,
    /// Bytes its search for a place for the unplaced signatures would hash, as given.
    pub search: u64,
    /// Signatures that fit nowhere they stand.
    pub unplaced: usize,
    /// Of those, the ones dropped because the search was over budget.
    pub dropped: usize,
    /// Of those, the ones placed where they fit instead of dropped.
    pub moved: usize,
    /// The budget of each pass.
    pub budget: u64,
}

/// The certificates in `input` (armored or binary), for Sequoia to read in time linear
/// in the input; see the module documentation.
pub(crate) fn certificates(input: &[u8]) -> Result<CertParser<'static>, PlacementError> {
    read(input).map(|(parser, _)| parser)
}

/// [`certificates`], with what the reading cost.
pub(crate) fn read(input: &[u8]) -> Result<(CertParser<'static>, Placement), PlacementError> {
    let budget = budget(input.len());
    // What the search's clones may hold: a sixteenth of what it may hash.
    read_within(input, budget, budget, budget / 16)
}

/// [`read`] with a budget for each pass and for the search's clones.
fn read_within(
    input: &[u8],
    first_pass_budget: u64,
    search_budget: u64,
    clones_budget: u64,
) -> Result<(CertParser<'static>, Placement), PlacementError> {
    let framed = frame(input)?;
    if let Some((fingerprint, parameters)) = framed.iter().find_map(|f| too_costly_key(&f.packet)) {
        return Err(PlacementError::KeyTooCostly {
            fingerprint,
            parameters,
        });
    }
    let packets: Vec<&Packet> = framed.iter().map(|f| &f.packet).collect();
    let sizes: Vec<u64> = framed.iter().map(|f| f.size).collect();
    let mut placement = Placement {
        budget: search_budget,
        ..Default::default()
    };
    let certs = spans(&packets);
    // Copies of one primary key are merged into one certificate, and identical
    // components into one: counted as Sequoia will hold them.
    let mut groups: HashMap<String, Group<'_>> = HashMap::new();
    for cert in &certs {
        let group = groups.entry(cert.fingerprint(&packets)).or_default();
        for c in cert.pieces.iter().filter_map(|p| p.component) {
            let packet = packets[c];
            let user_id = matches!(packet, Packet::UserID(_) | Packet::UserAttribute(_));
            if group
                .components
                .insert(component_id(packet), sizes[c])
                .is_none()
            {
                *if user_id {
                    &mut group.user_ids
                } else {
                    &mut group.subkeys
                } += 1;
            }
        }
    }
    if let Some((fingerprint, group)) = groups
        .iter()
        .find(|(_, g)| g.user_ids > MAX_USER_IDS || g.subkeys > MAX_SUBKEYS)
    {
        return Err(PlacementError::TooManyComponents {
            fingerprint: fingerprint.clone(),
            user_ids: group.user_ids,
            subkeys: group.subkeys,
        });
    }
    placement.first_pass = certs.iter().fold(0u64, |sum, c| {
        sum.saturating_add(c.first_pass_cost(&packets, &sizes))
    });
    if placement.first_pass > first_pass_budget {
        let worst = certs
            .iter()
            .max_by_key(|c| c.first_pass_cost(&packets, &sizes))
            .map(|c| (c.fingerprint(&packets), c.signatures()))
            .unwrap_or_default();
        return Err(PlacementError::TooCostly {
            fingerprint: worst.0,
            signatures: worst.1,
            cost: placement.first_pass >> 20,
            budget: first_pass_budget >> 20,
            input: input.len(),
        });
    }
    // What the search would cost, copy by copy: Sequoia canonicalises each copy of a
    // certificate on its own (the copies are merged later, without what fits nowhere),
    // merges copies of a signature that differ only in what is not hashed when they
    // stand under the same component, and searches once for each; copies under
    // different components are searched for each.
    let costs: Vec<SpanCost> = certs
        .iter()
        .map(|cert| cert.search_cost(&packets, &sizes))
        .collect();
    placement.unplaced = costs.iter().map(|c| c.indices.len()).sum();
    placement.search = costs.iter().fold(0u64, |a, c| a.saturating_add(c.search));
    // The signatures dropped: those that fit nowhere they stand, of the costliest copies
    // until what is left is within budget (the search's hashing, then what its clones
    // would hold), and no other (not a copy of one standing elsewhere).
    let mut drop: HashSet<usize> = HashSet::new();
    let mut dropped = vec![false; costs.len()];
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(costs[i].search));
    let mut left = placement.search;
    for &i in &order {
        if left <= placement.budget || costs[i].search == 0 {
            break;
        }
        left -= costs[i].search;
        dropped[i] = true;
    }
    order.sort_by_key(|&i| std::cmp::Reverse(costs[i].clones));
    let mut left = (0..costs.len())
        .filter(|&i| !dropped[i])
        .fold(0u64, |a, i| a.saturating_add(costs[i].clones));
    for &i in &order {
        if left <= clones_budget {
            break;
        }
        if !dropped[i] {
            left -= costs[i].clones;
            dropped[i] = true;
        }
    }
    // Of those, each in the order it stands, a signature of the primary key itself (a
    // revocation certificate appended to a certificate) is placed after it: one hash,
    // whatever the budget. Any other is looked for among the components before it in
    // its copy, nearest first, while the budget the dropped copies left lasts, and
    // placed after the one it fits: what is appended to a certificate comes after it,
    // and cannot crowd out its own revocations and bindings.
    let kept: u64 = (0..costs.len())
        .filter(|&i| !dropped[i])
        .fold(0u64, |a, i| a.saturating_add(costs[i].search));
    let mut rescue = placement.budget.saturating_sub(kept);
    let mut after: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, cost) in costs.iter().enumerate() {
        if !dropped[i] {
            continue;
        }
        let cert = &certs[i];
        let Some(primary) = cert.primary_key(&packets) else {
            drop.extend(&cost.indices);
            continue;
        };
        let key = sizes[cert.primary];
        for &s in &cost.indices {
            drop.insert(s);
            let Packet::Signature(sig) = packets[s] else {
                continue;
            };
            if matches!(
                sig.typ(),
                SignatureType::KeyRevocation | SignatureType::DirectKey
            ) {
                if fits(sig, primary, None) {
                    after.entry(cert.primary).or_default().push(s);
                }
                continue;
            }
            // Only components of the kind its type goes to, as Sequoia places it.
            let of_kind = |c: &usize| match packets[*c] {
                Packet::UserID(_) | Packet::UserAttribute(_) => matches!(
                    sig.typ(),
                    SignatureType::GenericCertification
                        | SignatureType::PersonaCertification
                        | SignatureType::CasualCertification
                        | SignatureType::PositiveCertification
                        | SignatureType::CertificationRevocation
                        | SignatureType::CertificationApproval
                ),
                Packet::PublicSubkey(_) | Packet::SecretSubkey(_) => matches!(
                    sig.typ(),
                    SignatureType::SubkeyBinding | SignatureType::SubkeyRevocation
                ),
                _ => false,
            };
            let before = cert
                .pieces
                .iter()
                .rev()
                .filter_map(|p| p.component)
                .filter(|&c| c < s)
                .filter(of_kind);
            for c in before {
                let each = weight(sig).saturating_mul(
                    key.saturating_add(sizes[c])
                        .saturating_add(PER_HASH)
                        .saturating_add(sizes[s]),
                );
                if each > rescue {
                    rescue = 0;
                    break;
                }
                rescue -= each;
                if fits(sig, primary, Some(packets[c])) {
                    after.entry(c).or_default().push(s);
                    break;
                }
            }
        }
    }
    let moved: usize = after.values().map(Vec::len).sum();
    placement.dropped = drop.len() - moved;
    placement.moved = moved;
    if placement.dropped > 0 {
        tracing::warn!(
            dropped = placement.dropped,
            "OpenPGP certificate: signatures that fit nowhere they stand dropped, too many to search for a place"
        );
    }
    let mut framed: Vec<Option<Packet>> = framed.into_iter().map(|f| Some(f.packet)).collect();
    let mut packets: Vec<Packet> = Vec::with_capacity(framed.len());
    for i in 0..framed.len() {
        if drop.contains(&i) {
            continue;
        }
        packets.extend(framed[i].take());
        for &s in after.get(&i).into_iter().flatten() {
            packets.extend(framed[s].take());
        }
    }
    Ok((CertParser::from_iter(packets), placement))
}

/// `cert` without the signatures that fit none of its components (kept by Sequoia,
/// written last, searched for again at every reading); `cert` itself when it has none
/// or they cannot be taken out. Found by digest prefix, as Sequoia places them, not by
/// verifying anything.
pub(crate) fn without_unplaced_signatures(cert: Cert) -> Cert {
    let packets: Vec<Packet> = cert.clone().into_packets().collect();
    let unplaced: HashSet<usize> = {
        let refs: Vec<&Packet> = packets.iter().collect();
        spans(&refs)
            .iter()
            .flat_map(|c| c.unplaced(&refs))
            .map(|(i, _)| i)
            .collect()
    };
    if unplaced.is_empty() {
        return cert;
    }
    let kept = packets
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !unplaced.contains(i))
        .map(|(_, p)| p);
    Cert::from_packets(kept).unwrap_or(cert)
}

/// The fuzz target's invariants (`openpgp_cert_import`; FUZZING.md), on inputs Sequoia
/// reads quickly; `Err` names the one that broke.
///
/// - Within the budget, the reading is Sequoia's own (`CertParser::from_bytes`).
/// - With no budget (every search over it), no component is lost, no signature is
///   made up, and nothing is left for Sequoia to search for.
/// - [`without_unplaced_signatures`] leaves none and keeps every component.
#[doc(hidden)]
pub fn check(input: &[u8]) -> Result<(), String> {
    type Certs = openpgp::Result<Vec<Cert>>;
    let theirs: Certs = CertParser::from_bytes(input).and_then(|p| p.collect());
    let ours = match read_within(input, u64::MAX, u64::MAX, u64::MAX) {
        Ok((ours, _)) => ours,
        // Refused by count or key size, whatever the budget.
        Err(PlacementError::TooManyComponents { .. } | PlacementError::KeyTooCostly { .. }) => {
            return Ok(())
        }
        Err(e) if theirs.is_ok() => return Err(format!("refused what Sequoia reads: {e}")),
        Err(_) => return Ok(()),
    };
    let ours: Certs = ours.collect();
    let unbounded = match (ours, theirs) {
        (Ok(a), Ok(b)) if a == b => b,
        (Err(_), Err(_)) => return Ok(()),
        (a, b) => {
            return Err(format!(
                "within the budget, read {:?} certificates where Sequoia read {:?}",
                a.map(|c| c.len()).map_err(|e| e.to_string()),
                b.map(|c| c.len()).map_err(|e| e.to_string())
            ))
        }
    };
    let (bounded, placement) =
        read_within(input, u64::MAX, 0, 0).map_err(|e| format!("no budget: {e}"))?;
    let bounded: Vec<Cert> = bounded
        .collect::<Certs>()
        .map_err(|e| format!("no budget: {e}"))?;
    if bounded.len() != unbounded.len() {
        return Err(format!(
            "no budget: {} certificates, Sequoia read {}",
            bounded.len(),
            unbounded.len()
        ));
    }
    let signatures = |c: &Cert| -> HashSet<Signature> {
        c.clone()
            .into_packets()
            .filter_map(|p| match p {
                Packet::Signature(s) => Some(hashed_part(&s)),
                _ => None,
            })
            .collect()
    };
    let components = |c: &Cert| -> Vec<Packet> {
        c.clone()
            .into_packets()
            .filter(|p| p.tag() != Tag::Signature)
            .collect()
    };
    let unplaced = |c: &Cert| -> usize {
        let packets: Vec<Packet> = c.clone().into_packets().collect();
        let refs: Vec<&Packet> = packets.iter().collect();
        spans(&refs).iter().map(|s| s.unplaced(&refs).len()).sum()
    };
    for (b, u) in bounded.iter().zip(&unbounded) {
        if components(b) != components(u) {
            return Err(format!("no budget: {} lost a component", u.fingerprint()));
        }
        if !signatures(b).is_subset(&signatures(u)) {
            return Err(format!("no budget: {} gained a signature", u.fingerprint()));
        }
        let has_components = u.userids().next().is_some()
            || u.user_attributes().next().is_some()
            || u.keys().subkeys().next().is_some()
            || u.unknowns().next().is_some();
        if has_components && unplaced(b) > 0 {
            return Err(format!(
                "no budget: {} keeps {} unplaced signatures ({placement:?})",
                u.fingerprint(),
                unplaced(b)
            ));
        }
        let clean = without_unplaced_signatures(u.clone());
        if (has_components && unplaced(&clean) > 0) || components(&clean) != components(u) {
            return Err(format!(
                "{}: taking out what fits nowhere left some or lost a component",
                u.fingerprint()
            ));
        }
    }
    Ok(())
}

/// A certificate's component as Sequoia merges them: a subkey by its fingerprint,
/// anything else by its packet.
#[derive(PartialEq, Eq, Hash)]
enum Component<'a> {
    /// The primary key itself, for the signatures right after it.
    Primary,
    Key(Fingerprint),
    Other(&'a Packet),
}

fn component_id(packet: &Packet) -> Component<'_> {
    match packet {
        Packet::PublicSubkey(k) => Component::Key(k.fingerprint()),
        Packet::SecretSubkey(k) => Component::Key(k.fingerprint()),
        other => Component::Other(other),
    }
}

/// How many times a byte of `sig`'s hashing counts: SHA-1 with collision detection
/// (and the other legacy hashes) hashes about four times slower than SHA-256.
fn weight(sig: &Signature) -> u64 {
    use openpgp::types::HashAlgorithm;
    match sig.hash_algo() {
        HashAlgorithm::SHA1 | HashAlgorithm::MD5 | HashAlgorithm::RipeMD => 4,
        _ => 1,
    }
}

/// One certificate, its copies merged, as counted against the caps.
#[derive(Default)]
struct Group<'a> {
    /// Its distinct components, with their sizes.
    components: HashMap<Component<'a>, u64>,
    user_ids: usize,
    subkeys: usize,
}

/// What Sequoia's search for a place for one copy's unplaced signatures would cost.
struct SpanCost {
    /// Bytes hashed, weighted by hash algorithm.
    search: u64,
    /// Bytes its clones would hold at most: Sequoia puts a signature under every
    /// component its digest prefix matches, and a prefix is two octets anyone can
    /// grind for.
    clones: u64,
    /// Where its unplaced signatures stand in the input.
    indices: Vec<usize>,
}

/// One top-level packet and the size of its body.
struct Framed {
    packet: Packet,
    size: u64,
}

/// The top-level packets of `input`, framed and parsed, hashed nowhere; read as
/// Sequoia's certificate parser reads them: packets of unknown kinds with their
/// bodies, and on past the end of one armored block into the next.
fn frame(input: &[u8]) -> Result<Vec<Framed>, PlacementError> {
    let mut out = Vec::new();
    let mut ppr = PacketParser::from_bytes(input).map_err(PlacementError::Packets)?;
    loop {
        let mut pp = match ppr {
            PacketParserResult::Some(pp) => pp,
            PacketParserResult::EOF(eof) => match PacketParser::from_reader(eof.into_reader()) {
                Ok(PacketParserResult::Some(pp)) => pp,
                Ok(PacketParserResult::EOF(_)) => break,
                Err(e)
                    if e.downcast_ref::<std::io::Error>()
                        .is_some_and(|e| e.kind() == std::io::ErrorKind::UnexpectedEof) =>
                {
                    break
                }
                Err(e) => return Err(PlacementError::Packets(e)),
            },
        };
        let size = match pp.header().length() {
            BodyLength::Full(n) => u64::from(*n),
            // Not a certificate's packet: the whole input, to be safe.
            _ => input.len() as u64,
        };
        if let Packet::Unknown(_) = pp.packet {
            pp.buffer_unread_content()
                .map_err(PlacementError::Packets)?;
        }
        let (packet, next) = pp.next().map_err(PlacementError::Packets)?;
        out.push(Framed { packet, size });
        ppr = next;
    }
    Ok(out)
}

/// A component (or the primary key itself) and the signatures that follow it, by
/// index into the packets.
struct Piece {
    component: Option<usize>,
    signatures: Vec<usize>,
}

/// One certificate: its primary key and its pieces, by index.
struct Span {
    primary: usize,
    pieces: Vec<Piece>,
}

/// The certificates in `packets`, as Sequoia's certificate parser splits them.
fn spans(packets: &[&Packet]) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        match p.tag() {
            Tag::PublicKey | Tag::SecretKey => out.push(Span {
                primary: i,
                pieces: vec![Piece {
                    component: None,
                    signatures: Vec::new(),
                }],
            }),
            // Read past by the certificate parser.
            Tag::Marker | Tag::Trust | Tag::Padding => {}
            tag => {
                let Some(cert) = out.last_mut() else { continue };
                if tag == Tag::Signature {
                    if let Some(piece) = cert.pieces.last_mut() {
                        piece.signatures.push(i);
                    }
                } else {
                    cert.pieces.push(Piece {
                        component: Some(i),
                        signatures: Vec::new(),
                    });
                }
            }
        }
    }
    out
}

impl Span {
    fn primary_key<'a>(&self, packets: &[&'a Packet]) -> Option<&'a Key<PublicParts, PrimaryRole>> {
        match packets[self.primary] {
            Packet::PublicKey(k) => Some(k),
            Packet::SecretKey(k) => Some(k.parts_as_public()),
            _ => None,
        }
    }

    fn fingerprint(&self, packets: &[&Packet]) -> String {
        self.primary_key(packets)
            .map(|k| k.fingerprint().to_hex())
            .unwrap_or_default()
    }

    fn signatures(&self) -> usize {
        self.pieces.iter().map(|p| p.signatures.len()).sum()
    }

    /// Bytes the first pass hashes: each signature with the primary key and its
    /// component, weighted by its hash algorithm.
    fn first_pass_cost(&self, packets: &[&Packet], sizes: &[u64]) -> u64 {
        let key = sizes[self.primary];
        self.pieces.iter().fold(key, |sum, piece| {
            let component = piece.component.map_or(0, |c| sizes[c]);
            let per_signature = key.saturating_add(component).saturating_add(PER_HASH);
            piece
                .signatures
                .iter()
                .fold(sum.saturating_add(component), |sum, &s| {
                    let each = per_signature.saturating_add(sizes[s]);
                    let weight = match packets[s] {
                        Packet::Signature(sig) => weight(sig),
                        _ => 1,
                    };
                    sum.saturating_add(weight.saturating_mul(each))
                })
        })
    }

    /// What searching for a place for its unplaced signatures would cost: each,
    /// once under each component it stands after, hashed against every component.
    fn search_cost(&self, packets: &[&Packet], sizes: &[u64]) -> SpanCost {
        let mut components: HashMap<Component<'_>, u64> = HashMap::new();
        for c in self.pieces.iter().filter_map(|p| p.component) {
            components.insert(component_id(packets[c]), sizes[c]);
        }
        let c = components.len() as u64;
        let component_bytes = components.values().fold(0u64, |a, &s| a.saturating_add(s));
        let key = sizes[self.primary];
        let mut searched: HashSet<(Component<'_>, Signature)> = HashSet::new();
        let mut cost = SpanCost {
            search: 0,
            clones: 0,
            indices: Vec::new(),
        };
        for (i, under) in self.unplaced(packets) {
            cost.indices.push(i);
            let Packet::Signature(sig) = packets[i] else {
                continue;
            };
            let under = under.map_or(Component::Primary, |u| component_id(packets[u]));
            if !searched.insert((under, hashed_part(sig))) {
                continue;
            }
            let each = component_bytes.saturating_add(
                c.saturating_mul(PER_HASH.saturating_add(key).saturating_add(sizes[i])),
            );
            cost.search = cost.search.saturating_add(weight(sig).saturating_mul(each));
            cost.clones = cost
                .clones
                .saturating_add(c.saturating_add(1).saturating_mul(sizes[i]));
        }
        cost
    }

    /// Where the signatures stand that fit nowhere they stand, with the component they
    /// follow: those Sequoia would search a place for (signature packets it could not
    /// parse, it does not hash).
    fn unplaced(&self, packets: &[&Packet]) -> Vec<(usize, Option<usize>)> {
        let Some(primary) = self.primary_key(packets) else {
            return Vec::new();
        };
        self.pieces
            .iter()
            .flat_map(|piece| {
                let component = piece.component.map(|c| packets[c]);
                piece
                    .signatures
                    .iter()
                    .copied()
                    .filter(move |&s| {
                        matches!(packets[s], Packet::Signature(sig) if !fits(sig, primary, component))
                    })
                    .map(|s| (s, piece.component))
            })
            .collect()
    }
}

/// Whether `sig` fits right after `component` of the certificate whose primary key is
/// the packet `primary`: see [`fits`].
pub(crate) fn fits_after(sig: &Signature, primary: &Packet, component: &Packet) -> bool {
    let primary = match primary {
        Packet::PublicKey(k) => k,
        Packet::SecretKey(k) => k.parts_as_public(),
        _ => return false,
    };
    fits(sig, primary, Some(component))
}

/// Whether `sig` fits where it stands, after `component` (or the primary key itself):
/// its type is one such a component carries and its digest prefix matches its hash
/// over the primary key and the component, as Sequoia's canonicalisation checks before
/// it searches elsewhere (attestations go to a User ID or User Attribute only).
fn fits(
    sig: &Signature,
    primary: &Key<PublicParts, PrimaryRole>,
    component: Option<&Packet>,
) -> bool {
    let digest = sig.hash_algo().context().and_then(|ctx| {
        let mut ctx = ctx.for_signature(sig.version());
        let approval = sig.typ() == SignatureType::CertificationApproval;
        match component {
            None => sig.hash_direct_key(&mut ctx, primary)?,
            Some(Packet::UserID(u)) if approval => {
                sig.hash_userid_approval(&mut ctx, primary, u)?
            }
            Some(Packet::UserID(u)) => sig.hash_userid_binding(&mut ctx, primary, u)?,
            Some(Packet::UserAttribute(u)) if approval => {
                sig.hash_user_attribute_approval(&mut ctx, primary, u)?
            }
            Some(Packet::UserAttribute(u)) => {
                sig.hash_user_attribute_binding(&mut ctx, primary, u)?
            }
            Some(Packet::PublicSubkey(k)) => sig.hash_subkey_binding(&mut ctx, primary, k)?,
            Some(Packet::SecretSubkey(k)) => {
                sig.hash_subkey_binding(&mut ctx, primary, k.parts_as_public())?
            }
            // A component of a kind Sequoia does not know: all its signatures are
            // searched for.
            Some(_) => return Err(anyhow::anyhow!("no place")),
        }
        ctx.into_digest()
    });
    digest.is_ok_and(|d| d.get(..2) == Some(&sig.digest_prefix()[..]))
}

/// `sig` without its unhashed area: what decides where it fits. Sequoia merges copies
/// that differ only there, so a copy it keeps may equal none of those given.
fn hashed_part(sig: &Signature) -> Signature {
    let mut sig = sig.clone();
    sig.unhashed_area_mut().clear();
    sig
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use openpgp::cert::CertBuilder;
    use openpgp::packet::signature::SignatureBuilder;
    use openpgp::packet::UserID;
    use openpgp::serialize::SerializeInto;
    use openpgp::types::SignatureType;

    /// A certificate of Bob's, new each time, with its secret keys.
    pub(crate) fn bob() -> Cert {
        CertBuilder::general_purpose(Some("bob@example.org"))
            .generate()
            .unwrap()
            .0
    }

    /// `cert`'s primary key, to sign with.
    pub(crate) fn signer(cert: &Cert) -> openpgp::crypto::KeyPair {
        cert.primary_key()
            .key()
            .clone()
            .parts_into_secret()
            .unwrap()
            .into_keypair()
            .unwrap()
    }

    /// `bob` followed by `uids` bare User IDs, a copy of his subkey and `sigs`
    /// certifications by Bob's primary key of a User ID the certificate does not have:
    /// what Sequoia would search for a place across all the User IDs.
    fn hostile(bob: &Cert, uids: usize, sigs: usize) -> Vec<u8> {
        hostile_copy(bob, uids, sigs, 0)
    }

    /// [`hostile`], its User IDs and signatures distinct for each `copy`.
    fn hostile_copy(bob: &Cert, uids: usize, sigs: usize, copy: usize) -> Vec<u8> {
        let mut signer = signer(bob);
        let mut bytes = bob.to_vec().unwrap();
        for i in 0..uids {
            let uid = UserID::from(format!("u{i}.{copy}@example.org"));
            bytes.extend(Packet::from(uid).to_vec().unwrap());
        }
        // After a subkey no certification fits, not even by a chance match of its
        // two-octet digest prefix.
        let subkey = bob.keys().subkeys().next().unwrap().key().clone();
        bytes.extend(Packet::from(subkey).to_vec().unwrap());
        let ghost = UserID::from("ghost@example.org");
        for i in 0..sigs {
            let at = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(1_700_000_000 + (copy * sigs + i) as u64);
            let sig = SignatureBuilder::new(SignatureType::GenericCertification)
                .set_signature_creation_time(at)
                .unwrap()
                .sign_userid_binding(&mut signer, bob.primary_key().key(), &ghost)
                .unwrap();
            bytes.extend(Packet::from(sig).to_vec().unwrap());
        }
        bytes
    }

    fn read_one(input: &[u8]) -> (Cert, Placement) {
        let (parser, placement) = read(input).unwrap();
        let certs: Vec<Cert> = parser.collect::<openpgp::Result<_>>().unwrap();
        assert_eq!(certs.len(), 1);
        (certs.into_iter().next().unwrap(), placement)
    }

    #[test]
    fn a_certificate_as_made_is_read_unchanged() {
        let bob = bob();
        let (cert, placement) = read_one(&bob.to_vec().unwrap());
        assert_eq!(cert, bob);
        assert_eq!(placement.unplaced, 0);
        assert_eq!(placement.dropped, 0);
        assert!(placement.first_pass > 0 && placement.first_pass < placement.budget);
    }

    #[test]
    fn a_few_unplaced_signatures_are_left_to_sequoia() {
        let bob = bob();
        let bytes = hostile(&bob, 8, 8);
        let (cert, placement) = read_one(&bytes);
        assert_eq!(placement.unplaced, 8);
        assert_eq!(placement.dropped, 0);
        assert!(placement.search <= placement.budget);
        // As Sequoia reads it unbounded.
        assert_eq!(cert, Cert::from_bytes(&bytes).unwrap());
        // (Sequoia's search may place one by a chance match of its digest prefix.)
        let bad = cert.bad_signatures().count();
        assert!((7..=8).contains(&bad), "{bad}");
        let clean = without_unplaced_signatures(cert.clone());
        assert_eq!(clean.bad_signatures().count(), 0);
        assert_eq!(
            clean.clone().into_packets().count(),
            cert.clone().into_packets().count() - bad
        );
        assert_eq!(clean.userids().count(), cert.userids().count());
        assert_eq!(clean.fingerprint(), bob.fingerprint());
        // Stored and read again, nothing is left to search.
        let again = Cert::from_bytes(&clean.to_vec().unwrap()).unwrap();
        assert_eq!(again.bad_signatures().count(), 0);
    }

    #[test]
    fn a_signature_merely_out_of_place_is_still_placed_under_the_budget() {
        // Bob's User ID binding moved after his subkey: Sequoia finds its place.
        let bob = bob();
        let packets: Vec<Packet> = bob.clone().into_packets().collect();
        let uid_sig = packets
            .iter()
            .position(|p| matches!(p, Packet::Signature(s) if s.typ() == SignatureType::PositiveCertification))
            .unwrap();
        let mut moved = packets.clone();
        let sig = moved.remove(uid_sig);
        moved.push(sig);
        let bytes: Vec<u8> = moved.iter().flat_map(|p| p.to_vec().unwrap()).collect();
        let (cert, placement) = read_one(&bytes);
        assert_eq!(placement.unplaced, 1);
        assert_eq!(placement.dropped, 0);
        let policy = openpgp::policy::StandardPolicy::new();
        assert_eq!(
            cert.with_policy(&policy, None).unwrap().userids().count(),
            1
        );
    }

    #[test]
    fn fail_a_flood_of_unplaced_signatures_is_dropped_before_the_search() {
        let bob = bob();
        let bytes = hostile(&bob, 200, 2_000);
        let (cert, placement) = read_one(&bytes);
        assert_eq!(placement.unplaced, 2_000);
        assert!(placement.search > placement.budget, "{placement:?}");
        assert_eq!(placement.dropped + placement.moved, 2_000);
        // (What a chance match of its digest prefix placed stays Sequoia's to judge.)
        assert!(
            cert.bad_signatures().count() <= placement.moved,
            "{placement:?}"
        );
        // Bob's own components and bindings are untouched.
        let policy = openpgp::policy::StandardPolicy::new();
        let valid = cert.with_policy(&policy, None).unwrap();
        assert_eq!(
            valid
                .userids()
                .map(|u| u.userid().clone())
                .collect::<Vec<_>>(),
            vec![UserID::from("bob@example.org")]
        );
        assert_eq!(valid.keys().count(), bob.keys().count());
    }

    #[test]
    fn fail_copies_unplaced_signatures_differing_only_unhashed_are_dropped_alike() {
        // Copies of one junk signature with different unhashed areas: Sequoia merges
        // them into one that equals none given.
        let bob = bob();
        let bytes = hostile(&bob, 200, 2_000);
        let mut framed = frame(&bytes).unwrap();
        for (i, f) in framed.iter_mut().enumerate() {
            if let Packet::Signature(s) = &mut f.packet {
                if s.typ() == SignatureType::GenericCertification {
                    let note = openpgp::packet::signature::subpacket::Subpacket::new(
                        openpgp::packet::signature::subpacket::SubpacketValue::SignatureCreationTime(
                            (1_600_000_000 + i as u32).into(),
                        ),
                        false,
                    )
                    .unwrap();
                    s.unhashed_area_mut().add(note).unwrap();
                }
            }
        }
        let mut twice: Vec<u8> = Vec::new();
        for f in framed.iter().chain(framed.iter().skip(1)) {
            twice.extend(f.packet.to_vec().unwrap());
        }
        let (cert, placement) = read_one(&twice);
        assert!(
            placement.dropped + placement.moved >= 2_000,
            "{placement:?}"
        );
        // (What a chance match of its digest prefix placed stays Sequoia's to judge.)
        assert!(
            cert.bad_signatures().count() <= placement.moved,
            "{placement:?}"
        );
    }

    #[test]
    fn fail_each_copy_is_counted() {
        // Sequoia canonicalises each copy of a certificate on its own: identical copies
        // cost what one does, times their number.
        let bob = bob();
        let one = hostile(&bob, 30, 150);
        let (_, single) = read(&one).unwrap();
        assert_eq!(single.dropped, 0, "{single:?}");
        let same: Vec<u8> = (0..8).flat_map(|_| one.clone()).collect();
        let (_, placement) = read(&same).unwrap();
        assert_eq!(placement.unplaced, 8 * 150);
        assert_eq!(placement.search, 8 * single.search, "{placement:?}");
        // Within what the search may hash, not within what its clones may hold: the
        // costliest copies' junk is dropped until what is left is.
        assert!(placement.search <= placement.budget, "{placement:?}");
        assert!(
            placement.dropped > 0 && placement.dropped < 8 * 150 && placement.dropped % 150 == 0,
            "{placement:?}"
        );
        // Many certificates, each within the budget, together not.
        let many: Vec<u8> = (0..24)
            .flat_map(|_| hostile(&self::bob(), 30, 150))
            .collect();
        let (parser, placement) = read(&many).unwrap();
        assert!(placement.search > placement.budget, "{placement:?}");
        assert!(placement.dropped >= 150, "{placement:?}");
        for cert in parser {
            assert!(cert.unwrap().bad_signatures().count() <= 150);
        }
    }

    #[test]
    fn fail_a_large_signature_that_could_be_cloned_under_every_user_id_is_dropped() {
        // Sequoia puts an unplaced signature under every component its two-octet digest
        // prefix matches: ground for, 256 User IDs make 256 copies of it.
        let bob = bob();
        let mut bytes = hostile(&bob, 255, 0);
        let packets: Vec<Packet> = bob.clone().into_packets().collect();
        let mut sig = packets
            .iter()
            .find_map(|p| match p {
                Packet::Signature(s) if s.typ() == SignatureType::PositiveCertification => {
                    Some(s.clone())
                }
                _ => None,
            })
            .unwrap();
        let note = openpgp::packet::signature::subpacket::Subpacket::new(
            openpgp::packet::signature::subpacket::SubpacketValue::NotationData(
                openpgp::packet::signature::subpacket::NotationData::new(
                    "pad@example.org",
                    vec![0u8; 60_000],
                    None,
                ),
            ),
            false,
        )
        .unwrap();
        sig.unhashed_area_mut().add(note).unwrap();
        bytes.extend(Packet::from(sig).to_vec().unwrap());
        let (cert, placement) = read_one(&bytes);
        assert_eq!(placement.unplaced, 1, "{placement:?}");
        assert!(placement.search < placement.budget, "{placement:?}");
        assert_eq!(placement.dropped + placement.moved, 1, "{placement:?}");
        assert_eq!(cert.userids().count(), 256);
    }

    /// `cert`'s key revocation, as a revocation certificate.
    fn revocation(cert: &Cert) -> Packet {
        let mut signer = signer(cert);
        let sig = cert
            .revoke(
                &mut signer,
                openpgp::types::ReasonForRevocation::KeyCompromised,
                b"lost",
            )
            .unwrap();
        Packet::from(sig)
    }

    fn revoked(cert: &Cert) -> bool {
        let policy = openpgp::policy::StandardPolicy::new();
        matches!(
            cert.revocation_status(&policy, None),
            openpgp::types::RevocationStatus::Revoked(_)
        )
    }

    #[test]
    fn fail_junk_under_a_copy_of_the_primary_key_does_not_take_off_its_revocation() {
        // The victim's certificate with its revocation certificate appended (out of
        // place, after the subkey), then a copy of its public primary key followed by
        // junk: only the junk copy is over budget.
        let victim = bob();
        let mut input = victim.to_vec().unwrap();
        input.extend(revocation(&victim).to_vec().unwrap());
        let theirs = Cert::from_bytes(&input).unwrap();
        assert!(revoked(&theirs));
        let flood = hostile(&victim, 200, 2_000);
        input.extend(flood);
        let (parser, placement) = read(&input).unwrap();
        assert_eq!(placement.dropped + placement.moved, 2_000, "{placement:?}");
        let certs: Vec<Cert> = parser.collect::<openpgp::Result<_>>().unwrap();
        assert_eq!(certs.len(), 2);
        assert!(revoked(&certs[0]));
        assert_eq!(certs[0], theirs);
    }

    #[test]
    fn fail_junk_appended_to_a_certificate_does_not_take_off_its_revocation() {
        // The junk in the same copy as the revocation: the search is over budget, and
        // the revocation, which fits the primary key, is placed after it all the same.
        let victim = bob();
        let mut input = victim.to_vec().unwrap();
        input.extend(revocation(&victim).to_vec().unwrap());
        let flood = hostile(&victim, 200, 2_000);
        let primary_len = Packet::from(victim.primary_key().key().clone())
            .to_vec()
            .unwrap()
            .len();
        let own = victim.to_vec().unwrap().len();
        // Bob's User IDs, subkey and junk, without a primary key before them.
        assert_eq!(flood[..own], victim.to_vec().unwrap()[..]);
        input.extend(&flood[primary_len..]);
        let (cert, placement) = read_one(&input);
        // The junk, the revocation and a copy of Bob's direct-key signature.
        assert_eq!(placement.unplaced, 2_002, "{placement:?}");
        assert_eq!(placement.dropped + placement.moved, 2_002, "{placement:?}");
        assert!(placement.moved >= 2, "{placement:?}");
        assert!(revoked(&cert));
        // (What a chance match of its digest prefix placed stays Sequoia's to judge.)
        assert!(
            cert.bad_signatures().count() <= placement.moved,
            "{placement:?}"
        );
    }

    #[test]
    fn fail_more_user_ids_than_a_certificate_may_have_are_refused() {
        let bob = bob();
        let at_most = hostile(&bob, MAX_USER_IDS - 1, 0);
        assert!(read(&at_most).is_ok());
        let over = hostile(&bob, MAX_USER_IDS, 0);
        match read(&over) {
            Err(PlacementError::TooManyComponents { user_ids, .. }) => {
                assert_eq!(user_ids, MAX_USER_IDS + 1)
            }
            other => panic!("{:?}", other.map(|(_, p)| p)),
        }
        // Split over copies, counted together; the same User IDs twice count once.
        let half = hostile(&bob, MAX_USER_IDS / 2 + 1, 0);
        let twice: Vec<u8> = half.iter().chain(half.iter()).copied().collect();
        assert!(read(&twice).is_ok());
        let other = hostile_copy(&bob, MAX_USER_IDS / 2 + 1, 0, 1);
        let both: Vec<u8> = half.iter().chain(other.iter()).copied().collect();
        assert!(matches!(
            read(&both),
            Err(PlacementError::TooManyComponents { .. })
        ));
    }

    #[test]
    fn fail_a_large_component_with_many_signatures_is_refused_unhashed() {
        let bob = bob();
        let mut bytes = bob.to_vec().unwrap();
        let big = UserID::from(vec![b'a'; 512 << 10]);
        bytes.extend(Packet::from(big).to_vec().unwrap());
        let sig = bob
            .userids()
            .next()
            .unwrap()
            .self_signatures()
            .next()
            .unwrap();
        let sig = Packet::from(sig.clone()).to_vec().unwrap();
        for _ in 0..2_000 {
            bytes.extend_from_slice(&sig);
        }
        match read(&bytes) {
            Err(PlacementError::TooCostly { signatures, .. }) => assert!(signatures >= 2_000),
            other => panic!("{:?}", other.map(|(_, p)| p)),
        }
    }

    #[test]
    fn the_fuzz_targets_invariants_hold_on_these_cases() {
        let bob = bob();
        for input in [
            bob.to_vec().unwrap(),
            hostile(&bob, 8, 8),
            hostile(&bob, 30, 150),
            (0..3).flat_map(|c| hostile_copy(&bob, 5, 20, c)).collect(),
        ] {
            check(&input).unwrap();
        }
        // And on the fuzz target's seeds.
        let seeds =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/openpgp_cert_import");
        let mut n = 0;
        for seed in std::fs::read_dir(seeds).unwrap() {
            let path = seed.unwrap().path();
            check(&std::fs::read(&path).unwrap()).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            n += 1;
        }
        assert!(n >= 13, "{n} seeds");
    }

    #[test]
    fn fail_a_copy_of_a_signature_elsewhere_does_not_take_out_the_one_in_place() {
        // Bob's certificate, then Mallory's flooded one carrying a copy of Bob's User
        // ID binding: only the copy, which fits nowhere it stands, is dropped.
        let (bob, mallory) = (bob(), bob());
        let binding = bob
            .userids()
            .next()
            .unwrap()
            .self_signatures()
            .next()
            .unwrap()
            .clone();
        let mut input = bob.to_vec().unwrap();
        let mut flood = hostile(&mallory, 200, 2_000);
        flood.extend(Packet::from(binding.clone()).to_vec().unwrap());
        input.extend(flood);
        let (parser, placement) = read(&input).unwrap();
        assert_eq!(placement.dropped + placement.moved, 2_001, "{placement:?}");
        let certs: Vec<Cert> = parser.collect::<openpgp::Result<_>>().unwrap();
        let policy = openpgp::policy::StandardPolicy::new();
        let bob_read = certs
            .iter()
            .find(|c| c.fingerprint() == bob.fingerprint())
            .unwrap();
        assert_eq!(bob_read, &bob);
        assert_eq!(
            bob_read
                .with_policy(&policy, None)
                .unwrap()
                .userids()
                .count(),
            1
        );
        // Within one certificate too: a copy under another User ID.
        let mut input = hostile(&bob, 200, 2_000);
        input.extend(Packet::from(binding).to_vec().unwrap());
        let (cert, placement) = read_one(&input);
        assert!(placement.dropped + placement.moved > 2_000, "{placement:?}");
        let valid = cert.with_policy(&policy, None).unwrap();
        assert_eq!(
            valid
                .userids()
                .map(|u| u.userid().clone())
                .collect::<Vec<_>>(),
            vec![UserID::from("bob@example.org")]
        );
    }

    #[test]
    fn a_component_of_an_unknown_kind_keeps_its_body() {
        // Tag 30 (reserved): Sequoia keeps it, body and all, as an unknown component.
        let bob = bob();
        let mut input = bob.to_vec().unwrap();
        input.extend([0xc0 | 30, 5, 1, 2, 3, 4, 5]);
        check(&input).unwrap();
        let (cert, _) = read_one(&input);
        assert_eq!(cert, Cert::from_bytes(&input).unwrap());
        let clean = without_unplaced_signatures(cert);
        let unknown = clean.unknowns().next().unwrap();
        assert_eq!(unknown.unknown().body(), &[1, 2, 3, 4, 5]);
    }

    fn armored(cert: &Cert) -> Vec<u8> {
        cert.armored().to_vec().unwrap()
    }

    #[test]
    fn armored_blocks_one_after_another_are_all_read() {
        // As Sequoia's certificate parser reads them: on past the end of each block.
        let (bob, alice) = (bob(), bob());
        for input in [
            [armored(&bob), armored(&alice)].concat(),
            [
                armored(&bob),
                b"\n\n".to_vec(),
                armored(&alice),
                b"\n".to_vec(),
            ]
            .concat(),
            [armored(&bob), b"\n".to_vec()].concat(),
            [bob.to_vec().unwrap(), alice.to_vec().unwrap()].concat(),
        ] {
            check(&input).unwrap();
            let certs: Vec<Cert> = certificates(&input)
                .unwrap()
                .collect::<openpgp::Result<_>>()
                .unwrap();
            let theirs: Vec<Cert> = CertParser::from_bytes(&input)
                .unwrap()
                .collect::<openpgp::Result<_>>()
                .unwrap();
            assert_eq!(certs, theirs);
            assert!(!certs.is_empty());
        }
        let two = [armored(&bob), armored(&alice)].concat();
        let certs: Vec<Cert> = certificates(&two)
            .unwrap()
            .collect::<openpgp::Result<_>>()
            .unwrap();
        assert_eq!(certs, vec![bob, alice]);
    }

    #[test]
    fn what_sequoia_refuses_is_refused() {
        let bob = armored(&bob());
        for input in [
            &b""[..],
            b"\n",
            b"garbage",
            &bob[..bob.len() / 2],
            &bob[..bob.len() - 40],
        ] {
            check(input).unwrap();
            let theirs = CertParser::from_bytes(input)
                .and_then(|p| p.collect::<openpgp::Result<Vec<Cert>>>());
            let ours = certificates(input).map(|p| p.collect::<openpgp::Result<Vec<Cert>>>());
            assert!(
                !matches!(ours, Ok(Ok(_))) || theirs.is_ok(),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// Bob followed by `uids` User IDs of `uid_bytes` bytes each, and after each of
    /// them the same `junk` certifications of a User ID he does not have, made with
    /// `hash`.
    fn junk_under_each(
        bob: &Cert,
        uids: usize,
        uid_bytes: usize,
        junk: usize,
        hash: openpgp::types::HashAlgorithm,
    ) -> Vec<u8> {
        let mut signer = signer(bob);
        let ghost = UserID::from("ghost@example.org");
        let user_ids: Vec<Packet> = (0..uids)
            .map(|i| {
                let mut uid = format!("u{i}@example.org ").into_bytes();
                uid.resize(uid_bytes.max(uid.len()), b'x');
                Packet::from(UserID::from(uid))
            })
            .collect();
        let primary = bob.primary_key().key();
        // Each fitting none of the User IDs, not even by a chance match of its digest
        // prefix.
        let mut at = 1_700_000_000u64;
        let sigs: Vec<u8> = (0..junk)
            .flat_map(|_| loop {
                at += 1;
                let sig = SignatureBuilder::new(SignatureType::GenericCertification)
                    .set_hash_algo(hash)
                    .set_signature_creation_time(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(at),
                    )
                    .unwrap()
                    .sign_userid_binding(&mut signer, primary, &ghost)
                    .unwrap();
                if !user_ids.iter().any(|u| fits(&sig, primary, Some(u))) {
                    break Packet::from(sig).to_vec().unwrap();
                }
            })
            .collect();
        let mut bytes = bob.to_vec().unwrap();
        for uid in &user_ids {
            bytes.extend(uid.to_vec().unwrap());
            bytes.extend_from_slice(&sigs);
        }
        bytes
    }

    #[test]
    fn fail_copies_of_a_signature_under_each_component_are_each_counted() {
        // Sequoia merges copies of a signature only under one component: one under
        // each of 250 User IDs is searched for 250 times.
        use openpgp::types::HashAlgorithm;
        let bob = bob();
        let bytes = junk_under_each(&bob, 250, 1_000, 4, HashAlgorithm::SHA256);
        let (cert, placement) = read_one(&bytes);
        assert_eq!(placement.unplaced, 1_000, "{placement:?}");
        assert!(placement.search > placement.budget, "{placement:?}");
        assert_eq!(placement.dropped, 1_000, "{placement:?}");
        // (What a chance match of its digest prefix placed stays Sequoia's to judge.)
        assert!(
            cert.bad_signatures().count() <= placement.moved,
            "{placement:?}"
        );
        assert_eq!(cert.userids().count(), 251);
        check(&junk_under_each(&bob, 20, 100, 2, HashAlgorithm::SHA256)).unwrap();
    }

    #[test]
    fn fail_legacy_hashes_count_for_more() {
        // SHA-1 with collision detection hashes about four times slower than SHA-256:
        // what is within the budget with one may not be with the other.
        use openpgp::types::HashAlgorithm;
        let bob = bob();
        let sha256 = junk_under_each(&bob, 40, 200, 3, HashAlgorithm::SHA256);
        let sha1 = junk_under_each(&bob, 40, 200, 3, HashAlgorithm::SHA1);
        let (_, p256) = read_within(&sha256, u64::MAX, u64::MAX, u64::MAX).unwrap();
        let (_, p1) = read_within(&sha1, u64::MAX, u64::MAX, u64::MAX).unwrap();
        assert_eq!(p256.unplaced, 120);
        assert_eq!(p1.unplaced, 120);
        assert!(p1.search > 3 * p256.search, "{p1:?} {p256:?}");
        assert!(p1.first_pass > 3 * (p256.first_pass / 2), "{p1:?} {p256:?}");
        let budget = 2 * p256.search;
        let (_, p256) = read_within(&sha256, u64::MAX, budget, u64::MAX).unwrap();
        let (_, p1) = read_within(&sha1, u64::MAX, budget, u64::MAX).unwrap();
        assert_eq!(p256.dropped, 0, "{p256:?}");
        assert_eq!(p1.dropped, 120, "{p1:?}");
    }

    #[test]
    fn fail_junk_appended_to_a_certificate_does_not_take_off_its_subkey_and_user_id_revocations() {
        // The victim's certificate, the revocations of its first subkey and of its User
        // ID appended out of place (after its last subkey), then bare User IDs and junk
        // with no primary key before them: all one copy, over budget.
        let victim = bob();
        let mut signer = signer(&victim);
        let primary = victim.primary_key().key();
        let subkey = victim.keys().subkeys().next().unwrap().key().clone();
        let uid = victim.userids().next().unwrap().userid().clone();
        let subkey_revocation = SignatureBuilder::new(SignatureType::SubkeyRevocation)
            .sign_subkey_binding(&mut signer, primary, &subkey)
            .unwrap();
        let uid_revocation = SignatureBuilder::new(SignatureType::CertificationRevocation)
            .sign_userid_binding(&mut signer, primary, &uid)
            .unwrap();
        let mut input = victim.to_vec().unwrap();
        input.extend(Packet::from(subkey_revocation).to_vec().unwrap());
        input.extend(Packet::from(uid_revocation).to_vec().unwrap());
        let revoked_alone = Cert::from_bytes(&input).unwrap();
        let flood = hostile(&victim, 200, 2_000);
        input.extend(&flood[victim.to_vec().unwrap().len()..]);
        let (cert, placement) = read_one(&input);
        assert_eq!(placement.unplaced, 2_002, "{placement:?}");
        assert!(placement.search > placement.budget, "{placement:?}");
        assert_eq!(placement.dropped + placement.moved, 2_002, "{placement:?}");
        assert!(placement.moved >= 2, "{placement:?}");
        // (What a chance match of its digest prefix placed stays Sequoia's to judge.)
        assert!(
            cert.bad_signatures().count() <= placement.moved,
            "{placement:?}"
        );
        for c in [&revoked_alone, &cert] {
            let sub = c
                .keys()
                .subkeys()
                .find(|k| k.key().fingerprint() == subkey.fingerprint());
            assert_eq!(sub.unwrap().self_revocations().count(), 1);
            let u = c.userids().find(|u| u.userid() == &uid).unwrap();
            assert_eq!(u.self_revocations().count(), 1);
        }
    }

    #[test]
    #[allow(deprecated)] // DSA, made on purpose
    fn fail_a_key_too_costly_to_verify_with_is_refused_unread() {
        use openpgp::crypto::mpi::{PublicKey, MPI};
        use openpgp::packet::key::{Key4, PublicParts, SubordinateRole};
        use openpgp::types::PublicKeyAlgorithm;
        let bits = |n: usize| MPI::new(&[0xff].repeat(n / 8));
        let bob = bob();
        for (mpis, refused) in [
            (
                PublicKey::DSA {
                    p: bits(3072),
                    q: bits(256),
                    g: bits(3064),
                    y: bits(3064),
                },
                false,
            ),
            (
                PublicKey::DSA {
                    p: bits(16384),
                    q: bits(256),
                    g: bits(8),
                    y: bits(8),
                },
                true,
            ),
            (
                PublicKey::DSA {
                    p: bits(3072),
                    q: bits(3072),
                    g: bits(8),
                    y: bits(8),
                },
                true,
            ),
            (
                PublicKey::RSA {
                    e: bits(24),
                    n: bits(16384),
                },
                false,
            ),
            (
                PublicKey::RSA {
                    e: bits(24),
                    n: bits(16392),
                },
                true,
            ),
            (
                PublicKey::RSA {
                    e: bits(4096),
                    n: bits(4096),
                },
                true,
            ),
        ] {
            let algo = match mpis {
                PublicKey::DSA { .. } => PublicKeyAlgorithm::DSA,
                _ => PublicKeyAlgorithm::RSAEncryptSign,
            };
            let key: Key<PublicParts, SubordinateRole> =
                Key4::new(std::time::SystemTime::now(), algo, mpis)
                    .unwrap()
                    .into();
            let mut input = bob.to_vec().unwrap();
            input.extend(Packet::from(key).to_vec().unwrap());
            match read(&input) {
                Err(PlacementError::KeyTooCostly { .. }) => assert!(refused),
                Ok(_) => assert!(!refused),
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn fail_packets_that_do_not_frame_are_refused() {
        let mut bytes = bob().to_vec().unwrap();
        bytes.truncate(bytes.len() - 3);
        assert!(matches!(read(&bytes), Err(PlacementError::Packets(_))));
    }
}
