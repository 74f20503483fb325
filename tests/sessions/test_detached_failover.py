"""A detached run survives its node: SIGKILL mid-run, another process resumes it from PostgreSQL by the same id.

``detached_node.py`` is the node, a child process: the first one submits the
run and is killed with SIGKILL while a tool call runs; a second one starts
the agent on the same key with ``resume=True`` and attaches to the run by id.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from waiting import TIMEOUT

from condukt.agent import RUNS_KEY_SUFFIX
from condukt.events import to_json

from .conftest import fresh_schema
from .pg import PostgresServer

NODE = Path(__file__).with_name("detached_node.py")
TTL = 2.0


async def stored_log(store: object, run_id: str) -> object:
    """The run's stored log: under the session key when persistence holds its lease, else under ``key#runs``."""
    return await store.read_run("shared", run_id) or await store.read_run(  # type: ignore[attr-defined]
        "shared" + RUNS_KEY_SUFFIX, run_id
    )


async def read_line(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    with trio.fail_after(TIMEOUT):
        text = (await trio.to_thread.run_sync(process.stdout.readline)).decode()
    if not text:
        _, errors = await trio.to_thread.run_sync(process.communicate)
        raise AssertionError(f"detached_node.py ended: {errors.decode()}")
    return text.strip()


def start(server: PostgresServer, schema: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(NODE), server.dsn, schema, "shared", str(TTL), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def test_a_detached_run_survives_sigkill_of_its_node_and_ends_with_done_elsewhere(
    postgres_server: PostgresServer,
) -> None:
    from condukt.sessions import PostgresStore

    schema = fresh_schema()
    first = start(postgres_server, schema, "submit")
    try:
        run_id = (await read_line(first)).removeprefix("run ")
        logged = int((await read_line(first)).removeprefix("logged "))
        # What a reader of the first node saw is in PostgreSQL, under the same indexes.
        store = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=TTL)
        try:
            before: Any = await stored_log(store, run_id)
            assert before is not None and before.status == "running"
            assert before.next_index == logged + 1
            seen_there = [to_json(event) for _, event in before.events]
            first.kill()  # SIGKILL mid-run: the tool call is running
            await trio.to_thread.run_sync(first.wait)
        finally:
            await store.aclose()
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()

    second = start(postgres_server, schema, "resume", run_id)
    try:
        assert await read_line(second) == "started"
        events: list[tuple[int, dict[str, object]]] = []
        while (line := await read_line(second)).startswith("event "):
            _, index, data = line.split(" ", 2)
            events.append((int(index), json.loads(data)))
        result = json.loads(line.removeprefix("result "))
        with trio.fail_after(TIMEOUT):
            assert await trio.to_thread.run_sync(second.wait) == 0
    finally:
        if second.poll() is None:
            second.kill()
        second.communicate()

    # Attach by the same id on the other node: every index once, the dead node's events first, then Done.
    assert [index for index, _ in events] == list(range(len(events)))
    assert [data for _, data in events[: logged + 1]] == seen_there
    assert events[0][1]["type"] == "agent_start" and events[logged][1]["type"] == "tool_call_start"
    assert events[-1][1] == {"type": "done", "status": "completed"}
    # The deploy that was running when the node died is not run again: the model is told it was interrupted.
    assert result.startswith("after: Error: this call was interrupted")
    store = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=TTL)
    try:
        after: Any = await stored_log(store, run_id)
        assert after is not None and after.status == "done" and after.next_index == len(events)
        assert after.result["text"] == result
    finally:
        await store.aclose()
