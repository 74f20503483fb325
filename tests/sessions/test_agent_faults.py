"""Faults an agent on a PostgresStore survives: the database down or restarted, a partition, SIGKILLed nodes.

Every test here runs a real PostgreSQL (started by the tests, skipped only
where it cannot run); the SIGKILL test runs each node as an OS process
(``agent_node.py``).
"""

from __future__ import annotations

import collections
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import condukt
from condukt.agent import SessionLost
from condukt.messages import AssistantMessage, ToolResultMessage
from condukt.sessions import SessionOwned, Snapshot, StoreUnavailable
from condukt.testing import FunctionModel, call, reply

from .conftest import fresh_schema
from .pg import PostgresServer, server_or_skip

NODE = Path(__file__).with_name("agent_node.py")
PROXY = Path(__file__).with_name("proxy.py")


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, which it may stop and start."""
    server = server_or_skip()
    try:
        yield server
    finally:
        server.remove()


def store_on(dsn: str, schema: str, **options: Any) -> Any:
    from condukt.sessions import PostgresStore

    return PostgresStore(dsn, schema=schema, **options)


async def test_postgres_down_at_spawn_is_a_typed_error_and_the_agent_does_not_start(
    own_server: PostgresServer, tmp_path: Path
) -> None:
    own_server.stop()
    store = store_on(own_server.dsn, fresh_schema(), lease_ttl=0.5, retry_for=0.2)
    inits: list[Any] = []

    class Counted(condukt.Agent):
        def capabilities(self) -> list[Any]:
            inits.append(self.handle)
            return []

    try:
        async with condukt.open_node() as node:
            with pytest.raises(StoreUnavailable):
                await node.spawn(
                    Counted, model=FunctionModel(lambda r: reply("x")), cwd=tmp_path, session_store=store, id="down"
                )
            assert [h.alive for h in inits] == [False]  # its start failed: no agent runs
            assert node.whereis("down") is None
            # Once the database is back, the same key is free and the agent starts.
            await trio.to_thread.run_sync(own_server.start)
            agent = await node.spawn(
                Counted, model=FunctionModel(lambda r: reply("up")), cwd=tmp_path, session_store=store, id="down"
            )
            assert await agent.run("hello") == "up"
            await agent.stop()
    finally:
        await store.aclose()


async def test_postgres_restarted_mid_run_the_run_goes_on_and_nothing_is_lost(
    own_server: PostgresServer, tmp_path: Path
) -> None:
    schema = fresh_schema()
    store = store_on(own_server.dsn, schema, lease_ttl=30.0, retry_for=30.0)
    in_tool = trio.Event()
    restarted = trio.Event()
    ran: list[int] = []

    class Step(condukt.Tool):
        name = "step"
        description = "A step."
        parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
            ran.append(args["n"])
            if args["n"] == 2:
                in_tool.set()
                await restarted.wait()  # the database goes down and comes back while this call runs
            return f"step {args['n']} done"

    def respond(request: condukt.ModelRequest) -> Any:
        turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return call("step", {"n": turn + 1}, id=f"s{turn + 1}") if turn < 4 else reply("all steps done")

    try:
        async with condukt.open_node() as node:
            agent = await node.spawn(
                condukt.Agent, model=FunctionModel(respond), tools=[Step], cwd=tmp_path, session_store=store,
                id="restart", resume=True, load_project_instructions=False,
            )  # fmt: skip
            async with trio.open_nursery() as nursery:
                answer: list[str] = []

                async def run() -> None:
                    answer.append(await agent.run("do four steps"))

                nursery.start_soon(run)
                await in_tool.wait()
                await trio.to_thread.run_sync(own_server.kill)  # a crash, not a clean shutdown
                await trio.to_thread.run_sync(own_server.start)
                restarted.set()
            assert answer == ["all steps done"]
            assert ran == [1, 2, 3, 4]  # no step ran twice
            history = await agent.history()
            await agent.stop()
        fresh = store_on(own_server.dsn, schema)
        try:
            saved = await fresh.load("restart")
        finally:
            await fresh.aclose()
        assert saved is not None and saved.run is None
        assert list(saved.messages) == list(history)  # every turn, the ones after the restart included
        assert [m.text for m in saved.messages if isinstance(m, ToolResultMessage)] == [
            f"step {n} done" for n in (1, 2, 3, 4)
        ]
    finally:
        await store.aclose()


class Proxy:
    """``proxy.py``: a TCP proxy to PostgreSQL in another process, which the test cuts (a partition) and heals."""

    def __init__(self, target_port: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PROXY), str(target_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    async def _command(self, command: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command.encode() + b"\n")
        assert (await trio.to_thread.run_sync(self.process.stdout.readline)).strip() == b"ok"

    async def cut(self) -> None:
        await self._command("cut")

    async def heal(self) -> None:
        await self._command("heal")

    def close(self) -> None:
        self.process.kill()
        self.process.communicate()


@pytest.fixture
def proxy(postgres_server: PostgresServer) -> Iterator[Proxy]:
    proxy = Proxy(postgres_server.port)
    try:
        yield proxy
    finally:
        proxy.close()


async def test_a_partition_longer_than_lease_ttl_stops_the_old_owner_and_the_new_one_continues(
    postgres_server: PostgresServer, proxy: Proxy, tmp_path: Path
) -> None:
    ttl = 2.0
    schema = fresh_schema()
    dsn_via_proxy = postgres_server.dsn.replace(f"port={postgres_server.port}", f"port={proxy.port}")
    old_store = store_on(dsn_via_proxy, schema, lease_ttl=ttl, retry_for=ttl / 4)
    new_store = store_on(postgres_server.dsn, schema, lease_ttl=ttl)
    in_tool = trio.Event()
    healed = trio.Event()
    effects: list[str] = []

    class Slow(condukt.Tool):
        name = "slow"
        description = "Takes as long as the partition lasts."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
            effects.append(context.tool_call_id)
            in_tool.set()
            await healed.wait()
            return "slow done"

    old_model = FunctionModel(
        lambda r: call("slow", id="old-1") if r.messages[-1].text == "second" else reply(f"old: {r.messages[-1].text}")
    )
    try:
        async with condukt.open_node() as node:
            old = await node.spawn(
                condukt.Agent, model=old_model, tools=[Slow], cwd=tmp_path, session_store=old_store, id="part",
                load_project_instructions=False,
            )  # fmt: skip
            assert await old.run("first") == "old: first"
            async with trio.open_nursery() as nursery:
                failure: list[BaseException] = []

                async def second() -> None:
                    try:
                        await old.run("second")
                    except SessionLost as exc:
                        failure.append(exc)

                nursery.start_soon(second)
                await in_tool.wait()
                await proxy.cut()  # the old owner's node can no longer reach the database
                # Not before lease_ttl of silence...
                with pytest.raises(SessionOwned):
                    await node.spawn(condukt.Agent, model=FunctionModel(lambda r: reply("x")), cwd=tmp_path,
                                     session_store=new_store, id="part", load_project_instructions=False)  # fmt: skip
                # ...but after it, another node owns the key and carries on with the history.
                async with await new_store.acquire("part", owner="probe", wait=5 * ttl):
                    pass
                new = await node.spawn(
                    condukt.Agent, model=FunctionModel(lambda r: reply(f"new: {r.messages[-1].text}")), cwd=tmp_path,
                    session_store=new_store, id="part", load_project_instructions=False,
                )  # fmt: skip
                assert await new.run("third") == "new: third"
                await proxy.heal()
                healed.set()  # the old owner's tool returns: its writes are refused
            (error,) = failure
            assert isinstance(error, SessionLost) and error.key == "part"
            assert isinstance(error.__cause__, SessionOwned)  # the store refused the write
            assert isinstance(await old.wait(), SessionLost)  # the old owner stopped
            assert await new.run("fourth") == "new: fourth"  # the new one continues
            history = [m.text for m in await new.history()]
            await new.stop()
        assert history == ["first", "old: first", "third", "new: third", "fourth", "new: fourth"]
        fresh = store_on(postgres_server.dsn, schema)
        try:
            saved = await fresh.load("part")
        finally:
            await fresh.aclose()
        assert saved is not None and [m.text for m in saved.messages] == history
        assert effects == ["old-1"]
    finally:
        await old_store.aclose()
        await new_store.aclose()


# ---------------------------------------------------------------------- SIGKILL of a node process


class Node:
    """``agent_node.py`` in ``tools`` mode: an OS process owning one key."""

    def __init__(self, server: PostgresServer, schema: str, key: str, effects: Path, ttl: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(NODE), "tools", server.dsn, schema, key, str(ttl), str(effects)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )

    async def line(self) -> str:
        assert self.process.stdout is not None
        text = (await trio.to_thread.run_sync(self.process.stdout.readline)).decode()
        if not text:
            _, errors = await trio.to_thread.run_sync(self.process.communicate)
            raise AssertionError(f"agent_node.py ended: {errors.decode()[-3000:]}")
        return text.strip()

    async def kill(self) -> None:
        self.process.kill()
        await trio.to_thread.run_sync(self.process.communicate)


def saved_results(snapshot: Snapshot | None) -> dict[str, ToolResultMessage]:
    """Every tool result a snapshot holds: in its history, and in its run's checkpoint."""
    if snapshot is None:
        return {}
    results = {m.tool_call_id: m for m in snapshot.messages if isinstance(m, ToolResultMessage)}
    if snapshot.run is not None:
        results.update((r.tool_call_id, r) for r in snapshot.run.results)
    return results


async def test_sigkill_at_twenty_random_points_loses_no_result_and_runs_no_non_idempotent_call_twice(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    ttl = 1.0
    schema = fresh_schema()
    reader = store_on(postgres_server.dsn, schema)
    rng = random.Random(33)
    try:
        # A run without a kill: how long one lasts from "ready" to "done" (the span the kill points fall in).
        baseline = Node(postgres_server, schema, "baseline", tmp_path / "baseline.effects", ttl)
        assert await baseline.line() == "ready"
        began = time.monotonic()
        assert (await baseline.line()).startswith("done")
        span = time.monotonic() - began
        await trio.to_thread.run_sync(baseline.process.communicate)
        interrupted: list[str] = []
        delays = [rng.uniform(0.0, span) for _ in range(20)]
        limiter = trio.CapacityLimiter(4)  # four nodes at a time: the kills are independent (one key each)

        async def kill_and_restart(point: int, delay: float) -> None:
            async with limiter:
                key = f"kill-{point}"
                effects = tmp_path / f"{key}.effects"
                first = Node(postgres_server, schema, key, effects, ttl)
                assert await first.line() == "ready"
                await trio.sleep(delay)
                await first.kill()
                before = saved_results(await reader.load(key))  # what was durably saved when the node died
                second = Node(postgres_server, schema, key, effects, ttl)
                assert await second.line() == "ready"
                assert await second.line() == "done done after 4 turns"  # every run finishes after the restart
                await trio.to_thread.run_sync(second.process.communicate)
            after = await reader.load(key)
            final = saved_results(after)
            assert after is not None and after.run is None
            # No completed result lost: every result saved before the kill is in the finished run, as it was.
            for call_id, result in before.items():
                assert final[call_id] == result, (point, call_id)
            # No non-idempotent call ran twice.
            ran = collections.Counter(effects.read_text().split("\n")[:-1] if effects.exists() else [])
            assert all(count == 1 for line, count in ran.items() if line.startswith("pay ")), (point, ran)
            for turn in range(4):
                pay = final[f"pay-{turn}"]
                if pay.is_error:  # killed after it started: the model was told, and it ran at most once
                    assert "interrupted" in pay.text and ran[f"pay pay-{turn}"] <= 1
                    interrupted.append(pay.tool_call_id)
                else:
                    assert pay.text == f"pay did pay-{turn}"
                assert final[f"look-{turn}"].text == f"look did look-{turn}"  # idempotent: run again if need be

        async with trio.open_nursery() as nursery:
            for point, delay in enumerate(delays):
                nursery.start_soon(kill_and_restart, point, delay)
        print(f"20 kills, {len(interrupted)} non-idempotent calls reported interrupted")
    finally:
        await reader.aclose()

