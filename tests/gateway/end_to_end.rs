//! Two gateways, one per organisation, each with its agents' sink behind it: Alice's
//! message goes agent → A (sealed) → B (opened) → Bob's sink, and Bob's reply the other
//! way, under S/MIME (the hop between them on STARTTLS, verified by rustls) and
//! OpenPGP. What reaches the sink is the inner message with the envelope byte for byte
//! and the gateway's verdict on top.

use std::time::Duration;

use crate::kit::{self, Gateway, Sink};

struct Pair {
    _dir: tempfile::TempDir,
    a: Gateway,
    b: Gateway,
    a_out: u16,
    b_out: u16,
    b_in: u16,
    sink_a: Sink,
    sink_b: Sink,
}

/// A and B; `profile` is A's and B's default; B's inbound listener demands STARTTLS
/// when `tls`.
fn pair(profile: &str, tls: bool) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    if profile == "jws" {
        kit::jws_sides(&a_store, &b_store);
    }
    let (sink_a, sink_b) = (Sink::start(), Sink::start());
    let [a_out, a_in, b_out, b_in] = [(); 4].map(|_| kit::free_port());
    let tail = format!("\n[outbound]\ndefault_profile = \"{profile}\"\n");
    let (b_tls, a_hop) = if tls {
        let (ca, cert, key) = kit::tls_files(dir.path());
        (
            kit::tls_table(&cert, &key),
            format!(
                "roots = \"{}\"\nserver_name = \"localhost\"\n",
                ca.display()
            ),
        )
    } else {
        (String::new(), String::new())
    };
    let b_in_extra = if tls {
        "tls = \"starttls\"\nrequire_tls = true"
    } else {
        "tls = \"none\""
    };
    let b_conf = kit::config(
        dir.path(),
        "b",
        &b_store,
        &[
            ("out", b_out, "outbound", a_in, "tls = \"none\""),
            ("in", b_in, "inbound", sink_b.addr.port(), b_in_extra),
        ],
        &format!("{tail}{b_tls}"),
    );
    let mut a_conf = kit::config(
        dir.path(),
        "a",
        &a_store,
        &[
            ("out", a_out, "outbound", b_in, "tls = \"none\""),
            ("in", a_in, "inbound", sink_a.addr.port(), "tls = \"none\""),
        ],
        &tail,
    );
    if tls {
        // A's hop to B: STARTTLS required, B's certificate verified against the CA.
        a_conf = a_conf.replacen(
            &format!("address = \"127.0.0.1:{b_in}\"\ntls = \"none\"\n"),
            &format!("address = \"127.0.0.1:{b_in}\"\ntls = \"required\"\n{a_hop}"),
            1,
        );
    }
    let b = Gateway::start(dir.path(), "b", &b_conf, &[b_out, b_in]);
    let a = Gateway::start(dir.path(), "a", &a_conf, &[a_out, a_in]);
    Pair {
        _dir: dir,
        a,
        b,
        a_out,
        b_out,
        b_in,
        sink_a,
        sink_b,
    }
}

fn addr(port: u16) -> std::net::SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn both_directions(profile: &str, domain: &str, tls: bool) {
    let p = pair(profile, tls);
    let alice = format!("alice@{domain}");
    let bob = format!("bob@{domain}");
    let request = kit::plain(&alice, &bob, &format!("urn:uuid:{profile}-1"));
    let reply = kit::submit(addr(p.a_out), &alice, &[&bob], &request);
    assert!(reply.starts_with("250"), "{reply}\n{}", p.a.log_text());

    let got = p.sink_b.wait_for(1, Duration::from_secs(60));
    let m = &got[0];
    assert_eq!(m.recipients, std::slice::from_ref(&bob));
    assert_eq!(m.mail_from, alice);
    // B's trace field on top, then A's (on the sealed message it opened, kept), then
    // its verdict: the field A put above the signature did not disturb it.
    let (trace, inner) = kit::trace_fields(&m.data);
    let with = if tls { "ESMTPS" } else { "ESMTP" };
    assert_eq!(trace.len(), 2, "{trace:?}");
    assert!(
        trace[1].contains(" by a.test (mailseal) with "),
        "{trace:?}"
    );
    assert!(
        trace[0].starts_with(&format!(
            "Received: from a.test ([127.0.0.1]) by b.test (mailseal) with {with} id "
        )) && trace[0].contains(&format!(" for <{bob}>; ")),
        "{trace:?}"
    );
    let text = String::from_utf8_lossy(inner);
    assert!(
        text.starts_with(&format!("Mailseal-Verdict: pass; profile={profile}; protection={}; header-protection=yes; from={alice}",
            if profile == "jws" { "signed" } else { "signed-encrypted" })),
        "{text}\nA: {}\nB: {}",
        p.a.log_text(),
        p.b.log_text()
    );
    assert_eq!(
        kit::envelope_of(&m.data),
        kit::envelope_of(&request),
        "the envelope byte for byte"
    );

    // Bob's answer goes back through B and A.
    let answer = kit::plain(&bob, &alice, &format!("urn:uuid:{profile}-2"));
    let reply = kit::submit(addr(p.b_out), &bob, &[&alice], &answer);
    assert!(reply.starts_with("250"), "{reply}");
    let got = p.sink_a.wait_for(1, Duration::from_secs(60));
    assert_eq!(kit::envelope_of(&got[0].data), kit::envelope_of(&answer));
    assert!(String::from_utf8_lossy(&got[0].data).contains(&format!("from={bob}")));

    // The log has one line per message with its verdict.
    let log = p.a.log_text();
    assert!(
        log.contains("verdict=\"sealed\"") || log.contains("verdict=sealed"),
        "{log}"
    );
    if tls {
        // B refuses mail in clear on its inbound listener.
        let mut c = kit::Client::connect(addr(p.b_in));
        let ehlo = c.cmd("EHLO x");
        assert!(ehlo.contains("STARTTLS"), "{ehlo}");
        let r = c.cmd("MAIL FROM:<mallory@evil.test>");
        assert!(r.starts_with("530"), "{r}");
    }
}

#[test]
fn smime_both_directions_over_starttls() {
    both_directions("smime", "smime.example", true);
}

#[test]
fn openpgp_both_directions() {
    both_directions("openpgp", "openpgp.example", false);
}

/// detached-jws as the gateways' default profile: signed, not encrypted, JWKs each
/// side holds for the other's address.
#[test]
fn jws_both_directions() {
    both_directions("jws", "jws.example", false);
}

/// MLS: two agents in one group, each behind its own gateway. The agent names the
/// group in a `Mailseal-Group` field; the gateway seals to the group's current epoch.
/// A Commit (already `message/mls`) passes the outbound gateway untouched and is
/// applied by the inbound one, never delivered; the next message, of the new epoch,
/// is.
#[test]
fn mls_both_directions_and_a_commit_applied_not_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let (agents, group) = crate::common::mls::group(dir.path(), 2);
    let (one, two) = (&agents[0], &agents[1]);
    let (sink_a, sink_b) = (Sink::start(), Sink::start());
    let [a_out, a_in, b_out, b_in] = [(); 4].map(|_| kit::free_port());
    let a_conf = kit::config(
        dir.path(),
        "a",
        &one.store,
        &[
            ("out", a_out, "outbound", b_in, "tls = \"none\""),
            ("in", a_in, "inbound", sink_a.addr.port(), "tls = \"none\""),
        ],
        "",
    );
    let b_conf = kit::config(
        dir.path(),
        "b",
        &two.store,
        &[
            ("out", b_out, "outbound", a_in, "tls = \"none\""),
            ("in", b_in, "inbound", sink_b.addr.port(), "tls = \"none\""),
        ],
        "",
    );
    let a = Gateway::start(dir.path(), "a", &a_conf, &[a_out, a_in]);
    let b = Gateway::start(dir.path(), "b", &b_conf, &[b_out, b_in]);
    let to_group = |from: &str, to: &str, id: &str| {
        let mut m = format!("Mailseal-Group: {group}\r\n").into_bytes();
        m.extend(kit::plain(from, to, id));
        m
    };

    let m1 = to_group(&one.email, &two.email, "urn:uuid:mls-1");
    let r = kit::submit(addr(a_out), &one.email, &[&two.email], &m1);
    assert!(r.starts_with("250"), "{r}\n{}", a.log_text());
    let got = sink_b.wait_for(1, Duration::from_secs(60));
    kit::received_by(&got[0].data, "b.test");
    let text = String::from_utf8_lossy(kit::trace_fields(&got[0].data).1);
    assert!(
        text.starts_with("Mailseal-Verdict: pass; profile=mls; protection=signed-encrypted"),
        "{text}\n{}",
        b.log_text()
    );
    assert!(
        !text.contains("Mailseal-Group"),
        "the group field stays inside: {text}"
    );
    let env: serde_json::Value = serde_json::from_slice(&kit::envelope_of(&got[0].data)).unwrap();
    assert_eq!(env["messageId"], "urn:uuid:mls-1");
    assert!(
        env["group"]["id"].is_string(),
        "the gateway gave the envelope its group coordinates"
    );

    let m2 = to_group(&two.email, &one.email, "urn:uuid:mls-2");
    let r = kit::submit(addr(b_out), &two.email, &[&one.email], &m2);
    assert!(r.starts_with("250"), "{r}");
    let got = sink_a.wait_for(1, Duration::from_secs(60));
    assert!(String::from_utf8_lossy(&got[0].data).contains("urn:uuid:mls-2"));

    // Agent one's self-update: a Commit mail, sealed already.
    let commit = crate::common::mls::update(one, &group, &dir.path().join("update"));
    let commit = std::fs::read(commit).unwrap();
    let r = kit::submit(addr(a_out), &one.email, &[&two.email], &commit);
    assert!(r.starts_with("250"), "{r}");
    let m3 = to_group(&one.email, &two.email, "urn:uuid:mls-3");
    let r = kit::submit(addr(a_out), &one.email, &[&two.email], &m3);
    assert!(r.starts_with("250"), "{r}\n{}", a.log_text());
    let got = sink_b.wait_for(2, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        sink_b.messages().len(),
        2,
        "the Commit is applied, not delivered"
    );
    assert!(
        String::from_utf8_lossy(&got[1].data).contains("urn:uuid:mls-3"),
        "{}",
        b.log_text()
    );
    assert!(
        b.log_text().contains("verdict=\"handshake\""),
        "{}",
        b.log_text()
    );
}
