"""The one-shot HTTP workload: one ``condukt.run`` per run against a 50 ms OpenAI-format server.

Each run spawns a transient agent, runs 2 model turns + 1 tool call against
the protocol server (``condukt.testing.server``, its own process, 50 ms per
request: ideal makespan 0.1 s) and stops it, N runs at once, default
settings (collector included). Same run, same node, rounds alternating
(ABBA), best of ``--rounds``: ``providers_openai.py``'s path (agents
spawned before the clock, one run each) as the baseline.

The first round of a fresh node pays for cold connections; the figures
are for a node that served a warm-up round, as a service's node has.
``--cold`` also prints the first round of a fresh node.

    cd benchmarks && python oneshot_http.py [--rounds 3] [--cold]
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

import trio
from providers_openai import Noop, one_round, start_server

import condukt

LATENCY = 0.05
TARGETS = {1000: 0.5, 5000: 2.5}


async def oneshot_round(node: condukt.Node, url: str, n: int) -> tuple[float, float]:
    """``n`` concurrent ``condukt.run`` calls: (CPU seconds, makespan seconds)."""
    results: list[str] = []

    async def one() -> None:
        results.append(
            await condukt.run(
                "go", model="openai:bench", api_key="k", base_url=url, tools=[Noop], node=node, timeout=600
            )
        )

    cpu = time.process_time()
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(one)
    makespan = time.perf_counter() - start
    cpu = time.process_time() - cpu
    assert results == ["done"] * n, results[:3]
    return cpu, makespan


async def main(rounds: int, cold: bool) -> None:
    process, url = start_server()
    rows = []
    try:
        if cold:
            for n in (1000, 5000):
                async with condukt.open_node() as node:
                    cpu, makespan = await oneshot_round(node, url, n)
                rows.append(f"cold node   N={n:<5} one-shot       client CPU/run {cpu / n * 1e3:6.3f} ms   makespan {makespan:6.3f} s")
        async with condukt.open_node() as node:
            await oneshot_round(node, url, 1000)  # warm-up: connections, imports, caches
            for n in (1000, 5000):
                best = {"one-shot": (float("inf"), float("inf")), "spawned first": (float("inf"), float("inf"))}
                for round in range(rounds):
                    order = ["one-shot", "spawned first"] if round % 2 == 0 else ["spawned first", "one-shot"]
                    for label in order:
                        if label == "one-shot":
                            cpu, makespan = await oneshot_round(node, url, n)
                        else:
                            cpu, makespan = await one_round(node, url, n, False, {}, 600)
                        best[label] = (min(best[label][0], cpu), min(best[label][1], makespan))
                base = best["spawned first"][0]
                for label, (cpu, makespan) in best.items():
                    rows.append(
                        f"warm node   N={n:<5} {label:<14} client CPU/run {cpu / n * 1e3:6.3f} ms"
                        f" ({cpu / base:4.2f}x the spawned-first path)   makespan {makespan:6.3f} s"
                    )
                cpu, makespan = best["one-shot"]
                print(
                    f"N={n}: one-shot client CPU/run {cpu / n * 1e3:.3f} ms (target <= 0.5 ms),"
                    f" makespan {makespan:.3f} s (target <= {TARGETS[n]} s)"
                )
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)
    print(f"{datetime.date.today()}, condukt {condukt.__version__}, Python {sys.version.split()[0]}, trio {trio.__version__}")
    print(f"openai-format server in its own process, {LATENCY * 1000:.0f} ms per request; each run = 2 turns + 1 tool call;"
          f" default settings; best of {rounds}")
    for row in rows:
        print(row)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="rounds per row (best of)")
    parser.add_argument("--cold", action="store_true", help="also the first round of a fresh node")
    arguments = parser.parse_args()
    trio.run(main, arguments.rounds, arguments.cold)
