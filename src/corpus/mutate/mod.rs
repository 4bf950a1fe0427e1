//! `corpus mutate`: hostile mail that passes a target's cryptographic checks.
//!
//! A seed message (any RFC 5322 message whose From has a signing key in the store and
//! whose To and Cc have certificates) is broken at one layer **below** the
//! cryptography and then signed, and encrypted when asked, with the store's keys: the
//! target's signature and decryption checks pass, and its parsers meet the hostile
//! bytes. Layers:
//!
//! * `inner`: the signed entity's MIME (header fields duplicated or inserted, boundary
//!   games, deep nesting, repeated and truncated lines, dictionary tokens);
//! * `json`: the machine part's JSON text (tokens, duplicate keys, deep nesting, values
//!   replaced, truncation);
//! * `outer`: the outer header section, which no signature covers (duplicated and
//!   inserted fields, hints that disagree);
//! * `packets`: the signature's own structure below the cryptography, S/MIME's CMS
//!   SignedData ([`cms`]) or the OpenPGP packets ([`openpgp`]), with the signed
//!   entity left as it is.
//!
//! Every choice comes from the seed (SplitMix64), so the same seed gives the same
//! mutations, and so does the sealers' randomness (the crate-private `entropy`
//! module): with a signing time given ([`MutateOptions::at`], `--at`), the output is
//! the same bytes for the same seed; without, the time of the run is signed. The
//! tokens are the fuzz dictionaries of this repository (`fuzz/dicts/`). A mutated
//! entity is put back in canonical CRLF form before it is signed: S/MIME and PGP/MIME
//! sign canonical text (RFC 8551 3.1.1, RFC 3156 5), and a bare line feed would make
//! a conforming verifier reject the signature, which is not the layer under test.

mod cms;
mod openpgp;
mod tokens;

use super::rng::Rng;
use super::CorpusError;
use crate::keystore::KeyStore;
use crate::message::Hints;
use crate::profile::Profile;
use crate::seal::SignatureEdit;

/// Where the mutations happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layer {
    /// The outer header section (not signed).
    Outer,
    /// The signed entity's MIME structure.
    Inner,
    /// The machine part's JSON.
    Json,
    /// The signature's own structure, below the cryptography: the CMS SignedData
    /// (S/MIME) or the OpenPGP packets (signed and encrypted: the packet sequence
    /// inside the encryption; signed: the detached signature).
    Packets,
}

impl std::str::FromStr for Layer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "outer" => Ok(Layer::Outer),
            "inner" => Ok(Layer::Inner),
            "json" => Ok(Layer::Json),
            "packets" => Ok(Layer::Packets),
            other => Err(format!(
                "unknown layer {other}: outer, inner, json or packets"
            )),
        }
    }
}

/// What to make.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MutateOptions {
    /// The layer.
    pub layer: Layer,
    /// How many messages.
    pub count: usize,
    /// The seed of every choice.
    pub seed: u64,
    /// The profile they are sealed under (S/MIME, OpenPGP or detached-jws).
    pub profile: Profile,
    /// Encrypted to the recipients too (S/MIME and OpenPGP).
    pub encrypt: bool,
    /// The signing time of every output: `None`, the time of the run. With a time,
    /// the output is the same bytes for the same seed.
    pub at: Option<time::OffsetDateTime>,
}

impl MutateOptions {
    /// `count` messages at `layer`, S/MIME signed and encrypted, seed 1.
    pub fn new(layer: Layer, count: usize) -> Self {
        MutateOptions {
            layer,
            count,
            seed: 1,
            profile: Profile::Smime,
            encrypt: true,
            at: None,
        }
    }
}

/// A seed message: its header fields and its whole bytes (the entity that is signed,
/// header fields included: protected headers, RFC 9788).
struct Seed {
    headers: crate::message::Headers,
    entity: Vec<u8>,
}

fn seed_of(raw: &[u8], i: usize) -> Result<Seed, CorpusError> {
    let bad = |reason: String| CorpusError::BadCase {
        case: format!("seed {}", i + 1),
        reason,
    };
    let entity = crate::message::canonical_crlf(raw).into_owned();
    let outer = crate::message::read_outer(&entity, &crate::message::Limits::default())
        .map_err(|e| bad(e.to_string()))?;
    if outer.headers.from.is_none() || outer.headers.to.is_empty() {
        return Err(bad("a seed needs a From and a To".into()));
    }
    let headers = outer.headers;
    Ok(Seed { headers, entity })
}

/// The offsets where lines start in `data`.
fn line_starts(data: &[u8]) -> Vec<usize> {
    let mut out = vec![0];
    out.extend(
        memchr::memchr_iter(b'\n', data)
            .map(|i| i + 1)
            .filter(|&i| i < data.len()),
    );
    out
}

/// The end of the header section (the offset of its blank line), or the end.
fn header_end(data: &[u8]) -> usize {
    memchr::memmem::find(data, b"\r\n\r\n").map_or(data.len(), |i| i + 2)
}

fn insert(data: &mut Vec<u8>, at: usize, what: &[u8]) {
    let at = at.min(data.len());
    data.splice(at..at, what.iter().copied());
}

/// Whether `line` is (or continues) a field that says where the protected content is:
/// Content-* and MIME-Version. An outer-layer mutation leaves those alone, or the
/// target's crypto reader would not find the signature or the ciphertext at all.
fn is_mime_field(line: &[u8]) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.starts_with(b"content-")
        || lower.starts_with(b"mime-version")
        || lower.starts_with(b" ")
        || lower.starts_with(b"\t")
}

/// One MIME-level mutation of `e`; `header_only`: of the outer header section, its
/// MIME fields left as they are.
fn mutate_mime(e: &mut Vec<u8>, rng: &mut Rng, header_only: bool) {
    let limit = if header_only { header_end(e) } else { e.len() };
    let starts: Vec<usize> = line_starts(e)
        .into_iter()
        .filter(|&s| s < limit && !(header_only && is_mime_field(&e[s..])))
        .collect();
    if header_only {
        // Inserted before a field that is not a MIME field: never inside a folded one.
        let at = starts.get(rng.below(starts.len())).copied().unwrap_or(0);
        match rng.below(3) {
            0 => {
                let end = memchr::memchr(b'\n', &e[at..]).map_or(e.len(), |i| at + i + 1);
                let line = e[at..end].to_vec();
                for _ in 0..1 + rng.below(3) {
                    insert(e, at, &line);
                }
            }
            1 => {
                let tokens: Vec<&Vec<u8>> = tokens::mime()
                    .iter()
                    .filter(|t| t.ends_with(b":") && !is_mime_field(t))
                    .collect();
                let mut field = rng.pick(&tokens).map(|t| t.to_vec()).unwrap_or_default();
                field.extend_from_slice(b" x\r\n");
                insert(e, at, &field);
            }
            _ => {
                let fields: [&[u8]; 4] = [
                    b"Mail-A2A-Kind: response\r\n",
                    b"Mail-A2A-Operation: tasks/cancel\r\n",
                    b"From: <mallory@attacker.example>\r\n",
                    b"Mail-A2A-Binding: 2.0\r\n",
                ];
                insert(e, at, fields[rng.below(fields.len())]);
            }
        }
        return;
    }
    let line_at = |rng: &mut Rng| starts.get(rng.below(starts.len())).copied().unwrap_or(0);
    let line_of = |e: &[u8], at: usize| {
        let end = memchr::memchr(b'\n', &e[at..]).map_or(e.len(), |i| at + i + 1);
        e[at..end].to_vec()
    };
    match rng.below(8) {
        // A dictionary token as a line of its own.
        0 => {
            let at = line_at(rng);
            let mut token = rng.pick(tokens::mime()).cloned().unwrap_or_default();
            token.extend_from_slice(b" x\r\n");
            insert(e, at, &token);
        }
        // A line repeated (a duplicate header field, a doubled delimiter).
        1 => {
            let at = line_at(rng);
            let line = line_of(e, at);
            let times = 1 + rng.below(3);
            for _ in 0..times {
                insert(e, at, &line);
            }
        }
        // A dictionary token inside a line.
        2 => {
            let at = line_at(rng);
            let len = line_of(e, at).len().saturating_sub(2);
            let token = rng.pick(tokens::mime()).cloned().unwrap_or_default();
            insert(e, at + rng.below(len + 1), &token);
        }
        // A hint or header field that disagrees.
        3 => {
            let fields: [&[u8]; 6] = [
                b"Mail-A2A-Kind: response\r\n",
                b"Mail-A2A-Operation: tasks/cancel\r\n",
                b"From: <mallory@attacker.example>\r\n",
                b"Content-Type: text/plain\r\n",
                b"MIME-Version: 2.0\r\n",
                b"Mail-A2A-Binding: 2.0\r\n",
            ];
            let field = fields[rng.below(fields.len())];
            insert(e, line_at(rng), field);
        }
        // A delimiter line of the first boundary where none belongs, or the close
        // delimiter taken away.
        4 => {
            let Some(b) = boundary(e) else { return };
            if rng.below(2) == 0 {
                let mut line = b"--".to_vec();
                line.extend_from_slice(&b);
                line.extend_from_slice(b"\r\n");
                insert(e, line_at(rng), &line);
            } else {
                let mut close = b"--".to_vec();
                close.extend_from_slice(&b);
                close.extend_from_slice(b"--");
                if let Some(i) = memchr::memmem::rfind(e, &close) {
                    e.drain(i..i + close.len());
                }
            }
        }
        // Nested multiparts around the body.
        5 => {
            let levels = 1 + rng.below(20);
            let at = header_end(e);
            let mut head = Vec::new();
            let mut tail = Vec::new();
            for i in 0..levels {
                head.extend_from_slice(
                    format!(
                        "Content-Type: multipart/mixed; boundary=\"nest{i}\"\r\n\r\n--nest{i}\r\n"
                    )
                    .as_bytes(),
                );
                tail.splice(0..0, format!("\r\n--nest{i}--").bytes());
            }
            insert(e, at, &head);
            e.extend_from_slice(&tail);
            e.extend_from_slice(b"\r\n");
        }
        // Truncated at a line.
        6 => {
            let at = line_at(rng).max(header_end(e).min(e.len()));
            e.truncate(at);
        }
        // A long line.
        _ => {
            let at = line_at(rng);
            let n = 1 + rng.below(4000);
            let mut line = vec![b'A'; n];
            line.extend_from_slice(b"\r\n");
            insert(e, at, &line);
        }
    }
}

/// The first `boundary=` parameter's value.
fn boundary(e: &[u8]) -> Option<Vec<u8>> {
    let at = memchr::memmem::find(e, b"boundary=")? + 9;
    let rest = &e[at..];
    let rest = rest.strip_prefix(b"\"").unwrap_or(rest);
    let end = rest
        .iter()
        .position(|&c| matches!(c, b'"' | b';' | b'\r' | b'\n'))?;
    Some(rest[..end].to_vec())
}

/// The range of the machine part's JSON text (one line after its header fields).
fn json_range(e: &[u8]) -> Option<std::ops::Range<usize>> {
    let part = memchr::memmem::find(e, b"application/a2a+json")?;
    let start = part + memchr::memmem::find(&e[part..], b"\r\n\r\n")? + 4;
    let end = start + memchr::memmem::find(&e[start..], b"\r\n--")?;
    Some(start..end)
}

/// One JSON-level mutation of `json`.
fn mutate_json(json: &mut Vec<u8>, rng: &mut Rng) {
    match rng.below(5) {
        0 => {
            let token = rng.pick(tokens::json()).cloned().unwrap_or_default();
            let at = rng.below(json.len() + 1);
            insert(json, at, &token);
        }
        // A duplicate key, first or last.
        1 => {
            let pairs: [&[u8]; 4] = [
                b"\"kind\":\"response\",",
                b"\"operation\":\"tasks/cancel\",",
                b"\"messageId\":\"urn:uuid:duplicate\",",
                b"\"bindingVersion\":\"2.0\",",
            ];
            insert(json, 1, pairs[rng.below(pairs.len())]);
        }
        // Deep nesting in a member of its own.
        2 => {
            let depth = 1 + rng.below(200);
            let mut member = b"\"metadata\":".to_vec();
            member.extend(std::iter::repeat_n(b'[', depth));
            member.extend(std::iter::repeat_n(b']', depth));
            member.push(b',');
            insert(json, 1, &member);
        }
        // A value replaced by a token.
        3 => {
            let colons: Vec<usize> = memchr::memchr_iter(b':', json).collect();
            let Some(&at) = rng.pick(&colons) else { return };
            let end = json[at..]
                .iter()
                .position(|&c| matches!(c, b',' | b'}'))
                .map_or(json.len(), |i| at + i);
            let token = rng.pick(tokens::json()).cloned().unwrap_or_default();
            json.splice(at + 1..end, token);
        }
        // Truncated.
        _ => {
            let at = rng.below(json.len());
            json.truncate(at);
        }
    }
}

/// Makes `opts.count` messages from `seeds` (RFC 5322 bytes), each sealed with the
/// keys of `store`: signed by the seed's From, encrypted to its To, Cc and From.
pub fn mutate(
    store: &dyn KeyStore,
    seeds: &[Vec<u8>],
    opts: &MutateOptions,
) -> Result<Vec<Vec<u8>>, CorpusError> {
    // The sealers' randomness from the seed too, so that the output is the same bytes
    // for the same seed (`crate::entropy`: this thread, this call).
    let _seeded = crate::entropy::Seeded::new(opts.seed, "corpus mutate");
    let seeds = seeds
        .iter()
        .enumerate()
        .map(|(i, s)| seed_of(s, i))
        .collect::<Result<Vec<_>, _>>()?;
    if opts.layer == Layer::Packets && !matches!(opts.profile, Profile::Smime | Profile::OpenPgp) {
        return Err(CorpusError::BadCase {
            case: "mutate".into(),
            reason: "the packets layer is S/MIME's CMS or OpenPGP's packets: detached-jws has none"
                .into(),
        });
    }
    if seeds.is_empty() {
        return Err(CorpusError::BadCase {
            case: "mutate".into(),
            reason: "no seed message".into(),
        });
    }
    let mut rng = Rng(opts.seed);
    let mut out = Vec::with_capacity(opts.count);
    let at = opts.at.unwrap_or_else(time::OffsetDateTime::now_utc);
    for n in 0..opts.count {
        let seed = &seeds[rng.below(seeds.len())];
        let mut entity = seed.entity.clone();
        let rounds = 1 + rng.below(3);
        match opts.layer {
            Layer::Inner => {
                for _ in 0..rounds {
                    mutate_mime(&mut entity, &mut rng, false);
                }
            }
            Layer::Json => {
                if let Some(range) = json_range(&entity) {
                    let mut json = entity[range.clone()].to_vec();
                    for _ in 0..rounds {
                        mutate_json(&mut json, &mut rng);
                    }
                    // One line: a line break would end the part early.
                    json.retain(|&c| c != b'\r' && c != b'\n');
                    entity.splice(range, json);
                }
            }
            Layer::Outer | Layer::Packets => {}
        }
        let entity = crate::message::canonical_crlf(&entity).into_owned();
        // The signature's structure is rewritten from a seed of its own: the sealers
        // take a rewrite that cannot hold on to this loop's generator.
        let packets_seed = rng.next();
        let edit = |signature: Vec<u8>| {
            let mut rng = Rng(packets_seed);
            match opts.profile {
                Profile::OpenPgp => openpgp::mutate(signature, &mut rng),
                _ => cms::mutate(signature, &mut rng),
            }
        };
        let edit = (opts.layer == Layer::Packets).then_some(&edit as SignatureEdit<'_>);
        let mut sealed = seal(store, &seed.headers, &entity, opts, at, edit).map_err(|source| {
            CorpusError::Seal {
                case: format!("mutant {}", n + 1),
                source,
            }
        })?;
        if opts.layer == Layer::Outer {
            for _ in 0..rounds {
                mutate_mime(&mut sealed, &mut rng, true);
            }
        }
        out.push(sealed);
    }
    Ok(out)
}

fn seal(
    store: &dyn KeyStore,
    headers: &crate::message::Headers,
    entity: &[u8],
    opts: &MutateOptions,
    at: time::OffsetDateTime,
    edit: Option<SignatureEdit<'_>>,
) -> Result<Vec<u8>, crate::seal::SealError> {
    let from = headers
        .from
        .as_ref()
        .map(|m| m.normalized())
        .unwrap_or_default();
    let mut to: Vec<String> = headers
        .to
        .iter()
        .chain(&headers.cc)
        .map(crate::message::Mailbox::normalized)
        .collect();
    to.push(from.clone());
    let hints: &Hints = &headers.hints;
    match opts.profile {
        Profile::OpenPgp => crate::openpgp::OpenPgp::new(store).seal_raw_packets(
            headers,
            hints,
            entity,
            &from,
            opts.encrypt.then_some(crate::openpgp::Recipients {
                addresses: &to,
                preferred: &[],
                intended: None,
            }),
            at,
            crate::openpgp::Packets {
                edit,
                ..Default::default()
            },
        ),
        Profile::Jws => crate::jws::Jws::new(store).seal_raw(headers, hints, entity, &from, at),
        Profile::Smime => crate::smime::Smime::new(store).seal_raw_edited(
            headers,
            hints,
            entity,
            &from,
            opts.encrypt.then_some(to.as_slice()),
            at,
            edit,
        ),
        other => Err(crate::seal::SealError::ProfileUnavailable(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_dictionaries_read() {
        assert!(tokens::mime().len() > 50);
        assert!(tokens::json().iter().any(|t| t == b"\"\""));
        assert!(tokens::json().iter().any(|t| t == b"1e999"));
    }

    #[test]
    fn a_json_mutation_stays_on_one_line_and_changes_it() {
        let mut rng = Rng(3);
        let mut changed = 0;
        for _ in 0..100 {
            let mut json = br#"{"kind":"request","messageId":"m"}"#.to_vec();
            mutate_json(&mut json, &mut rng);
            changed += usize::from(json != br#"{"kind":"request","messageId":"m"}"#);
        }
        assert!(changed > 90, "{changed}");
    }
}
