//! Issue #57 (output edges): the queue tools beside a gateway whose user (here
//! `nobody`) owns the spool directory. Run by another user (root), they would follow
//! what the owner planted there (a directory of the spool swapped for a link: root
//! would create a file anywhere and give it to the gateway's user): they refuse to
//! work in a spool they do not own. And `list` shows an entry by its file's name,
//! never by the id its envelope states, so the owner cannot drive the terminal.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use mailseal::gateway::spool::{DirSpool, Entry, Spool};

use crate::common;

fn root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn queue(args: &[&str]) -> Output {
    Command::new(common::bin())
        .arg("queue")
        .args(args)
        .env_remove("MAILSEAL_LOG")
        .env_remove("MAILSEAL_STATE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// As the gateway's user (`nobody`).
fn as_gateway_user(script: &str) {
    let ok = Command::new("runuser")
        .args(["-u", "nobody", "--", "sh", "-c", script])
        .status()
        .unwrap()
        .success();
    assert!(ok, "{script}");
}

/// A spool the gateway (user `nobody`) made, with one entry; its id.
fn spool_of_nobody(dir: &Path) -> (std::path::PathBuf, String) {
    let spool = dir.join("spool");
    let e = Entry::new(
        "out",
        "a@x.test",
        &["b@y.test".to_string()],
        b"Subject: x\r\n\r\nbody\r\n".to_vec(),
        1_700_000_000,
    );
    DirSpool::open(&spool).unwrap().put(&e).unwrap();
    assert!(Command::new("chown")
        .args(["-R", "nobody:nogroup"])
        .arg(&spool)
        .status()
        .unwrap()
        .success());
    (spool, e.id)
}

#[test]
fn fail_root_refuses_a_spool_the_gateways_user_owns() {
    if !root() {
        eprintln!("skipped: needs root (the queue tools as root beside the gateway's user)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    crate::kit::let_others_through(dir.path());
    // A directory only root may write, standing for /etc/apt/apt.conf.d.
    let victim = dir.path().join("apt.conf.d");
    std::fs::create_dir(&victim).unwrap();
    let (spool, id) = spool_of_nobody(dir.path());
    let s = spool.display();
    let v = victim.display();
    as_gateway_user(&format!(
        "cd {s} && rm -rf changed done && ln -s {v} changed && ln -s {v} done"
    ));

    // The operator holds the entry, then deletes it.
    for action in [
        &["hold", &id[..]][..],
        &["delete", &id],
        &["flush"],
        &["list"],
    ] {
        let o = queue(&[&["--spool", &s.to_string()][..], action].concat());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{action:?}: {err}");
        assert!(
            err.contains("run the queue tools as the spool's owner"),
            "{err}"
        );
    }
    let planted = victim.join(&id);
    let meta = std::fs::symlink_metadata(&planted);
    if let Ok(m) = &meta {
        // The gateway's user can now write what root's tools will read there.
        as_gateway_user(&format!(
            "printf 'APT::Update::Pre-Invoke {{\"id > /tmp/pwned\";}};\\n' > {}",
            planted.display()
        ));
        eprintln!(
            "{} owned by uid {}: {:?}",
            planted.display(),
            m.uid(),
            std::fs::read_to_string(&planted)
        );
    }
    assert!(
        meta.is_err(),
        "root's queue tool created {} outside the spool, owned by the gateway's user",
        planted.display()
    );
}

#[test]
fn fail_display_list_shows_an_entry_by_its_files_name() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    drop(DirSpool::open(&spool).unwrap());
    // Planted by the gateway's user: a file name that is a valid id, an envelope whose
    // id is not (the list shows the envelope's).
    let forged =
        "abcd\u{1b}]0;owned\u{7}\u{1b}[2K\r0123 out queued 0s 0 now 1 <ceo@corp> -> <x@y>\nabcd";
    let mut e = Entry::new("out", "a@x.test", &["b@y.test".to_string()], Vec::new(), 1);
    e.id = forged.to_string();
    let q = spool.join("queue");
    std::fs::write(q.join("abcd.eml"), b"Subject: x\r\n\r\n").unwrap();
    std::fs::write(q.join("abcd.json"), serde_json::to_vec(&e).unwrap()).unwrap();
    let o = queue(&["--spool", &spool.display().to_string(), "list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    eprintln!("{out:?}");
    assert!(
        !out.chars().any(|c| c.is_control() && c != '\n') && out.lines().count() <= 3,
        "attacker text reached the terminal raw: {out:?}"
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("abcd"), "{out:?}");
}
