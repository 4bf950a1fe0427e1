//! One untrusted HTTP request to `mailseal bridge`, read by its A2A v1.0 parser
//! (`mailseal::bridge::rpc`) as a local agent's SDK would send it. The first byte picks
//! the binding and the depth limit: even, a JSON-RPC body (the rest of the input); odd,
//! an HTTP+JSON request written as `VERB PATH[?QUERY]`, a line feed, then the body;
//! `max_depth` is the byte halved (0 to 127; the parser caps it at 100). The JSON-RPC
//! input is also read as what the bridge's other side reads: a MailA2A error object
//! (`from_a2a_error`), a JSON-RPC error and an HTTP+JSON error body from a local agent.
//! Invariants: no panic; a call's method round-trips through its JSON-RPC name and its
//! MailA2A token, and the call, written back as a JSON-RPC request, reads as the same
//! call (an HTTP+JSON one as its JSON-RPC twin); a refusal has a message of printable
//! ASCII within the bound, and renders, whatever the id (the request's, null, any JSON
//! value), as a JSON-RPC error whose id and code read back, as an HTTP+JSON error whose
//! body repeats its 4xx or 5xx status, and as a MailA2A error object that reads back
//! as the same error. What is rendered is read back with serde_json, which stops at 128
//! levels: a JSON value deeper than the parser's ceiling (`MAX_DEPTH_CEILING`) is not
//! tried as an id (the bridge's ids are scalars), and an error read from a peer whose
//! data is deeper is rendered but not read back (each rendering puts the data five
//! levels down: `{"error": {"data": [{"metadata": {"data": ...}}]}}`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailseal::bridge::rpc::{self, Call, Method, RpcError};
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let max_depth = usize::from(mode >> 1);
    if mode & 1 == 0 {
        match rpc::parse_jsonrpc(input, max_depth) {
            Ok(call) => check_call(&call, max_depth, false),
            Err(err) => check_refusal(&err, input, true),
        }
        if let Ok(value) = serde_json::from_slice::<Value>(input) {
            check_refusal(&rpc::from_a2a_error(&value), input, false);
            check_refusal(&rpc::read_jsonrpc_error(&value), input, false);
        }
        check_refusal(&rpc::read_rest_error(400, input), input, false);
    } else {
        let (head, body) = match input.iter().position(|&b| b == b'\n') {
            Some(at) => (&input[..at], &input[at + 1..]),
            None => (input, &[][..]),
        };
        let head = String::from_utf8_lossy(head);
        let (verb, target) = head.split_once(' ').unwrap_or((&head, ""));
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (target, None),
        };
        match rpc::parse_rest(verb, path, query, body, max_depth) {
            Ok(call) => check_call(&call, max_depth, true),
            Err(err) => check_refusal(&err, input, true),
        }
    }
});

fn check_call(call: &Call, max_depth: usize, rest: bool) {
    let method = call.method;
    assert_eq!(Method::from_jsonrpc(method.jsonrpc_name()), Some(method));
    assert_eq!(Method::from_token(method.token()), Some(method));
    assert_eq!(
        call.id.is_none(),
        rest,
        "a JSON-RPC call has an id, a REST one none"
    );
    if let Some(id) = &call.id {
        assert!(
            id.is_string() || id.is_null() || id.is_i64() || id.is_u64(),
            "id {id}"
        );
    }
    // Written back as a JSON-RPC request (a REST call's object is one level above its
    // body, or at depth 1 when made from the path and query alone), it reads the same.
    let id = call.id.clone().unwrap_or(json!(1));
    let depth = if rest {
        max_depth.max(1) + 1
    } else {
        max_depth
    };
    if depth <= rpc::MAX_DEPTH_CEILING {
        let again = json!({"jsonrpc": "2.0", "id": id, "method": method.jsonrpc_name(), "params": call.params});
        let back = rpc::parse_jsonrpc(again.to_string().as_bytes(), depth)
            .unwrap_or_else(|e| panic!("a call written back is refused: {e}"));
        assert_eq!(back.method, method);
        assert!(same(
            &Value::Object(back.params),
            &Value::Object(call.params.clone())
        ));
        assert_eq!(back.id, Some(id.clone()));
    }
    let sent = parse(&rpc::jsonrpc_result(
        &id,
        &Value::Object(call.params.clone()),
    ));
    assert_eq!(sent["id"], id);
}

/// `ours`: the refusal is the parser's own (its message is ASCII we wrote); otherwise
/// it was read from a peer's or an agent's error and only its length is bounded.
fn check_refusal(err: &RpcError, input: &[u8], ours: bool) {
    assert!(
        err.message.len() <= rpc::MAX_ERROR_MESSAGE,
        "message of {} bytes",
        err.message.len()
    );
    if ours {
        assert!(
            err.message.bytes().all(|b| (b' '..=b'~').contains(&b)),
            "unescaped input in {:?}",
            err.message
        );
        assert!(err
            .id
            .as_ref()
            .is_none_or(|id| id.is_string() || id.is_null() || id.is_i64() || id.is_u64()));
    }
    let mut ids = vec![
        err.id.clone(),
        None,
        Some(Value::Null),
        Some(json!(String::from_utf8_lossy(input))),
    ];
    if let Ok(value) = serde_json::from_slice::<Value>(input) {
        if depth(&value) <= rpc::MAX_DEPTH_CEILING {
            ids.push(Some(value));
        }
    }
    let readable = err
        .data
        .as_ref()
        .is_none_or(|data| depth(data) <= rpc::MAX_DEPTH_CEILING);
    for id in ids {
        let err = RpcError {
            id: id.clone(),
            ..err.clone()
        };
        let rendered = rpc::jsonrpc_error(&err);
        let sse = rpc::jsonrpc_sse_error(&err);
        if !readable {
            continue;
        }
        let sent = parse(&rendered);
        assert_eq!(sent["jsonrpc"], "2.0");
        assert!(
            same(&sent["id"], &id.unwrap_or(Value::Null)),
            "id {}",
            sent["id"]
        );
        assert_eq!(sent["error"]["code"], json!(err.code));
        let back = rpc::read_jsonrpc_error(&sent["error"]);
        assert_eq!((back.code, &back.message), (err.code, &err.message));
        parse(&sse["event: error\r\ndata: ".len()..]);
    }
    let (status, body) = rpc::rest_error(err);
    assert!((400..=599).contains(&status), "status {status}");
    if readable {
        assert_eq!(parse(&body)["error"]["code"], json!(status));
    }
    let object = rpc::to_a2a_error(err);
    let back = rpc::from_a2a_error(&object);
    if err.a2a_type().is_some() {
        assert_eq!(
            (back.code, &back.message, &back.data),
            (err.code, &err.message, &err.data)
        );
    } else {
        assert_eq!(
            back.code, -32603,
            "a code of no A2A error is an InternalError"
        );
    }
}

/// Equal JSON values, but for the last bits of a float: serde_json, built without
/// `float_roundtrip` (as mailseal is), reads some float literals a unit in the last place
/// off, its own output among them.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-15
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Levels of arrays and objects: a scalar is 0, `[]` 1.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "rendered bytes are not JSON ({e}): {}",
            String::from_utf8_lossy(bytes)
        )
    })
}
