"""The SessionStore contract, for every store."""

from __future__ import annotations

from pathlib import Path

import trio

from condukt.sessions import DiskStore, MemoryStore, SessionStore, Snapshot, SQLiteStore

from .helpers import EVERY_MESSAGE, big_snapshot, full_snapshot, tag_of

#: Keys that are awkward as file names or SQL; each must get its own snapshot.
AWKWARD_KEYS = [
    "plain",
    "Plain",
    "PLAIN",
    "a/b",
    "a_b",
    "a\\b",
    "a:b",
    "../escape",
    "../../etc/passwd",
    "/absolute",
    "..",
    ".",
    "",
    ".hidden",
    "with space",
    "ünïcödé",
    "日本語",
    "emoji \U0001f600",
    "x" * 300,
    "nul\x00byte",
    "new\nline",
    "plain~0123456789abcdef",
    "plain_~0123456789abcdef",
    "CON",
    "key'; DROP TABLE sessions; --",
]


def test_every_store_follows_the_protocol(tmp_path: Path) -> None:
    for store in (MemoryStore(), DiskStore(tmp_path), SQLiteStore(tmp_path / "db")):
        assert isinstance(store, SessionStore)


async def test_round_trip_of_every_message_type(store: SessionStore) -> None:
    snapshot = full_snapshot()
    await store.save("k", snapshot)
    loaded = await store.load("k")
    assert loaded == snapshot
    assert loaded is not snapshot
    assert loaded.messages == EVERY_MESSAGE


async def test_missing_key_loads_as_none(store: SessionStore) -> None:
    assert await store.load("never-saved") is None


async def test_save_replaces_the_previous_snapshot(store: SessionStore) -> None:
    await store.save("k", Snapshot("first", ()))
    await store.save("k", full_snapshot("second"))
    loaded = await store.load("k")
    assert loaded is not None and loaded.id == "second"


async def test_delete_removes_only_that_key(store: SessionStore) -> None:
    await store.save("a", Snapshot("a", ()))
    await store.save("b", Snapshot("b", ()))
    await store.delete("a")
    assert await store.load("a") is None
    assert await store.load("b") == Snapshot("b", ())
    await store.delete("a")  # absent: no error
    await store.delete("never-saved")
    await store.save("a", Snapshot("again", ()))
    assert await store.load("a") == Snapshot("again", ())


async def test_awkward_keys_are_safe_and_distinct(store: SessionStore) -> None:
    for key in AWKWARD_KEYS:
        await store.save(key, Snapshot(key, ()))
    for key in AWKWARD_KEYS:
        assert await store.load(key) == Snapshot(key, ())
    await store.delete("a/b")
    assert await store.load("a/b") is None
    assert await store.load("a_b") == Snapshot("a_b", ())


async def test_concurrent_saves_of_one_key_do_not_interleave(store: SessionStore) -> None:
    tags = [f"t{i}" for i in range(8)]
    async with trio.open_nursery() as nursery:
        for tag in tags:
            nursery.start_soon(store.save, "k", big_snapshot(tag, messages=20, size=5_000))
    loaded = await store.load("k")
    assert loaded is not None and tag_of(loaded) in tags


async def test_saves_of_different_keys_run_concurrently(store: SessionStore) -> None:
    async with trio.open_nursery() as nursery:
        for i in range(10):
            nursery.start_soon(store.save, f"k{i}", Snapshot(f"s{i}", EVERY_MESSAGE))
    for i in range(10):
        assert await store.load(f"k{i}") == Snapshot(f"s{i}", EVERY_MESSAGE)


async def test_a_store_object_outlives_its_users() -> None:
    # Passed in a ChildSpec's kwargs, the same MemoryStore serves every
    # incarnation of an agent.
    store = MemoryStore()
    await store.bind(Path("/first")).save("agent", full_snapshot())
    assert await store.bind(Path("/second")).load("agent") == full_snapshot()
    assert store.keys() == ["agent"]
