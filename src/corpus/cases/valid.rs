//! Valid messages: every operation's request and response, stream events and errors,
//! under every profile.

use super::*;

const OPERATIONS: [&str; 11] = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/subscribe",
    "push/create",
    "push/get",
    "push/list",
    "push/delete",
    "agent-card/get-extended",
];

/// Every operation's request and response, stream events and errors, under every
/// profile.
pub(super) fn cases(b: &mut Builder<'_>) -> Result<(), CorpusError> {
    for mode in MODES {
        for op in OPERATIONS {
            let slug = op.replace('/', "-");
            let env = b.request(op);
            let d = b.draft(mode, &env)?;
            b.add(
                &format!("valid--request-{slug}"),
                Rule::Accept,
                &format!("a {op} request from Alice to Bob"),
                &d,
                b.alice(mode),
                vec![],
                Crypto::Pass,
            )?;
            let env = b.reply(op, "response");
            let d = b.draft(mode, &env)?;
            b.add(
                &format!("valid--response-{slug}"),
                Rule::Accept,
                &format!("a {op} response from Alice to Bob"),
                &d,
                b.alice(mode),
                vec![],
                Crypto::Pass,
            )?;
        }
        for op in ["message/stream", "tasks/subscribe"] {
            let slug = op.replace('/', "-");
            let env = b.reply(op, "event");
            let d = b.draft(mode, &env)?;
            b.add(
                &format!("valid--event-{slug}"),
                Rule::Accept,
                &format!("the first {op} stream event"),
                &d,
                b.alice(mode),
                vec![],
                Crypto::Pass,
            )?;
        }
        for op in ["message/send", "tasks/get"] {
            let slug = op.replace('/', "-");
            let env = b.reply(op, "error");
            let d = b.draft(mode, &env)?;
            b.add(
                &format!("valid--error-{slug}"),
                Rule::Accept,
                &format!("an error reply to {op}"),
                &d,
                b.alice(mode),
                vec![],
                Crypto::Pass,
            )?;
        }
    }
    Ok(())
}
