"""Two OS processes, one PostgreSQL: one owner per key, take-over after lease_ttl, fencing of a stopped owner.

``owner.py`` runs in a child process: it acquires the key and saves a turn
every 50 ms. The test process is the second owner.
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

from condukt.messages import UserMessage
from condukt.sessions import SessionOwned, Snapshot

from .conftest import fresh_schema
from .journal_helpers import key_id, postgres_execute
from .pg import PostgresServer

OWNER = Path(__file__).with_name("owner.py")
TTL = 3.0


class Child:
    """The child owner: its process and the lines it printed."""

    def __init__(self, server: PostgresServer, schema: str, key: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(OWNER), server.dsn, schema, key, str(TTL)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self.saved = -1

    async def line(self) -> str:
        assert self.process.stdout is not None
        text = (await trio.to_thread.run_sync(self.process.stdout.readline)).decode()
        if not text:
            errors = await trio.to_thread.run_sync(self.process.communicate)
            raise AssertionError(f"owner.py ended: {errors[1].decode()}")
        if text.startswith("saved"):
            self.saved = int(text.split()[1])
        return text.strip()

    async def until(self, prefix: str) -> str:
        while not (text := await self.line()).startswith(prefix):
            pass
        return text

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=30)


@pytest.fixture
def child_factory(postgres_server: PostgresServer) -> Iterator[list[Child]]:
    children: list[Child] = []
    yield children
    for child in children:
        if child.process.poll() is None:
            os.kill(child.process.pid, signal.SIGCONT)
        child.stop()


async def test_two_processes_second_gets_session_owned_then_takes_over_after_sigkill_not_before(
    postgres_server: PostgresServer, child_factory: list[Child]
) -> None:
    from condukt.sessions import PostgresStore

    schema = fresh_schema()
    child = Child(postgres_server, schema, "shared")
    child_factory.append(child)
    _, _, child_node = (await child.until("acquired")).split()
    store = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=TTL)
    try:
        with pytest.raises(SessionOwned) as info:
            await store.acquire("shared", owner="parent")
        assert info.value.owner == "child" and info.value.node == child_node
        await child.until("saved 3")
        child.process.kill()
        await trio.to_thread.run_sync(child.process.wait)
        last_saved = child.saved
        # Dead, but not yet silent for lease_ttl: still owned.
        with pytest.raises(SessionOwned) as info:
            await store.acquire("shared", owner="parent")
        assert 0 < info.value.retry_after <= TTL  # type: ignore[operator]
        lease = await store.acquire("shared", owner="parent", wait=3 * TTL)
        # Taken over once the child's heartbeat was lease_ttl old, by the server's clock.
        [(acquired_at, expired_at, ttl)] = postgres_execute(
            store,
            "SELECT l.acquired_at, n.expires_at, n.ttl FROM {s}.leases l, {s}.nodes n "
            "WHERE l.key_id = %s AND n.node = %s",
            key_id("shared"),
            child_node,
        )
        assert ttl == TTL and acquired_at >= expired_at
        # Everything the child had saved is there.
        snapshot = await lease.load()
        assert snapshot is not None
        texts = [m.text for m in snapshot.messages]
        assert f"child {last_saved}" in texts and len(texts) >= 2 * (last_saved + 1)
        await lease.release()
    finally:
        await store.aclose()


async def test_a_sigstopped_former_owner_continued_after_the_take_over_never_overwrites(
    postgres_server: PostgresServer, child_factory: list[Child]
) -> None:
    from condukt.sessions import PostgresStore

    schema = fresh_schema()
    child = Child(postgres_server, schema, "shared")
    child_factory.append(child)
    await child.until("acquired")
    await child.until("saved 2")
    os.kill(child.process.pid, signal.SIGSTOP)
    store = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=TTL)
    try:
        lease = await store.acquire("shared", owner="parent", wait=3 * TTL)
        taken = await lease.load()
        assert taken is not None
        ours = Snapshot("parent", (*taken.messages, UserMessage.from_text("the new owner's turn")), updated_at=1e9)
        await lease.save(ours)
        os.kill(child.process.pid, signal.SIGCONT)
        # The child's next save is refused; it says so and exits.
        assert await child.until("owned") == "owned"
        assert await trio.to_thread.run_sync(child.process.wait) == 0
        fresh = PostgresStore(postgres_server.dsn, schema=schema)
        try:
            assert await fresh.load("shared") == ours
        finally:
            await fresh.aclose()
        later = Snapshot("parent", (*ours.messages, UserMessage.from_text("and another")), updated_at=2e9)
        await lease.save(later)
        assert await lease.load() == later
        await lease.release()
    finally:
        await store.aclose()
