"""A small A2A agent served by the official Python SDK (a2a-sdk) on 127.0.0.1, for agent-discover's tests.

Usage: a2a_agent.py [--port N] [--name NAME] [--skills id:tag+tag,...] [--providers] [--v03-only]

The port is --port, else $AGENT_DISCOVER_A2A_PORT (what agent-discover passes to a worker it starts), else any free
one. Once the server listens, one line `READY <base url>` goes to stdout.

What it answers (by the text of the user's message):
- `slow ...`: a task that reports `working` with the text `started`, then waits until it is canceled.
- `fail ...`: a task that fails.
- `ask ...`: a task that asks for input (`input-required`, "which language?"); the reply in the same task completes
  it with `answer: <reply>`.
- anything else: a streamed answer: three `working` updates (`chunk 1/3` ... `chunk 3/3`), then `completed` with the
  artifact `echo: <text> [provider=<id>]` (the provider is the message metadata's `provider`, or `default`).

--providers adds the agent-discover providers extension to the card (two providers: `openai`, `anthropic`).
--v03-only serves a v0.3 card (url/preferredTransport, no supportedInterfaces) at the older /.well-known/agent.json.
"""

import argparse
import asyncio
import contextlib
import os
import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.helpers.proto_helpers import new_text_artifact, new_text_message
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)

PROVIDERS_EXTENSION = "urn:agent-discover:a2a:providers:v1"


class TestExecutor(AgentExecutor):
    async def execute(self, context, event_queue):
        text = context.get_user_input()
        metadata = dict(context.metadata or {})
        message_meta = dict(context.message.metadata) if context.message and context.message.metadata else {}
        provider = message_meta.get("provider") or metadata.get("provider") or "default"
        task_id, context_id = context.task_id, context.context_id
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            )
        updater = TaskUpdater(event_queue, task_id, context_id)

        def say(words):
            return new_text_message(words, role=Role.ROLE_AGENT, context_id=context_id, task_id=task_id)

        if text.startswith("slow"):
            await updater.start_work(say("started"))
            await asyncio.Event().wait()  # until canceled
            return
        if text.startswith("ask"):
            await updater.requires_input(say("which language?"))
            return
        if context.current_task is not None and context.current_task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact(new_text_artifact(name="answer", text=f"answer: {text}").parts, name="answer")
            await updater.complete()
            return
        if text.startswith("fail"):
            await updater.failed(say("failed on purpose"))
            return
        for i in range(1, 4):
            await updater.start_work(say(f"chunk {i}/3"))
        await updater.add_artifact(
            new_text_artifact(name="answer", text=f"echo: {text} [provider={provider}]").parts, name="answer"
        )
        await updater.complete()

    async def cancel(self, context, event_queue):
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("AGENT_DISCOVER_A2A_PORT", "0")))
    ap.add_argument("--name", default="test-agent")
    ap.add_argument("--skills", default="code-analysis:code+analysis,debugging:debug")
    ap.add_argument("--providers", action="store_true")
    ap.add_argument("--v03-only", action="store_true")
    args = ap.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    # Listening before READY is printed: a client that connects while uvicorn still starts waits in the backlog.
    sock.listen(128)
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"

    skills = []
    for spec in filter(None, args.skills.split(",")):
        sid, _, tags = spec.partition(":")
        skills.append(
            AgentSkill(
                id=sid,
                name=sid.replace("-", " "),
                description=f"Performs {sid.replace('-', ' ')} on the text it is given",
                tags=[t for t in tags.split("+") if t],
            )
        )
    extensions = []
    if args.providers:
        extensions.append(
            AgentExtension(
                uri=PROVIDERS_EXTENSION,
                description="AI providers this agent can use (metadata.provider selects one)",
                params={
                    "defaultProviderId": "openai",
                    "providers": [
                        {
                            "id": "openai",
                            "models": ["gpt-4o", "gpt-4o-mini"],
                            "kind": "llm",
                            "capabilities": {"streaming": True, "tools": True, "vision": True, "jsonMode": True},
                            "displayName": "OpenAI",
                        },
                        {
                            "id": "anthropic",
                            "models": ["claude-sonnet-4-20250514"],
                            "displayName": "Anthropic",
                            "description": "Claude models",
                        },
                    ],
                },
            )
        )
    interfaces = [AgentInterface(url=base + "/", protocol_binding="JSONRPC", protocol_version="0.3")]
    if not args.v03_only:
        interfaces.insert(0, AgentInterface(url=base + "/", protocol_binding="JSONRPC", protocol_version="1.0"))
    card = AgentCard(
        name=args.name,
        description=f"{args.name}: a test agent for agent-discover",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, extensions=extensions),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )
    handler = DefaultRequestHandler(agent_executor=TestExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
    if args.v03_only:
        legacy = to_compat_agent_card(card).model_dump(by_alias=True, exclude_none=True, mode="json")

        async def legacy_card(_request):
            return JSONResponse(legacy)

        routes.append(Route("/.well-known/agent.json", legacy_card, methods=["GET"]))
    else:
        routes += create_agent_card_routes(card)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        print(f"READY {base}", flush=True)
        yield

    app = Starlette(routes=routes, lifespan=lifespan)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
