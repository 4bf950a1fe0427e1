//! The last test binary `cargo test` runs (integration tests run in name order): it
//! prints how many tests left checks out because a peer was absent, and which, so the
//! summary a user reads does not count them as passed. The tests record their skips
//! through `common::skip`; this reads and clears that record. Skips older than a few
//! hours (a run stopped before reaching this binary) are dropped, not reported.

use std::collections::BTreeMap;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mailseal-skipped");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut skipped: BTreeMap<String, String> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let mut fields = line.splitn(3, '\t');
            let (Some(at), Some(test), Some(reason)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if at
                .parse::<u64>()
                .is_ok_and(|t| now.saturating_sub(t) < 6 * 3600)
            {
                skipped.insert(test.to_string(), reason.to_string());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!();
    if skipped.is_empty() {
        println!("mailseal: no test skipped for want of a peer");
        return;
    }
    println!(
        "mailseal: {} test(s) left out some or all of their checks because a peer is absent (counted as passed above):",
        skipped.len()
    );
    for (test, reason) in &skipped {
        println!("  {test}: {reason}");
    }
    println!(
        "A full run needs sqop, sq, SoftHSM2, PostgreSQL (MAILSEAL_TEST_POSTGRES), Postfix and \
         ../shared beside the clone: `.ci/run` installs and starts them, and \
         MAILSEAL_REQUIRE_PEERS=1 turns every skip into a failure."
    );
}
