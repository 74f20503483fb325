"""Acceptance, on the public API: two OS processes, one PostgreSQL, one session key owned by agents.

``agent_node.py`` (``owner`` mode) runs an agent in a child process that
runs one prompt after another on the key. The test process spawns the
second agent on the same key.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import condukt
from condukt.sessions import SessionOwned
from condukt.testing import FunctionModel, reply

from .conftest import fresh_schema
from .journal_helpers import key_id, postgres_execute
from .pg import PostgresServer

NODE = Path(__file__).with_name("agent_node.py")
TTL = 3.0


class Child:
    """The first owner: an agent in another process, and the lines it printed."""

    def __init__(self, server: PostgresServer, schema: str, key: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(NODE), "owner", server.dsn, schema, key, str(TTL)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self.ran = -1

    async def line(self) -> str:
        assert self.process.stdout is not None
        text = (await trio.to_thread.run_sync(self.process.stdout.readline)).decode()
        if not text:
            _, errors = await trio.to_thread.run_sync(self.process.communicate)
            raise AssertionError(f"agent_node.py ended: {errors.decode()[-3000:]}")
        if text.startswith("ran"):
            self.ran = int(text.split()[1])
        return text.strip()

    async def until(self, prefix: str) -> str:
        while not (text := await self.line()).startswith(prefix):
            pass
        return text


@pytest.fixture
def children() -> Iterator[list[Child]]:
    made: list[Child] = []
    yield made
    for child in made:
        if child.process.poll() is None:
            os.kill(child.process.pid, signal.SIGCONT)
            child.process.kill()
        child.process.communicate(timeout=30)


def spawn_options(store: object, tmp_path: Path) -> dict[str, object]:
    return {
        "model": FunctionModel(lambda r: reply(f"parent answers {r.messages[-1].text}")),
        "cwd": tmp_path,
        "session_store": store,
        "id": "shared",
        "load_project_instructions": False,
    }


async def test_two_processes_second_spawn_gets_session_owned_then_takes_over_after_sigkill_not_before(
    postgres_server: PostgresServer, children: list[Child], tmp_path: Path
) -> None:
    from condukt.sessions import PostgresStore

    schema = fresh_schema()
    child = Child(postgres_server, schema, "shared")
    children.append(child)
    await child.until("ready")
    store = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=TTL)
    try:
        async with condukt.open_node() as node:
            # The key has a live owner in another process: the spawn fails, no agent starts.
            with pytest.raises(SessionOwned) as info:
                await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
            child_node = info.value.node
            assert info.value.key == "shared" and child_node is not None
            await child.until("ran 2")
            child.process.kill()
            await trio.to_thread.run_sync(child.process.wait)
            last = child.ran
            # Dead, but not yet silent for lease_ttl: still owned.
            with pytest.raises(SessionOwned) as info:
                await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
            assert 0 < info.value.retry_after <= TTL  # type: ignore[operator]
            agent = None
            for _ in range(5):  # as a user would: wait what the error says, then try again
                try:
                    agent = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
                    break
                except SessionOwned as owned:
                    await trio.sleep((owned.retry_after or 0.0) + 0.05)
            assert agent is not None
            # Taken over once the child's node had been silent for lease_ttl, by the server's clock.
            [(acquired_at, expired_at)] = postgres_execute(
                store,
                "SELECT l.acquired_at, n.expires_at FROM {s}.leases l, {s}.nodes n WHERE l.key_id = %s AND n.node = %s",
                key_id("shared"),
                child_node,
            )
            assert acquired_at >= expired_at
            history = [m.text for m in await agent.history()]
            assert f"child {last}" in history and f"answer to child {last}" in history  # nothing of the child's lost
            assert await agent.run("parent turn") == "parent answers parent turn"
            await agent.stop()
    finally:
        await store.aclose()


async def test_a_sigstopped_former_owner_continued_after_the_take_over_never_overwrites_the_new_owners_history(
    postgres_server: PostgresServer, children: list[Child], tmp_path: Path
) -> None:
    from condukt.sessions import PostgresStore

    schema = fresh_schema()
    child = Child(postgres_server, schema, "shared")
    children.append(child)
    await child.until("ready")
    await child.until("ran 2")
    os.kill(child.process.pid, signal.SIGSTOP)
    store = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=TTL)
    try:
        async with condukt.open_node() as node:
            async with await store.acquire("shared", owner="probe", wait=3 * TTL):
                pass  # the stopped owner's lease ran out
            agent = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
            assert await agent.run("parent turn") == "parent answers parent turn"
            ours = list(await agent.history())
            os.kill(child.process.pid, signal.SIGCONT)
            # The former owner's next write is refused: its run fails with SessionLost and it stops.
            assert await child.until("lost") == "lost"
            assert await trio.to_thread.run_sync(child.process.wait) == 0
            fresh = PostgresStore(postgres_server.dsn, schema=schema)
            try:
                saved = await fresh.load("shared")
            finally:
                await fresh.aclose()
            assert saved is not None and list(saved.messages) == ours
            assert await agent.run("and another") == "parent answers and another"
            assert list(await agent.history())[: len(ours)] == ours
            await agent.stop()
    finally:
        await store.aclose()
