//! Legacy senders (MailA2A 9.2): a signed entity without protected header fields,
//! accepted only from a sender the receiver marks as legacy (nothing binds its
//! recipients or date), and refused by a receiver that demands header protection.

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
    let legacy = CasePolicy {
        allow_legacy_from_sender: true,
        ..CasePolicy::default()
    };
    for mode in MODES {
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        d.mutate = Some(without_header_fields);
        let sealing = b.alice(mode);
        b.under(legacy, |b| {
            b.add(
                "valid--legacy-sender",
                Rule::Accept,
                "a legacy sender the receiver marks as one: the signed entity has no header fields, the outer ones stand (MailA2A 9.2)",
                &d,
                sealing,
                vec![],
                Crypto::Pass,
            )
        })?;
        let env = b.request("message/send");
        let mut d = b.draft(mode, &env)?;
        d.mutate = Some(without_header_fields);
        b.add(
            "legacy-sender--not-marked",
            Rule::Refuse("binding.legacy-not-allowed"),
            "a legacy sender's message to a receiver that does not mark its sender as legacy: nothing binds its recipients or date",
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
                allow_legacy_from_sender: true,
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
    // Undated: a legacy detached-jws message (a JWS states no time) whose envelope
    // has neither createdAt nor expiresAt: nothing signed dates it.
    let mode = Mode::Jws;
    let mut env = b.request("message/send");
    if let Some(o) = env.as_object_mut() {
        o.remove("createdAt");
        o.remove("expiresAt");
    }
    let mut d = b.draft(mode, &env)?;
    d.mutate = Some(without_header_fields);
    let sealing = b.alice(mode);
    b.under(legacy, |b| {
        b.add(
            "legacy-sender--undated",
            Rule::Refuse("binding.legacy-undated"),
            "a legacy sender's message that nothing signed dates (no createdAt, expiresAt or signature time): its unsigned outer Date would make it new again",
            &d,
            sealing,
            vec![],
            Crypto::Pass,
        )
    })?;
    Ok(())
}
