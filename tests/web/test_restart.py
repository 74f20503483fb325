"""A whole server killed (SIGKILL) and started again on the same Disk store: its sessions are found again,
their pending approvals listed and decided, the waiting run finished; on hypercorn (`condukt serve`) and on
uvicorn, each a real server process."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from waiting import serving_process

from .helpers import free_port
from .test_approvals_http import events

APP = '''
import os
import pathlib

import condukt
import condukt.web
from condukt.sessions import DiskStore
from condukt.testing import FunctionModel, call, reply

MARK = pathlib.Path(os.environ["MARK"])


@condukt.tool(requires_approval=True)
async def deploy(service: str) -> str:
    """Deploys a service."""
    with MARK.open("a") as f:
        f.write(service + "\\n")
    return f"deployed {service}"


def deployer(request):
    last = request.messages[-1]
    if type(last).__name__ == "ToolResultMessage":
        return reply(f"result: {last.text}")
    return call("deploy", {"service": last.text})


class Deployer(condukt.Agent):
    model = FunctionModel(deployer)
    system_prompt = "You deploy."

    def tools(self):
        return [deploy]


store = DiskStore(os.environ["STORE"], lease_ttl=2.0)  # a killed server's sessions are free 2 s after
app = condukt.web.create_app(
    agents={"deployer": condukt.ChildSpec(None, Deployer, kwargs={"session_store": store})}, token="t0k"
)
'''

AUTH = {"Authorization": "Bearer t0k"}
COMMANDS = {
    "hypercorn-trio": lambda port: [sys.executable, "-m", "condukt", "serve", "deploy_app:app", "--port", str(port)],
    "uvicorn-asyncio": lambda port: [sys.executable, "-m", "uvicorn", "deploy_app:app", "--port", str(port),
                                     "--log-level", "info"],  # its "Uvicorn running on" line says it listens
}


@asynccontextmanager
async def server_process(command: list[str], cwd: Path, env: dict[str, str], port: int) -> AsyncIterator[Any]:
    """A server process, ready once it logs that it listens; killed with SIGKILL (no shutdown at all) on leaving."""
    import os

    ready = b"Uvicorn running on" if "uvicorn" in command else b"serving on"
    async with serving_process(command, ready, cwd=cwd, env={**os.environ, **env}) as process:
        yield process


@pytest.mark.parametrize("server", sorted(COMMANDS))
async def test_a_killed_server_finds_its_sessions_and_their_approvals_again(server: str, tmp_path: Path) -> None:
    (tmp_path / "deploy_app.py").write_text(APP)
    mark, store = tmp_path / "deployed", tmp_path / "store"
    env = {"MARK": str(mark), "STORE": str(store), "PYTHONPATH": str(tmp_path)}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = COMMANDS[server](port)
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        async with server_process(command, tmp_path, env, port) as process:
            async with client.stream("POST", "/agents/deployer/runs", json={"prompt": "api"},
                                     headers={**AUTH, "Accept": "text/event-stream"}) as response:
                session = response.headers["x-condukt-session"]
                async for name, data in events(response):
                    if name == "approval_requested":
                        call_id = data["call_id"]
                        break
                process.send_signal(signal.SIGKILL)  # the whole node, mid-run, waiting for a decision
                await process.wait()
        assert not mark.exists()

        async with server_process(command, tmp_path, env, port):
            with trio.fail_after(10):
                # The killed server's node still owns the session until its lease_ttl of silence has passed.
                while (listed := await client.get(f"/sessions/{session}/approvals", headers=AUTH)).status_code == 503:
                    assert listed.json()["error"] == "SessionOwned"
                    await trio.sleep(float(listed.headers["Retry-After"]))
            assert listed.status_code == 200, listed.text
            [pending] = listed.json()["approvals"]
            assert (pending["call_id"], pending["tool"], pending["arguments"]) == (call_id, "deploy", {"service": "api"})
            decided = await client.post(f"/sessions/{session}/approvals/{call_id}", json={"approve": True},
                                        headers=AUTH)
            assert decided.json() == {"session": session, "call_id": call_id, "approved": True}
            with trio.fail_after(10):
                while True:  # the resumed run finishes on its own: no client waits for it
                    history = (await client.get(f"/sessions/{session}/history", headers=AUTH)).json()["messages"]
                    if history and history[-1]["type"] == "assistant" and history[-1]["stop_reason"] != "tool_use":
                        break
                    await trio.sleep(0.05)
            assert mark.read_text() == "api\n"
            assert "result: deployed api" in json.dumps(history)
            # An id of no session is still 404.
            assert (await client.get(f"/sessions/{'0' * 32}/history", headers=AUTH)).status_code == 404
            assert (await client.get("/sessions/not-an-id/history", headers=AUTH)).status_code == 404
            assert (await client.delete(f"/sessions/{session}", headers=AUTH)).status_code == 204

        async with server_process(command, tmp_path, env, port):
            # Deleted for good: not in the store either.
            assert (await client.get(f"/sessions/{session}/history", headers=AUTH)).status_code == 404
            # The owner lease file and the nodes' heartbeat files may stay.
            assert [p.name for p in store.iterdir() if not p.name.endswith(".lock") and p.name != ".nodes"] == []
