"""A fixture that runs a test against each store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from condukt.sessions import DiskStore, MemoryStore, SessionStore, SQLiteStore


@pytest.fixture(params=["memory", "disk", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """A fresh store of each kind, bound to a temporary directory."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "disk":
        yield DiskStore().bind(tmp_path)
    else:
        async with SQLiteStore().bind(tmp_path) as sqlite_store:
            yield sqlite_store
