"""Handle proxies: a process's :class:`Handle` and an agent's :class:`AgentHandle`, seen from asyncio.

Each mirrors the trio handle it stands for: the same methods, awaitable
(the trio API's plain functions included: they must run inside trio's
run), with the trio methods' parameters for type checkers; properties read
directly. Both are generic in the trio handle class, so ``handle.inner``
keeps a handle class of your own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .. import agent as agent_layer
from .. import otp
from ..agent.lowlevel import start_run
from ._guest import Call
from ._methods import Begin, Proxy, invoke, method, sync_method
from ._stream import Stream, steps_method, stream_method
from ._translate import wrap

__all__ = ["AH_co", "AgentHandle", "H_co", "Handle", "VirtualHandle"]

if TYPE_CHECKING:
    # Defaults as condukt.otp's H_co: a bare ``Handle`` annotation means
    # ``Handle[condukt.Handle]`` and still passes ``--strict``.
    from typing_extensions import TypeVar as _TypeVarWithDefault

    H_co = _TypeVarWithDefault("H_co", bound=otp.Handle, covariant=True, default=otp.Handle)
    AH_co = _TypeVarWithDefault("AH_co", bound=agent_layer.AgentHandle, covariant=True, default=agent_layer.AgentHandle)
else:
    H_co = TypeVar("H_co", bound=otp.Handle, covariant=True)
    AH_co = TypeVar("AH_co", bound=agent_layer.AgentHandle, covariant=True)


class Handle(Proxy, Generic[H_co], stands_for=otp.Handle):
    """A process's handle seen from asyncio: the methods of :class:`condukt.Handle`, all awaitable.

    Handles are compared and hashed by the process they reference, and a
    proxy equals the trio handle it stands for (so a table keyed by trio
    handles finds it). Handed back to a trio method, a proxy arrives as its
    trio handle. Methods of a handle class of your own: ``await
    handle.call_in_trio(MyHandle.method, handle.inner, ...)`` (typed), or
    ``await handle.method(...)`` (reached at run time, not seen by type
    checkers).
    """

    @property
    def inner(self) -> H_co:
        """The trio-side handle (use it only from trio code)."""
        inner: H_co = self._inner
        return inner

    @property
    def id(self) -> int:
        """See :attr:`condukt.Handle.id`."""
        value: int = self._inner.id
        return value

    @property
    def name(self) -> Hashable | None:
        """See :attr:`condukt.Handle.name`."""
        value: Hashable | None = self._inner.name
        return value

    @property
    def alive(self) -> bool:
        """See :attr:`condukt.Handle.alive`."""
        value: bool = self._inner.alive
        return value

    @property
    def exit_reason(self) -> otp.ExitReason:
        """See :attr:`condukt.Handle.exit_reason`."""
        value: otp.ExitReason = self._inner.exit_reason
        return value

    @property
    def node(self) -> otp.Node:
        """The trio-side node the process runs on (:attr:`condukt.Handle.node`; use it only from trio code)."""
        value: otp.Node = self._inner.node
        return value

    @property
    def server_class(self) -> type[otp.Server]:
        """See :attr:`condukt.Handle.server_class`."""
        value: type[otp.Server] = self._inner.server_class
        return value

    call = method(otp.Handle.call)
    cast = method(otp.Handle.cast)
    cast_nowait = sync_method(otp.Handle.cast_nowait)
    send = method(otp.Handle.send)
    send_nowait = sync_method(otp.Handle.send_nowait)
    stop = method(otp.Handle.stop)
    kill = sync_method(otp.Handle.kill)
    wait = method(otp.Handle.wait)

    if not TYPE_CHECKING:  # typed on AgentHandle; kept here for handle classes of their own with an agent-like stream

        def stream(self, *args: Any, **kwargs: Any) -> Stream:
            """``async with handle.stream(...) as events``: the trio handle's ``stream``, read from asyncio."""
            return Stream(self._guest, self._inner, args, kwargs)

    def __eq__(self, other: object) -> bool:
        # Equal to the trio handle it stands for too, so a table keyed by trio handles finds it.
        if isinstance(other, Handle):
            return bool(other._inner == self._inner)
        return bool(other is self._inner)

    def __hash__(self) -> int:
        return hash(self._inner)


def _start_run_begin(inner: agent_layer.AgentHandle) -> Begin | None:
    """What starts ``inner.run(...)`` without a trio task (:func:`condukt.agent.lowlevel.start_run`), if it can."""
    if type(inner).run is not agent_layer.AgentHandle.run:
        return None  # a handle class of its own overrides ``run``: that is what runs, in a task

    def begin(call: Call) -> Callable[[], None] | None:  # in trio: a run needs no task of its own
        try:
            return start_run(inner, call, *call.args, **call.kwargs)
        except TypeError as exc:  # bad arguments: name the method the caller called
            message = str(exc)
            if message.startswith("start_run()"):
                raise TypeError("run()" + message.removeprefix("start_run()")) from None
            raise

    return begin


class AgentHandle(Handle[AH_co], stands_for=agent_layer.AgentHandle):
    """An agent's handle seen from asyncio: the methods of :class:`condukt.AgentHandle`, all awaitable.

    ``stream`` is an async context manager, as on trio (see
    :class:`~condukt.asyncio.Stream`). ``run`` from asyncio starts without
    a trio task of its own (docs/embedding.md).
    """

    @property
    def session_id(self) -> str:
        """See :attr:`condukt.AgentHandle.session_id`."""
        value: str = self._inner.session_id
        return value

    @property
    def running(self) -> bool:
        """See :attr:`condukt.AgentHandle.running`."""
        value: bool = self._inner.running
        return value

    @property
    def state(self) -> str:
        """See :attr:`condukt.AgentHandle.state`."""
        value: str = self._inner.state
        return value

    @property
    def queued(self) -> int:
        """See :attr:`condukt.AgentHandle.queued`."""
        value: int = self._inner.queued
        return value

    info = sync_method(agent_layer.AgentHandle.info)
    run = method(agent_layer.AgentHandle.run, begin=_start_run_begin)
    stream = stream_method(agent_layer.AgentHandle.stream)
    iter = steps_method(agent_layer.AgentHandle.iter)
    abort = method(agent_layer.AgentHandle.abort)
    steer = method(agent_layer.AgentHandle.steer)
    follow_up = method(agent_layer.AgentHandle.follow_up)
    operation = method(agent_layer.AgentHandle.operation)
    approve = method(agent_layer.AgentHandle.approve)
    deny = method(agent_layer.AgentHandle.deny)
    pending_approvals = method(agent_layer.AgentHandle.pending_approvals)
    respond = method(agent_layer.AgentHandle.respond)
    pending_inputs = method(agent_layer.AgentHandle.pending_inputs)
    last_result = method(agent_layer.AgentHandle.last_result)
    history = method(agent_layer.AgentHandle.history)
    clear = method(agent_layer.AgentHandle.clear)
    compact = method(agent_layer.AgentHandle.compact)
    submit = method(agent_layer.AgentHandle.submit)
    attach = stream_method(agent_layer.AgentHandle.attach)
    result = method(agent_layer.AgentHandle.result)
    run_info = method(agent_layer.AgentHandle.run_info)


class VirtualHandle(Proxy):
    """A virtual agent's handle seen from asyncio: what ``await node.agent(cls, key, ...)`` returns there.

    It stands for a trio :class:`condukt.virtual.VirtualHandle`: ``run``,
    ``call``, ``stop`` and every other method of the activation's handle
    (``history``, ``cast``...) are asyncio awaitables, each activating the
    key first when it is passivated. Cancelling the awaiting task cancels
    the trio call as cancelling it on trio does (an activation under way
    finishes; the next call uses it).
    """

    @property
    def key(self) -> str:
        """The agent's key (its session id)."""
        key: str = self._inner.key
        return key

    @property
    def active(self) -> Any:
        """The current activation's handle (a proxy), or ``None`` while the key is passivated."""
        return wrap(self._guest, self._inner.active)

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`condukt.AgentHandle.run` on the activation, from asyncio (activating the key first if needed).

        Cancellation: cancelling the awaiting task aborts the run, as on trio.
        """
        return await invoke(self._guest, self._inner.run, args, kwargs)

    async def call(self, request: Any, timeout: float | None = 5.0) -> Any:
        """:meth:`condukt.Handle.call` on the activation, from asyncio (activating the key first if needed).

        Cancellation: cancelling the awaiting task withdraws the call, as on trio.
        """
        return await invoke(self._guest, self._inner.call, (request, timeout), {})

    async def stop(self, reason: Any = "normal") -> None:
        """Stop the current activation and release its lease (the next call activates the key again).

        Cancellation: as on trio (once the stop is sent it completes).
        """
        await invoke(self._guest, self._inner.stop, (reason,), {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VirtualHandle) and other._inner == self._inner

    def __hash__(self) -> int:
        return hash(self._inner)
