"""Spawning 100,000 processes, their memory, stop cost and restart cycle.

Baseline, run in the same process: a raw trio "actor" (a task plus an
``open_memory_channel`` mailbox) started in a nursery.

    python benchmarks/otp_spawn.py [N]
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc

import trio
from _common import report, rss_kb

import condukt

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


class Idle(condukt.Server):
    async def handle_call(self, request, caller):
        if request == "crash":
            raise RuntimeError("crash requested")
        return request


async def raw_actor(receive, started):
    started()
    async for _ in receive:
        pass


async def measure_raw(n: int, trace: bool) -> tuple[float, float, float]:
    gc.collect()
    gc.disable()
    if trace:
        tracemalloc.start()
    rss0 = rss_kb()
    mem0 = tracemalloc.get_traced_memory()[0] if trace else 0
    running = 0
    done = trio.Event()

    def started():
        nonlocal running
        running += 1
        if running == n:
            done.set()

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        keep = []
        for _ in range(n):
            send, receive = trio.open_memory_channel(1024)
            keep.append(send)
            nursery.start_soon(raw_actor, receive, started)
        await done.wait()
        elapsed = time.perf_counter() - t0
        mem = (tracemalloc.get_traced_memory()[0] - mem0 if trace else 0)
        rss = (rss_kb() - rss0) * 1024
        if trace:
            tracemalloc.stop()
        gc.enable()
        for send in keep:
            send.close()
    return elapsed / n * 1e6, mem / n, rss / n


async def measure_ours(
    node: condukt.Node, n: int, trace: bool
) -> tuple[float, float, float, condukt.DynamicSupervisorHandle]:
    dyn = await node.start_dynamic_supervisor()
    spec = condukt.ChildSpec(None, Idle, restart="temporary")
    gc.collect()
    gc.disable()
    if trace:
        tracemalloc.start()
    rss0 = rss_kb()
    mem0 = tracemalloc.get_traced_memory()[0] if trace else 0
    t0 = time.perf_counter()
    for _ in range(n):
        await dyn.start_child(spec)
    await trio.lowlevel.checkpoint()  # let the last ones reach their loops
    elapsed = time.perf_counter() - t0
    mem = (tracemalloc.get_traced_memory()[0] - mem0 if trace else 0)
    rss = (rss_kb() - rss0) * 1024
    if trace:
        tracemalloc.stop()
    gc.enable()
    return elapsed / n * 1e6, mem / n, rss / n, dyn


async def stop_cost(node: condukt.Node, alive: int, samples: int = 2_000, collect: bool = True) -> float:
    dyn = await node.start_dynamic_supervisor()
    spec = condukt.ChildSpec(None, Idle, restart="temporary")
    for _ in range(alive):
        await dyn.start_child(spec)
    await trio.sleep(0)  # let them all reach their loops first
    victims = [await dyn.start_child(spec) for _ in range(samples)]
    await trio.sleep(0)
    gc.collect()
    if not collect:
        gc.disable()
    t0 = time.perf_counter()
    for handle in victims:
        await handle.stop()
    elapsed = time.perf_counter() - t0
    gc.enable()
    await dyn.stop("shutdown", timeout=None)
    return elapsed / samples * 1e6


async def restart_cycle(node: condukt.Node, cycles: int = 2_000) -> float:
    await node.start_supervisor(
        [condukt.ChildSpec("w", Idle, name="worker")], max_restarts=cycles + 10, max_seconds=3600
    )
    t0 = time.perf_counter()
    for _ in range(cycles):
        handle = node.whereis("worker")
        try:
            await handle.call("crash")
        except condukt.CallError:
            pass
        while node.whereis("worker") is None or node.whereis("worker") is handle:
            await trio.lowlevel.checkpoint()
    return (time.perf_counter() - t0) / cycles * 1e6


async def main() -> None:
    import logging

    logging.getLogger("condukt").setLevel(logging.CRITICAL)
    # Time and memory in separate runs: tracemalloc slows allocation down.
    raw_t, _, _ = await measure_raw(N, trace=False)
    _, raw_mem, raw_rss = await measure_raw(N, trace=True)
    async with condukt.open_node() as node:
        our_t, _, _, dyn = await measure_ours(node, N, trace=False)
        await dyn.stop("shutdown", timeout=None)
        _, our_mem, our_rss, dyn = await measure_ours(node, N, trace=True)
        t0 = time.perf_counter()
        await dyn.stop("shutdown", timeout=None)
        stop_all = (time.perf_counter() - t0) / N * 1e6
        stop_small = await stop_cost(node, 10)
        stop_large = await stop_cost(node, N)
        # The same without the cyclic GC: what the runtime itself costs (a
        # gen-2 collection walks every live object, whoever allocated them).
        stop_small_nogc = await stop_cost(node, 10, collect=False)
        stop_large_nogc = await stop_cost(node, N, collect=False)
        cycle = await restart_cycle(node)
    report(
        [
            (f"raw task+channel: spawn to running (µs/proc, N={N})", raw_t, "µs"),
            ("raw task+channel: tracemalloc bytes/proc", raw_mem, "B"),
            ("raw task+channel: RSS bytes/proc", raw_rss, "B"),
            ("DynamicSupervisor.start_child (µs/proc)", our_t, "µs"),
            ("condukt process: tracemalloc bytes/proc", our_mem, "B"),
            ("condukt process: RSS bytes/proc", our_rss, "B"),
            ("supervisor shutdown of all (µs/proc)", stop_all, "µs"),
            ("stop one, 10 others alive (µs)", stop_small, "µs"),
            (f"stop one, {N} others alive (µs)", stop_large, "µs"),
            ("stop one, 10 others alive, GC off (µs)", stop_small_nogc, "µs"),
            (f"stop one, {N} others alive, GC off (µs)", stop_large_nogc, "µs"),
            ("restart cycle: crash -> restart -> whereis (µs)", cycle, "µs"),
        ]
    )
    print(f"stop cost ratio with GC off ({N} alive / 10 alive): {stop_large_nogc / stop_small_nogc:.2f}x")
    print(f"stop cost ratio ({N} alive / 10 alive): {stop_large / stop_small:.2f}x (should be ~1x)")
    print(f"memory per idle process vs raw task+channel: {our_mem / raw_mem:.2f}x (limit 1.3x)")
    print(f"spawn time per process vs raw task+channel: {our_t / raw_t:.2f}x (limit 1.5x)")


if __name__ == "__main__":
    trio.run(main)
