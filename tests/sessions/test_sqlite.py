"""SQLiteStore: the database file, its table, and unreadable data left alone."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

import pytest

from condukt.sessions import (
    SNAPSHOT_VERSION,
    CorruptSnapshot,
    SQLiteStore,
    StoreNotBound,
    UnsupportedSnapshotVersion,
)

from .helpers import full_snapshot
from .test_snapshot import V0_DOCUMENT


def query(path: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    """Run ``sql`` on its own connection, as another process would."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        return connection.execute(sql, args).fetchall()
    finally:
        connection.close()


async def test_bind_puts_the_database_in_the_agent_cwd_lazily(tmp_path: Path) -> None:
    unbound = SQLiteStore()
    assert unbound.path is None
    async with unbound.bind(tmp_path) as store:
        assert store.path == tmp_path / ".condukt" / "sessions.sqlite3"
        assert not (tmp_path / ".condukt").exists()  # created on first use
        await store.save("agent-1", full_snapshot())
    path = tmp_path / ".condukt" / "sessions.sqlite3"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [(journal_mode,)] = query(path, "PRAGMA journal_mode")
    assert journal_mode == "wal"
    columns = [(row[1], row[2], row[5]) for row in query(path, "PRAGMA table_info(sessions)")]
    assert columns == [
        ("key", "TEXT", 1),
        ("version", "INTEGER", 0),
        ("data", "TEXT", 0),
        ("updated_at", "REAL", 0),
        ("seq", "INTEGER", 0),
    ]
    [(key, version, data, seq)] = query(path, "SELECT key, version, data, seq FROM sessions")
    assert (key, version, seq) == ("agent-1", SNAPSHOT_VERSION, 1)
    assert isinstance(data, str) and json.loads(data)["id"] == "0190-session"


def test_a_store_with_a_path_binds_to_itself(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    assert store.bind(tmp_path / "elsewhere") is store


async def test_an_unbound_store_says_so() -> None:
    with pytest.raises(StoreNotBound, match="bind"):
        await SQLiteStore().save("k", full_snapshot())


async def test_closing_releases_the_connection_and_use_reopens_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.save("k", full_snapshot())
    await store.aclose()
    assert await store.load("k") == full_snapshot()
    store.close()
    store.close()
    await store.aclose()
    assert await store.load("k") == full_snapshot()
    await store.aclose()


async def test_closing_an_unbound_store_closes_the_stores_bound_from_it(tmp_path: Path) -> None:
    unbound = SQLiteStore()
    first = unbound.bind(tmp_path / "a")
    assert unbound.bind(tmp_path / "a") is first  # restarts share one connection
    second = unbound.bind(tmp_path / "b")
    await first.save("k", full_snapshot())
    await second.save("k", full_snapshot())
    assert first._connection is not None and second._connection is not None
    await unbound.aclose()
    assert first._connection is None and second._connection is None
    assert await first.load("k") == full_snapshot()  # reopens
    unbound.close()
    assert first._connection is None


async def test_two_stores_share_one_database(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as first, SQLiteStore(tmp_path / "s.db") as second:
        await first.save("k", full_snapshot())
        assert await second.load("k") == full_snapshot()
        await second.delete("k")
        assert await first.load("k") is None


async def test_version_0_row_migrates(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.save("old", full_snapshot())
        query(path, "UPDATE sessions SET version = 0, data = ? WHERE key = 'old'", json.dumps(V0_DOCUMENT))
        snapshot = await store.load("old")
        assert snapshot is not None and snapshot.id == "old-session" and snapshot.thinking_level == "off"
        await store.save("old", snapshot)
    [(version, data)] = query(path, "SELECT version, data FROM sessions")
    assert version == json.loads(str(data))["version"] == SNAPSHOT_VERSION


@pytest.mark.parametrize("bad", ["{not json", '{"version": 1}', "42", b"\x00\x01"])
async def test_corrupt_row_is_reported_and_never_overwritten(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.save("k", full_snapshot())
        query(path, "UPDATE sessions SET data = ? WHERE key = 'k'", bad)
        with pytest.raises(CorruptSnapshot) as info:
            await store.load("k")
        assert str(path) in str(info.value) and "'k'" in str(info.value)
        with pytest.raises(CorruptSnapshot):
            await store.save("k", full_snapshot())
    async with SQLiteStore(path) as fresh:  # a store that never read it refuses too
        with pytest.raises(CorruptSnapshot):
            await fresh.save("k", full_snapshot())
        assert query(path, "SELECT data FROM sessions") == [(bad,)]
        await fresh.delete("k")
        await fresh.save("k", full_snapshot())
        assert await fresh.load("k") == full_snapshot()


async def test_newer_version_row_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    future = json.dumps({"version": SNAPSHOT_VERSION + 1, "id": "k"})
    async with SQLiteStore(path) as store:
        await store.save("k", full_snapshot())
        query(path, "UPDATE sessions SET version = ?, data = ?", SNAPSHOT_VERSION + 1, future)
        with pytest.raises(UnsupportedSnapshotVersion, match="upgrade condukt"):
            await store.load("k")
        with pytest.raises(UnsupportedSnapshotVersion):
            await store.save("k", full_snapshot())
    assert query(path, "SELECT data FROM sessions") == [(future,)]


async def test_a_file_that_is_not_a_database_is_reported_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    garbage = b"this is not an SQLite database, just some text " * 100
    path.write_bytes(garbage)
    async with SQLiteStore(path) as store:
        with pytest.raises(CorruptSnapshot, match="not a usable SQLite database") as info:
            await store.load("k")
        assert str(path) in str(info.value)
        with pytest.raises(CorruptSnapshot):
            await store.save("k", full_snapshot())
    assert path.read_bytes() == garbage
