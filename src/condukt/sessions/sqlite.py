"""``SQLiteStore``: every session of a project in one SQLite database."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Self

import trio

from ._errors import CorruptSnapshot
from ._located_store import LocatedStore
from ._snapshot import SNAPSHOT_VERSION, Snapshot, decode, encode

__all__ = ["BUSY_TIMEOUT", "SQLiteStore"]

#: How long an operation waits for another process's write transaction (seconds).
BUSY_TIMEOUT = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    key TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    updated_at REAL NOT NULL
)
"""
_UPSERT = """
INSERT INTO sessions (key, version, data, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE
SET version = excluded.version, data = excluded.data, updated_at = excluded.updated_at
"""
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


class SQLiteStore(LocatedStore):
    """Snapshots as rows of one table in an SQLite database (stdlib :mod:`sqlite3`).

    ``path`` defaults to ``<cwd>/.condukt/sessions.sqlite3`` for the ``cwd``
    the agent binds the store to (:meth:`bind` returns the store there, one
    per directory; a store with a path returns itself); using a store without a path before
    that raises :class:`StoreNotBound`. The database is opened (and created,
    mode 0600) on first use, in WAL mode with ``synchronous=FULL``: a save
    that returned survives a crash of the process or the machine, and a
    process killed mid-save leaves the previous snapshot (the unfinished
    transaction is rolled back). The table is ``sessions(key TEXT PRIMARY
    KEY, version INTEGER, data TEXT, updated_at REAL)``, ``data`` being the
    snapshot's JSON document.

    The store has one connection, used from worker threads one operation at
    a time (a trio lock serialises them, so all operations happen in call
    order), so the trio loop never waits for the database. Other processes
    may share the file; a write waits up to :data:`BUSY_TIMEOUT` seconds for
    theirs (a cancellation does not cut that wait short), then raises
    ``sqlite3.OperationalError``.

    As with :class:`~condukt.sessions.DiskStore`, a row that cannot be read
    (corrupt, or of a newer format) is never overwritten by ``save``; a
    database file that is not SQLite raises :class:`CorruptSnapshot` too.

    Release the connection with :meth:`aclose` (or ``async with store:``);
    a later operation opens a new one, so a store shared by the restarts of
    an agent may be closed by any of them. Closing an unbound store closes
    every store bound from it.
    """

    default_location = Path(".condukt", "sessions.sqlite3")

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(path)
        self._lock = trio.Lock()
        self._connection: sqlite3.Connection | None = None

    @property
    def path(self) -> Path | None:
        """The database file; None until bound."""
        return self._location

    async def aclose(self) -> None:
        """Close the connection, after the operation in flight if any.

        Closing an unbound store closes the stores :meth:`bind` made from it.
        Cancelled while it waits for the operation in flight, it leaves the
        connection open for a later close; a cancellation landing just as it
        gets the lock drops the connection unclosed (the garbage collector
        closes it). Bound stores closed before the cancellation stay closed.
        """
        for bound in self._bound.values():
            await bound.aclose()
        async with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None:
                await trio.to_thread.run_sync(connection.close)

    def close(self) -> None:
        """Close the connection now; raises :class:`trio.BusyResourceError` during an operation."""
        for bound in self._bound.values():
            bound.close()
        if self._lock.locked():
            raise trio.BusyResourceError("SQLiteStore is in use; await aclose() instead")
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def _hold(self, key: str) -> AbstractAsyncContextManager[object]:
        return self._lock

    @contextmanager
    def _connected(self, path: Path) -> Iterator[sqlite3.Connection]:
        try:
            if self._connection is None:
                self._connection = _connect(path)
            yield self._connection
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorcode", None) in _DAMAGED:
                raise CorruptSnapshot(str(path), f"not a usable SQLite database: {exc}") from exc
            raise

    def _load_sync(self, path: Path, key: str) -> Snapshot | None:
        with self._connected(path) as connection:
            return _select(connection, path, key)

    def _save_sync(self, path: Path, key: str, snapshot: Snapshot, check: bool) -> None:
        data = encode(snapshot)
        with self._connected(path) as connection:
            # IMMEDIATE takes the write lock first, so no other process
            # writes between the check and the upsert.
            connection.execute("BEGIN IMMEDIATE")
            try:
                if check:
                    _select(connection, path, key)
                connection.execute(_UPSERT, (key, SNAPSHOT_VERSION, data, snapshot.updated_at))
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    def _delete_sync(self, path: Path, key: str) -> None:
        with self._connected(path) as connection:
            connection.execute("DELETE FROM sessions WHERE key = ?", (key,))


def _select(connection: sqlite3.Connection, path: Path, key: str) -> Snapshot | None:
    row = connection.execute("SELECT data FROM sessions WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    location = f"{path} (key {key!r})"
    data = row[0]
    if not isinstance(data, (str, bytes)):
        raise CorruptSnapshot(location, f"data is {type(data).__name__}, not text")
    return decode(data, location)


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Sessions are private: create the file (an empty file is an empty
    # database) owner-only; SQLite gives its -wal and -shm files the same mode.
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    # Autocommit mode (isolation_level=None): transactions are explicit.
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute(_SCHEMA)
    except BaseException:
        connection.close()
        raise
    return connection
