//! Application messages out: the A2A mail sealed as an MLS PrivateMessage.

use rusqlite::{params, OptionalExtension};

use super::{group_id_text, now, op, parse_group_id, sha256, wire, Mls, MlsError};
use crate::message::{Headers, Hints, MailA2aMessage};
use crate::profile::Profile;

/// The [`Sealer`](crate::seal::Sealer) of the MLS profile: `opts.group` names the
/// group. Receiving has no `Opener`: opening MLS mail changes the group state and
/// handles handshake mail too, so it is [`Mls::receive`].
impl crate::seal::Sealer for Mls {
    fn seal(
        &self,
        plain: &MailA2aMessage,
        opts: &crate::seal::SealOptions,
    ) -> Result<Vec<u8>, crate::seal::SealError> {
        use crate::seal::{OpenError, SealError};
        if opts.profile != Profile::Mls {
            return Err(SealError::ProfileUnavailable(opts.profile));
        }
        if opts.sign_only {
            return Err(SealError::MlsAlwaysEncrypted);
        }
        crate::seal::signs_as(plain, opts)?;
        let group = opts.group.as_deref().ok_or(SealError::NoGroup)?;
        Mls::seal(self, plain, group, opts.outer_hints).map_err(|e| match e {
            MlsError::NoIdentity(address) => SealError::NoSigningKey { address },
            MlsError::Open(OpenError::Invalid(v)) => SealError::Invalid(v),
            MlsError::Message(m) => SealError::Message(m),
            other => SealError::profile(Profile::Mls, other),
        })
    }
}

impl Mls {
    /// Seals `plain` as an application message to the group: its envelope gains the
    /// `group` coordinates (or must already carry these), its From must be our
    /// identity in the group. The coordinates are the ones the MLS framing will
    /// carry (the generation is checked against the encrypted sender data, here and
    /// by the receiver); the generation also travels in the MLS authenticated data,
    /// as eight bytes big-endian, for receivers that read it there.
    pub fn seal(
        &self,
        plain: &MailA2aMessage,
        group: &str,
        outer_hints: bool,
    ) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let me = self.active_member(&id)?;
        let from = plain.sender().unwrap_or_default();
        if from != me {
            return Err(MlsError::Binding(format!(
                "the message is from {from}, our identity in group {group} is {me}"
            )));
        }
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let epoch = g.epoch().as_u64();
        let generation: u64 = self
            .state
            .query_row(
                "SELECT next_generation FROM mailseal_mls_sent WHERE group_id = ?1 AND epoch = ?2",
                params![id, epoch as i64],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .unwrap_or(0) as u64;
        let coordinates = crate::envelope::GroupCoordinates {
            id: group_id_text(&id),
            epoch,
            generation,
        };
        let mut env = plain.envelope().clone();
        match env.group() {
            Some(c) if c != coordinates => {
                self.cache_put(g);
                return Err(MlsError::Binding(format!(
                    "the envelope's group coordinates are not the group's next ({}, epoch {epoch}, generation {generation})",
                    coordinates.id
                )));
            }
            Some(_) => {}
            None => env.set("group", &serde_json::to_value(&coordinates).map_err(op)?),
        }
        let mut msg = plain.clone();
        msg.set_envelope(env);
        let violations = msg.check(&crate::envelope::ValidationContext::new(Some(Profile::Mls)));
        if !violations.is_empty() {
            self.cache_put(g);
            return Err(MlsError::Open(crate::seal::OpenError::Invalid(violations)));
        }
        let entity = msg.to_inner_entity(true)?;
        g.set_aad(generation.to_be_bytes().to_vec());
        let (out, watched) =
            super::sender_data::watch(|| g.create_message(&self.state.provider, signer, &entity));
        let out = out.map_err(op)?;
        let bytes = out.to_bytes().map_err(op)?;
        // The envelope states the generation before the encryption picks it: read
        // back what the sender data says, so that nothing leaves that receivers
        // would refuse (they check the same, `receive::check_coordinates`).
        let real = self.real_sender(&g, &bytes, epoch, &watched)?;
        if u64::from(real.generation) != generation {
            return Err(MlsError::State(format!(
                "our send generation in epoch {epoch} is {}, the state said {generation}",
                real.generation
            )));
        }
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_sent (group_id, epoch, next_generation) VALUES (?1, ?2, ?3)",
            params![id, epoch as i64, generation as i64 + 1],
        )?;
        self.record_seen(&id, &sha256(&bytes), epoch, now())?;
        let mut outer = msg.headers.clone();
        outer.subject = Some("[...]".into());
        let hints = if outer_hints {
            Hints::from_envelope(msg.envelope())
        } else {
            Hints::binding_only()
        };
        let mail = wire::write_mail(&outer, &hints, &bytes)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }

    /// Seals `entity` as it is, with `aad` as the MLS authenticated data: no check of
    /// the entity, its From or its coordinates. For conformance tests of receivers
    /// (what a lying or broken sender writes); never for real messages.
    #[doc(hidden)]
    pub fn seal_unchecked(
        &self,
        entity: &[u8],
        group: &str,
        headers: &Headers,
        aad: Vec<u8>,
    ) -> Result<Vec<u8>, MlsError> {
        let id = parse_group_id(group)?;
        let (me, _) = self.membership(&id)?;
        let me_id = self.signer(&me)?;
        let signer = &me_id.keys;
        let tx = self.state.begin()?;
        let mut g = self.take_group(&id)?;
        let epoch = g.epoch().as_u64();
        g.set_aad(aad);
        let out = g
            .create_message(&self.state.provider, signer, entity)
            .map_err(op)?;
        let bytes = out.to_bytes().map_err(op)?;
        let generation: i64 = self
            .state
            .query_row(
                "SELECT next_generation FROM mailseal_mls_sent WHERE group_id = ?1 AND epoch = ?2",
                params![id, epoch as i64],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0);
        self.state.exec(
            "INSERT OR REPLACE INTO mailseal_mls_sent (group_id, epoch, next_generation) VALUES (?1, ?2, ?3)",
            params![id, epoch as i64, generation + 1],
        )?;
        let mail = wire::write_mail(headers, &Hints::binding_only(), &bytes)?;
        tx.commit()?;
        self.cache_put(g);
        Ok(mail)
    }
}
