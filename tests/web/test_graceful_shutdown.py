"""``condukt serve --grace``: SIGTERM with a run streaming, a real server process (hypercorn on trio).

The agent's tool waits on a named pipe the test writes into, so the test
decides when the run may finish: after the SIGTERM (within the grace: the
stream ends with ``done`` "completed"), or never (past the grace: the
session stops and the stream still ends with ``done``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import trio
from waiting import TIMEOUT, serving_process

from .helpers import free_port

AGENT = '''
import os

import trio

import condukt
from condukt.testing import FunctionModel, call, reply

GATE = os.environ["GATE"]


@condukt.tool
async def wait_for_gate() -> str:
    """Waits until a line arrives in the gate pipe."""
    def read() -> str:
        with open(GATE) as pipe:
            return pipe.readline().strip()
    return await trio.to_thread.run_sync(read, abandon_on_cancel=True)


def gated(request):
    last = request.messages[-1]
    if type(last).__name__ == "ToolResultMessage":
        return reply("finished after " + last.text)
    return [reply("waiting"), call("wait_for_gate", {})]


class Gated(condukt.Agent):
    model = FunctionModel(gated)

    def tools(self):
        return [wait_for_gate]
'''


async def sse_blocks(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            lines = dict(line.split(": ", 1) for line in block.splitlines())
            yield lines["event"], json.loads(lines["data"])


def serve_command(port: int, grace: str) -> list[str]:
    return [sys.executable, "-m", "condukt", "serve", "--agent", "gate_agent:Gated", "--grace", grace,
            "--port", str(port)]


async def test_sigterm_with_a_run_streaming_ends_the_stream_with_done_within_the_grace(tmp_path: Path) -> None:
    (tmp_path / "gate_agent.py").write_text(AGENT)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    port = free_port()
    env = {**os.environ, "GATE": str(gate), "PYTHONPATH": str(tmp_path)}
    async with serving_process(serve_command(port, "30"), b"serving on", cwd=tmp_path, env=env) as process, \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=TIMEOUT) as client:
        seen: list[str] = []
        async with client.stream("POST", "/agents/gated/runs", json={"prompt": "go"},
                                 headers={"Accept": "text/event-stream"}) as response:
            async for name, data in sse_blocks(response):
                seen.append(name)
                if name == "tool_call_start":
                    # Mid-run: the server is told to stop.
                    process.send_signal(signal.SIGTERM)
                    with trio.fail_after(TIMEOUT):
                        while True:  # the drain begins once the server has read its signal
                            health = await client.get("/healthz")
                            if health.status_code == 503:
                                break
                            await trio.sleep(0.02)
                    assert health.json()["error"] == "ShuttingDown"
                    refused = await client.post("/agents/gated/runs", json={"prompt": "another"})
                    assert refused.status_code == 503, refused.text
                    assert refused.json()["error"] == "ShuttingDown"
                    assert refused.headers["retry-after"].isdigit()
                    # The run in flight may finish: open its gate.
                    with open(gate, "w") as pipe:
                        pipe.write("the gate\n")
                if name == "done":
                    assert data["status"] == "completed"
                if name == "agent_end":
                    assert data["text"] == "finished after the gate"
        assert seen[-1] == "done" and "agent_end" in seen
        with trio.fail_after(TIMEOUT):
            assert await process.wait() == 0
        assert b"stopped" in process.output  # type: ignore[attr-defined]


async def test_past_the_grace_the_session_stops_and_the_stream_still_ends_with_done(tmp_path: Path) -> None:
    (tmp_path / "gate_agent.py").write_text(AGENT)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    port = free_port()
    env = {**os.environ, "GATE": str(gate), "PYTHONPATH": str(tmp_path)}
    async with serving_process(serve_command(port, "0.5"), b"serving on", cwd=tmp_path, env=env) as process, \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=TIMEOUT) as client:
        seen: list[tuple[str, dict[str, Any]]] = []
        async with client.stream("POST", "/agents/gated/runs", json={"prompt": "go"},
                                 headers={"Accept": "text/event-stream"}) as response:
            async for name, data in sse_blocks(response):
                seen.append((name, data))
                if name == "tool_call_start":
                    process.send_signal(signal.SIGTERM)  # the gate never opens
        assert seen[-1] == ("done", {"status": "failed", "type": "done"})
        assert seen[-2][0] == "error"
        with trio.fail_after(TIMEOUT):
            assert await process.wait() == 0
