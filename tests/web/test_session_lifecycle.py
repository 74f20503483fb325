"""Sessions really end: DELETE and idle expiry stop the agent (its tools' subprocesses too) and free its slot,
on both servers; a run whose session is deleted says so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import trio

import condukt
import condukt.web
from condukt.testing import FunctionModel, call, reply

from .helpers import AUTH, TOKEN, Echo, parse_sse, sleeper
from .servers import both_servers, served


async def wait_for_file(path: Path) -> None:
    with trio.fail_after(10):
        while not path.exists():  # written by the tool's shell, in another process
            await trio.sleep(0.01)


@both_servers
async def test_delete_stops_the_agent_and_its_subprocess_and_frees_the_slot(
    server: str, tmp_path: Path, process_gone: Callable[[int], bool]
) -> None:
    pid_file = tmp_path / "pid"

    def make_app(node: Any) -> Any:
        return condukt.web.create_app(
            node, agents={"echo": Echo, "sleeper": sleeper(pid_file)}, token=TOKEN, max_sessions=3
        )

    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        for _ in range(3):  # more creates than max_sessions in all: each delete frees its slot
            sessions = [
                (await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)).json()["session"]
                for _ in range(3)
            ]
            for session in sessions:
                assert (await client.delete(f"/sessions/{session}", headers=AUTH)).status_code == 204
        assert (await client.get("/healthz")).json()["sessions"] == 0

        async with client.stream(
            "POST", "/agents/sleeper/runs", json={"prompt": "sleep"}, headers={**AUTH, "Accept": "text/event-stream"}
        ) as response:
            session = response.headers["x-condukt-session"]
            await wait_for_file(pid_file)  # the tool's `sleep 600` runs
            deleted = await client.delete(f"/sessions/{session}", headers=AUTH)
            assert deleted.status_code == 204
            text = (await response.aread()).decode()
        assert await trio.to_thread.run_sync(process_gone, int(pid_file.read_text()))
        *_, error, done = parse_sse(text)
        assert error == ("error", {"type": "error", "error_type": "SessionDeleted",
                                   "message": f"session {session!r} was deleted during the run"})
        assert done == ("done", {"type": "done", "status": "failed"})
        assert (await client.get(f"/sessions/{session}/history", headers=AUTH)).status_code == 404
        three = [await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH) for _ in range(3)]
        assert [r.status_code for r in three] == [200, 200, 200]


@both_servers
async def test_idle_expiry_stops_the_agents_so_new_sessions_fit(server: str) -> None:
    def make_app(node: Any) -> Any:
        return condukt.web.create_app(
            node, agents={"echo": Echo}, token=TOKEN, max_sessions=3, session_idle_timeout=0.2
        )

    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        for _ in range(3):
            for _ in range(3):
                answer = await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)
                assert answer.status_code == 200, answer.text
            # Idle for longer than the timeout (the server's clock): the next create stops them all
            # (mounted in FastAPI the endpoint's lifespan does not run, so creating is what sweeps there).
            await trio.sleep(0.3)


def napper(pid_file: Path) -> condukt.ChildSpec:
    """Answers 'ready'; a prompt 'sleep' runs `sleep 600` through bash, writing the shell's pid first."""
    command = f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && exec sleep 600"

    def respond(request: condukt.ModelRequest) -> Any:
        last = request.messages[-1]
        if type(last).__name__ == "UserMessage" and last.text == "sleep":
            return call("bash", {"command": command})
        return reply("ready")

    return condukt.ChildSpec(
        None, condukt.Agent, kwargs={"model": FunctionModel(respond), "tools": [condukt.tools.Bash], "cwd": pid_file.parent}
    )


@both_servers
async def test_a_json_run_whose_session_is_deleted_gets_410_session_deleted(server: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def make_app(node: Any) -> Any:
        return condukt.web.create_app(node, agents={"napper": napper(pid_file)}, token=TOKEN)

    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        session = (await client.post("/agents/napper/runs", json={"prompt": "hi"}, headers=AUTH)).json()["session"]
        answers: list[httpx.Response] = []

        async def run() -> None:
            body = {"prompt": "sleep", "session": session}
            answers.append(await client.post("/agents/napper/runs", json=body, headers=AUTH))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await wait_for_file(pid_file)
            assert (await client.delete(f"/sessions/{session}", headers=AUTH)).status_code == 204
        [answer] = answers
        assert answer.status_code == 410, answer.text
        assert answer.json() == {
            "error": "SessionDeleted", "message": f"session {session!r} was deleted during the run",
            "session": session,
        }
