//! Alice's outbound gateway never sends MailA2A mail in clear: a recipient without a
//! usable key is refused (550) or deferred (451) as configured, a message that claims
//! to be MailA2A and does not parse is refused, and the sink sees none of them. Other
//! mail passes, or is refused when the configuration says so.

use std::time::Duration;

use crate::kit::{self, Gateway, Sink};

/// Alice's outbound gateway with `policy` in `[outbound]` and `listener` added to its
/// listener's table.
fn gateway(
    policy: &str,
    listener: &str,
) -> (tempfile::TempDir, Gateway, std::net::SocketAddr, Sink) {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, _) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[(
            "out",
            port,
            "outbound",
            sink.addr.port(),
            &format!("tls = \"none\"\n{listener}"),
        )],
        &format!("\n[outbound]\n{policy}\n"),
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    (dir, g, ([127, 0, 0, 1], port).into(), sink)
}

#[test]
fn fail_no_key_is_refused_or_deferred_never_sent_in_clear() {
    let (_d, _g, addr, sink) = gateway("no_key = \"refuse\"\nnon_maila2a = \"refuse\"", "");
    let to_carol = kit::plain(
        "alice@smime.example",
        "carol@nowhere.example",
        "urn:uuid:nokey",
    );
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["carol@nowhere.example"],
        &to_carol,
    );
    assert!(r.starts_with("550 5.7.1"), "{r}");
    // Claims to be MailA2A (an a2a+json part), does not parse: refused, not passed.
    let broken = b"From: alice@smime.example\r\nTo: bob@smime.example\r\nContent-Type: application/a2a+json\r\n\r\n{not json\r\n";
    let r = kit::submit(addr, "alice@smime.example", &["bob@smime.example"], broken);
    assert!(r.starts_with("554 5.6.0"), "{r}");
    // Plain mail, with non_maila2a = refuse.
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["bob@smime.example"],
        b"Subject: hi\r\n\r\nplain\r\n",
    );
    assert!(r.starts_with("550 5.7.1"), "{r}");
    // A good one still goes, sealed.
    let good = kit::plain("alice@smime.example", "bob@smime.example", "urn:uuid:good");
    let r = kit::submit(addr, "alice@smime.example", &["bob@smime.example"], &good);
    assert!(r.starts_with("250"), "{r}");
    let got = sink.wait_for(1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sink.messages().len(), 1);
    let text = String::from_utf8_lossy(&got[0].data);
    assert!(text.contains("application/pkcs7-mime"), "sealed: {text}");
    assert!(
        !text.contains("urn:uuid:good"),
        "nothing of the envelope in clear"
    );
}

#[test]
fn fail_no_key_deferred_and_plain_mail_passes() {
    let (_d, _g, addr, sink) = gateway("no_key = \"defer\"", "");
    let to_carol = kit::plain(
        "alice@smime.example",
        "carol@nowhere.example",
        "urn:uuid:nokey",
    );
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["carol@nowhere.example"],
        &to_carol,
    );
    assert!(r.starts_with("451 4.7.1"), "{r}");
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["bob@smime.example"],
        b"Subject: hi\r\n\r\nplain\r\n",
    );
    assert!(r.starts_with("250"), "{r}");
    let got = sink.wait_for(1, Duration::from_secs(30));
    let (trace, rest) = kit::trace_fields(&got[0].data);
    assert_eq!(rest, b"Subject: hi\r\n\r\nplain\r\n", "untouched");
    assert_eq!(trace.len(), 1, "but for the trace field: {trace:?}");
}

/// An outbound listener signs as our agents for whoever reaches it: it serves only
/// the clients it is told to (loopback by default). One not among them is turned
/// away before a word of SMTP.
#[test]
fn fail_client_outside_the_listeners_clients() {
    let (_d, _g, addr, _sink) = gateway("", "clients = [\"192.0.2.0/24\"]");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reply = String::new();
    let _ = std::io::Read::read_to_string(&mut s, &mut reply);
    assert!(
        reply.starts_with("554 5.7.1 this listener does not serve your address"),
        "{reply:?}"
    );
}

/// Issue #57: a Bcc recipient (an SMTP recipient the message does not name in To or
/// Cc) would make the partner refuse the sealed message as forwarded, taking the named
/// recipient down with it. It is left out: the named recipient gets the sealed
/// message, the agent gets a delivery status notification naming the Bcc recipient
/// and why, and a message that names none of its recipients is refused at once.
#[test]
fn fail_a_bcc_recipient_is_left_out_alone_and_reported() {
    let (_d, g, addr, sink) = gateway("", "");
    let to_bob = kit::plain("alice@smime.example", "bob@smime.example", "urn:uuid:bcc");
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["bob@smime.example", "eve@elsewhere.example"],
        &to_bob,
    );
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    let got = sink.wait_for(2, Duration::from_secs(30));
    let sealed = got
        .iter()
        .find(|m| m.mail_from == "alice@smime.example")
        .expect("the sealed message");
    assert_eq!(sealed.recipients, ["bob@smime.example"]);
    assert!(String::from_utf8_lossy(&sealed.data).contains("application/pkcs7-mime"));
    let report = got.iter().find(|m| m.mail_from.is_empty()).expect("a DSN");
    assert_eq!(report.recipients, ["alice@smime.example"]);
    let text = String::from_utf8_lossy(&report.data);
    assert!(
        text.contains("eve@elsewhere.example") && text.contains("5.7.1") && text.contains("Bcc"),
        "{text}"
    );
    assert!(
        text.contains("Final-Recipient: rfc822; eve@elsewhere.example"),
        "{text}"
    );
    assert!(
        !text.contains("Final-Recipient: rfc822; bob@smime.example"),
        "{text}"
    );
    // Nobody named: refused whole, before anything is sealed.
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["eve@elsewhere.example"],
        &to_bob,
    );
    assert!(r.starts_with("550 5.7.1"), "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sink.messages().len(), 2);
}

/// Issue #57: one recipient without a key does not keep the message from the others.
/// By default (`no_key = "split"`) it is sealed for those with a key and sent to
/// them, and the agent hears of the one left out in a notice that names it; the
/// message still names every recipient, and the one with a key opens it. With no
/// recipient that has a key, or a null reverse path that leaves nobody to tell, it is
/// refused whole; `no_key = "refuse"` refuses whole as before.
#[test]
fn fail_a_recipient_without_a_key_is_left_out_alone_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[("out", port, "outbound", sink.addr.port(), "tls = \"none\"")],
        "",
    );
    let g = Gateway::start(dir.path(), "a", &conf, &[port]);
    let addr = ([127, 0, 0, 1], port).into();
    let env = crate::common::env(crate::common::with(
        crate::common::request(),
        serde_json::json!({"messageId": "urn:uuid:split", "idempotencyKey": "k-split"}),
    ));
    let both = mailseal::MailA2aMessage::new(
        "alice@smime.example",
        &["bob@smime.example", "carol@nowhere.example"],
        env,
    )
    .to_rfc5322()
    .unwrap();
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["bob@smime.example", "Carol@nowhere.example"],
        &both,
    );
    assert!(r.starts_with("250"), "{r}\n{}", g.log_text());
    let got = sink.wait_for(2, Duration::from_secs(30));
    let sealed = got
        .iter()
        .find(|m| m.mail_from == "alice@smime.example")
        .expect("the sealed message");
    assert_eq!(sealed.recipients, ["bob@smime.example"]);
    let text = String::from_utf8_lossy(&sealed.data);
    assert!(text.contains("application/pkcs7-mime"), "{text}");
    assert!(!text.contains("urn:uuid:split"), "nothing in clear");
    // Bob opens it, and it names Carol still.
    let (_, rest) = kit::trace_fields(&sealed.data);
    let store = b_store.to_str().unwrap();
    let opened = crate::common::run(&["open", "--eml", "--store", store], rest);
    let out = String::from_utf8_lossy(&opened.stdout);
    assert!(
        opened.status.success(),
        "{}",
        String::from_utf8_lossy(&opened.stderr)
    );
    assert!(out.contains("carol@nowhere.example"), "{out}");
    let report = got.iter().find(|m| m.mail_from.is_empty()).expect("a DSN");
    assert_eq!(report.recipients, ["alice@smime.example"]);
    let dsn = String::from_utf8_lossy(&report.data);
    assert!(
        dsn.contains("Final-Recipient: rfc822; Carol@nowhere.example")
            && dsn.contains("5.7.1")
            && dsn.contains("no usable key"),
        "{dsn}"
    );
    assert!(!dsn.contains("Final-Recipient: rfc822; bob@"), "{dsn}");
    assert!(
        !dsn.contains("urn:uuid:split"),
        "no content in the notice: {dsn}"
    );
    let line = g.log_text();
    assert!(line.contains("keyless=\"Carol@nowhere.example\""), "{line}");

    // Only the keyless one asked for: refused whole; a null reverse path: refused.
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["carol@nowhere.example"],
        &both,
    );
    assert!(r.starts_with("550 5.7.1"), "{r}");
    let r = kit::submit(
        addr,
        "",
        &["bob@smime.example", "carol@nowhere.example"],
        &both,
    );
    assert!(
        r.starts_with("550 5.7.1") && r.contains("nobody to report"),
        "{r}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sink.messages().len(), 2, "nothing more went out");

    // refuse: the whole message, as before.
    drop(g);
    let (_d, _g, addr, sink) = gateway("no_key = \"refuse\"", "");
    let r = kit::submit(
        addr,
        "alice@smime.example",
        &["bob@smime.example", "carol@nowhere.example"],
        &both,
    );
    assert!(r.starts_with("550 5.7.1"), "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(sink.messages().is_empty());
}
