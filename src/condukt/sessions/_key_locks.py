"""One trio lock per key, kept only while someone holds or waits for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

__all__ = ["KeyLocks"]


@attrs.define
class _Entry:
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    users: int = 0


@attrs.define
class KeyLocks:
    """Serialises the operations on one key while letting other keys proceed.

    A store keyed by arbitrary strings must not keep a lock per key forever,
    so an entry is dropped when its last user leaves. Locks are fair (FIFO).
    """

    _entries: dict[str, _Entry] = attrs.field(factory=dict, init=False)

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lock of ``key`` for the block. Cancellable while waiting."""
        entry = self._entries.setdefault(key, _Entry())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]

    def __len__(self) -> int:
        """How many keys are held or waited for."""
        return len(self._entries)
