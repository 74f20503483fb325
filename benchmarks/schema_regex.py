"""Regexes of an untrusted schema: RE2 against Python's re, and what running re off the loop would give.

    python benchmarks/schema_regex.py

Why condukt.schema runs an untrusted schema's regexes on RE2 (google-re2)
rather than on Python's ``re`` in a worker with a deadline, measured in one
process:

1. A backtracking pattern (``^(a+)+$``) against ``"a" * n + "!"`` in ``re``:
   seconds per call, doubling with each character; the same in RE2.
2. ``re`` in a worker *thread*: does the trio thread stay free? A ticker
   thread sleeping 10 ms at a time counts its ticks while the main thread
   matches (``re`` holds the GIL while it matches, so a thread gives no
   relief: the ticker gets almost none of its ticks).
3. ``re`` in a worker *process* with a deadline (trio-parallel, killable):
   the cost of one validation round trip, against an in-process match.
4. Ordinary patterns: a tool-like pattern on a 40-character value through
   ``Schema.is_valid``, trusted (``re``) against untrusted (RE2).
"""

from __future__ import annotations

import datetime
import re
import sys
import threading
import time

import trio

from condukt.schema import Schema

EVIL = "^(a+)+$"


def per_call(fn, repeat: int = 2000) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def backtracking() -> None:
    import re2

    print("1. ^(a+)+$ against 'a' * n + '!' (one call)")
    for n in (18, 20, 22):
        text = "a" * n + "!"
        start = time.perf_counter()
        re.search(EVIL, text)
        slow = time.perf_counter() - start
        fast = per_call(lambda text=text: re2.search(EVIL, text), 200)
        print(f"   n={n}: re {slow * 1e3:9.1f} ms   RE2 {fast * 1e6:6.1f} µs   ratio {slow / fast:12,.0f}x")
    long_text = "a" * 100_000 + "!"
    print(f"   n=100,000 in RE2: {per_call(lambda: re2.search(EVIL, long_text), 20) * 1e3:.2f} ms (linear)")


def thread_relief() -> None:
    print("2. re in the main thread, a ticker thread sleeping 10 ms at a time")
    ticks = 0
    stop = False

    def ticker() -> None:
        nonlocal ticks
        while not stop:
            time.sleep(0.01)
            ticks += 1

    thread = threading.Thread(target=ticker)
    thread.start()
    start = time.perf_counter()
    re.search(EVIL, "a" * 23 + "!")
    elapsed = time.perf_counter() - start
    stop = True
    thread.join()
    expected = int(elapsed / 0.01)
    print(f"   a {elapsed:.2f} s match: the other thread ticked {ticks} times of {expected} "
          f"({ticks / max(expected, 1):.0%}): a worker thread would starve the trio thread the same way")


def matches(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


def process_round_trip() -> None:
    try:
        import trio_parallel
    except ImportError:
        print("3. (trio-parallel not installed: pip install 'condukt[process]')")
        return
    print("3. re in a killable worker process (trio-parallel), per validation")

    async def main() -> tuple[float, float]:
        await trio_parallel.run_sync(matches, "^[a-z]+$", "warm")  # the worker starts once
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(200):
                with trio.move_on_after(1.0):
                    await trio_parallel.run_sync(matches, "^[a-z0-9-]+$", "a-tool-argument-of-some-length-1234")
            best = min(best, (time.perf_counter() - start) / 200)
        local = per_call(lambda: re.search("^[a-z0-9-]+$", "a-tool-argument-of-some-length-1234"))
        return best, local

    remote, local = trio.run(main)
    print(f"   worker process {remote * 1e6:8.1f} µs   in process {local * 1e6:5.2f} µs   ratio {remote / local:,.0f}x")


def ordinary() -> None:
    print("4. Schema.is_valid with a pattern, trusted (re) and untrusted (RE2)")
    spec = {"type": "object", "properties": {"slug": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"}}}
    value = {"slug": "a-tool-argument-of-some-length-1234"}
    trusted, untrusted = Schema.of(spec), Schema.of(spec, untrusted=True)
    assert trusted.is_valid(value) and untrusted.is_valid(value)
    a, b = per_call(lambda: trusted.is_valid(value)), per_call(lambda: untrusted.is_valid(value))
    print(f"   trusted {a * 1e6:6.1f} µs   untrusted {b * 1e6:6.1f} µs   ratio {b / a:.2f}x")
    bad = {"slug": "Not A Slug"}
    a, b = per_call(lambda: trusted.errors(bad), 500), per_call(lambda: untrusted.errors(bad), 500)
    print(f"   errors: trusted {a * 1e6:6.1f} µs   untrusted {b * 1e6:6.1f} µs   ratio {b / a:.2f}x")


def main() -> None:
    import re2  # noqa: F401 - fail early: the point of the benchmark

    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, Python {sys.version.split()[0]}")
    backtracking()
    thread_relief()
    process_round_trip()
    ordinary()


if __name__ == "__main__":
    main()
