"""The protocol every session store follows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._snapshot import Snapshot

if TYPE_CHECKING:
    from ._engine import Lease, RunLog

__all__ = ["LeasingStore", "SessionStore"]


@runtime_checkable
class SessionStore(Protocol):
    """Where an agent keeps its :class:`Snapshot` between incarnations.

    Keys are arbitrary strings; a store keeps one snapshot per key. All three
    operations may be called concurrently from several tasks (and agents);
    operations on one key happen in the order they were called. A store that
    does I/O never blocks the trio loop (worker threads, or non-blocking I/O).
    """

    def bind(self, cwd: Path) -> SessionStore:
        """The store to use for an agent working in ``cwd``.

        The agent calls this once at start. A store created without an
        explicit location returns a store rooted under ``cwd`` (in
        ``cwd/.condukt/``); a store with a location, or one that has none
        (``MemoryStore``), returns itself.
        """
        ...

    async def load(self, key: str) -> Snapshot | None:
        """The snapshot saved under ``key``, or None when there is none.

        Raises :class:`CorruptSnapshot` for data that is not a snapshot and
        :class:`UnsupportedSnapshotVersion` for one written by a newer condukt.
        The agent loads once, while it starts: cancelling the start cancels the
        load, which must let ``trio.Cancelled`` propagate, and the agent does not start.
        """
        ...

    async def save(self, key: str, snapshot: Snapshot) -> None:
        """Store ``snapshot`` under ``key``, replacing the previous one atomically.

        Refuses (with the error ``load`` gives) to replace data that is corrupt
        or of a newer format, so nothing unreadable is lost silently. The agent
        saves after each turn inside the run, so an abort or the run's timeout
        may cancel a save (it saves again once the run has ended): a cancelled
        save must leave the old snapshot or the new one, never a mix, and let
        ``trio.Cancelled`` propagate.
        """
        ...

    async def delete(self, key: str) -> None:
        """Remove what is stored under ``key`` (readable or not); no error if nothing is.

        The agent deletes outside any run (an emptied history), so only the
        agent process stopping cancels it; a cancelled delete must leave the
        data wholly there or wholly gone.
        """
        ...


@runtime_checkable
class LeasingStore(SessionStore, Protocol):
    """A store that gives one owner per key: what the shipped stores add to :class:`SessionStore`.

    ``acquire`` returns a :class:`~condukt.sessions.Lease` (writes through it
    are fenced; see ``docs/sessions.md``, "Ownership"); ``read_run`` reads a
    run's event log without a lease.
    """

    @property
    def lease_ttl(self) -> float:
        """Seconds of silence after which a node's leases may be taken over."""
        ...

    async def acquire(self, key: str, *, owner: str | None = None, wait: float = 0.0) -> Lease:
        """Own ``key``; raises :class:`~condukt.sessions.SessionOwned` when a live owner holds it.

        Cancelled before the store answered, no lease is held.
        """
        ...

    async def read_run(self, key: str, run_id: str, *, after: int = -1) -> RunLog | None:
        """The event log of a run of ``key``, or None. Cancelled, it raises ``trio.Cancelled``."""
        ...
