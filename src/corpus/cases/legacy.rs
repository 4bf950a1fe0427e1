//! Legacy senders (MailA2A 9.2): a signed entity without protected header fields,
//! accepted by default and refused by a receiver that demands header protection.

use super::*;

/// The entity from its first Content-Type field on: the protected header fields
/// (From, To, Subject, Message-ID, ...) gone, as a sender without RFC 9788 writes it.
fn without_header_fields(entity: Vec<u8>) -> Vec<u8> {
    let mut at = 0;
    while at < entity.len() {
        if entity[at..].starts_with(b"Content-Type:") {
            return entity[at..].to_vec();
        }
        at += memchr::memchr(b'\n', &entity[at..]).map_or(entity.len(), |i| i + 1);
    }
    entity
}

pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    for mode in MODES {
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        d.mutate = Some(without_header_fields);
        b.add(
            "valid--legacy-sender",
            Rule::Accept,
            "a legacy sender: the signed entity has no header fields, the outer ones stand (MailA2A 9.2)",
            &d,
            b.alice(mode),
            vec![],
            Crypto::Pass,
        )?;
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        d.mutate = Some(without_header_fields);
        let sealing = b.alice(mode);
        b.under(
            CasePolicy {
                require_header_protection: true,
                ..CasePolicy::default()
            },
            |b| {
                b.add(
                    "legacy-sender--header-protection-required",
                    Rule::Refuse("binding.no-header-protection"),
                    "a legacy sender's message to a receiver whose policy demands header protection",
                    &d,
                    sealing,
                    vec![],
                    Crypto::Pass,
                )
            },
        )?;
    }
    Ok(())
}
