#!/usr/bin/env python3
"""The official A2A Python SDK (`a2a-sdk`) as an A2A client: the local caller of
`mailseal bridge` in its end-to-end tests and benchmark (and, pointed straight at
tests/peers/a2a_bridge_agent.py, the benchmark's baseline). It resolves the Agent Card,
builds the SDK's own client (ClientFactory, ClientConfig) for the transport given and
makes one kind of call; it shares no code with mailseal.

  a2a_bridge_client.py --card URL --transport JSONRPC|HTTP+JSON [--token T]
                       [--context-id C] [--task-id T] [--metadata JSON]
                       [--http-timeout SECS] ACTION ARGS

--card is the Agent Card's own URL (ending in .json) or the agent's base URL, to which
the SDK adds /.well-known/agent-card.json. With --token every request, the card's too,
carries "Authorization: Bearer T" (a header of the client's httpx client). --context-id,
--task-id and --metadata (a JSON object: the message's metadata) go into the message of
send, stream and bench.

  send TEXT [--return-immediately]   SendMessage, not streaming; blocking unless
                                     --return-immediately (the request's
                                     configuration.returnImmediately)
                                     prints {"kind": "message"|"task", "result": <it>}
  stream TEXT                        SendStreamingMessage
                                     prints {"events": [<StreamResponse>, ...]}, each
                                     event {"task"|"statusUpdate"|"artifactUpdate"|
                                     "message": ...} as it came
  get TASK_ID [--history-length N]   GetTask; prints {"result": <Task>}
  cancel TASK_ID                     CancelTask; prints {"result": <Task>}
  poll TASK_ID --until STATE --timeout SECS
                                     GetTask every 0.2 s until the task's state is STATE
                                     (COMPLETED, TASK_STATE_COMPLETED or completed);
                                     prints {"result": <Task>, "polls": n}
  bench TEXT --count N               N SendMessage calls, one after the other, on one
                                     client; prints {"count": N, "seconds": total,
                                     "latencies_ms": [...]}

Every object is printed as the SDK puts it on the wire (google.protobuf.json_format.
MessageToDict: camelCase names, enums by name such as "TASK_STATE_COMPLETED").
Exit status: 0 done; 3 the server answered with an A2A error, printed as
{"error": {"code": <its JSON-RPC code>, "message", "type": <SDK error class>,
"reason": <A2A reason, e.g. UNSUPPORTED_OPERATION>, "data": <ErrorInfo metadata>}}
(stream prints "events" received before it too); 2 a transport failure (no connection,
an HTTP status with no A2A error in it such as a 401, a card that cannot be read, no
interface of the transport in the card), the reason on stderr; 4 poll ran out of time
or the task ended in another state (prints {"result", "polls", "timeout": true} or
{..., "ended": true}); 64 a bad command line.
"""

import argparse
import asyncio
import json
import re
import sys
import time
import uuid

import httpx

from google.protobuf import json_format, struct_pb2

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2A_ERROR_REASONS, JSON_RPC_ERROR_CODE_MAP, A2AError

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}


class Usage(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(64)


class TransportFailure(Exception):
    pass


def out(document, status=0):
    print(json.dumps(document), flush=True)
    return status


def to_json(message):
    return json_format.MessageToDict(message)


def task_state(name):
    """TaskState from COMPLETED, completed, TASK_STATE_COMPLETED or its number."""
    if name.isdigit():
        return int(name)
    full = name.upper()
    if not full.startswith("TASK_STATE_"):
        full = "TASK_STATE_" + full
    try:
        return TaskState.Value(full)
    except ValueError as e:
        raise Usage(f"no task state {name!r}") from e


def error_document(e):
    """{"error": ...} for an A2A error the server sent, or None for a transport failure."""
    code = JSON_RPC_ERROR_CODE_MAP.get(type(e))
    message = getattr(e, "message", str(e))
    if code is None:
        # A JSON-RPC error whose code the SDK does not know comes as A2AClientError.
        m = re.match(r"JSON-RPC Error (-?\d+): (.*)", message, re.S)
        if not m:
            return None
        code, message = int(m.group(1)), m.group(2)
    error = {"code": code, "message": message, "type": type(e).__name__}
    reason = A2A_ERROR_REASONS.get(type(e))
    if reason:
        error["reason"] = reason
    if getattr(e, "data", None):
        error["data"] = e.data
    return {"error": error}


def user_message(args, text):
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                      parts=[Part(text=text)])
    if args.context_id:
        message.context_id = args.context_id
    if args.task_id:
        message.task_id = args.task_id
    if args.metadata is not None:
        metadata = struct_pb2.Struct()
        json_format.ParseDict(args.metadata, metadata)
        message.metadata.CopyFrom(metadata)
    return message


def send_request(args, text, return_immediately=False):
    request = SendMessageRequest(message=user_message(args, text))
    if return_immediately:
        request.configuration.return_immediately = True
    return request


async def first_result(client, request):
    """The one StreamResponse of a non-streaming SendMessage."""
    async for event in client.send_message(request):
        return event
    raise A2AClientError("SendMessage gave no result")


async def make_client(args, httpx_client):
    config = ClientConfig(
        streaming=args.action == "stream",
        httpx_client=httpx_client,
        supported_protocol_bindings=[args.transport],
    )
    # The factory first: it gives the httpx client its A2A-Version header, which the
    # card's request then carries too, as with the SDK's own create_from_url.
    factory = ClientFactory(config)
    if args.card.rstrip("/").endswith(".json"):
        resolver = A2ACardResolver(httpx_client, args.card, agent_card_path="")
    else:
        resolver = A2ACardResolver(httpx_client, args.card)
    card = await resolver.get_agent_card()
    try:
        return factory.create(card)
    except ValueError as e:
        raise TransportFailure(f"{e} (the card offers: "
                               f"{[i.protocol_binding for i in card.supported_interfaces]})")


async def run(args):
    headers = {}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    async with httpx.AsyncClient(headers=headers,
                                 timeout=httpx.Timeout(args.http_timeout)) as http:
        client = await make_client(args, http)
        events = []
        try:
            if args.action == "send":
                event = await first_result(
                    client, send_request(args, args.text, args.return_immediately))
                kind = "task" if event.HasField("task") else "message"
                return out({"kind": kind, "result": to_json(getattr(event, kind))})
            if args.action == "stream":
                async for event in client.send_message(send_request(args, args.text)):
                    events.append(to_json(event))
                return out({"events": events})
            if args.action == "get":
                request = GetTaskRequest(id=args.task)
                if args.history_length is not None:
                    request.history_length = args.history_length
                return out({"result": to_json(await client.get_task(request))})
            if args.action == "cancel":
                task = await client.cancel_task(CancelTaskRequest(id=args.task))
                return out({"result": to_json(task)})
            if args.action == "poll":
                want = task_state(args.until)
                deadline = time.monotonic() + args.timeout
                polls = 0
                while True:
                    task = await client.get_task(GetTaskRequest(id=args.task))
                    polls += 1
                    if task.status.state == want:
                        return out({"result": to_json(task), "polls": polls})
                    if task.status.state in TERMINAL:
                        return out({"result": to_json(task), "polls": polls, "ended": True}, 4)
                    if time.monotonic() >= deadline:
                        return out({"result": to_json(task), "polls": polls, "timeout": True}, 4)
                    await asyncio.sleep(0.2)
            if args.action == "bench":
                latencies = []
                start = time.perf_counter()
                for _ in range(args.count):
                    t0 = time.perf_counter()
                    await first_result(client, send_request(args, args.text))
                    latencies.append((time.perf_counter() - t0) * 1000.0)
                seconds = time.perf_counter() - start
                return out({"count": args.count, "seconds": seconds,
                            "latencies_ms": latencies})
            raise Usage(f"no action {args.action!r}")
        except A2AError as e:
            document = error_document(e)
            if document is None:
                raise
            if args.action == "stream":
                document["events"] = events
            return out(document, 3)
        finally:
            await client.close()


def add_common(parser, top):
    """The options of every action. They may stand before the action or after it: the
    copies after it default to nothing, so they do not undo those before it."""
    opt = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument("--card", **opt,
                        help="the Agent Card's URL, or the agent's base URL")
    parser.add_argument("--transport", **opt,
                        choices=[TransportProtocol.JSONRPC.value,
                                 TransportProtocol.HTTP_JSON.value])
    parser.add_argument("--token", **opt, help="sent as Authorization: Bearer TOKEN")
    parser.add_argument("--context-id", **opt)
    parser.add_argument("--task-id", **opt)
    parser.add_argument("--metadata", type=json.loads, **opt,
                        help="a JSON object: the message's metadata")
    parser.add_argument("--http-timeout", type=float, **(opt or {"default": 300.0}),
                        help="seconds for each HTTP read (default 300)")


def parse_args(argv):
    common = Parser(add_help=False)
    add_common(common, top=False)
    parser = Parser(description=__doc__.split("\n\n")[0])
    add_common(parser, top=True)
    actions = parser.add_subparsers(dest="action", required=True, parser_class=Parser)
    p = actions.add_parser("send", parents=[common])
    p.add_argument("text")
    p.add_argument("--return-immediately", "--non-blocking", action="store_true")
    p = actions.add_parser("stream", parents=[common])
    p.add_argument("text")
    p = actions.add_parser("get", parents=[common])
    p.add_argument("task")
    p.add_argument("--history-length", type=int)
    p = actions.add_parser("cancel", parents=[common])
    p.add_argument("task")
    p = actions.add_parser("poll", parents=[common])
    p.add_argument("task")
    p.add_argument("--until", required=True)
    p.add_argument("--timeout", type=float, required=True)
    p = actions.add_parser("bench", parents=[common])
    p.add_argument("text")
    p.add_argument("--count", type=int, required=True)
    args = parser.parse_args(argv)
    for name in ("card", "transport"):
        if not getattr(args, name):
            parser.error(f"the following arguments are required: --{name}")
    return args


def main(argv):
    args = parse_args(argv)
    try:
        return asyncio.run(run(args))
    except Usage as e:
        sys.stderr.write(f"a2a_bridge_client: {e}\n")
        return 64
    except (A2AError, TransportFailure, httpx.HTTPError, OSError) as e:
        sys.stderr.write(f"a2a_bridge_client: transport failure: {type(e).__name__}: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
