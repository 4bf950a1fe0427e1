//! Calls mail brought for the local agents, made on each agent's own A2A endpoint;
//! what it answers is sealed and mailed back in the request's thread, numbered from 1,
//! the last one final.
//!
//! Each call is recorded `dispatched` before it is made, so a bridge killed while
//! the agent works never makes it again blindly. Taken up again after a restart, a
//! `message/send` or `message/stream` is looked for at the agent first: its task
//! (known, or found by the call's context with `ListTasks`) is followed to its end
//! with `GetTask` and answered; only a call the agent holds nothing of is made again.
//! The context of such a call is chosen before it is made (the request's own, or one
//! named after the correlation) for that reason. Answers are queued under names made
//! from the call and their sequence, so one queued twice is mailed once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use super::rpc::{self, Method, RpcError};
use super::state::Inbound;
use super::{Bridge, VERDICT_KEY};
use crate::message::{Limits, MailA2aMessage};
use crate::{A2aErrorType, Envelope, Kind};

/// Calls made at the local agents at once, at most.
const MAX_IN_FLIGHT: usize = 32;

/// How long a call for a local agent is leased to the instance making it, seconds.
const LEASE_SECS: i64 = 30;

/// Runs the calls for local agents until `shutdown`.
pub(crate) async fn run(b: Arc<Bridge>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let busy: Arc<Mutex<HashSet<i64>>> = Default::default();
    let mut pruned: Option<std::time::Instant> = None;
    loop {
        if *shutdown.borrow() {
            return;
        }
        // What ended two request lifetimes ago is forgotten, once an hour.
        if pruned.is_none_or(|t| t.elapsed() > std::time::Duration::from_secs(3600)) {
            pruned = Some(std::time::Instant::now());
            let before =
                time::OffsetDateTime::now_utc().unix_timestamp() - 2 * b.config.expiry_secs as i64;
            let me = b.clone();
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || me.state.prune(before)).await {
                tracing::error!(error = %e, "bridge: cannot prune the state");
            }
        }
        let notified = b.calls.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let me = b.clone();
        let open = tokio::task::spawn_blocking(move || me.state.open_inbound()).await;
        match open {
            Ok(Ok(rows)) => {
                for row in rows {
                    // At most so many calls at the local agents at once: the rest wait
                    // their turn in the state.
                    if busy.lock().unwrap_or_else(|p| p.into_inner()).len() >= MAX_IN_FLIGHT {
                        break;
                    }
                    if !busy
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(row.id)
                    {
                        continue;
                    }
                    let (b, busy) = (b.clone(), busy.clone());
                    tokio::spawn(async move {
                        let id = row.id;
                        // Made by the instance that holds its lease, renewed while it
                        // works; another takes it once the lease runs out.
                        let me = b.clone();
                        let leased = tokio::task::spawn_blocking(move || {
                            me.state.lease_inbound(id, &me.instance, LEASE_SECS)
                        })
                        .await;
                        if !matches!(leased, Ok(Ok(true))) {
                            busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                            return;
                        }
                        let renew = {
                            let b = b.clone();
                            tokio::spawn(async move {
                                let every = std::time::Duration::from_secs(LEASE_SECS as u64 / 3);
                                loop {
                                    tokio::time::sleep(every).await;
                                    let me = b.clone();
                                    let _ = tokio::task::spawn_blocking(move || {
                                        me.state.lease_inbound(id, &me.instance, LEASE_SECS)
                                    })
                                    .await;
                                }
                            })
                        };
                        let result = handle(&b, row).await;
                        renew.abort();
                        if let Err(e) = result {
                            match b.state.retry_inbound(id) {
                                Ok(true) => {
                                    tracing::warn!(error = %e, "bridge: a call for a local agent expired unanswered")
                                }
                                Ok(false) => {
                                    tracing::warn!(error = %e, "bridge: a call for a local agent waits")
                                }
                                Err(s) => tracing::error!(error = %s, "bridge: state"),
                            }
                        }
                        busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                    });
                }
            }
            Ok(Err(e)) => tracing::error!(error = %e, "bridge: cannot read the calls to make"),
            Err(e) => tracing::error!(error = %e, "bridge: cannot read the calls to make"),
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Why a call could not be finished now (it is taken up again).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Later(String);

fn later(e: impl std::fmt::Display) -> Later {
    Later(e.to_string())
}

/// One answer mailer: the request it answers and how far it got.
struct Replier<'b> {
    b: &'b Bridge,
    row: &'b Inbound,
    request: MailA2aMessage,
    next: u64,
}

impl Replier<'_> {
    /// Seals and queues one answer, numbered next.
    async fn send(&mut self, kind: Kind, body: Value, is_final: bool) -> Result<(), Later> {
        let sequence = self.next;
        let id = answer_id(self.row.id, &self.row.correlation, sequence);
        let req = self.request.envelope();
        let mut env = match kind {
            Kind::Error => {
                let err = rpc::from_a2a_error(&body);
                let mut e = Envelope::error_to(req, &id, A2aErrorType::InternalError, "");
                e.set("error", &rpc::to_a2a_error(&err));
                e
            }
            _ => {
                let mut e = Envelope::response_to(req, &id);
                if kind == Kind::Event {
                    e.set("kind", &"event");
                }
                e.remove("payload");
                e.set("payload", &body);
                e
            }
        };
        env.set("sequence", &sequence);
        env.set("final", &is_final);
        // Answered as it was asked: in the request's MLS group, or with its profile.
        let group = req.group().map(|g| g.id);
        let profile = super::verdict_object(&self.row.verdict)
            .get("profile")
            .and_then(serde_json::Value::as_str)
            .and_then(|p| p.parse::<crate::Profile>().ok())
            .filter(|p| *p != crate::Profile::Mls);
        let plain = MailA2aMessage::reply(&self.request, &self.row.agent, env);
        // The request's profile, when this side can sign with it; else the one it
        // would choose for the sender.
        let sealed = match self.b.seal(plain.clone(), profile, group.clone()).await {
            Ok(s) => s,
            Err(_) if profile.is_some() => self.b.seal(plain, None, group).await.map_err(later)?,
            Err(e) => return Err(later(e)),
        };
        self.b
            .queue(
                &self.row.agent,
                std::slice::from_ref(&self.row.sender),
                &id,
                sealed,
            )
            .await
            .map_err(later)?;
        self.b
            .state
            .sent_inbound(self.row.id, sequence)
            .map_err(later)?;
        self.next += 1;
        Ok(())
    }
}

/// An answer's `messageId`: the same for the same call and sequence, so an answer
/// sealed again after a crash is the same spool entry.
fn answer_id(row: i64, correlation: &str, sequence: u64) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(format!("{row}\0{correlation}\0{sequence}").as_bytes());
    let h: String = d.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("bridge-{h}")
}

async fn handle(b: &Arc<Bridge>, row: Inbound) -> Result<(), Later> {
    let request = MailA2aMessage::parse(&row.message, &Limits::default()).map_err(later)?;
    let env = request.envelope().clone();
    let mut params: Map<String, Value> = env
        .value("payload")
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    let method = Method::from_token(&row.operation);
    let mut out = Replier {
        b,
        row: &row,
        request,
        next: row.next_sequence,
    };
    let Some(method) = method else {
        let e = RpcError::method_not_found(&row.operation);
        out.send(Kind::Error, rpc::to_a2a_error(&e), true).await?;
        return b.state.set_inbound_state(row.id, "answered").map_err(later);
    };
    let sends = matches!(method, Method::SendMessage | Method::SendStreamingMessage);
    // The cards this bridge serves say pushNotifications: false, and a push URL a
    // sender chose would have the local agent post into this network.
    if matches!(
        method,
        Method::CreateTaskPushNotificationConfig
            | Method::GetTaskPushNotificationConfig
            | Method::ListTaskPushNotificationConfigs
            | Method::DeleteTaskPushNotificationConfig
    ) {
        let e = RpcError::push_not_supported();
        out.send(Kind::Error, rpc::to_a2a_error(&e), true).await?;
        return b.state.set_inbound_state(row.id, "answered").map_err(later);
    }
    // The request as a caller of the A2A side would have to write it: strictly (the
    // JSON names alone; a proto spelling such as `task_id` would pass the checks below
    // unseen, and the agent's parser takes it).
    let strict =
        json!({"jsonrpc": "2.0", "id": 0, "method": method.jsonrpc_name(), "params": params});
    if let Err(e) = rpc::parse_jsonrpc(strict.to_string().as_bytes(), 64) {
        out.send(Kind::Error, rpc::to_a2a_error(&e), true).await?;
        return b.state.set_inbound_state(row.id, "answered").map_err(later);
    }
    // The agent answers the bridge as one client: which sender may see or change
    // which task is the bridge's to keep. A task, or a context, another sender's calls
    // made is not found for this one.
    if let Some(e) = not_theirs(b, &row, method, &params)? {
        out.send(Kind::Error, rpc::to_a2a_error(&e), true).await?;
        return b.state.set_inbound_state(row.id, "answered").map_err(later);
    }
    if sends {
        // The verdict goes to the agent with the message, replacing any the sender put.
        if let Some(m) = params.get_mut("message").and_then(Value::as_object_mut) {
            let meta = m.entry("metadata").or_insert_with(|| json!({}));
            if !meta.is_object() {
                *meta = json!({});
            }
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(VERDICT_KEY.into(), super::verdict_object(&row.verdict));
            }
            // A part's metadata says nothing under the key.
            if let Some(parts) = m.get_mut("parts").and_then(Value::as_array_mut) {
                for p in parts {
                    if let Some(meta) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove(VERDICT_KEY);
                    }
                }
            }
        }
        // The request's own metadata (the SDK's RequestContext.metadata) gets it too.
        let meta = params.entry("metadata").or_insert_with(|| json!({}));
        if !meta.is_object() {
            *meta = json!({});
        }
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(VERDICT_KEY.into(), super::verdict_object(&row.verdict));
        }
    }
    if row.state == "dispatched" && sends {
        // Taken up after a restart: the agent may have it already.
        let message_id = params
            .get("message")
            .and_then(|m| m.get("messageId"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(task) = find_task(b, &row, message_id.as_deref()).await? {
            let done = follow(b, &row, task).await?;
            let body = json!({ "task": done });
            let kind = if method == Method::SendMessage && out.next == 1 {
                Kind::Response
            } else {
                Kind::Event
            };
            out.send(kind, body, true).await?;
            return b.state.set_inbound_state(row.id, "answered").map_err(later);
        }
    }
    if sends {
        let context = params
            .get("message")
            .and_then(|m| m.get("contextId"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("ctx-{}", answer_id(row.id, &row.correlation, 0)));
        if let Some(m) = params.get_mut("message").and_then(Value::as_object_mut) {
            m.insert("contextId".into(), context.clone().into());
        }
        b.state
            .set_inbound_context(row.id, &context)
            .map_err(later)?;
    }
    b.state
        .set_inbound_state(row.id, "dispatched")
        .map_err(later)?;
    let agent = row.agent.clone();
    // A message/send goes to an agent that streams as a stream: its task's events are
    // mailed as they come (the spec's "ordered task events"), so the caller learns
    // the task while it runs, and can poll or cancel it.
    let streams = method.streams()
        || (method == Method::SendMessage
            && b.agents.endpoint(&agent).await.is_ok_and(|e| e.streaming));
    if streams {
        let call_method = if method == Method::SendMessage {
            Method::SendStreamingMessage
        } else {
            method
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
        let mut on_event =
            move |v: Value| -> futures_util::future::BoxFuture<'static, Result<(), RpcError>> {
                let _ = tx.send(v);
                Box::pin(async { Ok(()) })
            };
        let streaming = {
            let b = b.clone();
            let params = params.clone();
            async move {
                b.agents
                    .stream(&agent, call_method, &params, &mut on_event)
                    .await
            }
        };
        tokio::pin!(streaming);
        let mut ended = false;
        let result = loop {
            tokio::select! {
                r = &mut streaming => break r,
                Some(v) = rx.recv() => {
                    if !ended {
                        ended = ends(&v);
                        note_task(b, &row, &v);
                        out.send(Kind::Event, v, ended).await?;
                    }
                }
            }
        };
        while let Ok(v) = rx.try_recv() {
            if !ended {
                ended = ends(&v);
                note_task(b, &row, &v);
                out.send(Kind::Event, v, ended).await?;
            }
        }
        if !ended {
            match result {
                // The stream ended in no final state: the task as it is now, final.
                Ok(()) => {
                    let task = match b.state.inbound_task(row.id).map_err(later)? {
                        Some(t) => {
                            let mut p = Map::new();
                            p.insert("id".into(), t.into());
                            b.agents.call(&row.agent, Method::GetTask, &p).await
                        }
                        None => Err(RpcError::invalid_agent_response()
                            .with_message("the agent's stream ended with no event")),
                    };
                    match task {
                        Ok(t) => out.send(Kind::Event, json!({ "task": t }), true).await?,
                        Err(e) => out.send(Kind::Error, rpc::to_a2a_error(&e), true).await?,
                    }
                }
                Err(e) => out.send(Kind::Error, rpc::to_a2a_error(&e), true).await?,
            }
        }
    } else {
        match b.agents.call(&row.agent, method, &params).await {
            Ok(v) if method == Method::ListTasks => {
                let v = only_theirs(b, &row, v).map_err(later)?;
                out.send(Kind::Response, v, true).await?
            }
            Ok(v) => {
                note_task(b, &row, &v);
                out.send(Kind::Response, v, true).await?
            }
            Err(e) => out.send(Kind::Error, rpc::to_a2a_error(&e), true).await?,
        }
    }
    b.state.set_inbound_state(row.id, "answered").map_err(later)
}

/// The error a call that names a task or context of another sender's gets (as if
/// it did not exist), or `None`.
fn not_theirs(
    b: &Bridge,
    row: &Inbound,
    method: Method,
    params: &Map<String, Value>,
) -> Result<Option<RpcError>, Later> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let message = params.get("message");
    let task = match method {
        Method::SendMessage | Method::SendStreamingMessage => {
            text(message.and_then(|m| m.get("taskId")))
        }
        Method::GetTask | Method::CancelTask | Method::SubscribeToTask => text(params.get("id")),
        Method::CreateTaskPushNotificationConfig
        | Method::GetTaskPushNotificationConfig
        | Method::ListTaskPushNotificationConfigs
        | Method::DeleteTaskPushNotificationConfig => text(params.get("taskId")),
        _ => None,
    };
    let context = match method {
        Method::SendMessage | Method::SendStreamingMessage => {
            text(message.and_then(|m| m.get("contextId")))
        }
        Method::ListTasks => text(params.get("contextId")),
        _ => None,
    };
    // Tasks a message refers to are the sender's own, too.
    let referenced: Vec<String> = message
        .and_then(|m| m.get("referenceTaskIds"))
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for t in task.into_iter().chain(referenced) {
        let owner = b.state.task_sender(&row.agent, &t).map_err(later)?;
        if owner.as_deref() != Some(row.sender.as_str()) {
            return Ok(Some(RpcError::task_not_found()));
        }
    }
    if let Some(c) = context {
        let owner = b.state.context_sender(&row.agent, &c).map_err(later)?;
        // A context no call named before is a new one, the sender's from now on.
        if owner.is_some_and(|o| o != row.sender) {
            return Ok(Some(RpcError::invalid_params(
                "contextId: a context of another caller",
            )));
        }
    }
    Ok(None)
}

/// A ListTasks answer with only the tasks this sender's calls made.
fn only_theirs(b: &Bridge, row: &Inbound, mut v: Value) -> Result<Value, super::state::StateError> {
    if let Some(tasks) = v.get_mut("tasks").and_then(Value::as_array_mut) {
        let mut kept = Vec::new();
        for t in tasks.drain(..) {
            let id = t.get("id").and_then(Value::as_str).unwrap_or_default();
            if b.state.task_sender(&row.agent, id)?.as_deref() == Some(row.sender.as_str()) {
                kept.push(t);
            }
        }
        let n = kept.len();
        *tasks = kept;
        if v.get("totalSize").is_some() {
            v["totalSize"] = n.into();
        }
    }
    Ok(v)
}

/// Whether a stream event is its stream's last: a message, or a task in a state
/// that ends the stream (terminal, or waiting for the caller).
fn ends(v: &Value) -> bool {
    if v.get("message").is_some() {
        return true;
    }
    let state = v
        .get("statusUpdate")
        .and_then(|u| u.get("status"))
        .or_else(|| v.get("task").and_then(|t| t.get("status")))
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    STREAM_ENDS.contains(&state)
}

/// The task states a stream ends in: terminal, or waiting for the caller.
const STREAM_ENDS: [&str; 6] = [
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
];

/// Records the agent's task an answer names, for a restart to find.
fn note_task(b: &Bridge, row: &Inbound, v: &Value) {
    let id = v
        .get("task")
        .and_then(|t| t.get("id"))
        .or_else(|| v.get("statusUpdate").and_then(|u| u.get("taskId")))
        .or_else(|| v.get("artifactUpdate").and_then(|u| u.get("taskId")))
        .and_then(Value::as_str);
    if let (Some(id), None) = (id, &row.task_id) {
        let _ = b.state.set_inbound_task(row.id, id);
    }
}

/// The agent's task of a call made before a restart: the one recorded, or the one in
/// the call's context.
async fn find_task(
    b: &Bridge,
    row: &Inbound,
    message_id: Option<&str>,
) -> Result<Option<String>, Later> {
    if let Some(t) = &row.task_id {
        return Ok(Some(t.clone()));
    }
    let Some(ctx) = &row.context_id else {
        return Ok(None);
    };
    let mut p = Map::new();
    p.insert("contextId".into(), ctx.clone().into());
    p.insert("historyLength".into(), 1000.into());
    // The task whose history holds this call's message: in a conversation the context
    // holds the earlier calls' tasks too.
    let ours = message_id.unwrap_or_default();
    match b.agents.call(&row.agent, Method::ListTasks, &p).await {
        Ok(v) => Ok(v
            .get("tasks")
            .and_then(Value::as_array)
            .and_then(|tasks| {
                tasks.iter().find(|t| {
                    t.get("history").and_then(Value::as_array).is_some_and(|h| {
                        h.iter().any(|m| {
                            !ours.is_empty()
                                && m.get("messageId").and_then(Value::as_str) == Some(ours)
                        })
                    })
                })
            })
            .and_then(|t| t.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string)),
        Err(e) if e.code == -32603 => Err(later(e.message)),
        // The agent lists no tasks: nothing tells it has the call; made again.
        Err(_) => Ok(None),
    }
}

/// Follows the agent's task `id` until it ends (or asks for input); the task then.
async fn follow(b: &Bridge, row: &Inbound, id: String) -> Result<Value, Later> {
    let _ = b.state.set_inbound_task(row.id, &id);
    let mut p = Map::new();
    p.insert("id".into(), id.into());
    // Followed no longer than a call to the agent may take; then answered as it is.
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_secs(b.config.agent_timeout_secs);
    loop {
        let task = b
            .agents
            .call(&row.agent, Method::GetTask, &p)
            .await
            .map_err(|e| later(e.message))?;
        let state = task
            .get("status")
            .and_then(|s| s.get("state"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if STREAM_ENDS.contains(&state) || tokio::time::Instant::now() >= deadline {
            return Ok(task);
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
