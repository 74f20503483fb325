"""The small measured choices the code's comments point to, each against the alternative, in one run.

Comments in ``src/`` say why a choice was made and name this script; the
figures live here and in docs/benchmarks.md ("Figures behind code comments").

1. Import costs (``python -X importtime``, a fresh interpreter per import,
   best of 7): ``_signal`` against ``signal`` (which imports enum) and
   ``_ctypes`` against ``ctypes`` (the sandbox launcher, ``sandbox/_reaper.py``);
   ``typing`` (the search helper, ``tools/_scan.py``, imports it only for
   type checkers).
2. Whether an idle pooled connection has something to read
   (``providers/_http/transport.py``): ``select.poll`` on the descriptor,
   against ``select.select`` and against ``recv(MSG_PEEK)`` on a second
   socket object made for the check.
3. Memory of an empty deque against the shared empty tuple an agent's run
   queue starts as (``agent/_lifecycle.py``).

    python benchmarks/code_choices.py
"""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable

from condukt.providers._http.transport import _readable

CHECKS = 100_000


def import_us(module: str) -> float:
    """Cumulative microseconds of ``import module`` in a fresh interpreter (best of 7)."""
    best = float("inf")
    for _ in range(7):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
        )
        for line in done.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)$", line)
            if match and match.group(2) == module:
                best = min(best, float(match.group(1)))
    return best


def per_check_us(check: Callable[[int], object], fd: int) -> float:
    """Microseconds per ``check(fd)``, best of 5 rounds of CHECKS."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(CHECKS):
            check(fd)
        best = min(best, (time.perf_counter() - start) / CHECKS * 1e6)
    return best


def _select(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def _peek(fd: int) -> bool:
    sock = socket.socket(fileno=os.dup(fd))
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        return True
    except BlockingIOError:
        return False
    finally:
        sock.close()


def main() -> None:
    print("imports (python -X importtime, cumulative, best of 7):")
    for cheap, dear in (("_signal", "signal"), ("_ctypes", "ctypes")):
        a, b = import_us(cheap), import_us(dear)
        print(f"  import {cheap:<8} {a / 1e3:6.2f} ms   import {dear:<7} {b / 1e3:6.2f} ms   saved {(b - a) / 1e3:5.2f} ms")
    print(f"  import typing   {import_us('typing') / 1e3:6.2f} ms")

    left, right = socket.socketpair()
    with left, right:
        fd = left.fileno()
        poll, plain, peek = (per_check_us(check, fd) for check in (_readable, _select, _peek))
        print(f"idle connection check: select.poll {poll:.2f} µs   select.select {plain:.2f} µs ({plain / poll:.2f}x)"
              f"   recv(MSG_PEEK) on a new socket {peek:.2f} µs ({peek / poll:.2f}x)")

    print(f"empty deque: {sys.getsizeof(deque())} bytes; the shared empty tuple: {sys.getsizeof(())} bytes (one per process)")


if __name__ == "__main__":
    main()
