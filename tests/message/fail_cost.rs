//! Cost (THREATS.md, issue #58): what a message from anyone costs before its sender is
//! known is linear in its size, in memory and in work.
//!
//! Memory is the peak resident size of the `mailseal` process, read by GNU time (a
//! figure the kernel keeps, the same on a loaded machine). Work is compared, never
//! timed: the CPU time the same command takes on an input and on one four times its
//! size, whose ratio is about 4 for a linear path and 16 for a quadratic one (the
//! 160,000-key object that took 29 s), so the bound of 8 says which, whatever the
//! machine's speed. Every figure is printed.

use std::path::Path;
use std::process::Command;

use crate::common;

/// Peak memory of one `mailseal` run may be this many times its input, plus
/// [`BASE_BYTES`] (docs/security.md states it).
pub(crate) const MEMORY_MULTIPLE: u64 = 12;
/// What the process holds whatever its input (code, the schema, the store).
pub(crate) const BASE_BYTES: u64 = 48 << 20;

/// A message from an unknown sender, unsigned, whose payload's `metadata` member is
/// `json`: everything in it is read before the message is refused.
fn unsigned_with_metadata(json: &str) -> Vec<u8> {
    let env = serde_json::json!({
        "bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
        "operation": "message/send", "messageId": "m1", "correlationId": "c1",
        "sequence": 0, "final": false, "idempotencyKey": "i1",
        "payload": {"message": {"messageId": "a1", "role": "ROLE_USER",
            "parts": [{"text": "hi"}], "metadata": {"x": null}}}
    })
    .to_string()
    .replace(r#"{"x":null}"#, json);
    format!(
        "From: stranger@x.example\r\nTo: agent@y.example\r\nMessage-ID: <1@x.example>\r\n\
         Date: Sun, 06 Dec 2026 09:00:00 +0000\r\nSubject: x\r\nMail-A2A-Binding: 1.0\r\n\
         MIME-Version: 1.0\r\nContent-Type: application/a2a+json\r\n\r\n{env}\r\n"
    )
    .into_bytes()
}

/// [`unsigned_with_metadata`] with `parts` (a JSON array) as the message's parts.
fn unsigned_with_parts(parts: &str) -> Vec<u8> {
    let mail = unsigned_with_metadata(r#"{"x":null}"#);
    String::from_utf8(mail)
        .unwrap()
        .replace(r#"[{"text":"hi"}]"#, parts)
        .into_bytes()
}

/// As many parts `{"url":"cid:a"}` (each a dangling reference) as fit in `bytes`.
fn cid_parts(bytes: usize) -> String {
    format!("[{}]", vec![r#"{"url":"cid:a"}"#; bytes / 16].join(","))
}

/// `{"x":[ITEM,ITEM,...]}` about `bytes` long.
fn repeated(item: &str, bytes: usize) -> String {
    let n = bytes / (item.len() + 1);
    format!("{{\"x\":[{}]}}", vec![item; n].join(","))
}

/// An object of about `bytes` of distinct keys.
fn many_keys(bytes: usize) -> String {
    let n = bytes / 12;
    let members: Vec<String> = (0..n).map(|i| format!("\"k{i:07}\":0")).collect();
    format!("{{{}}}", members.join(","))
}

/// An object of about `bytes` of the shortest distinct keys (four characters each).
fn short_keys(bytes: usize) -> String {
    let alphabet: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let n = bytes / 9;
    let key = |mut i: usize| -> String {
        (0..4)
            .map(|_| {
                let c = alphabet[i % alphabet.len()];
                i /= alphabet.len();
                c
            })
            .collect()
    };
    let members: Vec<String> = (0..n).map(|i| format!("\"{}\":0", key(i))).collect();
    format!("{{{}}}", members.join(","))
}

/// `cid:` references (none names a part) 55 objects deep under a long name the A2A
/// schema defines, so shown in full in each one's pointer: each reference once cost
/// its whole pointer, 3.5 KB for 16 bytes.
fn deep_cid_references(bytes: usize) -> String {
    let depth = 55;
    let open = r#"{"openIdConnectSecurityScheme":"#.repeat(depth);
    let refs = vec![r#"{"url":"cid:a"}"#; bytes / 16].join(",");
    format!("{open}[{refs}]{}", "}".repeat(depth))
}

/// Runs `mailseal SUBCOMMAND FILE` under GNU time: (peak resident bytes, CPU seconds,
/// exit code, stderr).
pub(crate) fn measure(subcommand: &str, file: &Path) -> (u64, f64, Option<i32>, String) {
    let report = file.with_extension("time");
    let out = Command::new("/usr/bin/time")
        .arg("-o")
        .arg(&report)
        .args(["-f", "%M %U %S"])
        .arg(common::bin())
        .arg(subcommand)
        .arg(file)
        .env(
            "MAILSEAL_HOME",
            common::empty_store_at(&file.parent().unwrap().join("home")),
        )
        .output()
        .unwrap();
    let report = std::fs::read_to_string(&report).unwrap();
    // The last line: GNU time writes "Command exited with non-zero status N" first.
    let fields: Vec<&str> = report.lines().last().unwrap().split_whitespace().collect();
    let kib: u64 = fields[0].parse().unwrap();
    let cpu = fields[1].parse::<f64>().unwrap() + fields[2].parse::<f64>().unwrap();
    (
        kib * 1024,
        cpu,
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(crate) fn gnu_time() -> bool {
    common::peer_available(
        "GNU time (/usr/bin/time)",
        Command::new("/usr/bin/time").args(["-f", "%M", "true"]),
    )
}

/// The shapes that cost most per byte as a tree: 18 MB of `[[0]],` took 1 GB (56
/// times) before the tree was a tape of 12-byte nodes. Each is refused (unsigned) or
/// reported (validate) after the whole payload is read; the peak stays within
/// [`MEMORY_MULTIPLE`] times the message.
#[test]
fn fail_cost_json_memory_is_a_small_multiple_of_the_message() {
    if !gnu_time() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size = 6 << 20;
    for (shape, json) in [
        ("zeros", repeated("0", size)),
        ("nested arrays", repeated("[[0]]", size)),
        ("empty objects", repeated("{}", size)),
        ("one-member objects", repeated(r#"{"a":0}"#, size)),
        ("escaped strings", repeated(r#""\u0041""#, size)),
        ("distinct keys", many_keys(size)),
        ("distinct short keys", short_keys(size)),
        // Opaque JSON (issue #60): not this message's parts, read and not walked.
        (
            "metadata: cid: references deep under long public names",
            deep_cid_references(size),
        ),
        (
            "cid: references in the message's own parts",
            cid_parts(size),
        ),
    ] {
        let mail = match shape.starts_with("cid") {
            true => unsigned_with_parts(&json),
            false => unsigned_with_metadata(&json),
        };
        let file = dir.path().join("m.eml");
        std::fs::write(&file, &mail).unwrap();
        for subcommand in ["open", "validate"] {
            let (peak, cpu, code, stderr) = measure(subcommand, &file);
            let bound = MEMORY_MULTIPLE * mail.len() as u64 + BASE_BYTES;
            println!(
                "{subcommand} {shape}: {} bytes, peak {peak} ({:.1}x), {cpu:.2} s CPU",
                mail.len(),
                peak as f64 / mail.len() as f64
            );
            assert!(
                peak <= bound,
                "{subcommand} {shape}: peak {peak} bytes for a {}-byte message (bound {bound})",
                mail.len()
            );
            // It was read, not refused at the door: open refuses it for its missing
            // signature, validate finds it valid (or its references dangling).
            match (subcommand, shape.starts_with("cid")) {
                ("open", false) => {
                    assert!(stderr.contains("needs signed protection"), "{stderr}")
                }
                ("open", true) => assert!(stderr.contains("invalid-content-id"), "{stderr}"),
                (_, false) => assert_eq!(code, Some(0), "{stderr}"),
                (_, true) => assert_eq!(code, Some(3), "{stderr}"),
            }
        }
    }
}

/// The object of many distinct keys that was quadratic (the per-member search; 160,000
/// keys took 29 s): the work on four times the keys is about four times the work.
#[test]
fn fail_cost_json_keys_are_linear() {
    if !gnu_time() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cpu = |bytes: usize| {
        let file = dir.path().join(format!("k{bytes}.eml"));
        std::fs::write(&file, unsigned_with_metadata(&many_keys(bytes))).unwrap();
        // The least of three runs: what the work costs, less what else the machine did.
        (0..3)
            .map(|_| measure("validate", &file).1)
            .fold(f64::INFINITY, f64::min)
            .max(0.01)
    };
    let (small, large) = (cpu(1 << 20), cpu(4 << 20));
    let ratio = large / small;
    println!("distinct keys: 1 MiB {small:.2} s, 4 MiB {large:.2} s CPU, ratio {ratio:.1}");
    assert!(
        ratio < 8.0,
        "four times the keys cost {ratio:.1} times the work: not linear"
    );
}
