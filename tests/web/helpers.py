"""Agents, operations and servers shared by the endpoint tests."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import hypercorn.config
import hypercorn.trio
import trio

import condukt
from condukt.testing import FunctionModel, call, reply

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def echo(request: condukt.ModelRequest) -> Any:
    """'turn N: <prompt>' where N counts the user prompts of the conversation so far."""
    prompts = [m for m in request.messages if type(m).__name__ == "UserMessage"]
    last = request.messages[-1].text
    if last.startswith("crash once") and len(prompts) == 1:
        raise RuntimeError("bug in the agent")  # crashes the agent process (not a run error)
    return reply(f"turn {len(prompts)}: {last}")


class Echo(condukt.Agent):
    """Answers 'turn N: <prompt>'; a conversation's first prompt 'crash once...' crashes the agent."""

    model = FunctionModel(echo)
    system_prompt = "You echo."


def triage(request: condukt.ModelRequest) -> Any:
    return call("submit_result", {"result": "bug"})


class Triage(condukt.Agent):
    """An agent with one typed operation."""

    model = FunctionModel(triage)
    system_prompt = "You triage tickets."

    classify = condukt.operation(
        input={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
               "additionalProperties": False},
        output={"enum": ["bug", "question", "feature"]},
        instructions="Classify the ticket.",
    )


def sleeper(pid_file: Path) -> condukt.ChildSpec:
    """An agent whose first tool call runs 'sleep 600', writing the shell's pid to ``pid_file`` first."""
    command = f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && exec sleep 600"
    model = FunctionModel(
        lambda request: call("bash", {"command": command}) if len(request.messages) == 1 else reply("slept")
    )
    return condukt.ChildSpec(
        None, condukt.Agent, kwargs={"model": model, "tools": [condukt.tools.Bash], "cwd": pid_file.parent}
    )


def agents(tmp_path: Path) -> dict[str, Any]:
    return {"echo": Echo, "sleeper": sleeper(tmp_path / "pid")}


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``[(event name, data)]`` of an SSE body."""
    found = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((lines["event"], json.loads(lines["data"])))
    return found


@asynccontextmanager
async def hypercorn_trio(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` with hypercorn on trio at 127.0.0.1 (a free port); yields its URL."""
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: hypercorn.trio.serve(
            app, config, shutdown_trigger=stop.wait, task_status=task_status))
        try:
            yield binds[0]
        finally:
            stop.set()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def uvicorn_server(app: Any, port: int | None = None, **options: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn (asyncio) in a thread at 127.0.0.1 (on ``port``, else a free one); yields its URL.

    ``options``: uvicorn's.
    """
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **options)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
