//! The `Received:` trace field the gateway puts on top of every message it queues, in
//! both directions (RFC 5321 4.4, RFC 5322 3.6.7): outbound above the sealed message
//! (trace fields are outside any signature: S/MIME, OpenPGP, JWS and MLS sign what is
//! inside), inbound above the opened message it delivers inside.
//!
//! ```text
//! Received: from HELO (NAME [ADDRESS])
//!     by HOSTNAME (mailseal) with ESMTPSA id QUEUE-ID
//!     for <recipient>; DATE
//! ```
//!
//! (folded with a tab where the spaces are).
//!
//! `for` only when the queued message has one recipient (naming several would tell
//! each the others, Bcc included). `with` is the gateway's own session: ESMTP or SMTP
//! (after HELO), `S` under TLS, `A` after SMTP AUTH (RFC 3848). The client is the one
//! an MTA in front forwarded with XFORWARD on a listener that trusts it
//! ([`super::xforward`]), else the session's own peer; the two are never mixed. No
//! reverse DNS is looked up: the name is there only when the MTA in front forwarded
//! the one it found.
//!
//! The HELO is the client's to choose, so it is written only as a host name or an
//! address literal, at most 255 characters; anything else becomes one word of letters,
//! digits, `-`, `_` and `?` (every other character a `?`). Nothing the client says can
//! end the field, start another, open a comment or add the `;` that comes before the
//! date.

use std::net::IpAddr;

use super::session::Transaction;
use super::xforward::Forwarded;

/// The longest host name or HELO written (a domain's bound, RFC 1035 2.3.4).
pub const MAX_NAME: usize = 255;

/// Who handed a message over, as the session knew it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Client {
    /// The address of the TCP peer.
    pub peer: Option<IpAddr>,
    /// What it said in EHLO or HELO (as it said it).
    pub helo: String,
    /// EHLO rather than HELO.
    pub esmtp: bool,
    /// What a trusted MTA in front said of its own client (XFORWARD).
    pub forwarded: Option<Box<Forwarded>>,
}

/// The client a trace field or log line names.
struct Origin<'a> {
    helo: Option<&'a str>,
    name: Option<&'a str>,
    addr: Option<IpAddr>,
}

impl Client {
    /// The forwarded client when XFORWARD named one, else the session's peer.
    fn origin(&self) -> Origin<'_> {
        match self.forwarded.as_ref().filter(|f| f.names_client()) {
            Some(f) => Origin {
                helo: f.helo.as_deref(),
                name: f.name.as_deref(),
                addr: f.addr,
            },
            None => Origin {
                helo: Some(self.helo.as_str()).filter(|h| !h.is_empty()),
                name: None,
                addr: self.peer,
            },
        }
    }

    /// Who handed the message over, for a log line: `HELO [ADDRESS]` (the forwarded
    /// client when there is one), the HELO as the trace field writes it, bounded.
    pub fn describe(&self) -> String {
        let o = self.origin();
        let helo = crate::error::quoted(helo_token(o.helo.unwrap_or("")));
        match o.addr {
            Some(a) => format!("{helo} [{}]", plain_ip(a)),
            None => helo,
        }
    }

    /// The queue id of the MTA in front (XFORWARD IDENT), for a log line.
    pub fn upstream_id(&self) -> Option<String> {
        let ident = self.forwarded.as_ref()?.ident.as_deref()?;
        Some(crate::error::quoted(ident))
    }
}

/// The `Received:` field (CRLF-terminated, folded) for the message `t` handed over,
/// queued by `by` as `id` for `recipients` at `at` (Unix seconds).
pub fn received(t: &Transaction, by: &str, id: &str, recipients: &[String], at: i64) -> String {
    let o = t.client.origin();
    let mut field = format!("Received: from {}", helo_token(o.helo.unwrap_or("")));
    let name = o.name.filter(|n| n.len() <= MAX_NAME && is_domain(n));
    match (name, o.addr) {
        (Some(n), Some(a)) => field.push_str(&format!(" ({n} {})", literal(a))),
        (None, Some(a)) => field.push_str(&format!(" ({})", literal(a))),
        (Some(n), None) => field.push_str(&format!(" ({n})")),
        (None, None) => {}
    }
    let with = if t.client.esmtp {
        format!(
            "ESMTP{}{}",
            if t.tls { "S" } else { "" },
            if t.login.is_some() { "A" } else { "" }
        )
    } else {
        "SMTP".to_string()
    };
    let id: String = id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(MAX_NAME)
        .collect();
    field.push_str(&format!(
        "\r\n\tby {} (mailseal) with {with} id {id}",
        helo_token(by)
    ));
    let date = super::dsn::rfc2822(at);
    match recipients {
        [one] if trace_address(one) => field.push_str(&format!("\r\n\tfor <{one}>; {date}\r\n")),
        _ => field.push_str(&format!(";\r\n\t{date}\r\n")),
    }
    field
}

/// `helo` as a trace field may carry it: a host name or address literal as it is,
/// anything else one word of letters, digits, `-`, `_` and `?`; `unknown` when empty.
pub(crate) fn helo_token(helo: &str) -> String {
    if helo.is_empty() {
        return "unknown".into();
    }
    if helo.len() <= MAX_NAME && (is_domain(helo) || is_literal(helo)) {
        return helo.to_string();
    }
    helo.chars()
        .take(MAX_NAME)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Whether `s` is a host name: dot-separated labels of 1 to 63 letters, digits, `-`
/// and `_`, at most 255 characters, a final dot allowed.
pub(crate) fn is_domain(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Whether `s` is an address literal: `[192.0.2.1]` or `[IPv6:2001:db8::1]`.
fn is_literal(s: &str) -> bool {
    let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else {
        return false;
    };
    match inner.get(..5) {
        Some(p) if p.eq_ignore_ascii_case("IPv6:") => {
            inner[5..].parse::<std::net::Ipv6Addr>().is_ok()
        }
        _ => inner.parse::<std::net::Ipv4Addr>().is_ok(),
    }
}

/// An IPv4 address mapped into IPv6 (a dual-stack listener's peer) as IPv4.
fn plain_ip(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

/// `a` as an address literal (RFC 5321 4.1.3).
fn literal(a: IpAddr) -> String {
    match plain_ip(a) {
        IpAddr::V4(v4) => format!("[{v4}]"),
        IpAddr::V6(v6) => format!("[IPv6:{v6}]"),
    }
}

/// Whether a recipient may be written in `for <...>`: printable ASCII without
/// anything that ends the path or the field (the session took only plain addresses;
/// one in UTF-8 is left out rather than put in a header in raw UTF-8).
fn trace_address(a: &str) -> bool {
    !a.is_empty()
        && a.len() <= 2 * MAX_NAME
        && a.bytes()
            .all(|b| b.is_ascii_graphic() && !b"<>()[]\\\";,".contains(&b))
}

/// Panics unless `field` is one well-formed trace field: CRLF line ends, continuation
/// lines folded with a tab, printable ASCII, lines within RFC 5322's 998 characters,
/// the `;` before the date its only one, and no parentheses but its own two comments.
/// Used by the `smtp_session` fuzz target on every message handed out.
#[doc(hidden)]
pub fn check_field(field: &str) {
    let body = field.strip_suffix("\r\n").expect("a field ends with CRLF");
    for (i, line) in body.split("\r\n").enumerate() {
        assert!(
            if i == 0 {
                line.starts_with("Received: from ")
            } else {
                line.starts_with('\t')
            },
            "folded: {field:?}"
        );
        assert!(line.len() <= 998, "line length");
        assert!(
            line.bytes()
                .all(|b| b == b'\t' || (0x20..0x7f).contains(&b)),
            "printable ASCII on one line: {field:?}"
        );
    }
    assert_eq!(field.matches(';').count(), 1, "{field:?}");
    let (open, close) = (field.matches('(').count(), field.matches(')').count());
    assert!(open == close && open <= 2, "{field:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transaction(client: Client, tls: bool, login: bool, rcpts: &[&str]) -> Transaction {
        Transaction {
            mail_from: "a@x.example".into(),
            recipients: rcpts.iter().map(|r| r.to_string()).collect(),
            data: Vec::new(),
            tls,
            login: login.then(|| "agent".to_string()),
            client,
        }
    }

    fn client(helo: &str, peer: &str) -> Client {
        Client {
            peer: Some(peer.parse().unwrap()),
            helo: helo.into(),
            esmtp: true,
            forwarded: None,
        }
    }

    const AT: i64 = 1_700_000_000;

    #[test]
    fn received_names_the_peer_the_protocol_the_id_and_one_recipient() {
        let t = transaction(
            client("mx.client.example", "192.0.2.7"),
            false,
            false,
            &["bob@b.example"],
        );
        let f = received(&t, "gw.example", "ab12", &t.recipients, AT);
        assert_eq!(
            f,
            "Received: from mx.client.example ([192.0.2.7])\r\n\tby gw.example (mailseal) with ESMTP id ab12\r\n\tfor <bob@b.example>; Tue, 14 Nov 2023 22:13:20 +0000\r\n"
        );
        check_field(&f);
        // TLS and AUTH (RFC 3848); two recipients: no `for`; IPv6 and mapped IPv4.
        let t = transaction(
            client("[IPv6:2001:db8::1]", "2001:db8::1"),
            true,
            true,
            &["b@x", "c@x"],
        );
        let f = received(&t, "gw.example", "ab12", &t.recipients, AT);
        assert!(
            f.starts_with("Received: from [IPv6:2001:db8::1] ([IPv6:2001:db8::1])\r\n\tby gw.example (mailseal) with ESMTPSA id ab12;\r\n\tTue, 14 Nov 2023"),
            "{f}"
        );
        check_field(&f);
        let mut helo = client("old.client", "::ffff:192.0.2.9");
        helo.esmtp = false;
        let t = transaction(helo, true, false, &["b@x"]);
        let f = received(&t, "gw.example", "1", &t.recipients, AT);
        assert!(
            f.starts_with("Received: from old.client ([192.0.2.9])\r\n\tby gw.example (mailseal) with SMTP id 1\r\n"),
            "{f}"
        );
    }

    /// The forwarded client replaces the peer whole (never mixed with it); without a
    /// client attribute (mail the MTA made itself) the peer stays.
    #[test]
    fn received_names_the_forwarded_client_when_xforward_named_one() {
        let mut c = client("postfix.example", "127.0.0.1");
        let mut f = Forwarded::default();
        f.apply("NAME=mail.client.example ADDR=198.51.100.4 HELO=client.example IDENT=9Q")
            .unwrap();
        c.forwarded = Some(Box::new(f));
        let t = transaction(c.clone(), false, false, &["b@x"]);
        let field = received(&t, "gw.example", "1", &t.recipients, AT);
        assert!(
            field.starts_with(
                "Received: from client.example (mail.client.example [198.51.100.4])\r\n"
            ),
            "{field}"
        );
        assert_eq!(c.describe(), "client.example [198.51.100.4]");
        assert_eq!(c.upstream_id().as_deref(), Some("9Q"));
        let mut only_addr = Forwarded::default();
        only_addr.apply("ADDR=198.51.100.4").unwrap();
        c.forwarded = Some(Box::new(only_addr));
        let t = transaction(c.clone(), false, false, &["b@x"]);
        assert!(received(&t, "gw.example", "1", &t.recipients, AT)
            .starts_with("Received: from unknown ([198.51.100.4])\r\n"));
        let mut local = Forwarded::default();
        local.apply("IDENT=9Q SOURCE=LOCAL").unwrap();
        c.forwarded = Some(Box::new(local));
        let t = transaction(c, false, false, &["b@x"]);
        assert!(received(&t, "gw.example", "1", &t.recipients, AT)
            .starts_with("Received: from postfix.example ([127.0.0.1])\r\n"));
    }

    /// Issue #57: the HELO is the attacker's; it never ends the field, opens a
    /// comment, adds a `;` or runs long.
    #[test]
    fn fail_hostile_helo_is_one_bounded_word() {
        for (helo, want) in [
            ("evil\r\nBcc: victim@x", "evil??Bcc??victim?x"),
            ("a; Tue, 1 Jan 2030", "a??Tue??1?Jan?2030"),
            ("x) (by trusted.example", "x???by?trusted?example"),
            ("[192.0.2.1", "?192?0?2?1"),
            ("[IPv6:nope]", "?IPv6?nope?"),
            ("bad..dots", "bad??dots"),
            ("h\u{e9}llo", "h?llo"),
            ("", "unknown"),
        ] {
            assert_eq!(helo_token(helo), want, "{helo:?}");
            let t = transaction(client(helo, "192.0.2.7"), false, false, &["b@x"]);
            check_field(&received(&t, "gw.example", "1", &t.recipients, AT));
        }
        let long = "a".repeat(10_000);
        assert_eq!(helo_token(&long).len(), MAX_NAME);
        let long_domain = format!("{}.example", "a.".repeat(200));
        assert_eq!(helo_token(&long_domain).len(), MAX_NAME);
        assert!(!helo_token(&long_domain).contains('.'));
        // A recipient that could close the path is left out.
        let t = transaction(client("c", "192.0.2.7"), false, false, &["a>; x@y"]);
        let f = received(&t, "gw.example", "1", &t.recipients, AT);
        assert!(!f.contains("for <"), "{f}");
        check_field(&f);
    }
}
