"""N concurrent agents against a local OpenAI-format server: client CPU per run and makespan.

Workload (issue 6): each run is 2 model turns and 1 tool call, against the
protocol server (condukt.testing.server) running in its own
process with 50 ms added to every request, so the ideal makespan is
2 x 50 ms = 100 ms. Measured for N = 100 and N = 1,000 agents, with and
without streaming. Agents are spawned before the clock starts; a warm-up
round opens the connections. Client CPU per run = this process's CPU time
during the runs / runs. For reference, two leading Python agent frameworks
spend 11-19 ms of client CPU per run on the same workload.

Issue 11's table: default settings (adaptive provider limits), N = 1,000
and N = 5,000, non-streaming and streaming, with condukt's TrioTransport and,
in the same run as the baseline, httpx's default transport (httpcore over
anyio, with condukt's pool size of 1,000 connections; N = 1,000 only),
rounds alternating between the two
(ABBA), best of ``--rounds``. With ``--codec``, the last rows repeat
N = 1,000 with the response parser condukt had before httptools (kept in
benchmarks/http_parse.py) and with today's, each in a fresh node,
alternating (ABBA), best of 6 each.

    cd benchmarks && python providers_openai.py [--rounds 3] [--codec] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import math
import pstats
import subprocess
import sys
import time
from typing import Any, ClassVar

import trio

import condukt

LATENCY = 0.05
IDEAL = 2 * LATENCY

ROUNDS = 3
#: The gen-0 threshold of the ``--gc`` rows (Python's default: 700).
TUNED_GEN0 = 50_000


class Noop(condukt.Tool):
    """The tool every run calls once."""

    name = "noop"
    description = "Does nothing"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def call(self, args: dict, context: condukt.ToolContext) -> str:
        return "ok"


def start_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "condukt.testing.server", "--quiet", "--latency", str(LATENCY)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()  # its first line: the base URL


#: True while ``one_round`` times its runs: ``--gc`` counts only the
#: collections inside that window (spawning, the explicit ``gc.collect()``
#: and stopping the agents are not in the CPU figure either).
TIMED = [False]


async def one_round(
    node: condukt.Node,
    url: str,
    n: int,
    stream: bool,
    limits: dict[str, Any] | None = None,
    run_timeout: float = 60,
    tuned_gc: bool = False,
) -> tuple[float, float]:
    """Spawn n agents, then time their runs: (CPU seconds, makespan seconds).

    ``limits``: the provider-limit model options (default: no concurrency limit).
    ``tuned_gc``: what docs/providers.md suggests for thousands of agents
    (``gc.freeze()`` once they are started, a gen-0 threshold of 50,000),
    undone after the round.
    """
    agents = [
        await node.spawn(
            condukt.Agent,
            model="openai:bench",
            api_key="k",
            base_url=url,
            tools=[Noop],
            model_options={"stream": stream, **({"max_concurrency": None} if limits is None else limits)},
        )
        for _ in range(n)
    ]
    gc.collect()
    thresholds = gc.get_threshold()
    if tuned_gc:
        gc.freeze()
        gc.set_threshold(TUNED_GEN0)
    results: list[str] = []

    async def run(agent: condukt.AgentHandle) -> None:
        results.append(await agent.run("go", timeout=run_timeout))

    cpu = time.process_time()
    start = time.perf_counter()
    TIMED[0] = True
    try:
        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(run, agent)
    finally:
        TIMED[0] = False
    makespan = time.perf_counter() - start
    cpu = time.process_time() - cpu
    if tuned_gc:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    assert results == ["done"] * n, results[:3]
    for agent in agents:
        await agent.stop()
    return cpu, makespan


async def codec_rows(url: str) -> list[str]:
    """N = 1,000 with the old hand-written response codec and with httptools, fresh node each, alternating (ABBA)."""
    from http_parse import OldResponseReader

    from condukt.providers._http import transport as _transport

    today = _transport.ResponseReader
    rows = []
    for stream in (False, True):
        best: dict[str, float] = {}
        pair: list[tuple[str, type]] = [("old codec", OldResponseReader), ("httptools", today)]
        for round in range(2 * ROUNDS):
            # ABBA order: the second node of a pair runs after the first one's teardown.
            for label, reader in pair if round % 2 == 0 else pair[::-1]:
                _transport.ResponseReader = reader  # type: ignore[misc]
                try:
                    async with condukt.open_node() as node:
                        await one_round(node, url, 1000, stream)  # warm-up: connections
                        cpu, _ = await one_round(node, url, 1000, stream)
                finally:
                    _transport.ResponseReader = today  # type: ignore[misc]
                best[label] = min(best.get(label, float("inf")), cpu / 1000 * 1000)
        kind = "streaming" if stream else "non-streaming"
        rows.append(
            f"{kind:>13} N=1000  client CPU/run: old codec {best['old codec']:6.3f} ms, httptools {best['httptools']:6.3f} ms"
            f" = {best['old codec'] / best['httptools']:4.2f}x"
        )
    return rows


async def gc_rows(url: str, rounds: int) -> list[str]:
    """Default GC against the tuning docs/providers.md suggests, same node, rounds alternating (ABBA), best of ``rounds``.

    Also the share of the client CPU spent in collections (``gc.callbacks``) under each.
    """
    spent = [0.0, 0.0]

    def timer(phase: str, info: dict[str, int]) -> None:
        if not TIMED[0]:
            spent[1] = math.nan  # a collection outside the timed runs: not counted
        elif phase == "start":
            spent[1] = time.process_time()
        elif spent[1] == spent[1]:  # not NaN: it started inside the window
            spent[0] += time.process_time() - spent[1]

    rows = []
    gc.callbacks.append(timer)
    try:
        async with condukt.open_node() as node:
            await one_round(node, url, 1000, False, {}, 600)  # warm-up
            for stream, n in ((False, 1000), (True, 1000), (False, 5000)):
                best: dict[bool, tuple[float, float, float]] = {}
                for round in range(rounds):
                    for tuned in (False, True) if round % 2 == 0 else (True, False):
                        spent[0] = 0.0
                        cpu, makespan = await one_round(node, url, n, stream, {}, 600, tuned_gc=tuned)
                        old = best.get(tuned, (math.inf, math.inf, 0.0))
                        share = spent[0] / cpu if cpu < old[0] else old[2]
                        best[tuned] = (min(old[0], cpu), min(old[1], makespan), share)
                kind = "streaming" if stream else "non-streaming"
                for tuned, (cpu, makespan, share) in best.items():
                    label = f"gc.freeze()+gen0 {TUNED_GEN0:,}" if tuned else "default GC"
                    rows.append(
                        f"{kind:>13} N={n:<5} {label:<25} client CPU/run {cpu / n * 1000:6.3f} ms"
                        f" (in GC: {share * 100:3.0f}%)   makespan {makespan:6.3f} s"
                    )
    finally:
        gc.callbacks.remove(timer)
    return rows


async def path_rows(url: str, rounds: int) -> list[str]:
    """The providers' request path: through httpx's Request and Response objects (before issue 11's
    second pass) and through ``TrioTransport.exchange`` (today), same node, alternating (ABBA), best of ``rounds``."""
    from condukt.providers._http import model as _http_model

    today = _http_model.TrioTransport

    class Never:
        """Matches no transport: the model takes its httpx path."""

    rows = []
    async with condukt.open_node() as node:
        await one_round(node, url, 1000, False, {}, 600)  # warm-up
        for stream in (False, True):
            best: dict[str, float] = {}
            for round in range(2 * rounds):
                pair = ("httpx objects", "exchange")
                for label in pair if round % 2 == 0 else pair[::-1]:
                    _http_model.TrioTransport = Never if label == "httpx objects" else today  # type: ignore[misc]
                    try:
                        cpu, _ = await one_round(node, url, 1000, stream, {}, 600)
                    finally:
                        _http_model.TrioTransport = today  # type: ignore[misc]
                    best[label] = min(best.get(label, math.inf), cpu)
            kind = "streaming" if stream else "non-streaming"
            rows.append(
                f"{kind:>13} N=1000  client CPU/run: httpx Request/Response {best['httpx objects']:6.3f} ms,"
                f" TrioTransport.exchange {best['exchange']:6.3f} ms = {best['httpx objects'] / best['exchange']:4.2f}x"
            )
    return rows


async def main(
    profile: bool, codec: bool, rounds: int, gc_tuning: bool = False, only_extra: bool = False, paths: bool = False
) -> None:
    """Issue 11's table: default settings, N = 1,000 and 5,000, both modes, condukt's transport and httpx's default."""
    import datetime

    import httpcore
    import httptools
    import httpx

    POOL = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)  # noqa: N806

    process, base = start_server()
    url = f"{base}/v1"
    rows: list[str] = []
    transports: list[tuple[str, Any]] = [
        ("TrioTransport (condukt)", None),
        # What ``httpx.AsyncClient()`` sends through (httpcore over anyio), with condukt's pool size:
        # with httpx's default of 100 connections, 1,000 queued requests time out after 60 s (its pool
        # scans every waiting request against every connection whenever one frees up).
        ("httpx default (httpcore)", lambda: httpx.AsyncHTTPTransport(limits=POOL)),
    ]
    try:
        if not only_extra:
            async with condukt.open_node() as ours, condukt.open_node() as theirs:
                nodes = {}
                for (label, factory), node in zip(transports, (ours, theirs), strict=True):
                    if factory is not None:
                        condukt.providers.configure_http(node, transport=factory())
                    nodes[label] = node
                    await one_round(node, url, 1000, False, {}, 600)  # warm-up: connections, imports, caches
                for stream in (False, True):
                    for n in (1000, 5000):
                        # httpcore only at N = 1,000: with 5,000 runs its per-request cost grows with
                        # the requests waiting for a connection, and one round takes minutes.
                        running = {label: node for label, node in nodes.items() if n <= 1000 or label.startswith("Trio")}
                        best = {label: (float("inf"), float("inf")) for label in running}
                        for round in range(rounds):
                            order = list(running.items()) if round % 2 == 0 else list(running.items())[::-1]
                            for label, node in order:  # ABBA: neither side always runs second
                                profiler = cProfile.Profile() if profile and label.startswith("Trio") else None
                                if profiler:
                                    profiler.enable()
                                cpu, makespan = await one_round(node, url, n, stream, {}, 600)
                                if profiler:
                                    profiler.disable()
                                    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
                                best[label] = (min(best[label][0], cpu), min(best[label][1], makespan))
                        kind = "streaming" if stream else "non-streaming"
                        base = best.get(transports[1][0], (math.nan, math.nan))[0]
                        for label, (cpu, makespan) in best.items():
                            rows.append(
                                f"{kind:>13} N={n:<5} {label:<25} client CPU/run {cpu / n * 1000:6.3f} ms"
                                f" (httpx's / this: {base / cpu:5.2f}x)   makespan {makespan:6.3f} s"
                            )
        if codec:
            rows.extend(await codec_rows(url))
        if paths:
            rows.extend(await path_rows(url, rounds))
        if gc_tuning:
            rows.extend(await gc_rows(url, rounds))
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)
    print(
        f"{datetime.date.today()}, condukt {condukt.__version__}, Python {sys.version.split()[0]}, trio {trio.__version__},"
        f" httpx {httpx.__version__}, httpcore {httpcore.__version__}, httptools {httptools.__version__}"
    )
    print(
        f"openai-format server in its own process, {LATENCY * 1000:.0f} ms per request; each run = 2 turns + 1 tool call;"
        f" default settings (adaptive provider limits); best of {rounds}"
    )
    print("peers' reference on this workload: 11-19 ms client CPU/run; N=100 in 1.1-1.6 s, N=1000 in 16-23 s")
    for row in rows:
        print(row)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", action="store_true", help="print a cProfile of condukt's transport rounds")
    parser.add_argument("--codec", action="store_true", help="also the old codec vs httptools rows (slow)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per row (best of)")
    parser.add_argument("--gc", action="store_true", help="also default GC against gc.freeze() + a larger gen-0 threshold")
    parser.add_argument("--paths", action="store_true", help="also httpx Request/Response against TrioTransport.exchange")
    parser.add_argument("--no-table", action="store_true", help="only the extra rows asked for")
    arguments = parser.parse_args()
    trio.run(
        main, arguments.profile, arguments.codec, arguments.rounds, arguments.gc, arguments.no_table, arguments.paths
    )
