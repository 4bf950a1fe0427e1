//! Calls to a local agent's own A2A endpoint: the interface its Agent Card declares
//! (JSON-RPC preferred, else HTTP+JSON), over hyper's client, with SSE read as the
//! events come. Only `http://` endpoints (agents on loopback or an internal network);
//! what an agent answers is bounded (`MAX_ANSWER` a response or an event).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Map, Value};

use super::config::BridgeConfig;
use super::rpc::{self, Method, RpcError};

/// The most an agent's response, or one of its events, may take.
const MAX_ANSWER: usize = 16 << 20;

/// The binding of an agent's interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// JSON-RPC 2.0.
    JsonRpc,
    /// HTTP+JSON (REST).
    Rest,
}

/// Where an agent is called.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The interface's URL.
    pub url: String,
    /// Its binding.
    pub binding: Binding,
    /// Whether its card says it streams (`capabilities.streaming`).
    pub streaming: bool,
}

/// The local agents' endpoints, found from their cards when first called.
pub struct Agents {
    cards: HashMap<String, String>,
    resolved: Mutex<HashMap<String, Endpoint>>,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    next_id: std::sync::atomic::AtomicU64,
}

fn unreachable(why: impl std::fmt::Display) -> RpcError {
    RpcError::internal(&format!("the local agent cannot be reached: {why}"))
}

impl Agents {
    /// The agents of `config` that take calls (those with a card).
    pub fn new(config: &BridgeConfig) -> Agents {
        let cards = config
            .agents
            .iter()
            .filter_map(|a| {
                Some((
                    crate::message::Mailbox::new(&a.address).normalized(),
                    a.card.clone()?,
                ))
            })
            .collect();
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        connector.set_nodelay(true);
        Agents {
            cards,
            resolved: Mutex::new(HashMap::new()),
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout: Duration::from_secs(config.agent_timeout_secs),
            next_id: Default::default(),
        }
    }

    async fn get(&self, url: &str) -> Result<(u16, Bytes), RpcError> {
        self.send("GET", url, None).await
    }

    async fn send(
        &self,
        verb: &str,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Bytes), RpcError> {
        let response = tokio::time::timeout(self.timeout, self.request(verb, url, body))
            .await
            .map_err(|_| unreachable("timed out"))??;
        let status = response.status().as_u16();
        let limited = http_body_util::Limited::new(response.into_body(), MAX_ANSWER);
        let bytes = tokio::time::timeout(self.timeout, limited.collect())
            .await
            .map_err(|_| unreachable("timed out"))?
            .map_err(unreachable)?
            .to_bytes();
        Ok((status, bytes))
    }

    async fn request(
        &self,
        verb: &str,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, RpcError> {
        let mut req = hyper::Request::builder()
            .method(verb)
            .uri(url)
            .header("A2A-Version", "1.0")
            .header("Accept", "application/json, text/event-stream");
        if body.is_some() {
            req = req.header("Content-Type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(unreachable)?;
        self.client.request(req).await.map_err(unreachable)
    }

    /// Where `agent` is called: the first interface of its card the bridge speaks.
    pub async fn endpoint(&self, agent: &str) -> Result<Endpoint, RpcError> {
        if let Some(e) = self
            .resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(agent)
        {
            return Ok(e.clone());
        }
        let Some(card_url) = self.cards.get(agent) else {
            return Err(RpcError::unsupported_operation()
                .with_message("this agent takes no calls (no card is configured)"));
        };
        let (status, body) = self.get(card_url).await?;
        if status != 200 {
            return Err(unreachable(format!("its card answered HTTP {status}")));
        }
        let card: Value =
            serde_json::from_slice(&body).map_err(|_| unreachable("its card is not JSON"))?;
        let interfaces = card
            .get("supportedInterfaces")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let pick = |binding: &str| {
            interfaces.iter().find_map(|i| {
                (i.get("protocolBinding").and_then(Value::as_str) == Some(binding))
                    .then(|| i.get("url").and_then(Value::as_str).map(str::to_string))
                    .flatten()
            })
        };
        let streaming = card
            .get("capabilities")
            .and_then(|c| c.get("streaming"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let endpoint = match (pick("JSONRPC"), pick("HTTP+JSON")) {
            (Some(url), _) => Endpoint {
                url,
                binding: Binding::JsonRpc,
                streaming,
            },
            (None, Some(url)) => Endpoint {
                url,
                binding: Binding::Rest,
                streaming,
            },
            _ => {
                return Err(unreachable(
                    "its card declares neither JSONRPC nor HTTP+JSON",
                ))
            }
        };
        if !endpoint.url.starts_with("http://") {
            return Err(unreachable("only http:// agent endpoints are called"));
        }
        self.resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(agent.to_string(), endpoint.clone());
        Ok(endpoint)
    }

    fn jsonrpc_body(&self, method: Method, params: &Map<String, Value>) -> Vec<u8> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        json!({"jsonrpc": "2.0", "id": id, "method": method.jsonrpc_name(), "params": params})
            .to_string()
            .into_bytes()
    }

    /// One call that answers once.
    pub async fn call(
        &self,
        agent: &str,
        method: Method,
        params: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let e = self.endpoint(agent).await?;
        let (status, body) = match e.binding {
            Binding::JsonRpc => {
                self.send("POST", &e.url, Some(self.jsonrpc_body(method, params)))
                    .await?
            }
            Binding::Rest => {
                let (verb, url, body) = rest_request(&e.url, method, params);
                self.send(verb, &url, body).await?
            }
        };
        let v: Value = serde_json::from_slice(&body).map_err(|_| {
            RpcError::invalid_agent_response().with_message("the agent's answer is not JSON")
        })?;
        match e.binding {
            Binding::JsonRpc => jsonrpc_outcome(v),
            Binding::Rest if (200..300).contains(&status) => Ok(v),
            Binding::Rest => Err(rest_failure(status, &v)),
        }
    }

    /// A streaming call: each event, in order, to `event`, until the stream ends.
    pub async fn stream(
        &self,
        agent: &str,
        method: Method,
        params: &Map<String, Value>,
        event: &mut (dyn FnMut(Value) -> futures_util::future::BoxFuture<'static, Result<(), RpcError>>
                  + Send),
    ) -> Result<(), RpcError> {
        let e = self.endpoint(agent).await?;
        let response = match e.binding {
            Binding::JsonRpc => {
                self.request("POST", &e.url, Some(self.jsonrpc_body(method, params)))
                    .await?
            }
            Binding::Rest => {
                let (verb, url, body) = rest_request(&e.url, method, params);
                self.request(verb, &url, body).await?
            }
        };
        let status = response.status().as_u16();
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = response.into_body();
        if !sse {
            let bytes = http_body_util::Limited::new(body, MAX_ANSWER)
                .collect()
                .await
                .map_err(unreachable)?
                .to_bytes();
            let v: Value = serde_json::from_slice(&bytes).map_err(|_| {
                RpcError::invalid_agent_response()
                    .with_message("the agent's answer is neither SSE nor JSON")
            })?;
            return match e.binding {
                Binding::JsonRpc => jsonrpc_outcome(v).map(drop),
                Binding::Rest => Err(rest_failure(status, &v)),
            };
        }
        let mut buffer: Vec<u8> = Vec::new();
        loop {
            let frame = match tokio::time::timeout(self.timeout, body.frame()).await {
                Err(_) => return Err(unreachable("its stream fell silent")),
                Ok(None) => break,
                Ok(Some(f)) => f.map_err(unreachable)?,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buffer.extend_from_slice(&data);
            if buffer.len() > MAX_ANSWER {
                return Err(RpcError::invalid_agent_response()
                    .with_message("an event larger than the bridge takes"));
            }
            while let Some((event_text, rest)) = split_event(&buffer) {
                let payload = sse_data(&event_text);
                let failed = event_text
                    .lines()
                    .any(|l| l.trim() == "event: error" || l.trim() == "event:error");
                buffer = rest;
                let Some(payload) = payload else { continue };
                let v: Value = serde_json::from_str(&payload).map_err(|_| {
                    RpcError::invalid_agent_response().with_message("an event is not JSON")
                })?;
                if failed {
                    // An error after the stream began: its own event type.
                    let object = v.get("error").cloned().unwrap_or(v);
                    return Err(rpc::from_a2a_error(&object));
                }
                let v = match e.binding {
                    Binding::JsonRpc => jsonrpc_outcome(v)?,
                    Binding::Rest if v.get("error").is_some() => return Err(rest_failure(500, &v)),
                    Binding::Rest => v,
                };
                event(v).await?;
            }
        }
        Ok(())
    }
}

/// The first complete event of `buffer` (up to a blank line) and what follows.
fn split_event(buffer: &[u8]) -> Option<(String, Vec<u8>)> {
    let text = buffer;
    let mut i = 0;
    while i + 1 < text.len() {
        if text[i] == b'\n' && text[i + 1] == b'\n' {
            return Some((
                String::from_utf8_lossy(&text[..i]).into_owned(),
                text[i + 2..].to_vec(),
            ));
        }
        if i + 3 < text.len() && &text[i..i + 4] == b"\r\n\r\n" {
            return Some((
                String::from_utf8_lossy(&text[..i]).into_owned(),
                text[i + 4..].to_vec(),
            ));
        }
        i += 1;
    }
    None
}

/// The `data:` lines of one SSE event, joined (None: a comment or keep-alive).
fn sse_data(event: &str) -> Option<String> {
    let lines: Vec<&str> = event
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

fn jsonrpc_outcome(v: Value) -> Result<Value, RpcError> {
    if let Some(e) = v.get("error") {
        return Err(rpc::read_jsonrpc_error(e));
    }
    v.get("result").cloned().ok_or_else(|| {
        RpcError::invalid_agent_response()
            .with_message("a JSON-RPC answer with neither result nor error")
    })
}

fn rest_failure(status: u16, v: &Value) -> RpcError {
    rpc::read_rest_error(status, v.to_string().as_bytes())
}

fn enc(s: &str) -> String {
    url_escape(s)
}

fn url_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The HTTP+JSON request of a call: verb, URL (from the interface's) and body.
pub fn rest_request(
    base: &str,
    method: Method,
    params: &Map<String, Value>,
) -> (&'static str, String, Option<Vec<u8>>) {
    let base = base.trim_end_matches('/');
    let s = |k: &str| {
        params
            .get(k)
            .and_then(Value::as_str)
            .map(enc)
            .unwrap_or_default()
    };
    let body = || Some(Value::Object(params.clone()).to_string().into_bytes());
    let query = |skip: &[&str]| {
        let q: Vec<String> = params
            .iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .filter_map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return None,
                };
                Some(format!("{}={}", enc(k), enc(&text)))
            })
            .collect();
        if q.is_empty() {
            String::new()
        } else {
            format!("?{}", q.join("&"))
        }
    };
    match method {
        Method::SendMessage => ("POST", format!("{base}/message:send"), body()),
        Method::SendStreamingMessage => ("POST", format!("{base}/message:stream"), body()),
        Method::GetTask => (
            "GET",
            format!("{base}/tasks/{}{}", s("id"), query(&["id"])),
            None,
        ),
        Method::ListTasks => ("GET", format!("{base}/tasks{}", query(&[])), None),
        Method::CancelTask => ("POST", format!("{base}/tasks/{}:cancel", s("id")), body()),
        Method::SubscribeToTask => ("GET", format!("{base}/tasks/{}:subscribe", s("id")), None),
        Method::CreateTaskPushNotificationConfig => (
            "POST",
            format!("{base}/tasks/{}/pushNotificationConfigs", s("taskId")),
            body(),
        ),
        Method::GetTaskPushNotificationConfig => (
            "GET",
            format!(
                "{base}/tasks/{}/pushNotificationConfigs/{}",
                s("taskId"),
                s("id")
            ),
            None,
        ),
        Method::ListTaskPushNotificationConfigs => (
            "GET",
            format!(
                "{base}/tasks/{}/pushNotificationConfigs{}",
                s("taskId"),
                query(&["taskId"])
            ),
            None,
        ),
        Method::DeleteTaskPushNotificationConfig => (
            "DELETE",
            format!(
                "{base}/tasks/{}/pushNotificationConfigs/{}",
                s("taskId"),
                s("id")
            ),
            None,
        ),
        Method::GetExtendedAgentCard => ("GET", format!("{base}/extendedAgentCard"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_split_at_blank_lines_and_their_data_joined() {
        let buf = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\"\ndata: :2}\r\n\r\nrest";
        let (first, rest) = split_event(buf).unwrap();
        assert_eq!(sse_data(&first).as_deref(), Some("{\"a\":1}"));
        let (second, rest) = split_event(&rest).unwrap();
        assert_eq!(sse_data(&second), None);
        let (third, rest) = split_event(&rest).unwrap();
        assert_eq!(sse_data(&third).as_deref(), Some("{\"b\"\n:2}"));
        assert_eq!(rest, b"rest");
    }

    #[test]
    fn rest_requests_follow_the_proto_routes() {
        let mut p = Map::new();
        p.insert("id".into(), "t/1".into());
        p.insert("historyLength".into(), 3.into());
        let (verb, url, body) = rest_request("http://h:1/", Method::GetTask, &p);
        assert_eq!(
            (verb, url.as_str(), body),
            ("GET", "http://h:1/tasks/t%2F1?historyLength=3", None)
        );
        let (verb, url, _) = rest_request("http://h:1", Method::CancelTask, &p);
        assert_eq!(
            (verb, url.as_str()),
            ("POST", "http://h:1/tasks/t%2F1:cancel")
        );
    }
}
