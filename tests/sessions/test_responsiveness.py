"""Saving and loading a big snapshot leave the trio loop free for other tasks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from condukt.sessions import SessionStore

from .conftest import close, make_store
from .helpers import big_snapshot, tag_of

BIG = big_snapshot("big", messages=200, size=50_000)  # 10 MB: tens of milliseconds of work


async def ticks_during(operation: Callable[[], Awaitable[object]]) -> int:
    """How many times a ticker task ran while ``operation`` was awaited."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.lowlevel.checkpoint()
        before = ticks
        await operation()
        during = ticks - before
        nursery.cancel_scope.cancel()
    return during


@pytest.mark.parametrize("kind", ["disk", "sqlite", "postgres"])
async def test_the_loop_runs_while_a_big_snapshot_is_saved_and_loaded(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    store: SessionStore = await make_store(kind, tmp_path, request)
    await store.load("warm-up")  # opens the database
    # Done on the loop, the work would let the ticker run once or twice
    # (at the checkpoints around it); in a worker thread it runs throughout.
    assert await ticks_during(lambda: store.save("k", BIG)) > 20
    loaded = None

    async def load() -> None:
        nonlocal loaded
        loaded = await store.load("k")

    assert await ticks_during(load) > 20
    assert loaded is not None and tag_of(loaded) == "big"
    await close(store)
