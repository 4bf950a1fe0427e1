//! The `Received:` field each gateway adds (issue #57): one per hop, on top of the
//! sealed message outbound and of the opened one inbound, naming the client its
//! session saw or, on a listener that trusts it, the one XFORWARD forwarded.

use std::time::Duration;

use crate::kit::{self, Client, Gateway, Sink};

/// Outbound, the field goes above the sealed message, outside every signature: the
/// very bytes the sink got, trace and all, open at the partner's inbound listener
/// (which puts its own field on top of what it opened) under S/MIME, OpenPGP and
/// detached JWS.
#[test]
fn sealed_with_the_trace_on_top_still_opens_at_the_partner() {
    let dir = tempfile::tempdir().unwrap();
    let (a_store, b_store) = kit::two_sides(dir.path());
    kit::jws_sides(&a_store, &b_store);
    for (profile, domain) in [
        ("smime", "smime.example"),
        ("openpgp", "openpgp.example"),
        ("jws", "jws.example"),
    ] {
        let (sealed, opened) = (Sink::start(), Sink::start());
        let [a_out, b_in] = [(); 2].map(|_| kit::free_port());
        let tail = format!("\n[outbound]\ndefault_profile = \"{profile}\"\n");
        let a_conf = kit::config(
            dir.path(),
            &format!("a-{profile}"),
            &a_store,
            &[(
                "out",
                a_out,
                "outbound",
                sealed.addr.port(),
                "tls = \"none\"",
            )],
            &tail,
        );
        let b_conf = kit::config(
            dir.path(),
            &format!("b-{profile}"),
            &b_store,
            &[("in", b_in, "inbound", opened.addr.port(), "tls = \"none\"")],
            "",
        );
        let a = Gateway::start(dir.path(), &format!("a-{profile}"), &a_conf, &[a_out]);
        let b = Gateway::start(dir.path(), &format!("b-{profile}"), &b_conf, &[b_in]);
        let (alice, bob) = (format!("alice@{domain}"), format!("bob@{domain}"));
        let request = kit::plain(&alice, &bob, &format!("urn:uuid:trace-{profile}"));
        let mut c = Client::connect(([127, 0, 0, 1], a_out).into());
        c.cmd("EHLO agent.client.test");
        let r = c.submit(&alice, &[&bob], &request);
        assert!(
            r.starts_with("250 2.0.0 queued as "),
            "{r}\n{}",
            a.log_text()
        );
        let id = r.trim_end().rsplit(' ').next().unwrap().to_string();

        let out = sealed.wait_for(1, Duration::from_secs(60));
        let (trace, rest) = kit::trace_fields(&out[0].data);
        assert_eq!(trace.len(), 1, "{profile}: {trace:?}");
        assert!(
            trace[0].starts_with(&format!(
                "Received: from agent.client.test ([127.0.0.1]) by a-{profile}.test (mailseal) with ESMTP id {id} for <{bob}>; "
            )),
            "{profile}: {trace:?}"
        );
        assert!(
            mailseal::dispatch::detect_profile(rest).is_some(),
            "{profile}: sealed under the field"
        );

        let r = kit::submit(([127, 0, 0, 1], b_in).into(), &alice, &[&bob], &out[0].data);
        assert!(r.starts_with("250"), "{profile}: {r}\n{}", b.log_text());
        let got = opened.wait_for(1, Duration::from_secs(60));
        let (before, _) = kit::trace_fields(&out[0].data);
        let (trace, inner) = kit::trace_fields(&got[0].data);
        assert_eq!(
            trace.len(),
            2,
            "{profile}: the inbound hop's, then the hops before it (RFC 5321 4.4): {trace:?}"
        );
        assert!(
            trace[0].starts_with(&format!(
                "Received: from client.test ([127.0.0.1]) by b-{profile}.test (mailseal) with ESMTP id "
            )),
            "{profile}: {trace:?}"
        );
        assert_eq!(
            trace[1], before[0],
            "{profile}: the outbound hop's, as it was"
        );
        assert!(
            String::from_utf8_lossy(inner)
                .starts_with(&format!("Mailseal-Verdict: pass; profile={profile}; ")),
            "{profile}: {}",
            String::from_utf8_lossy(inner)
        );
        assert_eq!(kit::envelope_of(inner), kit::envelope_of(&request));
    }
}

/// A listener that trusts its client with XFORWARD (`xforward = true`, `clients`
/// naming it) advertises it, and the client it forwards is the one the trace field and
/// the log line name, for that transaction only; the next, without XFORWARD, names
/// the session's own peer.
#[test]
fn xforward_on_a_trusted_listener_names_the_forwarded_client() {
    let dir = tempfile::tempdir().unwrap();
    let (_, b_store) = kit::two_sides(dir.path());
    let sink = Sink::start();
    let port = kit::free_port();
    let conf = kit::config(
        dir.path(),
        "g",
        &b_store,
        &[(
            "filter",
            port,
            "relay",
            sink.addr.port(),
            "tls = \"none\"\nclients = [\"127.0.0.1\"]\nxforward = true",
        )],
        "",
    );
    let g = Gateway::start(dir.path(), "g", &conf, &[port]);
    let mut c = Client::connect(([127, 0, 0, 1], port).into());
    let ehlo = c.cmd("EHLO postfix.test");
    assert!(
        ehlo.contains("250-XFORWARD NAME ADDR PORT PROTO HELO IDENT SOURCE\r\n"),
        "{ehlo}"
    );
    assert_eq!(
        c.cmd("XFORWARD NAME=mail.client.example ADDR=192.0.2.7 PORT=41000"),
        "250 2.0.0 ok\r\n"
    );
    assert_eq!(
        c.cmd("XFORWARD PROTO=ESMTP HELO=client+2Eexample IDENT=4QueueID SOURCE=REMOTE"),
        "250 2.0.0 ok\r\n"
    );
    let r = c.submit(
        "a@x.test",
        &["b@y.test"],
        b"Subject: one\r\n\r\nforwarded\r\n",
    );
    assert!(r.starts_with("250"), "{r}");
    let r = c.submit("a@x.test", &["b@y.test"], b"Subject: two\r\n\r\nnot\r\n");
    assert!(r.starts_with("250"), "{r}");
    let got = sink.wait_for(2, Duration::from_secs(30));
    let by_subject = |s: &str| {
        got.iter()
            .find(|m| String::from_utf8_lossy(&m.data).contains(s))
            .unwrap()
    };
    let one = kit::received_by(&by_subject("Subject: one").data, "g.test");
    assert!(
        one.starts_with(
            "Received: from client.example (mail.client.example [192.0.2.7]) by g.test (mailseal) with ESMTP id "
        ) && one.contains(" for <b@y.test>; "),
        "{one}"
    );
    let two = kit::received_by(&by_subject("Subject: two").data, "g.test");
    assert!(
        two.starts_with("Received: from postfix.test ([127.0.0.1]) by g.test (mailseal)"),
        "{two}"
    );
    let log = g.log_text();
    assert!(
        log.contains("client=\"client.example [192.0.2.7]\" upstream_id=\"4QueueID\""),
        "{log}"
    );
    assert!(log.contains("client=\"postfix.test [127.0.0.1]\""), "{log}");
}
