//! The message cases of `tests/cases/`, run through `mailseal validate` as a user would:
//! `ok--*.eml` validate (exit 0, `OK` line), `fail-CODE--*.eml` are refused with exit 3
//! and one line naming CODE. Plus the cases too large to keep as files.

use crate::common;

use std::path::Path;

use common::run;

fn cases_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases")
}

#[test]
fn every_case_file_gives_its_outcome() {
    let mut names: Vec<_> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "eml"))
        .collect();
    names.sort();
    assert!(names.len() >= 30, "case files missing");
    let mut wrong = Vec::new();
    for path in &names {
        let file = path.file_name().unwrap().to_str().unwrap();
        let out = run(&["validate", path.to_str().unwrap()], b"");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        let code = out.status.code();
        if let Some(rest) = file.strip_prefix("fail-") {
            let expected = rest.split("--").next().unwrap();
            let ok = code == Some(3)
                && lines.len() == 1
                && lines[0].starts_with("FAIL ")
                && (lines[0].contains(&format!(": {expected}:"))
                    || lines[0].contains(&format!(": {expected} at ")));
            if !ok {
                wrong.push(format!("{file}: exit {code:?}, {stdout}"));
            }
        } else if code != Some(0) || lines != [format!("OK {}", path.display())] {
            wrong.push(format!("{file}: exit {code:?}, {stdout}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_directory_validates_every_eml_one_line_each() {
    let out = run(&["validate", cases_dir().to_str().unwrap()], b"");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let files = std::fs::read_dir(cases_dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "eml")
        })
        .count();
    assert_eq!(stdout.lines().count(), files);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("messages are not valid MailA2A"),
        "{stderr}"
    );
}

fn validate_bytes(name: &str, bytes: &[u8]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = run(&["validate", path.to_str().unwrap()], b"");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn request_json() -> String {
    let raw = std::fs::read_to_string(cases_dir().join("ok--published-request.eml")).unwrap();
    raw.lines()
        .find(|l| l.starts_with("{\"binding"))
        .unwrap()
        .to_string()
}

fn headers() -> String {
    "From: a@example.net\r\nTo: b@example.com\r\nDate: Sun, 30 Aug 2026 07:00:00 +0000\r\n\
     Message-ID: <x@example.net>\r\nMIME-Version: 1.0\r\nMail-A2A-Binding: 1.0\r\n"
        .to_string()
}

#[test]
fn fail_oversize() {
    let mut m = headers().into_bytes();
    m.extend_from_slice(b"Content-Type: application/a2a+json\r\n\r\n");
    m.extend(std::iter::repeat_n(b' ', 25 * 1024 * 1024));
    m.extend_from_slice(request_json().as_bytes());
    let (code, out) = validate_bytes("big.eml", &m);
    assert_eq!(code, Some(3));
    assert!(out.contains(": message-too-large:"), "{out}");
}

#[test]
fn fail_mime_nesting_bomb_1000_levels() {
    let mut m = headers();
    let depth = 1000;
    // `b{i}z`: no boundary is a prefix of another (`--b1` would start `--b10`'s lines,
    // refused as ambiguous before the depth is reached).
    for i in 0..depth {
        m.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=\"b{i}z\"\r\n\r\n--b{i}z\r\n"
        ));
    }
    m.push_str("Content-Type: application/a2a+json\r\n\r\n");
    m.push_str(&request_json());
    for i in (0..depth).rev() {
        m.push_str(&format!("\r\n--b{i}z--\r\n"));
    }
    let (code, out) = validate_bytes("nest.eml", m.as_bytes());
    assert_eq!(code, Some(3));
    assert!(
        out.contains(": too-many-parts:") || out.contains(": mime-too-deep:"),
        "{out}"
    );
}

#[test]
fn fail_mime_nesting_just_over_the_depth_limit() {
    // 9 levels with few parts: refused for depth, not for the part count.
    let mut m = headers();
    for i in 0..9 {
        m.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=\"b{i}\"\r\n\r\n--b{i}\r\n"
        ));
    }
    m.push_str("Content-Type: application/a2a+json\r\n\r\n");
    m.push_str(&request_json());
    for i in (0..9).rev() {
        m.push_str(&format!("\r\n--b{i}--\r\n"));
    }
    let (code, out) = validate_bytes("nest9.eml", m.as_bytes());
    assert_eq!(code, Some(3));
    assert!(out.contains(": mime-too-deep:"), "{out}");
}

#[test]
fn fail_a_million_parts() {
    let mut m = headers();
    m.push_str("Content-Type: multipart/mixed; boundary=\"p\"\r\n\r\n--p\r\nContent-Type: application/a2a+json\r\n\r\n");
    m.push_str(&request_json());
    let part = "\r\n--p\r\n\r\nx";
    m.reserve(part.len() * 1_000_000);
    for _ in 0..1_000_000 {
        m.push_str(part);
    }
    m.push_str("\r\n--p--\r\n");
    assert!(m.len() < 25 * 1024 * 1024);
    let (code, out) = validate_bytes("parts.eml", m.as_bytes());
    assert_eq!(code, Some(3));
    assert!(out.contains(": too-many-parts:"), "{out}");
}

#[test]
fn fail_json_depth_bomb() {
    let mut m = headers();
    m.push_str("Content-Type: application/a2a+json\r\n\r\n");
    m.push_str(&"[".repeat(100_000));
    let (code, out) = validate_bytes("deep.eml", m.as_bytes());
    assert_eq!(code, Some(3));
    assert!(
        out.contains(": must-be-map:") || out.contains(": json-too-deep:"),
        "{out}"
    );
    let mut m = headers();
    m.push_str("Content-Type: application/a2a+json\r\n\r\n{\"payload\":");
    m.push_str(&"{\"a\":".repeat(70));
    m.push('1');
    m.push_str(&"}".repeat(71));
    let (code, out) = validate_bytes("deep2.eml", m.as_bytes());
    assert_eq!(code, Some(3));
    assert!(out.contains(": json-too-deep:"), "{out}");
}

#[test]
fn fail_nonexistent_file_is_reported_not_panicked() {
    // An I/O failure (exit 1), not "malformed" (exit 3): nothing was read to judge.
    let out = run(&["validate", "/nonexistent/x.eml"], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAIL /nonexistent/x.eml: cannot read"));
}

#[test]
fn sealed_messages_are_reported_as_sealed_not_as_failures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let files = [
        ("smime_open/signed.eml", "smime"),
        ("openpgp_open/bob-to-alice-encrypted.eml", "openpgp"),
        ("mls_open/application.eml", "mls"),
    ];
    for (file, profile) in files {
        let path = root.join(file);
        let out = run(&["validate", path.to_str().unwrap()], b"");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{file}: {stdout}");
        assert!(
            stdout.starts_with("SEALED ") && stdout.contains(&format!("protected under {profile}")),
            "{file}: {stdout}"
        );
    }
}
