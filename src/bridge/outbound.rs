//! A local agent's call to a remote peer: made a MailA2A request, sealed, recorded and
//! queued; resolved from the answers mail brings (`Bridge::deliver` records them).
//!
//! A `SendMessage` waits for its answer at most `bridge.wait_secs` (or not at all
//! when the caller asks to return immediately): past that it returns the Task as
//! submitted, under the call's correlation ID, which `GetTask` then answers from the
//! state (the remote task once an answer names it). A caller's retry of a
//! `SendMessage` (the same message `messageId`) is the same call, never a second
//! request.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::rpc::{self, Call, Method, RpcError};
use super::state::Answer;
use super::Bridge;
use crate::{Envelope, Kind, MailA2aMessage, Operation, Profile};

/// What a call comes to.
pub(crate) enum Reply {
    /// Its result.
    Result(Value),
    /// An A2A error.
    Error(RpcError),
    /// A stream of the answers to the request of this correlation.
    Stream(String),
}

fn stamp(at: time::OffsetDateTime) -> String {
    let at = at.replace_nanosecond(0).unwrap_or(at);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Makes `call` of `agent` to `peer`.
pub(crate) async fn call(b: &Arc<Bridge>, agent: &str, peer: &str, call: Call) -> Reply {
    let params = call.params.clone();
    match call.method {
        Method::SendMessage | Method::SendStreamingMessage => {
            let message = params.get("message").cloned().unwrap_or_default();
            let idem = message
                .get("messageId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let correlation = match start(b, agent, peer, call.method, &params, &idem).await {
                Ok(c) => c,
                Err(e) => return Reply::Error(e),
            };
            if call.method == Method::SendStreamingMessage {
                return Reply::Stream(correlation);
            }
            let immediate = params
                .get("configuration")
                .and_then(|c| c.get("returnImmediately"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let context = message.get("contextId").cloned();
            let agent = agent.to_string();
            wait(b, &correlation, immediate, |c| {
                pending_send(b, &agent, peer, c, context.as_ref())
            })
            .await
        }
        Method::GetTask => {
            let id = params.get("id").and_then(Value::as_str).unwrap_or_default();
            match known_task(b, agent, peer, id) {
                Ok(Some(task)) => Reply::Result(task),
                Ok(None) => forward(b, agent, peer, call.method, &params).await,
                Err(e) => Reply::Error(e),
            }
        }
        Method::CancelTask | Method::SubscribeToTask => {
            // A task known here only by the call's correlation is the remote one once
            // an answer named it; before that there is nothing to name to the peer.
            let mut params = params;
            let id = params
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Ok(Some(c)) = b.state.call_of(agent, &id) {
                match c.task_id {
                    Some(t) => {
                        params.insert("id".into(), t.into());
                    }
                    None => {
                        return Reply::Error(RpcError::task_not_cancelable().with_message(
                            "the task is not yet known at the remote agent (no answer came yet)",
                        ))
                    }
                }
            }
            if call.method == Method::SubscribeToTask {
                match start(b, agent, peer, call.method, &params, &new_id()).await {
                    Ok(c) => Reply::Stream(c),
                    Err(e) => Reply::Error(e),
                }
            } else {
                forward(b, agent, peer, call.method, &params).await
            }
        }
        _ => forward(b, agent, peer, call.method, &params).await,
    }
}

/// A call mailed whose answer is waited for.
async fn forward(
    b: &Arc<Bridge>,
    agent: &str,
    peer: &str,
    method: Method,
    params: &Map<String, Value>,
) -> Reply {
    match start(b, agent, peer, method, params, &new_id()).await {
        Ok(c) => {
            wait(b, &c, false, |_| {
                Reply::Error(RpcError::internal(
                    "no answer came by mail within bridge.wait_secs; ask again",
                ))
            })
            .await
        }
        Err(e) => Reply::Error(e),
    }
}

/// Seals, records and queues the request of a call; its correlation (an earlier
/// call's, when this is the agent's retry of it).
async fn start(
    b: &Arc<Bridge>,
    agent: &str,
    peer: &str,
    method: Method,
    params: &Map<String, Value>,
    idem: &str,
) -> Result<String, RpcError> {
    let Some(peer_config) = b.peer(peer) else {
        return Err(RpcError::invalid_request("no such peer"));
    };
    let op: Operation = method
        .token()
        .parse()
        .map_err(|_| RpcError::method_not_found(method.jsonrpc_name()))?;
    let correlation = new_id();
    let now = time::OffsetDateTime::now_utc();
    let mut env = Envelope::new(Kind::Request, op, &new_id());
    env.set("correlationId", &correlation);
    if op.is_effectful() {
        env.set("idempotencyKey", &idem);
    }
    env.set("createdAt", &stamp(now));
    env.set(
        "expiresAt",
        &stamp(now + time::Duration::seconds(b.config.expiry_secs as i64)),
    );
    let message = params.get("message");
    if let Some(ctx) = message
        .and_then(|m| m.get("contextId"))
        .and_then(Value::as_str)
    {
        env.set("contextId", &ctx);
    }
    let task = message
        .and_then(|m| m.get("taskId"))
        .or_else(|| params.get("id").filter(|_| method != Method::SendMessage))
        .and_then(Value::as_str);
    if let Some(t) = task {
        env.set("taskId", &t);
    }
    // Whether the caller waits is the bridge's to answer (it returns at once, or
    // after bridge.wait_secs); the remote side answers when it has an answer.
    let mut params = params.clone();
    if let Some(c) = params
        .get_mut("configuration")
        .and_then(Value::as_object_mut)
    {
        c.remove("returnImmediately");
    }
    // The payload last, where a reader looks for it.
    env.remove("payload");
    env.set("payload", &params);
    let plain = MailA2aMessage::new(agent, &[peer], env);
    let profile = peer_config
        .profile
        .as_deref()
        .and_then(|p| p.parse::<Profile>().ok());
    let group = peer_config.group.clone();
    // A retry of a call already made: that call.
    let earlier = b
        .state
        .earlier_call(agent, peer, method.jsonrpc_name(), idem)
        .map_err(|e| RpcError::internal(&e.to_string()))?;
    if let Some(c) = earlier {
        return Ok(c);
    }
    let sealed = b.seal(plain, profile, group).await.map_err(|e| {
        tracing::warn!(agent, peer, error = %e, "bridge: a call not sealed");
        RpcError::internal(&format!("cannot seal the request: {e}"))
    })?;
    match b
        .state
        .new_call(
            &correlation,
            agent,
            peer,
            method.jsonrpc_name(),
            idem,
            &sealed,
        )
        .map_err(|e| RpcError::internal(&e.to_string()))?
    {
        Ok(()) => {}
        Err(earlier) => return Ok(earlier),
    }
    let to = [peer.to_string()];
    b.queue(agent, &to, &correlation, sealed)
        .await
        .map_err(|e| {
            tracing::warn!(agent, peer, error = %e, "bridge: a call not queued");
            RpcError::internal(&format!("cannot queue the request: {e}"))
        })?;
    tracing::info!(agent, peer, method = method.jsonrpc_name(), correlation = %correlation, "bridge: call mailed");
    b.state
        .queued(&correlation)
        .map_err(|e| RpcError::internal(&e.to_string()))?;
    Ok(correlation)
}

/// Waits for the final answer of `correlation` (at most `bridge.wait_secs`, or not at
/// all when `immediate`); `pending` says what the caller gets when it has not come.
async fn wait(
    b: &Arc<Bridge>,
    correlation: &str,
    immediate: bool,
    pending: impl Fn(&str) -> Reply,
) -> Reply {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(b.config.wait_secs);
    loop {
        let notified = b.answers.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        match b.state.answers(correlation, 0) {
            Ok(answers) => {
                if let Some(r) = resolve(b, correlation, answers) {
                    return r;
                }
            }
            Err(e) => return Reply::Error(RpcError::internal(&e.to_string())),
        }
        if immediate {
            return pending(correlation);
        }
        // A bounded wait per look: a wake-up missed between two looks costs a second.
        let step = std::time::Duration::from_secs(1);
        let until = deadline.min(tokio::time::Instant::now() + step);
        if tokio::time::timeout_at(until, notified).await.is_err()
            && tokio::time::Instant::now() >= deadline
        {
            return pending(correlation);
        }
    }
}

/// The result of a call whose final answer is among `answers`.
fn resolve(b: &Bridge, correlation: &str, answers: Vec<Answer>) -> Option<Reply> {
    let answers = in_order(answers);
    let last = answers.iter().find(|a| a.is_final)?;
    let body: Value = serde_json::from_str(&last.body).unwrap_or_default();
    Some(match last.kind.as_str() {
        "error" => Reply::Error(rpc::from_a2a_error(&body)),
        "response" => Reply::Result(body),
        // A message/send answered with task events: the task as it ended.
        _ => match body.get("message") {
            Some(m) => Reply::Result(json!({ "message": m })),
            None => {
                let call = b.state.call(correlation).ok().flatten();
                let task = call
                    .as_ref()
                    .and_then(|c| Some((c.agent.clone(), c.peer.clone(), c.task_id.clone()?)))
                    .and_then(|(a, p, t)| b.state.task(&a, &p, &t).ok().flatten());
                match task {
                    Some((t, _, _)) => Reply::Result(
                        json!({ "task": serde_json::from_str::<Value>(&t).unwrap_or_default() }),
                    ),
                    None => Reply::Result(body),
                }
            }
        },
    })
}

/// The Task a `SendMessage` not yet finally answered returns: the remote task as
/// far as its events told, else submitted, named by the call.
fn pending_send(
    b: &Bridge,
    agent: &str,
    peer: &str,
    correlation: &str,
    context: Option<&Value>,
) -> Reply {
    match known_task(b, agent, peer, correlation) {
        Ok(Some(t)) if t.get("id").and_then(Value::as_str) != Some(correlation) => {
            Reply::Result(json!({ "task": t }))
        }
        _ => Reply::Result(json!({ "task": pending_task(correlation, context) })),
    }
}

fn pending_task(correlation: &str, context: Option<&Value>) -> Value {
    json!({
        "id": correlation,
        "contextId": context.cloned().unwrap_or_else(|| correlation.into()),
        "status": {
            "state": "TASK_STATE_SUBMITTED",
            "timestamp": stamp(time::OffsetDateTime::now_utc()),
        },
    })
}

/// A task `agent` may read from the state at `peer`'s URL: a remote task that peer's
/// answer named, or a call of the agent's to that peer named by its correlation.
fn known_task(b: &Bridge, agent: &str, peer: &str, id: &str) -> Result<Option<Value>, RpcError> {
    let internal = |e: super::state::StateError| RpcError::internal(&e.to_string());
    if let Some((task, _, _)) = b.state.task(agent, peer, id).map_err(internal)? {
        return Ok(serde_json::from_str(&task).ok());
    }
    let Some(call) = b
        .state
        .call_of(agent, id)
        .map_err(internal)?
        .filter(|c| c.peer == peer)
    else {
        return Ok(None);
    };
    if let Some(t) = &call.task_id {
        if let Some((task, _, _)) = b.state.task(agent, peer, t).map_err(internal)? {
            return Ok(serde_json::from_str(&task).ok());
        }
    }
    let answers = in_order(b.state.answers(id, 0).map_err(internal)?);
    let Some(last) = answers.iter().find(|a| a.is_final) else {
        return Ok(Some(pending_task(id, None)));
    };
    let body: Value = serde_json::from_str(&last.body).unwrap_or_default();
    let (state, message) = match (last.kind.as_str(), body.get("message")) {
        ("error", _) => (
            "TASK_STATE_FAILED",
            Some(json!({
                "messageId": new_id(),
                "role": "ROLE_AGENT",
                "parts": [{"text": body.get("message").and_then(Value::as_str).unwrap_or("failed")}],
            })),
        ),
        (_, Some(m)) => ("TASK_STATE_COMPLETED", Some(m.clone())),
        _ => ("TASK_STATE_COMPLETED", None),
    };
    let mut task = pending_task(id, None);
    task["status"]["state"] = state.into();
    if let Some(m) = message {
        task["status"]["message"] = m;
    }
    Ok(Some(task))
}

/// The task after an answer's `body`: the Task it carries, or `task` with the status
/// or artifact update it brings applied; `task` itself when it names none.
fn apply(task: Option<Value>, body: &Value) -> Option<Value> {
    if let Some(t) = body.get("task") {
        return Some(t.clone());
    }
    if body.get("status").is_some() && body.get("id").is_some() {
        return Some(body.clone());
    }
    let (update, is_status) = match (body.get("statusUpdate"), body.get("artifactUpdate")) {
        (Some(u), _) => (u, true),
        (None, Some(u)) => (u, false),
        _ => return task,
    };
    let mut task = task.unwrap_or_else(|| {
        json!({
            "id": update.get("taskId").cloned().unwrap_or_default(),
            "contextId": update.get("contextId").cloned().unwrap_or_default(),
        })
    });
    if is_status {
        task["status"] = update.get("status").cloned().unwrap_or_default();
    } else if let Some(artifact) = update.get("artifact") {
        let append = update
            .get("append")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let artifact_id = artifact.get("artifactId").cloned();
        if !task.get("artifacts").is_some_and(Value::is_array) {
            task["artifacts"] = json!([]);
        }
        if let Some(list) = task["artifacts"].as_array_mut() {
            let same = list.iter_mut().find(|a| {
                a.get("artifactId").is_some() && a.get("artifactId") == artifact_id.as_ref()
            });
            match same {
                Some(existing) if append => {
                    let parts = artifact
                        .get("parts")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    if let Some(p) = existing.get_mut("parts").and_then(Value::as_array_mut) {
                        p.extend(parts);
                    }
                }
                Some(existing) => *existing = artifact.clone(),
                None => list.push(artifact.clone()),
            }
        }
    }
    Some(task)
}

/// The answers of a call from the first up to the first gap: those a caller may be
/// shown (mail reorders; a gap waits for its message).
pub(crate) fn in_order(answers: Vec<Answer>) -> Vec<Answer> {
    answers
        .into_iter()
        .enumerate()
        .take_while(|(i, a)| a.sequence == *i as u64 + 1)
        .map(|(_, a)| a)
        .collect()
}

/// The remote task of a call as its answers so far, in order, leave it (with its id),
/// if they name one.
pub(crate) fn task_from(answers: Vec<Answer>) -> Option<(String, String)> {
    let answers = in_order(answers);
    let task = answers.iter().fold(None, |t, a| {
        let body: Value = serde_json::from_str(&a.body).unwrap_or_default();
        if a.kind == "error" {
            t
        } else {
            apply(t, &body)
        }
    })?;
    let id = task.get("id").and_then(Value::as_str)?.to_string();
    (!id.is_empty()).then(|| (id, task.to_string()))
}

/// Queues again the requests sealed and recorded but not queued when the bridge
/// last stopped (each under its correlation: a copy already queued is not queued
/// twice).
pub(crate) async fn requeue(b: &Arc<Bridge>) {
    let rows = match b.state.unqueued() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "bridge: cannot read the calls to queue");
            return;
        }
    };
    for (correlation, agent, peer, sealed) in rows {
        match b.queue(&agent, &[peer], &correlation, sealed).await {
            Ok(()) => {
                let _ = b.state.queued(&correlation);
            }
            Err(e) => tracing::error!(error = %e, "bridge: cannot queue a call"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(sequence: u64, is_final: bool, body: Value) -> Answer {
        Answer {
            sequence,
            kind: "event".into(),
            is_final,
            body: body.to_string(),
        }
    }

    /// Events applied in sequence order, whatever order they were recorded in: a
    /// status after the artifacts, appended parts joined, and nothing past a gap.
    #[test]
    fn the_task_is_rebuilt_in_sequence_order_up_to_the_first_gap() {
        let task = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}});
        let art = |text: &str, append: bool| {
            json!({"artifactUpdate": {"taskId": "t", "append": append,
                "artifact": {"artifactId": "a", "parts": [{"text": text}]}}})
        };
        let done =
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}});
        let all = vec![
            answer(1, false, task),
            answer(2, false, art("one", false)),
            answer(3, false, art("two", true)),
            answer(4, true, done),
        ];
        let (id, t) = task_from(all.clone()).unwrap();
        let t: Value = serde_json::from_str(&t).unwrap();
        assert_eq!(id, "t");
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(
            t["artifacts"][0]["parts"],
            json!([{"text": "one"}, {"text": "two"}])
        );
        // Sequence 3 missing: the task is as 1 and 2 leave it, not completed.
        let gap: Vec<Answer> = all.into_iter().filter(|a| a.sequence != 3).collect();
        let (_, t) = task_from(gap).unwrap();
        let t: Value = serde_json::from_str(&t).unwrap();
        assert_eq!(t["status"]["state"], "TASK_STATE_SUBMITTED");
        assert_eq!(t["artifacts"][0]["parts"], json!([{"text": "one"}]));
    }

    #[test]
    fn fail_answers_after_a_gap_are_not_shown() {
        let a = vec![answer(1, false, json!({})), answer(3, true, json!({}))];
        assert_eq!(in_order(a).len(), 1);
        assert!(in_order(vec![answer(2, true, json!({}))]).is_empty());
    }

    /// A message answer names no task; an error answer changes none.
    #[test]
    fn a_message_or_an_error_names_no_task() {
        let m = answer(
            1,
            true,
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": []}}),
        );
        assert!(task_from(vec![m]).is_none());
    }
}
