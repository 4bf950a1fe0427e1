#!/usr/bin/env python3
"""The official A2A Python SDK (`a2a-sdk`) as a peer: it makes A2A v1.0 objects with its
own types and serialises them as its JSON-RPC server and client put them on the wire,
and it parses back what mailseal opened. It shares no code with mailseal.

  a2a_sdk_peer.py make    prints a JSON list: one item per object, {name, field, type,
                          json} (json: the SDK's own text for the envelope's `field`),
                          plus the attachment the request's file part names
  a2a_sdk_peer.py check   reads a JSON list of {name, json} (the text mailseal opened)
                          on stdin; parses each with the SDK as its type, compares it
                          with the object `make` built, and prints one line a check:
                          "ok NAME" or "FAIL NAME: why"; exits 1 on any failure

The objects are built the same way on every run (fixed ids and times), so `check`
compares against a fresh build of what `make` printed.
"""

import base64
import json
import sys

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers import response_helpers
from a2a.types import (
    Artifact,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotFoundError,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils import json_utils
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP

# The attachment the request's file part refers to by `cid:` (MailA2A section 4.3).
REPORT_CID = "report.csv@agent.example"
REPORT_BYTES = b"region,total\nnorth,12\nsouth,7\n"


def timestamp(seconds):
    t = timestamp_pb2.Timestamp()
    t.FromSeconds(seconds)
    return t


def data(value):
    """A DataPart's `data` (google.protobuf.Value) from plain JSON."""
    v = struct_pb2.Value()
    json_format.ParseDict(value, v)
    return v


def user_message():
    """The user's message: text (not only ASCII), a file by `cid:`, inline bytes and
    structured data whose opaque JSON holds a `url` of its own."""
    return Message(
        message_id="msg-user-1",
        context_id="ctx-1",
        role=Role.ROLE_USER,
        parts=[
            Part(text="Quarterly totals, please. Grüße aus Köln, 東京から"),
            Part(url="cid:" + REPORT_CID, media_type="text/csv", filename="report.csv"),
            Part(raw=b"\x00\x01\x02binary\xff", media_type="application/octet-stream",
                 filename="blob.bin"),
            Part(data=data({"url": "cid:not-a-part@agent.example", "rows": [1, 2.5, None],
                            "nested": {"ok": True}}),
                 media_type="application/json"),
        ],
        metadata=struct_pb2.Struct(fields={"trace": struct_pb2.Value(string_value="t-1")}),
    )


def agent_message(text):
    return Message(
        message_id="msg-agent-1",
        context_id="ctx-1",
        task_id="task-1",
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def artifact():
    return Artifact(
        artifact_id="artifact-1",
        name="totals",
        description="the totals by region",
        parts=[
            Part(text="north 12, south 7"),
            Part(raw=REPORT_BYTES, media_type="text/csv", filename="totals.csv"),
        ],
    )


def task(task_id, state):
    """A task whose history repeats the user's message, `cid:` file part and all."""
    return Task(
        id=task_id,
        context_id="ctx-1",
        status=TaskStatus(state=state, message=agent_message("done"),
                          timestamp=timestamp(1_796_040_000)),
        artifacts=[artifact()],
        history=[user_message(), agent_message("working on it")],
        metadata=struct_pb2.Struct(fields={"priority": struct_pb2.Value(number_value=2)}),
    )


def result_text(obj):
    """The SDK server's JSON-RPC result for `obj`: its own response builder, serialised
    as its streaming path writes it."""
    response = response_helpers.prepare_response_object("rpc-1", obj, (type(obj),))
    return json_utils.dumps(response["result"])


def objects():
    """(name, envelope field, SDK type name, the SDK object, its JSON text)."""
    request = SendMessageRequest(message=user_message())
    # The SDK client sends its request's params as json_format.MessageToDict.
    request_text = json_utils.dumps(json_format.MessageToDict(request))
    reply = SendMessageResponse(message=agent_message("Here are the totals."))
    got = task("task-1", TaskState.TASK_STATE_COMPLETED)
    status = StreamResponse(status_update=TaskStatusUpdateEvent(
        task_id="task-1", context_id="ctx-1",
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING,
                          message=agent_message("halfway"),
                          timestamp=timestamp(1_796_040_060)),
        metadata=struct_pb2.Struct(fields={"step": struct_pb2.Value(number_value=1)}),
    ))
    update = StreamResponse(artifact_update=TaskArtifactUpdateEvent(
        task_id="task-1", context_id="ctx-1", artifact=artifact(), append=False,
        last_chunk=True,
    ))
    listed = ListTasksResponse(
        tasks=[got, task("task-2", TaskState.TASK_STATE_INPUT_REQUIRED)],
        next_page_token="page-2", page_size=2, total_size=3,
    )
    error = TaskNotFoundError(message="no task task-9", data={"taskId": "task-9"})
    error_text = json_utils.dumps(
        response_helpers.build_error_response("rpc-1", error)["error"])
    return [
        ("message/send request (Message)", "payload", "SendMessageRequest", request,
         request_text),
        ("message/send response (Message)", "payload", "SendMessageResponse", reply,
         result_text(reply)),
        ("tasks/get response (Task with history)", "payload", "Task", got,
         result_text(got)),
        ("status update event", "payload", "StreamResponse", status, result_text(status)),
        ("artifact update event", "payload", "StreamResponse", update, result_text(update)),
        ("tasks/list response", "payload", "ListTasksResponse", listed,
         result_text(listed)),
        ("JSON-RPC error object", "error", "JSONRPCError", error, error_text),
    ]


def make():
    out = [{"name": n, "field": f, "type": t, "json": text}
           for n, f, t, _, text in objects()]
    attachment = {"contentId": REPORT_CID, "contentType": "text/csv",
                  "filename": "report.csv",
                  "base64": base64.b64encode(REPORT_BYTES).decode()}
    json.dump({"objects": out, "attachment": attachment}, sys.stdout, ensure_ascii=False)


def parse_error(text, made):
    """Reads an error object as the SDK does: its JSON-RPC error model, then the A2A
    error its code names."""
    parsed = JSONRPCError.model_validate_json(text)
    by_code = {code: cls for cls, code in JSON_RPC_ERROR_CODE_MAP.items()}
    cls = by_code.get(parsed.code)
    if cls is not type(made):
        return f"code {parsed.code} is {cls}, not {type(made).__name__}"
    if parsed.message != str(made):
        return f"message {parsed.message!r}"
    expected = JSONRPCError.model_validate(
        response_helpers.build_error_response("rpc-1", made)["error"])
    if parsed != expected:
        return f"{parsed!r} != {expected!r}"
    return None


def check():
    opened = json.load(sys.stdin)
    made = {n: (obj, text) for n, _, _, obj, text in objects()}
    failed = 0
    for item in opened:
        name = item["name"]
        obj, text = made[name]
        try:
            if isinstance(obj, Exception):
                why = parse_error(item["json"], obj)
            else:
                parsed = json_format.Parse(item["json"], type(obj)())
                why = None if parsed == obj else "not the object the SDK made"
                if why is None and json_format.MessageToDict(parsed) != json.loads(text):
                    why = "the parsed object serialises differently"
        except Exception as e:  # the SDK refused what we opened
            why = f"{type(e).__name__}: {e}"
        if why is None:
            print(f"ok {name}")
        else:
            failed += 1
            print(f"FAIL {name}: " + " ".join(str(why).split()))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]]()
