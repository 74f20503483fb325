"""DiskStore: where files go, their names, and unreadable files left alone."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from condukt.sessions import (
    SNAPSHOT_VERSION,
    CorruptSnapshot,
    DiskStore,
    Snapshot,
    StoreNotBound,
    UnsupportedSnapshotVersion,
    encode,
)
from condukt.sessions.disk import file_name

from .helpers import full_snapshot
from .test_snapshot import V0_DOCUMENT
from .test_stores import AWKWARD_KEYS


async def test_bind_roots_the_store_in_the_agent_cwd(tmp_path: Path) -> None:
    unbound = DiskStore()
    assert unbound.root is None
    store = unbound.bind(tmp_path)
    assert store.root == tmp_path / ".condukt" / "sessions"
    assert not store.root.exists()  # created on first save
    await store.save("agent-1", full_snapshot())
    path = tmp_path / ".condukt" / "sessions" / "agent-1.json"
    assert json.loads(path.read_text())["id"] == "0190-session"
    assert store.path("agent-1") == path


def test_binding_to_one_directory_gives_one_store(tmp_path: Path) -> None:
    unbound = DiskStore()
    store = unbound.bind(tmp_path / "a")
    assert unbound.bind(tmp_path / "a") is store  # every restart of an agent shares its locks
    assert unbound.bind(tmp_path / "b").root == tmp_path / "b" / ".condukt" / "sessions"
    assert store.bind(tmp_path / "b") is store


def test_a_store_with_a_root_binds_to_itself(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "mine")
    assert store.bind(tmp_path / "elsewhere") is store


async def test_an_unbound_store_says_so() -> None:
    with pytest.raises(StoreNotBound, match="bind"):
        await DiskStore().load("k")


async def test_files_are_private(tmp_path: Path) -> None:
    store = DiskStore().bind(tmp_path)
    await store.save("k", full_snapshot())
    assert stat.S_IMODE(store.path("k").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / ".condukt" / "sessions").stat().st_mode) == 0o700


def test_file_names_are_safe_and_distinct() -> None:
    names = [file_name(key) for key in AWKWARD_KEYS]
    assert len({name.lower() for name in names}) == len(names)  # even on case-insensitive file systems
    for name in names:
        assert "/" not in name and "\\" not in name and "\x00" not in name
        assert not name.startswith(".")
        assert name.endswith(".json")
        assert len(name.encode()) <= 255
    assert file_name("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b") == "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.json"
    assert file_name("reviewer.v2_main") == "reviewer.v2_main.json"
    assert file_name("a/b").startswith("a_b~")


async def test_awkward_keys_stay_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "root"
    store = DiskStore(root)
    for key in AWKWARD_KEYS:
        await store.save(key, Snapshot(key, ()))
    stems = [file_name(key).removesuffix(".json") for key in AWKWARD_KEYS]
    expected = [f"{stem}{suffix}" for stem in stems for suffix in (".json", ".journal", ".lock")]
    assert sorted(path.name for path in tmp_path.rglob("*")) == sorted(["deep", "root", *expected])
    assert all(path.is_file() for path in root.iterdir())


async def test_no_temporary_files_are_left_behind(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    for i in range(5):
        await store.save("k", Snapshot(str(i), ()))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["k.journal", "k.json", "k.lock"]


async def test_version_0_file_migrates(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    store.path("old").write_text(json.dumps(V0_DOCUMENT))
    snapshot = await store.load("old")
    assert snapshot is not None and snapshot.id == "old-session" and snapshot.thinking_level == "off"
    await store.save("old", snapshot)
    assert json.loads(store.path("old").read_text())["version"] == SNAPSHOT_VERSION


async def test_corrupt_file_is_reported_and_never_overwritten(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    path = store.path("k")
    path.write_bytes(b'{"version": 1, "id": "k", "messages": [')
    with pytest.raises(CorruptSnapshot) as info:
        await store.load("k")
    assert str(path) in str(info.value)
    assert info.value.location == f"{path} (key 'k')"
    with pytest.raises(CorruptSnapshot, match="corrupt"):
        await store.save("k", full_snapshot())
    assert path.read_bytes() == b'{"version": 1, "id": "k", "messages": ['
    # Still refused on the next attempt, and by a store that never loaded it.
    with pytest.raises(CorruptSnapshot):
        await store.save("k", full_snapshot())
    with pytest.raises(CorruptSnapshot):
        await DiskStore(tmp_path).save("k", full_snapshot())
    assert path.read_bytes() == b'{"version": 1, "id": "k", "messages": ['
    # Other keys are unaffected.
    await store.save("other", full_snapshot())


async def test_a_repaired_file_can_be_overwritten(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    path = store.path("k")
    path.write_text("garbage")
    with pytest.raises(CorruptSnapshot):
        await store.load("k")
    path.write_text(encode(Snapshot("repaired", ())))
    await store.save("k", full_snapshot())
    assert await store.load("k") == full_snapshot()


async def test_a_removed_corrupt_file_can_be_replaced(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    store.path("a").write_text("garbage")
    store.path("b").write_text("garbage")
    with pytest.raises(CorruptSnapshot):
        await store.load("a")
    store.path("a").unlink()  # by hand
    await store.save("a", full_snapshot())
    await store.delete("b")  # or through the store, without reading it
    await store.save("b", full_snapshot())
    assert await store.load("a") == await store.load("b") == full_snapshot()


async def test_newer_version_file_is_refused_and_kept(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    path = store.path("k")
    document = json.dumps({"version": SNAPSHOT_VERSION + 1, "id": "k", "future": True})
    path.write_text(document)
    with pytest.raises(UnsupportedSnapshotVersion, match="upgrade condukt"):
        await store.load("k")
    with pytest.raises(UnsupportedSnapshotVersion):
        await store.save("k", full_snapshot())
    with pytest.raises(UnsupportedSnapshotVersion):
        await DiskStore(tmp_path).save("k", full_snapshot())
    assert path.read_text() == document


async def test_a_file_system_error_propagates(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = DiskStore(tmp_path / "file" / "sessions")
    with pytest.raises(OSError):
        await store.save("k", full_snapshot())
