"""Fixtures that run a test against each store, PostgreSQL included (a server the tests start)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from condukt.sessions import DiskStore, LeasingStore, MemoryStore, SQLiteStore

from .pg import PostgresServer, server_or_skip

KINDS = ["memory", "disk", "sqlite", "postgres"]
_schemas = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session's tests (each test gets its own schema); skipped where none can run."""
    server = server_or_skip()
    try:
        yield server
    finally:
        server.remove()


def fresh_schema() -> str:
    """A schema name no other test of this run uses."""
    return f"t{next(_schemas)}"


async def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest, **options: object) -> LeasingStore:
    """A new store of ``kind`` over fresh data in ``tmp_path`` (or a fresh PostgreSQL schema)."""
    if kind == "memory":
        return MemoryStore(**options)  # type: ignore[arg-type]
    if kind == "disk":
        return DiskStore(tmp_path / "sessions", **options)  # type: ignore[arg-type]
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "sessions.sqlite3", **options)  # type: ignore[arg-type]
    from condukt.sessions import PostgresStore

    server: PostgresServer = request.getfixturevalue("postgres_server")
    return PostgresStore(server.dsn, schema=fresh_schema(), **options)  # type: ignore[arg-type]


def another_node(store: LeasingStore, tmp_path: Path) -> LeasingStore:
    """A second store object over the same data, as another process would open it."""
    if isinstance(store, MemoryStore):
        return store.another_node()
    if isinstance(store, DiskStore):
        return DiskStore(store.root, lease_ttl=store.lease_ttl, clock=store._clock)
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path, lease_ttl=store.lease_ttl, clock=store._clock)
    from condukt.sessions import PostgresStore

    assert isinstance(store, PostgresStore)
    return PostgresStore(store._conninfo, schema=store.schema, lease_ttl=store.lease_ttl)


async def close(store: object) -> None:
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LeasingStore]:
    """A fresh store of each kind (the file stores bound to a temporary directory)."""
    if request.param == "disk":
        made: LeasingStore = DiskStore().bind(tmp_path)
    elif request.param == "sqlite":
        made = SQLiteStore().bind(tmp_path)
    else:
        made = await make_store(request.param, tmp_path, request)
    try:
        yield made
    finally:
        await close(made)
