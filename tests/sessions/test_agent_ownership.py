"""One owner per key at the agent: spawn takes the lease, a second spawn gets SessionOwned, fencing stops a former owner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import Watched

import condukt
from condukt.agent import AgentContext, Capability, SessionLost
from condukt.events import Done, Error, Event
from condukt.sessions import Lease, LeasingStore, MemoryStore, SessionOwned, Snapshot
from condukt.testing import FunctionModel, reply

from .conftest import another_node, close
from .journal_helpers import damage_entry, fingerprint, stored
from .test_leases import ManualClock


def echo_model() -> FunctionModel:
    return FunctionModel(lambda request: reply(f"heard {request.messages[-1].text}"))


def spawn_options(store: Any, tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {
        "model": echo_model(),
        "cwd": tmp_path,
        "session_store": store,
        "id": "s1",
        "load_project_instructions": False,
        **more,
    }


class Initialised(condukt.Agent):
    """Appends its handle to ``started`` once it is set up (its ``init`` ran and every capability's setup)."""

    extra_options = frozenset({"started"})

    def capabilities(self) -> list[Capability]:
        return [Started(self.config.options["started"])]


class Started(Capability):
    def __init__(self, started: list[Any]) -> None:
        self.started = started

    def tools(self, ctx: AgentContext) -> list[Any]:
        self.started.append(ctx.handle)
        return []


class LeaseSeen(Capability):
    """Keeps the lease the agent's context offers capabilities (``ctx.lease``) after setup."""

    def __init__(self, seen: list[Lease | None]) -> None:
        self.seen = seen

    def tools(self, ctx: AgentContext) -> list[Any]:
        self.seen.append(ctx.lease)
        return []


async def test_a_second_spawn_on_a_live_key_gets_session_owned_and_does_not_start(
    store: LeasingStore, tmp_path: Path
) -> None:
    async with condukt.open_node() as node:
        first = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
        assert await first.run("one") == "heard one"
        started: list[Any] = []
        for contender in (store, another_node(store, tmp_path)):
            with pytest.raises(SessionOwned) as info:
                await node.spawn(Initialised, **spawn_options(contender, tmp_path, started=started))
            assert info.value.key == "s1"
            if contender is not store:
                await close(contender)
        assert started == []  # the spawn failed in setup: the agent never started
        assert await first.run("two") == "heard two"  # the owner is untouched
        await first.stop()
        # Released at exit: a new agent (here or on another node) owns the key at once, with the history.
        other = another_node(store, tmp_path)
        try:
            second = await node.spawn(condukt.Agent, **spawn_options(other, tmp_path))
            assert [m.text for m in await second.history()] == ["one", "heard one", "two", "heard two"]
            await second.stop()
        finally:
            await close(other)


async def test_the_agent_offers_its_lease_to_capabilities_and_releases_it_at_exit(tmp_path: Path) -> None:
    store = MemoryStore()
    seen: list[Lease | None] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path, capabilities=[LeaseSeen(seen)]))
        (lease,) = seen
        assert lease is not None and lease.key == "s1" and not lease.released
        assert store.held() == ["s1"]
        await agent.run("hello")
        await agent.stop()
        assert lease.released and store.held() == []


async def test_a_killed_agent_restarted_by_its_supervisor_owns_its_key_at_once(tmp_path: Path) -> None:
    store = MemoryStore(lease_ttl=3600.0)  # a take-over by lease expiry would never come within the test
    incarnations: Watched[condukt.AgentHandle] = Watched()

    class Counted(condukt.Agent):
        extra_options = frozenset({"incarnations"})

        async def init(self, options: Any) -> None:
            options["incarnations"].append(self.handle)

    spec = condukt.ChildSpec(
        "agent", Counted, kwargs={**spawn_options(store, tmp_path), "incarnations": incarnations}, name="worker"
    )
    async with condukt.open_node() as node:
        await node.start_supervisor([spec])
        (first,) = await incarnations.wait_for_length(1)
        await first.run("before")
        first.kill()  # no terminate: the lease is not released
        _, second = await incarnations.wait_for_length(2)
        assert await second.run("after") == "heard after"
        assert [m.text for m in await second.history()] == ["before", "heard before", "after", "heard after"]


async def test_the_lease_of_a_killed_agent_nobody_restarts_is_released_by_the_sweep(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    store = MemoryStore(lease_ttl=30.0)
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
        await agent.run("hello")
        agent.kill()
        await agent.wait()
        assert store.held() == ["s1"]  # killed: nothing released it yet
        other = store.another_node()
        with pytest.raises(SessionOwned):
            await other.acquire("s1")
        # The sweep (every lease_ttl / 3, in virtual time) sees the holder dead and releases it: the
        # key is free long before lease_ttl (the store measures that on the wall clock, which barely moved).
        await trio.sleep(30.0 / 3 + 1.0)
        assert store.held() == []
        lease = await other.acquire("s1")
        await lease.release()


async def test_a_former_owner_taken_over_fails_its_run_with_session_lost_and_exits(tmp_path: Path) -> None:
    clock = ManualClock()
    old_store = MemoryStore(lease_ttl=30.0, clock=clock)
    new_store = old_store.another_node()
    taken = trio.Event()
    go_on = trio.Event()

    async def respond(request: condukt.ModelRequest) -> Any:
        if request.messages[-1].text == "second":
            taken.set()
            await go_on.wait()
        return reply(f"old heard {request.messages[-1].text}")

    events: list[Event] = []
    async with condukt.open_node() as node:
        old = await node.spawn(condukt.Agent, **spawn_options(old_store, tmp_path, model=FunctionModel(respond)))
        await old.run("first")
        async with trio.open_nursery() as nursery:

            async def second_run() -> None:
                async with old.stream("second") as stream:
                    async for event in stream:
                        events.append(event)

            nursery.start_soon(second_run)
            await taken.wait()
            # The old node falls silent past lease_ttl (its heartbeat does not run while the clock moves).
            clock.advance(31.0)
            new = await node.spawn(condukt.Agent, **spawn_options(new_store, tmp_path))
            assert await new.run("new owner's turn") == "heard new owner's turn"
            go_on.set()
        # The run failed with SessionLost (its stream got Error, then Done), and the agent stopped with it.
        error, done = events[-2:]
        assert isinstance(error, Error) and error.error_type == "SessionLost"
        assert isinstance(done, Done) and done.status == "failed"
        reason = await old.wait()
        assert isinstance(reason, SessionLost) and reason.key == "s1"
        assert isinstance(reason.__cause__, SessionOwned)  # the store's refusal
        # The new owner's history holds the old owner's first run and its own turn, nothing of the refused one.
        assert [m.text for m in await new.history()] == ["first", "old heard first", "new owner's turn", "heard new owner's turn"]
        assert [m.text for m in (await new_store.load("s1") or Snapshot("x", ())).messages] == [
            "first", "old heard first", "new owner's turn", "heard new owner's turn"
        ]  # fmt: skip
        await new.stop()


async def test_a_key_of_ten_kilobytes_or_with_dot_dot_slash_is_owned_and_stored_safely(
    store: LeasingStore, tmp_path: Path
) -> None:
    for key in ("k" * 10_240, "../../etc/passwd", "a/../../b"):
        async with condukt.open_node() as node:
            agent = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path, id=key))
            assert await agent.run("hello") == "heard hello"
            with pytest.raises(SessionOwned):
                await node.spawn(condukt.Agent, **spawn_options(store, tmp_path, id=key))
            await agent.stop()
            snapshot = await store.load(key)
            assert snapshot is not None and [m.text for m in snapshot.messages] == ["hello", "heard hello"]
    # Nothing was written outside the working directory.
    assert not (tmp_path.parent / "etc").exists() and not (tmp_path.parent / "b").exists()


async def test_a_corrupt_journal_entry_fails_the_spawn_and_is_not_overwritten(
    store: LeasingStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
        await agent.run("one")
        await agent.run("two")
        await agent.stop()
        kept = await stored(store, "s1")
        assert kept is not None and kept.entries  # the second run was journaled
        before = damage_entry(store, "s1", kept.entries[-1][0])
        with pytest.raises(condukt.sessions.CorruptJournal) as info:
            await node.spawn(condukt.Agent, **spawn_options(store, tmp_path))
        assert info.value.key == "s1"
        assert fingerprint(store, "s1") == before  # left as it was
        # The key is not left owned by the failed start; other keys are unaffected.
        other = await node.spawn(condukt.Agent, **spawn_options(store, tmp_path, id="s2"))
        assert await other.run("fine") == "heard fine"
        await other.stop()
        async with await store.acquire("s1"):
            pass

