//! `corpus mutate --layer packets`: 1,000 mutants of the signature's own structure per
//! profile (half signed and encrypted, half signed only) pass the real tools'
//! cryptographic checks (OpenSSL's `cms -decrypt` and `-verify`, GnuPG's `--decrypt`
//! and `--verify`: at least 99% required) and are mutated: the SignedData or the
//! packet sequence the tool reads differs from an unmutated seal's.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use mailseal::corpus::{self, Layer, MutateOptions};
use mailseal::keystore::KeyStore;
use mailseal::openpgp::OpenPgp;
use mailseal::seal::{OpenPolicy, Opener};
use mailseal::smime::Smime;
use mailseal::Profile;
use sequoia_openpgp as openpgp;

use super::mutate::{openpgp_sender, seed, smime_sender, store};
use crate::common::{self, armored_block};

/// `count` mutants at `layer`, encrypted or signed only.
fn make(
    store: &dyn mailseal::keystore::KeyStore,
    seeds: &[Vec<u8>],
    profile: Profile,
    layer: Layer,
    count: usize,
    encrypt: bool,
    seed: u64,
) -> Vec<Vec<u8>> {
    let mut opts = MutateOptions::new(layer, count);
    opts.seed = seed;
    opts.profile = profile;
    opts.encrypt = encrypt;
    corpus::mutate(store, seeds, &opts).unwrap()
}

/// 1,000 mutants at the packets layer: 500 signed and encrypted (seed `seed`), 500
/// signed only (the next seed), each with whether it is encrypted.
fn half_encrypted(
    store: &dyn mailseal::keystore::KeyStore,
    seeds: &[Vec<u8>],
    profile: Profile,
    seed: u64,
) -> Vec<(bool, Vec<u8>)> {
    [(true, seed), (false, seed + 1)]
        .into_iter()
        .flat_map(|(encrypt, seed)| {
            make(store, seeds, profile, Layer::Packets, 500, encrypt, seed)
                .into_iter()
                .map(move |m| (encrypt, m))
        })
        .collect()
}

/// The body of the part after the last header line `marker` in `m`, up to the next
/// delimiter: the signature part of a `multipart/signed`.
fn part_after<'a>(m: &'a [u8], marker: &[u8]) -> &'a [u8] {
    let at = m
        .windows(marker.len())
        .rposition(|w| w == marker)
        .expect("a signature part")
        + marker.len();
    let rest = &m[at..];
    let start = rest.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let end = rest[start..]
        .windows(4)
        .position(|w| w == b"\r\n--")
        .unwrap_or(rest.len() - start);
    &rest[start..start + end]
}

/// The DER of the detached SignedData of a signed entity.
fn p7s(entity: &[u8]) -> Vec<u8> {
    use base64::Engine;
    let b64: Vec<u8> = part_after(entity, b"filename=\"smime.p7s\"")
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

/// Runs `n` threads over `items`, counting those for which `f` holds.
fn count_in_parallel<T: Sync>(items: &[T], f: impl Fn(usize, &T) -> bool + Sync) -> usize {
    let passed = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let chunk = items.len().div_ceil(4);
        for (c, part) in items.chunks(chunk).enumerate() {
            let (passed, f) = (&passed, &f);
            s.spawn(move || {
                for (i, item) in part.iter().enumerate() {
                    if f(c * chunk + i, item) {
                        passed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    passed.into_inner()
}

#[test]
fn smime_packet_mutants_pass_openssl_and_change_the_signed_data() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, seeds) = smime_sender(dir.path());
    // An unmutated SignedData (the outer layer leaves it alone): its size is fixed for
    // this signer (RSA-2048, fixed-length attributes).
    let plain = p7s(&make(&alice, &seeds, Profile::Smime, Layer::Outer, 1, false, 1)[0]);
    let all = half_encrypted(&alice, &seeds, Profile::Smime, 31);
    let changed = AtomicUsize::new(0);
    let passed = count_in_parallel(&all, |i, (encrypt, m)| {
        let msg = dir.path().join(format!("m{i}.eml"));
        let inner = dir.path().join(format!("i{i}.eml"));
        std::fs::write(&msg, m).unwrap();
        if *encrypt {
            let decrypt = Command::new("openssl")
                .args(["cms", "-decrypt", "-in"])
                .arg(&msg)
                .arg("-recip")
                .arg(common::fixture("rfc9216/bob.encrypt.crt"))
                .arg("-inkey")
                .arg(common::fixture("rfc9216/bob.encrypt.key"))
                .arg("-out")
                .arg(&inner)
                .output()
                .unwrap();
            if !decrypt.status.success() {
                return false;
            }
        } else {
            std::fs::copy(&msg, &inner).unwrap();
        }
        let verify = Command::new("openssl")
            .args(["cms", "-verify", "-purpose", "any", "-in"])
            .arg(&inner)
            .arg("-CAfile")
            .arg(common::fixture("rfc9216/ca.rsa.crt"))
            .args(["-out", "/dev/null"])
            .output()
            .unwrap();
        let der = p7s(&std::fs::read(&inner).unwrap());
        if der.len() != plain.len() || der[1] == 0x80 {
            changed.fetch_add(1, Ordering::Relaxed);
        }
        verify.status.success()
    });
    let changed = changed.into_inner();
    // This crate opens every one too (it refused those with revocation information of
    // another format until the `packets` layer found it: the `cms` crate's type of
    // that field is not RFC 5652's).
    let bob = store(
        &dir.path().join("bob"),
        &[
            "rfc9216/bob.encrypt.crt",
            "rfc9216/bob.encrypt.key",
            "rfc9216/bob.sign.crt",
            "rfc9216/bob.sign.key",
        ],
    );
    bob.import(
        &std::fs::read(common::fixture("rfc9216/ca.rsa.crt")).unwrap(),
        "ca.rsa.crt",
        true,
    )
    .unwrap();
    let refused: Vec<String> = all
        .iter()
        .filter_map(|(_, m)| Smime::new(&bob).open(m, &OpenPolicy::default()).err())
        .map(|e| e.to_string())
        .collect();
    println!(
        "S/MIME packets: {passed} of {} pass OpenSSL, {changed} with a changed SignedData, {} refused by mailseal",
        all.len(),
        refused.len()
    );
    assert!(passed * 100 >= all.len() * 99, "{passed} of {}", all.len());
    assert!(
        changed * 100 >= all.len() * 99,
        "{changed} of {}",
        all.len()
    );
    assert!(refused.is_empty(), "{:?}", &refused[..refused.len().min(5)]);
}

/// What a reader meets in an OpenPGP packet sequence beyond the signature: marker
/// and compressed packets, literal metadata, unhashed subpackets, and packets Sequoia
/// does not parse (a notation whose name is not UTF-8, which GnuPG reads).
#[derive(Debug, PartialEq, Eq, Default)]
struct Shape {
    markers: usize,
    compressed: usize,
    literal: Option<(Vec<u8>, Option<std::time::SystemTime>)>,
    unhashed: usize,
    unparsed: usize,
}

fn shape(packets: &[u8]) -> Shape {
    use openpgp::parse::{PacketParser, PacketParserResult, Parse};
    use openpgp::Packet;
    let mut s = Shape::default();
    let mut ppr = PacketParser::from_bytes(packets).unwrap();
    while let PacketParserResult::Some(pp) = ppr {
        match &pp.packet {
            Packet::Marker(_) => s.markers += 1,
            Packet::CompressedData(_) => s.compressed += 1,
            Packet::Literal(l) => {
                s.literal = Some((l.filename().unwrap_or_default().to_vec(), l.date()))
            }
            Packet::Signature(sig) => s.unhashed += sig.unhashed_area().iter().count(),
            Packet::Unknown(_) => s.unparsed += 1,
            _ => {}
        }
        ppr = pp.recurse().unwrap().1;
    }
    s
}

/// A GnuPG home holding Bob's secret key and Alice's certificate.
fn bobs_gpg() -> common::Gpg {
    let gpg = common::Gpg::new();
    let keys = [
        common::fixture("openpgp/bob@openpgp.example.sec.asc"),
        common::fixture("openpgp/alice@openpgp.example.pub.asc"),
    ];
    for k in keys {
        gpg.run(&["--import"], &std::fs::read(k).unwrap());
    }
    gpg
}

/// Whether `gpg ARGS` succeeded with a good signature (`--unwrap` has none to report),
/// and its output.
fn gpg_good(gpg: &common::Gpg, args: &[&str], input: &[u8]) -> (bool, Vec<u8>) {
    let mut all = vec!["--status-fd", "2"];
    all.extend_from_slice(args);
    let out = gpg.try_run(&all, input);
    let status = String::from_utf8_lossy(&out.stderr);
    let good =
        out.status.success() && (args.contains(&"--unwrap") || status.contains("[GNUPG:] GOODSIG"));
    (good, out.stdout)
}

/// The first part of a `multipart/signed` message: what the signature covers (RFC
/// 3156 5), from after the first delimiter line to the CRLF before the next.
fn signed_part(m: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(m);
    let boundary = text
        .split("boundary=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let delimiter = format!("\r\n--{boundary}");
    let first = text.find(&delimiter).unwrap() + delimiter.len() + 2;
    let next = text[first..].find(&delimiter).unwrap();
    m[first..first + next].to_vec()
}

#[test]
fn openpgp_packet_mutants_pass_gpg_and_change_the_packets() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, seeds) = openpgp_sender(dir.path());
    let gpg = bobs_gpg();
    // Unmutated packets, encrypted and signed only (the outer layer leaves them alone).
    let unwrap = |m: &[u8]| -> Vec<u8> {
        let (ok, packets) = gpg_good(
            &gpg,
            &["--unwrap", "--decrypt"],
            &armored_block(m, "MESSAGE"),
        );
        assert!(ok);
        packets
    };
    let detached = |m: &[u8]| -> Vec<u8> {
        mailseal::openpgp::dearmor(&armored_block(m, "SIGNATURE"), "PGP SIGNATURE").unwrap()
    };
    let plain_encrypted = shape(&unwrap(
        &make(&alice, &seeds, Profile::OpenPgp, Layer::Outer, 1, true, 1)[0],
    ));
    let plain_signed = shape(&detached(
        &make(&alice, &seeds, Profile::OpenPgp, Layer::Outer, 1, false, 1)[0],
    ));
    let all = half_encrypted(&alice, &seeds, Profile::OpenPgp, 41);
    let changed = AtomicUsize::new(0);
    let passed = count_in_parallel(&all, |i, (encrypt, m)| {
        let (good, mutated) = if *encrypt {
            let (good, _) = gpg_good(&gpg, &["--decrypt"], &armored_block(m, "MESSAGE"));
            (good, shape(&unwrap(m)) != plain_encrypted)
        } else {
            let data = dir.path().join(format!("d{i}"));
            std::fs::write(&data, signed_part(m)).unwrap();
            let sig = armored_block(m, "SIGNATURE");
            let (good, _) = gpg_good(&gpg, &["--verify", "-", data.to_str().unwrap()], &sig);
            (good, shape(&detached(m)) != plain_signed)
        };
        if mutated {
            changed.fetch_add(1, Ordering::Relaxed);
        }
        good
    });
    let changed = changed.into_inner();
    println!(
        "OpenPGP packets: {passed} of {} pass GnuPG, {changed} with changed packets",
        all.len()
    );
    assert!(passed * 100 >= all.len() * 99, "{passed} of {}", all.len());
    assert!(
        changed * 100 >= all.len() * 99,
        "{changed} of {}",
        all.len()
    );
    // This crate, through Sequoia, refuses two kinds that GnuPG 2.2 reads: a marker
    // packet past the start of the message (RFC 9580 5.8 says to ignore it; Sequoia's
    // message grammar has no place for it) and a notation name that is not UTF-8
    // (RFC 9580 5.2.3.24 requires UTF-8). Both fail closed, as bad signatures; any
    // other refusal would be a finding.
    let bob = store(
        &dir.path().join("bob"),
        &[
            "openpgp/bob@openpgp.example.sec.asc",
            "openpgp/alice@openpgp.example.pub.asc",
        ],
    );
    let (mut marker, mut notation) = (0, 0);
    for (_, m) in &all {
        let Err(e) = OpenPgp::new(&bob).open(m, &OpenPolicy::default()) else {
            continue;
        };
        let e = e.to_string();
        if e.contains("Message has been manipulated") {
            marker += 1;
        } else if e.contains("Malformed notation name") {
            notation += 1;
        } else {
            panic!("{e}");
        }
    }
    println!("mailseal refuses {marker} for a marker packet, {notation} for a notation name");
}

#[test]
fn fail_the_packets_layer_under_detached_jws() {
    let dir = tempfile::tempdir().unwrap();
    let alice = store(&dir.path().join("alice"), &[]);
    let seeds = vec![seed(
        "alice@smime.example",
        "bob@smime.example",
        "m-1",
        "hi",
    )];
    let mut opts = MutateOptions::new(Layer::Packets, 1);
    opts.profile = Profile::Jws;
    let err = corpus::mutate(&alice, &seeds, &opts).unwrap_err();
    assert!(err.to_string().contains("detached-jws has none"), "{err}");
}
