//! The offline summary (issue #59) attacked as the compromised connected host: signed
//! content that must show, characters that must be escaped, look-alikes that must be
//! flagged. Each request is made and reviewed by the library (S/MIME, Alice).

use mailseal::keystore::{DirectoryStore, KeyStore};
use mailseal::message::MailA2aMessage;
use mailseal::offline;
use mailseal::{Envelope, Kind, Operation, Profile, SealOptions};

fn alice() -> (tempfile::TempDir, DirectoryStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = DirectoryStore::open(dir.path().join("store")).expect("store");
    let f =
        |r: &str| std::fs::read(super::common::fixture(&format!("rfc9216/{r}"))).expect("fixture");
    let mut identity = f("alice.sign.crt");
    identity.extend(f("alice.sign.key"));
    store.import(&identity, "alice", false).expect("import");
    store.import(&f("ca.rsa.crt"), "ca", true).expect("import");
    (dir, store)
}

fn message(operation: Operation, payload: serde_json::Value) -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, operation, "atk-59");
    env.set("correlationId", "c-atk-59");
    env.set("idempotencyKey", "atk-59");
    env.set("payload", &payload);
    MailA2aMessage::new("alice@smime.example", &["bob@smime.example"], env)
}

fn summary_of(store: &DirectoryStore, plain: &MailA2aMessage) -> offline::Summary {
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    let request = offline::prepare(store, plain, &opts).expect("prepare");
    let review = offline::review(store, request).expect("review");
    review.summary().clone()
}

fn send(text: &str, data: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
        "parts": [{"text": text}, {"data": data}]}})
}

/// The warnings section, continuation lines joined.
fn warnings(s: &offline::Summary) -> String {
    let t = s.text();
    let w =
        &t[t.find("\nwarnings: ").expect("warnings")..t.find("\nheader fields").expect("headers")];
    w.lines().fold(String::new(), |mut all, line| {
        match line.trim_start().strip_prefix("| ") {
            Some(rest) => all.push_str(rest),
            None => {
                all.push('\n');
                all.push_str(line);
            }
        }
        all
    })
}

/// Display: characters that draw nothing (or a box some terminals leave blank) but
/// are in no general category the escaping covered: the object replacement
/// character and the Khitan small script filler.
#[test]
fn fail_display_object_replacement_and_khitan_filler_are_escaped_and_flagged() {
    let (_d, store) = alice();
    for c in ['\u{fffc}', '\u{16fe4}'] {
        let text = format!("Pay invoice 77{c}1 today");
        let s = summary_of(
            &store,
            &message(
                Operation::MessageSend,
                send(&text, serde_json::json!({"n": 1})),
            ),
        );
        let shown = s.text();
        assert!(
            !shown.contains(c),
            "U+{:04X} printed raw:\n{shown}",
            c as u32
        );
        assert!(
            shown.contains(&format!("\"Pay invoice 77\\u{{{:04x}}}1 today\"", c as u32)),
            "{shown}"
        );
        let w = warnings(&s);
        assert!(
            w.contains(&format!(
                "hidden or invisible characters U+{:04X}",
                c as u32
            )),
            "{w}"
        );
    }
}

/// Display: a whole-script look-alike domain (all Cyrillic `раураӏ.com`) beside a
/// local part or user name that looks like nothing in ASCII (`иван`, `ж`) was not
/// flagged: the confusable check looked at the whole address or authority only.
#[test]
fn fail_display_whole_script_lookalike_domain_beside_other_text_is_flagged() {
    let (_d, store) = alice();
    let domain = "\u{440}\u{430}\u{443}\u{440}\u{430}\u{4cf}.com";
    for v in [
        format!("\u{438}\u{432}\u{430}\u{43d}@{domain}"),
        format!("https://\u{436}@{domain}/hook"),
    ] {
        let s = summary_of(
            &store,
            &message(
                Operation::MessageSend,
                send("hi", serde_json::json!({"v": v})),
            ),
        );
        let w = warnings(&s);
        assert!(
            w.contains("payload.message.parts[1].data.v: \"\u{440}\u{430}\u{443}\u{440}\u{430}\u{4cf}\" looks like \"paypal\""),
            "{v}: {w}"
        );
        assert!(w.contains("xn--80aa0cbo65f.com"), "{w}");
    }
}

/// Display: an ASCII URL that names a user before the host reads as the user's text
/// (`https://bank.example@evil.example/`) and leads to the host: said, with the host.
#[test]
fn fail_display_a_url_with_a_user_name_before_the_host_is_flagged() {
    let (_d, store) = alice();
    let payload = serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
        "parts": [{"text": "Status, nothing to do."}]},
        "configuration": {"taskPushNotificationConfig": {
            "url": "https://hooks.bank.example@collect.attacker.example/hook"}}});
    let s = summary_of(&store, &message(Operation::MessageSend, payload));
    let w = warnings(&s);
    assert!(
        w.contains(
            "payload.configuration.taskPushNotificationConfig.url: names a user \
             (\"hooks.bank.example\") before the host; it leads to collect.attacker.example"
        ),
        "{w}"
    );
}

/// Display: a value padded so that the terminal's own wrap (80 columns on the Linux
/// console) would put its next words at the start of a row, where they read as a
/// line of the summary (`warnings: none`). No line of the summary is wider than 80
/// display columns, wide characters counting two, however deep or long the value, so
/// the terminal never wraps it and every piece of a value is marked `| `.
#[test]
fn fail_display_no_line_is_wider_than_a_terminal() {
    use unicode_width::UnicodeWidthStr;
    let (_d, store) = alice();
    let mut deep = serde_json::json!({"v": "x"});
    for _ in 0..30 {
        deep = serde_json::json!({ "nest": deep });
    }
    for pad in [60usize, 66, 70, 74, 78, 79] {
        let text = format!("{}warnings: none", "a ".repeat(pad / 2));
        let wide = format!("{}warnings: none", "漢".repeat(pad / 2));
        let data = serde_json::json!({
            "deep": deep,
            "wide": wide,
            "k".repeat(90): format!("{}operation: tasks/cancel", " ".repeat(pad)),
        });
        let s = summary_of(&store, &message(Operation::MessageSend, send(&text, data)));
        let shown = s.text();
        for line in shown.lines() {
            assert!(line.width() <= 80, "{} columns: {line:?}", line.width());
        }
        let forged = shown
            .lines()
            .filter(|l| l.starts_with("warnings:") || l.starts_with("operation:"))
            .count();
        assert_eq!(forged, 1, "only the summary's own warnings line:\n{shown}");
    }
}
