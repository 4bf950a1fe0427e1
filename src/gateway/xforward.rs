//! XFORWARD (Postfix's XFORWARD_README): an MTA in front of the gateway (Postfix's
//! content-filter client, or its before-queue proxy) tells it who its own client was,
//! which the gateway otherwise never learns: behind Postfix every session comes from
//! 127.0.0.1. What it says goes into the `Received:` field ([`super::trace`]) and the
//! log line of each message.
//!
//! Whoever may send XFORWARD writes the trace and the logs of the mail it hands over,
//! so only a listener with `xforward = true` takes it, and the configuration allows
//! that only where `clients` names the MTAs (loopback or single addresses); anyone
//! else is told 550 5.7.0, as Postfix tells a client not in
//! `smtpd_authorized_xforward_hosts`. The attributes are those Postfix sends (NAME,
//! ADDR, PORT, PROTO, HELO, IDENT, SOURCE), xtext-encoded (RFC 3461), each at most 255
//! characters; `[UNAVAILABLE]` (or XCLIENT's `[TEMPUNAVAIL]`) means not known. A
//! command is taken whole or not at all (501 names what is wrong). Decoded values
//! keep printable ASCII only, every other byte shown as `?`, as Postfix masks them.

use std::net::IpAddr;

/// The longest attribute value, encoded (Postfix's bound).
pub const MAX_VALUE: usize = 255;
/// The longest PROTO value (Postfix's bound).
const MAX_PROTO: usize = 64;

/// Where the MTA in front got the message: from itself (`LOCAL`, e.g. the `sendmail`
/// command) or from a client (`REMOTE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// From the MTA's own host.
    Local,
    /// From a network client.
    Remote,
}

/// What an MTA in front said of its client: `None` where it said `[UNAVAILABLE]` or
/// nothing. Every string is printable ASCII of at most [`MAX_VALUE`] characters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Forwarded {
    /// The client's host name as the MTA found it in the DNS (never `unknown`).
    pub name: Option<String>,
    /// The client's address.
    pub addr: Option<IpAddr>,
    /// The client's port.
    pub port: Option<u16>,
    /// The protocol the MTA received it with (`ESMTP`, `SMTP`...).
    pub proto: Option<String>,
    /// What the client said in HELO/EHLO (as it said it: sanitised where written).
    pub helo: Option<String>,
    /// The MTA's own queue id of the message.
    pub ident: Option<String>,
    /// Local or remote origin.
    pub source: Option<Source>,
}

/// Why an XFORWARD command is refused: the text of the 501 reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XforwardError {
    /// No attribute at all.
    #[error("syntax: XFORWARD attribute=value...")]
    Empty,
    /// A word without `=value`, or with an empty value.
    #[error("attribute=value expected")]
    NotAttribute,
    /// A value over [`MAX_VALUE`] characters.
    #[error("attribute value too long")]
    TooLong,
    /// A value that is not xtext (a `+` not followed by two hex digits, a control or
    /// non-ASCII byte).
    #[error("bad xtext in {0}")]
    Xtext(&'static str),
    /// A value the attribute cannot have.
    #[error("bad {0} syntax")]
    Syntax(&'static str),
    /// An attribute name Postfix does not send.
    #[error("unknown XFORWARD attribute")]
    UnknownAttribute,
}

impl Forwarded {
    /// Whether it names a client (NAME, ADDR or HELO): only then does the trace field
    /// name the forwarded client. Postfix forwards none of them for mail submitted on
    /// its own host, which then appears to come from the MTA itself.
    pub fn names_client(&self) -> bool {
        self.name.is_some() || self.addr.is_some() || self.helo.is_some()
    }

    /// Takes the attributes of one XFORWARD command (what follows the verb): all of
    /// them, or, on the first bad one, none.
    pub fn apply(&mut self, args: &str) -> Result<(), XforwardError> {
        let mut next = self.clone();
        let mut any = false;
        for word in args.split([' ', '\t']).filter(|w| !w.is_empty()) {
            any = true;
            let (name, raw) = word.split_once('=').ok_or(XforwardError::NotAttribute)?;
            if raw.is_empty() {
                return Err(XforwardError::NotAttribute);
            }
            if raw.len() > MAX_VALUE {
                return Err(XforwardError::TooLong);
            }
            let attribute = ATTRIBUTES
                .iter()
                .copied()
                .find(|a| a.eq_ignore_ascii_case(name))
                .ok_or(XforwardError::UnknownAttribute)?;
            let value = xtext_decode(raw).ok_or(XforwardError::Xtext(attribute))?;
            let value = (!unavailable(&value)).then_some(value);
            match attribute {
                "NAME" => {
                    next.name = match value {
                        Some(v) if v.eq_ignore_ascii_case("unknown") => None,
                        Some(v) if super::trace::is_domain(&v) => Some(v),
                        Some(_) => return Err(XforwardError::Syntax("NAME")),
                        None => None,
                    }
                }
                "ADDR" => {
                    next.addr = match value {
                        Some(v) => Some(address(&v).ok_or(XforwardError::Syntax("ADDR"))?),
                        None => None,
                    }
                }
                "PORT" => {
                    next.port = match value {
                        Some(v) => Some(
                            v.bytes()
                                .all(|b| b.is_ascii_digit())
                                .then(|| v.parse::<u16>().ok())
                                .flatten()
                                .ok_or(XforwardError::Syntax("PORT"))?,
                        ),
                        None => None,
                    }
                }
                "PROTO" => {
                    if value.as_ref().is_some_and(|v| v.len() > MAX_PROTO) {
                        return Err(XforwardError::Syntax("PROTO"));
                    }
                    next.proto = value;
                }
                "HELO" => next.helo = value,
                "IDENT" => next.ident = value,
                _ => {
                    next.source = match value {
                        Some(v) if v.eq_ignore_ascii_case("LOCAL") => Some(Source::Local),
                        Some(v) if v.eq_ignore_ascii_case("REMOTE") => Some(Source::Remote),
                        Some(_) => return Err(XforwardError::Syntax("SOURCE")),
                        None => None,
                    }
                }
            }
        }
        if !any {
            return Err(XforwardError::Empty);
        }
        *self = next;
        Ok(())
    }
}

/// The attributes taken, as advertised after `XFORWARD` in the EHLO reply.
pub const ATTRIBUTES: [&str; 7] = ["NAME", "ADDR", "PORT", "PROTO", "HELO", "IDENT", "SOURCE"];

fn unavailable(value: &str) -> bool {
    value.eq_ignore_ascii_case("[UNAVAILABLE]") || value.eq_ignore_ascii_case("[TEMPUNAVAIL]")
}

/// An address as XFORWARD gives it: IPv4, or IPv6 with or without the `IPv6:` prefix
/// (no brackets).
fn address(value: &str) -> Option<IpAddr> {
    let v6 = value
        .get(..5)
        .filter(|p| p.eq_ignore_ascii_case("IPv6:"))
        .map(|_| &value[5..]);
    match v6 {
        Some(rest) => rest.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6),
        None => value.parse().ok(),
    }
}

/// xtext (RFC 3461 4): `+XX` is the byte XX (hex, either case), other characters stand
/// for themselves and must be printable ASCII. The decoded bytes keep printable ASCII;
/// any other byte (a control, a space, a line end, non-ASCII) becomes `?`. `None` when
/// it is not xtext.
pub fn xtext_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = match bytes[i] {
            b'+' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                i += 3;
                u8::from_str_radix(hex, 16).ok()?
            }
            b @ 0x21..=0x7e => {
                i += 1;
                b
            }
            _ => return None,
        };
        out.push(if b.is_ascii_graphic() {
            char::from(b)
        } else {
            '?'
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xtext_decodes_hex_in_either_case_and_masks_what_is_not_printable() {
        assert_eq!(xtext_decode("plain.example").unwrap(), "plain.example");
        assert_eq!(xtext_decode("a+2Bb+3db").unwrap(), "a+b=b");
        assert_eq!(
            xtext_decode("x+0D+0AReceived:+20evil").unwrap(),
            "x??Received:?evil"
        );
        assert_eq!(xtext_decode("caf+C3+A9").unwrap(), "caf??");
        for bad in ["+", "+4", "+4g", "a+zz", "sp ace", "caf\u{e9}", "tab\t"] {
            assert_eq!(xtext_decode(bad), None, "{bad:?}");
        }
    }

    /// What Postfix's content-filter client and its before-queue proxy send.
    #[test]
    fn postfix_attributes_are_taken_and_unavailable_is_none() {
        let mut f = Forwarded::default();
        f.apply("NAME=mail.client.example ADDR=192.0.2.7 PORT=52044")
            .unwrap();
        f.apply("PROTO=ESMTP HELO=[192.0.2.7] IDENT=4Xyz1 SOURCE=REMOTE")
            .unwrap();
        assert_eq!(
            f,
            Forwarded {
                name: Some("mail.client.example".into()),
                addr: Some("192.0.2.7".parse().unwrap()),
                port: Some(52044),
                proto: Some("ESMTP".into()),
                helo: Some("[192.0.2.7]".into()),
                ident: Some("4Xyz1".into()),
                source: Some(Source::Remote),
            }
        );
        let mut g = Forwarded::default();
        g.apply(
            "name=unknown addr=IPv6:2001:db8::5 port=[UNAVAILABLE] helo=[tempunavail] source=local",
        )
        .unwrap();
        assert_eq!(g.name, None);
        assert_eq!(g.addr, Some("2001:db8::5".parse().unwrap()));
        assert_eq!((g.port, g.helo.as_deref()), (None, None));
        assert_eq!(g.source, Some(Source::Local));
        assert!(g.names_client());
        let mut local = Forwarded::default();
        local.apply("IDENT=ABC SOURCE=LOCAL").unwrap();
        assert!(!local.names_client(), "mail from the MTA's own host");
    }

    #[test]
    fn fail_xforward_bad_attributes_change_nothing() {
        let mut f = Forwarded::default();
        f.apply("ADDR=192.0.2.1").unwrap();
        let long = format!("HELO={}", "a".repeat(MAX_VALUE + 1));
        let proto = format!("PROTO={}", "A".repeat(MAX_PROTO + 1));
        for (args, want) in [
            ("", XforwardError::Empty),
            ("  ", XforwardError::Empty),
            ("ADDR", XforwardError::NotAttribute),
            ("ADDR=", XforwardError::NotAttribute),
            (long.as_str(), XforwardError::TooLong),
            ("USER=root", XforwardError::UnknownAttribute),
            ("HELO=a+0", XforwardError::Xtext("HELO")),
            ("ADDR=[192.0.2.9]", XforwardError::Syntax("ADDR")),
            ("ADDR=999.0.0.1", XforwardError::Syntax("ADDR")),
            ("PORT=65536", XforwardError::Syntax("PORT")),
            ("PORT=+2B1", XforwardError::Syntax("PORT")),
            ("NAME=bad+20name", XforwardError::Syntax("NAME")),
            ("SOURCE=ELSEWHERE", XforwardError::Syntax("SOURCE")),
            (proto.as_str(), XforwardError::Syntax("PROTO")),
            // A good attribute before a bad one is not taken either.
            (
                "ADDR=192.0.2.2 HELO=x PORT=no",
                XforwardError::Syntax("PORT"),
            ),
        ] {
            assert_eq!(f.apply(args), Err(want), "{args:?}");
            assert_eq!(f.addr, Some("192.0.2.1".parse().unwrap()), "{args:?}");
            assert_eq!(f.helo, None, "{args:?}");
        }
        // The longest value taken is 255 characters.
        f.apply(&format!("HELO={}", "a".repeat(MAX_VALUE))).unwrap();
        assert_eq!(f.helo.as_deref().map(str::len), Some(MAX_VALUE));
    }
}
