"""condukt.ray: cross-node calls against raw Ray, cluster handles against plain ones, memory per agent.

Baselines, measured in the same run on the same local Ray:

1. **Cross-node call.** ``await handle.call(payload)`` from the driver to a
   server on a node (each call crosses processes: driver, then the node's
   actor), against ``ray.get(actor.echo.remote(payload))`` on a raw async
   Ray actor whose method returns the payload. Sequential round trips. Also
   with the node's trio as a guest on the actor's asyncio loop
   (``trio_host="guest"``), the alternative to trio in a thread.
2. **Same node.** On one node, a server calls an echo server on the same
   node through a :class:`condukt.ray.ClusterHandle` and through the plain
   :class:`condukt.Handle`.
3. **Memory per idle agent.** RSS growth of a node's actor process per
   idle ``condukt.Agent`` spawned through the cluster, against the RSS
   growth of this process per agent spawned on a plain ``open_node``.

    python benchmarks/cluster.py
"""

from __future__ import annotations

import gc
import os
import sys
import time

import ray
import trio
from _common import rss_kb

import condukt
import condukt.ray
from condukt.testing import ScriptedModel

CALLS = 300
SAME_NODE_CALLS = 20_000
AGENTS = 5_000
PAYLOAD = {"text": "x" * 200, "n": 1}


class Echo(condukt.Server):
    async def handle_call(self, request, caller):
        return request


class SameNode(condukt.Server):
    """Times calls to an echo server on its own node: through a cluster handle, then the plain handle."""

    async def handle_call(self, request, caller):
        cluster_handle, count = request
        plain = cluster_handle.local
        assert plain is not None
        best = {"cluster": float("inf"), "plain": float("inf")}
        for _ in range(5):
            for label, target in (("cluster", cluster_handle), ("plain", plain)):
                start = time.perf_counter()
                for _ in range(count):
                    await target.call(PAYLOAD)
                best[label] = min(best[label], time.perf_counter() - start)
        return best


@ray.remote(num_cpus=0)
class RawEcho:
    async def echo(self, payload):
        return payload


def proc_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def single_node_kb_per_agent() -> float:
    async with condukt.open_node() as node:
        model = ScriptedModel([])
        agents = [await node.spawn(condukt.Agent, model=model) for _ in range(200)]  # warm up
        gc.collect()
        before = rss_kb()
        agents += [await node.spawn(condukt.Agent, model=model) for _ in range(AGENTS)]
        gc.collect()
        return (rss_kb() - before) / AGENTS


async def main() -> None:
    print(f"condukt {condukt.__version__}, ray {ray.__version__}, trio {trio.__version__}, Python {sys.version.split()[0]}")
    started = time.perf_counter()
    async with condukt.ray.open_cluster(nodes=2) as cluster:
        print(f"  cluster of 2 nodes open in {time.perf_counter() - started:.1f} s")
        first, second = await cluster.nodes()
        echo = await cluster.spawn(Echo, node=first.id)
        raw = RawEcho.remote()
        ray.get(raw.echo.remote(PAYLOAD))

        # 1. Cross-node round trips, interleaved rounds, best of each; the guest host for comparison.
        async with condukt.ray.open_cluster(nodes=1, trio_host="guest") as guest_cluster:
            guest_echo = await guest_cluster.spawn(Echo)
            best = {"thread": float("inf"), "guest": float("inf"), "raw": float("inf")}
            for _ in range(7):
                for label, target in (("thread", echo), ("guest", guest_echo)):
                    start = time.perf_counter()
                    for _ in range(CALLS):
                        await target.call(PAYLOAD)
                    best[label] = min(best[label], time.perf_counter() - start)
                start = time.perf_counter()
                for _ in range(CALLS):
                    ray.get(raw.echo.remote(PAYLOAD))
                best["raw"] = min(best["raw"], time.perf_counter() - start)
        thread_us, guest_us, raw_us = (best[label] / CALLS * 1e6 for label in ("thread", "guest", "raw"))
        print(f"  cross-node call (driver -> node), {len(repr(PAYLOAD))}-byte payload:")
        print(f"    condukt.ray ClusterHandle.call  {thread_us:9.1f} us  (trio in a thread of the node actor)")
        print(f"      with trio_host='guest'        {guest_us:9.1f} us  ({guest_us / raw_us:.2f}x raw)")
        print(f"    raw Ray actor method + ray.get  {raw_us:9.1f} us")
        print(f"    ratio                           {thread_us / raw_us:9.2f}x  (target <= 1.5x)")

        # 2. Same node: cluster handle against plain handle.
        local_echo = await cluster.spawn(Echo, node=second.id)
        timer = await cluster.spawn(SameNode, node=second.id)
        best = await timer.call((local_echo, SAME_NODE_CALLS), timeout=None)
        cluster_us = best["cluster"] / SAME_NODE_CALLS * 1e6
        plain_us = best["plain"] / SAME_NODE_CALLS * 1e6
        print("  same-node call (inside a node):")
        print(f"    ClusterHandle.call              {cluster_us:9.2f} us")
        print(f"    plain Handle.call               {plain_us:9.2f} us")
        print(f"    ratio                           {cluster_us / plain_us:9.2f}x  (target <= 1.2x)")

        # 3. Memory per idle agent on a node, against one node in this process.
        await cluster.spawn_many(condukt.Agent, 200, model=ScriptedModel([]))  # warm up
        node_pids = {info.id: info.pid for info in await cluster.nodes()}
        before = {node_id: proc_rss_kb(pid) for node_id, pid in node_pids.items()}
        await cluster.spawn_many(condukt.Agent, AGENTS, model=ScriptedModel([]))
        grown = sum(proc_rss_kb(pid) - before[node_id] for node_id, pid in node_pids.items())
        cluster_kb = grown / AGENTS
    single_kb = await single_node_kb_per_agent()
    print(f"  memory per idle agent ({AGENTS} agents):")
    print(f"    in a cluster node               {cluster_kb:9.2f} KiB")
    print(f"    on a plain node (this process)  {single_kb:9.2f} KiB")
    print(f"    ratio                           {cluster_kb / single_kb:9.2f}x  (target <= 1.2x)")


if __name__ == "__main__":
    trio.run(main)
