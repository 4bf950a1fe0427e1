//! `corpus generate` writes at least 300 labelled cases; this crate passes every one;
//! OpenSSL's `cms`, GnuPG and `sqop`, through the shipped adapters, agree with every
//! S/MIME or OpenPGP case's cryptographic label; the labels follow the schema; a seed gives the same corpus.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use mailseal::corpus::{self, CaseResult, CommandAdapter, Expected, MailsealAdapter};
use mailseal::ReceiveError;

/// One corpus for every test of this file (generating it takes seconds), and the
/// progress its generation told.
fn generated() -> &'static (tempfile::TempDir, Vec<corpus::Progress>) {
    static DIR: OnceLock<(tempfile::TempDir, Vec<corpus::Progress>)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let mut told = Vec::new();
        corpus::generate_with_progress(dir.path(), 7, &mut |p| told.push(p)).unwrap();
        (dir, told)
    })
}

fn corpus() -> &'static Path {
    generated().0.path()
}

fn labels(dir: &Path) -> Vec<Expected> {
    let mut names: Vec<_> = std::fs::read_dir(dir.join("cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p.join("expected.json")).unwrap()).unwrap())
        .collect()
}

#[test]
fn at_least_300_labelled_cases_and_mailseal_passes_every_one() {
    let report = corpus::run(corpus(), &MailsealAdapter).unwrap();
    let (pass, fail, skip) = report.totals();
    assert!(report.cases.len() >= 300, "{} cases", report.cases.len());
    assert_eq!((fail, skip), (0, 0), "{}", report.table());
    assert_eq!(pass, report.cases.len());
    // Every verdict the corpus knows, and every profile-and-protection pair.
    let cases: Vec<&Expected> = report.cases.iter().map(|(e, _)| e).collect();
    for verdict in ["accept", "refuse", "duplicate", "held"] {
        assert!(
            cases
                .iter()
                .any(|e| serde_json::to_value(e.verdict).unwrap() == verdict),
            "no {verdict} case"
        );
    }
    let modes: BTreeSet<(String, String)> = cases
        .iter()
        .map(|e| (e.profile.clone(), e.protection.clone()))
        .collect();
    // Five protections, MLS, and the unprotected messages.
    assert_eq!(modes.len(), 7, "{modes:?}");
    assert!(modes.contains(&("mls".into(), "signed-encrypted".into())));
    assert!(modes.contains(&("none".into(), "none".into())));
    let junit = report.junit();
    assert!(junit.contains(&format!("tests=\"{}\" failures=\"0\"", report.cases.len())));
}

/// The validator of the repository's schema `schemas/NAME.schema.json`.
fn schema(name: &str) -> jsonschema::Validator {
    let path = format!("{}/schemas/{name}.schema.json", env!("CARGO_MANIFEST_DIR"));
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// The rules of the cases an adapter failed.
fn failed_rules(report: &corpus::Report) -> BTreeSet<&str> {
    report
        .cases
        .iter()
        .filter(|(_, r)| matches!(r, CaseResult::Fail(_)))
        .map(|(e, _)| e.rule.as_str())
        .collect()
}

#[test]
fn every_label_follows_the_schema_and_its_exit_status_follows_its_kind() {
    let validator = schema("corpus-case");
    for e in labels(corpus()) {
        let v = serde_json::to_value(&e).unwrap();
        assert!(validator.is_valid(&v), "{}: {v}", e.id);
        match e.kind.as_deref() {
            None => assert_eq!(e.exit, 0, "{}", e.id),
            Some(kind) => {
                let want = match kind {
                    "invalid-argument" => 2,
                    "malformed" => 3,
                    "authentication" => 4,
                    "no-usable-key" => 5,
                    "policy" => 6,
                    _ => 1,
                };
                assert_eq!(e.exit, want, "{}", e.id);
            }
        }
    }
    // A label that breaks the schema is caught by it.
    let mut bad = serde_json::to_value(&labels(corpus())[0]).unwrap();
    bad["verdict"] = "maybe".into();
    assert!(!validator.is_valid(&bad));
}

/// The verdict codes no case reaches yet, with why: the work left on the corpus. The
/// test fails when a code gains a case (take it off this list) and when a new code
/// has none (add a case, or add it here with the reason).
const NOT_YET: &[(&str, &str)] = &[
    // tests/mls/mls_group.rs has it (fail_cost_a_welcome_over_the_limit).
    (
        "mls.welcome-too-large",
        "a Welcome of a group of thousands of members: the corpus's groups are of two and three",
    ),
    // Rules a single case (one receiver clock, one signer of Bob's peers) cannot
    // express; tests/receiver/fail_unsolicited_answers.rs has them on every backend.
    (
        "rules.answered-by-another",
        "two signers answering one attempt: the corpus's peers sign as one party per profile",
    ),
    (
        "rules.payment-not-bound",
        "a payment retry after the receiver priced the request: the corpus records no PaymentRequired the receiver sent",
    ),
    (
        "rules.payment-required-again",
        "no case yet (a prior PaymentRequired, then a second one, would express it); tests/receiver/fail_unsolicited_answers.rs has it",
    ),
    (
        "rules.retry-too-late",
        "the first request accepted, then its retry after its lifetime: two clocks, the corpus has one",
    ),
    // The receiver's own environment, not the message: a store that fails, a locked
    // key, a build without a profile, an internal error.
    ("mls.locked", "environment"),
    ("mls.operation", "environment"),
    ("mls.usage", "environment"),
    ("rules.store", "environment"),
    ("rules.newer-schema", "environment"),
    ("smime.key-store", "environment"),
    ("jws.key-store", "environment"),
    ("smime.token", "environment"),
    ("open.profile-unavailable", "environment"),
    ("openpgp.internal", "environment"),
    ("jws.no-signing-key", "environment"),
    ("openpgp.offline-request", "environment"),
    // Our own keys, not the message: a JWK, DID or key that does not load or sign
    // (key import, sealing, or our own decryption key failing in the store).
    ("jws.did", "own keys: DIDs are read at key import, never from a message"),
    ("jws.key", "own keys: a JWK is read at key import or signing, never from a message"),
    ("jws.pin", "own keys: pins and bindings are checked at key import, never from a message"),
    ("smime.key", "own keys: our private key does not load or does not match"),
    ("openpgp.key", "own keys: the key store's certificates do not load"),
    (
        "mls.no-identity",
        "own keys: raised when we create, add, update, seal or join externally without an MLS identity; receiving needs none",
    ),
    (
        "smime.signed-in-the-future",
        "chosen time: the corpus signs at its own NOW; tests/smime/fail_trimmed_evidence.rs has the case (a signingTime after the time of receipt)",
    ),
    (
        "openpgp.boundary-collision",
        "sealing: the random boundary occurs in the signed entity (2^-192 a message)",
    ),
    (
        "openpgp.too-large",
        "never a verdict: a decryption over the limit is message.decoded-too-large",
    ),
    (
        "openpgp.inflated",
        "never a verdict: compressed content past its budget is message.decoded-too-large",
    ),
    (
        "rules.no-lifetime",
        "validation refuses first: every profile's inner entity needs a Date (validation.invalid-header), and a Date gives a lifetime",
    ),
    (
        "rules.incomplete",
        "validation refuses first: an envelope without kind, messageId, operation or sequence never reaches the rules",
    ),
];

#[test]
fn every_verdict_code_has_a_case_or_a_reason() {
    let covered: BTreeSet<String> = labels(corpus())
        .into_iter()
        .filter_map(|e| e.code)
        .collect();
    let all: BTreeSet<String> = ReceiveError::codes().into_iter().collect();
    for code in &covered {
        assert!(
            all.contains(code),
            "a case is labelled with {code}, which the crate never returns"
        );
    }
    let missing: BTreeSet<&str> = all.difference(&covered).map(String::as_str).collect();
    let listed: BTreeSet<&str> = NOT_YET.iter().map(|(c, _)| *c).collect();
    assert_eq!(listed.len(), NOT_YET.len(), "a code is listed twice");
    assert_eq!(
        missing,
        listed,
        "codes without a case but not listed: {:?}; listed but covered now: {:?}",
        missing.difference(&listed).collect::<Vec<_>>(),
        listed.difference(&missing).collect::<Vec<_>>()
    );
    assert!(covered.len() >= 108, "{} codes covered", covered.len());
    // Every exit status of `mailseal open` but 2, an invalid command-line argument,
    // which no message causes (1: the receiver's MLS state is from a newer version).
    let exits: BTreeSet<u8> = labels(corpus()).iter().map(|e| e.exit).collect();
    assert_eq!(exits, BTreeSet::from([0, 1, 3, 4, 5, 6]));
}

#[test]
fn openssl_cms_agrees_with_every_smime_cases_cryptographic_label() {
    let adapter = CommandAdapter {
        command: vec![concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/dist/corpus-adapters/openssl-cms"
        )
        .into()],
    };
    let report = corpus::run(corpus(), &adapter).unwrap();
    let (pass, fail, skip) = report.totals();
    assert_eq!(fail, 0, "{}", report.table());
    let smime = report
        .cases
        .iter()
        .filter(|(e, _)| e.profile == "smime")
        .count();
    assert_eq!(pass, smime, "{}", report.table());
    assert_eq!(skip, report.cases.len() - smime);
    // Cases OpenSSL refuses: an untrusted signer, a changed entity, not for Bob.
    assert!(report.cases.iter().any(|(e, r)| e.profile == "smime"
        && e.crypto == corpus::Crypto::Fail
        && *r == CaseResult::Pass));
    // It cannot judge the binding's rules, and the report says so.
    assert!(report.above_its_layer.contains("binding.not-a-recipient"));
    assert!(report.table().contains("cannot judge"));
}

#[test]
fn gpg_agrees_with_every_openpgp_cases_cryptographic_label_but_one() {
    // GnuPG 2.2 implements RFC 4880, which has no Intended Recipient Fingerprint: it
    // finds the re-encrypted signature good (RFC 9580 5.2.3.36 says to check it).
    openpgp_adapter_agrees_with_every_cryptographic_label(
        "gpg",
        &["openpgp.not-intended-recipient"],
    );
}

#[test]
fn sqop_agrees_with_every_openpgp_cases_cryptographic_label() {
    let probe = &mut std::process::Command::new("sqop");
    if !crate::common::peer_available("sqop", probe.arg("version")) {
        return;
    }
    openpgp_adapter_agrees_with_every_cryptographic_label("sqop", &[]);
}

/// The shipped OpenPGP adapter `name` passes every OpenPGP case on its `crypto` label
/// but the cases of the rules in `disagrees` (each fails, and the report shows it),
/// and skips the rest.
fn openpgp_adapter_agrees_with_every_cryptographic_label(name: &str, disagrees: &[&str]) {
    let adapter = CommandAdapter {
        command: vec![format!(
            "{}/dist/corpus-adapters/{name}",
            env!("CARGO_MANIFEST_DIR")
        )],
    };
    let report = corpus::run(corpus(), &adapter).unwrap();
    let (pass, fail, skip) = report.totals();
    let failed = failed_rules(&report);
    assert_eq!(
        failed,
        disagrees.iter().copied().collect(),
        "{name}: {}",
        report.table()
    );
    let openpgp = report
        .cases
        .iter()
        .filter(|(e, _)| e.profile == "openpgp")
        .count();
    assert_eq!(pass + fail, openpgp, "{name}: {}", report.table());
    assert_eq!(skip, report.cases.len() - openpgp);
    // It refuses what fails at its layer (an impostor's key, mail not for Bob, a
    // changed entity, no signature, no OpenPGP data) and is told so; it accepts the
    // decompression bomb, whose signature is good.
    let judged = |crypto| -> BTreeSet<&str> {
        report
            .cases
            .iter()
            .filter(|(e, _)| e.profile == "openpgp" && e.crypto == crypto)
            .map(|(e, _)| e.rule.as_str())
            .collect()
    };
    let refused = judged(corpus::Crypto::Fail);
    for rule in [
        "openpgp.unknown-signer",
        "openpgp.not-for-us",
        "openpgp.bad-signature",
        "openpgp.unsigned",
        "openpgp.malformed",
    ] {
        assert!(refused.contains(rule), "{name}: {rule}: {refused:?}");
    }
    assert!(judged(corpus::Crypto::Pass).contains("message.decoded-too-large"));
    assert!(report.above_its_layer.contains("rules.conflict"));
}

/// Every file under `dir`, by its path below `dir`.
fn files_below(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn the_same_seed_gives_the_same_bytes_mls_included() {
    let other = tempfile::tempdir().unwrap();
    corpus::generate(other.path(), 7).unwrap();
    let a = labels(corpus());
    let b = labels(other.path());
    assert_eq!(a, b);
    assert_eq!(
        std::fs::read(corpus().join("index.json")).unwrap(),
        std::fs::read(other.path().join("index.json")).unwrap()
    );
    let mut compared = 0usize;
    let mut mls_compared = 0usize;
    for e in &a {
        let case = |root: &Path| root.join("cases").join(&e.id);
        let (x, y) = (
            files_below(&case(corpus())),
            files_below(&case(other.path())),
        );
        assert_eq!(
            x.keys().collect::<Vec<_>>(),
            y.keys().collect::<Vec<_>>(),
            "{}",
            e.id
        );
        // Every file: messages, encrypted ones included (content keys, nonces,
        // ephemeral keys, OpenPGP salts and session keys come from the seed), keys,
        // labels, and the MLS cases' mails (openmls' randomness and HPKE seals drawn
        // from the seed too, every KeyPackage and leaf dated), states (the times
        // openmls stamps set to NOW) and portable joins.
        for (path, bytes) in &x {
            assert!(
                y[path] == *bytes,
                "{} {}: not the same bytes",
                e.id,
                path.display()
            );
            compared += 1;
            if e.profile == "mls" {
                mls_compared += 1;
            }
        }
    }
    assert!(mls_compared > 300, "{mls_compared} MLS files compared");
    assert!(compared > 3_000, "{compared} files compared");
    // Another seed: other identifiers, the same rules.
    let third = tempfile::tempdir().unwrap();
    corpus::generate(third.path(), 8).unwrap();
    let c = labels(third.path());
    assert_eq!(
        a.iter().map(|e| &e.id).collect::<Vec<_>>(),
        c.iter().map(|e| &e.id).collect::<Vec<_>>()
    );
    let first = a
        .iter()
        .find(|e| e.id.starts_with("smime-signed--valid"))
        .unwrap();
    assert_ne!(
        std::fs::read(corpus().join("cases").join(&first.id).join("message.eml")).unwrap(),
        std::fs::read(
            third
                .path()
                .join("cases")
                .join(&first.id)
                .join("message.eml")
        )
        .unwrap()
    );
}

/// A copy of case `id` with its label changed by `edit`.
fn edited_case(id: &str, edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let from = corpus().join("cases").join(id);
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", from.display()))
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let label = copy.path().join("expected.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&label).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&label, serde_json::to_vec(&v).unwrap()).unwrap();
    copy
}

#[test]
fn the_mls_cases_carry_bobs_group_state_and_need_it() {
    let mls: Vec<Expected> = labels(corpus())
        .into_iter()
        .filter(|e| e.profile == "mls")
        .collect();
    assert!(mls.len() >= 20, "{} MLS cases", mls.len());
    for e in &mls {
        assert_eq!(e.mls_state.as_deref(), Some("state/mls.db"), "{}", e.id);
        assert!(corpus()
            .join("cases")
            .join(&e.id)
            .join("state/mls.db")
            .is_file());
    }
    // Every MLS refusal code a message can meet has a case; the others are our own
    // keys (no identity, a locked one), an openmls failure, an argument, and a Welcome
    // of thousands of members (NOT_YET above).
    let codes: BTreeSet<String> = mls.iter().filter_map(|e| e.code.clone()).collect();
    for code in ReceiveError::codes() {
        if code.starts_with("mls.")
            && ![
                "mls.no-identity",
                "mls.locked",
                "mls.operation",
                "mls.usage",
                "mls.welcome-too-large",
            ]
            .contains(&code.as_str())
        {
            assert!(codes.contains(&code), "no MLS case for {code}");
        }
    }
    // Without Bob's state, the valid application message is not delivered.
    let valid = "mls--valid--request-message-send";
    let adapter = MailsealAdapter;
    let judge = |dir: &Path| mailseal::corpus::Adapter::judge(&adapter, dir);
    assert_eq!(
        judge(&corpus().join("cases").join(valid)).unwrap().verdict,
        "accept"
    );
    let stateless = edited_case(valid, |v| {
        v.as_object_mut().unwrap().remove("mlsState");
    });
    let j = judge(stateless.path()).unwrap();
    assert_eq!(j.verdict, "refuse", "{j:?}");
    // A state file named outside the case directory is no case.
    let escaping = edited_case(valid, |v| v["mlsState"] = "../../state/mls.db".into());
    assert!(judge(escaping.path()).is_err());
}

#[test]
fn the_command_line_speaks_the_adapter_protocol() {
    // `mailseal corpus adapter` as an external adapter, on one case of each verdict.
    let adapter = CommandAdapter {
        command: vec![
            crate::common::bin().display().to_string(),
            "corpus".into(),
            "adapter".into(),
        ],
    };
    let root = corpus().join("cases");
    for verdict in ["accept", "refuse", "duplicate", "held"] {
        let e = labels(corpus())
            .into_iter()
            .find(|e| serde_json::to_value(e.verdict).unwrap() == verdict)
            .unwrap();
        let j = mailseal::corpus::Adapter::judge(&adapter, &root.join(&e.id)).unwrap();
        assert_eq!(j.verdict, verdict, "{}", e.id);
        assert_eq!(j.code, e.code, "{}", e.id);
        assert_eq!(j.exit, Some(e.exit), "{}", e.id);
    }
    // A directory that is no case: an error, not a verdict.
    assert!(mailseal::corpus::Adapter::judge(&adapter, Path::new("/nonexistent")).is_err());
}

/// The shipped mls-rs adapter (`examples/corpus_adapter_mls_rs.rs`, compiled into this
/// binary), in-process.
struct MlsRs;

impl corpus::Adapter for MlsRs {
    fn name(&self) -> String {
        "mls-rs".into()
    }
    fn judge(&self, dir: &Path) -> Result<corpus::Judgement, corpus::CorpusError> {
        Ok(serde_json::from_value(crate::mls_rs_adapter::judge(dir)).unwrap())
    }
}

#[test]
fn every_mls_case_carries_a_portable_join_that_follows_its_schema() {
    let validator = schema("corpus-mls-join");
    let mut n = 0;
    for e in labels(corpus()) {
        assert_eq!(e.mls_join.is_some(), e.profile == "mls", "{}", e.id);
        assert_eq!(e.mls_join.is_some(), e.mls_state.is_some(), "{}", e.id);
        let Some(file) = &e.mls_join else { continue };
        let path = corpus().join("cases").join(&e.id).join(file);
        let join: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert!(validator.is_valid(&join), "{}: {join}", e.id);
        // The receiver is Bob, whose mail keys certify his MLS key.
        assert_eq!(join["member"], "bob@smime.example", "{}", e.id);
        n += 1;
    }
    assert!(n >= 26, "{n} MLS cases");
}

/// An independent MLS implementation, mls-rs, rebuilds Bob from each MLS case's
/// portable join alone (never from mailseal's state file) and agrees with the
/// `crypto` label of every MLS case but those of the rules below, each a place where
/// what decides lies above the MLS layer and the report shows it. It skips the
/// KeyPackage mails (mls-rs checks a KeyPackage only when it adds it) and every other
/// profile.
#[test]
fn mls_rs_rebuilds_bob_from_the_portable_join_and_agrees_at_its_layer() {
    let report = corpus::run(corpus(), &MlsRs).unwrap();
    let failed = failed_rules(&report);
    let expected: BTreeSet<&str> = [
        // A message of an epoch Bob has not reached: mailseal holds it until the
        // Commit arrives (its crypto passes then); mls-rs has no hold and refuses it
        // (EpochNotFound).
        "rules.held",
        "mls.buffer-full",
        "mls.too-far-ahead",
        // A redelivered application message: mailseal knows it by its digest before
        // decrypting; mls-rs deleted the message key after the first delivery (RFC 9420
        // forward secrecy, KeyMissing).
        "rules.duplicate",
        // A second Commit for an epoch already left: it decrypts and its signature
        // verifies, and mailseal refuses it as a fork; mls-rs refuses any Commit of a
        // past epoch before it checks anything (InvalidEpoch).
        "mls.fork",
        // A Welcome without the ratchet tree: its secrets decrypt, but no member can
        // join by mail without the tree; both refuse (mls-rs: RatchetTreeNotFound).
        "mls.no-ratchet-tree",
        // Carol's message of epoch 1 after the Commit that removed her: it decrypts
        // with the kept epoch-1 secrets and mailseal refuses it as from a removed
        // member; mls-rs refuses it too (MemberNotFound).
        "mls.sender-removed",
        // The impostor's Welcome: the binding of its leaf to Alice's mail key is
        // mailseal's authentication service; mls-rs' BasicIdentityProvider takes any
        // credential (an mls-rs member of our groups plugs in an identity provider
        // that checks the binding).
        "mls.unbound",
    ]
    .into_iter()
    .collect();
    assert_eq!(failed, expected, "{}", report.table());
    let mls: Vec<_> = report
        .cases
        .iter()
        .filter(|(e, _)| e.profile == "mls")
        .collect();
    let skipped: BTreeSet<&str> = mls
        .iter()
        .filter(|(_, r)| matches!(r, CaseResult::Skip(_)))
        .map(|(e, _)| e.id.as_str())
        .collect();
    assert_eq!(
        skipped,
        [
            "mls--mls.cipher-suite--key-package-of-another-suite",
            "mls--mls.key-package-lifetime--valid-for-a-year",
            "mls--valid--key-package",
        ]
        .into_iter()
        .collect(),
        "{}",
        report.table()
    );
    let passed = mls
        .iter()
        .filter(|(_, r)| matches!(r, CaseResult::Pass))
        .count();
    assert_eq!(passed + skipped.len() + expected.len(), mls.len());
    // Every other profile is skipped, not judged.
    assert!(report
        .cases
        .iter()
        .filter(|(e, _)| e.profile != "mls")
        .all(|(_, r)| matches!(r, CaseResult::Skip(_))));
    // It refuses what fails at its layer (a changed ciphertext, no MLSMessage, a group
    // Bob is not in, an epoch whose secrets are gone, the group after his removal) and
    // accepts valid messages of every kind, a Commit included.
    for (e, r) in &mls {
        if e.rule == "valid" && !e.id.contains("key-package") {
            assert!(matches!(r, CaseResult::Pass), "{}: {r:?}", e.id);
        }
    }
    println!("{}", report.table());
}

/// Each phase's steps, in order, from 1 to its total.
fn phases(told: &[corpus::Progress]) -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for p in told {
        assert!(p.done <= p.total, "{p:?}");
        match out.last_mut() {
            Some((phase, done)) if *phase == p.phase => {
                assert!(p.done >= *done, "{p:?} after {done}");
                *done = p.done;
            }
            _ => out.push((p.phase, p.done)),
        }
        if p.done == p.total {
            assert_eq!(out.last().unwrap().1, p.total);
        }
    }
    out
}

/// Progress is told as the corpus is built, written and judged; the command line
/// draws it only on a terminal, so its output through a pipe is what it was: the one
/// summary line of `generate` (and the same corpus), the table of `run`, and nothing
/// on stderr.
#[test]
fn progress_is_told_and_piped_output_is_unchanged() {
    let (_, told) = generated();
    let cases = labels(corpus()).len() as u64;
    assert_eq!(phases(told), vec![("building", 8), ("writing", cases)]);

    // A corpus of three cases, judged in-process and by the command line.
    let small = tempfile::tempdir().unwrap();
    for e in labels(corpus()).iter().take(3) {
        let from = corpus().join("cases").join(&e.id);
        for (rel, bytes) in files_below(&from) {
            let to = small.path().join("cases").join(&e.id).join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, bytes).unwrap();
        }
    }
    let mut judged = Vec::new();
    let report =
        corpus::run_with_progress(small.path(), &MailsealAdapter, &mut |p| judged.push(p)).unwrap();
    assert_eq!(phases(&judged), vec![("judging", 3)]);
    assert_eq!(judged.first().map(|p| p.done), Some(0));
    let bin = crate::common::bin();
    let out = std::process::Command::new(&bin)
        .args(["corpus", "run", "--impl", "mailseal"])
        .arg(small.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), report.table());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let again = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(&bin)
        .args(["corpus", "generate", "--seed", "7", "--out"])
        .arg(again.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(corpus().join("index.json")).unwrap()).unwrap();
    let accept = labels(corpus())
        .iter()
        .filter(|e| serde_json::to_value(e.verdict).unwrap() == "accept")
        .count();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let expected_start = format!(
        "{cases} cases in {} ({accept} to accept, ",
        again.path().display()
    );
    assert!(stdout.starts_with(&expected_start), "{stdout}");
    assert!(stdout.ends_with(" refusal codes)\n"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(index["cases"].as_array().unwrap().len() as u64, cases);
    assert_eq!(
        std::fs::read(again.path().join("index.json")).unwrap(),
        std::fs::read(corpus().join("index.json")).unwrap()
    );
}
