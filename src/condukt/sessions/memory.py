"""``MemoryStore``: snapshots kept in the process, for tests and short-lived apps."""

from __future__ import annotations

from pathlib import Path

import trio

from ._snapshot import Snapshot, decode, encode

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps each snapshot as its JSON document in a dict.

    Storing the encoded form makes every load a fresh copy and exercises the
    same format as the other stores. Nothing survives the Python process, but
    a store object outlives any agent using it: pass the same ``MemoryStore``
    to every incarnation (e.g. in a ``ChildSpec``'s ``kwargs``) and an agent
    restarted by its supervisor finds its conversation again.

    Encoding runs on the trio loop (no thread): cheap for normal sessions.
    """

    def __init__(self) -> None:
        self._documents: dict[str, str] = {}

    def bind(self, cwd: Path) -> MemoryStore:
        """Returns this store: memory has no location to root."""
        return self

    async def load(self, key: str) -> Snapshot | None:
        """The snapshot saved under ``key``, or None.

        A checkpoint first: cancelled, it raises ``trio.Cancelled`` at once.
        """
        await trio.lowlevel.checkpoint()
        document = self._documents.get(key)
        return None if document is None else decode(document, f"memory:{key!r}")

    async def save(self, key: str, snapshot: Snapshot) -> None:
        """Store a copy of ``snapshot`` under ``key``.

        A checkpoint first: cancelled, it raises ``trio.Cancelled`` and stores nothing.
        """
        await trio.lowlevel.checkpoint()
        self._documents[key] = encode(snapshot)

    async def delete(self, key: str) -> None:
        """Forget ``key``; no error if it is unknown.

        A checkpoint first: cancelled, it raises ``trio.Cancelled`` and forgets nothing.
        """
        await trio.lowlevel.checkpoint()
        self._documents.pop(key, None)

    def keys(self) -> list[str]:
        """The keys that hold a snapshot, in insertion order."""
        return list(self._documents)
