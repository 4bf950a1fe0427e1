//! The command line's one input convention (issue #61): every command that reads a
//! message, a request, a response or an envelope takes it as `FILE`, as `-` with the
//! bytes on standard input, on standard input with no argument, and as `--in FILE`,
//! with the same result; a file that is not there is an I/O failure (exit 1), never
//! "malformed" (exit 3).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `mailseal ARGS` in `dir` with `stdin`, the default store pointed at `home`.
fn mailseal(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(common::bin())
        .args(args)
        .current_dir(dir)
        .env("MAILSEAL_HOME", dir.join("home"))
        .env_remove("MAILSEAL_STATE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mailseal runs");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("mailseal finishes");
    let _ = writer.join();
    out
}

fn ok(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let out = mailseal(dir, args, stdin);
    assert!(
        out.status.success(),
        "mailseal {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// How one form names the input.
#[derive(Clone, Copy, Debug)]
enum Form {
    Path,
    Dash,
    Stdin,
    In,
}

/// One command of the table: its arguments before the input, the input file, the
/// forms it takes, and what of its result must agree across them.
struct Case {
    name: &'static str,
    args: Vec<String>,
    /// Arguments after the input (none of them positional).
    after: Vec<String>,
    input: PathBuf,
    forms: &'static [Form],
    result: fn(&Path, &Output) -> String,
}

const ALL: &[Form] = &[Form::Path, Form::Dash, Form::Stdin, Form::In];

/// Exit code, stdout and stderr, with the input's name said as the standard input's.
fn verbatim(input: &Path) -> impl Fn(&Output) -> String + '_ {
    move |out| {
        let name = input.display().to_string();
        format!(
            "exit {:?}\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).replace(&name, "stdin"),
            String::from_utf8_lossy(&out.stderr).replace(&name, "stdin"),
        )
    }
}

fn run_form(dir: &Path, case: &Case, form: Form) -> Output {
    let path = case.input.to_str().expect("utf-8 path").to_string();
    let mut args = case.args.clone();
    let stdin = match form {
        Form::Path => {
            args.push(path);
            Vec::new()
        }
        Form::Dash => {
            args.push("-".into());
            std::fs::read(&case.input).expect("input")
        }
        Form::Stdin => std::fs::read(&case.input).expect("input"),
        Form::In => {
            args.extend(["--in".into(), path]);
            Vec::new()
        }
    };
    args.extend(case.after.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    mailseal(dir, &args, &stdin)
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Exit code and stdout.
fn stdout_of(_: &Path, out: &Output) -> String {
    format!(
        "exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout)
    )
}

/// Exit code and stderr (a refusal: the same refusal whatever the form).
fn stderr_of(_: &Path, out: &Output) -> String {
    format!(
        "exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A sealed or signed message, judged by what `open --stateless` reads from it (its
/// signature is randomised; what it says is not).
fn opened(dir: &Path, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let opened = ok(
        dir,
        &["open", "--store", "store", "--stateless"],
        &out.stdout,
    );
    String::from_utf8_lossy(&opened.stdout).into_owned()
}

/// A composed message, judged by its envelope (its Message-ID and Date are new each
/// time).
fn envelope_of(_: &Path, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = mailseal::message::MailA2aMessage::parse(
        &out.stdout,
        &mailseal::message::Limits::default(),
    )
    .expect("composed");
    String::from_utf8_lossy(m.envelope_bytes()).into_owned()
}

/// A signing response, judged by the message `assemble` makes of it.
fn response_of(dir: &Path, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("judged.resp"), &out.stdout).expect("writes");
    let assembled = ok(
        dir,
        &["assemble", "--store", "store", "r.req", "judged.resp"],
        b"",
    );
    opened(dir, &assembled)
}

#[test]
fn every_command_reads_a_file_dash_stdin_and_in_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let request = common::data("maila2a/request.eml");
    for email in ["client-agent@example.net", "research-bot@example.com"] {
        ok(
            dir,
            &[
                "key", "generate", "--store", "store", "--kind", "smime", "--email", email,
            ],
            b"",
        );
    }
    // A signing time a little ahead, so every form signs at the same instant and the
    // new certificates are valid then.
    let at = (time::OffsetDateTime::now_utc() + time::Duration::minutes(1))
        .replace_nanosecond(0)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let at = at.as_str();
    let envelope = dir.join("envelope.json");
    std::fs::write(&envelope, common::request().to_string()).unwrap();
    let sealed = dir.join("sealed.eml");
    let out = ok(
        dir,
        &[
            "seal",
            "--store",
            "store",
            "--profile",
            "smime",
            "--at",
            at,
            request.to_str().unwrap(),
        ],
        b"",
    );
    std::fs::write(&sealed, &out.stdout).unwrap();
    let out = ok(
        dir,
        &[
            "sign-request",
            "--store",
            "store",
            "--profile",
            "smime",
            "--at",
            at,
            request.to_str().unwrap(),
        ],
        b"",
    );
    std::fs::write(dir.join("r.req"), &out.stdout).unwrap();
    let out = ok(dir, &["sign", "--store", "store", "--yes", "r.req"], b"");
    std::fs::write(dir.join("r.resp"), &out.stdout).unwrap();

    let store = |cmd: &[&str]| {
        let mut a = strings(cmd);
        a.splice(1..1, strings(&["--store", "store"]));
        a
    };
    let cases = vec![
        Case {
            name: "validate",
            args: strings(&["validate"]),
            after: vec![],
            input: request.clone(),
            forms: ALL,
            result: |_, _| String::new(),
        },
        Case {
            name: "inspect",
            args: strings(&["inspect"]),
            after: vec![],
            input: request.clone(),
            forms: ALL,
            result: |_, _| String::new(),
        },
        Case {
            name: "compose",
            args: strings(&[
                "compose",
                "--from",
                "client-agent@example.net",
                "--to",
                "research-bot@example.com",
            ]),
            after: vec![],
            input: envelope.clone(),
            forms: ALL,
            result: envelope_of,
        },
        Case {
            name: "seal",
            args: store(&["seal", "--profile", "smime", "--at", at]),
            after: vec![],
            input: request.clone(),
            forms: ALL,
            result: opened,
        },
        Case {
            name: "open --stateless",
            args: store(&["open", "--stateless"]),
            after: vec![],
            input: sealed.clone(),
            forms: ALL,
            result: stdout_of,
        },
        Case {
            name: "sign-request",
            args: store(&["sign-request", "--profile", "smime", "--at", at]),
            after: vec![],
            input: request.clone(),
            forms: ALL,
            result: stdout_of,
        },
        Case {
            name: "sign --yes",
            args: store(&["sign", "--yes"]),
            after: vec![],
            input: dir.join("r.req"),
            forms: ALL,
            result: response_of,
        },
        Case {
            // The response is the second input: the request names its own file.
            name: "assemble (the response)",
            args: store(&["assemble", "r.req"]),
            after: vec![],
            input: dir.join("r.resp"),
            forms: &[Form::Path, Form::Dash, Form::Stdin],
            result: opened,
        },
        Case {
            name: "assemble (the request)",
            args: store(&["assemble"]),
            after: strings(&["r.resp"]),
            input: dir.join("r.req"),
            forms: &[Form::Path, Form::Dash],
            result: opened,
        },
        Case {
            name: "dkim verify",
            args: strings(&["dkim", "verify", "--keys", "dkim.json"]),
            after: vec![],
            input: sealed.clone(),
            forms: ALL,
            result: |_, _| String::new(),
        },
        Case {
            name: "aep from-maila2a",
            args: strings(&["aep", "from-maila2a"]),
            after: vec![],
            input: request.clone(),
            forms: ALL,
            result: stderr_of,
        },
        Case {
            name: "aep to-maila2a",
            args: strings(&["aep", "to-maila2a"]),
            after: vec![],
            input: request.clone(),
            forms: ALL,
            result: stderr_of,
        },
        Case {
            name: "mls join",
            args: store(&["mls", "join"]),
            after: vec![],
            input: request.clone(),
            forms: ALL,
            result: stderr_of,
        },
    ];
    std::fs::write(dir.join("dkim.json"), "{}").unwrap();
    for case in &cases {
        let show = verbatim(&case.input);
        let mut first: Option<(Form, String)> = None;
        for &form in case.forms {
            let out = run_form(dir, case, form);
            // The verbatim output when the command has nothing random in it, else
            // what it means.
            let result = match (case.result)(dir, &out) {
                r if r.is_empty() => show(&out),
                r => format!("exit {:?}\n{r}", out.status.code()),
            };
            match &first {
                None => first = Some((form, result)),
                Some((f, r)) => assert_eq!(r, &result, "{}: {f:?} and {form:?} differ", case.name),
            }
        }
        // Not there: an I/O failure, said with the name, whatever the command.
        let missing = Case {
            input: dir.join("no-such-file.eml"),
            forms: &[],
            name: case.name,
            args: case.args.clone(),
            after: case.after.clone(),
            result: case.result,
        };
        for form in [Form::Path, Form::In] {
            if !case.forms.iter().any(|f| matches!(f, Form::In)) && matches!(form, Form::In) {
                continue;
            }
            let out = run_form(dir, &missing, form);
            // (validate names each file on its own line of stdout.)
            let stderr = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                out.status.code(),
                Some(1),
                "{} {form:?} of a missing file: {stderr}",
                case.name
            );
            assert!(
                stderr.contains("no-such-file.eml"),
                "{}: {stderr}",
                case.name
            );
        }
    }
}

/// `compose` refusing an envelope lists every violation, not the first and a count.
#[test]
fn fail_compose_lists_every_violation() {
    let envelope = common::with(
        common::request(),
        serde_json::json!({"correlationId": null, "idempotencyKey": null, "sequence": -1}),
    );
    let out = common::run(
        &["compose", "--from", "a@x.example", "--to", "b@y.example"],
        envelope.to_string().as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(out.stdout.is_empty());
    let listed = stderr
        .lines()
        .filter(|l| l.starts_with("mailseal: violation: "))
        .count();
    assert!(listed >= 2, "{stderr}");
    assert!(
        stderr.contains(&format!("{listed} violations, listed above")),
        "{stderr}"
    );
    assert!(!stderr.contains("more)"), "{stderr}");
}

/// `mailseal --help` lists every exit status with its meaning.
#[test]
fn help_lists_the_exit_statuses() {
    let out = common::run(&["--help"], b"");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let table = help
        .split("Exit status:")
        .nth(1)
        .expect("an exit status table");
    for (code, word) in [
        (0, "success"),
        (1, "anything else"),
        (2, "command line is wrong"),
        (3, "malformed"),
        (4, "authentication"),
        (5, "no usable key"),
        (6, "refused by policy"),
    ] {
        assert!(
            table
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} ")) && l.contains(word)),
            "{code} {word}: {table}"
        );
    }
}
