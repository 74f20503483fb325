"""``MemoryStore``: sessions kept in the process, for tests and short-lived apps."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from ._engine import SESSION, Diverged, Fence, JournaledStore, Stored
from ._errors import SessionOwned

__all__ = ["MemoryStore"]


@attrs.define(eq=False)
class _Stream:
    base: str
    base_seq: int
    entries: list[tuple[int, str]]
    created: int


@attrs.define(eq=False)
class _LeaseRow:
    token: int
    node: str | None
    owner: str | None


@attrs.define(eq=False)
class _Data:
    """What the nodes of one memory share: streams, leases, heartbeats."""

    streams: dict[tuple[str, str], _Stream] = attrs.field(factory=dict)
    leases: dict[str, _LeaseRow] = attrs.field(factory=dict)
    nodes: dict[str, float] = attrs.field(factory=dict)
    tokens: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    order: itertools.count[int] = attrs.field(factory=itertools.count)


class MemoryStore(JournaledStore):
    """Keeps each session as JSON text (a base and journal entries) in dicts.

    Storing the encoded form makes every load a fresh copy and exercises the
    same format and journal as the other stores. Nothing survives the Python
    process, but a store object outlives any agent using it: pass the same
    ``MemoryStore`` to every incarnation (e.g. in a ``ChildSpec``'s
    ``kwargs``) and an agent restarted by its supervisor finds its
    conversation again.

    Leases work as in the durable stores, within the process:
    :meth:`another_node` gives a second store object over the same memory, a
    node of its own (with its own heartbeat), so ownership, take-over and
    fencing can be tried without a database. ``clock`` is the time leases
    are measured in (default :func:`time.monotonic`); a test may pass a clock
    it moves itself: a node whose heartbeat task does not run while that
    clock moves on is a silent node.

    Encoding runs on the trio loop (no thread): cheap for normal sessions.
    """

    offload = False

    def __init__(
        self,
        *,
        lease_ttl: float = 30.0,
        run_events: int = 10_000,
        runs: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(lease_ttl=lease_ttl, run_events=run_events, runs=runs, clock=clock)
        self._data = _Data()

    def bind(self, cwd: Path) -> MemoryStore:
        """Returns this store: memory has no location to root."""
        return self

    def another_node(self) -> MemoryStore:
        """A store object over the same memory, as another node (process) would see it.

        It shares the sessions and leases, with its own node name, heartbeat
        and lease table, and this store's ``lease_ttl``, bounds and clock.
        """
        other = MemoryStore(lease_ttl=self._lease_ttl, run_events=self._run_events, runs=self._runs, clock=self._clock)
        other._data = self._data
        return other

    def keys(self) -> list[str]:
        """The keys that hold a session, in the order they were first saved."""
        sessions = [(s.created, key) for (key, stream), s in self._data.streams.items() if stream == SESSION]
        return [key for _, key in sorted(sessions)]

    # -- storage primitives -----------------------------------------------------------------------

    def _location(self, key: str) -> str:
        return f"memory:{key!r}"

    def _live(self, node: str) -> bool:
        return self._data.nodes.get(node, -float("inf")) > self._clock()

    def _check(self, key: str, fence: Fence) -> None:
        row = self._data.leases.get(key)
        if fence.token is not None:
            if row is None or row.token != fence.token or row.node != self._node:
                raise SessionOwned(
                    key,
                    owner=None if row is None else row.owner,
                    node=None if row is None else row.node,
                    detail=f"session {key!r:.200} was taken over by another owner: this lease is void",
                )
            return
        if row is None or row.node is None:
            return
        if row.node == self._node and key not in self._held:
            pass  # this node's own stale lease (a release that did not get through)
        elif self._live(row.node):
            raise SessionOwned(
                key, owner=row.owner, node=row.node, retry_after=self._data.nodes[row.node] - self._clock()
            )
        row.node = row.owner = None
        row.token = next(self._data.tokens)  # fences the dead owner out

    async def _read(self, key: str, stream: str, after: int) -> Stored | None:
        await trio.lowlevel.checkpoint()
        found = self._data.streams.get((key, stream))
        if found is None:
            return None
        floor = max(after, found.base_seq)
        entries = [(seq, text) for seq, text in found.entries if seq > floor]
        last = found.entries[-1][0] if found.entries else found.base_seq
        return Stored(found.base, found.base_seq, entries, self._location(key), last)

    async def _append(self, key: str, stream: str, fence: Fence, seq: int, text: str) -> None:
        await trio.lowlevel.checkpoint()
        self._check(key, fence)
        found = self._data.streams.get((key, stream))
        last = None if found is None else found.entries[-1][0] if found.entries else found.base_seq
        if found is None or last != seq - 1:
            raise Diverged(key)
        found.entries.append((seq, text))

    async def _put_base(self, key: str, stream: str, fence: Fence, text: str, seq: int | None) -> int:
        await trio.lowlevel.checkpoint()
        self._check(key, fence)
        found = self._data.streams.get((key, stream))
        if seq is None:
            last = 0 if found is None else found.entries[-1][0] if found.entries else found.base_seq
            seq = last + 1
        elif found is None and seq > 0 or found is not None and found.base_seq > seq:
            raise Diverged(key)
        if found is None:
            self._data.streams[(key, stream)] = _Stream(text, seq, [], next(self._data.order))
        else:
            found.base, found.base_seq = text, seq
            found.entries = [(n, entry) for n, entry in found.entries if n > seq]
        return seq

    async def _remove(self, key: str, fence: Fence, stream: str | None = None) -> None:
        await trio.lowlevel.checkpoint()
        self._check(key, fence)
        if stream is not None:
            self._data.streams.pop((key, stream), None)
            return
        for found in [k for k in self._data.streams if k[0] == key]:
            del self._data.streams[found]

    async def _streams(self, key: str, prefix: str) -> list[str]:
        await trio.lowlevel.checkpoint()
        streams = self._data.streams.items()
        found = [(s.created, name) for (k, name), s in streams if k == key and name.startswith(prefix)]
        return [name for _, name in sorted(found)]

    async def _acquire(self, key: str, owner: str) -> int:
        await trio.lowlevel.checkpoint()
        row = self._data.leases.get(key)
        if row is not None and row.node is not None and row.node != self._node and self._live(row.node):
            raise SessionOwned(
                key, owner=row.owner, node=row.node, retry_after=self._data.nodes[row.node] - self._clock()
            )
        token = next(self._data.tokens)
        self._data.leases[key] = _LeaseRow(token, self._node, owner)
        self._data.nodes[self._node] = self._clock() + self._lease_ttl
        return token

    async def _release(self, key: str, token: int) -> None:
        await trio.lowlevel.checkpoint()
        row = self._data.leases.get(key)
        if row is not None and row.token == token:
            row.node = row.owner = None

    async def _heartbeat(self) -> None:
        await trio.lowlevel.checkpoint()
        self._data.nodes[self._node] = self._clock() + self._lease_ttl
