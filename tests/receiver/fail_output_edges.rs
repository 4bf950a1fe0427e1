//! Output edges (THREATS.md): `open --out` onto a path that is not a regular file
//! writes into it and never replaces it, and `open` to stdout prints a message once
//! however many processes open it at the same time on one state.

use crate::common;
use crate::fail_forwarded::{plain, sign, world};

use std::path::Path;

use common::{bin, run};

fn open_out(store: &Path, out: &Path, raw: &[u8]) -> std::process::Output {
    run(
        &[
            "open",
            "--store",
            store.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        raw,
    )
}

#[test]
fn fail_output_edges_out_onto_a_fifo_is_written_into_not_replaced() {
    let w = world();
    let sealed = sign(
        &w.alice,
        &plain("alice@smime.example", "bob@smime.example", "out-fifo"),
        "smime",
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = open_out(&w.bob, &fifo, &sealed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = reader.join().unwrap();
    assert!(String::from_utf8_lossy(&got).contains("out-fifo"));
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO is still a FIFO: {kind:?}");
    assert!(!dir.path().join("pipe.partial").exists());
}

/// `--out /dev/null` (a character device; as root, replacing it once stopped
/// PostgreSQL from starting on a test machine): written into, still the device.
#[test]
fn fail_output_edges_out_onto_a_device_is_written_into_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let null = Path::new("/dev/null");
    let before = std::fs::symlink_metadata(null).unwrap().file_type();
    assert!(before.is_char_device());
    let w = world();
    let sealed = sign(
        &w.alice,
        &plain("alice@smime.example", "bob@smime.example", "out-device"),
        "smime",
    );
    let out = open_out(&w.bob, null, &sealed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = std::fs::symlink_metadata(null).unwrap().file_type();
    assert!(
        after.is_char_device(),
        "/dev/null is still a device: {after:?}"
    );
    assert!(!Path::new("/dev/null.partial").exists());
}

#[test]
fn fail_output_edges_out_onto_a_symlink_replaces_its_target_not_the_link() {
    let w = world();
    let sealed = sign(
        &w.alice,
        &plain("alice@smime.example", "bob@smime.example", "out-link"),
        "smime",
    );
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("inbox").join("task.json");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(&real, b"old").unwrap();
    let link = dir.path().join("latest.json");
    std::os::unix::fs::symlink("inbox/task.json", &link).unwrap();
    let out = open_out(&w.bob, &link, &sealed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(String::from_utf8_lossy(&std::fs::read(&real).unwrap()).contains("out-link"));
    // `seal --out` follows the same rule.
    let sealed_link = dir.path().join("sealed.eml");
    std::os::unix::fs::symlink("inbox/sealed-real.eml", &sealed_link).unwrap();
    let msg = plain("alice@smime.example", "bob@smime.example", "seal-link");
    let out = run(
        &[
            "seal",
            "--store",
            w.alice.to_str().unwrap(),
            "--profile",
            "smime",
            "--sign-only",
            "--out",
            sealed_link.to_str().unwrap(),
        ],
        &msg.to_rfc5322().unwrap(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::symlink_metadata(&sealed_link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(dir.path().join("inbox/sealed-real.eml").is_file());
}

#[test]
fn fail_shared_state_concurrent_opens_to_stdout_print_a_message_once() {
    // Eight processes open the same message at once, on Bob's one state: one prints
    // it, the others are told it is a duplicate and print nothing. (Before, each
    // printed the preview and committed afterwards.)
    let w = world();
    for round in 0..3 {
        let id = format!("race-{round}");
        let sealed = sign(
            &w.alice,
            &plain("alice@smime.example", "bob@smime.example", &id),
            "smime",
        );
        let dir = tempfile::tempdir().unwrap();
        let mail = dir.path().join("mail.eml");
        std::fs::write(&mail, &sealed).unwrap();
        let children: Vec<_> = (0..8)
            .map(|_| {
                std::process::Command::new(bin())
                    .args([
                        "open",
                        "--store",
                        w.bob.to_str().unwrap(),
                        mail.to_str().unwrap(),
                    ])
                    .env_remove("MAILSEAL_STATE")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        for o in &outs {
            assert_eq!(
                o.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let printed = outs.iter().filter(|o| !o.stdout.is_empty()).count();
        assert_eq!(printed, 1, "round {round}: printed by {printed} of 8");
    }
}
