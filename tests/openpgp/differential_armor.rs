//! The `openpgp_open` fuzz target's armor findings, replayed
//! (`tests/cases/differential/openpgp_open-*`, reasons in its README): for every armor
//! our one-pass reader (`mailseal::openpgp::dearmor`) decodes, Sequoia's reader must
//! decode the same bytes, or ours must leave the input to Sequoia (`None`). Each file
//! is run exactly as the target runs it, under both labels.

use std::io::Read;
use std::path::PathBuf;

/// Sequoia's reading of the armor `data`, in the tolerant mode the target uses.
fn sequoia(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut reader = sequoia_openpgp::armor::Reader::from_bytes(
        data,
        sequoia_openpgp::armor::ReaderMode::Tolerant(None),
    );
    let mut theirs = Vec::new();
    reader.read_to_end(&mut theirs).map(|_| theirs)
}

/// Our reading and Sequoia's of `data` under `label`: `None` where ours declines.
fn both(data: &[u8], label: &str) -> Option<(Vec<u8>, std::io::Result<Vec<u8>>)> {
    let ours = mailseal::openpgp::dearmor(data, label)?;
    Some((ours, sequoia(data)))
}

fn findings() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cases/differential");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("openpgp_open-"))
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn armor_findings_read_as_sequoia_reads_them() {
    let findings = findings();
    assert!(!findings.is_empty(), "no openpgp_open findings");
    for (name, data) in &findings {
        for label in ["PGP MESSAGE", "PGP SIGNATURE"] {
            if let Some((ours, theirs)) = both(data, label) {
                let theirs = theirs.unwrap_or_else(|e| {
                    panic!("{name}: Sequoia refuses armor we decode under {label}: {e}")
                });
                assert_eq!(ours, theirs, "{name}: the armor readers disagree");
            }
        }
    }
}

/// The smoke run's finding of 2026-12-04: a checksum line `=JL=j` (an `=` inside it,
/// five characters). Sequoia refuses the armor; we decoded it until `801e41a5`. Now we
/// leave it to Sequoia, which refuses it.
#[test]
fn fail_a_checksum_line_with_padding_inside_is_not_ours_to_decode() {
    let (_, data) = findings()
        .into_iter()
        .find(|(n, _)| n == "openpgp_open-checksum-line-with-padding.asc")
        .expect("the reproducer");
    assert!(mailseal::openpgp::dearmor(&data, "PGP MESSAGE").is_none());
    assert!(sequoia(&data).is_err(), "Sequoia refuses it");
}
