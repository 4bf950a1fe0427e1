//! Bad input against a running gateway: each gets a clear SMTP reply or a closed
//! connection, never a crash, and the gateway serves the next client afterwards.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::kit::{self, Client, Gateway, Sink};

fn gateway(extra_limits: &str, tls: bool) -> (tempfile::TempDir, Gateway, SocketAddr, Sink) {
    let dir = tempfile::tempdir().unwrap();
    let (_, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let mut tail = format!(
        "\n[limits]\nmax_message_bytes = 10000\nmax_recipients = 50\nmax_errors = 10\ncommand_timeout_secs = 2\ndata_timeout_secs = 4\ntls_timeout_secs = 2\nmax_connections_per_ip = 4\n{extra_limits}"
    );
    let listener_tls = if tls {
        let (_, cert, key) = kit::tls_files(dir.path());
        tail.push_str(&kit::tls_table(&cert, &key));
        "tls = \"implicit\""
    } else {
        "tls = \"none\""
    };
    let conf = kit::config(
        dir.path(),
        "g",
        &b_store,
        &[("relay", port, "relay", sink.addr.port(), listener_tls)],
        &tail,
    );
    let g = Gateway::start(dir.path(), "g", &conf, &[port]);
    (dir, g, ([127, 0, 0, 1], port).into(), sink)
}

fn still_serves(addr: SocketAddr) {
    let r = kit::submit(
        addr,
        "a@x.test",
        &["b@y.test"],
        b"Subject: ok\r\n\r\nfine\r\n",
    );
    assert!(r.starts_with("250"), "{r}");
}

#[test]
fn fail_bad_commands_and_data() {
    let (_dir, g, addr, sink) = gateway("", false);
    let mut c = Client::connect(addr);
    c.cmd("EHLO x");
    // An overlong line, a NUL in a command, a command out of order.
    let long = format!("NOOP {}", "a".repeat(20_000));
    assert!(c.cmd(&long).starts_with("500 5.5.2"));
    assert!(c.cmd("RCPT TO:<b@y.test>").starts_with("503"));
    c.send(b"MA\0IL FROM:<a@x>\r\n");
    assert!(c.reply().starts_with('5'));
    // NUL inside a message (a bare line end closes the session: below).
    let r = c.submit(
        "a@x.test",
        &["b@y.test"],
        b"Subject: x\r\n\r\nnul\0here\r\n",
    );
    assert!(r.starts_with("550 5.6.0"), "{r}");
    // Over SIZE: announced, and sent anyway.
    assert!(c.cmd("MAIL FROM:<a@x.test> SIZE=20000").starts_with("552"));
    let big = vec![b'x'; 30_000];
    let mut body = b"Subject: big\r\n\r\n".to_vec();
    for chunk in big.chunks(70) {
        body.extend_from_slice(chunk);
        body.extend_from_slice(b"\r\n");
    }
    let r = c.submit("a@x.test", &["b@y.test"], &body);
    assert!(r.starts_with("552 5.3.4"), "{r}");
    drop(c);
    still_serves(addr);
    assert_eq!(sink.wait_for(1, Duration::from_secs(30)).len(), 1);
    drop(g);
}

#[test]
fn fail_ten_thousand_recipients_and_pipelined_garbage() {
    let (_dir, _g, addr, _sink) = gateway("", false);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut burst = b"EHLO x\r\nMAIL FROM:<a@x.test>\r\n".to_vec();
    for i in 0..10_000 {
        burst.extend_from_slice(format!("RCPT TO:<r{i}@y.test>\r\n").as_bytes());
    }
    burst.extend_from_slice(b"\x16\x03\x01garbage\xff\xfe\r\n");
    // The server may close before reading all of it; that is its right.
    let _ = s.write_all(&burst);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(
        out.matches("250 2.1.5").count(),
        50,
        "the first 50 recipients"
    );
    assert!(out.contains("452 4.5.3 too many recipients"), "{out}");
    assert!(
        out.trim_end()
            .ends_with("421 4.7.0 too many errors, closing"),
        "{}",
        &out[out.len().saturating_sub(300)..]
    );
    still_serves(addr);
}

#[test]
fn fail_slow_clients_time_out() {
    let (_dir, _g, addr, _sink) = gateway("", false);
    // One byte a second never completes a command within its 2 s deadline.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut greeting = [0u8; 256];
    let _ = s.read(&mut greeting);
    let start = Instant::now();
    let mut closed = String::new();
    for b in b"EHLO slow.client.example\r\n" {
        if s.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(700));
        let _ = s.set_nonblocking(true);
        let mut buf = [0u8; 256];
        if let Ok(n) = s.read(&mut buf) {
            closed.push_str(&String::from_utf8_lossy(&buf[..n]));
            if n == 0 || closed.contains("421") {
                break;
            }
        }
        let _ = s.set_nonblocking(false);
    }
    assert!(closed.contains("421 4.4.2"), "{closed}");
    assert!(start.elapsed() < Duration::from_secs(10));
    still_serves(addr);
}

#[test]
fn fail_stalled_tls_handshake_and_connection_flood() {
    let (_dir, _g, addr, _sink) = gateway("", true);
    // A client that opens the connection and says nothing: the handshake's deadline
    // closes it.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "closed without a word");
    assert!(start.elapsed() < Duration::from_secs(10));
    drop(s);
    // Four connections from one address are the cap; the fifth is told so.
    std::thread::sleep(Duration::from_millis(200));
    let held: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut fifth = TcpStream::connect(addr).unwrap();
    fifth
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reply = String::new();
    let _ = fifth.read_to_string(&mut reply);
    assert!(
        reply.starts_with("421 4.7.0 too many connections"),
        "{reply:?}"
    );
    drop(held);
}

/// Issue #57: a bare LF or CR, in a message or a command, is answered 521 and the
/// connection closed, as Postfix's `smtpd_forbid_bare_newline = reject` does; a
/// second message smuggled behind `<LF>.<LF>` is never read, and the gateway serves
/// the next client.
#[test]
fn fail_bare_line_ends_close_the_session() {
    let (_dir, g, addr, sink) = gateway("", false);
    for (input, what) in [
        (
            &b"EHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\nSubject: x\nbare\r\n.\r\n"[..],
            "LF",
        ),
        (
            b"EHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\nSubject: x\r\n\r\nbare\rcr\r\n.\r\n",
            "CR",
        ),
        (
            b"EHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\nSubject: one\r\n\r\nA\r\n\n.\n\
              MAIL FROM:<evil@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\nSubject: smuggled\r\n\r\nB\r\n.\r\n",
            "LF",
        ),
        (b"EHLO x\nMAIL FROM:<a@x.test>\r\n", "LF"),
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // The server may close before reading all of it.
        let _ = s.write_all(input);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        assert!(
            out.ends_with(&format!("521 5.5.2 g.test Error: bare <{what}> received\r\n")),
            "{input:?}: {out}"
        );
        assert!(out.matches("354").count() <= 1, "{out}");
    }
    still_serves(addr);
    let got = sink.wait_for(1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sink.messages().len(), 1, "only the good one: {got:?}");
    assert!(!g.log_text().contains("smuggled"));
}

/// Issue #57: XFORWARD from a client the listener does not trust (no `xforward`) is
/// neither advertised nor taken (550 5.7.0, as Postfix answers a client not in
/// `smtpd_authorized_xforward_hosts`): the trace field and log line name the real
/// peer and its HELO, not the address it claimed.
#[test]
fn fail_xforward_from_an_untrusted_client_is_refused() {
    let (_dir, g, addr, sink) = gateway("", false);
    let mut c = Client::connect(addr);
    let ehlo = c.cmd("EHLO honest.test");
    assert!(!ehlo.contains("XFORWARD"), "{ehlo}");
    let r = c.cmd("XFORWARD NAME=trusted.example ADDR=192.0.2.99 HELO=trusted.example");
    assert_eq!(r, "550 5.7.0 insufficient authorization\r\n");
    let r = c.submit("a@x.test", &["b@y.test"], b"Subject: x\r\n\r\nhi\r\n");
    assert!(r.starts_with("250"), "{r}");
    let got = sink.wait_for(1, Duration::from_secs(30));
    let received = kit::received_by(&got[0].data, "g.test");
    assert!(
        received.starts_with(
            "Received: from honest.test ([127.0.0.1]) by g.test (mailseal) with ESMTP id "
        ),
        "{received}"
    );
    assert!(!received.contains("192.0.2.99") && !received.contains("trusted.example"));
    let log = g.log_text();
    assert!(log.contains("client=\"honest.test [127.0.0.1]\""), "{log}");
    assert!(!log.contains("192.0.2.99"), "{log}");
}
