//! Issue #57 (wrong audience, unbound fields): a bounce of inbound mail goes to the
//! SMTP MAIL FROM, which no signature binds, through the outbound listener
//! (`Config::return_route`): it carries none of the opened message's header fields.
//! Mallory replays a sealed message Alice sent to Bob under her own MAIL FROM; Bob's
//! mailbox refuses it (quota: 552, permanent); the notice Mallory gets holds nothing
//! of what the seal protected (the Subject here).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::kit::{self, Gateway, Sink};

/// A mailbox server that refuses every recipient permanently (a full mailbox, as
/// Dovecot's LMTP says it with quota_full_tempfail = no).
fn full_mailbox() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = session(s);
            });
        }
    });
    port
}

fn session(s: TcpStream) -> std::io::Result<()> {
    let mut w = s.try_clone()?;
    let mut r = BufReader::new(s);
    w.write_all(b"220 mailbox\r\n")?;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let u = line.to_ascii_uppercase();
        if u.starts_with("EHLO") {
            w.write_all(b"250-mailbox\r\n250 8BITMIME\r\n")?;
        } else if u.starts_with("RCPT") {
            w.write_all(b"552 5.2.2 mailbox full\r\n")?;
        } else if u.starts_with("QUIT") {
            w.write_all(b"221 bye\r\n")?;
            return Ok(());
        } else {
            w.write_all(b"250 ok\r\n")?;
        }
    }
}

const SECRET: &str = "Acquisition of ExampleCorp at 41 EUR a share";

#[test]
fn fail_wrong_audience_inbound_bounce_sends_the_opened_header_in_clear_to_mail_from() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    let wire = Sink::start(); // what leaves A: the sealed message, as Mallory sees it
    let internet = Sink::start(); // B's outbound next hop: the world
    let mailbox = full_mailbox();
    let [a_out, b_out, b_in] = [(); 3].map(|_| kit::free_port());
    let tail = "\n[outbound]\ndefault_profile = \"smime\"\n";
    let a = Gateway::start(
        dir.path(),
        "a",
        &kit::config(
            dir.path(),
            "a",
            &a_store,
            &[("out", a_out, "outbound", wire.addr.port(), "tls = \"none\"")],
            tail,
        ),
        &[a_out],
    );
    let b = Gateway::start(
        dir.path(),
        "b",
        &kit::config(
            dir.path(),
            "b",
            &b_store,
            &[
                (
                    "out",
                    b_out,
                    "outbound",
                    internet.addr.port(),
                    "tls = \"none\"",
                ),
                ("in", b_in, "inbound", mailbox, "tls = \"none\""),
            ],
            tail,
        ),
        &[b_out, b_in],
    );
    let (alice, bob) = ("alice@smime.example", "bob@smime.example");
    let plain = kit::plain(alice, bob, "urn:uuid:attack2-dsn");
    let plain = String::from_utf8(plain).unwrap();
    let old = plain
        .lines()
        .find(|l| l.starts_with("Subject:"))
        .unwrap()
        .to_string();
    let plain = plain
        .replacen(&old, &format!("Subject: {SECRET}"), 1)
        .into_bytes();
    let r = kit::submit(([127, 0, 0, 1], a_out).into(), alice, &[bob], &plain);
    assert!(r.starts_with("250"), "{r}\n{}", a.log_text());
    let sealed = wire.wait_for(1, Duration::from_secs(60))[0].data.clone();
    let sealed_text = String::from_utf8_lossy(&sealed);
    assert!(
        !sealed_text.contains(SECRET),
        "the subject is protected on the wire: {sealed_text}"
    );

    // Mallory replays it to Bob's gateway under her own MAIL FROM.
    let r = kit::submit(
        ([127, 0, 0, 1], b_in).into(),
        "mallory@evil.test",
        &[bob],
        &sealed,
    );
    assert!(r.starts_with("250"), "{r}\n{}", b.log_text());

    // Bob's mailbox refuses it; the DSN leaves through B's outbound hop.
    let got = internet.wait_for(1, Duration::from_secs(60));
    let dsn = &got[0];
    let text = String::from_utf8_lossy(&dsn.data);
    eprintln!(
        "DSN to {:?} from {:?}:\n{text}",
        dsn.recipients, dsn.mail_from
    );
    assert_eq!(dsn.recipients, ["mallory@evil.test"]);
    assert!(
        !text.contains(SECRET),
        "the protected Subject of Alice's message to Bob left in clear for Mallory:\n{text}"
    );
}
