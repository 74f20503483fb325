"""The node: root of all processes, registry of names, timers, and ``open_node``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from contextvars import Token
from types import TracebackType
from typing import Any, overload

import attrs
import trio

from ._child_spec import ChildSpec, _check_hibernate, validate_intensity, validate_supervisor
from ._current import current_node_var
from ._dynamic_supervisor import DynamicSupervisor, DynamicSupervisorHandle, Intensity
from ._errors import ConduktError, NameTaken
from ._handle import Handle
from ._monitors import Monitor, _MonitorContext
from ._process import start_process
from ._pubsub import ALL, DEFAULT_BUFFER, PubSub, Subscription
from ._remote import RemoteHandle, RemoteProcesses, monitor_any, remote_for
from ._spawnable import H, Spawnable
from ._supervisor import Supervisor, SupervisorHandle
from ._timers import TimerService

__all__ = ["Monitor", "Node", "current_node", "open_node"]

logger = logging.getLogger("condukt.otp")

#: Seconds each :meth:`Node.on_close` callback may take.
CLOSE_CALLBACK_TIMEOUT = 5.0

_current_node = current_node_var
#: Nodes made the default of their trio run (``lowlevel.run_default_node``), innermost last.
_run_default_nodes: trio.lowlevel.RunVar[list[Node]] = trio.lowlevel.RunVar("condukt_run_default_nodes")


def current_node() -> Node | None:
    """The node of the innermost enclosing ``open_node`` block (or process), if any.

    Outside any such block, inside a trio run: the node made the default of
    that run (what an app's lifespan opened, see ``condukt.lifespan``), if
    any. Never raises, also outside trio.
    """
    node = _current_node.get()
    if node is not None:
        return node
    try:
        defaults = _run_default_nodes.get()
    except (LookupError, RuntimeError):  # none set, or not inside a trio run
        return None
    return defaults[-1] if defaults else None


class run_default_node:  # noqa: N801 - a context manager named for what it does
    """``with run_default_node(node):`` makes ``node`` the default of the current trio run for the block.

    Meanwhile :func:`current_node` in *any* task of this run that is not
    inside an ``open_node`` block (or a process) returns ``node``: request
    handlers of a server whose lifespan opened the node run in tasks that
    do not inherit the lifespan's context. Blocks nest (the innermost
    wins; leaving one restores the previous default). Must be used inside
    a trio run (``RuntimeError`` otherwise).
    """

    __slots__ = ("_node",)

    def __init__(self, node: Node) -> None:
        if not isinstance(node, Node):
            raise TypeError(f"expected a condukt Node, got {node!r}")
        self._node = node

    def __enter__(self) -> Node:
        try:
            defaults = _run_default_nodes.get()
        except LookupError:
            defaults = []
            _run_default_nodes.set(defaults)
        defaults.append(self._node)
        return self._node

    def __exit__(self, *exc: object) -> None:
        defaults = _run_default_nodes.get()
        for i in range(len(defaults) - 1, -1, -1):
            if defaults[i] is self._node:
                del defaults[i]
                break


class Node:
    """One runtime: a root supervisor, a name registry and a timer service.

    Get one with ``async with condukt.open_node() as node``. Everything
    ``spawn`` and ``start_supervisor`` start is a temporary child of the root:
    when it exits, for any reason, the node carries on.
    """

    def __init__(self) -> None:
        self._names: dict[Hashable, Handle] = {}
        self._next_pid = 0
        self._process_count = 0
        self._timers = TimerService()
        self._root: DynamicSupervisorHandle | None = None
        # Set by condukt.otp.lowlevel.set_handle_reducer: how this node's handles pickle.
        self._handle_reducer: Callable[[Handle], Any] | None = None
        # Set by condukt.otp.lowlevel.set_remote_processes: monitors and links of other nodes' processes.
        self._remote_processes: RemoteProcesses | None = None
        #: Publish/subscribe hub: ``publish`` / ``subscribe``.
        self.pubsub = PubSub()
        #: Per-node services added by higher layers (HTTP client pools, limits, ...).
        self.extensions: dict[str, Any] = {}
        self._close_callbacks: list[Callable[[], Awaitable[object]]] = []
        #: The node's default ``hibernate_after`` for behaviours that follow it
        #: (agents: see :meth:`Server.default_hibernate_after`); ``open_node(hibernate_after=)``.
        self.hibernate_after: float | None = None

    def on_close(self, callback: Callable[[], Awaitable[object]]) -> None:
        """Run ``await callback()`` when the node closes, after every process has stopped.

        For node-wide resources that a higher layer creates lazily (a shared
        HTTP client, ...) and must release with the node. Callbacks run in
        reverse order of registration, shielded from cancellation, each
        within ``CLOSE_CALLBACK_TIMEOUT`` seconds; one that raises is logged
        and the others still run.
        """
        self._close_callbacks.append(callback)

    async def _run_close_callbacks(self) -> None:
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in reversed(callbacks):
            with trio.move_on_after(CLOSE_CALLBACK_TIMEOUT):
                try:
                    await callback()
                except Exception as exc:
                    logger.error("node close callback %r raised", callback, exc_info=exc)

    def _new_pid(self) -> int:
        self._next_pid += 1
        return self._next_pid

    # ------------------------------------------------------------------ registry

    def _register(self, name: Hashable, handle: Handle) -> None:
        current = self._names.get(name)
        if current is not None and current.alive:
            raise NameTaken(name)  # type: ignore[arg-type]
        self._names[name] = handle

    def _unregister(self, name: Hashable, handle: Handle) -> None:
        if self._names.get(name) is handle:
            del self._names[name]

    @overload
    def whereis(self, name: Hashable) -> Handle | None: ...

    @overload
    def whereis(self, name: Hashable, handle_class: type[H]) -> H | None: ...

    def whereis(self, name: Hashable, handle_class: type[Handle] | None = None) -> Handle | None:
        """The live process registered under ``name``, or ``None``.

        ``node.whereis(name, AgentHandle)`` also types the result as that
        handle class, and checks it: a live process under ``name`` whose
        handle is not an instance of ``handle_class`` raises ``TypeError``
        (the name is used for something else, which is a bug, not an absence).
        Synchronous.
        """
        handle = self._names.get(name)
        if handle is None or not handle.alive:
            return None
        if handle_class is not None and not isinstance(handle, handle_class):
            raise TypeError(f"{name!r} is {handle!r}, not a {handle_class.__name__}")
        return handle

    def registered(self) -> list[Hashable]:
        """Every name currently registered."""
        return list(self._names)

    @property
    def process_count(self) -> int:
        """How many processes run on this node (supervisors included, the root excluded)."""
        root = self._root
        return self._process_count - (1 if root is not None and root.alive else 0)

    @property
    def root(self) -> DynamicSupervisorHandle:
        """The node's root supervisor."""
        if self._root is None or not self._root.alive:
            raise ConduktError("the node is not running")
        return self._root

    # ------------------------------------------------------------------ starting

    async def spawn(
        self,
        server: type[Spawnable[H]],
        *args: Any,
        name: Hashable | None = None,
        mailbox_size: int | None = None,
        hibernate_after: float | None = None,
        **kwargs: Any,
    ) -> H:
        """Start ``server`` under the node's root and return its handle.

        The handle is an instance of ``server.handle_class``, and typed so:
        ``Handle`` for a plain ``Server`` subclass, ``AgentHandle`` for an
        ``Agent``. ``init(*args, **kwargs)`` runs before this returns, in the
        calling task; what it raises is raised here. ``name`` registers the
        process. The process is a temporary child of the root: never
        restarted, stopped when the node closes. ``hibernate_after`` (seconds;
        ``math.inf``: never): once idle that long, the process hibernates
        until its next message (see ``docs/runtime.md``); ``None`` takes the
        class's default (an agent's: the node's ``hibernate_after``).

        Cancellation: a spawn cancelled while ``init`` runs cancels ``init``
        and leaves nothing running or registered.

        Raises ``TypeError`` if ``server`` is not a ``Server`` subclass,
        ``ValueError`` for a bad ``mailbox_size`` or ``hibernate_after``, :class:`NameTaken` if the
        name is taken, :class:`ConduktError` if the node is not running, and
        whatever ``init`` raised.
        """
        spec = ChildSpec(
            None,
            server,
            args,
            kwargs,
            restart="temporary",
            name=name,
            mailbox_size=mailbox_size,
            hibernate_after=hibernate_after,
        )
        return await self.root.start_child(spec)

    async def start_supervisor(
        self,
        children: Iterable[ChildSpec],
        *,
        strategy: str = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        name: Hashable | None = None,
    ) -> SupervisorHandle:
        """Start a static :class:`Supervisor` of ``children`` under the root.

        The configuration is checked before anything starts (``ValueError``
        or ``TypeError``). Children start in order; if one fails to start,
        those already started are stopped and its error is raised.

        Cancellation: the supervisor runs ``init`` in its own task; a
        cancelled start tells it to shut down, and this returns (raising
        ``Cancelled``) once it and the children it had started are gone.

        Also raises :class:`NameTaken` if ``name`` is taken and
        :class:`ConduktError` if the node is not running.
        """
        specs = validate_supervisor(children, strategy, max_restarts, max_seconds)
        spec = ChildSpec(
            None,
            Supervisor,
            kwargs={
                "children": specs,
                "strategy": strategy,
                "max_restarts": max_restarts,
                "max_seconds": max_seconds,
            },
            restart="temporary",
            name=name,
        )
        return await self.root.start_child(spec)

    async def start_dynamic_supervisor(
        self,
        *,
        max_children: int | None = None,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        name: Hashable | None = None,
        intensity: Intensity = "supervisor",
    ) -> DynamicSupervisorHandle:
        """Start a :class:`DynamicSupervisor` under the root.

        ``intensity="per_child"`` limits restarts per child instead of per
        supervisor (see :class:`DynamicSupervisor`): for many independent
        children, such as one agent per conversation, where some crashing
        must not stop the others.

        Cancellation as for :meth:`start_supervisor`. Raises ``TypeError`` or
        ``ValueError`` for a bad ``max_children`` or intensity,
        :class:`NameTaken` if ``name`` is taken and :class:`ConduktError` if
        the node is not running.
        """
        validate_intensity(max_restarts, max_seconds)
        if intensity not in ("supervisor", "per_child"):
            raise ValueError(f"intensity must be 'supervisor' or 'per_child', got {intensity!r}")
        spec = ChildSpec(
            None,
            DynamicSupervisor,
            kwargs={
                "max_children": max_children,
                "max_restarts": max_restarts,
                "max_seconds": max_seconds,
                "intensity": intensity,
            },
            restart="temporary",
            name=name,
        )
        return await self.root.start_child(spec)

    def subscribe(self, topic: Hashable = ALL, *, buffer: int = DEFAULT_BUFFER) -> Subscription:
        """Receive what is published on ``topic`` (``"*"``: everything) on this node.

        Agents publish each event of each run as
        :class:`condukt.events.AgentEvent` under their session id. Use it as
        ``async with node.subscribe("*") as events: async for item in events``.
        Publishing never waits for readers: a reader more than ``buffer``
        messages behind loses the oldest (counted in ``.dropped``).
        """
        return self.pubsub.subscribe(topic, buffer)

    def publish(self, topic: Hashable, message: Any) -> None:
        """Deliver ``message`` to the subscribers of ``topic`` and of ``"*"``; never blocks."""
        self.pubsub.publish(topic, message)

    async def agent(self, cls: Any, key: str, /, **options: Any) -> Any:
        """The handle of the virtual agent of ``key``: ``cls`` activated on demand, at most once.

        ``await node.agent(condukt.Agent, "user-42", model=..., session_store=store,
        passivate_after=300)`` returns a :class:`condukt.virtual.VirtualHandle`
        at once; its first call spawns ``cls(id=key, **options)``, and
        ``passivate_after`` seconds without a call stop it (its state in the
        store) until the next call. See :mod:`condukt.virtual` and
        docs/cluster.md. ``key``: a str of 1 to 1,024 characters
        (:class:`TypeError`, :class:`ValueError` otherwise).

        Cancellation: nothing to cancel (nothing starts before the first call).
        """
        activator = _activator
        if activator is None:
            raise ConduktError("virtual agents need condukt.virtual: import condukt")
        return await activator(self, cls, key, dict(options))

    def monitor(self, handle: Handle | RemoteHandle) -> _MonitorContext:
        """Monitor ``handle`` from code outside any process.

        ``async with node.monitor(h) as m: down = await m.wait()``. A dead
        process yields ``Down(h, "noproc")`` at once. Entering is a
        checkpoint; leaving the block removes the monitor (cancellation
        too). On a node of a :mod:`condukt.ray` cluster ``handle`` may be a
        ``ClusterHandle`` of a process anywhere in the cluster (``Down(h,
        "noconnection")`` when its node is lost); on a plain node anything
        but a :class:`Handle` raises :class:`TypeError`. Never raises otherwise.
        """
        if isinstance(handle, Handle):
            return _MonitorContext(handle)
        remote_for(self, handle, "node.monitor()")
        return _MonitorContext(
            handle, lambda target, watcher: monitor_any(self, target, watcher, None, "node.monitor()")
        )


#: What ``Node.agent`` calls (condukt.virtual.activate, set through lowlevel.set_activator).
_activator: Callable[[Node, Any, str, dict[str, Any]], Awaitable[Any]] | None = None


@attrs.define
class open_node:  # noqa: N801 - named like trio's open_* context managers
    """``async with open_node() as node``: run a :class:`Node` for the block.

    Leaving the block (normally, by an exception or by cancellation) stops
    every process in reverse start order, each within its ``shutdown``
    budget, so every ``terminate`` runs; then the node's tasks end. Process
    crashes never escape the block: only an error of the block itself does.

    ``hibernate_after`` (seconds; ``None``: off, the default) is the node's
    default for agents: one idle that long hibernates (its history held as
    one serialized blob, its task gone) until its next message. A start's
    own ``hibernate_after=`` (``math.inf``: never) overrides it; plain
    servers hibernate only when their class or start asks. See
    ``docs/runtime.md``. ``ValueError`` for a negative or non-number value.
    """

    _node: Node | None = None
    _nursery_manager: Any = None
    _nursery: trio.Nursery | None = None
    _token: Token[Node | None] | None = None
    hibernate_after: float | None = attrs.field(default=None, kw_only=True, validator=_check_hibernate)

    async def __aenter__(self) -> Node:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            raise RuntimeError(
                "open_node() runs on trio and was awaited outside trio (asyncio?): from asyncio code use"
                " condukt.asyncio.open_node() or condukt.asyncio.run(...) (docs/embedding.md)"
            ) from None
        node = self._node = Node()
        node.hibernate_after = self.hibernate_after
        # Set before any task starts so every process inherits it.
        self._token = _current_node.set(node)
        self._nursery_manager = trio.open_nursery()
        nursery = self._nursery = await self._nursery_manager.__aenter__()
        try:
            node._root = await nursery.start(_host, node)
        except BaseException as exc:
            nursery.cancel_scope.cancel()
            _current_node.reset(self._token)
            await self._nursery_manager.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return node

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        node = self._node
        assert node is not None and node._root is not None
        root = node._root
        with trio.CancelScope(shield=True):
            proc = root._process
            if proc is not None:
                proc._request_exit("shutdown", terminate=True, timeout=None)
                await root.wait()
            await node._run_close_callbacks()
            node.pubsub.close()
        if self._token is not None:
            _current_node.reset(self._token)
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            suppressed: bool = await self._nursery_manager.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            if exc is not None and _only(group, exc):
                return False  # let the block's own exception propagate unwrapped
            raise
        return suppressed


async def _host(node: Node, *, task_status: trio.TaskStatus[DynamicSupervisorHandle]) -> None:
    """Run the node's timer service and root supervisor until the root has exited.

    Shielded: when the ``open_node`` block is cancelled, its processes must
    not be cancelled with it but shut down in order by ``__aexit__``, every
    ``terminate`` within its budget (timers keep working meanwhile).
    """
    with trio.CancelScope(shield=True):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node._timers.run)
            spec = ChildSpec(None, DynamicSupervisor, kwargs={"ordered_shutdown": True}, shutdown="infinity")
            root = await start_process(node, spec, nursery=nursery)
            task_status.started(root)
            await root.wait()
            nursery.cancel_scope.cancel()


def _only(group: BaseExceptionGroup, exc: BaseException) -> bool:
    """Whether ``group`` holds nothing but ``exc`` (however nested) and ``Cancelled``."""
    # Compare leaves: trio re-derives a group raised in the block (``split``
    # copies groups, never leaves). ``split`` never matches the wrapping
    # groups themselves (``subgroup`` with a negated predicate would).
    mine = {id(leaf) for leaf in _leaves(exc)}
    _, rest = group.split(lambda e: id(e) in mine or isinstance(e, trio.Cancelled))
    return rest is None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
