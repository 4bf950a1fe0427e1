//! The A2A side of the bridge: for each remote peer a local agent may call, a URL
//! (`/peers/ADDRESS/`) serving A2A v1.0 over JSON-RPC 2.0 (POST to it) and HTTP+JSON
//! (`/peers/ADDRESS/message:send`, `/tasks/{id}`, …), server-sent events for the
//! streaming methods, and an Agent Card (`/peers/ADDRESS/.well-known/agent-card.json`)
//! that names both and, as a third interface, the peer's `mailto:` by MailA2A.
//!
//! Every call needs `Authorization: Bearer TOKEN`: the token is a local agent, which
//! acts only as its own address. Bodies are bounded (`bridge.max_body_bytes`), streams
//! open at once too (`bridge.max_streams`); what is refused gets its A2A error code.
//! TLS is rustls, from the gateway's loader.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method as Verb, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{json, Value};

use super::outbound::{self, Reply};
use super::rpc::{self, Call, RpcError};
use super::Bridge;

/// Connections served at once at most.
const MAX_CONNECTIONS: usize = 1024;

/// How long a client has to send a request's head (and to idle between requests).
const HEAD_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves until `shutdown` turns true.
pub(crate) async fn serve(
    b: Arc<Bridge>,
    listener: tokio::net::TcpListener,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let tls = match &b.config.tls {
        Some(files) => match crate::gateway::server::load_tls(files) {
            Ok(mut c) => {
                let mut c2 = (*c).clone();
                c2.alpn_protocols = vec![b"http/1.1".to_vec()];
                c = Arc::new(c2);
                Some(tokio_rustls::TlsAcceptor::from(c))
            }
            Err(e) => {
                tracing::error!(error = %e, "bridge: TLS; the A2A side is not served");
                return;
            }
        },
        None => None,
    };
    let app = router(b.clone());
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let Ok((stream, _)) = accepted else {
            // Out of descriptors, most often: a pause, not a spin.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        // At most so many connections at once; past that a new one is closed at once
        // (its peer retries), so idle or slow clients cannot take every descriptor.
        let Ok(slot) = connections.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        // Small replies on a kept-alive connection must not wait for Nagle.
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper_util::service::TowerToHyperService::new(app);
            // A request's head must come within HEAD_WITHIN (slowloris).
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_WITHIN);
            match tls {
                Some(acceptor) => {
                    let Ok(Ok(s)) = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        acceptor.accept(stream),
                    )
                    .await
                    else {
                        return;
                    };
                    let _ = http
                        .serve_connection(hyper_util::rt::TokioIo::new(s), service)
                        .await;
                }
                None => {
                    let _ = http
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                }
            }
        });
    }
}

/// The routes.
pub fn router(b: Arc<Bridge>) -> Router {
    Router::new()
        .route("/peers/{peer}/.well-known/agent-card.json", get(card))
        .route("/peers/{peer}", any(jsonrpc))
        .route("/peers/{peer}/", any(jsonrpc))
        .route("/peers/{peer}/{*rest}", any(rest))
        .with_state(b)
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [("content-type", "application/json")], body).into_response()
}

fn jsonrpc_failure(err: &RpcError) -> Response {
    json_response(StatusCode::OK, rpc::jsonrpc_error(err))
}

fn rest_failure(err: &RpcError) -> Response {
    let (status, body) = rpc::rest_error(err);
    json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body,
    )
}

/// A2A-Version a caller names, when it is not 1.x: the SDKs send it on every call (a
/// call without it is taken as 1.0, what this bridge speaks).
fn unsupported_version(headers: &HeaderMap) -> Option<RpcError> {
    let v = headers.get("a2a-version")?.to_str().unwrap_or("?").trim();
    (v != "1" && !v.starts_with("1.")).then(|| {
        RpcError::version_not_supported().with_message(format!(
            "A2A version {} is not served here (1.0 is)",
            crate::error::quoted(v)
        ))
    })
}

/// The agent the request's bearer token is.
fn authenticate(b: &Bridge, headers: &HeaderMap) -> Option<String> {
    let value = headers.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    b.agent_of(token.trim()).map(str::to_string)
}

fn unauthorized(rest: bool) -> Response {
    let err = RpcError::invalid_request("a bearer token of a local agent is required");
    let mut r = if rest {
        rest_failure(&err)
    } else {
        json_response(StatusCode::UNAUTHORIZED, rpc::jsonrpc_error(&err))
    };
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut().insert(
        "www-authenticate",
        axum::http::HeaderValue::from_static("Bearer"),
    );
    r
}

async fn read_body(b: &Bridge, body: Body) -> Result<Bytes, RpcError> {
    let limited = http_body_util::Limited::new(body, b.config.max_body_bytes);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(_) => Err(RpcError::invalid_request(
            "the request body is larger than this bridge takes",
        )),
    }
}

async fn card(State(b): State<Arc<Bridge>>, Path(peer): Path<String>) -> Response {
    let Some(p) = b.peer(&peer) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let url = format!("{}/peers/{}/", b.config.base_url(), p.address);
    let card = json!({
        "name": p.name.clone().unwrap_or_else(|| p.address.clone()),
        "description": format!("The A2A agent {}, reached by sealed mail (MailA2A) through mailseal bridge.", p.address),
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": format!("mailto:{}", p.address), "protocolBinding": "MailA2A", "protocolVersion": "1.0"},
        ],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "description": "the bearer token of a local agent of this bridge",
        }}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [],
    });
    json_response(StatusCode::OK, card.to_string().into_bytes())
}

async fn jsonrpc(
    State(b): State<Arc<Bridge>>,
    Path(peer): Path<String>,
    verb: Verb,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if verb != Verb::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let Some(agent) = authenticate(&b, &headers) else {
        return unauthorized(false);
    };
    if let Some(e) = unsupported_version(&headers) {
        return jsonrpc_failure(&e);
    }
    let bytes = match read_body(&b, body).await {
        Ok(x) => x,
        Err(e) => return json_response(StatusCode::PAYLOAD_TOO_LARGE, rpc::jsonrpc_error(&e)),
    };
    let call = match rpc::parse_jsonrpc(&bytes, crate::envelope::DEFAULT_MAX_JSON_DEPTH) {
        Ok(c) => c,
        Err(e) => return jsonrpc_failure(&e),
    };
    let id = call.id.clone().unwrap_or(Value::Null);
    if b.peer(&peer).is_none() {
        return jsonrpc_failure(&RpcError::invalid_request("no such peer").with_id(id));
    }
    let place = if call.method.streams() {
        match stream_place(&b, Some(&id)) {
            Ok(p) => Some(p),
            Err(refused) => return refused,
        }
    } else {
        None
    };
    match (dispatch(&b, &agent, &peer, call).await, place) {
        (Reply::Result(v), _) => json_response(StatusCode::OK, rpc::jsonrpc_result(&id, &v)),
        (Reply::Error(e), _) => jsonrpc_failure(&e.with_id(id)),
        (Reply::Stream(correlation), Some(p)) => sse(b, correlation, Some(id), p).await,
        (Reply::Stream(_), None) => jsonrpc_failure(
            &RpcError::internal("a stream of a method that answers once").with_id(id),
        ),
    }
}

async fn rest(
    State(b): State<Arc<Bridge>>,
    Path((peer, rest)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    verb: Verb,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if b.peer(&peer).is_none() {
        return rest_failure(&RpcError::task_not_found().with_message("no such peer"));
    }
    let Some(agent) = authenticate(&b, &headers) else {
        return unauthorized(true);
    };
    if let Some(e) = unsupported_version(&headers) {
        return rest_failure(&e);
    }
    let bytes = match read_body(&b, body).await {
        Ok(x) => x,
        Err(e) => {
            let (_, body) = rpc::rest_error(&e);
            return json_response(StatusCode::PAYLOAD_TOO_LARGE, body);
        }
    };
    let path = format!("/{rest}");
    let call = match rpc::parse_rest(
        verb.as_str(),
        &path,
        query.as_deref(),
        &bytes,
        crate::envelope::DEFAULT_MAX_JSON_DEPTH,
    ) {
        Ok(c) => c,
        Err(e) => return rest_failure(&e),
    };
    let place = if call.method.streams() {
        match stream_place(&b, None) {
            Ok(p) => Some(p),
            Err(refused) => return refused,
        }
    } else {
        None
    };
    match (dispatch(&b, &agent, &peer, call).await, place) {
        (Reply::Result(v), _) => (
            StatusCode::OK,
            [("content-type", rpc::REST_CONTENT_TYPE)],
            v.to_string().into_bytes(),
        )
            .into_response(),
        (Reply::Error(e), _) => rest_failure(&e),
        (Reply::Stream(correlation), Some(p)) => sse(b, correlation, None, p).await,
        (Reply::Stream(_), None) => rest_failure(&RpcError::internal(
            "a stream of a method that answers once",
        )),
    }
}

async fn dispatch(b: &Arc<Bridge>, agent: &str, peer: &str, call: Call) -> Reply {
    let peer = match b.peer(peer) {
        Some(p) => p.address.clone(),
        None => return Reply::Error(RpcError::invalid_request("no such peer")),
    };
    outbound::call(b, agent, &peer, call).await
}

/// A place for one more stream, or the refusal (taken before the call is mailed: a
/// stream refused sends nothing).
fn stream_place(
    b: &Bridge,
    id: Option<&Value>,
) -> Result<tokio::sync::OwnedSemaphorePermit, Response> {
    b.streams.clone().try_acquire_owned().map_err(|_| {
        let e = RpcError::internal("too many streams are open at this bridge; try again later");
        match id {
            Some(id) => jsonrpc_failure(&e.with_id(id.clone())),
            None => {
                let mut r = rest_failure(&e);
                *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                r
            }
        }
    })
}

/// The answers of `correlation` as server-sent events, in sequence order, until the
/// final one. `id`: the JSON-RPC id each event's response carries (None: HTTP+JSON,
/// each event the StreamResponse itself).
async fn sse(
    b: Arc<Bridge>,
    correlation: String,
    id: Option<Value>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let _permit = permit;
        let mut after = 0u64;
        let mut idle = 0u64;
        let horizon =
            tokio::time::Instant::now() + std::time::Duration::from_secs(b.config.expiry_secs);
        loop {
            let notified = b.answers.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let answers = match b.state.answers(&correlation, after) {
                Ok(a) => a,
                Err(_) => return,
            };
            let mut ended = false;
            for a in answers {
                // In order only: a gap waits (the receiver's stream rules hold it).
                if a.sequence != after + 1 {
                    break;
                }
                after = a.sequence;
                let body: Value = serde_json::from_str(&a.body).unwrap_or_default();
                let event = match (&id, a.kind.as_str()) {
                    (Some(id), "error") => {
                        rpc::jsonrpc_sse_error(&rpc::from_a2a_error(&body).with_id(id.clone()))
                    }
                    (Some(id), _) => rpc::jsonrpc_sse_event(id, &body),
                    (None, "error") => rpc::rest_sse_error(&rpc::from_a2a_error(&body)),
                    (None, _) => rpc::rest_sse_event(&body),
                };
                if tx.send(Bytes::from(event)).await.is_err() {
                    return;
                }
                if a.is_final {
                    ended = true;
                }
            }
            if ended || tokio::time::Instant::now() >= horizon {
                return;
            }
            // Woken by an answer this process took, or after a second (another
            // instance sharing the state may have taken it); a comment line every 15 s
            // keeps idle proxies from closing the stream.
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                    idle += 1;
                    if idle.is_multiple_of(15) && tx.send(Bytes::from_static(b": keep-alive\r\n\r\n")).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
