"""Sandboxes and bounded tools: per-command cost, abort-to-gone latency, deadline overshoot.

    python benchmarks/sandboxes.py [N]

1. Cost of one command (``true``) per sandbox, against a bare
   ``trio.run_process`` in the same process (the baseline): ``Local(reap=False)``
   (process group only), ``Local()`` (the default: the subreaper launcher)
   and ``Bubblewrap()`` (when ``bwrap`` runs here).
2. Abort-to-gone: a ``bash`` command that started ``setsid sleep`` and
   ``sleep`` is cancelled; the time until no process of it is left (polled
   in /proc), per sandbox. Target: 50 ms.
3. Deadline overshoot of the built-in tools (target 50 ms): each is called
   under a 0.2 s deadline on work that would take much longer (a 1 GiB
   file for ``read``, a catastrophic regex for ``grep``, ``sleep`` for
   ``bash``); the figure is the time it returned after the deadline.
4. ``grep`` on a small tree: the worker process against the same search in
   a thread of this process (what ``grep`` did before it had to be killable).
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio

import condukt
from condukt.sandbox import Bubblewrap, Local, Sandbox


def processes_with(marker: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        count += 1
            except OSError:
                pass
    return count


async def per_command(sandbox: Sandbox | None, n: int, cwd: Path) -> float:
    """Seconds per ``true`` run through ``sandbox`` (``None``: bare trio.run_process)."""
    env = Local().environment()
    start = time.perf_counter()
    for _ in range(n):
        if sandbox is None:
            await trio.run_process(["true"], cwd=cwd, env=env)
        else:
            await sandbox.run(["true"], cwd=cwd, env=env, timeout=10)
    return (time.perf_counter() - start) / n


async def abort_to_gone(sandbox: Sandbox, cwd: Path) -> float:
    marker = f"{1000 + uuid.uuid4().int % 9000}.{uuid.uuid4().int % 1000:03d}"
    command = f"setsid sleep {marker} >/dev/null 2>&1 </dev/null & sleep {marker}"
    cancelled_at = 0.0
    with trio.CancelScope() as scope:

        async def cancel_when_started() -> None:
            nonlocal cancelled_at
            while processes_with(f"sleep {marker}") < 2:
                await trio.sleep(0.002)
            cancelled_at = time.perf_counter()
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_when_started)
            await sandbox.run(["bash", "-c", command], cwd=cwd, env=sandbox.environment(), timeout=60)
    while processes_with(f"sleep {marker}"):
        await trio.sleep(0.001)
    return time.perf_counter() - cancelled_at


async def overshoot(tool: condukt.Tool, args: dict[str, Any], cwd: Path, deadline: float = 0.2) -> float:
    context = condukt.ToolContext(agent=None, cwd=cwd, opts=tool.opts)
    start = time.perf_counter()
    with trio.move_on_after(deadline):
        await tool.call(args, context)
    return time.perf_counter() - start - deadline


def thread_grep(root: Path, pattern: str) -> list[str]:
    regex = re.compile(pattern)
    found = []
    for directory, _, names in os.walk(root):
        for name in sorted(names):
            path = Path(directory, name)
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if regex.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line}")
    return found


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    bwrap = shutil.which("bwrap") is not None and Bubblewrap.available()
    print(f"sandboxes, {datetime.date.today()}, Python {sys.version.split()[0]}, trio {trio.__version__}")
    with tempfile.TemporaryDirectory() as name:
        cwd = Path(name)
        sandboxes: list[tuple[str, Sandbox]] = [("Local(reap=False)", Local(reap=False)), ("Local()", Local())]
        if bwrap:
            sandboxes.append(("Bubblewrap()", Bubblewrap()))
        else:
            print("  (bwrap is not available here: Bubblewrap rows skipped)")

        print(f"\n1. one command (`true`), {n} runs each")
        await per_command(None, 10, cwd)
        base = await per_command(None, n, cwd)
        print(f"  {'trio.run_process (baseline)':<28} {base * 1e6:9.0f} µs   1.00×")
        for label, sandbox in sandboxes:
            await per_command(sandbox, 5, cwd)
            cost = await per_command(sandbox, n, cwd)
            print(f"  {label:<28} {cost * 1e6:9.0f} µs   {cost / base:.2f}×")

        print("\n2. abort to gone (bash with a setsid child), best and worst of 10")
        for label, sandbox in sandboxes:
            if label.startswith("Local(reap=False)"):
                continue  # the setsid child survives by design there
            times = [await abort_to_gone(sandbox, cwd) for _ in range(10)]
            print(f"  {label:<28} {min(times) * 1e3:6.1f} ms .. {max(times) * 1e3:6.1f} ms")

        print("\n3. deadline overshoot under a 0.2 s deadline, worst of 5")
        big = cwd / "big.log"
        with open(big, "wb") as handle:
            handle.write(b"line\n" * 4000)
            handle.truncate(2**30)
        (cwd / "a.txt").write_text("a" * 40 + "!\n")
        cases = [
            ("read (1 GiB file)", condukt.tools.Read(), {"path": "big.log"}),
            ("grep ((a+)+$)", condukt.tools.Grep(), {"pattern": "(a+)+$", "path": "a.txt"}),
            ("bash (sleep 10)", condukt.tools.Bash(), {"command": "sleep 10"}),
        ]
        for label, tool, args in cases:
            worst = max([await overshoot(tool, args, cwd) for _ in range(5)])
            print(f"  {label:<28} {worst * 1e3:6.1f} ms")

        print("\n4. grep on a small tree (50 files x 200 lines), per call")
        tree = cwd / "tree"
        for i in range(50):
            (tree / f"d{i % 5}").mkdir(parents=True, exist_ok=True)
            (tree / f"d{i % 5}" / f"f{i}.py").write_text("".join(f"def f{j}(): return {j}\n" for j in range(200)))
        context = condukt.ToolContext(agent=None, cwd=tree, opts={})
        grep = condukt.tools.Grep()
        rounds = max(10, n // 10)
        start = time.perf_counter()
        for _ in range(rounds):
            await trio.to_thread.run_sync(thread_grep, tree, r"return 1\d\d$")
        thread = (time.perf_counter() - start) / rounds
        start = time.perf_counter()
        for _ in range(rounds):
            await grep.call({"pattern": r"return 1\d\d$", "limit": 100000}, context)
        worker = (time.perf_counter() - start) / rounds
        print(f"  {'in a thread (baseline)':<28} {thread * 1e3:6.1f} ms   1.00×")
        print(f"  {'grep tool (worker process)':<28} {worker * 1e3:6.1f} ms   {worker / thread:.2f}×")


if __name__ == "__main__":
    trio.run(main)
