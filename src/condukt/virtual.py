"""Virtual agents: an agent addressed by key, activated on demand, at most once, passivated when idle.

``await node.agent(cls, key, **options)`` returns a :class:`VirtualHandle`
for the agent of ``key``, whether or not it runs. The first call through
any handle for the key *activates* it: spawns ``cls`` with ``id=key`` (the
session key) and ``options``, which, with a ``session_store``, loads its
history from the store. ``passivate_after=seconds`` stops an activation idle
that long (its state is in the store); the next call activates it again.
Calls that arrive while the key activates or passivates wait and are then
served: none is lost. A handle stays valid across activations.

At most one activation per key: on one node, one table of activations
(calls for a key share one activation and one lock). Across nodes and
processes, when ``session_store`` is a leasing store (every shipped store
is, :class:`~condukt.sessions.PostgresStore` across machines), an activation
holds the store's lease on ``"condukt.virtual/" + key`` while it runs: a
second node activating the same key gets
:class:`~condukt.sessions.SessionOwned` (a :mod:`condukt.ray` cluster
routes every call for a key to one node, so it never does there: see
``cluster.agent``). See ``docs/cluster.md``, "Virtual agents".
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import trio

from .otp import CallError, ConduktError, Handle, Node, NoProc
from .otp.lowlevel import on_exit, set_activator
from .sessions import Lease, LeasingStore

__all__ = ["MAX_KEY_LENGTH", "PASSIVATED", "VirtualHandle", "activate"]

logger = logging.getLogger("condukt.virtual")

#: The longest key (in characters) a virtual agent takes.
MAX_KEY_LENGTH = 1024

#: The exit reason of a passivated activation.
PASSIVATED = "passivated"

#: Lease keys of activations are this prefix and the agent's key.
LEASE_PREFIX = "condukt.virtual/"


def check_key(key: object) -> str:
    """``key`` if it is a usable virtual agent key; else :class:`TypeError` or :class:`ValueError`."""
    if not isinstance(key, str):
        raise TypeError(f"a virtual agent's key is a str, not {type(key).__name__}")
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"a virtual agent's key has 1 to {MAX_KEY_LENGTH} characters, not {len(key)}")
    return key


class _Activation:
    """One key on one node: its current process (if any), the lock its (de)activation holds, its use."""

    __slots__ = (
        "cls", "handle", "in_flight", "key", "last_used", "lease", "lease_wait", "lock", "options", "passivate_after",
    )  # fmt: skip

    def __init__(
        self, cls: Any, key: str, options: dict[str, Any], passivate_after: float | None, lease_wait: float = 0.0
    ) -> None:
        self.lease_wait = lease_wait
        self.cls = cls
        self.key = key
        self.options = options
        self.passivate_after = passivate_after
        self.handle: Any = None
        self.lease: Lease | None = None
        self.lock = trio.Lock()
        self.in_flight = 0
        self.last_used = 0.0


class _Service:
    """The activations of one node, and the task that passivates idle ones."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.entries: dict[str, _Activation] = {}
        self.sweeping = False
        self.closed = False
        node.on_close(self._close)

    async def _close(self) -> None:
        self.closed = True
        for entry in list(self.entries.values()):
            if entry.lease is not None:
                with trio.move_on_after(5):
                    await entry.lease.release()
                entry.lease = None

    async def activate(self, entry: _Activation) -> Any:
        """The live process of ``entry``, activated now if needed (one activation at a time per key)."""
        async with entry.lock:
            handle = entry.handle
            if handle is not None:
                return handle
            if self.closed:
                raise ConduktError("the node is closing: no activation")
            store = entry.options.get("session_store")
            if entry.lease is not None:  # the previous activation's, kept while it exited
                await entry.lease.release()
                entry.lease = None
            if isinstance(store, LeasingStore):
                entry.lease = await store.acquire(
                    LEASE_PREFIX + entry.key, owner=f"virtual {entry.key!r:.100}", wait=entry.lease_wait
                )
            try:
                handle = await self.node.spawn(entry.cls, id=entry.key, **entry.options)
            except BaseException:
                if entry.lease is not None:
                    with trio.CancelScope(shield=True):
                        await entry.lease.release()
                    entry.lease = None
                raise
            entry.handle = handle
            entry.last_used = trio.current_time()

            def exited(_reason: Any) -> None:
                if entry.handle is handle:
                    entry.handle = None  # the lease is released by the next activation or the sweep

            on_exit(handle, exited)
            if entry.passivate_after is not None and not self.sweeping:
                self.sweeping = True
                trio.lowlevel.spawn_system_task(self._sweep, name="condukt.virtual sweep")
            return handle

    async def _sweep(self) -> None:
        """Passivate activations idle for their ``passivate_after``; ends when none is left to watch."""
        try:
            while not self.closed:
                watched = [entry for entry in self.entries.values() if entry.passivate_after is not None]
                active = [entry for entry in watched if entry.handle is not None or entry.lease is not None]
                if not active:
                    return
                now = trio.current_time()
                wake = math.inf
                for entry in active:
                    assert entry.passivate_after is not None
                    due = entry.last_used + entry.passivate_after
                    if entry.in_flight == 0 and due <= now and not entry.lock.locked():
                        await self._passivate(entry)
                    else:
                        wake = min(wake, max(due, now + entry.passivate_after / 4))
                if wake < math.inf:
                    await trio.sleep_until(wake)
        except Exception:  # pragma: no cover - a system task must not raise
            logger.exception("condukt.virtual: the passivation sweep failed")
        finally:
            self.sweeping = False

    async def _passivate(self, entry: _Activation) -> None:
        used = entry.last_used
        async with entry.lock:
            if entry.in_flight or entry.last_used != used:
                return  # a call came in meanwhile: not idle after all
            handle, entry.handle = entry.handle, None
            if handle is not None:
                try:
                    await handle.stop(PASSIVATED)
                except ConduktError:
                    pass  # it had exited already
            if entry.lease is not None:
                lease, entry.lease = entry.lease, None
                try:
                    await lease.release()
                except Exception:  # pragma: no cover - the store retries releases itself
                    logger.warning("condukt.virtual: releasing %r failed", entry.key, exc_info=True)
            if entry.handle is None:
                self.entries.pop(entry.key, None)


def _service(node: Node) -> _Service:
    service = node.extensions.get("condukt.virtual")
    if service is None:
        service = node.extensions["condukt.virtual"] = _Service(node)
    assert isinstance(service, _Service)
    return service


def _retryable(exc: BaseException) -> bool:
    """Whether a call failed because the activation went away before handling it (it is sent again)."""
    if isinstance(exc, NoProc):
        return True
    return isinstance(exc, CallError) and exc.reason == PASSIVATED


class VirtualHandle:
    """The agent of one key on one node, activated on demand (see :mod:`condukt.virtual`).

    Every method of the activation's handle (``run``, ``call``, ``cast``,
    ``history``, ... of a :class:`condukt.AgentHandle`) is available and
    awaited: a call activates the key if it is not running, waits while it
    activates or passivates, and is sent again if the activation exited
    before handling it. An error of the activation's ``init`` is raised to
    the caller; the next call tries again.

    Cancellation: cancelling a call while it waits for an activation
    leaves the activation to finish (the next call uses it); cancelling it
    afterwards is as for the underlying handle.
    """

    __slots__ = ("_entry", "_service")

    def __init__(self, service: _Service, entry: _Activation) -> None:
        self._service = service
        self._entry = entry

    @property
    def key(self) -> str:
        """The agent's key (its session id)."""
        return self._entry.key

    @property
    def active(self) -> Handle | None:
        """The handle of the current activation, or ``None`` while the key is passivated."""
        handle: Handle | None = self._entry.handle
        return handle

    def __repr__(self) -> str:
        state = "active" if self._entry.handle is not None else "passive"
        return f"<VirtualHandle {self._entry.cls.__name__} {self._entry.key!r:.60} {state}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VirtualHandle) and other._entry.key == self._entry.key

    def __hash__(self) -> int:
        return hash(self._entry.key)

    async def _use(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        service = self._service
        entry = service.entries.get(self._entry.key)
        if entry is None:  # passivated and forgotten: this handle brings the key back
            entry = service.entries.setdefault(self._entry.key, self._entry)
        self._entry = entry
        while True:
            handle = entry.handle
            if handle is None:
                handle = await service.activate(entry)
            entry.in_flight += 1
            try:
                result = getattr(handle, method)(*args, **kwargs)
                if hasattr(result, "__await__"):
                    result = await result
                return result
            except (NoProc, CallError) as exc:
                if not _retryable(exc):
                    raise
                if entry.handle is handle:
                    entry.handle = None
            finally:
                entry.in_flight -= 1
                entry.last_used = trio.current_time()

    async def call(self, request: Any, timeout: float | None = 5.0) -> Any:
        """:meth:`condukt.Handle.call` on the current activation (activating it first if needed).

        Cancellation: as for the class (an activation under way finishes; the call is withdrawn).
        """
        return await self._use("call", (request, timeout), {})

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`condukt.AgentHandle.run` on the current activation (activating it first if needed).

        Cancellation: as for the class (an activation under way finishes; the run is aborted).
        """
        return await self._use("run", args, kwargs)

    async def stop(self, reason: Any = "normal") -> None:
        """Stop the current activation, if any, and release its lease (the next call activates the key again).

        Cancellation: waits for the key's lock first; once the stop is sent it completes.
        """
        entry = self._entry
        async with entry.lock:
            handle, entry.handle = entry.handle, None
            if handle is not None:
                try:
                    await handle.stop(reason)
                except ConduktError:
                    pass
            if entry.lease is not None:
                lease, entry.lease = entry.lease, None
                await lease.release()

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)

        async def forwarded(*args: Any, **kwargs: Any) -> Any:
            return await self._use(method, args, kwargs)

        forwarded.__name__ = method
        return forwarded


async def activate(node: Node, cls: Any, key: str, options: dict[str, Any]) -> VirtualHandle:
    """What ``node.agent(cls, key, **options)`` does: the :class:`VirtualHandle` of ``key`` on ``node``.

    ``options`` are ``cls``'s start options (``model``, ``session_store``,
    ...) plus ``passivate_after`` (seconds, or ``None``: never) and
    ``lease_wait`` (seconds an activation waits for a silent former
    holder's lease to expire, as ``store.acquire(wait=)``; 0, the default,
    raises :class:`~condukt.sessions.SessionOwned` at once). Nothing is
    started until the first call. A key already known on this node keeps
    the class and options it was first given.

    Cancellation: nothing to cancel (no I/O).
    """
    check_key(key)
    passivate_after = options.pop("passivate_after", None)
    if passivate_after is not None and not (
        isinstance(passivate_after, (int, float)) and math.isfinite(passivate_after) and passivate_after > 0
    ):
        raise ValueError(f"passivate_after must be a positive number of seconds or None, not {passivate_after!r}")
    lease_wait = float(options.pop("lease_wait", 0.0))
    if "id" in options:
        raise TypeError("a virtual agent's id is its key: pass no id=")
    service = _service(node)
    entry = service.entries.get(key)
    if entry is None:
        entry = service.entries[key] = _Activation(cls, key, options, passivate_after, lease_wait)
    await trio.lowlevel.checkpoint()
    return VirtualHandle(service, entry)


set_activator(activate)
