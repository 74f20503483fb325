"""Detached runs: runs nobody waits for, each with an event log any number of readers attach to.

``agent.submit(prompt)`` starts (or queues) a run and returns its id; the run
is a stream run whose events go to a *pump* task of the agent instead of a
caller. The pump appends them to the run's :class:`RunRecord` (a bounded
in-memory log readers wait on) and, when the agent owns its key in a leasing
store (``AgentContext.lease``), to the run's event log in the store
(:meth:`~condukt.sessions.Lease.log_events`) *before* readers see them: an
event a reader saw is durable, so a reader that reconnects to another node
after this one died never finds an index it saw holding another event.

Bounds. A record keeps the last :data:`DETACHED_EVENTS` events (a reader
asking for older ones gets :class:`~condukt.agent.EventsEvicted`); an
incarnation remembers the last :data:`DETACHED_KEPT` ended runs (older ones
are read back from the store when there is one, else
:class:`~condukt.agent.UnknownRun`). The store keeps its own ``run_events``
per run and ``runs`` per key (``docs/sessions.md``).

After the node died: an agent restarted on the key with ``resume=True``
resumes the run in progress (its checkpoint) and :meth:`DetachedRuns.adopt`
continues its log at the next index; a run the log says is queued or running
that no incarnation continues (queued runs are not in the snapshot; an agent
without ``resume``) is closed by the owner that is asked about it: an
``Error("Interrupted")`` and a ``Done("aborted")`` are logged for it.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any, cast

import trio

from ..events import AgentEnd, AgentStart, Done, Error, Event
from ..sessions import LeasingStore, SessionOwned, StoreUnavailable
from ._context import AgentContext
from ._errors import Aborted, EventsEvicted, RunFailed, RunTimeout, UnknownRun
from ._handle import STREAM_BUFFER
from ._ids import uuid7
from ._info import DetachedRunInfo

if TYPE_CHECKING:
    from ..sessions import Lease, RunLog
    from ._run import Run

__all__ = ["DETACHED_EVENTS", "DETACHED_KEPT", "RUNS_KEY_SUFFIX", "DetachedRuns", "RunRecord"]

logger = logging.getLogger("condukt.agent")

#: Events a detached run's in-memory log keeps (older ones are evicted: attaching before them fails).
DETACHED_EVENTS = 10_000
#: Ended detached runs an agent incarnation remembers in memory (the store keeps its own).
DETACHED_KEPT = 64
#: Events the pump hands to the store in one write at most.
_BATCH = 256
#: Added to the session key for the run logs' own lease (when persistence holds no lease: ``AgentContext.lease``).
RUNS_KEY_SUFFIX = "#runs"

#: The run-log leases this process's agents hold, by store and key, with the handle of the agent holding
#: it: an incarnation that was killed (it never released) leaves its lease here, and its successor takes it.
_HELD: dict[tuple[int, str], tuple[Lease, Any]] = {}

#: A run's ``Done`` status -> its detached status.
_STATUS = {"completed": "done", "failed": "failed", "timeout": "failed", "aborted": "aborted"}
_ENDED = frozenset({"done", "failed", "aborted"})
_INTERRUPTED = "the run's node stopped before it finished, and no agent resumed it"


class RunRecord:
    """One detached run's log as this incarnation holds it: its events (bounded), its status, its outcome.

    Read by the agent's handle (``attach``, ``result``) in the caller's
    task; written by the agent's pump only. Nothing here awaits but
    :meth:`wait`.
    """

    __slots__ = (
        "_changed",
        "error",
        "error_type",
        "events",
        "first_index",
        "lost",
        "message",
        "next_index",
        "run_id",
        "status",
        "structured",
        "text",
        "value",
    )

    def __init__(self, run_id: str, *, status: str = "queued", first_index: int = 0, structured: bool = False) -> None:
        self.run_id = run_id
        self.status = status
        self.structured = structured
        self.events: deque[Event] = deque(maxlen=DETACHED_EVENTS)
        #: The index of ``events[0]``.
        self.first_index = first_index
        self.next_index = first_index
        self.text: str | None = None
        self.value: Any = None
        #: The exception ``result`` raises (the run's own, in the incarnation that ran it).
        self.error: BaseException | None = None
        self.error_type: str | None = None
        self.message: str | None = None
        #: Set when the agent exited before the run's ``Done``: no more events will come here.
        self.lost: BaseException | None = None
        self._changed = trio.Event()

    @property
    def ended(self) -> bool:
        """Whether the run's ``Done`` is in the log."""
        return self.status in _ENDED

    def append(self, event: Event) -> None:
        """Add ``event`` at the next index (the oldest is evicted past :data:`DETACHED_EVENTS`)."""
        events = self.events
        if len(events) == events.maxlen:
            self.first_index += 1
        events.append(event)
        self.next_index += 1
        if type(event) is AgentStart:
            if self.status == "queued":
                self.status = "running"
        elif type(event) is AgentEnd:
            self.text = event.text
        elif type(event) is Error:
            self.error_type, self.message = event.error_type, event.message
        elif type(event) is Done:
            self.status = _STATUS[event.status]

    def changed(self) -> None:
        """Wake the readers waiting in :meth:`wait`."""
        self._changed.set()
        self._changed = trio.Event()

    def event(self, index: int) -> Event | None:
        """The event at ``index``, None if it has not happened yet; :class:`EventsEvicted` if it was evicted."""
        if index < self.first_index:
            raise EventsEvicted(self.run_id, index - 1, self.first_index)
        if index >= self.next_index:
            return None
        return self.events[index - self.first_index]

    async def wait(self) -> None:
        """Wait until the log changes (an event, the run's end, the agent's exit). Cancellation stops the wait."""
        await self._changed.wait()

    def outcome(self) -> Any:
        """The run's result, or raise its error; only once :attr:`ended`."""
        if self.status == "done":
            return self.value if self.value is not None else self._text_value()
        if self.error is not None:
            raise self.error
        message = self.message or f"run {self.run_id} {self.status}"
        if self.status == "aborted":
            raise Aborted(message)
        if self.error_type == "RunTimeout":
            raise RunTimeout(message)
        raise RunFailed(self.run_id, self.error_type or "Error", message)

    def _text_value(self) -> Any:
        if self.structured and self.text is not None:
            return json.loads(self.text)
        return self.text

    def info(self) -> DetachedRunInfo:
        """A :class:`DetachedRunInfo` of the record now."""
        return DetachedRunInfo(
            self.run_id, self.status, self.text, self.error_type, self.message, self.first_index, self.next_index
        )

    def to_store(self) -> dict[str, Any]:
        """What :meth:`~condukt.sessions.Lease.set_run` stores as the run's result (JSON data)."""
        return {"text": self.text, "structured": self.structured, "error_type": self.error_type,
                "message": self.message}

    @classmethod
    def from_log(cls, log: RunLog) -> RunRecord:
        """A record holding what the store's log ``log`` holds."""
        result = log.result if isinstance(log.result, dict) else {}
        record = cls(log.run_id, status=log.status, first_index=log.first_index,
                     structured=bool(result.get("structured")))
        record.next_index = log.first_index
        for index, event in log.events:
            if index == record.next_index:
                record.append(event)
        record.status = log.status  # the stored status wins over what the events say (a resumed run: running)
        record.text = result.get("text", record.text)
        record.error_type = result.get("error_type", record.error_type)
        record.message = result.get("message", record.message)
        return record


class _StoreLog:
    """Writes one run's log through the agent's lease: each write shielded, retried while the store is away.

    A write waits for an unavailable store (retrying, with back-off) for at
    most the store's ``lease_ttl``: past it, the lease is as good as lost. A
    write that fails for good (the key taken over, the store away too long)
    is logged, and the run goes on with its log in memory only.
    """

    __slots__ = ("failed", "lease", "run_id")

    def __init__(self, lease: Lease, run_id: str) -> None:
        self.lease = lease
        self.run_id = run_id
        self.failed = False

    async def write(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        if self.failed:
            return
        lease = self.lease
        # Shielded: an agent exiting right after a run's Done still records the run's end.
        with trio.CancelScope(shield=True), trio.move_on_after(lease.store.lease_ttl) as bounded:
            delay = 0.05
            while True:
                try:
                    await fn(*args, **kwargs)
                    return
                except StoreUnavailable as exc:
                    logger.warning("run %s: the store is unavailable, retrying: %s", self.run_id, exc)
                    await trio.sleep(delay)
                    delay = min(delay * 2, 1.0)
                except (SessionOwned, Exception) as exc:
                    logger.error("run %s: its event log is kept in memory only from now on: %r", self.run_id, exc)
                    self.failed = True
                    return
        if bounded.cancelled_caught:
            logger.error("run %s: the store stayed unavailable; its event log is kept in memory only", self.run_id)
            self.failed = True


class DetachedRuns:
    """The detached runs of one agent incarnation: their records, their pumps, their store logs."""

    __slots__ = ("_lease", "_leasing", "_store", "_taken", "ctx", "live", "records", "taking", "unread")

    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx
        self._store: tuple[LeasingStore, str] | None | bool = False  # False: not looked up yet
        #: The run logs' own lease (when ``ctx.lease`` is None), once taken.
        self._lease: Lease | None = None
        self._leasing = trio.Lock()
        self.records: OrderedDict[str, RunRecord] = OrderedDict()
        #: Runs whose pump is still going (not ended, not lost).
        self.live = 0
        #: Pumps logging a batch now.
        self.taking = 0
        #: The live pumps' channels (events there are not logged yet).
        self.unread: set[trio.MemoryReceiveChannel[Event]] = set()
        self._taken = trio.Event()

    async def flush(self) -> None:
        """Wait until every event the runs emitted so far is logged (the store written).

        The agent calls it as it exits, before persistence releases the key;
        its shutdown budget bounds it. Cancellation stops the wait.
        """
        while self.taking or any(receive.statistics().current_buffer_used for receive in self.unread):
            await self._taken.wait()

    @property
    def holds_lease(self) -> bool:
        """Whether the run logs hold a lease of their own (released by :meth:`close`)."""
        return self._lease is not None

    def where(self) -> tuple[LeasingStore, str] | None:
        """The store and key of the run logs: the session lease's, else ``<session key>#runs``; None without."""
        lease = self.ctx.lease
        if lease is not None:
            return cast("LeasingStore", lease.store), lease.key
        if self._store is False:
            config = self.ctx.config
            store = config.session_store
            self._store = None
            if store is not None:
                bound = store.bind(self.ctx.cwd)
                if isinstance(bound, LeasingStore):
                    # The session key as persistence names it (condukt.agent.capabilities.persistence).
                    name = self.ctx.handle.name
                    key = str(config.session_store_key or config.id or (name if name is not None else self.ctx.id))
                    self._store = (bound, key + RUNS_KEY_SUFFIX)
        return self._store  # type: ignore[return-value]

    async def writer(self, *, wait: float) -> Lease | None:
        """The lease the run logs are written through, taken if needed (waiting up to ``wait`` s); None if none.

        A lease that cannot be had (another live owner, the store away) is
        logged: the runs' logs are then kept in memory only.
        """
        if self.ctx.lease is not None:
            return self.ctx.lease
        async with self._leasing:
            lease = self._lease
            if lease is not None and not (lease.released or lease.lost):
                return lease
            where = self.where()
            if where is None:
                return None
            store, key = where
            held = _HELD.get((id(store), key))
            if held is not None and not held[1].alive and not (held[0].released or held[0].lost):
                lease = held[0]  # a killed incarnation's: this one takes it over
            else:
                try:
                    lease = await store.acquire(key, owner=repr(self.ctx.handle), wait=wait)
                except (SessionOwned, StoreUnavailable) as exc:
                    logger.error("%r: detached runs keep their logs in memory only: %s", self.ctx.handle, exc)
                    return None
            _HELD[(id(store), key)] = (lease, self.ctx.handle)
            self._lease = lease
            return lease

    async def close(self) -> None:
        """Release the run logs' own lease (the agent is stopping). Never raises for an unreachable store."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        where = self.where()
        if where is not None and _HELD.get((id(where[0]), where[1]), (None,))[0] is lease:
            del _HELD[(id(where[0]), where[1])]
        await lease.release()

    @staticmethod
    def new_id() -> str:
        """A detached run's id: a UUIDv7 (usable as one URL path segment)."""
        return uuid7()

    def open(self, run: Run) -> tuple[RunRecord, trio.MemorySendChannel[Event], trio.MemoryReceiveChannel[Event]]:
        """A record for ``run`` and the channel its events go through (``run.sink`` is set to its send end)."""
        send, receive = trio.open_memory_channel[Event](STREAM_BUFFER)
        record = RunRecord(run.id, structured=run.request.output is not None)
        run.sink = send
        run.request.sink = send
        return record, send, receive

    def start(self, record: RunRecord, receive: trio.MemoryReceiveChannel[Event], *, new: bool) -> None:
        """Register ``record`` and start its pump in the agent process."""
        self.records[record.run_id] = record
        self.live += 1
        self.ctx.agent.start_soon(self._pump, record, receive, new)

    async def adopt(self, run: Run) -> None:
        """A run resumed after a restart: continue its stored log, when it has one (it was detached)."""
        where = self.where()
        if where is None:
            return
        log = await where[0].read_run(where[1], run.id)
        if log is None:
            return
        record = RunRecord.from_log(log)
        record.status = "running"
        send, receive = trio.open_memory_channel[Event](STREAM_BUFFER)
        run.sink = send
        run.request.sink = send
        self.start(record, receive, new=False)

    async def find(self, run_id: str) -> RunRecord:
        """The record of ``run_id``: in memory, else read back from the store; :class:`UnknownRun` if neither has it.

        A stored run that is neither ended nor live here is closed now (see the module docstring).
        """
        record = self.records.get(run_id)
        if record is not None:
            return record
        where = self.where()
        log = None
        if where is not None:
            try:
                log = await where[0].read_run(where[1], run_id)
            except ValueError:  # not a run id any store takes
                log = None
        if log is None:
            raise UnknownRun(run_id)
        record = self.records.get(run_id)  # read meanwhile by another caller
        if record is not None:
            return record
        record = RunRecord.from_log(log)
        if not record.ended:
            await self._close_interrupted(record)
        self._remember(record)
        return record

    async def _close_interrupted(self, record: RunRecord) -> None:
        ending = (Error("Interrupted", _INTERRUPTED), Done("aborted"))
        lease = await self.writer(wait=0.0)
        if lease is not None:
            writer = _StoreLog(lease, record.run_id)
            await writer.write(lease.log_events, record.run_id, ending, index=record.next_index)
        for event in ending:
            record.append(event)
        if lease is not None:
            await writer.write(lease.set_run, record.run_id, "aborted", record.to_store())

    def _remember(self, record: RunRecord) -> None:
        self.records[record.run_id] = record
        ended = [run_id for run_id, kept in self.records.items() if kept.ended]
        for run_id in ended[: max(0, len(ended) - DETACHED_KEPT)]:
            del self.records[run_id]

    async def _pump(self, record: RunRecord, receive: trio.MemoryReceiveChannel[Event], new: bool) -> None:
        """Move the run's events into its record (and the store first, when the agent holds a lease)."""
        self.unread.add(receive)
        try:
            async with receive:
                where = self.where()
                # Another node's lease on the logs (it died) expires within lease_ttl: wait for it.
                lease = None if where is None else await self.writer(wait=where[0].lease_ttl * 1.5)
                store = None if lease is None else _StoreLog(lease, record.run_id)
                if store is not None and new:
                    await store.write(store.lease.set_run, record.run_id, "queued")
                closed = False
                while not (record.ended or closed):
                    try:
                        batch = [await receive.receive()]
                    except trio.EndOfChannel:
                        break
                    while len(batch) < _BATCH:
                        try:
                            batch.append(receive.receive_nowait())
                        except trio.WouldBlock:
                            break
                        except trio.EndOfChannel:
                            closed = True
                            break
                    await self._take(record, batch, store)
        finally:
            self.unread.discard(receive)
            self.live -= 1
            if not record.ended:
                # The run's channel closed before its Done: the agent is exiting with it.
                record.lost = trio.EndOfChannel("the agent exited before the run finished")
                record.changed()
            self._remember(record)

    async def _take(self, record: RunRecord, batch: list[Event], store: _StoreLog | None) -> None:
        """Log ``batch`` (store first), then let readers see it."""
        self.taking += 1
        try:
            await self._log(record, batch, store)
        finally:
            self.taking -= 1
            self._taken.set()
            self._taken = trio.Event()

    async def _log(self, record: RunRecord, batch: list[Event], store: _StoreLog | None) -> None:
        lease = None if store is None else store.lease
        if store is not None and lease is not None:
            if record.status == "queued" and any(type(event) is AgentStart for event in batch):
                await store.write(lease.set_run, record.run_id, "running")
            await store.write(lease.log_events, record.run_id, batch, index=record.next_index)
        for event in batch:
            record.append(event)
        if record.ended:
            result = self.ctx.last_result
            if result is not None and result.run_id == record.run_id:
                record.value = result.value
                record.error = result.error
            if store is not None and lease is not None:
                await store.write(lease.set_run, record.run_id, record.status, record.to_store())
        record.changed()
