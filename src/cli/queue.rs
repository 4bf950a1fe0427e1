//! `mailseal queue list|show|flush|hold|release|delete|requeue`: the gateway's queue,
//! seen and changed while the gateway runs. The work is the library's
//! ([`crate::gateway::spool::admin`]); this finds the spool, parses, and prints, with
//! whatever a message or a next hop put there (addresses, errors, headers) escaped.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::exit::ExitCode;
use super::{CliResult, Failure};
use crate::error::shown;
use crate::gateway::spool::{self, admin, Action, Applied, EntryState, QueueAdmin, Queued};

/// Where `--config` is looked for when neither it nor `--spool` is given (the dist
/// unit's configuration).
const DEFAULT_CONFIG: &str = "/etc/mailseal/gateway.toml";

#[derive(Args)]
#[command(after_long_help = "\
Safe while the gateway runs: the tools do not take the directory spool's lock; each \
change is atomic against the gateway's deliveries (a lock on each entry, or PostgreSQL \
row locks) and takes effect at its next poll. Run them as the gateway's user, or as \
root (what they write is given to the spool directory's owner).

IDs may be given as unique prefixes; an unknown or ambiguous one changes nothing \
(exit status 2). Exit status 1 when a named entry could not be changed (it was being \
delivered, or was delivered meanwhile); each change is logged on standard error.")]
pub(super) struct QueueArgs {
    /// The gateway's configuration, whose `spool` the tools use (default:
    /// /etc/mailseal/gateway.toml).
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// The spool itself, instead of --config: a directory or `postgres://...`.
    #[arg(
        long,
        value_name = "LOCATION",
        global = true,
        conflicts_with = "config"
    )]
    spool: Option<String>,
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Subcommand)]
enum QueueCommand {
    /// One line per queued entry, oldest first: id, route (listener), state (queued,
    /// held, delivering), age, attempts, next attempt, size, sender, recipients and
    /// the last error.
    List {
        /// A JSON array, one object per entry (times in Unix seconds).
        #[arg(long)]
        json: bool,
        /// Only the entries of this route (listener).
        #[arg(long, value_name = "NAME")]
        route: Option<String>,
        /// Only the entries in this state.
        #[arg(long, value_enum)]
        state: Option<StateFilter>,
    },
    /// An entry's envelope, schedule and message header. The message may be opened
    /// plaintext (inbound mail): its body is printed only with --body.
    Show {
        /// The entry's id, or a unique prefix of it.
        id: String,
        /// Print the message body too.
        #[arg(long)]
        body: bool,
        /// One JSON object (`headers`, and `body` with --body, as text).
        #[arg(long)]
        json: bool,
    },
    /// Make entries due now (all of them when no id is given). An entry being
    /// delivered is left to that attempt; a held one stays held.
    Flush {
        /// Ids or unique prefixes.
        ids: Vec<String>,
    },
    /// Keep entries from delivery until released (across restarts). An attempt under
    /// way goes on; if it defers, the entry then waits held.
    Hold {
        /// Ids or unique prefixes.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Let held entries be delivered again, at their next attempt (now, if its time has
    /// passed; `flush` to make it now).
    Release {
        /// Ids or unique prefixes.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Remove entries without delivering them (no bounce is sent). Each id is
    /// remembered as done, so a client's retry of the same message within 7 days is
    /// accepted and not queued again. An entry being delivered is deleted all the same:
    /// that attempt may still hand it to the next hop, and whatever it comes to, the
    /// entry is not queued again.
    Delete {
        /// Ids or unique prefixes.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Give entries a fresh retry period: attempts and last error cleared, due now,
    /// and their age, from which delivery.max_age_secs is counted, restarted (as if
    /// accepted now). An entry being delivered is left to that attempt.
    Requeue {
        /// Ids or unique prefixes.
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum StateFilter {
    Queued,
    Held,
    Delivering,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The spool location: `--spool`, else the configuration's.
fn location(a: &QueueArgs) -> Result<String, Failure> {
    if let Some(s) = &a.spool {
        return Ok(s.clone());
    }
    let path = match &a.config {
        Some(p) => p.clone(),
        None if std::path::Path::new(DEFAULT_CONFIG).exists() => PathBuf::from(DEFAULT_CONFIG),
        None => {
            return Err(Failure::new(
                ExitCode::Usage,
                format!(
                    "queue: --config FILE or --spool LOCATION ({DEFAULT_CONFIG} does not exist)"
                ),
            ))
        }
    };
    crate::gateway::Config::load(&path)
        .map(|c| c.spool)
        .map_err(|e| Failure::new(ExitCode::Usage, format!("queue: {e}")))
}

fn failure(e: spool::SpoolError) -> Failure {
    Failure::from("queue", e)
}

pub(super) fn queue(a: QueueArgs) -> CliResult {
    let location = location(&a)?;
    let tools = spool::open_admin(&location).map_err(failure)?;
    let now = now();
    let (action, ids) = match a.command {
        QueueCommand::List { json, route, state } => {
            return list(tools.as_ref(), now, json, route.as_deref(), state)
        }
        QueueCommand::Show { id, body, json } => return show(tools.as_ref(), now, &id, body, json),
        QueueCommand::Flush { ids } => (Action::Flush, ids),
        QueueCommand::Hold { ids } => (Action::Hold, ids),
        QueueCommand::Release { ids } => (Action::Release, ids),
        QueueCommand::Delete { ids } => (Action::Delete, ids),
        QueueCommand::Requeue { ids } => (Action::Requeue, ids),
    };
    let all = ids.is_empty();
    let done = admin::apply(tools.as_ref(), action, &ids, now).map_err(failure)?;
    let mut missed = 0;
    for (q, applied) in &done {
        println!("{} {}", q.entry.id, said(action, *applied));
        missed += usize::from(matches!(applied, Applied::Busy | Applied::Gone));
    }
    if all {
        let changed = done.iter().filter(|(_, a)| a.changed()).count();
        println!("{changed} of {} queued entries made due now", done.len());
        return Ok(());
    }
    if missed > 0 {
        return Err(Failure::new(
            ExitCode::Other,
            format!(
                "queue: {} of {} entries not changed (being delivered, or no longer queued)",
                missed,
                done.len()
            ),
        ));
    }
    Ok(())
}

/// What `applied` means for `action`, as the tools say it.
fn said(action: Action, applied: Applied) -> &'static str {
    use {Action::*, Applied::*};
    match (action, applied) {
        (_, Gone) => "no longer queued (delivered or deleted meanwhile)",
        (_, Busy) => "being delivered now: left to that attempt",
        (Flush, Changed) => "due now",
        (Flush, Already) => "due already",
        (Requeue, Changed) => "requeued: due now, no attempts, no last error, its age restarted",
        (Flush | Requeue, ChangedButHeld) => "due now, but held: release it to deliver it",
        (Hold, Changed) => "held",
        (Hold, ChangedWhileDelivering) => {
            "held; an attempt under way goes on (if it defers, the entry waits held)"
        }
        (Hold, Already) => "held already",
        (Release, Changed) => "released: delivered at its next attempt",
        (Release, Already) => "not held",
        (Delete, Changed) => "deleted, not delivered",
        (Delete, ChangedWhileDelivering) => {
            "deleted; the attempt under way may still deliver it, and it is not queued again"
        }
        (_, Already) => "unchanged",
        _ => "changed",
    }
}

/// `secs` as the tools print a duration: `45s`, `12m`, `3h`, `2d`.
fn span(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..=99 => format!("{s}s"),
        100..=5999 => format!("{}m", s / 60),
        6000..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn next(q: &Queued, now: i64) -> String {
    if q.entry.next_attempt <= now {
        "now".into()
    } else {
        format!("in {}", span(q.entry.next_attempt - now))
    }
}

/// An address as printed: escaped, bounded, in angle brackets.
fn address(a: &str) -> String {
    format!("<{}>", crate::error::quoted(a))
}

fn recipients(q: &Queued) -> String {
    q.entry
        .recipients
        .iter()
        .map(|r| address(r))
        .collect::<Vec<_>>()
        .join(",")
}

/// The most characters of a last error the tools print.
const ERROR_CHARS: usize = 200;

fn list(
    tools: &dyn QueueAdmin,
    now: i64,
    json: bool,
    route: Option<&str>,
    state: Option<StateFilter>,
) -> CliResult {
    let entries: Vec<Queued> = tools
        .list(now)
        .map_err(failure)?
        .into_iter()
        .filter(|q| route.is_none_or(|r| q.entry.route == r))
        .filter(|q| match state {
            None => true,
            Some(StateFilter::Queued) => q.state == EntryState::Queued,
            Some(StateFilter::Held) => q.state == EntryState::Held,
            Some(StateFilter::Delivering) => q.state == EntryState::Delivering,
        })
        .collect();
    if json {
        let listed = entries
            .iter()
            .map(queued_json)
            .collect::<Result<Vec<_>, _>>()?;
        let text = serde_json::to_string_pretty(&listed)
            .map_err(|e| Failure::new(ExitCode::Other, format!("queue: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    if entries.is_empty() {
        let filtered = route.is_some() || state.is_some();
        println!(
            "{}",
            if filtered {
                "no queued entry matches"
            } else {
                "the queue is empty"
            }
        );
        return Ok(());
    }
    let routes: Vec<String> = entries
        .iter()
        .map(|q| crate::error::quoted(&q.entry.route))
        .collect();
    let rw = routes
        .iter()
        .map(|r| r.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    println!(
        "{:<32} {:<rw$} {:<10} {:>5} {:>5} {:>7} {:>8}  FROM -> TO  LAST ERROR",
        "ID", "ROUTE", "STATE", "AGE", "TRIES", "NEXT", "SIZE"
    );
    let mut counts = [0usize; 3];
    for (q, route) in entries.iter().zip(&routes) {
        counts[q.state as usize] += 1;
        let error = if q.entry.last_error.is_empty() {
            String::new()
        } else {
            format!("  \"{}\"", shown(&q.entry.last_error, ERROR_CHARS))
        };
        println!(
            "{:<32} {:<rw$} {:<10} {:>5} {:>5} {:>7} {:>8}  {} -> {}{error}",
            q.entry.id,
            route,
            q.state.as_str(),
            span(now - q.entry.created),
            q.entry.attempts,
            next(q, now),
            q.size,
            address(&q.entry.mail_from),
            recipients(q),
        );
    }
    println!(
        "{} entries: {} queued, {} held, {} being delivered",
        entries.len(),
        counts[EntryState::Queued as usize],
        counts[EntryState::Held as usize],
        counts[EntryState::Delivering as usize]
    );
    Ok(())
}

/// The message's header and body (split at the first empty line).
/// Unix seconds as RFC 3339, as every time the command line prints.
fn rfc3339(t: i64) -> String {
    crate::replay::rfc3339(t)
}

/// An entry as `list --json` and `show --json` print it: its times in RFC 3339
/// (`created` to the millisecond the spool keeps), not the spool's Unix seconds.
fn queued_json(q: &Queued) -> Result<serde_json::Value, Failure> {
    let mut v = serde_json::to_value(q)
        .map_err(|e| Failure::new(ExitCode::Other, format!("queue: {e}")))?;
    let e = &q.entry;
    let created =
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(e.accepted_ms()) * 1_000_000)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| rfc3339(e.created));
    if let Some(obj) = v.as_object_mut() {
        obj.remove("created_ms");
        obj.insert("created".into(), created.into());
        obj.insert("next_attempt".into(), rfc3339(e.next_attempt).into());
        obj.insert("leased_until".into(), q.leased_until.map(rfc3339).into());
    }
    Ok(v)
}

fn split(data: &[u8]) -> (&[u8], &[u8]) {
    for sep in [&b"\r\n\r\n"[..], b"\n\n"] {
        if let Some(i) = memchr::memmem::find(data, sep) {
            return (&data[..i], &data[i + sep.len()..]);
        }
    }
    (data, &[])
}

/// The most characters of one message line the tools print.
const LINE_CHARS: usize = 4000;

fn print_lines(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for line in text.split('\n') {
        println!(
            "{}",
            shown(line.strip_suffix('\r').unwrap_or(line), LINE_CHARS)
        );
    }
}

fn show(tools: &dyn QueueAdmin, now: i64, prefix: &str, body: bool, json: bool) -> CliResult {
    let entries = tools.list(now).map_err(failure)?;
    let id = admin::resolve(&entries, prefix).map_err(failure)?;
    let (q, data) = tools.show(&id, now).map_err(failure)?;
    let (head, rest) = split(&data);
    if json {
        let mut v = queued_json(&q)?;
        v["headers"] = String::from_utf8_lossy(head).into();
        if body {
            v["body"] = String::from_utf8_lossy(rest).into();
        }
        println!("{v:#}");
        return Ok(());
    }
    let e = &q.entry;
    println!("id: {}", e.id);
    println!("route: {}", crate::error::quoted(&e.route));
    println!(
        "state: {}{}",
        q.state.as_str(),
        if q.held && q.state != EntryState::Held {
            " (held: waits once this attempt ends)"
        } else {
            ""
        }
    );
    println!(
        "accepted: {} ({} ago)",
        rfc3339(e.created),
        span(now - e.created)
    );
    println!("attempts: {}", e.attempts);
    println!(
        "next attempt: {} ({})",
        rfc3339(e.next_attempt),
        next(&q, now)
    );
    if let Some(until) = q.leased_until {
        println!("being delivered until: {}", rfc3339(until));
    }
    println!("from: {}", address(&e.mail_from));
    println!("to: {}", recipients(&q));
    if !e.last_error.is_empty() {
        println!("last error: {}", shown(&e.last_error, ERROR_CHARS));
    }
    println!("size: {} bytes", q.size);
    println!();
    print_lines(head);
    if body {
        println!();
        print_lines(rest);
    } else if !rest.is_empty() {
        println!();
        println!("({} bytes of body: --body to print it)", rest.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(span(-5), "0s");
        assert_eq!(span(45), "45s");
        assert_eq!(span(720), "12m");
        assert_eq!(span(3 * 3600), "3h");
        assert_eq!(span(3 * 86_400), "3d");
    }

    #[test]
    fn a_message_splits_at_its_first_empty_line() {
        assert_eq!(
            split(b"A: 1\r\nB: 2\r\n\r\nbody\r\n\r\nmore"),
            (&b"A: 1\r\nB: 2"[..], &b"body\r\n\r\nmore"[..])
        );
        assert_eq!(split(b"A: 1\n\nb"), (&b"A: 1"[..], &b"b"[..]));
        assert_eq!(split(b"A: 1"), (&b"A: 1"[..], &b""[..]));
    }
}
