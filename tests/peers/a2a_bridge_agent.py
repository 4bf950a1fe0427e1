#!/usr/bin/env python3
"""The official A2A Python SDK (`a2a-sdk`) as an A2A agent: the local agent behind
`mailseal bridge` in its end-to-end tests and benchmark. Everything on the wire is the
SDK's own server (DefaultRequestHandler, an in-memory task store, its JSON-RPC or REST
routes on starlette, run by uvicorn); it shares no code with mailseal.

  a2a_bridge_agent.py --port P --binding JSONRPC|HTTP+JSON --log FILE [--name NAME]

serves on 127.0.0.1:P (P 0: a free port) an Agent Card at
/.well-known/agent-card.json with one interface, of the binding given, and
capabilities.streaming true. The interface's url is http://127.0.0.1:P/ for JSON-RPC
(the SDK posts every call there) and http://127.0.0.1:P for HTTP+JSON (the SDK's REST
client appends /message:send, /message:stream, /tasks/ID, /tasks/ID:cancel, ...).
Once it accepts connections it prints one line on stdout, "ready http://127.0.0.1:P/",
then serves until killed (SIGTERM or SIGINT end it within about two seconds).

What the agent does is chosen by the first text part of the user's message:

  echo: X      a direct Message (role agent) whose text is the text received, "echo: X";
               any text that matches no command below is answered the same way
  task: X      a Task: WORKING, then an artifact with text "done: X", then COMPLETED
  stream: N [S]  a Task: WORKING, then N artifact updates of one artifact, "part 1" ..
               "part N" (the first append=false, the rest append=true, the last with
               lastChunk=true), S seconds apart (default 0), then COMPLETED
  slow: S      a Task: WORKING, S seconds of sleep, an artifact "slept S", COMPLETED
  wait         a Task that stays WORKING until canceled (CancelTask gives CANCELED)
  fail [CLASS] execute() raises the SDK's error CLASS (default UnsupportedOperationError;
               any class in a2a.utils.errors.JSON_RPC_ERROR_CODE_MAP) with the message
               "fail requested (agent NAME)" and data {"agent": NAME}. The SDK answers it
               as an A2A error: over JSON-RPC {"code": -32004, "message": "fail requested
               (agent NAME)", "data": [ErrorInfo reason UNSUPPORTED_OPERATION, metadata
               {"agent": NAME}]}; over HTTP+JSON HTTP 400, status FAILED_PRECONDITION,
               the same ErrorInfo. The SDK also stores the task as FAILED.

A Task starts as the SDK's new_task_from_user_message (SUBMITTED, the user's message in
its history), so a SendMessage with returnImmediately returns it SUBMITTED.

Every call of the executor appends one JSON line to --log (flushed and fsynced):
  {"method": "execute"|"cancel", "messageId", "contextId", "taskId", "text",
   "metadata": the user message's metadata as JSON or null,
   "requestMetadata": the SendMessageRequest's metadata as JSON or null (also null
   when it is {}),
   "agent": NAME}
(for "cancel" there is no message: messageId, text and both metadata are null).
"""

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys

from google.protobuf import json_format

import uvicorn

from starlette.applications import Starlette

from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
)
from a2a.utils import errors as a2a_errors
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

ARTIFACT_NAME = "result"


class EventLog:
    """The --log file: one JSON line per executor call, flushed and fsynced."""

    def __init__(self, path, agent):
        self.path = path
        self.agent = agent

    def write(self, method, context):
        message = context.message
        entry = {
            "method": method,
            "messageId": message.message_id if message else None,
            "contextId": context.context_id,
            "taskId": context.task_id,
            "text": first_text(message) if message else None,
            "metadata": (json_format.MessageToDict(message.metadata)
                         if message and message.HasField("metadata") else None),
            "requestMetadata": context.metadata or None,
            "agent": self.agent,
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())


def first_text(message):
    """The text of the message's first text part, or "" if it has none."""
    for part in message.parts:
        if part.HasField("text"):
            return part.text
    return ""


def command(text):
    """(verb, argument) of a message text: "task: X" -> ("task", "X")."""
    stripped = text.strip()
    for verb in ("echo", "task", "stream", "slow", "wait", "fail"):
        if stripped == verb:
            return verb, ""
        if stripped.startswith(verb + ":"):
            return verb, stripped[len(verb) + 1:].strip()
        if verb in ("wait", "fail") and stripped.startswith(verb + " "):
            return verb, stripped[len(verb) + 1:].strip()
    return "echo", text


def error_class(name):
    """The SDK error class named NAME (default UnsupportedOperationError)."""
    if not name:
        return a2a_errors.UnsupportedOperationError
    for cls in a2a_errors.JSON_RPC_ERROR_CODE_MAP:
        if cls.__name__ == name:
            return cls
    raise a2a_errors.InvalidParamsError(message=f"fail: no SDK error class {name!r}")


class BridgeTestExecutor(AgentExecutor):
    def __init__(self, log, name):
        self.log = log
        self.name = name

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.log.write("execute", context)
        text = first_text(context.message)
        verb, arg = command(text)

        if verb == "echo":
            await event_queue.enqueue_event(
                new_text_message(text, context_id=context.context_id, role=Role.ROLE_AGENT))
            return
        if verb == "fail":
            cls = error_class(arg)
            raise cls(message=f"fail requested (agent {self.name})", data={"agent": self.name})

        # Every other command is a task.
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()

        if verb == "task":
            await updater.add_artifact([new_text_part(f"done: {arg}")], name=ARTIFACT_NAME)
        elif verb == "stream":
            fields = arg.split()
            count = int(fields[0]) if fields else 1
            pause = float(fields[1]) if len(fields) > 1 else 0.0
            artifact_id = f"{context.task_id}-stream"
            for i in range(1, count + 1):
                if i > 1 and pause:
                    await asyncio.sleep(pause)
                await updater.add_artifact(
                    [new_text_part(f"part {i}")], artifact_id=artifact_id,
                    name=ARTIFACT_NAME, append=i > 1, last_chunk=i == count)
        elif verb == "slow":
            await asyncio.sleep(float(arg or 0))
            await updater.add_artifact([new_text_part(f"slept {arg}")], name=ARTIFACT_NAME)
        elif verb == "wait":
            # Until CancelTask: the SDK calls cancel() below, then cancels this coroutine.
            await asyncio.Event().wait()
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.log.write("cancel", context)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def agent_card(name, binding, port):
    base = f"http://127.0.0.1:{port}"
    url = base + "/" if binding == TransportProtocol.JSONRPC else base
    return AgentCard(
        name=name,
        description="mailseal's test agent (official a2a-sdk): echo, task, stream, slow, "
                    "wait, fail",
        version="1.0.0",
        supported_interfaces=[AgentInterface(
            url=url, protocol_binding=binding, protocol_version=PROTOCOL_VERSION_CURRENT)],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(
            id="bridge-test", name="bridge test",
            description="answers by the first text part: echo: X, task: X, stream: N, "
                        "slow: S, wait, fail",
            tags=["test"], examples=["echo: hello", "task: sum", "stream: 3"])],
    )


def build_app(card, handler, binding):
    routes = list(create_agent_card_routes(card))
    if binding == TransportProtocol.JSONRPC:
        routes += create_jsonrpc_routes(handler, rpc_url="/")
    else:
        routes += create_rest_routes(handler)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await handler.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


async def serve(args):
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
    # and without it every answer on a kept-alive connection waits ~40 ms (delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    port = sock.getsockname()[1]

    binding = TransportProtocol(args.binding)
    card = agent_card(args.name, binding, port)
    handler = DefaultRequestHandler(
        agent_executor=BridgeTestExecutor(EventLog(args.log, args.name), args.name),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    config = uvicorn.Config(build_app(card, handler, binding), log_level="warning",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    running = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if running.done():
            running.result()
            sys.exit("a2a_bridge_agent: the server stopped before it started")
        await asyncio.sleep(0.02)
    print(f"ready http://127.0.0.1:{port}/", flush=True)
    await running


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--binding", required=True,
                        choices=[TransportProtocol.JSONRPC.value,
                                 TransportProtocol.HTTP_JSON.value])
    parser.add_argument("--log", required=True)
    parser.add_argument("--name", default="mailseal-test-agent")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
