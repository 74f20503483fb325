"""condukt beyond one machine: a cluster of condukt nodes on Ray (extra ``[ray]``).

::

    import condukt.ray

    async with condukt.ray.open_cluster(nodes=2) as cluster:   # a local Ray, or address="auto"
        h = await cluster.spawn(MyAgent, name="a1", model=...)  # placed on the least loaded node
        await h.run("hi")                                       # from anywhere in the cluster
        cluster.whereis("a1"); await cluster.nodes()

Each condukt node lives in a Ray async actor, with trio running in a
thread of the actor (or, ``trio_host="guest"``, as a guest on the actor's
asyncio loop through :mod:`condukt.asyncio`). Handles
(:class:`ClusterHandle`) pickle to (node id, process id) and route across
nodes: a call to a process on the caller's own node goes straight to the
local handle, one to another node is one Ray actor call. Names are unique
cluster-wide. A monitor of a process whose node dies gets
``Down(handle, "noconnection")``, and a :class:`ClusterSupervisor` restarts
its children on surviving nodes. See ``docs/cluster.md``.
"""

from __future__ import annotations

try:
    import ray as _ray  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "condukt.ray needs Ray: install the extra with `pip install 'condukt[ray]'`"
    ) from exc

from ._actors import STREAM_BUFFER
from ._bridge import NodeDown, RemoteError
from ._cluster import (
    Cluster,
    ClusterMonitor,
    ClusterSupervisor,
    ClusterVirtualHandle,
    NodeInfo,
    Placement,
    current_cluster,
    init,
    least_loaded,
    link,
    monitor,
    open_cluster,
    shutdown,
)
from ._handle import ClusterHandle, RemoteStream

__all__ = [
    "STREAM_BUFFER",
    "Cluster",
    "ClusterHandle",
    "ClusterMonitor",
    "ClusterSupervisor",
    "ClusterVirtualHandle",
    "NodeDown",
    "NodeInfo",
    "Placement",
    "RemoteError",
    "RemoteStream",
    "current_cluster",
    "init",
    "least_loaded",
    "link",
    "monitor",
    "open_cluster",
    "shutdown",
]
