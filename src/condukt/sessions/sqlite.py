"""``SQLiteStore``: every session of a project in one SQLite database."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import trio

from ._engine import SESSION, Diverged, Fence, Stored
from ._errors import CorruptSnapshot, SessionOwned, UnsupportedSchema
from ._located_store import LocatedStore
from ._snapshot import SNAPSHOT_VERSION

__all__ = ["BUSY_TIMEOUT", "SCHEMA_VERSION", "SQLiteStore"]

T = TypeVar("T")

#: How long an operation waits for another process's write transaction (seconds).
BUSY_TIMEOUT = 10.0

#: The layout of the database this condukt makes; 1 was the ``sessions`` table alone.
SCHEMA_VERSION = 2

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS sessions (
        key TEXT PRIMARY KEY, version INTEGER NOT NULL, data TEXT NOT NULL, updated_at REAL NOT NULL,
        seq INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS journal (
        key TEXT NOT NULL, stream TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (key, stream, seq)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS runs (
        key TEXT NOT NULL, stream TEXT NOT NULL, data TEXT NOT NULL, seq INTEGER NOT NULL,
        created INTEGER NOT NULL, PRIMARY KEY (key, stream))""",
    """CREATE TABLE IF NOT EXISTS leases (
        key TEXT PRIMARY KEY, token INTEGER NOT NULL, node TEXT, owner TEXT, ttl REAL)""",
    "CREATE TABLE IF NOT EXISTS nodes (node TEXT PRIMARY KEY, expires_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS condukt_schema (version INTEGER NOT NULL)",
]
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


class SQLiteStore(LocatedStore):
    """Sessions as rows of a few tables in an SQLite database (stdlib :mod:`sqlite3`).

    ``path`` defaults to ``<cwd>/.condukt/sessions.sqlite3`` for the ``cwd``
    the agent binds the store to (:meth:`bind` returns the store there, one
    per directory; a store with a path returns itself); using a store without
    a path before that raises :class:`StoreNotBound`. The database is opened
    (and created, mode 0600) on first use, in WAL mode with
    ``synchronous=FULL``: a write that returned survives a crash of the
    process or the machine, and a process killed mid-write leaves the
    previous state (the transaction is rolled back).

    Tables: ``sessions(key, version, data, updated_at, seq)``, each key's
    base snapshot (``seq``: the last journal entry it holds);
    ``journal(key, stream, seq, data)``, the entries since (``stream`` ''
    for the session, ``run:<id>`` for a run's events);
    ``runs(key, stream, data, seq, created)``, run log records;
    ``leases(key, token, node, owner, ttl)`` and ``nodes(node,
    expires_at)`` for ownership; ``condukt_schema(version)``, the layout's
    version (:data:`SCHEMA_VERSION`). A database made by an older condukt
    (the ``sessions`` table alone) is upgraded in place on first use; one
    made by a newer condukt raises :class:`UnsupportedSchema`.

    The store has one connection, used from worker threads one operation at
    a time (a trio lock), so the trio loop never waits for the database.
    Every write checks the key's lease in the same transaction. Other
    processes may share the file; a write waits up to :data:`BUSY_TIMEOUT`
    seconds for theirs, then raises ``sqlite3.OperationalError``.

    Release the connection with :meth:`aclose` (or ``async with store:``);
    a later operation opens a new one. Closing an unbound store closes
    every store bound from it.
    """

    default_location = Path(".condukt", "sessions.sqlite3")

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        lease_ttl: float = 30.0,
        run_events: int = 10_000,
        runs: int = 16,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(path, lease_ttl=lease_ttl, run_events=run_events, runs=runs, clock=clock)
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
        connection open for a later close. Leases stay held (their heartbeat
        reopens the connection); release them first.
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

    # -- plumbing ---------------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        path = self._bound_location()
        async with self._lock:
            return await trio.to_thread.run_sync(self._in_connection, path, fn, args)

    def _in_connection(self, path: Path, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            if self._connection is None:
                self._connection = _connect(path)
            return fn(self._connection, path, *args)
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorcode", None) in _DAMAGED:
                raise CorruptSnapshot(str(path), f"not a usable SQLite database: {exc}") from exc
            raise

    @contextmanager
    def _transaction(self, connection: sqlite3.Connection) -> Iterator[None]:
        # IMMEDIATE takes the write lock first: no other process writes
        # between the lease check and the write.
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def _location_of(self, path: Path, key: str) -> str:
        return f"{path} (key {key!r:.200})"

    # -- storage primitives -----------------------------------------------------------------------

    async def _read(self, key: str, stream: str, after: int) -> Stored | None:
        return await self._run(self._read_sync, key, stream, after)

    async def _append(self, key: str, stream: str, fence: Fence, seq: int, text: str) -> None:
        await self._run(self._append_sync, key, stream, fence.token, key not in self._held, seq, text)

    async def _put_base(self, key: str, stream: str, fence: Fence, text: str, seq: int | None) -> int:
        return await self._run(self._put_base_sync, key, stream, fence.token, key not in self._held, text, seq)

    async def _remove(self, key: str, fence: Fence, stream: str | None = None) -> None:
        await self._run(self._remove_sync, key, fence.token, key not in self._held, stream)

    async def _streams(self, key: str, prefix: str) -> list[str]:
        return await self._run(self._streams_sync, key, prefix)

    async def _acquire(self, key: str, owner: str) -> int:
        return await self._run(self._acquire_sync, key, owner)

    async def _release(self, key: str, token: int) -> None:
        await self._run(self._release_sync, key, token)

    async def _heartbeat(self) -> None:
        await self._run(self._heartbeat_sync)

    def _base(self, connection: sqlite3.Connection, key: str, stream: str) -> tuple[Any, int] | None:
        if stream == SESSION:
            row = connection.execute("SELECT data, seq FROM sessions WHERE key = ?", (key,)).fetchone()
        else:
            row = connection.execute(
                "SELECT data, seq FROM runs WHERE key = ? AND stream = ?", (key, stream)
            ).fetchone()
        return None if row is None else (row[0], int(row[1]))

    def _last(self, connection: sqlite3.Connection, key: str, stream: str, base_seq: int) -> int:
        (last,) = connection.execute(
            "SELECT max(seq) FROM journal WHERE key = ? AND stream = ?", (key, stream)
        ).fetchone()
        return base_seq if last is None else max(base_seq, int(last))

    def _read_sync(
        self, connection: sqlite3.Connection, path: Path, key: str, stream: str, after: int
    ) -> Stored | None:
        connection.execute("BEGIN")
        try:
            base = self._base(connection, key, stream)
            if base is None:
                return None
            data, base_seq = base
            location = self._location_of(path, key)
            if not isinstance(data, (str, bytes)):
                raise CorruptSnapshot(location, f"data is {type(data).__name__}, not text")
            rows = connection.execute(
                "SELECT seq, data FROM journal WHERE key = ? AND stream = ? AND seq > ? ORDER BY seq",
                (key, stream, max(after, base_seq)),
            ).fetchall()
            last = self._last(connection, key, stream, base_seq)
        finally:
            connection.execute("COMMIT")
        return Stored(data, base_seq, [(int(seq), text) for seq, text in rows], location, last)

    def _check(self, connection: sqlite3.Connection, key: str, token: int | None, stale_ok: bool) -> None:
        row = connection.execute("SELECT token, node, owner, ttl FROM leases WHERE key = ?", (key,)).fetchone()
        if token is not None:
            if row is None or row[0] != token or row[1] != self._node:
                raise SessionOwned(
                    key,
                    owner=None if row is None else row[2],
                    node=None if row is None else row[1],
                    detail=f"session {key!r:.200} was taken over by another owner: this lease is void",
                )
            return
        if row is None or row[1] is None:
            return
        if not (row[1] == self._node and stale_ok):
            expires = self._expires(connection, row[1])
            if expires > self._clock():
                raise SessionOwned(key, owner=row[2], node=row[1], retry_after=expires - self._clock())
        connection.execute("UPDATE leases SET token = token + 1, node = NULL, owner = NULL WHERE key = ?", (key,))

    def _expires(self, connection: sqlite3.Connection, node: str) -> float:
        found = connection.execute("SELECT expires_at FROM nodes WHERE node = ?", (node,)).fetchone()
        return -float("inf") if found is None else float(found[0])

    def _append_sync(
        self,
        connection: sqlite3.Connection,
        path: Path,
        key: str,
        stream: str,
        token: int | None,
        stale_ok: bool,
        seq: int,
        text: str,
    ) -> None:
        with self._transaction(connection):
            self._check(connection, key, token, stale_ok)
            base = self._base(connection, key, stream)
            if base is None or self._last(connection, key, stream, base[1]) != seq - 1:
                raise Diverged(key)
            connection.execute(
                "INSERT INTO journal (key, stream, seq, data) VALUES (?, ?, ?, ?)", (key, stream, seq, text)
            )

    def _put_base_sync(
        self,
        connection: sqlite3.Connection,
        path: Path,
        key: str,
        stream: str,
        token: int | None,
        stale_ok: bool,
        text: str,
        seq: int | None,
    ) -> int:
        with self._transaction(connection):
            self._check(connection, key, token, stale_ok)
            base = self._base(connection, key, stream)
            if seq is None:
                seq = 1 if base is None else self._last(connection, key, stream, base[1]) + 1
            elif (base is None and seq > 0) or (base is not None and base[1] > seq):
                raise Diverged(key)
            if stream == SESSION:
                connection.execute(
                    """INSERT INTO sessions (key, version, data, updated_at, seq) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (key) DO UPDATE SET version = excluded.version, data = excluded.data,
                    updated_at = excluded.updated_at, seq = excluded.seq""",
                    (key, SNAPSHOT_VERSION, text, time.time(), seq),
                )
            else:
                connection.execute(
                    """INSERT INTO runs (key, stream, data, seq, created) VALUES (?, ?, ?, ?,
                    (SELECT coalesce(max(created), 0) + 1 FROM runs))
                    ON CONFLICT (key, stream) DO UPDATE SET data = excluded.data, seq = excluded.seq""",
                    (key, stream, text, seq),
                )
            connection.execute("DELETE FROM journal WHERE key = ? AND stream = ? AND seq <= ?", (key, stream, seq))
            return seq

    def _remove_sync(
        self,
        connection: sqlite3.Connection,
        path: Path,
        key: str,
        token: int | None,
        stale_ok: bool,
        stream: str | None,
    ) -> None:
        with self._transaction(connection):
            self._check(connection, key, token, stale_ok)
            if stream is None:
                connection.execute("DELETE FROM sessions WHERE key = ?", (key,))
                connection.execute("DELETE FROM runs WHERE key = ?", (key,))
                connection.execute("DELETE FROM journal WHERE key = ?", (key,))
            else:
                if stream == SESSION:
                    connection.execute("DELETE FROM sessions WHERE key = ?", (key,))
                connection.execute("DELETE FROM runs WHERE key = ? AND stream = ?", (key, stream))
                connection.execute("DELETE FROM journal WHERE key = ? AND stream = ?", (key, stream))

    def _streams_sync(self, connection: sqlite3.Connection, path: Path, key: str, prefix: str) -> list[str]:
        rows = connection.execute("SELECT stream FROM runs WHERE key = ? ORDER BY created", (key,)).fetchall()
        return [stream for (stream,) in rows if stream.startswith(prefix)]

    def _acquire_sync(self, connection: sqlite3.Connection, path: Path, key: str, owner: str) -> int:
        with self._transaction(connection):
            row = connection.execute("SELECT token, node, owner FROM leases WHERE key = ?", (key,)).fetchone()
            if row is not None and row[1] is not None and row[1] != self._node:
                expires = self._expires(connection, row[1])
                if expires > self._clock():
                    raise SessionOwned(key, owner=row[2], node=row[1], retry_after=expires - self._clock())
            token = 1 if row is None else int(row[0]) + 1
            connection.execute(
                """INSERT INTO leases (key, token, node, owner, ttl) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (key) DO UPDATE SET token = excluded.token, node = excluded.node,
                owner = excluded.owner, ttl = excluded.ttl""",
                (key, token, self._node, owner, self._lease_ttl),
            )
            self._beat(connection)
            return token

    def _release_sync(self, connection: sqlite3.Connection, path: Path, key: str, token: int) -> None:
        with self._transaction(connection):
            connection.execute(
                "UPDATE leases SET node = NULL, owner = NULL WHERE key = ? AND token = ? AND node = ?",
                (key, token, self._node),
            )

    def _heartbeat_sync(self, connection: sqlite3.Connection, path: Path) -> None:
        with self._transaction(connection):
            self._beat(connection)

    def _beat(self, connection: sqlite3.Connection) -> None:
        connection.execute(
            """INSERT INTO nodes (node, expires_at) VALUES (?, ?)
            ON CONFLICT (node) DO UPDATE SET expires_at = excluded.expires_at""",
            (self._node, self._clock() + self._lease_ttl),
        )


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
        _migrate(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Create or upgrade the tables; refuse a database laid out by a newer condukt."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = 0
        if "condukt_schema" in tables:
            row = connection.execute("SELECT max(version) FROM condukt_schema").fetchone()
            version = int(row[0] or 0)
        elif "sessions" in tables:
            version = 1
        if version > SCHEMA_VERSION:
            raise UnsupportedSchema(version, SCHEMA_VERSION, f"SQLite database {path}")
        if version < SCHEMA_VERSION:
            if version == 1:
                columns = {row[1] for row in connection.execute("PRAGMA table_info(sessions)")}
                if "seq" not in columns:
                    connection.execute("ALTER TABLE sessions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")
            for statement in _SCHEMA:
                connection.execute(statement)
            connection.execute("DELETE FROM condukt_schema")
            connection.execute("INSERT INTO condukt_schema (version) VALUES (?)", (SCHEMA_VERSION,))
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
