"""What every journaled store shares: saves as journal entries, folds, leases, run logs.

A store subclass supplies the storage primitives (the ``_read``... methods
below, on its medium: memory, files, SQLite, PostgreSQL); this class turns
them into the :class:`~condukt.sessions.SessionStore` operations and the
ownership API (:meth:`JournaledStore.acquire` and :class:`Lease`).

Journal and folds. Each writer (a :class:`Lease`, or the store itself for
writes without one) remembers what it last wrote or read of a key; a save
appends the difference (:func:`~condukt.sessions._journal.save_entry`), so
its cost depends on what the turn added, not on the history before it. When
the journal has grown as large as the base (and at least
:data:`FOLD_MIN_BYTES`), or holds :data:`FOLD_MAX_ENTRIES` entries, the key
is *folded*: the store's service task (below) writes the replayed snapshot
as the new base and drops the entries it holds. The fold runs after the
save that triggered it has returned, without holding the key: saves go on
meanwhile. Folding when the journal is as large as the base keeps the bytes
written per turn within a constant factor of the turn's own bytes (each
byte is rewritten by at most a geometric series of folds) and a load within
twice the base.

Ownership. A key is owned through a lease: a row (or file) holding a
*fencing token*, a number that grows with every acquisition of the key, and
the owner's *node* (this store object, in this process). A node proves it
lives by a heartbeat, one write per node every ``lease_ttl / 3`` seconds
whatever the number of keys it owns; a lease whose node has been silent for
``lease_ttl`` seconds may be taken over. Every write through a lease checks
its token in the same transaction (or under the same file lock) as the
write itself, so a former owner, whose token is older, never writes again:
it gets :class:`~condukt.sessions.SessionOwned`. A write without a lease is
refused while a live lease holds the key, and clears a dead owner's lease
(with a new token) before it writes, fencing that owner out too.

The service task. Heartbeats, folds and releases that could not reach the
store are done by one task per store and trio run: a trio system task,
started by the first lease or fold and ending when there is nothing left to
do (no lease held, no fold or release pending), or with the trio run. It
never raises: a failure is logged (logger ``condukt.sessions``) and retried.
"""

from __future__ import annotations

import abc
import json
import logging
import math
import os
import re
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, ClassVar, Literal, Self, TypeVar

import attrs
import trio

from ..events import Event
from ..messages import ToolCall, ToolResultMessage
from ..serialization import structure, unstructure
from ._errors import CorruptJournal, CorruptSnapshot, LeaseReleased, SessionOwned, SnapshotError
from ._journal import Replay, save_entry, tool_applied, tool_entry
from ._key_locks import KeyLocks
from ._snapshot import SNAPSHOT_VERSION, Snapshot, decode_document, encode, read_version

__all__ = [
    "FOLD_MAX_ENTRIES",
    "FOLD_MIN_BYTES",
    "RUN_STATUSES",
    "SESSION",
    "Diverged",
    "Fence",
    "JournaledStore",
    "Lease",
    "RunLog",
    "Stored",
    "node_name",
]

logger = logging.getLogger("condukt.sessions")

T = TypeVar("T")

#: A fold is due once the journal holds as many bytes as the base, and at least this many.
FOLD_MIN_BYTES = 64 * 1024
#: ... or this many entries, whatever their size (this bounds the work of a load).
FOLD_MAX_ENTRIES = 4096
#: A save whose entry would be larger than half the base writes a new base instead.
_REWRITE_RATIO = 0.5
#: Documents at least this large (bytes, or estimated) are encoded and decoded in a worker thread.
_OFFLOAD_BYTES = 256 * 1024
#: How many keys' last-written state a store keeps for writes without a lease.
_TRACKED_KEYS = 1024

#: The stream of a key holding its session (other streams hold its runs' event logs).
SESSION = ""
_RUN_PREFIX = "run:"

RunStatus = Literal["queued", "running", "done", "failed", "aborted"]
#: The statuses a run log may have.
RUN_STATUSES: tuple[str, ...] = ("queued", "running", "done", "failed", "aborted")


def node_name() -> str:
    """A name for a new node: host, process id and random bits (safe in file names)."""
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:40] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


@attrs.frozen
class Fence:
    """Who writes: a lease's token, or None for a write without a lease."""

    token: int | None


class Diverged(Exception):
    """An append found the key's journal not where this writer left it (another writer was there)."""


@attrs.frozen
class Stored:
    """A stream as stored: its base document, the number of the last entry folded into it, the entries after."""

    base: str | bytes
    base_seq: int
    entries: Sequence[tuple[int, str | bytes]]
    location: str
    #: The number of the stream's last entry (``base_seq`` when it has none).
    last_seq: int = 0


@attrs.define(eq=False)
class _Tracked:
    """What a writer knows of a key's stored data: what a load would return now, and how big it is."""

    current: Snapshot | None
    seq: int = 0
    base_bytes: int = 0
    journal_bytes: int = 0
    entries: int = 0
    folding: bool = False
    #: The stored base is in an older snapshot format: the next write replaces it (never appends to it).
    old_format: bool = False


@attrs.frozen
class RunLog:
    """A run's event log as stored (:meth:`JournaledStore.read_run`).

    ``events`` are ``(index, event)`` pairs in index order, those with an
    index greater than the ``after`` asked for. ``first_index`` is the
    oldest index still kept (older events were dropped to respect the
    store's ``run_events`` bound) and ``next_index`` the index the next
    event will get. ``status`` is one of :data:`RUN_STATUSES`; ``result``
    is what :meth:`Lease.set_run` stored (JSON data), None until then.
    """

    run_id: str
    status: str
    result: Any
    first_index: int
    next_index: int
    events: tuple[tuple[int, Event], ...]
    created_at: float = 0.0
    updated_at: float = 0.0


def _run_stream(run_id: str) -> str:
    if not isinstance(run_id, str) or not 0 < len(run_id) <= 512:
        raise ValueError("a run id is a non-empty string of at most 512 characters")
    return _RUN_PREFIX + run_id


class JournaledStore(abc.ABC):
    """The base of the shipped stores: journaled saves, leases with fencing, run event logs.

    ``lease_ttl``: seconds of silence after which a node's leases may be
    taken over (see ``docs/sessions.md``, "Ownership"). ``run_events``: the
    events kept per run log (older ones are dropped); ``runs``: the run logs
    kept per key (the oldest are dropped when a new run starts). ``clock``:
    the time leases are measured in, where the store measures it itself
    (memory, files, SQLite; PostgreSQL uses the server's clock).
    """

    #: Whether decoding and encoding large documents runs in a worker thread.
    offload: ClassVar[bool] = True

    def __init__(
        self,
        *,
        lease_ttl: float = 30.0,
        run_events: int = 10_000,
        runs: int = 16,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not (isinstance(lease_ttl, (int, float)) and math.isfinite(lease_ttl) and lease_ttl > 0):
            raise ValueError(f"lease_ttl must be a positive number of seconds, not {lease_ttl!r}")
        if run_events < 1 or runs < 1:
            raise ValueError("run_events and runs must be at least 1")
        self._lease_ttl = float(lease_ttl)
        self._run_events = run_events
        self._runs = runs
        self._clock = clock
        self._node = node_name()
        self._locks = KeyLocks()
        self._tracked: OrderedDict[str, _Tracked] = OrderedDict()
        self._held: dict[str, Lease | None] = {}  # None: being acquired
        self._folds: dict[tuple[str, int | None], tuple[Fence, _Tracked, Snapshot, int, int, int]] = {}
        self._releases: dict[str, int] = {}
        self._service_runner: trio.lowlevel.TrioToken | None = None
        self._wake = trio.Event()
        self._folded = trio.Event()
        self._folded.set()

    # -- properties -------------------------------------------------------------------------------

    @property
    def lease_ttl(self) -> float:
        """Seconds of silence after which this store's leases may be taken over by another node."""
        return self._lease_ttl

    @property
    def node(self) -> str:
        """This store object's node name, as other owners see it in :class:`SessionOwned`."""
        return self._node

    def held(self) -> list[str]:
        """The keys this store object holds leases on."""
        return [key for key, lease in self._held.items() if lease is not None]

    async def settled(self) -> None:
        """Wait until the journal folds due so far have been written (or have failed and been logged).

        Folds run in the background after the save that made them due; call
        this before measuring or copying the stored data, or before leaving
        the trio run (which would drop the folds still pending: the journal
        is then simply folded later). Cancellation stops the wait only.
        """
        while not self._folded.is_set():
            await self._folded.wait()
        await trio.lowlevel.checkpoint()

    # -- the SessionStore protocol (writes without a lease) ---------------------------------------

    async def load(self, key: str) -> Snapshot | None:
        """The snapshot of ``key`` (its base with the journal replayed), or None.

        Raises :class:`CorruptSnapshot` (:class:`CorruptJournal` for a bad
        journal entry) or :class:`UnsupportedSnapshotVersion`, leaving the
        data untouched. Cancelled while it waits for the key, it raises
        ``trio.Cancelled`` having read nothing; once a read is in flight it
        finishes first (a worker thread is never abandoned).
        """
        async with self._locks.hold(key):
            try:
                snapshot, tracked = await self._load_tracked(key)
            except SnapshotError:
                self._tracked.pop(key, None)
                raise
            self._track(key, tracked)
            return snapshot

    async def save(self, key: str, snapshot: Snapshot) -> None:
        """Store ``snapshot`` under ``key``: a journal entry of what changed since this store's last save.

        Without a lease: raises :class:`SessionOwned` while a live lease holds
        the key, and clears a dead owner's lease first. The first save of a
        key this store has not read checks the data there and raises what
        :meth:`load` would for data that cannot be read (it is never
        overwritten). If another writer changed the key since, the whole
        snapshot is written instead (the last save wins, as with any store).
        Cancelled while it waits for the key, it writes nothing; once the
        write is in flight it completes or fails as a whole before the
        cancellation takes effect.
        """
        async with self._locks.hold(key):
            if key in self._held:
                raise self._owned_here(key)
            tracked = self._tracked.pop(key, None)
            tracked = await self._write(key, Fence(None), tracked, snapshot)
            self._track(key, tracked)

    async def delete(self, key: str) -> None:
        """Remove what is stored under ``key`` (its journal and run logs too), readable or not.

        Raises :class:`SessionOwned` while a live lease holds the key. No error
        if nothing is stored. Cancelled while it waits for the key, it removes
        nothing; once the removal is in flight it completes first.
        """
        async with self._locks.hold(key):
            if key in self._held:
                raise self._owned_here(key)
            self._tracked.pop(key, None)
            await self._remove(key, Fence(None))
            self._track(key, _Tracked(None))

    # -- ownership --------------------------------------------------------------------------------

    async def acquire(self, key: str, *, owner: str | None = None, wait: float = 0.0) -> Lease:
        """Own ``key``: the returned :class:`Lease` is the only way to write it until released.

        ``owner`` is a label other contenders see in :class:`SessionOwned`
        (an agent's name, say). Raises :class:`SessionOwned` when a live
        lease holds the key, in this process or another. ``wait``: up to this
        many seconds to wait for a silent holder's lease to expire (the store
        says when it will); 0 fails at once. A dead holder's lease is taken
        over once its node has been silent for its ``lease_ttl``.

        Cancellation: cancelled before the store answered, no lease is held
        (an acquisition the store made meanwhile is released in the background).
        """
        if not isinstance(key, str):
            raise TypeError(f"a session key is a string, not {type(key).__name__}")
        label = owner if owner is not None else f"pid {os.getpid()}"
        deadline = trio.current_time() + max(0.0, wait)
        while True:
            if key in self._held:
                raise self._owned_here(key)
            self._held[key] = None
            try:
                with trio.CancelScope(shield=True):
                    self._releases.pop(key, None)
                    token = await self._acquire(key, label)
            except SessionOwned as owned:
                del self._held[key]
                retry = owned.retry_after
                if retry is None or trio.current_time() + retry > deadline:
                    raise
                await trio.sleep(max(retry, 0.0) + min(0.05, self._lease_ttl / 10))
                continue
            except BaseException:
                del self._held[key]
                raise
            lease = Lease(self, key, token, label)
            self._held[key] = lease
            self._tracked.pop(key, None)
            self._poke()
            try:
                await trio.lowlevel.checkpoint_if_cancelled()
            except BaseException:
                await lease.release()
                raise
            return lease

    def _owned_here(self, key: str) -> SessionOwned:
        lease = self._held.get(key)
        return SessionOwned(key, owner=None if lease is None else lease.owner, node=self._node)

    async def _release_lease(self, lease: Lease) -> None:
        if self._held.get(lease.key) is lease:
            del self._held[lease.key]
        self._releases[lease.key] = lease.token
        with trio.CancelScope(shield=True, deadline=trio.current_time() + self._lease_ttl):
            try:
                await self._release(lease.key, lease.token)
            except Exception as exc:  # retried by the service; the lease is gone here either way
                logger.warning("releasing session %r failed, retrying in the background: %s", lease.key, exc)
                self._poke()
                return
        if self._releases.get(lease.key) == lease.token:
            del self._releases[lease.key]
        if not self._held and not self._releases:
            self._wake.set()

    # -- run logs ---------------------------------------------------------------------------------

    async def read_run(self, key: str, run_id: str, *, after: int = -1) -> RunLog | None:
        """The event log of run ``run_id`` of ``key`` (events with an index greater than ``after``), or None.

        Needs no lease: any node may read a run's log while its owner writes it.
        Raises :class:`CorruptJournal` for a damaged log. Cancelled, it
        raises ``trio.Cancelled``; a read in flight finishes first.
        """
        stream = _run_stream(run_id)
        stored = await self._read(key, stream, max(after + 1, 0))
        if stored is None:
            return None
        record = self._run_record(stored.base, key, run_id, stored.location)
        events: list[tuple[int, Event]] = []
        for seq, text in stored.entries:
            index = seq - 1
            if index <= after:
                continue
            try:
                events.append((index, structure(_json(text), Event)))
            except Exception as exc:
                raise CorruptJournal(stored.location, f"event {index} of run {run_id!r}: {exc}", key, seq) from exc
        return RunLog(
            run_id,
            str(record["status"]),
            record.get("result"),
            stored.base_seq,
            max(stored.last_seq, stored.base_seq),
            tuple(events),
            float(record.get("created_at", 0.0)),
            float(record.get("updated_at", 0.0)),
        )

    @staticmethod
    def _run_record(base: str | bytes, key: str, run_id: str, location: str) -> dict[str, Any]:
        try:
            record = _json(base)
            if not isinstance(record, dict) or record.get("status") not in RUN_STATUSES:
                raise ValueError("not a run record")
        except ValueError as exc:
            raise CorruptJournal(location, f"record of run {run_id!r}: {exc}", key) from exc
        return record

    # -- the engine -------------------------------------------------------------------------------

    def _track(self, key: str, tracked: _Tracked) -> None:
        self._tracked[key] = tracked
        self._tracked.move_to_end(key)
        while len(self._tracked) > _TRACKED_KEYS:
            self._tracked.popitem(last=False)

    async def _offloaded(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        # A thread hop costs more than encoding or decoding a small document;
        # a large one would keep the loop from other tasks for milliseconds.
        if self.offload and size >= _OFFLOAD_BYTES:
            return await trio.to_thread.run_sync(fn, *args)
        await trio.lowlevel.checkpoint()
        return fn(*args)

    async def _load_tracked(self, key: str) -> tuple[Snapshot | None, _Tracked]:
        stored = await self._read(key, SESSION, 0)
        if stored is None:
            return None, _Tracked(None)
        size = len(stored.base) + sum(len(text) for _, text in stored.entries)
        snapshot, seq, old_format = await self._offloaded(size, _replay, stored, key)
        return snapshot, _Tracked(
            snapshot,
            seq,
            len(stored.base),
            sum(len(text) for _, text in stored.entries),
            len(stored.entries),
            old_format=old_format,
        )

    async def _write(self, key: str, fence: Fence, tracked: _Tracked | None, snapshot: Snapshot) -> _Tracked:
        """Write ``snapshot`` as an entry after ``tracked`` (or as a new base); return the new state.

        Any failure leaves the caller without a tracked state, so the next
        write checks the stored data again.
        """
        if tracked is None:
            _, tracked = await self._load_tracked(key)  # the check: raises for unreadable data
        before = tracked.current
        if before is None or tracked.old_format:
            # An older condukt reads the base and not the journal: entries go
            # only after a base in the current format, which it refuses.
            return await self._rebase(key, fence, snapshot)
        entry = save_entry(tracked.seq + 1, before, snapshot)
        if entry is None:
            await trio.lowlevel.checkpoint()
            return tracked
        if len(entry) > max(tracked.base_bytes * _REWRITE_RATIO, FOLD_MIN_BYTES):
            return await self._rebase(key, fence, snapshot)
        try:
            await self._append(key, SESSION, fence, tracked.seq + 1, entry)
        except Diverged:
            return await self._rebase(key, fence, snapshot)
        tracked.seq += 1
        tracked.current = snapshot
        tracked.journal_bytes += len(entry)
        tracked.entries += 1
        self._consider_fold(key, fence, tracked)
        return tracked

    async def _rebase(self, key: str, fence: Fence, snapshot: Snapshot) -> _Tracked:
        document = await self._offloaded(_size_of(snapshot), encode, snapshot)
        seq = await self._put_base(key, SESSION, fence, document, None)
        return _Tracked(snapshot, seq, len(document))

    async def _append_tool(self, lease: Lease, run_id: str, call_id: str, name: str, result: Any) -> None:
        tracked = self._tracked_for(lease)
        if tracked is None:
            _, tracked = await self._load_tracked(lease.key)
        entry = tool_entry(tracked.seq + 1, run_id, call_id, name, result)
        await self._append(lease.key, SESSION, lease.fence, tracked.seq + 1, entry)
        tracked.seq += 1
        tracked.journal_bytes += len(entry)
        tracked.entries += 1
        if tracked.current is not None:
            tracked.current = tool_applied(tracked.current, run_id, call_id, result)
        lease.tracked = tracked
        self._consider_fold(lease.key, lease.fence, tracked)

    def _tracked_for(self, lease: Lease) -> _Tracked | None:
        return lease.tracked

    def _consider_fold(self, key: str, fence: Fence, tracked: _Tracked) -> None:
        if tracked.folding or tracked.current is None:
            return
        if tracked.entries < FOLD_MAX_ENTRIES and tracked.journal_bytes < max(tracked.base_bytes, FOLD_MIN_BYTES):
            return
        tracked.folding = True
        if self._folded.is_set():
            self._folded = trio.Event()
        self._folds[(key, fence.token)] = (
            fence,
            tracked,
            tracked.current,
            tracked.seq,
            tracked.journal_bytes,
            tracked.entries,
        )
        self._poke()

    async def _fold(self, key: str, job: tuple[Fence, _Tracked, Snapshot, int, int, int]) -> None:
        fence, tracked, snapshot, seq, journal_bytes, entries = job
        try:
            document = await self._offloaded(_size_of(snapshot), encode, snapshot)
            await self._put_base(key, SESSION, fence, document, seq)
        except (SessionOwned, Diverged):
            return  # another writer owns the key now: its writes, its folds
        finally:
            tracked.folding = False
        tracked.base_bytes = len(document)
        tracked.journal_bytes -= journal_bytes
        tracked.entries -= entries

    # -- the service task: heartbeats, folds, releases --------------------------------------------

    def _poke(self) -> None:
        token = trio.lowlevel.current_trio_token()
        if self._service_runner is token:
            self._wake.set()
            return
        self._service_runner = token
        self._wake = trio.Event()
        trio.lowlevel.spawn_system_task(self._service, token, name=f"condukt session store {self._node}")

    async def _service(self, token: trio.lowlevel.TrioToken) -> None:
        interval = self._lease_ttl / 3
        next_beat = trio.current_time() + interval
        failures = 0
        try:
            while self._held or self._folds or self._releases:
                if self._wake.is_set():
                    self._wake = trio.Event()
                while self._folds:
                    (key, token_), job = next(iter(self._folds.items()))
                    del self._folds[(key, token_)]
                    try:
                        await self._fold(key, job)
                    except Exception as exc:
                        logger.warning("folding the journal of session %r failed (retried later): %s", key, exc)
                if not self._folds:
                    self._folded.set()
                for key, lease_token in list(self._releases.items()):
                    try:
                        await self._release(key, lease_token)
                    except Exception as exc:
                        logger.warning("releasing session %r failed (retried): %s", key, exc)
                        continue
                    if self._releases.get(key) == lease_token:
                        del self._releases[key]
                now = trio.current_time()
                if self._held and now >= next_beat:
                    try:
                        await self._heartbeat()
                        failures = 0
                        next_beat = trio.current_time() + interval
                    except Exception as exc:
                        failures += 1
                        logger.warning("session store heartbeat of node %s failed: %s", self._node, exc)
                        next_beat = trio.current_time() + min(interval, 0.1 * 2**failures)
                if not (self._held or self._folds or self._releases):
                    break
                wake_at = next_beat if self._held else math.inf
                if self._releases:
                    wake_at = min(wake_at, trio.current_time() + min(interval, 1.0))
                with trio.move_on_at(wake_at):
                    await self._wake.wait()
        finally:
            if self._service_runner is token:
                self._service_runner = None
                for job in self._folds.values():
                    job[1].folding = False  # dropped with the run: the next write makes it due again
                self._folds.clear()
                self._folded.set()

    # -- what a store supplies --------------------------------------------------------------------

    @abc.abstractmethod
    async def _read(self, key: str, stream: str, after: int) -> Stored | None:
        """The stream's base and its entries numbered above ``max(after, base_seq)``, or None if absent."""

    @abc.abstractmethod
    async def _append(self, key: str, stream: str, fence: Fence, seq: int, text: str) -> None:
        """Add entry ``seq``: raises :class:`Diverged` unless the stream's last number is ``seq - 1``.

        Checks ``fence`` with the write (:class:`SessionOwned` if it fails).
        """

    @abc.abstractmethod
    async def _put_base(self, key: str, stream: str, fence: Fence, text: str, seq: int | None) -> int:
        """Write a base at ``seq``, dropping the entries up to it; returns the number used.

        With a ``seq``: raises :class:`Diverged` if the stored base is newer
        (``base_seq > seq``), or if the stream is absent and ``seq > 0`` (it
        was removed since). ``seq`` None: a new base replacing everything,
        numbered after every entry there. Checks ``fence`` with the write.
        """

    @abc.abstractmethod
    async def _remove(self, key: str, fence: Fence, stream: str | None = None) -> None:
        """Remove a stream (None: the key's every stream), checking ``fence``."""

    @abc.abstractmethod
    async def _streams(self, key: str, prefix: str) -> list[str]:
        """The names of the key's streams starting with ``prefix``, oldest first."""

    @abc.abstractmethod
    async def _acquire(self, key: str, owner: str) -> int:
        """Take the key's lease for this node (raises :class:`SessionOwned`); refresh the heartbeat; the token."""

    @abc.abstractmethod
    async def _release(self, key: str, token: int) -> None:
        """Free the key's lease if ``token`` still holds it."""

    @abc.abstractmethod
    async def _heartbeat(self) -> None:
        """Prove this node lives: its leases stay valid for another ``lease_ttl``."""


def _size_of(snapshot: Snapshot) -> int:
    """A cheap over-estimate of a snapshot's encoded size: messages are rarely under a few hundred bytes."""
    return 2048 * len(snapshot.messages)


def _json(text: str | bytes) -> Any:
    return json.loads(text)


def _replay(stored: Stored, key: str) -> tuple[Snapshot, int, bool]:
    """Decode a stored session: its base, then its entries; and whether the base is in an older format."""
    location = stored.location
    try:
        doc = _json(stored.base)
    except (ValueError, RecursionError) as exc:
        raise CorruptSnapshot(location, f"not valid JSON: {exc}") from exc
    old_format = read_version(doc, location) < SNAPSHOT_VERSION
    base = decode_document(doc, location)
    if not stored.entries:
        return base, stored.base_seq, old_format
    replay = Replay(base, stored.base_seq, key, location)
    for seq, text in stored.entries:
        replay.apply(seq, text)
    return replay.snapshot(), replay.seq, old_format


class Lease:
    """Ownership of one session key in one store, from :meth:`JournaledStore.acquire` to :meth:`release`.

    Every write goes through the lease and is fenced: once another owner
    has taken the key over (after this node's silence), each write raises
    :class:`SessionOwned` and writes nothing, and :attr:`lost` is True.
    After :meth:`release` every method raises :class:`LeaseReleased`.
    ``async with lease:`` releases it at the end of the block.

    Operations on one lease may be called from several tasks; they are
    serialised in call order (the lease's lock).
    """

    def __init__(self, store: JournaledStore, key: str, token: int, owner: str) -> None:
        self.store = store
        #: The session key.
        self.key = key
        #: The fencing token: grows with every acquisition of the key.
        self.token = token
        #: The label given to ``acquire``.
        self.owner = owner
        self.fence = Fence(token)
        #: True once a write found the key taken over by another owner.
        self.lost = False
        #: True once released.
        self.released = False
        self.tracked: _Tracked | None = None
        self._runs: dict[str, tuple[dict[str, Any], int]] = {}
        # Serialises the lease's operations: writes without a lease are refused
        # while it is held, so the key needs no other lock in this store.
        self._lock = trio.Lock()

    def __repr__(self) -> str:
        state = "released" if self.released else "lost" if self.lost else "held"
        return f"<Lease {self.key!r:.60} token={self.token} {state}>"

    def _usable(self) -> None:
        if self.released:
            raise LeaseReleased(f"the lease on {self.key!r:.200} was released")
        if self.lost:
            raise SessionOwned(self.key, detail=f"session {self.key!r:.200} was taken over by another owner")

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, SessionOwned):
            self.lost = True
        self.tracked = None  # unknown outcome: the next write reads the key first

    async def load(self) -> Snapshot | None:
        """The key's snapshot (base and journal replayed), or None.

        Raises :class:`CorruptSnapshot`, :class:`CorruptJournal` or
        :class:`UnsupportedSnapshotVersion` for data that cannot be read
        (left as it is). Cancelled, it raises ``trio.Cancelled``; a read in
        flight finishes first.
        """
        self._usable()
        async with self._lock:
            try:
                snapshot, self.tracked = await self.store._load_tracked(self.key)
            except BaseException as exc:
                self._failed(exc)
                raise
            return snapshot

    async def save(self, snapshot: Snapshot) -> None:
        """Append what changed since the last save or load (a new base on the first write).

        Raises :class:`SessionOwned` if the key was taken over, and what
        :meth:`load` raises for unreadable data (never overwritten). A save
        that changes nothing writes (and checks) nothing. Cancelled
        while it waits for the key, it writes nothing; once its write is in
        flight it completes or fails as a whole first.
        """
        self._usable()
        try:
            # A save's own write is a checkpoint: a free lock is taken without one.
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            self.tracked = await self.store._write(self.key, self.fence, self.tracked, snapshot)
        except BaseException as exc:
            self._failed(exc)
            raise
        finally:
            self._lock.release()

    async def delete(self) -> None:
        """Remove the key's data (journal and run logs too); the lease stays held.

        Raises :class:`SessionOwned` if the key was taken over. Cancelled, it
        removes nothing, or (once in flight) everything.
        """
        self._usable()
        async with self._lock:
            try:
                await self.store._remove(self.key, self.fence)
            except BaseException as exc:
                self._failed(exc)
                raise
            self.tracked = _Tracked(None)
            self._runs.clear()

    async def tool_started(self, run_id: str, call: ToolCall) -> None:
        """Journal that tool call ``call`` of run ``run_id`` is about to run.

        On the next load, the call id is in the run checkpoint's ``started``
        until :meth:`tool_finished` records its result (a call that started
        and has no result may or may not have taken effect). Only calls of
        the run the last saved checkpoint names are kept. Durable when it
        returns; raises :class:`SessionOwned` if the key was taken over.
        Cancelled, it journals nothing, or (once in flight) the entry.
        """
        await self._locked(self.store._append_tool, self, run_id, call.id, call.name, None)

    async def tool_finished(self, run_id: str, result: ToolResultMessage) -> None:
        """Journal the result of a tool call of run ``run_id``: the next load has it in the checkpoint's ``results``.

        Durable when it returns; raises :class:`SessionOwned` if the key was
        taken over. Cancelled, it journals nothing, or (once in flight) the entry.
        """
        await self._locked(self.store._append_tool, self, run_id, result.tool_call_id, result.name, result)

    async def log_events(self, run_id: str, events: Sequence[Event], *, index: int | None = None) -> int:
        """Append ``events`` to run ``run_id``'s event log; return the index of the next event.

        The first event of a run has index 0. ``index``, if given, must be
        the index of the first of ``events`` (the log's next index): a
        :class:`ValueError` otherwise, so no event is logged twice or
        skipped. A new run's log starts with status ``"running"``. The log
        keeps the store's ``run_events`` most recent events (older ones are
        dropped, and :attr:`RunLog.first_index` moves on), and a key keeps
        its ``runs`` most recent run logs. Raises :class:`SessionOwned` if
        the key was taken over. Cancelled, it logs nothing, or (once in
        flight) every event given.
        """
        next_index: int = await self._locked(self._log, run_id, list(events), index)
        return next_index

    async def set_run(self, run_id: str, status: RunStatus, result: Any = None) -> None:
        """Record run ``run_id``'s status (one of :data:`RUN_STATUSES`) and, when it ended, its result.

        ``result`` is JSON data (text, or an error's description). Creates
        the run's log if needed. Raises :class:`SessionOwned` if the key was
        taken over. Cancelled, it records nothing, or (once in flight) all of it.
        """
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, not {status!r}")
        await self._locked(self._set_run, run_id, status, result)

    async def _set_run(self, run_id: str, status: RunStatus, result: Any) -> None:
        record, next_index = await self._run(run_id)
        record = {**record, "status": status, "result": result, "updated_at": time.time()}
        record["next_index"] = next_index
        await self.store._put_base(self.key, _run_stream(run_id), self.fence, _dumps(record), record["first_index"])
        self._runs[run_id] = (record, next_index)

    async def _locked(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` holding the lease's lock; a failure marks the lease's state unknown (or lost)."""
        self._usable()
        async with self._lock:
            try:
                return await fn(*args)
            except BaseException as exc:
                self._failed(exc)
                raise

    async def release(self) -> None:
        """Give the key up: another owner may acquire it at once.

        Never raises for an unreachable store: the release is then retried
        in the background (until it succeeds, the key stays owned by this
        node, whose heartbeat goes on). Releasing twice is harmless.
        Cancellation does not interrupt it (it is bounded by ``lease_ttl``).
        """
        if self.released:
            await trio.lowlevel.checkpoint()
            return
        self.released = True
        self.tracked = None
        await self.store._release_lease(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release()

    # -- run logs ---------------------------------------------------------------------------------

    async def _run(self, run_id: str) -> tuple[dict[str, Any], int]:
        known = self._runs.get(run_id)
        if known is not None:
            return known
        store = self.store
        stream = _run_stream(run_id)
        stored = await store._read(self.key, stream, 1 << 62)
        if stored is not None:
            record = store._run_record(stored.base, self.key, run_id, stored.location)
            last = max(stored.last_seq, stored.base_seq)
            self._runs[run_id] = (record, last)
            return record, last
        now = time.time()
        record = {
            "run_id": run_id,
            "status": "running",
            "result": None,
            "first_index": 0,
            "next_index": 0,
            "created_at": now,
            "updated_at": now,
        }
        await store._put_base(self.key, stream, self.fence, _dumps(record), 0)
        await self._retire_runs(keep=run_id)
        self._runs[run_id] = (record, 0)
        return record, 0

    async def _retire_runs(self, keep: str) -> None:
        streams = await self.store._streams(self.key, _RUN_PREFIX)
        excess = len(streams) - self.store._runs
        for stream in streams:
            if excess <= 0:
                break
            if stream == _run_stream(keep):
                continue
            await self.store._remove(self.key, self.fence, stream)
            self._runs.pop(stream[len(_RUN_PREFIX) :], None)
            excess -= 1

    async def _log(self, run_id: str, events: list[Event], index: int | None) -> int:
        record, next_index = await self._run(run_id)
        if index is not None and index != next_index:
            raise ValueError(f"run {run_id!r} logs event {next_index} next, not {index}")
        stream = _run_stream(run_id)
        for event in events:
            text = _dumps(unstructure(event, Event))
            await self.store._append(self.key, stream, self.fence, next_index + 1, text)
            next_index += 1
        limit = self.store._run_events
        first = int(record["first_index"])
        if next_index - first > limit + max(1, limit // 4):
            first = next_index - limit
            record = {**record, "first_index": first, "next_index": next_index, "updated_at": time.time()}
            await self.store._put_base(self.key, stream, self.fence, _dumps(record), first)
        self._runs[run_id] = (record, next_index)
        return next_index


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))

