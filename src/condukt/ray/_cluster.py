"""The cluster: nodes in Ray actors, placement, the registry, monitors and a cluster supervisor."""

from __future__ import annotations

import hashlib
import logging
import math
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Literal, cast

import attrs
import ray
import trio
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..otp import ChildSpec, ConduktError, Down, Server, is_shutdown_exit
from ..virtual import check_key
from ._actors import NodeActor, Registry
from ._bridge import NodeDown, await_ref, unwrap
from ._handle import NAMESPACE, ClusterHandle, actor_name, actor_of, forget_actors, local_node, remember_actor

__all__ = [
    "Cluster",
    "ClusterMonitor",
    "ClusterVirtualHandle",
    "ClusterSupervisor",
    "NodeInfo",
    "current_cluster",
    "init",
    "least_loaded",
    "link",
    "monitor",
    "open_cluster",
    "shutdown",
]

logger = logging.getLogger("condukt.ray")

#: Concurrent calls one node actor accepts (monitors and stream reads wait in one each).
MAX_CONCURRENCY = 100_000

#: Starts a cluster supervisor tries for a child whose start failed with a ``retry_after`` (a session still owned).
RESTART_ATTEMPTS = 10

#: How long placement trusts the process counts it last read from the nodes (seconds).
LOAD_TTL = 1.0


@attrs.frozen
class NodeInfo:
    """One node of the cluster as :meth:`Cluster.nodes` reports it."""

    #: The node's id (what ``spawn(node=...)`` takes and handles carry).
    id: str
    #: Processes running on the node (supervisors count).
    processes: int
    #: Names registered on the node.
    names: int = 0
    #: The OS process id of the node's Ray actor (0 when unknown).
    pid: int = 0


#: A placement policy: picks the node for a new process from the live nodes.
Placement = Callable[[Sequence[NodeInfo]], NodeInfo]


def least_loaded(nodes: Sequence[NodeInfo]) -> NodeInfo:
    """The default placement: the node with the fewest processes (the first on a tie)."""
    return min(nodes, key=lambda node: node.processes)


_local_env_done = False


def init(address: str | None = None, **options: Any) -> None:
    """``ray.init`` with condukt's defaults; a no-op when Ray is already initialized.

    ``address=None`` starts a local Ray: 2 CPUs, no dashboard, a 128 MB
    object store, workers importing from this interpreter's ``sys.path``
    (so the classes you spawn unpickle in the node actors). Otherwise it
    connects to the cluster at ``address`` (``"auto"``, ``"ray://..."``).
    ``options`` go to :func:`ray.init` and override the defaults.
    """
    global _environment_before
    if ray.is_initialized():
        return
    _environment_before = dict(os.environ)
    if address is None:
        path = os.pathsep.join(entry for entry in sys.path if entry)
        defaults: dict[str, Any] = {
            "num_cpus": 2,
            "include_dashboard": False,
            "object_store_memory": 128 * 1024 * 1024,
            "runtime_env": {"env_vars": {"PYTHONPATH": path}},
            "configure_logging": False,
        }
        ray.init(**{**defaults, **options})
    else:
        ray.init(address=address, **options)


#: This process's environment before :func:`init` started Ray (which sets variables it never unsets).
_environment_before: dict[str, str] | None = None


def shutdown() -> None:
    """``ray.shutdown()``, then undo the environment variables ``ray.init`` set in this process.

    Ray sets variables such as ``RAY_AUTH_MODE`` and ``PYTHONBREAKPOINT``
    in the driver's ``os.environ`` and leaves them after its shutdown;
    this puts back what :func:`init` found. :func:`open_cluster` calls it
    when it started Ray itself.
    """
    global _environment_before, _remote_node, _remote_registry
    ray.shutdown()
    # Actor classes and actor handles belong to the Ray session they were made in.
    _remote_node = _remote_registry = None
    forget_actors()
    before, _environment_before = _environment_before, None
    if before is not None:
        for key in [key for key in os.environ if key not in before]:
            del os.environ[key]
        for key, value in before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


_remote_node: Any = None
_remote_registry: Any = None


def _actor_classes() -> tuple[Any, Any]:
    global _remote_node, _remote_registry
    if _remote_node is None:
        _remote_node = ray.remote(NodeActor)
        _remote_registry = ray.remote(Registry)
    return _remote_node, _remote_registry


class Cluster:
    """A condukt cluster on Ray: get one from :func:`open_cluster` (or :func:`current_cluster` on a node).

    Picklable: a cluster passed to a node (or reached there with
    :func:`current_cluster`) spawns, looks names up and reports nodes from
    there too. Supervisors are the driver's (see
    :meth:`start_dynamic_supervisor`).
    """

    def __init__(self, cluster_id: str, registry: Any, placement: Placement = least_loaded) -> None:
        #: A unique id for this cluster.
        self.id = cluster_id
        self._registry = registry
        #: The placement policy ``spawn`` uses without ``node=``.
        self.placement = placement
        self._loads: dict[str, int] = {}
        self._dead: set[str] = set()
        self._loads_read = -math.inf
        self._nursery: trio.Nursery | None = None
        self._node_options: dict[str, Any] = {}
        self._closing = False
        self._trio_host = "thread"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (Cluster, (self.id, self._registry, self.placement))

    def __repr__(self) -> str:
        return f"<condukt.ray.Cluster {self.id} nodes={len(self._loads)}>"

    # ---------------------------------------------------------------- nodes

    async def add_node(self, *, ray_node: str | None = None) -> str:
        """Start one more node (a new Ray actor); returns its id. Driver only.

        ``ray_node``: the id of the Ray node (a raylet, a machine) to start
        it on (``ray.nodes()`` lists them, ``"NodeID"``); ``None`` lets Ray
        choose. A condukt node pinned to a Ray node is lost with it.

        Cancellation: the actor may still come up; it is closed with the cluster.
        """
        if self._nursery is None:
            raise ConduktError("only the driver that opened the cluster adds nodes")
        node_class, _ = _actor_classes()
        node_id = uuid.uuid4().hex[:12]
        options: dict[str, Any] = {}
        if ray_node is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(ray_node, soft=False)
        actor = node_class.options(
            name=actor_name(node_id),
            namespace=NAMESPACE,
            num_cpus=0,
            max_concurrency=MAX_CONCURRENCY,
            max_restarts=0,
            **options,
        ).remote(node_id, self._registry, self._node_options, self._trio_host)
        remember_actor(node_id, actor)
        await await_ref(actor.start.remote(self), node_id)
        await await_ref(self._registry.add_node.remote(node_id), "registry")
        self._loads[node_id] = 0
        self._nursery.start_soon(self._watch_node, node_id, actor)
        return node_id

    async def _watch_node(self, node_id: str, actor: Any) -> None:
        try:
            await await_ref(actor.wait_closed.remote(), node_id)
        except NodeDown:
            if not self._closing:
                await self.node_lost(node_id)

    async def node_lost(self, node_id: str) -> None:
        """Record that a node is gone: placement skips it and its names are released cluster-wide.

        Cancellation: the node is skipped from then on; the registry may not have heard yet.
        """
        if node_id in self._dead:
            return
        self._dead.add(node_id)
        self._loads.pop(node_id, None)
        logger.warning("condukt.ray: node %s is down", node_id)
        await await_ref(self._registry.node_down.remote(node_id), "registry")

    async def _node_ids(self) -> list[str]:
        if self._nursery is None:  # on a node: the registry knows the cluster's nodes
            ids: list[str] = await await_ref(self._registry.node_ids.remote(), "registry")
            for node_id in ids:
                self._loads.setdefault(node_id, 0)
            return [node_id for node_id in ids if node_id not in self._dead]
        return [node_id for node_id in self._loads if node_id not in self._dead]

    async def nodes(self) -> list[NodeInfo]:
        """Every live node with its process count (one round trip to each node, concurrently).

        Cancellation: stops waiting for the answers; nothing changes.
        """
        infos: dict[str, NodeInfo] = {}

        async def read(node_id: str) -> None:
            try:
                got = await await_ref(actor_of(node_id).info.remote(), node_id)
            except NodeDown:
                await self.node_lost(node_id)
                return
            infos[node_id] = NodeInfo(id=got[0], processes=got[1], names=got[2], pid=got[3])

        ids = await self._node_ids()
        async with trio.open_nursery() as nursery:
            for node_id in ids:
                nursery.start_soon(read, node_id)
        for node_id, info in infos.items():
            self._loads[node_id] = info.processes
        self._loads_read = time.monotonic()
        return [infos[node_id] for node_id in ids if node_id in infos]

    async def _place(self, exclude: frozenset[str] = frozenset()) -> str:
        if time.monotonic() - self._loads_read > LOAD_TTL:
            await self.nodes()
        live = [
            NodeInfo(node_id, load) for node_id, load in self._loads.items() if node_id not in self._dead | exclude
        ]
        if not live:
            raise ConduktError("no live node in the cluster to place a process on")
        chosen = self.placement(live).id
        self._loads[chosen] += 1  # until the next reading: concurrent spawns spread out
        return chosen

    # ------------------------------------------------------------ processes

    async def spawn(
        self, cls: type[Server], *args: Any, name: Hashable | None = None, node: str | None = None, **kwargs: Any
    ) -> Any:
        """Start a process (an agent, a server) on a node; returns its :class:`ClusterHandle`.

        ``node=`` picks the node (an id from :meth:`nodes`); otherwise the
        cluster's placement policy does (least loaded by process count by
        default). ``name`` registers it cluster-wide (:class:`condukt.NameTaken`
        if taken anywhere) and on its node. ``cls``, ``args`` and ``kwargs``
        are pickled to the node (the model object, the session store...).

        Cancellation: the Ray call is cancelled; if the process had already
        started on the node, it keeps running (find it by name).
        """
        node_id = node if node is not None else await self._place()
        ref = actor_of(node_id).spawn.remote(cls, args, kwargs, name)
        handle: ClusterHandle = unwrap(await await_ref(ref, node_id))
        return handle

    async def spawn_many(self, cls: type[Server], count: int, *args: Any, **kwargs: Any) -> list[Any]:
        """``count`` unnamed processes of ``cls`` with the same arguments; their handles, in order.

        Placement runs once per process, as ``spawn`` would, but each node
        gets its share in one Ray call (``cls`` and the arguments are pickled
        once per node): the way to start thousands of agents. Each process
        gets its own unpickled copy of the arguments per node, shared by the
        processes of that node (a model object, a store).

        Cancellation: the processes already started keep running.
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        placed = [await self._place() for _ in range(count)]
        handles: list[Any] = [None] * count

        async def on(node_id: str) -> None:
            slots = [i for i, chosen in enumerate(placed) if chosen == node_id]
            ref = actor_of(node_id).spawn_many.remote(cls, args, [kwargs] * len(slots))
            for i, handle in zip(slots, unwrap(await await_ref(ref, node_id)), strict=True):
                handles[i] = handle

        async with trio.open_nursery() as nursery:
            for node_id in set(placed):
                nursery.start_soon(on, node_id)
        return handles

    def whereis(self, name: Hashable) -> Any:
        """The :class:`ClusterHandle` registered under ``name`` anywhere in the cluster, or ``None``.

        One blocking round trip to the registry actor (about a millisecond
        on one machine); :meth:`lookup` is the awaitable form, better inside
        a node, whose other processes wait while it blocks.
        """
        # Blocks this thread (a node's event loop too, briefly); ray.get would warn about that on a node.
        entry = self._registry.whereis.remote(name).future().result()
        return None if entry is None else ClusterHandle(entry[0], entry[1], name, entry[2])

    async def lookup(self, name: Hashable) -> Any:
        """:meth:`whereis`, awaited instead of blocking.

        Cancellation: stops waiting for the registry; nothing changes.
        """
        entry = await await_ref(self._registry.whereis.remote(name), "registry")
        return None if entry is None else ClusterHandle(entry[0], entry[1], name, entry[2])

    async def registered(self) -> list[Hashable]:
        """Every name registered in the cluster.

        Cancellation: stops waiting for the registry; nothing changes.
        """
        names: list[Hashable] = await await_ref(self._registry.registered.remote(), "registry")
        return names

    async def node_for(self, key: str) -> str:
        """The node that runs the virtual agent of ``key`` now: rendezvous hashing of the key over the live nodes.

        Each live node scores ``sha256(node id + key)``; the highest wins. A
        node lost moves only its own keys (to the next highest), a node
        added takes about its share. Cancellation: nothing changes.
        """
        check_key(key)
        ids = await self._node_ids()
        if not ids:
            raise ConduktError("no live node in the cluster to place a virtual agent on")
        return max(ids, key=lambda node_id: hashlib.sha256(f"{node_id}/{key}".encode()).digest())

    async def agent(self, cls: type[Server], key: str, **options: Any) -> ClusterVirtualHandle:
        """The handle of the virtual agent of ``key`` anywhere in the cluster (see :mod:`condukt.virtual`).

        Each call goes to the node :meth:`node_for` picks, which activates
        the key there if needed (at most once: every caller picks the same
        node; with a leasing ``session_store`` the store's lease covers
        other drivers too). When that node is lost, the next call goes to
        the next node by the hash, which activates the key from the store
        (``lease_wait`` defaults to twice the store's ``lease_ttl`` here,
        so it waits out the lost node's lease). ``cls`` and ``options``
        travel with each call (pickled).

        Cancellation: nothing to cancel (nothing starts before the first call).
        """
        check_key(key)
        store = options.get("session_store")
        if "lease_wait" not in options and store is not None and hasattr(store, "lease_ttl"):
            options["lease_wait"] = 2 * float(store.lease_ttl)
        await trio.lowlevel.checkpoint()
        return ClusterVirtualHandle(self, cls, key, options)

    def monitor(self, handle: ClusterHandle) -> ClusterMonitor:
        """``async with cluster.monitor(handle) as m``: ``await m.wait()`` returns the :class:`condukt.Down`.

        The reason is the process's exit reason, ``"noproc"`` if it was
        already gone, or ``"noconnection"`` when its node was lost.
        """
        return ClusterMonitor(handle)

    async def start_dynamic_supervisor(self, *, max_restarts: int = 3, max_seconds: float = 5.0) -> ClusterSupervisor:
        """A dynamic supervisor whose children live anywhere in the cluster (driver only).

        A child that exits is restarted per its spec's ``restart`` on a
        node chosen by the placement policy: after its node is lost, on a
        surviving node. More than ``max_restarts`` restarts of one child
        within ``max_seconds`` and the supervisor leaves it down (logged).
        Its children are stopped when the cluster closes.

        Cancellation: nothing to cancel (it only sets up the supervisor).
        """
        if self._nursery is None:
            raise ConduktError("cluster supervisors run in the driver that opened the cluster")
        return ClusterSupervisor(self, self._nursery, max_restarts, max_seconds)


class ClusterVirtualHandle:
    """The virtual agent of one key in a cluster (see :meth:`Cluster.agent`); picklable.

    Every :class:`condukt.virtual.VirtualHandle` method (``run``, ``call``,
    ``history``, ...) is available, awaited: one Ray call to the key's
    node. A call whose node is lost before it answered raises
    :class:`NodeDown`; the next call goes to the key's new node.
    """

    def __init__(self, cluster: Cluster, cls: Any, key: str, options: dict[str, Any]) -> None:
        self._cluster = cluster
        self._cls = cls
        #: The agent's key.
        self.key = key
        self._options = options

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (ClusterVirtualHandle, (self._cluster, self._cls, self.key, self._options))

    def __repr__(self) -> str:
        return f"<ClusterVirtualHandle {getattr(self._cls, '__name__', self._cls)} {self.key!r:.60}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterVirtualHandle) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    async def _use(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        cluster = self._cluster
        node_id = await cluster.node_for(self.key)
        ref = actor_of(node_id).virtual_invoke.remote((self._cls, self.key, self._options, method, args, kwargs))
        try:
            return unwrap(await await_ref(ref, node_id))
        except NodeDown:
            cluster._dead.add(node_id)
            if cluster._nursery is not None:
                await cluster.node_lost(node_id)
            raise

    async def call(self, request: Any, timeout: float | None = 5.0) -> Any:
        """:meth:`condukt.Handle.call` on the key's activation. Cancellation cancels the Ray call."""
        return await self._use("call", (request, timeout), {})

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`condukt.AgentHandle.run` on the key's activation. Cancellation cancels the Ray call."""
        return await self._use("run", args, kwargs)

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)

        async def forwarded(*args: Any, **kwargs: Any) -> Any:
            return await self._use(method, args, kwargs)

        forwarded.__name__ = method
        return forwarded


class ClusterMonitor:
    """A monitor of a process anywhere in the cluster (see :meth:`Cluster.monitor`)."""

    def __init__(self, handle: ClusterHandle) -> None:
        self.handle = handle
        #: The :class:`condukt.Down` once the process exited (or its node was lost), else ``None``.
        self.down: Down | None = None
        self._ref: Any = None

    async def __aenter__(self) -> ClusterMonitor:
        try:
            self._ref = actor_of(self.handle.node_id).wait_exit.remote(self.handle.id)
        except NodeDown:
            self.down = Down(cast(Any, self.handle), "noconnection")
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ref is not None and self.down is None:
            ray.cancel(self._ref)

    async def wait(self) -> Down:
        """Wait for the exit; returns the :class:`condukt.Down`.

        Cancellation: only the waiting is cancelled; the monitor stays set
        until its ``async with`` block ends.
        """
        if self.down is None:
            try:
                (reason,) = await await_ref(self._ref, self.handle.node_id)
            except NodeDown:
                reason = "noconnection"
                owner = _driver_cluster
                if owner is not None and owner._nursery is not None:  # the driver: tell placement and the registry now
                    await owner.node_lost(self.handle.node_id)
            if self.down is None:
                self.down = Down(cast(Any, self.handle), reason)
        return self.down


async def _exit_of(handle: ClusterHandle) -> Any:
    async with ClusterMonitor(handle) as watch:
        return (await watch.wait()).reason


def monitor(server: Server, handle: ClusterHandle) -> None:
    """``server.monitor(handle)``: kept from before the plain APIs took a :class:`ClusterHandle`.

    ``server.handle_info`` gets ``Down(handle, reason)`` when the process
    exits, with ``"noconnection"`` if its node is lost. Synchronous.
    """
    server.monitor(handle)


def link(server: Server, handle: ClusterHandle) -> None:
    """``server.link(handle)``: kept from before the plain APIs took a :class:`ClusterHandle`.

    Both ways, as a local link: the process exiting with a reason other
    than ``"normal"`` (a lost node counts as ``"noconnection"``) stops
    ``server`` (or, with ``trap_exits``, sends it ``Exit(handle, reason)``),
    and ``server`` exiting so stops the process. Synchronous.
    """
    server.link(handle)


@attrs.define
class _Child:
    spec: ChildSpec[Any]
    handle: ClusterHandle
    restarts: list[float] = attrs.field(factory=list)
    removed: bool = False


class ClusterSupervisor:
    """A dynamic supervisor for processes anywhere in the cluster (see :meth:`Cluster.start_dynamic_supervisor`)."""

    def __init__(self, cluster: Cluster, nursery: trio.Nursery, max_restarts: int, max_seconds: float) -> None:
        self._cluster = cluster
        self._nursery = nursery
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._children: list[_Child] = []

    async def start_child(self, spec: ChildSpec[Any], *, node: str | None = None) -> ClusterHandle:
        """Start ``spec`` (a :class:`condukt.ChildSpec`) on ``node`` or a placed node; returns its handle.

        Its ``name`` is registered cluster-wide. A ``"permanent"`` child is
        restarted after any exit, a ``"transient"`` one after an abnormal
        exit (a lost node is one: ``"noconnection"``), a ``"temporary"`` one
        never. For an agent to come back with its conversation, give it an
        ``id`` and a ``session_store`` that every node reaches (see
        docs/cluster.md).

        Cancellation: as for :meth:`Cluster.spawn`; a child that started is
        not supervised.
        """
        handle = await self._start(spec, node)
        child = _Child(spec, handle)
        self._children.append(child)
        self._nursery.start_soon(self._watch, child)
        return handle

    def children(self) -> list[ClusterHandle]:
        """The current incarnation of every child still supervised."""
        return [child.handle for child in self._children]

    async def terminate_child(self, handle: ClusterHandle) -> None:
        """Stop a child for good (no restart).

        Cancellation: the child is no longer supervised; the stop may not have reached it.
        """
        for child in self._children:
            if child.handle == handle:
                child.removed = True
                self._children.remove(child)
                try:
                    await handle.stop("shutdown")
                except ConduktError:
                    pass
                return
        raise ConduktError(f"{handle!r} is not a child of this supervisor")

    async def _start(
        self, spec: ChildSpec[Any], node: str | None, exclude: frozenset[str] = frozenset()
    ) -> ClusterHandle:
        cluster = self._cluster
        node_id = node if node is not None else await cluster._place(exclude)
        ref = actor_of(node_id).spawn.remote(spec.start, spec.args, dict(spec.kwargs), spec.name)
        handle: ClusterHandle = unwrap(await await_ref(ref, node_id))
        return handle

    async def _restart(self, spec: ChildSpec[Any], avoid: frozenset[str]) -> ClusterHandle:
        # A child whose start says when to try again (a session store's SessionOwned while the
        # lost node's lease runs out: its retry_after) is started again then, a few times.
        for attempt in range(RESTART_ATTEMPTS):
            try:
                return await self._start(spec, None, avoid)
            except Exception as exc:
                retry = getattr(exc, "retry_after", None)
                if not isinstance(retry, (int, float)) or attempt == RESTART_ATTEMPTS - 1:
                    raise
                logger.info("condukt.ray: restarting %r in %.1f s: %s", spec, retry, exc)
                await trio.sleep(max(float(retry), 0.05))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _watch(self, child: _Child) -> None:
        while True:
            reason = await _exit_of(child.handle)
            if child.removed:
                return
            lost = isinstance(reason, str) and reason == "noconnection"
            if lost:
                await self._cluster.node_lost(child.handle.node_id)
            restart = child.spec.restart
            if restart == "temporary" or (restart == "transient" and is_shutdown_exit(reason)):
                self._children.remove(child)
                return
            now = time.monotonic()
            child.restarts = [at for at in child.restarts if now - at < self._max_seconds] + [now]
            if len(child.restarts) > self._max_restarts:
                logger.error("condukt.ray: %r restarted too often; left down (last exit %r)", child.spec, reason)
                self._children.remove(child)
                return
            try:
                avoid = frozenset({child.handle.node_id}) if lost else frozenset()
                child.handle = await self._restart(child.spec, avoid)
            except Exception:
                logger.exception("condukt.ray: restarting %r failed", child.spec)
                self._children.remove(child)
                return


_driver_cluster: Cluster | None = None


def current_cluster() -> Cluster | None:
    """The cluster this code runs in: on a node, that node's; in the driver, the innermost open one."""
    local = local_node()
    if local is not None:
        found: Cluster | None = local.cluster
        return found
    return _driver_cluster


def _only(group: BaseExceptionGroup[Any]) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        group = group.exceptions[0]
    return group


@asynccontextmanager
async def open_cluster(
    address: str | None = None,
    nodes: int = 2,
    *,
    placement: Placement = least_loaded,
    ray_options: dict[str, Any] | None = None,
    node_options: dict[str, Any] | None = None,
    trio_host: Literal["thread", "guest"] = "thread",
) -> AsyncIterator[Cluster]:
    """``async with condukt.ray.open_cluster(nodes=2) as cluster``: condukt nodes in Ray actors.

    Connects to Ray at ``address`` (see :func:`init`; ``None`` starts a local
    Ray unless this process already initialized one) and starts ``nodes``
    node actors. Leaving the block closes every node (its processes get
    ``terminate("shutdown")``), kills the actors, and shuts down a Ray it
    started. ``node_options`` go to each node's :func:`condukt.open_node`.
    ``trio_host`` is where each node actor runs trio: ``"thread"``, a thread
    of its own (the default, measured faster), or ``"guest"``, on the
    actor's asyncio loop (see docs/cluster.md).
    """
    if trio_host not in ("thread", "guest"):
        raise ValueError(f"trio_host must be 'thread' or 'guest', got {trio_host!r}")
    global _driver_cluster
    started_ray = not ray.is_initialized()
    init(address, **(ray_options or {}))
    _, registry_class = _actor_classes()
    cluster_id = uuid.uuid4().hex[:12]
    # The registry lives on the driver's Ray node: a lost worker machine does not take the names with it.
    registry = registry_class.options(
        name=f"condukt-registry-{cluster_id}",
        namespace=NAMESPACE,
        num_cpus=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False),
    ).remote()
    cluster = Cluster(cluster_id, registry, placement)
    cluster._node_options = dict(node_options or {})
    cluster._trio_host = trio_host
    outer = _driver_cluster
    try:
        async with trio.open_nursery() as nursery:
            cluster._nursery = nursery
            try:
                async with trio.open_nursery() as starting:
                    for _ in range(nodes):
                        starting.start_soon(cluster.add_node)
                _driver_cluster = cluster
                yield cluster
            finally:
                _driver_cluster = outer
                cluster._closing = True
                nursery.cancel_scope.cancel()  # the node watches and the supervisors end first
                with trio.CancelScope(shield=True):
                    await _close(cluster)
    except BaseExceptionGroup as group:
        raise _only(group) from None
    finally:
        ray.kill(registry)
        if started_ray:
            shutdown()


async def _close(cluster: Cluster) -> None:
    cluster._closing = True

    async def close(node_id: str) -> None:
        actor = actor_of(node_id)
        with trio.move_on_after(10):
            try:
                await await_ref(actor.close.remote(), node_id)
            except NodeDown:
                pass
        ray.kill(actor)

    async with trio.open_nursery() as nursery:
        for node_id in list(cluster._loads):
            if node_id not in cluster._dead:
                nursery.start_soon(close, node_id)
