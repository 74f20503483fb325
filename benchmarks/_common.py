"""Shared helpers for the benchmarks: timing, memory and reporting."""

from __future__ import annotations

import gc
import os
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio


def rss_kb() -> int:
    """Current resident set size in KiB (Linux), else the peak."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def best_of(repeat: int, fn: Callable[[], Awaitable[float]]) -> float:
    """The smallest of ``repeat`` measurements (each returns seconds)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        best = min(best, await fn())
    return best


def timed(fn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[float]]:
    async def run() -> float:
        start = time.perf_counter()
        await fn()
        return time.perf_counter() - start

    return run


def report(rows: list[tuple[str, float, str]]) -> None:
    width = max(len(name) for name, _, _ in rows)
    for name, value, unit in rows:
        print(f"  {name:<{width}}  {value:12.2f} {unit}")


def run(main: Callable[[], Awaitable[None]]) -> None:
    trio.run(main)
