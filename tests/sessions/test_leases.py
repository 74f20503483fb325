"""One owner per key, for every store: leases, heartbeats, take-over after lease_ttl, fencing."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from condukt.messages import ToolCall
from condukt.sessions import LeaseReleased, LeasingStore, MemoryStore, SessionOwned, Snapshot

from .conftest import KINDS, another_node, close, make_store
from .journal_helpers import Conversation

LOCAL_KINDS = [kind for kind in KINDS if kind != "postgres"]


class ManualClock:
    """A lease clock the test moves: a node whose heartbeat does not run meanwhile falls silent."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def test_a_second_owner_gets_session_owned(store: LeasingStore, tmp_path: Path) -> None:
    lease = await store.acquire("k", owner="first")
    other = another_node(store, tmp_path)
    try:
        for contender in (store, other):
            with pytest.raises(SessionOwned) as info:
                await contender.acquire("k", owner="second")
            assert info.value.key == "k" and info.value.owner == "first"
            # Writes without a lease are refused too; reads are not.
            with pytest.raises(SessionOwned):
                await contender.save("k", Conversation().turn())
            with pytest.raises(SessionOwned):
                await contender.delete("k")
        assert await other.load("k") is None
        # Another key is free.
        async with await other.acquire("k2"):
            pass
    finally:
        await lease.release()
        await close(other)


async def test_a_released_key_is_free_at_once_and_the_old_lease_is_void(store: LeasingStore, tmp_path: Path) -> None:
    conversation = Conversation()
    async with await store.acquire("k", owner="first") as first:
        await first.save(conversation.turn())
    assert first.released
    with pytest.raises(LeaseReleased):
        await first.save(conversation.snapshot())
    other = another_node(store, tmp_path)
    try:
        async with await other.acquire("k", owner="second") as second:
            assert second.token > first.token
            assert await second.load() == conversation.snapshot()
            await second.save(conversation.turn())
        assert await store.load("k") == conversation.snapshot()
        await first.release()  # twice: harmless
    finally:
        await close(other)


@pytest.mark.parametrize("kind", LOCAL_KINDS)
async def test_a_lease_holder_silent_past_lease_ttl_is_taken_over_and_its_writes_are_refused(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    clock = ManualClock()
    old = await make_store(kind, tmp_path, request, lease_ttl=30.0, clock=clock)
    new = another_node(old, tmp_path)
    ours, theirs = Conversation("ours"), Conversation("theirs")
    try:
        old_lease = await old.acquire("k", owner="old")
        await old_lease.save(theirs.turn())
        # The old owner's node falls silent (its heartbeat does not run while the clock moves).
        clock.advance(29.0)
        with pytest.raises(SessionOwned) as info:
            await new.acquire("k", owner="new")
        assert info.value.owner == "old" and info.value.retry_after == pytest.approx(1.0)
        clock.advance(1.5)
        new_lease = await new.acquire("k", owner="new")
        assert new_lease.token > old_lease.token
        assert await new_lease.load() == theirs.snapshot()
        await new_lease.save(ours.turn())
        # The former owner comes back: every write is refused, nothing of the new owner's is lost.
        with pytest.raises(SessionOwned, match="taken over"):
            await old_lease.save(Snapshot("theirs", theirs.messages, updated_at=1.0))
        assert old_lease.lost
        with pytest.raises(SessionOwned):
            await old_lease.tool_started("r", ToolCall("c", "t", {}))
        assert await old.load("k") == ours.snapshot()
        await old_lease.release()  # releasing a lost lease frees nothing of the new owner's
        with pytest.raises(SessionOwned):
            await old.acquire("k")
        await new_lease.release()
    finally:
        await close(old)
        await close(new)


@pytest.mark.parametrize("kind", LOCAL_KINDS)
async def test_a_write_without_a_lease_fences_out_a_dead_owner(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    clock = ManualClock()
    old = await make_store(kind, tmp_path, request, lease_ttl=10.0, clock=clock)
    new = another_node(old, tmp_path)
    try:
        lease = await old.acquire("k")
        await lease.save(Conversation("old").turn())
        clock.advance(11.0)
        await new.save("k", Conversation("new").turn())
        with pytest.raises(SessionOwned):
            await lease.save(Snapshot("old", ()))
        assert await new.load("k") == Conversation("new").turn()
    finally:
        await close(old)
        await close(new)


async def test_one_heartbeat_per_interval_keeps_every_lease_of_a_node(autojump_clock: trio.testing.MockClock) -> None:
    store = MemoryStore(lease_ttl=3.0, clock=trio.current_time)
    other = store.another_node()
    beats = 0
    heartbeat = store._heartbeat

    async def counted() -> None:
        nonlocal beats
        beats += 1
        await heartbeat()

    store._heartbeat = counted  # type: ignore[method-assign]
    leases = [await store.acquire(f"k{i}") for i in range(100)]
    await trio.sleep(30.0)  # ten lease_ttls
    with pytest.raises(SessionOwned):
        await other.acquire("k50")
    # One heartbeat every lease_ttl / 3 for the whole node, whatever the number of keys.
    assert 25 <= beats <= 35
    for lease in leases:
        await lease.release()
    async with await other.acquire("k50"):
        pass
    assert store.held() == []


async def test_a_cancelled_acquire_holds_nothing(store: LeasingStore) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await store.acquire("k")
    assert scope.cancelled_caught
    await store.settled()
    async with await store.acquire("k"):
        pass
