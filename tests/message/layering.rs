//! The crate's top-level modules form a layering with no import cycle (issue #16,
//! "dependencies run one way"): the key store below the profiles that read its
//! records, the ASN.1 helpers below both, the extensions above the profiles, the
//! pipeline above everything but the command line. This test reads `src/` and fails
//! with the cycle and the files that make it, so a new `use` that closes a loop is
//! caught in review rather than found in the next refactoring.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifiers named after `crate::` in `text`, either directly
/// (`crate::smime::x`) or in a brace group (`crate::{smime, keystore::y}`).
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(name);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let top_of = |p: &Path| -> String {
        let rel = p.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        first.trim_end_matches(".rs").to_string()
    };
    let tops: BTreeSet<String> = files
        .iter()
        .map(|p| top_of(p))
        .filter(|t| t != "lib" && t != "main")
        .collect();
    // module -> (dependency -> files that import it)
    let mut deps: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for path in &files {
        let top = top_of(path);
        if !tops.contains(&top) {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        for dep in crate_paths(&text) {
            if dep != top && tops.contains(&dep) {
                deps.entry(top.clone())
                    .or_default()
                    .entry(dep)
                    .or_default()
                    .insert(path.strip_prefix(&src).unwrap().display().to_string());
            }
        }
    }
    assert!(
        deps.get("keystore").is_some_and(|d| d.contains_key("asn1")),
        "the scan finds nothing: keystore is known to use asn1"
    );
    // Depth-first search for a back edge; report the cycle it closes.
    fn visit(
        node: &str,
        deps: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for dep in deps.get(node).into_iter().flat_map(|d| d.keys()) {
            if let Some(c) = visit(dep, deps, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for top in &tops {
        if let Some(cycle) = visit(top, &deps, &mut Vec::new(), &mut done) {
            let why: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("{} -> {} in {:?}", w[0], w[1], deps[&w[0]][&w[1]]))
                .collect();
            panic!("import cycle {}:\n{}", cycle.join(" -> "), why.join("\n"));
        }
    }
}

#[test]
fn the_key_store_does_not_depend_on_the_profiles() {
    // The store holds neutral records; the S/MIME and OpenPGP profiles read them.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/keystore");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let used = crate_paths(&text);
        for profile in [
            "smime", "openpgp", "mls", "seal", "binding", "dispatch", "ext",
        ] {
            assert!(
                !used.contains(profile),
                "{} uses crate::{profile}",
                path.display()
            );
        }
    }
}
