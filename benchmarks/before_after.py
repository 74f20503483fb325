"""Before/after a change: a benchmark script run on two source trees, alternately, in one session.

Each round runs the script once on the baseline tree and once on this one
(``PYTHONPATH=<tree>/src``, a fresh interpreter each time), in alternating
order so that a machine that gets busier or quieter during the session
weighs on both alike. Prints, per figure the script reports, the median of
each side and their ratio (after / before): a ratio within the rounds'
spread is noise.

    git worktree add /tmp/baseline main
    python benchmarks/before_after.py /tmp/baseline [rounds] [script and its arguments]

The default script is ``agent_loop.py 2000`` (2,000 idle agents instead of
100,000: the per-agent figures hold, and a round takes minutes, not ten).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROW = re.compile(r"^  (?P<name>\S.*?)\s{2,}(?P<value>-?[\d.]+) (?P<unit>\S+)$")


def figures(tree: Path, script: list[str]) -> dict[str, tuple[float, str]]:
    """The rows ``script`` reports when it imports condukt from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run([sys.executable, str(HERE / script[0]), *script[1:]], env=env, capture_output=True,
                          text=True, check=True)
    rows = {}
    for line in done.stdout.splitlines():
        match = ROW.match(line)
        if match:
            rows[match["name"]] = (float(match["value"]), match["unit"])
    return rows


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    before_tree = Path(sys.argv[1]).resolve()
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    script = sys.argv[3:] or ["agent_loop.py", "2000"]
    after_tree = HERE.parent
    before: dict[str, list[float]] = {}
    after: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    for n in range(rounds):
        order = [(before_tree, before), (after_tree, after)]
        if n % 2:
            order.reverse()
        for tree, into in order:
            for name, (value, unit) in figures(tree, script).items():
                into.setdefault(name, []).append(value)
                units[name] = unit
        print(f"round {n + 1}/{rounds} done", file=sys.stderr)
    width = max(len(name) for name in units)
    print(f"  {'figure':<{width}}  {'before':>12} {'after':>12}  after/before  (medians of {rounds} rounds)")
    for name, unit in units.items():
        b, a = statistics.median(before[name]), statistics.median(after[name])
        spread = max(before[name]) / min(before[name]) if min(before[name]) > 0 else float("nan")
        print(f"  {name:<{width}}  {b:10.2f} {unit:<2} {a:10.2f} {unit:<2}  {a / b if b else float('nan'):.3f}"
              f"  (before's own spread {spread:.2f}x)")


if __name__ == "__main__":
    main()
