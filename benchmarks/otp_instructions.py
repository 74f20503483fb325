"""A fixed OTP workload to count instructions with callgrind: the measure load cannot move.

Spawns N servers under a dynamic supervisor, makes N calls and N casts into
one of them, and stops them all. Run it at two sizes under callgrind and
divide the difference by the difference of N: that is the cost of one unit
of the work (one spawn, one call, one cast, one stop), with start-up costs
cancelled out. Compare two checkouts by pointing ``PYTHONPATH`` at each one's
``src``::

    for n in 500 2500; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.$n python benchmarks/otp_instructions.py $n
    done
    # per unit = (total of cg.2500 - total of cg.500) / 2000   ("totals:" line of each file)

Wall-clock benchmarks (``otp_call.py``, ``otp_spawn.py``) vary with what
else runs on the machine; instruction counts do not.
"""

from __future__ import annotations

import sys

import trio

import condukt

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500


class Echo(condukt.Server):
    async def handle_call(self, request, caller):
        return request

    async def handle_cast(self, message):
        pass


async def main() -> None:
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        spec = condukt.ChildSpec(None, Echo, restart="temporary")
        handles = [await dyn.start_child(spec) for _ in range(N)]
        target = handles[0]
        for i in range(N):
            await target.call(i)
        for i in range(N):
            await target.cast(i)
        for handle in handles:
            await handle.stop()


if __name__ == "__main__":
    trio.run(main)
