"""Default provider limits at scale: N concurrent runs against a 50 ms server, adaptive vs fixed 64.

    python benchmarks/provider_limits.py

Same workload as providers_openai.py (2 model turns + 1 tool call per run,
the protocol server in its own process with 50 ms per request, so the ideal
makespan is 100 ms), non-streaming, with the limits left at their default
(adaptive since issue 11) and, in the same run, with the old fixed default
of 64 requests in flight and with no limit. Makespan per N, best of 3.
"""

from __future__ import annotations

import datetime
import sys

import trio
from providers_openai import LATENCY, one_round, start_server

import condukt

ROUNDS = 3


async def makespan(node: condukt.Node, url: str, n: int, options: dict[str, object]) -> float:
    """Seconds for n runs at once (agents spawned first), with these provider-limit options."""
    _, took = await one_round(node, url, n, False, options)
    return took


async def main() -> None:
    process, port = start_server()
    url = f"http://127.0.0.1:{port}/v1"
    print(f"provider limits, {datetime.date.today()}, condukt {condukt.__version__}, Python {sys.version.split()[0]}")
    print(f"openai-format server in its own process, {LATENCY * 1000:.0f} ms per request; each run = 2 turns + 1 tool")
    try:
        async with condukt.open_node() as node:
            await makespan(node, url, 500, {})  # warm-up: connections, imports
            for n in (1000, 5000):
                row = {}
                for label, options in (
                    ("default (adaptive)", {}),
                    ("fixed 64 (the old default)", {"max_concurrency": 64}),
                    ("no limit", {"max_concurrency": None}),
                ):
                    best = min([await makespan(node, url, n, options) for _ in range(ROUNDS)])
                    row[label] = best
                    limits = condukt.providers.provider_limits(node, "openai", url)
                    if not options:
                        print(f"  (N={n}: the adaptive limit ended at {limits.concurrency:g})")
                    # Leave the shared limits as the next row expects them.
                    condukt.providers.provider_limits(node, "openai", url).configure(max_concurrency="adaptive")
                base = row["default (adaptive)"]
                for label, best in row.items():
                    print(f"  N={n:<5} {label:<28} makespan {best:6.2f} s   {best / base:5.2f}× the default")
    finally:
        process.kill()


if __name__ == "__main__":
    trio.run(main)
