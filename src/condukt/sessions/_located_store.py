"""What the durable stores share: a location bound to the agent's cwd, and unreadable data left alone."""

from __future__ import annotations

import abc
import os
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import ClassVar, Self

import trio

from ._errors import SnapshotError, StoreNotBound
from ._snapshot import Snapshot

__all__ = ["LocatedStore"]


class LocatedStore(abc.ABC):
    """A store at a file-system location, which never overwrites what it cannot read.

    Subclasses give :attr:`default_location` (relative to the agent's cwd),
    a lock per key (:meth:`_hold`) and the three blocking operations, which
    run in a worker thread while that lock is held. This class owns the rule
    that a save never replaces data that a load could not read: it tells
    ``_save_sync`` to check the data already there unless this store has
    read or written that key itself since it was last found unreadable.
    """

    #: Where an unbound store goes, relative to the ``cwd`` given to :meth:`bind`.
    default_location: ClassVar[Path]

    def __init__(self, location: str | os.PathLike[str] | None = None) -> None:
        self._location = None if location is None else Path(location)
        # Keys whose data this store knows to be readable or absent. Only
        # changed while the key's lock is held, so a check cannot be skipped
        # for data that a concurrent load just found unreadable.
        self._known_good: set[str] = set()
        # The stores this unbound store made, by absolute cwd: every agent
        # (and every restart of one) in a directory shares one store, its
        # locks and, for SQLite, its connection.
        self._bound: dict[Path, Self] = {}

    def bind(self, cwd: Path) -> Self:
        """This store if it has a location, else the one at ``cwd / default_location``.

        An unbound store returns the same bound store for every call with the
        same ``cwd``, so agents working there share it.
        """
        if self._location is not None:
            return self
        cwd = Path(cwd).absolute()
        if cwd not in self._bound:
            self._bound[cwd] = type(self)(cwd / self.default_location)
        return self._bound[cwd]

    async def load(self, key: str) -> Snapshot | None:
        """The snapshot saved under ``key``, or None when there is none.

        Raises :class:`CorruptSnapshot` (naming where the data is) or
        :class:`UnsupportedSnapshotVersion`; the data is left untouched.
        :class:`StoreNotBound` before :meth:`bind`; errors of the file system
        or database (``OSError``, ``sqlite3.Error``) propagate. Cancelled while
        it waits for the key's lock, it raises ``trio.Cancelled`` having read
        nothing; once the read is in its worker thread (never abandoned),
        cancelling waits for it and takes effect at the caller's next checkpoint.
        """
        location = self._bound_location()
        async with self._hold(key):
            try:
                snapshot = await trio.to_thread.run_sync(self._load_sync, location, key)
            except SnapshotError:
                self._known_good.discard(key)
                raise
            self._known_good.add(key)
            return snapshot

    async def save(self, key: str, snapshot: Snapshot) -> None:
        """Replace the snapshot of ``key`` atomically and durably.

        Raises :class:`CorruptSnapshot` / :class:`UnsupportedSnapshotVersion`
        rather than overwrite data that cannot be read; an error of the file
        system or database leaves the previous snapshot intact. Cancelled
        while it waits for the key's lock, it writes nothing and raises
        ``trio.Cancelled``; once the write is in its worker thread (never
        abandoned), cancelling waits for it and the save ends as the thread
        does, the cancellation taking effect at the caller's next checkpoint.
        """
        location = self._bound_location()
        async with self._hold(key):
            await trio.to_thread.run_sync(
                self._save_sync, location, key, snapshot, key not in self._known_good
            )
            self._known_good.add(key)

    async def delete(self, key: str) -> None:
        """Remove what is stored under ``key``, readable or not; no error if nothing is.

        Cancelled while it waits for the key's lock, it removes nothing and
        raises ``trio.Cancelled``; once the removal is in its worker thread,
        cancelling waits for it and the delete ends as the thread does.
        """
        location = self._bound_location()
        async with self._hold(key):
            await trio.to_thread.run_sync(self._delete_sync, location, key)
            self._known_good.add(key)

    def _bound_location(self) -> Path:
        if self._location is None:
            name = type(self).__name__
            raise StoreNotBound(f"{name}() has no location: pass one, or bind(cwd) the store first")
        return self._location

    @abc.abstractmethod
    def _hold(self, key: str) -> AbstractAsyncContextManager[object]:
        """A lock that serialises the operations on ``key``."""

    @abc.abstractmethod
    def _load_sync(self, location: Path, key: str) -> Snapshot | None:
        """Read the snapshot under ``key`` (in a worker thread)."""

    @abc.abstractmethod
    def _save_sync(self, location: Path, key: str, snapshot: Snapshot, check: bool) -> None:
        """Store ``snapshot``; if ``check``, first raise what a load would for unreadable data there."""

    @abc.abstractmethod
    def _delete_sync(self, location: Path, key: str) -> None:
        """Remove the data under ``key`` (in a worker thread)."""
