//! Delivery status notifications (RFC 3464): the bounce a sender gets for a message
//! the gateway accepted and then could not deliver, with the next hop's reply for
//! each recipient and the message's header (`text/rfc822-headers`, RFC 6522).
//! Composed by `mail-builder`, as every message the crate writes.

use mail_builder::headers::content_type::ContentType;
use mail_builder::headers::HeaderType;
use mail_builder::mime::MimePart;
use mail_builder::MessageBuilder;

/// One recipient the message did not reach.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The recipient.
    pub recipient: String,
    /// The enhanced status (`5.1.1`, or `4.4.7` for a message that expired).
    pub status: String,
    /// The next hop's reply, or why there was none.
    pub diagnostic: String,
}

/// The header block of `message` (up to the empty line).
fn header_of(message: &[u8]) -> &[u8] {
    match memchr::memmem::find(message, b"\r\n\r\n") {
        Some(i) => &message[..i + 2],
        None => message,
    }
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                ' '
            }
        })
        .take(400)
        .collect()
}

/// The DSN from `reporting_host` to `to` about `message` (queued at `arrived`, Unix
/// seconds) for `failures`.
pub fn compose(
    reporting_host: &str,
    to: &str,
    message: &[u8],
    arrived: i64,
    failures: &[Failure],
) -> Vec<u8> {
    let mut status = format!(
        "Reporting-MTA: dns; {}\r\nArrival-Date: {}\r\n",
        clean(reporting_host),
        rfc2822(arrived)
    );
    let mut human = String::from(
        "This is the mailseal gateway. The message below could not be delivered to:\r\n\r\n",
    );
    for f in failures {
        let action = if f.status.starts_with('4') || f.status.starts_with('5') {
            "failed"
        } else {
            "delayed"
        };
        status.push_str(&format!(
            "\r\nFinal-Recipient: rfc822; {}\r\nAction: {action}\r\nStatus: {}\r\nDiagnostic-Code: smtp; {}\r\n",
            clean(&f.recipient),
            clean(&f.status),
            clean(&f.diagnostic)
        ));
        human.push_str(&format!(
            "  {}: {}\r\n",
            clean(&f.recipient),
            clean(&f.diagnostic)
        ));
    }
    let report = MimePart::new(
        ContentType::new("multipart/report").attribute("report-type", "delivery-status"),
        vec![
            MimePart::new("text/plain", human),
            MimePart::new(
                "message/delivery-status",
                String::from_utf8_lossy(status.as_bytes()).into_owned(),
            ),
            MimePart::new(
                "text/rfc822-headers",
                String::from_utf8_lossy(header_of(message)).into_owned(),
            ),
        ],
    );
    let daemon = format!("mailer-daemon@{}", clean(reporting_host));
    let builder = MessageBuilder::new()
        .from(("Mail Delivery System", daemon.as_str()))
        .to(to)
        .subject("Undelivered Mail Returned to Sender")
        .header("Auto-Submitted", HeaderType::Text("auto-replied".into()))
        .body(report);
    builder.write_to_vec().unwrap_or_default()
}

pub(crate) fn rfc2822(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc2822)
                .ok()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dsn_names_each_failure_and_carries_the_header() {
        let dsn = compose(
            "gw.test",
            "alice@a.test",
            b"Subject: hello\r\nFrom: alice@a.test\r\n\r\nsecret body\r\n",
            1_700_000_000,
            &[Failure {
                recipient: "bob@b.test".into(),
                status: "5.1.1".into(),
                diagnostic: "550 5.1.1 no such user".into(),
            }],
        );
        let text = String::from_utf8_lossy(&dsn);
        assert!(text.contains("multipart/report"), "{text}");
        assert!(
            text.contains("Final-Recipient: rfc822; bob@b.test"),
            "{text}"
        );
        assert!(text.contains("Status: 5.1.1"), "{text}");
        assert!(text.contains("Subject: hello"), "{text}");
        assert!(!text.contains("secret body"), "the body is not returned");
    }
}
