"""A process SIGKILLed mid-save leaves the previous snapshot readable.

Each test runs ``saver.py`` in a child process that saves ~4 MB snapshots in
a loop, kills it with SIGKILL at moments drawn from a seeded generator (so
the same moments every run), and checks that the store then holds a whole
snapshot: the last one the child reported saved, or the one it was saving.
The next child resumes from there, so each round also checks that a store
recovers (leftover temporary files, a hot SQLite WAL).
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import trio

from condukt.sessions import DiskStore, SessionStore, SQLiteStore

from .helpers import tag_of

SAVER = Path(__file__).with_name("saver.py")
ROUNDS = 6
KEY = "session"  # as in saver.py


def start_saver(kind: str, location: Path, *options: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start a saver; return it once it has saved once, with the number it saved."""
    # Unbuffered: a buffered readline could take the next lines too, and communicate()
    # (which reads the pipe itself) would then miss them.
    child = subprocess.Popen(
        [sys.executable, str(SAVER), kind, str(location), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert child.stdout is not None
    first = child.stdout.readline().decode()
    if not first.strip().isdigit():
        child.kill()
        _, errors = child.communicate(timeout=10)
        raise AssertionError(f"saver failed: {first!r}\n{errors.decode()}")
    return child, int(first)


def kill(child: subprocess.Popen[bytes]) -> list[str]:
    """SIGKILL ``child``; return the lines it printed since its first."""
    child.kill()
    out, _ = child.communicate(timeout=10)
    return out.decode().split()


def stored_number(store: SessionStore) -> int:
    """The number of the snapshot in ``store``, checking it is whole."""

    async def load() -> int:
        snapshot = await store.load(KEY)
        assert snapshot is not None
        return int(tag_of(snapshot))

    return trio.run(load)


def check_kills_mid_save(kind: str, location: Path, store: SessionStore) -> None:
    moments = random.Random(f"{kind}-kills")
    previous = -1
    for _ in range(ROUNDS):
        child, first = start_saver(kind, location)
        assert first == previous + 1 or first == previous + 2  # resumed from a whole snapshot
        # A save takes some 20 ms: these moments fall before, in and after saves.
        trio.run(trio.sleep, moments.uniform(0.0, 0.06))
        acknowledged = [first, *(int(line) for line in kill(child))]
        stored = stored_number(store)
        assert stored in (acknowledged[-1], acknowledged[-1] + 1)
        previous = stored


def test_disk_store_survives_sigkill_mid_save(tmp_path: Path) -> None:
    check_kills_mid_save("disk", tmp_path, DiskStore(tmp_path))


def test_disk_store_survives_sigkill_between_write_and_rename(tmp_path: Path) -> None:
    child, first = start_saver("disk", tmp_path, "pause-before-rename")
    assert child.stdout is not None
    assert child.stdout.readline() == b"renaming\n"
    assert kill(child) == []
    # The new snapshot was written in full, but only to a temporary file.
    [temporary] = tmp_path.glob(".session.json.*.tmp")
    assert temporary.stat().st_size > 4_000_000
    store = DiskStore(tmp_path)
    assert stored_number(store) == first
    # A new process ignores the leftover and carries on.
    child, resumed = start_saver("disk", tmp_path)
    kill(child)
    assert resumed == first + 1
    assert stored_number(store) >= resumed


def test_sqlite_store_survives_sigkill_mid_save(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SQLiteStore(path)
    try:
        check_kills_mid_save("sqlite", path, store)
    finally:
        store.close()


def check_kills_mid_append(kind: str, location: Path, store: SessionStore) -> None:
    moments = random.Random(f"{kind}-journal-kills")
    previous = 0
    for _ in range(ROUNDS):
        child, first = start_saver(kind, location, "journal")
        assert first == previous + 1 or first == previous + 2  # resumed from the whole journal
        trio.run(trio.sleep, moments.uniform(0.0, 0.05))
        acknowledged = [first, *(int(line) for line in kill(child))]

        async def turns() -> int:
            snapshot = await store.load(KEY)
            assert snapshot is not None
            for i, message in enumerate(snapshot.messages):
                assert message.text.startswith(f"turn {i} ")
            return len(snapshot.messages)

        stored = trio.run(turns)
        assert stored in (acknowledged[-1], acknowledged[-1] + 1)
        previous = stored


def test_disk_store_survives_sigkill_mid_journal_append(tmp_path: Path) -> None:
    check_kills_mid_append("disk", tmp_path, DiskStore(tmp_path))


def test_sqlite_store_survives_sigkill_mid_journal_append(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SQLiteStore(path)
    try:
        check_kills_mid_append("sqlite", path, store)
    finally:
        store.close()
