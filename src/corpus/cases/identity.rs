//! Who signed, and for whom.

use super::*;

/// Who signed, and for whom: the attacker of the identity rules holds every key but
/// Bob's.
pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    let parties = b.parties;
    // Forwarded: Alice's message to Carol reaches Bob, validly signed (and encrypted
    // to Bob by whoever forwarded it).
    for mode in MODES {
        let (from, bob) = mode.parties();
        let env = b.request("message/send");
        let d = b.draft_between(mode, &env, from, &[CAROL])?;
        let to = [bob, from];
        let sealing = Sealing {
            encrypt_to: Some(&to),
            ..b.alice(mode)
        };
        b.add(
            "forwarded--to-carol",
            Rule::Refuse("binding.not-a-recipient"),
            "Alice's signed message names Carol, not Bob: forwarded to Bob",
            &d,
            sealing,
            vec![],
            Crypto::Pass,
        )?;
    }
    // Reflected: Bob's own signed message to Carol, mailed back to Bob by whoever got
    // it. He is its signer and its From, and it does not name him: not his to act on.
    {
        let bob_store = super::super::parties::store_of(&parties.bob)?;
        for mode in [Mode::SmimeSigned, Mode::Jws] {
            let env = b.request("message/send");
            let d = b.draft_between(mode, &env, BOB, &[CAROL])?;
            b.add(
                "reflected--own-message-to-carol",
                Rule::Refuse("binding.own-message-not-for-us"),
                "Bob's own signed message to Carol, mailed back to Bob (reflection)",
                &d,
                Sealing {
                    mode,
                    sender: &bob_store,
                    signer: None,
                    encrypt_to: None,
                    sign: true,
                    signed_at: None,
                },
                vec![],
                Crypto::Pass,
            )?;
        }
    }
    // Re-encrypted: Alice's signature names only herself as its intended recipient
    // (RFC 9580 5.2.3.36: her own copy); whoever holds the signed data encrypts it to
    // Bob. The signed entity's To may say anything: the packet says it was not for him.
    {
        let mode = Mode::OpenPgpEncrypted;
        let id = format!("{}--re-encrypted--not-an-intended-recipient", mode.name());
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let entity = inner_entity(&id, &d.msg, true)?;
        let message = crate::openpgp::OpenPgp::new(&parties.alice.store)
            .seal_raw(
                &d.msg.headers,
                &d.msg.headers.hints,
                &entity,
                PGP_ALICE,
                Some(crate::openpgp::Recipients {
                    addresses: &[PGP_BOB.to_string()],
                    preferred: &[],
                    intended: Some(&[PGP_ALICE.to_string()]),
                }),
                at(),
            )
            .map_err(|source| CorpusError::Seal {
                case: id.clone(),
                source,
            })?;
        b.push(
            id,
            Rule::Refuse("openpgp.not-intended-recipient"),
            "signed by Alice naming only herself as intended recipient, encrypted to Bob by another",
            mode,
            message,
            vec![],
            // RFC 9580 puts the check in signature verification: Sequoia's `sqop`
            // refuses the signature; GnuPG 2.2 (RFC 4880) does not check it and
            // accepts, a disagreement its report shows.
            Crypto::Fail,
        )?;
    }
    // The insider: a valid certificate from Bob's own CA, for Mallory's address,
    // signing a message From Alice.
    for mode in [Mode::SmimeSigned, Mode::SmimeEncrypted] {
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let sealing = Sealing {
            signer: Some(MALLORY),
            ..b.by(mode, &parties.insider)
        };
        b.add(
            "insider-signs-as-alice",
            Rule::Refuse("binding.signer-is-not-sender"),
            "Mallory's certificate from Bob's CA signs a message From Alice",
            &d,
            sealing,
            vec![],
            Crypto::Pass,
        )?;
    }
    // Mallory's own CA certifies Alice's address; a self-signed certificate claims it.
    for (name, sender, what) in [
        (
            "rogue-ca-certifies-alice",
            &parties.rogue_ca,
            "a certificate for Alice's address from Mallory's own CA",
        ),
        (
            "self-signed-alice",
            &parties.impostor,
            "a self-signed certificate for Alice's address",
        ),
    ] {
        for mode in [Mode::SmimeSigned, Mode::SmimeEncrypted] {
            let env = b.request("message/send");
            let d = b.draft(mode, &env)?;
            let sealing = b.by(mode, sender);
            b.add(
                name,
                Rule::Refuse("smime.unknown-signer"),
                &format!("signed with {what}"),
                &d,
                sealing,
                vec![],
                Crypto::Fail,
            )?;
        }
    }
    // An OpenPGP key and a JWK of Mallory's that claim Alice's address.
    for mode in [Mode::OpenPgpSigned, Mode::OpenPgpEncrypted, Mode::Jws] {
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let sealing = b.by(mode, &parties.impostor);
        let code = if mode == Mode::Jws {
            "jws.unknown-signer"
        } else {
            "openpgp.unknown-signer"
        };
        b.add(
            "impostor-key-claims-alice",
            Rule::Refuse(code),
            "signed with a key of Mallory's that claims Alice's address",
            &d,
            sealing,
            vec![],
            Crypto::Fail,
        )?;
    }
    // Encrypted to Alice alone: nothing Bob holds opens it.
    for mode in [Mode::SmimeEncrypted, Mode::OpenPgpEncrypted] {
        let (from, _) = mode.parties();
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let to = [from];
        let sealing = Sealing {
            encrypt_to: Some(&to),
            ..b.alice(mode)
        };
        let code = if mode == Mode::SmimeEncrypted {
            "smime.not-for-us"
        } else {
            "openpgp.not-for-us"
        };
        b.add(
            "encrypted-to-alice-only",
            Rule::Refuse(code),
            "encrypted to Alice alone, sent to Bob",
            &d,
            sealing,
            vec![],
            Crypto::Fail,
        )?;
    }
    // The signed content changed after signing.
    for mode in MODES {
        let env = b.request("message/send");
        let d = b.draft(mode, &env)?;
        let message = b.seal("tampered", &d, b.alice(mode))?;
        let message = if mode.encrypted() {
            continue;
        } else {
            replace_bytes(message, b"Summarize the report.", b"Summarize the repurt.")
        };
        let code = match mode {
            Mode::SmimeSigned => "smime.digest-mismatch",
            Mode::OpenPgpSigned => "openpgp.bad-signature",
            _ => "jws.bad-signature",
        };
        let id = format!("{}--tampered--changed-after-signing", mode.name());
        b.push(
            id,
            Rule::Refuse(code),
            "one word of the signed entity changed after signing",
            mode,
            message,
            vec![],
            Crypto::Fail,
        )?;
    }
    Ok(())
}
